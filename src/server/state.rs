//! The server's state: one `Shared` per server, built by `Server::bind` and handed by
//! reference to the engine, every command and every service (the keyspace, the clock, the
//! configuration in force, the command table, the registries, the counters).
//!
//! The server owns it; the layers below read it through `&Shared`. It is a bag of handles:
//! each field's behaviour lives in its own module (`services::pubsub` for `pubsub`, …).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use crate::client::Registry;
use crate::clock::Clock;
use crate::commands::testmode;
use crate::config::Config;
use crate::engine::CommandTable;
use crate::services::counter::Counter;
use crate::services::{blocking, latency, monitor, notify, pause, persist, pubsub, slowlog, stats};
use crate::store::Keyspace;

/// Server-wide state every command can reach.
#[derive(Debug)]
pub struct Shared {
    /// The data.
    pub keyspace: Arc<Keyspace>,
    /// The clock every command reads once.
    pub clock: Clock,
    /// The configuration in force (CONFIG SET changes it).
    pub config: std::sync::RwLock<Config>,
    /// Connected clients.
    pub clients: Arc<Registry>,
    /// The command table.
    pub table: CommandTable,
    /// Server counters for INFO.
    pub stats: ServerStats,
    /// Cancelled to stop the server (SHUTDOWN, signals).
    pub shutdown: tokio_util::sync::CancellationToken,
    /// The port actually bound.
    pub port: std::sync::atomic::AtomicU16,
    /// When the server started.
    pub started: Instant,
    /// A random 40-hex-digit id (INFO run_id).
    pub run_id: String,
    /// Values CONFIG SET gave to parameters sluice reports but does not act on.
    pub params: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
    /// The MONITOR feed.
    pub monitors: monitor::Monitors,
    /// Pub/sub subscriptions.
    pub pubsub: pubsub::PubSub,
    /// Faults and command log; present only in test mode.
    pub test: Option<testmode::TestHooks>,
    /// The settings the hot path reads (maxmemory, output limits...), kept in step with
    /// `config` by whoever changes it.
    pub live: crate::config::LiveSettings,
    /// The Lua script cache and the running script's state.
    pub scripts: crate::script::Scripts,
    /// Cluster mode's slot map; None when cluster mode is off (`Server::bind` sets it).
    pub cluster: Option<crate::cluster::Cluster>,
    /// Clients blocked on keys (BLPOP…).
    pub blocked: blocking::BlockedClients,
    /// CLIENT PAUSE's state.
    pub pause: pause::Pause,
    /// The plain TCP listeners, replaced by CONFIG SET port / bind.
    pub relisten: super::relisten::Relisten,
    /// UNLINK's lazyfree thread and its counters.
    pub lazyfree: crate::services::lazyfree::LazyFree,
    /// RDB persistence: save state and counters.
    pub persist: persist::Persistence,
    /// Error replies by prefix (INFO errorstats).
    pub errors: stats::ErrorStats,
    /// SLOWLOG's entries.
    pub slowlog: slowlog::SlowLog,
    /// LATENCY's events.
    pub latency: latency::LatencyMonitor,
    /// Replication: role, write stream, attached replicas.
    pub repl: Arc<crate::repl::Repl>,
    /// ACL users, the permission check and the ACL log.
    pub acl: crate::services::acl::Acl,
}

/// Counters INFO reports.
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Commands run.
    pub total_commands: Counter,
    /// Connections accepted.
    pub total_connections: AtomicU64,
    /// Connections refused (maxclients).
    pub rejected_connections: AtomicU64,
    /// Bytes read from clients.
    pub net_input_bytes: Counter,
    /// Bytes written to clients.
    pub net_output_bytes: Counter,
    /// Error replies sent.
    pub total_error_replies: AtomicU64,
    /// Keys evicted to stay under maxmemory.
    pub evicted_keys: AtomicU64,
}

impl ServerStats {
    /// Zeroes every counter (CONFIG RESETSTAT, TESTMODE RESET).
    pub(crate) fn reset(&self) {
        for c in [
            &self.total_commands,
            &self.net_input_bytes,
            &self.net_output_bytes,
        ] {
            c.reset();
        }
        for c in [
            &self.total_connections,
            &self.rejected_connections,
            &self.total_error_replies,
            &self.evicted_keys,
        ] {
            c.store(0, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl Shared {
    /// Builds the shared state for `config`.
    pub fn new(config: Config, clock: Clock) -> Self {
        let keyspace = Arc::new(Keyspace::new(
            config.effective_shards(),
            config.databases,
            clock.now_ms(),
        ));
        let test_mode = config.test_mode;
        let test = test_mode.then(|| testmode::TestHooks::new(&config));
        let now_s = clock.now_ms() / 1000;
        let live = crate::config::LiveSettings::new(&config);
        let scripts = crate::script::Scripts::new(&config.redis_version);
        let repl = Arc::new(crate::repl::Repl::new(config.repl.backlog_size));
        crate::repl::hook_deletions(&repl, &keyspace);
        let run_id: String = (0..40)
            .map(|_| format!("{:x}", rand::random::<u8>() & 0xf))
            .collect();
        // The test-double commands (CLOCK, FAULT, CMDLOG) exist only in test mode.
        let mut table = CommandTable::build();
        if !test_mode {
            for spec in testmode::COMMANDS {
                table.remove(spec.name);
            }
        }
        let acl = crate::services::acl::Acl::new(
            &table,
            config.requirepass.as_deref(),
            config.acl_pubsub_allchannels,
        );
        acl.configure(config.acllog_max_len, config.acl_pubsub_allchannels);
        let clients = Arc::new(Registry::default());
        keyspace.tracking().set_registry(clients.clone());
        let shared = Shared {
            acl,
            keyspace,
            clock,
            config: std::sync::RwLock::new(config),
            clients,
            table,
            stats: ServerStats::default(),
            shutdown: tokio_util::sync::CancellationToken::new(),
            port: std::sync::atomic::AtomicU16::new(0),
            started: Instant::now(),
            run_id,
            params: std::sync::Mutex::new(std::collections::BTreeMap::new()),
            monitors: monitor::Monitors::default(),
            pubsub: pubsub::PubSub::default(),
            test,
            live,
            scripts,
            cluster: None,
            blocked: blocking::BlockedClients::default(),
            pause: pause::Pause::default(),
            relisten: Default::default(),
            lazyfree: Default::default(),
            persist: persist::Persistence::new(now_s),
            errors: stats::ErrorStats::default(),
            slowlog: slowlog::SlowLog::default(),
            latency: latency::LatencyMonitor::default(),
            repl,
        };
        shared.configure_notifications();
        shared
    }

    /// Applies `notify-keyspace-events` (at start and after CONFIG SET): which key events
    /// the store logs for notifications.
    pub fn configure_notifications(&self) {
        notify::configure(self, self.live.notify_keyspace_events());
    }

    /// A copy of the configuration.
    pub fn config(&self) -> Config {
        self.config.read().map(|c| c.clone()).unwrap_or_default()
    }
}
