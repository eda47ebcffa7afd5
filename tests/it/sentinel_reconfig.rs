//! How a master answers Redis Sentinel's reconfiguration of it, compared with redis-server
//! 7.0.15: when a returning old master (resumed after SIGSTOP, or healed from a partition)
//! is demoted, the sentinel sends, pipelined, `MULTI`, `SLAVEOF host port`, `CONFIG
//! REWRITE`, `CLIENT KILL TYPE normal`, `CLIENT KILL TYPE pubsub`, `EXEC` (sentinel.c's
//! `sentinelSendSlaveOf`). The replies must be Redis's byte for byte, the kills must really
//! drop the clients (one served by an event loop, one handed over to tokio by a blocking
//! command, a subscriber) so that they go back to the sentinels for the new master, the
//! sentinel's own connection must stay, and a write on a connection opened after it must get
//! `-READONLY`: nothing more is acknowledged by the demoted node.

use std::time::Duration;

use crate::support::{Conn, Read1, RedisServer, encode_command, free_port, sluice};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs the reconfiguration against a master at `addr`; what it saw, as lines to compare.
fn reconfigure(addr: std::net::SocketAddr, nowhere: u16) -> Vec<String> {
    let mut out = Vec::new();
    let mut writer = Conn::connect(addr);
    out.push(format!("incr: {}", text(&writer.cmd(&[b"INCR", b"n"]))));
    // Handed over to the tokio connection code in sluice (a blocking pop that waited).
    let mut blocked_once = Conn::connect(addr);
    out.push(format!(
        "blpop: {}",
        text(&blocked_once.cmd(&[b"BLPOP", b"nothing", b"0.01"]))
    ));
    out.push(format!(
        "incr: {}",
        text(&blocked_once.cmd(&[b"INCR", b"n"]))
    ));
    let mut subscriber = Conn::connect(addr);
    out.push(format!(
        "subscribe: {}",
        text(&subscriber.cmd(&[b"SUBSCRIBE", b"ch"]))
    ));

    let mut sentinel = Conn::connect(addr);
    let port = nowhere.to_string();
    let mut batch = Vec::new();
    for cmd in [
        &[&b"CLIENT"[..], b"SETNAME", b"sentinel-1a2b3c4d-cmd"][..],
        &[b"MULTI"],
        &[b"SLAVEOF", b"127.0.0.1", port.as_bytes()],
        &[b"CONFIG", b"REWRITE"],
        &[b"CLIENT", b"KILL", b"TYPE", b"normal"],
        &[b"CLIENT", b"KILL", b"TYPE", b"pubsub"],
        &[b"EXEC"],
    ] {
        batch.extend_from_slice(&encode_command(cmd));
    }
    sentinel.send_raw(&batch);
    for _ in 0..7 {
        match sentinel.read_one(Duration::from_secs(5)) {
            Read1::Reply(r) => out.push(format!("sentinel: {}", text(&r))),
            other => panic!("the sentinel's connection: {other:?}"),
        }
    }
    for (name, c) in [
        ("writer", &mut writer),
        ("blocked once", &mut blocked_once),
        ("subscriber", &mut subscriber),
    ] {
        let seen = match c.read_one(Duration::from_secs(5)) {
            Read1::Eof(rest) => format!("closed ({} bytes before)", rest.len()),
            other => format!("{other:?}"),
        };
        out.push(format!("{name}: {seen}"));
    }
    // The sentinel's own connection stays; a new client's write is refused.
    out.push(format!(
        "sentinel ping: {}",
        text(&sentinel.cmd(&[b"PING"]))
    ));
    let mut late = Conn::connect(addr);
    out.push(format!("late incr: {}", text(&late.cmd(&[b"INCR", b"n"]))));
    let info = text(&late.cmd(&[b"INFO", b"replication"]));
    for field in ["role:", "master_host:", "master_port:"] {
        let line = info.lines().find(|l| l.starts_with(field)).unwrap_or("");
        // The unreachable master's port differs between the two runs.
        out.push(if field == "master_port:" {
            format!(
                "{field} same as SLAVEOF: {}",
                line == format!("{field}{port}")
            )
        } else {
            line.to_string()
        });
    }
    out
}

#[test]
fn sentinel_demotion_as_redis() {
    let redis = RedisServer::start();
    let server = sluice();
    // Nothing listens there: the demoted node stays a replica with its link down.
    let nowhere = free_port();
    let theirs = reconfigure(redis.addr(), nowhere);
    let ours = reconfigure(server.addr(), nowhere);
    assert_eq!(ours, theirs);
    // What the comparison rests on, in Redis's own replies.
    for expected in [
        "writer: closed",
        "blocked once: closed",
        "subscriber: closed",
        "late incr: -READONLY",
        "role:slave",
    ] {
        assert!(
            theirs.iter().any(|l| l.starts_with(expected)),
            "{expected} in {theirs:#?}"
        );
    }
}
