//! A stored key: its entry (key bytes, value, expiry, access stamp and place in the expiry
//! wheel, 72 bytes) and the dense, chunked storage a database keeps its entries in.
//!
//! This is the per-key cost of the whole server, so every field is sized on purpose (see
//! `Entry`). Entries live in an [`Entries`] store rather than one heap allocation each: the
//! hash table holds a 4-byte index instead of an 8-byte pointer, there is no allocator header
//! and size-class rounding per key, and the expiry wheel links entries by index, so a TTL
//! costs no node of its own. It uses only `store::value` and `store::wheel`.

use crate::store::value::Value;
use crate::store::wheel::{Link, Nodes};

/// Longest key stored inside its entry (`Key` is then 24 bytes, like a `Box<[u8]>` plus
/// the enum tag); rate-limiter keys such as `rate:login:user123456` fit.
pub const INLINE_KEY: usize = 22;

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

    /// True if the bytes are stored inside the key (no allocation).
    pub fn is_inline(&self) -> bool {
        matches!(self.0, KeyRepr::Inline { .. })
    }

    /// Heap bytes this key holds beyond its own 24.
    pub fn heap_bytes(&self) -> usize {
        match &self.0 {
            KeyRepr::Inline { .. } => 0,
            KeyRepr::Heap(b) => b.len(),
        }
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
///
/// 72 bytes: the key (24, up to 22 bytes inline), the value (24), the expiry (8), the access
/// stamp (4) and the expiry wheel's link (12). No hash is kept: a table that grows or shrinks
/// rehashes the key bytes (one seeded hash of a short key), which costs less than 8 bytes on
/// every key.
#[derive(Debug)]
pub struct Entry {
    /// The key bytes (copied from the request).
    pub key: Key,
    /// Its value.
    pub value: Value,
    /// Absolute expiry in Unix ms; `NO_EXPIRY` when the key has no TTL (a sentinel rather
    /// than an `Option`, which would cost 8 more bytes per key). Changed only by the shard,
    /// which re-links the entry in the wheel with it.
    pub(super) expire_at: u64,
    /// When the key was last accessed, in `LRU_UNIT_MS` units, wrapping (see `lru_stamp`).
    pub(super) lru: u32,
    /// The entry's place in its database's expiry wheel (unlinked without a TTL).
    pub(super) link: Link,
}

/// `Entry::expire_at` of a key without a TTL. No real deadline reaches it: Redis refuses
/// expiry times that overflow, and so do the commands that set them.
pub const NO_EXPIRY: u64 = u64::MAX;

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
    /// A new entry without a TTL, accessed at stamp `lru`.
    pub fn new(key: &[u8], value: Value, lru: u32) -> Self {
        Entry {
            key: key.into(),
            value,
            expire_at: NO_EXPIRY,
            lru,
            link: Link::UNLINKED,
        }
    }

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

    /// Bytes this key costs, as MEMORY USAGE reports it: the entry, its table slot (4 bytes
    /// and a control byte; the table's empty slots are not counted, as Redis counts none of
    /// its dict's), a long key's bytes and the value's heap.
    pub fn memory_usage(&self) -> usize {
        size_of::<Entry>()
            + size_of::<u32>()
            + 1
            + self.key.heap_bytes()
            + self.value.approx_memory()
    }

    /// Records an access at `now_ms`.
    #[inline]
    pub fn mark_accessed(&mut self, now_ms: u64) {
        self.lru = lru_stamp(now_ms);
    }
}

/// log2 of the entries per chunk of an [`Entries`] store.
const CHUNK_BITS: u32 = 10;
/// Entries per chunk: 1,024 × 72 bytes, 72 KB.
const CHUNK: usize = 1 << CHUNK_BITS;

/// A database's entries, dense (indexes `0..len`, no holes) and in fixed-size chunks.
///
/// Dense: deleting an entry moves the last one into its place ([`swap_remove`]), so memory
/// follows the live keys at once, with no free list to compact after a mass expiry. Chunked:
/// growing never copies the entries already stored (a copy of a million entries under the
/// shard lock would stall every client of the shard) and never doubles the allocation at
/// once. The first chunk grows like a `Vec`, so a small database holds only what it uses.
/// One empty chunk is kept past the end, so a key added and deleted at a chunk boundary does
/// not allocate and free a chunk each time.
///
/// [`swap_remove`]: Entries::swap_remove
#[derive(Debug, Default)]
pub struct Entries {
    chunks: Vec<Vec<Entry>>,
    len: usize,
}

impl Entries {
    /// Number of entries.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The entry at index `i` (which must be below `len`: indexes come from the database's
    /// own table, never from a client).
    #[inline]
    pub fn get(&self, i: u32) -> &Entry {
        &self.chunks[(i >> CHUNK_BITS) as usize][i as usize & (CHUNK - 1)]
    }

    /// Asks the CPU for the cache lines of entry `i` (below `len`), see `store::prefetch`.
    #[inline]
    pub fn prefetch(&self, i: u32) {
        let start: *const Entry = self.get(i);
        let start = start.cast::<u8>();
        crate::store::prefetch::prefetch_line(start);
        crate::store::prefetch::prefetch_line(start.wrapping_add(size_of::<Entry>() - 1));
    }

    /// The entry at index `i`, to change.
    #[inline]
    pub fn get_mut(&mut self, i: u32) -> &mut Entry {
        &mut self.chunks[(i >> CHUNK_BITS) as usize][i as usize & (CHUNK - 1)]
    }

    /// Appends an entry and returns its index, or gives it back if the store already holds
    /// `u32::MAX` entries (about 300 GB of them; indexes are `u32` to keep table slots small).
    pub fn push(&mut self, e: Entry) -> Result<u32, Entry> {
        let Ok(index) = u32::try_from(self.len) else {
            return Err(e);
        };
        if index == crate::store::wheel::NIL {
            return Err(e);
        }
        let chunk = self.len >> CHUNK_BITS;
        if chunk == self.chunks.len() {
            self.chunks.push(if chunk == 0 {
                Vec::new()
            } else {
                Vec::with_capacity(CHUNK)
            });
        }
        self.chunks[chunk].push(e);
        self.len += 1;
        Ok(index)
    }

    /// Removes the entry at `i`, moving the last entry into its place. Returns the removed
    /// entry and, if an entry moved, the index it moved from (`len` before the call, minus 1).
    pub fn swap_remove(&mut self, i: u32) -> (Entry, Option<u32>) {
        let last = self.len - 1;
        let chunk = last >> CHUNK_BITS;
        let Some(tail) = self.chunks[chunk].pop() else {
            unreachable!("the last entry's chunk holds it")
        };
        self.len = last;
        // Keep at most one empty chunk past the end.
        if self.chunks.len() > chunk + 2 {
            self.chunks.truncate(chunk + 2);
        }
        if i as usize == last {
            (tail, None)
        } else {
            (std::mem::replace(self.get_mut(i), tail), Some(last as u32))
        }
    }

    /// Every entry, in index order.
    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.chunks.iter().flatten()
    }

    /// Every entry, to change.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Entry> {
        self.chunks.iter_mut().flatten()
    }

    /// Gives memory back after most entries went away. Deleting already keeps at most one
    /// spare chunk; this drops it unless the last chunk in use is at least half full (a
    /// spare about to be needed again is kept), and trims the first chunk, which grows like a
    /// `Vec`, once it is the only one and less than a quarter full. Cheap when there is
    /// nothing to give back, so the reaper can call it after every burst.
    pub fn shrink(&mut self) {
        let used = self.len.div_ceil(CHUNK).max(1);
        let last_fill = self.len - (used - 1) * CHUNK;
        if self.chunks.len() > used && last_fill < CHUNK / 2 {
            self.chunks.truncate(used);
        }
        if self.chunks.capacity() > 2 * self.chunks.len().max(4) {
            self.chunks.shrink_to_fit();
        }
        if let [first] = &mut self.chunks[..]
            && first.capacity() > 64
            && first.len() * 4 < first.capacity()
        {
            first.shrink_to(first.len() * 2);
        }
    }

    /// Entries the allocated chunks can hold.
    pub fn capacity(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum()
    }

    /// Bytes allocated: the chunks and the chunk table.
    pub fn memory_usage(&self) -> usize {
        self.capacity() * size_of::<Entry>() + self.chunks.capacity() * size_of::<Vec<Entry>>()
    }
}

/// The expiry wheel's view of the entries: a key's deadline is one past its `expire_at`
/// (Redis's rule: expired once `now > expire_at`).
impl Nodes for Entries {
    #[inline]
    fn deadline(&self, i: u32) -> u64 {
        self.get(i).expire_at.saturating_add(1)
    }

    #[inline]
    fn link(&mut self, i: u32) -> &mut Link {
        &mut self.get_mut(i).link
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_72_bytes_and_a_short_key_lives_in_it() {
        assert_eq!(size_of::<Key>(), 24);
        assert_eq!(size_of::<Entry>(), 72);
        for len in [0usize, 1, INLINE_KEY - 1, INLINE_KEY, INLINE_KEY + 1, 300] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let key = Key::from(&bytes[..]);
            assert_eq!(&*key, &bytes[..]);
            assert_eq!(&*key.to_boxed(), &bytes[..]);
            assert_eq!(key.is_inline(), len <= INLINE_KEY);
            assert_eq!(key.heap_bytes(), if len <= INLINE_KEY { 0 } else { len });
        }
    }

    #[test]
    fn expiry_set_and_cleared() {
        let mut e = Entry::new(b"k", Value::Int(1), 0);
        assert_eq!(e.expire_at(), None);
        assert!(!e.is_expired(u64::MAX));
        e.expire_at = 1_000;
        assert_eq!(e.expire_at(), Some(1_000));
        assert!(!e.is_expired(1_000));
        assert!(e.is_expired(1_001));
        e.expire_at = NO_EXPIRY;
        assert!(!e.is_expired(u64::MAX));
    }

    #[test]
    fn entries_stay_dense_across_chunks() {
        let mut s = Entries::default();
        let n = 3 * CHUNK as u32 + 5;
        for i in 0..n {
            assert_eq!(
                s.push(Entry::new(&i.to_be_bytes(), Value::Int(i64::from(i)), 0))
                    .ok(),
                Some(i)
            );
        }
        assert_eq!(s.len(), n as usize);
        assert_eq!(s.chunks.len(), 4);
        // Removing from the middle moves the last entry in.
        let (gone, moved) = s.swap_remove(7);
        assert!(matches!(gone.value, Value::Int(7)));
        assert_eq!(moved, Some(n - 1));
        assert!(matches!(s.get(7).value, Value::Int(v) if v == i64::from(n - 1)));
        // Removing the last one moves nothing.
        let last = s.len() as u32 - 1;
        assert_eq!(s.swap_remove(last).1, None);
        while s.len() > 10 {
            s.swap_remove(0);
        }
        // One spare chunk is kept past the end until `shrink`.
        assert_eq!(s.chunks.len(), 2);
        s.shrink();
        assert_eq!(s.chunks.len(), 1);
        assert!(s.capacity() <= 20);
        let mut seen: Vec<i64> = s
            .iter()
            .map(|e| match e.value {
                Value::Int(v) => v,
                _ => -1,
            })
            .collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 10);
        while !s.is_empty() {
            s.swap_remove(0);
        }
        assert_eq!(s.iter().count(), 0);
    }
}
