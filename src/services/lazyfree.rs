//! Freeing large values off the command path: UNLINK hands a deleted value whose freeing
//! is more work than `LAZYFREE_THRESHOLD` (Redis's `lazyfreeGetFreeEffort` > 64) to a
//! thread of its own (`sluice-lazyfree`), as Redis's `dbAsyncDelete` hands it to its
//! lazyfree bio thread, so deleting a million-member set does not hold its shard (or the
//! client) while the memory is given back. INFO's `lazyfree_pending_objects` and
//! `lazyfreed_objects` count them (CONFIG RESETSTAT resets the second).
//!
//! The queue is bounded: past `MAX_PENDING` values waiting, a value is freed where it was
//! deleted, as if it were small.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};

use crate::store::Value;

/// Freeing effort above which a value is freed on the lazyfree thread (Redis's).
pub(crate) const LAZYFREE_THRESHOLD: usize = 64;

/// Most values waiting for the thread.
const MAX_PENDING: u64 = 4096;

#[derive(Debug, Default)]
struct Counters {
    pending: AtomicU64,
    freed: AtomicU64,
}

/// The lazyfree thread's queue and its counters.
#[derive(Debug, Default)]
pub struct LazyFree {
    counters: Arc<Counters>,
    /// Started on first use.
    queue: OnceLock<Option<Mutex<mpsc::Sender<Value>>>>,
}

impl LazyFree {
    /// Frees `value`: on the lazyfree thread if it is large, here otherwise.
    pub fn free(&self, value: Value) {
        if value.free_effort() <= LAZYFREE_THRESHOLD
            || self.counters.pending.load(Ordering::Relaxed) >= MAX_PENDING
        {
            return;
        }
        let Some(queue) = self.queue.get_or_init(|| self.start()).as_ref() else {
            return;
        };
        let Ok(tx) = queue.lock() else {
            return;
        };
        self.counters.pending.fetch_add(1, Ordering::Relaxed);
        if let Err(mpsc::SendError(value)) = tx.send(value) {
            self.counters.pending.fetch_sub(1, Ordering::Relaxed);
            drop(tx);
            drop(value);
        }
    }

    /// Values waiting to be freed (INFO `lazyfree_pending_objects`).
    pub fn pending(&self) -> u64 {
        self.counters.pending.load(Ordering::Relaxed)
    }

    /// Values freed on the thread since the last CONFIG RESETSTAT (INFO `lazyfreed_objects`).
    pub fn freed(&self) -> u64 {
        self.counters.freed.load(Ordering::Relaxed)
    }

    /// CONFIG RESETSTAT.
    pub fn reset_stats(&self) {
        self.counters.freed.store(0, Ordering::Relaxed);
    }

    fn start(&self) -> Option<Mutex<mpsc::Sender<Value>>> {
        let (tx, rx) = mpsc::channel::<Value>();
        let counters = self.counters.clone();
        let spawned = std::thread::Builder::new()
            .name("sluice-lazyfree".into())
            .spawn(move || {
                for value in rx {
                    drop(value);
                    counters.pending.fetch_sub(1, Ordering::Relaxed);
                    counters.freed.fetch_add(1, Ordering::Relaxed);
                }
            });
        match spawned {
            Ok(_) => Some(Mutex::new(tx)),
            Err(e) => {
                tracing::warn!("cannot start the lazyfree thread ({e}): freeing in place");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_large_values_go_to_the_thread() {
        let lf = LazyFree::default();
        lf.free(Value::Int(1));
        let list: std::collections::VecDeque<bytes::Bytes> = (0..1000)
            .map(|i| bytes::Bytes::from(i.to_string()))
            .collect();
        lf.free(Value::List(Box::new(list)));
        let start = std::time::Instant::now();
        while lf.freed() < 1 {
            assert!(start.elapsed() < std::time::Duration::from_secs(5));
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!((lf.freed(), lf.pending()), (1, 0));
        lf.reset_stats();
        assert_eq!(lf.freed(), 0);
    }
}
