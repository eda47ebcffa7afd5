//! What every hostile test checks at its end: fresh clients are served promptly on every
//! event loop (a PING, and a write and a read that need a shard lock), and the server's
//! memory stayed within a bound. Shared by `hostile_blocking` and `hostile_repl`.

#![allow(dead_code)] // Not every test module uses every helper.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::proc::info_field;
use crate::support::{Conn, Read1};

/// How long a fresh client may wait for its reply while an attack is under way. Generous
/// (a debug build on a shared machine, the whole suite running beside it), yet far below
/// the minutes the quadratic registries took at the tests' sizes.
pub const PROMPT: Duration = Duration::from_secs(10);

/// Sends `args` and waits at most `bound` for the reply; panics (naming `what`) when none
/// comes in time.
pub fn reply_within(c: &mut Conn, args: &[&[u8]], bound: Duration, what: &str) -> Vec<u8> {
    let started = Instant::now();
    c.send(args);
    match c.read_one(bound) {
        Read1::Reply(r) => r,
        other => panic!(
            "{what}: no reply to {:?} within {bound:?} ({:?} elapsed): {other:?}",
            String::from_utf8_lossy(args[0]),
            started.elapsed()
        ),
    }
}

/// Fresh clients (four, so every event loop gets some: they are dealt round robin) each
/// answer PING, SET and GET within [`PROMPT`].
pub fn assert_served_promptly(addr: SocketAddr, what: &str) {
    for i in 0..4u8 {
        let mut c = Conn::connect(addr);
        assert_eq!(reply_within(&mut c, &[b"PING"], PROMPT, what), b"+PONG\r\n");
        let key = [b"probe:".as_slice(), &[b'0' + i]].concat();
        assert_eq!(
            reply_within(&mut c, &[b"SET", &key, b"v"], PROMPT, what),
            b"+OK\r\n"
        );
        assert_eq!(
            reply_within(&mut c, &[b"GET", &key], PROMPT, what),
            b"$1\r\nv\r\n"
        );
    }
}

/// INFO memory's used_memory.
pub fn used_memory(addr: SocketAddr) -> i64 {
    let mut c = Conn::connect(addr);
    info_field(&c.cmd(&[b"INFO", b"memory"]), "used_memory").expect("used_memory in INFO")
}

/// An INFO field of `section`.
pub fn info(addr: SocketAddr, section: &str, field: &str) -> i64 {
    let mut c = Conn::connect(addr);
    info_field(&c.cmd(&[b"INFO", section.as_bytes()]), field)
        .unwrap_or_else(|| panic!("{field} in INFO {section}"))
}

/// Asserts used_memory is at most `before + slack` (what the attack left behind).
pub fn assert_memory_within(addr: SocketAddr, before: i64, slack: i64, what: &str) {
    let after = used_memory(addr);
    assert!(
        after - before <= slack,
        "{what}: used_memory {before} -> {after} (more than {slack} bytes left behind)"
    );
}

/// The resident set of process `pid`, in bytes (VmRSS).
pub fn rss_bytes(pid: u32) -> i64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Waits (polling, at most 10 s) until `cond` holds; panics with `what` if it never does.
pub fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `n` distinct keys `<prefix><i>`.
pub fn many_keys(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}{i}").into_bytes())
        .collect()
}

/// `head…` followed by `keys` and `tail…`, as one argument list.
pub fn command<'a>(head: &[&'a [u8]], keys: &'a [Vec<u8>], tail: &[&'a [u8]]) -> Vec<&'a [u8]> {
    let mut args: Vec<&[u8]> = head.to_vec();
    args.extend(keys.iter().map(|k| k.as_slice()));
    args.extend_from_slice(tail);
    args
}
