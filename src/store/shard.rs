//! One shard of the keyspace: its keys in every database, their expiry timers and the
//! WATCH registrations on them, all under the shard's one lock.
//!
//! Keeping the three together is the point: a write, the timer it reschedules and the
//! watchers it must invalidate change atomically, with no second lock to order.
//!
//! Each database is a hash table of 4-byte indexes into its dense entry storage
//! (`store::entry`), plus, once it holds a key with a TTL, an expiry wheel (`store::wheel`)
//! that links those entries by index. A key costs its 72-byte entry and a table slot (4 bytes
//! and a control byte); a TTL adds nothing. The table finds an entry by the key's hash,
//! computed once per command by the caller; entries keep no hash, so a rehash (growth, or a
//! shrink after a mass expiry) and the reaper, which starts from an entry, hash the key
//! bytes again.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use hashbrown::HashTable;

use crate::config::EvictionPolicy;
use crate::store::key_hash;
use crate::store::prefetch;
use crate::store::value::{Value, ValueStage};
use crate::store::wheel::Wheel;

use crate::store::entry::{Entries, NO_EXPIRY};
pub use crate::store::entry::{Entry, Key, LRU_UNIT_MS, lru_stamp};

/// One logical database's slice of this shard.
#[derive(Debug, Default)]
pub struct Db {
    /// Indexes into `entries`, placed by the key's hash. A 4-byte slot (plus hashbrown's
    /// control byte) at a load between 44% and 87% costs 6 to 11 bytes per key.
    table: HashTable<u32>,
    /// The entries, dense: index `i` is valid for `i < entries.len()`.
    entries: Entries,
    /// The expiry index of the keys with a TTL; allocated (4.7 KB) only once one has been
    /// set, so the databases nobody uses cost nothing.
    wheel: Option<Box<Wheel>>,
    expires: usize,
    /// Sum of the expiry times of the keys with a TTL, so INFO's avg_ttl is O(1).
    expire_sum: u128,
    /// The hashes with field TTLs, by their earliest field expiry (Redis's `hexpires`):
    /// (time, key). Kept exact by every path that stores, changes or deletes such a hash
    /// (`insert`, the `ValueMut` guard, `remove_index`), so an entry here is always live.
    hexpires: std::collections::BTreeSet<(u64, Box<[u8]>)>,
}

/// The earliest field expiry of a value, if it is a hash with field TTLs.
fn field_deadline(v: &Value) -> Option<u64> {
    match v {
        Value::Hash(h) => h.min_field_ttl(),
        _ => None,
    }
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
        self.table.get_bucket(i).map(|&j| self.entries.get(j))
    }

    /// All entries, in table order.
    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.table.iter().map(|&j| self.entries.get(j))
    }

    /// The hash a key was stored under.
    pub fn entry_hash(e: &Entry) -> u64 {
        key_hash(&e.key)
    }

    /// The index of `key`'s entry.
    #[inline]
    fn index_of(&self, hash: u64, key: &[u8]) -> Option<u32> {
        let entries = &self.entries;
        self.table
            .find(hash, |&j| *entries.get(j).key == *key)
            .copied()
    }

    /// Stores a new entry (the key must be absent). False if the storage is full (see
    /// `Entries::push`).
    fn insert_new(&mut self, hash: u64, entry: Entry) -> Option<u32> {
        let index = self.entries.push(entry).ok()?;
        let entries = &self.entries;
        self.table
            .insert_unique(hash, index, |&j| key_hash(&entries.get(j).key));
        Some(index)
    }

    /// Sets or clears the expiry of entry `i`, keeping the wheel and the counters in step.
    fn set_expire_at(&mut self, i: u32, expire_at: Option<u64>, now_ms: u64) {
        let e = self.entries.get_mut(i);
        let old = std::mem::replace(&mut e.expire_at, expire_at.unwrap_or(NO_EXPIRY));
        if old != NO_EXPIRY {
            self.remove_expiry(old);
        }
        match expire_at {
            Some(at) => {
                self.add_expiry(at);
                let wheel = self
                    .wheel
                    .get_or_insert_with(|| Box::new(Wheel::new(now_ms)));
                wheel.schedule(&mut self.entries, i);
            }
            None => {
                if let Some(wheel) = self.wheel.as_mut() {
                    wheel.remove(&mut self.entries, i);
                }
            }
        }
    }

    /// Replaces entry `i`'s value (its key is `key`) and access time; true if its expiry
    /// must then be set: only when there is a TTL to set (`sets_expiry`) or one to clear,
    /// so that a plain SET of a key without one costs a single probe.
    fn replace_value(
        &mut self,
        i: u32,
        key: &[u8],
        value: Value,
        lru: u32,
        sets_expiry: bool,
    ) -> bool {
        let e = self.entries.get_mut(i);
        let (old_at, new_at) = (field_deadline(&e.value), field_deadline(&value));
        e.value = value;
        e.lru = lru;
        let had_expiry = e.expire_at != NO_EXPIRY;
        if old_at != new_at {
            self.reschedule_fields(key, old_at, new_at);
        }
        had_expiry || sets_expiry
    }

    /// Deletes entry `i`, whose table slot is found by `hash`, with its timer; the last entry
    /// moves into its place.
    fn remove_index(&mut self, hash: u64, i: u32) -> Option<Entry> {
        self.table.find_entry(hash, |&j| j == i).ok()?.remove();
        if let Some(wheel) = self.wheel.as_mut() {
            wheel.remove(&mut self.entries, i);
        }
        let (entry, moved) = self.entries.swap_remove(i);
        if let Some(from) = moved {
            let entries = &self.entries;
            let moved_hash = key_hash(&entries.get(i).key);
            if let Some(slot) = self.table.find_mut(moved_hash, |&j| j == from) {
                *slot = i;
            }
            if let Some(wheel) = self.wheel.as_mut() {
                wheel.moved(&mut self.entries, from, i);
            }
        }
        if entry.expire_at != NO_EXPIRY {
            self.remove_expiry(entry.expire_at);
        }
        if let Some(at) = field_deadline(&entry.value) {
            self.hexpires.remove(&(at, Box::from(&entry.key[..])));
        }
        Some(entry)
    }

    /// Moves a hash's entry in the field-expiry index from `old` to `new`.
    fn reschedule_fields(&mut self, key: &[u8], old: Option<u64>, new: Option<u64>) {
        if old == new {
            return;
        }
        if let Some(at) = old {
            self.hexpires.remove(&(at, Box::from(key)));
        }
        if let Some(at) = new {
            self.hexpires.insert((at, Box::from(key)));
        }
    }

    /// Bytes of this database's bookkeeping: the table, the wheel, the entries' fields other
    /// than key and value, and the storage not yet used.
    fn structure_memory(&self) -> usize {
        let per_entry = size_of::<Entry>() - size_of::<Key>() - size_of::<Value>();
        self.table.capacity() * (size_of::<u32>() + 1)
            + self.wheel.as_ref().map_or(0, |w| w.memory_usage())
            + self.entries.memory_usage()
            - self.entries.len() * (size_of::<Entry>() - per_entry)
    }
}

/// A client's registration on a watched key.
#[derive(Debug)]
struct Watcher {
    dirty: Arc<AtomicBool>,
    /// The key was already logically expired when watched: its later deletion by expiry is
    /// not a modification (Redis 7).
    expired_at_watch: bool,
}

/// The clients watching one key (by client id: registering, finding and removing one is
/// O(1) however many watch the key), and the key's hash so it can be looked up.
#[derive(Debug)]
struct WatchSlot {
    hash: u64,
    watchers: HashMap<u64, Watcher>,
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
    /// Keys modified (every `touch`, i.e. Redis's signalModifiedKey): the "changes" that
    /// `save` points count. Never reset by CONFIG RESETSTAT.
    pub changes: u64,
}

/// A shard: data, expiry index and watch registry.
#[derive(Debug)]
pub struct Shard {
    dbs: Box<[Db]>,
    watches: HashMap<(u16, Bytes), WatchSlot>,
    /// The latest `now` this shard saw (every lookup and every reaper pass brings one, so it
    /// trails the clock by at most the reaper's sleep): inserts, which are not given `now`,
    /// stamp new keys with it and start a database's wheel at it.
    now_ms: u64,
    /// Eviction candidates remembered from earlier samples (see `evict_one`).
    evict_pool: Vec<PoolEntry>,
    /// Bumped whenever entries may have moved between buckets (a table grew, shrank or
    /// rehashed in place, a database was flushed or swapped). A SCAN cursor carries a bucket
    /// position and this number (see `commands::keys::scan::Scan`); when they differ the position means
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
            watches: HashMap::new(),
            now_ms,
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

    /// Remembers `now_ms` as the latest time seen.
    #[inline]
    fn saw(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
    }

    /// Finds a key without expiring it.
    pub fn peek(&self, db: usize, hash: u64, key: &[u8]) -> Option<&Entry> {
        let d = &self.dbs[db];
        d.index_of(hash, key).map(|i| d.entries.get(i))
    }

    /// `peek` for a change: no expiry check, no access time (the caller found the key live
    /// under the same lock hold).
    pub fn peek_mut(&mut self, db: usize, hash: u64, key: &[u8]) -> Option<&mut Entry> {
        let d = &mut self.dbs[db];
        let i = d.index_of(hash, key)?;
        Some(d.entries.get_mut(i))
    }

    /// A lookup met key `i` expired: delete it, as Redis's lookups do. A replica answers an
    /// expired key as missing but leaves the deletion to its master's DEL (Redis's rule: its
    /// data follows the master's, whatever its clock); so does any server during a client
    /// pause (the keys are deleted when it ends).
    fn expire_found(&mut self, db: usize, hash: u64, i: u32, key: &[u8]) {
        if !self.deletions.holds_expiry(self.now_ms) {
            self.remove_found(db, hash, i);
            self.stats.expired_keys += 1;
            self.deletions.deleted(db, key);
            self.log.log(super::keylog::EXPIRED, db, key);
        }
    }

    /// Finds a live key, deleting it first if it has expired.
    pub fn find(&mut self, db: usize, hash: u64, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        self.saw(now_ms);
        // One probe: the index found is reused once the key is known live.
        let i = self.dbs[db].index_of(hash, key)?;
        if self.dbs[db].entries.get(i).is_expired(now_ms) {
            self.expire_found(db, hash, i, key);
            return None;
        }
        let e = self.dbs[db].entries.get_mut(i);
        e.mark_accessed(now_ms);
        Some(e)
    }

    /// `find` by index, for a read-modify-write that stores back in place
    /// ([`Shard::replace_found`]): the one probe serves the read and the write.
    pub fn find_index(&mut self, db: usize, hash: u64, key: &[u8], now_ms: u64) -> Option<u32> {
        self.saw(now_ms);
        let i = self.dbs[db].index_of(hash, key)?;
        if self.dbs[db].entries.get(i).is_expired(now_ms) {
            self.expire_found(db, hash, i, key);
            return None;
        }
        self.dbs[db].entries.get_mut(i).mark_accessed(now_ms);
        Some(i)
    }

    /// Asks the CPU for the entry a key of this `hash` is likely at in `db` (the first one
    /// the table's tag matches; nothing if none does). Reads only the table.
    pub fn prefetch(&self, db: usize, hash: u64) {
        if let Some(d) = self.dbs.get(db)
            && let Some(&i) = d.table.iter_hash(hash).next()
        {
            d.entries.prefetch(i);
        }
    }

    /// A later stage of [`Shard::prefetch`] for the same key, once its entry's line has
    /// been asked for: reads the entry and asks for its value's `stage`.
    pub fn prefetch_value(&self, db: usize, hash: u64, stage: ValueStage) {
        if let Some(d) = self.dbs.get(db)
            && let Some(&i) = d.table.iter_hash(hash).next()
        {
            d.entries.get(i).value.prefetch(stage);
        }
    }

    /// Entry `i` of `db`, as [`Shard::find_index`] found it (no other change since).
    pub fn entry_at(&self, db: usize, i: u32) -> &Entry {
        self.dbs[db].entries.get(i)
    }

    /// `insert` of the key [`Shard::find_index`] found at `i` (no other change since): the
    /// value and expiry replaced where they are, without a second probe. Signals watchers.
    pub fn replace_found(
        &mut self,
        db: usize,
        i: u32,
        key: &[u8],
        value: Value,
        expire_at: Option<u64>,
    ) {
        let lru = lru_stamp(self.now_ms);
        let now_ms = self.now_ms;
        let d = &mut self.dbs[db];
        if d.replace_value(i, key, value, lru, expire_at.is_some()) {
            d.set_expire_at(i, expire_at, now_ms);
        }
        self.touch(db, key);
    }

    /// The key [`Shard::find_index`] found at `i` (no other change since) given `value`
    /// where it is, its TTL kept (INCR's family), without a second probe. Signals watchers.
    pub fn update_found(&mut self, db: usize, i: u32, key: &[u8], value: Value) {
        let lru = lru_stamp(self.now_ms);
        // `false`: the TTL is not being set, so whether the key had one does not matter.
        self.dbs[db].replace_value(i, key, value, lru, false);
        self.touch(db, key);
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

    /// `find_read` that leaves the key's access time alone (Redis's read lookup with
    /// LOOKUP_NOTOUCH: TTL, TYPE, EXISTS).
    pub fn find_read_untouched(
        &mut self,
        db: usize,
        hash: u64,
        key: &[u8],
        now_ms: u64,
    ) -> Option<&mut Entry> {
        let lru = self.peek(db, hash, key).map(|e| e.lru);
        let e = self.find_read(db, hash, key, now_ms)?;
        if let Some(lru) = lru {
            e.lru = lru;
        }
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
        self.saw(now_ms);
        let Some(i) = self.dbs[db].index_of(hash, key) else {
            self.stats.keyspace_misses += 1;
            self.log.log(super::keylog::KEYMISS, db, key);
            return None;
        };
        if self.dbs[db].entries.get(i).is_expired(now_ms) {
            self.expire_found(db, hash, i, key);
            self.stats.keyspace_misses += 1;
            self.log.log(super::keylog::KEYMISS, db, key);
            return None;
        }
        self.stats.keyspace_hits += 1;
        let e = self.dbs[db].entries.get_mut(i);
        e.mark_accessed(now_ms);
        Some(e)
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
        self.insert_unsignalled(db, hash, key, value, expire_at);
        self.touch(db, key);
    }

    /// `insert` without signalling watchers (nor counting a change): Redis's bare `dbAdd`,
    /// for a key a command creates but then leaves unchanged (BITFIELD whose writes all
    /// failed on OVERFLOW FAIL).
    pub fn insert_unsignalled(
        &mut self,
        db: usize,
        hash: u64,
        key: &[u8],
        value: Value,
        expire_at: Option<u64>,
    ) {
        let lru = lru_stamp(self.now_ms);
        let now_ms = self.now_ms;
        let d = &mut self.dbs[db];
        let index = match d.index_of(hash, key) {
            Some(i) => d
                .replace_value(i, key, value, lru, expire_at.is_some())
                .then_some(i),
            None => {
                // hashbrown rehashes (moving entries) only on an insert with no room left.
                if d.table.len() == d.table.capacity() {
                    self.layout = self.layout.wrapping_add(1);
                }
                let Some(i) = d.insert_new(hash, Entry::new(key, value, lru)) else {
                    tracing::error!("a database holds u32::MAX keys in one shard; key not stored");
                    return;
                };
                self.log.log(super::keylog::NEW, db, key);
                let new_at = field_deadline(&d.entries.get(i).value);
                if new_at.is_some() {
                    d.reschedule_fields(key, None, new_at);
                }
                expire_at.is_some().then_some(i)
            }
        };
        if let Some(i) = index {
            d.set_expire_at(i, expire_at, now_ms);
        }
    }

    /// A hash's earliest field expiry changed from `old` to `new` (the `ValueMut` guard,
    /// after a change in place).
    pub fn fields_rescheduled(
        &mut self,
        db: usize,
        key: &[u8],
        old: Option<u64>,
        new: Option<u64>,
    ) {
        self.dbs[db].reschedule_fields(key, old, new);
    }

    /// Sets or clears a key's expiry (the key must exist). Does not signal watchers.
    pub fn set_expire(&mut self, db: usize, hash: u64, key: &[u8], expire_at: Option<u64>) -> bool {
        let now_ms = self.now_ms;
        let d = &mut self.dbs[db];
        let Some(i) = d.index_of(hash, key) else {
            return false;
        };
        d.set_expire_at(i, expire_at, now_ms);
        true
    }

    /// Deletes a key; signals watchers if it existed.
    pub fn remove(&mut self, db: usize, hash: u64, key: &[u8]) -> Option<Entry> {
        let i = self.dbs[db].index_of(hash, key)?;
        self.remove_found(db, hash, i)
    }

    /// Deletes entry `i` of `db`, found under `hash`, and signals watchers.
    fn remove_found(&mut self, db: usize, hash: u64, i: u32) -> Option<Entry> {
        let entry = self.dbs[db].remove_index(hash, i)?;
        self.touch(db, &entry.key);
        Some(entry)
    }

    /// How many (key, client) WATCH entries this shard holds.
    pub fn watch_count(&self) -> usize {
        self.watches.values().map(|s| s.watchers.len()).sum()
    }

    /// Tells the clients watching `key`, and those caching it, that it was modified
    /// (Redis's signalModifiedKey).
    #[inline]
    pub fn touch(&mut self, db: usize, key: &[u8]) {
        self.touch_watchers(db, key);
        let tracking = &self.deletions.tracking;
        if tracking.is_active() {
            tracking.invalidate(key);
        }
    }

    /// `touch` for WATCH alone (a flush tells the tracking clients in one message).
    fn touch_watchers(&mut self, db: usize, key: &[u8]) {
        self.stats.changes = self.stats.changes.wrapping_add(1);
        if self.watches.is_empty() {
            return;
        }
        let lookup = (db as u16, Bytes::copy_from_slice(key));
        let Some(slot) = self.watches.get_mut(&lookup) else {
            return;
        };
        let exists = self.dbs[db].index_of(slot.hash, key).is_some();
        // A client made dirty has nothing more to learn from this key, so its registration
        // goes (as Redis 7's touchWatchedKey unwatches a dirty client): each registration is
        // signalled at most once, and touching a key costs O(1) per registration amortized.
        slot.watchers.retain(|_, w| {
            if w.expired_at_watch && !exists {
                // Already expired when watched, and now deleted: logically unchanged.
                w.expired_at_watch = false;
                return true;
            }
            w.dirty.store(true, Ordering::Release);
            false
        });
        if slot.watchers.is_empty() {
            self.watches.remove(&lookup);
            self.shrink_watches();
        }
    }

    /// Gives back the watch registry's memory once it is mostly empty (a client that
    /// watched a million keys and left must not keep their table), as Redis resizes its
    /// dicts; halving the count before each shrink keeps the cost amortized O(1).
    fn shrink_watches(&mut self) {
        if self.watches.capacity() > 64 && self.watches.len() * 4 < self.watches.capacity() {
            self.watches.shrink_to(self.watches.len() * 2);
        }
    }

    /// Registers a WATCH of `key` by `client`; false if it was registered already.
    pub fn watch(
        &mut self,
        db: usize,
        hash: u64,
        key: &[u8],
        client: u64,
        dirty: &Arc<AtomicBool>,
        now_ms: u64,
    ) -> bool {
        let expired_at_watch = self
            .peek(db, hash, key)
            .is_some_and(|e| e.is_expired(now_ms));
        let slot = self
            .watches
            .entry((db as u16, Bytes::copy_from_slice(key)))
            .or_insert_with(|| WatchSlot {
                hash,
                watchers: HashMap::new(),
            });
        match slot.watchers.entry(client) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(Watcher {
                    dirty: dirty.clone(),
                    expired_at_watch,
                });
                true
            }
        }
    }

    /// Removes `client`'s WATCH of `key`.
    pub fn unwatch(&mut self, db: usize, key: &[u8], client: u64) {
        let lookup = (db as u16, Bytes::copy_from_slice(key));
        if let Some(slot) = self.watches.get_mut(&lookup) {
            slot.watchers.remove(&client);
            if slot.watchers.is_empty() {
                self.watches.remove(&lookup);
                self.shrink_watches();
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
            .and_then(|s| s.watchers.get(&client))
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
        self.stats.changes = self.stats.changes.wrapping_add(self.dbs[db].len() as u64);
        // The wheel goes with its entries.
        self.dbs[db] = Db::default();
    }

    /// `TESTMODE RESET`: every database emptied (watchers signalled, as FLUSHALL does), the
    /// counters zeroed (the `changes` too: a new server has made none) and the time seen set
    /// to `now_ms`, since the clock may have gone back from a moved time to real time.
    pub fn reset(&mut self, now_ms: u64) {
        for db in 0..self.dbs.len() {
            self.flush_db(db);
        }
        self.stats = ShardStats::default();
        self.now_ms = now_ms;
    }

    fn signal_existing_watched(&mut self, db: usize) {
        if self.watches.is_empty() {
            return;
        }
        let keys: Vec<Bytes> = self
            .watches
            .iter()
            .filter(|((d, k), slot)| {
                *d as usize == db && self.dbs[db].index_of(slot.hash, k).is_some()
            })
            .map(|((_, k), _)| k.clone())
            .collect();
        for k in keys {
            self.touch_watchers(db, &k);
        }
    }

    /// Swaps two databases (SWAPDB), signalling watchers of keys present in either. O(1)
    /// apart from the watchers: each database's wheel travels with its entries.
    pub fn swap_dbs(&mut self, a: usize, b: usize) {
        self.signal_existing_watched(a);
        self.signal_existing_watched(b);
        self.dbs.swap(a, b);
        self.layout = self.layout.wrapping_add(1);
        self.signal_existing_watched(a);
        self.signal_existing_watched(b);
    }

    /// Deletes up to `max` keys whose expiry has passed; returns how many it deleted and
    /// whether more are due.
    pub fn reap(&mut self, now_ms: u64, max: usize) -> (usize, bool) {
        self.saw(now_ms);
        if self.deletions.holds_expiry(now_ms) {
            return (0, false);
        }
        let mut due = Vec::new();
        let mut hashes = Vec::new();
        let mut removed = 0;
        let mut more = false;
        for db in 0..self.dbs.len() {
            let d = &mut self.dbs[db];
            let Some(wheel) = d.wheel.as_mut() else {
                continue;
            };
            if removed >= max {
                more |= wheel.next_deadline().is_some_and(|at| at <= now_ms);
                continue;
            }
            due.clear();
            more |= wheel.poll_expired(&mut d.entries, now_ms, max - removed, &mut due);
            // Deleting an entry moves the last one into its place; going from the highest
            // index down, the one moved is never still to be deleted.
            due.sort_unstable_by(|a, b| b.cmp(a));
            // The batch's probes asked for together, so that their misses overlap.
            let d = &self.dbs[db];
            hashes.clear();
            hashes.extend(due.iter().map(|&i| key_hash(&d.entries.get(i).key)));
            if let (Some(&i), Some(&h)) = (due.first(), hashes.first())
                && let Some(lines) = prefetch::TableLines::of(&d.table, h, i)
            {
                hashes[1..].iter().for_each(|&h| lines.prefetch(h));
            }
            for (&i, &hash) in due.iter().zip(&hashes) {
                if let Some(entry) = self.remove_found(db, hash, i) {
                    self.stats.expired_keys += 1;
                    removed += 1;
                    self.deletions.deleted(db, &entry.key);
                    self.log.log(super::keylog::EXPIRED, db, &entry.key);
                }
            }
        }
        for db in 0..self.dbs.len() {
            if removed >= max {
                more |= self.dbs[db]
                    .hexpires
                    .first()
                    .is_some_and(|(at, _)| *at < now_ms);
                continue;
            }
            let (n, left) = self.reap_fields(db, now_ms, max - removed);
            removed += n;
            more |= left;
        }
        if removed > 0 && !more {
            // Once the burst is over: one rehash of what is left, not one per batch.
            self.shrink_after_reap();
        }
        (removed, more)
    }

    /// Deletes up to `max` expired hash fields of database `db` (Redis's active expiry of
    /// fields): each is propagated as HDEL, logged `hexpired` per hash, and a hash left
    /// empty is deleted (logged `del`). Returns how many fields went and whether more are due.
    fn reap_fields(&mut self, db: usize, now_ms: u64, max: usize) -> (usize, bool) {
        let mut removed = 0;
        while removed < max {
            let d = &mut self.dbs[db];
            let Some((at, _)) = d.hexpires.first() else {
                return (removed, false);
            };
            if *at >= now_ms {
                return (removed, false);
            }
            let Some((at, key)) = d.hexpires.pop_first() else {
                return (removed, false);
            };
            let hash = key_hash(&key);
            let Some(i) = d.index_of(hash, &key) else {
                continue;
            };
            let Value::Hash(h) = &mut d.entries.get_mut(i).value else {
                continue;
            };
            let fields = h.expired_fields(now_ms, max - removed);
            for f in &fields {
                h.remove(f);
            }
            let next = h.min_field_ttl();
            let emptied = h.is_empty();
            removed += fields.len();
            for f in &fields {
                self.deletions.field_deleted(db, &key, f);
            }
            if !fields.is_empty() {
                self.log.log(super::keylog::HEXPIRED, db, &key);
            }
            if emptied {
                self.remove_found(db, hash, i);
                self.log.log(super::keylog::DEL, db, &key);
            } else {
                if let Some(n) = next {
                    self.dbs[db].hexpires.insert((n, key.clone()));
                }
                // Popped at `at`: a hash whose earliest field has not expired yet (it moved
                // later meanwhile) is only rescheduled, and its watchers are left alone.
                debug_assert!(at < now_ms);
                if !fields.is_empty() {
                    self.touch(db, &key);
                }
            }
        }
        let more = self.dbs[db]
            .hexpires
            .first()
            .is_some_and(|(at, _)| *at < now_ms);
        (removed, more)
    }

    /// Gives memory back once a mass expiry has emptied most of a table, as Redis resizes its
    /// dicts: a table shrinks when under an eighth full (to twice its keys, so the cost of the
    /// rehash is amortised over the deletions that led to it); the entry storage, dense
    /// already, drops its spare chunks.
    fn shrink_after_reap(&mut self) {
        for d in self.dbs.iter_mut() {
            let cap = d.table.capacity();
            if cap > 1024 && d.table.len() * 8 < cap {
                let entries = &d.entries;
                d.table
                    .shrink_to(d.table.len() * 2, |&j| key_hash(&entries.get(j).key));
                self.layout = self.layout.wrapping_add(1);
            }
            d.entries.shrink();
        }
    }

    /// One eviction step (maxmemory): samples `samples` keys of each database (for the
    /// volatile policies, keys with a TTL), deletes the best candidate for `policy` and says
    /// what it deleted; None if the shard has no candidate. `seed` picks where sampling
    /// starts. A sampled key whose TTL has already passed is always the best candidate, and
    /// counts as expired rather than evicted.
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
                hash: key_hash(&e.key),
                lru: e.lru,
                expire_at: e.expire_at,
            };
            if !pool.contains(&c) {
                pool.push(c);
            }
        };
        let volatile = policy.volatile_only();
        for (db, d) in self.dbs.iter_mut().enumerate() {
            sample_entries(d, seed, samples, volatile, |e| add(e, db));
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
            let d = &self.dbs[c.db as usize];
            let entries = &d.entries;
            let Some(&i) = d.table.find(c.hash, |&j| {
                let e = entries.get(j);
                e.lru == c.lru && e.expire_at == c.expire_at && key_hash(&e.key) == c.hash
            }) else {
                continue;
            };
            evicted = self
                .remove_found(c.db as usize, c.hash, i)
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

    /// The next time the reaper has work, in Unix ms.
    pub fn next_deadline(&self) -> Option<u64> {
        if self.deletions.holds_expiry(self.now_ms) {
            return None;
        }
        self.dbs
            .iter()
            .filter_map(|d| d.wheel.as_ref()?.next_deadline())
            .chain(
                self.dbs
                    .iter()
                    .filter_map(|d| d.hexpires.first().map(|(at, _)| at + 1)),
            )
            .min()
    }

    /// Bytes of this shard's structures, not counting keys and values: the tables' slots and
    /// control bytes, the timer wheels, the entries' other fields and their unused storage.
    /// O(databases), so INFO can report it at any size.
    pub fn structure_memory(&self) -> usize {
        self.dbs.iter().map(Db::structure_memory).sum()
    }

    /// Approximate bytes held by this shard's keys and values (walks every key).
    pub fn approx_memory(&self) -> usize {
        let per_entry = size_of::<Entry>() + size_of::<u32>() + 1;
        self.dbs
            .iter()
            .map(|d| {
                d.iter()
                    .map(|e| per_entry + e.key.heap_bytes() + e.value.approx_memory())
                    .sum::<usize>()
                    + d.wheel.as_ref().map_or(0, |w| w.memory_usage())
            })
            .sum::<usize>()
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

/// Visits up to `want` entries of `d` (with `volatile`, only keys with a TTL), each found
/// from its own random index derived from `seed` and walking forward, looking at no more than
/// `want * 64` entries in all. The entry storage is dense, so for all keys every probe is a
/// key, whatever the table's load; the same key may be visited twice. Keys with a TTL may be
/// rare among the others: when the walks find none, the wheel's earliest are taken instead.
fn sample_entries(
    d: &mut Db,
    seed: u64,
    want: usize,
    volatile: bool,
    mut visit: impl FnMut(&Entry),
) {
    let n = d.entries.len();
    if n == 0 || want == 0 || (volatile && d.expires == 0) {
        return;
    }
    let per_sample = 64.min(n);
    let mut state = seed;
    let mut found = 0;
    for _ in 0..want {
        // splitmix64: cheap, well-mixed positions from one seed (neighbouring entries were
        // often created together, so one run of them would be a poor sample).
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let mut i = ((z ^ (z >> 31)) % n as u64) as usize;
        for _ in 0..per_sample {
            let e = d.entries.get(i as u32);
            if !volatile || e.expire_at != NO_EXPIRY {
                visit(e);
                found += 1;
                break;
            }
            i = if i + 1 == n { 0 } else { i + 1 };
        }
    }
    if found == 0
        && let Some(wheel) = d.wheel.as_ref()
    {
        let mut first: smallvec::SmallVec<[u32; 16]> = smallvec::SmallVec::new();
        wheel.first_nodes(&mut d.entries, want, |i| first.push(i));
        for i in first {
            visit(d.entries.get(i));
        }
    }
}

#[cfg(test)]
mod eviction_tests;
#[cfg(test)]
mod field_expiry_tests;
#[cfg(test)]
mod model_tests;
