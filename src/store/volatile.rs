//! Hashes whose fields carry TTLs (Redis 7.4's hash-field expiry: HEXPIRE and family).
//!
//! A hash only takes one of these forms once a field TTL command touches it, so a hash
//! without field TTLs keeps its plain encoding and costs not a byte more:
//!
//! - [`ListpackEx`], Redis's `listpackex`: the packed pairs of a small hash, the fields with
//!   a TTL first in ascending order of expiry (a new TTL goes before the first field expiring
//!   at the same time or later), then the others in insertion order, as Redis 7.4 orders
//!   them (HGETALL shows it). The TTLs are one `u64` per volatile field, parallel to the
//!   first pairs, so finding what is due reads the front of one small vector.
//! - [`TableEx`], a hash table with an expiry index (Redis's `hashtable` with its private
//!   expiry buckets): the TTL per field and the (time, field) order, so the reaper finds what
//!   is due in O(log n) per field expired.
//!
//! Times are Unix milliseconds; a field is expired once `now > at`, the rule of keys.

use std::collections::{BTreeSet, HashMap};

use bytes::Bytes;
use indexmap::IndexMap;

use crate::store::listpack::Pairs;

type FastHasher = hashbrown::DefaultHashBuilder;

/// Redis's largest field expiry time (`EB_EXPIRE_TIME_MAX >> 2`, 2^46 - 1 ms, year 4199);
/// later times are refused with the "invalid expire time" error.
pub(crate) const MAX_FIELD_EXPIRE_MS: u64 = (1 << 46) - 1;

/// A small hash with field TTLs (`listpackex`).
#[derive(Debug, Clone, Default)]
pub struct ListpackEx {
    /// The pairs: the first `ttls.len()` are the volatile ones, by expiry.
    pub pairs: Pairs,
    /// Expiry times of the first pairs, ascending.
    ttls: Vec<u64>,
}

impl ListpackEx {
    /// A `listpackex` holding a plain listpack's pairs (none volatile yet).
    pub fn from_pairs(pairs: Pairs) -> Self {
        ListpackEx {
            pairs,
            ttls: Vec::new(),
        }
    }

    /// The TTL of the field at position `i`.
    fn ttl_at(&self, i: usize) -> Option<u64> {
        self.ttls.get(i).copied()
    }

    /// The TTL of `field` (None: no such field, or no TTL).
    pub fn ttl(&self, field: &[u8]) -> Option<u64> {
        let i = self.pairs.position(field)?;
        self.ttl_at(i)
    }

    /// Takes the pair at `i` out (and its TTL), returning its field and value.
    fn take(&mut self, i: usize) -> Option<(Vec<u8>, Vec<u8>)> {
        let (f, v) = self.pairs.get_index(i)?;
        let (f, v) = (f.to_vec(), v.to_vec());
        self.pairs.remove(&f);
        if i < self.ttls.len() {
            self.ttls.remove(i);
        }
        Some((f, v))
    }

    /// Sets the TTL of an existing field, moving it to its place; false if no such field.
    pub fn set_ttl(&mut self, field: &[u8], at: u64) -> bool {
        let Some(i) = self.pairs.position(field) else {
            return false;
        };
        let Some((f, v)) = self.take(i) else {
            return false;
        };
        let place = self.ttls.partition_point(|&t| t < at);
        self.pairs.insert_at(place, &f, &v);
        self.ttls.insert(place, at);
        true
    }

    /// Clears the TTL of `field`, moving it to the end; false if it had none.
    pub fn persist(&mut self, field: &[u8]) -> bool {
        let Some(i) = self.pairs.position(field) else {
            return false;
        };
        if i >= self.ttls.len() {
            return false;
        }
        if let Some((f, v)) = self.take(i) {
            self.pairs.insert_at(usize::MAX, &f, &v);
        }
        true
    }

    /// Sets `field` to `value`: a new field is appended; an existing one keeps its TTL and
    /// place with `keep_ttl`, else loses its TTL (moving to the end if it had one). True if
    /// the field is new.
    pub fn set(&mut self, field: &[u8], value: &[u8], keep_ttl: bool) -> bool {
        match self.pairs.position(field) {
            Some(i) if i < self.ttls.len() && !keep_ttl => {
                self.take(i);
                self.pairs.insert_at(usize::MAX, field, value);
                false
            }
            Some(_) => {
                self.pairs.set(field, value);
                false
            }
            None => {
                self.pairs.insert_at(usize::MAX, field, value);
                true
            }
        }
    }

    /// Removes `field`; true if it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self.pairs.position(field) {
            Some(i) => self.take(i).is_some(),
            None => false,
        }
    }

    /// The earliest field expiry.
    pub fn min_ttl(&self) -> Option<u64> {
        self.ttls.first().copied()
    }

    /// How many fields are expired at `now` (they are the first ones).
    pub fn expired_count(&self, now: u64) -> usize {
        self.ttls.partition_point(|&t| t < now)
    }

    /// Each pair with its TTL, in order.
    pub fn iter_ttl(&self) -> impl Iterator<Item = (&[u8], &[u8], Option<u64>)> {
        self.pairs
            .iter()
            .enumerate()
            .map(|(i, (f, v))| (f, v, self.ttl_at(i)))
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.pairs.heap_bytes() + self.ttls.capacity() * 8
    }
}

/// A large hash with field TTLs: the table and its expiry index.
#[derive(Debug, Clone)]
pub struct TableEx {
    /// The pairs.
    pub map: IndexMap<Bytes, Bytes, FastHasher>,
    ttl: HashMap<Bytes, u64, FastHasher>,
    order: BTreeSet<(u64, Bytes)>,
}

impl TableEx {
    /// A table with no TTL yet.
    pub fn from_map(map: IndexMap<Bytes, Bytes, FastHasher>) -> Self {
        TableEx {
            map,
            ttl: HashMap::default(),
            order: BTreeSet::new(),
        }
    }

    /// The TTL of `field`.
    pub fn ttl(&self, field: &[u8]) -> Option<u64> {
        self.ttl.get(field).copied()
    }

    /// Sets the TTL of an existing field; false if no such field.
    pub fn set_ttl(&mut self, field: &[u8], at: u64) -> bool {
        let Some((f, _)) = self.map.get_key_value(field) else {
            return false;
        };
        let f = f.clone();
        if let Some(old) = self.ttl.insert(f.clone(), at) {
            self.order.remove(&(old, f.clone()));
        }
        self.order.insert((at, f));
        true
    }

    /// Clears the TTL of `field`; false if it had none.
    pub fn persist(&mut self, field: &[u8]) -> bool {
        match self.ttl.remove_entry(field) {
            Some((f, at)) => {
                self.order.remove(&(at, f));
                true
            }
            None => false,
        }
    }

    /// Sets `field` to `value` (see [`ListpackEx::set`]); true if new.
    pub fn set(&mut self, field: &[u8], value: &[u8], keep_ttl: bool) -> bool {
        match self.map.get_mut(field) {
            Some(old) => {
                *old = Bytes::copy_from_slice(value);
                if !keep_ttl {
                    self.persist(field);
                }
                false
            }
            None => {
                self.map
                    .insert(Bytes::copy_from_slice(field), Bytes::copy_from_slice(value));
                true
            }
        }
    }

    /// Removes `field`; true if it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        self.persist(field);
        self.map.swap_remove(field).is_some()
    }

    /// The earliest field expiry.
    pub fn min_ttl(&self) -> Option<u64> {
        self.order.first().map(|(t, _)| *t)
    }

    /// Up to `max` fields expired at `now`, earliest first.
    pub fn expired(&self, now: u64, max: usize) -> Vec<Bytes> {
        self.order
            .iter()
            .take_while(|(t, _)| *t < now)
            .take(max)
            .map(|(_, f)| f.clone())
            .collect()
    }

    /// How many fields have a TTL.
    pub fn volatile_count(&self) -> usize {
        self.ttl.len()
    }

    /// Approximate heap bytes of the expiry index.
    pub fn index_bytes(&self) -> usize {
        self.ttl.len() * 96
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(l: &ListpackEx) -> Vec<(String, Option<u64>)> {
        l.iter_ttl()
            .map(|(f, _, t)| (String::from_utf8_lossy(f).into_owned(), t))
            .collect()
    }

    #[test]
    fn listpackex_keeps_redis_order() {
        let mut p = Pairs::default();
        for f in ["a", "b", "c", "d"] {
            p.set(f.as_bytes(), b"v");
        }
        let mut l = ListpackEx::from_pairs(p);
        assert!(l.set_ttl(b"c", 200));
        assert!(l.set_ttl(b"a", 300));
        assert!(l.set_ttl(b"d", 200));
        assert!(!l.set_ttl(b"zz", 1));
        let s = |f: &str, t: Option<u64>| (f.to_string(), t);
        assert_eq!(
            fields(&l),
            [
                s("d", Some(200)),
                s("c", Some(200)),
                s("a", Some(300)),
                s("b", None)
            ]
        );
        assert_eq!(l.min_ttl(), Some(200));
        assert_eq!(l.expired_count(250), 2);
        assert!(l.persist(b"d"));
        assert!(!l.persist(b"d"));
        assert!(
            !l.set(b"c", b"w", false),
            "an update drops the TTL and moves"
        );
        assert!(l.set(b"e", b"v", false));
        assert_eq!(
            fields(&l),
            [
                s("a", Some(300)),
                s("b", None),
                s("d", None),
                s("c", None),
                s("e", None)
            ]
        );
        assert!(l.set_ttl(b"b", 100));
        assert!(!l.set(b"b", b"x", true), "KEEPTTL keeps place and TTL");
        assert_eq!(l.ttl(b"b"), Some(100));
        assert!(l.remove(b"b") && l.ttl(b"a") == Some(300) && l.min_ttl() == Some(300));
    }

    #[test]
    fn a_hash_without_field_ttls_costs_what_it_did() {
        use crate::store::value::HashValue;
        // The TTL-capable forms are boxed variants: the compact form's size is the enum's.
        assert_eq!(size_of::<HashValue>(), size_of::<Pairs>());
        let mut h = HashValue::default();
        h.set(b"tokens", b"10", &crate::store::value::HashLimits::DEFAULT);
        assert!(!h.is_volatile());
    }

    #[test]
    fn tableex_index_follows_changes() {
        let mut m = IndexMap::with_hasher(FastHasher::default());
        for f in ["a", "b", "c"] {
            m.insert(Bytes::from(f), Bytes::from_static(b"v"));
        }
        let mut t = TableEx::from_map(m);
        assert!(t.set_ttl(b"a", 50) && t.set_ttl(b"b", 10) && t.set_ttl(b"b", 70));
        assert_eq!(t.min_ttl(), Some(50));
        assert_eq!(t.expired(100, 10), vec![Bytes::from("a"), Bytes::from("b")]);
        assert_eq!(t.expired(100, 1).len(), 1);
        assert!(!t.set(b"a", b"w", false));
        assert_eq!(t.ttl(b"a"), None);
        assert!(t.remove(b"b"));
        assert_eq!(t.min_ttl(), None);
        assert_eq!(t.volatile_count(), 0);
    }
}
