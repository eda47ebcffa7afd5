//! `TestServer`: an in-process sluice on an ephemeral loopback port, for tests.
//!
//! It starts in test mode with a clock the test can freeze and move (from Rust through
//! [`TestServer::clock`], or over the wire with `CLOCK …`), and shuts the server down when
//! dropped.
//!
//! A `TestServer` works in a private temporary directory (its `dir`, removed when it is
//! dropped) unless the config names one, and [`TestServer::start`] turns persistence off:
//! a `dump.rdb` in the caller's working directory is never loaded, and nothing is ever
//! written there.
//!
//! A suite that shares one server between its tests returns it to its starting state
//! before each with [`TestServer::reset`] (`TESTMODE RESET` over the wire); a suite whose
//! tests run in parallel threads takes a server of its own per test from a pool with
//! [`TestServer::pooled`], which resets a server when a test gives it back.
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
    shared: std::sync::Arc<crate::server::Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The private `dir`, when the config named none; removed after the server stops.
    private_dir: Option<tempfile::TempDir>,
}

impl TestServer {
    /// Starts a test-mode server on 127.0.0.1 with a free port, on its own threads, in a
    /// private temporary directory with persistence off.
    pub fn start() -> std::io::Result<TestServer> {
        Self::start_with(Config {
            test_mode: true,
            save: Vec::new(),
            dir: None,
            ..Config::default()
        })
    }

    /// Starts a server with `config` (its bind and port are replaced by 127.0.0.1:0; test
    /// mode and save points are as `config` says; without a `dir`, it gets a private
    /// temporary one).
    pub fn start_with(mut config: Config) -> std::io::Result<TestServer> {
        config.bind = vec!["127.0.0.1".into()];
        config.port = 0;
        let private_dir = match config.dir {
            Some(_) => None,
            None => {
                let dir = tempfile::Builder::new().prefix("sluice-test-").tempdir()?;
                config.dir = Some(dir.path().display().to_string());
                Some(dir)
            }
        };
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
            private_dir,
        })
    }

    /// A test-mode server for one test, from a process-wide pool: a server a test gave
    /// back (reset when it was given back), or a new one ([`TestServer::start`]) when none
    /// is free. Dropping the [`Pooled`] handle resets the server and returns it to the
    /// pool, so a suite pays for as many servers as it runs tests at once, and each test
    /// still sees an empty server with the clock on real time.
    pub fn pooled() -> std::io::Result<Pooled> {
        let free = POOL.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let server = match free {
            Some(s) => s,
            None => TestServer::start()?,
        };
        Ok(Pooled {
            server: Some(server),
        })
    }

    /// Returns the server to the state it started in (`TESTMODE RESET`; see the
    /// `cmd::testmode` docs for what that covers). Needs test mode.
    pub fn reset(&self) -> std::io::Result<()> {
        use std::io::{Read, Write};
        let mut con = std::net::TcpStream::connect(self.addr)?;
        con.set_nodelay(true)?;
        con.write_all(b"*2\r\n$8\r\nTESTMODE\r\n$5\r\nRESET\r\n")?;
        let mut reply = [0u8; 5];
        con.read_exact(&mut reply)?;
        if &reply != b"+OK\r\n" {
            let mut rest = Vec::new();
            let _ = con.take(512).read_to_end(&mut rest);
            let mut text = String::from_utf8_lossy(&reply).into_owned();
            text.push_str(&String::from_utf8_lossy(&rest));
            return Err(std::io::Error::other(format!(
                "TESTMODE RESET failed: {}",
                text.trim_end()
            )));
        }
        // The reset's own connection leaves no trace: gone from the registry, and not
        // counted as received. The wait is for it and for the connections of the test that
        // used the server, closing as it ended; it is bounded (a test may keep a client
        // open), and each loop sees a close within microseconds.
        drop(con);
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(200);
        while !self.shared.clients.is_empty() && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        self.shared.stats.total_connections.store(
            self.shared.clients.len() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(())
    }

    /// The server's working directory (`dir`: where SAVE writes).
    pub fn dir(&self) -> std::path::PathBuf {
        self.shared.config().rdb_dir()
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
    pub fn shared(&self) -> std::sync::Arc<crate::server::Shared> {
        self.shared.clone()
    }

    /// The server's clock (freeze, advance, resume).
    pub fn clock(&self) -> &Clock {
        &self.clock
    }
}

/// Servers given back by [`Pooled`] handles, reset, waiting for the next test.
static POOL: std::sync::Mutex<Vec<TestServer>> = std::sync::Mutex::new(Vec::new());

/// A server from [`TestServer::pooled`], for one test; it derefs to the [`TestServer`].
#[derive(Debug)]
pub struct Pooled {
    server: Option<TestServer>,
}

impl std::ops::Deref for Pooled {
    type Target = TestServer;

    fn deref(&self) -> &TestServer {
        self.server
            .as_ref()
            .expect("sluice bug: a pooled server is present until dropped")
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            // A server that cannot be reset (the test shut it down) is not reused.
            if server.reset().is_ok() {
                POOL.lock().unwrap_or_else(|e| e.into_inner()).push(server);
            }
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Only once the server has stopped: its exit may still write there.
        drop(self.private_dir.take());
    }
}
