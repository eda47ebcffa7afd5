//! Server configuration: the options with their defaults, validation, redis.conf directives,
//! and the parameter table behind CONFIG GET / CONFIG SET.
//!
//! sluice takes redis-server's names and forms so it drops into scripts written for Redis:
//! the same directive works in a conf file, as `--name value` on the command line, and (where
//! Redis allows it at run time) in CONFIG SET. [`params`] is the table of every parameter
//! (type, bounds, flags, what sluice does with it), which checks every value before it is
//! stored; `Config::apply` stores the ones sluice acts on; [`mod@file`] reads files and the
//! command line; `rewrite` is CONFIG REWRITE.

pub mod file;
pub(crate) mod keyspace_events;
mod live;
pub mod params;
pub(crate) mod rewrite;

pub use live::LiveSettings;

use std::fmt;

pub use crate::protocol::request::split_args;

/// Most event-loop threads `threads` accepts.
pub const MAX_THREADS: usize = 1024;

/// When the append-only file is synced to disk (`appendfsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fsync {
    /// After every write, before its reply leaves.
    Always,
    /// About once a second, on a thread of its own.
    #[default]
    EverySec,
    /// When the kernel decides.
    No,
}

impl Fsync {
    /// Its name in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            Fsync::Always => "always",
            Fsync::EverySec => "everysec",
            Fsync::No => "no",
        }
    }

    /// Parses a checked value.
    pub fn parse(v: &str) -> Fsync {
        match v.to_ascii_lowercase().as_str() {
            "always" => Fsync::Always,
            "no" => Fsync::No,
            _ => Fsync::EverySec,
        }
    }
}

/// The append-only file's settings (Redis 7.0's multi-part AOF; see `crate::aof`).
#[derive(Debug, Clone, PartialEq)]
pub struct AofSettings {
    /// `appendonly`: log every write.
    pub enabled: bool,
    /// `appendfsync`.
    pub fsync: Fsync,
    /// `appendfilename`: the files' common prefix.
    pub filename: String,
    /// `appenddirname`: the folder inside `dir` holding the files.
    pub dirname: String,
    /// `aof-load-truncated`: load a last file cut short (and truncate it) instead of
    /// refusing to start.
    pub load_truncated: bool,
    /// `aof-use-rdb-preamble`: base files are RDB files (else commands).
    pub use_rdb_preamble: bool,
    /// `auto-aof-rewrite-percentage` (0: never automatically).
    pub rewrite_percentage: u64,
    /// `auto-aof-rewrite-min-size` in bytes.
    pub rewrite_min_size: u64,
}

impl Default for AofSettings {
    fn default() -> Self {
        AofSettings {
            enabled: false,
            fsync: Fsync::EverySec,
            filename: "appendonly.aof".into(),
            dirname: "appendonlydir".into(),
            load_truncated: true,
            use_rdb_preamble: true,
            rewrite_percentage: 100,
            rewrite_min_size: 64 * 1024 * 1024,
        }
    }
}

/// Everything the server needs to start.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Addresses to listen on.
    pub bind: Vec<String>,
    /// `zset-max-listpack-entries` (alias `zset-max-ziplist-entries`): most entries of a
    /// compact sorted set.
    pub zset_max_listpack_entries: usize,
    /// `zset-max-listpack-value` (alias `zset-max-ziplist-value`): longest member, in bytes,
    /// of a compact sorted set.
    pub zset_max_listpack_value: usize,
    /// `hash-max-listpack-entries` (alias `hash-max-ziplist-entries`): most pairs of a
    /// compact hash.
    pub hash_max_listpack_entries: usize,
    /// `hash-max-listpack-value` (alias `hash-max-ziplist-value`): longest field or value,
    /// in bytes, of a compact hash.
    pub hash_max_listpack_value: usize,
    /// TCP port; 0 picks a free one.
    pub port: u16,
    /// Number of logical databases (SELECT 0..n-1).
    pub databases: usize,
    /// Log level (Redis names: debug, verbose, notice, warning, nothing).
    pub loglevel: String,
    /// Keyspace shards (a power of two); 0 picks one from the CPU count.
    pub shards: usize,
    /// Event-loop threads serving connections; 0 means one per CPU.
    pub threads: usize,
    /// What the event loops serve plain TCP connections with (`io-backend`).
    pub io_backend: IoBackend,
    /// `busy-poll`: microseconds an event loop polls for the next request after serving one,
    /// before it sleeps, while a core is idle (0: never; see `server::eventloop::spin`).
    pub busy_poll_us: u64,
    /// Most simultaneous clients.
    pub maxclients: usize,
    /// Idle seconds before a client is closed; 0 never.
    pub timeout: u64,
    /// `tcp-keepalive`: seconds of silence before TCP keepalive probes a client's
    /// connection (then every third of that, three times); 0 leaves keepalive off.
    pub tcp_keepalive: u64,
    /// Largest bulk argument.
    pub proto_max_bulk_len: usize,
    /// Largest unprocessed input a client may have buffered.
    pub client_query_buffer_limit: usize,
    /// Enables the test-double commands (CLOCK, …) and starts with a frozen-capable clock.
    pub test_mode: bool,
    /// The Redis version reported by INFO and HELLO.
    pub redis_version: String,
    /// Accept `HELLO 3`; when false it gets NOPROTO, to test clients' RESP2 fallback.
    pub resp3: bool,
    /// The default user's password (AUTH); None: no password, every client is authenticated.
    pub requirepass: Option<String>,
    /// `aclfile`: where ACL LOAD / SAVE read and write the users.
    pub aclfile: Option<String>,
    /// `user` directives, each the words after `user` joined by a space.
    pub users: Vec<String>,
    /// `acllog-max-len`.
    pub acllog_max_len: usize,
    /// `acl-pubsub-default allchannels` (else `resetchannels`, 7.0's default).
    pub acl_pubsub_allchannels: bool,
    /// Refuse non-loopback clients while no password is set (Redis's protected mode).
    pub protected_mode: bool,
    /// Memory cap in bytes (live heap, as INFO's used_memory); 0 means no cap.
    pub maxmemory: usize,
    /// What to do when `maxmemory` is reached.
    pub maxmemory_policy: EvictionPolicy,
    /// Keys sampled per eviction (Redis's maxmemory-samples).
    pub maxmemory_samples: usize,
    /// `notify-keyspace-events`: the classes of keyspace notifications to publish
    /// (`keyspace_events` bits; 0, the default, publishes nothing).
    pub notify_keyspace_events: u32,
    /// The `normal` class of client-output-buffer-limit: bounds the replies a connection
    /// holds while its client does not read them.
    pub output_buffer_limit: OutputBufferLimit,
    /// The replica and pubsub classes as CONFIG GET reports them.
    pub output_buffer_limit_other: String,
    /// The `pubsub` class: bounds the messages queued for a subscribed client.
    pub pubsub_buffer_limit: OutputBufferLimit,
    /// TLS port; 0 means no TLS listener.
    pub tls_port: u16,
    /// PEM certificate chain for the TLS port.
    pub tls_cert_file: Option<String>,
    /// PEM private key for the TLS port.
    pub tls_key_file: Option<String>,
    /// Milliseconds a script may run before other clients get `-BUSY` and SCRIPT KILL may
    /// stop it (Redis's busy-reply-threshold, alias lua-time-limit).
    pub busy_reply_threshold: u64,
    /// `lua-script-locking global`: every script and function locks the whole keyspace, as
    /// before scripts ran in parallel (`declared`, the default: the shards of its KEYS).
    pub lua_script_global: bool,
    /// SLOWLOG keeps commands that ran at least this many microseconds (-1: none).
    pub slowlog_log_slower_than: i64,
    /// The most entries SLOWLOG keeps.
    pub slowlog_max_len: u64,
    /// LATENCY records events that took at least this many milliseconds (0: off).
    pub latency_monitor_threshold: u64,
    /// INFO latencystats keeps per-command latency histograms.
    pub latency_tracking: bool,
    /// CLIENT TRACKING's table keeps at most this many keys (0: no bound).
    pub tracking_table_max_keys: u64,
    /// `maxmemory-clients`, as set (a size, or a percentage of maxmemory): kept for CONFIG
    /// GET; sluice does not evict clients by their memory.
    pub maxmemory_clients: String,
    /// Cluster mode: serve a share of the hash slots by the map in `cluster_config_file`.
    pub cluster_enabled: bool,
    /// The cluster slot map file (sluice's format, see `cluster::map`; not Redis's nodes.conf).
    pub cluster_config_file: Option<String>,
    /// Which node of the map this server is; None: the node whose address is this server's.
    pub cluster_node_id: Option<String>,
    /// `cluster-seed-map`: a slot map a new node (no nodes.conf yet) seeds its cluster state
    /// from (sluice's own; see `cluster::seed`).
    pub cluster_seed_map: Option<String>,
    /// `cluster-port`: the cluster bus port (0: the client port plus 10000).
    pub cluster_port: u16,
    /// `cluster-node-timeout` in milliseconds.
    pub cluster_node_timeout: u64,
    /// `cluster-migration-barrier`: see `cluster::bus::replica_migration`.
    pub cluster_migration_barrier: u64,
    /// `cluster-allow-replica-migration`.
    pub cluster_allow_replica_migration: bool,
    /// `cluster-require-full-coverage`: the cluster is down while a slot has no working
    /// owner (yes), or serves the slots it covers (no).
    pub cluster_require_full_coverage: bool,
    /// `cluster-allow-reads-when-down`: while the cluster is down, read-only commands of
    /// the slots a node serves still run.
    pub cluster_allow_reads_when_down: bool,
    /// `cluster-allow-pubsubshard-when-down`: while the cluster is down, the sharded pub/sub
    /// commands of the slots a node serves still run.
    pub cluster_allow_pubsubshard_when_down: bool,
    /// `cluster-replica-validity-factor`: a replica cut off from its master longer than
    /// `node-timeout * factor + repl-ping-replica-period` does not stand for election
    /// (0: always may).
    pub cluster_replica_validity_factor: u64,
    /// `cluster-announce-ip` (empty: learned from the first MEET).
    pub cluster_announce_ip: String,
    /// `cluster-announce-hostname`.
    pub cluster_announce_hostname: String,
    /// Where the binary writes its process id (removed at exit); None: nowhere.
    pub pidfile: Option<String>,
    /// Where the binary writes its log; None: standard error.
    pub logfile: Option<String>,
    /// A Unix socket path to listen on as well; None: TCP only.
    pub unixsocket: Option<String>,
    /// The Unix socket's permission bits (octal in the conf file); 0 leaves the umask's.
    pub unixsocketperm: u32,
    /// How the binary tells a supervisor it is ready (`supervised`).
    pub supervised: Supervised,
    /// `daemonize yes` was asked for (refused at start: sluice stays in the foreground).
    pub daemonize: bool,
    /// The working directory the binary changes to at start (`dir`); None: stay. The RDB
    /// file is `dir/dbfilename`.
    pub dir: Option<String>,
    /// `save` points: snapshot when at least `changes` writes happened in `seconds`. Empty
    /// (sluice's default, unlike redis-server's `3600 1 300 100 60 10000`): no automatic
    /// snapshots and none at shutdown unless asked (`SHUTDOWN SAVE`).
    pub save: Vec<(u64, u64)>,
    /// `dbfilename`: the RDB file's name inside `dir`.
    pub dbfilename: String,
    /// `rdbchecksum`: write the CRC64 trailer of RDB files.
    pub rdbchecksum: bool,
    /// `stop-writes-on-bgsave-error`: refuse writes (MISCONF) while the last background
    /// save failed and save points are configured.
    pub stop_writes_on_bgsave_error: bool,
    /// The append-only file's settings (`appendonly`, `appendfsync`, …).
    pub aof: AofSettings,
    /// Replication settings (`replicaof`, `masterauth`, `replica-read-only`…).
    pub repl: ReplSettings,
    /// The config file the server was started from, absolute (CONFIG REWRITE rewrites it;
    /// INFO's `config_file`); None when there was none or it came from standard input.
    pub config_file: Option<String>,
    /// `hll-sparse-max-bytes`: the largest sparse HyperLogLog before it turns dense.
    pub hll_sparse_max_bytes: usize,
    /// `stream-node-max-bytes`: a stream node's listpack size before a new node starts.
    pub stream_node_max_bytes: usize,
    /// `stream-node-max-entries`: a stream node's entries before a new node starts.
    pub stream_node_max_entries: usize,
    /// `enable-protected-configs`: who may CONFIG SET `dir` and `dbfilename`.
    pub enable_protected_configs: Allowed,
    /// `enable-debug-command` as given; None: `local` in test mode, else `no` (see
    /// [`Config::debug_command`]).
    pub enable_debug_command: Option<Allowed>,
}

/// Who may use what `enable-protected-configs` / `enable-debug-command` guard (Redis's
/// `no`, `yes`, `local`: clients on a loopback address or the Unix socket).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Allowed {
    /// Nobody (Redis's default).
    #[default]
    No,
    /// Every client.
    Yes,
    /// Local clients only.
    Local,
}

impl Allowed {
    /// Parses Redis's names (any case).
    pub fn parse(v: &str) -> Result<Allowed, String> {
        match v.to_ascii_lowercase().as_str() {
            "no" => Ok(Allowed::No),
            "yes" => Ok(Allowed::Yes),
            "local" => Ok(Allowed::Local),
            _ => Err("argument(s) must be one of the following: no, yes, local".into()),
        }
    }

    /// Redis's name.
    pub fn name(self) -> &'static str {
        match self {
            Allowed::No => "no",
            Allowed::Yes => "yes",
            Allowed::Local => "local",
        }
    }

    /// Whether a client (local or not) is allowed.
    pub fn admits(self, local: bool) -> bool {
        self == Allowed::Yes || (self == Allowed::Local && local)
    }
}

/// Replication's settings, Redis 7.0's names and defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplSettings {
    /// `replicaof host port` at start (REPLICAOF changes the role at run time).
    pub replicaof: Option<(String, u16)>,
    /// `masterauth`: the password sent to the master.
    pub masterauth: Option<String>,
    /// `masteruser`: the user sent with it (AUTH user pass).
    pub masteruser: Option<String>,
    /// `replica-read-only`: refuse client writes on a replica.
    pub read_only: bool,
    /// `replica-priority` (Sentinel's choice among replicas; 0 never promoted).
    pub priority: u64,
    /// `replica-announce-ip`.
    pub announce_ip: Option<String>,
    /// `replica-announce-port` (0: the listening port).
    pub announce_port: u16,
    /// `replica-announced`: Sentinel lists this replica.
    pub announced: bool,
    /// `repl-backlog-size`: bytes of the write stream kept for partial resynchronization.
    pub backlog_size: usize,
    /// `repl-ping-replica-period` (seconds between the master's PINGs in the stream).
    pub ping_period: u64,
    /// `repl-timeout` (seconds without data before a link is considered broken).
    pub timeout: u64,
    /// `min-replicas-to-write`: refuse writes (NOREPLICAS) unless this many replicas are
    /// good (0: never).
    pub min_replicas_to_write: u64,
    /// `min-replicas-max-lag`: a replica is good if it acknowledged within this many
    /// seconds (0: the check is off).
    pub min_replicas_max_lag: u64,
}

impl Default for ReplSettings {
    fn default() -> Self {
        ReplSettings {
            replicaof: None,
            masterauth: None,
            masteruser: None,
            read_only: true,
            priority: 100,
            announce_ip: None,
            announce_port: 0,
            announced: true,
            min_replicas_to_write: 0,
            min_replicas_max_lag: 10,
            backlog_size: 1024 * 1024,
            ping_period: 10,
            timeout: 60,
        }
    }
}

/// Parses `save`'s value (`"3600 1 300 100"`, or `""` for none): pairs of seconds and
/// changes, Redis's "Invalid save parameters" otherwise.
pub fn parse_save(value: &str) -> Result<Vec<(u64, u64)>, String> {
    if value.is_empty() {
        return Ok(Vec::new());
    }
    // Redis splits on single spaces: doubled or edge spaces make empty words, refused.
    let words: Vec<&str> = value.split(' ').collect();
    if !words.len().is_multiple_of(2) {
        return Err("Invalid save parameters".into());
    }
    let num = |w: &str| {
        crate::num::parse_i64(w.as_bytes())
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| "Invalid save parameters".to_string())
    };
    words
        .chunks(2)
        .map(|p| Ok((num(p[0])?, num(p[1])?)))
        .collect()
}

/// `save`'s value as CONFIG GET shows it.
pub fn format_save(points: &[(u64, u64)]) -> String {
    points
        .iter()
        .map(|(s, c)| format!("{s} {c}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Redis's `supervised` modes that sluice provides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Supervised {
    /// No supervisor interaction.
    #[default]
    No,
    /// sd_notify over `$NOTIFY_SOCKET`: READY=1 once listening, STOPPING=1 at shutdown.
    Systemd,
    /// systemd when `$NOTIFY_SOCKET` is set, otherwise nothing.
    Auto,
}

impl Supervised {
    /// Parses a mode; `upstart` is refused by name (sluice does not speak its protocol).
    pub fn parse(v: &str) -> Result<Supervised, String> {
        match v.to_ascii_lowercase().as_str() {
            "no" => Ok(Supervised::No),
            "systemd" => Ok(Supervised::Systemd),
            "auto" => Ok(Supervised::Auto),
            "upstart" => Err("sluice does not speak upstart's protocol; use systemd or no".into()),
            _ => Err("must be one of no, systemd, auto".into()),
        }
    }

    /// Redis's name for the mode.
    pub fn name(self) -> &'static str {
        match self {
            Supervised::No => "no",
            Supervised::Systemd => "systemd",
            Supervised::Auto => "auto",
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: vec!["127.0.0.1".into()],
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            hash_max_listpack_entries: crate::store::value::HASH_MAX_LISTPACK_ENTRIES,
            hash_max_listpack_value: crate::store::value::HASH_MAX_LISTPACK_VALUE,
            port: 6379,
            databases: 16,
            loglevel: "notice".into(),
            shards: 0,
            threads: 0,
            io_backend: IoBackend::default(),
            busy_poll_us: 0,
            maxclients: 10000,
            timeout: 0,
            tcp_keepalive: 300,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            test_mode: false,
            redis_version: "7.0.15".into(),
            resp3: true,
            requirepass: None,
            aclfile: None,
            users: Vec::new(),
            acllog_max_len: 128,
            acl_pubsub_allchannels: false,
            protected_mode: true,
            maxmemory: 0,
            maxmemory_policy: EvictionPolicy::NoEviction,
            maxmemory_samples: 5,
            notify_keyspace_events: 0,
            output_buffer_limit: OutputBufferLimit::default(),
            output_buffer_limit_other: "slave 268435456 67108864 60 pubsub 33554432 8388608 60"
                .into(),
            pubsub_buffer_limit: OutputBufferLimit {
                hard: 32 * 1024 * 1024,
                soft: 8 * 1024 * 1024,
                soft_seconds: 60,
            },
            tls_port: 0,
            tls_cert_file: None,
            tls_key_file: None,
            busy_reply_threshold: 5000,
            lua_script_global: false,
            slowlog_log_slower_than: 10_000,
            slowlog_max_len: 128,
            latency_monitor_threshold: 0,
            latency_tracking: true,
            tracking_table_max_keys: 1_000_000,
            maxmemory_clients: "0".into(),
            cluster_enabled: false,
            cluster_config_file: None,
            cluster_node_id: None,
            cluster_seed_map: None,
            cluster_port: 0,
            cluster_node_timeout: 15000,
            cluster_migration_barrier: 1,
            cluster_allow_replica_migration: true,
            cluster_require_full_coverage: true,
            cluster_allow_reads_when_down: false,
            cluster_allow_pubsubshard_when_down: true,
            cluster_replica_validity_factor: 10,
            cluster_announce_ip: String::new(),
            cluster_announce_hostname: String::new(),
            pidfile: None,
            logfile: None,
            unixsocket: None,
            unixsocketperm: 0,
            supervised: Supervised::No,
            daemonize: false,
            dir: None,
            repl: ReplSettings::default(),
            save: Vec::new(),
            dbfilename: "dump.rdb".into(),
            rdbchecksum: true,
            stop_writes_on_bgsave_error: true,
            aof: AofSettings::default(),
            config_file: None,
            enable_protected_configs: Allowed::No,
            enable_debug_command: None,
            hll_sparse_max_bytes: crate::store::hll::SPARSE_MAX_BYTES,
            stream_node_max_bytes: 4096,
            stream_node_max_entries: 100,
        }
    }
}

/// A configuration that cannot be used, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A directive sluice does not know or implement.
    #[error("unsupported directive '{0}': sluice does not implement it")]
    Unsupported(String),
    /// A directive with a bad value.
    #[error("bad value for '{name}': {reason}")]
    BadValue {
        /// The directive.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A line of a conf file that could not be split (quotes).
    #[error("line {0}: unbalanced quotes")]
    Quotes(usize),
    /// The conf file could not be read.
    #[error("cannot read config file '{0}': {1}")]
    Io(String, String),
}

fn bad(name: &str, reason: impl fmt::Display) -> ConfigError {
    ConfigError::BadValue {
        name: name.into(),
        reason: reason.to_string(),
    }
}

/// Parses a memory size the way redis.conf does (`1gb`, `512mb`, `64k`, plain bytes).
pub fn parse_memory(v: &str) -> Option<usize> {
    memtoull(v).map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

/// Redis's `memtoull`: digits with an optional unit (`b`, `k`, `kb`, `m`, `mb`, `g`, `gb`, any
/// case). As in Redis, a number past 2^64 - 1 saturates and the unit then multiplies with
/// wrap-around; a sign, other characters, or 128 digits and more are refused.
pub fn memtoull(v: &str) -> Option<u64> {
    let digits_end = v
        .bytes()
        .position(|c| !c.is_ascii_digit())
        .unwrap_or(v.len());
    let (digits, unit) = v.split_at(digits_end);
    let mul: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    if digits.len() >= 128 {
        return None;
    }
    let n = digits.bytes().fold(0u64, |n, d| {
        n.checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .unwrap_or(u64::MAX)
    });
    Some(n.wrapping_mul(mul))
}

impl Config {
    /// Applies one directive of a conf file or the command line (`name` without `--`,
    /// any case): checked and stored by its row of [`params`].
    pub fn apply(&mut self, name: &str, args: &[String]) -> Result<(), ConfigError> {
        let name = name.to_ascii_lowercase();
        let Some(param) = params::find(&name) else {
            return Err(ConfigError::Unsupported(name));
        };
        if args.len() != 1 && !param.takes_several_words() {
            return Err(bad(&name, "wrong number of arguments"));
        }
        match param.store(self, &args.join(" "), params::Source::File) {
            Ok(true) => Ok(()),
            Ok(false) => Err(ConfigError::Unsupported(name)),
            Err(e) => Err(bad(&name, e)),
        }
    }

    /// Checks the values together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.databases == 0 || self.databases > 256 {
            return Err(bad("databases", "must be between 1 and 256"));
        }
        if self.shards != 0 && (!self.shards.is_power_of_two() || self.shards > 4096) {
            return Err(bad(
                "shards",
                "must be a power of two up to 4096 (or 0 for automatic)",
            ));
        }
        if self.threads > MAX_THREADS {
            return Err(bad(
                "threads",
                "must be between 1 and 1024 (or 0 for one per CPU)",
            ));
        }
        if self.bind.is_empty() {
            return Err(bad("bind", "at least one address is needed"));
        }
        if !matches!(
            self.loglevel.as_str(),
            "debug" | "verbose" | "notice" | "warning" | "nothing"
        ) {
            return Err(bad(
                "loglevel",
                "must be one of debug, verbose, notice, warning, nothing",
            ));
        }
        // The ranges CONFIG SET enforces hold for the command line and conf files too, so
        // nothing later adds a client-sized number of seconds to an Instant.
        if self.timeout > i32::MAX as u64 {
            return Err(bad("timeout", "must be between 0 and 2147483647"));
        }
        if self.slowlog_log_slower_than < -1 {
            return Err(bad(
                "slowlog-log-slower-than",
                "must be between -1 and 9223372036854775807",
            ));
        }
        if self.slowlog_max_len > i64::MAX as u64
            || self.latency_monitor_threshold > i64::MAX as u64
        {
            return Err(bad(
                "slowlog-max-len / latency-monitor-threshold",
                "must be between 0 and 9223372036854775807",
            ));
        }
        if self.busy_reply_threshold > i64::MAX as u64 {
            return Err(bad(
                "busy-reply-threshold",
                "must be between 0 and 9223372036854775807",
            ));
        }
        if self.output_buffer_limit.soft_seconds > i32::MAX as u64 {
            return Err(bad(
                "client-output-buffer-limit",
                "soft seconds must be between 0 and 2147483647",
            ));
        }
        if self.maxclients == 0 {
            return Err(bad("maxclients", "must be at least 1"));
        }
        if !(1..=i32::MAX as usize).contains(&self.maxmemory_samples) {
            return Err(bad("maxmemory-samples", "must be between 1 and 2147483647"));
        }
        if self.cluster_enabled && self.repl.replicaof.is_some() {
            // Redis's text; in cluster mode the map says which nodes are replicas.
            return Err(bad(
                "replicaof",
                "replicaof directive not allowed in cluster mode",
            ));
        }
        if self.tls_port != 0 && (self.tls_cert_file.is_none() || self.tls_key_file.is_none()) {
            return Err(bad(
                "tls-port",
                "a TLS port needs both tls-cert-file and tls-key-file",
            ));
        }
        Ok(())
    }

    /// Who may run DEBUG: `enable-debug-command`, or by default `local` in test mode (test
    /// suites use DEBUG SLEEP / RELOAD against a server they started) and `no` otherwise,
    /// as Redis.
    pub fn debug_command(&self) -> Allowed {
        self.enable_debug_command.unwrap_or(if self.test_mode {
            Allowed::Local
        } else {
            Allowed::No
        })
    }

    /// The number of event-loop threads to run: `threads`, or one per CPU.
    pub fn effective_threads(&self) -> usize {
        if self.threads != 0 {
            return self.threads;
        }
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }

    /// The directory of the RDB file: `dir`, or the current directory.
    pub fn rdb_dir(&self) -> std::path::PathBuf {
        match &self.dir {
            Some(d) => std::path::PathBuf::from(d),
            None => std::env::current_dir().unwrap_or_else(|_| ".".into()),
        }
    }

    /// The append-only files' folder: `dir/appenddirname`.
    pub fn aof_dir(&self) -> std::path::PathBuf {
        self.rdb_dir().join(&self.aof.dirname)
    }

    /// The RDB file: `dir/dbfilename`.
    pub fn rdb_path(&self) -> std::path::PathBuf {
        self.rdb_dir().join(&self.dbfilename)
    }

    /// The shard count to use.
    pub fn effective_shards(&self) -> usize {
        if self.shards != 0 {
            return self.shards;
        }
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        (cpus * 4).next_power_of_two().clamp(4, 256)
    }
}

/// Splits a conf line into words with Redis's quoting rules ([`split_args`]); bytes that
/// are not UTF-8 are replaced. None on unbalanced quotes.
pub fn split_conf_line(line: &str) -> Option<Vec<String>> {
    split_args(line.as_bytes()).map(|words| {
        words
            .iter()
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect()
    })
}

impl Config {
    /// The value CONFIG GET reports for a parameter sluice acts on (by name or alias).
    pub fn param(&self, name: &str) -> Option<String> {
        params::find(name)?.value(self)
    }

    /// Applies CONFIG SET for a parameter sluice acts on (checked by its row, which may
    /// refuse the value); Ok(false) if sluice does not keep it (the caller then records
    /// the value).
    pub fn set_param(&mut self, name: &str, value: &str) -> Result<bool, String> {
        match params::find(name) {
            Some(p) => p.store(self, value, params::Source::ConfigSet),
            None => Ok(false),
        }
    }

    /// `client-output-buffer-limit` as CONFIG GET shows it (all three classes).
    pub fn output_buffer_limits(&self) -> String {
        let l = self.output_buffer_limit;
        format!(
            "normal {} {} {} {}",
            l.hard, l.soft, l.soft_seconds, self.output_buffer_limit_other
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives() {
        let mut c = Config::default();
        c.apply("port", &["0".into()]).unwrap();
        c.apply("daemonize", &["no".into()]).unwrap();
        c.apply("unixsocketperm", &["770".into()]).unwrap();
        assert_eq!(c.unixsocketperm, 0o770);
        assert!(c.apply("unixsocketperm", &["999".into()]).is_err());
        assert!(c.apply("supervised", &["upstart".into()]).is_err());
        c.apply("supervised", &["systemd".into()]).unwrap();
        assert!(c.apply("slaveof", &["x".into()]).is_err());
        c.apply("replicaof", &["127.0.0.1".into(), "7000".into()])
            .unwrap();
        assert_eq!(c.repl.replicaof, Some(("127.0.0.1".into(), 7000)));
        c.apply("replica-read-only", &["no".into()]).unwrap();
        assert!(!c.repl.read_only);
        c.apply("proto-max-bulk-len", &["1mb".into()]).unwrap();
        assert_eq!(c.proto_max_bulk_len, 1 << 20);
        assert_eq!(c.port, 0);
        c.validate().unwrap();
    }

    #[test]
    fn threads_directive() {
        let mut c = Config::default();
        assert!(c.effective_threads() >= 1);
        c.apply("threads", &["1".into()]).unwrap();
        assert_eq!(c.effective_threads(), 1);
        c.validate().unwrap();
        assert!(c.apply("threads", &["1025".into()]).is_err());
        c.threads = 1025;
        assert!(c.validate().is_err());
        assert!(c.apply("threads", &["-1".into()]).is_err());
    }

    #[test]
    fn io_backend_directive() {
        let mut c = Config::default();
        assert_eq!(c.io_backend, IoBackend::Loop);
        c.apply("io-backend", &["epoll".into()]).unwrap();
        assert_eq!(c.io_backend, IoBackend::Epoll);
        c.apply("io-backend", &["tokio".into()]).unwrap();
        assert_eq!(c.io_backend, IoBackend::Epoll);
        c.apply("io-backend", &["loop".into()]).unwrap();
        assert_eq!(c.io_backend, IoBackend::Loop);
        c.apply("io-backend", &["uring".into()]).unwrap();
        assert_eq!(c.io_backend, IoBackend::Uring);
        c.apply("io-backend", &["AUTO".into()]).unwrap();
        assert_eq!(c.io_backend, IoBackend::Auto);
        assert!(c.apply("io-backend", &["kqueue".into()]).is_err());
    }

    #[test]
    fn conf_lines() {
        assert_eq!(
            split_conf_line(r#"save """#),
            Some(vec!["save".into(), "".into()])
        );
        assert_eq!(
            split_conf_line("bind 127.0.0.1 ::1"),
            Some(vec!["bind".into(), "127.0.0.1".into(), "::1".into()])
        );
        assert_eq!(split_conf_line(r#"x "a"#), None);
        // As sdssplitargs: hex and letter escapes in double quotes, `\'` in single ones, a
        // closing quote must end the word, quotes may start inside a word.
        assert_eq!(
            split_conf_line(r#"k "a\x41\n\"\\" 'b\'c' d"e f""#),
            Some(vec![
                "k".into(),
                "aA\n\"\\".into(),
                "b'c".into(),
                "de f".into()
            ])
        );
        assert_eq!(split_conf_line(r#"k "a"b"#), None);
        assert_eq!(split_conf_line("k 'a'b"), None);
    }
}

/// What the event loops serve plain TCP connections with (`io-backend`); TLS and Unix-socket
/// connections always use epoll. See `server::loops`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoBackend {
    /// sluice's own event loops (`server::eventloop`): epoll, requests run inline, replies
    /// written in one pass per turn; connections that need waiting go to tokio's.
    #[default]
    Loop,
    /// Readiness (epoll) and a read or write call per operation: tokio's sockets.
    Epoll,
    /// io_uring, falling back to epoll (with a warning) where the kernel or a seccomp
    /// profile does not allow it.
    Uring,
    /// io_uring where available, else epoll.
    Auto,
}

impl IoBackend {
    /// The backend named `name` (loop, epoll, uring or auto; any case).
    pub fn parse(name: &str) -> Result<IoBackend, String> {
        match name.to_ascii_lowercase().as_str() {
            "loop" => Ok(IoBackend::Loop),
            "epoll" | "tokio" => Ok(IoBackend::Epoll),
            "uring" | "io_uring" | "io-uring" => Ok(IoBackend::Uring),
            "auto" => Ok(IoBackend::Auto),
            _ => Err(format!("'{name}' is not one of loop, epoll, uring, auto")),
        }
    }

    /// The name CONFIG GET and `--help` use.
    pub fn name(self) -> &'static str {
        match self {
            IoBackend::Loop => "loop",
            IoBackend::Epoll => "epoll",
            IoBackend::Uring => "uring",
            IoBackend::Auto => "auto",
        }
    }
}

/// What happens when `maxmemory` is reached (Redis's maxmemory-policy, without LFU).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum EvictionPolicy {
    /// Refuse commands flagged `denyoom` with Redis's OOM error; reads and DEL still work.
    #[default]
    NoEviction = 0,
    /// Evict the least recently used keys among all keys (sampled, approximate).
    AllKeysLru = 1,
    /// Evict the least recently used keys among keys with a TTL.
    VolatileLru = 2,
    /// Evict random keys.
    AllKeysRandom = 3,
    /// Evict random keys among keys with a TTL.
    VolatileRandom = 4,
    /// Evict the keys with a TTL closest to expiring.
    VolatileTtl = 5,
}

impl EvictionPolicy {
    const ALL: [EvictionPolicy; 6] = [
        EvictionPolicy::NoEviction,
        EvictionPolicy::AllKeysLru,
        EvictionPolicy::VolatileLru,
        EvictionPolicy::AllKeysRandom,
        EvictionPolicy::VolatileRandom,
        EvictionPolicy::VolatileTtl,
    ];

    /// Redis's name for the policy.
    pub fn name(self) -> &'static str {
        match self {
            EvictionPolicy::NoEviction => "noeviction",
            EvictionPolicy::AllKeysLru => "allkeys-lru",
            EvictionPolicy::VolatileLru => "volatile-lru",
            EvictionPolicy::AllKeysRandom => "allkeys-random",
            EvictionPolicy::VolatileRandom => "volatile-random",
            EvictionPolicy::VolatileTtl => "volatile-ttl",
        }
    }

    /// Parses a policy name (case-insensitive). The LFU policies are refused by name: sluice
    /// keeps no access-frequency counters, and quietly running LRU instead would not be what
    /// the operator asked for.
    pub fn parse(v: &str) -> Result<EvictionPolicy, String> {
        let lower = v.to_ascii_lowercase();
        if let Some(p) = Self::ALL.iter().find(|p| p.name() == lower) {
            return Ok(*p);
        }
        if lower == "allkeys-lfu" || lower == "volatile-lfu" {
            return Err(
                "sluice does not implement the LFU policies; use allkeys-lru or volatile-lru"
                    .into(),
            );
        }
        // Redis's text, which lists the LFU policies too.
        Err("argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction".into())
    }

    /// True for the policies that only consider keys with a TTL.
    pub fn volatile_only(self) -> bool {
        matches!(
            self,
            EvictionPolicy::VolatileLru
                | EvictionPolicy::VolatileRandom
                | EvictionPolicy::VolatileTtl
        )
    }

    fn from_u8(n: u8) -> EvictionPolicy {
        Self::ALL
            .get(n as usize)
            .copied()
            .unwrap_or(EvictionPolicy::NoEviction)
    }
}

/// client-output-buffer-limit for normal clients: disconnect a client whose unsent replies
/// pass `hard` bytes, or stay above `soft` bytes for `soft_seconds`. 0 disables a limit; the
/// default (`0 0 0`) is Redis's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutputBufferLimit {
    /// Bytes of unsent replies that close the connection at once (0: none).
    pub hard: usize,
    /// Bytes of unsent replies that close the connection once held for `soft_seconds`.
    pub soft: usize,
    /// How long the soft limit may be exceeded.
    pub soft_seconds: u64,
}

impl Config {
    /// Applies a client-output-buffer-limit value: `<class> <hard> <soft> <seconds>`
    /// repeated. Only the `normal` class acts in sluice; the others are kept for CONFIG GET.
    fn set_output_buffer_limit(&mut self, value: &str) -> Result<(), String> {
        let words: Vec<&str> = value.split_whitespace().collect();
        if words.is_empty() || !words.len().is_multiple_of(4) {
            return Err("Wrong number of arguments in buffer limit configuration.".into());
        }
        let mut normal = self.output_buffer_limit;
        let mut pubsub = self.pubsub_buffer_limit;
        let mut other: Vec<(String, String)> = self
            .output_buffer_limit_other
            .split_whitespace()
            .collect::<Vec<_>>()
            .chunks(4)
            .filter(|c| c.len() == 4)
            .map(|c| (c[0].to_string(), c[1..].join(" ")))
            .collect();
        for chunk in words.chunks(4) {
            let class = match chunk[0].to_ascii_lowercase().as_str() {
                "normal" => "normal",
                "slave" | "replica" => "slave",
                "pubsub" => "pubsub",
                _ => {
                    return Err(
                        "Invalid client class specified in buffer limit configuration.".into(),
                    );
                }
            };
            let hard = parse_memory(chunk[1]);
            let soft = parse_memory(chunk[2]);
            // Redis reads the seconds as a strict integer and keeps them in an `int`
            // (`4294967296` becomes 0; what wraps negative is refused).
            let secs = crate::num::parse_i64(chunk[3].as_bytes())
                .map(|n| n as i32)
                .and_then(|n| u64::try_from(n).ok());
            let (Some(hard), Some(soft), Some(secs)) = (hard, soft, secs) else {
                return Err(
                    "Error in hard, soft or soft_seconds setting in buffer limit configuration."
                        .into(),
                );
            };
            if class == "normal" {
                normal = OutputBufferLimit {
                    hard,
                    soft,
                    soft_seconds: secs,
                };
            } else if let Some(slot) = other.iter_mut().find(|(c, _)| c == class) {
                if class == "pubsub" {
                    pubsub = OutputBufferLimit {
                        hard,
                        soft,
                        soft_seconds: secs,
                    };
                }
                slot.1 = format!("{hard} {soft} {secs}");
            }
        }
        self.output_buffer_limit = normal;
        self.pubsub_buffer_limit = pubsub;
        self.output_buffer_limit_other = other
            .iter()
            .map(|(c, v)| format!("{c} {v}"))
            .collect::<Vec<_>>()
            .join(" ");
        Ok(())
    }
}
