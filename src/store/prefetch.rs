//! Prefetching a batch's keys: the keys of the requests an event loop has read are hashed
//! and their entries asked into the CPU's cache before the first request runs, and the
//! hashes are remembered so that running the requests does not hash the keys again.
//!
//! At pipeline 16 about a fifth of the server's time went to the first touch of a key's
//! entry (cache misses on entries spread over a table larger than the cache): one miss per
//! request, each waited for in turn. Asked for together before the batch runs, the misses
//! overlap (the shape of Valkey 8's `memory_prefetch.c`, done here with what this store
//! needs: the table probe under a `try_lock` of the shard, then a prefetch of the entry).
//!
//! A batch of two or more keys with sorted-set commands in it (the loop's scan sees their
//! `Z…` names) is then walked twice more (`Keyspace::prefetch_hashes`):
//! a sorted set's data is two dependent pointers past its entry (the `SortedSet` box, then
//! a compact set's buffer), so each pass reads the line the pass before asked for, by then
//! arriving, and asks for the next. That took the sliding window's first touches of its set
//! out of `ZADD` (perf33s/perf34s in benchmarks/notes.md). A single key is not walked
//! further: reading its entry right after asking for it would wait for the miss.
//!
//! The remembered hashes ([`BatchHashes`]) are keyed by the address and length of the key's
//! bytes in the connection's read buffer, which the requests' arguments are slices of: the
//! same bytes, unchanged until the batch ends (nothing is read into that buffer while its
//! requests run), so an address match is the same key. [`BatchHashes`] forgets them when
//! it is dropped, at the end of the batch, before the buffer can be written again. Pointer
//! identity is what `Locked` already uses to reuse a command's hashes.

use std::cell::Cell;

/// The most keys one batch remembers (a pipeline deeper than this prefetches its first
/// `MAX_KEYS` keys).
pub(crate) const MAX_KEYS: usize = 32;

/// This thread's remembered hashes: `(address, length, hash)` in batch order.
struct Memo {
    len: Cell<usize>,
    /// Where the last hit was found, plus one: keys are looked up in batch order.
    next: Cell<usize>,
    /// The lowest and highest address remembered: a key outside them (a script's
    /// `redis.call` argument, a MULTI queue's copy) is no hit, found without a scan.
    lowest: Cell<usize>,
    highest: Cell<usize>,
    slots: [Cell<(usize, usize, u64)>; MAX_KEYS],
}

thread_local! {
    static MEMO: Memo = const {
        Memo {
            len: Cell::new(0),
            next: Cell::new(0),
            lowest: Cell::new(0),
            highest: Cell::new(0),
            slots: [const { Cell::new((0, 0, 0)) }; MAX_KEYS],
        }
    };
}

/// The hashes of one batch's keys, remembered on this thread while it lives; dropping it
/// forgets them (see the module docs for why the batch's read buffer must not change
/// meanwhile).
#[must_use = "the hashes are forgotten when this is dropped"]
pub(crate) struct BatchHashes {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl BatchHashes {
    /// Starts remembering (nothing yet).
    pub(crate) fn begin() -> BatchHashes {
        forget();
        BatchHashes {
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for BatchHashes {
    fn drop(&mut self) {
        forget();
    }
}

fn forget() {
    let _ = MEMO.try_with(|m| {
        m.len.set(0);
        m.next.set(0);
    });
}

/// Remembers `key`'s hash for the batch (ignored once [`MAX_KEYS`] are remembered).
pub(super) fn remember(key: &[u8], hash: u64) {
    let _ = MEMO.try_with(|m| {
        let len = m.len.get();
        if let Some(slot) = m.slots.get(len) {
            let ptr = key.as_ptr() as usize;
            slot.set((ptr, key.len(), hash));
            m.len.set(len + 1);
            if len == 0 {
                m.lowest.set(ptr);
                m.highest.set(ptr);
            } else {
                m.lowest.set(m.lowest.get().min(ptr));
                m.highest.set(m.highest.get().max(ptr));
            }
        }
    });
}

/// `key`'s hash, if this batch remembered it.
#[inline]
pub(crate) fn recall(key: &[u8]) -> Option<u64> {
    MEMO.try_with(|m| {
        let len = m.len.get();
        if len == 0 {
            return None;
        }
        let (ptr, klen) = (key.as_ptr() as usize, key.len());
        if ptr < m.lowest.get() || ptr > m.highest.get() {
            return None;
        }
        let next = m.next.get().min(len);
        for i in (next..len).chain(0..next) {
            let (p, l, hash) = m.slots[i].get();
            if p == ptr && l == klen {
                m.next.set(i + 1);
                return Some(hash);
            }
        }
        None
    })
    .ok()
    .flatten()
}

/// Asks the CPU to bring the cache line at `p` into its caches. A hint: it never faults and
/// changes nothing the program can observe.
#[inline(always)]
pub(super) fn prefetch_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` reads nothing architecturally and never faults, whatever the
    // address; SSE is part of the x86_64 baseline.
    #[allow(unused_unsafe)]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Where a key table's probes read, so that the probes of many known hashes can be asked
/// for together: the reaper's removals of a batch of expired keys, spread over a table much
/// larger than the cache, otherwise wait for two misses each in turn (the control group,
/// then the slot), which was 83% of the reaper's time in a mass expiry (perf40x in
/// benchmarks/notes.md).
///
/// This reads hashbrown's layout, which its API does not promise: slot `b` is the `u32` at
/// `ctrl - (b + 1)`, its control byte is at `ctrl + b`, and a probe starts at
/// `hash & (buckets - 1)` and reads 16 control bytes. `ctrl` is found from the address of one
/// value's slot. `probe_lines_cover_the_slots_found` checks the layout; were it to change,
/// the prefetches would fetch the wrong lines and cost a few instructions, nothing else.
pub(super) struct TableLines {
    ctrl: *const u32,
    mask: usize,
}

impl TableLines {
    /// The lines of `table`, located through `value`, whose slot is found by `hash`; None if
    /// it is not in the table.
    pub(super) fn of(table: &hashbrown::HashTable<u32>, hash: u64, value: u32) -> Option<Self> {
        let b = table.find_bucket_index(hash, |&j| j == value)?;
        let slot: *const u32 = table.get_bucket(b)?;
        Some(TableLines {
            ctrl: slot.wrapping_add(b + 1),
            mask: table.num_buckets() - 1,
        })
    }

    /// The control bytes a probe for `hash` reads first, and the first and last of the 16
    /// slots they stand for.
    fn lines(&self, hash: u64) -> [*const u8; 3] {
        let pos = hash as usize & self.mask;
        [
            self.ctrl.cast::<u8>().wrapping_add(pos),
            self.ctrl.wrapping_sub(pos + 16).cast(),
            self.ctrl.wrapping_sub(pos + 1).cast(),
        ]
    }

    /// Asks the CPU for the lines a probe for `hash` reads first.
    #[inline]
    pub(super) fn prefetch(&self, hash: u64) {
        for line in self.lines(hash) {
            prefetch_line(line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_recalled_by_address_until_the_batch_ends() {
        let buf = b"keykey".to_vec();
        let (a, b) = (&buf[0..3], &buf[3..6]);
        assert_eq!(recall(a), None);
        {
            let _batch = BatchHashes::begin();
            remember(a, 1);
            remember(b, 2);
            // Out of order, twice, and the same bytes elsewhere (not the same slice).
            assert_eq!(recall(b), Some(2));
            assert_eq!(recall(a), Some(1));
            assert_eq!(recall(a), Some(1));
            assert_eq!(recall(b"key"), None);
            assert_eq!(recall(&buf[0..2]), None, "same address, other length");
            assert_eq!(recall(&buf[1..4]), None, "between the remembered keys");
            let before = &buf[..];
            let other = b"elsewhere".to_vec();
            assert_eq!(recall(&other[..3]), None, "outside the remembered range");
            assert_eq!(recall(&before[0..3]), Some(1));
        }
        assert_eq!(recall(a), None, "forgotten at the batch's end");
    }

    #[test]
    fn a_batch_remembers_at_most_max_keys() {
        let buf = [0u8; MAX_KEYS + 1];
        let _batch = BatchHashes::begin();
        for i in 0..=MAX_KEYS {
            remember(&buf[i..=i], i as u64);
        }
        assert_eq!(recall(&buf[0..1]), Some(0));
        assert_eq!(
            recall(&buf[MAX_KEYS - 1..MAX_KEYS]),
            Some(MAX_KEYS as u64 - 1)
        );
        assert_eq!(recall(&buf[MAX_KEYS..=MAX_KEYS]), None);
    }

    #[test]
    fn probe_lines_cover_the_slots_found() {
        let hashes: Vec<u64> = (0..10_000u32)
            .map(|i| crate::store::key_hash(format!("key:{i}").as_bytes()))
            .collect();
        let mut table = hashbrown::HashTable::new();
        for (i, &h) in hashes.iter().enumerate() {
            table.insert_unique(h, i as u32, |&j| hashes[j as usize]);
        }
        let lines = TableLines::of(&table, hashes[7], 7).unwrap();
        assert!(TableLines::of(&table, hashes[7], 8).is_none());
        // A value is found in its first group unless that group was full when it came.
        let covered = hashes
            .iter()
            .enumerate()
            .filter(|&(i, &h)| {
                let b = table.find_bucket_index(h, |&j| j == i as u32).unwrap();
                let slot = std::ptr::from_ref(table.get_bucket(b).unwrap()).cast::<u8>();
                let [_, first, last] = lines.lines(h);
                first <= slot && slot <= last
            })
            .count();
        assert!(
            covered > 9_500,
            "{covered} of 10,000 slots where the lines are"
        );
    }
}
