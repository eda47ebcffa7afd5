//! Exposure and resource limits (research note Table 2): bind, protected mode, maxclients,
//! idle timeout, bulk and multibulk caps, the query-buffer limit, and clients that send but
//! never read. Each test names the Table 2 row it proves.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use sluice::{Config, TestServer};

use crate::proc::{SluiceProcess, info_field};
use crate::support::{Conn, Read1};

fn start(config: Config) -> TestServer {
    TestServer::start_with(Config {
        test_mode: true,
        ..config
    })
    .unwrap()
}

/// Reads until EOF (or `limit`); true if the peer closed.
fn closed_within(s: &mut TcpStream, limit: Duration) -> (bool, Vec<u8>) {
    let deadline = Instant::now() + limit;
    let mut got = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    while Instant::now() < deadline {
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        match s.read(&mut buf) {
            Ok(0) => return (true, got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return (true, got),
        }
    }
    (false, got)
}

/// Table 2 "Bind address": by default only 127.0.0.1 listens; 127.0.0.2 (another loopback
/// address of the same machine) is refused.
#[test]
fn default_bind_is_127_0_0_1_only() {
    assert_eq!(Config::default().bind, vec!["127.0.0.1".to_string()]);
    let server = SluiceProcess::start(&[]);
    assert_eq!(server.addr().ip().to_string(), "127.0.0.1");
    let mut c = Conn::connect(server.addr());
    assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
    let other = SocketAddr::from(([127, 0, 0, 2], server.addr().port()));
    assert!(TcpStream::connect_timeout(&other, Duration::from_secs(2)).is_err());
}

/// Connects to `server` from source address 127.0.0.2: a "remote" peer for protected mode,
/// without leaving the machine. (std has no bind-before-connect, hence libc.)
fn connect_from_127_0_0_2(server: SocketAddr) -> TcpStream {
    use std::os::fd::FromRawFd;
    let sockaddr = |a: SocketAddr| {
        let SocketAddr::V4(v4) = a else {
            panic!("IPv4 only")
        };
        libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: v4.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*v4.ip()).to_be(),
            },
            sin_zero: [0; 8],
        }
    };
    let local = sockaddr(SocketAddr::from(([127, 0, 0, 2], 0)));
    let remote = sockaddr(server);
    let len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: plain socket calls on a descriptor we own; it is handed to TcpStream on
    // success and closed on failure.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        if libc::bind(fd, (&raw const local).cast(), len) != 0
            || libc::connect(fd, (&raw const remote).cast(), len) != 0
        {
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            panic!("connect from 127.0.0.2: {e}");
        }
        TcpStream::from_raw_fd(fd)
    }
}

/// Table 2 "Protected mode": a client from 127.0.0.2 gets Redis's DENIED text and EOF; one
/// from 127.0.0.1 gets PONG; once a password is set the 127.0.0.2 client may AUTH; with
/// `protected-mode no` it is let in.
#[test]
fn protected_mode_denies_non_local_peers_until_a_password_is_set() {
    let server = start(Config::default());
    let mut remote = connect_from_127_0_0_2(server.addr());
    let (closed, got) = closed_within(&mut remote, Duration::from_secs(5));
    assert!(closed, "the remote client must be disconnected");
    assert_eq!(
        String::from_utf8_lossy(&got),
        sluice::server::PROTECTED_MODE_DENIED
    );
    assert!(got.starts_with(b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user."));
    let mut local = Conn::connect(server.addr());
    assert_eq!(local.cmd(&[b"PING"]), b"+PONG\r\n");
    assert_eq!(
        local.cmd(&[b"CONFIG", b"SET", b"requirepass", b"pw"]),
        b"+OK\r\n"
    );
    let mut remote = Conn::from_stream(connect_from_127_0_0_2(server.addr()));
    assert_eq!(
        remote.cmd(&[b"PING"]),
        b"-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(remote.cmd(&[b"AUTH", b"pw"]), b"+OK\r\n");
    assert_eq!(remote.cmd(&[b"PING"]), b"+PONG\r\n");
    assert_eq!(
        remote.cmd(&[b"CONFIG", b"SET", b"requirepass", b""]),
        b"+OK\r\n"
    );
    assert_eq!(
        remote.cmd(&[b"CONFIG", b"SET", b"protected-mode", b"no"]),
        b"+OK\r\n"
    );
    let mut remote = Conn::from_stream(connect_from_127_0_0_2(server.addr()));
    assert_eq!(remote.cmd(&[b"PING"]), b"+PONG\r\n");
}

/// Table 2 "maxclients": with a limit of 5, the 6th connection gets Redis's text and EOF,
/// the first 5 keep working, and a slot freed by a client that leaves is reused.
#[test]
fn maxclients_refuses_the_extra_connection_only() {
    let server = start(Config {
        maxclients: 5,
        ..Config::default()
    });
    let mut conns: Vec<Conn> = (0..5).map(|_| Conn::connect(server.addr())).collect();
    for c in &mut conns {
        assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
    }
    let mut extra = TcpStream::connect(server.addr()).unwrap();
    let (closed, got) = closed_within(&mut extra, Duration::from_secs(5));
    assert!(closed);
    assert_eq!(got, b"-ERR max number of clients reached\r\n");
    for c in &mut conns {
        assert_eq!(c.cmd(&[b"INCR", b"n"]).first(), Some(&b':'));
    }
    let stats = conns[0].cmd(&[b"INFO", b"stats"]);
    assert_eq!(info_field(&stats, "rejected_connections"), Some(1));
    // One leaves; its slot is free again once the server has seen it go.
    drop(conns.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut c = Conn::connect(server.addr());
        c.send(&[b"PING"]);
        match c.read_one(Duration::from_secs(2)) {
            Read1::Reply(r) if r == b"+PONG\r\n" => break,
            other => assert!(Instant::now() < deadline, "slot never freed: {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Table 2 "Idle timeout": with `timeout 1` an idle client sees EOF after about a second,
/// while a client that keeps talking stays connected.
#[test]
fn idle_clients_are_closed_after_timeout() {
    let server = start(Config {
        timeout: 1,
        ..Config::default()
    });
    let started = Instant::now();
    let mut idle = TcpStream::connect(server.addr()).unwrap();
    idle.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut busy = Conn::connect(server.addr());
    let mut buf = [0u8; 16];
    let mut last_ping = Instant::now();
    let closed_after = loop {
        match idle.read(&mut buf) {
            Ok(0) => break started.elapsed(),
            Ok(n) => panic!("the idle client got {:?}", &buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break started.elapsed(),
            Err(_) => {}
        }
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "idle client never closed"
        );
        // Every 200-300 ms (the idle client's reads wait 100 ms): 700 ms of slack under a
        // 1 s timeout for a test thread the machine's load delays.
        if last_ping.elapsed() >= Duration::from_millis(200) {
            assert_eq!(busy.cmd(&[b"PING"]), b"+PONG\r\n");
            last_ping = Instant::now();
        }
    };
    assert!(
        closed_after >= Duration::from_millis(900),
        "closed too early: {closed_after:?}"
    );
    // The client that kept talking is still there: it answers now, and once more after the
    // cron has had time for another pass (had the pass that closed the idle client closed
    // it too, the second PING would find the connection gone).
    assert_eq!(busy.cmd(&[b"PING"]), b"+PONG\r\n");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(busy.cmd(&[b"PING"]), b"+PONG\r\n");
}

/// Table 2 "Bulk / array caps": a bulk over proto-max-bulk-len and a multibulk count over
/// INT_MAX get Redis's texts and EOF; `*2147483647` with nothing after allocates nothing
/// (used_memory of a server process of its own stays flat).
#[test]
fn bulk_and_multibulk_caps() {
    let server = start(Config {
        proto_max_bulk_len: 1024 * 1024,
        ..Config::default()
    });
    for (input, expected) in [
        (
            &b"*2\r\n$3\r\nGET\r\n$1048577\r\n"[..],
            &b"-ERR Protocol error: invalid bulk length\r\n"[..],
        ),
        (
            b"*1\r\n$2000000000\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*3000000000\r\n",
            b"-ERR Protocol error: invalid multibulk length\r\n",
        ),
    ] {
        let mut s = TcpStream::connect(server.addr()).unwrap();
        s.write_all(input).unwrap();
        let (closed, got) = closed_within(&mut s, Duration::from_secs(5));
        assert!(closed);
        assert_eq!(got, expected, "{}", String::from_utf8_lossy(input));
    }
    // Exactly the cap is fine.
    let mut c = Conn::connect(server.addr());
    let big = vec![b'x'; 1024 * 1024];
    assert_eq!(c.cmd(&[b"SET", b"big", &big]), b"+OK\r\n");

    let proc = SluiceProcess::start(&[]);
    let mut probe = Conn::connect(proc.addr());
    let before = info_field(&probe.cmd(&[b"INFO", b"memory"]), "used_memory").unwrap();
    let mut headers = Vec::new();
    for _ in 0..10 {
        let mut s = TcpStream::connect(proc.addr()).unwrap();
        s.write_all(b"*2147483647\r\n$536870912\r\n").unwrap();
        headers.push(s);
    }
    std::thread::sleep(Duration::from_millis(200));
    let after = info_field(&probe.cmd(&[b"INFO", b"memory"]), "used_memory").unwrap();
    assert!(
        after - before < 2 * 1024 * 1024,
        "declared lengths must not be allocated: {before} -> {after}"
    );
}

/// Table 2 "Query buffer limit": a client whose unparsed input passes
/// client-query-buffer-limit is closed; others are served meanwhile.
#[test]
fn query_buffer_limit_closes_the_client() {
    let server = start(Config {
        client_query_buffer_limit: 1024 * 1024,
        ..Config::default()
    });
    let mut greedy = TcpStream::connect(server.addr()).unwrap();
    greedy
        .write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000000\r\n")
        .unwrap();
    let chunk = vec![b'z'; 64 * 1024];
    let mut other = Conn::connect(server.addr());
    let mut sent = 0usize;
    let mut write_failed = false;
    while sent < 8 * 1024 * 1024 {
        if greedy.write_all(&chunk).is_err() {
            write_failed = true;
            break;
        }
        sent += chunk.len();
        if sent.is_multiple_of(512 * 1024) {
            assert_eq!(other.cmd(&[b"PING"]), b"+PONG\r\n");
        }
    }
    let (closed, _) = closed_within(&mut greedy, Duration::from_secs(5));
    assert!(
        write_failed || closed,
        "the client over the limit must be closed"
    );
    assert_eq!(other.cmd(&[b"PING"]), b"+PONG\r\n");
}

/// Table 2 "Query buffer limit" (pipelining): a client pipelines 100,000 commands and
/// never reads. The server stops reading it (its replies cannot be written), so memory stays
/// bounded, and another client is answered quickly.
#[test]
fn pipelining_without_reading_is_back_pressured() {
    let proc = SluiceProcess::start(&[]);
    let mut probe = Conn::connect(proc.addr());
    let before = info_field(&probe.cmd(&[b"INFO", b"memory"]), "used_memory").unwrap();
    let mut flood = TcpStream::connect(proc.addr()).unwrap();
    flood
        .set_write_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let one = b"*3\r\n$3\r\nSET\r\n$8\r\nflood:k1\r\n$64\r\n0123456789012345678901234567890123456789012345678901234567890123\r\n*2\r\n$3\r\nGET\r\n$8\r\nflood:k1\r\n";
    let writer = std::thread::spawn(move || {
        let mut batch = Vec::new();
        for _ in 0..500 {
            batch.extend_from_slice(one);
        }
        // 100 batches × 500 × 2 commands = 100,000 commands; the writes stall once both
        // kernels' buffers are full, which is the point.
        for _ in 0..100 {
            if flood.write_all(&batch).is_err() {
                break;
            }
        }
        flood
    });
    let mut worst = Duration::ZERO;
    for _ in 0..40 {
        let t = Instant::now();
        assert_eq!(probe.cmd(&[b"PING"]), b"+PONG\r\n");
        worst = worst.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(25));
    }
    let after = info_field(&probe.cmd(&[b"INFO", b"memory"]), "used_memory").unwrap();
    assert!(
        after - before < 16 * 1024 * 1024,
        "memory must stay bounded: {before} -> {after}"
    );
    // Liveness, not speed (speed is for the benchmarks): no PING waits for the flood.
    assert!(worst < Duration::from_secs(5), "PING took {worst:?}");
    drop(writer.join().unwrap());
}

/// Sets a 300 KB value and returns a connection that pipelines `n` GETs of it without ever
/// reading.
fn slow_reader(addr: SocketAddr, n: usize) -> TcpStream {
    let mut c = Conn::connect(addr);
    let big = vec![b'v'; 300 * 1024];
    assert_eq!(c.cmd(&[b"SET", b"big", &big]), b"+OK\r\n");
    let mut s = TcpStream::connect(addr).unwrap();
    let mut batch = Vec::new();
    for _ in 0..n {
        batch.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n");
    }
    s.write_all(&batch).unwrap();
    s
}

/// Measures PING round trips on a fresh connection for `for_how_long`: (95th percentile, max).
fn ping_latency(addr: SocketAddr, for_how_long: Duration) -> (Duration, Duration) {
    let mut c = Conn::connect(addr);
    let mut times = Vec::new();
    let until = Instant::now() + for_how_long;
    while Instant::now() < until {
        let t = Instant::now();
        assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
        times.push(t.elapsed());
        std::thread::sleep(Duration::from_millis(10));
    }
    times.sort();
    (times[times.len() * 95 / 100], *times.last().unwrap())
}

/// Table 2 "Output buffer / slow reader", default limits (Redis's `normal 0 0 0`): a client
/// asks for ~60 MB of replies and never reads. sluice stops reading from it, holds about one
/// reply for it, and other clients keep their latency.
#[test]
fn a_client_that_never_reads_is_back_pressured() {
    let proc = SluiceProcess::start(&[]);
    let mut probe = Conn::connect(proc.addr());
    let before = info_field(&probe.cmd(&[b"INFO", b"memory"]), "used_memory").unwrap();
    let slow = slow_reader(proc.addr(), 200);
    // Liveness, not speed (speed is for the benchmarks): every PING of the other client is
    // answered while the slow reader is pending; none waits for it.
    let (p95, max) = ping_latency(proc.addr(), Duration::from_millis(1500));
    eprintln!("PING while a client never reads: p95 {p95:?}, max {max:?}");
    assert!(max < Duration::from_secs(5), "max {max:?}");
    let after = info_field(&probe.cmd(&[b"INFO", b"memory"]), "used_memory").unwrap();
    assert!(
        after - before < 8 * 1024 * 1024,
        "the server must not buffer the unread replies: {before} -> {after}"
    );
    // Still connected: Redis's default never disconnects normal clients. (The PING client
    // just closed; its event loop may not have seen the close yet, so wait for it, bounded.)
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut clients;
    loop {
        clients = info_field(&probe.cmd(&[b"INFO", b"clients"]), "connected_clients");
        if clients == Some(2) || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(clients, Some(2));
    drop(slow);
}

/// Table 2 "Output buffer / slow reader", with `client-output-buffer-limit normal 0 256kb 1`:
/// the client that never reads is disconnected once its unsent replies stay above 256 KB for
/// a second; meanwhile other clients' PINGs answer fast.
#[test]
fn a_client_over_the_soft_output_limit_is_disconnected() {
    let proc = SluiceProcess::start(&["--client-output-buffer-limit", "normal", "0", "256kb", "1"]);
    let mut probe = Conn::connect(proc.addr());
    assert_eq!(
        probe.cmd(&[b"CONFIG", b"GET", b"client-output-buffer-limit"]),
        b"*2\r\n$26\r\nclient-output-buffer-limit\r\n$72\r\nnormal 0 262144 1 slave 268435456 67108864 60 pubsub 33554432 8388608 60\r\n"
    );
    let started = Instant::now();
    let mut slow = slow_reader(proc.addr(), 400);
    // Liveness, not speed (speed is for the benchmarks): every PING of the other client is
    // answered while the slow reader is pending; none waits for it.
    let (p95, max) = ping_latency(proc.addr(), Duration::from_millis(1000));
    eprintln!("PING while a client never reads: p95 {p95:?}, max {max:?}");
    assert!(max < Duration::from_secs(5), "max {max:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let clients = info_field(&probe.cmd(&[b"INFO", b"clients"]), "connected_clients");
        if clients == Some(1) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "slow client still connected: {clients:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(started.elapsed() >= Duration::from_secs(1));
    // Once it reads, it gets the replies that were written, then the end of the stream.
    let (closed, got) = closed_within(&mut slow, Duration::from_secs(10));
    assert!(closed);
    assert!(got.len() < 400 * 300 * 1024, "it was cut off early");

    // The hard limit: a single reply larger than it closes the client at once.
    assert_eq!(
        probe.cmd(&[
            b"CONFIG",
            b"SET",
            b"client-output-buffer-limit",
            b"normal 100kb 0 0"
        ]),
        b"+OK\r\n"
    );
    let mut c = TcpStream::connect(proc.addr()).unwrap();
    c.write_all(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n").unwrap();
    let (closed, got) = closed_within(&mut c, Duration::from_secs(5));
    assert!(
        closed && got.is_empty(),
        "closed {closed}, {} bytes",
        got.len()
    );
    assert_eq!(probe.cmd(&[b"GET", b"nothing"]), b"$-1\r\n");
}

/// Table 2 "requirepass / AUTH", "Pre-auth size caps" and "ACL users": the §2.2 table sent
/// to a real redis-server and to sluice side by side, replies and closes compared byte for
/// byte (before and after a password is set).
#[test]
fn auth_texts_and_pre_auth_caps_match_redis() {
    let redis = crate::support::RedisServer::start();
    let server = start(Config::default());
    let addrs = [redis.addr(), server.addr()];
    let run = |addr: SocketAddr, steps: &[&[u8]]| -> Vec<Vec<u8>> {
        let mut s = TcpStream::connect(addr).unwrap();
        let mut c = Conn::from_stream(s.try_clone().unwrap());
        let mut out = Vec::new();
        for step in steps {
            if s.write_all(step).is_err() {
                out.push(b"<write failed>".to_vec());
                break;
            }
            match c.read_one(Duration::from_secs(3)) {
                Read1::Reply(r) => {
                    // HELLO's map holds the server's id and version: keep its first line.
                    if r.starts_with(b"%") {
                        out.push(r[..r.iter().position(|&b| b == b'\n').unwrap() + 1].to_vec());
                    } else {
                        out.push(r);
                    }
                }
                Read1::Eof(rest) => {
                    out.push([b"<eof>".as_slice(), &rest].concat());
                    break;
                }
                other => out.push(format!("{other:?}").into_bytes()),
            }
        }
        if !c.is_closed() && c.read_one(Duration::from_millis(200)) != Read1::Timeout(Vec::new()) {
            out.push(b"<closed>".to_vec());
        }
        out
    };
    let compare = |steps: &[&[u8]]| {
        let r = run(addrs[0], steps);
        let s = run(addrs[1], steps);
        assert_eq!(
            r.iter()
                .map(|b| crate::support::escape(b))
                .collect::<Vec<_>>(),
            s.iter()
                .map(|b| crate::support::escape(b))
                .collect::<Vec<_>>(),
            "redis vs sluice for {:?}",
            steps
                .iter()
                .map(|b| crate::support::escape(b))
                .collect::<Vec<_>>()
        );
    };
    // No password set.
    compare(&[
        b"AUTH x\r\n",
        b"AUTH default x\r\n",
        b"AUTH someone x\r\n",
        b"PING\r\n",
    ]);
    for addr in addrs {
        let mut c = Conn::connect(addr);
        assert_eq!(
            c.cmd(&[b"CONFIG", b"SET", b"requirepass", b"pw"]),
            b"+OK\r\n"
        );
    }
    compare(&[
        b"GET k\r\n",
        b"AUTH wrong\r\n",
        b"AUTH default wrong\r\n",
        b"AUTH someone pw\r\n",
        b"HELLO 3\r\n",
        b"HELLO 4\r\n",
        b"NOSUCH x\r\n",
        b"AUTH pw\r\n",
        b"GET k\r\n",
    ]);
    compare(&[b"AUTH default pw\r\n", b"PING\r\n"]);
    compare(&[b"HELLO 3 AUTH default pw\r\n", b"GET k\r\n"]);
    compare(&[b"HELLO 3 AUTH default nope\r\n", b"GET k\r\n"]);
    compare(&[b"*100\r\n"]);
    compare(&[b"*1\r\n$100000000\r\n"]);
    compare(&[b"*11\r\n"]);
    compare(&[b"*2\r\n$4\r\nAUTH\r\n$16385\r\n"]);
}

/// A CONFIG SET of proto-max-bulk-len reaches connections already open, on their next
/// request, as in Redis (which reads the setting on every parse): one connection lowers it
/// while another waits, and a pipeline that changes it then sends a bulk the new value
/// decides (parsed ahead under the old one by the event loop's batch, so parsed again).
/// The replies and the closes are compared with a real redis-server's, byte for byte, on
/// sluice's event loop and on the tokio path (`--io-backend epoll`).
#[test]
fn config_set_proto_max_bulk_len_reaches_open_connections_as_in_redis() {
    use crate::support::encode_command;
    let redis = crate::support::RedisServer::start();
    let event_loop = start(Config::default());
    let epoll = start(Config {
        io_backend: sluice::config::IoBackend::Epoll,
        ..Config::default()
    });
    let big = vec![b'x'; 1024 * 1024 + 1];
    let lower = encode_command(&[b"CONFIG", b"SET", b"proto-max-bulk-len", b"1mb"]);
    let raise = encode_command(&[b"CONFIG", b"SET", b"proto-max-bulk-len", b"512mb"]);
    let set_big = encode_command(&[b"SET", b"k", &big]);
    let transcript = |addr: SocketAddr| -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut waiting = TcpStream::connect(addr).unwrap();
        let mut admin = Conn::connect(addr);
        // The waiting connection has run a request before the change.
        waiting.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
        out.push(Conn::from_stream(waiting.try_clone().unwrap()).read_reply());
        out.push(admin.cmd(&[b"CONFIG", b"SET", b"proto-max-bulk-len", b"1mb"]));
        // The server answers the bulk's header and closes while this write is still under
        // way, and the close of a socket with unread input resets it: the write may fail,
        // the reply is read below either way.
        let _ = waiting.write_all(&set_big);
        let (closed, got) = closed_within(&mut waiting, Duration::from_secs(5));
        out.push(got);
        out.push(format!("closed: {closed}").into_bytes());
        // Raised and lowered again by the connection itself, in one pipeline each.
        let mut own = TcpStream::connect(addr).unwrap();
        // As above, the second bulk's write may meet the reset.
        let _ = own.write_all(&[&raise[..], &set_big, &lower, &set_big].concat());
        let (closed, got) = closed_within(&mut own, Duration::from_secs(5));
        out.push(got);
        out.push(format!("closed: {closed}").into_bytes());
        out.push(admin.cmd(&[b"CONFIG", b"SET", b"proto-max-bulk-len", b"512mb"]));
        out
    };
    let expected = transcript(redis.addr());
    assert_eq!(
        expected[2], b"-ERR Protocol error: invalid bulk length\r\n",
        "redis-server's transcript: {expected:?}"
    );
    for server in [&event_loop, &epoll] {
        let got = transcript(server.addr());
        let show = |t: &[Vec<u8>]| {
            t.iter()
                .map(|r| String::from_utf8_lossy(r).into_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(show(&got), show(&expected));
    }
}
