//! INFO: the server's state in Redis's sections and field names (tools parse them, so
//! they follow Redis 7.0.15 exactly).

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::connection::mode;
use crate::cmd::{ArgCursor, Command, Ctx};
use crate::error::CmdResult;
use crate::protocol::Reply;

/// INFO [section …]
#[derive(Debug)]
pub struct Info {
    sections: Vec<String>,
}

impl Command for Info {
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

/// Builds INFO's text for the requested sections (Redis's names and formats).
///
/// INFO holds every shard (it is a whole-keyspace command) and reads the keyspace counters
/// through those locks, so it also works inside EXEC, which already holds them.
pub fn info_text(ctx: &mut Ctx<'_>, requested: &[String]) -> String {
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
    let mut out = String::new();
    let mut section = |title: &str, body: String| {
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let _ = write!(out, "# {title}\r\n{body}");
    };
    // Each section is a list of (field, value), in Redis 7.0.15's order and with only its
    // field names: tools tell servers apart by INFO, so sluice's own identity is kept out of
    // every section Redis has (it is in `INFO sluice`, below).
    let fields = |section: &mut dyn FnMut(&str, String), title: &str, list: &[(&str, String)]| {
        let mut b = String::new();
        for (k, v) in list {
            let _ = write!(b, "{k}:{v}\r\n");
        }
        section(title, b);
    };
    if wanted("server") {
        let executable = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        fields(
            &mut section,
            "Server",
            &[
                ("redis_version", cfg.redis_version.clone()),
                ("redis_git_sha1", "00000000".into()),
                ("redis_git_dirty", "0".into()),
                ("redis_build_id", "0".into()),
                (
                    "redis_mode",
                    String::from_utf8_lossy(mode(ctx)).into_owned(),
                ),
                (
                    "os",
                    format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
                ),
                ("arch_bits", usize::BITS.to_string()),
                ("monotonic_clock", "POSIX clock_gettime".into()),
                ("multiplexing_api", "epoll".into()),
                ("atomicvar_api", "c11-builtin".into()),
                ("gcc_version", "0.0.0".into()),
                ("process_id", std::process::id().to_string()),
                ("process_supervised", "no".into()),
                ("run_id", shared.run_id.clone()),
                ("tcp_port", shared.port.load(Ordering::Relaxed).to_string()),
                ("server_time_usec", (ctx.now_ns / 1000).to_string()),
                ("uptime_in_seconds", uptime.to_string()),
                ("uptime_in_days", (uptime / 86400).to_string()),
                ("hz", "10".into()),
                ("configured_hz", "10".into()),
                (
                    "lru_clock",
                    ((ctx.now_ms / 1000) & ((1 << 24) - 1)).to_string(),
                ),
                ("executable", executable),
                ("config_file", String::new()),
                ("io_threads_active", "0".into()),
            ],
        );
    }
    if wanted("clients") {
        fields(
            &mut section,
            "Clients",
            &[
                ("connected_clients", shared.clients.len().to_string()),
                ("cluster_connections", "0".into()),
                ("maxclients", cfg.maxclients.to_string()),
                ("client_recent_max_input_buffer", "0".into()),
                ("client_recent_max_output_buffer", "0".into()),
                (
                    "blocked_clients",
                    (shared.pause.waiting() + shared.blocked.len()).to_string(),
                ),
                ("tracking_clients", "0".into()),
                ("clients_in_timeout_table", "0".into()),
            ],
        );
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
        let zero = || "0".to_string();
        fields(
            &mut section,
            "Memory",
            &[
                ("used_memory", used.to_string()),
                ("used_memory_human", human_bytes(used)),
                ("used_memory_rss", rss.to_string()),
                ("used_memory_rss_human", human_bytes(rss)),
                ("used_memory_peak", peak.to_string()),
                ("used_memory_peak_human", human_bytes(peak)),
                (
                    "used_memory_peak_perc",
                    format!(
                        "{:.2}%",
                        if peak > 0 {
                            ratio(used, peak) * 100.0
                        } else {
                            100.0
                        }
                    ),
                ),
                (
                    "used_memory_overhead",
                    used.saturating_sub(dataset).to_string(),
                ),
                ("used_memory_startup", zero()),
                ("used_memory_dataset", dataset.to_string()),
                (
                    "used_memory_dataset_perc",
                    format!("{:.2}%", ratio(dataset, used) * 100.0),
                ),
                ("allocator_allocated", used.to_string()),
                ("allocator_active", used.to_string()),
                ("allocator_resident", rss.to_string()),
                ("total_system_memory", zero()),
                ("total_system_memory_human", human_bytes(0)),
                ("used_memory_lua", zero()),
                ("used_memory_vm_eval", zero()),
                ("used_memory_lua_human", human_bytes(0)),
                ("used_memory_scripts_eval", zero()),
                ("number_of_cached_scripts", shared.scripts.len().to_string()),
                ("number_of_functions", zero()),
                ("number_of_libraries", zero()),
                ("used_memory_vm_functions", zero()),
                ("used_memory_vm_total", zero()),
                ("used_memory_vm_total_human", human_bytes(0)),
                ("used_memory_functions", zero()),
                ("used_memory_scripts", zero()),
                ("used_memory_scripts_human", human_bytes(0)),
                ("maxmemory", cfg.maxmemory.to_string()),
                ("maxmemory_human", human_bytes(cfg.maxmemory)),
                ("maxmemory_policy", cfg.maxmemory_policy.name().to_string()),
                ("allocator_frag_ratio", "1.00".into()),
                ("allocator_frag_bytes", zero()),
                ("allocator_rss_ratio", format!("{:.2}", ratio(rss, used))),
                (
                    "allocator_rss_bytes",
                    (rss as i64 - used as i64).to_string(),
                ),
                ("rss_overhead_ratio", "1.00".into()),
                ("rss_overhead_bytes", zero()),
                (
                    "mem_fragmentation_ratio",
                    format!("{:.2}", ratio(rss, used)),
                ),
                (
                    "mem_fragmentation_bytes",
                    (rss as i64 - used as i64).to_string(),
                ),
                ("mem_not_counted_for_evict", zero()),
                ("mem_replication_backlog", zero()),
                ("mem_total_replication_buffers", zero()),
                ("mem_clients_slaves", zero()),
                ("mem_clients_normal", zero()),
                ("mem_cluster_links", zero()),
                ("mem_aof_buffer", zero()),
                ("mem_allocator", "libc".into()),
                ("active_defrag_running", zero()),
                ("lazyfree_pending_objects", zero()),
                ("lazyfreed_objects", zero()),
            ],
        );
    }
    if wanted("persistence") {
        let list: Vec<(&str, String)> = [
            ("loading", "0"),
            ("async_loading", "0"),
            ("current_cow_peak", "0"),
            ("current_cow_size", "0"),
            ("current_cow_size_age", "0"),
            ("current_fork_perc", "0.00"),
            ("current_save_keys_processed", "0"),
            ("current_save_keys_total", "0"),
            ("rdb_changes_since_last_save", "0"),
            ("rdb_bgsave_in_progress", "0"),
            ("rdb_last_save_time", "0"),
            ("rdb_last_bgsave_status", "ok"),
            ("rdb_last_bgsave_time_sec", "-1"),
            ("rdb_current_bgsave_time_sec", "-1"),
            ("rdb_saves", "0"),
            ("rdb_last_cow_size", "0"),
            ("rdb_last_load_keys_expired", "0"),
            ("rdb_last_load_keys_loaded", "0"),
            ("aof_enabled", "0"),
            ("aof_rewrite_in_progress", "0"),
            ("aof_rewrite_scheduled", "0"),
            ("aof_last_rewrite_time_sec", "-1"),
            ("aof_current_rewrite_time_sec", "-1"),
            ("aof_last_bgrewrite_status", "ok"),
            ("aof_rewrites", "0"),
            ("aof_rewrites_consecutive_failures", "0"),
            ("aof_last_write_status", "ok"),
            ("aof_last_cow_size", "0"),
            ("module_fork_in_progress", "0"),
            ("module_fork_last_cow_size", "0"),
        ]
        .into_iter()
        .map(|(k, v)| (k, v.to_string()))
        .collect();
        fields(&mut section, "Persistence", &list);
    }
    if wanted("stats") {
        let s = &shared.stats;
        let ks = keyspace_stats;
        let pubsub_counts = shared.pubsub.counts();
        let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed).to_string();
        let zero = || "0".to_string();
        fields(
            &mut section,
            "Stats",
            &[
                ("total_connections_received", n(&s.total_connections)),
                ("total_commands_processed", n(&s.total_commands)),
                ("instantaneous_ops_per_sec", zero()),
                ("total_net_input_bytes", n(&s.net_input_bytes)),
                ("total_net_output_bytes", n(&s.net_output_bytes)),
                ("total_net_repl_input_bytes", zero()),
                ("total_net_repl_output_bytes", zero()),
                ("instantaneous_input_kbps", "0.00".into()),
                ("instantaneous_output_kbps", "0.00".into()),
                ("instantaneous_input_repl_kbps", "0.00".into()),
                ("instantaneous_output_repl_kbps", "0.00".into()),
                ("rejected_connections", n(&s.rejected_connections)),
                ("sync_full", zero()),
                ("sync_partial_ok", zero()),
                ("sync_partial_err", zero()),
                ("expired_keys", ks.expired_keys.to_string()),
                ("expired_stale_perc", "0.00".into()),
                ("expired_time_cap_reached_count", zero()),
                ("expire_cycle_cpu_milliseconds", zero()),
                ("evicted_keys", n(&s.evicted_keys)),
                ("evicted_clients", zero()),
                ("total_eviction_exceeded_time", zero()),
                ("current_eviction_exceeded_time", zero()),
                ("keyspace_hits", ks.keyspace_hits.to_string()),
                ("keyspace_misses", ks.keyspace_misses.to_string()),
                ("pubsub_channels", pubsub_counts[0].to_string()),
                ("pubsub_patterns", pubsub_counts[1].to_string()),
                ("pubsubshard_channels", pubsub_counts[2].to_string()),
                ("latest_fork_usec", zero()),
                ("total_forks", zero()),
                ("migrate_cached_sockets", zero()),
                ("slave_expires_tracked_keys", zero()),
                ("active_defrag_hits", zero()),
                ("active_defrag_misses", zero()),
                ("active_defrag_key_hits", zero()),
                ("active_defrag_key_misses", zero()),
                ("total_active_defrag_time", zero()),
                ("current_active_defrag_time", zero()),
                ("tracking_total_keys", zero()),
                ("tracking_total_items", zero()),
                ("tracking_total_prefixes", zero()),
                ("unexpected_error_replies", zero()),
                ("total_error_replies", n(&s.total_error_replies)),
                ("dump_payload_sanitizations", zero()),
                ("total_reads_processed", zero()),
                ("total_writes_processed", zero()),
                ("io_threaded_reads_processed", zero()),
                ("io_threaded_writes_processed", zero()),
                ("reply_buffer_shrinks", zero()),
                ("reply_buffer_expands", zero()),
            ],
        );
    }
    if wanted("replication") {
        let list: Vec<(&str, String)> = [
            ("role", "master"),
            ("connected_slaves", "0"),
            ("master_failover_state", "no-failover"),
            ("master_replid", "0000000000000000000000000000000000000000"),
            ("master_replid2", "0000000000000000000000000000000000000000"),
            ("master_repl_offset", "0"),
            ("second_repl_offset", "-1"),
            ("repl_backlog_active", "0"),
            ("repl_backlog_size", "1048576"),
            ("repl_backlog_first_byte_offset", "0"),
            ("repl_backlog_histlen", "0"),
        ]
        .into_iter()
        .map(|(k, v)| (k, v.to_string()))
        .collect();
        fields(&mut section, "Replication", &list);
    }
    if wanted("cpu") {
        let (user, sys) = crate::alloc_stats::cpu_times();
        fields(
            &mut section,
            "CPU",
            &[
                ("used_cpu_sys", format!("{sys:.6}")),
                ("used_cpu_user", format!("{user:.6}")),
                ("used_cpu_sys_children", "0.000000".into()),
                ("used_cpu_user_children", "0.000000".into()),
                ("used_cpu_sys_main_thread", format!("{sys:.6}")),
                ("used_cpu_user_main_thread", format!("{user:.6}")),
            ],
        );
    }
    if wanted("modules") {
        section("Modules", String::new());
    }
    if wanted("commandstats") {
        let mut b = String::new();
        for (spec, st) in shared.table.stats() {
            let calls = st.calls.load(Ordering::Relaxed);
            let usec = st.usec.load(Ordering::Relaxed);
            let failed = st.failed.load(Ordering::Relaxed);
            let _ = write!(
                b,
                "cmdstat_{}:calls={calls},usec={usec},usec_per_call={:.2},rejected_calls=0,failed_calls={failed}\r\n",
                spec.name,
                if calls > 0 {
                    usec as f64 / calls as f64
                } else {
                    0.0
                }
            );
        }
        section("Commandstats", b);
    }
    if wanted("errorstats") {
        section("Errorstats", String::new());
    }
    if wanted("latencystats") {
        // Redis 7.0 fills this with per-command latency percentiles; sluice keeps none.
        section("Latencystats", String::new());
    }
    if wanted("cluster") {
        let enabled = shared.cluster.is_some() as u8;
        section("Cluster", format!("cluster_enabled:{enabled}\r\n"));
    }
    if wanted("keyspace") {
        let mut b = String::new();
        for &(db, keys, expires, avg_ttl) in &db_summary {
            let _ = write!(
                b,
                "db{db}:keys={keys},expires={expires},avg_ttl={avg_ttl}\r\n"
            );
        }
        section("Keyspace", b);
    }
    if requested.iter().any(|s| s == "sluice") {
        fields(
            &mut section,
            "Sluice",
            &[
                ("sluice_version", env!("CARGO_PKG_VERSION").to_string()),
                ("redis_version_reported", cfg.redis_version.clone()),
                ("test_mode", u8::from(cfg.test_mode).to_string()),
            ],
        );
    }
    out
}
