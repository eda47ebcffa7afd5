//! Pub/sub across connections: the bytes a subscriber and a publisher see for a scripted
//! sequence, compared between redis-server 7.0.15 and sluice in RESP2 and RESP3; a
//! subscriber that stops reading is dropped by `client-output-buffer-limit pubsub`; a
//! subscriber that goes away leaves no subscription behind.
//!
//! The single-connection replies (errors, PUBSUB, the RESP2 subscribed-mode set) are in
//! `tests/diff/pubsub.txt`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::support::{Conn, RedisServer, escape, sluice};

/// One step: which connection sends (0 = subscriber, 1 = publisher), what, and how many
/// replies/pushes each connection then receives.
struct Step {
    from: usize,
    args: &'static [&'static [u8]],
    expect: [usize; 2],
}

const fn step(from: usize, args: &'static [&'static [u8]], expect: [usize; 2]) -> Step {
    Step { from, args, expect }
}

const SUB: usize = 0;
const PUB: usize = 1;

static SCRIPT: &[Step] = &[
    step(SUB, &[b"SUBSCRIBE", b"news", b"sports"], [2, 0]),
    step(SUB, &[b"PSUBSCRIBE", b"n*"], [1, 0]),
    step(PUB, &[b"PUBLISH", b"news", b"hello"], [2, 1]),
    step(PUB, &[b"PUBLISH", b"sports", b""], [1, 1]),
    step(PUB, &[b"PUBLISH", b"nothing", b"x"], [1, 1]),
    step(PUB, &[b"PUBLISH", b"other", b"x"], [0, 1]),
    step(PUB, &[b"PUBLISH", b"sports", b"\x00\r\nbinary\xff"], [1, 1]),
    step(SUB, &[b"SSUBSCRIBE", b"s1"], [1, 0]),
    step(PUB, &[b"SPUBLISH", b"s1", b"m"], [1, 1]),
    step(PUB, &[b"SPUBLISH", b"news", b"m"], [0, 1]),
    step(
        PUB,
        &[b"PUBSUB", b"NUMSUB", b"news", b"sports", b"x"],
        [0, 1],
    ),
    step(PUB, &[b"PUBSUB", b"NUMPAT"], [0, 1]),
    step(PUB, &[b"PUBSUB", b"SHARDNUMSUB", b"s1"], [0, 1]),
    step(PUB, &[b"PUBSUB", b"SHARDCHANNELS"], [0, 1]),
    step(SUB, &[b"PING"], [1, 0]),
    step(SUB, &[b"GET", b"k"], [1, 0]),
    step(SUB, &[b"UNSUBSCRIBE", b"news"], [1, 0]),
    step(PUB, &[b"PUBLISH", b"news", b"again"], [1, 1]),
    step(SUB, &[b"PUNSUBSCRIBE"], [1, 0]),
    step(PUB, &[b"PUBLISH", b"news", b"gone"], [0, 1]),
    step(SUB, &[b"SUNSUBSCRIBE"], [1, 0]),
    step(PUB, &[b"SPUBLISH", b"s1", b"gone"], [0, 1]),
    step(SUB, &[b"UNSUBSCRIBE"], [1, 0]),
    step(SUB, &[b"PING"], [1, 0]),
    step(PUB, &[b"PUBSUB", b"NUMSUB", b"sports"], [0, 1]),
];

/// Runs the script against one server; returns, per step, what each connection received.
fn run_script(addr: SocketAddr, resp: u8) -> Vec<[Vec<Vec<u8>>; 2]> {
    let mut conns = [Conn::connect(addr), Conn::connect(addr)];
    for c in &mut conns {
        let hello = c.cmd(&[b"HELLO", if resp == 3 { b"3" } else { b"2" }]);
        assert!(!hello.starts_with(b"-"), "{}", escape(&hello));
    }
    let mut seen = Vec::new();
    for s in SCRIPT {
        conns[s.from].send(s.args);
        let mut got: [Vec<Vec<u8>>; 2] = Default::default();
        for (i, c) in conns.iter_mut().enumerate() {
            for _ in 0..s.expect[i] {
                got[i].push(c.read_reply());
            }
        }
        seen.push(got);
    }
    // Nothing more arrives on either connection.
    for c in &mut conns {
        c.poll(Duration::from_millis(50));
        assert!(
            c.buffered().is_empty(),
            "extra bytes: {}",
            escape(c.buffered())
        );
    }
    seen
}

fn compare(resp: u8) {
    let redis = RedisServer::start();
    let server = sluice();
    let want = run_script(redis.addr(), resp);
    let got = run_script(server.addr(), resp);
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        for side in [SUB, PUB] {
            let show = |x: &Vec<Vec<u8>>| x.iter().map(|r| escape(r)).collect::<Vec<_>>();
            assert_eq!(
                show(&w[side]),
                show(&g[side]),
                "RESP{resp} step {i} ({:?}), connection {side}",
                SCRIPT[i]
                    .args
                    .iter()
                    .map(|a| String::from_utf8_lossy(a))
                    .collect::<Vec<_>>()
            );
        }
    }
}

#[test]
fn subscriber_and_publisher_see_what_redis_shows_resp2() {
    compare(2);
}

#[test]
fn subscriber_and_publisher_see_what_redis_shows_resp3() {
    compare(3);
}

/// Waits (bounded) until `PUBSUB NUMSUB ch` answers `n`.
fn wait_numsub(c: &mut Conn, ch: &[u8], n: i64) -> bool {
    let want = format!(":{n}\r\n");
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let r = c.cmd(&[b"PUBSUB", b"NUMSUB", ch]);
        if r.ends_with(want.as_bytes()) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn a_subscriber_that_goes_away_leaves_no_subscription() {
    let server = sluice();
    let mut publisher = Conn::connect(server.addr());
    {
        let mut sub = Conn::connect(server.addr());
        sub.cmd(&[b"SUBSCRIBE", b"ch"]);
        sub.cmd(&[b"PSUBSCRIBE", b"c*"]);
        assert!(wait_numsub(&mut publisher, b"ch", 1));
    }
    assert!(wait_numsub(&mut publisher, b"ch", 0));
    assert_eq!(publisher.cmd(&[b"PUBSUB", b"NUMPAT"]), b":0\r\n");
    assert_eq!(publisher.cmd(&[b"PUBLISH", b"ch", b"x"]), b":0\r\n");
}

#[test]
fn a_subscriber_that_does_not_read_is_dropped_at_the_pubsub_limit() {
    let server = sluice();
    let mut publisher = Conn::connect(server.addr());
    assert_eq!(
        publisher.cmd(&[
            b"CONFIG",
            b"SET",
            b"client-output-buffer-limit",
            b"pubsub 1mb 256kb 60"
        ]),
        b"+OK\r\n"
    );
    let mut sub = Conn::connect(server.addr());
    sub.cmd(&[b"SUBSCRIBE", b"flood"]);
    // The subscriber never reads again. At most 64 MB are published (bounded in count):
    // the kernel's socket buffers take a few MB, the queue the rest up to the 1 MB limit.
    let payload = vec![b'x'; 64 * 1024];
    let mut dropped = false;
    for _ in 0..1024 {
        let r = publisher.cmd(&[b"PUBLISH", b"flood", &payload]);
        if r == b":0\r\n" {
            dropped = true;
            break;
        }
        assert_eq!(r, b":1\r\n");
    }
    assert!(dropped, "the subscriber was never dropped");
    assert!(wait_numsub(&mut publisher, b"flood", 0));
    // The server goes on serving.
    assert_eq!(publisher.cmd(&[b"PING"]), b"+PONG\r\n");
    let list = publisher.cmd(&[b"CLIENT", b"LIST"]);
    assert!(
        !String::from_utf8_lossy(&list).contains("sub=1"),
        "{}",
        escape(&list)
    );
}
