//! One typed accessor for changing a value (hash, set, sorted set, list, string) in place.
//!
//! A command that changes a value in place must signal the key's watchers (or WATCH misses
//! the change) and must delete the key when it leaves an aggregate empty (Redis never keeps an
//! empty one). Rather than every family remembering `touch` / `touch_and_prune`,
//! [`Locked::modify`] and [`Locked::modify_or_create`] hand out a [`ValueMut`] guard: it
//! derefs to the typed value, counts any mutable access as a change, and when dropped puts the
//! value back, signals the watchers if it changed, and deletes the key if it is empty (a value
//! it created is stored only if something was put in it, and signalled unless marked
//! unchanged).
//!
//! The guard moves the value out of its entry while it lives (the entry holds a placeholder,
//! and the guard borrows the whole `Locked`, so nothing else can look at it), which makes
//! every access through it free of lookups; dropping it costs one.
//!
//! A string is lent out whole as a [`StringValue`] (the `Value` itself, `Int`, `Str` or
//! `Raw`): moving a `Value` out and back is a copy of 24 bytes, with no allocation, so an
//! integer stays an integer across INCR and a long string's buffer is never copied by the
//! guard. Only [`StringValue::edit`] (the bit and byte editors) turns it into bytes.

use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};

use bytes::{Bytes, BytesMut};

use super::Locked;
use super::value::{HashValue, SetValue, Str, Value};
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
    /// The earliest hash-field expiry it holds (only hashes have one).
    fn field_deadline(&self) -> Option<u64> {
        None
    }
}

/// The earliest field expiry of an aggregate (see `store::volatile`).
trait FieldDeadline {
    fn deadline(&self) -> Option<u64> {
        None
    }
}
impl FieldDeadline for HashValue {
    fn deadline(&self) -> Option<u64> {
        self.min_field_ttl()
    }
}
impl FieldDeadline for SetValue {}
impl FieldDeadline for SortedSet {}

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
            fn field_deadline(&self) -> Option<u64> {
                FieldDeadline::deadline(&**self)
            }
        }
    };
}

boxed_aggregate!(HashValue, Hash);
boxed_aggregate!(SetValue, Set);
boxed_aggregate!(SortedSet, ZSet);

// Not the macro: an empty stream is still a value (the key stays, as in Redis).
impl Aggregate for Box<super::stream::Stream> {
    fn take(v: &mut Value) -> Option<Self> {
        if !matches!(v, Value::Stream(_)) {
            return None;
        }
        match std::mem::replace(v, placeholder()) {
            Value::Stream(x) => Some(x),
            _ => None,
        }
    }
    fn into_value(self) -> Value {
        Value::Stream(self)
    }
    fn is_empty(&self) -> bool {
        false
    }
}

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

/// A string value lent out for a change in place: always `Value::Int`, `Str` or `Raw` (the
/// constructors and methods keep it so). Never empty in the [`Aggregate`] sense: Redis keeps
/// an empty string.
#[derive(Debug)]
pub(crate) struct StringValue(Value);

impl StringValue {
    /// A new string from bytes, encoded as SET stores them (`"42"` is an `Int`).
    pub(crate) fn from_bytes(b: &[u8]) -> Self {
        StringValue(Value::from_bytes(b))
    }

    /// A new string made by editing in place (SETBIT, SETRANGE, PFADD…): always `Raw`.
    pub(crate) fn raw(v: Vec<u8>) -> Self {
        StringValue(Value::Raw(v.into()))
    }

    /// The value (one of the string variants).
    pub(crate) fn value(&self) -> &Value {
        &self.0
    }

    /// Its length in bytes (an `Int` as its decimal text).
    pub(crate) fn str_len(&self) -> usize {
        match &self.0 {
            Value::Int(n) => itoa::Buffer::new().format(*n).len(),
            Value::Str(b) | Value::Raw(b) => b.len(),
            _ => 0,
        }
    }

    /// Edits the bytes in place; the value becomes `Raw` (Redis unshares it before editing).
    pub(crate) fn edit<R>(&mut self, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        let mut v: Vec<u8> = match &mut self.0 {
            Value::Str(b) | Value::Raw(b) => std::mem::take(b).into(),
            Value::Int(n) => itoa::Buffer::new().format(*n).as_bytes().to_vec(),
            _ => Vec::new(),
        };
        let r = f(&mut v);
        self.0 = Value::Raw(v.into());
        r
    }

    /// Appends `tail` (APPEND); the value becomes `Raw`.
    pub(crate) fn append(&mut self, tail: &[u8]) {
        // Grow the stored buffer in place when nobody else holds it: BytesMut keeps spare
        // capacity (doubling), so a run of APPENDs costs amortised O(appended bytes), not a
        // copy of the whole value per call as a fresh Vec would.
        let mut buf = match std::mem::replace(&mut self.0, placeholder()) {
            Value::Raw(b) => b
                .into_bytes()
                .try_into_mut()
                .unwrap_or_else(|shared| BytesMut::from(&shared[..])),
            Value::Int(n) => BytesMut::from(itoa::Buffer::new().format(n).as_bytes()),
            Value::Str(b) => BytesMut::from(&b[..]),
            _ => BytesMut::new(),
        };
        buf.extend_from_slice(tail);
        self.0 = Value::Raw(Str::from(buf.freeze()));
    }
}

impl Aggregate for StringValue {
    fn take(v: &mut Value) -> Option<Self> {
        if !matches!(v, Value::Int(_) | Value::Str(_) | Value::Raw(_)) {
            return None;
        }
        Some(StringValue(std::mem::replace(v, placeholder())))
    }
    fn into_value(self) -> Value {
        self.0
    }
    fn is_empty(&self) -> bool {
        false
    }
}

/// A hash being changed in place (see the [module documentation](self)).
pub(crate) type HashMut<'l, 'a, 'k> = ValueMut<'l, 'a, 'k, Box<HashValue>>;
/// A set being changed in place.
pub(crate) type SetMut<'l, 'a, 'k> = ValueMut<'l, 'a, 'k, Box<SetValue>>;
/// A sorted set being changed in place.
pub(crate) type SortedSetMut<'l, 'a, 'k> = ValueMut<'l, 'a, 'k, Box<SortedSet>>;
/// A list being changed in place.
pub(crate) type ListMut<'l, 'a, 'k> = ValueMut<'l, 'a, 'k, VecDeque<Bytes>>;
/// A string being changed in place.
pub(crate) type StringMut<'l, 'a, 'k> = ValueMut<'l, 'a, 'k, StringValue>;

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
    /// The value's earliest field expiry when lent (a hash's entry in the field-expiry
    /// index, moved when dropped if it changed).
    deadline: Option<u64>,
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

    /// True if the guard made the value (the key was missing): it is stored when dropped.
    pub fn is_created(&self) -> bool {
        self.created
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
            if value.is_empty() {
                return;
            }
            if self.changed {
                // `insert` signals the watchers.
                shard.insert(db, hash, key, value.into_value(), None);
            } else {
                // Created but marked unchanged (only a string can be: BITFIELD whose writes
                // all failed): stored, unsignalled, as Redis's dbAdd.
                shard.insert_unsignalled(db, hash, key, value.into_value(), None);
            }
            return;
        }
        if value.is_empty() {
            // The entry holds a placeholder: its index entry goes by the deadline lent.
            shard.fields_rescheduled(db, key, self.deadline, None);
            // `remove` signals the watchers.
            shard.remove(db, hash, key);
            return;
        }
        let deadline = value.field_deadline();
        if let Some(e) = shard.peek_mut(db, hash, key) {
            e.value = value.into_value();
        }
        if deadline != self.deadline {
            shard.fields_rescheduled(db, key, self.deadline, deadline);
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
            deadline: value.field_deadline(),
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
            deadline: value.field_deadline(),
            value: Some(value),
            created,
            // Creating the key is a change (a value made by `make` may be stored as it is:
            // APPEND); only an explicit `mark_unchanged` stores it unsignalled.
            changed: created,
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

    /// True if `dirty` was signalled; clears it and watches `key` again, as a client would
    /// (a signalled registration is dropped: see `Shard::touch`).
    fn signalled(locked: &mut Locked<'_>, key: &[u8], dirty: &Arc<AtomicBool>) -> bool {
        let was = dirty.swap(false, Ordering::AcqRel);
        locked.watch(0, key, 1, dirty, 0);
        was
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
        assert!(signalled(&mut locked, b"h", &dirty), "creation signals");
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
        assert!(signalled(&mut locked, b"h", &dirty), "a change does");
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

    #[test]
    fn a_string_is_lent_whole_and_an_int_stays_an_int() {
        let ks = Keyspace::new(4, 1, 0);
        let mut locked = ks.lock_all();
        locked.set(0, b"n", Value::Int(41), Some(1_000_000));
        let dirty = watched(&mut locked, b"n");
        {
            // INCR's write: one probe, the TTL kept.
            let probe = locked.probe(0, b"n", 0);
            assert!(matches!(probe.value(), Some(Value::Int(41))));
            probe.write_keep_ttl(b"n", Value::Int(42));
        }
        assert!(signalled(&mut locked, b"n", &dirty), "a change signals");
        assert!(matches!(
            locked.read_value(0, b"n", 0),
            Some(Value::Int(42))
        ));
        assert_eq!(
            locked.lookup(0, b"n", 0).and_then(|e| e.expire_at()),
            Some(1_000_000),
            "the TTL is kept"
        );
        {
            let mut s: StringMut = locked.modify(0, b"n", 0).unwrap().unwrap();
            assert_eq!(s.edit(|v| v.clone()), b"42".to_vec());
            s.mark_unchanged();
        }
        assert!(
            !dirty.load(Ordering::Acquire),
            "an edit taken back does not"
        );
        assert!(
            matches!(locked.read_value(0, b"n", 0), Some(Value::Raw(b)) if &b[..] == b"42"),
            "an edit leaves the value raw"
        );
        {
            let mut s: StringMut = locked.modify(0, b"n", 0).unwrap().unwrap();
            s.append(b"!");
            assert_eq!(s.str_len(), 3);
        }
        assert!(signalled(&mut locked, b"n", &dirty));
        assert!(matches!(locked.read_value(0, b"n", 0), Some(Value::Raw(b)) if &b[..] == b"42!"));
    }

    #[test]
    fn a_created_string_is_stored_and_signalled_unless_marked_unchanged() {
        let ks = Keyspace::new(4, 1, 0);
        let mut locked = ks.lock_all();
        let dirty = watched(&mut locked, b"a");
        {
            // Stored as made, with no access through the guard (APPEND of a new key).
            let s: StringMut = locked
                .modify_or_create(0, b"a", 0, || StringValue::from_bytes(b""))
                .unwrap();
            assert!(s.is_created());
        }
        assert!(signalled(&mut locked, b"a", &dirty), "creation signals");
        assert!(matches!(locked.read_value(0, b"a", 0), Some(Value::Str(b)) if b.is_empty()));
        let dirty = watched(&mut locked, b"b");
        {
            let mut s: StringMut = locked
                .modify_or_create(0, b"b", 0, || StringValue::raw(vec![0]))
                .unwrap();
            s.mark_unchanged();
        }
        assert!(
            !dirty.load(Ordering::Acquire),
            "marked unchanged: no signal"
        );
        assert!(locked.exists(0, b"b", 0), "but stored (Redis's dbAdd)");
        locked.set(0, b"l", Value::List(Box::default()), None);
        assert_eq!(
            locked.modify::<StringValue>(0, b"l", 0).err(),
            Some(CmdError::WrongType)
        );
    }
}
