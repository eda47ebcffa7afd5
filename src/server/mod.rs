//! The top floor: listening sockets, accepting connections (with maxclients), and shutdown.
//!
//! `Server::bind` binds every configured address and reports the real port (for `--port 0`);
//! `Server::run` serves until the shutdown token is cancelled (SIGINT/SIGTERM in the binary,
//! SHUTDOWN from a client, or dropping a `TestServer`), then lets each connection finish the
//! replies to what it already read and waits a bounded time for them to close.

pub mod connection;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::Clock;
use crate::cmd::Shared;
use crate::config::{Config, ConfigError};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A socket could not be bound.
    #[error("could not listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// A bound, not yet running server.
#[derive(Debug)]
pub struct Server {
    shared: Arc<Shared>,
    listeners: Vec<TcpListener>,
}

impl Server {
    /// Validates `config` and binds its addresses, with the real clock.
    pub async fn bind(config: Config) -> Result<Server, ServerError> {
        Self::bind_with_clock(config, Clock::system()).await
    }

    /// Like `bind`, with a given clock (tests pass a frozen one).
    pub async fn bind_with_clock(config: Config, clock: Clock) -> Result<Server, ServerError> {
        config.validate()?;
        let mut listeners = Vec::new();
        let mut port = config.port;
        for host in &config.bind {
            let host = host.trim_start_matches('-');
            let addr = if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            };
            let listener = TcpListener::bind(&addr)
                .await
                .map_err(|source| ServerError::Bind {
                    addr: addr.clone(),
                    source,
                })?;
            if port == 0 {
                // Every address shares the port the first one was given.
                port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
            }
            listeners.push(listener);
        }
        let mut shared = Shared::new(config, clock);
        if !shared.config().test_mode {
            for spec in crate::cmd::testmode::COMMANDS {
                shared.table.remove(spec.name);
            }
        }
        shared.port.store(port, Ordering::Relaxed);
        Ok(Server {
            shared: Arc::new(shared),
            listeners,
        })
    }

    /// The first bound address (with the real port).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listeners.first().and_then(|l| l.local_addr().ok())
    }

    /// The server's shared state.
    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// A token that stops the server when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shared.shutdown.clone()
    }

    /// Serves until shut down.
    pub async fn run(self) {
        let shared = self.shared;
        crate::store::reaper::spawn(
            shared.keyspace.clone(),
            shared.clock.clone(),
            shared.shutdown.clone(),
        );
        let tracker = TaskTracker::new();
        for listener in self.listeners {
            let shared = shared.clone();
            let tracker2 = tracker.clone();
            tracker.spawn(accept_loop(listener, shared, tracker2));
        }
        shared.shutdown.cancelled().await;
        tracker.close();
        if tokio::time::timeout(Duration::from_secs(5), tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("some connections did not close within 5 s; exiting anyway");
        }
        tracing::info!("sluice stopped");
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, tracker: TaskTracker) {
    let laddr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shared.shutdown.cancelled() => return,
        };
        let (mut stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // Usually EMFILE: back off briefly instead of spinning.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        shared
            .stats
            .total_connections
            .fetch_add(1, Ordering::Relaxed);
        let maxclients = shared.config().maxclients;
        if shared.clients.len() >= maxclients {
            shared
                .stats
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            tracker.spawn(async move {
                let _ = stream
                    .write_all(b"-ERR max number of clients reached\r\n")
                    .await;
            });
            continue;
        }
        let shared = shared.clone();
        let laddr = laddr.clone();
        tracker.spawn(async move {
            connection::serve(shared, stream, peer.to_string(), laddr).await;
        });
    }
}
