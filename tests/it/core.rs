//! The server foundation end to end with the Rust `redis` crate: RESP2 and RESP3, pipelining,
//! expiry driven by the test clock (lazy and reaped), the fixed-window seed workloads, and
//! that bad or slow clients neither crash the server nor stall others.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use redis::{Connection, Value};
use sluice::TestServer;

fn connect(server: &TestServer) -> Connection {
    redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

fn connect_resp3(server: &TestServer) -> Connection {
    let url = format!("redis://{}/?protocol=resp3", server.addr());
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

#[test]
fn strings_and_counters_over_resp2_and_resp3() {
    let server = TestServer::start().unwrap();
    for mut con in [connect(&server), connect_resp3(&server)] {
        let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
        let missing: Value = redis::cmd("GET").arg("nope").query(&mut con).unwrap();
        assert_eq!(missing, Value::Nil);
        let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
        let v: String = redis::cmd("GET").arg("k").query(&mut con).unwrap();
        assert_eq!(v, "v");
        let n: i64 = redis::cmd("INCRBY")
            .arg("c")
            .arg(41)
            .query(&mut con)
            .unwrap();
        assert_eq!(n, 41);
        let n: i64 = redis::cmd("INCR").arg("c").query(&mut con).unwrap();
        assert_eq!(n, 42);
        let err = redis::cmd("INCR")
            .arg("k")
            .query::<i64>(&mut con)
            .unwrap_err();
        assert_eq!(
            err.detail(),
            Some("value is not an integer or out of range")
        );
        let f: String = redis::cmd("INCRBYFLOAT")
            .arg("f")
            .arg("10.5")
            .query(&mut con)
            .unwrap();
        assert_eq!(f, "10.5");
        let f: String = redis::cmd("INCRBYFLOAT")
            .arg("f")
            .arg("0.1")
            .query(&mut con)
            .unwrap();
        assert_eq!(f, "10.6");
    }
}

#[test]
fn hello_3_switches_protocol_and_nulls() {
    let server = TestServer::start().unwrap();
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n*2\r\n$3\r\nGET\r\n$1\r\nx\r\n")
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"_\r\n") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n$5\r\nproto\r\n:3\r\n"), "{text}");
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.write_all(b"HELLO 4\r\n").unwrap();
    let n = s.read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"-NOPROTO unsupported protocol version\r\n");
}

#[test]
fn pipelines_get_every_reply_in_order() {
    let server = TestServer::start().unwrap();
    let mut con = connect(&server);
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.cmd("INCR").arg("p");
        pipe.cmd("SET").arg(format!("k{i}")).arg(i);
    }
    let replies: Vec<Value> = pipe.query(&mut con).unwrap();
    assert_eq!(replies.len(), 2000);
    assert_eq!(replies[1998], Value::Int(1000));
    let n: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(n, 1001);
}

#[test]
fn expiry_follows_the_test_clock_lazily_and_by_the_reaper() {
    let server = TestServer::start().unwrap();
    let mut con = connect(&server);
    let _: i64 = redis::cmd("CLOCK").arg("FREEZE").query(&mut con).unwrap();
    let _: () = redis::cmd("SET")
        .arg("a")
        .arg(1)
        .arg("PX")
        .arg(1500)
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("b")
        .arg(1)
        .arg("EX")
        .arg(10)
        .query(&mut con)
        .unwrap();
    for i in 0..100 {
        let _: () = redis::cmd("SET")
            .arg(format!("w{i}"))
            .arg(1)
            .arg("EX")
            .arg(2)
            .query(&mut con)
            .unwrap();
    }
    let ttl: i64 = redis::cmd("TTL").arg("a").query(&mut con).unwrap();
    assert_eq!(ttl, 2); // 1.5 s rounds to 2, as Redis
    let _: i64 = redis::cmd("CLOCK")
        .arg("ADVANCE")
        .arg(1500)
        .query(&mut con)
        .unwrap();
    let pttl: i64 = redis::cmd("PTTL").arg("a").query(&mut con).unwrap();
    assert_eq!(
        pttl, 0,
        "expire_at == now is still alive (Redis expires at now > at)"
    );
    let _: i64 = redis::cmd("CLOCK")
        .arg("ADVANCE")
        .arg(1)
        .query(&mut con)
        .unwrap();
    let v: Value = redis::cmd("GET").arg("a").query(&mut con).unwrap();
    assert_eq!(v, Value::Nil);
    // Advancing past the window reaps every due key before replying: DBSIZE is exact.
    let _: i64 = redis::cmd("CLOCK")
        .arg("ADVANCE")
        .arg(600)
        .query(&mut con)
        .unwrap();
    let n: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(n, 1);
    let info: String = redis::cmd("INFO").arg("stats").query(&mut con).unwrap();
    assert!(info.contains("expired_keys:101\r\n"), "{info}");
    let info: String = redis::cmd("INFO").arg("keyspace").query(&mut con).unwrap();
    assert!(
        info.contains("db0:keys=1,expires=1,avg_ttl=7899\r\n"),
        "{info}"
    );
}

#[test]
fn fixed_window_w3_and_w4() {
    let server = TestServer::start().unwrap();
    let mut con = connect(&server);
    let _: i64 = redis::cmd("CLOCK").arg("FREEZE").query(&mut con).unwrap();
    // W3: GET / SET EX / INCR, N = 5, P = 60.
    let key = "rate:reply:u1";
    let mut allowed = 0;
    for _ in 0..20 {
        let v: Option<i64> = redis::cmd("GET").arg(key).query(&mut con).unwrap();
        let ok = match v {
            None => {
                let _: () = redis::cmd("SET")
                    .arg(key)
                    .arg(1)
                    .arg("EX")
                    .arg(61)
                    .query(&mut con)
                    .unwrap();
                true
            }
            Some(_) => redis::cmd("INCR").arg(key).query::<i64>(&mut con).unwrap() <= 5,
        };
        allowed += ok as usize;
    }
    assert_eq!(allowed, 5);
    let _: i64 = redis::cmd("CLOCK")
        .arg("ADVANCE")
        .arg(61_001)
        .query(&mut con)
        .unwrap();
    let v: Option<i64> = redis::cmd("GET").arg(key).query(&mut con).unwrap();
    assert_eq!(v, None, "a new window starts after the key expires");

    // W4: EXISTS / SETEX / GET / INCRBY -1, one call per second for 60 s, P = 20, N = 5.
    let key = "u1reply";
    let mut allowed_at = Vec::new();
    for second in 0..60 {
        let exists: i64 = redis::cmd("EXISTS").arg(key).query(&mut con).unwrap();
        let ok = if exists == 0 {
            let _: () = redis::cmd("SETEX")
                .arg(key)
                .arg(20)
                .arg(4)
                .query(&mut con)
                .unwrap();
            true
        } else {
            let left: i64 = redis::cmd("GET").arg(key).query(&mut con).unwrap();
            if left > 0 {
                let _: i64 = redis::cmd("INCRBY")
                    .arg(key)
                    .arg(-1)
                    .query(&mut con)
                    .unwrap();
                true
            } else {
                false
            }
        };
        if ok {
            allowed_at.push(second);
        }
        let _: i64 = redis::cmd("CLOCK")
            .arg("ADVANCE")
            .arg(1000)
            .query(&mut con)
            .unwrap();
    }
    // SETEX 20 at second 0 expires at 20 000 ms; at exactly 20 000 the key still exists
    // (Redis expires a key once now > expire_at), so the next window opens at second 21.
    assert_eq!(
        allowed_at,
        vec![0, 1, 2, 3, 4, 21, 22, 23, 24, 25, 42, 43, 44, 45, 46]
    );
}

#[test]
fn protocol_errors_reply_then_close_and_the_server_goes_on() {
    let server = TestServer::start().unwrap();
    let cases: &[(&[u8], &[u8])] = &[
        (
            b"*abc\r\n",
            b"-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*1\r\n$x\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\n+foo\r\n",
            b"-ERR Protocol error: expected '$', got '+'\r\n",
        ),
        (
            b"SET \"a b\r\n",
            b"-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
    ];
    for (input, expected) in cases {
        let mut s = TcpStream::connect(server.addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(input).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        assert_eq!(
            &got[..],
            *expected,
            "input {:?}",
            String::from_utf8_lossy(input)
        );
    }
    let mut con = connect(&server);
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn a_client_sending_half_a_huge_frame_does_not_stall_others() {
    // Its own process: used_memory counts the whole process's allocations, and this test
    // binary runs other servers (and their Lua states) side by side.
    let server = crate::proc::SluiceProcess::start(&[]);
    let mut slow = TcpStream::connect(server.addr()).unwrap();
    // Declares a 100 MB argument and sends a little of it: nothing is pre-allocated and
    // nobody waits for it.
    slow.write_all(b"*2\r\n$3\r\nSET\r\n$100000000\r\nabc")
        .unwrap();
    let mut con = redis::Client::open(format!("redis://{}", server.addr()))
        .unwrap()
        .get_connection()
        .unwrap();
    for i in 0..100 {
        let n: i64 = redis::cmd("INCR").arg("x").query(&mut con).unwrap();
        assert_eq!(n, i + 1);
    }
    let info: String = redis::cmd("INFO").arg("memory").query(&mut con).unwrap();
    let used: usize = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    assert!(
        used < 50_000_000,
        "used_memory {used}: the declared length must not be allocated"
    );
}

#[test]
fn unknown_commands_and_arity_errors_use_redis_texts() {
    let server = TestServer::start().unwrap();
    let mut con = connect(&server);
    let err = redis::cmd("NOPE")
        .arg("a")
        .arg("b")
        .query::<()>(&mut con)
        .unwrap_err();
    assert_eq!(err.code(), Some("ERR"), "{err}");
    assert_eq!(
        err.detail(),
        Some("unknown command 'NOPE', with args beginning with: 'a' 'b' ")
    );
    let err = redis::cmd("GET").query::<()>(&mut con).unwrap_err();
    assert_eq!(
        err.detail(),
        Some("wrong number of arguments for 'get' command")
    );
    // Test-mode commands exist here but not on a normal server (checked in testmode tests).
    let v: i64 = redis::cmd("clock").arg("now").query(&mut con).unwrap();
    assert!(v > 1_700_000_000_000);
}

#[test]
fn requirepass_auth_and_noauth() {
    let server = TestServer::start_with(sluice::Config {
        requirepass: Some("s3cret".into()),
        ..sluice::Config::default()
    })
    .unwrap();
    let mut raw = crate::support::Conn::connect(server.addr());
    assert_eq!(
        raw.cmd(&[b"GET", b"k"]),
        b"-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(
        raw.cmd(&[b"AUTH", b"nope"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert!(
        raw.cmd(&[b"HELLO", b"3"])
            .starts_with(b"-NOAUTH HELLO must be called with the client already authenticated")
    );
    // Before AUTH, requests are capped at 10 arguments.
    let mut capped = crate::support::Conn::connect(server.addr());
    let many: Vec<&[u8]> = std::iter::repeat_n(&b"x"[..], 11).collect();
    assert_eq!(
        capped.cmd(&many),
        b"-ERR Protocol error: unauthenticated multibulk length\r\n"
    );
    assert_eq!(raw.cmd(&[b"AUTH", b"default", b"s3cret"]), b"+OK\r\n");
    assert_eq!(raw.cmd(&[b"SET", b"k", b"v"]), b"+OK\r\n");
    let mut other = crate::support::Conn::connect(server.addr());
    let hello = other.cmd(&[b"HELLO", b"3", b"AUTH", b"default", b"s3cret"]);
    assert!(
        hello.starts_with(b"%7\r\n"),
        "{}",
        String::from_utf8_lossy(&hello)
    );
    assert_eq!(other.cmd(&[b"GET", b"k"]), b"$1\r\nv\r\n");
    // RESET forgets the authentication.
    assert_eq!(other.cmd(&[b"RESET"]), b"+RESET\r\n");
    assert_eq!(
        other.cmd(&[b"GET", b"k"]),
        b"-NOAUTH Authentication required.\r\n"
    );
}

/// SCAN's guarantee (Redis's): a key present for the whole scan is returned at least once,
/// whatever comes and goes meanwhile. The churn between calls makes the tables grow (moving
/// entries between buckets), which restarts a shard's walk.
#[test]
fn scan_returns_every_key_while_keys_come_and_go() {
    let server = TestServer::start().unwrap();
    let mut con = connect(&server);
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.cmd("SET").arg(format!("stay:{i}")).arg(i).ignore();
    }
    let _: () = pipe.query(&mut con).unwrap();
    let mut seen = std::collections::HashMap::new();
    let mut cursor: u64 = 0;
    let mut calls = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(37)
            .query(&mut con)
            .unwrap();
        for k in keys {
            *seen.entry(k).or_insert(0) += 1;
        }
        // Churn between calls: keys that are not present for the whole scan, enough of
        // them to grow the tables, and deletions of the previous ones.
        let mut churn = redis::pipe();
        for j in 0..20 {
            churn
                .cmd("SET")
                .arg(format!("churn:{calls}:{j}"))
                .arg(1)
                .ignore();
            if calls > 0 {
                churn
                    .cmd("DEL")
                    .arg(format!("churn:{}:{j}", calls - 1))
                    .ignore();
            }
        }
        let _: () = churn.query(&mut con).unwrap();
        calls += 1;
        if next == 0 {
            break;
        }
        cursor = next;
        assert!(calls < 1000, "SCAN never finished");
    }
    for i in 0..1000 {
        assert!(
            seen.contains_key(&format!("stay:{i}")),
            "stay:{i} never returned"
        );
    }
    assert!(calls >= 1000 / 37, "COUNT bounds each batch: {calls} calls");
}

/// Without churn each key comes exactly once; cursors stay below 2^53, so a script that
/// scans with `tonumber(cursor)` (as Lua code does) walks the keyspace as a client does.
#[test]
fn scan_without_churn_returns_each_key_once_and_scripts_can_scan() {
    let server = TestServer::start().unwrap();
    let mut con = connect(&server);
    let mut pipe = redis::pipe();
    for i in 0..2000 {
        pipe.cmd("SET").arg(format!("k:{i}")).arg(i).ignore();
    }
    let _: () = pipe.query(&mut con).unwrap();
    let mut seen = std::collections::HashMap::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(50)
            .query(&mut con)
            .unwrap();
        assert!(next < 1 << 53, "cursor {next}");
        assert!(keys.len() <= 50 * 10);
        for k in keys {
            *seen.entry(k).or_insert(0) += 1;
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), 2000);
    assert!(seen.values().all(|&n| n == 1), "a key returned twice");
    let script = r#"
local cursor, n = "0", 0
repeat
  local r = redis.call('SCAN', tonumber(cursor), 'MATCH', 'k:1*', 'COUNT', 100)
  cursor = r[1]
  n = n + #r[2]
until cursor == "0"
return n
"#;
    let n: i64 = redis::cmd("EVAL")
        .arg(script)
        .arg(0)
        .query(&mut con)
        .unwrap();
    assert_eq!(n, 1111); // k:1, k:10..19, k:100..199, k:1000..1999
    let key: String = redis::cmd("RANDOMKEY").query(&mut con).unwrap();
    assert!(key.starts_with("k:"));
}
