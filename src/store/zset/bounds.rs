//! The range arguments of sorted-set commands and their parsing, exactly as Redis 7.0's
//! `zslParseRange` and `zslParseLexRangeItem`: score intervals (`(` for exclusive, C's
//! `strtod` syntax) and member intervals (`[`, `(`, `-`, `+`).

use std::cmp::Ordering;

use bytes::Bytes;

use crate::num::strtod;

/// A score interval, as given to `ZRANGEBYSCORE`, `ZCOUNT` and `ZREMRANGEBYSCORE`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreRange {
    /// Lower bound.
    pub min: f64,
    /// Whether `min` itself is excluded (`(` prefix).
    pub min_exclusive: bool,
    /// Upper bound.
    pub max: f64,
    /// Whether `max` itself is excluded (`(` prefix).
    pub max_exclusive: bool,
}

impl ScoreRange {
    /// The closed interval `[min, max]`.
    pub fn inclusive(min: f64, max: f64) -> Self {
        ScoreRange {
            min,
            min_exclusive: false,
            max,
            max_exclusive: false,
        }
    }

    /// Parses `ZRANGEBYSCORE`-style bounds exactly as Redis 7.0's `zslParseRange`: an optional
    /// `(` prefix makes a bound exclusive, and the rest is read by C's `strtod` rules
    /// (decimal with optional exponent, hexadecimal floats like `0x1p4`, `inf`/`infinity`
    /// with any case and sign), which must consume the whole argument. Quirks kept from Redis:
    /// leading whitespace is skipped (trailing whitespace is an error), an empty bound (`""`
    /// or `"("`) reads as 0, out-of-range values become `±inf` or 0, and the argument ends at
    /// its first NUL byte. NaN is an error. `None` → reply `ERR min or max is not a float`.
    pub fn parse(min: &[u8], max: &[u8]) -> Option<Self> {
        let (min, min_exclusive) = parse_range_item(min)?;
        let (max, max_exclusive) = parse_range_item(max)?;
        Some(ScoreRange {
            min,
            min_exclusive,
            max,
            max_exclusive,
        })
    }

    /// Whether no score can be in the range: `min > max`, or `min == max` with an exclusive
    /// end (or a NaN bound).
    pub fn is_empty(&self) -> bool {
        self.min.is_nan()
            || self.max.is_nan()
            || self.min > self.max
            || (self.min == self.max && (self.min_exclusive || self.max_exclusive))
    }

    /// Whether `score` is at or above the lower bound.
    pub fn gte_min(&self, score: f64) -> bool {
        if self.min_exclusive {
            score > self.min
        } else {
            score >= self.min
        }
    }

    /// Whether `score` is at or below the upper bound.
    pub fn lte_max(&self, score: f64) -> bool {
        if self.max_exclusive {
            score < self.max
        } else {
            score <= self.max
        }
    }

    /// Whether `score` is in the range.
    pub fn contains(&self, score: f64) -> bool {
        self.gte_min(score) && self.lte_max(score)
    }
}

pub(super) fn parse_range_item(arg: &[u8]) -> Option<(f64, bool)> {
    let (text, exclusive) = match arg.split_first() {
        Some((b'(', rest)) => (rest, true),
        _ => (arg, false),
    };
    // C sees the argument as a NUL-terminated string.
    let text = match text.iter().position(|&b| b == 0) {
        Some(nul) => &text[..nul],
        None => text,
    };
    let r = strtod(text);
    if r.consumed != text.len() || r.value.is_nan() {
        return None;
    }
    Some((r.value, exclusive))
}

/// One bound of a lexicographic range.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LexBound {
    /// `[member`: the member itself is included.
    Inclusive(Bytes),
    /// `(member`: the member itself is excluded.
    Exclusive(Bytes),
    /// `-`: below every member.
    NegInf,
    /// `+`: above every member.
    PosInf,
}

impl LexBound {
    /// Parses one bound as Redis's `zslParseLexRangeItem`: `[` and `(` prefixes, or exactly
    /// `-` or `+` (as C strings: a NUL right after the sign also ends the argument).
    pub fn parse(arg: &[u8]) -> Option<Self> {
        match arg.split_first() {
            Some((b'+', rest)) if rest.first().is_none_or(|&b| b == 0) => Some(LexBound::PosInf),
            Some((b'-', rest)) if rest.first().is_none_or(|&b| b == 0) => Some(LexBound::NegInf),
            Some((b'(', rest)) => Some(LexBound::Exclusive(Bytes::copy_from_slice(rest))),
            Some((b'[', rest)) => Some(LexBound::Inclusive(Bytes::copy_from_slice(rest))),
            _ => None,
        }
    }

    /// Position on the line `-inf < members < +inf`, and whether the point is excluded
    /// (infinities count as excluded, as in Redis).
    pub(super) fn point(&self) -> (u8, &[u8], bool) {
        match self {
            LexBound::NegInf => (0, &[], true),
            LexBound::Inclusive(b) => (1, b, false),
            LexBound::Exclusive(b) => (1, b, true),
            LexBound::PosInf => (2, &[], true),
        }
    }
}

/// A member interval, as given to `ZRANGEBYLEX`, `ZLEXCOUNT` and `ZREMRANGEBYLEX`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LexRange {
    /// Lower bound.
    pub min: LexBound,
    /// Upper bound.
    pub max: LexBound,
}

impl LexRange {
    /// Parses both bounds (see [`LexBound::parse`]); `None` → reply
    /// `ERR min or max not valid string range item`.
    pub fn parse(min: &[u8], max: &[u8]) -> Option<Self> {
        Some(LexRange {
            min: LexBound::parse(min)?,
            max: LexBound::parse(max)?,
        })
    }

    /// Whether no member can be in the range: `min` above `max`, or equal with an exclusive
    /// end (so `- -` and `+ +` are empty).
    pub fn is_empty(&self) -> bool {
        let (min_rank, min_bytes, min_ex) = self.min.point();
        let (max_rank, max_bytes, max_ex) = self.max.point();
        match (min_rank, min_bytes).cmp(&(max_rank, max_bytes)) {
            Ordering::Greater => true,
            Ordering::Equal => min_ex || max_ex,
            Ordering::Less => false,
        }
    }

    /// Whether `member` is at or above the lower bound.
    pub fn gte_min(&self, member: &[u8]) -> bool {
        match &self.min {
            LexBound::NegInf => true,
            LexBound::PosInf => false,
            LexBound::Inclusive(b) => member >= b.as_ref(),
            LexBound::Exclusive(b) => member > b.as_ref(),
        }
    }

    /// Whether `member` is at or below the upper bound.
    pub fn lte_max(&self, member: &[u8]) -> bool {
        match &self.max {
            LexBound::NegInf => false,
            LexBound::PosInf => true,
            LexBound::Inclusive(b) => member <= b.as_ref(),
            LexBound::Exclusive(b) => member < b.as_ref(),
        }
    }

    /// Whether `member` is in the range.
    pub fn contains(&self, member: &[u8]) -> bool {
        self.gte_min(member) && self.lte_max(member)
    }
}
