//! Hostile clients against the registries of waiting clients: blocked keys, WATCH and
//! pub/sub. A client may name a hundred thousand keys, channels or patterns in one command,
//! and several clients may name the same ones; each registration and each removal must cost
//! O(1), so such clients cost time linear in what they send and never stop other clients.
//!
//! Each case runs against a sluice process of its own (its memory is its own) and against
//! `redis-server` 7.0.15, with the same replies; each ends with fresh clients served
//! promptly on every event loop and used_memory back near where it started.

use std::net::SocketAddr;

use crate::hostile_probe::{
    PROMPT, assert_memory_within, assert_served_promptly, command, eventually, info, many_keys,
    reply_within, used_memory,
};
use crate::proc::SluiceProcess;
use crate::support::{Conn, Read1, RedisServer};

/// How many keys, channels or patterns one hostile command names. The registries' old
/// costs were quadratic in it (seconds at 30,000; minutes at this size); linear, a case
/// takes well under a second. (Redis 7.0 itself is quadratic for WATCH and PSUBSCRIBE:
/// each new key or pattern is searched for in the client's list.)
const N: usize = 100_000;

/// The size at which the replies are compared with Redis's.
const SMALL: usize = 1_000;

/// What a case may leave allocated once its clients are gone.
const SLACK: i64 = 16 * 1024 * 1024;

/// Runs `case` at full size against a sluice process (the attack, with its checks), then
/// at a small size against a fresh one and against redis-server, and compares what the
/// two return.
fn against_both(case: fn(SocketAddr, usize) -> Vec<Vec<u8>>) {
    let attacked = SluiceProcess::start(&["--threads", "2"]);
    case(attacked.addr(), N);
    drop(attacked);
    let sluice = SluiceProcess::start(&["--threads", "2"]);
    let got = case(sluice.addr(), SMALL);
    let redis = RedisServer::start();
    let want = case(redis.addr(), SMALL);
    let text = |v: Vec<Vec<u8>>| {
        v.iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(text(got), text(want), "sluice and Redis differ");
}

fn next_reply(c: &mut Conn, what: &str) -> Vec<u8> {
    match c.read_one(PROMPT) {
        Read1::Reply(r) => r,
        other => panic!("{what}: {other:?}"),
    }
}

/// Reads `n` replies (confirmations), each within the prompt bound; returns the last.
fn drain_replies(c: &mut Conn, n: usize, what: &str) -> Vec<u8> {
    let mut last = Vec::new();
    for _ in 0..n {
        last = next_reply(c, what);
    }
    last
}

/// Three clients BLPOP the same 100,000 keys (each registration used to scan the other
/// waiters' keys, so the second never finished); pushes serve them in order, a closed one
/// is forgotten.
#[test]
fn many_clients_blocked_on_many_keys() {
    against_both(blocked_on_many_keys);
}

fn blocked_on_many_keys(addr: SocketAddr, n: usize) -> Vec<Vec<u8>> {
    let before = used_memory(addr);
    let keys = many_keys("bk:", n);
    let blpop = command(&[b"BLPOP"], &keys, &[b"0"]);
    let mut waiters: Vec<Conn> = (0..3).map(|_| Conn::connect(addr)).collect();
    // One after the other, so the order they are served in is known.
    for (i, w) in waiters.iter_mut().enumerate() {
        w.send(&blpop);
        if i == 1 {
            assert_served_promptly(addr, "a second BLPOP on the same keys");
        }
        eventually("the client blocked", || {
            info(addr, "clients", "blocked_clients") == i as i64 + 1
        });
    }
    let mut out = Vec::new();
    let mut pusher = Conn::connect(addr);
    out.push(reply_within(
        &mut pusher,
        &[b"RPUSH", b"bk:777", b"x"],
        PROMPT,
        "push",
    ));
    out.push(next_reply(&mut waiters[0], "first waiter served"));
    // The second goes away; the third is served next.
    drop(waiters.remove(1));
    eventually("the closed waiter forgotten", || {
        info(addr, "clients", "blocked_clients") == 1
    });
    out.push(reply_within(
        &mut pusher,
        &[b"LPUSH", b"bk:5", b"y", b"z"],
        PROMPT,
        "push",
    ));
    out.push(next_reply(&mut waiters[1], "third waiter served"));
    out.push(reply_within(
        &mut pusher,
        &[b"LRANGE", b"bk:5", b"0", b"-1"],
        PROMPT,
        "rest",
    ));
    out.push(reply_within(
        &mut pusher,
        &[b"DEL", b"bk:5"],
        PROMPT,
        "rest",
    ));
    // One more round, ended by timeouts rather than pushes.
    let timed = command(&[b"BRPOP"], &keys, &[b"0.05"]);
    for w in &mut waiters {
        w.send(&timed);
    }
    assert_served_promptly(addr, "BRPOPs timing out");
    for w in &mut waiters {
        out.push(next_reply(w, "timed out"));
    }
    assert_eq!(info(addr, "clients", "blocked_clients"), 0);
    assert_served_promptly(addr, "after the blocked clients");
    drop(waiters);
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_memory_within(addr, before, SLACK, "blocked keys");
    out
}

/// Two clients WATCH the same 100,000 keys (each WATCH used to scan the client's earlier
/// watches per key); a write to one of them fails the first client's EXEC; UNWATCH and a
/// disconnect forget the rest.
#[test]
fn many_clients_watching_many_keys() {
    against_both(watching_many_keys);
}

fn watching_many_keys(addr: SocketAddr, n: usize) -> Vec<Vec<u8>> {
    let before = used_memory(addr);
    let keys = many_keys("wk:", n);
    let watch = command(&[b"WATCH"], &keys, &[]);
    let mut a = Conn::connect(addr);
    let mut b = Conn::connect(addr);
    a.send(&watch);
    b.send(&watch);
    assert_served_promptly(addr, "two WATCHes of 100,000 keys");
    let mut out = vec![next_reply(&mut a, "watch"), next_reply(&mut b, "watch")];
    // Watching them again adds nothing.
    out.push(reply_within(&mut a, &watch, PROMPT, "watch again"));
    let mut writer = Conn::connect(addr);
    out.push(reply_within(
        &mut writer,
        &[b"SET", b"wk:313", b"v"],
        PROMPT,
        "set",
    ));
    for (c, what) in [(&mut a, "a"), (&mut b, "b")] {
        out.push(reply_within(c, &[b"MULTI"], PROMPT, what));
        out.push(reply_within(c, &[b"INCR", b"counter"], PROMPT, what));
        out.push(reply_within(c, &[b"EXEC"], PROMPT, what));
    }
    // Both were touched; watching again and writing every key costs linear time too.
    out.push(reply_within(&mut a, &watch, PROMPT, "watch once more"));
    let mset: Vec<Vec<u8>> = keys
        .iter()
        .flat_map(|k| [k.clone(), b"1".to_vec()])
        .collect();
    let mset = command(&[b"MSET"], &mset, &[]);
    out.push(reply_within(&mut writer, &mset, PROMPT, "mset"));
    out.push(reply_within(&mut a, &[b"UNWATCH"], PROMPT, "unwatch"));
    out.push(reply_within(&mut writer, &[b"FLUSHALL"], PROMPT, "flush"));
    drop(a);
    drop(b);
    assert_served_promptly(addr, "after the watchers");
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_memory_within(addr, before, SLACK, "watches");
    out
}

/// One client subscribes to 100,000 channels and as many patterns, then drops them: with
/// no argument, named in reverse, and by disconnecting (each removal used to shift the
/// client's ordered set). A PUBLISH meanwhile still reaches the subscriber.
#[test]
fn one_client_subscribed_to_many_channels_and_patterns() {
    against_both(subscribed_to_many);
}

fn subscribed_to_many(addr: SocketAddr, n: usize) -> Vec<Vec<u8>> {
    let before = used_memory(addr);
    let channels = many_keys("ch:", n);
    let patterns = many_keys("pat:*", n);
    let mut s = Conn::connect(addr);
    let mut out = Vec::new();
    s.send(&command(&[b"SUBSCRIBE"], &channels, &[]));
    out.push(drain_replies(&mut s, n, "subscribe"));
    let mut publisher = Conn::connect(addr);
    out.push(reply_within(
        &mut publisher,
        &[b"PUBLISH", b"ch:42", b"m"],
        PROMPT,
        "publish",
    ));
    out.push(next_reply(&mut s, "message"));
    s.send(&[b"UNSUBSCRIBE"]);
    assert_served_promptly(addr, "UNSUBSCRIBE from 100,000 channels");
    let last = drain_replies(&mut s, n, "unsubscribe");
    // Redis's order of an unnamed UNSUBSCRIBE is its dict's: compare the count only.
    out.push(last[last.len() - 4..].to_vec());
    s.send(&command(&[b"PSUBSCRIBE"], &patterns, &[]));
    out.push(drain_replies(&mut s, n, "psubscribe"));
    let reversed: Vec<Vec<u8>> = patterns.iter().rev().cloned().collect();
    s.send(&command(&[b"PUNSUBSCRIBE"], &reversed, &[]));
    assert_served_promptly(addr, "PUNSUBSCRIBE from 100,000 patterns");
    out.push(drain_replies(&mut s, n, "punsubscribe"));
    s.send(&command(&[b"SUBSCRIBE"], &channels, &[]));
    out.push(drain_replies(&mut s, n, "subscribe again"));
    drop(s);
    eventually("the subscriber forgotten", || {
        let mut c = Conn::connect(addr);
        c.cmd(&[b"PUBSUB", b"NUMSUB", b"ch:1"]) == b"*2\r\n$4\r\nch:1\r\n:0\r\n"
    });
    assert_served_promptly(addr, "after the subscriber");
    assert_memory_within(addr, before, SLACK, "subscriptions");
    out
}

/// Keyspace notifications of one write that names 100,000 keys: published after the
/// command's locks are released, every one reaches a pattern subscriber, a subscriber that
/// does not read holds them within the pubsub output limit until it goes, and other clients
/// are served meanwhile.
#[test]
fn keyspace_notifications_of_a_write_to_many_keys() {
    against_both(notifications_of_many);
}

fn notifications_of_many(addr: SocketAddr, n: usize) -> Vec<Vec<u8>> {
    let before = used_memory(addr);
    let mut admin = Conn::connect(addr);
    let mut out = Vec::new();
    let config = [&b"CONFIG"[..], b"SET", b"notify-keyspace-events", b"KEA"];
    out.push(reply_within(&mut admin, &config, PROMPT, "config"));
    let keys = many_keys("nk:", n);
    let pairs: Vec<Vec<u8>> = keys
        .iter()
        .flat_map(|k| [k.clone(), b"1".to_vec()])
        .collect();
    out.push(reply_within(
        &mut admin,
        &command(&[b"MSET"], &pairs, &[]),
        PROMPT,
        "mset",
    ));
    let mut reader = Conn::connect(addr);
    let psubscribe = [&b"PSUBSCRIBE"[..], b"__keyevent@0__:d*"];
    out.push(reply_within(&mut reader, &psubscribe, PROMPT, "psubscribe"));
    let mut silent = Conn::connect(addr);
    let subscribe = [&b"SUBSCRIBE"[..], b"__keyevent@0__:del"];
    out.push(reply_within(&mut silent, &subscribe, PROMPT, "subscribe"));
    // About 4 MB of events for each subscriber: under the default pubsub limits.
    admin.send(&command(&[b"DEL"], &keys, &[]));
    assert_served_promptly(addr, "the notifications of a DEL of 100,000 keys");
    out.push(next_reply(&mut admin, "del"));
    out.push(next_reply(&mut reader, "first event"));
    out.push(drain_replies(&mut reader, n - 1, "events"));
    let mut probe = Conn::connect(addr);
    out.push(probe.cmd(&[b"PUBSUB", b"NUMSUB", b"__keyevent@0__:del"]));
    drop((reader, silent));
    eventually("the subscribers gone", || {
        probe.cmd(&[b"PUBSUB", b"NUMPAT"]) == b":0\r\n"
    });
    assert_served_promptly(addr, "after the notifications");
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_memory_within(addr, before, SLACK, "keyspace notifications");
    out
}
