//! Clients of the Unix socket (`unixsocket`): served by the same event loops as TCP clients
//! (`server::eventloop`, the default `io-backend loop`), under the same `maxclients`, handed
//! over to the tokio connection code as TCP clients are when they block or subscribe, and
//! shown by CLIENT LIST / CLIENT INFO / CLIENT KILL / INFO clients as redis-server 7.0.15
//! shows them: each test runs the same steps against a live `redis-server` listening on a
//! Unix socket of its own and compares.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sluice::Config;

use crate::support::{encode_command, escape, frame_len, free_port};

/// A raw RESP client over a Unix socket: each reply's exact bytes.
struct Unix {
    stream: UnixStream,
    buf: Vec<u8>,
}

/// What reading a reply produced.
#[derive(Debug, PartialEq, Eq)]
enum Got {
    Reply(Vec<u8>),
    Closed(Vec<u8>),
    Nothing,
}

impl Unix {
    fn connect(path: &Path) -> Unix {
        let stream = UnixStream::connect(path)
            .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", path.display()));
        Unix {
            stream,
            buf: Vec::new(),
        }
    }

    /// Sends a request; a connection the server closed shows on the next read.
    fn send(&mut self, args: &[&[u8]]) {
        let _ = self.stream.write_all(&encode_command(args));
    }

    /// The next reply, the end of the connection, or nothing within `wait`.
    fn read(&mut self, wait: Duration) -> Got {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(n) = frame_len(&self.buf).unwrap() {
                return Got::Reply(self.buf.drain(..n).collect());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Got::Nothing;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            let mut chunk = [0u8; 16 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Got::Closed(std::mem::take(&mut self.buf)),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Got::Nothing;
                }
                Err(_) => return Got::Closed(std::mem::take(&mut self.buf)),
            }
        }
    }

    fn reply(&mut self) -> Vec<u8> {
        match self.read(Duration::from_secs(5)) {
            Got::Reply(r) => r,
            other => panic!("no reply: {other:?}"),
        }
    }

    fn cmd(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.send(args);
        self.reply()
    }

    /// A bulk reply's text.
    fn text(&mut self, args: &[&[u8]]) -> String {
        let r = self.cmd(args);
        let r = String::from_utf8(r).unwrap();
        let body = r.split_once("\r\n").map(|(_, b)| b).unwrap_or_default();
        body.trim_end_matches("\r\n").to_string()
    }
}

/// A private directory under the system temporary one, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "sluice-it-unix-{tag}-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A redis-server listening on `sock` (and a free loopback port), killed when dropped.
struct RedisUnix(Child);

impl RedisUnix {
    fn start(dir: &Path, sock: &Path) -> RedisUnix {
        let child = Command::new("redis-server")
            .args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
            .arg("--port")
            .arg(free_port().to_string())
            .arg("--dir")
            .arg(dir)
            .arg("--unixsocket")
            .arg(sock)
            .args(["--unixsocketperm", "700"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server 7.0.15 is needed on PATH (apt-get install redis-server)");
        let server = RedisUnix(child);
        let deadline = Instant::now() + Duration::from_secs(5);
        while UnixStream::connect(sock).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not listen");
            std::thread::sleep(Duration::from_millis(10));
        }
        server
    }
}

impl Drop for RedisUnix {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An in-process sluice listening on `sock` too.
fn sluice_on(dir: &Path, sock: &Path, threads: usize) -> sluice::TestServer {
    sluice::TestServer::start_with(Config {
        test_mode: true,
        save: Vec::new(),
        dir: Some(dir.display().to_string()),
        unixsocket: Some(sock.display().to_string()),
        unixsocketperm: 0o700,
        threads,
        ..Config::default()
    })
    .expect("cannot start sluice")
}

/// Runs `steps` against redis-server and against sluice, each listening on a Unix socket of
/// its own, and returns both transcripts with the socket's path written `<sock>`.
fn both(tag: &str, steps: impl Fn(&Path) -> Vec<String>) -> (Vec<String>, Vec<String>) {
    let scratch = Scratch::new(tag);
    let redis_sock = scratch.0.join("redis.sock");
    let redis_dir = scratch.0.join("redis");
    std::fs::create_dir_all(&redis_dir).unwrap();
    let redis = RedisUnix::start(&redis_dir, &redis_sock);
    let from_redis = steps(&redis_sock);
    drop(redis);
    let sluice_sock = scratch.0.join("sluice.sock");
    let sluice_dir = scratch.0.join("sluice");
    std::fs::create_dir_all(&sluice_dir).unwrap();
    let server = sluice_on(&sluice_dir, &sluice_sock, 1);
    let from_sluice = steps(&sluice_sock);
    drop(server);
    let anon = |lines: Vec<String>, sock: &Path| -> Vec<String> {
        let path = sock.display().to_string();
        lines
            .into_iter()
            .map(|l| l.replace(&path, "<sock>"))
            .collect()
    };
    (
        anon(from_redis, &redis_sock),
        anon(from_sluice, &sluice_sock),
    )
}

/// The fields of one CLIENT LIST / CLIENT INFO line that do not depend on the
/// implementation's memory layout, timing or file descriptors: name=value, in order, for
/// the names given, and every field's name in order (so a missing or extra field shows).
fn fields(line: &str, keep: &[&str]) -> String {
    let pairs: Vec<(&str, &str)> = line
        .split(' ')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let names: Vec<&str> = pairs.iter().map(|(k, _)| *k).collect();
    let kept: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| keep.contains(k))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!("{} | {}", names.join(","), kept.join(" "))
}

const KEEP: &[&str] = &[
    "addr", "laddr", "name", "flags", "db", "sub", "psub", "ssub", "multi", "cmd", "user", "redir",
    "resp",
];

#[test]
fn client_list_info_and_kill_of_unix_clients_match_redis() {
    let (redis, sluice) = both("list", |sock| {
        let mut out = Vec::new();
        let mut a = Unix::connect(sock);
        let mut b = Unix::connect(sock);
        out.push(fields(&a.text(&[b"CLIENT", b"INFO"]), KEEP));
        // In a transaction (x), with a name, in another database.
        assert_eq!(b.cmd(&[b"CLIENT", b"SETNAME", b"bee"]), b"+OK\r\n");
        assert_eq!(b.cmd(&[b"SELECT", b"3"]), b"+OK\r\n");
        assert_eq!(b.cmd(&[b"MULTI"]), b"+OK\r\n");
        let list = a.text(&[b"CLIENT", b"LIST", b"TYPE", b"normal"]);
        let mut lines: Vec<String> = list.lines().map(|l| fields(l, KEEP)).collect();
        lines.sort();
        out.extend(lines);
        assert_eq!(b.cmd(&[b"DISCARD"]), b"+OK\r\n");
        // A subscriber (P) is a pubsub client.
        let mut c = Unix::connect(sock);
        c.send(&[b"SUBSCRIBE", b"ch"]);
        out.push(escape(&c.reply()));
        let list = a.text(&[b"CLIENT", b"LIST", b"TYPE", b"pubsub"]);
        out.extend(list.lines().map(|l| fields(l, KEEP)));
        let info = a.text(&[b"INFO", b"clients"]);
        out.extend(
            info.lines()
                .filter(|l| l.starts_with("connected_clients:"))
                .map(str::to_string),
        );
        // CLIENT KILL by address and by local address: every other client of the socket
        // (the caller is skipped), new style.
        let addr = format!("{}:0", sock.display());
        out.push(escape(&a.cmd(&[
            b"CLIENT",
            b"KILL",
            b"ADDR",
            addr.as_bytes(),
            b"SKIPME",
            b"yes",
        ])));
        for (name, conn) in [("b", &mut b), ("c", &mut c)] {
            out.push(format!("{name}: {:?}", conn.read(Duration::from_secs(5))));
        }
        let mut d = Unix::connect(sock);
        assert_eq!(d.cmd(&[b"PING"]), b"+PONG\r\n");
        out.push(escape(&a.cmd(&[
            b"CLIENT",
            b"KILL",
            b"LADDR",
            addr.as_bytes(),
        ])));
        out.push(format!("d: {:?}", d.read(Duration::from_secs(5))));
        // Old style: every client of that address, the caller included (after its reply).
        let mut e = Unix::connect(sock);
        assert_eq!(e.cmd(&[b"PING"]), b"+PONG\r\n");
        out.push(escape(&a.cmd(&[b"CLIENT", b"KILL", addr.as_bytes()])));
        a.send(&[b"PING"]);
        out.push(format!("a: {:?}", a.read(Duration::from_secs(5))));
        out.push(format!("e: {:?}", e.read(Duration::from_secs(5))));
        out
    });
    assert_eq!(sluice, redis);
}

#[test]
fn maxclients_counts_unix_and_tcp_clients_alike() {
    let (redis, sluice) = both("maxclients", |sock| {
        let mut out = Vec::new();
        let mut a = Unix::connect(sock);
        assert_eq!(a.cmd(&[b"CONFIG", b"SET", b"maxclients", b"2"]), b"+OK\r\n");
        let mut b = Unix::connect(sock);
        out.push(escape(&b.cmd(&[b"PING"])));
        // The third is told and closed, over the socket as over TCP.
        let mut c = Unix::connect(sock);
        out.push(format!("{:?}", c.read(Duration::from_secs(5))));
        out.push(format!("{:?}", c.read(Duration::from_secs(5))));
        drop(b);
        // Once one leaves, a new one is admitted.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut d = Unix::connect(sock);
            d.send(&[b"PING"]);
            match d.read(Duration::from_secs(5)) {
                Got::Reply(r) if r == b"+PONG\r\n" => break,
                other => assert!(Instant::now() < deadline, "{other:?}"),
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        out.push(escape(&a.cmd(&[
            b"CONFIG",
            b"SET",
            b"maxclients",
            b"10000",
        ])));
        out
    });
    assert_eq!(sluice, redis);
}

#[test]
fn unix_clients_hand_over_and_back_as_tcp_clients_do() {
    let scratch = Scratch::new("handover");
    let sock = scratch.0.join("s.sock");
    let server = sluice_on(&scratch.0, &sock, 1);
    let mut a = Unix::connect(&sock);
    let mut b = Unix::connect(&sock);
    // SET runs on the loop, BLPOP blocks (the connection goes to tokio with GET still in
    // its buffer), GET runs after the pop is served: replies in order.
    let mut batch = encode_command(&[b"SET", b"k", b"v"]);
    batch.extend(encode_command(&[b"BLPOP", b"list", b"0"]));
    batch.extend(encode_command(&[b"GET", b"k"]));
    a.stream.write_all(&batch).unwrap();
    assert_eq!(a.reply(), b"+OK\r\n");
    assert_eq!(a.read(Duration::from_millis(200)), Got::Nothing);
    assert_eq!(b.cmd(&[b"RPUSH", b"list", b"x"]), b":1\r\n");
    assert_eq!(a.reply(), b"*2\r\n$4\r\nlist\r\n$1\r\nx\r\n");
    assert_eq!(a.reply(), b"$1\r\nv\r\n");
    assert_eq!(a.cmd(&[b"INCR", b"n"]), b":1\r\n");
    // A subscriber gets its messages.
    let mut sub = Unix::connect(&sock);
    assert_eq!(
        sub.cmd(&[b"SUBSCRIBE", b"ch"]),
        b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
    );
    assert_eq!(b.cmd(&[b"PUBLISH", b"ch", b"hi"]), b":1\r\n");
    assert_eq!(
        sub.reply(),
        b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n"
    );
    // CLIENT KILL of an idle client on the loop closes it at once.
    let mut idle = Unix::connect(&sock);
    let id = String::from_utf8(idle.cmd(&[b"CLIENT", b"ID"])).unwrap();
    let id = id.trim_start_matches(':').trim_end();
    assert_eq!(
        b.cmd(&[b"CLIENT", b"KILL", b"ID", id.as_bytes()]),
        b":1\r\n"
    );
    assert_eq!(idle.read(Duration::from_secs(5)), Got::Closed(Vec::new()));
    // Unix and TCP clients share the keyspace and the loop.
    let mut tcp = crate::support::Conn::connect(server.addr());
    assert_eq!(tcp.cmd(&[b"GET", b"k"]), b"$1\r\nv\r\n");
    assert_eq!(tcp.cmd(&[b"INCR", b"n"]), b":2\r\n");
    drop(server);
    assert!(!sock.exists(), "the socket file goes with the server");
}
