//! Hostile clients: one test per class of attack from issue 14 (except the Lua sandbox,
//! tested in `scripting.rs`). Each test ends by checking that the server is still alive and
//! serving another client. Error texts are also compared with Redis 7.0.15 in
//! `tests/diff/hostile.txt`; here the behaviour that a transcript cannot show is checked
//! (timing-shaped inputs, panics, connection ends, signals, MONITOR backlog).

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::proc::SluiceProcess;
use crate::support::{Conn, RedisServer, encode_command, sluice};

/// A fresh connection answers PING: the server survived.
fn assert_alive(addr: SocketAddr) {
    let mut c = Conn::connect(addr);
    assert_eq!(
        c.cmd(&[b"PING"]),
        b"+PONG\r\n",
        "the server must still serve"
    );
}

/// Waits (briefly, polling) until `cond` holds; panics with `what` if it never does.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn keys(con: &mut redis::Connection, pattern: &[u8]) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = redis::cmd("KEYS").arg(pattern).query(con).unwrap();
    v.sort();
    v
}

/// Glob patterns: the same answers as Redis on thousands of patterns (brackets, ranges,
/// escapes, `^`, unterminated classes, NUL bytes), Redis's nesting cap, and no exponential
/// time for `*x*x*…y` against long keys, members and fields.
#[test]
fn glob_patterns_match_redis_and_stay_bounded() {
    let redis_server = RedisServer::start();
    let server = sluice();
    let mut r = redis::Client::open(format!("redis://{}/", redis_server.addr()))
        .unwrap()
        .get_connection()
        .unwrap();
    let mut s = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let names: &[&[u8]] = &[
        b"a", b"ab", b"abc", b"b", b"*", b"?", b"[", b"]", b"\\", b"^", b"-", b"a-b", b"A", b"AB",
        b"x[y", b"a\\b", b"aaaa", b"abab", b"ba", b"\x00a", b"a\x00", b"]a", b"Z",
    ];
    for con in [&mut r, &mut s] {
        for k in names {
            let _: () = redis::cmd("SET").arg(*k).arg(1).query(con).unwrap();
        }
        let _: () = redis::cmd("SET")
            .arg("a".repeat(1200))
            .arg(1)
            .query(con)
            .unwrap();
    }
    let alphabet: &[u8] = b"abAZ*?[]^-\\x\x00";
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut patterns: Vec<Vec<u8>> = [
        &b"*"[..],
        b"**",
        b"[",
        b"[^",
        b"[a",
        b"[]",
        b"[]a]",
        b"[^]a]",
        b"\\",
        b"a\\",
        b"[\\]]",
        b"[a-]",
        b"[-a]",
        b"[b-a]",
        b"[\\",
        b"[a\\",
        b"*[",
        b"?*",
        b"*?",
        b"a*b*",
        b"[^a]*",
        b"\\*",
        b"\\?",
        b"[A-z]",
        b"[z-A]",
    ]
    .iter()
    .map(|p| p.to_vec())
    .collect();
    for _ in 0..2000 {
        let len = 1 + (next() % 7) as usize;
        patterns.push(
            (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect(),
        );
    }
    // Redis caps the recursion of its matcher at 1000 nested stars.
    for n in [999, 1000, 1001] {
        patterns.push(b"*a".repeat(n));
        patterns.push([b"*a".repeat(n), b"*".to_vec()].concat());
    }
    for p in &patterns {
        assert_eq!(
            keys(&mut r, p),
            keys(&mut s, p),
            "KEYS {:?}",
            String::from_utf8_lossy(p)
        );
    }

    // Long subjects and a pattern that is exponential for a naive backtracking matcher.
    let long = "x".repeat(20_000);
    let evil = format!("{}y", "*x".repeat(300));
    let _: () = redis::cmd("SET").arg(&long).arg(1).query(&mut s).unwrap();
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg(&long)
        .arg(1)
        .query(&mut s)
        .unwrap();
    let _: () = redis::cmd("SADD")
        .arg("st")
        .arg(&long)
        .query(&mut s)
        .unwrap();
    let _: () = redis::cmd("ZADD")
        .arg("z")
        .arg(1)
        .arg(&long)
        .query(&mut s)
        .unwrap();
    let started = Instant::now();
    assert!(keys(&mut s, evil.as_bytes()).is_empty());
    for (cmd, key) in [
        ("SCAN", None),
        ("HSCAN", Some("h")),
        ("SSCAN", Some("st")),
        ("ZSCAN", Some("z")),
    ] {
        let mut c = redis::cmd(cmd);
        if let Some(k) = key {
            c.arg(k);
        }
        let v: redis::Value = c
            .arg(0)
            .arg("MATCH")
            .arg(&evil)
            .arg("COUNT")
            .arg(1000)
            .query(&mut s)
            .unwrap();
        assert!(matches!(v, redis::Value::Array(_)), "{cmd}: {v:?}");
    }
    eprintln!(
        "5 pathological glob matches over 20,000-byte subjects took {:?}",
        started.elapsed()
    );
    assert_alive(server.addr());
}

/// `no-multi` commands are refused inside MULTI (and the transaction aborted), never queued
/// and run by EXEC; MONITOR inside EXEC is refused as Redis refuses it; `noscript` commands
/// are refused from scripts.
#[test]
fn commands_refused_in_multi_or_scripts_never_run() {
    let server = sluice();
    let mut c = Conn::connect(server.addr());
    assert_eq!(c.cmd(&[b"MULTI"]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&[b"SHUTDOWN"]),
        b"-ERR Command not allowed inside a transaction\r\n"
    );
    assert_eq!(
        c.cmd(&[b"EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    assert_alive(server.addr());

    assert_eq!(c.cmd(&[b"MULTI"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"MONITOR"]), b"+QUEUED\r\n");
    assert_eq!(
        c.cmd(&[b"EXEC"]),
        b"*1\r\n-ERR MONITOR isn't allowed for DENY BLOCKING client\r\n"
    );
    // Still an ordinary connection, not a MONITOR stream.
    assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
    assert_eq!(server.shared().monitors.count(), 0);

    for cmd in ["shutdown", "multi", "monitor", "watch', 'k", "auth', 'x"] {
        let script = format!("return redis.pcall('{cmd}')");
        assert_eq!(
            c.cmd(&[b"EVAL", script.as_bytes(), b"0"]),
            b"-ERR This Redis command is not allowed from script\r\n",
            "{cmd}"
        );
    }
    assert_eq!(c.cmd(&[b"MULTI"]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&[b"EVAL", b"return redis.pcall('shutdown')", b"0"]),
        b"+QUEUED\r\n"
    );
    assert_eq!(
        c.cmd(&[b"EXEC"]),
        b"*1\r\n-ERR This Redis command is not allowed from script\r\n"
    );
    assert_alive(server.addr());
}

/// CONFIG SET refuses what Redis refuses, and the extremes it accepts (idle timeout, soft
/// output limit seconds, busy threshold, eviction samples, hz) are used without overflow.
#[test]
fn config_set_extremes_are_refused_or_harmless() {
    let server = sluice();
    let mut c = Conn::connect(server.addr());
    let set = |c: &mut Conn, args: &[&[u8]]| {
        let mut full: Vec<&[u8]> = vec![b"CONFIG", b"SET"];
        full.extend_from_slice(args);
        c.cmd(&full)
    };
    assert_eq!(
        set(&mut c, &[b"timeout", b"1", b"TIMEOUT", b"2"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'TIMEOUT') - duplicate parameter\r\n"
    );
    assert_eq!(
        set(&mut c, &[b"timeout", b"2147483648"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'timeout') - argument must be between 0 and 2147483647 inclusive\r\n"
    );
    assert_eq!(
        set(&mut c, &[b"proto-max-bulk-len", b"1"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - argument must be between 1048576 and 9223372036854775807 inclusive\r\n"
    );
    // The largest accepted values, all at once.
    assert_eq!(
        set(
            &mut c,
            &[
                b"timeout",
                b"2147483647",
                b"busy-reply-threshold",
                b"9223372036854775807",
                b"maxmemory-samples",
                b"2147483647",
                b"hz",
                b"2147483647",
                b"client-output-buffer-limit",
                b"normal 0 1 2147483647",
            ]
        ),
        b"+OK\r\n"
    );
    // Replies now pass the 1-byte soft limit (its deadline is 68 years away) under a
    // 68-year idle timeout.
    let big = vec![b'v'; 200 * 1024];
    assert_eq!(c.cmd(&[b"SET", b"big", &big]), b"+OK\r\n");
    for _ in 0..5 {
        assert_eq!(c.cmd(&[b"GET", b"big"]).len(), big.len() + 11);
    }
    // Eviction with 2^31 - 1 samples configured samples at most 64 keys at a time. The
    // memory counter is the whole test process's, so the replies are not checked: only that
    // every command is answered.
    assert_eq!(
        set(
            &mut c,
            &[b"maxmemory-policy", b"allkeys-random", b"maxmemory", b"1mb"]
        ),
        b"+OK\r\n"
    );
    for i in 0..200 {
        let key = format!("k{i}");
        c.cmd(&[b"SET", key.as_bytes(), &[b'x'; 1024]]);
    }
    assert_eq!(
        set(
            &mut c,
            &[
                b"maxmemory",
                b"0",
                b"maxmemory-policy",
                b"noeviction",
                b"timeout",
                b"0",
                b"client-output-buffer-limit",
                b"normal 0 0 0",
            ]
        ),
        b"+OK\r\n"
    );
    assert_alive(server.addr());
}

/// APPEND stops at proto-max-bulk-len with Redis's error, and a run of APPENDs on one large
/// value is amortised (the time is printed, not asserted).
#[test]
fn append_respects_proto_max_bulk_len_and_is_amortised() {
    let server = sluice();
    let mut c = Conn::connect(server.addr());
    assert_eq!(
        c.cmd(&[b"CONFIG", b"SET", b"proto-max-bulk-len", b"1mb"]),
        b"+OK\r\n"
    );
    let start = vec![b'x'; 1024 * 1024 - 10];
    assert_eq!(c.cmd(&[b"SET", b"k", &start]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"APPEND", b"k", b"12345"]), b":1048571\r\n");
    assert_eq!(
        c.cmd(&[b"APPEND", b"k", b"123456"]),
        b"-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"
    );
    assert_eq!(c.cmd(&[b"APPEND", b"k", b"1"]), b":1048572\r\n");
    assert_eq!(
        c.cmd(&[b"CONFIG", b"SET", b"proto-max-bulk-len", b"512mb"]),
        b"+OK\r\n"
    );
    // 16 MB appended 1 KB at a time, pipelined in batches.
    let chunk = vec![b'y'; 1024];
    let request = encode_command(&[b"APPEND", b"big", &chunk]);
    let started = Instant::now();
    for _ in 0..16 {
        let batch: Vec<u8> = request.repeat(1024);
        c.send_raw(&batch);
        for _ in 0..1024 {
            c.read_reply();
        }
    }
    eprintln!(
        "16,384 APPENDs of 1 KB onto one value: {:?}",
        started.elapsed()
    );
    assert_eq!(c.cmd(&[b"STRLEN", b"big"]), b":16777216\r\n");
    assert_alive(server.addr());
}

/// TTL, PTTL, EXPIRETIME, PEXPIRETIME and the test clock at the ends of i64 and u64: Redis's
/// answers or a clear error, never an overflow (these panicked in debug builds).
#[test]
fn time_at_the_edges_of_i64_and_u64() {
    let server = sluice();
    let mut c = Conn::connect(server.addr());
    c.cmd(&[b"CLOCK", b"FREEZE"]);
    assert_eq!(
        c.cmd(&[b"SET", b"k", b"v", b"PXAT", b"9223372036854775806"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&[b"EXPIRETIME", b"k"]), b":9223372036854776\r\n");
    assert_eq!(c.cmd(&[b"PEXPIRETIME", b"k"]), b":9223372036854775806\r\n");
    assert_eq!(
        c.cmd(&[b"SET", b"k2", b"v", b"EX", b"9223372036854775807"]),
        b"-ERR invalid expire time in 'set' command\r\n"
    );
    assert_eq!(
        c.cmd(&[b"CLOCK", b"ADVANCE", b"18446744073709551615"]),
        b"-ERR value is not an integer or out of range\r\n"
    );
    // Time runs to the end of u64 nanoseconds and stays there.
    c.cmd(&[b"CLOCK", b"ADVANCE", b"9223372036854775807"]);
    c.cmd(&[b"CLOCK", b"SET", b"9223372036854775807"]);
    for cmd in [&b"TTL"[..], b"PTTL", b"EXPIRETIME", b"PEXPIRETIME"] {
        let reply = c.cmd(&[cmd, b"k"]);
        assert_eq!(reply.first(), Some(&b':'), "{reply:?}");
    }
    assert_eq!(c.cmd(&[b"CLOCK", b"RESUME"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"CLOCK", b"NOW"]), b":18446744073709\r\n");
    assert_eq!(c.cmd(&[b"TIME"]).first(), Some(&b'*'));
    assert_eq!(c.cmd(&[b"SET", b"j", b"v", b"EX", b"100"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"TTL", b"j"]), b":100\r\n");
    assert_alive(server.addr());
}

/// Counts what connections hold in shared state: registry entries, WATCH entries, MONITOR
/// slots.
fn held(shared: &Arc<sluice::server::Shared>) -> (usize, usize, usize) {
    let watches = shared
        .keyspace
        .lock_all()
        .fold(0, |n, shard| n + shard.watch_count());
    (shared.clients.len(), watches, shared.monitors.count())
}

/// Whatever ends a connection (QUIT, a protocol error, a panic in its task, CLIENT KILL, a
/// closed socket, server shutdown), its registry entry, WATCHes and MONITOR slot are released.
#[test]
fn a_connection_that_ends_any_way_releases_what_it_held() {
    let server = sluice();
    let shared = server.shared();
    let mut admin = Conn::connect(server.addr());
    assert_eq!(admin.cmd(&[b"PING"]), b"+PONG\r\n");
    assert_eq!(held(&shared), (1, 0, 0));

    let watcher = |name: &str| {
        let mut c = Conn::connect(server.addr());
        assert_eq!(c.cmd(&[b"CLIENT", b"SETNAME", name.as_bytes()]), b"+OK\r\n");
        assert_eq!(c.cmd(&[b"WATCH", b"a", b"b", b"c"]), b"+OK\r\n");
        let id = c.cmd(&[b"CLIENT", b"ID"]);
        let id = String::from_utf8_lossy(&id[1..id.len() - 2]).into_owned();
        (c, id)
    };
    let released = |what: &str| {
        eventually(what, || held(&shared) == (1, 0, 0));
        assert_alive(server.addr());
    };

    let (mut c, _) = watcher("quit");
    assert_eq!(held(&shared), (2, 3, 0));
    assert_eq!(c.cmd(&[b"QUIT"]), b"+OK\r\n");
    released("QUIT");

    let (mut c, _) = watcher("protocol-error");
    c.send_raw(b"*1\r\n$-5\r\n");
    released("protocol error");

    let (mut c, _) = watcher("panic");
    assert_eq!(
        admin.cmd(&[b"FAULT", b"PANIC", b"COMMAND", b"get", b"CLIENT", b"panic"]),
        b"+OK\r\n"
    );
    c.send(&[b"GET", b"a"]);
    released("a panic in the connection task");

    let (_c, id) = watcher("killed");
    assert_eq!(
        admin.cmd(&[b"CLIENT", b"KILL", b"ID", id.as_bytes()]),
        b":1\r\n"
    );
    released("CLIENT KILL");

    let (c, _) = watcher("dropped");
    drop(c);
    released("the peer closing");

    for end in ["kill", "drop"] {
        let mut m = Conn::connect(server.addr());
        let id = m.cmd(&[b"CLIENT", b"ID"]);
        let id = String::from_utf8_lossy(&id[1..id.len() - 2]).into_owned();
        assert_eq!(m.cmd(&[b"MONITOR"]), b"+OK\r\n");
        eventually("the monitor joins", || held(&shared).2 == 1);
        if end == "kill" {
            admin.cmd(&[b"CLIENT", b"KILL", b"ID", id.as_bytes()]);
        } else {
            drop(m);
        }
        released("a MONITOR ending");
    }

    // Shutdown: every connection, watching or monitoring, is released.
    let (_w, _) = watcher("at-shutdown");
    let mut m = Conn::connect(server.addr());
    assert_eq!(m.cmd(&[b"MONITOR"]), b"+OK\r\n");
    eventually("both connected", || held(&shared) == (3, 3, 1));
    drop(server);
    assert_eq!(held(&shared), (0, 0, 0));
}

/// A MONITOR client that stops reading is closed once its backlog passes the hard output
/// limit; the writers it was watching keep being served.
#[test]
fn a_monitor_that_stops_reading_is_disconnected() {
    let server = sluice();
    let shared = server.shared();
    let mut c = Conn::connect(server.addr());
    assert_eq!(
        c.cmd(&[
            b"CONFIG",
            b"SET",
            b"client-output-buffer-limit",
            b"normal 1mb 0 0"
        ]),
        b"+OK\r\n"
    );
    let mut m = TcpStream::connect(server.addr()).unwrap();
    m.write_all(&encode_command(&[b"MONITOR"])).unwrap();
    eventually("the monitor joins", || shared.monitors.count() == 1);
    // About 40 MB of monitor lines (bounded), far over what the kernel buffers hold.
    let value = vec![b'v'; 10 * 1024];
    let request = encode_command(&[b"SET", b"k", &value]);
    for _ in 0..4 {
        c.send_raw(&request.repeat(1000));
        for _ in 0..1000 {
            assert_eq!(c.read_reply(), b"+OK\r\n");
        }
        if shared.monitors.count() == 0 {
            break;
        }
    }
    eventually("the stalled monitor is closed", || {
        shared.monitors.count() == 0
    });
    assert_eq!(
        c.cmd(&[
            b"CONFIG",
            b"SET",
            b"client-output-buffer-limit",
            b"normal 0 0 0"
        ]),
        b"+OK\r\n"
    );
    drop(m);
    assert_alive(server.addr());
}

/// Reads MONITOR lines until one contains `until`; returns them without the timestamp and
/// address prefix.
fn monitor_lines(m: &mut Conn, until: &str) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let line = m.read_reply();
        let text = String::from_utf8_lossy(&line).into_owned();
        let cmd = text
            .split_once("] ")
            .map_or(text.clone(), |(_, c)| c.to_string());
        let done = cmd.contains(until);
        out.push(cmd);
        if done {
            return out;
        }
    }
}

/// MONITOR shows AUTH and HELLO … AUTH with `(redacted)` arguments exactly as Redis does;
/// CONFIG SET requirepass is logged redacted in CMDLOG; requests refused before
/// authentication are not logged; wrong passwords of any length get WRONGPASS.
#[test]
fn secrets_never_reach_monitor_or_the_command_log() {
    let redis_server = RedisServer::start();
    let server = sluice();
    let requests: &[&[&[u8]]] = &[
        &[b"AUTH", b"secret1"],
        &[b"AUTH", b"user", b"secret2"],
        &[b"HELLO", b"2", b"AUTH", b"default", b"secret3"],
        &[
            b"HELLO", b"2", b"SETNAME", b"x", b"AUTH", b"default", b"secret4",
        ],
        &[b"SET", b"a", b"b"],
        &[b"ECHO", b"end-of-test"],
    ];
    let mut seen = Vec::new();
    for addr in [redis_server.addr(), server.addr()] {
        let mut m = Conn::connect(addr);
        assert_eq!(m.cmd(&[b"MONITOR"]), b"+OK\r\n");
        let mut c = Conn::connect(addr);
        for r in requests {
            c.cmd(r);
        }
        seen.push(monitor_lines(&mut m, "end-of-test"));
    }
    assert_eq!(seen[0], seen[1], "MONITOR lines: redis vs sluice");
    assert!(
        !seen[1].iter().any(|l| l.contains("secret")),
        "{:?}",
        seen[1]
    );

    let mut c = Conn::connect(server.addr());
    assert_eq!(c.cmd(&[b"CMDLOG", b"RESET"]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&[b"CONFIG", b"SET", b"requirepass", b"s3cret-pw"]),
        b"+OK\r\n"
    );
    let log = c.cmd(&[b"CMDLOG", b"GET"]);
    assert!(
        !String::from_utf8_lossy(&log).contains("s3cret-pw")
            && String::from_utf8_lossy(&log).contains("(redacted)"),
        "{}",
        String::from_utf8_lossy(&log)
    );
    let before = c.cmd(&[b"CMDLOG", b"LEN"]);
    let mut stranger = Conn::connect(server.addr());
    for _ in 0..50 {
        assert_eq!(
            stranger.cmd(&[b"SET", b"x", b"y"]),
            b"-NOAUTH Authentication required.\r\n"
        );
    }
    let long_wrong = vec![b'w'; 16_000];
    for pw in [&b"s"[..], b"s3cret-p", b"s3cret-pwX", &long_wrong] {
        assert_eq!(
            stranger.cmd(&[b"AUTH", pw]),
            b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
        );
    }
    // Only the AUTH attempts (redacted) were logged, none of the refused SETs.
    let after = c.cmd(&[b"CMDLOG", b"LEN"]);
    let n = |r: &[u8]| -> i64 { String::from_utf8_lossy(&r[1..r.len() - 2]).parse().unwrap() };
    assert_eq!(
        n(&after) - n(&before),
        4 + 1,
        "4 AUTHs and the first CMDLOG LEN"
    );
    assert_eq!(stranger.cmd(&[b"AUTH", b"s3cret-pw"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"CONFIG", b"SET", b"requirepass", b""]), b"+OK\r\n");
    assert_alive(server.addr());
}

/// The second SIGTERM ends the process at once even while a script is running (signals are
/// handled by a thread of their own, not by the runtime the script occupies).
#[test]
fn second_signal_exits_at_once_while_a_script_runs() {
    let mut server = SluiceProcess::start(&[]);
    let addr = server.addr();
    let mut other = Conn::connect(addr);
    assert_eq!(
        other.cmd(&[b"CONFIG", b"SET", b"busy-reply-threshold", b"100"]),
        b"+OK\r\n"
    );
    let mut script = Conn::connect(addr);
    script.send(&[b"EVAL", b"while true do end", b"0"]);
    eventually("the script is running", || {
        other.cmd(&[b"PING"]).starts_with(b"-BUSY")
    });
    server.signal(libc::SIGTERM);
    let second = Instant::now();
    server.signal(libc::SIGTERM);
    let status = server
        .wait_exit(Duration::from_secs(2))
        .expect("the second SIGTERM must end the process at once");
    eprintln!(
        "exited {status:?} {:?} after the second SIGTERM",
        second.elapsed()
    );
}

/// Every command (and subcommand) sluice shares with Redis 7.0.15 carries Redis's flags, the
/// ones the no-multi / noscript / no-auth / denyoom / admin checks read.
#[test]
fn command_flags_are_redis_flags() {
    fn text(v: &redis::Value) -> String {
        match v {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            redis::Value::SimpleString(s) => s.clone(),
            other => format!("{other:?}"),
        }
    }
    fn walk(entries: &[redis::Value], out: &mut std::collections::BTreeMap<String, Vec<String>>) {
        for e in entries {
            let redis::Value::Array(fields) = e else {
                continue;
            };
            let flags = match fields.get(2) {
                Some(redis::Value::Array(f) | redis::Value::Set(f)) => f.iter().map(text).collect(),
                _ => Vec::new(),
            };
            out.insert(text(&fields[0]), flags);
            if let Some(redis::Value::Array(subs)) = fields.get(9) {
                walk(subs, out);
            }
        }
    }
    let table = |url: String| {
        let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
        let redis::Value::Array(entries) = redis::cmd("COMMAND").query(&mut con).unwrap() else {
            panic!("COMMAND is not an array");
        };
        let mut out = std::collections::BTreeMap::new();
        walk(&entries, &mut out);
        out
    };
    let redis_server = RedisServer::start();
    let server = sluice();
    let theirs = table(format!("redis://{}/", redis_server.addr()));
    let ours = table(server.url());
    let mut compared = 0;
    for (name, flags) in &ours {
        if let Some(redis_flags) = theirs.get(name) {
            assert_eq!(flags, redis_flags, "flags of {name}");
            compared += 1;
        }
    }
    assert!(compared > 150, "only {compared} commands compared");
    assert_alive(server.addr());
}
