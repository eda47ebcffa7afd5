//! A subscribed connection's state: the channels, patterns and shard channels it listens to,
//! and its queue of push messages (pub/sub messages and its own subscription confirmations)
//! waiting to be written.
//!
//! Publishers on any thread append already-encoded messages to the queue; the connection's
//! own loop takes them and writes them between its replies. The queue is counted in bytes
//! (queued plus taken but not yet written) and bounded as Redis bounds a pub/sub client's
//! output buffer (`client-output-buffer-limit pubsub`, default 32mb 8mb 60): past the hard
//! limit, or above the soft limit for longer than the soft time, the queue is marked dropped,
//! its backlog freed, and the connection closes. Redis checks those limits when it adds to a
//! client's output, and so does `push`.

use std::collections::VecDeque;

use indexmap::IndexSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The limit a queue is held to (the pubsub class of client-output-buffer-limit).
#[derive(Debug, Clone, Copy, Default)]
pub struct PushLimit {
    /// Bytes that drop the client at once (0: none).
    pub hard: usize,
    /// Bytes that drop the client once held for `soft_seconds` (0: none).
    pub soft: usize,
    /// How long the soft limit may be exceeded.
    pub soft_seconds: u64,
}

#[derive(Debug, Default)]
struct Inner {
    items: VecDeque<Bytes>,
    /// Messages for after the reply being made (a tracking client's own invalidations,
    /// see `client::tracking`): moved to `items` by `release_held`.
    held: Vec<Bytes>,
    /// When the queue went over the soft limit, while it stays over.
    over_soft_since: Option<Instant>,
}

/// One connection's queue of encoded push messages.
#[derive(Debug)]
pub struct PushQueue {
    inner: Mutex<Inner>,
    /// Bytes queued (not yet moved to the connection's output buffer).
    bytes: AtomicUsize,
    /// The connection's protocol version (2 or 3), so publishers encode for it.
    resp: AtomicU8,
    /// Woken when something is queued.
    pub ready: Notify,
    /// Cancelled when the queue passed its limit: the connection is to be closed.
    pub dropped: CancellationToken,
}

impl PushQueue {
    /// An empty queue for a connection speaking `resp`.
    pub fn new(resp: u8) -> Self {
        PushQueue {
            inner: Mutex::new(Inner::default()),
            bytes: AtomicUsize::new(0),
            resp: AtomicU8::new(resp),
            ready: Notify::new(),
            dropped: CancellationToken::new(),
        }
    }

    /// The protocol version publishers encode for.
    pub fn resp(&self) -> u8 {
        self.resp.load(Ordering::Relaxed)
    }

    /// Follows the connection's HELLO.
    pub fn set_resp(&self, resp: u8) {
        self.resp.store(resp, Ordering::Relaxed);
    }

    /// Appends one encoded message, unless the queue was dropped; drops it if this passes
    /// `limit`.
    pub fn push(&self, msg: Bytes, limit: PushLimit) {
        if self.dropped.is_cancelled() {
            return;
        }
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let total = self.bytes.fetch_add(msg.len(), Ordering::AcqRel) + msg.len();
        let mut over = limit.hard > 0 && total > limit.hard;
        if limit.soft > 0 && total > limit.soft {
            // As Redis: the first add over the soft limit starts the clock; an add once it
            // has run for more than the soft time drops the client.
            match inner.over_soft_since {
                None => inner.over_soft_since = Some(Instant::now()),
                Some(since) => {
                    if since.elapsed() > Duration::from_secs(limit.soft_seconds) {
                        over = true;
                    }
                }
            }
        } else {
            inner.over_soft_since = None;
        }
        if over {
            let backlog: usize = inner.items.drain(..).map(|b| b.len()).sum();
            self.bytes.fetch_sub(backlog + msg.len(), Ordering::AcqRel);
            self.dropped.cancel();
            return;
        }
        inner.items.push_back(msg);
        drop(inner);
        self.ready.notify_one();
    }

    /// Keeps `msg` until the reply of the command running now is out (`release_held`).
    pub fn push_held(&self, msg: Bytes) {
        if let Ok(mut inner) = self.inner.lock() {
            // Bounded by what one command changes; its size is counted once released.
            inner.held.push(msg);
        }
    }

    /// The reply is out: what was held is queued, after it.
    pub fn release_held(&self) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if inner.held.is_empty() {
            return;
        }
        let held = std::mem::take(&mut inner.held);
        let n: usize = held.iter().map(|m| m.len()).sum();
        self.bytes.fetch_add(n, Ordering::AcqRel);
        inner.items.extend(held);
        drop(inner);
        self.ready.notify_one();
    }

    /// Moves every queued message into the connection's output buffer (whose own limit
    /// check counts them from then on); returns their size.
    pub fn take_into(&self, out: &mut bytes::BytesMut) -> usize {
        let Ok(mut inner) = self.inner.lock() else {
            return 0;
        };
        let mut n = 0;
        for m in inner.items.drain(..) {
            n += m.len();
            out.extend_from_slice(&m);
        }
        self.bytes.fetch_sub(n, Ordering::AcqRel);
        n
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.inner
            .lock()
            .map(|i| i.items.is_empty())
            .unwrap_or(true)
    }

    /// Bytes queued and unwritten.
    pub fn pending(&self) -> usize {
        self.bytes.load(Ordering::Acquire)
    }
}

/// What one connection is subscribed to, with its queue.
#[derive(Debug)]
pub struct Subscriptions {
    /// Where publishers put its messages.
    pub queue: std::sync::Arc<PushQueue>,
    /// SUBSCRIBE channels.
    pub channels: IndexSet<Bytes>,
    /// PSUBSCRIBE patterns, in subscription order (PUNSUBSCRIBE without arguments answers in
    /// that order, as Redis, which keeps them in a list).
    pub patterns: IndexSet<Bytes>,
    /// SSUBSCRIBE shard channels.
    pub shard_channels: IndexSet<Bytes>,
}

impl Subscriptions {
    /// No subscriptions yet, with a fresh queue.
    pub fn new(resp: u8) -> Self {
        Self::with_queue(std::sync::Arc::new(PushQueue::new(resp)))
    }

    /// No subscriptions yet, around `queue` (one made for the connection by another).
    pub fn with_queue(queue: std::sync::Arc<PushQueue>) -> Self {
        Subscriptions {
            queue,
            channels: IndexSet::new(),
            patterns: IndexSet::new(),
            shard_channels: IndexSet::new(),
        }
    }

    /// Channels plus patterns: the count SUBSCRIBE and PSUBSCRIBE report (Redis's
    /// `clientSubscriptionsCount`).
    pub fn count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// True while subscribed to anything (Redis's `CLIENT_PUBSUB` flag).
    pub fn active(&self) -> bool {
        self.count() + self.shard_channels.len() > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hard_limit_drops_the_queue_and_frees_its_backlog() {
        let q = PushQueue::new(2);
        let limit = PushLimit {
            hard: 250,
            soft: 0,
            soft_seconds: 0,
        };
        for _ in 0..3 {
            q.push(Bytes::from_static(&[b'x'; 100]), limit);
        }
        assert!(q.dropped.is_cancelled());
        assert_eq!(q.pending(), 0);
        assert!(q.is_empty());
    }

    #[test]
    fn under_the_limits_messages_queue_in_order() {
        let q = PushQueue::new(2);
        let limit = PushLimit {
            hard: 1000,
            soft: 500,
            soft_seconds: 60,
        };
        q.push(Bytes::from_static(b"a"), limit);
        q.push(Bytes::from_static(b"b"), limit);
        let mut out = bytes::BytesMut::new();
        assert_eq!(q.take_into(&mut out), 2);
        assert_eq!(&out[..], b"ab");
        assert_eq!(q.pending(), 0);
        assert!(!q.dropped.is_cancelled());
    }
}
