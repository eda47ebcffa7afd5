//! redis.conf and redis-server's command line → `Config`.
//!
//! Owns the start-up reading of configuration: the command line (`sluice [file] [--name
//! value …]`, as redis-server's), conf files (with `include`), and what sluice does with every
//! directive of Redis 7.0's redis.conf. Uses `config` only; the binary acts on the result.
//!
//! Each directive is one of:
//! - acted on (`Config::apply`), or matching what sluice always does (`appendonly no`);
//! - accepted without effect, with one warning naming it and where it was (`hz 10` tunes
//!   something sluice does not have), so an operator's existing file works;
//! - refused, when it asks for behaviour sluice cannot provide (`daemonize yes`,
//!   `rename-command`): starting anyway would silently break what the operator relies on.
//!
//! Like redis-server, command-line options are read after the file, so they override it; a
//! refusal is judged on the final value, so `--daemonize no` rescues a file saying `yes`.
//! Every problem is reported in one run, each with its file and line.

use std::collections::HashMap;
use std::fmt;

use crate::config::{Config, split_conf_line};

/// What sluice does with a directive it does not act on through `Config::apply`.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// `Config::apply` implements it.
    Acts,
    /// Accepted with a warning; the text says why it has no effect.
    Inert(&'static str),
    /// These values (lowercase, arguments joined by a space) are what sluice does anyway and
    /// are accepted silently; any other value is refused for the reason given.
    Only(&'static [&'static str], &'static str),
    /// These values are accepted silently; any other is accepted with the warning given.
    Quiet(&'static [&'static str], &'static str),
    /// Refused whatever its value.
    Refused(&'static str),
}

const PERSIST: &str = "sluice writes RDB snapshots only, no AOF";
const REPL: &str = "sluice's replication does not have this knob";
const ENCODING: &str = "sluice chooses its own in-memory encodings";
const CLUSTER_BUS: &str = "sluice's cluster mode has no cluster bus (a static slot map)";
const TUNING: &str = "sluice has no such internal tuning knob";
const TLS_OPT: &str = "sluice's TLS (rustls) uses its own safe defaults";
const NO_EFFECT: &str = "not implemented by sluice; accepted for compatibility";

/// Every directive of Redis 7.0.15 (its CONFIG GET * names plus the file-only ones), and
/// sluice's own options. Names are lowercase.
static DIRECTIVES: &[(&str, Kind)] = &[
    // Acted on.
    ("port", Kind::Acts),
    ("bind", Kind::Acts),
    ("databases", Kind::Acts),
    ("loglevel", Kind::Acts),
    ("maxclients", Kind::Acts),
    ("timeout", Kind::Acts),
    ("busy-reply-threshold", Kind::Acts),
    ("lua-time-limit", Kind::Acts),
    ("lua-script-locking", Kind::Acts),
    ("proto-max-bulk-len", Kind::Acts),
    ("client-query-buffer-limit", Kind::Acts),
    ("requirepass", Kind::Acts),
    ("protected-mode", Kind::Acts),
    ("maxmemory", Kind::Acts),
    ("maxmemory-policy", Kind::Acts),
    ("maxmemory-samples", Kind::Acts),
    ("client-output-buffer-limit", Kind::Acts),
    ("tls-port", Kind::Acts),
    ("tls-cert-file", Kind::Acts),
    ("tls-key-file", Kind::Acts),
    ("tls-auth-clients", Kind::Acts),
    ("cluster-enabled", Kind::Acts),
    ("cluster-config-file", Kind::Acts),
    ("pidfile", Kind::Acts),
    ("logfile", Kind::Acts),
    ("dir", Kind::Acts),
    ("unixsocket", Kind::Acts),
    ("unixsocketperm", Kind::Acts),
    ("supervised", Kind::Acts),
    ("daemonize", Kind::Acts),
    ("slowlog-log-slower-than", Kind::Acts),
    ("slowlog-max-len", Kind::Acts),
    ("latency-monitor-threshold", Kind::Acts),
    ("latency-tracking", Kind::Acts),
    // sluice's own.
    ("shards", Kind::Acts),
    ("threads", Kind::Acts),
    ("io-backend", Kind::Acts),
    ("test-mode", Kind::Acts),
    ("redis-version", Kind::Acts),
    ("resp3", Kind::Acts),
    ("cluster-node-id", Kind::Acts),
    // Persistence: RDB snapshots are acted on; the AOF is refused, its tuning harmless.
    ("save", Kind::Acts),
    ("dbfilename", Kind::Acts),
    ("rdbchecksum", Kind::Acts),
    ("stop-writes-on-bgsave-error", Kind::Acts),
    (
        "appendonly",
        Kind::Only(
            &["no"],
            "sluice has no append-only file: state is lost at restart",
        ),
    ),
    ("appendfilename", Kind::Inert(PERSIST)),
    ("appenddirname", Kind::Inert(PERSIST)),
    ("appendfsync", Kind::Inert(PERSIST)),
    ("aof-disable-auto-gc", Kind::Inert(PERSIST)),
    ("aof-load-truncated", Kind::Inert(PERSIST)),
    ("aof-rewrite-incremental-fsync", Kind::Inert(PERSIST)),
    ("aof-timestamp-enabled", Kind::Inert(PERSIST)),
    ("aof-use-rdb-preamble", Kind::Inert(PERSIST)),
    ("auto-aof-rewrite-min-size", Kind::Inert(PERSIST)),
    ("auto-aof-rewrite-percentage", Kind::Inert(PERSIST)),
    ("no-appendfsync-on-rewrite", Kind::Inert(PERSIST)),
    (
        "rdbcompression",
        Kind::Inert("sluice writes RDB strings uncompressed (Redis loads them either way)"),
    ),
    ("rdb-del-sync-files", Kind::Inert(REPL)),
    (
        "rdb-save-incremental-fsync",
        Kind::Inert("sluice syncs an RDB file once, when it is complete"),
    ),
    (
        "sanitize-dump-payload",
        Kind::Inert("sluice has no DUMP/RESTORE"),
    ),
    // Replication: a replica or a write quorum would change what clients see.
    ("replicaof", Kind::Acts),
    ("slaveof", Kind::Acts),
    (
        "min-replicas-to-write",
        Kind::Only(
            &["0"],
            "sluice has no replicas to count, so it would refuse every write",
        ),
    ),
    (
        "min-slaves-to-write",
        Kind::Only(
            &["0"],
            "sluice has no replicas to count, so it would refuse every write",
        ),
    ),
    ("min-replicas-max-lag", Kind::Inert(REPL)),
    ("min-slaves-max-lag", Kind::Inert(REPL)),
    ("masterauth", Kind::Acts),
    ("masteruser", Kind::Acts),
    ("repl-backlog-size", Kind::Acts),
    ("repl-backlog-ttl", Kind::Inert(REPL)),
    ("repl-disable-tcp-nodelay", Kind::Inert(REPL)),
    ("repl-diskless-load", Kind::Inert(REPL)),
    ("repl-diskless-sync", Kind::Inert(REPL)),
    ("repl-diskless-sync-delay", Kind::Inert(REPL)),
    ("repl-diskless-sync-max-replicas", Kind::Inert(REPL)),
    ("repl-ping-replica-period", Kind::Acts),
    ("repl-ping-slave-period", Kind::Acts),
    ("repl-timeout", Kind::Acts),
    ("replica-announce-ip", Kind::Acts),
    ("replica-announce-port", Kind::Acts),
    ("replica-announced", Kind::Acts),
    ("replica-ignore-disk-write-errors", Kind::Inert(REPL)),
    ("replica-ignore-maxmemory", Kind::Inert(REPL)),
    ("replica-lazy-flush", Kind::Inert(REPL)),
    ("replica-priority", Kind::Acts),
    ("replica-read-only", Kind::Acts),
    ("replica-serve-stale-data", Kind::Inert(REPL)),
    ("slave-announce-ip", Kind::Acts),
    ("slave-announce-port", Kind::Acts),
    ("slave-ignore-maxmemory", Kind::Inert(REPL)),
    ("slave-lazy-flush", Kind::Inert(REPL)),
    ("slave-priority", Kind::Acts),
    ("slave-read-only", Kind::Acts),
    ("slave-serve-stale-data", Kind::Inert(REPL)),
    ("tls-replication", Kind::Quiet(&["no"], REPL)),
    // Cluster bus and failover: sluice's cluster is a static map.
    ("cluster-port", Kind::Inert(CLUSTER_BUS)),
    ("cluster-announce-bus-port", Kind::Inert(CLUSTER_BUS)),
    ("cluster-announce-hostname", Kind::Inert(CLUSTER_BUS)),
    ("cluster-announce-ip", Kind::Inert(CLUSTER_BUS)),
    ("cluster-announce-port", Kind::Inert(CLUSTER_BUS)),
    ("cluster-announce-tls-port", Kind::Inert(CLUSTER_BUS)),
    (
        "cluster-allow-pubsubshard-when-down",
        Kind::Inert(CLUSTER_BUS),
    ),
    ("cluster-allow-reads-when-down", Kind::Inert(CLUSTER_BUS)),
    ("cluster-allow-replica-migration", Kind::Inert(CLUSTER_BUS)),
    ("cluster-link-sendbuf-limit", Kind::Inert(CLUSTER_BUS)),
    ("cluster-migration-barrier", Kind::Inert(CLUSTER_BUS)),
    ("cluster-node-timeout", Kind::Inert(CLUSTER_BUS)),
    ("cluster-preferred-endpoint-type", Kind::Inert(CLUSTER_BUS)),
    ("cluster-replica-no-failover", Kind::Inert(CLUSTER_BUS)),
    ("cluster-replica-validity-factor", Kind::Inert(CLUSTER_BUS)),
    ("cluster-require-full-coverage", Kind::Inert(CLUSTER_BUS)),
    ("cluster-slave-no-failover", Kind::Inert(CLUSTER_BUS)),
    ("cluster-slave-validity-factor", Kind::Inert(CLUSTER_BUS)),
    ("tls-cluster", Kind::Quiet(&["no"], CLUSTER_BUS)),
    // Security and extensions that would change what commands do.
    (
        "rename-command",
        Kind::Refused("sluice cannot rename or disable commands"),
    ),
    (
        "user",
        Kind::Refused("sluice has only the default user (use requirepass), no ACL users"),
    ),
    (
        "aclfile",
        Kind::Only(
            &[""],
            "sluice has only the default user (use requirepass), no ACL file",
        ),
    ),
    ("acllog-max-len", Kind::Inert("sluice has no ACL log")),
    ("acl-pubsub-default", Kind::Inert("sluice has no pub/sub")),
    (
        "loadmodule",
        Kind::Refused("sluice cannot load Redis modules (CL.THROTTLE is built in)"),
    ),
    ("notify-keyspace-events", Kind::Acts),
    (
        "maxmemory-clients",
        Kind::Only(&["0"], "sluice does not evict clients by their memory"),
    ),
    (
        "tls-key-file-pass",
        Kind::Only(&[""], "sluice cannot read an encrypted private key"),
    ),
    (
        "syslog-enabled",
        Kind::Only(
            &["no"],
            "sluice logs to standard error or logfile, not syslog",
        ),
    ),
    ("syslog-ident", Kind::Inert("sluice does not log to syslog")),
    (
        "syslog-facility",
        Kind::Inert("sluice does not log to syslog"),
    ),
    ("enable-protected-configs", Kind::Inert(NO_EFFECT)),
    (
        "enable-debug-command",
        Kind::Inert("sluice's DEBUG has only SLEEP, always enabled"),
    ),
    (
        "enable-module-command",
        Kind::Inert("sluice has no MODULE command"),
    ),
    // TLS knobs sluice leaves to rustls.
    (
        "tls-ca-cert-file",
        Kind::Inert("sluice does not ask clients for certificates"),
    ),
    (
        "tls-ca-cert-dir",
        Kind::Inert("sluice does not ask clients for certificates"),
    ),
    ("tls-client-cert-file", Kind::Inert(REPL)),
    ("tls-client-key-file", Kind::Inert(REPL)),
    ("tls-client-key-file-pass", Kind::Inert(REPL)),
    ("tls-dh-params-file", Kind::Inert(TLS_OPT)),
    ("tls-ciphers", Kind::Inert(TLS_OPT)),
    ("tls-ciphersuites", Kind::Inert(TLS_OPT)),
    ("tls-protocols", Kind::Inert(TLS_OPT)),
    ("tls-prefer-server-ciphers", Kind::Inert(TLS_OPT)),
    ("tls-session-caching", Kind::Inert(TLS_OPT)),
    ("tls-session-cache-size", Kind::Inert(TLS_OPT)),
    ("tls-session-cache-timeout", Kind::Inert(TLS_OPT)),
    // Process and server tuning.
    (
        "io-threads",
        Kind::Inert("sluice sizes its own worker threads"),
    ),
    (
        "io-threads-do-reads",
        Kind::Inert("sluice sizes its own worker threads"),
    ),
    (
        "hz",
        Kind::Inert("sluice's expiry reaper has its own schedule"),
    ),
    (
        "dynamic-hz",
        Kind::Inert("sluice's expiry reaper has its own schedule"),
    ),
    (
        "active-expire-effort",
        Kind::Inert("sluice's expiry reaper has its own schedule"),
    ),
    ("activerehashing", Kind::Inert(TUNING)),
    ("activedefrag", Kind::Inert(TUNING)),
    ("active-defrag-cycle-max", Kind::Inert(TUNING)),
    ("active-defrag-cycle-min", Kind::Inert(TUNING)),
    ("active-defrag-ignore-bytes", Kind::Inert(TUNING)),
    ("active-defrag-max-scan-fields", Kind::Inert(TUNING)),
    ("active-defrag-threshold-lower", Kind::Inert(TUNING)),
    ("active-defrag-threshold-upper", Kind::Inert(TUNING)),
    ("jemalloc-bg-thread", Kind::Inert(TUNING)),
    ("disable-thp", Kind::Inert(TUNING)),
    ("lazyfree-lazy-eviction", Kind::Inert(TUNING)),
    ("lazyfree-lazy-expire", Kind::Inert(TUNING)),
    ("lazyfree-lazy-server-del", Kind::Inert(TUNING)),
    ("lazyfree-lazy-user-del", Kind::Inert(TUNING)),
    ("lazyfree-lazy-user-flush", Kind::Inert(TUNING)),
    ("maxmemory-eviction-tenacity", Kind::Inert(TUNING)),
    ("lfu-decay-time", Kind::Inert("sluice has no LFU policies")),
    ("lfu-log-factor", Kind::Inert("sluice has no LFU policies")),
    (
        "oom-score-adj",
        Kind::Quiet(&["no"], "sluice does not adjust its OOM score"),
    ),
    (
        "oom-score-adj-values",
        Kind::Inert("sluice does not adjust its OOM score"),
    ),
    ("server_cpulist", Kind::Inert(TUNING)),
    ("bio_cpulist", Kind::Inert(TUNING)),
    ("aof_rewrite_cpulist", Kind::Inert(TUNING)),
    ("bgsave_cpulist", Kind::Inert(TUNING)),
    (
        "tcp-backlog",
        Kind::Inert("sluice uses the runtime's listen backlog"),
    ),
    (
        "tcp-keepalive",
        Kind::Inert("sluice does not set TCP keepalive"),
    ),
    (
        "socket-mark-id",
        Kind::Quiet(&["0"], "sluice does not mark its sockets"),
    ),
    ("bind-source-addr", Kind::Inert(REPL)),
    ("always-show-logo", Kind::Inert("sluice prints no logo")),
    (
        "set-proc-title",
        Kind::Inert("sluice does not change its process title"),
    ),
    (
        "proc-title-template",
        Kind::Inert("sluice does not change its process title"),
    ),
    ("crash-log-enabled", Kind::Inert(NO_EFFECT)),
    ("crash-memcheck-enabled", Kind::Inert(NO_EFFECT)),
    ("ignore-warnings", Kind::Inert(NO_EFFECT)),
    ("propagation-error-behavior", Kind::Inert(REPL)),
    (
        "shutdown-on-sigint",
        Kind::Inert("sluice always shuts down cleanly on SIGINT"),
    ),
    (
        "shutdown-on-sigterm",
        Kind::Inert("sluice always shuts down cleanly on SIGTERM"),
    ),
    (
        "shutdown-timeout",
        Kind::Inert("sluice waits at most 5 s for clients at shutdown"),
    ),
    (
        "latency-tracking-info-percentiles",
        Kind::Inert("sluice reports the 50th, 99th and 99.9th percentiles"),
    ),
    (
        "tracking-table-max-keys",
        Kind::Inert("sluice has no client-side caching"),
    ),
    // Encodings of data types.
    ("hash-max-listpack-entries", Kind::Inert(ENCODING)),
    ("hash-max-listpack-value", Kind::Inert(ENCODING)),
    ("hash-max-ziplist-entries", Kind::Inert(ENCODING)),
    ("hash-max-ziplist-value", Kind::Inert(ENCODING)),
    ("list-max-listpack-size", Kind::Inert(ENCODING)),
    ("list-max-ziplist-size", Kind::Inert(ENCODING)),
    ("list-compress-depth", Kind::Inert(ENCODING)),
    ("set-max-intset-entries", Kind::Inert(ENCODING)),
    ("zset-max-listpack-entries", Kind::Inert(ENCODING)),
    ("zset-max-listpack-value", Kind::Inert(ENCODING)),
    ("zset-max-ziplist-entries", Kind::Inert(ENCODING)),
    ("zset-max-ziplist-value", Kind::Inert(ENCODING)),
    (
        "hll-sparse-max-bytes",
        Kind::Inert("sluice has no HyperLogLog"),
    ),
    (
        "stream-node-max-bytes",
        Kind::Inert("sluice has no streams"),
    ),
    (
        "stream-node-max-entries",
        Kind::Inert("sluice has no streams"),
    ),
];

/// How deep `include` may nest (a file including itself stops here).
const MAX_INCLUDE_DEPTH: usize = 16;

/// Where a directive came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A conf file and its 1-based line number.
    File(String, usize),
    /// The command line.
    CommandLine,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(path, line) => write!(f, "{path}:{line}"),
            Origin::CommandLine => f.write_str("command line"),
        }
    }
}

/// A configuration ready to start with, and the warnings to log once logging is set up.
#[derive(Debug)]
pub struct Loaded {
    /// The configuration.
    pub config: Config,
    /// One line per directive accepted without effect.
    pub warnings: Vec<String>,
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Invocation {
    /// Serve with this configuration.
    Run(Box<Loaded>),
    /// Print the version and exit.
    Version,
    /// Print the usage and exit.
    Help,
}

/// Every problem found, each a line naming the directive and where it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problems(pub Vec<String>);

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        writeln!(
            f,
            "sluice: cannot start: {n} configuration problem{}:",
            if n == 1 { "" } else { "s" }
        )?;
        for p in &self.0 {
            writeln!(f, "  {p}")?;
        }
        Ok(())
    }
}

/// The command line's words, split as redis-server does: an optional config file first (or
/// `-` for standard input), then `--name [args…]` groups.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CommandLine {
    /// The config file, if one was named.
    pub file: Option<String>,
    /// The directives given as options, in order.
    pub options: Vec<(String, Vec<String>)>,
}

/// Parses the arguments (without the program name).
pub fn parse_args(args: &[String]) -> Result<Result<CommandLine, Invocation>, Problems> {
    let mut cl = CommandLine::default();
    let mut rest = args;
    if let Some(first) = rest.first() {
        match first.as_str() {
            "-v" | "--version" => return Ok(Err(Invocation::Version)),
            "-h" | "--help" => return Ok(Err(Invocation::Help)),
            f if f == "-" || !f.starts_with("--") => {
                cl.file = Some(f.to_string());
                rest = &rest[1..];
            }
            _ => {}
        }
    }
    let mut problems = Vec::new();
    for word in rest {
        if let Some(name) = word.strip_prefix("--") {
            match name {
                "version" => return Ok(Err(Invocation::Version)),
                "help" => return Ok(Err(Invocation::Help)),
                "" => problems.push("command line: '--' names no option".to_string()),
                _ => cl.options.push((name.to_ascii_lowercase(), Vec::new())),
            }
        } else if let Some((_, args)) = cl.options.last_mut() {
            args.push(word.clone());
        } else {
            problems.push(format!(
                "command line: '{word}' is not an option (options start with --, and only the first argument may be a config file)"
            ));
        }
    }
    for (name, args) in &mut cl.options {
        // Flags given without a value, as redis-server allows for `--save`.
        if args.is_empty() {
            match name.as_str() {
                "save" => args.push(String::new()),
                "test-mode" => args.push("yes".into()),
                _ => {}
            }
        }
    }
    if problems.is_empty() {
        Ok(Ok(cl))
    } else {
        Err(Problems(problems))
    }
}

/// Whether a config file line may start with `name` (lowercase): a directive of Redis 7.0
/// or sluice, or one of Redis's file-only ones (`include`, `sentinel`…). CONFIG REWRITE keeps
/// other lines only as comments, as Redis does.
pub fn is_directive(name: &str) -> bool {
    matches!(
        name,
        "include" | "rename-command" | "user" | "loadmodule" | "sentinel"
    ) || DIRECTIVES.iter().any(|(n, _)| *n == name)
}

/// The real name of one of Redis 7.0's alias directives (`slaveof` → `replicaof`), None for
/// any other name.
pub fn canonical(name: &str) -> Option<&'static str> {
    Some(match name {
        "slaveof" => "replicaof",
        "slave-priority" => "replica-priority",
        "slave-read-only" => "replica-read-only",
        "slave-announce-ip" => "replica-announce-ip",
        "slave-announce-port" => "replica-announce-port",
        "slave-serve-stale-data" => "replica-serve-stale-data",
        "slave-lazy-flush" => "replica-lazy-flush",
        "slave-ignore-maxmemory" => "replica-ignore-maxmemory",
        "repl-ping-slave-period" => "repl-ping-replica-period",
        "min-slaves-to-write" => "min-replicas-to-write",
        "min-slaves-max-lag" => "min-replicas-max-lag",
        "cluster-slave-no-failover" => "cluster-replica-no-failover",
        "cluster-slave-validity-factor" => "cluster-replica-validity-factor",
        "list-max-ziplist-size" => "list-max-listpack-size",
        "lua-time-limit" => "busy-reply-threshold",
        "hash-max-ziplist-entries" => "hash-max-listpack-entries",
        "hash-max-ziplist-value" => "hash-max-listpack-value",
        "zset-max-ziplist-entries" => "zset-max-listpack-entries",
        "zset-max-ziplist-value" => "zset-max-listpack-value",
        _ => return None,
    })
}

/// Reads the command line (and the files it names) into a configuration, or every problem.
pub fn from_args(args: &[String]) -> Result<Invocation, Problems> {
    let cl = match parse_args(args)? {
        Ok(cl) => cl,
        Err(other) => return Ok(other),
    };
    let mut loader = Loader::default();
    if let Some(file) = &cl.file {
        if file == "-" {
            let mut text = String::new();
            match std::io::Read::read_to_string(&mut std::io::stdin(), &mut text) {
                Ok(_) => loader.text("(standard input)", &text, 0),
                Err(e) => loader.problems.push(format!(
                    "cannot read the configuration from standard input: {e}"
                )),
            }
        } else {
            loader.file(file, None, 0);
            // Absolute, as Redis keeps it: `dir` changes the working directory later.
            loader.config.config_file = std::path::absolute(file)
                .ok()
                .map(|p| p.display().to_string());
        }
    }
    for (name, args) in &cl.options {
        loader.depth = 0;
        loader.directive(name, args, Origin::CommandLine);
    }
    loader.finish().map(|l| Invocation::Run(Box::new(l)))
}

/// Reads conf text, as if it were a file named `name`, and nothing else.
pub fn from_text(name: &str, text: &str) -> Result<Loaded, Problems> {
    let mut loader = Loader::default();
    loader.text(name, text, 0);
    loader.finish()
}

/// Accumulates directives, warnings and problems.
#[derive(Debug, Default)]
struct Loader {
    config: Config,
    warnings: Vec<String>,
    problems: Vec<String>,
    /// Refusals that depend on a directive's final value (`daemonize yes` may be overridden
    /// later), by directive name.
    pending: HashMap<String, String>,
    /// How many `include`s deep the directive being read is.
    depth: usize,
}

impl Loader {
    fn file(&mut self, path: &str, from: Option<&Origin>, depth: usize) {
        match std::fs::read_to_string(path) {
            Ok(text) => self.text(path, &text, depth),
            Err(e) => {
                let at = from.map(|o| format!("{o}: ")).unwrap_or_default();
                self.problems
                    .push(format!("{at}cannot read config file '{path}': {e}"));
            }
        }
    }

    fn text(&mut self, path: &str, text: &str, depth: usize) {
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let origin = Origin::File(path.to_string(), n + 1);
            let Some(words) = split_conf_line(line) else {
                self.problems
                    .push(format!("{origin}: unbalanced quotes in '{line}'"));
                continue;
            };
            let Some((name, args)) = words.split_first() else {
                continue;
            };
            let name = name.to_ascii_lowercase();
            self.depth = depth;
            self.directive(&name, args, origin);
        }
    }

    fn directive(&mut self, name: &str, args: &[String], origin: Origin) {
        let shown = show(name, args);
        if name == "include" {
            let depth = self.depth;
            match args {
                [file] if depth < MAX_INCLUDE_DEPTH => self.file(file, Some(&origin), depth + 1),
                [_] => self.problems.push(format!(
                    "{origin}: 'include' nests more than {MAX_INCLUDE_DEPTH} files deep (a file including itself?)"
                )),
                _ => self
                    .problems
                    .push(format!("{origin}: 'include' takes one file name")),
            }
            self.depth = depth;
            return;
        }
        let Some(kind) = DIRECTIVES.iter().find(|(n, _)| *n == name).map(|(_, k)| *k) else {
            self.problems.push(format!(
                "{origin}: '{shown}': unknown directive (not one of Redis 7.0's or sluice's)"
            ));
            return;
        };
        let value = args.join(" ").to_ascii_lowercase();
        match kind {
            Kind::Acts => {
                if let Err(e) = self.config.apply(name, args) {
                    self.problems.push(format!("{origin}: '{shown}': {e}"));
                    return;
                }
                // Asked for behaviour sluice lacks, unless a later line changes it back.
                if name == "daemonize" && self.config.daemonize {
                    self.pending.insert(
                        name.into(),
                        format!(
                            "{origin}: '{shown}': sluice does not fork into the background; run it in the foreground under a supervisor (systemd: --supervised systemd, see deploy/sluice.service) or set daemonize no"
                        ),
                    );
                } else {
                    self.pending.remove(name);
                }
            }
            Kind::Inert(why) => self.warn(&origin, &shown, why),
            Kind::Quiet(ok, why) => {
                if !ok.contains(&value.as_str()) {
                    self.warn(&origin, &shown, why);
                }
            }
            Kind::Only(ok, why) => {
                if ok.contains(&value.as_str()) {
                    self.pending.remove(name);
                } else {
                    self.pending
                        .insert(name.into(), format!("{origin}: '{shown}': {why}"));
                }
            }
            Kind::Refused(why) => self.problems.push(format!("{origin}: '{shown}': {why}")),
        }
    }

    fn warn(&mut self, origin: &Origin, shown: &str, why: &str) {
        self.warnings.push(format!(
            "{origin}: '{shown}' accepted without effect: {why}"
        ));
    }

    fn finish(mut self) -> Result<Loaded, Problems> {
        let mut pending: Vec<String> = self.pending.into_values().collect();
        pending.sort();
        self.problems.extend(pending);
        if let Err(e) = self.config.validate() {
            self.problems.push(e.to_string());
        }
        if self.problems.is_empty() {
            Ok(Loaded {
                config: self.config,
                warnings: self.warnings,
            })
        } else {
            Err(Problems(self.problems))
        }
    }
}

/// A directive as the operator wrote it (passwords hidden), for messages.
fn show(name: &str, args: &[String]) -> String {
    if matches!(
        name,
        "requirepass" | "masterauth" | "tls-key-file-pass" | "tls-client-key-file-pass"
    ) {
        return format!("{name} (value hidden)");
    }
    let mut s = name.to_string();
    for a in args {
        s.push(' ');
        if a.is_empty() || a.contains(char::is_whitespace) {
            s.push('"');
            s.push_str(a);
            s.push('"');
        } else {
            s.push_str(a);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn command_line_splits_like_redis_server() {
        let Ok(Ok(cl)) = parse_args(&args(&[
            "redis.conf",
            "--port",
            "7000",
            "--save",
            "--bind",
            "127.0.0.1",
            "::1",
            "--test-mode",
        ])) else {
            panic!("parse failed");
        };
        assert_eq!(cl.file.as_deref(), Some("redis.conf"));
        assert_eq!(
            cl.options,
            vec![
                ("port".into(), args(&["7000"])),
                ("save".into(), args(&[""])),
                ("bind".into(), args(&["127.0.0.1", "::1"])),
                ("test-mode".into(), args(&["yes"])),
            ]
        );
        assert!(matches!(
            parse_args(&args(&["-v"])),
            Ok(Err(Invocation::Version))
        ));
        assert!(matches!(
            parse_args(&args(&["--port", "1", "--version"])),
            Ok(Err(Invocation::Version))
        ));
        assert!(parse_args(&args(&["--port", "1", "stray", "file"])).is_ok());
        assert!(parse_args(&args(&["a.conf", "b.conf"])).is_err());
    }

    #[test]
    fn every_problem_at_once_with_line_numbers() {
        let text = "port 7000\nhz 10\nfrobnicate yes\ndaemonize yes\nrename-command FLUSHALL \"\"\nport notanumber\nappendonly yes\n";
        let Err(Problems(p)) = from_text("r.conf", text) else {
            panic!("should fail");
        };
        assert_eq!(p.len(), 5, "{p:?}");
        assert!(p[0].starts_with("r.conf:3: 'frobnicate yes': unknown directive"));
        assert!(p[1].starts_with("r.conf:5: 'rename-command FLUSHALL \"\"'"));
        assert!(p[2].starts_with("r.conf:6: 'port notanumber'"));
        assert!(
            p.iter()
                .any(|l| l.starts_with("r.conf:4: 'daemonize yes': sluice does not fork"))
        );
        assert!(
            p.iter()
                .any(|l| l.starts_with("r.conf:7: 'appendonly yes'"))
        );
    }

    #[test]
    fn warnings_name_directive_and_line() {
        let loaded = from_text(
            "r.conf",
            "# c\n\nhz 10\nsave \"\"\nsave 900 1\nappendfsync always\nappendonly no\nsave \"60 100\"\n",
        )
        .unwrap();
        assert_eq!(
            loaded.warnings,
            vec![
                "r.conf:3: 'hz 10' accepted without effect: sluice's expiry reaper has its own schedule".to_string(),
                format!("r.conf:6: 'appendfsync always' accepted without effect: {PERSIST}"),
            ]
        );
        assert_eq!(loaded.config.save, vec![(900, 1), (60, 100)]);
    }

    #[test]
    fn notify_keyspace_events_is_read_with_redis_letters() {
        let loaded = from_text("r.conf", "notify-keyspace-events \"Ex\"\n").unwrap();
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        assert_eq!(
            loaded.config.param("notify-keyspace-events").as_deref(),
            Some("xE")
        );
        let Err(Problems(p)) = from_text("r.conf", "\nnotify-keyspace-events KEq\n") else {
            panic!("should fail");
        };
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].starts_with("r.conf:2: 'notify-keyspace-events KEq'")
                && p[0].contains("Invalid event class character"),
            "{p:?}"
        );
    }

    #[test]
    fn a_later_value_overrides_a_refused_one() {
        let loaded = from_text(
            "r.conf",
            "daemonize yes\ndaemonize no\nappendonly yes\nappendonly no\n",
        );
        assert!(loaded.is_ok(), "{loaded:?}");
    }

    #[test]
    fn include_nests_with_a_limit() {
        let dir = std::env::temp_dir().join(format!("sluice-conf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = dir.join("a.conf");
        let b = dir.join("b.conf");
        std::fs::write(&a, format!("include {}\nport 7001\n", b.display())).unwrap();
        std::fs::write(&b, "port 7002\nmaxclients 7\n").unwrap();
        let loaded = from_text("main", &format!("include {}", a.display())).unwrap();
        assert_eq!((loaded.config.port, loaded.config.maxclients), (7001, 7));
        std::fs::write(&b, format!("include {}\n", b.display())).unwrap();
        let Err(Problems(p)) = from_text("main", &format!("include {}", a.display())) else {
            panic!("a self-including file must fail");
        };
        assert_eq!(p.len(), 1);
        assert!(p[0].contains("nests more than 16"), "{p:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn passwords_stay_out_of_messages() {
        let Err(Problems(p)) = from_text("r.conf", "requirepass a b\n") else {
            panic!()
        };
        assert!(!p[0].contains(" a b"), "{p:?}");
    }

    #[test]
    fn the_table_has_each_name_once() {
        let mut names: Vec<&str> = DIRECTIVES.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
    }

    #[test]
    fn every_acted_on_directive_is_handled_by_config_apply() {
        for (name, kind) in DIRECTIVES {
            if matches!(kind, Kind::Acts) {
                let r = Config::default().apply(name, &[]);
                assert!(
                    !matches!(r, Err(crate::config::ConfigError::Unsupported(_))),
                    "{name} is marked Acts but Config::apply does not know it"
                );
            }
        }
    }

    #[test]
    fn every_redis_param_is_classified() {
        for (name, _) in crate::config::REDIS_PARAMS {
            assert!(
                DIRECTIVES.iter().any(|(n, _)| n == name),
                "{name} is not in conffile::DIRECTIVES"
            );
        }
    }
}
