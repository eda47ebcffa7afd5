//! What the keyspace itself does to keys, kept for keyspace notifications: a key created,
//! expired (lazily or by a reaper) or evicted. Commands know what they do; these happen
//! inside the store, under a shard's lock, where nothing may be published. So each shard
//! logs them here, only for the kinds someone listens to (`mask`, one atomic shared by every
//! shard of a keyspace and stored when `notify-keyspace-events` changes, so changing it
//! takes no shard lock), and whoever holds the shard takes the log once it is safe to
//! publish: a command through its `Ctx` (in order with its own events), a reaper or
//! an eviction after releasing the shard.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

/// A key was created (Redis's `new`, class `n`).
pub(crate) const NEW: u8 = 1;
/// A key expired (Redis's `expired`, class `x`).
pub(crate) const EXPIRED: u8 = 2;
/// A key was evicted (Redis's `evicted`, class `e`).
pub(crate) const EVICTED: u8 = 4;

/// A read found no key (Redis's `keymiss`, class `m`).
pub(crate) const KEYMISS: u8 = 8;

/// Hash fields expired (Redis's `hexpired`, class `h`): the reaper's field expiry.
pub(crate) const HEXPIRED: u8 = 16;
/// A key deleted by the store without expiring itself (Redis's `del`, class `g`): a hash
/// whose last field expired.
pub(crate) const DEL: u8 = 32;

/// One logged key event: its kind (one of the constants), database and key.
pub(crate) type KeyEvent = (u8, usize, Box<[u8]>);

/// A shard's log of key events.
#[derive(Debug, Default)]
pub struct KeyLog {
    /// The kinds to log (0: none, the default; logging then costs one relaxed load).
    pub mask: Arc<AtomicU8>,
    /// The events logged since the log was last taken, in the order they happened.
    pub events: Vec<KeyEvent>,
}

impl KeyLog {
    /// Logs an event if its kind is wanted.
    #[inline]
    pub fn log(&mut self, kind: u8, db: usize, key: &[u8]) {
        if self.mask.load(Ordering::Relaxed) & kind != 0 {
            self.events.push((kind, db, key.into()));
        }
    }
}
