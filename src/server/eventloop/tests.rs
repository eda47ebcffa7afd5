//! The loop's functions driven by hand on the test's thread: a request allocates nothing,
//! and a saturated loop brings in the next.

use std::io::{Read, Write};

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use mio::Poll;
use tokio_util::task::TaskTracker;

use super::prefetch::FirstKeys;
use super::scale::scale;
use super::serve::{Conn, Flushed, Received, Served, flush, read, run, serve};
use super::stream::Stream;
use super::turn::{State, arrive, lock};
use super::{Arrival, Common, Group, Mailbox, WAKE};
use crate::clock::Clock;
use crate::config::Config;
use crate::server::connection::{Buffers, Registered};
use crate::server::{Admitted, Shared};

/// A connection on this thread, served by the loop's own functions (no thread, no
/// poll): what one turn does for it.
fn conn(shared: &Arc<Shared>) -> (Box<Conn>, std::net::TcpStream) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, peer) = listener.accept().unwrap();
    server.set_nonblocking(true).unwrap();
    let reg = Registered::new(shared, peer.to_string(), "127.0.0.1:6379".into());
    let buf = Buffers::new(shared, &reg.client);
    let conn = Box::new(Conn {
        stream: Stream::from_accepted(server.into()).unwrap(),
        reg,
        buf,
        _slot: Admitted(Arc::new(AtomicUsize::new(1))),
        _track: TaskTracker::new().token(),
        more: false,
        queued: false,
        close_after_write: false,
        query_limit: 1 << 30,
    });
    (conn, client)
}

/// Sends `request`, serves it as a turn would, and returns the reply's bytes.
fn turn(
    shared: &Shared,
    conn: &mut Conn,
    client: &mut (impl Read + Write),
    request: &[u8],
    reply: &mut [u8],
) -> usize {
    client.write_all(request).unwrap();
    loop {
        assert!(matches!(serve(shared, conn), Served::Keep));
        if !conn.buf.wbuf.is_empty() {
            break;
        }
    }
    assert!(matches!(flush(shared, conn), Flushed::Done));
    client.read(reply).unwrap()
}

use crate::protocol::request::client_bytes as command;

#[test]
fn a_request_on_the_loop_allocates_nothing() {
    let config = Config {
        slowlog_log_slower_than: -1,
        ..Config::default()
    };
    let shared = Arc::new(Shared::new(config, Clock::frozen()));
    let (mut conn, mut client) = conn(&shared);
    let mut reply = [0u8; 4096];
    let requests = [
        command(&[b"SET", b"k", b"12345"]),
        command(&[b"GET", b"k"]),
        command(&[b"INCR", b"n"]),
        command(&[b"EXPIRE", b"n", b"100"]),
        command(&[b"CL.THROTTLE", b"t", b"15", b"30", b"60", b"1"]),
    ];
    for r in &requests {
        for _ in 0..200 {
            turn(&shared, &mut conn, &mut client, r, &mut reply);
        }
    }
    for r in &requests {
        let before = crate::alloc_stats::thread_allocations();
        for _ in 0..500 {
            let n = turn(&shared, &mut conn, &mut client, r, &mut reply);
            assert!(n > 0 && reply[0] != b'-', "{:?}", &reply[..n]);
        }
        let made = crate::alloc_stats::thread_allocations() - before;
        assert_eq!(made, 0, "{}", String::from_utf8_lossy(r));
    }
}

/// Reads until the request sent has arrived.
fn read_all(shared: &Shared, conn: &mut Conn) {
    loop {
        match read(shared, conn) {
            Received::Run => return,
            Received::Idle => std::thread::yield_now(),
            Received::Close => panic!("closed"),
        }
    }
}

#[test]
fn a_turn_reads_every_connection_then_runs_each_with_their_keys_prefetched() {
    let shared = Arc::new(Shared::new(Config::default(), Clock::frozen()));
    let (mut first, mut first_client) = conn(&shared);
    let (mut second, mut second_client) = conn(&shared);
    first_client
        .write_all(&command(&[b"SET", b"k", b"v"]))
        .unwrap();
    second_client.write_all(&command(&[b"GET", b"k"])).unwrap();
    read_all(&shared, &mut first);
    read_all(&shared, &mut second);
    // Before the first runs, both keys are asked into the cache; the second's hash is not
    // kept for the first's batch (nor for anyone's).
    let mut keys = FirstKeys::new();
    keys.add(&shared.keyspace, first.reg.client.db, &first.buf.rbuf);
    keys.add(&shared.keyspace, second.reg.client.db, &second.buf.rbuf);
    keys.prefetch(&shared.keyspace);
    let key_at = second.buf.rbuf.len() - 3;
    assert_eq!(&second.buf.rbuf[key_at..key_at + 1], b"k");
    let key = &second.buf.rbuf[key_at..key_at + 1];
    assert_eq!(crate::store::prefetch::recall(key), None);
    assert!(matches!(run(&shared, &mut first), Served::Keep));
    assert!(matches!(run(&shared, &mut second), Served::Keep));
    // The second runs after the first: it sees its write.
    assert_eq!(&first.buf.wbuf[..], b"+OK\r\n");
    assert_eq!(&second.buf.wbuf[..], b"$1\r\nv\r\n");
    // A connection killed after its read (by a command run before it in the same turn)
    // is closed without running what it sent.
    second.buf.wbuf.clear();
    second_client.write_all(&command(&[b"DEL", b"k"])).unwrap();
    read_all(&shared, &mut second);
    second.reg.client.info.kill.cancel();
    assert!(matches!(run(&shared, &mut second), Served::Close));
    let mut reply = [0u8; 64];
    first.buf.wbuf.clear();
    let n = turn(
        &shared,
        &mut first,
        &mut first_client,
        &command(&[b"GET", b"k"]),
        &mut reply,
    );
    assert_eq!(&reply[..n], b"$1\r\nv\r\n");
}

#[test]
fn a_saturated_loop_brings_in_the_next_and_an_idle_one_gives_its_connections_back() {
    let shared = Arc::new(Shared::new(Config::default(), Clock::frozen()));
    let loops = super::super::loops::Loops::start(1, crate::config::IoBackend::Epoll).unwrap();
    let polls = [Poll::new().unwrap(), Poll::new().unwrap()];
    let mailboxes = polls
        .iter()
        .map(|p| {
            Arc::new(Mailbox {
                arrivals: Mutex::new(Vec::new()),
                kills: Mutex::new(Vec::new()),
                waker: mio::Waker::new(p.registry(), WAKE).unwrap(),
                busy_permille: std::sync::atomic::AtomicU32::new(0),
            })
        })
        .collect();
    let group = Arc::new(Group {
        mailboxes,
        active: AtomicUsize::new(1),
        next: AtomicUsize::new(0),
        threads: Mutex::new(Vec::new()),
    });
    let common = Arc::new(Common {
        shared: shared.clone(),
        group: group.clone(),
        dealer: loops.dealer().clone(),
        tracker: TaskTracker::new(),
        scaling: true,
    });
    let [p0, p1] = polls;
    let (first, second) = (
        State::new(0, common.clone(), p0),
        State::new(1, common.clone(), p1),
    );
    let mut clients = Vec::new();
    for _ in 0..2 {
        let (conn, client) = conn(&shared);
        first.add(conn).unwrap();
        clients.push(client);
    }
    // Busy, but no idle CPU on the machine: one loop it stays.
    scale(&first, (0.95, Some(0.1)));
    assert_eq!(group.active(), 1);
    // Half a core idle (the client's share of a 2-core machine): still one loop.
    scale(&first, (0.95, Some(0.5)));
    assert_eq!(group.active(), 1);
    // Busy with room: the second loop takes every other connection.
    scale(&first, (0.95, Some(1.0)));
    assert_eq!(group.active(), 2);
    assert_eq!(first.count(), 1);
    let moved: Vec<Arrival> = std::mem::take(&mut *lock(&group.mailboxes[1].arrivals));
    assert_eq!(moved.len(), 1);
    let token = moved
        .into_iter()
        .filter_map(|a| arrive(&second, a))
        .next()
        .unwrap();
    // The moved connection is served there.
    let mut conn = second.take(token).unwrap();
    let mut reply = [0u8; 64];
    let n = turn(
        &shared,
        &mut conn,
        &mut clients[1],
        &command(&[b"PING"]),
        &mut reply,
    );
    assert_eq!(&reply[..n], b"+PONG\r\n");
    second.put(token, conn);
    // Both idle: the last loop gives its connection back to the first.
    scale(&first, (0.05, Some(1.0)));
    scale(&second, (0.05, Some(1.0)));
    assert_eq!(group.active(), 1);
    assert_eq!(second.count(), 0);
    let back: Vec<Arrival> = std::mem::take(&mut *lock(&group.mailboxes[0].arrivals));
    assert_eq!(back.len(), 1);
    let token = back
        .into_iter()
        .filter_map(|a| arrive(&first, a))
        .next()
        .unwrap();
    let mut conn = first.take(token).unwrap();
    let n = turn(
        &shared,
        &mut conn,
        &mut clients[1],
        &command(&[b"PING"]),
        &mut reply,
    );
    assert_eq!(&reply[..n], b"+PONG\r\n");
}

#[test]
fn a_unix_socket_client_arrives_and_is_served_like_a_tcp_one() {
    let config = Config {
        slowlog_log_slower_than: -1,
        ..Config::default()
    };
    let shared = Arc::new(Shared::new(config, Clock::frozen()));
    let loops = super::super::loops::Loops::start(1, crate::config::IoBackend::Epoll).unwrap();
    let poll = Poll::new().unwrap();
    let group = Arc::new(Group {
        mailboxes: vec![Arc::new(Mailbox {
            arrivals: Mutex::new(Vec::new()),
            kills: Mutex::new(Vec::new()),
            waker: mio::Waker::new(poll.registry(), WAKE).unwrap(),
            busy_permille: std::sync::atomic::AtomicU32::new(0),
        })],
        active: AtomicUsize::new(1),
        next: AtomicUsize::new(0),
        threads: Mutex::new(Vec::new()),
    });
    let common = Arc::new(Common {
        shared: shared.clone(),
        group: group.clone(),
        dealer: loops.dealer().clone(),
        tracker: TaskTracker::new(),
        scaling: false,
    });
    let state = State::new(0, common, poll);
    let (server_side, mut client) = std::os::unix::net::UnixStream::pair().unwrap();
    // Dealt as the accept loop deals it: a blocking socket, made non-blocking on arrival.
    group.deal(
        server_side.into(),
        "/tmp/s.sock:0".into(),
        "/tmp/s.sock:0".into(),
        Admitted(Arc::new(AtomicUsize::new(1))),
    );
    let arrivals: Vec<Arrival> = std::mem::take(&mut *lock(&group.mailboxes[0].arrivals));
    assert_eq!(arrivals.len(), 1);
    for a in arrivals {
        assert!(arrive(&state, a).is_none());
    }
    assert_eq!(state.count(), 1);
    let mut conn = state.take(0).unwrap();
    assert!(matches!(conn.stream, Stream::Unix(_)));
    let mut reply = [0u8; 512];
    // A pipeline in one read: both replies in one write.
    let mut batch = command(&[b"SET", b"k", b"v"]);
    batch.extend(command(&[b"GET", b"k"]));
    let n = turn(&shared, &mut conn, &mut client, &batch, &mut reply);
    assert_eq!(&reply[..n], b"+OK\r\n$1\r\nv\r\n");
    let n = turn(
        &shared,
        &mut conn,
        &mut client,
        &command(&[b"CLIENT", b"INFO"]),
        &mut reply,
    );
    let info = String::from_utf8_lossy(&reply[..n]).into_owned();
    assert!(
        info.contains(" addr=/tmp/s.sock:0 laddr=/tmp/s.sock:0 ") && info.contains(" flags=U "),
        "{info}"
    );
    // Served without allocating, as a TCP connection is.
    let incr = command(&[b"INCR", b"n"]);
    for _ in 0..200 {
        turn(&shared, &mut conn, &mut client, &incr, &mut reply);
    }
    let before = crate::alloc_stats::thread_allocations();
    for _ in 0..500 {
        let n = turn(&shared, &mut conn, &mut client, &incr, &mut reply);
        assert_eq!(reply[0], b':', "{:?}", &reply[..n]);
    }
    assert_eq!(crate::alloc_stats::thread_allocations() - before, 0);
    // The peer's close ends it.
    drop(client);
    assert!(matches!(serve(&shared, &mut conn), Served::Close));
}
