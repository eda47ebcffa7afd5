//! The seed workloads W1, W2 and W5 end to end with the Rust `redis` crate, at chosen
//! timestamps, and the concurrency checks that prove MULTI/EXEC atomic across shards.

use redis::{Commands, Connection};
use sluice::TestServer;

fn connect(server: &TestServer) -> Connection {
    redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

/// One W1 call: the MULTI block a sliding-window limiter sends. Returns (allowed, count).
fn w1_call(con: &mut Connection, key: &str, now_ms: i64, period_s: i64, limit: i64) -> (bool, i64) {
    let (added, _removed, count, expire_set): (i64, i64, i64, i64) = redis::pipe()
        .atomic()
        .zadd(key, now_ms.to_string(), now_ms)
        .zrembyscore(key, 0, now_ms - period_s * 1000)
        .zcard(key)
        .expire(key, period_s + 1)
        .query(con)
        .unwrap();
    assert!(added == 0 || added == 1);
    assert_eq!(expire_set, 1);
    (count <= limit, count)
}

#[test]
fn w1_sliding_window_twenty_calls() {
    let server = TestServer::start().unwrap();
    let mut con = connect(&server);
    let t0: i64 = redis::cmd("CLOCK").arg("FREEZE").query(&mut con).unwrap();
    let key = "hist:Harry:reply";
    let mut allowed = 0;
    for i in 0..20 {
        let _: i64 = redis::cmd("CLOCK")
            .arg("SET")
            .arg(t0 + i)
            .query(&mut con)
            .unwrap();
        let (ok, count) = w1_call(&mut con, key, t0 + i, 60, 5);
        assert_eq!(count, i + 1);
        allowed += ok as i64;
        // Each call refreshes the TTL to P + 1 seconds.
        let ttl: i64 = con.ttl(key).unwrap();
        assert_eq!(ttl, 61);
    }
    assert_eq!(allowed, 5);
    // Two calls in the same millisecond: the member repeats, ZADD adds 0, the count stays.
    let (_, before) = w1_call(&mut con, key, t0 + 19, 60, 5);
    assert_eq!(before, 20);
    // A score with a fraction is accepted and ordered like Redis.
    let added: i64 = con.zadd(key, "frac", (t0 + 19) as f64 + 0.5).unwrap();
    assert_eq!(added, 1);
    let removed: i64 = con.zrem(key, "frac").unwrap();
    assert_eq!(removed, 1);
    // After P + 1 seconds of silence the key is gone (reaped) and the next call is allowed.
    let _: i64 = redis::cmd("CLOCK")
        .arg("ADVANCE")
        .arg(61_001)
        .query(&mut con)
        .unwrap();
    let n: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(n, 0);
    let now: i64 = redis::cmd("CLOCK").arg("NOW").query(&mut con).unwrap();
    assert_eq!(w1_call(&mut con, key, now, 60, 5), (true, 1));
}

#[test]
fn w1_window_bounds_are_inclusive() {
    let server = TestServer::start().unwrap();
    let mut con = connect(&server);
    let key = "hist:u:a";
    for t in [1000, 2000, 3000] {
        let _: i64 = con.zadd(key, t.to_string(), t).unwrap();
    }
    // ZREMRANGEBYSCORE 0 2000 removes the entry at exactly 2000.
    let removed: i64 = con.zrembyscore(key, 0, 2000).unwrap();
    assert_eq!(removed, 2);
    let left: i64 = con.zcard(key).unwrap();
    assert_eq!(left, 1);
}

#[test]
fn w2_binary_keys_and_members_with_pexpire_and_zcount() {
    let server = TestServer::start().unwrap();
    let mut con = connect(&server);
    let _: i64 = redis::cmd("CLOCK").arg("FREEZE").query(&mut con).unwrap();
    // Java-serialized keys and members: not UTF-8, with embedded CR LF.
    let key: &[u8] = b"\xac\xed\x00\x05t\x00\x0blimit:\r\nuser";
    let n = 1000;
    let w = 1;
    let mut allowed = 0;
    for i in 0..1200i64 {
        let now = 1_000_000 + i / 2; // two requests per ms
        let over: i64 = con.zcount(key, now - w * 1000, now).unwrap();
        if over >= n {
            continue;
        }
        let card: i64 = con.zcard(key).unwrap();
        if card < n {
            let _: i64 = con.zrembyscore(key, 0, now - w * 1000).unwrap();
            let member = [b"\xac\xed\x00\x05\r\n".as_slice(), &i.to_be_bytes()].concat();
            let _: i64 = con.zadd(key, member, now).unwrap();
            let _: i64 = redis::cmd("PEXPIRE")
                .arg(key)
                .arg(w * 1000)
                .query(&mut con)
                .unwrap();
            allowed += 1;
        }
    }
    assert_eq!(allowed, 1000);
    let inside: i64 = con.zcount(key, 1_000_000, "(1000500").unwrap();
    assert_eq!(inside, 1000);
    let pttl: i64 = redis::cmd("PTTL").arg(key).query(&mut con).unwrap();
    assert_eq!(pttl, 1000);
    let members: Vec<Vec<u8>> = con.zrange(key, 0, 0).unwrap();
    assert_eq!(&members[0][..6], b"\xac\xed\x00\x05\r\n");
}

/// One leak of the funnel: the W5 state kept in a hash, updated optimistically.
fn funnel_request(
    con: &mut Connection,
    key: &str,
    capacity: f64,
    leak_per_ms: f64,
    now: i64,
) -> bool {
    loop {
        let _: () = redis::cmd("WATCH").arg(key).query(con).unwrap();
        let (left, last): (Option<f64>, Option<i64>) = redis::cmd("HMGET")
            .arg(key)
            .arg("left")
            .arg("last")
            .query(con)
            .unwrap();
        let mut left = left.unwrap_or(capacity);
        let last = last.unwrap_or(now);
        left = (left + (now - last) as f64 * leak_per_ms).min(capacity);
        let allowed = left >= 1.0;
        if allowed {
            left -= 1.0;
        }
        let result: Option<(i64,)> = redis::pipe()
            .atomic()
            .cmd("HSET")
            .arg(key)
            .arg("left")
            .arg(left)
            .arg("last")
            .arg(now)
            .arg("capacity")
            .arg(capacity)
            .query(con)
            .unwrap();
        if result.is_some() {
            return allowed;
        }
        // EXEC returned nil: someone else changed the funnel; retry, as the client would.
    }
}

#[test]
fn w5_funnel_with_watch_under_concurrency_equals_serial() {
    let server = TestServer::start().unwrap();
    let url = server.url();
    // Time does not move, so no leak: exactly `capacity` requests pass whatever the order.
    let handles: Vec<_> = (0..16)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
                (0..20)
                    .filter(|_| funnel_request(&mut con, "funnel:u1", 50.0, 0.0, 1000))
                    .count()
            })
        })
        .collect();
    let allowed: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(allowed, 50);
    let mut con = connect(&server);
    let left: f64 = con.hget("funnel:u1", "left").unwrap();
    assert_eq!(left, 0.0);
    // A watched key touched by the watcher itself aborts its own EXEC.
    let _: () = redis::cmd("WATCH")
        .arg("funnel:u1")
        .query(&mut con)
        .unwrap();
    let _: i64 = con.hset("funnel:u1", "left", 0).unwrap();
    let r: Option<(i64,)> = redis::pipe()
        .atomic()
        .cmd("HLEN")
        .arg("funnel:u1")
        .query(&mut con)
        .unwrap();
    assert_eq!(r, None);
}

#[test]
fn thirty_two_connections_w1_same_key_and_different_keys() {
    let server = TestServer::start().unwrap();
    let url = server.url();
    let mut admin = connect(&server);
    let _: i64 = redis::cmd("CLOCK").arg("FREEZE").query(&mut admin).unwrap();
    let calls = 25;
    let handles: Vec<_> = (0..32)
        .map(|c| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
                let mut counts = Vec::new();
                for i in 0..calls {
                    // Distinct members per call: scores are distinct ms, members unique.
                    let now = 1_000_000 + (c * calls + i) as i64;
                    let (_, shared_count) = w1_call(&mut con, "hist:shared", now, 3600, 10);
                    let (_, own_count) = w1_call(&mut con, &format!("hist:own:{c}"), now, 3600, 10);
                    assert_eq!(own_count, i as i64 + 1, "a private key counts exactly");
                    counts.push(shared_count);
                }
                counts
            })
        })
        .collect();
    let mut all: Vec<i64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort_unstable();
    // Every EXEC saw a distinct count 1..=800: no lost ZADD, no two blocks interleaved.
    assert_eq!(all, (1..=32 * calls as i64).collect::<Vec<_>>());
    let total: i64 = admin.zcard("hist:shared").unwrap();
    assert_eq!(total, 32 * calls as i64);
}
