//! The keyspace: shards of keys, each under its own lock, and the locking protocol that
//! makes one command, a whole EXEC or a script atomic without a global lock.
//!
//! A key's shard is picked from one seeded hash of the key (the same hash the shard's table
//! uses). It is computed once per key argument: `lock_args` remembers the hashes of the keys
//! it locked for, and every later lookup of the same argument (the same bytes, by address,
//! borrowed for as long as the locks are held) reuses it. A command locks the shards of its keys in ascending index
//! order, which rules out deadlock between any two lockers; commands over the whole keyspace
//! (KEYS, FLUSHALL, DBSIZE…) lock every shard, in the same order. Guards are std mutex
//! guards, which are `!Send`, so the compiler refuses any that would live across an
//! `.await`.

pub(crate) mod access;
pub mod entry;
pub(crate) mod evict;
pub(crate) mod hll;
pub(crate) mod keylog;
pub(crate) mod listpack;
pub(crate) mod prefetch;
pub(crate) mod reaper;
pub mod shard;
pub mod stream;
pub mod value;
mod varint;
pub(crate) mod volatile;
pub(crate) mod wheel;
pub mod zset;

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crossbeam_utils::CachePadded;
use smallvec::SmallVec;

pub use shard::{Entry, Shard, ShardStats};
pub use value::{Value, ValueStage};

/// The keys the store deletes on its own (lazy expiry, the reapers, eviction) are reported
/// to one hook, called with the key's shard still locked, so that replication can send the
/// matching DEL in the same order as the writes around it. On a replica the store deletes
/// nothing on its own: an expired key reads as missing and stays until its master's DEL
/// (Redis's rule), and nothing is evicted.
#[derive(Default)]
pub struct Deletions {
    hook: OnceLock<DeletionHook>,
    field_hook: OnceLock<FieldDeletionHook>,
    replica: AtomicBool,
    /// While CLIENT PAUSE is in force, until this Unix ms (0: no pause; `u64::MAX` for
    /// FAILOVER's): expired keys read as missing but stay stored, as under Redis's
    /// `checkClientPauseTimeoutAndReturnIfPaused`, so the dataset is constant during a pause.
    expiry_held_until: std::sync::atomic::AtomicU64,
    /// Client-side caching: every key change is one (Redis's `signalModifiedKey`), told
    /// under the key's shard lock like WATCH.
    pub(crate) tracking: Arc<crate::client::tracking::Tracking>,
}

/// Called with (database, key) for each key the store deleted on its own.
pub type DeletionHook = Box<dyn Fn(usize, &[u8]) + Send + Sync>;

/// Called with (database, key, field) for each hash field the store expired on its own
/// (replication sends HDEL, as Redis 7.4 does).
pub type FieldDeletionHook = Box<dyn Fn(usize, &[u8], &[u8]) + Send + Sync>;

impl std::fmt::Debug for Deletions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deletions")
            .field("hooked", &self.hook.get().is_some())
            .field("replica", &self.is_replica())
            .finish()
    }
}

impl Deletions {
    /// Sets the hook (once; later calls are ignored).
    pub fn set_hook(&self, hook: DeletionHook) {
        let _ = self.hook.set(hook);
    }

    /// Whether this keyspace is a replica's (no deletion on its own).
    pub fn is_replica(&self) -> bool {
        self.replica.load(Ordering::Relaxed)
    }

    /// True while the store must not delete keys on its own at `now_ms`: a replica's, or
    /// during a client pause (lookups answer expired keys as missing; reapers wait).
    #[inline]
    pub fn holds_expiry(&self, now_ms: u64) -> bool {
        let until = self.expiry_held_until.load(Ordering::Relaxed);
        self.is_replica() || (until != 0 && now_ms <= until)
    }

    /// Holds expiry until `until_ms` (Unix ms; 0 releases it): CLIENT PAUSE's end.
    pub fn hold_expiry_until(&self, until_ms: u64) {
        self.expiry_held_until.store(until_ms, Ordering::Relaxed);
    }

    /// Makes this keyspace a replica's, or a master's again.
    pub fn set_replica(&self, on: bool) {
        self.replica.store(on, Ordering::Relaxed);
    }

    /// Sets the hook for expired hash fields (once).
    pub fn set_field_hook(&self, hook: FieldDeletionHook) {
        let _ = self.field_hook.set(hook);
    }

    pub(crate) fn field_deleted(&self, db: usize, key: &[u8], field: &[u8]) {
        if let Some(h) = self.field_hook.get() {
            h(db, key, field);
        }
    }

    pub(crate) fn deleted(&self, db: usize, key: &[u8]) {
        if let Some(h) = self.hook.get() {
            h(db, key);
        }
    }
}

/// Most key hashes a `Locked` remembers (see `Keyspace::lock_args`).
const MAX_REMEMBERED: usize = 16;

/// The seeded hasher of keys: drawn once per process (a client cannot choose keys that
/// collide) and shared by every keyspace, so that a shard can hash a stored key again (its
/// entries keep no hash, see `store::shard`) and get the hash the key was placed by.
fn key_hasher() -> &'static hashbrown::DefaultHashBuilder {
    static HASHER: std::sync::OnceLock<hashbrown::DefaultHashBuilder> = std::sync::OnceLock::new();
    HASHER.get_or_init(hashbrown::DefaultHashBuilder::default)
}

/// The hash of a key, as every keyspace computes it.
#[inline]
pub fn key_hash(key: &[u8]) -> u64 {
    key_hasher().hash_one(key)
}

/// All shards of all databases.
#[derive(Debug)]
pub struct Keyspace {
    shards: Box<[CachePadded<Mutex<Shard>>]>,
    deletions: Arc<Deletions>,
    hasher: hashbrown::DefaultHashBuilder,
    databases: usize,
    /// The key events every shard logs (`keylog`), mirrored here so that taking the logs
    /// costs one load while nobody listens.
    log_mask: std::sync::Arc<AtomicU8>,
}

impl Keyspace {
    /// A keyspace of `shards` shards (a power of two) with `databases` databases.
    pub fn new(shards: usize, databases: usize, now_ms: u64) -> Self {
        let shards = shards.max(1).next_power_of_two();
        let deletions = Arc::new(Deletions::default());
        let log_mask = Arc::new(AtomicU8::new(0));
        Keyspace {
            shards: (0..shards)
                .map(|_| {
                    let mut shard = Shard::with_deletions(databases, now_ms, deletions.clone());
                    shard.log.mask = log_mask.clone();
                    CachePadded::new(Mutex::new(shard))
                })
                .collect(),
            deletions,
            hasher: key_hasher().clone(),
            databases,
            log_mask,
        }
    }

    /// Who hears of the keys the store deletes on its own (see [`Deletions`]).
    pub fn deletions(&self) -> &Deletions {
        &self.deletions
    }

    /// CLIENT TRACKING's tables, told of every key change.
    pub fn tracking(&self) -> &Arc<crate::client::tracking::Tracking> {
        &self.deletions.tracking
    }

    /// Number of shards.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Number of databases.
    pub fn databases(&self) -> usize {
        self.databases
    }

    /// The key's hash, used both to pick its shard and inside the shard's table (the one
    /// [`Keyspace::prefetch`] computed for this batch, if it did).
    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        prefetch::recall(key).unwrap_or_else(|| self.hasher.hash_one(key))
    }

    /// Hashes `key`, remembers the hash for this thread's batch (see `prefetch`) and asks
    /// the CPU for its entry in database `db`, if the key is there and its shard is free
    /// right now (a hint: a shard another thread holds is not waited for).
    pub fn prefetch(&self, db: usize, key: &[u8]) {
        let hash = self.hash_to_prefetch(key);
        self.prefetch_hashes(db, &[hash], false);
    }

    /// `key`'s hash, remembered for this thread's batch (see `prefetch`), for
    /// [`Keyspace::prefetch_hashes`].
    pub fn hash_to_prefetch(&self, key: &[u8]) -> u64 {
        let hash = self.hasher.hash_one(key);
        prefetch::remember(key, hash);
        hash
    }

    /// Remembers for this thread's batch that `key` hashes to `hash` (which
    /// [`Keyspace::hash_to_prefetch`] gave for the same bytes elsewhere in the batch),
    /// without hashing it again.
    pub fn remember_hash(&self, key: &[u8], hash: u64) {
        prefetch::remember(key, hash);
    }

    /// Asks the CPU for the entries of the keys with these `hashes` in database `db`, each
    /// whose shard is free right now. Every shard is taken (`try_lock`) before the first
    /// probe: taking a lock is an atomic read-modify-write, which waits for every load
    /// before it, so a lock between two probes would wait out one key's table misses
    /// before the next key's could start, where probes in a row overlap them.
    /// With `values` (the batch has sorted-set commands), a batch of two or more keys is
    /// walked on to its sorted sets' data.
    pub fn prefetch_hashes(&self, db: usize, hashes: &[u64], values: bool) {
        let mut held: SmallVec<[(usize, MutexGuard<'_, Shard>); prefetch::MAX_KEYS]> =
            SmallVec::new();
        for &hash in hashes {
            let i = self.shard_of_hash(hash);
            if !held.iter().any(|(j, _)| *j == i)
                && let Ok(shard) = self.shards[i].try_lock()
            {
                held.push((i, shard));
            }
        }
        for &hash in hashes {
            let i = self.shard_of_hash(hash);
            if let Some((_, shard)) = held.iter().find(|(j, _)| *j == i) {
                shard.prefetch(db, hash);
            }
        }
        if !values || hashes.len() < 2 {
            // One key: reading its entry now would wait for the line just asked for.
            return;
        }
        // A value's data is one or two pointers past its entry (a sorted set's box, then
        // the compact set's buffer): each stage reads what the one before asked for, by
        // now on its way, and asks for the next, so the batch's misses overlap again.
        for stage in [ValueStage::Heap, ValueStage::Data] {
            for &hash in hashes {
                let i = self.shard_of_hash(hash);
                if let Some((_, shard)) = held.iter().find(|(j, _)| *j == i) {
                    shard.prefetch_value(db, hash, stage);
                }
            }
        }
    }

    /// The shard a hash belongs to. Bits 32.. are used: the table itself uses the low bits for
    /// the bucket and the top seven as the tag, so sharing them would weaken both.
    #[inline]
    pub fn shard_of_hash(&self, hash: u64) -> usize {
        ((hash >> 32) as usize) & (self.shards.len() - 1)
    }

    /// The shard of a key.
    #[inline]
    pub fn shard_of(&self, key: &[u8]) -> usize {
        self.shard_of_hash(self.hash(key))
    }

    fn lock_index(&self, i: usize) -> MutexGuard<'_, Shard> {
        // A panic while holding a shard lock would be a bug in sluice, not client input; keep
        // serving the other shards' data rather than poisoning the whole server.
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Locks the shards of `keys` in ascending order.
    pub fn lock_keys<'a, I, K>(&'a self, keys: I) -> Locked<'a>
    where
        I: IntoIterator<Item = K>,
        K: AsRef<[u8]>,
    {
        let mut idx: SmallVec<[usize; 8]> = keys
            .into_iter()
            .map(|k| self.shard_of(k.as_ref()))
            .collect();
        idx.sort_unstable();
        idx.dedup();
        self.lock_indexes(&idx)
    }

    /// Locks the shards of `keys` in ascending order, like `lock_keys`, and remembers each
    /// key's hash so that the lookups and writes through the returned guards do not hash it
    /// again. The keys are borrowed for as long as the guards live, which is what makes
    /// recognising them by address sound.
    pub fn lock_args<'a, I>(&'a self, keys: I) -> Locked<'a>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        self.lock_args_and(keys, &[])
    }

    /// `lock_args`, also locking the shards `also` (indexes, in any order).
    pub fn lock_args_and<'a, I>(&'a self, keys: I, also: &[usize]) -> Locked<'a>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let (hashed, idx) = self.shards_of(keys, also);
        let mut locked = self.lock_indexes(&idx);
        locked.hashed = hashed;
        locked
    }

    /// `lock_args`, without waiting: `Err` carries the shard indexes wanted when one of
    /// them is held by another thread (none is then held).
    pub fn try_lock_args<'a, I>(&'a self, keys: I) -> Result<Locked<'a>, SmallVec<[usize; 8]>>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        self.try_lock_args_and(keys, &[])
    }

    /// `lock_args_and`, without waiting (see `try_lock_args`).
    pub fn try_lock_args_and<'a, I>(
        &'a self,
        keys: I,
        also: &[usize],
    ) -> Result<Locked<'a>, SmallVec<[usize; 8]>>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let (hashed, idx) = self.shards_of(keys, also);
        let mut locked = self.try_lock_indexes(&idx).ok_or(idx)?;
        locked.hashed = hashed;
        Ok(locked)
    }

    /// The keys' hashes (the first `MAX_REMEMBERED`, kept for the locked view) and the
    /// shards to lock, `also` included, sorted and without repeats.
    #[allow(clippy::type_complexity)]
    fn shards_of<'a, I>(
        &self,
        keys: I,
        also: &[usize],
    ) -> (SmallVec<[(&'a [u8], u64); 4]>, SmallVec<[usize; 8]>)
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let mut hashed: SmallVec<[(&'a [u8], u64); 4]> = SmallVec::new();
        let mut idx: SmallVec<[usize; 8]> = SmallVec::from_slice(also);
        for key in keys {
            // A transaction names one key in command after command (the sliding window's
            // four): a key equal to the one before reuses its hash.
            let hash = match hashed.last() {
                Some(&(last, hash)) if last == key => hash,
                _ => self.hash(key),
            };
            let shard = self.shard_of_hash(hash);
            if idx.last() != Some(&shard) {
                idx.push(shard);
            }
            // Beyond a few keys (MSET of hundreds) a linear search would cost more than the
            // hash it saves.
            if hashed.len() < MAX_REMEMBERED {
                hashed.push((key, hash));
            }
        }
        if idx.len() > 1 {
            idx.sort_unstable();
            idx.dedup();
        }
        (hashed, idx)
    }

    /// `try_lock_args` for a command's one key (most commands): the same result, without
    /// the index vector, the sort and the iterator of the general case.
    pub fn try_lock_key<'a>(&'a self, key: &'a [u8]) -> Result<Locked<'a>, SmallVec<[usize; 8]>> {
        let mut locked = self.lock_none();
        locked.try_take_key(key)?;
        Ok(locked)
    }

    /// `lock_all`, without waiting: `Err` carries every shard index.
    pub fn try_lock_all(&self) -> Result<Locked<'_>, SmallVec<[usize; 8]>> {
        let idx: SmallVec<[usize; 8]> = (0..self.shards.len()).collect();
        self.try_lock_indexes(&idx).ok_or(idx)
    }

    /// `lock_indexes`, without waiting: None if another thread holds one of them.
    pub fn try_lock_indexes(&self, idx: &[usize]) -> Option<Locked<'_>> {
        let mut guards = SmallVec::with_capacity(idx.len());
        for &i in idx {
            let guard = match self.shards[i].try_lock() {
                Ok(g) => g,
                // As `lock_index`: a poisoned shard is still served.
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return None,
            };
            guards.push((i, guard));
        }
        Some(Locked {
            ks: self,
            guards,
            hashed: SmallVec::new(),
        })
    }

    /// Locks the given shard indexes, which must be sorted and unique.
    pub fn lock_indexes(&self, idx: &[usize]) -> Locked<'_> {
        Locked {
            ks: self,
            guards: idx.iter().map(|&i| (i, self.lock_index(i))).collect(),
            hashed: SmallVec::new(),
        }
    }

    /// Locks every shard, in order.
    pub fn lock_all(&self) -> Locked<'_> {
        let idx: Vec<usize> = (0..self.shards.len()).collect();
        self.lock_indexes(&idx)
    }

    /// Locks nothing (for commands that touch no keys).
    pub fn lock_none(&self) -> Locked<'_> {
        Locked {
            ks: self,
            guards: SmallVec::new(),
            hashed: SmallVec::new(),
        }
    }

    /// Keys modified since the start, summed over the shards (each locked in turn): what
    /// `save` points and INFO's rdb_changes_since_last_save count from.
    pub fn changes(&self) -> u64 {
        (0..self.shards.len()).fold(0u64, |n, i| {
            n.wrapping_add(self.lock_index(i).stats.changes)
        })
    }

    /// Sets which key events (`keylog` kinds) every shard logs. Takes no lock (CONFIG SET
    /// may run inside an EXEC that holds shards).
    pub fn set_log_mask(&self, mask: u8) {
        self.log_mask.store(mask, Ordering::Relaxed);
    }

    /// True if shards log key events (someone listens to `new`, `expired` or `evicted`).
    #[inline]
    pub fn logs_events(&self) -> bool {
        self.log_mask.load(Ordering::Relaxed) != 0
    }

    /// Runs the reaper on one shard: deletes up to `max` due keys. Returns (deleted, more due).
    pub fn reap_shard(&self, i: usize, now_ms: u64, max: usize) -> (usize, bool) {
        self.lock_index(i).reap(now_ms, max)
    }

    /// The next deadline of one shard.
    pub fn next_deadline(&self, i: usize) -> Option<u64> {
        self.lock_index(i).next_deadline()
    }

    /// `reap_shard` then `next_deadline` under one lock hold, or None without waiting if the
    /// shard is held (a script holds every shard while it runs, possibly for seconds; a
    /// reaper must not block a runtime thread behind it).
    /// The expired keys' events (when logged) are moved to `events`, to be published once
    /// the shard is released.
    pub fn try_reap_shard(
        &self,
        i: usize,
        now_ms: u64,
        max: usize,
        events: &mut Vec<keylog::KeyEvent>,
    ) -> Option<((usize, bool), Option<u64>)> {
        let mut shard = match self.shards[i].try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        let reaped = shard.reap(now_ms, max);
        events.append(&mut shard.log.events);
        Some((reaped, shard.next_deadline()))
    }
}

/// The shards one command (or one EXEC) holds, and key-level operations through them.
///
/// Every operation takes the database index and the key, finds the key's shard among the
/// held guards, and applies Redis's lazy expiry with the command's `now`.
pub struct Locked<'a> {
    ks: &'a Keyspace,
    guards: SmallVec<[(usize, MutexGuard<'a, Shard>); 4]>,
    /// The key arguments the shards were locked for, with their hashes (`lock_args`).
    hashed: SmallVec<[(&'a [u8], u64); 4]>,
}

/// A key looked up once by [`Locked::probe`]: its live value, if any, and the one write
/// that may follow.
pub struct Probe<'s> {
    shard: &'s mut Shard,
    db: usize,
    hash: u64,
    /// The live entry's index in its database; `None` for a missing (or just expired) key.
    found: Option<u32>,
}

impl Probe<'_> {
    /// The key's live value, `None` if it is missing.
    #[inline]
    pub fn value(&self) -> Option<&Value> {
        self.found.map(|i| &self.shard.entry_at(self.db, i).value)
    }

    /// Stores `value` under the probed `key` with `expire_at` (None: no TTL), replacing any
    /// old value and TTL, as [`Locked::set`] would: in place when the key was found (no
    /// second probe), inserted otherwise. Signals watchers.
    #[inline]
    pub fn write(self, key: &[u8], value: Value, expire_at: Option<u64>) {
        match self.found {
            Some(i) => self.shard.replace_found(self.db, i, key, value, expire_at),
            None => self.shard.insert(self.db, self.hash, key, value, expire_at),
        }
    }

    /// Stores `value` under the probed `key`, keeping a found key's TTL (a missing key gets
    /// none), as INCR does: in place when the key was found, inserted otherwise. Signals
    /// watchers.
    #[inline]
    pub fn write_keep_ttl(self, key: &[u8], value: Value) {
        match self.found {
            Some(i) => self.shard.update_found(self.db, i, key, value),
            None => self.shard.insert(self.db, self.hash, key, value, None),
        }
    }
}

impl std::fmt::Debug for Locked<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Locked")
            .field(
                "shards",
                &self.guards.iter().map(|g| g.0).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl<'a> Locked<'a> {
    /// Folds over the held shards (whole-keyspace commands hold them all).
    pub fn fold<T>(&mut self, init: T, mut f: impl FnMut(T, &Shard) -> T) -> T {
        let mut acc = init;
        for (_, g) in self.guards.iter() {
            acc = f(acc, g);
        }
        acc
    }

    /// Deletes every due key in the held shards (the test clock jumped).
    pub fn reap_due(&mut self, now_ms: u64) -> usize {
        let mut total = 0;
        for shard in self.shards_mut() {
            loop {
                let (n, more) = shard.reap(now_ms, reaper::REAP_BATCH);
                total += n;
                if !more {
                    break;
                }
            }
        }
        total
    }

    /// Moves the key events the held shards logged (keys created, expired, evicted) to
    /// `out`, in order per shard. One load when no shard logs anything.
    #[inline]
    pub fn take_log(&mut self, out: &mut Vec<keylog::KeyEvent>) {
        if !self.ks.logs_events() {
            return;
        }
        for (_, g) in self.guards.iter_mut() {
            if !g.log.events.is_empty() {
                out.append(&mut g.log.events);
            }
        }
    }

    /// Counters summed over the held shards.
    pub fn stats(&mut self) -> ShardStats {
        self.fold(ShardStats::default(), |mut acc, s| {
            acc.expired_keys += s.stats.expired_keys;
            acc.keyspace_hits += s.stats.keyspace_hits;
            acc.keyspace_misses += s.stats.keyspace_misses;
            acc.changes = acc.changes.wrapping_add(s.stats.changes);
            acc
        })
    }

    /// CONFIG RESETSTAT: zero the held shards' counters.
    pub fn reset_stats(&mut self) {
        for shard in self.shards_mut() {
            shard.stats = ShardStats {
                changes: shard.stats.changes,
                ..ShardStats::default()
            };
        }
    }

    /// INFO keyspace lines: (db, keys, keys with a TTL, average TTL in ms) for non-empty dbs.
    /// O(shards × databases): the per-db counters are kept up to date by every write.
    pub fn db_summary(&mut self, now_ms: u64) -> Vec<(usize, usize, usize, u64)> {
        let dbs = self.ks.databases;
        let mut sums = vec![(0usize, 0usize, 0u128); dbs];
        for (_, shard) in self.guards.iter() {
            for (db, sum) in sums.iter_mut().enumerate() {
                let d = shard.db(db);
                sum.0 += d.len();
                sum.1 += d.expires();
                sum.2 += u128::from(d.avg_ttl(now_ms)) * d.expires() as u128;
            }
        }
        sums.into_iter()
            .enumerate()
            .filter(|(_, s)| s.0 > 0)
            .map(|(db, (keys, expires, weighted))| {
                let avg = if expires > 0 {
                    (weighted / expires as u128) as u64
                } else {
                    0
                };
                (db, keys, expires, avg)
            })
            .collect()
    }

    /// The keyspace these guards belong to.
    pub fn keyspace(&self) -> &'a Keyspace {
        self.ks
    }

    /// [`Keyspace::try_lock_key`] into this `Locked`, which holds nothing yet: the guard
    /// and the key's hash are pushed where they stay, instead of a new `Locked` (a few
    /// hundred bytes) being built and moved into the command's `Ctx` (every command with
    /// one key comes this way). `Err` carries the shard wanted, as `try_lock_key`'s.
    pub fn try_take_key(&mut self, key: &'a [u8]) -> Result<(), SmallVec<[usize; 8]>> {
        debug_assert!(self.guards.is_empty() && self.hashed.is_empty());
        let hash = self.ks.hash(key);
        let i = self.ks.shard_of_hash(hash);
        let guard = match self.ks.shards[i].try_lock() {
            Ok(g) => g,
            // As `lock_index`: a poisoned shard is still served.
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Err(smallvec::smallvec![i]),
        };
        self.guards.push((i, guard));
        self.hashed.push((key, hash));
        Ok(())
    }

    /// True if no shard is held and nothing was put on the heap: dropping these locks
    /// would do nothing (`Ctx::end`).
    #[inline]
    pub(crate) fn owns_nothing(&self) -> bool {
        self.guards.is_empty()
            && !self.guards.spilled()
            && self.hashed.is_empty()
            && !self.hashed.spilled()
    }

    /// Releases every guard.
    pub fn release(&mut self) {
        self.guards.clear();
        self.hashed.clear();
    }

    /// Shard `i`, if it is held.
    pub fn held_shard(&self, i: usize) -> Option<&Shard> {
        self.guards.iter().find(|(j, _)| *j == i).map(|(_, g)| &**g)
    }

    /// The indexes of the held shards.
    pub fn held_indexes(&self) -> SmallVec<[usize; 8]> {
        self.guards.iter().map(|(i, _)| *i).collect()
    }

    /// Takes more shards (`more`: ascending, none held yet) while holding these, without
    /// risking a deadlock: a shard above every held one is waited for (every locker takes
    /// ascending order, so no cycle can form), any other is only tried. Err(index) names
    /// the first shard another holder kept; the shards taken before it stay held.
    pub fn add_shards(&mut self, more: &[usize]) -> Result<(), usize> {
        for &i in more {
            let top = self.guards.iter().map(|(j, _)| *j).max();
            let guard = if top.is_none_or(|t| i > t) {
                self.ks.lock_index(i)
            } else {
                match self.ks.shards[i].try_lock() {
                    Ok(g) => g,
                    Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                    Err(std::sync::TryLockError::WouldBlock) => return Err(i),
                }
            };
            let at = self.guards.partition_point(|(j, _)| *j < i);
            self.guards.insert(at, (i, guard));
        }
        Ok(())
    }

    /// True if no shard is held.
    pub fn holds_none(&self) -> bool {
        self.guards.is_empty()
    }

    /// True if every shard is held.
    pub fn holds_all(&self) -> bool {
        self.guards.len() == self.ks.shard_count()
    }

    /// The key's hash: remembered if `key` is one of the arguments the shards were locked
    /// for (the same borrowed bytes: same address and length), computed otherwise.
    #[inline]
    fn hash_of(&self, key: &[u8]) -> u64 {
        for &(k, hash) in &self.hashed {
            if std::ptr::eq(k.as_ptr(), key.as_ptr()) && k.len() == key.len() {
                return hash;
            }
        }
        self.ks.hash(key)
    }

    #[inline]
    fn shard(&mut self, key: &[u8]) -> (&mut Shard, u64) {
        let hash = self.hash_of(key);
        let want = self.ks.shard_of_hash(hash);
        let pos = self.guards.iter().position(|(i, _)| *i == want);
        match pos {
            Some(p) => (&mut self.guards[p].1, hash),
            None => {
                // The command table declares every key a command touches, so this is a bug in
                // sluice. Locking out of order could deadlock; fail loudly in tests instead.
                panic!("sluice bug: key's shard {want} was not locked for this command")
            }
        }
    }

    /// The held shards (for whole-keyspace commands, which hold them all).
    pub fn shards_mut(&mut self) -> impl Iterator<Item = &mut Shard> {
        self.guards.iter_mut().map(|(_, g)| &mut **g)
    }

    /// A read lookup: lazy expiry, counts a keyspace hit or miss.
    pub fn read(&mut self, db: usize, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        let (shard, hash) = self.shard(key);
        shard.find_read(db, hash, key, now_ms)
    }

    /// `read` that does not count as an access (Redis's LOOKUP_NOTOUCH: TTL, TYPE, EXISTS
    /// leave OBJECT IDLETIME alone).
    pub fn read_untouched(&mut self, db: usize, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        let (shard, hash) = self.shard(key);
        shard.find_read_untouched(db, hash, key, now_ms)
    }

    /// A write lookup: lazy expiry, no stats. To change a value in place, use `modify` /
    /// `modify_or_create` (the `access` guard signals WATCH); this one is for reads before a
    /// write and for replacing a value whole.
    pub fn lookup(&mut self, db: usize, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        let (shard, hash) = self.shard(key);
        shard.find(db, hash, key, now_ms)
    }

    /// A lookup that does not count as an access (OBJECT IDLETIME must not reset what it
    /// reports): lazy expiry, no stats.
    pub fn lookup_untouched(&mut self, db: usize, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        let (shard, hash) = self.shard(key);
        shard.find_untouched(db, hash, key, now_ms)
    }

    /// A read lookup of the value, WRONGTYPE-agnostic.
    pub fn read_value(&mut self, db: usize, key: &[u8], now_ms: u64) -> Option<&mut Value> {
        self.read(db, key, now_ms).map(|e| &mut e.value)
    }

    /// Tells the clients watching `key` it changed (Redis's `signalModifiedKey`), for a
    /// value changed through a plain lookup.
    pub fn touch(&mut self, db: usize, key: &[u8]) {
        let (shard, _) = self.shard(key);
        shard.touch(db, key);
    }

    /// True if the key exists and is live (no stats).
    pub fn exists(&mut self, db: usize, key: &[u8], now_ms: u64) -> bool {
        self.lookup(db, key, now_ms).is_some()
    }

    /// Stores a value with an expiry (None: no TTL), replacing any old value and TTL.
    pub fn set(&mut self, db: usize, key: &[u8], value: Value, expire_at: Option<u64>) {
        let (shard, hash) = self.shard(key);
        shard.insert(db, hash, key, value, expire_at);
    }

    /// One probe for a read that may be followed by a write of the same key: the live
    /// value (lazy expiry and access time as any lookup) and where to store a new one, in
    /// place, without a second probe (SET without GET or KEEPTTL; CL.THROTTLE, whose common
    /// call, a refused one, only reads).
    #[inline]
    pub fn probe(&mut self, db: usize, key: &[u8], now_ms: u64) -> Probe<'_> {
        let (shard, hash) = self.shard(key);
        let found = shard.find_index(db, hash, key, now_ms);
        Probe {
            shard,
            db,
            hash,
            found,
        }
    }

    /// Stores a value keeping the key's current TTL (if it is live).
    pub fn set_keep_ttl(&mut self, db: usize, key: &[u8], value: Value, now_ms: u64) {
        let (shard, hash) = self.shard(key);
        let ttl = shard
            .find(db, hash, key, now_ms)
            .and_then(|e| e.expire_at());
        shard.insert(db, hash, key, value, ttl);
    }

    /// Deletes a key; returns its entry if it was live.
    pub fn remove(&mut self, db: usize, key: &[u8], now_ms: u64) -> Option<Entry> {
        let (shard, hash) = self.shard(key);
        shard.find(db, hash, key, now_ms)?;
        shard.remove(db, hash, key)
    }

    /// Sets or clears the expiry of a live key and signals watchers. False if missing.
    pub fn set_expire(
        &mut self,
        db: usize,
        key: &[u8],
        expire_at: Option<u64>,
        now_ms: u64,
    ) -> bool {
        let (shard, hash) = self.shard(key);
        if shard.find(db, hash, key, now_ms).is_none() {
            return false;
        }
        shard.set_expire(db, hash, key, expire_at);
        shard.touch(db, key);
        true
    }

    /// Registers a WATCH; false if `client` watched `key` already.
    pub fn watch(
        &mut self,
        db: usize,
        key: &[u8],
        client: u64,
        dirty: &std::sync::Arc<std::sync::atomic::AtomicBool>,
        now_ms: u64,
    ) -> bool {
        let (shard, hash) = self.shard(key);
        shard.watch(db, hash, key, client, dirty, now_ms)
    }

    /// Removes a WATCH.
    pub fn unwatch(&mut self, db: usize, key: &[u8], client: u64) {
        let (shard, _) = self.shard(key);
        shard.unwatch(db, key, client);
    }

    /// Redis 7's watched-key expiry rule (see `Shard::watched_key_expired`).
    pub fn watched_key_expired(&mut self, db: usize, key: &[u8], client: u64, now_ms: u64) -> bool {
        let (shard, hash) = self.shard(key);
        shard.watched_key_expired(db, hash, key, client, now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The batch prefetch's later stages read entries (any value, a compact or large sorted
    /// set, an empty one, a missing key, a shard another thread holds) and change nothing.
    #[test]
    fn prefetching_values_reads_and_changes_nothing() {
        use crate::store::zset::{SortedSet, ZsetLimits};
        let ks = Keyspace::new(4, 1, 0);
        let limits = ZsetLimits::DEFAULT;
        let zset = |n: usize| {
            let mut z = SortedSet::new();
            for i in 0..n {
                let m = i.to_string();
                let _ = z.insert(m.as_bytes(), i as f64, &limits);
            }
            Value::ZSet(Box::new(z))
        };
        let keys: [(&[u8], Value); 4] = [
            (b"small", zset(20)),
            (b"large", zset(200)),
            (b"empty", zset(0)),
            (b"string", Value::Int(7)),
        ];
        {
            let mut locked = ks.lock_keys(keys.iter().map(|(k, _)| *k));
            for (k, v) in &keys {
                locked.set(0, k, v.clone(), None);
            }
        }
        let mut hashes: Vec<u64> = keys.iter().map(|(k, _)| ks.hash(k)).collect();
        hashes.push(ks.hash(b"missing"));
        ks.prefetch_hashes(0, &hashes, true);
        let held = ks.lock_keys([&b"small"[..]]);
        std::thread::scope(|s| {
            s.spawn(|| ks.prefetch_hashes(0, &hashes, true));
        });
        drop(held);
        let mut locked = ks.lock_keys(keys.iter().map(|(k, _)| *k));
        for (k, v) in &keys {
            let got = locked.read_value(0, k, 0).map(|v| v.clone());
            assert_eq!(got.map(|g| g.type_name()), Some(v.type_name()));
        }
        let Some(Value::ZSet(z)) = locked.read_value(0, b"large", 0).map(|v| v.clone()) else {
            panic!("large is a sorted set");
        };
        assert_eq!((z.len(), z.encoding()), (200, "skiplist"));
    }

    /// A probe reads the live value (none for a missing or expired key), changes nothing
    /// unless written, and its write is `set`'s: value and TTL replaced, or the key inserted.
    #[test]
    fn a_probe_reads_the_live_value_and_writes_as_set_does() {
        let ks = Keyspace::new(4, 1, 0);
        let mut locked = ks.lock_keys([&b"k"[..], &b"gone"[..]]);
        let ttl = |l: &mut Locked<'_>, k: &[u8], now| l.lookup(0, k, now).map(|e| e.expire_at());

        let probe = locked.probe(0, b"k", 0);
        assert!(probe.value().is_none());
        probe.write(b"k", Value::Int(5), Some(100));
        assert_eq!(ttl(&mut locked, b"k", 0), Some(Some(100)));

        // Read only: value and TTL stay.
        let probe = locked.probe(0, b"k", 1);
        assert!(matches!(probe.value(), Some(Value::Int(5))));
        assert_eq!(ttl(&mut locked, b"k", 1), Some(Some(100)));

        // Written in place: the new value and TTL, one key.
        locked
            .probe(0, b"k", 2)
            .write(b"k", Value::Int(6), Some(200));
        assert!(matches!(locked.read_value(0, b"k", 2), Some(Value::Int(6))));
        assert_eq!(ttl(&mut locked, b"k", 2), Some(Some(200)));
        assert_eq!(locked.db_summary(2), vec![(0, 1, 1, 198)]);

        // Expired: missing to the probe, and written as a new key.
        locked.set(0, b"gone", Value::Int(1), Some(10));
        let probe = locked.probe(0, b"gone", 11);
        assert!(probe.value().is_none());
        probe.write(b"gone", Value::Int(2), None);
        assert_eq!(ttl(&mut locked, b"gone", 11), Some(None));
        assert!(matches!(
            locked.read_value(0, b"gone", 11),
            Some(Value::Int(2))
        ));
    }

    /// A probe's TTL-keeping write (INCR's): a found key keeps its TTL and stays one key; a
    /// missing or expired key is inserted with none.
    #[test]
    fn a_probe_write_keeping_the_ttl_keeps_it() {
        let ks = Keyspace::new(4, 1, 0);
        let mut locked = ks.lock_keys([&b"k"[..], &b"gone"[..], &b"new"[..]]);
        let ttl = |l: &mut Locked<'_>, k: &[u8], now| l.lookup(0, k, now).map(|e| e.expire_at());

        locked.set(0, b"k", Value::Int(1), Some(100));
        locked.probe(0, b"k", 1).write_keep_ttl(b"k", Value::Int(2));
        assert!(matches!(locked.read_value(0, b"k", 1), Some(Value::Int(2))));
        assert_eq!(ttl(&mut locked, b"k", 1), Some(Some(100)));
        assert_eq!(locked.db_summary(1), vec![(0, 1, 1, 99)]);

        locked
            .probe(0, b"new", 1)
            .write_keep_ttl(b"new", Value::Int(1));
        assert_eq!(ttl(&mut locked, b"new", 1), Some(None));

        locked.set(0, b"gone", Value::Int(7), Some(10));
        let probe = locked.probe(0, b"gone", 11);
        assert!(probe.value().is_none());
        probe.write_keep_ttl(b"gone", Value::Int(1));
        assert_eq!(
            ttl(&mut locked, b"gone", 11),
            Some(None),
            "the expired key's TTL is gone"
        );
        assert!(matches!(
            locked.read_value(0, b"gone", 11),
            Some(Value::Int(1))
        ));
    }

    #[test]
    fn try_lock_key_locks_what_try_lock_args_locks() {
        let ks = Keyspace::new(8, 1, 0);
        for n in 0..64 {
            let key = format!("key:{n}").into_bytes();
            let one = ks.try_lock_key(&key).expect("free");
            assert_eq!(one.held_indexes().as_slice(), &[ks.shard_of(&key)]);
            assert_eq!(one.hashed.as_slice(), &[(&key[..], ks.hash(&key))]);
            // Held: another thread's attempt is refused with the shard it wanted.
            std::thread::scope(|s| {
                s.spawn(|| {
                    let wanted = ks.try_lock_key(&key).err();
                    assert_eq!(wanted.as_deref(), Some(&[ks.shard_of(&key)][..]));
                    assert_eq!(
                        ks.try_lock_args([&key[..]]).err().as_deref(),
                        wanted.as_deref()
                    );
                });
            });
            drop(one);
            let args = ks.try_lock_args([&key[..]]).expect("free again");
            assert_eq!(args.held_indexes().as_slice(), &[ks.shard_of(&key)]);
        }
    }

    #[test]
    fn add_shards_waits_only_above_what_it_holds() {
        let ks = Keyspace::new(4, 1, 0);
        let mut script = ks.lock_indexes(&[1]);
        // Above every held shard: taken (it would wait if another holder had it).
        assert_eq!(script.add_shards(&[3]), Ok(()));
        assert_eq!(script.held_indexes().as_slice(), &[1, 3]);
        // Below: only tried. Held by another client, it is refused; free, it is taken.
        let other = ks.lock_indexes(&[0]);
        assert_eq!(script.add_shards(&[0, 2]), Err(0));
        drop(other);
        assert_eq!(script.add_shards(&[0, 2]), Ok(()));
        assert_eq!(script.held_indexes().as_slice(), &[0, 1, 2, 3]);
        assert!(script.holds_all());
        script.release();
        assert!(script.holds_none());
    }

    #[test]
    fn shards_log_key_events_only_when_asked_and_hand_them_over() {
        let ks = Keyspace::new(1, 2, 0);
        let key = bytes::Bytes::from_static(b"k");
        let mut events = Vec::new();
        {
            let mut locked = ks.lock_args([&key[..]]);
            locked.set(0, &key, Value::Int(1), Some(10));
            locked.take_log(&mut events);
        }
        assert!(events.is_empty(), "nothing is logged while the mask is 0");
        ks.set_log_mask(keylog::NEW | keylog::EXPIRED);
        {
            let mut locked = ks.lock_args([&key[..]]);
            locked.set(1, &key, Value::Int(1), Some(10));
            locked.set(1, &key, Value::Int(2), Some(10));
            locked.take_log(&mut events);
        }
        assert_eq!(events, vec![(keylog::NEW, 1, Box::from(&b"k"[..]))]);
        events.clear();
        // The reaper hands over what it expired, in one batch per lock hold.
        let reaped = ks.try_reap_shard(0, 100, 128, &mut events);
        assert_eq!(reaped.map(|r| r.0), Some((2, false)));
        let mut got: Vec<(u8, usize)> = events.iter().map(|e| (e.0, e.1)).collect();
        got.sort();
        assert_eq!(got, vec![(keylog::EXPIRED, 0), (keylog::EXPIRED, 1)]);
    }

    #[test]
    fn locked_keys_are_hashed_once_and_other_slices_still_work() {
        let ks = Keyspace::new(8, 1, 0);
        let a = bytes::Bytes::from_static(b"rate:user:1");
        let b = bytes::Bytes::from_static(b"rate:user:2");
        let mut locked = ks.lock_args([&a[..], &b[..]]);
        assert_eq!(locked.hash_of(&a), ks.hash(&a));
        // Shards hash stored keys again with the process-wide hasher: it must agree.
        assert_eq!(ks.hash(&a), key_hash(&a));
        locked.set(0, &a, Value::Int(1), None);
        // The same bytes elsewhere (a copy, a sub-slice) are hashed afresh, not mistaken.
        let copy = a.to_vec();
        assert!(locked.exists(0, &copy, 0));
        assert_eq!(locked.hash_of(&copy), ks.hash(&copy));
        assert_eq!(locked.hash_of(&a[..4]), ks.hash(b"rate"));
        assert!(!locked.exists(0, &b, 0));
        locked.release();
        assert!(locked.hashed.is_empty());
    }
}
