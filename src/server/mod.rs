//! The top floor: listening sockets, accepting connections (with maxclients), and shutdown.
//!
//! `Server::bind` binds every configured address, reports the real port (for `--port 0`)
//! and starts the event loops (`loops`: `threads` of them, each a thread that serves its
//! connections from read to write). `Server::run` accepts and deals connections to the loops
//! until the shutdown token is cancelled (SIGINT/SIGTERM in the binary, SHUTDOWN from a
//! client, or dropping a `TestServer`), then lets each connection finish the replies to what
//! it already read and waits a bounded time for them to close. `run` may be awaited from any
//! runtime: it only waits there; the serving happens on the loops' own threads.

pub mod connection;
pub mod eventloop;
pub mod loops;
pub(crate) mod relisten;
pub mod state;
#[cfg(target_os = "linux")]
pub mod uring;

pub use state::{ServerStats, Shared};

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::Clock;
use crate::config::{Config, ConfigError};

#[cfg(test)]
mod tests {
    use super::*;

    fn sockopt(fd: std::os::fd::RawFd, level: libc::c_int, name: libc::c_int) -> libc::c_int {
        let mut value: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `value`, which we own.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                level,
                name,
                (&mut value as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0);
        value
    }

    #[test]
    fn tcp_keepalive_is_set_as_redis_sets_it() {
        use std::os::fd::AsRawFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (on, _) = listener.accept().unwrap();
        let _other = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (off, _) = listener.accept().unwrap();
        keepalive(&on, 300);
        keepalive(&off, 0);
        let fd = on.as_raw_fd();
        assert_eq!(sockopt(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 1);
        assert_eq!(sockopt(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE), 300);
        assert_eq!(sockopt(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL), 100);
        assert_eq!(sockopt(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT), 3);
        assert_eq!(
            sockopt(off.as_raw_fd(), libc::SOL_SOCKET, libc::SO_KEEPALIVE),
            0
        );
        // Below 3 s the interval stays at its 1 s floor.
        keepalive(&off, 2);
        assert_eq!(
            sockopt(off.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_KEEPINTVL),
            1
        );
    }

    #[test]
    fn protected_mode_admits_loopback_and_password_holders_only() {
        let mut config = Config::default();
        let outside: std::net::IpAddr = "192.0.2.7".parse().unwrap();
        assert!(protected_mode_refuses(&config, outside));
        assert!(!protected_mode_refuses(
            &config,
            "127.0.0.1".parse().unwrap()
        ));
        // Redis 7.0 compares the peer with "127.0.0.1" and "::1" exactly.
        assert!(protected_mode_refuses(
            &config,
            "127.0.0.2".parse().unwrap()
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
    /// The TLS certificate or key could not be loaded.
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// The event-loop threads could not be started.
    #[error("cannot start the event loops: {0}")]
    Threads(std::io::Error),
    /// The RDB file exists but could not be loaded.
    #[error("{0}")]
    Load(String),
    /// The Unix socket could not be set up.
    #[error("could not listen on unix socket {path}: {source}")]
    Unix {
        /// The socket's path.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// A bound, not yet running server.
pub struct Server {
    shared: Arc<Shared>,
    listeners: Vec<TcpListener>,
    /// The TLS listeners and the acceptor they share.
    tls: Option<(Vec<TcpListener>, TlsAcceptor)>,
    /// The event loops that serve the connections.
    loops: loops::Loops,
    /// The Unix socket listener and its path (`unixsocket`).
    unix: Option<(UnixListener, String)>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("listeners", &self.listeners)
            .field("tls_listeners", &self.tls.as_ref().map(|t| &t.0))
            .field("loops", &self.loops)
            .finish()
    }
}

/// How long a TLS client has to complete its handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Binds `port` on every host of `hosts`; a port of 0 becomes the first listener's port.
///
/// As in redis.conf, an address written with a leading `-` is optional: it is skipped when
/// the machine does not have it (Debian's stock file says `bind 127.0.0.1 -::1`, and many
/// containers have no IPv6).
async fn bind_all(hosts: &[String], mut port: u16) -> Result<Vec<TcpListener>, ServerError> {
    let mut listeners = Vec::new();
    for written in hosts {
        let host = written.trim_start_matches('-');
        let optional = host.len() != written.len();
        let addr = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let listener = match TcpListener::bind(&addr).await {
            Ok(l) => l,
            Err(e)
                if optional
                    && matches!(
                        e.raw_os_error(),
                        Some(libc::EADDRNOTAVAIL | libc::EAFNOSUPPORT | libc::EPROTONOSUPPORT)
                    ) =>
            {
                tracing::warn!("not listening on optional address {host}: {e}");
                continue;
            }
            Err(source) => {
                return Err(ServerError::Bind {
                    addr: addr.clone(),
                    source,
                });
            }
        };
        if port == 0 {
            // Every address shares the port the first one was given.
            port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        }
        listeners.push(listener);
    }
    if listeners.is_empty() {
        return Err(ServerError::Bind {
            addr: hosts.join(" "),
            source: std::io::Error::new(
                std::io::ErrorKind::AddrNotAvailable,
                "none of the addresses is available",
            ),
        });
    }
    Ok(listeners)
}

/// A TLS acceptor from PEM files: the certificate chain and its private key. rustls with the
/// `ring` provider, TLS 1.2 and 1.3, no client certificates (Redis's `tls-auth-clients no`).
pub fn tls_acceptor(cert_file: &str, key_file: &str) -> Result<TlsAcceptor, ServerError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    use tokio_rustls::rustls;
    let certs = CertificateDer::pem_file_iter(cert_file)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            ServerError::Tls(format!("cannot read certificates from '{cert_file}': {e}"))
        })?;
    if certs.is_empty() {
        return Err(ServerError::Tls(format!("no certificate in '{cert_file}'")));
    }
    let key = PrivateKeyDer::from_pem_file(key_file).map_err(|e| {
        ServerError::Tls(format!(
            "cannot read the private key from '{key_file}': {e}"
        ))
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ServerError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| ServerError::Tls(format!("certificate and key do not fit: {e}")))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

impl Server {
    /// Validates `config` and binds its addresses, with the real clock.
    pub async fn bind(config: Config) -> Result<Server, ServerError> {
        Self::bind_with_clock(config, Clock::system()).await
    }

    /// Like `bind`, with a given clock (tests pass a frozen one).
    pub async fn bind_with_clock(config: Config, clock: Clock) -> Result<Server, ServerError> {
        config.validate()?;
        // The `user` lines are checked before anything listens, as Redis checks them while
        // reading its configuration.
        check_users(&config)?;
        let listeners = bind_all(&config.bind, config.port).await?;
        let port = listeners
            .first()
            .and_then(|l| l.local_addr().ok())
            .map_or(config.port, |a| a.port());
        let tls = match (&config.tls_cert_file, &config.tls_key_file) {
            (Some(cert), Some(key)) if config.tls_port != 0 => {
                let acceptor = tls_acceptor(cert, key)?;
                Some((bind_all(&config.bind, config.tls_port).await?, acceptor))
            }
            _ => None,
        };
        let unix = match &config.unixsocket {
            Some(path) => Some((bind_unix(path, config.unixsocketperm)?, path.clone())),
            None => None,
        };
        let mut shared = Shared::new(config, clock);
        shared.port.store(port, Ordering::Relaxed);
        load_users(&shared)?;
        // Cluster mode needs the real port to find itself in the slot map.
        shared.cluster =
            crate::cluster::Cluster::from_config(&shared.config(), port).map_err(|e| {
                ConfigError::BadValue {
                    name: "cluster-config-file".into(),
                    reason: e.to_string(),
                }
            })?;
        // Before any client is served: Redis loads the file before it accepts either.
        crate::services::aof::load_at_start(&shared).map_err(ServerError::Load)?;
        let loops = loops::Loops::start(
            shared.config().effective_threads(),
            shared.config().io_backend,
        )
        .map_err(ServerError::Threads)?;
        Ok(Server {
            shared: Arc::new(shared),
            listeners,
            tls,
            loops,
            unix,
        })
    }

    /// The first bound address (with the real port).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listeners.first().and_then(|l| l.local_addr().ok())
    }

    /// The first TLS address, if a TLS port is configured.
    pub fn tls_local_addr(&self) -> Option<SocketAddr> {
        self.tls
            .as_ref()
            .and_then(|(l, _)| l.first())
            .and_then(|l| l.local_addr().ok())
    }

    /// The Unix socket's path, if `unixsocket` is configured.
    pub fn unix_path(&self) -> Option<&str> {
        self.unix.as_ref().map(|(_, p)| p.as_str())
    }

    /// The server's shared state.
    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// A token that stops the server when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shared.shutdown.clone()
    }

    /// How many event loops serve the connections.
    pub fn threads(&self) -> usize {
        self.loops.count()
    }

    /// The I/O backend the event loops run (`io-backend`, after the probe at start).
    pub fn io_backend(&self) -> loops::Running {
        self.loops.running()
    }

    /// Serves until shut down. The connections are served on the server's own event-loop
    /// threads; the caller's runtime (any flavour) only waits here.
    pub async fn run(self) {
        let Server {
            shared,
            listeners,
            tls,
            unix,
            loops,
        } = self;
        if let Some(reaper) = loops.reaper() {
            crate::store::reaper::spawn(
                reaper,
                shared.keyspace.clone(),
                shared.clock.clone(),
                shared.shutdown.clone(),
                {
                    // Keyspace notifications of reaped keys, published off the shard lock.
                    let shared = Arc::downgrade(&shared);
                    Arc::new(move |events| {
                        if let Some(shared) = shared.upgrade() {
                            crate::services::notify::publish_key_events(&shared, events);
                        }
                    })
                },
                {
                    // A pass at or above latency-monitor-threshold: LATENCY's expire-cycle.
                    let shared = Arc::downgrade(&shared);
                    Arc::new(move |took: std::time::Duration| {
                        if let Some(shared) = shared.upgrade() {
                            let threshold = shared.live.latency_threshold_ms();
                            let ms = took.as_millis() as u64;
                            if threshold > 0 && ms >= threshold {
                                shared.latency.add(
                                    "expire-cycle",
                                    shared.clock.now_ms() / 1000,
                                    ms,
                                );
                            }
                        }
                    })
                },
            );
        }
        let saver = crate::services::persist::spawn_timer(shared.clone());
        if let Some(cluster) = &shared.cluster {
            // The cluster bus, on a thread of its own; it reaches the server weakly. A view
            // that takes slots away waits for the commands in flight before their keys go,
            // on a thread of its own: the bus thread never waits for a client's command (a
            // MIGRATE in flight waits for another node, which may wait for this one's pings).
            let weak = Arc::downgrade(&shared);
            let hook: crate::cluster::bus::Hook = Box::new(move |view| {
                let Some(shared) = weak.upgrade() else { return };
                if view.lost_slots.is_empty() {
                    crate::commands::cluster_bus::apply_view(&shared, view, false);
                } else {
                    let spawned = std::thread::Builder::new()
                        .name("sluice-cluster-view".into())
                        .spawn(move || {
                            crate::commands::cluster_bus::apply_view(&shared, view, true)
                        });
                    if let Err(e) = spawned {
                        tracing::warn!("cannot start a thread to install a cluster view: {e}");
                    }
                }
            });
            {
                let bus = cluster.bus();
                // A manual failover reads the replication offset and holds a master's writes
                // (FAILOVER's own pause, which CLIENT UNPAUSE does not end).
                let (offset, pause, settled) = (
                    Arc::downgrade(&shared),
                    Arc::downgrade(&shared),
                    Arc::downgrade(&shared),
                );
                bus.set_repl_hooks(
                    Box::new(move || offset.upgrade().map_or(0, |s| s.repl.offset())),
                    crate::cluster::bus::failover::PauseWrites(Box::new(move |on| {
                        if let Some(s) = pause.upgrade() {
                            s.pause.set_failover(on);
                        }
                    })),
                    Box::new(move || {
                        settled
                            .upgrade()
                            .is_some_and(|s| s.pause.failover_settled())
                    }),
                );
                // A replica's data age for its election (cluster-replica-validity-factor):
                // since the master's last data while the link is up, else since it went down.
                let weak = Arc::downgrade(&shared);
                bus.set_data_age_hook(Box::new(move || {
                    let link = weak.upgrade()?.repl.link()?;
                    let since = if link.state == "connected" {
                        link.last_io
                    } else {
                        link.down_since
                    };
                    since.map(|t| t.elapsed().as_millis() as u64)
                }));
                let weak = Arc::downgrade(&shared);
                bus.set_publish_hook(Box::new(move |shard, channel, message| {
                    if let Some(shared) = weak.upgrade() {
                        let limit = crate::services::pubsub::push_limit(&shared);
                        if shard {
                            shared.pubsub.spublish(channel, message, limit);
                        } else {
                            shared.pubsub.publish(channel, message, limit);
                        }
                    }
                }));
            }
            if let Err(e) = cluster.start_bus(hook) {
                tracing::warn!("cannot start the cluster bus thread: {e}");
            }
            crate::commands::cluster::sync_role(&shared);
        }
        let aof_fsync = shared.repl.aof.spawn_fsync_thread();
        let tracker = TaskTracker::new();
        // Replication's supervisor: starts links to a master (REPLICAOF), pings replicas.
        // On a thread of its own, with the link it starts: its ping timer would otherwise
        // sit in an event loop's timer wheel, which that loop then walks every time it
        // parks (once per request at pipeline 1).
        let supervise = tracker.track_future(crate::repl::replica::supervise(shared.clone()));
        match loops.replication() {
            Some(reaper) => reaper.spawn(supervise),
            None => loops.dealer().next().spawn(supervise),
        };
        let admitted = Arc::new(AtomicUsize::new(0));
        let plain = listeners.into_iter().map(|l| (l, None));
        let tls = tls
            .into_iter()
            .flat_map(|(ls, acceptor)| ls.into_iter().map(move |l| (l, Some(acceptor.clone()))));
        let dealer = loops.dealer().clone();
        // `io-backend loop`: plain TCP connections are served on sluice's own loops.
        let own_loops = match loops.running() {
            loops::Running::Loop => {
                let config = shared.config();
                match eventloop::Group::start(
                    shared.clone(),
                    dealer.clone(),
                    tracker.clone(),
                    config.effective_threads(),
                    config.threads == 0,
                ) {
                    Ok(group) => Some(group),
                    Err(e) => {
                        tracing::warn!("cannot start the event loops ({e}): serving with tokio's");
                        None
                    }
                }
            }
            _ => None,
        };
        // The plain listeners' accept loops stop on `plain_stop` when CONFIG SET port or
        // bind replaces them (`relisten`); TLS listeners stay.
        let plain_stop = CancellationToken::new();
        let mut plain_copies = Vec::new();
        for (i, (listener, acceptor)) in plain.chain(tls).enumerate() {
            let acceptor_is_none = acceptor.is_none();
            // The listener moves to a loop's runtime: it was registered with the caller's.
            let listener = match listener.into_std() {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!("cannot move a listener to its event loop: {e}");
                    continue;
                }
            };
            let stop = if acceptor_is_none {
                plain_copies.extend(listener.try_clone().ok());
                plain_stop.clone()
            } else {
                CancellationToken::new()
            };
            let accept = accept_loop(
                listener,
                acceptor,
                shared.clone(),
                tracker.clone(),
                admitted.clone(),
                dealer.clone(),
                own_loops.clone().filter(|_| acceptor_is_none),
                stop,
            );
            dealer.handle(i).spawn(tracker.track_future(accept));
        }
        {
            let weak = Arc::downgrade(&shared);
            let tracker = tracker.clone();
            let admitted = admitted.clone();
            let dealer = dealer.clone();
            let own_loops = own_loops.clone();
            shared.relisten.install(
                Box::new(move |listeners, stop| {
                    let Some(shared) = weak.upgrade() else {
                        return;
                    };
                    for (i, listener) in listeners.into_iter().enumerate() {
                        let accept = accept_loop(
                            listener,
                            None,
                            shared.clone(),
                            tracker.clone(),
                            admitted.clone(),
                            dealer.clone(),
                            own_loops.clone(),
                            stop.clone(),
                        );
                        dealer.handle(i).spawn(tracker.track_future(accept));
                    }
                }),
                plain_copies,
                plain_stop,
            );
        }
        let unix_path = unix.as_ref().map(|(_, p)| p.clone());
        if let Some((listener, path)) = unix {
            match listener.into_std() {
                Ok(listener) => {
                    let accept = unix_accept_loop(
                        listener,
                        path,
                        shared.clone(),
                        tracker.clone(),
                        admitted.clone(),
                        dealer.clone(),
                        own_loops.clone(),
                    );
                    dealer.next().spawn(tracker.track_future(accept));
                }
                Err(e) => tracing::warn!("cannot move the unix listener to its event loop: {e}"),
            }
        }
        shared.shutdown.cancelled().await;
        if let Some(bus) = shared.cluster.as_ref().map(|c| c.bus()) {
            bus.stop.store(true, Ordering::Relaxed);
        }
        // Connections wait on their own kill switch only (see `client::Kill`).
        shared.clients.shut_down_all();
        if let Some(group) = &own_loops {
            // Loops with no connection left sleep without a timeout: they end now.
            group.wake_all();
        }
        // A script still running (even one that wrote) would keep its thread forever.
        shared.scripts.busy.abort();
        tracker.close();
        if tokio::time::timeout(Duration::from_secs(5), tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("some connections did not close within 5 s; exiting anyway");
        }
        if let Some(saver) = saver {
            saver.thread().unpark();
            let _ = saver.join();
        }
        // A signal (or the embedding program) stopped the server: save as Redis does on
        // SIGTERM when save points are configured. SHUTDOWN decided this already.
        crate::services::persist::save_on_exit(&shared);
        crate::services::aof::flush_on_exit(&shared);
        if let Some(t) = aof_fsync {
            let _ = t.join();
        }
        if let Some(path) = unix_path {
            // As redis-server does: the socket file goes with the server.
            let _ = std::fs::remove_file(path);
        }
        drop(loops);
        tracing::info!("sluice stopped");
    }
}

/// Redis's reply to a non-loopback client while protected mode is on and no password is set.
pub const PROTECTED_MODE_DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// Protected mode: with no password set, only local peers may connect.
///
/// "Local" is what Redis 7.0 means by it: the peer address is exactly 127.0.0.1 or ::1 (an
/// IPv4-mapped 127.0.0.1 too). Other 127/8 addresses count as remote, as in Redis, which is
/// also what lets a test play a remote client from 127.0.0.2 without leaving the machine.
pub fn protected_mode_refuses(config: &Config, peer: std::net::IpAddr) -> bool {
    let local_v4 = std::net::Ipv4Addr::LOCALHOST;
    let loopback = match peer {
        std::net::IpAddr::V4(v4) => v4 == local_v4,
        std::net::IpAddr::V6(v6) => {
            v6 == std::net::Ipv6Addr::LOCALHOST || v6.to_ipv4_mapped() == Some(local_v4)
        }
    };
    config.protected_mode && config.requirepass.is_none() && !loopback
}

/// Counts a connection as admitted (toward maxclients) until dropped.
struct Admitted(Arc<AtomicUsize>);

impl Drop for Admitted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Accepts on `listener` (on the loop it was given to) and deals each connection to a loop,
/// where it is served from then on, until shutdown or `stop` (CONFIG SET port / bind).
#[allow(clippy::too_many_arguments)]
async fn accept_loop(
    listener: std::net::TcpListener,
    tls: Option<TlsAcceptor>,
    shared: Arc<Shared>,
    tracker: TaskTracker,
    admitted: Arc<AtomicUsize>,
    dealer: loops::Dealer,
    own_loops: Option<Arc<eventloop::Group>>,
    stop: CancellationToken,
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("cannot listen on an event loop: {e}");
            return;
        }
    };
    let laddr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shared.shutdown.cancelled() => return,
            _ = stop.cancelled() => return,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // Usually EMFILE: back off briefly instead of spinning.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        keepalive(&stream, shared.live.tcp_keepalive());
        let (slot, refusal) = admission(&shared, &admitted, Some(peer));
        // The socket leaves this loop's reactor for the one of the loop that serves it.
        let stream = match stream.into_std() {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!("cannot hand {peer} to an event loop: {e}");
                continue;
            }
        };
        if let Some(group) = &own_loops
            && refusal.is_none()
        {
            group.deal(stream.into(), peer.to_string(), laddr.clone(), slot);
            continue;
        }
        let shared = shared.clone();
        let laddr = laddr.clone();
        let tls = tls.clone();
        let (handle, ring) = dealer.next_with_ring();
        // io_uring serves plain TCP only; TLS sessions stay on tokio's sockets.
        let ring = ring.filter(|_| tls.is_none()).cloned();
        handle.spawn(tracker.track_future(async move {
            let _slot = slot;
            #[cfg(target_os = "linux")]
            if let Some(ring) = ring {
                match uring::UringStream::new(stream, ring) {
                    Ok(stream) => admit(shared, stream, peer.to_string(), laddr, refusal).await,
                    Err(e) => tracing::debug!("cannot serve {peer} through io_uring: {e}"),
                }
                return;
            }
            #[cfg(not(target_os = "linux"))]
            let _ = ring;
            let stream = match TcpStream::from_std(stream) {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!("cannot serve {peer} on an event loop: {e}");
                    return;
                }
            };
            match tls {
                None => admit(shared, stream, peer.to_string(), laddr, refusal).await,
                Some(acceptor) => {
                    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
                    {
                        Ok(Ok(stream)) => {
                            admit(shared, stream, peer.to_string(), laddr, refusal).await
                        }
                        Ok(Err(e)) => tracing::debug!("TLS handshake with {peer} failed: {e}"),
                        Err(_) => tracing::debug!("TLS handshake with {peer} timed out"),
                    }
                }
            }
        }));
    }
}

/// Counts a new connection toward maxclients and decides whether it is refused: over the
/// limit, or (for a TCP peer) by protected mode. Counted in the accept loop, so a burst of
/// connections cannot all slip in before the first of them registers.
/// `tcp-keepalive` on an accepted connection, as Redis's `anetKeepAlive` sets it: probes
/// after `secs` of silence, then every third of that, and the connection is dropped after
/// three unanswered; a peer that vanished without a FIN (a crashed host, a dropped NAT
/// entry) is found and its client freed. 0 leaves keepalive off. Best effort, as in Redis.
fn keepalive(stream: &impl std::os::fd::AsRawFd, secs: u64) {
    if secs == 0 {
        return;
    }
    let fd = stream.as_raw_fd();
    let secs = libc::c_int::try_from(secs).unwrap_or(libc::c_int::MAX);
    let set = |level: libc::c_int, name: libc::c_int, value: libc::c_int| {
        // SAFETY: setsockopt reads one c_int from the pointer, which outlives the call.
        unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        }
    };
    if set(libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1) != 0 {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        set(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, secs);
        set(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, (secs / 3).max(1));
        set(libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3);
    }
}

fn admission(
    shared: &Shared,
    admitted: &Arc<AtomicUsize>,
    peer: Option<SocketAddr>,
) -> (Admitted, Option<&'static [u8]>) {
    shared
        .stats
        .total_connections
        .fetch_add(1, Ordering::Relaxed);
    let config = shared.config();
    let over_limit = admitted.fetch_add(1, Ordering::AcqRel) >= config.maxclients;
    let slot = Admitted(admitted.clone());
    let refusal: Option<&'static [u8]> = if over_limit {
        shared
            .stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        Some(b"-ERR max number of clients reached\r\n")
    } else if let Some(peer) = peer
        && protected_mode_refuses(&config, peer.ip())
    {
        tracing::info!("protected mode: refused {peer}");
        Some(PROTECTED_MODE_DENIED.as_bytes())
    } else {
        None
    };
    (slot, refusal)
}

/// Binds the Unix socket at `path` (replacing a stale socket file, as redis-server does) and
/// sets its permission bits when `perm` is not 0.
fn bind_unix(path: &str, perm: u32) -> Result<UnixListener, ServerError> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let err = |source| ServerError::Unix {
        path: path.to_string(),
        source,
    };
    // Only a socket is removed: a typo must not delete a regular file.
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
        std::fs::remove_file(path).map_err(err)?;
    }
    let listener = UnixListener::bind(path).map_err(err)?;
    if perm != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm)).map_err(err)?;
    }
    Ok(listener)
}

/// Accepts clients on the Unix socket: local by nature, so protected mode does not apply;
/// CLIENT LIST shows them as `path:0` (both addresses), as Redis does. Like TCP clients they
/// are dealt to sluice's own event loops when those run (`io-backend loop`), under the same
/// `maxclients`; otherwise to tokio's.
async fn unix_accept_loop(
    listener: std::os::unix::net::UnixListener,
    path: String,
    shared: Arc<Shared>,
    tracker: TaskTracker,
    admitted: Arc<AtomicUsize>,
    dealer: loops::Dealer,
    own_loops: Option<Arc<eventloop::Group>>,
) {
    let listener = match UnixListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("cannot listen on the unix socket from an event loop: {e}");
            return;
        }
    };
    let addr = format!("{path}:0");
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shared.shutdown.cancelled() => return,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (slot, refusal) = admission(&shared, &admitted, None);
        // The socket leaves this loop's reactor for the one of the loop that serves it.
        let stream = match stream.into_std() {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!("cannot hand a unix client to an event loop: {e}");
                continue;
            }
        };
        if let Some(group) = &own_loops
            && refusal.is_none()
        {
            group.deal(stream.into(), addr.clone(), addr.clone(), slot);
            continue;
        }
        let shared = shared.clone();
        let addr = addr.clone();
        dealer.next().spawn(tracker.track_future(async move {
            let _slot = slot;
            match tokio::net::UnixStream::from_std(stream) {
                Ok(stream) => admit(shared, stream, addr.clone(), addr, refusal).await,
                Err(e) => tracing::debug!("cannot serve a unix client on an event loop: {e}"),
            }
        }));
    }
}

/// Serves an accepted connection, or sends it the refusal and closes it.
async fn admit<S>(
    shared: Arc<Shared>,
    mut stream: S,
    peer: String,
    laddr: String,
    refusal: Option<&'static [u8]>,
) where
    S: connection::Transport,
{
    match refusal {
        Some(text) => {
            let _ = tokio::time::timeout(Duration::from_secs(5), async {
                stream.write_all(text).await?;
                stream.flush().await?;
                stream.shutdown().await
            })
            .await;
            // Read (and drop) what the client sends meanwhile, a little while and a little
            // of it, before closing: a client that writes its first command before it reads
            // would otherwise meet a closed socket (EPIPE on a Unix socket, a reset on TCP)
            // instead of the refusal that is waiting in its receive buffer.
            let _ = tokio::time::timeout(Duration::from_millis(250), async {
                let mut sink = [0u8; 4096];
                let mut left = 64 * 1024usize;
                while left > 0 {
                    match stream.read(&mut sink).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => left = left.saturating_sub(n),
                    }
                }
            })
            .await;
        }
        None => connection::serve(shared, stream, peer, laddr).await,
    }
}

/// Whether the `user` directives load (on a scratch copy of the users).
fn check_users(config: &Config) -> Result<(), ConfigError> {
    if config.users.is_empty() {
        return Ok(());
    }
    let table = crate::engine::CommandTable::build();
    let acl = crate::services::acl::Acl::new(&table, None, config.acl_pubsub_allchannels);
    acl.load_configured(&table, &config.users)
        .map_err(|reason| ConfigError::BadValue {
            name: "user".into(),
            reason,
        })
}

/// The users of the `user` directives or of `aclfile` (Redis's `ACLLoadUsersAtStartup`),
/// before any client is served: a problem stops the start, as in Redis.
fn load_users(shared: &Shared) -> Result<(), ConfigError> {
    let config = shared.config();
    let bad = |name: &str, reason: String| ConfigError::BadValue {
        name: name.into(),
        reason,
    };
    if config.aclfile.is_some() && !config.users.is_empty() {
        return Err(bad(
            "aclfile",
            "Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into(),
        ));
    }
    shared
        .acl
        .load_configured(&shared.table, &config.users)
        .map_err(|e| bad("user", e))?;
    if let Some(path) = &config.aclfile {
        let text = std::fs::read(path).map_err(|e| {
            bad(
                "aclfile",
                format!("Error loading ACLs, opening file '{path}': {e}"),
            )
        })?;
        shared
            .acl
            .load_text(&shared.table, path, &text)
            .map_err(|e| {
                bad(
                    "aclfile",
                    format!("Aborting Redis startup because of ACL errors: {e}"),
                )
            })?;
    }
    Ok(())
}
