//! What a key holds: the value types and their Redis encodings.
//!
//! Counters are the hot case of a rate limiter, so a string that is the canonical text of an
//! i64 is kept as `Int` (no allocation; GET renders it). Other strings of up to 14 bytes are
//! kept inside the value too (`Str`), and a `Value` is 24 bytes: a tag and a word or a
//! pointer, as it sits in every key's entry. Aggregates start in a compact form
//! and convert once to a hashed form past Redis's size thresholds, which also decides what
//! OBJECT ENCODING reports.

use std::collections::VecDeque;

use bytes::Bytes;
use indexmap::{IndexMap, IndexSet};

use crate::error::CmdError;
use crate::num::parse_i64;
use crate::store::listpack::Pairs;
use crate::store::volatile::{ListpackEx, TableEx};
use crate::store::zset::SortedSet;

/// The value of a key.
#[derive(Debug, Clone)]
pub enum Value {
    /// A string that is the canonical decimal text of an i64.
    Int(i64),
    /// Any other string (binary-safe), encoded `embstr` or `raw` by length as SET makes it.
    Str(Str),
    /// A string changed in place (APPEND): Redis reports it `raw` whatever its length.
    Raw(Str),
    /// A list (boxed: a `VecDeque` is 32 bytes, and would make every value that big).
    List(Box<VecDeque<Bytes>>),
    /// A hash.
    Hash(Box<HashValue>),
    /// A set.
    Set(Box<SetValue>),
    /// A sorted set.
    ZSet(Box<SortedSet>),
    /// A stream.
    Stream(Box<super::stream::Stream>),
}

/// Longest string kept inside its `Str` (no allocation).
pub const INLINE_STR: usize = 14;

/// A string value's bytes: up to [`INLINE_STR`] inside (16 bytes in all, so `Value` is 24),
/// else a `Bytes` behind one pointer. The heap form keeps `Bytes`, so that GET of a long
/// value shares it with the reply instead of copying it, and APPEND can grow it in place.
#[derive(Clone)]
pub struct Str(StrRepr);

#[derive(Clone)]
enum StrRepr {
    Inline { len: u8, bytes: [u8; INLINE_STR] },
    Heap(Box<Bytes>),
}

impl Str {
    /// The bytes as a `Bytes`: shared with the value when on the heap, copied when inline.
    pub fn to_bytes(&self) -> Bytes {
        match &self.0 {
            StrRepr::Inline { .. } => Bytes::copy_from_slice(self),
            StrRepr::Heap(b) => (**b).clone(),
        }
    }

    /// The bytes as a `Bytes`, without a copy when on the heap.
    pub fn into_bytes(self) -> Bytes {
        match self.0 {
            StrRepr::Inline { .. } => Bytes::copy_from_slice(&self),
            StrRepr::Heap(b) => *b,
        }
    }

    /// True if the bytes are stored inside (no allocation).
    pub fn is_inline(&self) -> bool {
        matches!(self.0, StrRepr::Inline { .. })
    }

    /// Heap bytes held: the pointer's box and the bytes (0 when inline).
    pub fn heap_bytes(&self) -> usize {
        match &self.0 {
            StrRepr::Inline { .. } => 0,
            StrRepr::Heap(b) => size_of::<Bytes>() + b.len(),
        }
    }
}

impl Default for Str {
    fn default() -> Self {
        Str::from(&b""[..])
    }
}

impl From<&[u8]> for Str {
    fn from(b: &[u8]) -> Self {
        if b.len() <= INLINE_STR {
            let mut bytes = [0u8; INLINE_STR];
            bytes[..b.len()].copy_from_slice(b);
            Str(StrRepr::Inline {
                len: b.len() as u8,
                bytes,
            })
        } else {
            Str(StrRepr::Heap(Box::new(Bytes::copy_from_slice(b))))
        }
    }
}

impl From<Bytes> for Str {
    fn from(b: Bytes) -> Self {
        if b.len() <= INLINE_STR {
            Str::from(&b[..])
        } else {
            Str(StrRepr::Heap(Box::new(b)))
        }
    }
}

impl From<Vec<u8>> for Str {
    fn from(v: Vec<u8>) -> Self {
        if v.len() <= INLINE_STR {
            Str::from(&v[..])
        } else {
            Str(StrRepr::Heap(Box::new(Bytes::from(v))))
        }
    }
}

impl From<Str> for Vec<u8> {
    fn from(s: Str) -> Self {
        match s.0 {
            StrRepr::Inline { .. } => s.to_vec(),
            StrRepr::Heap(b) => Vec::from(*b),
        }
    }
}

impl std::ops::Deref for Str {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        match &self.0 {
            StrRepr::Inline { len, bytes } => &bytes[..usize::from(*len)],
            StrRepr::Heap(b) => b,
        }
    }
}

impl std::fmt::Debug for Str {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

/// Redis's default `hash-max-listpack-entries`: more fields than this make a hash a hashtable.
///
/// 512, not the 128 of the sample `redis.conf`: Redis 7.0's compiled-in default (config.c) is
/// 512, and that is what a `redis-server` started without a config file (the official Docker
/// image, our differential test) reports and does.
pub const HASH_MAX_LISTPACK_ENTRIES: usize = 512;
/// Redis's default `hash-max-listpack-value`: a longer field or value makes a hash a hashtable.
pub const HASH_MAX_LISTPACK_VALUE: usize = 64;
/// The encoding thresholds of hashes in force (`hash-max-listpack-entries` and
/// `hash-max-listpack-value`, which CONFIG SET changes at run time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashLimits {
    /// Most pairs of a compact hash; one more converts it.
    pub max_listpack_entries: usize,
    /// Longest field or value of a compact hash; a longer one converts it.
    pub max_listpack_value: usize,
}

impl HashLimits {
    /// Redis 7.0's defaults.
    pub const DEFAULT: HashLimits = HashLimits {
        max_listpack_entries: HASH_MAX_LISTPACK_ENTRIES,
        max_listpack_value: HASH_MAX_LISTPACK_VALUE,
    };
}

/// Redis's default `set-max-intset-entries`: more members than this make a set a hashtable.
pub const SET_MAX_INTSET_ENTRIES: usize = 512;

/// The hasher of the hashed encodings: seeded per process, fast on short keys.
type FastHasher = hashbrown::DefaultHashBuilder;

/// A hash, in one of Redis's two encodings.
///
/// Small hashes are a listpack in Redis: pairs in insertion order, searched linearly, and
/// HGETALL, HKEYS, HSCAN and HRANDFIELD return them in that order, which clients can see.
/// `Pairs` keeps that order in one packed buffer (a rate limiter's funnel hash is a few
/// short fields: one allocation of about 70 bytes). Past the thresholds the hash converts for
/// good to a hash table, whose order Redis leaves unspecified.
#[derive(Debug, Clone)]
pub enum HashValue {
    /// `listpack`: at most [`HASH_MAX_LISTPACK_ENTRIES`] pairs, every field and value at most
    /// [`HASH_MAX_LISTPACK_VALUE`] bytes, in insertion order (updates keep their place).
    Listpack(Pairs),
    /// `hashtable` (boxed: the compact case, the common one, stays two words small). Entries
    /// move only by swap-removal, which is what makes [`scan_step`]'s cursors safe.
    Table(Box<IndexMap<Bytes, Bytes, FastHasher>>),
    /// `listpackex`: a small hash once a field TTL command touched it (Redis 7.4), see
    /// `store::volatile`.
    ListpackEx(Box<ListpackEx>),
    /// `hashtable` with field TTLs.
    TableEx(Box<TableEx>),
}

impl Default for HashValue {
    fn default() -> Self {
        HashValue::Listpack(Pairs::default())
    }
}

/// Iterator over a hash's pairs (see [`HashValue::iter`]).
pub enum HashIter<'a> {
    /// Over the packed pairs.
    Listpack(crate::store::listpack::Iter<'a>),
    /// Over the table.
    Table(indexmap::map::Iter<'a, Bytes, Bytes>),
}

impl<'a> Iterator for HashIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            HashIter::Listpack(it) => it.next(),
            HashIter::Table(it) => it.next().map(|(f, v)| (&f[..], &v[..])),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            HashIter::Listpack(it) => it.size_hint(),
            HashIter::Table(it) => it.size_hint(),
        }
    }
}

impl HashValue {
    /// Number of fields.
    pub fn len(&self) -> usize {
        match self {
            HashValue::Listpack(v) => v.len(),
            HashValue::Table(m) => m.len(),
            HashValue::ListpackEx(l) => l.pairs.len(),
            HashValue::TableEx(t) => t.map.len(),
        }
    }

    /// True if the hash has no field (the key is then deleted).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True while the hash is in its compact encoding.
    pub fn is_listpack(&self) -> bool {
        matches!(self, HashValue::Listpack(_) | HashValue::ListpackEx(_))
    }

    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self {
            HashValue::Listpack(p) => p.get(field),
            HashValue::Table(m) => m.get(field).map(|v| &v[..]),
            HashValue::ListpackEx(l) => l.pairs.get(field),
            HashValue::TableEx(t) => t.map.get(field).map(|v| &v[..]),
        }
    }

    /// True if `field` is present.
    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Sets `field` to `value` (both copied), converting to a hash table first if either is
    /// too long for a listpack, and after if the hash outgrew one. True if the field is new.
    pub fn set(&mut self, field: &[u8], value: &[u8], limits: &HashLimits) -> bool {
        self.set_with(field, value, limits, false)
    }

    /// `set`, where an existing field keeps its TTL with `keep_ttl` (HINCRBY, HSETEX
    /// KEEPTTL) and otherwise loses it, as Redis 7.4's `hashTypeSet` does.
    pub fn set_with(
        &mut self,
        field: &[u8],
        value: &[u8],
        limits: &HashLimits,
        keep_ttl: bool,
    ) -> bool {
        if field.len() > limits.max_listpack_value || value.len() > limits.max_listpack_value {
            self.convert();
        }
        let new = match self {
            HashValue::ListpackEx(l) => l.set(field, value, keep_ttl),
            HashValue::TableEx(t) => t.set(field, value, keep_ttl),
            HashValue::Listpack(p) => p.set(field, value),
            HashValue::Table(m) => match m.get_mut(field) {
                Some(old) => {
                    *old = Bytes::copy_from_slice(value);
                    false
                }
                None => {
                    m.insert(Bytes::copy_from_slice(field), Bytes::copy_from_slice(value));
                    true
                }
            },
        };
        if self.len() > limits.max_listpack_entries {
            self.convert();
        }
        new
    }

    /// Removes `field`; true if it was present. A listpack keeps the order of the others.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            HashValue::Listpack(p) => p.remove(field),
            HashValue::Table(m) => m.swap_remove(field).is_some(),
            HashValue::ListpackEx(l) => l.remove(field),
            HashValue::TableEx(t) => t.remove(field),
        }
    }

    /// The pair at position `i` of the iteration order (for random picks and scans).
    /// O(i) in the compact encoding.
    pub fn get_index(&self, i: usize) -> Option<(&[u8], &[u8])> {
        match self {
            HashValue::Listpack(p) => p.get_index(i),
            HashValue::Table(m) => m.get_index(i).map(|(f, v)| (&f[..], &v[..])),
            HashValue::ListpackEx(l) => l.pairs.get_index(i),
            HashValue::TableEx(t) => t.map.get_index(i).map(|(f, v)| (&f[..], &v[..])),
        }
    }

    /// The pairs, in the order Redis would return them for a listpack.
    pub fn iter(&self) -> HashIter<'_> {
        match self {
            HashValue::Listpack(p) => HashIter::Listpack(p.iter()),
            HashValue::Table(m) => HashIter::Table(m.iter()),
            HashValue::ListpackEx(l) => HashIter::Listpack(l.pairs.iter()),
            HashValue::TableEx(t) => HashIter::Table(t.map.iter()),
        }
    }

    /// An empty hash in the `hashtable` encoding, sized for `n` pairs (RDB load).
    pub fn table_with_capacity(n: usize) -> Self {
        HashValue::Table(Box::new(IndexMap::with_capacity_and_hasher(
            n,
            FastHasher::default(),
        )))
    }

    /// Converts to the hash-table encoding (no-op if already one); field TTLs go along.
    fn convert(&mut self) {
        let table = |p: &Pairs| {
            let mut m = IndexMap::with_capacity_and_hasher(p.len() + 1, FastHasher::default());
            m.extend(
                p.iter()
                    .map(|(f, v)| (Bytes::copy_from_slice(f), Bytes::copy_from_slice(v))),
            );
            m
        };
        match self {
            HashValue::Listpack(p) => *self = HashValue::Table(Box::new(table(p))),
            HashValue::ListpackEx(l) => {
                let mut t = TableEx::from_map(table(&l.pairs));
                for (f, _, at) in l.iter_ttl() {
                    if let Some(at) = at {
                        t.set_ttl(f, at);
                    }
                }
                *self = HashValue::TableEx(Box::new(t));
            }
            _ => {}
        }
    }

    /// Makes the hash able to hold field TTLs (Redis converts a listpack to `listpackex`
    /// as soon as HEXPIRE and its family touch it, whatever the fields named).
    pub fn make_volatile(&mut self) {
        match std::mem::take(self) {
            HashValue::Listpack(p) => {
                *self = HashValue::ListpackEx(Box::new(ListpackEx::from_pairs(p)))
            }
            HashValue::Table(m) => *self = HashValue::TableEx(Box::new(TableEx::from_map(*m))),
            other => *self = other,
        }
    }

    /// The TTL of `field` (None: no such field, or no TTL), expired or not.
    pub fn field_ttl(&self, field: &[u8]) -> Option<u64> {
        match self {
            HashValue::ListpackEx(l) => l.ttl(field),
            HashValue::TableEx(t) => t.ttl(field),
            _ => None,
        }
    }

    /// Whether the hash may hold field TTLs (its form after a field TTL command).
    pub fn is_volatile(&self) -> bool {
        matches!(self, HashValue::ListpackEx(_) | HashValue::TableEx(_))
    }

    /// Sets the TTL of an existing field (call `make_volatile` first); false if no such
    /// field.
    pub fn set_field_ttl(&mut self, field: &[u8], at: u64) -> bool {
        match self {
            HashValue::ListpackEx(l) => l.set_ttl(field, at),
            HashValue::TableEx(t) => t.set_ttl(field, at),
            _ => false,
        }
    }

    /// Clears the TTL of `field`; false if it had none.
    pub fn persist_field(&mut self, field: &[u8]) -> bool {
        match self {
            HashValue::ListpackEx(l) => l.persist(field),
            HashValue::TableEx(t) => t.persist(field),
            _ => false,
        }
    }

    /// The earliest field expiry, if any field has a TTL.
    pub fn min_field_ttl(&self) -> Option<u64> {
        match self {
            HashValue::ListpackEx(l) => l.min_ttl(),
            HashValue::TableEx(t) => t.min_ttl(),
            _ => None,
        }
    }

    /// Whether `field` is stored but expired at `now` (it then reads as missing).
    pub fn is_field_expired(&self, field: &[u8], now: u64) -> bool {
        self.field_ttl(field).is_some_and(|at| at < now)
    }

    /// The value of `field` if it is present and not expired at `now`.
    pub fn get_live(&self, field: &[u8], now: u64) -> Option<&[u8]> {
        if self.is_field_expired(field, now) {
            return None;
        }
        self.get(field)
    }

    /// Up to `max` fields expired at `now`, earliest first.
    pub fn expired_fields(&self, now: u64, max: usize) -> Vec<Bytes> {
        match self {
            HashValue::ListpackEx(l) => l
                .pairs
                .iter()
                .take(l.expired_count(now).min(max))
                .map(|(f, _)| Bytes::copy_from_slice(f))
                .collect(),
            HashValue::TableEx(t) => t.expired(now, max),
            _ => Vec::new(),
        }
    }

    /// Whether any field is expired at `now`.
    pub fn has_expired_fields(&self, now: u64) -> bool {
        self.min_field_ttl().is_some_and(|at| at < now)
    }

    /// The pairs not expired at `now`, in order.
    pub fn iter_live(&self, now: u64) -> impl Iterator<Item = (&[u8], &[u8])> {
        let check = self.has_expired_fields(now);
        self.iter()
            .filter(move |(f, _)| !check || !self.is_field_expired(f, now))
    }

    /// Fields not expired at `now` (HGETALL's count; O(1) when none is).
    pub fn live_len(&self, now: u64) -> usize {
        match self {
            HashValue::ListpackEx(l) => l.pairs.len() - l.expired_count(now),
            HashValue::TableEx(t) if t.min_ttl().is_some_and(|at| at < now) => {
                self.iter_live(now).count()
            }
            _ => self.len(),
        }
    }

    fn approx_memory(&self) -> usize {
        match self {
            HashValue::Listpack(p) => std::mem::size_of::<Self>() + p.heap_bytes(),
            HashValue::ListpackEx(l) => std::mem::size_of::<Self>() + 64 + l.heap_bytes(),
            HashValue::TableEx(t) => {
                self.iter()
                    .map(|(k, v)| k.len() + v.len() + 72)
                    .sum::<usize>()
                    + 48
                    + t.index_bytes()
            }
            HashValue::Table(_) => {
                self.iter()
                    .map(|(k, v)| k.len() + v.len() + 72)
                    .sum::<usize>()
                    + 48
            }
        }
    }
}

/// A set, in one of Redis 7.0's two encodings.
#[derive(Debug, Clone)]
pub enum SetValue {
    /// `intset`: every member is the canonical text of an i64, at most
    /// [`SET_MAX_INTSET_ENTRIES`] of them, kept sorted ascending (SMEMBERS order).
    Ints(Vec<i64>),
    /// `hashtable`: any members. Entries move only by swap-removal (see [`scan_step`]).
    Hashed(IndexSet<Bytes, FastHasher>),
}

impl SetValue {
    /// An empty set in the encoding Redis picks for a set whose first member is `first`.
    pub fn new_for(first: &[u8]) -> Self {
        if parse_i64(first).is_some() {
            SetValue::Ints(Vec::new())
        } else {
            SetValue::Hashed(IndexSet::with_hasher(FastHasher::default()))
        }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        match self {
            SetValue::Ints(v) => v.len(),
            SetValue::Hashed(s) => s.len(),
        }
    }

    /// True if the set has no member (the key is then deleted).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True while the set is an intset.
    pub fn is_intset(&self) -> bool {
        matches!(self, SetValue::Ints(_))
    }

    /// True if `member` is in the set.
    pub fn contains(&self, member: &[u8]) -> bool {
        match self {
            SetValue::Ints(v) => parse_i64(member).is_some_and(|n| v.binary_search(&n).is_ok()),
            SetValue::Hashed(s) => s.contains(member),
        }
    }

    /// Adds `member` (copied); true if it was not there. A non-integer member, or one
    /// integer too many, turns an intset into a hash table for good.
    pub fn insert(&mut self, member: &[u8]) -> bool {
        if let SetValue::Ints(v) = self {
            if let Some(n) = parse_i64(member) {
                let Err(at) = v.binary_search(&n) else {
                    return false;
                };
                v.insert(at, n);
                if v.len() > SET_MAX_INTSET_ENTRIES {
                    self.convert();
                }
                return true;
            }
            self.convert();
        }
        match self {
            SetValue::Hashed(s) => !s.contains(member) && s.insert(Bytes::copy_from_slice(member)),
            SetValue::Ints(_) => false,
        }
    }

    /// Removes `member`; true if it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self {
            SetValue::Ints(v) => match parse_i64(member).map(|n| v.binary_search(&n)) {
                Some(Ok(i)) => {
                    v.remove(i);
                    true
                }
                _ => false,
            },
            SetValue::Hashed(s) => s.swap_remove(member),
        }
    }

    /// The member at position `i` of the iteration order.
    pub fn get_index(&self, i: usize) -> Option<Bytes> {
        match self {
            SetValue::Ints(v) => v.get(i).map(|&n| int_bytes(n)),
            SetValue::Hashed(s) => s.get_index(i).cloned(),
        }
    }

    /// Removes and returns the member at position `i`.
    pub fn remove_index(&mut self, i: usize) -> Option<Bytes> {
        match self {
            SetValue::Ints(v) => (i < v.len()).then(|| int_bytes(v.remove(i))),
            SetValue::Hashed(s) => s.swap_remove_index(i),
        }
    }

    /// The members in iteration order (ascending for an intset).
    pub fn iter(&self) -> impl Iterator<Item = Bytes> {
        (0..self.len()).filter_map(|i| self.get_index(i))
    }

    /// Converts to the hash-table encoding (no-op if already one).
    fn convert(&mut self) {
        if let SetValue::Ints(v) = self {
            let mut s = IndexSet::with_capacity_and_hasher(v.len() + 1, FastHasher::default());
            s.extend(v.iter().map(|&n| int_bytes(n)));
            *self = SetValue::Hashed(s);
        }
    }

    fn approx_memory(&self) -> usize {
        match self {
            SetValue::Ints(v) => v.len() * 8 + 48,
            SetValue::Hashed(s) => s.iter().map(|m| m.len() + 40).sum::<usize>() + 48,
        }
    }
}

/// The decimal text of `n`.
fn int_bytes(n: i64) -> Bytes {
    Bytes::copy_from_slice(itoa::Buffer::new().format(n).as_bytes())
}

/// The order HSCAN/SSCAN walk a hashed aggregate in: a hash of the member with a key drawn
/// once per process (so a client cannot choose members that collide), stable for the life
/// of the server.
pub fn scan_hash(member: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    static STATE: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    STATE
        .get_or_init(std::collections::hash_map::RandomState::new)
        .hash_one(member)
}

/// One step of HSCAN/SSCAN over a hashed encoding: the positions to return (in scan order)
/// and the next cursor (0 when done).
///
/// Members are visited in the order of their `scan_hash`, and the cursor is the first hash
/// not visited yet. A member's hash does not change when others are added or removed (unlike
/// its position, which swap-removal moves), so a member present for the whole scan is
/// returned exactly once, as Redis promises; members added meanwhile may or may not be.
/// Members sharing a hash are never split across two calls. Each call costs O(len), like
/// keyspace SCAN: the batch is selected, the aggregate is not sorted.
pub fn scan_step(
    len: usize,
    cursor: u64,
    count: usize,
    member_at: impl Fn(usize) -> Option<u64>,
) -> (Vec<usize>, u64) {
    let mut hashes: Vec<u64> = (0..len)
        .filter_map(&member_at)
        .filter(|&h| h >= cursor)
        .collect();
    let count = count.max(1);
    let mut end = None;
    if hashes.len() > count {
        let boundary = *hashes.select_nth_unstable(count).1;
        if hashes.iter().any(|&h| h < boundary) {
            end = Some(boundary);
        }
    }
    let mut picked: Vec<(u64, usize)> = (0..len)
        .filter_map(|i| member_at(i).map(|h| (h, i)))
        .filter(|&(h, _)| h >= cursor && end.is_none_or(|e| h < e))
        .collect();
    picked.sort_unstable();
    (
        picked.into_iter().map(|(_, i)| i).collect(),
        end.unwrap_or(0),
    )
}

/// What [`Value::prefetch`] asks the CPU for: the value's heap block, or what that block
/// points at (each needs the one before it in cache to find its address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueStage {
    /// The boxed value itself (a sorted set's `SortedSet`).
    Heap,
    /// Its data (a compact sorted set's buffer).
    Data,
}

impl Value {
    /// Asks the CPU for `stage` of this value, for the batch prefetch (`store::prefetch`).
    /// Only sorted sets go past the entry: the sliding-window pattern's first touches.
    pub fn prefetch(&self, stage: ValueStage) {
        if let Value::ZSet(z) = self {
            match stage {
                ValueStage::Heap => {
                    crate::store::prefetch::prefetch_line(std::ptr::from_ref(&**z).cast());
                }
                ValueStage::Data => z.prefetch_data(),
            }
        }
    }

    /// The name TYPE reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Int(_) | Value::Str(_) | Value::Raw(_) => "string",
            Value::List(_) => "list",
            Value::Hash(_) => "hash",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
        }
    }

    /// The name OBJECT ENCODING reports (Redis 7.0).
    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Int(_) => "int",
            Value::Str(b) if b.len() <= 44 => "embstr",
            Value::Str(_) | Value::Raw(_) => "raw",
            Value::List(_) => "quicklist",
            Value::Hash(h) if matches!(**h, HashValue::ListpackEx(_)) => "listpackex",
            Value::Hash(h) if h.is_listpack() => "listpack",
            Value::Hash(_) => "hashtable",
            Value::Set(s) if s.is_intset() => "intset",
            Value::Set(_) => "hashtable",
            Value::ZSet(z) => z.encoding(),
            Value::Stream(_) => "stream",
        }
    }

    /// How much work freeing the value is, as Redis's `lazyfreeGetFreeEffort` counts it:
    /// 1 for a string and for the compact encodings (one allocation), the element count
    /// otherwise; for a stream its nodes, plus each group (and its pending entries, the
    /// first group's count standing for every group's, as Redis estimates).
    pub fn free_effort(&self) -> usize {
        match self {
            Value::Int(_) | Value::Str(_) | Value::Raw(_) => 1,
            Value::List(l) => l.len(),
            Value::Hash(h) if h.is_listpack() || matches!(**h, HashValue::ListpackEx(_)) => 1,
            Value::Hash(h) => h.len(),
            Value::Set(s) if s.is_intset() => 1,
            Value::Set(s) => s.len(),
            Value::ZSet(z) if z.encoding() == "listpack" => 1,
            Value::ZSet(z) => z.len(),
            Value::Stream(st) => {
                let groups = st.groups.len();
                let pel = st.groups.values().next().map_or(0, |g| g.pel.len());
                st.nodes().count() + groups * (1 + pel)
            }
        }
    }

    /// A string value from bytes, as an `Int` when the bytes are a canonical i64.
    pub fn from_bytes(b: &[u8]) -> Value {
        match parse_i64(b) {
            Some(n) if b.len() <= 20 => Value::Int(n),
            _ => Value::Str(Str::from(b)),
        }
    }

    /// The string bytes, or WRONGTYPE.
    pub fn as_bytes(&self) -> Result<Bytes, CmdError> {
        match self {
            Value::Int(n) => Ok(Bytes::copy_from_slice(
                itoa::Buffer::new().format(*n).as_bytes(),
            )),
            Value::Str(b) | Value::Raw(b) => Ok(b.to_bytes()),
            _ => Err(CmdError::WrongType),
        }
    }

    /// True for aggregates that have become empty (Redis deletes those keys).
    pub fn is_empty_aggregate(&self) -> bool {
        match self {
            Value::Int(_) | Value::Str(_) | Value::Raw(_) => false,
            Value::List(l) => l.is_empty(),
            Value::Hash(h) => h.is_empty(),
            Value::Set(s) => s.is_empty(),
            Value::ZSet(z) => z.is_empty(),
            // A stream key stays when its last entry goes (Redis keeps it, groups and all).
            Value::Stream(_) => false,
        }
    }

    /// An estimate of the heap bytes this value holds (MEMORY USAGE, INFO).
    pub fn approx_memory(&self) -> usize {
        match self {
            Value::Int(_) => 0,
            Value::Str(b) | Value::Raw(b) => b.heap_bytes(),
            Value::List(l) => l.iter().map(|b| b.len() + 32).sum::<usize>() + 48,
            Value::Hash(h) => h.approx_memory(),
            Value::Set(s) => s.approx_memory(),
            Value::ZSet(z) => z.approx_memory(),
            Value::Stream(s) => s.approx_memory(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_24_bytes_and_short_strings_live_in_it() {
        assert_eq!(size_of::<Str>(), 16);
        assert_eq!(size_of::<Value>(), 24);
        for len in [
            0usize,
            1,
            INLINE_STR - 1,
            INLINE_STR,
            INLINE_STR + 1,
            45,
            100_000,
        ] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 13) as u8).collect();
            let inline = len <= INLINE_STR;
            for s in [
                Str::from(&bytes[..]),
                Str::from(bytes.clone()),
                Str::from(Bytes::from(bytes.clone())),
            ] {
                assert_eq!(&*s, &bytes[..]);
                assert_eq!(s.is_inline(), inline, "{len}");
                assert_eq!(s.heap_bytes(), if inline { 0 } else { 32 + len });
                assert_eq!(&s.to_bytes()[..], &bytes[..]);
                assert_eq!(Vec::from(s.clone()), bytes);
                assert_eq!(&s.into_bytes()[..], &bytes[..]);
            }
        }
        // Integers stay integers; other text is a string, by Redis's rule.
        assert!(matches!(Value::from_bytes(b"-42"), Value::Int(-42)));
        assert!(matches!(Value::from_bytes(b"042"), Value::Str(_)));
        assert!(matches!(
            Value::from_bytes(b"9223372036854775808"),
            Value::Str(_)
        ));
        let long = Value::from_bytes(&[b'x'; 45]);
        assert_eq!(long.encoding(), "raw");
        assert_eq!(Value::from_bytes(&[b'x'; 44]).encoding(), "embstr");
        assert_eq!(Value::from_bytes(b"short").encoding(), "embstr");
        assert_eq!(&long.as_bytes().unwrap_or_default()[..], &[b'x'; 45][..]);
        assert!(Str::default().is_empty());
    }

    fn keys(h: &HashValue) -> Vec<&[u8]> {
        h.iter().map(|(f, _)| f).collect()
    }

    #[test]
    fn listpack_keeps_insertion_order_through_updates_and_deletes() {
        let mut h = HashValue::default();
        assert!(h.set(b"a", b"1", &HashLimits::DEFAULT));
        assert!(h.set(b"b", b"2", &HashLimits::DEFAULT));
        assert!(h.set(b"c", b"3", &HashLimits::DEFAULT));
        assert!(!h.set(b"a", b"9", &HashLimits::DEFAULT));
        assert_eq!(keys(&h), [&b"a"[..], b"b", b"c"]);
        assert_eq!(h.get(b"a"), Some(&b"9"[..]));
        assert!(h.remove(b"b"));
        assert!(!h.remove(b"b"));
        assert!(h.set(b"b", b"2", &HashLimits::DEFAULT));
        assert_eq!(keys(&h), [&b"a"[..], b"c", b"b"]);
        assert!(h.is_listpack());
        assert!(h.remove(b"a") && h.remove(b"b") && h.remove(b"c"));
        assert!(h.is_empty());
        assert!(Value::Hash(Box::new(h)).is_empty_aggregate());
    }

    #[test]
    fn hash_converts_on_size_and_length_and_never_back() {
        let mut h = HashValue::default();
        for i in 0..HASH_MAX_LISTPACK_ENTRIES {
            h.set(format!("f{i}").as_bytes(), b"v", &HashLimits::DEFAULT);
        }
        assert!(h.is_listpack());
        h.set(b"one-more", b"v", &HashLimits::DEFAULT);
        assert!(!h.is_listpack());
        assert_eq!(h.len(), HASH_MAX_LISTPACK_ENTRIES + 1);
        assert_eq!(Value::Hash(Box::new(h.clone())).encoding(), "hashtable");
        for i in 0..HASH_MAX_LISTPACK_ENTRIES {
            assert!(h.remove(format!("f{i}").as_bytes()));
        }
        assert!(!h.is_listpack());
        assert_eq!(keys(&h), [&b"one-more"[..]]);

        let long = [b'x'; HASH_MAX_LISTPACK_VALUE];
        let mut h = HashValue::default();
        h.set(b"a", &long, &HashLimits::DEFAULT);
        h.set(&long, b"b", &HashLimits::DEFAULT);
        assert!(h.is_listpack());
        h.set(
            b"c",
            &[b'x'; HASH_MAX_LISTPACK_VALUE + 1],
            &HashLimits::DEFAULT,
        );
        assert!(!h.is_listpack());
        assert_eq!(h.len(), 3);
        let mut h = HashValue::default();
        h.set(
            &[b'f'; HASH_MAX_LISTPACK_VALUE + 1],
            b"v",
            &HashLimits::DEFAULT,
        );
        assert!(!h.is_listpack());
    }

    #[test]
    fn intset_stays_sorted_and_converts() {
        let mut s = SetValue::new_for(b"5");
        assert!(s.is_intset());
        for m in ["5", "-3", "10", "0", "5"] {
            s.insert(m.as_bytes());
        }
        assert_eq!(s.iter().collect::<Vec<_>>(), ["-3", "0", "5", "10"]);
        assert!(s.contains(b"10") && !s.contains(b"010") && !s.contains(b"x"));
        assert!(!s.remove(b"-0"));
        assert!(s.remove(b"0"));
        assert_eq!(s.remove_index(0).as_deref(), Some(&b"-3"[..]));
        assert_eq!(s.len(), 2);
        assert!(s.insert(b"-0"));
        assert!(!s.is_intset());
        assert!(s.contains(b"5") && s.contains(b"-0") && s.contains(b"10"));
        assert!(!SetValue::new_for(b"a").is_intset());
        assert!(!SetValue::new_for(b"01").is_intset());

        let mut s = SetValue::new_for(b"1");
        for i in 0..SET_MAX_INTSET_ENTRIES as i64 {
            assert!(s.insert(i.to_string().as_bytes()));
        }
        assert!(s.is_intset());
        assert!(!s.insert(b"0"));
        assert!(s.insert(b"-1"));
        assert!(!s.is_intset());
        assert_eq!(s.len(), SET_MAX_INTSET_ENTRIES + 1);
        assert!((-1..SET_MAX_INTSET_ENTRIES as i64).all(|i| s.contains(i.to_string().as_bytes())));
    }

    fn scan_of(s: &SetValue, cursor: u64, count: usize) -> (Vec<usize>, u64) {
        scan_step(s.len(), cursor, count, |i| {
            s.get_index(i).map(|m| scan_hash(&m))
        })
    }

    #[test]
    fn scan_step_walks_every_member_once_in_batches() {
        let mut s = SetValue::new_for(b"x");
        for i in 0..25 {
            s.insert(format!("m{i}").as_bytes());
        }
        let (mut cursor, mut seen, mut calls) = (0, Vec::new(), 0);
        loop {
            let (batch, next) = scan_of(&s, cursor, 10);
            assert!(batch.len() <= 10);
            seen.extend(batch.iter().filter_map(|&i| s.get_index(i)));
            calls += 1;
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(calls, 3);
        let mut all: Vec<Bytes> = s.iter().collect();
        all.sort();
        seen.sort();
        assert_eq!(seen, all);
        assert_eq!(scan_step(0, 0, 10, |_| None), (vec![], 0));
    }

    /// Redis's SCAN promise under churn: a member present from the first call to the last is
    /// returned, and no member is returned twice, whatever is added and removed between calls.
    #[test]
    fn scan_returns_every_stable_member_despite_churn() {
        use rand::RngExt;
        let mut rng = rand::rng();
        for round in 0..50 {
            let mut s = SetValue::new_for(b"x");
            for i in 0..300 {
                s.insert(format!("m{i}").as_bytes());
            }
            let initial: Vec<Bytes> = s.iter().collect();
            let mut removed = std::collections::HashSet::new();
            let mut seen = std::collections::HashSet::new();
            let (mut cursor, mut fresh) = (0u64, 0);
            loop {
                let (batch, next) = scan_of(&s, cursor, 1 + round % 17);
                for m in batch.iter().filter_map(|&i| s.get_index(i)) {
                    assert!(
                        seen.insert(m.clone()),
                        "round {round}: {m:?} returned twice"
                    );
                }
                for _ in 0..rng.random_range(0..6) {
                    if rng.random_range(0..2) == 0 && !s.is_empty() {
                        let gone = s.remove_index(rng.random_range(0..s.len()));
                        removed.extend(gone);
                    } else {
                        fresh += 1;
                        s.insert(format!("new{fresh}").as_bytes());
                    }
                }
                cursor = next;
                if cursor == 0 {
                    break;
                }
            }
            for m in initial.iter().filter(|m| !removed.contains(*m)) {
                assert!(seen.contains(m), "round {round}: {m:?} never returned");
            }
        }
    }
}
