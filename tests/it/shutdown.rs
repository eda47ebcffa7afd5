//! SIGTERM and SHUTDOWN (research note §2.6, Table 2 "SHUTDOWN / SIGTERM") on the built
//! binary: replies to commands already read are finished, connections are closed, the
//! process exits 0 within a few seconds and frees its port; a second SIGTERM exits at once.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::proc::SluiceProcess;
use crate::support::{Conn, frame_len};

/// Reads until EOF; returns the bytes.
fn read_to_eof(s: &mut TcpStream, limit: Duration) -> Vec<u8> {
    read_to_end_or_reset(s, limit).0
}

/// Reads until EOF or a reset; returns the bytes and whether the connection was reset.
///
/// A server that closes a socket with unread input (a client still streaming requests at
/// shutdown) makes the kernel send a reset, as Redis's close does; the client's kernel may
/// then drop replies it had received but the client had not read yet, so the tail can be
/// cut anywhere.
fn read_to_end_or_reset(s: &mut TcpStream, limit: Duration) -> (Vec<u8>, bool) {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut got = Vec::new();
    let reset = matches!(
        s.read_to_end(&mut got),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset
    );
    (got, reset)
}

/// Splits `bytes` into complete replies; panics on a malformed reply, and on a partial tail
/// unless `tail_may_be_cut` (the connection was reset).
fn complete_replies(bytes: &[u8], tail_may_be_cut: bool) -> usize {
    let mut rest = bytes;
    let mut n = 0;
    while !rest.is_empty() {
        match frame_len(rest) {
            Ok(Some(len)) => {
                rest = &rest[len..];
                n += 1;
            }
            Ok(None) if tail_may_be_cut => break,
            other => panic!(
                "reply {n} is cut off or malformed ({other:?}): {} bytes left",
                rest.len()
            ),
        }
    }
    n
}

fn port_is_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// SIGTERM while a client streams CL.THROTTLE calls: every reply it gets is complete, then
/// EOF; an idle client gets EOF; exit code 0 within 5 s; the port is free afterwards.
#[test]
fn sigterm_finishes_replies_then_exits_zero() {
    let mut server = SluiceProcess::start(&[]);
    let addr = server.addr();
    let mut idle = TcpStream::connect(addr).unwrap();
    let mut streaming = TcpStream::connect(addr).unwrap();
    let mut writer = streaming.try_clone().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let sent = std::thread::spawn(move || {
        let mut batch = Vec::new();
        for i in 0..100 {
            let key = format!("user:{}", i % 7);
            batch.extend_from_slice(
                format!(
                    "*5\r\n$11\r\nCL.THROTTLE\r\n${}\r\n{key}\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n",
                    key.len()
                )
                .as_bytes(),
            );
        }
        let mut sent = 0;
        while !stop2.load(Ordering::Relaxed) && sent < 1000 {
            if writer.write_all(&batch).is_err() {
                break;
            }
            sent += 1;
            std::thread::sleep(Duration::from_millis(2));
        }
        sent * 100
    });
    // Let the stream get going, then ask the server to stop.
    std::thread::sleep(Duration::from_millis(150));
    let signalled = Instant::now();
    server.signal(libc::SIGTERM);
    let (got, reset) = read_to_end_or_reset(&mut streaming, Duration::from_secs(10));
    stop.store(true, Ordering::Relaxed);
    let sent = sent.join().unwrap();
    let replies = complete_replies(&got, reset);
    assert!(
        replies > 0 && replies <= sent,
        "{replies} replies for {sent} calls"
    );
    assert!(read_to_eof(&mut idle, Duration::from_secs(5)).is_empty());
    let status = server
        .wait_exit(Duration::from_secs(5))
        .expect("sluice did not exit within 5 s of SIGTERM");
    assert!(status.success(), "exit status {status:?}");
    assert!(signalled.elapsed() < Duration::from_secs(5));
    assert!(
        port_is_free(addr.port()),
        "port {} still bound",
        addr.port()
    );
}

/// SHUTDOWN from a client: the caller gets no reply (the connection just closes, as in
/// Redis), a client with replies pending still gets them all, and the process exits 0.
#[test]
fn shutdown_command_exits_zero_and_frees_the_port() {
    let mut server = SluiceProcess::start(&[]);
    let addr = server.addr();
    let mut other = TcpStream::connect(addr).unwrap();
    let mut pipeline = Vec::new();
    for _ in 0..500 {
        pipeline.extend_from_slice(b"*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n");
    }
    other.write_all(&pipeline).unwrap();
    let mut admin = Conn::connect(addr);
    // Make sure the pipeline was read before shutting down.
    std::thread::sleep(Duration::from_millis(100));
    admin.send(&[b"SHUTDOWN", b"NOSAVE"]);
    assert!(matches!(
        admin.read_one(Duration::from_secs(5)),
        crate::support::Read1::Eof(ref b) if b.is_empty()
    ));
    let got = read_to_eof(&mut other, Duration::from_secs(5));
    assert_eq!(complete_replies(&got, false), 500);
    assert!(got.ends_with(b":500\r\n"));
    let status = server
        .wait_exit(Duration::from_secs(5))
        .expect("sluice did not exit within 5 s of SHUTDOWN");
    assert!(status.success(), "exit status {status:?}");
    assert!(port_is_free(addr.port()));
}

/// A client that never reads holds the graceful shutdown (its replies are still being
/// delivered, for up to 5 s); a second SIGTERM ends the process at once.
#[test]
fn second_sigterm_exits_at_once() {
    let mut server = SluiceProcess::start(&[]);
    let addr = server.addr();
    let mut setup = Conn::connect(addr);
    let big = vec![b'b'; 256 * 1024];
    assert_eq!(setup.cmd(&[b"SET", b"big", &big]), b"+OK\r\n");
    let mut stuck = TcpStream::connect(addr).unwrap();
    let mut gets = Vec::new();
    for _ in 0..100 {
        gets.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n");
    }
    stuck.write_all(&gets).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    server.signal(libc::SIGTERM);
    assert!(
        server.wait_exit(Duration::from_millis(500)).is_none(),
        "the first SIGTERM waits for the pending replies"
    );
    let second = Instant::now();
    server.signal(libc::SIGTERM);
    let status = server
        .wait_exit(Duration::from_secs(2))
        .expect("the second SIGTERM must exit at once");
    // "At once" = it does not wait for the pending replies (which would take seconds).
    assert!(second.elapsed() < Duration::from_secs(2));
    assert!(
        !status.success(),
        "a forced exit reports failure: {status:?}"
    );
    assert!(port_is_free(addr.port()));
    drop(stuck);
}
