//! What is addressed by position: ranges by rank, score and lex (read, count, remove), pops
//! from either end, and Redis's rank and `LIMIT` arithmetic.
//!
//! Every operation first turns its arguments into a span of ascending ranks `[lo, hi)`: by
//! decoding a compact set whole (it is small), or by O(log n) descents of the large one's
//! counted tree. Reading or removing the span then costs O(log n + span) in the large
//! encoding. One exception: a compact set's `ZREMRANGEBYSCORE` (a sliding window's trim)
//! finds its span and cuts it in one walk (`Small::remove_score_range`).

use bytes::Bytes;

use super::{LexBound, LexRange, Repr, ScoreRange, SortedSet, small};

impl SortedSet {
    /// The entries with ascending ranks `lo..hi`, in order.
    fn span_entries(&self, lo: usize, hi: usize) -> Vec<small::Decoded<'_>> {
        match &self.repr {
            Repr::Small(s) => {
                let mut d = s.decoded();
                d.truncate(hi);
                d.drain(..lo.min(d.len()));
                d
            }
            Repr::Large(l) => l.range(lo, hi),
        }
    }

    /// The entries with ascending ranks `lo..hi` as replies take them, descending if
    /// `reverse`.
    fn span_owned(&self, lo: usize, hi: usize, reverse: bool) -> Vec<(Bytes, f64)> {
        let d = self.span_entries(lo, hi);
        if reverse {
            d.iter().rev().map(small::owned).collect()
        } else {
            d.iter().map(small::owned).collect()
        }
    }

    /// Removes the entries with ascending ranks `lo..hi`; returns how many.
    fn remove_span(&mut self, lo: usize, hi: usize) -> usize {
        if lo >= hi {
            return 0;
        }
        match &mut self.repr {
            Repr::Small(s) => s.remove_ranks(lo, hi),
            Repr::Large(l) => l.remove_ranks(lo, hi),
        }
    }

    /// Ascending rank span `[lo, hi)` of the entries whose scores are in `range`.
    fn score_span(&self, range: &ScoreRange) -> (usize, usize) {
        if range.is_empty() {
            return (0, 0);
        }
        match &self.repr {
            Repr::Small(s) => s.score_span(range),
            Repr::Large(l) => {
                let lo = if range.min_exclusive {
                    l.count_at_or_below(range.min)
                } else {
                    l.count_below(range.min)
                };
                let hi = if range.max_exclusive {
                    l.count_below(range.max)
                } else {
                    l.count_at_or_below(range.max)
                };
                (lo, hi.max(lo))
            }
        }
    }

    /// Ascending rank span `[lo, hi)` of the lexicographic run (see the module documentation
    /// for sets with mixed scores).
    fn lex_span(&self, range: &LexRange, reverse: bool) -> (usize, usize) {
        let l = match &self.repr {
            Repr::Small(s) => return small::lex_span(&s.decoded(), range, reverse),
            Repr::Large(l) => l,
        };
        let len = l.len();
        let (Some(first), Some(last)) = (l.at(0), len.checked_sub(1).and_then(|r| l.at(r))) else {
            return (0, 0);
        };
        if range.is_empty() || !range.gte_min(&last.member) || !range.lte_max(&first.member) {
            return (0, 0);
        }
        if first.score != last.score {
            // Mixed scores: the run is not a key range; walk the entries as Redis does.
            return small::lex_span(&l.range(0, len), range, reverse);
        }
        // All scores tie: the entries are ordered by member, so the bounds are keys.
        let s = first.score;
        let lo = match &range.min {
            LexBound::NegInf => 0,
            LexBound::Inclusive(b) => l.rank_of(s, b, false),
            LexBound::Exclusive(b) => l.rank_of(s, b, true),
            LexBound::PosInf => return (0, 0),
        };
        let hi = match &range.max {
            LexBound::PosInf => len,
            LexBound::Inclusive(b) => l.rank_of(s, b, true),
            LexBound::Exclusive(b) => l.rank_of(s, b, false),
            LexBound::NegInf => return (0, 0),
        };
        (lo, hi.max(lo))
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
        self.span_owned(lo, hi + 1, reverse)
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
        let (lo, hi) = self.score_span(range);
        let (lo, hi) = limit_span(lo, hi, reverse, offset, count);
        self.span_owned(lo, hi, reverse)
    }

    /// Number of entries with scores in `range` (`ZCOUNT`): O(log n) in the large encoding.
    pub fn count_in_score_range(&self, range: &ScoreRange) -> usize {
        let (lo, hi) = self.score_span(range);
        hi - lo
    }

    /// Removes the entries with scores in `range` (`ZREMRANGEBYSCORE`); returns how many.
    pub fn remove_range_by_score(&mut self, range: &ScoreRange) -> usize {
        match &mut self.repr {
            Repr::Small(s) if !range.is_empty() => s.remove_score_range(range),
            _ => {
                let (lo, hi) = self.score_span(range);
                self.remove_span(lo, hi)
            }
        }
    }

    /// Removes entries by ascending rank with the index rules of
    /// [`range_by_rank`](Self::range_by_rank) (`ZREMRANGEBYRANK`); returns how many.
    pub fn remove_range_by_rank(&mut self, start: i64, stop: i64) -> usize {
        let Some((lo, hi)) = normalize_ranks(self.len(), start, stop) else {
            return 0;
        };
        self.remove_span(lo, hi + 1)
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
        let (lo, hi) = self.lex_span(range, reverse);
        let (lo, hi) = limit_span(lo, hi, reverse, offset, count);
        self.span_owned(lo, hi, reverse)
    }

    /// Number of entries with members in `range` (`ZLEXCOUNT`).
    pub fn count_in_lex_range(&self, range: &LexRange) -> usize {
        let (lo, hi) = self.lex_span(range, false);
        hi - lo
    }

    /// Removes the entries with members in `range` (`ZREMRANGEBYLEX`); returns how many.
    pub fn remove_range_by_lex(&mut self, range: &LexRange) -> usize {
        let (lo, hi) = self.lex_span(range, false);
        self.remove_span(lo, hi)
    }

    /// Removes and returns up to `count` entries with the lowest scores (`ZPOPMIN`), lowest
    /// first, or with `max` the highest (`ZPOPMAX`), highest first.
    pub fn pop(&mut self, count: usize, max: bool) -> Vec<(Bytes, f64)> {
        let len = self.len();
        let n = count.min(len);
        let (lo, hi) = if max { (len - n, len) } else { (0, n) };
        let out = self.span_owned(lo, hi, max);
        self.remove_span(lo, hi);
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

/// The part of the span `[lo, hi)` that Redis's `LIMIT offset count` selects, counting
/// from `hi` downwards when `reverse`: a negative offset selects nothing, a negative count
/// everything after the offset.
fn limit_span(lo: usize, hi: usize, reverse: bool, offset: i64, count: i64) -> (usize, usize) {
    let Ok(offset) = usize::try_from(offset) else {
        return (lo, lo);
    };
    let n = hi.saturating_sub(lo);
    let offset = offset.min(n);
    let take = usize::try_from(count).unwrap_or(usize::MAX).min(n - offset);
    if reverse {
        (hi - offset - take, hi - offset)
    } else {
        (lo + offset, lo + offset + take)
    }
}
