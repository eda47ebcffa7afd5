//! INFO: the server's state in Redis's sections and field names (tools parse them, so
//! they follow Redis 7.0.15 exactly).

use std::fmt::{Display, Write as _};
use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::commands::server::connection::mode;
use crate::engine::{ArgCursor, Command, Ctx};
use crate::error::CmdResult;
use crate::protocol::Reply;

/// INFO [section …]
#[derive(Debug)]
pub(super) struct Info {
    sections: Vec<String>,
}

impl Command<'_> for Info {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Info {
            sections: a
                .rest()
                .iter()
                .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
                .collect(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Verbatim(Bytes::from(info_text(ctx, &self.sections))))
    }
}

const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
];

fn human_bytes(n: usize) -> String {
    let n = n as f64;
    if n < 1024.0 {
        format!("{n}B")
    } else if n < 1024.0 * 1024.0 {
        format!("{:.2}K", n / 1024.0)
    } else if n < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}M", n / (1024.0 * 1024.0))
    } else {
        format!("{:.2}G", n / (1024.0 * 1024.0 * 1024.0))
    }
}

/// INFO's text as Redis writes it: sections headed `# Title`, one `field:value` line each,
/// a blank line between sections. Every line goes through `field` (or `record`), so no
/// section spells the format out itself.
#[derive(Debug, Default)]
struct InfoText(String);

impl InfoText {
    /// Starts section `title`.
    fn section(&mut self, title: &str) -> &mut Self {
        if !self.0.is_empty() {
            self.0.push_str("\r\n");
        }
        let _ = write!(self.0, "# {title}\r\n");
        self
    }

    /// One `field:value` line.
    fn field(&mut self, field: impl Display, value: impl Display) -> &mut Self {
        let _ = write!(self.0, "{field}:{value}\r\n");
        self
    }

    /// One line whose value is itself `name=value` pairs joined by commas (commandstats,
    /// keyspace).
    fn record(&mut self, field: impl Display, pairs: &[(&str, &dyn Display)]) -> &mut Self {
        let _ = write!(self.0, "{field}:");
        for (i, (name, value)) in pairs.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(self.0, "{sep}{name}={value}");
        }
        self.0.push_str("\r\n");
        self
    }
}

/// Builds INFO's text for the requested sections (Redis's names and formats).
///
/// INFO holds every shard (it is a whole-keyspace command) and reads the keyspace counters
/// through those locks, so it also works inside EXEC, which already holds them.
pub(super) fn info_text(ctx: &mut Ctx<'_>, requested: &[String]) -> String {
    let structure_memory = ctx.store.fold(0usize, |acc, s| acc + s.structure_memory());
    let keyspace_stats = ctx.store.stats();
    let db_summary = ctx.store.db_summary(ctx.now_ms);
    let ctx = &*ctx;
    let all = requested.iter().any(|s| s == "all" || s == "everything");
    let wanted = |name: &str| -> bool {
        if requested.is_empty() || requested.iter().any(|s| s == "default") {
            return DEFAULT_SECTIONS.contains(&name);
        }
        // "all" is every default section plus commandstats and latencystats; `sluice` is
        // printed only when asked for by name, so no Redis-aware tool ever sees it.
        (all && (DEFAULT_SECTIONS.contains(&name)
            || name == "commandstats"
            || name == "latencystats"))
            || requested.iter().any(|s| s == name)
    };
    let shared = ctx.shared;
    let cfg = shared.config();
    let uptime = shared.started.elapsed().as_secs();
    // Each section lists Redis 7.0.15's fields in its order and only those: tools tell
    // servers apart by INFO, so sluice's own identity is kept out of every section Redis has
    // (it is in `INFO sluice`, below).
    let mut out = InfoText::default();
    if wanted("server") {
        let executable = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        out.section("Server")
            .field("redis_version", &cfg.redis_version)
            .field("redis_git_sha1", "00000000")
            .field("redis_git_dirty", 0)
            .field("redis_build_id", 0)
            .field("redis_mode", String::from_utf8_lossy(mode(ctx)))
            .field(
                "os",
                format_args!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
            )
            .field("arch_bits", usize::BITS)
            .field("monotonic_clock", "POSIX clock_gettime")
            .field("multiplexing_api", "epoll")
            .field("atomicvar_api", "c11-builtin")
            .field("gcc_version", "0.0.0")
            .field("process_id", std::process::id())
            .field("process_supervised", "no")
            .field("run_id", &shared.run_id)
            .field("tcp_port", shared.port.load(Ordering::Relaxed))
            .field("server_time_usec", ctx.now_ns / 1000)
            .field("uptime_in_seconds", uptime)
            .field("uptime_in_days", uptime / 86400)
            .field("hz", 10)
            .field("configured_hz", 10)
            .field("lru_clock", (ctx.now_ms / 1000) & ((1 << 24) - 1))
            .field("executable", executable)
            .field("config_file", cfg.config_file.as_deref().unwrap_or(""))
            .field("io_threads_active", 0);
    }
    if wanted("clients") {
        out.section("Clients")
            .field("connected_clients", shared.clients.len())
            .field("cluster_connections", 0)
            .field("maxclients", cfg.maxclients)
            .field("client_recent_max_input_buffer", 0)
            .field("client_recent_max_output_buffer", 0)
            .field(
                "blocked_clients",
                shared.pause.waiting() + shared.blocked.len(),
            )
            .field("tracking_clients", shared.keyspace.tracking().stats().0)
            .field("clients_in_timeout_table", 0);
    }
    if wanted("memory") {
        let used = crate::alloc_stats::allocated();
        let rss = crate::alloc_stats::rss();
        let peak = crate::alloc_stats::peak();
        // O(shards), not O(keys): monitoring polls INFO, and walking every key would hold
        // each shard's lock for milliseconds on a large keyspace (as Redis, dataset is what
        // remains of used_memory once the structures are counted out).
        let overhead = structure_memory;
        let dataset = used.saturating_sub(overhead);
        let ratio = |a: usize, b: usize| if b > 0 { a as f64 / b as f64 } else { 0.0 };
        let peak_perc = if peak > 0 {
            ratio(used, peak) * 100.0
        } else {
            100.0
        };
        let rss_minus_used = rss as i64 - used as i64;
        out.section("Memory")
            .field("used_memory", used)
            .field("used_memory_human", human_bytes(used))
            .field("used_memory_rss", rss)
            .field("used_memory_rss_human", human_bytes(rss))
            .field("used_memory_peak", peak)
            .field("used_memory_peak_human", human_bytes(peak))
            .field("used_memory_peak_perc", format_args!("{peak_perc:.2}%"))
            .field("used_memory_overhead", used.saturating_sub(dataset))
            .field("used_memory_startup", 0)
            .field("used_memory_dataset", dataset)
            .field(
                "used_memory_dataset_perc",
                format_args!("{:.2}%", ratio(dataset, used) * 100.0),
            )
            .field("allocator_allocated", used)
            .field("allocator_active", used)
            .field("allocator_resident", rss)
            .field("total_system_memory", 0)
            .field("total_system_memory_human", human_bytes(0))
            .field("used_memory_lua", 0)
            .field("used_memory_vm_eval", 0)
            .field("used_memory_lua_human", human_bytes(0))
            .field("used_memory_scripts_eval", 0)
            .field("number_of_cached_scripts", shared.scripts.len())
            .field("number_of_functions", 0)
            .field("number_of_libraries", 0)
            .field("used_memory_vm_functions", 0)
            .field("used_memory_vm_total", 0)
            .field("used_memory_vm_total_human", human_bytes(0))
            .field("used_memory_functions", 0)
            .field("used_memory_scripts", 0)
            .field("used_memory_scripts_human", human_bytes(0))
            .field("maxmemory", cfg.maxmemory)
            .field("maxmemory_human", human_bytes(cfg.maxmemory))
            .field("maxmemory_policy", cfg.maxmemory_policy.name())
            .field("allocator_frag_ratio", "1.00")
            .field("allocator_frag_bytes", 0)
            .field(
                "allocator_rss_ratio",
                format_args!("{:.2}", ratio(rss, used)),
            )
            .field("allocator_rss_bytes", rss_minus_used)
            .field("rss_overhead_ratio", "1.00")
            .field("rss_overhead_bytes", 0)
            .field(
                "mem_fragmentation_ratio",
                format_args!("{:.2}", ratio(rss, used)),
            )
            .field("mem_fragmentation_bytes", rss_minus_used)
            .field("mem_not_counted_for_evict", 0)
            .field("mem_replication_backlog", 0)
            .field("mem_total_replication_buffers", 0)
            .field(
                "mem_clients_slaves",
                shared.clients.memory_of_kind(crate::client::KIND_REPLICA),
            )
            .field(
                "mem_clients_normal",
                shared.clients.memory_of_kind(crate::client::KIND_NORMAL),
            )
            .field("mem_cluster_links", 0)
            .field("mem_aof_buffer", 0)
            .field("mem_allocator", "libc")
            .field("active_defrag_running", 0)
            .field("lazyfree_pending_objects", shared.lazyfree.pending())
            .field("lazyfreed_objects", shared.lazyfree.freed());
    }
    if wanted("persistence") {
        out.section("Persistence");
        for (field, value) in crate::services::persist::info_fields(shared, keyspace_stats.changes)
        {
            out.field(field, value);
        }
        for (field, value) in crate::services::aof::info_fields(shared) {
            out.field(field, value);
        }
    }
    if wanted("stats") {
        let tracking = shared.keyspace.tracking().stats();
        let s = &shared.stats;
        let ks = keyspace_stats;
        let pubsub_counts = shared.pubsub.counts();
        let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        out.section("Stats")
            .field("total_connections_received", n(&s.total_connections))
            .field("total_commands_processed", s.total_commands.get())
            .field("instantaneous_ops_per_sec", 0)
            .field("total_net_input_bytes", s.net_input_bytes.get())
            .field("total_net_output_bytes", s.net_output_bytes.get())
            .field("total_net_repl_input_bytes", 0)
            .field("total_net_repl_output_bytes", 0)
            .field("instantaneous_input_kbps", "0.00")
            .field("instantaneous_output_kbps", "0.00")
            .field("instantaneous_input_repl_kbps", "0.00")
            .field("instantaneous_output_repl_kbps", "0.00")
            .field("rejected_connections", n(&s.rejected_connections))
            .field("sync_full", 0)
            .field("sync_partial_ok", 0)
            .field("sync_partial_err", 0)
            .field("expired_keys", ks.expired_keys)
            .field("expired_stale_perc", "0.00")
            .field("expired_time_cap_reached_count", 0)
            .field("expire_cycle_cpu_milliseconds", 0)
            .field("evicted_keys", n(&s.evicted_keys))
            .field("evicted_clients", 0)
            .field("total_eviction_exceeded_time", 0)
            .field("current_eviction_exceeded_time", 0)
            .field("keyspace_hits", ks.keyspace_hits)
            .field("keyspace_misses", ks.keyspace_misses)
            .field("pubsub_channels", pubsub_counts[0])
            .field("pubsub_patterns", pubsub_counts[1])
            .field("pubsubshard_channels", pubsub_counts[2])
            .field("latest_fork_usec", 0)
            .field("total_forks", 0)
            .field("migrate_cached_sockets", 0)
            .field("slave_expires_tracked_keys", 0)
            .field("active_defrag_hits", 0)
            .field("active_defrag_misses", 0)
            .field("active_defrag_key_hits", 0)
            .field("active_defrag_key_misses", 0)
            .field("total_active_defrag_time", 0)
            .field("current_active_defrag_time", 0)
            .field("tracking_total_keys", tracking.1)
            .field("tracking_total_items", tracking.2)
            .field("tracking_total_prefixes", tracking.3)
            .field("unexpected_error_replies", 0)
            .field("total_error_replies", n(&s.total_error_replies))
            .field("dump_payload_sanitizations", 0)
            .field("total_reads_processed", 0)
            .field("total_writes_processed", 0)
            .field("io_threaded_reads_processed", 0)
            .field("io_threaded_writes_processed", 0)
            .field("reply_buffer_shrinks", 0)
            .field("reply_buffer_expands", 0);
    }
    if wanted("replication") {
        out.section("Replication");
        for (field, value) in crate::commands::replication::info_fields(shared) {
            out.field(field, value);
        }
    }
    if wanted("cpu") {
        let (user, sys) = crate::alloc_stats::cpu_times();
        out.section("CPU")
            .field("used_cpu_sys", format_args!("{sys:.6}"))
            .field("used_cpu_user", format_args!("{user:.6}"))
            .field("used_cpu_sys_children", "0.000000")
            .field("used_cpu_user_children", "0.000000")
            .field("used_cpu_sys_main_thread", format_args!("{sys:.6}"))
            .field("used_cpu_user_main_thread", format_args!("{user:.6}"));
    }
    if wanted("modules") {
        out.section("Modules");
    }
    if wanted("commandstats") {
        out.section("Commandstats");
        for c in crate::services::stats::commandstats(&shared.table) {
            out.record(
                format_args!("cmdstat_{}", c.name),
                &[
                    ("calls", &c.calls),
                    ("usec", &c.usec),
                    ("usec_per_call", &format_args!("{:.2}", c.usec_per_call())),
                    ("rejected_calls", &c.rejected),
                    ("failed_calls", &c.failed),
                ],
            );
        }
    }
    if wanted("errorstats") {
        out.section("Errorstats");
        for (prefix, count) in shared.errors.counts() {
            out.record(format_args!("errorstat_{prefix}"), &[("count", &count)]);
        }
    }
    if wanted("latencystats") {
        out.section("Latencystats");
        // `latency-tracking-info-percentiles` is fixed at Redis's default.
        for (name, values) in
            crate::services::stats::latencystats(&shared.table, &[50.0, 99.0, 99.9])
        {
            let shown: Vec<(&str, String)> = values
                .iter()
                .map(|(p, us)| (p.as_str(), format!("{us:.3}")))
                .collect();
            let pairs: Vec<(&str, &dyn Display)> =
                shown.iter().map(|(p, v)| (*p, v as &dyn Display)).collect();
            out.record(format_args!("latency_percentiles_usec_{name}"), &pairs);
        }
    }
    if wanted("cluster") {
        out.section("Cluster")
            .field("cluster_enabled", u8::from(shared.cluster.is_some()));
    }
    if wanted("keyspace") {
        out.section("Keyspace");
        for &(db, keys, expires, avg_ttl) in &db_summary {
            out.record(
                format_args!("db{db}"),
                &[
                    ("keys", &keys),
                    ("expires", &expires),
                    ("avg_ttl", &avg_ttl),
                ],
            );
        }
    }
    if requested.iter().any(|s| s == "sluice") {
        out.section("Sluice")
            .field("sluice_version", env!("CARGO_PKG_VERSION"))
            .field("redis_version_reported", &cfg.redis_version)
            .field("test_mode", u8::from(cfg.test_mode));
    }
    out.0
}
