//! Streams end to end where a transcript cannot show it (replies, errors, blocking and
//! notifications are compared with redis-server in `tests/diff/stream.txt`, and randomly in
//! `random_diff::random_stream_sequences_match_redis`): what reaches a replica, compared
//! with a redis-server 7.0.15's own replication stream (XADD with the ID it made and `~`
//! trims made exact, XREADGROUP and XCLAIM/XAUTOCLAIM as `XCLAIM … FORCE JUSTID LASTID`,
//! NOACK reads as `XGROUP SETID`, nothing for a write that changed nothing), and a consumer
//! group through a real client library.

use crate::geo::{raw_replica, stream_until};
use crate::support::{Conn, RedisServer, sluice};

/// The stream with each `TIME <ms>` value masked: the delivery times come from each
/// server's own clock.
fn mask_times(stream: &str) -> String {
    let lines: Vec<&str> = stream.split("\r\n").collect();
    let mut out = Vec::with_capacity(lines.len());
    let mut mask = 0;
    for l in lines {
        if mask > 0 {
            mask -= 1;
            out.push(if mask == 0 { "<ms>" } else { "$<n>" });
            continue;
        }
        if l.eq_ignore_ascii_case("TIME") {
            mask = 2;
        }
        out.push(l);
    }
    out.join("\r\n")
}

#[test]
fn replicas_get_what_redis_propagates() {
    let redis = RedisServer::start();
    let server = sluice();
    let mut streams = Vec::new();
    for addr in [redis.addr(), server.addr()] {
        let mut c = Conn::connect(addr);
        let setup: &[&str] = if addr == redis.addr() {
            &[
                "CONFIG SET repl-diskless-sync no",
                "CONFIG SET repl-ping-replica-period 3600",
                "CONFIG SET stream-node-max-entries 2",
            ]
        } else {
            &["CONFIG SET stream-node-max-entries 2"]
        };
        for l in setup {
            let args: Vec<&[u8]> = l.split(' ').map(str::as_bytes).collect();
            assert_eq!(c.cmd(&args), b"+OK\r\n", "{l}");
        }
        let mut replica = raw_replica(addr);
        let lines = [
            "XADD s 1-1 f v",
            "XADD s 1-* f v",
            "XADD s 2 f v",
            "XADD s NOMKSTREAM 3-* f v",
            "XADD nokey NOMKSTREAM 1-1 f v",
            // Errors and no-ops propagate nothing.
            "XADD s 1-1 f v",
            "XDEL s 9-9",
            "XTRIM s MAXLEN 100",
            // Approximate trims become exact: `=` and the resulting length / first ID.
            "XADD s 4 f v",
            "XADD s 5 f v",
            "XADD s MAXLEN ~ 3 6-1 f v",
            "XTRIM s MINID ~ 6 LIMIT 100",
            "XTRIM s MAXLEN 1",
            "XADD s 7 f v",
            "XADD s 8 f v",
            "XDEL s 7 9",
            "XSETID s 20",
            "XGROUP CREATE s g 0",
            "XGROUP CREATE s g 0",
            "XGROUP CREATE s2 g $ MKSTREAM",
            "XGROUP CREATECONSUMER s g c0",
            "XGROUP CREATECONSUMER s g c0",
            "XADD s 21 f v",
            "XADD s 22 f v",
            "XADD s 23 f v",
            // Each delivered entry is an XCLAIM; NOACK moves the group by XGROUP SETID.
            "XREADGROUP GROUP g c1 COUNT 2 STREAMS s >",
            "XREADGROUP GROUP g c2 NOACK STREAMS s >",
            "XREADGROUP GROUP g c1 STREAMS s 0",
            "XACK s g 8-0",
            "XACK s g 21-0 99",
            "XCLAIM s g c3 0 22 JUSTID",
            "XCLAIM s g c3 0 8 LASTID 30",
            "XCLAIM s g c3 0 50 LASTID 40",
            "XDEL s 22",
            "XAUTOCLAIM s g c4 0 0",
            "XGROUP SETID s g 0 ENTRIESREAD 1",
            "XGROUP DELCONSUMER s g c4",
            "XGROUP DELCONSUMER s g nobody",
            "XGROUP DESTROY s g",
            "XGROUP DESTROY s g",
            "MULTI",
            "XADD s 31 f v",
            "XADD s MAXLEN ~ 1 32 f v",
            "EXEC",
        ];
        let mut commands: Vec<Vec<&[u8]>> = lines
            .iter()
            .map(|l| l.split(' ').map(str::as_bytes).collect())
            .collect();
        commands.push(vec![
            b"EVAL",
            b"return redis.call('xadd', KEYS[1], '40-*', 'lua', '1')",
            b"1",
            b"s",
        ]);
        commands.push(vec![b"SET", b"marker", b"done"]);
        for cmd in &commands {
            let _ = c.cmd(cmd);
        }
        let got = String::from_utf8_lossy(&stream_until(&mut replica, b"marker")).into_owned();
        streams.push(mask_times(&got));
    }
    assert_eq!(
        streams[1], streams[0],
        "sluice's stream (left) differs from Redis's (right)"
    );
    for part in ["XCLAIM", "SETID", "CREATECONSUMER", "XTRIM", "1-1", "MULTI"] {
        assert!(streams[0].contains(part), "{part} missing: {}", streams[0]);
    }
}

#[test]
fn a_client_library_runs_a_consumer_group() {
    let server = sluice();
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_connection().unwrap();
    let _: () = redis::cmd("XGROUP")
        .arg(&["CREATE", "jobs", "workers", "$", "MKSTREAM"])
        .query(&mut con)
        .unwrap();
    for i in 0..4 {
        let _: String = redis::cmd("XADD")
            .arg(&["jobs", "*", "job", &i.to_string()])
            .query(&mut con)
            .unwrap();
    }
    let got: redis::Value = redis::cmd("XREADGROUP")
        .arg(&[
            "GROUP", "workers", "w1", "COUNT", "3", "STREAMS", "jobs", ">",
        ])
        .query(&mut con)
        .unwrap();
    let text = format!("{got:?}");
    assert!(text.contains("job"), "{text}");
    let pending: (i64, String, String, Vec<(String, String)>) = redis::cmd("XPENDING")
        .arg(&["jobs", "workers"])
        .query(&mut con)
        .unwrap();
    assert_eq!(pending.0, 3);
    assert_eq!(pending.3, vec![("w1".to_string(), "3".to_string())]);
    let claimed: (String, Vec<String>, Vec<String>) = redis::cmd("XAUTOCLAIM")
        .arg(&["jobs", "workers", "w2", "0", "0", "COUNT", "2", "JUSTID"])
        .query(&mut con)
        .unwrap();
    assert_eq!(claimed.1.len(), 2);
    let acked: i64 = redis::cmd("XACK")
        .arg("jobs")
        .arg("workers")
        .arg(&claimed.1)
        .query(&mut con)
        .unwrap();
    assert_eq!(acked, 2);
    let left: (i64, String, String, Vec<(String, String)>) = redis::cmd("XPENDING")
        .arg(&["jobs", "workers"])
        .query(&mut con)
        .unwrap();
    assert_eq!(left.0, 1);
    let mut c = Conn::connect(server.addr());
    assert_eq!(c.cmd(&[b"TYPE", b"jobs"]), b"+stream\r\n");
}
