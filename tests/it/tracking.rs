//! CLIENT TRACKING side by side with a real redis-server 7.0.15: the same session of three
//! raw connections (a tracking client, a writer, a redirect target) against each, every
//! reply and every invalidation message compared byte for byte (client ids, which differ
//! between the servers, are replaced by `ID`). Covers the default mode with REDIRECT to a
//! RESP2 subscriber and in RESP3, a client's own invalidation after its reply, BCAST with
//! prefixes and NOLOOP, OPTIN/OPTOUT with CLIENT CACHING, GETREDIR, TRACKINGINFO, FLUSHALL's
//! null, expiry, the table's bound, INFO's fields, and every error text.

use std::net::SocketAddr;
use std::time::Duration;

use crate::support::{Conn, Read1, RedisServer, escape, sluice};

/// The next message a connection has, or `(none)` after a short wait.
fn next(c: &mut Conn, wait_ms: u64) -> String {
    match c.read_one(Duration::from_millis(wait_ms)) {
        Read1::Reply(r) => escape(&r),
        Read1::Timeout(b) if b.is_empty() => "(none)".into(),
        other => format!("{other:?}"),
    }
}

fn session(addr: SocketAddr) -> Vec<String> {
    let mut r = Conn::connect(addr);
    let mut w = Conn::connect(addr);
    let mut red = Conn::connect(addr);
    let mut log = Vec::new();
    let id = String::from_utf8(red.cmd(&[b"CLIENT", b"ID"])).unwrap();
    let id = id.trim_start_matches(':').trim_end().to_string();
    let rid = id.as_bytes();
    let id_int = format!(":{id}\\r\\n");
    let run = |c: &mut Conn, args: &[&[u8]], log: &mut Vec<String>| {
        let reply = escape(&c.cmd(args)).replace(&id_int, ":ID\\r\\n");
        let shown: Vec<String> = args
            .iter()
            .map(|a| match std::ptr::eq(*a, id.as_bytes()) {
                true => "ID".to_string(),
                false => String::from_utf8_lossy(a).to_string(),
            })
            .collect();
        log.push(format!("{} -> {reply}", shown.join(" ")));
    };
    run(&mut red, &[b"SUBSCRIBE", b"__redis__:invalidate"], &mut log);
    // Default mode, redirected to a RESP2 subscriber.
    run(
        &mut r,
        &[b"CLIENT", b"TRACKING", b"on", b"REDIRECT", rid],
        &mut log,
    );
    run(&mut r, &[b"CLIENT", b"GETREDIR"], &mut log);
    run(&mut w, &[b"MSET", b"a", b"1", b"b", b"1"], &mut log);
    run(&mut r, &[b"GET", b"a"], &mut log);
    run(&mut w, &[b"INCR", b"b"], &mut log);
    run(&mut w, &[b"INCR", b"a"], &mut log);
    log.push(format!("redirected: {}", next(&mut red, 2000)));
    log.push(format!("then: {}", next(&mut red, 100)));
    // RESP3 on the same connection: pushes, its own write's after the reply.
    run(&mut r, &[b"CLIENT", b"TRACKING", b"off"], &mut log);
    r.cmd(&[b"HELLO", b"3"]);
    run(&mut r, &[b"CLIENT", b"TRACKING", b"on"], &mut log);
    run(&mut r, &[b"GET", b"a"], &mut log);
    run(&mut r, &[b"SET", b"a", b"5"], &mut log);
    log.push(format!("own: {}", next(&mut r, 2000)));
    run(&mut r, &[b"GET", b"a"], &mut log);
    run(&mut w, &[b"SET", b"a", b"6"], &mut log);
    log.push(format!("other's: {}", next(&mut r, 2000)));
    run(&mut r, &[b"CLIENT", b"TRACKINGINFO"], &mut log);
    // An expired key is a change too.
    run(&mut w, &[b"SET", b"t", b"x", b"PX", b"20"], &mut log);
    run(&mut r, &[b"GET", b"t"], &mut log);
    log.push(format!("expired: {}", next(&mut r, 2000)));
    // BCAST with prefixes, NOLOOP.
    run(&mut r, &[b"CLIENT", b"TRACKING", b"on", b"BCAST"], &mut log);
    run(&mut r, &[b"CLIENT", b"TRACKING", b"off"], &mut log);
    run(
        &mut r,
        &[
            b"CLIENT",
            b"TRACKING",
            b"on",
            b"BCAST",
            b"PREFIX",
            b"BAR",
            b"PREFIX",
            b"FOO",
            b"NOLOOP",
        ],
        &mut log,
    );
    run(
        &mut r,
        &[b"CLIENT", b"TRACKING", b"on", b"BCAST", b"PREFIX", b"BARB"],
        &mut log,
    );
    run(&mut r, &[b"CLIENT", b"TRACKINGINFO"], &mut log);
    run(
        &mut w,
        &[
            b"MSET", b"FOOy", b"2", b"BARx", b"1", b"FOOa", b"3", b"zzz", b"3",
        ],
        &mut log,
    );
    log.push(format!("bcast: {}", next(&mut r, 2000)));
    log.push(format!("bcast: {}", next(&mut r, 2000)));
    run(&mut r, &[b"SET", b"BARown", b"1"], &mut log);
    log.push(format!("noloop: {}", next(&mut r, 200)));
    // OPTIN / OPTOUT.
    run(&mut r, &[b"CLIENT", b"TRACKING", b"off"], &mut log);
    run(&mut r, &[b"CLIENT", b"TRACKING", b"on", b"OPTIN"], &mut log);
    run(&mut r, &[b"CLIENT", b"CACHING", b"no"], &mut log);
    run(&mut r, &[b"GET", b"k1"], &mut log);
    run(&mut r, &[b"CLIENT", b"CACHING", b"yes"], &mut log);
    run(&mut r, &[b"CLIENT", b"TRACKINGINFO"], &mut log);
    run(&mut r, &[b"GET", b"k2"], &mut log);
    run(&mut r, &[b"CLIENT", b"TRACKINGINFO"], &mut log);
    run(&mut w, &[b"MSET", b"k1", b"1", b"k2", b"2"], &mut log);
    log.push(format!("optin: {}", next(&mut r, 2000)));
    log.push(format!("optin: {}", next(&mut r, 100)));
    run(&mut r, &[b"CLIENT", b"TRACKING", b"off"], &mut log);
    run(
        &mut r,
        &[b"CLIENT", b"TRACKING", b"on", b"OPTOUT"],
        &mut log,
    );
    run(&mut r, &[b"CLIENT", b"CACHING", b"no"], &mut log);
    run(&mut r, &[b"GET", b"k1"], &mut log);
    run(&mut r, &[b"GET", b"k2"], &mut log);
    run(&mut w, &[b"MSET", b"k1", b"1", b"k2", b"2"], &mut log);
    log.push(format!("optout: {}", next(&mut r, 2000)));
    log.push(format!("optout: {}", next(&mut r, 100)));
    // FLUSHALL: one null.
    run(&mut r, &[b"GET", b"z"], &mut log);
    run(&mut w, &[b"FLUSHALL"], &mut log);
    log.push(format!("flush: {}", next(&mut r, 2000)));
    // INFO's fields, and the table's bound.
    run(&mut r, &[b"CLIENT", b"TRACKING", b"off"], &mut log);
    run(&mut r, &[b"CLIENT", b"TRACKING", b"on"], &mut log);
    for k in [&b"m1"[..], b"m2", b"m3"] {
        run(&mut r, &[b"GET", k], &mut log);
    }
    let info = |w: &mut Conn| {
        let text = String::from_utf8_lossy(&w.cmd(&[b"INFO"])).to_string();
        text.lines()
            .filter(|l| l.starts_with("tracking_"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    log.push(info(&mut w));
    run(
        &mut w,
        &[b"CONFIG", b"SET", b"tracking-table-max-keys", b"1"],
        &mut log,
    );
    run(&mut w, &[b"PING"], &mut log);
    for _ in 0..2 {
        // Which keys go is random: only the shape is compared.
        let m = next(&mut r, 2000);
        log.push(format!(
            "bound: {}",
            m.starts_with(">2\\r\\n$10\\r\\ninvalidate\\r\\n*1\\r\\n$2\\r\\nm")
        ));
    }
    log.push(info(&mut w));
    run(
        &mut w,
        &[b"CONFIG", b"GET", b"tracking-table-max-keys"],
        &mut log,
    );
    // Errors.
    run(&mut r, &[b"CLIENT", b"TRACKING", b"off"], &mut log);
    r.cmd(&[b"HELLO", b"2"]);
    for args in [
        &[&b"CLIENT"[..], b"TRACKING", b"on", b"REDIRECT", b"0"][..],
        &[b"CLIENT", b"TRACKING", b"on", b"REDIRECT", b"x"],
        &[
            b"CLIENT",
            b"TRACKING",
            b"on",
            b"REDIRECT",
            rid,
            b"REDIRECT",
            rid,
        ],
        &[b"CLIENT", b"TRACKING", b"maybe"],
        &[b"CLIENT", b"TRACKING", b"on", b"BOGUS"],
        &[b"CLIENT", b"TRACKING", b"on", b"PREFIX", b"a"],
        &[b"CLIENT", b"TRACKING", b"on", b"BCAST", b"OPTIN"],
        &[b"CLIENT", b"TRACKING", b"on", b"OPTIN", b"OPTOUT"],
        &[
            b"CLIENT",
            b"TRACKING",
            b"on",
            b"BCAST",
            b"PREFIX",
            b"FO",
            b"PREFIX",
            b"FOO",
        ],
        &[b"CLIENT", b"CACHING", b"yes"],
        &[b"CLIENT", b"TRACKING"],
        &[b"CLIENT", b"CACHING"],
        &[b"CLIENT", b"GETREDIR", b"x"],
        &[b"CLIENT", b"TRACKING", b"on", b"OPTIN"],
        &[b"CLIENT", b"CACHING", b"no"],
        &[b"CLIENT", b"CACHING", b"maybe"],
        &[b"CLIENT", b"TRACKING", b"on", b"OPTOUT"],
        &[b"CLIENT", b"TRACKING", b"on", b"BCAST"],
        &[b"CLIENT", b"TRACKINGINFO"],
    ] {
        run(&mut r, args, &mut log);
    }
    log
}

#[test]
fn client_tracking_matches_redis() {
    let redis = RedisServer::start();
    let want = session(redis.addr());
    let server = sluice();
    let got = session(server.addr());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "step {i} differs");
    }
    assert_eq!(got.len(), want.len());
    // The session proves something only if the messages came.
    assert!(
        want.iter()
            .any(|l| l.starts_with("redirected: *3\\r\\n$7\\r\\nmessage"))
    );
    assert!(
        want.iter()
            .any(|l| l.starts_with("flush: >2\\r\\n$10\\r\\ninvalidate\\r\\n_"))
    );
}
