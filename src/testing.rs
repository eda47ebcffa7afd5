//! `TestServer`: an in-process sluice on an ephemeral loopback port, for tests.
//!
//! It starts in test mode with a clock the test can freeze and move (from Rust through
//! [`TestServer::clock`], or over the wire with `CLOCK …`), and shuts the server down when
//! dropped.
//!
//! Every `TestServer` serves with the configured I/O backend (`Config::io_backend`), unless
//! the environment variable `SLUICE_IO_BACKEND` (loop, epoll, uring or auto) says otherwise: that
//! is how a whole test suite runs on io_uring (`SLUICE_IO_BACKEND=uring cargo test --test it`).
//!
//! ```
//! use std::time::Duration;
//!
//! let server = sluice::TestServer::start().unwrap();
//! let mut con = redis::Client::open(server.url()).unwrap().get_connection().unwrap();
//!
//! server.clock().freeze();
//! let _: () = redis::cmd("SET").arg("rate:u1").arg(1).arg("EX").arg(60).query(&mut con).unwrap();
//! server.clock().advance(Duration::from_secs(61)).unwrap();
//! let gone: Option<i64> = redis::cmd("GET").arg("rate:u1").query(&mut con).unwrap();
//! assert_eq!(gone, None); // the window passed without sleeping
//! ```

use std::net::SocketAddr;

use crate::clock::Clock;
use crate::config::{Config, IoBackend};
use crate::server::Server;
use crate::server::loops::Running;

/// Overrides the I/O backend of every `TestServer` when set (loop, epoll, uring or auto).
pub const IO_BACKEND_ENV: &str = "SLUICE_IO_BACKEND";

/// A running in-process server.
#[derive(Debug)]
pub struct TestServer {
    addr: SocketAddr,
    tls_addr: Option<SocketAddr>,
    io_backend: Running,
    clock: Clock,
    stop: tokio_util::sync::CancellationToken,
    shared: std::sync::Arc<crate::cmd::Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    /// Starts a test-mode server on 127.0.0.1 with a free port, on its own threads.
    pub fn start() -> std::io::Result<TestServer> {
        Self::start_with(Config {
            test_mode: true,
            ..Config::default()
        })
    }

    /// Starts a server with `config` (its bind and port are replaced by 127.0.0.1:0; test
    /// mode is as `config` says).
    pub fn start_with(mut config: Config) -> std::io::Result<TestServer> {
        config.bind = vec!["127.0.0.1".into()];
        config.port = 0;
        if let Some(name) = std::env::var_os(IO_BACKEND_ENV) {
            config.io_backend = IoBackend::parse(&name.to_string_lossy()).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("{IO_BACKEND_ENV}: {e}"),
                )
            })?;
        }
        let clock = Clock::system();
        let (tx, rx) = std::sync::mpsc::channel();
        let server_clock = clock.clone();
        let thread = std::thread::Builder::new()
            .name("sluice-test".into())
            .spawn(move || {
                // This thread only waits for the server to stop; the server serves on its own
                // event-loop threads (`config.threads`, default one per CPU).
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                rt.block_on(async move {
                    match Server::bind_with_clock(config, server_clock).await {
                        Ok(server) => {
                            let addr = server.local_addr();
                            let tls_addr = server.tls_local_addr();
                            let stop = server.shutdown_token();
                            let shared = server.shared();
                            let backend = server.io_backend();
                            let _ = tx.send(Ok((addr, tls_addr, backend, stop, shared)));
                            server.run().await;
                        }
                        Err(e) => {
                            let _ = tx.send(Err(std::io::Error::other(e.to_string())));
                        }
                    }
                });
            })?;
        let (addr, tls_addr, io_backend, stop, shared) = rx
            .recv()
            .map_err(|_| std::io::Error::other("server thread exited"))??;
        let addr = addr.ok_or_else(|| std::io::Error::other("no address bound"))?;
        Ok(TestServer {
            addr,
            tls_addr,
            io_backend,
            clock,
            stop,
            shared,
            thread: Some(thread),
        })
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The TLS address, when the config set a `tls_port` (with its certificate and key).
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
    }

    /// The I/O backend the server runs (after the probe at start).
    pub fn io_backend(&self) -> Running {
        self.io_backend
    }

    /// A `redis://` URL for clients.
    pub fn url(&self) -> String {
        format!("redis://{}/", self.addr)
    }

    /// The server's shared state, for tests that check what connections leave behind
    /// (registry entries, WATCHes, MONITOR slots).
    pub fn shared(&self) -> std::sync::Arc<crate::cmd::Shared> {
        self.shared.clone()
    }

    /// The server's clock (freeze, advance, resume).
    pub fn clock(&self) -> &Clock {
        &self.clock
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
