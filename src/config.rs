//! Server configuration: the options with their defaults, validation, redis.conf directives,
//! and the parameter table behind CONFIG GET / CONFIG SET.
//!
//! sluice takes redis-server's names and forms so it drops into scripts written for Redis:
//! the same directive works in a conf file, as `--name value` on the command line, and (where
//! Redis allows it at run time) in CONFIG SET. `Config::apply` handles the directives sluice
//! acts on; `conffile` reads files and the command line, and decides what happens to the rest
//! of Redis's directives (accepted with a warning, or refused).

use std::fmt;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};

/// Most event-loop threads `threads` accepts.
pub const MAX_THREADS: usize = 1024;

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
    /// Most simultaneous clients.
    pub maxclients: usize,
    /// Idle seconds before a client is closed; 0 never.
    pub timeout: u64,
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
    /// Refuse non-loopback clients while no password is set (Redis's protected mode).
    pub protected_mode: bool,
    /// Memory cap in bytes (live heap, as INFO's used_memory); 0 means no cap.
    pub maxmemory: usize,
    /// What to do when `maxmemory` is reached.
    pub maxmemory_policy: EvictionPolicy,
    /// Keys sampled per eviction (Redis's maxmemory-samples).
    pub maxmemory_samples: usize,
    /// `notify-keyspace-events`: the classes of keyspace notifications to publish
    /// ([`keyspace_events`] bits; 0, the default, publishes nothing).
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
    /// Cluster mode: serve a share of the hash slots by the map in `cluster_config_file`.
    pub cluster_enabled: bool,
    /// The cluster slot map file (sluice's format, see `cluster::map`; not Redis's nodes.conf).
    pub cluster_config_file: Option<String>,
    /// Which node of the map this server is; None: the node whose address is this server's.
    pub cluster_node_id: Option<String>,
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
    /// Replication settings (`replicaof`, `masterauth`, `replica-read-only`…).
    pub repl: ReplSettings,
    /// The config file the server was started from, absolute (CONFIG REWRITE rewrites it;
    /// INFO's `config_file`); None when there was none or it came from standard input.
    pub config_file: Option<String>,
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
            backlog_size: 1024 * 1024,
            ping_period: 10,
            timeout: 60,
        }
    }
}

impl ReplSettings {
    /// Applies one replication directive or CONFIG SET; Ok(false) if `name` is not one.
    pub fn set(&mut self, name: &str, args: &[&str]) -> Result<bool, String> {
        let one = || match args {
            [v] => Ok(*v),
            _ => Err("wrong number of arguments".to_string()),
        };
        let yes = |v: &str| match v.to_ascii_lowercase().as_str() {
            "yes" => Ok(true),
            "no" => Ok(false),
            _ => Err("argument must be 'yes' or 'no'".to_string()),
        };
        let int = |v: &str, max: u64| {
            v.parse::<u64>()
                .ok()
                .filter(|n| *n <= max)
                .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())
        };
        match name {
            "replicaof" | "slaveof" => {
                self.replicaof = match args {
                    [h, p] if h.eq_ignore_ascii_case("no") && p.eq_ignore_ascii_case("one") => None,
                    [h, p] => Some((h.to_string(), int(p, 65535)? as u16)),
                    _ => return Err("wrong number of arguments".into()),
                }
            }
            "masterauth" => self.masterauth = Some(one()?.to_string()).filter(|p| !p.is_empty()),
            "masteruser" => self.masteruser = Some(one()?.to_string()).filter(|p| !p.is_empty()),
            "replica-read-only" | "slave-read-only" => self.read_only = yes(one()?)?,
            "replica-priority" | "slave-priority" => self.priority = int(one()?, i32::MAX as u64)?,
            "replica-announce-ip" | "slave-announce-ip" => {
                self.announce_ip = Some(one()?.to_string()).filter(|p| !p.is_empty())
            }
            "replica-announce-port" | "slave-announce-port" => {
                self.announce_port = int(one()?, 65535)? as u16
            }
            "replica-announced" => self.announced = yes(one()?)?,
            "repl-backlog-size" => {
                self.backlog_size = parse_memory(one()?)
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| "argument must be a memory value".to_string())?
            }
            "repl-ping-replica-period" | "repl-ping-slave-period" => {
                self.ping_period = int(one()?, i32::MAX as u64)?.max(1)
            }
            "repl-timeout" => self.timeout = int(one()?, i32::MAX as u64)?.max(1),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// CONFIG GET's value of a replication parameter, None if `name` is not one.
    pub fn get(&self, name: &str) -> Option<String> {
        let yn = |b: bool| if b { "yes" } else { "no" }.to_string();
        Some(match name {
            "replicaof" | "slaveof" => self
                .replicaof
                .as_ref()
                .map(|(h, p)| format!("{h} {p}"))
                .unwrap_or_default(),
            "masterauth" => self.masterauth.clone().unwrap_or_default(),
            "masteruser" => self.masteruser.clone().unwrap_or_default(),
            "replica-read-only" | "slave-read-only" => yn(self.read_only),
            "replica-priority" | "slave-priority" => self.priority.to_string(),
            "replica-announce-ip" | "slave-announce-ip" => {
                self.announce_ip.clone().unwrap_or_default()
            }
            "replica-announce-port" | "slave-announce-port" => self.announce_port.to_string(),
            "replica-announced" => yn(self.announced),
            "repl-backlog-size" => self.backlog_size.to_string(),
            "repl-ping-replica-period" | "repl-ping-slave-period" => self.ping_period.to_string(),
            "repl-timeout" => self.timeout.to_string(),
            _ => return None,
        })
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
            maxclients: 10000,
            timeout: 0,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            test_mode: false,
            redis_version: "7.0.15".into(),
            resp3: true,
            requirepass: None,
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
            cluster_enabled: false,
            cluster_config_file: None,
            cluster_node_id: None,
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
            config_file: None,
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

fn parse_num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, ConfigError> {
    v.parse()
        .map_err(|_| bad(name, format!("'{v}' is not a valid number")))
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

/// How CONFIG SET checks a value (Redis 7.0's config.c types, with its ranges).
#[derive(Debug, Clone, Copy)]
enum Kind {
    Bool,
    /// An integer (Redis's strict `string2ll`) in `min..=max`.
    Int(i128, i128),
    /// A memory size (`memtoull`) in `min..=max`.
    Mem(i128, i128),
    Enum(&'static [&'static str]),
    /// Checked by its own parser (client-output-buffer-limit, maxmemory-policy) or free text.
    Other,
}

const I32: (i128, i128) = (i32::MIN as i128, i32::MAX as i128);
const INT_MAX: i128 = i32::MAX as i128;
const LONG_MAX: i128 = i64::MAX as i128;

fn kind(name: &str) -> Kind {
    match name {
        "activedefrag"
        | "activerehashing"
        | "appendonly"
        | "latency-tracking"
        | "lazyfree-lazy-eviction"
        | "lazyfree-lazy-expire"
        | "lazyfree-lazy-server-del"
        | "lazyfree-lazy-user-del"
        | "lazyfree-lazy-user-flush"
        | "protected-mode"
        | "rdbchecksum"
        | "rdbcompression"
        | "stop-writes-on-bgsave-error" => Kind::Bool,
        "active-expire-effort" => Kind::Int(1, 10),
        "busy-reply-threshold" | "lua-time-limit" => Kind::Int(0, LONG_MAX),
        "hash-max-listpack-entries"
        | "hash-max-ziplist-entries"
        | "set-max-intset-entries"
        | "zset-max-listpack-entries"
        | "zset-max-ziplist-entries"
        | "slowlog-max-len" => Kind::Int(0, LONG_MAX),
        "slowlog-log-slower-than" => Kind::Int(-1, LONG_MAX),
        "hz" | "list-compress-depth" | "tcp-keepalive" | "timeout" => Kind::Int(0, INT_MAX),
        "list-max-listpack-size" | "list-max-ziplist-size" => Kind::Int(I32.0, I32.1),
        "maxclients" => Kind::Int(1, u32::MAX as i128),
        "maxmemory-samples" => Kind::Int(1, INT_MAX),
        "client-query-buffer-limit" | "proto-max-bulk-len" => Kind::Mem(1024 * 1024, LONG_MAX),
        "hash-max-listpack-value"
        | "hash-max-ziplist-value"
        | "zset-max-listpack-value"
        | "zset-max-ziplist-value" => Kind::Mem(0, LONG_MAX),
        "maxmemory" => Kind::Mem(0, u64::MAX as i128),
        "appendfsync" => Kind::Enum(&["everysec", "always", "no"]),
        // sluice also takes `nothing` (Redis 7.2's), but answers with Redis 7.0's list.
        "loglevel" => Kind::Enum(&["debug", "verbose", "notice", "warning"]),
        "lua-script-locking" => Kind::Enum(&["declared", "global"]),
        _ => Kind::Other,
    }
}

/// True for the parameters CONFIG SET refuses with `can't set immutable config`: Redis
/// 7.0's immutable ones, and those sluice only reads at start (port, bind, TLS).
pub fn is_immutable(name: &str) -> bool {
    matches!(
        name,
        "always-show-logo"
            | "replicaof"
            | "slaveof"
            | "appenddirname"
            | "appendfilename"
            | "bind"
            | "cluster-config-file"
            | "cluster-enabled"
            | "daemonize"
            | "databases"
            | "enable-debug-command"
            | "rdbchecksum"
            | "io-threads"
            | "logfile"
            | "pidfile"
            | "port"
            | "tcp-backlog"
            | "tls-auth-clients"
            | "tls-cert-file"
            | "tls-key-file"
            | "tls-port"
    )
}

/// Checks a CONFIG SET value against the parameter's type and range, with Redis 7.0's
/// texts, and returns it as CONFIG GET will show it (numbers normalized; `hz` clamped to
/// 1..=500 as Redis does).
pub fn check_set_value(name: &str, value: &str) -> Result<String, String> {
    let range = |n: i128, min: i128, max: i128| {
        if (min..=max).contains(&n) {
            Ok(n.to_string())
        } else {
            Err(format!(
                "argument must be between {min} and {max} inclusive"
            ))
        }
    };
    match kind(name) {
        Kind::Bool => match value.to_ascii_lowercase().as_str() {
            v @ ("yes" | "no") => Ok(v.to_string()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Int(min, max) => {
            let n = crate::num::parse_i64(value.as_bytes())
                .ok_or("argument couldn't be parsed into an integer")?;
            let shown = range(i128::from(n), min, max)?;
            if name == "hz" {
                return Ok(n.clamp(1, 500).to_string());
            }
            Ok(shown)
        }
        Kind::Mem(min, max) => {
            let n = memtoull(value).ok_or("argument must be a memory value")?;
            range(i128::from(n), min, max)
        }
        Kind::Enum(names) => {
            let v = value.to_ascii_lowercase();
            if names.contains(&v.as_str()) || (name == "loglevel" && v == "nothing") {
                Ok(v)
            } else {
                Err(format!(
                    "argument(s) must be one of the following: {}",
                    names.join(", ")
                ))
            }
        }
        Kind::Other => Ok(value.to_string()),
    }
}

fn yes_no(name: &str, v: &str) -> Result<bool, ConfigError> {
    match v.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(bad(name, "argument must be 'yes' or 'no'")),
    }
}

impl Config {
    /// Applies one directive (`name` lowercase, without `--`).
    pub fn apply(&mut self, name: &str, args: &[String]) -> Result<(), ConfigError> {
        let name = name.to_ascii_lowercase();
        let one = || -> Result<&str, ConfigError> {
            match args {
                [v] => Ok(v.as_str()),
                _ => Err(bad(&name, "wrong number of arguments")),
            }
        };
        {
            let strs: Vec<&str> = args.iter().map(String::as_str).collect();
            if self.repl.set(&name, &strs).map_err(|e| bad(&name, &e))? {
                return Ok(());
            }
        }
        match name.as_str() {
            "port" => self.port = parse_num(&name, one()?)?,
            "bind" => {
                if args.is_empty() {
                    return Err(bad(&name, "wrong number of arguments"));
                }
                self.bind = args
                    .iter()
                    .flat_map(|a| a.split_whitespace())
                    .map(String::from)
                    .collect();
            }
            "databases" => self.databases = parse_num(&name, one()?)?,
            "loglevel" => self.loglevel = one()?.to_ascii_lowercase(),
            "shards" => self.shards = parse_num(&name, one()?)?,
            "threads" => self.threads = parse_num(&name, one()?)?,
            "io-backend" => {
                self.io_backend = IoBackend::parse(one()?).map_err(|e| bad(&name, e))?
            }
            "maxclients" => self.maxclients = parse_num(&name, one()?)?,
            "timeout" => self.timeout = parse_num(&name, one()?)?,
            "busy-reply-threshold" | "lua-time-limit" => {
                self.busy_reply_threshold = parse_num(&name, one()?)?
            }
            "lua-script-locking" => {
                self.lua_script_global = match one()?.to_ascii_lowercase().as_str() {
                    "declared" => false,
                    "global" => true,
                    _ => return Err(bad(&name, "argument must be 'declared' or 'global'")),
                }
            }
            "slowlog-log-slower-than" => self.slowlog_log_slower_than = parse_num(&name, one()?)?,
            "slowlog-max-len" => self.slowlog_max_len = parse_num(&name, one()?)?,
            "latency-monitor-threshold" => {
                self.latency_monitor_threshold = parse_num(&name, one()?)?
            }
            "latency-tracking" => self.latency_tracking = yes_no(&name, one()?)?,
            "proto-max-bulk-len" => {
                self.proto_max_bulk_len =
                    parse_memory(one()?).ok_or_else(|| bad(&name, "invalid memory size"))?
            }
            "client-query-buffer-limit" => {
                self.client_query_buffer_limit =
                    parse_memory(one()?).ok_or_else(|| bad(&name, "invalid memory size"))?
            }
            "test-mode" => self.test_mode = yes_no(&name, one()?)?,
            "redis-version" => self.redis_version = one()?.to_string(),
            "resp3" => self.resp3 = yes_no(&name, one()?)?,
            "requirepass" => self.requirepass = Some(one()?.to_string()).filter(|p| !p.is_empty()),
            "protected-mode" => self.protected_mode = yes_no(&name, one()?)?,
            "maxmemory" => {
                self.maxmemory =
                    parse_memory(one()?).ok_or_else(|| bad(&name, "invalid memory size"))?
            }
            "maxmemory-policy" => {
                self.maxmemory_policy = EvictionPolicy::parse(one()?).map_err(|e| bad(&name, e))?
            }
            "maxmemory-samples" => self.maxmemory_samples = parse_num(&name, one()?)?,
            "notify-keyspace-events" => {
                self.notify_keyspace_events = keyspace_events::parse(one()?)
                    .ok_or_else(|| bad(&name, keyspace_events::INVALID))?
            }
            "client-output-buffer-limit" => {
                let joined = args.join(" ");
                self.set_output_buffer_limit(&joined)
                    .map_err(|e| bad(&name, e))?;
            }
            "tls-port" => self.tls_port = parse_num(&name, one()?)?,
            "tls-cert-file" => {
                self.tls_cert_file = Some(one()?.to_string()).filter(|p| !p.is_empty())
            }
            "tls-key-file" => {
                self.tls_key_file = Some(one()?.to_string()).filter(|p| !p.is_empty())
            }
            "tls-auth-clients" => {
                // sluice does not verify client certificates; say so rather than pretend.
                if !one()?.eq_ignore_ascii_case("no") {
                    return Err(bad(
                        &name,
                        "sluice does not verify client certificates; only 'no' is supported",
                    ));
                }
            }
            "pidfile" => self.pidfile = Some(one()?.to_string()).filter(|p| !p.is_empty()),
            "logfile" => self.logfile = Some(one()?.to_string()).filter(|p| !p.is_empty()),
            "dir" => self.dir = Some(one()?.to_string()).filter(|p| !p.is_empty()),
            "save" => {
                // One line may hold several pairs; `save ""` clears; later lines add.
                let points = parse_save(&args.join(" ")).map_err(|e| bad(&name, e))?;
                if points.is_empty() {
                    self.save.clear();
                } else {
                    self.save.extend(points);
                }
            }
            "dbfilename" => {
                let v = one()?;
                if v.is_empty() || v.contains('/') {
                    return Err(bad(&name, "dbfilename can't be a path, just a filename"));
                }
                self.dbfilename = v.to_string();
            }
            "rdbchecksum" => self.rdbchecksum = yes_no(&name, one()?)?,
            "stop-writes-on-bgsave-error" => {
                self.stop_writes_on_bgsave_error = yes_no(&name, one()?)?
            }
            "unixsocket" => self.unixsocket = Some(one()?.to_string()).filter(|p| !p.is_empty()),
            "unixsocketperm" => {
                self.unixsocketperm = u32::from_str_radix(one()?, 8)
                    .ok()
                    .filter(|p| *p <= 0o777)
                    .ok_or_else(|| bad(&name, "must be octal permission bits such as 700"))?
            }
            "supervised" => {
                self.supervised = match one()?.to_ascii_lowercase().as_str() {
                    "no" => Supervised::No,
                    "systemd" => Supervised::Systemd,
                    "auto" => Supervised::Auto,
                    "upstart" => {
                        return Err(bad(
                            &name,
                            "sluice does not speak upstart's protocol; use systemd or no",
                        ));
                    }
                    _ => return Err(bad(&name, "must be one of no, systemd, auto")),
                }
            }
            "daemonize" => self.daemonize = yes_no(&name, one()?)?,
            "cluster-enabled" => self.cluster_enabled = yes_no(&name, one()?)?,
            "cluster-config-file" => {
                self.cluster_config_file = Some(one()?.to_string()).filter(|p| !p.is_empty())
            }
            "cluster-node-id" => {
                self.cluster_node_id = Some(one()?.to_string()).filter(|p| !p.is_empty())
            }
            _ => return Err(ConfigError::Unsupported(name)),
        }
        Ok(())
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
        if self.cluster_enabled && self.cluster_config_file.is_none() {
            return Err(bad(
                "cluster-enabled",
                "cluster mode needs cluster-config-file, the slot map every node is given",
            ));
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

/// Splits a conf line into words with Redis's quoting rules (simplified: double quotes with
/// backslash escapes, single quotes verbatim). None on unbalanced quotes.
pub fn split_conf_line(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else {
            return Some(words);
        };
        let mut word = String::new();
        if first == '"' || first == '\'' {
            chars.next();
            loop {
                match chars.next()? {
                    c if c == first => break,
                    '\\' if first == '"' => match chars.next()? {
                        'n' => word.push('\n'),
                        't' => word.push('\t'),
                        'r' => word.push('\r'),
                        c => word.push(c),
                    },
                    c => word.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                word.push(c);
                chars.next();
            }
        }
        words.push(word);
    }
}

/// Redis 7.0's configuration parameters with their default values, as CONFIG GET shows them.
/// Parameters sluice acts on are overridden by `Config::param`; the rest are reported (and
/// may be set) so tools that read or write them keep working.
pub static REDIS_PARAMS: &[(&str, &str)] = &[
    ("activedefrag", "no"),
    ("active-expire-effort", "1"),
    ("activerehashing", "yes"),
    ("always-show-logo", "no"),
    ("appendfilename", "appendonly.aof"),
    ("appenddirname", "appendonlydir"),
    ("appendfsync", "everysec"),
    ("appendonly", "no"),
    ("bind", "127.0.0.1"),
    ("busy-reply-threshold", "5000"),
    (
        "client-output-buffer-limit",
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
    ),
    ("client-query-buffer-limit", "1073741824"),
    ("cluster-config-file", ""),
    ("cluster-enabled", "no"),
    ("daemonize", "no"),
    ("databases", "16"),
    ("dbfilename", "dump.rdb"),
    ("dir", "/"),
    ("enable-debug-command", "no"),
    ("hash-max-listpack-entries", "512"),
    ("hash-max-listpack-value", "64"),
    ("hash-max-ziplist-entries", "512"),
    ("hash-max-ziplist-value", "64"),
    ("hll-sparse-max-bytes", "3000"),
    ("hz", "10"),
    ("io-threads", "1"),
    ("latency-monitor-threshold", "0"),
    ("latency-tracking", "yes"),
    ("lazyfree-lazy-eviction", "no"),
    ("lazyfree-lazy-expire", "no"),
    ("lazyfree-lazy-server-del", "no"),
    ("lazyfree-lazy-user-del", "no"),
    ("lazyfree-lazy-user-flush", "no"),
    ("list-max-listpack-size", "-2"),
    ("list-max-ziplist-size", "-2"),
    ("list-compress-depth", "0"),
    ("logfile", ""),
    ("loglevel", "notice"),
    ("lua-time-limit", "5000"),
    // sluice's own: how scripts lock (see `Config::lua_script_global`).
    ("lua-script-locking", "declared"),
    ("masterauth", ""),
    ("masteruser", ""),
    ("maxclients", "10000"),
    ("maxmemory", "0"),
    ("maxmemory-policy", "noeviction"),
    ("maxmemory-samples", "5"),
    ("maxmemory-clients", "0"),
    ("notify-keyspace-events", ""),
    ("pidfile", ""),
    ("port", "6379"),
    ("proto-max-bulk-len", "536870912"),
    ("protected-mode", "yes"),
    ("rdbchecksum", "yes"),
    ("rdbcompression", "yes"),
    ("requirepass", ""),
    ("masteruser", ""),
    ("repl-backlog-size", "1048576"),
    ("repl-ping-replica-period", "10"),
    ("repl-timeout", "60"),
    ("replica-announce-ip", ""),
    ("replica-announce-port", "0"),
    ("replica-announced", "yes"),
    ("replica-priority", "100"),
    ("replica-read-only", "yes"),
    ("replicaof", ""),
    ("save", "3600 1 300 100 60 10000"),
    ("set-max-intset-entries", "512"),
    ("slowlog-log-slower-than", "10000"),
    ("slowlog-max-len", "128"),
    ("stop-writes-on-bgsave-error", "yes"),
    ("tcp-backlog", "511"),
    ("tcp-keepalive", "300"),
    ("timeout", "0"),
    ("tls-auth-clients", "yes"),
    ("tls-cert-file", ""),
    ("tls-key-file", ""),
    ("tls-port", "0"),
    ("zset-max-listpack-entries", "128"),
    ("zset-max-listpack-value", "64"),
    ("zset-max-ziplist-entries", "128"),
    ("zset-max-ziplist-value", "64"),
];

impl Config {
    /// The value CONFIG GET reports for a parameter sluice acts on.
    pub fn param(&self, name: &str) -> Option<String> {
        if let Some(v) = self.repl.get(name) {
            return Some(v);
        }
        Some(match name {
            "bind" => self.bind.join(" "),
            "port" => self.port.to_string(),
            "databases" => self.databases.to_string(),
            "loglevel" => self.loglevel.clone(),
            "maxclients" => self.maxclients.to_string(),
            "timeout" => self.timeout.to_string(),
            "busy-reply-threshold" | "lua-time-limit" => self.busy_reply_threshold.to_string(),
            "lua-script-locking" => if self.lua_script_global {
                "global"
            } else {
                "declared"
            }
            .to_string(),
            "slowlog-log-slower-than" => self.slowlog_log_slower_than.to_string(),
            "slowlog-max-len" => self.slowlog_max_len.to_string(),
            "latency-monitor-threshold" => self.latency_monitor_threshold.to_string(),
            "latency-tracking" => if self.latency_tracking { "yes" } else { "no" }.to_string(),
            "proto-max-bulk-len" => self.proto_max_bulk_len.to_string(),
            "client-query-buffer-limit" => self.client_query_buffer_limit.to_string(),
            "requirepass" => self.requirepass.clone().unwrap_or_default(),
            "protected-mode" => if self.protected_mode { "yes" } else { "no" }.to_string(),
            "maxmemory" => self.maxmemory.to_string(),
            "maxmemory-policy" => self.maxmemory_policy.name().to_string(),
            "maxmemory-samples" => self.maxmemory_samples.to_string(),
            "notify-keyspace-events" => keyspace_events::format(self.notify_keyspace_events),
            "client-output-buffer-limit" => {
                let l = self.output_buffer_limit;
                format!(
                    "normal {} {} {} {}",
                    l.hard, l.soft, l.soft_seconds, self.output_buffer_limit_other
                )
            }
            "cluster-enabled" => if self.cluster_enabled { "yes" } else { "no" }.to_string(),
            "cluster-config-file" => self.cluster_config_file.clone().unwrap_or_default(),
            "tls-port" => self.tls_port.to_string(),
            "tls-cert-file" => self.tls_cert_file.clone().unwrap_or_default(),
            "tls-key-file" => self.tls_key_file.clone().unwrap_or_default(),
            "pidfile" => self.pidfile.clone().unwrap_or_default(),
            "logfile" => self.logfile.clone().unwrap_or_default(),
            "unixsocket" => self.unixsocket.clone().unwrap_or_default(),
            "unixsocketperm" => self.unixsocketperm.to_string(),
            "supervised" => self.supervised.name().to_string(),
            "daemonize" => if self.daemonize { "yes" } else { "no" }.to_string(),
            "save" => format_save(&self.save),
            "dbfilename" => self.dbfilename.clone(),
            "dir" => self.rdb_dir().display().to_string(),
            "rdbchecksum" => if self.rdbchecksum { "yes" } else { "no" }.to_string(),
            "stop-writes-on-bgsave-error" => if self.stop_writes_on_bgsave_error {
                "yes"
            } else {
                "no"
            }
            .to_string(),
            "zset-max-listpack-entries" | "zset-max-ziplist-entries" => {
                self.zset_max_listpack_entries.to_string()
            }
            "zset-max-listpack-value" | "zset-max-ziplist-value" => {
                self.zset_max_listpack_value.to_string()
            }
            "hash-max-listpack-entries" | "hash-max-ziplist-entries" => {
                self.hash_max_listpack_entries.to_string()
            }
            "hash-max-listpack-value" | "hash-max-ziplist-value" => {
                self.hash_max_listpack_value.to_string()
            }
            _ => return None,
        })
    }

    /// Applies CONFIG SET for a parameter sluice acts on; Ok(false) if it is not one of
    /// those (the caller then just records the value).
    pub fn set_param(&mut self, name: &str, value: &str) -> Result<bool, String> {
        let int = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| "argument couldn't be parsed into an integer".to_string())
        };
        let mem =
            |v: &str| parse_memory(v).ok_or_else(|| "argument must be a memory value".to_string());
        if name != "replicaof" && name != "slaveof" && self.repl.set(name, &[value])? {
            return Ok(true);
        }
        match name {
            "maxclients" => self.maxclients = int(value)?.max(1) as usize,
            "zset-max-listpack-entries" | "zset-max-ziplist-entries" => {
                self.zset_max_listpack_entries = usize::try_from(int(value)?).unwrap_or(usize::MAX)
            }
            "zset-max-listpack-value" | "zset-max-ziplist-value" => {
                self.zset_max_listpack_value = mem(value)?
            }
            "hash-max-listpack-entries" | "hash-max-ziplist-entries" => {
                self.hash_max_listpack_entries = usize::try_from(int(value)?).unwrap_or(usize::MAX)
            }
            "hash-max-listpack-value" | "hash-max-ziplist-value" => {
                self.hash_max_listpack_value = mem(value)?
            }
            "timeout" => self.timeout = int(value)?,
            "busy-reply-threshold" | "lua-time-limit" => self.busy_reply_threshold = int(value)?,
            "lua-script-locking" => {
                self.lua_script_global = match value.to_ascii_lowercase().as_str() {
                    "declared" => false,
                    "global" => true,
                    _ => {
                        return Err(
                            "argument(s) must be one of the following: declared, global".into()
                        );
                    }
                }
            }
            "slowlog-log-slower-than" => {
                self.slowlog_log_slower_than = value
                    .parse::<i64>()
                    .ok()
                    .filter(|v| *v >= -1)
                    .ok_or("argument must be between -1 and 9223372036854775807 inclusive")?
            }
            "slowlog-max-len" => self.slowlog_max_len = int(value)?,
            "latency-monitor-threshold" => self.latency_monitor_threshold = int(value)?,
            "latency-tracking" => {
                self.latency_tracking = match value.to_ascii_lowercase().as_str() {
                    "yes" => true,
                    "no" => false,
                    _ => return Err("argument must be 'yes' or 'no'".into()),
                }
            }
            "proto-max-bulk-len" => self.proto_max_bulk_len = mem(value)?,
            "client-query-buffer-limit" => self.client_query_buffer_limit = mem(value)?,
            "loglevel" => {
                let v = value.to_ascii_lowercase();
                if !matches!(
                    v.as_str(),
                    "debug" | "verbose" | "notice" | "warning" | "nothing"
                ) {
                    return Err("argument(s) must be one of the following: debug, verbose, notice, warning, nothing".into());
                }
                self.loglevel = v;
            }
            "requirepass" => self.requirepass = Some(value.to_string()).filter(|p| !p.is_empty()),
            "protected-mode" => {
                self.protected_mode = match value.to_ascii_lowercase().as_str() {
                    "yes" => true,
                    "no" => false,
                    _ => return Err("argument must be 'yes' or 'no'".into()),
                }
            }
            "maxmemory" => self.maxmemory = mem(value)?,
            "maxmemory-policy" => self.maxmemory_policy = EvictionPolicy::parse(value)?,
            "maxmemory-samples" => {
                let n = int(value)?;
                if !(1..=i32::MAX as u64).contains(&n) {
                    return Err("argument must be between 1 and 2147483647 inclusive".into());
                }
                self.maxmemory_samples = n as usize;
            }
            "client-output-buffer-limit" => self.set_output_buffer_limit(value)?,
            "save" => self.save = parse_save(value)?,
            "stop-writes-on-bgsave-error" => {
                self.stop_writes_on_bgsave_error = match value.to_ascii_lowercase().as_str() {
                    "yes" => true,
                    "no" => false,
                    _ => return Err("argument must be 'yes' or 'no'".into()),
                }
            }
            "dir" | "dbfilename" => return Err("can't set protected config".into()),
            "notify-keyspace-events" => {
                self.notify_keyspace_events =
                    keyspace_events::parse(value).ok_or(keyspace_events::INVALID)?
            }
            "port"
            | "bind"
            | "databases"
            | "tls-port"
            | "tls-cert-file"
            | "tls-key-file"
            | "cluster-enabled"
            | "cluster-config-file"
            | "pidfile"
            | "logfile"
            | "unixsocket"
            | "unixsocketperm"
            | "supervised"
            | "daemonize" => {
                return Err("can't set immutable config".into());
            }
            _ => return Ok(false),
        }
        Ok(true)
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
        c.apply("threads", &["1025".into()]).unwrap();
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
    /// The backend named `name` (epoll, uring or auto; any case).
    pub fn parse(name: &str) -> Result<IoBackend, String> {
        match name.to_ascii_lowercase().as_str() {
            "loop" => Ok(IoBackend::Loop),
            "epoll" | "tokio" => Ok(IoBackend::Epoll),
            "uring" | "io_uring" | "io-uring" => Ok(IoBackend::Uring),
            "auto" => Ok(IoBackend::Auto),
            _ => Err(format!("'{name}' is not one of loop, epoll, uring, auto")),
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

/// The settings read on every command or write, in atomics, so the hot path neither clones
/// the `Config` nor takes its lock. Whoever changes the `Config` calls `store`.
#[derive(Debug, Default)]
pub struct LiveSettings {
    maxmemory: AtomicUsize,
    policy: AtomicU8,
    samples: AtomicUsize,
    obuf_hard: AtomicUsize,
    obuf_soft: AtomicUsize,
    obuf_soft_seconds: AtomicU64,
    pubsub_hard: AtomicUsize,
    pubsub_soft: AtomicUsize,
    pubsub_soft_seconds: AtomicU64,
    timeout: AtomicU64,
    zset_entries: AtomicUsize,
    zset_value: AtomicUsize,
    hash_entries: AtomicUsize,
    hash_value: AtomicUsize,
    slowlog_slower_than: std::sync::atomic::AtomicI64,
    slowlog_max_len: AtomicU64,
    latency_threshold_ms: AtomicU64,
    latency_tracking: std::sync::atomic::AtomicBool,
    notify: std::sync::atomic::AtomicU32,
    script_global: std::sync::atomic::AtomicBool,
}

impl LiveSettings {
    /// Settings taken from `config`.
    pub fn new(config: &Config) -> Self {
        let live = LiveSettings::default();
        live.store(config);
        live
    }

    /// Publishes `config`'s values.
    pub fn store(&self, config: &Config) {
        self.maxmemory.store(config.maxmemory, Ordering::Relaxed);
        self.policy
            .store(config.maxmemory_policy as u8, Ordering::Relaxed);
        self.samples
            .store(config.maxmemory_samples, Ordering::Relaxed);
        let l = config.output_buffer_limit;
        self.obuf_hard.store(l.hard, Ordering::Relaxed);
        self.obuf_soft.store(l.soft, Ordering::Relaxed);
        self.obuf_soft_seconds
            .store(l.soft_seconds, Ordering::Relaxed);
        let p = config.pubsub_buffer_limit;
        self.pubsub_hard.store(p.hard, Ordering::Relaxed);
        self.pubsub_soft.store(p.soft, Ordering::Relaxed);
        self.pubsub_soft_seconds
            .store(p.soft_seconds, Ordering::Relaxed);
        self.timeout.store(config.timeout, Ordering::Relaxed);
        self.zset_entries
            .store(config.zset_max_listpack_entries, Ordering::Relaxed);
        self.zset_value
            .store(config.zset_max_listpack_value, Ordering::Relaxed);
        self.hash_entries
            .store(config.hash_max_listpack_entries, Ordering::Relaxed);
        self.hash_value
            .store(config.hash_max_listpack_value, Ordering::Relaxed);
        self.slowlog_slower_than
            .store(config.slowlog_log_slower_than, Ordering::Relaxed);
        self.slowlog_max_len
            .store(config.slowlog_max_len, Ordering::Relaxed);
        self.latency_threshold_ms
            .store(config.latency_monitor_threshold, Ordering::Relaxed);
        self.latency_tracking
            .store(config.latency_tracking, Ordering::Relaxed);
        self.notify
            .store(config.notify_keyspace_events, Ordering::Relaxed);
        self.script_global
            .store(config.lua_script_global, Ordering::Relaxed);
    }

    /// `lua-script-locking global`: scripts lock the whole keyspace.
    pub fn scripts_lock_all(&self) -> bool {
        self.script_global.load(Ordering::Relaxed)
    }

    /// `hash-max-listpack-entries` and `hash-max-listpack-value`.
    pub fn hash_listpack_limits(&self) -> (usize, usize) {
        (
            self.hash_entries.load(Ordering::Relaxed),
            self.hash_value.load(Ordering::Relaxed),
        )
    }

    /// `slowlog-log-slower-than` (µs; negative: SLOWLOG off) and `slowlog-max-len`.
    pub fn slowlog(&self) -> (i64, u64) {
        (
            self.slowlog_slower_than.load(Ordering::Relaxed),
            self.slowlog_max_len.load(Ordering::Relaxed),
        )
    }

    /// `latency-monitor-threshold` in ms (0: LATENCY records nothing).
    pub fn latency_threshold_ms(&self) -> u64 {
        self.latency_threshold_ms.load(Ordering::Relaxed)
    }

    /// `latency-tracking`: INFO latencystats' histograms are kept.
    pub fn latency_tracking(&self) -> bool {
        self.latency_tracking.load(Ordering::Relaxed)
    }

    /// The `notify-keyspace-events` classes ([`keyspace_events`] bits; 0: off). Read once per
    /// command, so a command with notifications off pays one relaxed load.
    pub fn notify_keyspace_events(&self) -> u32 {
        self.notify.load(Ordering::Relaxed)
    }

    /// `zset-max-listpack-entries` and `zset-max-listpack-value`.
    pub fn zset_listpack_limits(&self) -> (usize, usize) {
        (
            self.zset_entries.load(Ordering::Relaxed),
            self.zset_value.load(Ordering::Relaxed),
        )
    }

    /// The pubsub class of client-output-buffer-limit.
    pub fn pubsub_buffer_limit(&self) -> OutputBufferLimit {
        OutputBufferLimit {
            hard: self.pubsub_hard.load(Ordering::Relaxed),
            soft: self.pubsub_soft.load(Ordering::Relaxed),
            soft_seconds: self.pubsub_soft_seconds.load(Ordering::Relaxed),
        }
    }

    /// maxmemory in bytes (0: no cap).
    pub fn maxmemory(&self) -> usize {
        self.maxmemory.load(Ordering::Relaxed)
    }

    /// The eviction policy.
    pub fn policy(&self) -> EvictionPolicy {
        EvictionPolicy::from_u8(self.policy.load(Ordering::Relaxed))
    }

    /// Keys sampled per eviction (Redis allows up to 2^31 - 1; more than 64 buys nothing
    /// but lock time, so sluice samples at most 64).
    pub fn samples(&self) -> usize {
        self.samples.load(Ordering::Relaxed).clamp(1, 64)
    }

    /// The normal class of client-output-buffer-limit.
    pub fn output_buffer_limit(&self) -> OutputBufferLimit {
        OutputBufferLimit {
            hard: self.obuf_hard.load(Ordering::Relaxed),
            soft: self.obuf_soft.load(Ordering::Relaxed),
            soft_seconds: self.obuf_soft_seconds.load(Ordering::Relaxed),
        }
    }

    /// The idle timeout in seconds (0: none).
    pub fn timeout(&self) -> u64 {
        self.timeout.load(Ordering::Relaxed)
    }
}

/// `notify-keyspace-events`: the class bits and Redis 7.0's letters for them.
pub mod keyspace_events {
    /// `g`: generic commands (DEL, EXPIRE, RENAME…).
    pub const GENERIC: u32 = 1 << 2;
    /// `$`: string commands.
    pub const STRING: u32 = 1 << 3;
    /// `l`: list commands.
    pub const LIST: u32 = 1 << 4;
    /// `s`: set commands.
    pub const SET: u32 = 1 << 5;
    /// `h`: hash commands.
    pub const HASH: u32 = 1 << 6;
    /// `z`: sorted set commands.
    pub const ZSET: u32 = 1 << 7;
    /// `x`: a key expired (lazily or by the reaper).
    pub const EXPIRED: u32 = 1 << 8;
    /// `e`: a key was evicted by maxmemory.
    pub const EVICTED: u32 = 1 << 9;
    /// `t`: stream commands (sluice has none; accepted for compatibility).
    pub const STREAM: u32 = 1 << 10;
    /// `m`: a read found no key.
    pub const KEY_MISS: u32 = 1 << 11;
    /// `d`: module events (sluice has none; accepted for compatibility).
    pub const MODULE: u32 = 1 << 12;
    /// `n`: a key was created.
    pub const NEW: u32 = 1 << 13;
    /// `K`: publish on `__keyspace@<db>__:<key>`.
    pub const KEYSPACE: u32 = 1 << 0;
    /// `E`: publish on `__keyevent@<db>__:<event>`.
    pub const KEYEVENT: u32 = 1 << 1;
    /// `A`: every class but `m` and `n`, as in Redis.
    pub const ALL: u32 =
        GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

    /// Redis's reason for a value with a letter that names no class.
    pub const INVALID: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

    /// The class bits of a `notify-keyspace-events` value; None if a character names no
    /// class (Redis's `keyspaceEventsStringToFlags`: repeats are fine, order is free).
    pub fn parse(classes: &str) -> Option<u32> {
        classes.bytes().try_fold(0, |flags, c| {
            Some(
                flags
                    | match c {
                        b'A' => ALL,
                        b'g' => GENERIC,
                        b'$' => STRING,
                        b'l' => LIST,
                        b's' => SET,
                        b'h' => HASH,
                        b'z' => ZSET,
                        b'x' => EXPIRED,
                        b'e' => EVICTED,
                        b'K' => KEYSPACE,
                        b'E' => KEYEVENT,
                        b't' => STREAM,
                        b'm' => KEY_MISS,
                        b'd' => MODULE,
                        b'n' => NEW,
                        _ => return None,
                    },
            )
        })
    }

    /// The normalised letters CONFIG GET shows (Redis's `keyspaceEventsFlagsToString`: `A`
    /// stands for all its classes, and then `n` is not shown even when set).
    pub fn format(flags: u32) -> String {
        let mut out = String::new();
        if flags & ALL == ALL {
            out.push('A');
        } else {
            for (bit, c) in [
                (GENERIC, 'g'),
                (STRING, '$'),
                (LIST, 'l'),
                (SET, 's'),
                (HASH, 'h'),
                (ZSET, 'z'),
                (EXPIRED, 'x'),
                (EVICTED, 'e'),
                (STREAM, 't'),
                (MODULE, 'd'),
                (NEW, 'n'),
            ] {
                if flags & bit != 0 {
                    out.push(c);
                }
            }
        }
        for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
            if flags & bit != 0 {
                out.push(c);
            }
        }
        out
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn letters_round_trip_as_redis_normalises_them() {
            for (given, shown) in [
                ("", ""),
                ("KEA", "AKE"),
                ("EKnmg$lshzxetd", "AKEm"),
                ("ggK", "gK"),
                ("K", "K"),
                ("Exn", "xnE"),
                ("mzhsl$gK", "g$lshzKm"),
            ] {
                assert_eq!(parse(given).map(format).as_deref(), Some(shown), "{given}");
            }
            assert_eq!(parse("KEA "), None);
            assert_eq!(parse("xyz"), None);
            assert_eq!(parse("a"), None);
        }
    }
}
