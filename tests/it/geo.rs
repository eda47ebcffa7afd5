//! The geo commands end to end where a transcript cannot show it (replies, errors and
//! notifications are compared with redis-server in `tests/diff/geo.txt`, and randomly in
//! `random_diff::random_geo_sequences_match_redis`): what reaches a replica, compared with
//! a redis-server 7.0.15's own replication stream (GEOADD as the ZADD Redis rewrites it to,
//! only when it changed something; GEORADIUS … STORE and GEOSEARCHSTORE as sent, only when
//! they changed the destination), and a geo search through a real client library.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::support::{Conn, RedisServer, escape, sluice};

/// A raw replica of the server at `addr`: REPLCONF, then PSYNC, skip the full resync's
/// payload (and the newlines Redis sends while it prepares it), return the socket at the
/// write stream.
pub(crate) fn raw_replica(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // One at a time: Redis refuses a PSYNC that arrives while a reply is still pending.
    s.write_all(b"*3\r\n$8\r\nREPLCONF\r\n$4\r\ncapa\r\n$6\r\npsync2\r\n")
        .unwrap();
    let mut ok = [0u8; 5];
    s.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"+OK\r\n");
    s.write_all(b"*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n")
        .unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    let len = loop {
        s.read_exact(&mut byte).unwrap();
        if line.is_empty() && byte[0] == b'\n' {
            continue;
        }
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

/// The stream up to and including the command that mentions `marker`.
pub(crate) fn stream_until(s: &mut TcpStream, marker: &[u8]) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(marker.len()).any(|w| w == marker) {
        let n = s
            .read(&mut buf)
            .unwrap_or_else(|e| panic!("{e}; got {}", escape(&got)));
        assert!(n > 0, "stream closed; got {}", escape(&got));
        got.extend_from_slice(&buf[..n]);
    }
    got
}

#[test]
fn replicas_get_what_redis_propagates() {
    let redis = RedisServer::start();
    let server = sluice();
    let mut streams = Vec::new();
    for addr in [redis.addr(), server.addr()] {
        let mut c = Conn::connect(addr);
        // A disk-based full resync with a plain length, and no PINGs in the stream.
        if addr == redis.addr() {
            for (k, v) in [
                ("repl-diskless-sync", "no"),
                ("repl-ping-replica-period", "3600"),
            ] {
                let r = c.cmd(&[b"CONFIG", b"SET", k.as_bytes(), v.as_bytes()]);
                assert_eq!(r, b"+OK\r\n", "CONFIG SET {k}");
            }
        }
        let mut replica = raw_replica(addr);
        // One command a line, arguments split at spaces.
        let lines = [
            "GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
            // Nothing changes: not propagated.
            "GEOADD g 13.361389 38.115556 Palermo",
            "GEOADD g XX 1 2 absent",
            // Options as given, before the ZADD scores.
            "GEOADD g ch NX 13.361389 38.115556 Palermo 1 2 new",
            "GEOADD g XX CH 1.5 2 new",
            // Errors: nothing.
            "GEOADD g 200 2 bad",
            // A search without STORE writes nothing.
            "GEORADIUS g 15 37 200 km WITHDIST",
            "GEORADIUS g 15 37 200 km STORE d1",
            "GEORADIUSBYMEMBER g Palermo 200 km STOREDIST d2",
            // An empty result deletes the destination (propagated), or finds none (not).
            "GEORADIUS g -50 -50 1 km STORE d1",
            "GEORADIUS g -50 -50 1 km STORE d1",
            "GEORADIUS nokey 0 0 1 km STORE d2",
            "GEOSEARCHSTORE d3 g FROMLONLAT 15 37 BYBOX 400 400 km STOREDIST",
            "GEOSEARCHSTORE d9 g FROMLONLAT -50 -50 BYRADIUS 1 km",
            "GEOSEARCHSTORE d9 nokey FROMLONLAT -50 -50 BYRADIUS 1 km",
            "GEOSEARCHSTORE d9 g FROMLONLAT -50 -50 BYRADIUS 1 parsec",
            "GEOSEARCHSTORE d3 nokey FROMLONLAT -50 -50 BYRADIUS 1 km",
            "MULTI",
            "GEOADD g 3 4 inmulti",
            "GEORADIUS g 3 4 1 km STORE d4",
            "EXEC",
        ];
        let mut commands: Vec<Vec<&[u8]>> = lines
            .iter()
            .map(|l| l.split(' ').map(str::as_bytes).collect())
            .collect();
        commands.push(vec![
            b"EVAL",
            b"return redis.call('geoadd', KEYS[1], 5, 6, 'lua')",
            b"1",
            b"g",
        ]);
        commands.push(vec![b"SET", b"marker", b"done"]);
        for cmd in &commands {
            let _ = c.cmd(cmd);
        }
        streams.push(String::from_utf8_lossy(&stream_until(&mut replica, b"marker")).into_owned());
    }
    assert_eq!(
        streams[1], streams[0],
        "sluice's stream (left) differs from Redis's (right)"
    );
    // The comparison is not vacuous: the rewritten GEOADDs and the STORE forms are there.
    for part in [
        "zadd",
        "GEORADIUS",
        "GEORADIUSBYMEMBER",
        "GEOSEARCHSTORE",
        "MULTI",
    ] {
        assert!(streams[0].contains(part), "{part} missing: {}", streams[0]);
    }
}

#[test]
fn a_client_library_adds_and_searches() {
    let server = sluice();
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_connection().unwrap();
    let added: i64 = redis::cmd("GEOADD")
        .arg("Sicily")
        .arg(&[
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
        ])
        .query(&mut con)
        .unwrap();
    assert_eq!(added, 2);
    let near: Vec<(String, String)> = redis::cmd("GEOSEARCH")
        .arg("Sicily")
        .arg(&[
            "FROMLONLAT",
            "15",
            "37",
            "BYRADIUS",
            "200",
            "km",
            "ASC",
            "WITHDIST",
        ])
        .query(&mut con)
        .unwrap();
    assert_eq!(
        near,
        vec![
            ("Catania".to_string(), "56.4413".to_string()),
            ("Palermo".to_string(), "190.4424".to_string())
        ]
    );
    let pos: Vec<Option<(f64, f64)>> = redis::cmd("GEOPOS")
        .arg("Sicily")
        .arg("Palermo")
        .arg("nowhere")
        .query(&mut con)
        .unwrap();
    assert_eq!(
        pos,
        vec![Some((13.361389338970184, 38.1155563954963)), None]
    );
    let km: f64 = redis::cmd("GEODIST")
        .arg(&["Sicily", "Palermo", "Catania", "km"])
        .query(&mut con)
        .unwrap();
    assert_eq!(km, 166.2742);
}
