//! Hostile clients against replication: clients that send PSYNC (as many replicas would)
//! and then never read, or read the snapshot and never acknowledge; PSYNC, SYNC and
//! REPLCONF before authenticating.
//!
//! A full resynchronization's snapshot is made once for every replica asking at that
//! moment, off the event loops, and freed once sent; a peer that does not read it (or,
//! once online, stops acknowledging) for `repl-timeout` is dropped. Each case runs against
//! a sluice process of its own and against `redis-server` 7.0.15 (the reference for what
//! the peers see), and ends with fresh clients served promptly and used_memory back near
//! where it started.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::hostile_probe::{
    assert_memory_within, assert_served_promptly, eventually, info, used_memory,
};
use crate::proc::SluiceProcess;
use crate::support::{Conn, RedisServer, encode_command};

/// Keys of the dataset and the size of each value: 24 MB in all.
const KEYS: usize = 240;
const VALUE: usize = 100 * 1024;

/// Clients that send PSYNC and never read.
const SILENT: usize = 8;

/// Loads the dataset with a few large MSETs.
fn fill(addr: SocketAddr) {
    let mut c = Conn::connect(addr);
    let value = vec![b'v'; VALUE];
    for batch in 0..KEYS / 40 {
        let keys: Vec<Vec<u8>> = (0..40)
            .map(|i| format!("data:{}", batch * 40 + i).into_bytes())
            .collect();
        let mut args: Vec<&[u8]> = vec![b"MSET"];
        for k in &keys {
            args.push(k);
            args.push(&value);
        }
        assert_eq!(c.cmd(&args), b"+OK\r\n");
    }
}

/// A raw peer that sent PSYNC: reads the `+FULLRESYNC` line and the `$<len>` payload.
struct Peer {
    stream: TcpStream,
}

impl Peer {
    fn psync(addr: SocketAddr) -> Peer {
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .write_all(&encode_command(&[b"PSYNC", b"?", b"-1"]))
            .expect("send PSYNC");
        Peer { stream }
    }

    fn byte(&mut self) -> u8 {
        let mut b = [0u8; 1];
        self.stream
            .read_exact(&mut b)
            .expect("read from the master");
        b[0]
    }

    /// One line without its CRLF, skipping the bare newlines a master sends while it
    /// prepares the snapshot.
    fn line(&mut self) -> String {
        let mut line = Vec::new();
        loop {
            match self.byte() {
                b'\n' if line.is_empty() => {}
                b'\n' => break,
                b => line.push(b),
            }
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        String::from_utf8_lossy(&line).into_owned()
    }

    /// Reads the full resynchronization: its offset and the payload's length.
    fn read_full_sync(&mut self) -> (u64, usize) {
        let _ = self.stream.set_read_timeout(Some(Duration::from_secs(20)));
        let head = self.line();
        let offset = head
            .strip_prefix("+FULLRESYNC ")
            .and_then(|r| r.split(' ').nth(1))
            .and_then(|o| o.parse().ok())
            .unwrap_or_else(|| panic!("not a full resync: {head:?}"));
        let len_line = self.line();
        let len: usize = len_line
            .strip_prefix('$')
            .and_then(|l| l.parse().ok())
            .unwrap_or_else(|| panic!("not a payload length: {len_line:?}"));
        let mut payload = vec![0u8; len];
        self.stream
            .read_exact(&mut payload)
            .expect("read the payload");
        assert!(payload.starts_with(b"REDIS"), "an RDB payload");
        (offset, len)
    }

    /// True once the master closed the connection (within `limit`).
    fn closed_within(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut buf = [0u8; 64 * 1024];
        while Instant::now() < deadline {
            let _ = self
                .stream
                .set_read_timeout(Some(Duration::from_millis(100)));
            match self.stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => return true,
            }
        }
        false
    }
}

/// Eight clients send PSYNC and never read while two real ones sync: the two get the same
/// snapshot (one offset), the loops keep serving, memory grows by one copy of the data at
/// most (it grew by eight, held until the peers read, on d5611ca), and the silent ones are
/// dropped after repl-timeout, which frees it.
#[test]
fn full_syncs_share_one_snapshot_and_silent_peers_are_dropped() {
    let sluice = SluiceProcess::start(&["--threads", "2"]);
    full_syncs(sluice.addr(), false);
    let redis = RedisServer::start();
    full_syncs(redis.addr(), true);
}

fn full_syncs(addr: SocketAddr, redis: bool) {
    let mut admin = Conn::connect(addr);
    assert_eq!(
        admin.cmd(&[b"CONFIG", b"SET", b"repl-timeout", b"2"]),
        b"+OK\r\n"
    );
    if redis {
        // Redis waits 5 s for more replicas before a diskless sync by default.
        assert_eq!(
            admin.cmd(&[b"CONFIG", b"SET", b"repl-diskless-sync-delay", b"0"]),
            b"+OK\r\n"
        );
    }
    fill(addr);
    let data = (KEYS * VALUE) as i64;
    let clients_before = info(addr, "clients", "connected_clients");
    let before = used_memory(addr);

    let mut silent: Vec<Peer> = (0..SILENT).map(|_| Peer::psync(addr)).collect();
    let mut readers: Vec<Peer> = (0..2).map(|_| Peer::psync(addr)).collect();
    let mut peak = before;
    assert_served_promptly(addr, "eight silent PSYNCs");
    let synced: Vec<(u64, usize)> = readers.iter_mut().map(Peer::read_full_sync).collect();
    assert_eq!(synced[0].0, synced[1].0, "both synced from one snapshot");
    peak = peak.max(used_memory(addr));
    assert_served_promptly(addr, "while the silent peers wait");
    peak = peak.max(used_memory(addr));
    if !redis {
        // Redis's used_memory does not count its fork's copy; sluice's counts everything.
        assert!(
            peak - before <= data + 16 * 1024 * 1024,
            "one snapshot for all: used_memory {before} -> {peak} with a {data}-byte dataset"
        );
    }
    // Nobody reads or acknowledges: all ten are dropped after repl-timeout (2 s).
    for p in silent.iter_mut().chain(readers.iter_mut()) {
        assert!(
            p.closed_within(Duration::from_secs(15)),
            "a silent peer dropped"
        );
    }
    eventually("the dropped peers gone", || {
        info(addr, "clients", "connected_clients") <= clients_before
    });
    assert_served_promptly(addr, "after the full syncs");
    assert_memory_within(addr, before, 16 * 1024 * 1024, "full syncs");
}

/// PSYNC, SYNC and REPLCONF need authentication like any command: `-NOAUTH` before AUTH,
/// as Redis 7.0 answers; REPLCONF ACK and GETACK from a client that is not a replica get
/// no reply at all.
#[test]
fn replication_commands_need_authentication() {
    let sluice = SluiceProcess::start(&["--requirepass", "s3cret"]);
    let redis = RedisServer::start();
    let mut rc = Conn::connect(redis.addr());
    assert_eq!(
        rc.cmd(&[b"CONFIG", b"SET", b"requirepass", b"s3cret"]),
        b"+OK\r\n"
    );
    for addr in [sluice.addr(), redis.addr()] {
        let mut c = Conn::connect(addr);
        for cmd in [
            &[&b"PSYNC"[..], b"?", b"-1"][..],
            &[b"SYNC"],
            &[b"REPLCONF", b"listening-port", b"6380"],
            &[b"REPLCONF", b"ack", b"1"],
        ] {
            assert_eq!(
                c.cmd(cmd),
                b"-NOAUTH Authentication required.\r\n",
                "{addr}"
            );
        }
        assert_eq!(c.cmd(&[b"AUTH", b"s3cret"]), b"+OK\r\n");
        c.send(&[b"REPLCONF", b"ack", b"1"]);
        c.send(&[b"REPLCONF", b"getack", b"1"]);
        assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n", "no reply to ACK/GETACK");
        let mut probe = Conn::connect(addr);
        assert_eq!(probe.cmd(&[b"AUTH", b"s3cret"]), b"+OK\r\n");
        assert_eq!(probe.cmd(&[b"PING"]), b"+PONG\r\n");
    }
}

/// A replica that takes its snapshot and then stops reading is dropped once the stream it
/// has not taken stays past the soft limit of the replica class of
/// client-output-buffer-limit for its time, even when the backlog could still hold it (on
/// d5611ca only falling out of the backlog dropped it). Redis 7.0 raises a hard limit below
/// repl-backlog-size to the backlog's size, so the soft limit is the one that acts here.
#[test]
fn a_replica_that_stops_reading_is_dropped_at_its_output_limit() {
    let sluice = SluiceProcess::start(&["--threads", "2"]);
    stops_reading(sluice.addr(), false);
    let redis = RedisServer::start();
    stops_reading(redis.addr(), true);
}

fn stops_reading(addr: SocketAddr, redis: bool) {
    let mut admin = Conn::connect(addr);
    let mut settings = vec![
        (&b"repl-backlog-size"[..], &b"64mb"[..]),
        (b"client-output-buffer-limit", b"replica 1mb 1mb 1"),
    ];
    if redis {
        settings.push((b"repl-diskless-sync-delay", b"0"));
    }
    for (name, value) in settings {
        assert_eq!(
            admin.cmd(&[b"CONFIG", b"SET", name, value]),
            b"+OK\r\n",
            "{addr}"
        );
    }
    let before = used_memory(addr);
    let mut peer = Peer::psync(addr);
    peer.read_full_sync();
    // 24 MB of writes: past the limit once the sockets' own buffers are full, well inside
    // the backlog.
    let value = vec![b'w'; 512 * 1024];
    for i in 0..48 {
        let key = format!("w:{i}");
        assert_eq!(admin.cmd(&[b"SET", key.as_bytes(), &value]), b"+OK\r\n");
    }
    assert_served_promptly(addr, "a replica that stopped reading");
    // Redis looks at the soft limit's time (in whole seconds) when it adds to the
    // replica's output: keep writing a little until the replica is gone (the peer itself
    // reads nothing meanwhile).
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut dropped = false;
    while !dropped && Instant::now() < deadline {
        assert_eq!(admin.cmd(&[b"SET", b"last", b"1"]), b"+OK\r\n");
        std::thread::sleep(Duration::from_millis(250));
        dropped = info(addr, "replication", "connected_slaves") == 0;
    }
    assert!(dropped, "{addr}: the replica dropped at its output limit");
    assert!(
        peer.closed_within(Duration::from_secs(10)),
        "{addr}: its connection closed"
    );
    assert_served_promptly(addr, "after the replica");
    // What stays is the dataset and the backlog that holds its stream (24 MB each; the
    // backlog's buffer grows by doubling, to 32 MB).
    assert_memory_within(
        addr,
        before,
        72 * 1024 * 1024,
        "a replica that stopped reading",
    );
}
