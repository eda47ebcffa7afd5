//! The settings read on every command or write, kept in atomics ([`LiveSettings`]) so the hot
//! path neither clones the `Config` nor takes its lock. Whoever changes the `Config` (CONFIG
//! SET) publishes it with `LiveSettings::store`.

use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};

use super::{Config, EvictionPolicy, OutputBufferLimit};

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
    tcp_keepalive: AtomicU64,
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
    hll_sparse_max_bytes: AtomicUsize,
    /// `min-replicas-to-write`, 0 when `min-replicas-max-lag` is 0 (the check is then off).
    min_replicas: AtomicU64,
    min_replicas_max_lag: AtomicU64,
    stream_node_bytes: AtomicUsize,
    stream_node_entries: AtomicUsize,
    /// `proto-max-bulk-len`: the request parser's limit, read once per batch (and after a
    /// command that may have changed it), as Redis reads it on every parse.
    proto_max_bulk_len: AtomicUsize,
}

impl LiveSettings {
    /// Settings taken from `config`.
    pub fn new(config: &Config) -> Self {
        let live = LiveSettings::default();
        live.store(config);
        live
    }

    /// `min-replicas-to-write` and `min-replicas-max-lag` as Redis applies them: (needed,
    /// max lag in seconds), needed 0 when the check is off.
    pub fn min_replicas(&self) -> (u64, u64) {
        (
            self.min_replicas.load(Ordering::Relaxed),
            self.min_replicas_max_lag.load(Ordering::Relaxed),
        )
    }

    /// Publishes `config`'s values.
    pub fn store(&self, config: &Config) {
        let r = &config.repl;
        let needed = if r.min_replicas_max_lag == 0 {
            0
        } else {
            r.min_replicas_to_write
        };
        self.min_replicas.store(needed, Ordering::Relaxed);
        self.min_replicas_max_lag
            .store(r.min_replicas_max_lag, Ordering::Relaxed);
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
        self.tcp_keepalive
            .store(config.tcp_keepalive, Ordering::Relaxed);
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
        self.hll_sparse_max_bytes
            .store(config.hll_sparse_max_bytes, Ordering::Relaxed);
        self.stream_node_bytes
            .store(config.stream_node_max_bytes, Ordering::Relaxed);
        self.stream_node_entries
            .store(config.stream_node_max_entries, Ordering::Relaxed);
        self.proto_max_bulk_len
            .store(config.proto_max_bulk_len, Ordering::Relaxed);
    }

    /// `proto-max-bulk-len`.
    #[inline]
    pub fn proto_max_bulk_len(&self) -> usize {
        self.proto_max_bulk_len.load(Ordering::Relaxed)
    }

    /// `stream-node-max-bytes` and `stream-node-max-entries`.
    pub fn stream_node_limits(&self) -> (usize, u64) {
        (
            self.stream_node_bytes.load(Ordering::Relaxed),
            self.stream_node_entries.load(Ordering::Relaxed) as u64,
        )
    }

    /// `hll-sparse-max-bytes`.
    pub fn hll_sparse_max_bytes(&self) -> usize {
        self.hll_sparse_max_bytes.load(Ordering::Relaxed)
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

    /// The `notify-keyspace-events` classes (`super::keyspace_events` bits; 0: off). Read once per
    /// command, so a command with notifications off pays one relaxed load.
    pub fn notify_keyspace_events(&self) -> u32 {
        self.notify.load(Ordering::Relaxed)
    }

    /// The sorted sets' encoding thresholds in force (`zset-max-listpack-entries` and
    /// `zset-max-listpack-value`, which CONFIG SET changes at run time).
    pub fn zset_limits(&self) -> crate::store::zset::ZsetLimits {
        crate::store::zset::ZsetLimits {
            max_listpack_entries: self.zset_entries.load(Ordering::Relaxed),
            max_listpack_value: self.zset_value.load(Ordering::Relaxed),
        }
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

    /// `tcp-keepalive` in seconds (0: off).
    pub fn tcp_keepalive(&self) -> u64 {
        self.tcp_keepalive.load(Ordering::Relaxed)
    }
}
