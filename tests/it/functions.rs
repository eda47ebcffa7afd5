//! Redis 7 functions over the wire: FUNCTION DUMP payloads cross between redis-server 7.0.15
//! and sluice both ways, and FUNCTION KILL / BUSY while a function runs. (Replies and error
//! texts are compared with Redis in `tests/diff/functions.txt`.)

use std::time::{Duration, Instant};

use crate::support::{Conn, RedisServer, sluice};

fn bulk(reply: &[u8]) -> Vec<u8> {
    assert_eq!(
        reply.first(),
        Some(&b'$'),
        "{}",
        String::from_utf8_lossy(reply)
    );
    let end = reply.iter().position(|&c| c == b'\r').unwrap();
    let len: usize = std::str::from_utf8(&reply[1..end])
        .unwrap()
        .parse()
        .unwrap();
    reply[end + 2..end + 2 + len].to_vec()
}

/// A library long enough that Redis LZF-compresses it in its dump.
fn library(name: &str, func: &str) -> Vec<u8> {
    let mut code = format!("#!lua name={name}\n");
    for i in 0..20 {
        code.push_str(&format!(
            "local padding_{i} = 'the same words again and again'\n"
        ));
    }
    code.push_str(&format!(
        "redis.register_function{{function_name='{func}', callback=function(keys, args) \
         return redis.call('incrby', keys[1], args[1]) end}}\n"
    ));
    code.into_bytes()
}

fn list(c: &mut Conn) -> Vec<u8> {
    c.cmd(&[b"FUNCTION", b"LIST", b"WITHCODE"])
}

#[test]
fn function_dumps_cross_between_redis_and_sluice() {
    let redis = RedisServer::start();
    let server = sluice();
    let mut r = Conn::connect(redis.addr());
    let mut s = Conn::connect(server.addr());

    // Redis → sluice.
    assert_eq!(
        bulk(&r.cmd(&[b"FUNCTION", b"LOAD", &library("from_redis", "add")])),
        b"from_redis"
    );
    let payload = bulk(&r.cmd(&[b"FUNCTION", b"DUMP"]));
    assert_eq!(s.cmd(&[b"FUNCTION", b"RESTORE", &payload]), b"+OK\r\n");
    assert_eq!(list(&mut s), list(&mut r));
    assert_eq!(s.cmd(&[b"FCALL", b"add", b"1", b"k", b"5"]), b":5\r\n");

    // sluice → Redis, into an empty Redis.
    assert_eq!(
        bulk(&s.cmd(&[b"FUNCTION", b"LOAD", &library("from_sluice", "sub")])),
        b"from_sluice"
    );
    let payload = bulk(&s.cmd(&[b"FUNCTION", b"DUMP"]));
    assert_eq!(
        r.cmd(&[b"FUNCTION", b"RESTORE", &payload, b"FLUSH"]),
        b"+OK\r\n"
    );
    assert_eq!(
        r.cmd(&[
            b"FUNCTION",
            b"LIST",
            b"LIBRARYNAME",
            b"from_sluice",
            b"WITHCODE"
        ]),
        s.cmd(&[
            b"FUNCTION",
            b"LIST",
            b"LIBRARYNAME",
            b"from_sluice",
            b"WITHCODE"
        ]),
    );
    assert_eq!(r.cmd(&[b"FCALL", b"sub", b"1", b"k", b"2"]), b":2\r\n");
    // A payload with a bad checksum is refused alike.
    let mut bad = payload.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    let want = r.cmd(&[b"FUNCTION", b"RESTORE", &bad]);
    assert_eq!(s.cmd(&[b"FUNCTION", b"RESTORE", &bad]), want);
}

#[test]
fn function_kill_stops_a_running_function() {
    let server = sluice();
    let mut a = Conn::connect(server.addr());
    let mut b = Conn::connect(server.addr());
    let code =
        b"#!lua name=spin\nredis.register_function('spin', function() while true do end end)";
    assert_eq!(bulk(&a.cmd(&[b"FUNCTION", b"LOAD", code])), b"spin");
    // Past the busy threshold (5 s by default: lower it first).
    assert_eq!(
        b.cmd(&[b"CONFIG", b"SET", b"busy-reply-threshold", b"10"]),
        b"+OK\r\n"
    );
    a.send(&[b"FCALL", b"spin", b"0"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reply = b.cmd(&[b"PING"]);
        if reply.starts_with(b"-BUSY") {
            assert_eq!(
                reply,
                b"-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n"
            );
            break;
        }
        assert!(Instant::now() < deadline, "never BUSY");
        std::thread::sleep(Duration::from_millis(20));
    }
    let stats = b.cmd(&[b"FUNCTION", b"STATS"]);
    assert!(
        String::from_utf8_lossy(&stats).contains("spin"),
        "{}",
        String::from_utf8_lossy(&stats)
    );
    assert_eq!(
        b.cmd(&[b"SCRIPT", b"KILL"]),
        b"-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n"
    );
    assert_eq!(b.cmd(&[b"FUNCTION", b"KILL"]), b"+OK\r\n");
    let reply = a.read_reply();
    assert!(
        reply.starts_with(b"-ERR Script killed by user with SCRIPT KILL..."),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    assert_eq!(b.cmd(&[b"PING"]), b"+PONG\r\n");
}
