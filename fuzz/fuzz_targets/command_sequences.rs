//! Whole command sequences through `cmd::execute` on an in-process server state: arbitrary
//! argument vectors (command names drawn from the real command table, arguments from a small
//! dictionary of interesting values or raw bytes) must never panic, and every reply must
//! encode to well-formed RESP2 and RESP3.
//!
//! Input format, byte by byte: a command starts with a byte choosing its name (an index into
//! the table) and a byte giving its argument count (0..8); each argument is a byte that either
//! picks a dictionary word (< 0xC0) or gives the length of raw bytes that follow.

#![no_main]

use std::sync::{Arc, OnceLock};

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use sluice::client::ClientState;
use sluice::cmd::{Shared, execute};
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

/// Commands left out: they block, sleep, stop the server or run scripts (time limits of
/// seconds), none of which is what this target looks at.
const SKIP: &[&str] = &[
    "shutdown", "debug", "monitor", "eval", "evalsha", "script", "function",
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
        let mut shared = Shared::new(base.clone(), Clock::frozen());
        for spec in sluice::cmd::testmode::COMMANDS {
            shared.table.remove(spec.name);
        }
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

fn check_encoding(reply: &sluice::protocol::Reply) {
    for resp in [2u8, 3] {
        let mut out = BytesMut::new();
        reply.encode(resp, &mut out);
        let ok = if resp == 2 {
            matches!(
                redis_protocol::resp2::decode::decode(&out),
                Ok(Some((_, n))) if n == out.len()
            )
        } else {
            matches!(
                redis_protocol::resp3::decode::complete::decode(&out),
                Ok(Some((_, n))) if n == out.len()
            ) || matches!(
                // RESP3 null is fine; the decoder reads RESP2-only forms as errors.
                redis_protocol::resp2::decode::decode(&out),
                Ok(Some((_, n))) if n == out.len()
            )
        };
        assert!(ok, "reply is not one well-formed RESP{resp} frame: {out:?}");
    }
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
        client.sleep = None;
        count += 1;
        if count > 64 {
            break;
        }
    }
    sluice::cmd::txn::unwatch_client(shared, &mut client);
    shared.clients.unregister(info.id);
});
