//! Iteration in order (both ways) and `ZSCAN`'s resumable cursor.

use std::iter::FusedIterator;

use bytes::Bytes;

use super::{Member, Repr, SortedSet, small};

impl SortedSet {
    /// All entries in ascending order (descending with `.rev()`).
    pub fn iter(&self) -> Iter<'_> {
        let d = match &self.repr {
            Repr::Small(s) => s.decoded(),
            Repr::Large(l) => l.range(0, l.len()),
        };
        Iter {
            inner: d
                .into_iter()
                .map(|d| (d.member, d.score.0))
                .collect::<Vec<_>>()
                .into_iter(),
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
        let len = l.len();
        let start = if cursor == 0 {
            0
        } else {
            match cursor_to_score(cursor) {
                Some(s) => l.count_below(s),
                None if cursor < score_to_cursor(f64::NEG_INFINITY) => 0,
                None => return (0, Vec::new()),
            }
        };
        if start >= len {
            return (0, Vec::new());
        }
        let mut end = start.saturating_add(count.max(1)).min(len);
        // Extend the batch over the rest of its last score's entries.
        if let Some(last) = end.checked_sub(1).and_then(|r| l.at(r)) {
            end = end.max(l.count_at_or_below(last.score.0)).min(len);
        }
        let out = l.range(start, end).iter().map(small::owned).collect();
        match l.at(end) {
            Some(next) => (score_to_cursor(next.score.0), out),
            None => (0, out),
        }
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
/// (double-ended: `.rev()` gives descending order). The set is decoded when the iterator is
/// made (one allocation of its length).
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    inner: std::vec::IntoIter<(Member<'a>, f64)>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (Member<'a>, f64);

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.inner.next_back()
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
