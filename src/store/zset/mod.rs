//! Sorted sets: the value type behind the `Z*` commands.
//!
//! This module owns the in-memory representation of one sorted set (a set of unique binary
//! members, each with an `f64` score) together with everything that is about the *values*
//! of sorted-set commands rather than about keys or the protocol: parsing
//! `ZRANGEBYSCORE`/`ZRANGEBYLEX` bounds exactly as Redis 7.0 does and the `ZADD` flag
//! semantics (`NX`/`XX`/`GT`/`LT`/`INCR`). Score arguments are parsed and formatted by
//! [`crate::num`] (`parse_double`/`format_double`).
//! The command layer parses arguments, validates option combinations and builds replies;
//! everything it needs from the set itself is a method here.
//!
//! # Order
//!
//! Entries are ordered by score, then by member bytes compared lexicographically (shorter
//! first on a common prefix), exactly Redis's order. Scores are never NaN. `-0.0` compares
//! equal to `0.0`, so those two scores tie and the member decides the order. Its sign is kept
//! as Redis 7.0 keeps it: the `Large` encoding stores `-0.0` as given (so `ZSCORE` prints
//! `-0`), while the compact one stores it as `0` (Redis's listpack stores integral scores as
//! integers, which have no negative zero), and a converted set keeps that `0`.
//!
//! # Why two encodings
//!
//! Like Redis, a set starts in a compact **listpack**-like encoding and converts, once and for
//! good, to a **skiplist**-like one when it grows:
//!
//! * `Small` (`OBJECT ENCODING` says `listpack`): every entry in one byte buffer (built
//!   exactly sized, edited in place with at most 16 bytes to spare), in order (`small.rs` has the layout): integral scores as varints (a difference
//!   from the previous score where it can be), members that are the decimal text of an
//!   `i64` as integers, and no bytes at all for a member that is the text of its own score
//!   (`ZADD key <now> <now>`, the sliding-window pattern: 2 bytes per entry after the
//!   first). Every operation decodes the buffer front to back, as Redis's listpack code
//!   does; members stored as integers are handed out as [`Member`] views formatted on the
//!   stack, which is why iteration yields `Member` rather than `&[u8]`.
//! * `Large` (`skiplist`, boxed; `large.rs` has the layout): a counted B+tree whose leaves
//!   are buffers in the compact layout (so a sliding window's entry still costs about two
//!   bytes), giving O(log n) rank, plus a hash index from members to scores (12 bytes a
//!   record, and none for a member that is the text of its own integral score).
//!
//! The set converts when a *new* member would make it hold more than
//! [`ZsetLimits::max_listpack_entries`] entries or when a new member is longer than
//! [`ZsetLimits::max_listpack_value`] bytes (Redis's `zset-max-listpack-entries` and
//! `zset-max-listpack-value`, 128 and 64 by default). The limits are passed to every call that
//! may add a member, because `CONFIG SET` can change them at run time (the command layer
//! reads them from `config::LiveSettings`). Like Redis, an existing
//! set never converts back, however small it gets (Redis only re-compacts the freshly built
//! result of `ZUNIONSTORE` and friends, which here is a new set built from scratch anyway).
//!
//! # Complexity of the `Large` encoding
//!
//! Lookups by member are O(1) expected (a hash probe and one leaf), plus O(log n) to find
//! the entry's place in the tree. Operations addressed by rank, score or member (`ZRANK`,
//! `ZRANGE` by index, `ZCOUNT`, `LIMIT` offsets, adds and removals) are O(log n) descents plus
//! the number of entries returned or removed, each step decoding one leaf of at most 32
//! entries (as Redis's listpack code decodes its whole buffer). `BYLEX` ranges on sets with
//! mixed scores walk the set, O(n).

//! # Lexicographic ranges on sets with mixed scores
//!
//! Redis documents `BYLEX` ranges only for sets whose members all have the same score. For
//! other sets this module behaves deterministically like Redis's listpack code, in both
//! encodings: nothing matches if the last entry is below `min` or the first entry is above
//! `max`; otherwise the match is the run of entries that starts at the first entry `>= min`
//! and continues while entries are `<= max` (for reverse queries: starts at the last entry
//! `<= max` and continues backwards while entries are `>= min`).
//!
//! # Files
//!
//! `mod.rs` holds the types and the encodings; `members.rs` what is addressed by member
//! (add, insert, remove, score, rank); `ranges.rs` what is addressed by rank, score or lex
//! range (and pops from the ends); `bounds.rs` the range arguments and their parsing;
//! `large.rs` and `small.rs` the helpers of one encoding each; `iter.rs` iteration and
//! `ZSCAN`.

mod bounds;
mod iter;
mod large;
mod members;
mod ranges;
mod small;
#[cfg(test)]
mod tests;

use std::cmp::Ordering;

pub use bounds::{LexBound, LexRange, ScoreRange};
pub use iter::Iter;
use large::Large;
pub use small::Member;
use small::Small;

/// Encoding thresholds of sorted sets (`zset-max-listpack-entries` and
/// `zset-max-listpack-value`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ZsetLimits {
    /// Most entries a set may hold in the compact (`listpack`) encoding; adding a new member
    /// beyond that converts the set. `0` means a set is never compact.
    pub max_listpack_entries: usize,
    /// Longest member, in bytes, that the compact encoding accepts; adding a longer new member
    /// converts the set.
    pub max_listpack_value: usize,
}

impl ZsetLimits {
    /// Redis's defaults: 128 entries of at most 64 bytes.
    pub const DEFAULT: ZsetLimits = ZsetLimits {
        max_listpack_entries: 128,
        max_listpack_value: 64,
    };
}

impl Default for ZsetLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Errors of sorted-set operations. The `Display` text is Redis's error message without the
/// leading `ERR ` that the reply adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ZsetError {
    /// An increment produced NaN (`+inf` plus `-inf`), or a NaN score was given.
    #[error("resulting score is not a number (NaN)")]
    NotANumber,
    /// `ZADD` got both `NX` and `XX`.
    #[error("XX and NX options at the same time are not compatible")]
    NxAndXx,
    /// `ZADD` got `GT` or `LT` with `NX`, or `GT` with `LT`.
    #[error("GT, LT, and/or NX options at the same time are not compatible")]
    GtLtNx,
    /// `ZADD ... INCR` got more than one score-member pair.
    #[error("INCR option supports a single increment-element pair")]
    IncrNeedsOnePair,
}

/// The `ZADD` options that change what is stored (`CH` only changes the reply and is left to
/// the command layer). `ZINCRBY` is `ZADD` with only `incr` set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AddFlags {
    /// `NX`: only add new members, never update existing ones.
    pub nx: bool,
    /// `XX`: only update existing members, never add new ones.
    pub xx: bool,
    /// `GT`: update an existing member only if the new score is greater.
    pub gt: bool,
    /// `LT`: update an existing member only if the new score is less.
    pub lt: bool,
    /// `INCR`: add the given score to the current one (0 for a new member).
    pub incr: bool,
}

impl AddFlags {
    /// Checks the option combination the way `ZADD` does before touching anything, given the
    /// number of score-member pairs. Errors come in Redis's order: `NX`+`XX`, then
    /// `GT`/`LT`/`NX` conflicts, then `INCR` with several pairs.
    pub fn validate(&self, pairs: usize) -> Result<(), ZsetError> {
        if self.nx && self.xx {
            return Err(ZsetError::NxAndXx);
        }
        if (self.nx && (self.gt || self.lt)) || (self.gt && self.lt) {
            return Err(ZsetError::GtLtNx);
        }
        if self.incr && pairs > 1 {
            return Err(ZsetError::IncrNeedsOnePair);
        }
        Ok(())
    }
}

/// What [`SortedSet::add`] did with one member.
///
/// The `ZADD` reply counts [`AddOutcome::Added`] (plus [`AddOutcome::Updated`] with `CH`);
/// `ZADD ... INCR` and `ZINCRBY` reply [`AddOutcome::score`], or nil when it is `None`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AddOutcome {
    /// The member was new and was added with this score.
    Added(f64),
    /// The member existed and its score changed to this one.
    Updated(f64),
    /// The member existed and the flags allowed the update, but the new score equals the
    /// current one (numerically: `0` and `-0` are equal), so nothing changed. Carries the
    /// computed new score, which is what `INCR` replies.
    Unchanged(f64),
    /// Nothing was done because of `NX`, `XX`, `GT` or `LT`.
    Skipped,
}

impl AddOutcome {
    /// The score to reply for `INCR`/`ZINCRBY`, or `None` when the member was skipped.
    pub fn score(&self) -> Option<f64> {
        match *self {
            AddOutcome::Added(s) | AddOutcome::Updated(s) | AddOutcome::Unchanged(s) => Some(s),
            AddOutcome::Skipped => None,
        }
    }

    /// Whether the set changed (a member was added or its score updated).
    pub fn changed(&self) -> bool {
        matches!(self, AddOutcome::Added(_) | AddOutcome::Updated(_))
    }
}

/// What [`SortedSet::insert`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InsertOutcome {
    /// The member was new.
    Added,
    /// The member existed with a different score, which was replaced.
    Updated,
    /// The member existed with an equal score; nothing changed.
    Unchanged,
}

/// A score with the total order sorted sets use: numeric order, with `-0.0 == 0.0`.
/// Never holds NaN (every entry point rejects it).
#[derive(Clone, Copy, Debug)]
struct Score(f64);

impl PartialEq for Score {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.partial_cmp(&other.0).unwrap_or(Ordering::Equal)
    }
}

/// A score as the compact encoding stores it: `-0.0` becomes `0.0`, as in Redis's listpack
/// (see the module documentation).
fn compact_score(s: Score) -> Score {
    if s.0 == 0.0 { Score(0.0) } else { s }
}

#[derive(Clone, Debug)]
enum Repr {
    Small(Small),
    /// Boxed so that a compact set, the common case, is not as large as the tree and index.
    Large(Box<Large>),
}

/// One sorted set. See the [module documentation](self) for its order and encodings.
#[derive(Clone, Debug)]
pub struct SortedSet {
    repr: Repr,
}

impl SortedSet {
    /// Asks the CPU for the start and end of a compact set's buffer, which every operation
    /// walks (see `store::prefetch`).
    pub(crate) fn prefetch_data(&self) {
        if let Repr::Small(s) = &self.repr {
            s.prefetch();
        }
    }
}

impl Default for SortedSet {
    fn default() -> Self {
        Self::new()
    }
}
