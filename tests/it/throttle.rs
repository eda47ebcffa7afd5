//! CL.THROTTLE over the wire, driven by the test clock: the vector groups G1, G2 and
//! G6 of `docs/cl-throttle.md`, the README example, MULTI/EXEC, binary keys and concurrency.

use redis::{Connection, RedisResult};
use sluice::TestServer;

fn connect(server: &TestServer) -> Connection {
    redis::Client::open(server.url())
        .expect("client")
        .get_connection()
        .expect("connection")
}

/// Freezes the server clock at the next whole second and returns that instant (Unix ms).
fn freeze_at_whole_second(con: &mut Connection) -> i64 {
    let now: i64 = redis::cmd("CLOCK")
        .arg("FREEZE")
        .query(con)
        .expect("freeze");
    let start = (now / 1000 + 1) * 1000;
    let set: i64 = redis::cmd("CLOCK")
        .arg("SET")
        .arg(start)
        .query(con)
        .expect("set");
    assert_eq!(set, start);
    start
}

fn set_time(con: &mut Connection, ms: i64) {
    let _: i64 = redis::cmd("CLOCK")
        .arg("SET")
        .arg(ms)
        .query(con)
        .expect("clock set");
}

fn throttle(con: &mut Connection, args: &[&str]) -> RedisResult<Vec<i64>> {
    redis::cmd("CL.THROTTLE").arg(args).query(con)
}

#[test]
fn g1_redis_cell_unit_test_over_the_wire() {
    let server = TestServer::start().expect("server");
    let mut con = connect(&server);
    let s = freeze_at_whole_second(&mut con);
    // (t ms, quantity, reply, Some((TAT - S in ms, PTTL)) when the state is checked)
    type Row = (i64, &'static str, [i64; 5], Option<(i64, i64)>);
    let rows: &[Row] = &[
        (0, "6", [1, 5, 5, -1, 0], None),
        (0, "1", [0, 5, 4, -1, 1], Some((1000, 1000))),
        (0, "1", [0, 5, 3, -1, 2], None),
        (0, "1", [0, 5, 2, -1, 3], None),
        (0, "1", [0, 5, 1, -1, 4], None),
        (0, "1", [0, 5, 0, -1, 5], Some((5000, 5000))),
        (0, "1", [1, 5, 0, 1, 5], Some((5000, 5000))),
        (3000, "1", [0, 5, 2, -1, 3], Some((6000, 3000))),
        (3100, "1", [0, 5, 1, -1, 4], Some((7000, 3900))),
        (4000, "1", [0, 5, 1, -1, 4], Some((8000, 4000))),
        (8000, "1", [0, 5, 4, -1, 1], None),
        (9500, "1", [0, 5, 4, -1, 1], None),
        (9500, "0", [0, 5, 4, -1, 1], None),
        (9500, "2", [0, 5, 2, -1, 3], None),
        (9500, "5", [1, 5, 2, 3, 3], None),
    ];
    let exists: i64 = redis::cmd("EXISTS").arg("foo").query(&mut con).unwrap();
    assert_eq!(exists, 0);
    for (i, (t, q, reply, state)) in rows.iter().enumerate() {
        set_time(&mut con, s + t);
        let got = throttle(&mut con, &["foo", "4", "1", "1", q]).expect("throttle");
        assert_eq!(&got[..], &reply[..], "row {}", i + 1);
        if i == 0 {
            let n: i64 = redis::cmd("EXISTS").arg("foo").query(&mut con).unwrap();
            assert_eq!(n, 0, "a refused first call writes nothing");
        }
        if let Some((tat, pttl)) = state {
            let stored: String = redis::cmd("GET").arg("foo").query(&mut con).unwrap();
            let stored: i64 = stored.parse().unwrap();
            assert_eq!(stored, (s + tat) * 1_000_000, "row {} TAT", i + 1);
            let got_pttl: i64 = redis::cmd("PTTL").arg("foo").query(&mut con).unwrap();
            assert_eq!(got_pttl, *pttl, "row {} PTTL", i + 1);
        }
    }
    let t: String = redis::cmd("TYPE").arg("foo").query(&mut con).unwrap();
    assert_eq!(t, "string");
}

#[test]
fn g2_seed_parameters_and_expiry() {
    let server = TestServer::start().expect("server");
    let mut con = connect(&server);
    let s = freeze_at_whole_second(&mut con);
    let key = "laoqian:reply";
    for k in 1..=16 {
        let got = throttle(&mut con, &[key, "15", "30", "60", "1"]).unwrap();
        assert_eq!(got, vec![0, 16, 16 - k, -1, 2 * k], "call {k}");
    }
    let pttl: i64 = redis::cmd("PTTL").arg(key).query(&mut con).unwrap();
    assert_eq!(pttl, 32000);
    let rows: &[(i64, &str, [i64; 5])] = &[
        (0, "1", [1, 16, 0, 2, 32]),
        (0, "0", [0, 16, 0, -1, 32]),
        (1000, "1", [1, 16, 0, 1, 31]),
        (2000, "1", [0, 16, 0, -1, 32]),
        (2000, "16", [1, 16, 0, 32, 32]),
        (2000, "17", [1, 16, 0, -1, 32]),
        (10000, "0", [0, 16, 4, -1, 24]),
        (40000, "1", [0, 16, 15, -1, 2]),
    ];
    for (i, (t, q, reply)) in rows.iter().enumerate() {
        set_time(&mut con, s + t);
        if *t == 40000 {
            // The key expired at 34000 and advancing reaped it.
            let n: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
            assert_eq!(n, 0);
        }
        let got = throttle(&mut con, &[key, "15", "30", "60", q]).unwrap();
        assert_eq!(&got[..], &reply[..], "row {}", i + 17);
    }
}

#[test]
fn seed_example_twenty_calls_then_one_more_after_two_seconds() {
    let server = TestServer::start().expect("server");
    let mut con = connect(&server);
    freeze_at_whole_second(&mut con);
    let replies: Vec<Vec<i64>> = (0..20)
        .map(|_| throttle(&mut con, &["laoqian:reply", "15", "30", "60", "1"]).unwrap())
        .collect();
    assert_eq!(replies[0], vec![0, 16, 15, -1, 2]);
    assert_eq!(replies.iter().filter(|r| r[0] == 0).count(), 16);
    assert!(replies[16..].iter().all(|r| r == &vec![1, 16, 0, 2, 32]));
    let _: i64 = redis::cmd("CLOCK")
        .arg("ADVANCE")
        .arg(2000)
        .query(&mut con)
        .unwrap();
    assert_eq!(
        throttle(&mut con, &["laoqian:reply", "15", "30", "60", "1"]).unwrap()[0],
        0
    );
    assert_eq!(
        throttle(&mut con, &["laoqian:reply", "15", "30", "60", "1"]).unwrap()[0],
        1
    );
}

#[test]
fn g6_errors_exact_texts() {
    let server = TestServer::start().expect("server");
    let mut con = connect(&server);
    let usage = "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]";
    let cases: &[(&[&str], &str)] = &[
        (&["k"], usage),
        (&["k", "1", "2", "3", "4", "5"], usage),
        (
            &["k", "x", "30", "60", "1"],
            "Cell error: Store error: Couldn't parse as integer: x",
        ),
        (
            &["k", "15", "30", "60", "1.5"],
            "Cell error: Store error: Couldn't parse as integer: 1.5",
        ),
        (
            &["k", "10", "0", "60"],
            "Cell error: Store error: Zero rates are not supported",
        ),
        (
            &["k", "10", "2000000000", "1"],
            "Cell error: Store error: Zero rates are not supported",
        ),
    ];
    for (args, text) in cases {
        let err = throttle(&mut con, args).expect_err("an error reply");
        let tail = text.trim_start_matches("Cell error: Store error: ");
        assert!(err.to_string().contains(tail), "{args:?}: {err}");
    }
    // Where redis-cell would crash: a key of another type, and a non-integer value.
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg("f")
        .arg("v")
        .query(&mut con)
        .unwrap_or(());
    let _: () = redis::cmd("SET")
        .arg("s")
        .arg("abc")
        .query(&mut con)
        .unwrap();
    let err = throttle(&mut con, &["s", "1", "1", "1"]).unwrap_err();
    assert_eq!(err.code(), Some("ERR"));
    assert_eq!(
        err.detail(),
        Some("value is not an integer or out of range")
    );
    // No crash: the server still answers.
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn inside_multi_exec_and_with_binary_keys() {
    let server = TestServer::start().expect("server");
    let mut con = connect(&server);
    freeze_at_whole_second(&mut con);
    let key: &[u8] = b"bin\x00\r\n\xffkey";
    let (a, b): (Vec<i64>, Vec<i64>) = redis::pipe()
        .atomic()
        .cmd("CL.THROTTLE")
        .arg(key)
        .arg(1)
        .arg(1)
        .arg(60)
        .cmd("CL.THROTTLE")
        .arg(key)
        .arg(1)
        .arg(1)
        .arg(60)
        .query(&mut con)
        .unwrap();
    assert_eq!(a, vec![0, 2, 1, -1, 60]);
    assert_eq!(b, vec![0, 2, 0, -1, 120]);
    let c = redis::cmd("CL.THROTTLE")
        .arg(key)
        .arg(1)
        .arg(1)
        .arg(60)
        .query::<Vec<i64>>(&mut con)
        .unwrap();
    assert_eq!(c, vec![1, 2, 0, 60, 120]);
    // A usage error inside MULTI is a runtime error (arity -1): queued, then an EXEC element,
    // and the other commands still run.
    let mut raw = crate::support::Conn::connect(server.addr());
    assert_eq!(raw.cmd(&[b"MULTI"]), b"+OK\r\n");
    assert_eq!(raw.cmd(&[b"CL.THROTTLE", b"k"]), b"+QUEUED\r\n");
    assert_eq!(raw.cmd(&[b"PING"]), b"+QUEUED\r\n");
    let exec = raw.cmd(&[b"EXEC"]);
    assert_eq!(
        String::from_utf8_lossy(&exec),
        "*2\r\n-Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]\r\n+PONG\r\n"
    );
}

#[test]
fn concurrent_clients_admit_exactly_the_serial_count() {
    let server = TestServer::start().expect("server");
    let mut con = connect(&server);
    freeze_at_whole_second(&mut con);
    let url = server.url();
    // max_burst 99 → 100 units available on a fresh key; 32 clients × 10 calls = 320 calls.
    let handles: Vec<_> = (0..32)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
                (0..10)
                    .filter(|_| {
                        let r: Vec<i64> = redis::cmd("CL.THROTTLE")
                            .arg("shared")
                            .arg(99)
                            .arg(1)
                            .arg(3600)
                            .query(&mut con)
                            .unwrap();
                        r[0] == 0
                    })
                    .count()
            })
        })
        .collect();
    let allowed: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(allowed, 100);
}
