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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_mode_admits_loopback_and_password_holders_only() {
        let mut config = Config::default();
        let outside: std::net::IpAddr = "192.0.2.7".parse().unwrap();
        assert!(protected_mode_refuses(&config, outside));
        assert!(!protected_mode_refuses(
            &config,
            "127.0.0.1".parse().unwrap()
        ));
        assert!(!protected_mode_refuses(
            &config,
            "127.5.0.1".parse().unwrap()
        ));
        assert!(!protected_mode_refuses(&config, "::1".parse().unwrap()));
        assert!(!protected_mode_refuses(
            &config,
            "::ffff:127.0.0.1".parse().unwrap()
        ));
        config.requirepass = Some("secret".into());
        assert!(!protected_mode_refuses(&config, outside));
        config.requirepass = None;
        config.protected_mode = false;
        assert!(!protected_mode_refuses(&config, outside));
    }
}

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

/// Redis's reply to a non-loopback client while protected mode is on and no password is set.
pub const PROTECTED_MODE_DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// Protected mode: with no password set, only loopback peers may connect.
pub fn protected_mode_refuses(config: &Config, peer: std::net::IpAddr) -> bool {
    let loopback = match peer {
        std::net::IpAddr::V4(v4) => v4.is_loopback(),
        std::net::IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    };
    config.protected_mode && config.requirepass.is_none() && !loopback
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
