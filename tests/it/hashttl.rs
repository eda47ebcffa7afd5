//! Hash-field expiry (Redis 7.4's HEXPIRE family) where only sluice can be driven
//! deterministically: fields expired by the reaper when the test clock moves (HLEN, which
//! counts fields not yet deleted as Redis's does, shows the reaper removed them), the
//! `hexpired` and `del` notifications it publishes, and what reaches replicas (absolute
//! times, HDEL for fields expired). Replies and errors compared with Redis 7.4.1 are in
//! `tests/diff/hash_field_expiry.txt`.

use std::time::Duration;

use crate::support::{Conn, escape, sluice};

fn strings(reply: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < reply.len() {
        if reply[i] == b'$' {
            let Some(end) = reply[i..].windows(2).position(|w| w == b"\r\n") else {
                break;
            };
            let end = i + end;
            let len: usize = std::str::from_utf8(&reply[i + 1..end])
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            out.push(String::from_utf8_lossy(&reply[end + 2..end + 2 + len]).into_owned());
            i = end + 2 + len + 2;
        } else {
            i += 1;
        }
    }
    out
}

/// The (channel, payload) of the next pub/sub message.
fn message(sub: &mut Conn) -> (String, String) {
    let m = strings(&sub.read_reply());
    assert_eq!(m.len(), 4, "pmessage, pattern, channel, payload: {m:?}");
    (m[2].clone(), m[3].clone())
}

#[test]
fn the_test_clock_expires_fields_through_the_reaper_and_notifies() {
    let server = sluice();
    let mut c = Conn::connect(server.addr());
    let mut sub = Conn::connect(server.addr());
    let r = sub.cmd(&[b"PSUBSCRIBE", b"__keyevent@0__:*"]);
    assert!(r.starts_with(b"*3\r\n$10\r\npsubscribe"), "{}", escape(&r));
    assert_eq!(
        c.cmd(&[b"CONFIG", b"SET", b"notify-keyspace-events", b"Ehg"]),
        b"+OK\r\n"
    );
    let _ = c.cmd(&[b"CLOCK", b"FREEZE"]);
    assert_eq!(
        c.cmd(&[b"HSET", b"h", b"a", b"1", b"b", b"2", b"c", b"3"]),
        b":3\r\n"
    );
    assert_eq!(
        c.cmd(&[b"HPEXPIRE", b"h", b"1000", b"FIELDS", b"2", b"a", b"b"]),
        b"*2\r\n:1\r\n:1\r\n"
    );
    assert_eq!(
        message(&mut sub),
        ("__keyevent@0__:hset".into(), "h".into())
    );
    assert_eq!(
        message(&mut sub),
        ("__keyevent@0__:hexpire".into(), "h".into())
    );
    assert_eq!(
        c.cmd(&[b"HPTTL", b"h", b"FIELDS", b"3", b"a", b"b", b"c"]),
        b"*3\r\n:1000\r\n:1000\r\n:-1\r\n"
    );
    let _ = c.cmd(&[b"CLOCK", b"ADVANCE", b"999"]);
    assert_eq!(c.cmd(&[b"HLEN", b"h"]), b":3\r\n");
    assert_eq!(
        c.cmd(&[b"HPTTL", b"h", b"FIELDS", b"1", b"a"]),
        b"*1\r\n:1\r\n"
    );
    // Due one millisecond after their time (a field is expired once now > its time).
    let _ = c.cmd(&[b"CLOCK", b"ADVANCE", b"2"]);
    // HLEN deletes nothing itself: the reaper did, before CLOCK ADVANCE replied.
    assert_eq!(c.cmd(&[b"HLEN", b"h"]), b":1\r\n");
    assert_eq!(
        message(&mut sub),
        ("__keyevent@0__:hexpired".into(), "h".into())
    );
    assert_eq!(c.cmd(&[b"HGETALL", b"h"]), b"*2\r\n$1\r\nc\r\n$1\r\n3\r\n");
    // The last field takes the key with it: `hexpired`, then `del`.
    assert_eq!(
        c.cmd(&[b"HEXPIRE", b"h", b"5", b"FIELDS", b"1", b"c"]),
        b"*1\r\n:1\r\n"
    );
    assert_eq!(
        message(&mut sub),
        ("__keyevent@0__:hexpire".into(), "h".into())
    );
    let _ = c.cmd(&[b"CLOCK", b"ADVANCE", b"5001"]);
    assert_eq!(c.cmd(&[b"EXISTS", b"h"]), b":0\r\n");
    assert_eq!(
        message(&mut sub),
        ("__keyevent@0__:hexpired".into(), "h".into())
    );
    assert_eq!(message(&mut sub), ("__keyevent@0__:del".into(), "h".into()));
    sub.poll(Duration::from_millis(100));
    assert!(sub.buffered().is_empty(), "{}", escape(sub.buffered()));
}

#[test]
fn many_hashes_expire_past_one_reaper_batch() {
    let server = sluice();
    let mut c = Conn::connect(server.addr());
    let _ = c.cmd(&[b"CLOCK", b"FREEZE"]);
    let n = 300;
    for i in 0..n {
        let key = format!("h{i}");
        assert_eq!(
            c.cmd(&[b"HSET", key.as_bytes(), b"x", b"1", b"y", b"2"]),
            b":2\r\n"
        );
        let r = c.cmd(&[b"HPEXPIRE", key.as_bytes(), b"10", b"FIELDS", b"1", b"x"]);
        assert_eq!(r, b"*1\r\n:1\r\n");
    }
    let _ = c.cmd(&[b"CLOCK", b"ADVANCE", b"11"]);
    for i in 0..n {
        let key = format!("h{i}");
        assert_eq!(c.cmd(&[b"HLEN", key.as_bytes()]), b":1\r\n", "{key}");
    }
}

#[test]
fn a_field_ttl_survives_rename_and_copy() {
    let server = sluice();
    let mut c = Conn::connect(server.addr());
    let _ = c.cmd(&[b"CLOCK", b"FREEZE"]);
    assert_eq!(c.cmd(&[b"HSET", b"a", b"f", b"1", b"g", b"2"]), b":2\r\n");
    assert_eq!(
        c.cmd(&[b"HPEXPIRE", b"a", b"100", b"FIELDS", b"1", b"f"]),
        b"*1\r\n:1\r\n"
    );
    assert_eq!(c.cmd(&[b"RENAME", b"a", b"b"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"COPY", b"b", b"c"]), b":1\r\n");
    let _ = c.cmd(&[b"CLOCK", b"ADVANCE", b"101"]);
    for k in [&b"b"[..], b"c"] {
        assert_eq!(c.cmd(&[b"HLEN", k]), b":1\r\n", "{}", escape(k));
    }
}

/// Reads a master's replication stream as a replica would (see `repl::raw_replica`).
fn raw_replica(addr: std::net::SocketAddr) -> std::net::TcpStream {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"*3\r\n$8\r\nREPLCONF\r\n$4\r\ncapa\r\n$6\r\npsync2\r\n*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n")
        .unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    let len = loop {
        s.read_exact(&mut byte).unwrap();
        line.push(byte[0]);
        if line.ends_with(b"\r\n") {
            if line.starts_with(b"$") {
                break std::str::from_utf8(&line[1..line.len() - 2])
                    .unwrap()
                    .parse::<usize>()
                    .unwrap();
            }
            line.clear();
        }
    };
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).unwrap();
    s
}

fn stream_until(s: &mut std::net::TcpStream, got: &mut Vec<u8>, want: &[u8]) {
    use std::io::Read;
    let mut buf = [0u8; 4096];
    while !got.windows(want.len()).any(|w| w == want) {
        let n = s
            .read(&mut buf)
            .unwrap_or_else(|e| panic!("{e}; waiting for {}, got {}", escape(want), escape(got)));
        assert!(n > 0, "stream closed; got {}", escape(got));
        got.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn replicas_get_absolute_times_and_hdel_for_expired_fields() {
    let server = sluice();
    let mut c = Conn::connect(server.addr());
    let _ = c.cmd(&[b"CLOCK", b"SET", b"1900000000000"]);
    let _ = c.cmd(&[b"CLOCK", b"FREEZE"]);
    let mut s = raw_replica(server.addr());
    let mut got = Vec::new();
    assert_eq!(
        c.cmd(&[b"HSET", b"h", b"a", b"1", b"b", b"2", b"c", b"3"]),
        b":3\r\n"
    );
    // Relative, with a condition and a field that is missing: HPEXPIREAT of the fields set.
    assert_eq!(
        c.cmd(&[
            b"HEXPIRE", b"h", b"10", b"NX", b"FIELDS", b"3", b"a", b"zz", b"b"
        ]),
        b"*3\r\n:1\r\n:-2\r\n:1\r\n"
    );
    stream_until(
        &mut s,
        &mut got,
        b"*8\r\n$10\r\nHPEXPIREAT\r\n$1\r\nh\r\n$13\r\n1900000010000\r\n$2\r\nNX\r\n$6\r\nFIELDS\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\nb\r\n",
    );
    // A time already past deletes: HDEL, and no HPEXPIREAT.
    assert_eq!(
        c.cmd(&[b"HPEXPIREAT", b"h", b"1", b"FIELDS", b"1", b"c"]),
        b"*1\r\n:2\r\n"
    );
    stream_until(
        &mut s,
        &mut got,
        b"*3\r\n$4\r\nHDEL\r\n$1\r\nh\r\n$1\r\nc\r\n",
    );
    // The reaper's expiry of a field: HDEL too.
    let _ = c.cmd(&[b"CLOCK", b"ADVANCE", b"10001"]);
    stream_until(
        &mut s,
        &mut got,
        b"*3\r\n$4\r\nHDEL\r\n$1\r\nh\r\n$1\r\na\r\n",
    );
    stream_until(
        &mut s,
        &mut got,
        b"*3\r\n$4\r\nHDEL\r\n$1\r\nh\r\n$1\r\nb\r\n",
    );
    assert_eq!(c.cmd(&[b"EXISTS", b"h"]), b":0\r\n");
    // Redis 8.0's commands: relative times become PXAT / HPEXPIREAT, HGETDEL an HDEL, and
    // HINCRBYFLOAT on a field with a TTL an HSETEX … KEEPTTL (so the replica keeps it).
    assert_eq!(
        c.cmd(&[b"HSETEX", b"k", b"EX", b"10", b"FIELDS", b"1", b"f", b"v"]),
        b":1\r\n"
    );
    stream_until(
        &mut s,
        &mut got,
        b"*8\r\n$6\r\nHSETEX\r\n$1\r\nk\r\n$4\r\nPXAT\r\n$13\r\n1900000020001\r\n$6\r\nFIELDS\r\n$1\r\n1\r\n$1\r\nf\r\n$1\r\nv\r\n",
    );
    assert_eq!(c.cmd(&[b"HSET", b"k", b"a", b"1"]), b":1\r\n");
    assert_eq!(
        c.cmd(&[b"HGETEX", b"k", b"PX", b"5000", b"FIELDS", b"1", b"a"]),
        b"*1\r\n$1\r\n1\r\n"
    );
    stream_until(
        &mut s,
        &mut got,
        b"*6\r\n$10\r\nHPEXPIREAT\r\n$1\r\nk\r\n$13\r\n1900000015001\r\n$6\r\nFIELDS\r\n$1\r\n1\r\n$1\r\na\r\n",
    );
    assert_eq!(
        c.cmd(&[b"HINCRBYFLOAT", b"k", b"a", b"1.5"]),
        b"$3\r\n2.5\r\n"
    );
    stream_until(
        &mut s,
        &mut got,
        b"*7\r\n$6\r\nHSETEX\r\n$1\r\nk\r\n$7\r\nKEEPTTL\r\n$6\r\nFIELDS\r\n$1\r\n1\r\n$1\r\na\r\n$3\r\n2.5\r\n",
    );
    assert_eq!(
        c.cmd(&[b"HGETDEL", b"k", b"FIELDS", b"1", b"f"]),
        b"*1\r\n$1\r\nv\r\n"
    );
    stream_until(
        &mut s,
        &mut got,
        b"*3\r\n$4\r\nHDEL\r\n$1\r\nk\r\n$1\r\nf\r\n",
    );
    let text = String::from_utf8_lossy(&got);
    assert!(!text.contains("HEXPIRE\r\n"), "relative form sent: {text}");
}

/// SORT … BY / GET `hash->field` reads an expired field as missing, as every other read does,
/// whether or not the reaper has deleted it yet.
#[test]
fn sort_reads_an_expired_field_as_missing() {
    let server = sluice();
    let mut c = Conn::connect(server.addr());
    let _ = c.cmd(&[b"CLOCK", b"FREEZE"]);
    assert_eq!(c.cmd(&[b"RPUSH", b"ids", b"1", b"2"]), b":2\r\n");
    assert_eq!(c.cmd(&[b"HSET", b"w:1", b"n", b"10"]), b":1\r\n");
    assert_eq!(
        c.cmd(&[b"HSET", b"w:2", b"n", b"20", b"m", b"x"]),
        b":2\r\n"
    );
    assert_eq!(
        c.cmd(&[b"HPEXPIRE", b"w:2", b"100", b"FIELDS", b"1", b"n"]),
        b"*1\r\n:1\r\n"
    );
    let sort = [&b"SORT"[..], b"ids", b"BY", b"nosort", b"GET", b"w:*->n"];
    assert_eq!(c.cmd(&sort), b"*2\r\n$2\r\n10\r\n$2\r\n20\r\n");
    let _ = c.cmd(&[b"CLOCK", b"ADVANCE", b"101"]);
    assert_eq!(c.cmd(&sort), b"*2\r\n$2\r\n10\r\n$-1\r\n");
    assert_eq!(
        c.cmd(&[b"SORT", b"ids", b"BY", b"w:*->n", b"GET", b"#"]),
        b"*2\r\n$1\r\n2\r\n$1\r\n1\r\n"
    );
}
