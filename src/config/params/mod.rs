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
//!
//! A row of a parameter sluice acts on also says where its value lives: `get` reads it from
//! the `Config` (CONFIG GET, CONFIG REWRITE), `set` stores a checked value (the conf file,
//! the command line, CONFIG SET), and `help` is its line in `--help`. Adding a parameter is
//! its row here and, if sluice acts on it, its field in `Config`.

use super::{
    Allowed, Config, EvictionPolicy, IoBackend, Supervised, format_save, keyspace_events,
    parse_memory, parse_save,
};

mod row;
pub use row::*;

/// The values `enable-protected-configs`, `enable-debug-command` and
/// `enable-module-command` take.
pub const PROTECTED_ACTION: &[&str] = &["no", "yes", "local"];

const PERSIST: &str = "sluice's append-only file does not have this knob";
const REPL: &str = "sluice's replication does not have this knob";
const ENCODING: &str = "sluice chooses its own in-memory encodings";
const CLUSTER_BUS: &str =
    "sluice's cluster bus does not act on this setting yet (see docs/cluster.md)";
const TUNING: &str = "sluice has no such internal tuning knob";
const TLS_OPT: &str = "sluice's TLS (rustls) uses its own safe defaults";
const DEBUG_KNOB: &str = "a Redis debugging knob sluice has no use for";
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
    p("rdbchecksum", Bool, "yes").immutable().listed()
        .get(|c| yn(c.rdbchecksum))
        .set(|c, v, _| {
            c.rdbchecksum = yes(v);
            Ok(())
        }),
    p("daemonize", Bool, "no").immutable().listed()
        .get(|c| yn(c.daemonize))
        .set(|c, v, _| {
            c.daemonize = yes(v);
            Ok(())
        })
        .help("no", "sluice always runs in the foreground"),
    p("io-threads-do-reads", Bool, "no")
        .immutable()
        .inert("sluice sizes its own worker threads"),
    p("always-show-logo", Bool, "no")
        .immutable()
        .listed()
        .inert("sluice prints no logo"),
    p("protected-mode", Bool, "yes").listed()
        .get(|c| yn(c.protected_mode))
        .set(|c, v, _| {
            c.protected_mode = yes(v);
            Ok(())
        })
        .help("yes|no", "refuse non-loopback clients while no password is set (yes)"),
    p("rdbcompression", Bool, "yes")
        .listed()
        .inert("sluice writes RDB strings uncompressed (Redis loads them either way)"),
    p("rdb-del-sync-files", Bool, "no").inert(REPL),
    p("activerehashing", Bool, "yes").listed().inert(TUNING),
    p("stop-writes-on-bgsave-error", Bool, "yes").listed()
        .get(|c| yn(c.stop_writes_on_bgsave_error))
        .set(|c, v, _| {
            c.stop_writes_on_bgsave_error = yes(v);
            Ok(())
        }),
    p("set-proc-title", Bool, "yes")
        .immutable()
        .inert("sluice does not change its process title"),
    p("dynamic-hz", Bool, "yes").inert("sluice's expiry reaper has its own schedule"),
    p("lazyfree-lazy-eviction", Bool, "no")
        .listed()
        .inert(TUNING),
    p("lazyfree-lazy-expire", Bool, "no").listed().inert(TUNING),
    // Redis's hidden debugging knobs (HIDDEN_CONFIG): known to CONFIG GET by name and to
    // CONFIG SET, never listed by a pattern.
    p("use-exit-on-panic", Bool, "no").listed().hidden().inert(DEBUG_KNOB),
    p("rdb-key-save-delay", Int(INT_MIN, INT_MAX), "0")
        .listed()
        .hidden()
        .inert(DEBUG_KNOB),
    p("key-load-delay", Int(INT_MIN, INT_MAX), "0")
        .listed()
        .hidden()
        .inert(DEBUG_KNOB),
    p("watchdog-period", Int(0, INT_MAX), "0")
        .listed()
        .hidden()
        .inert(DEBUG_KNOB),
    p("loading-process-events-interval-bytes", Int(1024, INT_MAX), "2097152")
        .listed()
        .hidden()
        .inert(DEBUG_KNOB),
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
    p("cluster-require-full-coverage", Bool, "yes").listed()
        .get(|c| yn(c.cluster_require_full_coverage))
        .set(|c, v, _| {
            c.cluster_require_full_coverage = yes(v);
            Ok(())
        }),
    p("rdb-save-incremental-fsync", Bool, "yes")
        .inert("sluice syncs an RDB file once, when it is complete"),
    p("aof-load-truncated", Bool, "yes").listed()
        .get(|c| yn(c.aof.load_truncated))
        .set(|c, v, _| {
            c.aof.load_truncated = yes(v);
            Ok(())
        }),
    p("aof-use-rdb-preamble", Bool, "yes").listed()
        .get(|c| yn(c.aof.use_rdb_preamble))
        .set(|c, v, _| {
            c.aof.use_rdb_preamble = yes(v);
            Ok(())
        }),
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
        .listed()
        .get(|c| yn(c.repl.read_only))
        .set(|c, v, _| {
            c.repl.read_only = yes(v);
            Ok(())
        }),
    p("replica-ignore-maxmemory", Bool, "yes")
        .alias("slave-ignore-maxmemory")
        .inert(REPL),
    p("jemalloc-bg-thread", Bool, "yes").inert(TUNING),
    p("activedefrag", Bool, "no").listed().inert(TUNING),
    p("syslog-enabled", Bool, "no").immutable().only(
        &["no"],
        "sluice logs to standard error or logfile, not syslog",
    ),
    p("cluster-enabled", Bool, "no").immutable().listed()
        .get(|c| yn(c.cluster_enabled))
        .set(|c, v, _| {
            c.cluster_enabled = yes(v);
            Ok(())
        })
        .help("yes", "cluster mode: a node of a Redis Cluster (its state in cluster-config-file, nodes.conf)"),
    p("appendonly", Bool, "no").listed()
        .get(|c| yn(c.aof.enabled))
        .set(|c, v, _| {
            c.aof.enabled = yes(v);
            Ok(())
        })
        .help("yes|no", "log every write to the append-only file in dir/appenddirname"),
    p("cluster-allow-reads-when-down", Bool, "no").listed()
        .get(|c| yn(c.cluster_allow_reads_when_down))
        .set(|c, v, _| {
            c.cluster_allow_reads_when_down = yes(v);
            Ok(())
        }),
    p("cluster-allow-pubsubshard-when-down", Bool, "yes").listed()
        .get(|c| yn(c.cluster_allow_pubsubshard_when_down))
        .set(|c, v, _| {
            c.cluster_allow_pubsubshard_when_down = yes(v);
            Ok(())
        }),
    p("crash-log-enabled", Bool, "yes").inert(NO_EFFECT),
    p("crash-memcheck-enabled", Bool, "yes").inert(NO_EFFECT),
    p("disable-thp", Bool, "yes").immutable().inert(TUNING),
    p("cluster-allow-replica-migration", Bool, "yes").listed()
        .get(|c| yn(c.cluster_allow_replica_migration))
        .set(|c, v, _| {
            c.cluster_allow_replica_migration = yes(v);
            Ok(())
        }),
    p("replica-announced", Bool, "yes").listed()
        .get(|c| yn(c.repl.announced))
        .set(|c, v, _| {
            c.repl.announced = yes(v);
            Ok(())
        }),
    p("latency-tracking", Bool, "yes").listed()
        .get(|c| yn(c.latency_tracking))
        .set(|c, v, _| {
            c.latency_tracking = yes(v);
            Ok(())
        }),
    p("aof-disable-auto-gc", Bool, "no").inert(PERSIST),
    p("replica-ignore-disk-write-errors", Bool, "no").inert(REPL),
    p("aclfile", Str, "").immutable().listed()
        .get(|c| shown(&c.aclfile))
        .set(|c, v, _| {
            c.aclfile = unset_if_empty(v);
            Ok(())
        }),
    p("unixsocket", Str, "").immutable().nullable().listed()
        .get(|c| shown(&c.unixsocket))
        .set(|c, v, _| {
            c.unixsocket = unset_if_empty(v);
            Ok(())
        })
        .help("PATH", "also listen on a Unix socket; --unixsocketperm 700 sets its mode"),
    p("pidfile", Str, "").immutable().nullable().listed()
        .get(|c| shown(&c.pidfile))
        .set(|c, v, _| {
            c.pidfile = unset_if_empty(v);
            Ok(())
        })
        .help("PATH", "write the process id there (removed at exit)"),
    p("replica-announce-ip", Str, "")
        .alias("slave-announce-ip")
        .nullable()
        .listed()
        .get(|c| shown(&c.repl.announce_ip))
        .set(|c, v, _| {
            c.repl.announce_ip = unset_if_empty(v);
            Ok(())
        }),
    p("masteruser", Secret, "").secret().nullable().listed()
        .get(|c| shown(&c.repl.masteruser))
        .set(|c, v, _| {
            c.repl.masteruser = unset_if_empty(v);
            Ok(())
        }),
    p("cluster-announce-ip", Str, "")
        .nullable()
        .get(|c| c.cluster_announce_ip.clone())
        .set(|c, v, _| {
            c.cluster_announce_ip = v.to_string();
            Ok(())
        }),
    p("cluster-config-file", Str, "").immutable().listed()
        .get(|c| shown(&c.cluster_config_file))
        .set(|c, v, _| {
            c.cluster_config_file = unset_if_empty(v);
            Ok(())
        }),
    p("cluster-announce-hostname", Str, "")
        .nullable()
        .get(|c| c.cluster_announce_hostname.clone())
        .set(|c, v, _| {
            c.cluster_announce_hostname = v.to_string();
            Ok(())
        }),
    p("syslog-ident", Str, "redis")
        .immutable()
        .inert("sluice does not log to syslog"),
    p("dbfilename", Str, "dump.rdb").protected().listed()
        .get(|c| c.dbfilename.clone())
        .set(|c, v, _| {
            if v.is_empty() || v.contains('/') {
                return Err("dbfilename can't be a path, just a filename".into());
            }
            c.dbfilename = v.to_string();
            Ok(())
        })
        .help("NAME", "the RDB file's name in dir (default dump.rdb)"),
    p("appendfilename", Str, "appendonly.aof")
        .immutable()
        .listed()
        .get(|c| c.aof.filename.clone())
        .set(|c, v, _| {
            if v.is_empty() || v.contains('/') || v == "." || v == ".." {
                return Err("appendfilename can't be a path, just a filename".into());
            }
            c.aof.filename = v.to_string();
            Ok(())
        }),
    p("appenddirname", Str, "appendonlydir")
        .immutable()
        .listed()
        .get(|c| c.aof.dirname.clone())
        .set(|c, v, _| {
            if v.is_empty() || v.contains('/') || v == "." || v == ".." {
                return Err("appenddirname can't be a path, just a dirname".into());
            }
            c.aof.dirname = v.to_string();
            Ok(())
        }),
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
    p("logfile", Str, "").immutable().listed()
        .get(|c| shown(&c.logfile))
        .set(|c, v, _| {
            c.logfile = unset_if_empty(v);
            Ok(())
        })
        .help("PATH", "log there instead of standard error"),
    p("masterauth", Secret, "").secret().nullable().listed()
        .get(|c| shown(&c.repl.masterauth))
        .set(|c, v, _| {
            c.repl.masterauth = unset_if_empty(v);
            Ok(())
        }),
    p("requirepass", Secret, "").secret().nullable().listed()
        .get(|c| shown(&c.requirepass))
        .set(|c, v, _| {
            c.requirepass = unset_if_empty(v);
            Ok(())
        })
        .help("P", "clients must AUTH"),
    p(
        "supervised",
        Enum(&["upstart", "systemd", "auto", "no"]),
        "no",
    )
    .immutable()
    .listed()
        .get(|c| c.supervised.name().to_string())
        .set(|c, v, _| {
            c.supervised = Supervised::parse(v)?;
            Ok(())
        })
        .help("MODE", "no (default), systemd (sd_notify READY=1/STOPPING=1), auto"),
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
    p("loglevel", Special(check::loglevel), "notice").listed()
        .get(|c| c.loglevel.clone())
        .set(|c, v, _| {
            c.loglevel = v.to_string();
            Ok(())
        })
        .help("L", "debug, verbose, notice (default), warning, nothing"),
    p(
        "maxmemory-policy",
        Special(check::maxmemory_policy),
        "noeviction",
    )
    .listed()
        .get(|c| c.maxmemory_policy.name().to_string())
        .set(|c, v, _| {
            c.maxmemory_policy = EvictionPolicy::parse(v)?;
            Ok(())
        })
        .help("P", "noeviction, allkeys-lru, volatile-lru, allkeys-random,\n                              volatile-random, volatile-ttl"),
    p(
        "appendfsync",
        Enum(&["everysec", "always", "no"]),
        "everysec",
    )
    .listed()
        .get(|c| c.aof.fsync.name().to_string())
        .set(|c, v, _| {
            c.aof.fsync = crate::config::Fsync::parse(v);
            Ok(())
        }),
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
    .listed()
        .get(|c| {
            if c.acl_pubsub_allchannels { "allchannels" } else { "resetchannels" }.to_string()
        })
        .set(|c, v, _| {
            c.acl_pubsub_allchannels = v.eq_ignore_ascii_case("allchannels");
            Ok(())
        }),
    p(
        "sanitize-dump-payload",
        Enum(&["no", "yes", "clients"]),
        "no",
    )
    .inert("sluice has no DUMP/RESTORE"),
    p("enable-protected-configs", Enum(PROTECTED_ACTION), "no")
        .immutable()
        .listed()
        .get(|c| c.enable_protected_configs.name().to_string())
        .set(|c, v, _| {
            c.enable_protected_configs = Allowed::parse(v)?;
            Ok(())
        })
        .help("M", "no (default), yes, local: who may CONFIG SET dir, dbfilename"),
    p("enable-debug-command", Enum(PROTECTED_ACTION), "no")
        .immutable()
        .listed()
        .get(|c| c.debug_command().name().to_string())
        .set(|c, v, _| {
            c.enable_debug_command = Some(Allowed::parse(v)?);
            Ok(())
        })
        .help("M", "no (default; local with --test-mode), yes, local: who may run DEBUG"),
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
    p("databases", Int(1, INT_MAX), "16").immutable().listed()
        .get(|c| c.databases.to_string())
        .set(|c, v, _| {
            c.databases = int(v)?;
            Ok(())
        })
        .help("N", "SELECT 0..N-1 (default 16)"),
    p("port", Int(0, 65535), "6379").listed()
        // CONFIG SET listens on the new port (`server::relisten`).
        .get(|c| c.port.to_string())
        .set(|c, v, _| {
            c.port = int(v)?;
            Ok(())
        })
        .help("N", "TCP port (default 6379; 0 picks a free one and prints it)"),
    p("io-threads", Int(1, 128), "1")
        .immutable()
        .listed()
        .inert("sluice sizes its own worker threads"),
    p("auto-aof-rewrite-percentage", Int(0, INT_MAX), "100").listed()
        .get(|c| c.aof.rewrite_percentage.to_string())
        .set(|c, v, _| {
            c.aof.rewrite_percentage = int(v)?;
            Ok(())
        }),
    p("cluster-replica-validity-factor", Int(0, INT_MAX), "10")
        .alias("cluster-slave-validity-factor")
        .listed()
        .get(|c| c.cluster_replica_validity_factor.to_string())
        .set(|c, v, _| {
            c.cluster_replica_validity_factor = int(v)?;
            Ok(())
        }),
    p("list-max-listpack-size", Int(INT_MIN, INT_MAX), "-2")
        .alias("list-max-ziplist-size")
        .listed()
        .inert(ENCODING),
    p("tcp-keepalive", Int(0, INT_MAX), "300")
        .listed()
        .get(|c| c.tcp_keepalive.to_string())
        .set(|c, v, _| {
            c.tcp_keepalive = int(v)?;
            Ok(())
        })
        .help("S", "TCP keepalive on client connections after this many idle seconds (default 300; 0: off)"),
    p("cluster-migration-barrier", Int(0, INT_MAX), "1").listed()
        .get(|c| c.cluster_migration_barrier.to_string())
        .set(|c, v, _| {
            c.cluster_migration_barrier = int(v)?;
            Ok(())
        }),
    p("active-defrag-cycle-min", Int(1, 99), "1").inert(TUNING),
    p("active-defrag-cycle-max", Int(1, 99), "25").inert(TUNING),
    p("active-defrag-threshold-lower", Int(0, 1000), "10").inert(TUNING),
    p("active-defrag-threshold-upper", Int(0, 1000), "100").inert(TUNING),
    p("lfu-log-factor", Int(0, INT_MAX), "10").inert("sluice has no LFU policies"),
    p("lfu-decay-time", Int(0, INT_MAX), "1").inert("sluice has no LFU policies"),
    p("replica-priority", Int(0, INT_MAX), "100")
        .alias("slave-priority")
        .listed()
        .get(|c| c.repl.priority.to_string())
        .set(|c, v, _| {
            c.repl.priority = int(v)?;
            Ok(())
        }),
    p("repl-diskless-sync-delay", Int(0, INT_MAX), "5").inert(REPL),
    p("maxmemory-samples", Int(1, INT_MAX), "5").listed()
        .get(|c| c.maxmemory_samples.to_string())
        .set(|c, v, _| {
            c.maxmemory_samples = int(v)?;
            Ok(())
        })
        .help("N", "keys sampled per eviction (5)"),
    p("maxmemory-eviction-tenacity", Int(0, 100), "10").inert(TUNING),
    p("timeout", Int(0, INT_MAX), "0").listed()
        .get(|c| c.timeout.to_string())
        .set(|c, v, _| {
            c.timeout = int(v)?;
            Ok(())
        })
        .help("S", "close clients idle this many seconds (default 0: never)"),
    p("replica-announce-port", Int(0, 65535), "0")
        .alias("slave-announce-port")
        .listed()
        .get(|c| c.repl.announce_port.to_string())
        .set(|c, v, _| {
            c.repl.announce_port = int(v)?;
            Ok(())
        }),
    p("tcp-backlog", Int(0, INT_MAX), "511")
        .immutable()
        .listed()
        .inert("sluice uses the runtime's listen backlog"),
    p("cluster-port", Int(0, 65535), "0")
        .immutable()
        .get(|c| c.cluster_port.to_string())
        .set(|c, v, _| {
            c.cluster_port = int(v)?;
            Ok(())
        }),
    p("cluster-announce-bus-port", Int(0, 65535), "0").inert(CLUSTER_BUS),
    p("cluster-announce-port", Int(0, 65535), "0").inert(CLUSTER_BUS),
    p("cluster-announce-tls-port", Int(0, 65535), "0").inert(CLUSTER_BUS),
    p("repl-timeout", Int(1, INT_MAX), "60").listed()
        .get(|c| c.repl.timeout.to_string())
        .set(|c, v, _| {
            c.repl.timeout = int::<u64>(v)?.max(1);
            Ok(())
        }),
    p("repl-ping-replica-period", Int(1, INT_MAX), "10")
        .alias("repl-ping-slave-period")
        .listed()
        .get(|c| c.repl.ping_period.to_string())
        .set(|c, v, _| {
            c.repl.ping_period = int::<u64>(v)?.max(1);
            Ok(())
        }),
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
        .listed()
        .get(|c| c.repl.min_replicas_to_write.to_string())
        .set(|c, v, _| {
            c.repl.min_replicas_to_write = int(v)?;
            Ok(())
        }),
    p("min-replicas-max-lag", Int(0, INT_MAX), "10")
        .alias("min-slaves-max-lag")
        .listed()
        .get(|c| c.repl.min_replicas_max_lag.to_string())
        .set(|c, v, _| {
            c.repl.min_replicas_max_lag = int(v)?;
            Ok(())
        }),
    p("shutdown-timeout", Int(0, INT_MAX), "10")
        .inert("sluice waits at most 5 s for clients at shutdown"),
    p("repl-diskless-sync-max-replicas", Int(0, INT_MAX), "0").inert(REPL),
    p("maxclients", Int(1, UINT_MAX), "10000").listed()
        .get(|c| c.maxclients.to_string())
        .set(|c, v, _| {
            c.maxclients = int(v)?;
            Ok(())
        })
        .help("N", "most simultaneous clients (default 10000)"),
    p("unixsocketperm", Octal(0o777), "0").immutable().listed()
        .get(|c| c.unixsocketperm.to_string())
        .set(|c, v, _| {
            c.unixsocketperm = int(v)?;
            Ok(())
        }),
    p("socket-mark-id", Int(0, UINT_MAX), "0")
        .immutable()
        .quiet(&["0"], "sluice does not mark its sockets"),
    p("active-defrag-max-scan-fields", Int(1, LONG_MAX), "1000").inert(TUNING),
    p("slowlog-max-len", Int(0, LONG_MAX), "128").listed()
        .get(|c| c.slowlog_max_len.to_string())
        .set(|c, v, _| {
            c.slowlog_max_len = int(v)?;
            Ok(())
        }),
    p("acllog-max-len", Int(0, LONG_MAX), "128").listed()
        .get(|c| c.acllog_max_len.to_string())
        .set(|c, v, _| {
            c.acllog_max_len = int(v)?;
            Ok(())
        }),
    p("busy-reply-threshold", Int(0, LONG_MAX), "5000")
        .alias("lua-time-limit")
        .listed()
        .get(|c| c.busy_reply_threshold.to_string())
        .set(|c, v, _| {
            c.busy_reply_threshold = int(v)?;
            Ok(())
        })
        .help("MS", "when long scripts start getting -BUSY (5000)"),
    p("cluster-node-timeout", Int(0, LONG_MAX), "15000").listed()
        .get(|c| c.cluster_node_timeout.to_string())
        .set(|c, v, _| {
            c.cluster_node_timeout = int(v)?;
            Ok(())
        }),
    p("slowlog-log-slower-than", Int(-1, LONG_MAX), "10000").listed()
        .get(|c| c.slowlog_log_slower_than.to_string())
        .set(|c, v, _| {
            c.slowlog_log_slower_than = int(v)?;
            Ok(())
        }),
    p("latency-monitor-threshold", Int(0, LONG_MAX), "0").listed()
        .get(|c| c.latency_monitor_threshold.to_string())
        .set(|c, v, _| {
            c.latency_monitor_threshold = int(v)?;
            Ok(())
        }),
    p(
        "proto-max-bulk-len",
        Mem(1024 * 1024, LONG_MAX),
        "536870912",
    )
    .listed()
        .get(|c| c.proto_max_bulk_len.to_string())
        .set(|c, v, _| {
            c.proto_max_bulk_len = mem(v)?;
            Ok(())
        })
        .help("BYTES", "largest bulk argument (512mb)"),
    p("stream-node-max-entries", Int(0, LONG_MAX), "100").listed()
        .get(|c| c.stream_node_max_entries.to_string())
        .set(|c, v, _| {
            c.stream_node_max_entries = int(v)?;
            Ok(())
        }),
    p("repl-backlog-size", Mem(1, LONG_MAX), "1048576").listed()
        .get(|c| c.repl.backlog_size.to_string())
        .set(|c, v, _| {
            c.repl.backlog_size = mem(v)?;
            Ok(())
        }),
    p("maxmemory", Mem(0, ULLONG_MAX), "0").listed()
        .get(|c| c.maxmemory.to_string())
        .set(|c, v, _| {
            c.maxmemory = mem(v)?;
            Ok(())
        })
        .help("BYTES", "memory cap (e.g. 100mb; default 0: none)"),
    p("cluster-link-sendbuf-limit", Mem(0, ULLONG_MAX), "0").inert(CLUSTER_BUS),
    p("hash-max-listpack-entries", Int(0, LONG_MAX), "512")
        .alias("hash-max-ziplist-entries")
        .listed()
        .inert(ENCODING)
        .get(|c| c.hash_max_listpack_entries.to_string())
        .set(|c, v, _| {
            c.hash_max_listpack_entries = int(v)?;
            Ok(())
        }),
    p("set-max-intset-entries", Int(0, LONG_MAX), "512")
        .listed()
        .inert(ENCODING),
    p("zset-max-listpack-entries", Int(0, LONG_MAX), "128")
        .alias("zset-max-ziplist-entries")
        .listed()
        .inert(ENCODING)
        .get(|c| c.zset_max_listpack_entries.to_string())
        .set(|c, v, _| {
            c.zset_max_listpack_entries = int(v)?;
            Ok(())
        }),
    p("active-defrag-ignore-bytes", Mem(1, LONG_MAX), "104857600").inert(TUNING),
    p("hash-max-listpack-value", Mem(0, LONG_MAX), "64")
        .alias("hash-max-ziplist-value")
        .listed()
        .inert(ENCODING)
        .get(|c| c.hash_max_listpack_value.to_string())
        .set(|c, v, _| {
            c.hash_max_listpack_value = mem(v)?;
            Ok(())
        }),
    p("stream-node-max-bytes", Mem(0, LONG_MAX), "4096").listed()
        .get(|c| c.stream_node_max_bytes.to_string())
        .set(|c, v, _| {
            c.stream_node_max_bytes = mem(v)?;
            Ok(())
        }),
    p("zset-max-listpack-value", Mem(0, LONG_MAX), "64")
        .alias("zset-max-ziplist-value")
        .listed()
        .inert(ENCODING)
        .get(|c| c.zset_max_listpack_value.to_string())
        .set(|c, v, _| {
            c.zset_max_listpack_value = mem(v)?;
            Ok(())
        }),
    p("hll-sparse-max-bytes", Mem(0, LONG_MAX), "3000").listed()
        .get(|c| c.hll_sparse_max_bytes.to_string())
        .set(|c, v, _| {
            c.hll_sparse_max_bytes = mem(v)?;
            Ok(())
        }),
    p("tracking-table-max-keys", Int(0, LONG_MAX), "1000000")
        .listed()
        .get(|c| c.tracking_table_max_keys.to_string())
        .set(|c, v, _| {
            c.tracking_table_max_keys = int(v)?;
            Ok(())
        }),
    p(
        "client-query-buffer-limit",
        Mem(1024 * 1024, LONG_MAX),
        "1073741824",
    )
    .listed()
        .get(|c| c.client_query_buffer_limit.to_string())
        .set(|c, v, _| {
            c.client_query_buffer_limit = mem(v)?;
            Ok(())
        })
        .help("BYTES", "largest unprocessed input of a client (1gb)"),
    p("maxmemory-clients", MemOrPercent, "0")
        .listed()
        .get(|c| c.maxmemory_clients.clone())
        .set(|c, v, _| {
            c.maxmemory_clients = match v.strip_suffix('%') {
                Some(_) => v.to_string(),
                None => mem(v)?.to_string(),
            };
            Ok(())
        }),
    p("repl-backlog-ttl", Int(0, LONG_MAX), "3600").inert(REPL),
    p("auto-aof-rewrite-min-size", Mem(0, LONG_MAX), "67108864").listed()
        .get(|c| c.aof.rewrite_min_size.to_string())
        .set(|c, v, _| {
            c.aof.rewrite_min_size = mem(v)? as u64;
            Ok(())
        }),
    p("tls-port", Int(0, 65535), "0").listed()
        // Read at start only (Redis changes it at run time).
        .immutable()
        .get(|c| c.tls_port.to_string())
        .set(|c, v, _| {
            c.tls_port = int(v)?;
            Ok(())
        })
        .help("N", "a TLS listener; needs --tls-cert-file F --tls-key-file F"),
    p("tls-session-cache-size", Int(0, INT_MAX), "20480").inert(TLS_OPT),
    p("tls-session-cache-timeout", Int(0, INT_MAX), "300").inert(TLS_OPT),
    p("tls-cluster", Bool, "no").quiet(&["no"], CLUSTER_BUS),
    p("tls-replication", Bool, "no").quiet(&["no"], REPL),
    p("tls-auth-clients", Enum(&["no", "yes", "optional"]), "yes").listed()
        // Read at start only (Redis changes it at run time).
        .immutable()
        .set(|_, v, _| {
            // sluice does not verify client certificates; say so rather than pretend.
            if v != "no" {
                return Err(
                    "sluice does not verify client certificates; only 'no' is supported".into(),
                );
            }
            Ok(())
        }),
    p("tls-prefer-server-ciphers", Bool, "no").inert(TLS_OPT),
    p("tls-session-caching", Bool, "yes").inert(TLS_OPT),
    p("tls-cert-file", Str, "").nullable().listed()
        // Read at start only (Redis changes it at run time).
        .immutable()
        .get(|c| shown(&c.tls_cert_file))
        .set(|c, v, _| {
            c.tls_cert_file = unset_if_empty(v);
            Ok(())
        }),
    p("tls-key-file", Str, "").nullable().listed()
        // Read at start only (Redis changes it at run time).
        .immutable()
        .get(|c| shown(&c.tls_key_file))
        .set(|c, v, _| {
            c.tls_key_file = unset_if_empty(v);
            Ok(())
        }),
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
    p("dir", Str, "/").protected().listed()
        .get(|c| c.rdb_dir().display().to_string())
        .set(|c, v, from| {
            c.dir = dir(v, from)?;
            Ok(())
        })
        .help("PATH", "change to this directory first (the RDB file lives there)"),
    p("save", Special(check::save), "3600 1 300 100 60 10000")
        .multi_arg()
        .listed()
        .get(|c| format_save(&c.save))
        .set(|c, v, from| {
            save(c, v, from)?;
            Ok(())
        })
        .help("\"S C ...\"", "snapshot when C keys changed within S seconds (default \"\": never)"),
    p(
        "client-output-buffer-limit",
        Special(check::output_buffer_limit),
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
    )
    .multi_arg()
    .listed()
        .get(|c| c.output_buffer_limits())
        .set(|c, v, _| {
            c.set_output_buffer_limit(v)?;
            Ok(())
        })
        .help("normal HARD SOFT SECONDS", "close clients that do not read"),
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
    .listed()
        .get(|c| keyspace_events::format(c.notify_keyspace_events))
        .set(|c, v, _| {
            c.notify_keyspace_events = keyspace_events::parse(v).ok_or(keyspace_events::INVALID)?;
            Ok(())
        }),
    p("bind", Special(check::words), "127.0.0.1")
        // CONFIG SET listens on the new addresses (`server::relisten`).
        .multi_arg()
        .listed()
        .get(|c| c.bind.join(" "))
        .set(|c, v, _| {
            c.bind = v.split_whitespace().map(String::from).collect();
            Ok(())
        })
        .help("ADDR ...", "addresses to listen on (default 127.0.0.1)"),
    p("replicaof", Special(check::replicaof), "")
        .alias("slaveof")
        .immutable()
        .multi_arg()
        .listed()
        .get(|c| c.repl.replicaof.as_ref().map(|(h, p)| format!("{h} {p}")).unwrap_or_default())
        .set(|c, v, _| {
            c.repl.replicaof = replicaof(v)?;
            Ok(())
        })
        .help("HOST PORT", "start as a replica of that master"),
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
        .own()
    .listed()
        .get(|c| if c.lua_script_global { "global" } else { "declared" }.to_string())
        .set(|c, v, _| {
            c.lua_script_global = v == "global";
            Ok(())
        })
        .help("M", "declared (default: a script locks its KEYS' shards) or global"),
    p("shards", Int(0, 4096), "0")
        .own()
        .set(|c, v, _| {
            c.shards = int(v)?;
            Ok(())
        })
        .help("N", "keyspace shards, a power of two (default 4 x CPUs)"),
    p("threads", Int(0, super::MAX_THREADS as i128), "0")
        .own()
        .set(|c, v, _| {
            c.threads = int(v)?;
            Ok(())
        })
        .help(
            "N",
            "event loops serving connections (default: one per CPU, brought in by load)",
        ),
    p("io-backend", Special(check::io_backend), "loop")
        .own()
        .set(|c, v, _| {
            c.io_backend = IoBackend::parse(v)?;
            Ok(())
        })
        .help("B", "loop (default), epoll, uring, auto: what serves plain TCP"),
    p("busy-poll", Int(0, 10_000), "0")
        .own()
        .set(|c, v, _| {
            c.busy_poll_us = int(v)?;
            Ok(())
        })
        .help(
            "US",
            "after a request, poll this many microseconds for the next before sleeping, while a core is idle (default 0: never)",
        ),
    p("test-mode", Bool, "no")
        .own()
        .set(|c, v, _| {
            c.test_mode = yes(v);
            Ok(())
        })
        .help("", "enable CLOCK, FAULT, CMDLOG and TESTMODE (and DEBUG for local clients)"),
    p("redis-version", Str, "7.0.15")
        .own()
        .set(|c, v, _| {
            c.redis_version = v.to_string();
            Ok(())
        })
        .help("V", "the version INFO and HELLO report (7.0.15)"),
    p("resp3", Bool, "yes")
        .own()
        .set(|c, v, _| {
            c.resp3 = yes(v);
            Ok(())
        })
        .help("no", "refuse HELLO 3 (test a client's RESP2 fallback)"),
    p("cluster-node-id", Str, "")
        .own()
        .set(|c, v, _| {
            c.cluster_node_id = unset_if_empty(v);
            Ok(())
        }),
    p("cluster-seed-map", Str, "")
        .own()
        .set(|c, v, _| {
            c.cluster_seed_map = unset_if_empty(v);
            Ok(())
        })
        .help("FILE", "cluster mode: a new node's first nodes.conf is made from this slot map (docs/cluster.md)"),
    // File-only directives that would change what commands do.
    p("rename-command", Special(check::anything), "")
        .multi_arg()
        .refused("sluice cannot rename or disable commands"),
    p("user", Special(check::anything), "")
        .multi_arg()
        .set(|c, v, from| {
            if from == Source::ConfigSet {
                return Err("'user' is a configuration file directive".into());
            }
            c.users.push(v.to_string());
            Ok(())
        }),
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

/// `--help`: the usage, then one line per parameter that has one, in the table's order.
pub fn help_text() -> String {
    let mut out = String::from(
        "sluice: a Redis-protocol-compatible, in-memory rate-limiter server.

Usage: sluice [/path/to/redis.conf] [--directive value ...]
       sluice -v | --version
       sluice -h | --help

As with redis-server, every redis.conf directive can be given on the command line as
--name value (options override the file), and '-' reads the file from standard input.
Directives sluice acts on:

",
    );
    // Redis's directives by name, then sluice's own in the table's order.
    let mut shown: Vec<&Param> = PARAMS
        .iter()
        .filter(|p| p.help.is_some() && p.flags & OWN == 0)
        .collect();
    shown.sort_by_key(|p| p.name);
    let own = PARAMS
        .iter()
        .filter(|p| p.help.is_some() && p.flags & OWN != 0);
    for (n, p) in shown.into_iter().chain(own).enumerate() {
        if n > 0 && p.flags & OWN != 0 && out.ends_with('\n') && !out.contains("sluice's own:") {
            out.push_str("\nsluice's own:\n\n");
        }
        if let Some((args, text)) = p.help {
            let left = if args.is_empty() {
                format!("  --{}", p.name)
            } else {
                format!("  --{} {args}", p.name)
            };
            if left.len() < 30 {
                out.push_str(&format!("{left:<30}{text}\n"));
            } else {
                out.push_str(&format!("{left}\n{:<30}{text}\n", ""));
            }
        }
    }
    let refused: Vec<&str> = PARAMS
        .iter()
        .filter(|p| matches!(p.effect, Effect::Refused(_)))
        .map(|p| p.name)
        .collect();
    out.push_str(&format!(
        "
Redis's other directives are accepted with a warning naming them, or refused when they
ask for something sluice cannot do (daemonize yes, appendonly yes,
{}, ...).
",
        refused.join(", ")
    ));
    out
}

// What the rows' setters share. Values reach them checked, so these only convert.

fn int<T: TryFrom<i64>>(v: &str) -> Result<T, String> {
    crate::num::parse_i64(v.as_bytes())
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())
}

fn mem(v: &str) -> Result<usize, String> {
    parse_memory(v).ok_or_else(|| "argument must be a memory value".to_string())
}

fn yes(v: &str) -> bool {
    v.eq_ignore_ascii_case("yes")
}

fn yn(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

fn shown(v: &Option<String>) -> String {
    v.clone().unwrap_or_default()
}

fn unset_if_empty(v: &str) -> Option<String> {
    Some(v.to_string()).filter(|v| !v.is_empty())
}

/// `save`: in a file each line adds its points (`save ""` clears); CONFIG SET replaces.
fn save(c: &mut Config, v: &str, from: Source) -> Result<(), String> {
    let points = parse_save(v)?;
    if from == Source::File && !points.is_empty() {
        c.save.extend(points);
    } else {
        c.save = points;
    }
    Ok(())
}

/// `dir`: at start, as given (the binary changes to it); by CONFIG SET, an existing
/// directory, kept absolute. Redis changes its working directory there; sluice leaves the
/// process's alone (the RDB file and CONFIG REWRITE use the absolute path).
fn dir(v: &str, from: Source) -> Result<Option<String>, String> {
    if from == Source::File {
        return Ok(unset_if_empty(v));
    }
    let path = std::fs::canonicalize(v).map_err(|e| super::rewrite::strerror(&e))?;
    if !path.is_dir() {
        return Err("Not a directory".into());
    }
    Ok(Some(path.display().to_string()))
}

/// `replicaof`: `host port`, or `""` (what `no one` checks to).
fn replicaof(v: &str) -> Result<Option<(String, u16)>, String> {
    match v.rsplit_once(' ') {
        None if v.is_empty() => Ok(None),
        Some((host, port)) => Ok(Some((host.to_string(), int(port)?))),
        None => Err("wrong number of arguments".into()),
    }
}

pub(crate) mod check;

#[cfg(test)]
mod tests;
