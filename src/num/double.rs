//! Doubles as Redis's C code reads and prints them: glibc's `strtod` (decimal, hexadecimal,
//! `inf`, with its exact rounding and range errors), Redis's `%.17g` replies, `%.Ng` in
//! general, and the C cast to an integer.

use std::io::Write as _;

use super::hex_digit;
use super::is_c_space;

/// Parses a double as Redis's `string2d`/`strtod` path does: no surrounding spaces, no NaN;
/// `inf`, `+inf`, `-inf`, exponents and leading `+` are accepted.
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    if b.is_empty() || b[0].is_ascii_whitespace() || b[b.len() - 1].is_ascii_whitespace() {
        return None;
    }
    let s = std::str::from_utf8(b).ok()?;
    let v: f64 = s.parse().ok()?;
    if v.is_nan() { None } else { Some(v) }
}

/// Parses a score argument of `ZADD`/`ZINCRBY` exactly as Redis 7.0's `string2d` does with C's
/// `strtod`: the whole argument must be a decimal number (optional sign, digits with an
/// optional point, optional exponent), a hexadecimal float (`0x1.8p3`), or `inf`/`infinity`
/// in any case with an optional sign. Rejected: empty input, leading or trailing whitespace,
/// NUL bytes, NaN, and values that overflow to infinity or underflow to zero (`1e400`,
/// `1e-400`; a result that is merely subnormal is accepted). `None` → reply
/// `ERR value is not a valid float`.
pub fn parse_double(arg: &[u8]) -> Option<f64> {
    if arg.first().is_none_or(|&b| is_c_space(b)) {
        return None;
    }
    let r = strtod(arg);
    if r.consumed != arg.len() || r.value.is_nan() || r.out_of_range {
        return None;
    }
    Some(r.value)
}

/// Appends `score` formatted as Redis 7.0 replies it (`ZSCORE`, `WITHSCORES`, `ZINCRBY`):
/// C's `%.17g`, that is 17 significant digits with trailing zeros removed, in exponent form
/// (`1e+20`, `1.0000000000000001e-05`) when the decimal exponent is below -4 or at least 17,
/// plus `inf`, `-inf` and `-0`. Examples: `1.1` → `1.1000000000000001`, `3` → `3`.
pub fn format_double(score: f64, out: &mut Vec<u8>) {
    if score.is_nan() {
        out.extend_from_slice(b"nan");
        return;
    }
    if score.is_infinite() {
        out.extend_from_slice(if score > 0.0 { b"inf" } else { b"-inf" });
        return;
    }
    if score == 0.0 {
        out.extend_from_slice(if score.is_sign_negative() {
            b"-0"
        } else {
            b"0"
        });
        return;
    }
    if score.fract() == 0.0 && score.abs() < 1e17 {
        // An integer of at most 17 digits prints exactly, without a point.
        let _ = write!(out, "{}", score as i64);
        return;
    }
    // Rust's `{:.16e}` is the exactly rounded (ties to even, as glibc) 17-digit mantissa and
    // the exponent `%e` would use; rearrange it the way `%g` does.
    let mut buf = [0u8; 40];
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    if write!(cursor, "{:.16e}", score.abs()).is_err() {
        let _ = write!(out, "{score}");
        return;
    }
    let written = usize::try_from(cursor.position()).unwrap_or(0);
    let text = buf.get(..written).unwrap_or(&[]);
    let Some(e_pos) = text.iter().position(|&b| b == b'e') else {
        let _ = write!(out, "{score}");
        return;
    };
    let mut digits = [b'0'; 17];
    let mut nd = 0;
    for &b in &text[..e_pos] {
        if b.is_ascii_digit() && nd < digits.len() {
            digits[nd] = b;
            nd += 1;
        }
    }
    let exp: i32 = std::str::from_utf8(&text[e_pos + 1..])
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // `digits` starts as zeros, so at least one digit is always there.
    let mut nd = nd.max(1);
    while nd > 1 && digits[nd - 1] == b'0' {
        nd -= 1;
    }
    let digits = &digits[..nd];
    if score < 0.0 {
        out.push(b'-');
    }
    if !(-4..17).contains(&exp) {
        out.push(digits[0]);
        if nd > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        out.push(if exp < 0 { b'-' } else { b'+' });
        let abs = exp.unsigned_abs();
        if abs < 10 {
            out.push(b'0');
        }
        let _ = write!(out, "{abs}");
    } else if exp >= 0 {
        let int_len = usize::try_from(exp).unwrap_or(0) + 1;
        if nd <= int_len {
            out.extend_from_slice(digits);
            out.resize(out.len() + (int_len - nd), b'0');
        } else {
            out.extend_from_slice(&digits[..int_len]);
            out.push(b'.');
            out.extend_from_slice(&digits[int_len..]);
        }
    } else {
        out.extend_from_slice(b"0.");
        let zeros = usize::try_from(-exp - 1).unwrap_or(0);
        out.resize(out.len() + zeros, b'0');
        out.extend_from_slice(digits);
    }
}

/// What C's `strtod` returns for a byte string.
pub struct Strtod {
    /// The number read (0 when none was).
    pub value: f64,
    /// Bytes consumed (0 when no number was recognised, whitespace included).
    pub consumed: usize,
    /// `errno == ERANGE` with a result of `±HUGE_VAL` or zero.
    pub out_of_range: bool,
}

/// Largest exponent magnitude kept while parsing; anything beyond already overflows or
/// underflows every possible mantissa.
const EXP_CLAMP: i64 = 1 << 40;

/// Reads an optionally signed decimal exponent at the start of `s`; returns it (clamped)
/// and its length, or `None` if there are no digits.
fn parse_exponent(s: &[u8]) -> Option<(i64, usize)> {
    let (neg, mut i) = match s.first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    let digits_start = i;
    let mut value: i64 = 0;
    while let Some(d) = s.get(i).filter(|b| b.is_ascii_digit()) {
        value = (value * 10 + i64::from(d - b'0')).min(EXP_CLAMP);
        i += 1;
    }
    if i == digits_start {
        return None;
    }
    Some((if neg { -value } else { value }, i))
}

/// Emulates glibc's `strtod` in the C locale.
pub fn strtod(s: &[u8]) -> Strtod {
    let none = Strtod {
        value: 0.0,
        consumed: 0,
        out_of_range: false,
    };
    let mut i = s.iter().take_while(|&&b| is_c_space(b)).count();
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let rest = &s[i..];
    let sign = |v: f64| if neg { -v } else { v };
    let starts_ci = |p: &[u8]| rest.len() >= p.len() && rest[..p.len()].eq_ignore_ascii_case(p);
    if starts_ci(b"inf") {
        let n = if starts_ci(b"infinity") { 8 } else { 3 };
        return Strtod {
            value: sign(f64::INFINITY),
            consumed: i + n,
            out_of_range: false,
        };
    }
    if starts_ci(b"nan") {
        let mut n = 3;
        if rest.get(3) == Some(&b'(') {
            let body = rest[4..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                .count();
            if rest.get(4 + body) == Some(&b')') {
                n = 5 + body;
            }
        }
        return Strtod {
            value: f64::NAN,
            consumed: i + n,
            out_of_range: false,
        };
    }
    if rest.len() >= 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
        if let Some((value, n, out_of_range)) = parse_hex(&rest[2..]) {
            return Strtod {
                value: sign(value),
                consumed: i + 2 + n,
                out_of_range,
            };
        }
        // "0x" without hex digits: only the "0" is a number.
        return Strtod {
            value: sign(0.0),
            consumed: i + 1,
            out_of_range: false,
        };
    }
    // Decimal: digits [ '.' digits ] [ e [sign] digits ], at least one mantissa digit.
    let int_digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let mut j = int_digits;
    let mut frac_digits = 0;
    if rest.get(j) == Some(&b'.') {
        frac_digits = rest[j + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        j += 1 + frac_digits;
    }
    if int_digits + frac_digits == 0 {
        return none;
    }
    let mantissa_nonzero = rest[..j].iter().any(|&b| (b'1'..=b'9').contains(&b));
    if matches!(rest.get(j), Some(b'e' | b'E'))
        && let Some((_, n)) = parse_exponent(&rest[j + 1..])
    {
        j += 1 + n;
    }
    let Some(value) = std::str::from_utf8(&rest[..j])
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
    else {
        return none;
    };
    Strtod {
        value: sign(value),
        consumed: i + j,
        out_of_range: value.is_infinite() || (value == 0.0 && mantissa_nonzero),
    }
}

/// Parses the part of a hexadecimal float after `0x`: hex digits with an optional point
/// (at least one digit) and an optional binary exponent `p[sign]digits`. Returns the
/// correctly rounded (ties to even) magnitude, the bytes consumed, and whether it
/// overflowed or underflowed to zero; `None` if there is no hex digit.
fn parse_hex(s: &[u8]) -> Option<(f64, usize, bool)> {
    let mut mant: u64 = 0;
    let mut sig_digits = 0;
    let mut sticky = false;
    let mut exp2: i64 = 0;
    let mut any_digit = false;
    let mut i = 0;
    let mut after_point = false;
    loop {
        match s.get(i) {
            Some(&b) if b.is_ascii_hexdigit() => {
                any_digit = true;
                let d = u64::from(hex_value(b));
                if mant == 0 && d == 0 {
                    if after_point {
                        exp2 -= 4;
                    }
                } else if sig_digits < 16 {
                    mant = (mant << 4) | d;
                    sig_digits += 1;
                    if after_point {
                        exp2 -= 4;
                    }
                } else {
                    sticky |= d != 0;
                    if !after_point {
                        exp2 += 4;
                    }
                }
                exp2 = exp2.clamp(-EXP_CLAMP, EXP_CLAMP);
            }
            Some(b'.') if !after_point => after_point = true,
            _ => break,
        }
        i += 1;
    }
    if !any_digit {
        return None;
    }
    if matches!(s.get(i), Some(b'p' | b'P'))
        && let Some((e, n)) = parse_exponent(&s[i + 1..])
    {
        exp2 = (exp2 + e).clamp(-EXP_CLAMP, EXP_CLAMP);
        i += 1 + n;
    }
    if mant == 0 {
        return Some((0.0, i, false));
    }
    let (value, out_of_range) = round_binary(mant, sticky, exp2);
    Some((value, i, out_of_range))
}

/// A hex digit's value; callers have checked it is one.
fn hex_value(b: u8) -> u8 {
    hex_digit(b).unwrap_or(0)
}

/// Rounds `(mant + sticky·ε) · 2^exp2` (with `mant != 0`) to the nearest double, ties to
/// even; also says whether it overflowed to infinity or underflowed to zero.
fn round_binary(mant: u64, sticky: bool, exp2: i64) -> (f64, bool) {
    let lz = mant.leading_zeros();
    let m = mant << lz;
    // value = m · 2^(top - 63); `top` is the exponent of the leading bit.
    let top = exp2 + 63 - i64::from(lz);
    if top > 1023 {
        return (f64::INFINITY, true);
    }
    // Significant bits available at this magnitude: 53 for normals, fewer for subnormals.
    let bits = if top >= -1022 { 53 } else { 53 - (-1022 - top) };
    if bits <= 0 {
        // Below half the least subnormal, or exactly half without sticky bits (tie to 0),
        // except that exactly half with sticky bits rounds up.
        let rounds_up = bits == 0 && (m > 1 << 63 || (m == 1 << 63 && sticky));
        return if rounds_up {
            (f64::from_bits(1), false)
        } else {
            (0.0, true)
        };
    }
    let shift = u32::try_from(64 - bits).unwrap_or(63);
    let mut q = m >> shift;
    let rem = m & ((1u64 << shift) - 1);
    let half = 1u64 << (shift - 1);
    if rem > half || (rem == half && (sticky || q & 1 == 1)) {
        q += 1;
    }
    if top >= -1022 {
        let mut top = top;
        if q == 1 << 53 {
            q >>= 1;
            top += 1;
            if top > 1023 {
                return (f64::INFINITY, true);
            }
        }
        let biased = u64::try_from(top + 1023).unwrap_or(0);
        (
            f64::from_bits((biased << 52) | (q & ((1 << 52) - 1))),
            false,
        )
    } else {
        // Subnormal: value = q · 2^-1074, and q == 2^52 is the least normal, whose bit
        // pattern is q as well.
        (f64::from_bits(q), false)
    }
}

/// C's `%.{precision}g` for a double, with glibc's spellings of the special values (`inf`,
/// `-inf`, `nan`, `-nan`).
pub fn fmt_g(d: f64, precision: usize) -> String {
    let precision = precision.clamp(1, 17);
    if d.is_nan() {
        return if d.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // `{:.*e}` is the correctly rounded mantissa `%e` would print; `%g` picks fixed or
    // exponent notation from the exponent of that rounded value.
    let sci = format!("{:.*e}", precision - 1, d);
    let (mantissa, exp) = match sci.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => return sci,
    };
    if exp < -4 || exp >= precision as i32 {
        let m = trim_fraction(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", exp.unsigned_abs())
    } else {
        let decimals = (precision as i32 - 1 - exp).max(0) as usize;
        trim_fraction(&format!("{:.*}", decimals, d)).to_string()
    }
}

fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// C's `(long long)` cast of a double, as Redis's Lua replies use it: truncated toward zero; NaN and values
/// outside the i64 range become `i64::MIN`, as Redis's `(long long)` cast does on x86-64.
pub fn c_cast_i64(d: f64) -> i64 {
    if d.is_nan() || !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fmt(x: f64) -> String {
        let mut v = Vec::new();
        format_double(x, &mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn doubles() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"1e3"), Some(1000.0));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b""), None);
    }

    #[test]
    fn g17_matches_c() {
        assert_eq!(fmt_g(0.1, 17), "0.10000000000000001");
        assert_eq!(fmt_g(1.0, 17), "1");
        assert_eq!(fmt_g(1.5, 17), "1.5");
        assert_eq!(fmt_g(1.23456789012345, 17), "1.23456789012345");
        assert_eq!(fmt_g(1e20, 17), "1e+20");
        assert_eq!(fmt_g(123456789012345678.0, 17), "1.2345678901234568e+17");
        assert_eq!(fmt_g(-0.0, 17), "-0");
        assert_eq!(fmt_g(f64::INFINITY, 17), "inf");
        assert_eq!(fmt_g(-f64::NAN.abs(), 17), "-nan");
        assert_eq!(fmt_g(1e-5, 17), "1.0000000000000001e-05");
        assert_eq!(fmt_g(100000000000000000.0, 17), "1e+17");
        assert_eq!(fmt_g(99999999999999999.0, 17), "1e+17");
    }

    #[test]
    fn g14_matches_c() {
        assert_eq!(fmt_g(123456789012345.0, 14), "1.2345678901234e+14");
        assert_eq!(fmt_g(0.1, 14), "0.1");
        assert_eq!(fmt_g(1e100, 14), "1e+100");
        assert_eq!(fmt_g(2f64.powi(53), 14), "9.007199254741e+15");
        assert_eq!(fmt_g(1.5, 14), "1.5");
        assert_eq!(fmt_g(0.0001, 14), "0.0001");
        assert_eq!(fmt_g(0.00001, 14), "1e-05");
    }

    #[test]
    fn casts_like_x86() {
        assert_eq!(c_cast_i64(3.99), 3);
        assert_eq!(c_cast_i64(-3.99), -3);
        assert_eq!(c_cast_i64(f64::INFINITY), i64::MIN);
        assert_eq!(c_cast_i64(f64::NAN), i64::MIN);
        assert_eq!(c_cast_i64(2f64.powi(63)), i64::MIN);
        assert_eq!(c_cast_i64(-(2f64.powi(63))), i64::MIN);
        assert_eq!(c_cast_i64(9007199254740993.0), 9007199254740992);
    }

    #[test]
    fn parse_double_forms() {
        let ok = |s: &str, v: f64| {
            let got = parse_double(s.as_bytes()).unwrap_or_else(|| panic!("{s:?} rejected"));
            assert_eq!(got.to_bits(), v.to_bits(), "{s:?}");
        };
        ok("1", 1.0);
        ok("-1.5", -1.5);
        ok("+2", 2.0);
        ok(".5", 0.5);
        ok("5.", 5.0);
        ok("1e3", 1000.0);
        ok("1E-3", 0.001);
        ok("1.5e+2", 150.0);
        ok("inf", f64::INFINITY);
        ok("+inf", f64::INFINITY);
        ok("-inf", f64::NEG_INFINITY);
        ok("INF", f64::INFINITY);
        ok("-Infinity", f64::NEG_INFINITY);
        ok("0x10", 16.0);
        ok("0x1p-2", 0.25);
        ok("-0", -0.0);
        ok("1e-310", 1e-310);
        ok("1700000000123", 1_700_000_000_123.0);
        for bad in [
            "", " 1", "1 ", "\t1", "1\n", "nan", "NaN", "-nan", "abc", "1e", "1e+", "e1", ".", "-",
            "+", "1.2.3", "0x", "1e400", "-1e400", "1e-400", "infinit", "inf ", "1\0", "(1", "1,5",
        ] {
            assert_eq!(parse_double(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse_double(b"\xff"), None);
    }

    #[test]
    fn hex_float_rounding() {
        let p = |s: &str| parse_double(s.as_bytes()).map(f64::to_bits);
        assert_eq!(p("0x1p0"), Some(1.0f64.to_bits()));
        assert_eq!(p("0x1.00000000000008p0"), Some(1.0f64.to_bits()));
        assert_eq!(p("0x1.00000000000018p0"), Some(1.0f64.to_bits() + 2));
        assert_eq!(p("0x1.000000000000080001p0"), Some(1.0f64.to_bits() + 1));
        assert_eq!(p("0x1p-1074"), Some(1));
        assert_eq!(p("0x1p-1075"), None);
        assert_eq!(p("0x1.0000000000000000001p-1075"), Some(1));
        assert_eq!(p("0x1.fffffffffffffp1023"), Some(f64::MAX.to_bits()));
        assert_eq!(p("0x1.fffffffffffff8p1023"), None);
        assert_eq!(p("0x1p1024"), None);
        assert_eq!(
            p("0xffffffffffffffffffffffffp0"),
            Some((2f64).powi(96).to_bits())
        );
        assert_eq!(p("0x.8"), Some(0.5f64.to_bits()));
        assert_eq!(
            p("0x0.0000000000000000000000000000000000001p148"),
            Some(1.0f64.to_bits())
        );
    }

    #[test]
    fn format_double_examples() {
        assert_eq!(fmt(1.1), "1.1000000000000001");
        assert_eq!(fmt(3.0), "3");
        assert_eq!(fmt(-3.0), "-3");
        assert_eq!(fmt(1e20), "1e+20");
        assert_eq!(fmt(1e17), "1e+17");
        assert_eq!(fmt(1e16), "10000000000000000");
        assert_eq!(fmt(f64::INFINITY), "inf");
        assert_eq!(fmt(f64::NEG_INFINITY), "-inf");
        assert_eq!(fmt(0.0), "0");
        assert_eq!(fmt(-0.0), "-0");
        assert_eq!(fmt(0.5), "0.5");
        assert_eq!(fmt(0.1), "0.10000000000000001");
        assert_eq!(fmt(1.5e-5), "1.5e-05");
        assert_eq!(fmt(1e-4), "0.0001");
        assert_eq!(fmt(1e-5), "1.0000000000000001e-05");
        assert_eq!(fmt(123.456), "123.456");
        assert_eq!(fmt(2.5), "2.5");
        assert_eq!(fmt(1e100), "1e+100");
        assert_eq!(fmt(5e-324), "4.9406564584124654e-324");
        assert_eq!(fmt(f64::MAX), "1.7976931348623157e+308");
        assert_eq!(fmt(f64::NAN), "nan");
        let mut out = b"x".to_vec();
        format_double(2.0, &mut out);
        assert_eq!(out, b"x2");
    }

    #[test]
    fn format_double_agrees_with_c_printf() {
        let mut out = Vec::new();
        for &(bits, want) in FORMAT_TABLE {
            out.clear();
            let x = f64::from_bits(bits);
            format_double(x, &mut out);
            assert_eq!(
                std::str::from_utf8(&out).unwrap(),
                want,
                "bits {bits:#x} ({x:e})"
            );
        }
        assert!(FORMAT_TABLE.len() >= 200);
    }

    #[test]
    fn formatted_scores_round_trip() {
        let mut out = Vec::new();
        for &(bits, _) in FORMAT_TABLE {
            out.clear();
            let x = f64::from_bits(bits);
            format_double(x, &mut out);
            assert_eq!(parse_double(&out).map(f64::to_bits), Some(bits));
        }
    }

    proptest! {
        #[test]
        fn parse_double_matches_rust_on_decimals(mantissa in -1_000_000_000i64..1_000_000_000,
                                                frac in 0u32..1_000_000, exp in -330i32..330) {
            let text = format!("{mantissa}.{frac:06}e{exp}");
            let want: f64 = text.parse().unwrap();
            let got = parse_double(text.as_bytes());
            if want.is_infinite() || (want == 0.0 && (mantissa != 0 || frac != 0)) {
                prop_assert_eq!(got, None);
            } else {
                prop_assert_eq!(got.map(f64::to_bits), Some(want.to_bits()));
            }
        }

        #[test]
        fn format_round_trips_any_double(bits in any::<u64>()) {
            let x = f64::from_bits(bits);
            let mut out = Vec::new();
            format_double(x, &mut out);
            if x.is_nan() {
                prop_assert_eq!(out, b"nan".to_vec());
            } else {
                prop_assert_eq!(parse_double(&out).map(f64::to_bits), Some(bits));
                // At most 17 significant digits, and the shape of %g output.
                let digits = out.iter().take_while(|&&b| b != b'e').filter(|b| b.is_ascii_digit()).count();
                prop_assert!(digits <= 17 + 4, "{}", String::from_utf8_lossy(&out));
            }
        }
    }

    /// `(f64 bits, printf("%.17g"))`, generated with glibc.
    #[rustfmt::skip]
    const FORMAT_TABLE: &[(u64, &str)] = &[
    (0x0000000000000000, "0"),
    (0x8000000000000000, "-0"),
    (0x3ff0000000000000, "1"),
    (0xbff0000000000000, "-1"),
    (0x3ff199999999999a, "1.1000000000000001"),
    (0x3fb999999999999a, "0.10000000000000001"),
    (0x3fc999999999999a, "0.20000000000000001"),
    (0x3fd3333333333333, "0.29999999999999999"),
    (0x3fd5555555555555, "0.33333333333333331"),
    (0x3fe5555555555555, "0.66666666666666663"),
    (0x4008000000000000, "3"),
    (0x4024000000000000, "10"),
    (0x4059000000000000, "100"),
    (0x3fe0000000000000, "0.5"),
    (0x3fd0000000000000, "0.25"),
    (0x3fc0000000000000, "0.125"),
    (0x430c6bf526340000, "1000000000000000"),
    (0x4341c37937e08000, "10000000000000000"),
    (0x4376345785d8a000, "1e+17"),
    (0x43abc16d674ec800, "1e+18"),
    (0x437b69b4ba630f35, "1.2345678901234568e+17"),
    (0x4415af1d78b58c40, "1e+20"),
    (0x444b1ae4d6e2ef50, "1e+21"),
    (0x4480f0cf064dd592, "1e+22"),
    (0x44b52d02c7e14af6, "9.9999999999999992e+22"),
    (0x54b249ad2594c37d, "1e+100"),
    (0x7e37e43c8800759c, "1.0000000000000001e+300"),
    (0x7fe1ccf385ebc8a0, "1e+308"),
    (0x7fefffffffffffff, "1.7976931348623157e+308"),
    (0xffefffffffffffff, "-1.7976931348623157e+308"),
    (0x0010000000000000, "2.2250738585072014e-308"),
    (0x0000000000000001, "4.9406564584124654e-324"),
    (0x000fffffffffffff, "2.2250738585072009e-308"),
    (0x3f1a36e2eb1c432d, "0.0001"),
    (0x3ee4f8b588e368f1, "1.0000000000000001e-05"),
    (0x3eef75104d551d69, "1.5e-05"),
    (0x405edd2f1a9fbe77, "123.456"),
    (0xc05edd2f1a9fbe77, "-123.456"),
    (0x3f201f31f46ed246, "0.00012300000000000001"),
    (0x4132d68700000000, "1234567"),
    (0x4330000000000000, "4503599627370496"),
    (0x4340000000000000, "9007199254740992"),
    (0x43f0000000000000, "1.8446744073709552e+19"),
    (0x43e0000000000000, "9.2233720368547758e+18"),
    (0x3fd3333333333334, "0.30000000000000004"),
    (0x4059200000000000, "100.5"),
    (0x01a56e1fc2f8f359, "1e-300"),
    (0x400921f9f01b866e, "3.1415899999999999"),
    (0x4005bf0a8b145769, "2.7182818284590451"),
    (0x4345ee2a2eb5a5c4, "12345678901234568"),
    (0x43118b54f22aeb03, "1234567890123456.8"),
    (0x3e7ad7f29abcaf48, "9.9999999999999995e-08"),
    (0x3ddb7cdfd9d7bdbb, "1e-10"),
    (0x40f0000000000000, "65536"),
    (0x3f50000000000000, "0.0009765625"),
    (0x3dc2533fe68fd3d2, "3.3333333333333335e-11"),
    (0x3ef4f8b588e368f1, "2.0000000000000002e-05"),
    (0x3f0a36e2eb1c432d, "5.0000000000000002e-05"),
    (0x3f18e757928e0c9e, "9.5000000000000005e-05"),
    (0x3f23a92a30553261, "0.00014999999999999999"),
    (0x4045000000000000, "42"),
    (0xc045400000000000, "-42.5"),
    (0x4341c37937e08001, "10000000000000002"),
    (0x4376345785d89fff, "99999999999999984"),
    (0x3b5e392010175ee6, "1e-22"),
    (0x3b5e392010175ee5, "9.9999999999999993e-23"),
    (0x3b5e392010175ee7, "1.0000000000000002e-22"),
    (0xbb5e392010175ee6, "-1e-22"),
    (0x3b92e3b40a0e9b4f, "9.9999999999999991e-22"),
    (0x3b92e3b40a0e9b4e, "9.9999999999999972e-22"),
    (0x3b92e3b40a0e9b50, "1.0000000000000001e-21"),
    (0xbb92e3b40a0e9b4f, "-9.9999999999999991e-22"),
    (0x3bc79ca10c924223, "9.9999999999999995e-21"),
    (0x3bc79ca10c924222, "9.9999999999999979e-21"),
    (0x3bc79ca10c924224, "1.0000000000000001e-20"),
    (0xbbc79ca10c924223, "-9.9999999999999995e-21"),
    (0x3bfd83c94fb6d2ac, "9.9999999999999998e-20"),
    (0x3bfd83c94fb6d2ab, "9.9999999999999985e-20"),
    (0x3bfd83c94fb6d2ad, "1.0000000000000001e-19"),
    (0xbbfd83c94fb6d2ac, "-9.9999999999999998e-20"),
    (0x3c32725dd1d243ac, "1.0000000000000001e-18"),
    (0x3c32725dd1d243ab, "9.9999999999999988e-19"),
    (0x3c32725dd1d243ad, "1.0000000000000003e-18"),
    (0xbc32725dd1d243ac, "-1.0000000000000001e-18"),
    (0x3c670ef54646d497, "1.0000000000000001e-17"),
    (0x3c670ef54646d496, "9.9999999999999992e-18"),
    (0x3c670ef54646d498, "1.0000000000000002e-17"),
    (0xbc670ef54646d497, "-1.0000000000000001e-17"),
    (0x3c9cd2b297d889bc, "9.9999999999999998e-17"),
    (0x3c9cd2b297d889bb, "9.9999999999999986e-17"),
    (0x3c9cd2b297d889bd, "1.0000000000000001e-16"),
    (0xbc9cd2b297d889bc, "-9.9999999999999998e-17"),
    (0x3cd203af9ee75616, "1.0000000000000001e-15"),
    (0x3cd203af9ee75615, "9.9999999999999988e-16"),
    (0x3cd203af9ee75617, "1.0000000000000003e-15"),
    (0xbcd203af9ee75616, "-1.0000000000000001e-15"),
    (0x3d06849b86a12b9b, "1e-14"),
    (0x3d06849b86a12b9a, "9.9999999999999984e-15"),
    (0x3d06849b86a12b9c, "1.0000000000000002e-14"),
    (0xbd06849b86a12b9b, "-1e-14"),
    (0x3d3c25c268497682, "1e-13"),
    (0x3d3c25c268497681, "9.999999999999999e-14"),
    (0x3d3c25c268497683, "1.0000000000000002e-13"),
    (0xbd3c25c268497682, "-1e-13"),
    (0x3d719799812dea11, "9.9999999999999998e-13"),
    (0x3d719799812dea10, "9.9999999999999978e-13"),
    (0x3d719799812dea12, "1.0000000000000002e-12"),
    (0xbd719799812dea11, "-9.9999999999999998e-13"),
    (0x3da5fd7fe1796495, "9.9999999999999994e-12"),
    (0x3da5fd7fe1796494, "9.9999999999999978e-12"),
    (0x3da5fd7fe1796496, "1.0000000000000001e-11"),
    (0xbda5fd7fe1796495, "-9.9999999999999994e-12"),
    (0x3ddb7cdfd9d7bdba, "9.9999999999999991e-11"),
    (0x3ddb7cdfd9d7bdbc, "1.0000000000000002e-10"),
    (0xbddb7cdfd9d7bdbb, "-1e-10"),
    (0x3e112e0be826d695, "1.0000000000000001e-09"),
    (0x3e112e0be826d694, "9.9999999999999986e-10"),
    (0x3e112e0be826d696, "1.0000000000000003e-09"),
    (0xbe112e0be826d695, "-1.0000000000000001e-09"),
    (0x3e45798ee2308c3a, "1e-08"),
    (0x3e45798ee2308c39, "9.9999999999999986e-09"),
    (0x3e45798ee2308c3b, "1.0000000000000002e-08"),
    (0xbe45798ee2308c3a, "-1e-08"),
    (0x3e7ad7f29abcaf47, "9.9999999999999982e-08"),
    (0x3e7ad7f29abcaf49, "1.0000000000000001e-07"),
    (0xbe7ad7f29abcaf48, "-9.9999999999999995e-08"),
    (0x3eb0c6f7a0b5ed8d, "9.9999999999999995e-07"),
    (0x3eb0c6f7a0b5ed8c, "9.9999999999999974e-07"),
    (0x3eb0c6f7a0b5ed8e, "1.0000000000000002e-06"),
    (0xbeb0c6f7a0b5ed8d, "-9.9999999999999995e-07"),
    (0x3ee4f8b588e368f0, "9.9999999999999991e-06"),
    (0x3ee4f8b588e368f2, "1.0000000000000003e-05"),
    (0xbee4f8b588e368f1, "-1.0000000000000001e-05"),
    (0x3f1a36e2eb1c432c, "9.9999999999999991e-05"),
    (0x3f1a36e2eb1c432e, "0.00010000000000000002"),
    (0xbf1a36e2eb1c432d, "-0.0001"),
    (0x3f50624dd2f1a9fc, "0.001"),
    (0x3f50624dd2f1a9fb, "0.0009999999999999998"),
    (0x3f50624dd2f1a9fd, "0.0010000000000000002"),
    (0xbf50624dd2f1a9fc, "-0.001"),
    (0x3f847ae147ae147b, "0.01"),
    (0x3f847ae147ae147a, "0.0099999999999999985"),
    (0x3f847ae147ae147c, "0.010000000000000002"),
    (0xbf847ae147ae147b, "-0.01"),
    (0x3fb9999999999999, "0.099999999999999992"),
    (0x3fb999999999999b, "0.10000000000000002"),
    (0xbfb999999999999a, "-0.10000000000000001"),
    (0x3fefffffffffffff, "0.99999999999999989"),
    (0x3ff0000000000001, "1.0000000000000002"),
    (0x4023ffffffffffff, "9.9999999999999982"),
    (0x4024000000000001, "10.000000000000002"),
    (0xc024000000000000, "-10"),
    (0x4058ffffffffffff, "99.999999999999986"),
    (0x4059000000000001, "100.00000000000001"),
    (0xc059000000000000, "-100"),
    (0x408f400000000000, "1000"),
    (0x408f3fffffffffff, "999.99999999999989"),
    (0x408f400000000001, "1000.0000000000001"),
    (0xc08f400000000000, "-1000"),
    (0x40c3880000000000, "10000"),
    (0x40c387ffffffffff, "9999.9999999999982"),
    (0x40c3880000000001, "10000.000000000002"),
    (0xc0c3880000000000, "-10000"),
    (0x40f86a0000000000, "100000"),
    (0x40f869ffffffffff, "99999.999999999985"),
    (0x40f86a0000000001, "100000.00000000001"),
    (0xc0f86a0000000000, "-100000"),
    (0x412e848000000000, "1000000"),
    (0x412e847fffffffff, "999999.99999999988"),
    (0x412e848000000001, "1000000.0000000001"),
    (0xc12e848000000000, "-1000000"),
    (0x416312d000000000, "10000000"),
    (0x416312cfffffffff, "9999999.9999999981"),
    (0x416312d000000001, "10000000.000000002"),
    (0xc16312d000000000, "-10000000"),
    (0x4197d78400000000, "100000000"),
    (0x4197d783ffffffff, "99999999.999999985"),
    (0x4197d78400000001, "100000000.00000001"),
    (0xc197d78400000000, "-100000000"),
    (0x41cdcd6500000000, "1000000000"),
    (0x41cdcd64ffffffff, "999999999.99999988"),
    (0x41cdcd6500000001, "1000000000.0000001"),
    (0xc1cdcd6500000000, "-1000000000"),
    (0x4202a05f20000000, "10000000000"),
    (0x4202a05f1fffffff, "9999999999.9999981"),
    (0x4202a05f20000001, "10000000000.000002"),
    (0xc202a05f20000000, "-10000000000"),
    (0x42374876e8000000, "100000000000"),
    (0x42374876e7ffffff, "99999999999.999985"),
    (0x42374876e8000001, "100000000000.00002"),
    (0xc2374876e8000000, "-100000000000"),
    (0x426d1a94a2000000, "1000000000000"),
    (0x426d1a94a1ffffff, "999999999999.99988"),
    (0x426d1a94a2000001, "1000000000000.0001"),
    (0xc26d1a94a2000000, "-1000000000000"),
    (0x42a2309ce5400000, "10000000000000"),
    (0x42a2309ce53fffff, "9999999999999.998"),
    (0x42a2309ce5400001, "10000000000000.002"),
    (0xc2a2309ce5400000, "-10000000000000"),
    (0x42d6bcc41e900000, "100000000000000"),
    (0x42d6bcc41e8fffff, "99999999999999.984"),
    (0x42d6bcc41e900001, "100000000000000.02"),
    (0xc2d6bcc41e900000, "-100000000000000"),
    (0x430c6bf52633ffff, "999999999999999.88"),
    (0x430c6bf526340001, "1000000000000000.1"),
    (0xc30c6bf526340000, "-1000000000000000"),
    (0x4341c37937e07fff, "9999999999999998"),
    (0xc341c37937e08000, "-10000000000000000"),
    (0x4376345785d8a001, "1.0000000000000002e+17"),
    (0xc376345785d8a000, "-1e+17"),
    (0x43abc16d674ec7ff, "9.9999999999999987e+17"),
    (0x43abc16d674ec801, "1.0000000000000001e+18"),
    (0xc3abc16d674ec800, "-1e+18"),
    (0x43e158e460913d00, "1e+19"),
    (0x43e158e460913cff, "9.999999999999998e+18"),
    (0x43e158e460913d01, "1.0000000000000002e+19"),
    (0xc3e158e460913d00, "-1e+19"),
    (0x4415af1d78b58c3f, "9.9999999999999984e+19"),
    (0x4415af1d78b58c41, "1.0000000000000002e+20"),
    (0xc415af1d78b58c40, "-1e+20"),
    (0x444b1ae4d6e2ef4f, "9.9999999999999987e+20"),
    (0x444b1ae4d6e2ef51, "1.0000000000000001e+21"),
    (0xc44b1ae4d6e2ef50, "-1e+21"),
    (0x4480f0cf064dd591, "9.9999999999999979e+21"),
    (0x4480f0cf064dd593, "1.0000000000000002e+22"),
    (0xc480f0cf064dd592, "-1e+22"),
    (0x3eb0000000000000, "9.5367431640625e-07"),
    (0x3ec8000000000000, "2.86102294921875e-06"),
    (0x3ed4000000000000, "4.76837158203125e-06"),
    (0x3edc000000000000, "6.67572021484375e-06"),
    (0x3ea0000000000000, "4.76837158203125e-07"),
    (0x3eb8000000000000, "1.430511474609375e-06"),
    (0x3ec4000000000000, "2.384185791015625e-06"),
    (0x3ecc000000000000, "3.337860107421875e-06"),
    (0x3e90000000000000, "2.384185791015625e-07"),
    (0x3ea8000000000000, "7.152557373046875e-07"),
    (0x3eb4000000000000, "1.1920928955078125e-06"),
    (0x3ebc000000000000, "1.6689300537109375e-06"),
    (0x3e80000000000000, "1.1920928955078125e-07"),
    (0x3e98000000000000, "3.5762786865234375e-07"),
    (0x3ea4000000000000, "5.9604644775390625e-07"),
    (0x3eac000000000000, "8.3446502685546875e-07"),
    (0x3e70000000000000, "5.9604644775390625e-08"),
    (0x3e88000000000000, "1.7881393432617188e-07"),
    (0x3e94000000000000, "2.9802322387695312e-07"),
    (0x3e9c000000000000, "4.1723251342773438e-07"),
    (0x3e60000000000000, "2.9802322387695312e-08"),
    (0x3e78000000000000, "8.9406967163085938e-08"),
    (0x3e84000000000000, "1.4901161193847656e-07"),
    (0x3e8c000000000000, "2.0861625671386719e-07"),
    (0x3e50000000000000, "1.4901161193847656e-08"),
    (0x3e68000000000000, "4.4703483581542969e-08"),
    (0x3e74000000000000, "7.4505805969238281e-08"),
    (0x3e7c000000000000, "1.0430812835693359e-07"),
    (0x3e40000000000000, "7.4505805969238281e-09"),
    (0x3e58000000000000, "2.2351741790771484e-08"),
    (0x3e64000000000000, "3.7252902984619141e-08"),
    (0x3e6c000000000000, "5.2154064178466797e-08"),
    (0x3e30000000000000, "3.7252902984619141e-09"),
    (0x3e48000000000000, "1.1175870895385742e-08"),
    (0x3e54000000000000, "1.862645149230957e-08"),
    (0x3e5c000000000000, "2.6077032089233398e-08"),
    (0x3e20000000000000, "1.862645149230957e-09"),
    (0x3e38000000000000, "5.5879354476928711e-09"),
    (0x3e44000000000000, "9.3132257461547852e-09"),
    (0x3e4c000000000000, "1.3038516044616699e-08"),
    (0x3e10000000000000, "9.3132257461547852e-10"),
    (0x3e28000000000000, "2.7939677238464355e-09"),
    (0x3e34000000000000, "4.6566128730773926e-09"),
    (0x3e3c000000000000, "6.5192580223083496e-09"),
    (0x4310000000000000, "1125899906842624"),
    (0x4320000000000000, "2251799813685248"),
    (0x4350000000000000, "18014398509481984"),
    (0x4360000000000000, "36028797018963968"),
    (0x4370000000000000, "72057594037927936"),
    (0x4380000000000000, "1.4411518807585587e+17"),
    (0x4390000000000000, "2.8823037615171174e+17"),
    (0x43a0000000000000, "5.7646075230342349e+17"),
    (0x43b0000000000000, "1.152921504606847e+18"),
    (0x43c0000000000000, "2.305843009213694e+18"),
    (0x43d0000000000000, "4.6116860184273879e+18"),
    (0x4400000000000000, "3.6893488147419103e+19"),
    (0x4410000000000000, "7.3786976294838206e+19"),
    (0x4420000000000000, "1.4757395258967641e+20"),
    (0x4430000000000000, "2.9514790517935283e+20"),
    (0x4440000000000000, "5.9029581035870565e+20"),
    (0x4450000000000000, "1.1805916207174113e+21"),
    (0xdc1b77ae0bf34dad, "-4.9911105725155504e+135"),
    (0x64f0eeb9026e6076, "1.715373926431966e+178"),
    (0x7b07ce91e5906136, "4.4251604027143375e+284"),
    (0x305f050c368dcc74, "1.0715660391465826e-75"),
    (0x2ceb16e0a1c54aec, "2.5973481493288907e-92"),
    (0x97101dce4e7bfb79, "-1.3475090132806154e-197"),
    (0x9ad2e144d6e8f2cf, "-1.8199673040271701e-179"),
    (0xd9aa792e1af470ea, "-8.7501862419475167e+123"),
    (0xddaa4e85b0d6e28b, "-1.603964615428183e+143"),
    (0x8f8ea9d349428d8e, "-9.6439157120605518e-234"),
    (0x08f474ffb8e8ab15, "1.5860846119992697e-265"),
    (0x2ead854756d71f03, "7.5979545248927379e-84"),
    (0x55bc79f8ada711fd, "1.0204796945730538e+105"),
    (0x0e1fc49bd63b809e, "1.1910593176322935e-240"),
    (0xb92199e83f5a101f, "-1.6949339131286959e-33"),
    (0xc5765079fc5d43ff, "-4.3162252145519944e+26"),
    (0x353cfc387dfae6b8, "3.0261999441573203e-52"),
    (0xa32edabf5585bd75, "-3.2386966814916609e-139"),
    (0xfc5639b16b714b4f, "-8.6637258373062409e+290"),
    (0x92fb2dcfc8ae9a19, "-3.0797526843217145e-217"),
    (0x544b0ec76d00616d, "1.15589923121874e+98"),
    (0xbcbb9b7e9a319aef, "-3.8312964673168891e-16"),
    (0x0f1a50d59c0aa21a, "6.4660538264326993e-236"),
    (0x80ae2120826571de, "-2.1452846540129615e-305"),
    (0x0e1ecd02ed7c0cbd, "1.1547975125429853e-240"),
    (0x0d0981e8c1fa7be4, "7.2962671794587506e-246"),
    (0xdc86b3d3cdbdf613, "-5.2803264785067434e+137"),
    (0x6d0844c269e7693f, "1.6732138965686944e+217"),
    (0x3681da7f6993082d, "3.9090767912460248e-46"),
    (0x5b928e2c987d857d, "1.3170664051174186e+133"),
    (0x6c716e1e6ced8137, "2.3471351557786169e+214"),
    (0xccb870213498f7f5, "-3.9270362652067501e+61"),
    (0x9f07b27a78869b5a, "-3.3710794864173703e-159"),
    (0xb0ba91e47f6200ec, "-5.8742290717003852e-74"),
    (0xc72b4c36d0db7fed, "-7.0868910634667276e+34"),
    (0x35f305b0c0fc9252, "8.1347104811121388e-49"),
    (0x7ac78fb373ffbff6, "2.7371952383911999e+283"),
    (0x8e39b81de71b7d09, "-3.8571011713974369e-240"),
    (0x59a69ba126cd29b3, "7.4725527832150123e+123"),
    (0xbfcbffff0cbcbf20, "-0.21874988672197393"),
    (0x2d1ce28856d20e5e, "2.2156037317971751e-91"),
    (0x572a15ed48b3fdc2, "7.8416978336253442e+111"),
    (0x32b911499417aab9, "2.3803041954013153e-64"),
    (0x17a8ec88e0da0bac, "1.0669643833474769e-194"),
    (0x0cc88eab2f9ad4bb, "4.3902997915267284e-247"),
    (0xbc3a5b419a43afd2, "-1.4287870889761718e-18"),
    (0x6f0f3414c47c9c0d, "9.239942182940311e+226"),
    (0xe71a7567edb8c675, "-4.6049449625872434e+188"),
    (0x63674cf841ee8ab9, "7.0348661639031139e+170"),
    (0xe375837da840d9ec, "-1.2990664698521692e+171"),
    (0x578eb22e1ea5a35f, "5.9056866295828163e+113"),
    (0x4efa582ee029dfd9, "2.9091650704676072e+72"),
    (0xf3b363e938295a26, "-2.1692042628035588e+249"),
    (0x2e3a4ef3496f4112, "5.2900001119406624e-86"),
    (0xb809d78e2a2f9b10, "-9.4928563469063704e-39"),
    (0x46217f104eb30026, "6.9310153672474097e+29"),
    (0x8947b5fefda6afa6, "-5.8827752295078533e-264"),
    (0x4a3ae29b2af0cb79, "3.9292734840969675e+49"),
    (0xbfd0273b10a6d4af, "-0.25239445329800508"),
    (0xed0a00eb302b52c6, "-1.7928344098460697e+217"),
    (0x3c0a45ad6d0175e3, "1.7802719962921167e-19"),
    (0x5bec25a986aa6fc8, "6.393254796400403e+134"),
    (0x904bc2dda0ebc917, "-3.5762796481017719e-230"),
    (0x459ae6d82ef0bb45, "2.0814210227308495e+27"),
    (0xd8f30b16630d2b73, "-3.0734116139155754e+120"),
    (0x7110b72632258de5, "4.2518121963593821e+236"),
    (0x543b14bc79e21fbe, "5.7844666878803994e+97"),
    (0xb3afb674d263f401, "-9.8674370717268507e-60"),
    (0x992a5514fae813a9, "-1.8912213053669309e-187"),
    (0x65950d0578f009ce, "2.1837722757113602e+181"),
    (0x3e96cf58cc131242, "3.3989472221173975e-07"),
    (0x436d2e52659f6cb1, "65709646014014856"),
    (0x3e2a1a116bb7e051, "3.0386527441352461e-09"),
    (0x40c0d9fba04b1216, "8627.9658292616186"),
    (0x419f2739f25da1cf, "130666108.59143756"),
    (0x4498255609425dc1, "2.8506381169732807e+22"),
    (0x437598a686163cc4, "97261047880338496"),
    (0x3c81efc6858669cd, "3.1115080909283856e-17"),
    (0x415a5a1636f6913a, "6907992.8587992731"),
    (0x41258e2afa1f52fe, "706325.48852023459"),
    (0x3cc5cbd2bbe22045, "6.0496564131597909e-16"),
    (0x3c666a375793aa31, "9.7209163259674999e-18"),
    (0x3e77aaf72b3ff87b, "8.8169552381308694e-08"),
    (0x40478a36e30e86db, "47.079800016492037"),
    (0x43e0acd55361605c, "9.612558037550293e+18"),
    (0x40ef744cdb7cefd7, "64418.401792972982"),
    (0x3ec5ecaa9cc4d87a, "2.6136014864798666e-06"),
    (0x3bbb3f18697bc24f, "5.7696636521279063e-21"),
    (0x3c00f776be3d7359, "1.1497053056154551e-19"),
    (0x44090e66a2a91c5e, "5.777578718176292e+19"),
    (0x3b27ce872f1fd9cd, "9.8462411254259127e-24"),
    (0x44e27153cc417995, "6.9674493636138909e+23"),
    (0x3ab49061672b51f5, "6.6445823220241282e-26"),
    (0x3bb9a7fa16040710, "5.4329031540802931e-21"),
    (0x429a7b69048e25a6, "7279336301449.4121"),
    (0x3c2641995f67f7bf, "6.0325677101723545e-19"),
    (0x3cb17057437931ef, "2.4201240367807075e-16"),
    (0x4118fa0e0bce4079, "409219.51152897585"),
    (0x43008c3590b46ef7, "582220164533726.88"),
    (0x3b55d47e6442debd, "7.2229588380913391e-23"),
    (0x3f4057f9832a0358, "0.00049876864643759022"),
    (0x3b4b70aaf99a0775, "4.5395852129797333e-23"),
    (0x44a95732f49cb2db, "5.9833850269021034e+22"),
    (0x4395c351f0e60914, "3.9204679758710502e+17"),
    (0x43a09fd706f8d9bc, "5.9895622542431795e+17"),
    (0x44b42a6ac5946388, "9.5229786627182342e+22"),
    (0x3aa41e85d27d4e99, "3.250436826764269e-26"),
    (0x3b1ab2521aace285, "5.5207203116868817e-24"),
    (0x3b5ce860c60df604, "9.5647644147215473e-23"),
    (0x4254330f5b50054c, "347023961408.08276"),
    (0x40f31c1000000000, "78273"),
    (0x4360d27aa0cc3528, "37880190023608640"),
    (0x41c5b82b70000000, "728782560"),
    (0x407ca00000000000, "458"),
    (0x4172e148a0000000, "19797130"),
    (0x41f6d230f5a00000, "6125981530"),
    (0x41fcdd4959100000, "7748228497"),
    (0x419dd44ff8000000, "125113342"),
    (0x4188f63ae8000000, "52348765"),
    (0x42abd4747b2a8000, "15299650622784"),
    (0x41a6a2ecf4000000, "189888122"),
    (0x4254b024615b4000, "355418080621"),
    (0x432ed5e454f6f6b6, "4339712978025307"),
    (0x425ca951c4ea4000, "492399170473"),
    (0x4197f7c898000000, "100528678"),
    (0x4288938880659800, "3377741171891"),
    (0x42caf35e79477400, "59265128763112"),
    (0x4246bc04dd2b0000, "195287431766"),
    (0x41d7685c96400000, "1570861657"),
    (0x412167ea00000000, "570357"),
    ];
}
