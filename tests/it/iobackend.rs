//! The I/O backends (`--io-backend`): sluice's own loops and io_uring serve what epoll
//! serves, and io_uring falls back to epoll where it is unavailable. (The whole suite runs on io_uring with
//! `SLUICE_IO_BACKEND=uring cargo test --test it`.)

use std::time::{Duration, Instant};

use sluice::Config;
use sluice::config::IoBackend;
use sluice::server::loops::Running;

use crate::proc::SluiceProcess;
use crate::support::Conn;

/// Whether io_uring can be used in this environment (the server's own probe).
fn uring_available() -> bool {
    sluice::server::uring::probe().is_ok()
}

fn start(backend: IoBackend) -> sluice::TestServer {
    sluice::TestServer::start_with(Config {
        test_mode: true,
        io_backend: backend,
        ..Config::default()
    })
    .expect("cannot start sluice")
}

#[test]
fn uring_serves_pipelines_and_large_values_as_epoll_does() {
    let mut replies = Vec::new();
    for backend in [IoBackend::Loop, IoBackend::Epoll, IoBackend::Uring] {
        let server = start(backend);
        let expected = match backend {
            IoBackend::Loop => Running::Loop,
            IoBackend::Uring if uring_available() => Running::Uring,
            _ => Running::Epoll,
        };
        // SLUICE_IO_BACKEND (running the suite on one backend) overrides the config.
        if std::env::var_os(sluice::testing::IO_BACKEND_ENV).is_none() {
            assert_eq!(server.io_backend(), expected);
        }
        let mut c = Conn::connect(server.addr());
        // A value larger than the receive buffer and a send, pipelined with small commands.
        let big: Vec<u8> = (0..3_000_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let mut batch = Vec::new();
        for i in 0..200 {
            batch.extend(crate::support::encode_command(&[b"INCR", b"n"]));
            if i == 100 {
                batch.extend(crate::support::encode_command(&[b"SET", b"big", &big]));
                batch.extend(crate::support::encode_command(&[b"GET", b"big"]));
            }
        }
        c.send_raw(&batch);
        let mut got = Vec::new();
        for _ in 0..202 {
            got.push(c.read_reply());
        }
        assert_eq!(got[0], b":1\r\n");
        assert_eq!(got[201], b":200\r\n");
        // INCR 1..=101, then SET and GET.
        assert!(got[101] == b"+OK\r\n");
        assert!(
            got[102].len() == big.len() + 12
                && got[102][..got[102].len() - 2].ends_with(&big[big.len() - 100..])
        );
        replies.push(got);
        // A client that closes mid-pipeline leaves nothing behind.
        c.send_raw(b"*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n*1\r\n$4\r\nPI");
        drop(c);
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut c2 = Conn::connect(server.addr());
        loop {
            let list = c2.cmd(&[b"CLIENT", b"LIST"]);
            if String::from_utf8_lossy(&list).matches("id=").count() == 1 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{backend:?}: the closed client is still listed: {}",
                String::from_utf8_lossy(&list)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    assert!(
        replies[0] == replies[1] && replies[1] == replies[2],
        "loop, epoll and uring replied differently"
    );
}

#[test]
fn uring_falls_back_to_epoll_when_io_uring_is_unavailable() {
    // SLUICE_NO_IO_URING makes the probe fail as a kernel or seccomp profile without
    // io_uring would.
    let server = SluiceProcess::start_exactly(
        &["--port", "0", "--io-backend", "uring"],
        &[("SLUICE_NO_IO_URING", "1")],
    );
    let mut c = Conn::connect(server.addr());
    assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !server.log().contains("event loops:") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let log = server.log();
    assert!(
        log.contains(
            "io_uring is unavailable (disabled by SLUICE_NO_IO_URING): serving with epoll instead"
        ),
        "{log}"
    );
    assert!(log.contains("(epoll)"), "{log}");
}

#[test]
fn the_log_names_the_backend_that_runs() {
    let server = SluiceProcess::start_exactly(&["--port", "0", "--io-backend", "auto"], &[]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !server.log().contains("event loops:") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let want = if uring_available() {
        "(io_uring)"
    } else {
        "(epoll)"
    };
    assert!(server.log().contains(want), "{}", server.log());
    let mut c = Conn::connect(server.addr());
    assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
}
