//! The `sluice` binary: command line (redis-server's option names) → `Config`, logging,
//! a small runtime for signals, and serving until SIGINT/SIGTERM or SHUTDOWN.

use std::process::ExitCode;

use clap::Parser;
use sluice::{Config, Server};

/// A Redis-protocol-compatible, in-memory rate-limiter server.
///
/// Options use redis-server's names, so `sluice --port 6380 --save ''` works where
/// `redis-server --port 6380 --save ''` did. A redis.conf path may come first; options on the
/// command line override it.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, about, long_about = None)]
struct Cli {
    /// A redis.conf-style file to read directives from first.
    config_file: Option<String>,
    /// TCP port to listen on; 0 picks a free port (the log line says which).
    #[arg(long)]
    port: Option<u16>,
    /// Addresses to listen on (space-separated, like redis.conf's `bind`).
    #[arg(long, num_args = 1..)]
    bind: Option<Vec<String>>,
    /// Number of databases (SELECT 0..n-1).
    #[arg(long)]
    databases: Option<usize>,
    /// Log level: debug, verbose, notice, warning or nothing.
    #[arg(long)]
    loglevel: Option<String>,
    /// Keyspace shards (a power of two); default: 4 × CPUs.
    #[arg(long)]
    shards: Option<usize>,
    /// Event-loop threads serving connections; default: one per CPU (see README, "Threads").
    #[arg(long)]
    threads: Option<usize>,
    /// Most simultaneous clients.
    #[arg(long)]
    maxclients: Option<usize>,
    /// Close clients idle this many seconds (0 = never).
    #[arg(long)]
    timeout: Option<u64>,
    /// Largest bulk argument (e.g. 512mb).
    #[arg(long = "proto-max-bulk-len")]
    proto_max_bulk_len: Option<String>,
    /// Largest buffered unprocessed input per client (e.g. 1gb).
    #[arg(long = "client-query-buffer-limit")]
    client_query_buffer_limit: Option<String>,
    /// Accepted for compatibility; sluice keeps no snapshots (`--save ''`).
    #[arg(long, num_args = 0..)]
    save: Option<Vec<String>>,
    /// Accepted for compatibility; only `no` (sluice has no AOF).
    #[arg(long)]
    appendonly: Option<String>,
    /// Accepted for compatibility; only `no`.
    #[arg(long)]
    daemonize: Option<String>,
    /// `no` lets non-loopback clients in without a password (default `yes`, as Redis).
    #[arg(long = "protected-mode")]
    protected_mode: Option<String>,
    /// The default user's password; clients must AUTH before other commands.
    #[arg(long)]
    requirepass: Option<String>,
    /// Enables the test-double commands (clock control, fault injection, command log).
    #[arg(long = "test-mode")]
    test_mode: bool,
    /// The Redis version INFO and HELLO report (clients gate features on it).
    #[arg(long = "redis-version")]
    redis_version: Option<String>,
    /// `no` refuses `HELLO 3` with NOPROTO, to test a client's RESP2 fallback.
    #[arg(long)]
    resp3: Option<String>,
    /// Memory cap (e.g. 100mb); 0 means none.
    #[arg(long)]
    maxmemory: Option<String>,
    /// noeviction, allkeys-lru, volatile-lru, allkeys-random, volatile-random or volatile-ttl.
    #[arg(long = "maxmemory-policy")]
    maxmemory_policy: Option<String>,
    /// Keys sampled per eviction (default 5).
    #[arg(long = "maxmemory-samples")]
    maxmemory_samples: Option<String>,
    /// `normal <hard> <soft> <seconds>`: disconnect clients that do not read their replies.
    #[arg(long = "client-output-buffer-limit", num_args = 1..)]
    client_output_buffer_limit: Option<Vec<String>>,
    /// TLS port (0 = no TLS); needs --tls-cert-file and --tls-key-file.
    #[arg(long = "tls-port")]
    tls_port: Option<u16>,
    /// PEM certificate chain for the TLS port.
    #[arg(long = "tls-cert-file")]
    tls_cert_file: Option<String>,
    /// PEM private key for the TLS port.
    #[arg(long = "tls-key-file")]
    tls_key_file: Option<String>,
    /// Only `no`: sluice does not ask clients for certificates.
    #[arg(long = "tls-auth-clients")]
    tls_auth_clients: Option<String>,
    /// `yes` serves a share of the hash slots, by the map in --cluster-config-file, to Redis
    /// Cluster clients (MOVED / CROSSSLOT, CLUSTER SLOTS…).
    #[arg(long = "cluster-enabled")]
    cluster_enabled: Option<String>,
    /// The cluster slot map: `node <40-hex id> <host>:<port> <slots>` lines, the same file
    /// on every node (see README, "Scaling out").
    #[arg(long = "cluster-config-file")]
    cluster_config_file: Option<String>,
    /// Which node of the map this server is (default: the node with this server's address).
    #[arg(long = "cluster-node-id")]
    cluster_node_id: Option<String>,
}

impl Cli {
    fn directives(&self) -> Vec<(&'static str, Vec<String>)> {
        let mut d: Vec<(&'static str, Vec<String>)> = Vec::new();
        let mut one = |name: &'static str, v: Option<String>| {
            if let Some(v) = v {
                d.push((name, vec![v]));
            }
        };
        one("port", self.port.map(|p| p.to_string()));
        one("databases", self.databases.map(|p| p.to_string()));
        one("loglevel", self.loglevel.clone());
        one("shards", self.shards.map(|p| p.to_string()));
        one("threads", self.threads.map(|p| p.to_string()));
        one("maxclients", self.maxclients.map(|p| p.to_string()));
        one("timeout", self.timeout.map(|p| p.to_string()));
        one("proto-max-bulk-len", self.proto_max_bulk_len.clone());
        one(
            "client-query-buffer-limit",
            self.client_query_buffer_limit.clone(),
        );
        one("appendonly", self.appendonly.clone());
        one("daemonize", self.daemonize.clone());
        one("protected-mode", self.protected_mode.clone());
        one("redis-version", self.redis_version.clone());
        one("resp3", self.resp3.clone());
        one("requirepass", self.requirepass.clone());
        one("maxmemory", self.maxmemory.clone());
        one("maxmemory-policy", self.maxmemory_policy.clone());
        one("maxmemory-samples", self.maxmemory_samples.clone());
        one("tls-port", self.tls_port.map(|p| p.to_string()));
        one("tls-cert-file", self.tls_cert_file.clone());
        one("tls-key-file", self.tls_key_file.clone());
        one("tls-auth-clients", self.tls_auth_clients.clone());
        one("cluster-enabled", self.cluster_enabled.clone());
        one("cluster-config-file", self.cluster_config_file.clone());
        one("cluster-node-id", self.cluster_node_id.clone());
        if let Some(v) = &self.client_output_buffer_limit {
            d.push(("client-output-buffer-limit", v.clone()));
        }
        if self.test_mode {
            d.push(("test-mode", vec!["yes".into()]));
        }
        if let Some(b) = &self.bind {
            d.push(("bind", b.clone()));
        }
        if let Some(s) = &self.save {
            d.push(("save", s.clone()));
        }
        d
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut config = Config::default();
    if let Some(path) = &cli.config_file
        && let Err(e) = config.apply_file(path)
    {
        eprintln!("sluice: {e}");
        return ExitCode::FAILURE;
    }
    for (name, args) in cli.directives() {
        if let Err(e) = config.apply(name, &args) {
            eprintln!("sluice: {e}");
            return ExitCode::FAILURE;
        }
    }
    let filter = match config.loglevel.as_str() {
        "debug" => "debug",
        "verbose" => "info",
        "notice" => "info",
        "warning" => "warn",
        _ => "off",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter)),
        )
        .with_writer(std::io::stderr)
        .init();
    for ignored in &config.ignored {
        tracing::info!(
            "directive accepted without effect (sluice keeps everything in memory): {ignored}"
        );
    }
    // Before the runtime and the event loops start, so that every thread inherits the
    // blocked signals.
    let signals = SignalThread::start();
    // This thread only waits for the server to stop: the connections are served on the
    // server's own event-loop threads (`--threads`).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sluice: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    raise_open_files_limit(config.maxclients);
    runtime.block_on(async move {
        let server = match Server::bind(config).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("sluice: {e}");
                return ExitCode::FAILURE;
            }
        };
        tracing::info!("event loops: {}", server.threads());
        if let Some(addr) = server.local_addr() {
            // Scripts wait for this line (and read the port from it with --port 0).
            tracing::info!("Ready to accept connections tcp on {addr}");
            println!("sluice listening on {addr}");
        }
        if let Some(addr) = server.tls_local_addr() {
            tracing::info!("Ready to accept connections tls on {addr}");
            println!("sluice listening for TLS on {addr}");
        }
        let stop = server.shutdown_token();
        if !signals.serve(stop.clone()) {
            // No signal thread (not Unix, or the mask could not be set): the runtime's.
            tokio::spawn(async move {
                wait_for_signal().await;
                tracing::info!("signal received, shutting down");
                stop.cancel();
                // A second signal exits at once.
                wait_for_signal().await;
                std::process::exit(1);
            });
        }
        server.run().await;
        ExitCode::SUCCESS
    })
}

/// Raises the soft open-files limit so `maxclients` connections fit (plus 32 descriptors for
/// listeners and the runtime), up to the hard limit, as redis-server does at start-up.
fn raise_open_files_limit(maxclients: usize) {
    #[cfg(unix)]
    {
        let want = maxclients.saturating_add(32) as libc::rlim_t;
        // SAFETY: getrlimit/setrlimit only read and write the struct we own.
        unsafe {
            let mut lim: libc::rlimit = std::mem::zeroed();
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 || lim.rlim_cur >= want {
                return;
            }
            let old = lim.rlim_cur;
            lim.rlim_cur = want.min(lim.rlim_max);
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < want {
                tracing::warn!(
                    "open files limit is {} (hard limit), below maxclients + 32 = {want}",
                    lim.rlim_cur
                );
            } else if lim.rlim_cur > old {
                tracing::info!("raised the open files limit from {old} to {}", lim.rlim_cur);
            }
        }
    }
}

/// SIGTERM and SIGINT, handled by a thread of their own rather than a runtime task: the
/// first stops the server gracefully, the second ends the process at once, whatever the
/// runtime's threads are doing (a script, a long command, a stuck write).
struct SignalThread {
    token: Option<std::sync::mpsc::Sender<tokio_util::sync::CancellationToken>>,
}

impl SignalThread {
    /// Blocks SIGTERM/SIGINT in this thread (and so in every thread started after it) and
    /// starts the thread that waits for them.
    fn start() -> SignalThread {
        #[cfg(unix)]
        {
            let (tx, rx) = std::sync::mpsc::channel::<tokio_util::sync::CancellationToken>();
            // SAFETY: the sigset is ours and zero-initialised before sigemptyset fills it;
            // pthread_sigmask and sigwait only read it.
            let blocked = unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGTERM);
                libc::sigaddset(&mut set, libc::SIGINT);
                (libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) == 0)
                    .then_some(set)
            };
            if let Some(set) = blocked {
                let spawned = std::thread::Builder::new()
                    .name("signals".into())
                    .spawn(move || {
                        let wait = || {
                            let mut sig: libc::c_int = 0;
                            // SAFETY: `set` is a valid, filled sigset; `sig` is ours.
                            while unsafe { libc::sigwait(&set, &mut sig) } != 0 {}
                        };
                        wait();
                        tracing::info!("signal received, shutting down");
                        match rx.try_recv() {
                            Ok(token) => token.cancel(),
                            // Not serving yet: nothing to finish.
                            Err(_) => std::process::exit(0),
                        }
                        wait();
                        // SAFETY: _exit ends the process without running anything else, which
                        // is the point: nothing may hold the second signal up.
                        unsafe { libc::_exit(1) }
                    });
                if spawned.is_ok() {
                    return SignalThread { token: Some(tx) };
                }
                // SAFETY: as above; gives the signals back to the runtime's handler.
                unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
            }
        }
        SignalThread { token: None }
    }

    /// Hands the server's shutdown token to the signal thread; false if there is none.
    fn serve(&self, token: tokio_util::sync::CancellationToken) -> bool {
        self.token.as_ref().is_some_and(|tx| tx.send(token).is_ok())
    }
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
