//! The memory cap: when live heap bytes pass `maxmemory`, evict keys by the configured policy
//! before running the next command, as Redis's `performEvictions` does.
//!
//! What is measured is `alloc_stats::allocated()`, the live heap of the whole process (the
//! same number INFO reports as `used_memory`), so the cap covers everything a key really costs:
//! its entry, key and value bytes, the hash-table slot and the expiry timer. It also covers
//! connection buffers, as Redis's does; with `noeviction`, or when no key qualifies, the
//! commands that may grow memory (flag `denyoom`) are refused instead.
//!
//! Eviction works one shard at a time: lock a shard, sample `maxmemory-samples` keys, delete
//! the best candidate, unlock. It repeats until the process is back under the cap, but for no
//! longer than `EVICTION_BUDGET` per command, so a large overshoot (a CONFIG SET that lowers
//! the cap) is worked off over several commands instead of stalling one client; meanwhile the
//! commands run (Redis's "eviction still in progress").

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::config::LiveSettings;
use crate::store::Keyspace;
use crate::store::keylog::KeyEvent;
use crate::store::shard::Evicted;

/// Longest time one command spends evicting.
pub(crate) const EVICTION_BUDGET: Duration = Duration::from_millis(1);

/// Redis's reply to a `denyoom` command while over the cap.
pub(crate) const OOM_ERROR: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// What `perform_evictions` achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Under the cap (or no cap).
    Ok,
    /// Keys were evicted but memory is still over the cap; the time budget ran out.
    Running,
    /// Over the cap and nothing can be evicted (policy `noeviction`, or no key qualifies).
    Fail,
}

/// Bytes counted against `maxmemory`.
pub(crate) fn used_memory() -> usize {
    crate::alloc_stats::allocated()
}

/// Evicts keys until memory is under `live.maxmemory()` or the budget runs out.
/// `evicted` counts evicted keys (INFO's `evicted_keys`); the evicted (or expired) keys'
/// events, when logged, go to `events`, to be published by the caller (no shard is held
/// on return).
pub(crate) fn perform_evictions(
    keyspace: &Keyspace,
    live: &LiveSettings,
    evicted: &AtomicU64,
    now_ms: u64,
    events: &mut Vec<KeyEvent>,
) -> Outcome {
    let max = live.maxmemory();
    if max == 0 || used_memory() <= max {
        return Outcome::Ok;
    }
    let policy = live.policy();
    let samples = live.samples();
    let started = Instant::now();
    let mut rounds = 0u32;
    loop {
        match keyspace.evict_one(policy, samples, now_ms, events) {
            None => {
                return if used_memory() <= max {
                    Outcome::Ok
                } else {
                    Outcome::Fail
                };
            }
            Some(Evicted::Key) => {
                evicted.fetch_add(1, Ordering::Relaxed);
            }
            Some(Evicted::Expired) => {}
        }
        if used_memory() <= max {
            return Outcome::Ok;
        }
        rounds += 1;
        if rounds.is_multiple_of(16) && started.elapsed() >= EVICTION_BUDGET {
            return Outcome::Running;
        }
    }
}

impl Keyspace {
    /// One eviction: tries the shards from a random one on until one deletes a key.
    /// None if no shard has a candidate. Logged key events are moved to `events`.
    pub fn evict_one(
        &self,
        policy: crate::config::EvictionPolicy,
        samples: usize,
        now_ms: u64,
        events: &mut Vec<KeyEvent>,
    ) -> Option<Evicted> {
        let n = self.shard_count();
        let seed: u64 = rand::random();
        let start = (seed % n as u64) as usize;
        (0..n).find_map(|k| {
            let i = (start + k) % n;
            let mut shard = self.lock_index(i);
            let done = shard.evict_one(policy, samples, now_ms, seed.rotate_left(k as u32 * 7));
            events.append(&mut shard.log.events);
            done
        })
    }
}
