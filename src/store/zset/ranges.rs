//! What is addressed by position: ranges by rank, score and lex (read, count, remove), pops
//! from either end, and Redis's rank and `LIMIT` arithmetic.

use std::cmp::Ordering;
use std::ops::Bound;

use bytes::Bytes;

use super::{
    Entry, EntryIter, LexBound, LexRange, Repr, Score, ScoreRange, SortedSet, small, to_owned_pair,
};

impl SortedSet {
    /// Entries with ascending ranks `lo..=hi` (both `< len`), in ascending order or, if
    /// `reverse`, descending order (large encoding only).
    fn rank_slice(&self, lo: usize, hi: usize, reverse: bool) -> Vec<&Entry> {
        match &self.repr {
            Repr::Small(_) => Vec::new(),
            Repr::Large(l) => {
                let len = l.set.len();
                let n = hi - lo + 1;
                let from_back = len - 1 - hi;
                if lo <= from_back {
                    let mut v: Vec<&Entry> = l.set.iter().skip(lo).take(n).collect();
                    if reverse {
                        v.reverse();
                    }
                    v
                } else {
                    let mut v: Vec<&Entry> = l.set.iter().rev().skip(from_back).take(n).collect();
                    if !reverse {
                        v.reverse();
                    }
                    v
                }
            }
        }
    }

    /// Entries by rank with Redis's index rules (`ZRANGE`, `ZREVRANGE`): negative indexes
    /// count from the end (`-1` is the last), `start` is clamped to 0 and `stop` to the last
    /// rank, and the result is empty when `start > stop` or `start >= len()`. With `reverse`
    /// the ranks count from the highest entry and entries come highest first.
    pub fn range_by_rank(&self, start: i64, stop: i64, reverse: bool) -> Vec<(Bytes, f64)> {
        let len = self.len();
        let Some((lo, hi)) = normalize_ranks(len, start, stop) else {
            return Vec::new();
        };
        let (lo, hi) = if reverse {
            (len - 1 - hi, len - 1 - lo)
        } else {
            (lo, hi)
        };
        if let Repr::Small(s) = &self.repr {
            let d = s.decoded();
            let slice = d.get(lo..=hi).unwrap_or_default();
            return if reverse {
                slice.iter().rev().map(small::owned).collect()
            } else {
                slice.iter().map(small::owned).collect()
            };
        }
        self.rank_slice(lo, hi, reverse)
            .into_iter()
            .map(to_owned_pair)
            .collect()
    }

    /// Entries whose scores are in `range`, ascending or descending.
    fn score_iter<'a>(&'a self, range: &ScoreRange, reverse: bool) -> EntryIter<'a> {
        match &self.repr {
            Repr::Small(_) => Box::new(std::iter::empty()),
            Repr::Large(l) => match score_bounds(range) {
                None => Box::new(std::iter::empty()),
                Some(bounds) => {
                    let it = l.set.range(bounds);
                    if reverse {
                        Box::new(it.rev())
                    } else {
                        Box::new(it)
                    }
                }
            },
        }
    }

    /// Entries with scores in `range` (`ZRANGEBYSCORE`, `ZREVRANGEBYSCORE`, `ZRANGE ...
    /// BYSCORE [REV]`), ascending or, with `reverse`, descending; then Redis's `LIMIT`: skip
    /// `offset` entries (a negative offset gives nothing) and return at most `count` (a
    /// negative count means all). Without `LIMIT`, pass `0, -1`.
    pub fn range_by_score(
        &self,
        range: &ScoreRange,
        reverse: bool,
        offset: i64,
        count: i64,
    ) -> Vec<(Bytes, f64)> {
        if let Repr::Small(s) = &self.repr {
            let d = s.decoded();
            let (lo, hi) = small::score_span(&d, range);
            return small_limit(&d[lo..hi], reverse, offset, count);
        }
        apply_limit(self.score_iter(range, reverse), offset, count)
    }

    /// Number of entries with scores in `range` (`ZCOUNT`). In the large encoding this
    /// costs O(log n + min(inside, outside)): it counts the entries in the range and the
    /// entries outside it at the same time and stops when either count is complete, so a
    /// window that covers most of the set (`ZCOUNT key <cutoff> +inf`) is cheap too.
    pub fn count_in_score_range(&self, range: &ScoreRange) -> usize {
        match &self.repr {
            Repr::Small(s) => {
                let (lo, hi) = small::score_span(&s.decoded(), range);
                hi - lo
            }
            Repr::Large(l) => {
                if range.is_empty() {
                    return 0;
                }
                let mut inside = self.score_iter(range, false);
                let mut below = l.set.iter().take_while(|e| !range.gte_min(e.0.0));
                let mut above = l.set.iter().rev().take_while(|e| !range.lte_max(e.0.0));
                let (mut n_inside, mut n_outside) = (0usize, 0usize);
                let (mut below_done, mut above_done) = (false, false);
                loop {
                    if inside.next().is_none() {
                        return n_inside;
                    }
                    n_inside += 1;
                    if !below_done {
                        match below.next() {
                            Some(_) => n_outside += 1,
                            None => below_done = true,
                        }
                    }
                    if !above_done {
                        match above.next() {
                            Some(_) => n_outside += 1,
                            None => above_done = true,
                        }
                    }
                    if below_done && above_done {
                        return l.set.len().saturating_sub(n_outside);
                    }
                }
            }
        }
    }

    /// Removes the entries with scores in `range` (`ZREMRANGEBYSCORE`); returns how many.
    pub fn remove_range_by_score(&mut self, range: &ScoreRange) -> usize {
        match &mut self.repr {
            Repr::Small(s) => {
                let d = s.decoded();
                let (lo, hi) = small::score_span(&d, range);
                let span = small::byte_span(&d, lo, hi);
                s.remove_span(span, hi - lo);
                hi - lo
            }
            Repr::Large(_) => {
                let doomed: Vec<Entry> = self.score_iter(range, false).cloned().collect();
                self.remove_large_entries(doomed)
            }
        }
    }

    fn remove_large_entries(&mut self, doomed: Vec<Entry>) -> usize {
        match &mut self.repr {
            Repr::Large(l) => l.remove_entries(doomed),
            Repr::Small(_) => 0,
        }
    }

    /// Removes entries by ascending rank with the index rules of
    /// [`range_by_rank`](Self::range_by_rank) (`ZREMRANGEBYRANK`); returns how many.
    pub fn remove_range_by_rank(&mut self, start: i64, stop: i64) -> usize {
        let Some((lo, hi)) = normalize_ranks(self.len(), start, stop) else {
            return 0;
        };
        match &mut self.repr {
            Repr::Small(s) => {
                let span = small::byte_span(&s.decoded(), lo, hi + 1);
                s.remove_span(span, hi - lo + 1);
                hi - lo + 1
            }
            Repr::Large(_) => {
                let doomed: Vec<Entry> = self
                    .rank_slice(lo, hi, false)
                    .into_iter()
                    .cloned()
                    .collect();
                self.remove_large_entries(doomed)
            }
        }
    }

    /// Entries of the lexicographic run, ascending or descending.
    fn lex_iter<'a>(&'a self, range: &'a LexRange, reverse: bool) -> EntryIter<'a> {
        match &self.repr {
            Repr::Small(_) => Box::new(std::iter::empty()),
            Repr::Large(l) => {
                let (Some(first), Some(last)) = (l.set.first(), l.set.last()) else {
                    return Box::new(std::iter::empty());
                };
                if range.is_empty() || !range.gte_min(&last.1) || !range.lte_max(&first.1) {
                    return Box::new(std::iter::empty());
                }
                if first.0 == last.0 {
                    // All scores tie: the tree is ordered by member, so seek directly.
                    let score = first.0;
                    let start = match &range.min {
                        LexBound::NegInf => Bound::Unbounded,
                        LexBound::Inclusive(b) => Bound::Included((score, b.clone())),
                        LexBound::Exclusive(b) => Bound::Excluded((score, b.clone())),
                        LexBound::PosInf => return Box::new(std::iter::empty()),
                    };
                    let end = match &range.max {
                        LexBound::PosInf => Bound::Unbounded,
                        LexBound::Inclusive(b) => Bound::Included((score, b.clone())),
                        LexBound::Exclusive(b) => Bound::Excluded((score, b.clone())),
                        LexBound::NegInf => return Box::new(std::iter::empty()),
                    };
                    if !bounds_are_valid(&start, &end) {
                        return Box::new(std::iter::empty());
                    }
                    let it = l.set.range((start, end));
                    return if reverse {
                        Box::new(it.rev())
                    } else {
                        Box::new(it)
                    };
                }
                if reverse {
                    Box::new(
                        l.set
                            .iter()
                            .rev()
                            .skip_while(move |e| !range.lte_max(&e.1))
                            .take_while(move |e| range.gte_min(&e.1)),
                    )
                } else {
                    Box::new(
                        l.set
                            .iter()
                            .skip_while(move |e| !range.gte_min(&e.1))
                            .take_while(move |e| range.lte_max(&e.1)),
                    )
                }
            }
        }
    }

    /// Entries with members in `range` (`ZRANGEBYLEX`, `ZREVRANGEBYLEX`, `ZRANGE ... BYLEX
    /// [REV]`), with the `LIMIT` rules of [`range_by_score`](Self::range_by_score). Meant for
    /// sets whose scores all tie; see the module documentation for other sets.
    pub fn range_by_lex(
        &self,
        range: &LexRange,
        reverse: bool,
        offset: i64,
        count: i64,
    ) -> Vec<(Bytes, f64)> {
        if let Repr::Small(s) = &self.repr {
            let d = s.decoded();
            let (lo, hi) = small::lex_span(&d, range, reverse);
            return small_limit(&d[lo..hi], reverse, offset, count);
        }
        apply_limit(self.lex_iter(range, reverse), offset, count)
    }

    /// Number of entries with members in `range` (`ZLEXCOUNT`).
    pub fn count_in_lex_range(&self, range: &LexRange) -> usize {
        match &self.repr {
            Repr::Small(s) => {
                let (lo, hi) = small::lex_span(&s.decoded(), range, false);
                hi - lo
            }
            Repr::Large(_) => self.lex_iter(range, false).count(),
        }
    }

    /// Removes the entries with members in `range` (`ZREMRANGEBYLEX`); returns how many.
    pub fn remove_range_by_lex(&mut self, range: &LexRange) -> usize {
        match &mut self.repr {
            Repr::Small(s) => {
                let d = s.decoded();
                let (lo, hi) = small::lex_span(&d, range, false);
                let span = small::byte_span(&d, lo, hi);
                s.remove_span(span, hi - lo);
                hi - lo
            }
            Repr::Large(_) => {
                let doomed: Vec<Entry> = self.lex_iter(range, false).cloned().collect();
                self.remove_large_entries(doomed)
            }
        }
    }

    /// Removes and returns up to `count` entries with the lowest scores (`ZPOPMIN`), lowest
    /// first, or with `max` the highest (`ZPOPMAX`), highest first.
    pub fn pop(&mut self, count: usize, max: bool) -> Vec<(Bytes, f64)> {
        let n = count.min(self.len());
        let mut out = Vec::with_capacity(n);
        match &mut self.repr {
            Repr::Small(s) => {
                let d = s.decoded();
                let len = d.len();
                let (lo, hi) = if max { (len - n, len) } else { (0, n) };
                let taken = &d[lo..hi];
                if max {
                    out.extend(taken.iter().rev().map(small::owned));
                } else {
                    out.extend(taken.iter().map(small::owned));
                }
                let span = small::byte_span(&d, lo, hi);
                s.remove_span(span, n);
            }
            Repr::Large(l) => {
                for _ in 0..n {
                    let e = if max {
                        l.set.pop_last()
                    } else {
                        l.set.pop_first()
                    };
                    if let Some((s, m)) = e {
                        l.map.remove(&m);
                        out.push((m, s.0));
                    }
                }
                l.maybe_shrink();
            }
        }
        out
    }
}

/// Redis's rank sanitising: negative indexes count from the end, then clamp; `None` when
/// the range is empty. Returns inclusive `(start, stop)` with `stop < len`.
fn normalize_ranks(len: usize, start: i64, stop: i64) -> Option<(usize, usize)> {
    let llen = i64::try_from(len).unwrap_or(i64::MAX);
    let mut start = if start < 0 {
        llen.saturating_add(start)
    } else {
        start
    };
    let mut stop = if stop < 0 {
        llen.saturating_add(stop)
    } else {
        stop
    };
    if start < 0 {
        start = 0;
    }
    if start > stop || start >= llen {
        return None;
    }
    if stop >= llen {
        stop = llen - 1;
    }
    Some((usize::try_from(start).ok()?, usize::try_from(stop).ok()?))
}

/// Redis's `LIMIT offset count` over an iterator of entries.
fn apply_limit<'a>(
    it: impl Iterator<Item = &'a Entry>,
    offset: i64,
    count: i64,
) -> Vec<(Bytes, f64)> {
    let Ok(offset) = usize::try_from(offset) else {
        return Vec::new();
    };
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    it.skip(offset).take(count).map(to_owned_pair).collect()
}

/// Redis's `LIMIT offset count` over a run of compact entries, ascending or descending.
fn small_limit(
    run: &[small::Decoded<'_>],
    reverse: bool,
    offset: i64,
    count: i64,
) -> Vec<(Bytes, f64)> {
    let Ok(offset) = usize::try_from(offset) else {
        return Vec::new();
    };
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    if reverse {
        run.iter()
            .rev()
            .skip(offset)
            .take(count)
            .map(small::owned)
            .collect()
    } else {
        run.iter()
            .skip(offset)
            .take(count)
            .map(small::owned)
            .collect()
    }
}

/// Whether `BTreeSet::range` accepts these bounds (it panics when start > end, or when
/// start == end and both are excluded).
fn bounds_are_valid(start: &Bound<Entry>, end: &Bound<Entry>) -> bool {
    match (start, end) {
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            match a.cmp(b) {
                Ordering::Less => true,
                Ordering::Greater => false,
                Ordering::Equal => {
                    !(matches!(start, Bound::Excluded(_)) && matches!(end, Bound::Excluded(_)))
                }
            }
        }
        _ => true,
    }
}

/// Tree bounds selecting exactly the entries whose scores are in `range`, or `None` when no
/// entry can match. An empty member is the least key of its score, so `(s, "")` bounds a
/// score from below; an exclusive lower bound `s` is the inclusive bound `next_up(s)`.
fn score_bounds(range: &ScoreRange) -> Option<(Bound<Entry>, Bound<Entry>)> {
    if range.is_empty() {
        return None;
    }
    let key = |s: f64| (Score(s), Bytes::new());
    let start = if range.min_exclusive {
        if range.min == f64::INFINITY {
            return None;
        }
        Bound::Included(key(range.min.next_up()))
    } else if range.min == f64::NEG_INFINITY {
        Bound::Unbounded
    } else {
        Bound::Included(key(range.min))
    };
    let end = if range.max_exclusive {
        if range.max == f64::NEG_INFINITY {
            return None;
        }
        Bound::Excluded(key(range.max))
    } else if range.max == f64::INFINITY {
        Bound::Unbounded
    } else {
        Bound::Excluded(key(range.max.next_up()))
    };
    bounds_are_valid(&start, &end).then_some((start, end))
}
