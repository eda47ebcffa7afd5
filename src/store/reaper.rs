//! The background reapers: one task per shard deletes keys whose TTL has passed.
//!
//! Lazy expiry alone would keep dead keys' memory until someone touched them; fixed-window
//! limiters create a key per user per window, most never read again. Each reaper asks its
//! shard for the next deadline (the earliest of its databases' timer wheels), sleeps until
//! then (at most `MAX_SLEEP`, or until the test clock moves), and deletes at most
//! `REAP_BATCH` keys per lock hold, yielding between batches, so a mass expiry at a window
//! boundary never holds a shard for long. The work done follows the keys that expire, not
//! the keys that live.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::store::Keyspace;
use crate::store::keylog::KeyEvent;

/// Most keys deleted per lock hold.
pub(crate) const REAP_BATCH: usize = 128;

/// Longest sleep between checks. Bounds how late a key inserted with an earlier deadline
/// than the one a reaper sleeps on can be reaped, without a wake-up on every insert.
pub(crate) const MAX_SLEEP: Duration = Duration::from_millis(100);

/// Where a reaper hands the events of the keys it expired (when shards log them), after it
/// released the shard: the server publishes them as keyspace notifications.
pub(crate) type OnEvents = Arc<dyn Fn(Vec<KeyEvent>) + Send + Sync>;

/// Told how long each pass that deleted something held its shard (the server records the
/// slow ones as LATENCY's `expire-cycle` event).
pub(crate) type OnPass = Arc<dyn Fn(Duration) + Send + Sync>;

/// Starts one reaper task per shard on `runtime` (the server gives them a thread of their
/// own, off the event loops); they stop when `stop` is cancelled.
pub(crate) fn spawn(
    runtime: &tokio::runtime::Handle,
    keyspace: Arc<Keyspace>,
    clock: Clock,
    stop: CancellationToken,
    on_events: OnEvents,
    on_pass: OnPass,
) {
    for i in 0..keyspace.shard_count() {
        let ks = keyspace.clone();
        let clock = clock.clone();
        let stop = stop.clone();
        let on_events = on_events.clone();
        let on_pass = on_pass.clone();
        runtime.spawn(async move {
            let mut events = Vec::new();
            loop {
                let now = clock.now_ms();
                let started = std::time::Instant::now();
                let reaped = ks.try_reap_shard(i, now, REAP_BATCH, &mut events);
                if reaped.is_some_and(|((n, _), _)| n > 0) {
                    on_pass(started.elapsed());
                }
                if !events.is_empty() {
                    on_events(std::mem::take(&mut events));
                }
                // Client-side caching hears of the keys expired here (and its table is
                // trimmed) without waiting for a command.
                ks.tracking().tick();
                let Some(((_, more), next)) = reaped else {
                    // Held (by a script, maybe for long): try again shortly, without blocking.
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(1)) => continue,
                        _ = stop.cancelled() => return,
                    }
                };
                if more {
                    tokio::task::yield_now().await;
                    continue;
                }
                let wait = match next {
                    Some(at) if at > now => Duration::from_millis(at - now).min(MAX_SLEEP),
                    Some(_) => Duration::from_millis(1),
                    None => MAX_SLEEP,
                };
                tokio::select! {
                    _ = clock.sleep_at_most(wait) => {}
                    _ = stop.cancelled() => return,
                }
            }
        });
    }
}
