//! TEMPORARY stub until the sorted set lands.
#![allow(missing_docs)]
#[derive(Debug, Clone, Default)]
pub struct SortedSet;
impl SortedSet { pub fn is_empty(&self) -> bool { true } pub fn encoding(&self) -> &'static str { "listpack" } pub fn approx_memory(&self) -> usize { 0 } }
pub fn format_score(d: f64, out: &mut Vec<u8>) { if d.is_infinite() { out.extend_from_slice(if d > 0.0 { b"inf" } else { b"-inf" }) } else { out.extend_from_slice(format!("{d}").as_bytes()) } }
