//! The table of configuration parameters: one row per setting, with Redis 7.0.15's name,
//! alias, type and bounds, default, whether CONFIG SET may change it (immutable, protected),
//! whether CONFIG GET/SET know it at all, and what sluice does with it.
//!
//! Every value, whether it comes from a conf file, the command line or CONFIG SET, is
//! checked here against its row's type with Redis's error texts before anything stores it
//! ([`Param::check`]), so nothing unchecked reaches the running configuration or a
//! rewritten config file. Strings are the one type that may hold anything; they are kept
//! free of control characters (passwords excepted, as Redis keeps them) and CONFIG REWRITE
//! always writes them quoted.

use super::{EvictionPolicy, IoBackend, keyspace_events, memtoull, parse_save};

/// How a value is checked (Redis 7.0's config types).
#[derive(Debug, Clone, Copy)]
pub enum Type {
    /// `yes` or `no`, any case.
    Bool,
    /// An integer (Redis's strict `string2ll`) in `min..=max`.
    Int(i128, i128),
    /// A memory size (`memtoull`: digits and an optional unit) in `min..=max`.
    Mem(i128, i128),
    /// A memory size, or a percentage of `maxmemory` up to 100 (`maxmemory-clients`).
    MemOrPercent,
    /// Octal permission bits up to the given value (`unixsocketperm`).
    Octal(u32),
    /// One of these names, any case (shown lowercase).
    Enum(&'static [&'static str]),
    /// Text without control characters.
    Str,
    /// Any bytes (a password): never shown in messages.
    Secret,
    /// Checked (and normalised) by its own function.
    Special(fn(&str) -> Result<String, String>),
}

/// What sluice does with a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Acted on: the value goes into `Config`.
    Acts,
    /// Accepted with a warning at start; the text says why it has no effect.
    Inert(&'static str),
    /// These values (lowercase, arguments joined by a space) are what sluice does anyway
    /// and are accepted silently; any other value is refused for the reason given.
    Only(&'static [&'static str], &'static str),
    /// These values are accepted silently; any other is accepted with the warning given.
    Quiet(&'static [&'static str], &'static str),
    /// Refused whatever its value (a file-only directive).
    Refused(&'static str),
}

/// One parameter.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    /// Redis's name (lowercase).
    pub name: &'static str,
    /// Its other name (`slaveof` for `replicaof`), if any.
    pub alias: Option<&'static str>,
    /// How values are checked.
    pub ty: Type,
    /// The default as CONFIG GET shows it (for a parameter sluice acts on, `Config`'s
    /// default is the one that counts).
    pub default: &'static str,
    flags: u8,
    /// What sluice does with it.
    pub effect: Effect,
}

const IMMUTABLE: u8 = 1;
const PROTECTED: u8 = 1 << 1;
const SECRET: u8 = 1 << 2;
const LISTED: u8 = 1 << 3;
const MULTI_ARG: u8 = 1 << 4;
const NULLABLE: u8 = 1 << 5;

const fn p(name: &'static str, ty: Type, default: &'static str) -> Param {
    Param {
        name,
        alias: None,
        ty,
        default,
        flags: 0,
        effect: Effect::Acts,
    }
}

impl Param {
    const fn alias(mut self, alias: &'static str) -> Self {
        self.alias = Some(alias);
        self
    }
    const fn flag(mut self, f: u8) -> Self {
        self.flags |= f;
        self
    }
    const fn immutable(self) -> Self {
        self.flag(IMMUTABLE)
    }
    const fn protected(self) -> Self {
        self.flag(PROTECTED)
    }
    const fn secret(self) -> Self {
        self.flag(SECRET)
    }
    const fn listed(self) -> Self {
        self.flag(LISTED)
    }
    const fn multi_arg(self) -> Self {
        self.flag(MULTI_ARG)
    }
    const fn nullable(self) -> Self {
        self.flag(NULLABLE)
    }
    const fn inert(mut self, why: &'static str) -> Self {
        self.effect = Effect::Inert(why);
        self
    }
    const fn only(mut self, ok: &'static [&'static str], why: &'static str) -> Self {
        self.effect = Effect::Only(ok, why);
        self
    }
    const fn quiet(mut self, ok: &'static [&'static str], why: &'static str) -> Self {
        self.effect = Effect::Quiet(ok, why);
        self
    }
    const fn refused(mut self, why: &'static str) -> Self {
        self.effect = Effect::Refused(why);
        self
    }

    /// CONFIG SET refuses it with `can't set immutable config`.
    pub fn is_immutable(&self) -> bool {
        self.flags & IMMUTABLE != 0
    }
    /// CONFIG SET may change it only as `enable-protected-configs` allows.
    pub fn is_protected(&self) -> bool {
        self.flags & PROTECTED != 0
    }
    /// Its value is hidden from messages (a password).
    pub fn is_secret(&self) -> bool {
        self.flags & SECRET != 0
    }
    /// CONFIG GET and CONFIG SET know it (under its name and its alias).
    pub fn is_listed(&self) -> bool {
        self.flags & LISTED != 0
    }
    /// A config file line may give it several words (`save 900 1`, `bind a b`).
    pub fn takes_several_words(&self) -> bool {
        self.flags & MULTI_ARG != 0
    }
    /// An empty string means "not set": CONFIG REWRITE then writes no line for it.
    pub fn empty_is_unset(&self) -> bool {
        self.flags & NULLABLE != 0
    }
    /// Its value is a string CONFIG REWRITE writes quoted.
    pub fn is_string(&self) -> bool {
        matches!(self.ty, Type::Str | Type::Secret)
    }

    /// Checks a value (a conf line's words joined by one space, or CONFIG SET's argument)
    /// against the row's type with Redis 7.0's texts, and returns it as CONFIG GET will show
    /// it (numbers normalised, names lowercase).
    pub fn check(&self, value: &str) -> Result<String, String> {
        let range = |n: i128, min: i128, max: i128| {
            if (min..=max).contains(&n) {
                Ok(n.to_string())
            } else {
                Err(format!(
                    "argument must be between {min} and {max} inclusive"
                ))
            }
        };
        match self.ty {
            Type::Bool => match value.to_ascii_lowercase().as_str() {
                v @ ("yes" | "no") => Ok(v.to_string()),
                _ => Err("argument must be 'yes' or 'no'".into()),
            },
            Type::Int(min, max) => {
                let n = crate::num::parse_i64(value.as_bytes())
                    .ok_or("argument couldn't be parsed into an integer")?;
                let shown = range(i128::from(n), min, max)?;
                // Redis stores `hz` clamped to what its timer can do.
                if self.name == "hz" {
                    return Ok(n.clamp(1, 500).to_string());
                }
                Ok(shown)
            }
            Type::Mem(min, max) => {
                let n = memtoull(value).ok_or("argument must be a memory value")?;
                range(i128::from(n), min, max)
            }
            Type::MemOrPercent => {
                if let Some(pct) = value.strip_suffix('%') {
                    let n = crate::num::parse_i64(pct.as_bytes())
                        .filter(|n| *n >= 0)
                        .ok_or("argument must be a memory or percent value")?;
                    if n > 100 {
                        return Err("percentage argument must be less or equal to 100".into());
                    }
                    return Ok(format!("{n}%"));
                }
                let n = memtoull(value).ok_or("argument must be a memory or percent value")?;
                range(i128::from(n), 0, i128::from(i64::MAX))
            }
            Type::Octal(max) => u32::from_str_radix(value, 8)
                .ok()
                .filter(|n| *n <= max)
                .map(|n| n.to_string())
                .ok_or_else(|| format!("argument must be between 0 and {max:o} inclusive")),
            Type::Enum(names) => {
                let words: Vec<String> = value.split(' ').map(|w| w.to_ascii_lowercase()).collect();
                let one_word = words.len() == 1 || !self.takes_several_words();
                if (one_word && words.len() != 1)
                    || words.iter().any(|w| !names.contains(&w.as_str()))
                {
                    return Err(format!(
                        "argument(s) must be one of the following: {}",
                        names.join(", ")
                    ));
                }
                Ok(words.join(" "))
            }
            Type::Str => {
                check::text(value)?;
                Ok(value.to_string())
            }
            Type::Secret => Ok(value.to_string()),
            Type::Special(f) => f(value),
        }
    }
}

/// The values `enable-protected-configs`, `enable-debug-command` and
/// `enable-module-command` take.
pub const PROTECTED_ACTION: &[&str] = &["no", "yes", "local"];

const PERSIST: &str = "sluice writes RDB snapshots only, no AOF";
const REPL: &str = "sluice's replication does not have this knob";
const ENCODING: &str = "sluice chooses its own in-memory encodings";
const CLUSTER_BUS: &str = "sluice's cluster mode has no cluster bus (a static slot map)";
const TUNING: &str = "sluice has no such internal tuning knob";
const TLS_OPT: &str = "sluice's TLS (rustls) uses its own safe defaults";
const NO_EFFECT: &str = "not implemented by sluice; accepted for compatibility";

const INT_MIN: i128 = i32::MIN as i128;
const INT_MAX: i128 = i32::MAX as i128;
const UINT_MAX: i128 = u32::MAX as i128;
const LONG_MAX: i128 = i64::MAX as i128;
const ULLONG_MAX: i128 = u64::MAX as i128;

use Type::*;

/// Every parameter of Redis 7.0.15 (in its `config.c` order), then sluice's own and the
/// file-only directives sluice refuses.
pub static PARAMS: &[Param] = &[
    p("rdbchecksum", Bool, "yes").immutable().listed(),
    p("daemonize", Bool, "no").immutable().listed(),
    p("io-threads-do-reads", Bool, "no")
        .immutable()
        .inert("sluice sizes its own worker threads"),
    p("always-show-logo", Bool, "no")
        .immutable()
        .listed()
        .inert("sluice prints no logo"),
    p("protected-mode", Bool, "yes").listed(),
    p("rdbcompression", Bool, "yes")
        .listed()
        .inert("sluice writes RDB strings uncompressed (Redis loads them either way)"),
    p("rdb-del-sync-files", Bool, "no").inert(REPL),
    p("activerehashing", Bool, "yes").listed().inert(TUNING),
    p("stop-writes-on-bgsave-error", Bool, "yes").listed(),
    p("set-proc-title", Bool, "yes")
        .immutable()
        .inert("sluice does not change its process title"),
    p("dynamic-hz", Bool, "yes").inert("sluice's expiry reaper has its own schedule"),
    p("lazyfree-lazy-eviction", Bool, "no")
        .listed()
        .inert(TUNING),
    p("lazyfree-lazy-expire", Bool, "no").listed().inert(TUNING),
    p("lazyfree-lazy-server-del", Bool, "no")
        .listed()
        .inert(TUNING),
    p("lazyfree-lazy-user-del", Bool, "no")
        .listed()
        .inert(TUNING),
    p("lazyfree-lazy-user-flush", Bool, "no")
        .listed()
        .inert(TUNING),
    p("repl-disable-tcp-nodelay", Bool, "no").inert(REPL),
    p("repl-diskless-sync", Bool, "yes").inert(REPL),
    p("aof-rewrite-incremental-fsync", Bool, "yes").inert(PERSIST),
    p("no-appendfsync-on-rewrite", Bool, "no").inert(PERSIST),
    p("cluster-require-full-coverage", Bool, "yes").inert(CLUSTER_BUS),
    p("rdb-save-incremental-fsync", Bool, "yes")
        .inert("sluice syncs an RDB file once, when it is complete"),
    p("aof-load-truncated", Bool, "yes").inert(PERSIST),
    p("aof-use-rdb-preamble", Bool, "yes").inert(PERSIST),
    p("aof-timestamp-enabled", Bool, "no").inert(PERSIST),
    p("cluster-replica-no-failover", Bool, "no")
        .alias("cluster-slave-no-failover")
        .inert(CLUSTER_BUS),
    p("replica-lazy-flush", Bool, "no")
        .alias("slave-lazy-flush")
        .inert(REPL),
    p("replica-serve-stale-data", Bool, "yes")
        .alias("slave-serve-stale-data")
        .inert(REPL),
    p("replica-read-only", Bool, "yes")
        .alias("slave-read-only")
        .listed(),
    p("replica-ignore-maxmemory", Bool, "yes")
        .alias("slave-ignore-maxmemory")
        .inert(REPL),
    p("jemalloc-bg-thread", Bool, "yes").inert(TUNING),
    p("activedefrag", Bool, "no").listed().inert(TUNING),
    p("syslog-enabled", Bool, "no").immutable().only(
        &["no"],
        "sluice logs to standard error or logfile, not syslog",
    ),
    p("cluster-enabled", Bool, "no").immutable().listed(),
    p("appendonly", Bool, "no").listed().only(
        &["no"],
        "sluice has no append-only file: state is lost at restart",
    ),
    p("cluster-allow-reads-when-down", Bool, "no").inert(CLUSTER_BUS),
    p("cluster-allow-pubsubshard-when-down", Bool, "yes").inert(CLUSTER_BUS),
    p("crash-log-enabled", Bool, "yes").inert(NO_EFFECT),
    p("crash-memcheck-enabled", Bool, "yes").inert(NO_EFFECT),
    p("disable-thp", Bool, "yes").immutable().inert(TUNING),
    p("cluster-allow-replica-migration", Bool, "yes").inert(CLUSTER_BUS),
    p("replica-announced", Bool, "yes").listed(),
    p("latency-tracking", Bool, "yes").listed(),
    p("aof-disable-auto-gc", Bool, "no").inert(PERSIST),
    p("replica-ignore-disk-write-errors", Bool, "no").inert(REPL),
    p("aclfile", Str, "").immutable().only(
        &[""],
        "sluice has only the default user (use requirepass), no ACL file",
    ),
    p("unixsocket", Str, "").immutable().nullable().listed(),
    p("pidfile", Str, "").immutable().nullable().listed(),
    p("replica-announce-ip", Str, "")
        .alias("slave-announce-ip")
        .nullable()
        .listed(),
    p("masteruser", Secret, "").secret().nullable().listed(),
    p("cluster-announce-ip", Str, "")
        .nullable()
        .inert(CLUSTER_BUS),
    p("cluster-config-file", Str, "").immutable().listed(),
    p("cluster-announce-hostname", Str, "")
        .nullable()
        .inert(CLUSTER_BUS),
    p("syslog-ident", Str, "redis")
        .immutable()
        .inert("sluice does not log to syslog"),
    p("dbfilename", Str, "dump.rdb").protected().listed(),
    p("appendfilename", Str, "appendonly.aof")
        .immutable()
        .listed()
        .inert(PERSIST),
    p("appenddirname", Str, "appendonlydir")
        .immutable()
        .listed()
        .inert(PERSIST),
    p("server_cpulist", Str, "")
        .immutable()
        .nullable()
        .inert(TUNING),
    p("bio_cpulist", Str, "")
        .immutable()
        .nullable()
        .inert(TUNING),
    p("aof_rewrite_cpulist", Str, "")
        .immutable()
        .nullable()
        .inert(TUNING),
    p("bgsave_cpulist", Str, "")
        .immutable()
        .nullable()
        .inert(TUNING),
    p("ignore-warnings", Str, "").inert(NO_EFFECT),
    p(
        "proc-title-template",
        Str,
        "{title} {listen-addr} {server-mode}",
    )
    .inert("sluice does not change its process title"),
    p("bind-source-addr", Str, "").nullable().inert(REPL),
    p("logfile", Str, "").immutable().listed(),
    p("masterauth", Secret, "").secret().nullable().listed(),
    p("requirepass", Secret, "").secret().nullable().listed(),
    p(
        "supervised",
        Enum(&["upstart", "systemd", "auto", "no"]),
        "no",
    )
    .immutable()
    .listed(),
    p(
        "syslog-facility",
        Enum(&[
            "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
        ]),
        "local0",
    )
    .immutable()
    .inert("sluice does not log to syslog"),
    p(
        "repl-diskless-load",
        Enum(&["disabled", "on-empty-db", "swapdb"]),
        "disabled",
    )
    .inert(REPL),
    p("loglevel", Special(check::loglevel), "notice").listed(),
    p(
        "maxmemory-policy",
        Special(check::maxmemory_policy),
        "noeviction",
    )
    .listed(),
    p(
        "appendfsync",
        Enum(&["everysec", "always", "no"]),
        "everysec",
    )
    .listed()
    .inert(PERSIST),
    p(
        "oom-score-adj",
        Enum(&["no", "yes", "relative", "absolute"]),
        "no",
    )
    .quiet(&["no"], "sluice does not adjust its OOM score"),
    p(
        "acl-pubsub-default",
        Enum(&["allchannels", "resetchannels"]),
        "resetchannels",
    )
    .inert("sluice has no pub/sub"),
    p(
        "sanitize-dump-payload",
        Enum(&["no", "yes", "clients"]),
        "no",
    )
    .inert("sluice has no DUMP/RESTORE"),
    p("enable-protected-configs", Enum(PROTECTED_ACTION), "no")
        .immutable()
        .listed(),
    p("enable-debug-command", Enum(PROTECTED_ACTION), "no")
        .immutable()
        .listed(),
    p("enable-module-command", Enum(PROTECTED_ACTION), "no")
        .immutable()
        .listed()
        .inert("sluice has no MODULE command"),
    p(
        "cluster-preferred-endpoint-type",
        Enum(&["ip", "hostname", "unknown-endpoint"]),
        "ip",
    )
    .inert(CLUSTER_BUS),
    p(
        "propagation-error-behavior",
        Enum(&["ignore", "panic", "panic-on-replicas"]),
        "ignore",
    )
    .inert(REPL),
    p(
        "shutdown-on-sigint",
        Enum(&["default", "save", "nosave", "now", "force"]),
        "default",
    )
    .multi_arg()
    .inert("sluice always shuts down cleanly on SIGINT"),
    p(
        "shutdown-on-sigterm",
        Enum(&["default", "save", "nosave", "now", "force"]),
        "default",
    )
    .multi_arg()
    .inert("sluice always shuts down cleanly on SIGTERM"),
    p("databases", Int(1, INT_MAX), "16").immutable().listed(),
    p("port", Int(0, 65535), "6379").listed(),
    p("io-threads", Int(1, 128), "1")
        .immutable()
        .listed()
        .inert("sluice sizes its own worker threads"),
    p("auto-aof-rewrite-percentage", Int(0, INT_MAX), "100").inert(PERSIST),
    p("cluster-replica-validity-factor", Int(0, INT_MAX), "10")
        .alias("cluster-slave-validity-factor")
        .inert(CLUSTER_BUS),
    p("list-max-listpack-size", Int(INT_MIN, INT_MAX), "-2")
        .alias("list-max-ziplist-size")
        .listed()
        .inert(ENCODING),
    p("tcp-keepalive", Int(0, INT_MAX), "300")
        .listed()
        .inert("sluice does not set TCP keepalive"),
    p("cluster-migration-barrier", Int(0, INT_MAX), "1").inert(CLUSTER_BUS),
    p("active-defrag-cycle-min", Int(1, 99), "1").inert(TUNING),
    p("active-defrag-cycle-max", Int(1, 99), "25").inert(TUNING),
    p("active-defrag-threshold-lower", Int(0, 1000), "10").inert(TUNING),
    p("active-defrag-threshold-upper", Int(0, 1000), "100").inert(TUNING),
    p("lfu-log-factor", Int(0, INT_MAX), "10").inert("sluice has no LFU policies"),
    p("lfu-decay-time", Int(0, INT_MAX), "1").inert("sluice has no LFU policies"),
    p("replica-priority", Int(0, INT_MAX), "100")
        .alias("slave-priority")
        .listed(),
    p("repl-diskless-sync-delay", Int(0, INT_MAX), "5").inert(REPL),
    p("maxmemory-samples", Int(1, INT_MAX), "5").listed(),
    p("maxmemory-eviction-tenacity", Int(0, 100), "10").inert(TUNING),
    p("timeout", Int(0, INT_MAX), "0").listed(),
    p("replica-announce-port", Int(0, 65535), "0")
        .alias("slave-announce-port")
        .listed(),
    p("tcp-backlog", Int(0, INT_MAX), "511")
        .immutable()
        .listed()
        .inert("sluice uses the runtime's listen backlog"),
    p("cluster-port", Int(0, 65535), "0")
        .immutable()
        .inert(CLUSTER_BUS),
    p("cluster-announce-bus-port", Int(0, 65535), "0").inert(CLUSTER_BUS),
    p("cluster-announce-port", Int(0, 65535), "0").inert(CLUSTER_BUS),
    p("cluster-announce-tls-port", Int(0, 65535), "0").inert(CLUSTER_BUS),
    p("repl-timeout", Int(1, INT_MAX), "60").listed(),
    p("repl-ping-replica-period", Int(1, INT_MAX), "10")
        .alias("repl-ping-slave-period")
        .listed(),
    p("list-compress-depth", Int(0, INT_MAX), "0")
        .listed()
        .inert(ENCODING),
    p("active-expire-effort", Int(1, 10), "1")
        .listed()
        .inert("sluice's expiry reaper has its own schedule"),
    p("hz", Int(0, INT_MAX), "10")
        .listed()
        .inert("sluice's expiry reaper has its own schedule"),
    p("min-replicas-to-write", Int(0, INT_MAX), "0")
        .alias("min-slaves-to-write")
        .only(
            &["0"],
            "sluice has no replicas to count, so it would refuse every write",
        ),
    p("min-replicas-max-lag", Int(0, INT_MAX), "10")
        .alias("min-slaves-max-lag")
        .inert(REPL),
    p("shutdown-timeout", Int(0, INT_MAX), "10")
        .inert("sluice waits at most 5 s for clients at shutdown"),
    p("repl-diskless-sync-max-replicas", Int(0, INT_MAX), "0").inert(REPL),
    p("maxclients", Int(1, UINT_MAX), "10000").listed(),
    p("unixsocketperm", Octal(0o777), "0").immutable().listed(),
    p("socket-mark-id", Int(0, UINT_MAX), "0")
        .immutable()
        .quiet(&["0"], "sluice does not mark its sockets"),
    p("active-defrag-max-scan-fields", Int(1, LONG_MAX), "1000").inert(TUNING),
    p("slowlog-max-len", Int(0, LONG_MAX), "128").listed(),
    p("acllog-max-len", Int(0, LONG_MAX), "128").inert("sluice has no ACL log"),
    p("busy-reply-threshold", Int(0, LONG_MAX), "5000")
        .alias("lua-time-limit")
        .listed(),
    p("cluster-node-timeout", Int(0, LONG_MAX), "15000").inert(CLUSTER_BUS),
    p("slowlog-log-slower-than", Int(-1, LONG_MAX), "10000").listed(),
    p("latency-monitor-threshold", Int(0, LONG_MAX), "0").listed(),
    p(
        "proto-max-bulk-len",
        Mem(1024 * 1024, LONG_MAX),
        "536870912",
    )
    .listed(),
    p("stream-node-max-entries", Int(0, LONG_MAX), "100").inert("sluice has no streams"),
    p("repl-backlog-size", Mem(1, LONG_MAX), "1048576").listed(),
    p("maxmemory", Mem(0, ULLONG_MAX), "0").listed(),
    p("cluster-link-sendbuf-limit", Mem(0, ULLONG_MAX), "0").inert(CLUSTER_BUS),
    p("hash-max-listpack-entries", Int(0, LONG_MAX), "512")
        .alias("hash-max-ziplist-entries")
        .listed()
        .inert(ENCODING),
    p("set-max-intset-entries", Int(0, LONG_MAX), "512")
        .listed()
        .inert(ENCODING),
    p("zset-max-listpack-entries", Int(0, LONG_MAX), "128")
        .alias("zset-max-ziplist-entries")
        .listed()
        .inert(ENCODING),
    p("active-defrag-ignore-bytes", Mem(1, LONG_MAX), "104857600").inert(TUNING),
    p("hash-max-listpack-value", Mem(0, LONG_MAX), "64")
        .alias("hash-max-ziplist-value")
        .listed()
        .inert(ENCODING),
    p("stream-node-max-bytes", Mem(0, LONG_MAX), "4096").inert("sluice has no streams"),
    p("zset-max-listpack-value", Mem(0, LONG_MAX), "64")
        .alias("zset-max-ziplist-value")
        .listed()
        .inert(ENCODING),
    p("hll-sparse-max-bytes", Mem(0, LONG_MAX), "3000").listed(),
    p("tracking-table-max-keys", Int(0, LONG_MAX), "1000000")
        .inert("sluice has no client-side caching"),
    p(
        "client-query-buffer-limit",
        Mem(1024 * 1024, LONG_MAX),
        "1073741824",
    )
    .listed(),
    p("maxmemory-clients", MemOrPercent, "0")
        .listed()
        .only(&["0"], "sluice does not evict clients by their memory"),
    p("repl-backlog-ttl", Int(0, LONG_MAX), "3600").inert(REPL),
    p("auto-aof-rewrite-min-size", Mem(0, LONG_MAX), "67108864").inert(PERSIST),
    p("tls-port", Int(0, 65535), "0").listed(),
    p("tls-session-cache-size", Int(0, INT_MAX), "20480").inert(TLS_OPT),
    p("tls-session-cache-timeout", Int(0, INT_MAX), "300").inert(TLS_OPT),
    p("tls-cluster", Bool, "no").quiet(&["no"], CLUSTER_BUS),
    p("tls-replication", Bool, "no").quiet(&["no"], REPL),
    p("tls-auth-clients", Enum(&["no", "yes", "optional"]), "yes").listed(),
    p("tls-prefer-server-ciphers", Bool, "no").inert(TLS_OPT),
    p("tls-session-caching", Bool, "yes").inert(TLS_OPT),
    p("tls-cert-file", Str, "").nullable().listed(),
    p("tls-key-file", Str, "").nullable().listed(),
    p("tls-key-file-pass", Str, "")
        .nullable()
        .only(&[""], "sluice cannot read an encrypted private key"),
    p("tls-client-cert-file", Str, "").nullable().inert(REPL),
    p("tls-client-key-file", Str, "").nullable().inert(REPL),
    p("tls-client-key-file-pass", Str, "")
        .nullable()
        .inert(REPL),
    p("tls-dh-params-file", Str, "").nullable().inert(TLS_OPT),
    p("tls-ca-cert-file", Str, "")
        .nullable()
        .inert("sluice does not ask clients for certificates"),
    p("tls-ca-cert-dir", Str, "")
        .nullable()
        .inert("sluice does not ask clients for certificates"),
    p("tls-protocols", Str, "").nullable().inert(TLS_OPT),
    p("tls-ciphers", Str, "").nullable().inert(TLS_OPT),
    p("tls-ciphersuites", Str, "").nullable().inert(TLS_OPT),
    p("dir", Str, "/").protected().listed(),
    p("save", Special(check::save), "3600 1 300 100 60 10000")
        .multi_arg()
        .listed(),
    p(
        "client-output-buffer-limit",
        Special(check::output_buffer_limit),
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
    )
    .multi_arg()
    .listed(),
    p(
        "oom-score-adj-values",
        Special(check::oom_score_adj_values),
        "0 200 800",
    )
    .multi_arg()
    .inert("sluice does not adjust its OOM score"),
    p(
        "notify-keyspace-events",
        Special(check::keyspace_events),
        "",
    )
    .listed(),
    p("bind", Special(check::words), "127.0.0.1")
        .multi_arg()
        .listed(),
    p("replicaof", Special(check::replicaof), "")
        .alias("slaveof")
        .immutable()
        .multi_arg()
        .listed(),
    p(
        "latency-tracking-info-percentiles",
        Special(check::percentiles),
        "50 99 99.9",
    )
    .multi_arg()
    .inert("sluice reports the 50th, 99th and 99.9th percentiles"),
    // sluice's own.
    p(
        "lua-script-locking",
        Enum(&["declared", "global"]),
        "declared",
    )
    .listed(),
    p("shards", Int(0, 4096), "0"),
    p("threads", Int(0, super::MAX_THREADS as i128), "0"),
    p("io-backend", Special(check::io_backend), "epoll"),
    p("test-mode", Bool, "no"),
    p("redis-version", Str, "7.0.15"),
    p("resp3", Bool, "yes"),
    p("cluster-node-id", Str, ""),
    // File-only directives that would change what commands do.
    p("rename-command", Special(check::anything), "")
        .multi_arg()
        .refused("sluice cannot rename or disable commands"),
    p("user", Special(check::anything), "")
        .multi_arg()
        .refused("sluice has only the default user (use requirepass), no ACL users"),
    p("loadmodule", Special(check::anything), "")
        .multi_arg()
        .refused("sluice cannot load Redis modules (CL.THROTTLE is built in)"),
];

/// The row named `name` (lowercase), under its name or its alias.
pub fn find(name: &str) -> Option<&'static Param> {
    PARAMS
        .iter()
        .find(|p| p.name == name || p.alias == Some(name))
}

/// The row CONFIG GET/SET know as `name` (any case), under its name or its alias.
pub fn find_listed(name: &str) -> Option<&'static Param> {
    PARAMS.iter().find(|p| {
        p.is_listed()
            && (p.name.eq_ignore_ascii_case(name)
                || p.alias.is_some_and(|a| a.eq_ignore_ascii_case(name)))
    })
}

/// The checks of the `Special` types.
pub mod check {
    use super::*;

    /// Text: no control characters (they would end a config file's line or a reply's).
    pub fn text(value: &str) -> Result<(), String> {
        if value.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return Err("argument must not contain control characters".into());
        }
        Ok(())
    }

    /// File-only directives: checked by whoever reads them.
    pub fn anything(value: &str) -> Result<String, String> {
        Ok(value.to_string())
    }

    /// Words of text (`bind`).
    pub fn words(value: &str) -> Result<String, String> {
        text(value)?;
        Ok(value.to_string())
    }

    /// `save`: pairs of seconds and changes, or `""`.
    pub fn save(value: &str) -> Result<String, String> {
        parse_save(value).map(|points| super::super::format_save(&points))
    }

    /// `client-output-buffer-limit`: `<class> <hard> <soft> <seconds>` repeated.
    pub fn output_buffer_limit(value: &str) -> Result<String, String> {
        let mut c = super::super::Config::default();
        c.set_output_buffer_limit(value)?;
        Ok(value.to_string())
    }

    /// `notify-keyspace-events`: Redis's class letters (kept as given: the normalised
    /// form CONFIG GET shows loses `n` beside `A`).
    pub fn keyspace_events(value: &str) -> Result<String, String> {
        keyspace_events::parse(value)
            .map(|_| value.to_string())
            .ok_or_else(|| keyspace_events::INVALID.to_string())
    }

    /// `replicaof`: `host port` or `no one`.
    pub fn replicaof(value: &str) -> Result<String, String> {
        text(value)?;
        let words: Vec<&str> = value.split(' ').collect();
        match words.as_slice() {
            [h, p] if h.eq_ignore_ascii_case("no") && p.eq_ignore_ascii_case("one") => {
                Ok(String::new())
            }
            [h, p] if !h.is_empty() => {
                let port = crate::num::parse_i64(p.as_bytes())
                    .filter(|n| (0..=65535).contains(n))
                    .ok_or("Invalid master port")?;
                Ok(format!("{h} {port}"))
            }
            _ => Err("wrong number of arguments".into()),
        }
    }

    /// `oom-score-adj-values`: three integers from -2000 to 2000.
    pub fn oom_score_adj_values(value: &str) -> Result<String, String> {
        let words: Vec<&str> = value.split(' ').collect();
        let ok = words.len() == 3
            && words.iter().all(|w| {
                crate::num::parse_i64(w.as_bytes()).is_some_and(|n| (-2000..=2000).contains(&n))
            });
        if !ok {
            return Err("Invalid oom-score-adj-values".into());
        }
        Ok(value.to_string())
    }

    /// `latency-tracking-info-percentiles`: numbers from 0 to 100, or `""`.
    pub fn percentiles(value: &str) -> Result<String, String> {
        if value.is_empty() {
            return Ok(String::new());
        }
        for w in value.split(' ') {
            let ok =
                crate::num::parse_f64(w.as_bytes()).is_some_and(|n| (0.0..=100.0).contains(&n));
            if !ok {
                return Err(
                    "latency-tracking-info-percentiles: percentile must be between 0.0 and 100.0"
                        .into(),
                );
            }
        }
        Ok(value.to_string())
    }

    /// `loglevel`: Redis 7.0's levels, and `nothing` (Redis 7.2's); the error lists 7.0's.
    pub fn loglevel(value: &str) -> Result<String, String> {
        let v = value.to_ascii_lowercase();
        if matches!(
            v.as_str(),
            "debug" | "verbose" | "notice" | "warning" | "nothing"
        ) {
            Ok(v)
        } else {
            Err("argument(s) must be one of the following: debug, verbose, notice, warning".into())
        }
    }

    /// `maxmemory-policy`: the policies sluice has (the LFU ones are refused by name).
    pub fn maxmemory_policy(value: &str) -> Result<String, String> {
        EvictionPolicy::parse(value).map(|p| p.name().to_string())
    }

    /// `io-backend`: epoll, uring or auto.
    pub fn io_backend(value: &str) -> Result<String, String> {
        IoBackend::parse(value).map(|b| b.name().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_and_alias_once() {
        let mut names: Vec<&str> = PARAMS
            .iter()
            .flat_map(|p| std::iter::once(p.name).chain(p.alias))
            .collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
    }

    #[test]
    fn types_refuse_with_redis_texts() {
        let get = |n: &str| find(n).unwrap();
        assert_eq!(
            get("maxmemory-clients").check("0\ndir /tmp"),
            Err("argument must be a memory or percent value".into())
        );
        assert_eq!(
            get("hll-sparse-max-bytes").check("abc"),
            Err("argument must be a memory value".into())
        );
        assert_eq!(get("maxmemory-clients").check("50%"), Ok("50%".into()));
        assert_eq!(
            get("maxmemory-clients").check("101%"),
            Err("percentage argument must be less or equal to 100".into())
        );
        assert_eq!(
            get("port").check("70000"),
            Err("argument must be between 0 and 65535 inclusive".into())
        );
        assert_eq!(get("hz").check("1000"), Ok("500".into()));
        assert_eq!(get("appendonly").check("YES"), Ok("yes".into()));
        assert_eq!(
            get("appendfsync").check("sometimes"),
            Err("argument(s) must be one of the following: everysec, always, no".into())
        );
        assert!(get("replica-announce-ip").check("a\nb").is_err());
        assert_eq!(get("requirepass").check("a\nb"), Ok("a\nb".into()));
        assert_eq!(get("unixsocketperm").check("770"), Ok("504".into()));
        assert_eq!(get("slaveof").name, "replicaof");
        assert_eq!(get("replicaof").check("NO ONE"), Ok("".into()));
        assert!(get("replicaof").check("h\nx 1").is_err());
        assert_eq!(
            get("shutdown-on-sigint").check("save now"),
            Ok("save now".into())
        );
    }
}
