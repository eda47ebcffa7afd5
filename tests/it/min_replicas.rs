//! `min-replicas-to-write` / `min-replicas-max-lag`: a master without enough good replicas
//! refuses writes with Redis's NOREPLICAS (plain, queued in MULTI, from a script), reads go
//! on, `min-replicas-max-lag 0` turns the check off, INFO shows `min_slaves_good_slaves`;
//! compared byte for byte with redis-server 7.0.15. With a replica attached and
//! acknowledging, writes pass and WAIT counts it; once it leaves, writes are refused again.

use std::time::{Duration, Instant};

use crate::support::{Conn, RedisServer, sluice};

fn run(c: &mut Conn, args: &[&str]) -> String {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    String::from_utf8_lossy(&c.cmd(&a)).into_owned()
}

/// The same requests, their replies (INFO reduced to the field that matters).
fn transcript(c: &mut Conn) -> Vec<String> {
    let mut out = Vec::new();
    for cmd in [
        &["CONFIG", "SET", "min-replicas-to-write", "1"][..],
        &["CONFIG", "GET", "min-replicas-to-write"],
        &["CONFIG", "GET", "min-slaves-max-lag"],
        &["SET", "k", "v"],
        &["GET", "k"],
        &["INCR", "n"],
        &["MULTI"],
        &["SET", "k", "v"],
        &["GET", "k"],
        &["EXEC"],
        &["MULTI"],
        &["GET", "k"],
        &["EXEC"],
        &["EVAL", "return redis.call('set', KEYS[1], 'x')", "1", "k"],
        &["EVAL", "return redis.pcall('set', KEYS[1], 'x')", "1", "k"],
        &["EVAL", "return redis.call('get', KEYS[1])", "1", "k"],
        &["WAIT", "0", "0"],
        &["CONFIG", "SET", "min-slaves-max-lag", "0"],
        &["SET", "k", "v2"],
        &["CONFIG", "SET", "min-replicas-max-lag", "10"],
        &["DEL", "k"],
        &["CONFIG", "SET", "min-replicas-to-write", "0"],
        &["DEL", "k"],
    ] {
        out.push(format!("{cmd:?} -> {}", run(c, cmd)));
    }
    out
}

#[test]
fn noreplicas_as_redis() {
    let redis = RedisServer::start();
    let mut r = Conn::connect(redis.addr());
    let server = sluice();
    let mut s = Conn::connect(server.addr());
    let theirs = transcript(&mut r);
    let ours = transcript(&mut s);
    assert_eq!(ours, theirs);
    assert!(
        theirs
            .iter()
            .any(|l| l.contains("-NOREPLICAS Not enough good replicas to write."))
    );
    for c in [&mut r, &mut s] {
        run(c, &["CONFIG", "SET", "min-replicas-to-write", "2"]);
        let info = run(c, &["INFO", "replication"]);
        assert!(info.contains("min_slaves_good_slaves:0\r\n"), "{info}");
    }
}

fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("timed out waiting for: {what}");
}

#[test]
fn a_good_replica_lets_writes_in_and_wait_counts_it() {
    let master = sluice();
    let mut m = Conn::connect(master.addr());
    run(&mut m, &["CONFIG", "SET", "min-replicas-to-write", "1"]);
    assert!(run(&mut m, &["SET", "k", "v"]).starts_with("-NOREPLICAS"));
    let replica = sluice();
    let mut r = Conn::connect(replica.addr());
    let port = master.addr().port().to_string();
    assert_eq!(run(&mut r, &["REPLICAOF", "127.0.0.1", &port]), "+OK\r\n");
    eventually("the replica is good", || {
        run(&mut m, &["INFO", "replication"]).contains("min_slaves_good_slaves:1\r\n")
    });
    assert_eq!(run(&mut m, &["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(run(&mut m, &["WAIT", "1", "5000"]), ":1\r\n");
    assert_eq!(run(&mut r, &["GET", "k"]), "$1\r\nv\r\n");
    // A replica itself never refuses (its master's writes, and its own reads).
    run(&mut r, &["CONFIG", "SET", "min-replicas-to-write", "3"]);
    assert_eq!(run(&mut r, &["GET", "k"]), "$1\r\nv\r\n");
    // The replica leaves: writes are refused again, WAIT counts nobody.
    assert_eq!(run(&mut r, &["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
    eventually("the master has no replica", || {
        run(&mut m, &["INFO", "replication"]).contains("connected_slaves:0\r\n")
    });
    assert!(run(&mut m, &["SET", "k", "v"]).starts_with("-NOREPLICAS"));
    assert_eq!(run(&mut m, &["WAIT", "1", "50"]), ":0\r\n");
}
