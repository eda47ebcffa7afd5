//! One typed accessor for changing an aggregate value (hash, set, sorted set, list) in place.
//!
//! A command that changes a value in place must signal the key's watchers (or WATCH misses
//! the change) and must delete the key when it leaves an aggregate empty (Redis never keeps an
//! empty one). Rather than every family remembering `touch` / `touch_and_prune`,
//! [`Locked::modify`] and [`Locked::modify_or_create`] hand out a [`ValueMut`] guard: it
//! derefs to the typed value, counts any mutable access as a change, and when dropped puts the
//! value back, signals the watchers if it changed, and deletes the key if it is empty (a value
//! it created is stored only if something was put in it).
//!
//! The guard moves the value out of its entry while it lives (the entry holds a placeholder,
//! and the guard borrows the whole `Locked`, so nothing else can look at it), which makes
//! every access through it free of lookups; dropping it costs one.

use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};

use bytes::Bytes;

use super::Locked;
use super::value::{HashValue, SetValue, Value};
use super::zset::SortedSet;
use crate::error::{CmdError, CmdResult};

/// A type of aggregate value a [`ValueMut`] can hold.
pub trait Aggregate: Sized {
    /// Moves the value out of `v` if `v` holds this type (leaving a placeholder), else
    /// gives `v` back untouched.
    fn take(v: &mut Value) -> Option<Self>;
    /// The value to store.
    fn into_value(self) -> Value;
    /// Whether it holds nothing (the key must then be deleted).
    fn is_empty(&self) -> bool;
}

/// What stands in an entry while its value is lent out: a small string, never observed.
fn placeholder() -> Value {
    Value::Int(0)
}

macro_rules! boxed_aggregate {
    ($ty:ty, $variant:ident) => {
        impl Aggregate for Box<$ty> {
            fn take(v: &mut Value) -> Option<Self> {
                if !matches!(v, Value::$variant(_)) {
                    return None;
                }
                match std::mem::replace(v, placeholder()) {
                    Value::$variant(x) => Some(x),
                    _ => None,
                }
            }
            fn into_value(self) -> Value {
                Value::$variant(self)
            }
            fn is_empty(&self) -> bool {
                (**self).is_empty()
            }
        }
    };
}

boxed_aggregate!(HashValue, Hash);
boxed_aggregate!(SetValue, Set);
boxed_aggregate!(SortedSet, ZSet);

impl Aggregate for VecDeque<Bytes> {
    fn take(v: &mut Value) -> Option<Self> {
        match v {
            Value::List(l) => Some(std::mem::take(&mut **l)),
            _ => None,
        }
    }
    fn into_value(self) -> Value {
        Value::List(Box::new(self))
    }
    fn is_empty(&self) -> bool {
        VecDeque::is_empty(self)
    }
}

/// A hash being changed in place (see the [module documentation](self)).
pub type HashMut<'l, 'a, 'k> = ValueMut<'l, 'a, 'k, Box<HashValue>>;
/// A set being changed in place.
pub type SetMut<'l, 'a, 'k> = ValueMut<'l, 'a, 'k, Box<SetValue>>;
/// A sorted set being changed in place.
pub type SortedSetMut<'l, 'a, 'k> = ValueMut<'l, 'a, 'k, Box<SortedSet>>;
/// A list being changed in place.
pub type ListMut<'l, 'a, 'k> = ValueMut<'l, 'a, 'k, VecDeque<Bytes>>;

/// The value at one key, lent out for a change in place; see the [module
/// documentation](self) for what dropping it does.
pub struct ValueMut<'l, 'a, 'k, T: Aggregate> {
    store: &'l mut Locked<'a>,
    db: usize,
    key: &'k [u8],
    /// Always `Some` until `drop`.
    value: Option<T>,
    /// Created by this guard: not in the keyspace yet.
    created: bool,
    changed: bool,
}

impl<T: Aggregate> ValueMut<'_, '_, '_, T> {
    /// Records a change made without a mutable access through the guard (rare: the guard
    /// already counts every `DerefMut`).
    pub fn mark_changed(&mut self) {
        self.changed = true;
    }

    /// Takes back a change recorded by a mutable access that changed nothing, when Redis
    /// does not signal that case (ZADD XX on a missing member…).
    pub fn mark_unchanged(&mut self) {
        self.changed = false;
    }
}

impl<T: Aggregate> Deref for ValueMut<'_, '_, '_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        match &self.value {
            Some(v) => v,
            None => unreachable!("sluice bug: a ValueMut used after drop"),
        }
    }
}

impl<T: Aggregate> DerefMut for ValueMut<'_, '_, '_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.changed = true;
        match &mut self.value {
            Some(v) => v,
            None => unreachable!("sluice bug: a ValueMut used after drop"),
        }
    }
}

impl<T: Aggregate> Drop for ValueMut<'_, '_, '_, T> {
    fn drop(&mut self) {
        let Some(value) = self.value.take() else {
            return;
        };
        let (db, key) = (self.db, self.key);
        let (shard, hash) = self.store.shard(key);
        if self.created {
            if !value.is_empty() {
                // `insert` signals the watchers.
                shard.insert(db, hash, key, value.into_value(), None);
            }
            return;
        }
        if value.is_empty() {
            // `remove` signals the watchers.
            shard.remove(db, hash, key);
            return;
        }
        if let Some(e) = shard.peek_mut(db, hash, key) {
            e.value = value.into_value();
        }
        if self.changed {
            shard.touch(db, key);
        }
    }
}

impl<'a> Locked<'a> {
    /// The aggregate of type `T` at `key`, lent out for a change in place: `Ok(None)` if
    /// the key is missing (or expired), WRONGTYPE if it holds another type. A write lookup:
    /// lazy expiry, no keyspace hit/miss statistics.
    pub fn modify<'l, 'k, T: Aggregate>(
        &'l mut self,
        db: usize,
        key: &'k [u8],
        now_ms: u64,
    ) -> CmdResult<Option<ValueMut<'l, 'a, 'k, T>>> {
        let Some(entry) = self.lookup(db, key, now_ms) else {
            return Ok(None);
        };
        let value = T::take(&mut entry.value).ok_or(CmdError::WrongType)?;
        Ok(Some(ValueMut {
            store: self,
            db,
            key,
            value: Some(value),
            created: false,
            changed: false,
        }))
    }

    /// Like [`modify`](Self::modify), but a missing key gives a new empty value made by
    /// `make` (a set's encoding depends on its first member), stored when the guard drops if
    /// something was put in it (Redis's `lookupKeyWrite` + create).
    pub fn modify_or_create<'l, 'k, T: Aggregate>(
        &'l mut self,
        db: usize,
        key: &'k [u8],
        now_ms: u64,
        make: impl FnOnce() -> T,
    ) -> CmdResult<ValueMut<'l, 'a, 'k, T>> {
        let (value, created) = match self.lookup(db, key, now_ms) {
            Some(entry) => (T::take(&mut entry.value).ok_or(CmdError::WrongType)?, false),
            None => (make(), true),
        };
        Ok(ValueMut {
            store: self,
            db,
            key,
            value: Some(value),
            created,
            changed: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::store::Keyspace;

    fn watched(locked: &mut Locked<'_>, key: &[u8]) -> Arc<AtomicBool> {
        let dirty = Arc::new(AtomicBool::new(false));
        locked.watch(0, key, 1, &dirty, 0);
        dirty
    }

    #[test]
    fn a_change_signals_watchers_and_a_read_does_not() {
        let ks = Keyspace::new(4, 1, 0);
        let mut locked = ks.lock_all();
        let dirty = watched(&mut locked, b"h");
        {
            let mut h: HashMut = locked.modify_or_create(0, b"h", 0, Box::default).unwrap();
            h.set(b"f", b"v", &crate::store::value::HashLimits::DEFAULT);
        }
        assert!(dirty.swap(false, Ordering::AcqRel), "creation signals");
        {
            let h: HashMut = locked.modify(0, b"h", 0).unwrap().unwrap();
            assert_eq!(h.get(b"f").map(|v| v.to_vec()), Some(b"v".to_vec()));
        }
        assert!(
            !dirty.load(Ordering::Acquire),
            "a read through the guard does not"
        );
        {
            let mut h: HashMut = locked.modify(0, b"h", 0).unwrap().unwrap();
            h.set(b"f", b"w", &crate::store::value::HashLimits::DEFAULT);
        }
        assert!(dirty.swap(false, Ordering::AcqRel), "a change does");
        {
            let mut h: HashMut = locked.modify(0, b"h", 0).unwrap().unwrap();
            h.remove(b"nope");
            h.mark_unchanged();
        }
        assert!(
            !dirty.load(Ordering::Acquire),
            "a change taken back does not"
        );
        // The value went back into its entry.
        assert!(matches!(locked.read_value(0, b"h", 0), Some(Value::Hash(h)) if h.len() == 1));
    }

    #[test]
    fn an_emptied_value_is_deleted_and_an_unfilled_new_one_never_stored() {
        let ks = Keyspace::new(4, 1, 0);
        let mut locked = ks.lock_all();
        {
            let _h: HashMut = locked.modify_or_create(0, b"h", 0, Box::default).unwrap();
        }
        assert!(!locked.exists(0, b"h", 0));
        {
            let mut h: HashMut = locked.modify_or_create(0, b"h", 0, Box::default).unwrap();
            h.set(b"f", b"v", &crate::store::value::HashLimits::DEFAULT);
        }
        let dirty = watched(&mut locked, b"h");
        {
            let mut h: HashMut = locked.modify(0, b"h", 0).unwrap().unwrap();
            assert!(h.remove(b"f"));
        }
        assert!(!locked.exists(0, b"h", 0));
        assert!(dirty.load(Ordering::Acquire), "the deletion signals");
    }

    #[test]
    fn another_type_is_wrongtype_and_left_alone() {
        let ks = Keyspace::new(4, 1, 0);
        let mut locked = ks.lock_all();
        locked.set(0, b"s", Value::Int(7), None);
        assert_eq!(
            locked.modify::<Box<HashValue>>(0, b"s", 0).err(),
            Some(CmdError::WrongType)
        );
        assert!(matches!(locked.read_value(0, b"s", 0), Some(Value::Int(7))));
        assert!(
            locked
                .modify::<VecDeque<Bytes>>(0, b"missing", 0)
                .unwrap()
                .is_none()
        );
    }
}
