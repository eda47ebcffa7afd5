//! Iteration in order (both ways) and `ZSCAN`'s resumable cursor.

use std::collections::btree_set;
use std::iter::FusedIterator;
use std::ops::Bound;

use bytes::Bytes;

use super::{Entry, Member, Repr, Score, SortedSet, small, to_owned_pair};

impl SortedSet {
    /// All entries in ascending order (descending with `.rev()`).
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            inner: match &self.repr {
                Repr::Small(s) => IterInner::Small(
                    s.decoded()
                        .into_iter()
                        .map(|d| (d.member, d.score.0))
                        .collect::<Vec<_>>()
                        .into_iter(),
                ),
                Repr::Large(l) => IterInner::Large(l.set.iter()),
            },
        }
    }

    /// One step of `ZSCAN`: returns the next cursor (0 when the iteration is complete) and a
    /// batch of entries. Cursor 0 starts an iteration.
    ///
    /// A compact set is returned whole with cursor 0, as Redis does. A large set is walked in
    /// score order and the cursor encodes the score to resume at; a batch has about `count`
    /// entries but is extended so that it never splits a group of entries with equal scores.
    /// Guarantee (the one `SCAN` documents): an entry present, with the same score, from the
    /// start to the end of a full iteration is returned at least once. Entries may be returned
    /// more than once (if their score changes), and any `u64` is accepted as a cursor.
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Vec<(Bytes, f64)>) {
        let l = match &self.repr {
            Repr::Small(s) => return (0, s.entries().map(|d| small::owned(&d)).collect()),
            Repr::Large(l) => l,
        };
        let start = if cursor == 0 {
            Bound::Unbounded
        } else {
            match cursor_to_score(cursor) {
                Some(s) => Bound::Included((Score(s), Bytes::new())),
                None if cursor < score_to_cursor(f64::NEG_INFINITY) => Bound::Unbounded,
                None => return (0, Vec::new()),
            }
        };
        let count = count.max(1);
        let mut out = Vec::with_capacity(count.min(l.set.len()));
        let mut it = l.set.range((start, Bound::Unbounded)).peekable();
        while let Some(e) = it.next() {
            out.push(to_owned_pair(e));
            if out.len() >= count {
                while let Some(next) = it.next_if(|n| n.0 == e.0) {
                    out.push(to_owned_pair(next));
                }
                return match it.peek() {
                    Some(next) => (score_to_cursor(next.0.0), out),
                    None => (0, out),
                };
            }
        }
        (0, out)
    }
}

impl<'a> IntoIterator for &'a SortedSet {
    type Item = (Member<'a>, f64);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// Iterator over the entries of a [`SortedSet`] as `(member, score)`, in ascending order
/// (double-ended: `.rev()` gives descending order). A compact set is decoded when the
/// iterator is made (one allocation, at most the entry limit long).
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    inner: IterInner<'a>,
}

#[derive(Clone, Debug)]
enum IterInner<'a> {
    Small(std::vec::IntoIter<(Member<'a>, f64)>),
    Large(btree_set::Iter<'a, Entry>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (Member<'a>, f64);

    fn next(&mut self) -> Option<Self::Item> {
        let e = match &mut self.inner {
            IterInner::Small(it) => return it.next(),
            IterInner::Large(it) => it.next(),
        }?;
        Some((Member::borrowed(&e.1), e.0.0))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.inner {
            IterInner::Small(it) => it.size_hint(),
            IterInner::Large(it) => it.size_hint(),
        }
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let e = match &mut self.inner {
            IterInner::Small(it) => return it.next_back(),
            IterInner::Large(it) => it.next_back(),
        }?;
        Some((Member::borrowed(&e.1), e.0.0))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl FusedIterator for Iter<'_> {}

/// Order-preserving map from scores to non-zero `u64` cursors (`-0` maps like `0`).
pub(super) fn score_to_cursor(s: f64) -> u64 {
    let s = if s == 0.0 { 0.0 } else { s };
    let b = s.to_bits();
    if b >> 63 == 0 { b | (1 << 63) } else { !b }
}

/// Inverse of [`score_to_cursor`]; `None` for cursors that decode to NaN.
pub(super) fn cursor_to_score(c: u64) -> Option<f64> {
    let b = if c >> 63 == 1 { c & !(1 << 63) } else { !c };
    let s = f64::from_bits(b);
    (!s.is_nan()).then_some(s)
}
