//! The `sluice` binary: command line (redis-server's option names) → `Config`, logging,
//! a small runtime for signals, and serving until SIGINT/SIGTERM or SHUTDOWN.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use sluice::conffile::{self, Invocation};
use sluice::logging::LogSink;
use sluice::supervisor::{Notifier, PidFile};
use sluice::{Config, Server};

const HELP: &str = "\
sluice: a Redis-protocol-compatible, in-memory rate-limiter server.

Usage: sluice [/path/to/redis.conf] [--directive value ...]
       sluice -v | --version
       sluice -h | --help

As with redis-server, every redis.conf directive can be given on the command line as
--name value (options override the file), and '-' reads the file from standard input.
Directives sluice acts on:

  --port N                    TCP port (default 6379; 0 picks a free one and prints it)
  --bind ADDR ...             addresses to listen on (default 127.0.0.1)
  --unixsocket PATH           also listen on a Unix socket; --unixsocketperm 700 sets its mode
  --databases N               SELECT 0..N-1 (default 16)
  --loglevel L                debug, verbose, notice (default), warning, nothing
  --logfile PATH              log there instead of standard error
  --pidfile PATH              write the process id there (removed at exit)
  --dir PATH                  change to this directory first
  --supervised MODE           no (default), systemd (sd_notify READY=1/STOPPING=1), auto
  --daemonize no              sluice always runs in the foreground
  --maxclients N              most simultaneous clients (default 10000)
  --timeout S                 close clients idle this many seconds (default 0: never)
  --requirepass P             clients must AUTH
  --protected-mode yes|no     refuse non-loopback clients while no password is set (yes)
  --maxmemory BYTES           memory cap (e.g. 100mb; default 0: none)
  --maxmemory-policy P        noeviction, allkeys-lru, volatile-lru, allkeys-random,
                              volatile-random, volatile-ttl
  --maxmemory-samples N       keys sampled per eviction (5)
  --proto-max-bulk-len BYTES  largest bulk argument (512mb)
  --client-query-buffer-limit BYTES
  --client-output-buffer-limit normal HARD SOFT SECONDS
  --busy-reply-threshold MS   when long scripts start getting -BUSY (5000)
  --lua-script-locking M      declared (default: a script locks its KEYS' shards) or global
  --tls-port N --tls-cert-file F --tls-key-file F
  --cluster-enabled yes --cluster-config-file MAP [--cluster-node-id ID]
  --shards N                  keyspace shards, a power of two (default 4 x CPUs)
  --threads N                 event loops serving connections (default: one per CPU,
                              brought in by load)
  --io-backend B              loop (default), epoll, uring, auto: what serves plain TCP
  --test-mode                 enable CLOCK, FAULT and CMDLOG
  --redis-version V           the version INFO and HELLO report (7.0.15)
  --resp3 no                  refuse HELLO 3 (test a client's RESP2 fallback)

Redis's other directives are accepted with a warning naming them, or refused when they
ask for something sluice cannot do (daemonize yes, replicaof, rename-command, ...).
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let loaded = match conffile::from_args(&args) {
        Ok(Invocation::Run(loaded)) => *loaded,
        Ok(Invocation::Version) => {
            say(&format!(
                "sluice v={} redis_version={} bits={}",
                env!("CARGO_PKG_VERSION"),
                Config::default().redis_version,
                usize::BITS
            ));
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::Help) => {
            let _ = std::io::stdout().write_all(HELP.as_bytes());
            return ExitCode::SUCCESS;
        }
        Err(problems) => {
            let _ = std::io::stderr().write_all(problems.to_string().as_bytes());
            return ExitCode::FAILURE;
        }
    };
    let mut config = loaded.config;
    // Before any other thread starts (the log writer, the runtime's), so that every thread
    // inherits the blocked signals and only the signal thread receives them.
    let signals = SignalThread::start();
    if let Some(dir) = &config.dir
        && let Err(e) = std::env::set_current_dir(dir)
    {
        let _ = writeln!(
            std::io::stderr(),
            "sluice: cannot change to dir '{dir}': {e}"
        );
        return ExitCode::FAILURE;
    }
    // From here on `dir` is absolute (the RDB file lives there; CONFIG GET dir shows it).
    if config.dir.is_some()
        && let Ok(cwd) = std::env::current_dir()
    {
        config.dir = Some(cwd.display().to_string());
    }
    let (sink, colour) = match &config.logfile {
        None => (
            LogSink::spawn(Box::new(std::io::stderr())),
            sluice::logging::stderr_wants_colour(),
        ),
        Some(path) => match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            Ok(file) => (LogSink::spawn(Box::new(file)), false),
            Err(e) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "sluice: cannot open logfile '{path}': {e}"
                );
                return ExitCode::FAILURE;
            }
        },
    };
    let sink = match sink {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "sluice: cannot start the log writer: {e}"
            );
            return ExitCode::FAILURE;
        }
    };
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
        .with_ansi(colour)
        .log_internal_errors(false)
        .with_writer(sink.clone())
        .init();
    for warning in &loaded.warnings {
        tracing::warn!("{warning}");
    }
    let code = serve(config, signals);
    sink.flush(Duration::from_millis(500));
    code
}

/// Prints a line on standard output; a closed stdout must not stop the server.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn serve(config: Config, signals: SignalThread) -> ExitCode {
    // This thread only waits for the server to stop: the connections are served on the
    // server's own event-loop threads (`--threads`).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the runtime: {e}");
            let _ = writeln!(std::io::stderr(), "sluice: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    raise_open_files_limit(config.maxclients);
    let pidfile = config.pidfile.clone();
    let (notifier, notify_warning) = Notifier::new(config.supervised);
    if let Some(w) = notify_warning {
        tracing::warn!("{w}");
    }
    if notifier.active() {
        tracing::info!("supervised by systemd: notifying readiness over NOTIFY_SOCKET");
    }
    runtime.block_on(async move {
        let server = match Server::bind(config).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!("{e}");
                let _ = writeln!(std::io::stderr(), "sluice: {e}");
                return ExitCode::FAILURE;
            }
        };
        tracing::info!(
            "event loops: {} ({})",
            server.threads(),
            server.io_backend().name()
        );
        // Written once the sockets are bound, so a pidfile means a server that answers.
        let _pidfile = pidfile.and_then(|p| match PidFile::write(&p) {
            Ok(f) => Some(f),
            Err(e) => {
                tracing::warn!("failed to write PID file '{p}': {e}");
                None
            }
        });
        if let Some(addr) = server.local_addr() {
            // Scripts wait for this line (and read the port from it with --port 0).
            tracing::info!("Ready to accept connections tcp on {addr}");
            say(&format!("sluice listening on {addr}"));
        }
        if let Some(addr) = server.tls_local_addr() {
            tracing::info!("Ready to accept connections tls on {addr}");
            say(&format!("sluice listening for TLS on {addr}"));
        }
        if let Some(path) = server.unix_path() {
            tracing::info!("Ready to accept connections unix on {path}");
            say(&format!("sluice listening on unix:{path}"));
        }
        notifier.notify("READY=1\nSTATUS=Ready to accept connections\n");
        let stop = server.shutdown_token();
        // Whatever stops the server (a signal, SHUTDOWN), systemd hears it at once. Joined
        // with `run`, not spawned: this runtime has one thread, and a spawned task could be
        // dropped unpolled when `run` returns first.
        let stopping = stop.clone();
        let notify_stopping = async move {
            stopping.cancelled().await;
            notifier.notify("STOPPING=1\n");
        };
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
        tokio::join!(server.run(), notify_stopping);
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
