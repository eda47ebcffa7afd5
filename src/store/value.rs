//! What a key holds: the value types and their Redis encodings.
//!
//! Counters are the hot case of a rate limiter, so a string that is the canonical text of an
//! i64 is kept as `Int` (no allocation; GET renders it). Aggregates start in a compact form
//! and convert once to a hashed form past Redis's size thresholds, which also decides what
//! OBJECT ENCODING reports.

use std::collections::{BTreeSet, HashSet, VecDeque};

use bytes::Bytes;
use indexmap::IndexMap;

use crate::error::CmdError;
use crate::store::zset::SortedSet;

/// The value of a key.
#[derive(Debug, Clone)]
pub enum Value {
    /// A string that is the canonical decimal text of an i64.
    Int(i64),
    /// Any other string (binary-safe).
    Str(Bytes),
    /// A list.
    List(VecDeque<Bytes>),
    /// A hash.
    Hash(Box<HashValue>),
    /// A set.
    Set(Box<SetValue>),
    /// A sorted set.
    ZSet(Box<SortedSet>),
}

/// A hash: insertion-ordered while small (Redis's listpack order), then hashed.
#[derive(Debug, Clone, Default)]
pub struct HashValue {
    /// Fields and values.
    pub map: IndexMap<Bytes, Bytes>,
    /// Converted past the listpack thresholds (order no longer kept on delete).
    pub large: bool,
}

/// A set: sorted integers while small and all-integer (Redis's intset), then hashed.
#[derive(Debug, Clone)]
pub enum SetValue {
    /// Every member is the canonical text of an i64.
    Ints(BTreeSet<i64>),
    /// Any members.
    Hashed(HashSet<Bytes>),
}

impl Value {
    /// The name TYPE reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Int(_) | Value::Str(_) => "string",
            Value::List(_) => "list",
            Value::Hash(_) => "hash",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
        }
    }

    /// The name OBJECT ENCODING reports (Redis 7.0).
    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Int(_) => "int",
            Value::Str(b) if b.len() <= 44 => "embstr",
            Value::Str(_) => "raw",
            Value::List(_) => "quicklist",
            Value::Hash(h) if h.large => "hashtable",
            Value::Hash(_) => "listpack",
            Value::Set(s) => match **s {
                SetValue::Ints(_) => "intset",
                SetValue::Hashed(_) => "hashtable",
            },
            Value::ZSet(z) => z.encoding(),
        }
    }

    /// A string value from bytes, as an `Int` when the bytes are a canonical i64.
    pub fn from_bytes(b: &[u8]) -> Value {
        match crate::cmd::args::parse_i64(b) {
            Some(n) if b.len() <= 20 => Value::Int(n),
            _ => Value::Str(Bytes::copy_from_slice(b)),
        }
    }

    /// The string bytes, or WRONGTYPE.
    pub fn as_bytes(&self) -> Result<Bytes, CmdError> {
        match self {
            Value::Int(n) => Ok(Bytes::copy_from_slice(itoa::Buffer::new().format(*n).as_bytes())),
            Value::Str(b) => Ok(b.clone()),
            _ => Err(CmdError::WrongType),
        }
    }

    /// True for aggregates that have become empty (Redis deletes those keys).
    pub fn is_empty_aggregate(&self) -> bool {
        match self {
            Value::Int(_) | Value::Str(_) => false,
            Value::List(l) => l.is_empty(),
            Value::Hash(h) => h.map.is_empty(),
            Value::Set(s) => match &**s {
                SetValue::Ints(i) => i.is_empty(),
                SetValue::Hashed(h) => h.is_empty(),
            },
            Value::ZSet(z) => z.is_empty(),
        }
    }

    /// An estimate of the heap bytes this value holds (MEMORY USAGE, INFO).
    pub fn approx_memory(&self) -> usize {
        match self {
            Value::Int(_) => 0,
            Value::Str(b) => b.len(),
            Value::List(l) => l.iter().map(|b| b.len() + 32).sum::<usize>() + 16,
            Value::Hash(h) => h.map.iter().map(|(k, v)| k.len() + v.len() + 72).sum::<usize>() + 48,
            Value::Set(s) => match &**s {
                SetValue::Ints(i) => i.len() * 16 + 48,
                SetValue::Hashed(h) => h.iter().map(|m| m.len() + 40).sum::<usize>() + 48,
            },
            Value::ZSet(z) => z.approx_memory(),
        }
    }
}
