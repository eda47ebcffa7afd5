//! The `listpack` encoding's searches: one sorted `VecDeque` of entries, searched by binary
//! partition for score spans and lexicographic runs.

use std::collections::VecDeque;

use super::{Entry, LexRange, ScoreRange};

/// Ascending index range `[lo, hi)` of entries whose scores are in `range` (compact
/// encoding only).
pub(super) fn score_span(dq: &VecDeque<Entry>, range: &ScoreRange) -> (usize, usize) {
    let lo = dq.partition_point(|e| !range.gte_min(e.0.0));
    let hi = dq.partition_point(|e| range.lte_max(e.0.0));
    (lo, hi.max(lo))
}

/// Ascending index range `[lo, hi)` of the lexicographic run (compact encoding only); see
/// the module documentation for sets with mixed scores.
pub(super) fn lex_span(dq: &VecDeque<Entry>, range: &LexRange, reverse: bool) -> (usize, usize) {
    let (Some(first), Some(last)) = (dq.front(), dq.back()) else {
        return (0, 0);
    };
    if range.is_empty() || !range.gte_min(&last.1) || !range.lte_max(&first.1) {
        return (0, 0);
    }
    if first.0 == last.0 {
        // All scores tie, so the entries are sorted by member.
        let lo = dq.partition_point(|e| !range.gte_min(&e.1));
        let hi = dq.partition_point(|e| range.lte_max(&e.1));
        return (lo, hi.max(lo));
    }
    if reverse {
        let Some(top) = dq.iter().rposition(|e| range.lte_max(&e.1)) else {
            return (0, 0);
        };
        let lo = dq
            .range(..=top)
            .rposition(|e| !range.gte_min(&e.1))
            .map_or(0, |p| p + 1);
        (lo, top + 1)
    } else {
        let Some(lo) = dq.iter().position(|e| range.gte_min(&e.1)) else {
            return (0, 0);
        };
        let hi = dq
            .range(lo..)
            .position(|e| !range.lte_max(&e.1))
            .map_or(dq.len(), |p| lo + p);
        (lo, hi)
    }
}
