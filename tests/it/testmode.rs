//! The test double over the wire: clock control, fault injection, the command log, MONITOR,
//! the version persona, and that none of the test commands exist without test mode.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use redis::Connection;
use sluice::{Config, TestServer};

use crate::support::Conn;

fn connect(server: &TestServer) -> Connection {
    redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

#[test]
fn clock_freeze_advance_set_resume() {
    let server = TestServer::start().unwrap();
    let mut con = connect(&server);
    let t0: i64 = redis::cmd("CLOCK").arg("FREEZE").query(&mut con).unwrap();
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query(&mut con).unwrap();
    assert_eq!(
        secs * 1000 + micros / 1000,
        t0,
        "TIME follows the frozen clock"
    );
    let t1: i64 = redis::cmd("CLOCK")
        .arg("ADVANCE")
        .arg(86_400_000)
        .query(&mut con)
        .unwrap();
    assert_eq!(t1, t0 + 86_400_000);
    let err = redis::cmd("CLOCK")
        .arg("SET")
        .arg(t0)
        .query::<i64>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("cannot move backwards"), "{err}");
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .arg("EX")
        .arg(10)
        .query(&mut con)
        .unwrap();
    let at: i64 = redis::cmd("PEXPIRETIME").arg("k").query(&mut con).unwrap();
    assert_eq!(at, t1 + 10_000);
    let _: () = redis::cmd("CLOCK").arg("RESUME").query(&mut con).unwrap();
    let now: i64 = redis::cmd("CLOCK").arg("NOW").query(&mut con).unwrap();
    assert!(now >= t1, "resuming continues from the frozen time");
}

#[test]
fn faults_reply_the_errors_real_redis_produces() {
    let server = TestServer::start().unwrap();
    let mut admin = connect(&server);
    let mut con = connect(&server);
    for line in [
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
        "LOADING Redis is loading the dataset in memory",
        "READONLY You can't write against a read only replica.",
        "OOM command not allowed when used memory > 'maxmemory'.",
        "NOSCRIPT No matching script. Please use EVAL.",
    ] {
        let _: () = redis::cmd("FAULT")
            .arg("ERROR")
            .arg(line)
            .query(&mut admin)
            .unwrap();
        let err = redis::cmd("INCR")
            .arg("x")
            .query::<i64>(&mut con)
            .unwrap_err();
        let (code, detail) = line.split_once(' ').unwrap();
        assert_eq!(err.code(), Some(code));
        assert_eq!(err.detail(), Some(detail));
        // COUNT defaults to 1: the next command runs normally.
        let n: i64 = redis::cmd("INCR").arg("x").query(&mut con).unwrap();
        assert!(n > 0);
    }
    // Scoped to a command and to a client name, with a count.
    let _: () = redis::cmd("FAULT")
        .arg("ERROR")
        .arg("READONLY no")
        .arg("COUNT")
        .arg(2)
        .arg("COMMAND")
        .arg("set")
        .arg("CLIENT")
        .arg("limiter")
        .query(&mut admin)
        .unwrap();
    let _: () = redis::cmd("SET").arg("a").arg(1).query(&mut con).unwrap(); // unnamed: unaffected
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("limiter")
        .query(&mut con)
        .unwrap();
    let _: i64 = redis::cmd("INCR").arg("x").query(&mut con).unwrap(); // other command: unaffected
    for _ in 0..2 {
        let err = redis::cmd("SET")
            .arg("a")
            .arg(1)
            .query::<()>(&mut con)
            .unwrap_err();
        assert_eq!(err.code(), Some("READONLY"));
    }
    let _: () = redis::cmd("SET").arg("a").arg(1).query(&mut con).unwrap();
    // COUNT 0 lasts until FAULT CLEAR.
    let _: () = redis::cmd("FAULT")
        .arg("ERROR")
        .arg("LOADING later")
        .arg("COUNT")
        .arg(0)
        .arg("COMMAND")
        .arg("get")
        .query(&mut admin)
        .unwrap();
    for _ in 0..3 {
        assert!(
            redis::cmd("GET")
                .arg("a")
                .query::<Option<String>>(&mut con)
                .is_err()
        );
    }
    let listed: Vec<String> = redis::cmd("FAULT").arg("LIST").query(&mut admin).unwrap();
    assert_eq!(listed.len(), 1);
    let _: () = redis::cmd("FAULT").arg("CLEAR").query(&mut admin).unwrap();
    let v: Option<String> = redis::cmd("GET").arg("a").query(&mut con).unwrap();
    assert_eq!(v.as_deref(), Some("1"));
}

#[test]
fn latency_and_disconnect_faults() {
    let server = TestServer::start().unwrap();
    let mut admin = connect(&server);
    let mut con = connect(&server);
    let _: () = redis::cmd("FAULT")
        .arg("LATENCY")
        .arg(150)
        .arg("COMMAND")
        .arg("ping")
        .query(&mut admin)
        .unwrap();
    let started = Instant::now();
    let _: String = redis::cmd("PING").query(&mut con).unwrap();
    assert!(started.elapsed() >= Duration::from_millis(150));
    // Disconnect: the reply still arrives, then the connection closes.
    let _: () = redis::cmd("FAULT")
        .arg("DISCONNECT")
        .arg("COMMAND")
        .arg("incr")
        .query(&mut admin)
        .unwrap();
    let mut raw = Conn::connect(server.addr());
    assert_eq!(raw.cmd(&[b"INCR", b"d"]), b":1\r\n");
    assert!(
        raw.poll(Duration::from_millis(300)),
        "connection closed after the faulted reply"
    );
    let pong: String = redis::cmd("PING").query(&mut admin).unwrap();
    assert_eq!(pong, "PONG");
}

/// A fault wraps the reply whatever the command leaves its connection to do next: on a
/// blocking pop that blocks, FAULT LATENCY holds the reply the waiter gets and FAULT
/// DISCONNECT closes the connection once it is written (the hold and the disconnect travel
/// beside `engine::Next::Block`, not instead of it).
#[test]
fn faults_wrap_the_reply_of_a_command_that_blocked() {
    let server = TestServer::start().unwrap();
    let mut admin = connect(&server);
    let _: () = redis::cmd("FAULT")
        .arg("LATENCY")
        .arg(150)
        .arg("COMMAND")
        .arg("blpop")
        .query(&mut admin)
        .unwrap();
    let mut blocked = Conn::connect(server.addr());
    blocked.send(&[b"BLPOP", b"q", b"0"]);
    assert!(
        !blocked.poll(Duration::from_millis(100)),
        "BLPOP on an empty list blocks"
    );
    let pushed = Instant::now();
    let _: i64 = redis::cmd("RPUSH")
        .arg("q")
        .arg("a")
        .query(&mut admin)
        .unwrap();
    assert_eq!(blocked.read_reply(), b"*2\r\n$1\r\nq\r\n$1\r\na\r\n");
    assert!(
        pushed.elapsed() >= Duration::from_millis(150),
        "the latency holds the reply the waiter got"
    );

    let _: () = redis::cmd("FAULT").arg("CLEAR").query(&mut admin).unwrap();
    let _: () = redis::cmd("FAULT")
        .arg("DISCONNECT")
        .arg("COMMAND")
        .arg("blpop")
        .query(&mut admin)
        .unwrap();
    let mut dropped = Conn::connect(server.addr());
    dropped.send(&[b"BLPOP", b"q2", b"0"]);
    assert!(!dropped.poll(Duration::from_millis(100)));
    let _: i64 = redis::cmd("RPUSH")
        .arg("q2")
        .arg("b")
        .query(&mut admin)
        .unwrap();
    assert_eq!(dropped.read_reply(), b"*2\r\n$2\r\nq2\r\n$1\r\nb\r\n");
    assert!(
        dropped.poll(Duration::from_millis(300)) && dropped.is_closed(),
        "the connection closes after the reply it waited for"
    );
    let _: () = redis::cmd("FAULT").arg("CLEAR").query(&mut admin).unwrap();
}

/// What a queued command asks of the connection is EXEC's: DEBUG SLEEP inside MULTI holds
/// EXEC's reply, and a CLIENT KILL of the connection itself inside MULTI closes it after
/// EXEC's reply (Redis 7.0.15 answers `*1 :1` and closes too).
#[test]
fn exec_passes_its_commands_hold_and_close_on() {
    let server = TestServer::start().unwrap();
    let mut c = Conn::connect(server.addr());
    assert_eq!(c.cmd(&[b"MULTI"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"DEBUG", b"SLEEP", b"0.15"]), b"+QUEUED\r\n");
    let started = Instant::now();
    assert_eq!(c.cmd(&[b"EXEC"]), b"*1\r\n+OK\r\n");
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n", "the hold ends with EXEC");

    let id = c.cmd(&[b"CLIENT", b"ID"]);
    let id = &id[1..id.len() - 2];
    assert_eq!(c.cmd(&[b"MULTI"]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&[b"CLIENT", b"KILL", b"ID", id, b"SKIPME", b"no"]),
        b"+QUEUED\r\n"
    );
    assert_eq!(c.cmd(&[b"EXEC"]), b"*1\r\n:1\r\n");
    assert!(
        c.poll(Duration::from_millis(300)) && c.is_closed(),
        "the connection closes after EXEC's reply"
    );
}

/// A CMDLOG GET entry: id, time, client id, client name, lib name, db, arguments.
type LogEntry = (
    i64,
    i64,
    i64,
    Option<String>,
    Option<String>,
    i64,
    Vec<String>,
);

#[test]
fn command_log_shows_exactly_what_a_pipeline_sent() {
    let server = TestServer::start().unwrap();
    let mut con = connect(&server);
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("limiter")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("CMDLOG").arg("RESET").query(&mut con).unwrap();
    let _: () = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("hits")
        .ignore()
        .cmd("EXPIRE")
        .arg("hist")
        .arg(61)
        .ignore()
        .query(&mut con)
        .unwrap();
    let log: Vec<LogEntry> = redis::cmd("CMDLOG")
        .arg("GET")
        .arg("CLIENT")
        .arg("limiter")
        .query(&mut con)
        .unwrap();
    let sent: Vec<Vec<String>> = log.into_iter().map(|e| e.6).collect();
    assert_eq!(
        sent,
        vec![
            vec!["MULTI".to_string()],
            vec!["INCR".into(), "hits".into()],
            vec!["EXPIRE".into(), "hist".into(), "61".into()],
            vec!["EXEC".into()],
            // The query itself is logged before it runs.
            vec![
                "CMDLOG".into(),
                "GET".into(),
                "CLIENT".into(),
                "limiter".into()
            ],
        ]
    );
}

#[test]
fn monitor_streams_commands_in_redis_format() {
    let server = TestServer::start().unwrap();
    let mut mon = TcpStream::connect(server.addr()).unwrap();
    mon.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    mon.write_all(b"MONITOR\r\n").unwrap();
    let mut reader = BufReader::new(mon.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert_eq!(line, "+OK\r\n");
    let mut con = connect(&server);
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("a b\"c")
        .query(&mut con)
        .unwrap();
    // The client's own handshake (CLIENT SETINFO …) comes first.
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if line.contains("\"SET\"") {
            break;
        }
    }
    assert!(
        line.starts_with('+') && line.ends_with("] \"SET\" \"k\" \"a b\\\"c\"\r\n"),
        "{line:?}"
    );
    assert!(line.contains(" [0 127.0.0.1:"), "{line:?}");
}

#[test]
fn persona_version_and_resp3_refusal() {
    let server = TestServer::start_with(Config {
        test_mode: true,
        redis_version: "6.2.14".into(),
        resp3: false,
        ..Config::default()
    })
    .unwrap();
    let mut raw = Conn::connect(server.addr());
    assert_eq!(
        raw.cmd(&[b"HELLO", b"3"]),
        b"-NOPROTO unsupported protocol version\r\n"
    );
    let hello = raw.cmd(&[b"HELLO", b"2"]);
    assert!(String::from_utf8_lossy(&hello).contains("$7\r\nversion\r\n$6\r\n6.2.14\r\n"));
    let mut con = connect(&server);
    let info: String = redis::cmd("INFO").arg("server").query(&mut con).unwrap();
    assert!(info.contains("redis_version:6.2.14\r\n"));
}

#[test]
fn test_commands_do_not_exist_without_test_mode() {
    let server = TestServer::start_with(Config::default()).unwrap();
    let mut raw = Conn::connect(server.addr());
    for cmd in [&b"CLOCK"[..], b"FAULT", b"CMDLOG"] {
        let reply = raw.cmd(&[cmd, b"NOW"]);
        let expected = format!(
            "-ERR unknown command '{}', with args beginning with: 'NOW' \r\n",
            String::from_utf8_lossy(cmd)
        );
        assert_eq!(String::from_utf8_lossy(&reply), expected);
    }
}

#[test]
fn clock_moves_and_info_inside_multi_exec() {
    let server = TestServer::start().unwrap();
    let mut raw = Conn::connect(server.addr());
    assert_eq!(raw.cmd(&[b"CLOCK", b"FREEZE"])[0], b':');
    assert_eq!(raw.cmd(&[b"SET", b"k", b"v", b"PX", b"100"]), b"+OK\r\n");
    assert_eq!(raw.cmd(&[b"MULTI"]), b"+OK\r\n");
    assert_eq!(raw.cmd(&[b"CLOCK", b"ADVANCE", b"101"]), b"+QUEUED\r\n");
    assert_eq!(raw.cmd(&[b"DBSIZE"]), b"+QUEUED\r\n");
    assert_eq!(raw.cmd(&[b"INFO", b"keyspace"]), b"+QUEUED\r\n");
    let exec = String::from_utf8_lossy(&raw.cmd(&[b"EXEC"])).into_owned();
    // The advance reaped the key before DBSIZE ran, inside the same transaction.
    assert!(exec.starts_with("*3\r\n:"), "{exec}");
    assert!(exec.contains("\r\n:0\r\n"), "{exec}");
    assert!(exec.contains("# Keyspace"), "{exec}");
}
