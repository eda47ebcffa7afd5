//! Blocking pops end to end: CLOCK ADVANCE ends a timeout, a blocked client that closes is
//! released (nothing is popped for it), a blocked connection leaves its event loop free,
//! and many clients blocked on one key are served in the order they blocked. The replies'
//! bytes are compared with Redis in `tests/diff/blocking.txt`.

use std::time::{Duration, Instant};

use sluice::{Config, TestServer};

use crate::support::{Conn, Read1};

/// Waits (bounded) until INFO reports `n` blocked clients.
fn wait_blocked(conn: &mut Conn, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let info = String::from_utf8_lossy(&conn.cmd(&[b"INFO", b"clients"])).into_owned();
        if info.contains(&format!("blocked_clients:{n}\r\n")) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never {n} blocked clients: {info}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn no_reply_yet(conn: &mut Conn) {
    match conn.read_one(Duration::from_millis(100)) {
        Read1::Timeout(rest) if rest.is_empty() => {}
        other => panic!("a blocked client was answered: {other:?}"),
    }
}

fn reply(conn: &mut Conn) -> Vec<u8> {
    match conn.read_one(Duration::from_secs(2)) {
        Read1::Reply(r) => r,
        other => panic!("no reply: {other:?}"),
    }
}

#[test]
fn clock_advance_ends_a_blpop_timeout() {
    let server = TestServer::start().unwrap();
    let mut admin = Conn::connect(server.addr());
    let mut blocked = Conn::connect(server.addr());
    assert!(admin.cmd(&[b"CLOCK", b"FREEZE"]).starts_with(b":"));
    blocked.send(&[b"BLPOP", b"q", b"5"]);
    wait_blocked(&mut admin, 1);
    // Real time passing does nothing to a frozen clock; 4.999 s of server time neither.
    admin.cmd(&[b"CLOCK", b"ADVANCE", b"4999"]);
    no_reply_yet(&mut blocked);
    admin.cmd(&[b"CLOCK", b"ADVANCE", b"1"]);
    assert_eq!(reply(&mut blocked), b"*-1\r\n");
    wait_blocked(&mut admin, 0);
    // A fractional timeout, in RESP3.
    assert!(blocked.cmd(&[b"HELLO", b"3"]).starts_with(b"%"));
    blocked.send(&[b"BZPOPMIN", b"z", b"0.25"]);
    wait_blocked(&mut admin, 1);
    admin.cmd(&[b"CLOCK", b"ADVANCE", b"249"]);
    no_reply_yet(&mut blocked);
    admin.cmd(&[b"CLOCK", b"ADVANCE", b"1"]);
    assert_eq!(reply(&mut blocked), b"_\r\n");
    // Timeout 0 waits whatever the clock does.
    blocked.send(&[b"BRPOP", b"q", b"0"]);
    wait_blocked(&mut admin, 1);
    admin.cmd(&[b"CLOCK", b"ADVANCE", b"86400000"]);
    no_reply_yet(&mut blocked);
    admin.cmd(&[b"RPUSH", b"q", b"x"]);
    assert_eq!(reply(&mut blocked), b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n");
}

#[test]
fn a_blocked_client_that_closes_is_released() {
    let server = TestServer::start().unwrap();
    let mut admin = Conn::connect(server.addr());
    {
        let mut gone = Conn::connect(server.addr());
        gone.send(&[b"BLMOVE", b"src", b"dst", b"LEFT", b"LEFT", b"0"]);
        let mut also_gone = Conn::connect(server.addr());
        also_gone.send(&[b"BLPOP", b"src", b"0"]);
        wait_blocked(&mut admin, 2);
    }
    wait_blocked(&mut admin, 0);
    assert_eq!(admin.cmd(&[b"RPUSH", b"src", b"v"]), b":1\r\n");
    assert_eq!(admin.cmd(&[b"LLEN", b"src"]), b":1\r\n");
    assert_eq!(admin.cmd(&[b"EXISTS", b"dst"]), b":0\r\n");
    // CLIENT KILL of a blocked client releases it too.
    let mut killed = Conn::connect(server.addr());
    let id = String::from_utf8(killed.cmd(&[b"CLIENT", b"ID"])).unwrap();
    let id = id.trim_start_matches(':').trim_end().to_string();
    killed.send(&[b"BLPOP", b"other", b"0"]);
    wait_blocked(&mut admin, 1);
    let list = String::from_utf8(admin.cmd(&[b"CLIENT", b"LIST"])).unwrap();
    let line = list
        .lines()
        .find(|l| l.contains(&format!("id={id} ")))
        .unwrap_or_else(|| panic!("client {id} not in {list}"));
    assert!(line.contains(" flags=b "), "{line}");
    assert!(line.contains(" cmd=blpop "), "{line}");
    assert_eq!(
        admin.cmd(&[b"CLIENT", b"KILL", b"ID", id.as_bytes()]),
        b":1\r\n"
    );
    wait_blocked(&mut admin, 0);
}

#[test]
fn a_blocked_client_leaves_its_loop_free_and_waiters_are_served_in_order() {
    // One event loop: every connection shares it with the blocked ones.
    let server = TestServer::start_with(Config {
        test_mode: true,
        threads: 1,
        ..Config::default()
    })
    .unwrap();
    let mut admin = Conn::connect(server.addr());
    let mut waiters: Vec<Conn> = Vec::new();
    for i in 0..8 {
        let mut c = Conn::connect(server.addr());
        c.send(&[b"BLPOP", b"jobs", b"0"]);
        wait_blocked(&mut admin, i + 1);
        waiters.push(c);
    }
    assert_eq!(admin.cmd(&[b"PING"]), b"+PONG\r\n");
    assert_eq!(admin.cmd(&[b"SET", b"k", b"v"]), b"+OK\r\n");
    let mut args: Vec<Vec<u8>> = vec![b"RPUSH".to_vec(), b"jobs".to_vec()];
    args.extend((0..8).map(|i| format!("job{i}").into_bytes()));
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    assert_eq!(admin.cmd(&refs), b":8\r\n");
    assert_eq!(admin.cmd(&[b"LLEN", b"jobs"]), b":0\r\n");
    for (i, c) in waiters.iter_mut().enumerate() {
        let want = format!("*2\r\n$4\r\njobs\r\n$4\r\njob{i}\r\n");
        assert_eq!(String::from_utf8_lossy(&reply(c)), want, "waiter {i}");
    }
}

#[test]
fn commands_sent_while_blocked_run_after_the_reply() {
    let server = TestServer::start().unwrap();
    let mut admin = Conn::connect(server.addr());
    let mut c = Conn::connect(server.addr());
    c.send_raw(b"*3\r\n$5\r\nBLPOP\r\n$1\r\nq\r\n$1\r\n0\r\n*1\r\n$4\r\nPING\r\n");
    wait_blocked(&mut admin, 1);
    no_reply_yet(&mut c);
    admin.cmd(&[b"LPUSH", b"q", b"a"]);
    assert_eq!(reply(&mut c), b"*2\r\n$1\r\nq\r\n$1\r\na\r\n");
    assert_eq!(reply(&mut c), b"+PONG\r\n");
}
