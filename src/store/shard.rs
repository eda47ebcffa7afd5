//! One shard of the keyspace: its keys in every database, their expiry timers and the
//! WATCH registrations on them, all under the shard's one lock.
//!
//! Keeping the three together is the point: a write, the timer it reschedules and the
//! watchers it must invalidate change atomically, with no second lock to order.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use hashbrown::HashTable;

use crate::config::EvictionPolicy;
use crate::store::value::Value;
use crate::store::wheel::{TimerId, TimerWheel};

/// Longest key stored inside its entry (`Key` is then 24 bytes, like a `Box<[u8]>` plus
/// the enum tag); rate-limiter keys such as `rate:login:user123456` fit.
const INLINE_KEY: usize = 22;

/// A key's bytes: inside the entry when short, else on the heap. A short key saves an
/// allocation per key and, on every lookup, the cache miss of following a pointer to compare
/// it.
#[derive(Clone)]
pub struct Key(KeyRepr);

#[derive(Clone)]
enum KeyRepr {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

impl Key {
    /// A copy of the bytes on the heap.
    pub fn to_boxed(&self) -> Box<[u8]> {
        Box::from(&**self)
    }
}

impl From<&[u8]> for Key {
    fn from(b: &[u8]) -> Self {
        if b.len() <= INLINE_KEY {
            let mut bytes = [0u8; INLINE_KEY];
            bytes[..b.len()].copy_from_slice(b);
            Key(KeyRepr::Inline {
                len: b.len() as u8,
                bytes,
            })
        } else {
            Key(KeyRepr::Heap(b.into()))
        }
    }
}

impl std::ops::Deref for Key {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        match &self.0 {
            KeyRepr::Inline { len, bytes } => &bytes[..usize::from(*len)],
            KeyRepr::Heap(b) => b,
        }
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

/// A stored key.
#[derive(Debug)]
pub struct Entry {
    /// The key bytes (copied from the request).
    pub key: Key,
    /// Its value.
    pub value: Value,
    hash: u64,
    /// Absolute expiry in Unix ms; `NO_EXPIRY` when the key has no TTL (a sentinel rather
    /// than an `Option`, which would cost 8 more bytes per key).
    expire_at: u64,
    timer: Option<TimerId>,
    /// When the key was last accessed, in `LRU_UNIT_MS` units, wrapping (see `lru_stamp`).
    lru: u32,
}

/// `Entry::expire_at` of a key without a TTL. No real deadline reaches it: Redis refuses
/// expiry times that overflow, and so do the commands that set them.
const NO_EXPIRY: u64 = u64::MAX;

/// Resolution of the access stamps. A `u32` of 10 ms units wraps after about 497 days (Redis's
/// 24-bit clock of seconds wraps after 194); ages are computed with wrapping arithmetic, so
/// only keys idle longer than that look younger than they are.
pub const LRU_UNIT_MS: u64 = 10;

/// The access stamp for `now_ms`.
#[inline]
pub fn lru_stamp(now_ms: u64) -> u32 {
    (now_ms / LRU_UNIT_MS) as u32
}

impl Entry {
    /// Absolute expiry in Unix ms, if the key has a TTL.
    #[inline]
    pub fn expire_at(&self) -> Option<u64> {
        (self.expire_at != NO_EXPIRY).then_some(self.expire_at)
    }

    /// Redis's rule: a key is expired once `now > expire_at`.
    #[inline]
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at != NO_EXPIRY && now_ms > self.expire_at
    }

    /// Milliseconds since the key was last read or written (OBJECT IDLETIME, LRU eviction).
    pub fn idle_ms(&self, now_ms: u64) -> u64 {
        u64::from(lru_stamp(now_ms).wrapping_sub(self.lru)) * LRU_UNIT_MS
    }

    /// Makes the key look idle for `idle_ms` at `now_ms` (RESTORE … IDLETIME).
    pub fn set_idle(&mut self, now_ms: u64, idle_ms: u64) {
        self.lru = lru_stamp(now_ms.saturating_sub(idle_ms));
    }

    /// Records an access at `now_ms`.
    #[inline]
    pub fn mark_accessed(&mut self, now_ms: u64) {
        self.lru = lru_stamp(now_ms);
    }
}

/// What a timer points back to: enough to find the entry without a copy of the key.
///
/// The entry's hash with its database in bits 32..48, packed into 8 bytes so that a wheel
/// node takes 32 bytes rather than 40 (one per key with a TTL). hashbrown places an entry by
/// the hash's low bits (the bucket, under any table of fewer than 2^32 buckets) and its top
/// seven bits (the tag), so a lookup with the packed value probes exactly where the entry is;
/// the reaper then picks the entry by its timer id, not by the hash.
#[derive(Debug, Clone, Copy)]
struct TimerRef(u64);

impl TimerRef {
    const DB_BITS: u64 = 0xFFFF << 32;

    fn new(db: usize, hash: u64) -> Self {
        TimerRef((hash & !Self::DB_BITS) | (((db as u64) << 32) & Self::DB_BITS))
    }

    fn db(self) -> usize {
        ((self.0 & Self::DB_BITS) >> 32) as usize
    }

    /// A hash that finds the entry's bucket (see the type's docs).
    fn hash(self) -> u64 {
        self.0
    }
}

/// One logical database's slice of this shard.
#[derive(Debug, Default)]
pub struct Db {
    /// Entries are boxed: a slot costs 8 bytes instead of the entry's 88, and a hash table
    /// is always between 44% and 87% full, so the empty slots stay cheap. One allocation per
    /// key either way (before, it held the key bytes).
    table: HashTable<Box<Entry>>,
    expires: usize,
    /// Sum of the expiry times of the keys with a TTL, so INFO's avg_ttl is O(1).
    expire_sum: u128,
}

impl Db {
    fn add_expiry(&mut self, at: u64) {
        self.expires += 1;
        self.expire_sum += u128::from(at);
    }

    fn remove_expiry(&mut self, at: u64) {
        self.expires -= 1;
        self.expire_sum -= u128::from(at);
    }

    /// Average remaining TTL in ms of the keys with one (0 if none), as INFO reports it.
    pub fn avg_ttl(&self, now_ms: u64) -> u64 {
        if self.expires == 0 {
            return 0;
        }
        let avg_at = self.expire_sum / self.expires as u128;
        (avg_at.saturating_sub(u128::from(now_ms))) as u64
    }

    /// Keys stored (including logically expired ones not reaped yet).
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Keys with a TTL.
    pub fn expires(&self) -> usize {
        self.expires
    }

    /// The table's bucket count (positions for SCAN cursors and random picks).
    pub fn num_buckets(&self) -> usize {
        self.table.num_buckets()
    }

    /// The entry in bucket `i`, if it is full.
    pub fn bucket(&self, i: usize) -> Option<&Entry> {
        self.table.get_bucket(i).map(|e| &**e)
    }

    /// All entries, in table order.
    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.table.iter().map(|e| &**e)
    }

    /// The hash a key was stored under.
    pub fn entry_hash(e: &Entry) -> u64 {
        e.hash
    }
}

/// A client's registration on a watched key.
#[derive(Debug)]
struct Watcher {
    client: u64,
    dirty: Arc<AtomicBool>,
    /// The key was already logically expired when watched: its later deletion by expiry is
    /// not a modification (Redis 7).
    expired_at_watch: bool,
}

/// The clients watching one key, and the key's hash so it can be looked up.
#[derive(Debug)]
struct WatchSlot {
    hash: u64,
    watchers: Vec<Watcher>,
}

/// Counters INFO reads.
#[derive(Debug, Default, Clone, Copy)]
pub struct ShardStats {
    /// Keys deleted by expiry (lazy or reaper).
    pub expired_keys: u64,
    /// Read lookups that found the key.
    pub keyspace_hits: u64,
    /// Read lookups that did not.
    pub keyspace_misses: u64,
}

/// A shard: data, expiry index and watch registry.
#[derive(Debug)]
pub struct Shard {
    dbs: Box<[Db]>,
    wheel: TimerWheel<TimerRef>,
    watches: HashMap<(u16, Bytes), WatchSlot>,
    /// The access stamp of the latest `now` this shard saw (every lookup and every reaper
    /// pass brings one, so it trails the clock by at most the reaper's sleep); inserts, which
    /// are not given `now`, stamp new keys with it.
    lru_now: u32,
    /// Eviction candidates remembered from earlier samples (see `evict_one`).
    evict_pool: Vec<PoolEntry>,
    /// Bumped whenever entries may have moved between buckets (a table grew, shrank or
    /// rehashed in place, a database was flushed or swapped). A SCAN cursor carries a bucket
    /// position and this number (see `cmd::keys::scan::Scan`); when they differ the position means
    /// nothing any more and the scan of this shard starts over.
    layout: u32,
    /// Keys created, expired and evicted, for keyspace notifications (see `keylog`).
    pub log: super::keylog::KeyLog,
    /// Counters for INFO.
    pub stats: ShardStats,
    /// Who hears of the keys this shard deletes on its own, and whether it may (a replica).
    deletions: std::sync::Arc<super::Deletions>,
}

impl Shard {
    /// An empty shard with `databases` databases.
    pub fn new(databases: usize, now_ms: u64) -> Self {
        Self::with_deletions(databases, now_ms, Default::default())
    }

    /// `new`, reporting the keys it expires or evicts to `deletions` (shared by the shards of
    /// one keyspace).
    pub fn with_deletions(
        databases: usize,
        now_ms: u64,
        deletions: std::sync::Arc<super::Deletions>,
    ) -> Self {
        Shard {
            deletions,
            dbs: (0..databases).map(|_| Db::default()).collect(),
            wheel: TimerWheel::new(now_ms),
            watches: HashMap::new(),
            lru_now: lru_stamp(now_ms),
            evict_pool: Vec::new(),
            layout: 0,
            log: Default::default(),
            stats: ShardStats::default(),
        }
    }

    /// The layout generation (see the field): changes whenever bucket positions may have.
    pub fn layout(&self) -> u32 {
        self.layout
    }

    /// One database's slice.
    pub fn db(&self, db: usize) -> &Db {
        &self.dbs[db]
    }

    /// Number of databases.
    pub fn databases(&self) -> usize {
        self.dbs.len()
    }

    /// Finds a key without expiring it.
    pub fn peek(&self, db: usize, hash: u64, key: &[u8]) -> Option<&Entry> {
        self.dbs[db]
            .table
            .find(hash, |e| &*e.key == key)
            .map(|e| &**e)
    }

    /// `peek` for a change: no expiry check, no access time (the caller found the key live
    /// under the same lock hold).
    pub fn peek_mut(&mut self, db: usize, hash: u64, key: &[u8]) -> Option<&mut Entry> {
        self.dbs[db]
            .table
            .find_mut(hash, |e| &*e.key == key)
            .map(|e| &mut **e)
    }

    /// Finds a live key, deleting it first if it has expired.
    pub fn find(&mut self, db: usize, hash: u64, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        self.lru_now = lru_stamp(now_ms);
        // One probe: the bucket index found is reused (O(1)) once the key is known live.
        let table = &self.dbs[db].table;
        let bucket = table.find_bucket_index(hash, |e| &*e.key == key)?;
        if table.get_bucket(bucket)?.is_expired(now_ms) {
            // A replica answers an expired key as missing but leaves the deletion to its
            // master's DEL (Redis's rule: its data follows the master's, whatever its clock).
            if !self.deletions.is_replica() {
                self.remove(db, hash, key);
                self.stats.expired_keys += 1;
                self.deletions.deleted(db, key);
                self.log.log(super::keylog::EXPIRED, db, key);
            }
            return None;
        }
        let e = self.dbs[db].table.get_bucket_mut(bucket)?;
        e.mark_accessed(now_ms);
        Some(&mut **e)
    }

    /// `find` that leaves the key's access time alone (Redis's LOOKUP_NOTOUCH, for OBJECT).
    pub fn find_untouched(
        &mut self,
        db: usize,
        hash: u64,
        key: &[u8],
        now_ms: u64,
    ) -> Option<&mut Entry> {
        let lru = self.peek(db, hash, key)?.lru;
        let e = self.find(db, hash, key, now_ms)?;
        e.lru = lru;
        Some(e)
    }

    /// `find` for a read: also counts a keyspace hit or miss, as Redis's read lookups do.
    pub fn find_read(
        &mut self,
        db: usize,
        hash: u64,
        key: &[u8],
        now_ms: u64,
    ) -> Option<&mut Entry> {
        self.lru_now = lru_stamp(now_ms);
        let table = &self.dbs[db].table;
        let Some(bucket) = table.find_bucket_index(hash, |e| &*e.key == key) else {
            self.stats.keyspace_misses += 1;
            self.log.log(super::keylog::KEYMISS, db, key);
            return None;
        };
        if table.get_bucket(bucket)?.is_expired(now_ms) {
            if !self.deletions.is_replica() {
                self.remove(db, hash, key);
                self.stats.expired_keys += 1;
                self.deletions.deleted(db, key);
                self.log.log(super::keylog::EXPIRED, db, key);
            }
            self.stats.keyspace_misses += 1;
            self.log.log(super::keylog::KEYMISS, db, key);
            return None;
        }
        self.stats.keyspace_hits += 1;
        let e = self.dbs[db].table.get_bucket_mut(bucket)?;
        e.mark_accessed(now_ms);
        Some(&mut **e)
    }

    /// Stores `value` under `key`, replacing any previous value, with expiry `expire_at`.
    /// Signals watchers.
    pub fn insert(
        &mut self,
        db: usize,
        hash: u64,
        key: &[u8],
        value: Value,
        expire_at: Option<u64>,
    ) {
        let table = &mut self.dbs[db].table;
        let lru = self.lru_now;
        // The expiry index is only touched when there is a TTL to set or to clear: a plain
        // SET of a key without one costs a single probe.
        let ttl_changes = match table.find_mut(hash, |e| &*e.key == key) {
            Some(e) => {
                e.value = value;
                e.lru = lru;
                e.expire_at != NO_EXPIRY || expire_at.is_some()
            }
            None => {
                // hashbrown rehashes (moving entries) only on an insert with no room left.
                if table.len() == table.capacity() {
                    self.layout = self.layout.wrapping_add(1);
                }
                table.insert_unique(
                    hash,
                    Box::new(Entry {
                        key: key.into(),
                        value,
                        hash,
                        expire_at: NO_EXPIRY,
                        timer: None,
                        lru,
                    }),
                    |e| e.hash,
                );
                self.log.log(super::keylog::NEW, db, key);
                expire_at.is_some()
            }
        };
        if ttl_changes {
            self.set_expire(db, hash, key, expire_at);
        }
        self.touch(db, key);
    }

    /// Sets or clears a key's expiry (the key must exist). Does not signal watchers.
    pub fn set_expire(&mut self, db: usize, hash: u64, key: &[u8], expire_at: Option<u64>) -> bool {
        let Some(e) = self.dbs[db].table.find_mut(hash, |e| &*e.key == key) else {
            return false;
        };
        let old_at = (e.expire_at != NO_EXPIRY).then_some(e.expire_at);
        e.expire_at = expire_at.unwrap_or(NO_EXPIRY);
        match (e.timer, expire_at) {
            (Some(t), Some(at)) => {
                if !self.wheel.reschedule(t, at.saturating_add(1)) {
                    e.timer = Some(
                        self.wheel
                            .insert(at.saturating_add(1), TimerRef::new(db, hash)),
                    );
                }
            }
            (Some(t), None) => {
                self.wheel.remove(t);
                e.timer = None;
            }
            (None, Some(at)) => {
                e.timer = Some(
                    self.wheel
                        .insert(at.saturating_add(1), TimerRef::new(db, hash)),
                );
            }
            (None, None) => {}
        }
        if let Some(at) = old_at {
            self.dbs[db].remove_expiry(at);
        }
        if let Some(at) = expire_at {
            self.dbs[db].add_expiry(at);
        }
        true
    }

    /// Deletes a key; signals watchers if it existed.
    pub fn remove(&mut self, db: usize, hash: u64, key: &[u8]) -> Option<Entry> {
        let entry = self.dbs[db]
            .table
            .find_entry(hash, |e| &*e.key == key)
            .ok()?
            .remove()
            .0;
        if let Some(t) = entry.timer {
            self.wheel.remove(t);
        }
        if entry.expire_at != NO_EXPIRY {
            self.dbs[db].remove_expiry(entry.expire_at);
        }
        self.touch(db, key);
        Some(*entry)
    }

    /// How many (key, client) WATCH entries this shard holds.
    pub fn watch_count(&self) -> usize {
        self.watches.values().map(|s| s.watchers.len()).sum()
    }

    /// Tells the clients watching `key` that it was modified (Redis's signalModifiedKey).
    #[inline]
    pub fn touch(&mut self, db: usize, key: &[u8]) {
        if self.watches.is_empty() {
            return;
        }
        let lookup = (db as u16, Bytes::copy_from_slice(key));
        let Some(slot) = self.watches.get_mut(&lookup) else {
            return;
        };
        let exists = self.dbs[db]
            .table
            .find(slot.hash, |e| &*e.key == key)
            .is_some();
        for w in &mut slot.watchers {
            if w.expired_at_watch && !exists {
                // Already expired when watched, and now deleted: logically unchanged.
                w.expired_at_watch = false;
                continue;
            }
            w.dirty.store(true, Ordering::Release);
        }
    }

    /// Registers a WATCH of `key` by `client`.
    pub fn watch(
        &mut self,
        db: usize,
        hash: u64,
        key: &[u8],
        client: u64,
        dirty: &Arc<AtomicBool>,
        now_ms: u64,
    ) {
        let expired_at_watch = self
            .peek(db, hash, key)
            .is_some_and(|e| e.is_expired(now_ms));
        let slot = self
            .watches
            .entry((db as u16, Bytes::copy_from_slice(key)))
            .or_insert_with(|| WatchSlot {
                hash,
                watchers: Vec::new(),
            });
        if !slot.watchers.iter().any(|w| w.client == client) {
            slot.watchers.push(Watcher {
                client,
                dirty: dirty.clone(),
                expired_at_watch,
            });
        }
    }

    /// Removes `client`'s WATCH of `key`.
    pub fn unwatch(&mut self, db: usize, key: &[u8], client: u64) {
        let lookup = (db as u16, Bytes::copy_from_slice(key));
        if let Some(slot) = self.watches.get_mut(&lookup) {
            slot.watchers.retain(|w| w.client != client);
            if slot.watchers.is_empty() {
                self.watches.remove(&lookup);
            }
        }
    }

    /// Redis 7's rule at EXEC: a key that was live when watched and is logically expired now
    /// aborts the transaction even if nothing has deleted it yet.
    pub fn watched_key_expired(
        &self,
        db: usize,
        hash: u64,
        key: &[u8],
        client: u64,
        now_ms: u64,
    ) -> bool {
        let lookup = (db as u16, Bytes::copy_from_slice(key));
        let live_at_watch = self
            .watches
            .get(&lookup)
            .and_then(|s| s.watchers.iter().find(|w| w.client == client))
            .is_some_and(|w| !w.expired_at_watch);
        live_at_watch
            && self
                .peek(db, hash, key)
                .is_some_and(|e| e.is_expired(now_ms))
    }

    /// Empties one database, signalling watchers of keys that existed.
    pub fn flush_db(&mut self, db: usize) {
        self.signal_existing_watched(db);
        self.layout = self.layout.wrapping_add(1);
        let old = std::mem::take(&mut self.dbs[db]);
        for e in old.table {
            if let Some(t) = e.timer {
                self.wheel.remove(t);
            }
        }
    }

    fn signal_existing_watched(&mut self, db: usize) {
        if self.watches.is_empty() {
            return;
        }
        let keys: Vec<Bytes> = self
            .watches
            .iter()
            .filter(|((d, k), slot)| {
                *d as usize == db
                    && self.dbs[db]
                        .table
                        .find(slot.hash, |e| *e.key == **k)
                        .is_some()
            })
            .map(|((_, k), _)| k.clone())
            .collect();
        for k in keys {
            self.touch(db, &k);
        }
    }

    /// Swaps two databases (SWAPDB), signalling watchers of keys present in either.
    pub fn swap_dbs(&mut self, a: usize, b: usize) {
        self.signal_existing_watched(a);
        self.signal_existing_watched(b);
        self.dbs.swap(a, b);
        self.layout = self.layout.wrapping_add(1);
        // Timers remember their database: repoint them.
        let Shard { dbs, wheel, .. } = self;
        for db in [a, b] {
            for e in dbs[db].table.iter_mut() {
                if let Some(t) = e.timer.take() {
                    wheel.remove(t);
                }
                if let Some(at) = e.expire_at() {
                    e.timer = Some(wheel.insert(at.saturating_add(1), TimerRef::new(db, e.hash)));
                }
            }
        }
        self.signal_existing_watched(a);
        self.signal_existing_watched(b);
    }

    /// Deletes up to `max` keys whose expiry has passed; returns how many it deleted and
    /// whether more are due.
    pub fn reap(&mut self, now_ms: u64, max: usize) -> (usize, bool) {
        self.lru_now = lru_stamp(now_ms);
        if self.deletions.is_replica() {
            return (0, false);
        }
        let mut due = Vec::new();
        let more = self.wheel.poll_expired(now_ms, max, &mut due);
        let mut removed = 0;
        for (id, r) in due {
            let db = r.db();
            let Ok(found) = self.dbs[db]
                .table
                .find_entry(r.hash(), |e| e.timer == Some(id))
            else {
                continue;
            };
            let (entry, _) = found.remove();
            self.dbs[db].remove_expiry(entry.expire_at);
            self.stats.expired_keys += 1;
            removed += 1;
            self.log.log(super::keylog::EXPIRED, db, &entry.key);
            self.touch(db, &entry.key);
            self.deletions.deleted(db, &entry.key);
        }
        if removed > 0 && !more {
            // Once the burst is over: one rehash of what is left, not one per batch.
            self.shrink_after_reap();
        }
        (removed, more)
    }

    /// Gives memory back once a mass expiry has emptied most of a table or of the timer
    /// wheel, as Redis resizes its dicts: a table shrinks when under an eighth full (to twice
    /// its keys, so the cost of the rehash is amortised over the deletions that led to it).
    fn shrink_after_reap(&mut self) {
        for d in self.dbs.iter_mut() {
            let cap = d.table.capacity();
            if cap > 1024 && d.table.len() * 8 < cap {
                d.table.shrink_to(d.table.len() * 2, |e| e.hash);
                self.layout = self.layout.wrapping_add(1);
            }
        }
        self.wheel.compact();
    }

    /// One eviction step (maxmemory): samples `samples` keys of each database (for the
    /// volatile policies, keys with a TTL, sampled from the timer wheel), deletes the best
    /// candidate for `policy` and says what it deleted; None if the shard has no candidate.
    /// `seed` picks where sampling starts. A sampled key whose TTL has already passed is
    /// always the best candidate, and counts as expired rather than evicted.
    pub fn evict_one(
        &mut self,
        policy: EvictionPolicy,
        samples: usize,
        now_ms: u64,
        seed: u64,
    ) -> Option<Evicted> {
        // A replica does not evict (Redis's replica-ignore-maxmemory yes): its master's DELs do.
        if policy == EvictionPolicy::NoEviction || self.deletions.is_replica() {
            return None;
        }
        // New samples join the candidates kept from earlier rounds (Redis's eviction pool):
        // the pool remembers the best candidates seen, so each eviction is chosen from many
        // more keys than one round samples.
        let mut pool = std::mem::take(&mut self.evict_pool);
        let mut add = |e: &Entry, db: usize| {
            let c = PoolEntry {
                db: db as u16,
                hash: e.hash,
                lru: e.lru,
                expire_at: e.expire_at,
            };
            if !pool.contains(&c) {
                pool.push(c);
            }
        };
        if policy.volatile_only() {
            let dbs = &self.dbs;
            self.wheel.sample(seed, samples, samples * 64, |id, _, r| {
                let table = &dbs[r.db()].table;
                if let Some(e) = table.find(r.hash(), |e| e.timer == Some(id)) {
                    add(e, r.db());
                }
            });
        } else {
            for (db, d) in self.dbs.iter().enumerate() {
                sample_table(&d.table, seed, samples, |_, e| add(e, db));
            }
        }
        // Best first; random policies keep no pool (any sample is as good as another).
        pool.sort_by_key(|c| std::cmp::Reverse(c.score(policy, now_ms)));
        if matches!(
            policy,
            EvictionPolicy::AllKeysRandom | EvictionPolicy::VolatileRandom
        ) {
            pool.truncate(1);
        }
        let mut evicted = None;
        let mut taken = 0;
        for c in &pool {
            taken += 1;
            // The key is still the one sampled if its hash, access time and expiry are
            // unchanged; one that was used since is no longer a good candidate anyway.
            let table = &self.dbs[c.db as usize].table;
            let Some(bucket) = table.find_bucket_index(c.hash, |e| {
                e.hash == c.hash && e.lru == c.lru && e.expire_at == c.expire_at
            }) else {
                continue;
            };
            evicted = self
                .remove_at(c.db as usize, bucket)
                .map(|e| (c.db as usize, e));
            break;
        }
        pool.drain(..taken);
        pool.truncate(EVICTION_POOL_SIZE);
        self.evict_pool = pool;
        let (db, entry) = evicted?;
        self.deletions.deleted(db, &entry.key);
        if entry.is_expired(now_ms) {
            self.stats.expired_keys += 1;
            self.log.log(super::keylog::EXPIRED, db, &entry.key);
            Some(Evicted::Expired)
        } else {
            self.log.log(super::keylog::EVICTED, db, &entry.key);
            Some(Evicted::Key)
        }
    }

    /// Deletes the entry in bucket `bucket` of `db`, with its timer, and signals watchers.
    fn remove_at(&mut self, db: usize, bucket: usize) -> Option<Entry> {
        let (entry, _) = self.dbs[db].table.get_bucket_entry(bucket).ok()?.remove();
        if let Some(t) = entry.timer {
            self.wheel.remove(t);
        }
        if entry.expire_at != NO_EXPIRY {
            self.dbs[db].remove_expiry(entry.expire_at);
        }
        self.touch(db, &entry.key);
        Some(*entry)
    }

    /// The next time the reaper has work, in Unix ms.
    pub fn next_deadline(&self) -> Option<u64> {
        if self.deletions.is_replica() {
            return None;
        }
        self.wheel.next_deadline()
    }

    /// Bytes of this shard's structures, not counting the entries: the tables' slots and
    /// control bytes and the timer wheel. O(databases), so INFO can report it at any size.
    pub fn structure_memory(&self) -> usize {
        let slot = std::mem::size_of::<Box<Entry>>() + 1;
        self.dbs
            .iter()
            .map(|d| d.table.capacity() * slot)
            .sum::<usize>()
            + self.wheel.memory_usage()
    }

    /// Approximate bytes held by this shard's keys and values (walks every key).
    pub fn approx_memory(&self) -> usize {
        let per_entry = std::mem::size_of::<Entry>() + 8;
        self.dbs
            .iter()
            .map(|d| {
                d.table
                    .iter()
                    .map(|e| per_entry + e.key.len() + e.value.approx_memory())
                    .sum::<usize>()
            })
            .sum::<usize>()
            + self.wheel.memory_usage()
    }
}

/// What one eviction step deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evicted {
    /// A live key the policy chose.
    Key,
    /// A key whose TTL had already passed.
    Expired,
}

/// Candidates an eviction pool keeps between evictions (Redis's EVPOOL_SIZE).
const EVICTION_POOL_SIZE: usize = 16;

/// A remembered eviction candidate: where to find it and what it looked like when sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PoolEntry {
    db: u16,
    hash: u64,
    lru: u32,
    expire_at: u64,
}

impl PoolEntry {
    /// How good a candidate this is under `policy`: higher is evicted first.
    fn score(&self, policy: EvictionPolicy, now_ms: u64) -> u64 {
        if self.expire_at != NO_EXPIRY && now_ms > self.expire_at {
            return u64::MAX;
        }
        match policy {
            // The sooner the deadline, the higher the score (NO_EXPIRY scores 0).
            EvictionPolicy::VolatileTtl => NO_EXPIRY - self.expire_at,
            EvictionPolicy::AllKeysLru | EvictionPolicy::VolatileLru => {
                u64::from(lru_stamp(now_ms).wrapping_sub(self.lru))
            }
            // Random: every sample ties; the sort is stable, so the first one wins.
            _ => 0,
        }
    }
}

/// Visits up to `want` entries of `table` as (bucket index, entry), starting at a bucket
/// picked by `seed` and walking forward, as Redis samples its dict. A walk is bounded, so in
/// a sparse table (one that held many more keys before) it may find nothing; then the first
/// entries in table order are taken instead, which costs one pass over the control bytes.
fn sample_table(
    table: &HashTable<Box<Entry>>,
    seed: u64,
    want: usize,
    mut visit: impl FnMut(usize, &Entry),
) {
    let n = table.num_buckets();
    if table.is_empty() || n == 0 {
        return;
    }
    let mut found = 0;
    let mut i = (seed as usize) % n;
    for _ in 0..n.min(want * 64) {
        if let Some(e) = table.get_bucket(i) {
            visit(i, e);
            found += 1;
            if found == want {
                return;
            }
        }
        i = if i + 1 == n { 0 } else { i + 1 };
    }
    if found == 0 {
        for e in table.iter().take(want) {
            if let Some(bucket) = table.find_bucket_index(e.hash, |x| std::ptr::eq(x, e)) {
                visit(bucket, e);
            }
        }
    }
}

#[cfg(test)]
mod eviction_tests {
    use super::*;

    fn hash(key: &str) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut h);
        h.finish()
    }

    fn shard_with(n: usize, ttl_every: usize) -> Shard {
        let mut s = Shard::new(1, 1_000_000);
        for i in 0..n {
            let key = format!("k{i}");
            let hash = hash(&key);
            // Key i is accessed at time 1_000_000 + i * 100 (older keys have lower i).
            s.lru_now = lru_stamp(1_000_000 + i as u64 * 100);
            let ttl = (ttl_every > 0 && i % ttl_every == 0).then_some(5_000_000 + i as u64);
            s.insert(0, hash, key.as_bytes(), Value::Int(i as i64), ttl);
        }
        s
    }

    #[test]
    fn entries_stay_small() {
        // A key costs one 8-byte table slot plus one boxed entry, whose 96 bytes include a
        // key of up to 22 bytes (so a glibc chunk of 112 bytes, and no second allocation).
        assert_eq!(size_of::<Box<Entry>>(), 8);
        assert!(
            size_of::<Entry>() <= 96,
            "Entry is {} bytes",
            size_of::<Entry>()
        );
    }

    #[test]
    fn lru_evicts_older_keys_first() {
        let mut s = shard_with(1000, 0);
        let now = 1_000_000 + 1000 * 100;
        let mut evicted_idle = Vec::new();
        for seed in 0..200u64 {
            let before: Vec<u64> = s.dbs[0].iter().map(|e| e.idle_ms(now)).collect();
            let max_idle = before.iter().copied().max().unwrap();
            assert_eq!(
                s.evict_one(
                    EvictionPolicy::AllKeysLru,
                    5,
                    now,
                    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ),
                Some(Evicted::Key)
            );
            let after: Vec<u64> = s.dbs[0].iter().map(|e| e.idle_ms(now)).collect();
            let gone: u64 = before.iter().sum::<u64>() - after.iter().sum::<u64>();
            evicted_idle.push(gone as f64 / max_idle as f64);
        }
        assert_eq!(s.dbs[0].len(), 800);
        // With 5 samples the evicted key is, on average, among the oldest sixth.
        let mean = evicted_idle.iter().sum::<f64>() / evicted_idle.len() as f64;
        assert!(mean > 0.6, "mean relative idle of evicted keys {mean}");
    }

    #[test]
    fn volatile_policies_only_touch_keys_with_a_ttl() {
        for policy in [
            EvictionPolicy::VolatileLru,
            EvictionPolicy::VolatileRandom,
            EvictionPolicy::VolatileTtl,
        ] {
            let mut s = shard_with(100, 10);
            for seed in 0..10 {
                assert_eq!(s.evict_one(policy, 5, 1_000_000, seed), Some(Evicted::Key));
            }
            assert_eq!(s.dbs[0].len(), 90);
            assert_eq!(s.dbs[0].expires(), 0);
            assert_eq!(s.evict_one(policy, 5, 1_000_000, 0), None, "{policy:?}");
        }
        let mut s = shard_with(100, 0);
        assert_eq!(
            s.evict_one(EvictionPolicy::NoEviction, 5, 1_000_000, 0),
            None
        );
    }

    #[test]
    fn volatile_ttl_prefers_the_nearest_deadline() {
        let mut s = shard_with(200, 1);
        // Deadlines are 5_000_000 + i: with 5 samples the chosen one is low in the order.
        let mut total = 0u64;
        for seed in 0..50u64 {
            let before: Vec<u64> = s.dbs[0].iter().filter_map(|e| e.expire_at()).collect();
            s.evict_one(EvictionPolicy::VolatileTtl, 5, 1_000_000, seed * 7919);
            let after: Vec<u64> = s.dbs[0].iter().filter_map(|e| e.expire_at()).collect();
            let gone = before.iter().sum::<u64>() - after.iter().sum::<u64>();
            let rank = before.iter().filter(|&&d| d < gone).count() as u64;
            total += rank * 100 / before.len() as u64;
        }
        assert!(
            total / 50 < 35,
            "mean percentile of evicted deadlines {}",
            total / 50
        );
    }

    #[test]
    fn expired_keys_go_first_and_sparse_tables_are_still_sampled() {
        let mut s = shard_with(5000, 0);
        for i in 0..4995 {
            let key = format!("k{i}");
            assert!(s.remove(0, hash(&key), key.as_bytes()).is_some());
        }
        assert!(s.dbs[0].table.num_buckets() > 5 * 64 * 5);
        for seed in 0..5 {
            assert_eq!(
                s.evict_one(EvictionPolicy::AllKeysRandom, 5, 1_000_000, seed),
                Some(Evicted::Key)
            );
        }
        assert_eq!(
            s.evict_one(EvictionPolicy::AllKeysRandom, 5, 1_000_000, 9),
            None
        );
        let mut s = shard_with(10, 1);
        // Every deadline is in the past at this time: expired keys are taken first.
        assert_eq!(
            s.evict_one(EvictionPolicy::AllKeysLru, 5, 9_000_000, 3),
            Some(Evicted::Expired)
        );
        assert_eq!(s.stats.expired_keys, 1);
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;

    #[test]
    fn short_keys_live_in_the_entry() {
        assert_eq!(std::mem::size_of::<Key>(), 24);
        for len in [0usize, 1, INLINE_KEY, INLINE_KEY + 1, 300] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let key = Key::from(&bytes[..]);
            assert_eq!(&*key, &bytes[..]);
            assert_eq!(&*key.to_boxed(), &bytes[..]);
            assert_eq!(matches!(key.0, KeyRepr::Inline { .. }), len <= INLINE_KEY);
        }
    }

    #[test]
    fn timer_ref_keeps_the_bucket_bits_and_the_database() {
        for (db, hash) in [
            (0usize, 0u64),
            (15, u64::MAX),
            (65_535, 0x0123_4567_89ab_cdef),
        ] {
            let r = TimerRef::new(db, hash);
            assert_eq!(r.db(), db);
            assert_eq!(r.hash() & 0xFFFF_FFFF, hash & 0xFFFF_FFFF, "bucket bits");
            assert_eq!(r.hash() >> 57, hash >> 57, "tag bits");
        }
    }
}
