//! Whole command sequences through `engine::execute` on an in-process server state: arbitrary
//! argument vectors (command names drawn from the real command table, arguments from a small
//! dictionary of interesting values or raw bytes) must never panic, and every reply must
//! encode to well-formed RESP2 and RESP3 (a command that answers several times, such as
//! SUBSCRIBE a b, leaves several frames, each well formed).
//!
//! Input format, byte by byte: a command starts with a byte choosing its name (an index into
//! the table) and a byte giving its argument count (0..8); each argument is a byte that either
//! picks a dictionary word (< 0xC0) or gives the length of raw bytes that follow.

#![no_main]

use std::sync::{Arc, OnceLock};

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use sluice::client::ClientState;
use sluice::server::Shared;
use sluice::engine::execute;
use sluice::{Clock, Config};

/// Argument values that reach the interesting paths: keys of a few names, numbers at the
/// edges, scores and ranges, option words of many commands.
const WORDS: &[&str] = &[
    "k",
    "k2",
    "{t}a",
    "h",
    "l",
    "s",
    "z",
    "",
    "0",
    "1",
    "-1",
    "2",
    "10",
    "100",
    "-100",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551616",
    "1.5",
    "-0",
    "inf",
    "-inf",
    "+inf",
    "nan",
    "(1",
    "[a",
    "(a",
    "-",
    "+",
    "abc",
    "1e308",
    "0x10",
    " 1",
    "EX",
    "PX",
    "EXAT",
    "PXAT",
    "NX",
    "XX",
    "GT",
    "LT",
    "CH",
    "INCR",
    "KEEPTTL",
    "GET",
    "PERSIST",
    "LIMIT",
    "WITHSCORES",
    "BYSCORE",
    "BYLEX",
    "REV",
    "COUNT",
    "MATCH",
    "TYPE",
    "RANK",
    "MAXLEN",
    "LEFT",
    "RIGHT",
    "BEFORE",
    "AFTER",
    "ENCODING",
    "WITHVALUES",
    "*",
    "f",
    "v",
    "m",
    "a",
    "b",
];

/// Commands left out: they block, sleep, stop the server, run scripts (time limits of
/// seconds) or write files (SAVE, BGSAVE), none of which is what this target looks at.
const SKIP: &[&str] = &[
    "shutdown", "debug", "monitor", "eval", "evalsha", "script", "function", "save", "bgsave",
];

struct State {
    shared: Arc<Shared>,
    names: Vec<&'static str>,
    base: Config,
}

fn state() -> &'static State {
    static STATE: OnceLock<State> = OnceLock::new();
    STATE.get_or_init(|| {
        let base = Config {
            shards: 4,
            ..Config::default()
        };
        let shared = Shared::new(base.clone(), Clock::frozen());
        let names = shared
            .table
            .commands()
            .into_iter()
            .map(|s| s.name)
            .filter(|n| !SKIP.contains(n))
            .collect();
        State {
            shared: Arc::new(shared),
            names,
            base,
        }
    })
}

/// Decodes the next command; None at the end of the input.
fn next_command(data: &mut &[u8], names: &[&'static str]) -> Option<Vec<Bytes>> {
    let (&name, rest) = data.split_first()?;
    let (&argc, mut rest) = rest.split_first()?;
    let mut args = vec![Bytes::from_static(
        names[name as usize % names.len()].as_bytes(),
    )];
    for _ in 0..argc % 9 {
        let Some((&b, tail)) = rest.split_first() else {
            break;
        };
        rest = tail;
        if (b as usize) < 0xC0 {
            args.push(Bytes::from_static(
                WORDS[b as usize % WORDS.len()].as_bytes(),
            ));
        } else {
            let len = ((b - 0xC0) as usize).min(rest.len());
            args.push(Bytes::copy_from_slice(&rest[..len]));
            rest = &rest[len..];
        }
    }
    *data = rest;
    Some(args)
}

/// One RESP3 frame at the start of `buf`: the index just past it, or None if it is not well
/// formed. A structural check (types, lengths, line ends, numbers, element counts) rather
/// than `redis_protocol`'s decoder, because that decoder cannot hold a map inside a set,
/// and Redis 7.0 sends exactly that (COMMAND's key specs are a set of maps in RESP3).
fn resp3_frame(buf: &[u8], depth: usize) -> Option<usize> {
    if depth > 256 {
        return None;
    }
    let end = buf.windows(2).position(|w| w == b"\r\n")?;
    let (&kind, body) = buf[..end].split_first()?;
    if body.contains(&b'\r') || body.contains(&b'\n') {
        return None;
    }
    let text = std::str::from_utf8(body).ok();
    let after = end + 2;
    let count = || text.and_then(|t| t.parse::<i64>().ok());
    match kind {
        b'+' | b'-' => Some(after),
        b':' => count().map(|_| after),
        b'(' => {
            let t = text?;
            let digits = t.strip_prefix('-').unwrap_or(t);
            (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some(after)
        }
        b',' => {
            let t = text?;
            (matches!(t, "inf" | "-inf" | "nan") || t.parse::<f64>().is_ok()).then_some(after)
        }
        b'#' => matches!(body, b"t" | b"f").then_some(after),
        b'_' => body.is_empty().then_some(after),
        b'$' | b'=' | b'!' => {
            let n = count()?;
            if n == -1 && kind == b'$' {
                return Some(after);
            }
            let n = usize::try_from(n).ok()?;
            let data_end = after.checked_add(n)?;
            (buf.get(data_end..data_end + 2)? == b"\r\n").then_some(data_end + 2)
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = count()?;
            if n == -1 && kind == b'*' {
                return Some(after);
            }
            let n = usize::try_from(n).ok()?;
            let elements = if matches!(kind, b'%' | b'|') {
                2 * n
            } else {
                n
            };
            let mut at = after;
            for _ in 0..elements {
                at += resp3_frame(&buf[at..], depth + 1)?;
            }
            if kind == b'|' {
                // Attributes come before the frame they describe.
                at += resp3_frame(&buf[at..], depth + 1)?;
            }
            Some(at)
        }
        _ => None,
    }
}

fn check_encoding(reply: &sluice::protocol::Reply) {
    // Pub/sub commands answer once per argument (or not at all, when the confirmations go
    // through the push queue): each part must be one frame of its own.
    if let sluice::protocol::Reply::Multi(parts) = reply {
        parts.iter().for_each(check_encoding);
        return;
    }
    let mut out = BytesMut::new();
    reply.encode(2, &mut out);
    assert!(
        matches!(
            redis_protocol::resp2::decode::decode(&out),
            Ok(Some((_, n))) if n == out.len()
        ),
        "reply is not one well-formed RESP2 frame: {out:?}"
    );
    let mut out = BytesMut::new();
    reply.encode(3, &mut out);
    assert!(
        resp3_frame(&out, 0) == Some(out.len()),
        "reply is not one well-formed RESP3 frame: {out:?}"
    );
}

fuzz_target!(|data: &[u8]| {
    let st = state();
    let shared = &st.shared;
    // Every input starts from an empty keyspace and the base configuration.
    if let Ok(mut cfg) = shared.config.write() {
        *cfg = st.base.clone();
    }
    shared.live.store(&st.base);
    let info = shared
        .clients
        .register("127.0.0.1:1".into(), "127.0.0.1:6379".into());
    let mut client = ClientState::new(info.clone());
    client.authenticated = true;
    execute(shared, &mut client, &[Bytes::from_static(b"FLUSHALL")]);
    let mut rest = data;
    let mut count = 0;
    while let Some(args) = next_command(&mut rest, &st.names) {
        let reply = execute(shared, &mut client, &args);
        check_encoding(&reply);
        count += 1;
        if count > 64 {
            break;
        }
    }
    sluice::engine::txn::unwatch_client(shared, &mut client);
    shared.clients.unregister(info.id);
});
