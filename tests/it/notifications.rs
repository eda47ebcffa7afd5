//! Keyspace notifications that only sluice can be driven to produce deterministically: keys
//! expired by the reaper (in bulk, past one reaper batch, with `CLOCK ADVANCE`, and one
//! expired by the background reaper with the clock running), and keys evicted by
//! `maxmemory`. The events of every command family, compared with Redis 7.0.15, are in
//! `tests/diff/notifications_*.txt`.

use std::collections::HashSet;
use std::time::Duration;

use crate::support::{Conn, encode_command, escape, sluice};

/// The elements of a flat RESP2 array of bulk strings (a pub/sub message).
fn strings(reply: &[u8]) -> Vec<Vec<u8>> {
    let text = reply;
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'$' {
            let end = text[i..]
                .windows(2)
                .position(|w| w == b"\r\n")
                .map(|p| i + p);
            let Some(end) = end else { break };
            let len: usize = std::str::from_utf8(&text[i + 1..end])
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            out.push(text[end + 2..end + 2 + len].to_vec());
            i = end + 2 + len + 2;
        } else {
            i += 1;
        }
    }
    out
}

/// A subscriber to `pattern` (RESP2), its confirmation read.
fn subscriber(addr: std::net::SocketAddr, pattern: &[u8]) -> Conn {
    let mut sub = Conn::connect(addr);
    let ok = sub.cmd(&[b"PSUBSCRIBE", pattern]);
    assert!(
        ok.starts_with(b"*3\r\n$10\r\npsubscribe"),
        "{}",
        escape(&ok)
    );
    sub
}

fn ok(c: &mut Conn, args: &[&[u8]]) {
    let r = c.cmd(args);
    assert_eq!(r, b"+OK\r\n", "{:?}: {}", args, escape(&r));
}

/// Reads `n` messages and returns (channel, payload) of each.
fn messages(sub: &mut Conn, n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..n)
        .map(|_| {
            let m = strings(&sub.read_reply());
            assert_eq!(m.len(), 4, "pmessage, pattern, channel, payload: {m:?}");
            (m[2].clone(), m[3].clone())
        })
        .collect()
}

fn assert_quiet(sub: &mut Conn) {
    sub.poll(Duration::from_millis(100));
    assert!(
        sub.buffered().is_empty(),
        "unexpected: {}",
        escape(sub.buffered())
    );
}

#[test]
fn clock_advance_reaps_in_batches_and_each_key_is_notified_once() {
    let server = sluice();
    let mut c = Conn::connect(server.addr());
    let mut sub = subscriber(server.addr(), b"__key*@0__:*");
    ok(
        &mut c,
        &[b"CONFIG", b"SET", b"notify-keyspace-events", b"KEx"],
    );
    let _ = c.cmd(&[b"CLOCK", b"FREEZE"]);
    // More keys than one reaper batch (128), all due at once.
    let n = 300;
    let mut batch = Vec::new();
    for i in 0..n {
        let key = format!("k{i}");
        batch.extend(encode_command(&[
            b"SET",
            key.as_bytes(),
            b"v",
            b"PX",
            b"1000",
        ]));
    }
    c.send_raw(&batch);
    for _ in 0..n {
        assert_eq!(c.read_reply(), b"+OK\r\n");
    }
    // Nothing expired yet, and `set`/`expire` are not selected (only `x`).
    assert_quiet(&mut sub);
    let _ = c.cmd(&[b"CLOCK", b"ADVANCE", b"1001"]);
    assert_eq!(c.cmd(&[b"DBSIZE"]), b":0\r\n");
    let got = messages(&mut sub, 2 * n);
    let mut keyspace = HashSet::new();
    let mut keyevent = HashSet::new();
    for (channel, payload) in got {
        if let Some(key) = channel.strip_prefix(b"__keyspace@0__:") {
            assert_eq!(payload, b"expired");
            assert!(keyspace.insert(key.to_vec()), "twice: {}", escape(key));
        } else {
            assert_eq!(channel, b"__keyevent@0__:expired");
            assert!(
                keyevent.insert(payload.clone()),
                "twice: {}",
                escape(&payload)
            );
        }
    }
    let want: HashSet<Vec<u8>> = (0..n).map(|i| format!("k{i}").into_bytes()).collect();
    assert_eq!(keyspace, want);
    assert_eq!(keyevent, want);
    assert_quiet(&mut sub);
}

#[test]
fn the_background_reaper_notifies_what_it_expires() {
    let server = sluice();
    let mut c = Conn::connect(server.addr());
    let mut sub = subscriber(server.addr(), b"__keyevent@0__:*");
    ok(
        &mut c,
        &[b"CONFIG", b"SET", b"notify-keyspace-events", b"Ex"],
    );
    // The clock runs: nobody touches the key, so only the reaper can expire it (it sleeps
    // at most 100 ms between passes).
    ok(&mut c, &[b"SET", b"gone", b"v", b"PX", b"5"]);
    let got = messages(&mut sub, 1);
    assert_eq!(
        got,
        vec![(b"__keyevent@0__:expired".to_vec(), b"gone".to_vec())]
    );
    assert_eq!(c.cmd(&[b"EXISTS", b"gone"]), b":0\r\n");
    assert_quiet(&mut sub);
}

#[test]
fn maxmemory_eviction_notifies_evicted_keys() {
    let server = sluice();
    let mut c = Conn::connect(server.addr());
    let mut sub = subscriber(server.addr(), b"__keyevent@*__:evicted");
    ok(
        &mut c,
        &[b"CONFIG", b"SET", b"notify-keyspace-events", b"Ee"],
    );
    ok(
        &mut c,
        &[b"CONFIG", b"SET", b"maxmemory-policy", b"allkeys-lru"],
    );
    let keys: Vec<String> = (0..5).map(|i| format!("e{i}")).collect();
    for k in &keys {
        ok(&mut c, &[b"SET", k.as_bytes(), b"value"]);
    }
    ok(&mut c, &[b"SELECT", b"3"]);
    ok(&mut c, &[b"SET", b"other", b"value"]);
    // Below what the process uses: the next command evicts every key it can.
    ok(&mut c, &[b"CONFIG", b"SET", b"maxmemory", b"1"]);
    let _ = c.cmd(&[b"GET", b"nothing"]);
    ok(&mut c, &[b"CONFIG", b"SET", b"maxmemory", b"0"]);
    assert_eq!(c.cmd(&[b"DBSIZE"]), b":0\r\n");
    let mut got: Vec<(Vec<u8>, Vec<u8>)> = messages(&mut sub, keys.len() + 1);
    got.sort();
    let mut want: Vec<(Vec<u8>, Vec<u8>)> = keys
        .iter()
        .map(|k| (b"__keyevent@0__:evicted".to_vec(), k.clone().into_bytes()))
        .collect();
    want.push((b"__keyevent@3__:evicted".to_vec(), b"other".to_vec()));
    want.sort();
    assert_eq!(got, want);
    assert_quiet(&mut sub);
}

#[test]
fn notifications_off_publish_nothing_and_classes_filter() {
    let server = sluice();
    let mut c = Conn::connect(server.addr());
    let mut sub = subscriber(server.addr(), b"__key*__:*");
    ok(&mut c, &[b"SET", b"a", b"1"]);
    let _ = c.cmd(&[b"DEL", b"a"]);
    assert_quiet(&mut sub);
    // A class without K or E publishes nothing either.
    ok(
        &mut c,
        &[b"CONFIG", b"SET", b"notify-keyspace-events", b"A"],
    );
    ok(&mut c, &[b"SET", b"a", b"1"]);
    assert_quiet(&mut sub);
    // Only lists: the string write is not published, the push is.
    ok(
        &mut c,
        &[b"CONFIG", b"SET", b"notify-keyspace-events", b"Kl"],
    );
    ok(&mut c, &[b"SET", b"a", b"2"]);
    let _ = c.cmd(&[b"RPUSH", b"l", b"x"]);
    assert_eq!(
        messages(&mut sub, 1),
        vec![(b"__keyspace@0__:l".to_vec(), b"rpush".to_vec())]
    );
    assert_quiet(&mut sub);
}

#[test]
fn cl_throttle_reports_its_write_as_set_and_expire() {
    let server = sluice();
    let mut c = Conn::connect(server.addr());
    let mut sub = subscriber(server.addr(), b"__keyspace@0__:*");
    ok(
        &mut c,
        &[b"CONFIG", b"SET", b"notify-keyspace-events", b"KA"],
    );
    let _ = c.cmd(&[b"CLOCK", b"FREEZE"]);
    // Allowed: the state is written.
    let r = c.cmd(&[b"CL.THROTTLE", b"u1", b"0", b"1", b"60", b"1"]);
    assert!(r.starts_with(b"*5\r\n:0\r\n"), "{}", escape(&r));
    assert_eq!(
        messages(&mut sub, 2),
        vec![
            (b"__keyspace@0__:u1".to_vec(), b"set".to_vec()),
            (b"__keyspace@0__:u1".to_vec(), b"expire".to_vec()),
        ]
    );
    // Limited: nothing is written, nothing is emitted.
    let r = c.cmd(&[b"CL.THROTTLE", b"u1", b"0", b"1", b"60", b"1"]);
    assert!(r.starts_with(b"*5\r\n:1\r\n"), "{}", escape(&r));
    assert_quiet(&mut sub);
}
