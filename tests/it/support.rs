//! Helpers every integration test uses: an in-process sluice, a real `redis-server` to
//! compare against, and a raw RESP client that returns the exact bytes of each reply.
//!
//! The raw client does no interpretation on purpose: the differential test compares replies
//! byte for byte, so it must see `$-1\r\n` and `_\r\n` as different things. Reply boundaries
//! are found with the `redis-protocol` crate's decoders (an implementation independent of
//! ours), never with sluice's own code.

#![allow(dead_code)] // Not every test module uses every helper.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long `read_reply` waits for a reply before failing.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Starts an in-process sluice on 127.0.0.1 with an ephemeral port (test mode).
pub fn sluice() -> sluice::TestServer {
    sluice::TestServer::start().expect("failed to start the in-process sluice server")
}

/// A real `redis-server` on a free loopback port, killed when dropped.
pub struct RedisServer {
    child: Child,
    port: u16,
    /// The cluster bus port (`start_cluster_node`), or 0.
    bus_port: u16,
    dir: PathBuf,
    /// The directory was given by the caller (`start_in`): left in place when dropped.
    keep_dir: bool,
}

/// A loopback port that was free a moment ago (bound to 127.0.0.1:0, then released), and
/// never handed out before in this test process. The tests run as threads of one process:
/// without the record, two tests could be handed the same released port before either's
/// server binds it, and the loser's start-up would retry a port that never frees (CI saw
/// two cluster nodes wait on one bus port this way).
pub fn free_port() -> u16 {
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("cannot bind 127.0.0.1:0");
        let port = listener.local_addr().expect("no local address").port();
        let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|p| p.into_inner());
        if !handed_out.contains(&port) {
            handed_out.push(port);
            return port;
        }
    }
}

impl RedisServer {
    /// Spawns `redis-server` (no persistence, loopback only, DEBUG enabled) and waits until
    /// it answers PING. Panics when the binary is missing: tests never skip for a missing tool.
    pub fn start() -> RedisServer {
        Self::start_with_dir(None)
    }

    /// `start`, with `dir` as its working directory (its RDB file `dump.rdb` is loaded at
    /// start and written by SAVE there); the directory is kept when the server is dropped.
    pub fn start_in(dir: &std::path::Path) -> RedisServer {
        Self::start_with_dir(Some(dir))
    }

    /// `start` with cluster mode on (its own nodes.conf in its directory, a free bus port):
    /// a node with no slots and no peers, for a test to build a small Redis Cluster with.
    pub fn start_cluster_node() -> RedisServer {
        Self::start_cluster_node_with_timeout(1000)
    }

    /// `start_cluster_node` with another `cluster-node-timeout` (ms): a test that never waits
    /// for a failure to be detected takes a long one, so a node slowed by the rest of the
    /// suite is not marked failed in the middle of it.
    pub fn start_cluster_node_with_timeout(node_timeout_ms: u64) -> RedisServer {
        Self::start_with(None, Some(node_timeout_ms))
    }

    fn start_with_dir(dir: Option<&std::path::Path>) -> RedisServer {
        Self::start_with(dir, None)
    }

    /// `start` with another build of redis-server (`bin`: a path), for the transcripts that
    /// need a newer Redis than the one on PATH (see `diff`'s module doc).
    pub fn start_binary(bin: &std::path::Path) -> RedisServer {
        Self::start_from(bin.as_os_str(), None, None)
    }

    /// `cluster`: cluster mode on with this node timeout (ms), or off.
    fn start_with(dir: Option<&std::path::Path>, cluster: Option<u64>) -> RedisServer {
        Self::start_from(std::ffi::OsStr::new("redis-server"), dir, cluster)
    }

    fn start_from(
        bin: &std::ffi::OsStr,
        dir: Option<&std::path::Path>,
        cluster: Option<u64>,
    ) -> RedisServer {
        let mut last_error = String::new();
        // The port is free when we pick it, but another test may take it before redis-server
        // binds; then redis-server exits and we try another.
        for _ in 0..5 {
            match Self::try_start(bin, dir, cluster) {
                Ok(server) => return server,
                Err(e) => last_error = e,
            }
        }
        panic!("redis-server did not start: {last_error}");
    }

    fn try_start(
        bin: &std::ffi::OsStr,
        given: Option<&std::path::Path>,
        cluster: Option<u64>,
    ) -> Result<RedisServer, String> {
        let port = free_port();
        let bus_port = if cluster.is_some() { free_port() } else { 0 };
        let dir = match given {
            Some(d) => d.to_path_buf(),
            None => {
                std::env::temp_dir().join(format!("sluice-it-redis-{}-{port}", std::process::id()))
            }
        };
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let spawned = Command::new(bin)
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--bind",
                "127.0.0.1",
                "--enable-debug-command",
                "yes",
            ])
            .arg("--port")
            .arg(port.to_string())
            .arg("--dir")
            .arg(&dir)
            .args(if let Some(node_timeout_ms) = cluster {
                vec![
                    "--cluster-enabled".to_string(),
                    "yes".to_string(),
                    "--cluster-port".to_string(),
                    bus_port.to_string(),
                    // Nodes ping each other every node-timeout/2: with 1000, gossip settles
                    // in a second.
                    "--cluster-node-timeout".to_string(),
                    node_timeout_ms.to_string(),
                    // A replica's first sync starts at once, not after 5 s.
                    "--repl-diskless-sync-delay".to_string(),
                    "0".to_string(),
                    // A replica's offset moves (and gossip shows it) within a second.
                    "--repl-ping-replica-period".to_string(),
                    "1".to_string(),
                ]
            } else {
                vec![]
            })
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match spawned {
            Ok(c) => c,
            Err(e) if e.kind() == ErrorKind::NotFound => panic!(
                "redis-server is not on PATH: the differential tests need the real Redis 7.0 \
                 (Debian: apt-get install redis-server). Tests fail rather than skip when a tool is missing."
            ),
            Err(e) => panic!("cannot run redis-server: {e}"),
        };
        let mut server = RedisServer {
            child,
            port,
            bus_port,
            dir,
            keep_dir: given.is_some(),
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!(
                    "redis-server exited at startup on port {port} ({status})"
                ));
            }
            if server.answers_ping() {
                return Ok(server);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "redis-server on port {port} did not answer PING within 5 s"
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn answers_ping(&self) -> bool {
        let Ok(mut s) = TcpStream::connect_timeout(&self.addr(), Duration::from_millis(200)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
        if s.write_all(b"*1\r\n$4\r\nPING\r\n").is_err() {
            return false;
        }
        let mut buf = [0u8; 7];
        s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The cluster bus port (0 unless started by `start_cluster_node`).
    pub fn bus_port(&self) -> u16 {
        self.bus_port
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Its working directory (where SAVE writes `dump.rdb`).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !self.keep_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Encodes `args` as a RESP multibulk request.
pub fn encode_command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    sluice::protocol::request::encode(&mut out, args);
    out
}

/// The length of the first complete reply in `buf`: `Ok(None)` if more bytes are needed.
///
/// The RESP3 decoder covers every RESP3 type but refuses RESP2's `$-1` and `*-1` nulls (it
/// reads them as streamed frames), so a buffer it cannot decode is tried as RESP2. The range
/// decoders are used so that non-UTF-8 bytes in simple strings and errors are fine.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, String> {
    if buf.is_empty() {
        return Ok(None);
    }
    let resp3 = match redis_protocol::resp3::decode::complete::decode_range(buf) {
        Ok(Some((_, n))) => return Ok(Some(n)),
        Ok(None) => None,
        Err(e) => Some(e),
    };
    match (resp3, redis_protocol::resp2::decode::decode_range(buf)) {
        (_, Ok(Some((_, n)))) => Ok(Some(n)),
        (None, _) | (_, Ok(None)) => Ok(None),
        // The crate refuses some valid RESP3 (a set of maps, as Redis 7's COMMAND INFO sends
        // in RESP3: it wants set elements hashable): measure those by their structure.
        (Some(e3), Err(e2)) => match scan_frame(buf, 0, 0) {
            Some(Scan::Complete(n)) => Ok(Some(n)),
            Some(Scan::Partial) => Ok(None),
            None => Err(format!(
                "undecodable reply {} (RESP3: {e3:?}; RESP2: {e2:?})",
                escape(buf)
            )),
        },
    }
}

enum Scan {
    Complete(usize),
    Partial,
}

/// The end of the RESP2/RESP3 frame starting at `at`, by its type bytes and lengths only;
/// `None` if the bytes are not RESP (or nest deeper than 64).
fn scan_frame(buf: &[u8], at: usize, depth: usize) -> Option<Scan> {
    if depth > 64 {
        return None;
    }
    let rest = buf.get(at..)?;
    let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else {
        return Some(Scan::Partial);
    };
    let (&kind, head) = rest[..eol].split_first()?;
    let head = std::str::from_utf8(head).ok();
    let mut end = at + eol + 2;
    match kind {
        b'+' | b'-' | b':' | b',' | b'(' | b'#' | b'_' => Some(Scan::Complete(end)),
        b'$' | b'=' | b'!' => {
            let len: i64 = head?.parse().ok()?;
            if len < 0 {
                return Some(Scan::Complete(end));
            }
            end += usize::try_from(len).ok()? + 2;
            Some(if buf.len() >= end {
                Scan::Complete(end)
            } else {
                Scan::Partial
            })
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n: i64 = head?.parse().ok()?;
            let per = if matches!(kind, b'%' | b'|') { 2 } else { 1 };
            // An attribute is followed by the value it describes.
            let extra = usize::from(kind == b'|');
            for _ in 0..usize::try_from(n).unwrap_or(0) * per + extra {
                match scan_frame(buf, end, depth + 1)? {
                    Scan::Complete(e) => end = e,
                    Scan::Partial => return Some(Scan::Partial),
                }
            }
            Some(Scan::Complete(end))
        }
        _ => None,
    }
}

/// What one attempt to read a reply produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read1 {
    /// One complete reply, exactly its bytes.
    Reply(Vec<u8>),
    /// The server closed the connection (these bytes, an incomplete reply, came first).
    Eof(Vec<u8>),
    /// Nothing complete arrived in time (these bytes did).
    Timeout(Vec<u8>),
    /// The bytes are not RESP.
    Garbage(String),
}

/// A raw RESP connection over a blocking `TcpStream`.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    closed: bool,
}

impl Conn {
    /// Connects to `addr` (panics on failure).
    pub fn connect(addr: SocketAddr) -> Conn {
        let stream =
            TcpStream::connect(addr).unwrap_or_else(|e| panic!("cannot connect to {addr}: {e}"));
        let _ = stream.set_nodelay(true);
        Conn {
            stream,
            buf: Vec::new(),
            closed: false,
        }
    }

    /// Wraps a stream that is already connected.
    pub fn from_stream(stream: TcpStream) -> Conn {
        let _ = stream.set_nodelay(true);
        Conn {
            stream,
            buf: Vec::new(),
            closed: false,
        }
    }

    /// Sends `args` as one multibulk request.
    pub fn send(&mut self, args: &[&[u8]]) {
        self.send_raw(&encode_command(args));
    }

    /// Sends bytes as they are.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream
            .write_all(bytes)
            .unwrap_or_else(|e| panic!("write failed: {e}"));
    }

    /// Like `send_raw`, but reports a failed write (the peer may have closed) instead of panicking.
    pub fn try_send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// The exact bytes of the next reply; panics on timeout (5 s), EOF or non-RESP bytes.
    pub fn read_reply(&mut self) -> Vec<u8> {
        match self.read_one(READ_TIMEOUT) {
            Read1::Reply(r) => r,
            other => panic!("expected a reply, got {other:?}"),
        }
    }

    /// Sends `args` and returns the exact bytes of the reply.
    pub fn cmd(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.send(args);
        self.read_reply()
    }

    /// Bytes received but not yet returned as a reply.
    pub fn buffered(&self) -> &[u8] {
        &self.buf
    }

    /// True once a read has seen the end of the stream.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Reads until one complete reply is buffered, the peer closes, or `timeout` passes.
    pub fn read_one(&mut self, timeout: Duration) -> Read1 {
        let deadline = Instant::now() + timeout;
        loop {
            match frame_len(&self.buf) {
                Ok(Some(n)) => return Read1::Reply(self.buf.drain(..n).collect()),
                Ok(None) => {}
                Err(e) => return Read1::Garbage(e),
            }
            if self.closed {
                return Read1::Eof(std::mem::take(&mut self.buf));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Read1::Timeout(self.buf.clone());
            }
            self.fill(left);
        }
    }

    /// Waits up to `quiet` for more bytes or the end of the stream, buffering whatever comes.
    /// Returns true if anything happened (bytes or EOF).
    pub fn poll(&mut self, quiet: Duration) -> bool {
        if self.closed {
            return false;
        }
        self.fill(quiet)
    }

    /// One read with a timeout; records EOF (a reset counts as EOF).
    fn fill(&mut self, timeout: Duration) -> bool {
        let _ = self
            .stream
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))));
        let mut chunk = [0u8; 16 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => {
                self.closed = true;
                true
            }
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                false
            }
            Err(_) => {
                self.closed = true;
                true
            }
        }
    }
}

/// Bytes as readable text: printable ASCII as is, `\r` `\n` `\t` `\\` `\"` escaped, the rest `\xHH`.
pub fn escape(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for &b in bytes {
        match b {
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s
}
