//! Tests of the GCRA math: the decision table, edge cases of every parameter, overflow and
//! expiry bounds, and properties over random inputs.

use super::*;
use proptest::prelude::*;

/// The clock origin of the test vectors: 1 700 000 000 000 ms since the epoch,
/// a whole second.
const S: i64 = 1_700_000_000_000 * NANOS_PER_MS;

/// `S + t` for `t` in milliseconds.
fn ms(t: i64) -> i64 {
    S + t * NANOS_PER_MS
}

/// `S + t` for `t` in microseconds.
fn us(t: i64) -> i64 {
    S + t * NANOS_PER_US
}

/// Parses a space-separated argument string, e.g. `"15 30 60 1"`.
fn args(text: &str) -> ThrottleArgs {
    let words: Vec<&[u8]> = text.split(' ').map(str::as_bytes).collect();
    ThrottleArgs::parse(&words).expect("valid arguments")
}

/// Parses all arguments after the command name, split on spaces.
fn command(text: &str) -> Result<ThrottleArgs, ThrottleError> {
    let words: Vec<&[u8]> = if text.is_empty() {
        Vec::new()
    } else {
        text.split(' ').map(str::as_bytes).collect()
    };
    parse_command(&words).map(|(_, args)| args)
}

/// A single Redis key with Redis expiry semantics. It holds the value as
/// text (read back through `parse_stored_tat`) and the absolute expiry in
/// ms. The key is gone once `now_ms > expire_at_ms`.
#[derive(Default)]
struct Key {
    value: Option<(Vec<u8>, Option<i64>)>,
}

impl Key {
    /// A key that holds `text` with no TTL, as after `SET k text`.
    fn set(text: &str) -> Self {
        Self {
            value: Some((text.as_bytes().to_vec(), None)),
        }
    }

    fn expire_if_due(&mut self, now_ns: i64) {
        let now_ms = now_ns.div_euclid(NANOS_PER_MS);
        if let Some((_, Some(expire_at_ms))) = self.value
            && now_ms > expire_at_ms
        {
            self.value = None;
        }
    }

    /// One CL.THROTTLE call at `now_ns`, applying the write.
    fn call(&mut self, now_ns: i64, args: &ThrottleArgs) -> Result<Decision, ThrottleError> {
        self.expire_if_due(now_ns);
        let stored = match &self.value {
            Some((text, _)) => Some(parse_stored_tat(text)?),
            None => None,
        };
        let decision = throttle(now_ns, stored, args)?;
        if let Some((tat, ttl_ms)) = decision.write {
            let now_ms = now_ns.div_euclid(NANOS_PER_MS);
            let expire_at_ms = now_ms + i64::try_from(ttl_ms).expect("small ttl");
            self.value = Some((tat.to_string().into_bytes(), Some(expire_at_ms)));
        }
        Ok(decision)
    }

    /// The reply of a call that must succeed.
    fn reply(&mut self, now_ns: i64, args_text: &str) -> [i64; 5] {
        self.call(now_ns, &args(args_text))
            .expect("call succeeds")
            .reply()
    }

    /// `(TAT - S in ms, PTTL in ms)` as seen at `now_ns`, like `GET`
    /// and `PTTL`. `None` if the key does not exist.
    fn state(&mut self, now_ns: i64) -> Option<(i64, Option<i64>)> {
        self.expire_if_due(now_ns);
        self.value.as_ref().map(|(text, expire_at_ms)| {
            let tat = parse_stored_tat(text).expect("stored TAT");
            let pttl = expire_at_ms.map(|at| at - now_ns.div_euclid(NANOS_PER_MS));
            ((tat - S).div_euclid(NANOS_PER_MS), pttl)
        })
    }

    fn tat(&self) -> Option<i64> {
        self.value
            .as_ref()
            .map(|(text, _)| parse_stored_tat(text).expect("stored TAT"))
    }
}

const USAGE: &str = "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]";
const ZERO: &str = "Cell error: Store error: Zero rates are not supported";
const EXPIRE: &str = "Cell error: Store error: Error while setting key expire";
const RANGE: &str = "ERR value is not an integer or out of range";

// ---- G1: redis-cell's unit test as commands (`foo 4 1 1 <q>`) ----

#[test]
fn g1_redis_cell_unit_test() {
    let mut key = Key::default();
    let a = |q: i64| format!("4 1 1 {q}");
    // (row, t ms, q, reply, state after: (TAT - S ms, PTTL) or None)
    type Row = (i64, i64, [i64; 5], Option<(i64, Option<i64>)>);
    let rows: [Row; 15] = [
        (0, 6, [1, 5, 5, -1, 0], None),
        (0, 1, [0, 5, 4, -1, 1], Some((1000, Some(1000)))),
        (0, 1, [0, 5, 3, -1, 2], Some((2000, Some(2000)))),
        (0, 1, [0, 5, 2, -1, 3], Some((3000, Some(3000)))),
        (0, 1, [0, 5, 1, -1, 4], Some((4000, Some(4000)))),
        (0, 1, [0, 5, 0, -1, 5], Some((5000, Some(5000)))),
        (0, 1, [1, 5, 0, 1, 5], Some((5000, Some(5000)))),
        (3000, 1, [0, 5, 2, -1, 3], Some((6000, Some(3000)))),
        (3100, 1, [0, 5, 1, -1, 4], Some((7000, Some(3900)))),
        (4000, 1, [0, 5, 1, -1, 4], Some((8000, Some(4000)))),
        (8000, 1, [0, 5, 4, -1, 1], Some((9000, Some(1000)))),
        (9500, 1, [0, 5, 4, -1, 1], Some((10500, Some(1000)))),
        (9500, 0, [0, 5, 4, -1, 1], Some((10500, Some(1000)))),
        (9500, 2, [0, 5, 2, -1, 3], Some((12500, Some(3000)))),
        (9500, 5, [1, 5, 2, 3, 3], Some((12500, Some(3000)))),
    ];
    for (row, (t, q, reply, state)) in rows.into_iter().enumerate() {
        let row = row + 1;
        assert_eq!(key.reply(ms(t), &a(q)), reply, "G1 row {row}");
        assert_eq!(key.state(ms(t)), state, "G1 row {row} state");
    }
}

#[test]
fn g1_row13_quantity_zero_rewrites_the_key() {
    let mut key = Key::default();
    for _ in 0..5 {
        key.reply(ms(0), "4 1 1 1");
    }
    key.reply(ms(3000), "4 1 1 1");
    key.reply(ms(3100), "4 1 1 1");
    key.reply(ms(4000), "4 1 1 1");
    key.reply(ms(8000), "4 1 1 1");
    key.reply(ms(9500), "4 1 1 1");
    let peek = key.call(ms(9500), &args("4 1 1 0")).unwrap();
    assert_eq!(peek.write, Some((ms(10500), 1000)));
}

// ---- G2: redis-cell README parameters (`15 30 60 <q>`) ----

#[test]
fn g2_readme_parameters() {
    let mut key = Key::default();
    let a = |q: i64| format!("15 30 60 {q}");
    assert_eq!(key.reply(ms(0), &a(1)), [0, 16, 15, -1, 2], "row 1");
    assert_eq!(key.state(ms(0)), Some((2000, Some(2000))), "row 1 PTTL");
    assert_eq!(key.reply(ms(0), &a(1)), [0, 16, 14, -1, 4], "row 2");
    for k in 3..=16 {
        assert_eq!(
            key.reply(ms(0), &a(1)),
            [0, 16, 16 - k, -1, 2 * k],
            "row {k}"
        );
    }
    assert_eq!(key.state(ms(0)), Some((32000, Some(32000))), "row 16 PTTL");
    assert_eq!(key.reply(ms(0), &a(1)), [1, 16, 0, 2, 32], "row 17");
    assert_eq!(key.reply(ms(0), &a(0)), [0, 16, 0, -1, 32], "row 18");
    assert_eq!(key.reply(ms(1000), &a(1)), [1, 16, 0, 1, 31], "row 19");
    assert_eq!(key.reply(ms(2000), &a(1)), [0, 16, 0, -1, 32], "row 20");
    assert_eq!(
        key.state(ms(2000)),
        Some((34000, Some(32000))),
        "row 20 TAT"
    );
    assert_eq!(key.reply(ms(2000), &a(16)), [1, 16, 0, 32, 32], "row 21");
    assert_eq!(key.reply(ms(2000), &a(17)), [1, 16, 0, -1, 32], "row 22");
    assert_eq!(key.reply(ms(10000), &a(0)), [0, 16, 4, -1, 24], "row 23");
    assert_eq!(key.state(ms(34000)), Some((34000, Some(0))), "still there");
    assert_eq!(key.state(ms(34001)), None, "expired at 34000");
    assert_eq!(key.reply(ms(40000), &a(1)), [0, 16, 15, -1, 2], "row 24");
}

/// The README example: 20 calls of `15 30 60 1` on a fresh key at the
/// same instant. 16 are allowed; calls 17-20 are limited.
#[test]
fn seed_example_twenty_calls() {
    let mut key = Key::default();
    let args = args("15 30 60 1");
    let replies: Vec<[i64; 5]> = (0..20)
        .map(|_| key.call(ms(0), &args).unwrap().reply())
        .collect();
    assert_eq!(replies[0], [0, 16, 15, -1, 2]);
    for (i, reply) in replies.iter().enumerate().take(16) {
        let k = i64::try_from(i).unwrap() + 1;
        assert_eq!(*reply, [0, 16, 16 - k, -1, 2 * k], "call {k}");
    }
    for reply in &replies[16..] {
        assert_eq!(*reply, [1, 16, 0, 2, 32]);
    }
    let allowed = replies.iter().filter(|r| r[0] == 0).count();
    assert_eq!(allowed, 16);
    assert_eq!(key.tat(), Some(ms(32000)));
}

// ---- G3: Dragonfly's sequence with redis-cell values (`4 1 10`) ----

#[test]
fn g3_dragonfly_sequence_redis_cell_values() {
    let mut key = Key::default();
    let a = |q: i64| format!("4 1 10 {q}");
    let rows: [(i64, i64, [i64; 5]); 15] = [
        (0, 6, [1, 5, 5, -1, 0]),
        (0, 1, [0, 5, 4, -1, 10]),
        (0, 1, [0, 5, 3, -1, 20]),
        (0, 1, [0, 5, 2, -1, 30]),
        (0, 1, [0, 5, 1, -1, 40]),
        (0, 1, [0, 5, 0, -1, 50]),
        (0, 1, [1, 5, 0, 10, 50]),
        (30000, 1, [0, 5, 2, -1, 30]),
        (31000, 1, [0, 5, 1, -1, 39]),
        (40000, 1, [0, 5, 1, -1, 40]),
        (80000, 1, [0, 5, 4, -1, 10]),
        (95000, 1, [0, 5, 4, -1, 10]),
        (95000, 0, [0, 5, 4, -1, 10]),
        (95000, 2, [0, 5, 2, -1, 30]),
        (95000, 5, [1, 5, 2, 30, 30]),
    ];
    for (row, (t, q, reply)) in rows.into_iter().enumerate() {
        assert_eq!(key.reply(ms(t), &a(q)), reply, "G3 row {}", row + 1);
    }
}

#[test]
fn g3_rows_16_17_zero_rates() {
    assert_eq!(command("bar 10 1 0"), Err(ThrottleError::ZeroRates));
    assert_eq!(command("bar 10 0 1"), Err(ThrottleError::ZeroRates));
    assert_eq!(ThrottleError::ZeroRates.to_string(), ZERO);
}

#[test]
fn g3_row18_sub_ms_reset_is_dropped() {
    let decision = throttle(ms(0), None, &args("4 500000 1 2")).unwrap();
    assert_eq!(decision.reply(), [0, 5, 3, -1, 0]);
    // ttl is 4 µs; decision 5 rounds the expiry up to 1 ms.
    assert_eq!(decision.write, Some((ms(0) + 4_000, 1)));
}

// ---- G4: rounding and fractional T ----

#[test]
fn g4_fractional_emission_interval() {
    let mut key = Key::default();
    assert_eq!(key.reply(ms(0), "2 3 1"), [0, 3, 2, -1, 1]);
    assert_eq!(key.reply(ms(0), "2 3 1"), [0, 3, 1, -1, 1]);
    let third = key.call(ms(0), &args("2 3 1")).unwrap();
    assert_eq!(third.reply(), [0, 3, 0, -1, 1]);
    // TAT + 999.999999 ms. redis-cell's PTTL is 999 (truncated); sluice
    // rounds up to 1000 (decision 5).
    assert_eq!(third.write, Some((ms(0) + 999_999_999, 1000)));
    assert_eq!(key.reply(ms(0), "2 3 1"), [1, 3, 0, 1, 1]);
}

#[test]
fn g4_sub_ms_remainder_is_dropped() {
    let mut key = Key::default();
    assert_eq!(key.reply(ms(0), "1 1 1"), [0, 2, 1, -1, 1]);
    // t = 999.5 ms: reset is 1.0005 s and the 0.5 ms is dropped.
    assert_eq!(key.reply(us(999_500), "1 1 1"), [0, 2, 0, -1, 1]);
}

#[test]
fn g4_e2e_max_burst_zero() {
    let mut key = Key::default();
    assert_eq!(key.reply(ms(0), "0 1 2"), [0, 1, 0, -1, 2]);
    assert_eq!(key.reply(ms(0), "0 1 2"), [1, 1, 0, 2, 2]);
    assert_eq!(key.reply(ms(2000), "0 1 2"), [0, 1, 0, -1, 2]);
}

// ---- G5: fresh-key specials (`15 30 60 <q>`) ----

#[test]
fn g5_fresh_quantity_zero() {
    let decision = throttle(ms(0), None, &args("15 30 60 0")).unwrap();
    assert_eq!(decision.reply(), [0, 16, 16, -1, 0]);
    assert_eq!(decision.write, Some((ms(0), 0)), "written with PTTL 0");
}

#[test]
fn g5_fresh_quantity_equal_to_limit() {
    let mut key = Key::default();
    let decision = key.call(ms(0), &args("15 30 60 16")).unwrap();
    assert_eq!(decision.reply(), [0, 16, 0, -1, 32]);
    assert_eq!(decision.write, Some((ms(32000), 32000)));
    assert_eq!(key.reply(ms(0), "15 30 60 1"), [1, 16, 0, 2, 32]);
}

#[test]
fn g5_fresh_quantity_above_limit() {
    let decision = throttle(ms(0), None, &args("15 30 60 17")).unwrap();
    assert_eq!(decision.reply(), [1, 16, 16, -1, 0]);
    assert_eq!(decision.write, None, "no key");
}

// ---- G6: errors ----

#[test]
fn g6_errors() {
    assert_eq!(command("k"), Err(ThrottleError::Usage));
    assert_eq!(command("k 1 2 3 4 5"), Err(ThrottleError::Usage));
    let err = command("k x 30 60 1").unwrap_err();
    assert_eq!(err, ThrottleError::InvalidInteger(b"x".to_vec()));
    assert_eq!(
        err.to_string(),
        "Cell error: Store error: Couldn't parse as integer: x"
    );
    let err = command("k 15 30 60 1.5").unwrap_err();
    assert_eq!(
        err.to_string(),
        "Cell error: Store error: Couldn't parse as integer: 1.5"
    );
    assert_eq!(command("k 10 0 60"), Err(ThrottleError::ZeroRates));
    assert_eq!(command("k 10 2000000000 1"), Err(ThrottleError::ZeroRates));
}

#[test]
fn usage_error_for_every_wrong_count() {
    for n in [0, 1, 2, 3, 6, 7, 20] {
        let words = vec![b"1".as_slice(); n];
        assert_eq!(parse_command(&words), Err(ThrottleError::Usage), "{n}");
    }
    for n in [0, 1, 2, 5, 6] {
        let words = vec![b"1".as_slice(); n];
        assert_eq!(
            ThrottleArgs::parse(&words),
            Err(ThrottleError::Usage),
            "{n}"
        );
    }
    // The count check comes before any parsing.
    assert_eq!(command("k x y z w v"), Err(ThrottleError::Usage));
    assert_eq!(ThrottleError::Usage.to_string(), USAGE);
}

#[test]
fn parse_command_returns_binary_key() {
    let words: [&[u8]; 5] = [b"\xff\xfek", b"15", b"30", b"60", b"2"];
    let (key, parsed) = parse_command(&words).unwrap();
    assert_eq!(key, b"\xff\xfek");
    assert_eq!(
        parsed,
        ThrottleArgs {
            max_burst: 15,
            count: 30,
            period_s: 60,
            quantity: 2
        }
    );
    assert_eq!(command("k 15 30 60").unwrap().quantity, 1, "default 1");
}

// ---- argument parsing rules ----

#[test]
fn integer_syntax_accepted() {
    assert_eq!(args("+5 30 60 1").max_burst, 5);
    assert_eq!(args("-0 30 60 1").max_burst, 0);
    assert_eq!(args("00015 30 60 1").max_burst, 15);
    assert_eq!(parse_i64_arg(b"-9223372036854775808"), Ok(i64::MIN));
    assert_eq!(parse_i64_arg(b"9223372036854775807"), Ok(i64::MAX));
    assert_eq!(args("15 30 60 -0").quantity, 0);
    // Both sides of the 18-digit fast path agree with `str::parse`.
    for text in [
        "999999999999999999",
        "-999999999999999999",
        "1000000000000000000",
        "-1000000000000000000",
        "0000000000000000000001",
        "-000000000000000000000",
    ] {
        assert_eq!(
            parse_i64_arg(text.as_bytes()).ok(),
            text.parse::<i64>().ok(),
            "{text}"
        );
    }
}

#[test]
fn checked_arguments_decide_as_throttle_does() {
    for spec in [
        "15 30 60 1",
        "0 1 1 1",
        "4 2000000 1 1",
        "15 30 60 0",
        "5 10 3600 7",
    ] {
        let parsed = args(spec);
        let checked = parsed.check().expect("valid");
        assert_eq!(checked.args(), &parsed);
        for (now, stored) in [
            (0, None),
            (1_000_000_000, Some(999_999_999)),
            (5, Some(i64::MAX)),
        ] {
            assert_eq!(
                checked.throttle(now, stored),
                throttle(now, stored, &parsed),
                "{spec} {now} {stored:?}"
            );
        }
    }
}

#[test]
fn integer_syntax_rejected() {
    let bad: [&[u8]; 13] = [
        b" 1",
        b"1 ",
        b"",
        b"1.5",
        b"1e3",
        b"0x10",
        b"9223372036854775808",
        b"99999999999999999999",
        b"-9223372036854775809",
        b"+",
        b"-",
        b"+-1",
        b"\xff",
    ];
    for arg in bad {
        let words: [&[u8]; 4] = [arg, b"30", b"60", b"1"];
        assert_eq!(
            ThrottleArgs::parse(&words),
            Err(ThrottleError::InvalidInteger(arg.to_vec())),
            "{arg:?}"
        );
    }
}

#[test]
fn parse_order_and_precedence() {
    // The first failing argument is the one reported.
    let err = command("k a b c d").unwrap_err();
    assert_eq!(err, ThrottleError::InvalidInteger(b"a".to_vec()));
    let err = command("k 1 2 3 q").unwrap_err();
    assert_eq!(err, ThrottleError::InvalidInteger(b"q".to_vec()));
    // A parse error beats the zero-rate error.
    let err = command("k x 0 60 1").unwrap_err();
    assert_eq!(err, ThrottleError::InvalidInteger(b"x".to_vec()));
    let err = command("k 10 0 60 y").unwrap_err();
    assert_eq!(err, ThrottleError::InvalidInteger(b"y".to_vec()));
    // The zero-rate error beats overflow: redis-cell reports it while the
    // overflowing `max_burst + 1` stays silent.
    assert_eq!(
        command("k 9223372036854775807 0 60"),
        Err(ThrottleError::ZeroRates)
    );
}

#[test]
fn empty_argument_leaves_trailing_space() {
    let words: [&[u8]; 3] = [b"", b"30", b"60"];
    let err = ThrottleArgs::parse(&words).unwrap_err();
    assert_eq!(
        err.error_line(),
        b"Cell error: Store error: Couldn't parse as integer: ".to_vec()
    );
}

#[test]
fn error_lines_are_exact_bytes() {
    // redis-cell's raw socket bytes, minus the leading '-' and the CRLF.
    assert_eq!(ThrottleError::ZeroRates.error_line(), ZERO.as_bytes());
    assert_eq!(ThrottleError::Usage.error_line(), USAGE.as_bytes());
    assert_eq!(
        ThrottleError::InvalidInteger(b"x".to_vec()).error_line(),
        b"Cell error: Store error: Couldn't parse as integer: x"
    );
    assert_eq!(ThrottleError::SetExpire.error_line(), EXPIRE.as_bytes());
    assert_eq!(ThrottleError::OutOfRange.error_line(), RANGE.as_bytes());
    assert_eq!(
        ThrottleError::WrongType.error_line(),
        b"WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    // Decision 2: non-UTF-8 bytes are echoed verbatim.
    assert_eq!(
        ThrottleError::InvalidInteger(b"\xff1".to_vec()).error_line(),
        b"Cell error: Store error: Couldn't parse as integer: \xff1"
    );
    // As Redis' module error reply: cut at NUL, trim trailing CR/LF,
    // map inner CR/LF to spaces.
    assert_eq!(
        ThrottleError::InvalidInteger(b"a\r\nb\n\r\n".to_vec()).error_line(),
        b"Cell error: Store error: Couldn't parse as integer: a  b"
    );
    assert_eq!(
        ThrottleError::InvalidInteger(b"1\x002".to_vec()).error_line(),
        b"Cell error: Store error: Couldn't parse as integer: 1"
    );
}

// ---- replies observed from redis-cell (controlled clock) ----

/// Sequence A at the observed client times, then its continuation.
#[test]
fn observed_sequence_a() {
    let mut key = Key::default();
    let times_us = [
        2, 270, 355, 435, 514, 592, 671, 742, 823, 901, 981, 1068, 1146, 1240, 1322, 1407, 1482,
        1553, 1637, 1714,
    ];
    for (i, t) in times_us.into_iter().enumerate() {
        let k = i64::try_from(i).unwrap() + 1;
        let expected = if k <= 16 {
            [0, 16, 16 - k, -1, 2 * k]
        } else {
            [1, 16, 0, 2, 32]
        };
        assert_eq!(key.reply(us(t), "15 30 60 1"), expected, "call {k}");
    }
    // GET = first-call time + 32 s.
    assert_eq!(key.tat(), Some(us(2) + 32 * NANOS_PER_SEC));
    let mut t = 2_300;
    for (q, expected) in [
        (0, [0, 16, 0, -1, 32]),
        (20, [1, 16, 0, -1, 32]),
        (16, [1, 16, 0, 32, 32]),
        (17, [1, 16, 0, -1, 32]),
        (0, [0, 16, 0, -1, 32]),
    ] {
        t += 150;
        let reply = key.reply(us(t), &format!("15 30 60 {q}"));
        assert_eq!(reply, expected, "q={q}");
    }
}

#[test]
fn observed_fresh_keys() {
    let cases: [(&str, [i64; 5], Option<u64>); 14] = [
        ("15 30 60", [0, 16, 15, -1, 2], Some(2000)),
        ("15 30 60 0", [0, 16, 16, -1, 0], Some(0)),
        ("15 30 60 20", [1, 16, 16, -1, 0], None),
        ("15 30 60 16", [0, 16, 0, -1, 32], Some(32000)),
        ("15 30 60 17", [1, 16, 16, -1, 0], None),
        ("4 500000 1 2", [0, 5, 3, -1, 0], Some(1)),
        ("4 2000000 1 1", [0, 5, i64::MAX, -1, 0], Some(1)),
        ("6000 6000 1", [0, 6001, 6024, -1, 0], Some(1)),
        ("1000 1000 60", [0, 1001, 1000, -1, 1], Some(60)),
        ("10 1000000000 1 1", [0, 11, 0, -1, 0], Some(1)),
        ("+5 30 60 1", [0, 6, 5, -1, 2], Some(2000)),
        ("-0 30 60 1", [0, 1, 0, -1, 2], Some(2000)),
        ("00015 30 60 1", [0, 16, 15, -1, 2], Some(2000)),
        ("1 1 1", [0, 2, 1, -1, 1], Some(1000)),
    ];
    for (text, reply, ttl_ms) in cases {
        let decision = throttle(ms(0), None, &args(text)).unwrap();
        assert_eq!(decision.reply(), reply, "{text}");
        assert_eq!(decision.write.map(|(_, ttl)| ttl), ttl_ms, "{text}");
    }
}

#[test]
fn observed_fresh0_visible_within_the_same_ms() {
    let mut key = Key::default();
    assert_eq!(key.reply(ms(0), "15 30 60 0"), [0, 16, 16, -1, 0]);
    assert_eq!(key.state(ms(0) + 900_000), Some((0, Some(0))));
    assert_eq!(key.state(ms(10)), None);
}

#[test]
fn observed_fresh16_then_one() {
    let mut key = Key::default();
    assert_eq!(key.reply(ms(0), "15 30 60 16"), [0, 16, 0, -1, 32]);
    assert_eq!(key.reply(ms(0), "15 30 60 1"), [1, 16, 0, 2, 32]);
}

#[test]
fn observed_mb0_three_calls() {
    let mut key = Key::default();
    assert_eq!(key.reply(ms(0), "0 1 2"), [0, 1, 0, -1, 2]);
    assert_eq!(key.state(ms(0)), Some((2000, Some(2000))));
    assert_eq!(key.reply(ms(0), "0 1 2"), [1, 1, 0, 2, 2]);
    assert_eq!(key.reply(ms(0), "0 1 2"), [1, 1, 0, 2, 2]);
}

#[test]
fn observed_us2_twice() {
    let mut key = Key::default();
    assert_eq!(key.reply(ms(0), "4 2000000 1 1"), [0, 5, i64::MAX, -1, 0]);
    assert_eq!(key.reply(ms(0), "4 2000000 1 1"), [0, 5, i64::MAX, -1, 0]);
    assert_eq!(key.reply(ms(5), "4 2000000 1 1"), [0, 5, i64::MAX, -1, 0]);
}

/// `ci` (case-insensitive names) and `m1` (MULTI/EXEC): two calls of
/// `1 1 1` in a row.
#[test]
fn observed_two_calls_of_1_1_1() {
    let mut key = Key::default();
    assert_eq!(key.reply(ms(0), "1 1 1"), [0, 2, 1, -1, 1]);
    assert_eq!(key.reply(ms(0), "1 1 1"), [0, 2, 0, -1, 2]);
}

#[test]
fn observed_negative_max_burst_count_period() {
    for (text, reply) in [
        ("-1 30 60 1", [1, 0, 0, -1, 0]),
        ("-5 30 60 1", [1, -4, 0, -1, 0]),
        ("15 -30 60 1", [1, 16, 0, -1, 0]),
        ("15 30 -60 1", [1, 16, 0, -1, 0]),
    ] {
        let decision = throttle(ms(0), None, &args(text)).unwrap();
        assert_eq!(decision.reply(), reply, "{text}");
        assert_eq!(decision.write, None, "{text}: nothing written");
    }
}

/// p11, p13, o2, o3, o4, o5 and o6: redis-cell wraps around and sends
/// nonsense; sluice answers ERR (decision 3).
#[test]
fn observed_wraparounds_become_out_of_range() {
    for text in [
        "k 9223372036854775807 30 60 1",
        "k -9223372036854775808 30 60 1",
        "k 9223372036854775806 1 1 1",
        "k 15 1 9223372036854775807 1",
        "k 15 1 10000000000 1",
        "k 15 30 60 9223372036854775807",
        "k 1000000000000 1 60 1",
    ] {
        assert_eq!(command(text), Err(ThrottleError::OutOfRange), "{text}");
        let parsed = text
            .split(' ')
            .skip(1)
            .map(|w| w.parse::<i64>().unwrap())
            .collect::<Vec<_>>();
        let built = ThrottleArgs {
            max_burst: parsed[0],
            count: parsed[1],
            period_s: parsed[2],
            quantity: parsed.get(3).copied().unwrap_or(1),
        };
        assert_eq!(
            throttle(ms(0), None, &built),
            Err(ThrottleError::OutOfRange),
            "{text}: hand-built arguments are re-validated"
        );
    }
    assert_eq!(ThrottleError::OutOfRange.to_string(), RANGE);
}

#[test]
fn observed_n5_negative_quantity_on_fresh_key() {
    let mut key = Key::default();
    let err = key.call(ms(0), &args("15 30 60 -1")).unwrap_err();
    assert_eq!(err, ThrottleError::SetExpire);
    assert_eq!(err.to_string(), EXPIRE);
    assert_eq!(key.state(ms(0)), None, "decision 4: nothing written");
}

#[test]
fn observed_n6_negative_quantity_after_a_call() {
    let mut key = Key::default();
    assert_eq!(key.reply(ms(0), "15 30 60 1"), [0, 16, 15, -1, 2]);
    let decision = key.call(ms(0), &args("15 30 60 -1")).unwrap();
    assert_eq!(decision.reply(), [0, 16, 16, -1, 0]);
    assert_eq!(decision.write, Some((ms(0), 0)), "expires at once");
    assert_eq!(key.state(ms(1)), None, "key gone");
    let err = key.call(ms(1), &args("15 30 60 -1")).unwrap_err();
    assert_eq!(err, ThrottleError::SetExpire);
    assert_eq!(key.state(ms(1)), None, "nothing written");
}

#[test]
fn observed_preexisting_values() {
    // i1: an old TAT acts like a fresh key.
    let mut key = Key::set("123");
    let decision = key.call(ms(0), &args("15 30 60 1")).unwrap();
    assert_eq!(decision.reply(), [0, 16, 15, -1, 2]);
    assert_eq!(decision.write, Some((ms(2000), 2000)));
    // i2: a TAT 100 s ahead is limited and left untouched.
    let ahead = ms(100_000).to_string();
    let mut key = Key::set(&ahead);
    assert_eq!(key.reply(ms(0), "15 30 60 1"), [1, 16, 0, 70, 100]);
    assert_eq!(key.state(ms(0)), Some((100_000, None)), "PTTL -1");
    // i3: a leading '+' is accepted.
    let mut key = Key::set("+5");
    assert_eq!(key.reply(ms(0), "15 30 60 1"), [0, 16, 15, -1, 2]);
    // t1: a user TTL is replaced.
    let mut key = Key::set("1");
    assert_eq!(key.reply(ms(0), "15 30 60 1"), [0, 16, 15, -1, 2]);
    assert_eq!(key.state(ms(0)), Some((2000, Some(2000))));
}

#[test]
fn observed_timed_sequence_r() {
    let mut key = Key::default();
    let steps: [(i64, &str, [i64; 5]); 8] = [
        (1, "4 1 1", [0, 5, 4, -1, 1]),
        (20, "4 1 1", [0, 5, 3, -1, 2]),
        (40, "4 1 1", [0, 5, 2, -1, 3]),
        (58, "4 1 1", [0, 5, 1, -1, 4]),
        (76, "4 1 1", [0, 5, 0, -1, 5]),
        (92, "4 1 1", [1, 5, 0, 1, 5]),
        (1_200_200, "4 1 1", [0, 5, 0, -1, 5]),
        (4_201_000, "4 1 1 0", [0, 5, 3, -1, 2]),
    ];
    for (t, text, reply) in steps {
        assert_eq!(key.reply(us(t), text), reply, "t={t}µs");
    }
    // TAT = 6000.001 ms; the expiry is rounded up, so PTTL 1800
    // (redis-cell: about 1796-1799, truncated).
    assert_eq!(key.state(us(4_201_000)), Some((6000, Some(1800))));
    assert_eq!(key.state(ms(6203)), None);
    assert_eq!(key.reply(ms(6203), "4 1 1"), [0, 5, 4, -1, 1]);
}

// ---- decision 2: stored values ----

#[test]
fn stored_value_must_be_unsigned_integer() {
    assert_eq!(
        parse_stored_tat(b"1795335038273397006"),
        Ok(1_795_335_038_273_397_006)
    );
    assert_eq!(parse_stored_tat(b"+5"), Ok(5));
    assert_eq!(parse_stored_tat(b"0"), Ok(0));
    assert_eq!(parse_stored_tat(b"9223372036854775807"), Ok(i64::MAX));
    for bad in [
        b"abc".as_slice(),
        b"",
        b"-5",
        b"-0",
        b"1.5",
        b" 1",
        b"1 ",
        b"\xff",
        b"9223372036854775808",
        b"18446744073709551615",
        b"18446744073709551616",
    ] {
        assert_eq!(
            parse_stored_tat(bad),
            Err(ThrottleError::OutOfRange),
            "{bad:?}"
        );
    }
    let mut key = Key::set("abc");
    let err = key.call(ms(0), &args("15 30 60 1")).unwrap_err();
    assert_eq!(err.error_line(), RANGE.as_bytes());
}

// ---- decision 3: overflow ----

#[test]
fn overflow_in_argument_products() {
    // max_burst + 1
    assert_eq!(
        command("k 9223372036854775807 1 1 0"),
        Err(ThrottleError::OutOfRange)
    );
    // T * (max_burst + 1): T = 1 s.
    assert_eq!(
        command("k 9223372036 1 1 0"),
        Err(ThrottleError::OutOfRange)
    );
    assert!(command("k 9223372035 1 1 0").is_ok());
    // T * quantity
    assert_eq!(
        command("k 1 1 1 9223372037"),
        Err(ThrottleError::OutOfRange)
    );
    assert_eq!(
        command("k 1 1 1 -9223372037"),
        Err(ThrottleError::OutOfRange)
    );
    assert!(command("k 1 1 1 9223372036").is_ok());
    // A saturated T is not itself an error; with limit 0 and quantity 0
    // nothing overflows, and redis-cell's reply is kept.
    let saturated = args("-1 1 9223372036854775807 0");
    let decision = throttle(ms(0), None, &saturated).unwrap();
    assert_eq!(decision.reply(), [0, 0, 0, -1, 0]);
}

#[test]
fn overflow_in_time_arithmetic() {
    // An allowed call whose new TAT passes i64::MAX.
    let now = i64::MAX - NANOS_PER_SEC;
    assert_eq!(
        throttle(now, None, &args("15 30 60 1")),
        Err(ThrottleError::OutOfRange)
    );
    // A stored TAT at the top of the range with a refused call still
    // answers: nothing is written, so nothing overflows.
    let decision = throttle(ms(0), Some(i64::MAX), &args("15 30 60 1")).unwrap();
    assert!(decision.limited);
    assert_eq!(decision.write, None);
    let retry_ns = i128::from(i64::MAX) - 30 * i128::from(NANOS_PER_SEC) - i128::from(ms(0));
    assert_eq!(decision.retry_after_s, reply_seconds(retry_ns));
    // A negative new TAT (only with a clock near the epoch) is not
    // written either.
    assert_eq!(
        throttle(1_000_000, None, &args("15 30 60 0")).map(|d| d.write),
        Ok(Some((1_000_000, 0)))
    );
    assert_eq!(
        throttle(500_000, Some(1_500_000), &args("0 1 1 -1")),
        Err(ThrottleError::SetExpire)
    );
    assert_eq!(
        throttle(500, None, &args("2000 1000000 1 -1")),
        Err(ThrottleError::OutOfRange)
    );
}

// ---- decision 4: negative quantity ----

#[test]
fn negative_quantity_limited_call_answers_normally() {
    // TAT 100 s ahead: new TAT 98 s ahead, allowed only 66 s from now.
    let decision = throttle(ms(0), Some(ms(100_000)), &args("15 30 60 -1")).unwrap();
    assert_eq!(decision.reply(), [1, 16, 0, 66, 100]);
    assert_eq!(decision.write, None);
}

#[test]
fn negative_quantity_expire_boundary() {
    let a = args("15 30 60 -1");
    // New TAT 1.999999 ms in the past: redis-cell's PEXPIRE -1 would make
    // the key persistent; sluice writes it with expiry 0.
    let stored = ms(2000) - 1_999_999;
    let decision = throttle(ms(0), Some(stored), &a).unwrap();
    assert_eq!(decision.write, Some((ms(0) - 1_999_999, 0)));
    assert_eq!(decision.reply(), [0, 16, 16, -1, 0]);
    // Exactly 2 ms in the past: PEXPIRE -2 fails in redis-cell.
    let stored = ms(2000) - 2_000_000;
    assert_eq!(
        throttle(ms(0), Some(stored), &a),
        Err(ThrottleError::SetExpire)
    );
}

#[test]
fn negative_rate_with_large_quantity_hits_expire_error() {
    // T = -2 s: quantity >= limit makes the call "allowed" with a TAT
    // in the past; redis-cell fails to set the expiry.
    assert_eq!(
        throttle(ms(0), None, &args("15 -30 60 16")),
        Err(ThrottleError::SetExpire)
    );
}

// ---- other edge cases ----

#[test]
fn oversize_request_on_existing_key() {
    let mut key = Key::default();
    for _ in 0..16 {
        key.reply(ms(0), "15 30 60 1");
    }
    assert_eq!(key.reply(ms(0), "15 30 60 20"), [1, 16, 0, -1, 32]);
}

#[test]
fn oversize_request_on_stale_user_tat() {
    // A stale TAT that never expired (user SET without TTL): reset is
    // negative, truncated toward zero, with no +1.
    let decision = throttle(ms(0), Some(ms(-1500)), &args("15 30 60 17")).unwrap();
    assert_eq!(decision.reply(), [1, 16, 16, -1, -1]);
}

#[test]
fn reply_seconds_rounding() {
    let s = |ns: i64| reply_seconds(i128::from(ns));
    assert_eq!(s(2 * NANOS_PER_SEC), 2);
    assert_eq!(s(1_999_700_000), 2);
    assert_eq!(s(1_000_500_000), 1);
    assert_eq!(s(400_000), 0);
    assert_eq!(s(60 * NANOS_PER_MS), 1);
    assert_eq!(s(0), 0);
    assert_eq!(s(-NANOS_PER_SEC), -1);
    assert_eq!(s(-1_500_000_000), -1);
    // Either side of where the integer form hands over to the f64 one.
    for d in [
        (1i64 << 53) - 1,
        1 << 53,
        (1 << 53) + 1,
        -(1 << 53) + 1,
        -(1 << 53),
        -(1 << 53) - 1,
        (1 << 53) - 999_999,
        i64::MAX,
        i64::MIN,
    ] {
        assert_eq!(s(d), super::reply_seconds_f64(i128::from(d)), "{d}");
    }
    for d in [
        i128::from(i64::MAX) + 1,
        i128::from(i64::MIN) - 1,
        i128::MAX / 7,
    ] {
        assert_eq!(reply_seconds(d), super::reply_seconds_f64(d), "{d}");
    }
}

#[test]
fn expiry_is_rounded_up() {
    assert_eq!(expiry_ms(1), Ok(1));
    assert_eq!(expiry_ms(1_000_000), Ok(1));
    assert_eq!(expiry_ms(1_000_001), Ok(2));
    assert_eq!(expiry_ms(0), Ok(0));
    assert_eq!(expiry_ms(-1_999_999), Ok(0));
    assert_eq!(expiry_ms(-2_000_000), Err(ThrottleError::SetExpire));
}

/// Issue #50: with T < 1 ms, redis-cell's truncated expiry loses the
/// state at once. Rounding up keeps it until the TAT.
#[test]
fn high_rate_state_survives() {
    let mut key = Key::default();
    let a = args("0 10000 1 1"); // T = 100 µs, one unit per T
    // TAT = 1.05 ms. A truncated expiry (0 ms) would drop the key at
    // 1.0 ms; the rounded-up one (1 ms) keeps it through 1.999 ms.
    let first = key.call(us(950), &a).unwrap();
    assert!(!first.limited);
    assert_eq!(first.write, Some((us(1050), 1)));
    assert!(key.call(us(1020), &a).unwrap().limited);
    assert!(!key.call(us(1050), &a).unwrap().limited);
}

// ---- properties ----

/// Parameters with T from 100 ns to 10 s and bursts up to 20.
fn params_strategy() -> impl Strategy<Value = (i64, i64, i64)> {
    (
        0i64..=20,
        prop_oneof![1i64..=10, 1i64..=1_000, 1i64..=10_000_000],
        1i64..=10,
    )
}

/// Call sequences: (gap in units of T/1000, extra gap in ns, quantity).
/// Both gaps are often small, so that calls bunch up within one
/// millisecond and within one T.
fn calls_strategy() -> impl Strategy<Value = Vec<(u32, i64, i64)>> {
    let gap = prop_oneof![Just(0u32), 0u32..=200, 0u32..=3000];
    let jitter = prop_oneof![Just(0i64), 0i64..=50_000, 0i64..=1_500_000];
    let quantity = prop_oneof![0i64..=2, 0i64..=25];
    prop::collection::vec((gap, jitter, quantity), 1..60)
}

proptest! {
    /// In any window [a, b] of call times, the allowed units never exceed
    /// `max_burst + 1 + (b - a) / T`. Keys expire as in Redis, so this
    /// also checks that the rounded-up expiry never loses state early.
    #[test]
    fn allowed_units_are_bounded(
        (max_burst, count, period_s) in params_strategy(),
        calls in calls_strategy(),
        phase in 0i64..NANOS_PER_SEC,
    ) {
        let t_ns = emission_interval_ns(count, period_s);
        let mut key = Key::default();
        let mut now = S + phase;
        let mut log = Vec::new();
        for (gap, jitter, q) in calls {
            let step = i128::from(t_ns) * i128::from(gap) / 1000;
            now += i64::try_from(step).unwrap() + jitter;
            let a = ThrottleArgs { max_burst, count, period_s, quantity: q.min(max_burst + 2) };
            let d = key.call(now, &a).unwrap();
            log.push((now, if d.limited { 0 } else { a.quantity }));
        }
        for (i, &(a, _)) in log.iter().enumerate() {
            let mut units = 0;
            for &(b, allowed) in &log[i..] {
                units += allowed;
                let bound = max_burst + 1 + (b - a) / t_ns;
                prop_assert!(units <= bound, "{units} units in [{a}, {b}] > {bound}");
            }
        }
    }

    /// A key left idle for its TTL, or for its last reset_after plus the
    /// dropped sub-millisecond, behaves exactly like a fresh key.
    #[test]
    fn idle_key_is_full_again(
        (max_burst, count, period_s) in params_strategy(),
        calls in calls_strategy(),
    ) {
        let t_ns = emission_interval_ns(count, period_s);
        let mut key = Key::default();
        let mut now = S;
        let mut last_write = None;
        let mut last_reset_s = 0;
        for (gap, jitter, q) in calls {
            let step = i128::from(t_ns) * i128::from(gap) / 1000;
            now += i64::try_from(step).unwrap() + jitter;
            let a = ThrottleArgs { max_burst, count, period_s, quantity: q.min(max_burst + 2) };
            let d = key.call(now, &a).unwrap();
            if let Some((_, ttl_ms)) = d.write {
                last_write = Some((now, i64::try_from(ttl_ms).unwrap()));
            }
            last_reset_s = d.reset_after_s;
        }
        prop_assert!(last_reset_s >= 0);
        let one = ThrottleArgs { max_burst, count, period_s, quantity: 1 };
        let mut idle_until = vec![now + last_reset_s * NANOS_PER_SEC + NANOS_PER_MS];
        if let Some((at, ttl_ms)) = last_write {
            idle_until.push(at + ttl_ms * NANOS_PER_MS);
        }
        for later in idle_until {
            let later = later.max(now);
            let mut copy = Key { value: key.value.clone() };
            let d = copy.call(later, &one).unwrap();
            let fresh = throttle(later, None, &one).unwrap();
            prop_assert_eq!(d, fresh);
            if t_ns % NANOS_PER_US == 0 {
                prop_assert_eq!(d.remaining, max_burst);
            }
        }
    }

    /// In the everyday range (period up to 1000 s, T at least 1 µs,
    /// non-negative arguments), the replies equal a plain integer model
    /// of the algorithm and reply in `docs/cl-throttle.md`. This shows that the `f64` steps copied from
    /// redis-cell change nothing there.
    #[test]
    fn matches_integer_model(
        max_burst in 0i64..=100,
        count in 1i64..=1_000_000,
        period_s in 1i64..=1000,
        quantity in 0i64..=110,
        now_offset in 0i64..=1_000 * NANOS_PER_SEC,
        stored_offset in proptest::option::of(-1_000 * NANOS_PER_SEC..=2_000 * NANOS_PER_SEC),
    ) {
        let now = S + now_offset;
        let stored = stored_offset.map(|offset| S + offset);
        let a = ThrottleArgs { max_burst, count, period_s, quantity };
        let got = throttle(now, stored, &a).unwrap();

        let seconds = |d: i64| {
            if d >= 0 {
                d / NANOS_PER_SEC + i64::from((d % NANOS_PER_SEC) / NANOS_PER_MS > 0)
            } else {
                d / NANOS_PER_SEC
            }
        };
        let t = period_s * NANOS_PER_SEC / count;
        let dvt = t * (max_burst + 1);
        let inc = t * quantity;
        let tat = stored.unwrap_or(now);
        let new_tat = tat.max(now) + inc;
        let diff = now - (new_tat - dvt);
        let limited = diff < 0;
        let ttl = if limited { tat - now } else { new_tat - now };
        let next = dvt - ttl;
        let expected = Decision {
            limited,
            limit: max_burst + 1,
            remaining: if next <= -t { 0 } else { (next / 1000) / (t / 1000) },
            retry_after_s: if limited && inc <= dvt { seconds(-diff) } else { -1 },
            reset_after_s: seconds(ttl),
            write: (!limited).then(|| {
                let ttl_ms = u64::try_from((ttl + NANOS_PER_MS - 1) / NANOS_PER_MS).unwrap();
                (new_tat, ttl_ms)
            }),
        };
        prop_assert_eq!(got, expected);
    }

    /// No input makes `throttle` panic.
    #[test]
    fn throttle_never_panics(
        now in any::<i64>(),
        stored in any::<Option<i64>>(),
        max_burst in any::<i64>(),
        count in any::<i64>(),
        period_s in any::<i64>(),
        quantity in any::<i64>(),
    ) {
        let a = ThrottleArgs { max_burst, count, period_s, quantity };
        if let Ok(Decision { write: Some((tat, _)), limited, .. }) = throttle(now, stored, &a) {
            prop_assert!(tat >= 0);
            prop_assert!(!limited);
        }
    }

    /// Same for small, realistic-looking values, where most calls succeed.
    #[test]
    fn throttle_never_panics_small(
        now in S - NANOS_PER_SEC..S + NANOS_PER_SEC,
        stored in proptest::option::of(S - 100 * NANOS_PER_SEC..S + 100 * NANOS_PER_SEC),
        max_burst in -5i64..50,
        count in -5i64..5_000_000_000,
        period_s in -5i64..100,
        quantity in -60i64..60,
    ) {
        let a = ThrottleArgs { max_burst, count, period_s, quantity };
        let _ = throttle(now, stored, &a);
    }

    /// No argument list makes parsing panic, and a parse error always
    /// names one of the arguments.
    #[test]
    fn parse_never_panics(words in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..24), 0..7)) {
        let words: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
        match parse_command(&words) {
            Err(ThrottleError::InvalidInteger(arg)) => {
                prop_assert!(words.contains(&arg.as_slice()));
            }
            Err(ThrottleError::Usage) => prop_assert!(!matches!(words.len(), 4 | 5)),
            _ => {}
        }
        let _ = parse_stored_tat(words.first().copied().unwrap_or_default());
    }

    /// Every i64, written in decimal (with optional '+' and leading
    /// zeros), parses back to itself.
    #[test]
    fn integers_round_trip(n in any::<i64>(), plus in any::<bool>(), zeros in 0usize..3) {
        let digits = n.unsigned_abs().to_string();
        let sign = if n < 0 { "-" } else if plus { "+" } else { "" };
        let text = format!("{sign}{}{digits}", "0".repeat(zeros));
        prop_assert_eq!(parse_i64_arg(text.as_bytes()), Ok(n));
    }

    /// Stored TATs round-trip through their decimal text.
    #[test]
    fn stored_tat_round_trips(tat in any::<u64>()) {
        let parsed = parse_stored_tat(tat.to_string().as_bytes());
        match i64::try_from(tat) {
            Ok(expected) => prop_assert_eq!(parsed, Ok(expected)),
            Err(_) => prop_assert_eq!(parsed, Err(ThrottleError::OutOfRange)),
        }
    }

    /// Below 2^53 ns (about 104 days) the f64 seconds conversion equals
    /// the integer formula for fields 4 and 5 in `docs/cl-throttle.md`.
    #[test]
    fn reply_seconds_matches_integer_formula(d in 0i64..(1i64 << 53)) {
        let expected = d / NANOS_PER_SEC + i64::from((d % NANOS_PER_SEC) / NANOS_PER_MS > 0);
        prop_assert_eq!(reply_seconds(i128::from(d)), expected);
    }

    /// The integer form of fields 4 and 5 agrees with redis-cell's `f64` one wherever it
    /// is used, negative durations included.
    #[test]
    fn reply_seconds_matches_the_f64_form(d in -(1i64 << 53) + 1..(1i64 << 53)) {
        prop_assert_eq!(reply_seconds(i128::from(d)), super::reply_seconds_f64(i128::from(d)));
    }

    /// Error lines never contain CR, LF or NUL.
    #[test]
    fn error_lines_are_single_line(arg in prop::collection::vec(any::<u8>(), 0..32)) {
        let line = ThrottleError::InvalidInteger(arg).error_line();
        prop_assert!(!line.iter().any(|b| matches!(b, b'\r' | b'\n' | 0)));
    }
}

#[test]
fn numeric_arguments_follow_rusts_i64_parser() {
    for text in [
        "0",
        "7",
        "+7",
        "-7",
        "007",
        "-0",
        "+",
        "-",
        "",
        " 1",
        "1 ",
        "1.0",
        "1e3",
        "0x10",
        "--1",
        "+-1",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "+9223372036854775807",
        "١",
        "12a",
    ] {
        assert_eq!(
            super::parse_rust_i64(text.as_bytes()),
            text.parse::<i64>().ok(),
            "{text:?}"
        );
    }
    assert_eq!(super::parse_rust_i64(b"\xff1"), None);
}

#[test]
fn short_arguments_parse_as_str_parse_does() {
    // Every one- to three-byte argument over digits, signs, the bytes either side of the
    // digits and a few others: the unrolled short path agrees with `str::parse`.
    let alphabet = b"0123456789+-/: a\xff";
    let mut args: Vec<Vec<u8>> = Vec::new();
    for &a in alphabet {
        args.push(vec![a]);
        for &b in alphabet {
            args.push(vec![a, b]);
            for &c in alphabet {
                args.push(vec![a, b, c]);
            }
        }
    }
    for arg in args {
        let expected = std::str::from_utf8(&arg)
            .ok()
            .and_then(|t| t.parse::<i64>().ok());
        assert_eq!(super::parse_rust_i64(&arg), expected, "{arg:?}");
    }
}

#[test]
fn emission_interval_matches_the_i128_form() {
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
    fn wide(count: i64, period_s: i64) -> i64 {
        let period_ns = i128::from(period_s) * 1_000_000_000;
        if count == 0 || period_ns == 0 {
            return 0;
        }
        (period_ns as f64 / count as f64) as i64
    }
    let values = [
        0i64,
        1,
        -1,
        3,
        7,
        60,
        -60,
        86_400,
        9_223_372_035,
        9_223_372_036,
        9_223_372_037,
        -9_223_372_036,
        -9_223_372_037,
        i64::MAX / 3,
        i64::MAX,
        i64::MIN,
    ];
    for count in values {
        for period in values {
            assert_eq!(
                super::emission_interval_ns(count, period),
                wide(count, period),
                "count {count} period {period}"
            );
        }
    }
}

#[test]
fn sixty_four_bit_fast_paths_match_i128_arithmetic() {
    for x in [
        0i128,
        1,
        -1,
        999_999,
        1_000_000,
        -1_500_000_001,
        i128::from(i64::MAX),
        i128::from(i64::MIN),
        i128::from(i64::MAX) + 1,
        i128::from(i64::MIN) - 1,
        i128::MAX / 3,
    ] {
        for d in [1i64, 1_000, 1_000_000, 1_000_000_000] {
            assert_eq!(super::div_rem(x, d), (x / i128::from(d), x % i128::from(d)));
        }
        assert_eq!(super::to_f64(x).to_bits(), (x as f64).to_bits());
    }
}

/// Every `i64` value at or near an edge of the GCRA's steps (the `i64` bounds, 2^53 ns, the
/// ms and s units, their negatives), and ordinary times.
fn edge_i64() -> impl Strategy<Value = i64> {
    const E53: i64 = 1 << 53;
    prop_oneof![
        Just(0i64),
        Just(i64::MAX),
        Just(i64::MIN),
        Just(i64::MAX - 1),
        Just(i64::MIN + 1),
        Just(E53),
        Just(-E53),
        Just(E53 - 1),
        Just(-E53 + 1),
        Just(NANOS_PER_MS),
        Just(-2 * NANOS_PER_MS),
        Just(NANOS_PER_SEC),
        -3_000_000_000i64..=3_000_000_000,
        (i64::MAX - 3_000_000_000)..=i64::MAX,
        i64::MIN..=(i64::MIN + 3_000_000_000),
        any::<i64>(),
    ]
}

proptest! {
    /// The `i64` GCRA step answers exactly as the `i128` one wherever it answers, and it
    /// answers for calls near now with a limiter's arguments.
    #[test]
    fn narrow_step_matches_the_wide_one(
        now in edge_i64(),
        tat in prop::option::of(edge_i64()),
        tat_offset in prop::option::of(-100_000_000_000i64..=100_000_000_000),
        emission in edge_i64(),
        dvt in edge_i64(),
        increment in edge_i64(),
        limit in edge_i64(),
    ) {
        let emission = if emission == 0 { 1 } else { emission };
        let params = Params { emission_ns: emission, limit, dvt_ns: dvt, increment_ns: increment };
        // Half the stored TATs near now, as a live key's are.
        let tat = tat_offset.map(|o| now.saturating_add(o)).or(tat);
        let wide = super::decide_wide(now, tat, &params);
        if let Some(narrow) = super::decide_narrow(now, tat, &params) {
            prop_assert_eq!(narrow, wide);
        }
    }

    /// Arguments a limiter sends, at times of this century: always the `i64` step.
    #[test]
    fn narrow_step_answers_for_limiter_calls(
        (max_burst, count, period_s) in params_strategy(),
        quantity in 0i64..=25,
        now in 1_600_000_000_000_000_000i64..=2_000_000_000_000_000_000,
        tat_offset in prop::option::of(-100_000_000_000i64..=100_000_000_000),
    ) {
        let checked = ThrottleArgs { max_burst, count, period_s, quantity }.check().unwrap();
        let tat = tat_offset.map(|o| now + o);
        let narrow = super::decide_narrow(now, tat, &checked.params);
        prop_assert_eq!(narrow, Some(super::decide_wide(now, tat, &checked.params)));
    }
}

/// Numeric arguments as a limiter sends them and as nothing should: repeated, changed,
/// missing, bad, longer than the memo takes, with NUL bytes.
fn memo_arg() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        // Mostly a few valid values, so that calls differing in one argument are common.
        8 => prop::sample::select(vec![&b"1"[..], b"2", b"15", b"30", b"60"]).prop_map(<[u8]>::to_vec),
        1 => Just(b"0".to_vec()),
        1 => Just(b"3600".to_vec()),
        1 => Just(b"36000".to_vec()),
        1 => Just(b"-1".to_vec()),
        1 => Just(b"+1".to_vec()),
        1 => Just(b"01".to_vec()),
        1 => Just(b"1\0".to_vec()),
        1 => Just(b"\0".to_vec()),
        1 => Just(b"x".to_vec()),
        1 => Just(b"9223372036854775807".to_vec()),
        1 => prop::collection::vec(any::<u8>(), 0..=5),
    ]
}

proptest! {
    /// Through `LastArgs`, every call of a sequence answers exactly as
    /// `parse_command_checked` on its own arguments: hits never return a stale result.
    /// Each call repeats the previous one, changes one of its arguments, drops or adds the
    /// quantity, or is new.
    #[test]
    fn last_args_answers_as_a_fresh_parse(
        first in prop::collection::vec(memo_arg(), 4..=5),
        steps in prop::collection::vec((0u8..5, 0usize..5, memo_arg(), prop::collection::vec(memo_arg(), 0..=6)), 1..40),
    ) {
        let mut memo = LastArgs::new();
        let mut call = first;
        for (kind, at, arg, fresh) in steps {
            match kind {
                0 => {}
                1 | 2 => {
                    let at = at % call.len().max(1);
                    if let Some(slot) = call.get_mut(at) {
                        *slot = arg;
                    }
                }
                3 if call.len() == 5 => {
                    call.pop();
                }
                3 => call.push(arg),
                _ => call = fresh,
            }
            if let Some(key) = call.first_mut() {
                *key = b"k".to_vec();
            }
            prop_assert_eq!(memo.parse_command(&call), parse_command_checked(&call));
        }
    }
}

#[test]
fn last_args_tells_arguments_apart_by_length_and_bytes() {
    let mut memo = LastArgs::new();
    let call = |v: &[&[u8]]| v.iter().map(|a| a.to_vec()).collect::<Vec<_>>();
    let a = call(&[b"k", b"15", b"30", b"60"]);
    let b = call(&[b"k", b"15", b"30", b"60", b"2"]);
    let c = call(&[b"k", b"15", b"3", b"60"]);
    for args in [&a, &a, &b, &b, &a, &c, &c, &a] {
        assert_eq!(memo.parse_command(args), parse_command_checked(args));
    }
    assert_eq!(pack(b"1"), Some(0x1_0000_0031));
    assert_ne!(pack(b"\0"), pack(b"\0\0"));
    assert_eq!(pack(b"12345"), None);
}
