//! sluice's own event loops (`io-backend loop`, `server::eventloop`): what a connection on
//! them sees when it is handed over to the tokio connection code mid-pipeline (replies in
//! order), CLIENT KILL of an idle connection, a long script on the loop every client shares
//! (`-BUSY` and SCRIPT KILL reach it), and a connection moved between loops by scaling.
//! The whole suite also runs on these loops (they are the default).

use std::time::Duration;

use sluice::Config;
use sluice::config::IoBackend;

use crate::support::{Conn, Read1, encode_command};

fn start(threads: usize) -> sluice::TestServer {
    sluice::TestServer::start_with(Config {
        test_mode: true,
        io_backend: IoBackend::Loop,
        threads,
        ..Config::default()
    })
    .expect("cannot start sluice")
}

#[test]
fn a_pipeline_keeps_its_order_across_a_hand_over() {
    let server = start(1);
    let mut a = Conn::connect(server.addr());
    let mut b = Conn::connect(server.addr());
    // SET runs on the loop, BLPOP blocks (the connection moves to tokio with the SET's
    // reply unwritten and GET still in its buffer), GET runs after the pop is served.
    let mut batch = encode_command(&[b"SET", b"k", b"v"]);
    batch.extend(encode_command(&[b"BLPOP", b"list", b"0"]));
    batch.extend(encode_command(&[b"GET", b"k"]));
    a.send_raw(&batch);
    assert_eq!(a.read_reply(), b"+OK\r\n");
    assert!(matches!(
        a.read_one(Duration::from_millis(200)),
        Read1::Timeout(_)
    ));
    assert_eq!(b.cmd(&[b"RPUSH", b"list", b"x"]), b":1\r\n");
    assert_eq!(a.read_reply(), b"*2\r\n$4\r\nlist\r\n$1\r\nx\r\n");
    assert_eq!(a.read_reply(), b"$1\r\nv\r\n");
    // Still the same client, served on.
    assert_eq!(a.cmd(&[b"INCR", b"n"]), b":1\r\n");
    let list = String::from_utf8(b.cmd(&[b"CLIENT", b"LIST"])).unwrap();
    assert_eq!(list.matches("id=").count(), 2, "{list}");
}

#[test]
fn subscribing_on_the_loop_gets_its_messages() {
    let server = start(1);
    let mut sub = Conn::connect(server.addr());
    let mut publisher = Conn::connect(server.addr());
    // PING first (runs on the loop), then SUBSCRIBE in the same batch.
    let mut batch = encode_command(&[b"PING"]);
    batch.extend(encode_command(&[b"SUBSCRIBE", b"ch"]));
    sub.send_raw(&batch);
    assert_eq!(sub.read_reply(), b"+PONG\r\n");
    assert_eq!(
        sub.read_reply(),
        b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
    );
    assert_eq!(publisher.cmd(&[b"PUBLISH", b"ch", b"hi"]), b":1\r\n");
    assert_eq!(
        sub.read_reply(),
        b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n"
    );
}

#[test]
fn client_kill_closes_an_idle_loop_connection() {
    let server = start(1);
    let mut victim = Conn::connect(server.addr());
    let mut admin = Conn::connect(server.addr());
    let id = victim.cmd(&[b"CLIENT", b"ID"]);
    let id = String::from_utf8(id[1..id.len() - 2].to_vec()).unwrap();
    assert_eq!(
        admin.cmd(&[b"CLIENT", b"KILL", b"ID", id.as_bytes()]),
        b":1\r\n"
    );
    // The idle connection is closed at once (the kill wakes its loop), not at its next read.
    assert!(matches!(
        victim.read_one(Duration::from_secs(2)),
        Read1::Eof(_)
    ));
}

#[test]
fn a_long_script_on_the_shared_loop_answers_busy_and_takes_script_kill() {
    // One loop: the script and every other client share its thread.
    let server = start(1);
    let mut admin = Conn::connect(server.addr());
    let mut other = Conn::connect(server.addr());
    assert_eq!(
        admin.cmd(&[b"CONFIG", b"SET", b"busy-reply-threshold", b"100"]),
        b"+OK\r\n"
    );
    let mut runner = Conn::connect(server.addr());
    runner.send(&[b"EVAL", b"while true do end", b"0"]);
    // Past the threshold the others get -BUSY, and SCRIPT KILL stops it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let reply = other.cmd(&[b"GET", b"k"]);
        if reply.starts_with(b"-BUSY") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no -BUSY: {}",
            String::from_utf8_lossy(&reply)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(admin.cmd(&[b"SCRIPT", b"KILL"]), b"+OK\r\n");
    let killed = runner.read_reply();
    assert!(
        killed.starts_with(b"-ERR Script killed by user with SCRIPT KILL"),
        "{}",
        String::from_utf8_lossy(&killed)
    );
    assert_eq!(other.cmd(&[b"GET", b"k"]), b"$-1\r\n");
    assert_eq!(runner.cmd(&[b"PING"]), b"+PONG\r\n");
}
