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

/// Sends `commands` in one write (one batch on the loop) and returns their replies.
fn batch(conn: &mut Conn, commands: &[&[&[u8]]]) -> Vec<String> {
    let mut bytes = Vec::new();
    for c in commands {
        bytes.extend(encode_command(c));
    }
    conn.send_raw(&bytes);
    commands
        .iter()
        .map(|_| String::from_utf8_lossy(&conn.read_reply()).into_owned())
        .collect()
}

/// A batch's plain commands skip `call`'s per-command checks (`engine::call::plain`, read
/// once per batch): a command in the same pipelined batch that changes what they check
/// takes effect for the very next command, as in Redis.
#[test]
fn a_policy_change_in_a_batch_holds_for_its_next_command() {
    let server = start(1);
    let mut c = Conn::connect(server.addr());
    let mut other = Conn::connect(server.addr());

    // maxmemory: the SET after CONFIG SET is refused, the one after it is reset runs.
    let r = batch(
        &mut c,
        &[
            &[b"SET", b"k", b"v"],
            &[b"CONFIG", b"SET", b"maxmemory", b"1"],
            &[b"SET", b"k", b"w"],
            &[b"GET", b"k"],
            &[b"CONFIG", b"SET", b"maxmemory", b"0"],
            &[b"SET", b"k", b"x"],
        ],
    );
    assert_eq!(r[0], "+OK\r\n");
    assert_eq!(r[1], "+OK\r\n");
    assert!(r[2].starts_with("-OOM "), "{r:?}");
    assert_eq!(r[3], "$1\r\nv\r\n", "a read runs over maxmemory");
    assert_eq!(r[5], "+OK\r\n");

    // MULTI: the next SET is queued, not run; after EXEC the GET runs.
    let r = batch(
        &mut c,
        &[
            &[b"MULTI"],
            &[b"SET", b"k", b"queued"],
            &[b"GET", b"k"],
            &[b"EXEC"],
            &[b"GET", b"k"],
        ],
    );
    assert_eq!(r[1], "+QUEUED\r\n");
    assert_eq!(r[2], "+QUEUED\r\n");
    assert_eq!(r[3], "*2\r\n+OK\r\n$6\r\nqueued\r\n");
    assert_eq!(r[4], "$6\r\nqueued\r\n");

    // ACL: the default user loses GET, then gets it back, within one batch.
    let r = batch(
        &mut c,
        &[
            &[b"GET", b"k"],
            &[b"ACL", b"SETUSER", b"default", b"-get"],
            &[b"GET", b"k"],
            &[b"SET", b"k", b"y"],
            &[b"ACL", b"SETUSER", b"default", b"+get"],
            &[b"GET", b"k"],
        ],
    );
    assert_eq!(r[0], "$6\r\nqueued\r\n");
    assert!(r[2].starts_with("-NOPERM "), "{r:?}");
    assert_eq!(r[3], "+OK\r\n");
    assert_eq!(r[5], "$1\r\ny\r\n");

    // Another client's CONFIG SET between this client's batches holds for the next one.
    assert_eq!(
        other.cmd(&[b"CONFIG", b"SET", b"maxmemory", b"1"]),
        b"+OK\r\n"
    );
    let r = batch(&mut c, &[&[b"GET", b"k"], &[b"SET", b"k", b"z"]]);
    assert_eq!(r[0], "$1\r\ny\r\n");
    assert!(r[1].starts_with("-OOM "), "{r:?}");
    assert_eq!(
        other.cmd(&[b"CONFIG", b"SET", b"maxmemory", b"0"]),
        b"+OK\r\n"
    );

    // CLIENT PAUSE WRITE: the SET behind it waits for the pause's end.
    let started = std::time::Instant::now();
    let r = batch(
        &mut c,
        &[
            &[b"GET", b"k"],
            &[b"CLIENT", b"PAUSE", b"300", b"WRITE"],
            &[b"SET", b"k", b"paused"],
        ],
    );
    assert_eq!(r[1], "+OK\r\n");
    assert_eq!(r[2], "+OK\r\n");
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );

    // CLIENT TRACKING: the GET after it is remembered, so another client's write of its
    // key sends this one an invalidation.
    let r = batch(
        &mut c,
        &[
            &[b"HELLO", b"3"],
            &[b"CLIENT", b"TRACKING", b"on"],
            &[b"GET", b"k"],
        ],
    );
    assert_eq!(r[1], "+OK\r\n");
    assert_eq!(r[2], "$6\r\npaused\r\n");
    assert_eq!(other.cmd(&[b"SET", b"k", b"new"]), b"+OK\r\n");
    assert_eq!(
        c.read_reply(),
        b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"
    );
}
