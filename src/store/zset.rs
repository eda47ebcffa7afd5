//! Sorted sets: the value type behind the `Z*` commands.
//!
//! This module owns the in-memory representation of one sorted set (a set of unique binary
//! members, each with an `f64` score) together with everything that is about the *values*
//! of sorted-set commands rather than about keys or the protocol: parsing
//! `ZRANGEBYSCORE`/`ZRANGEBYLEX` bounds exactly as Redis 7.0 does and the `ZADD` flag
//! semantics (`NX`/`XX`/`GT`/`LT`/`INCR`). Score arguments are parsed and formatted by
//! [`crate::num`] (`parse_score`/`format_score` are re-exported here under their old names).
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
//! * `Small` (`OBJECT ENCODING` says `listpack`): one sorted `VecDeque<(score, member)>`.
//!   Member lookup is a linear scan, which is cheaper than hashing for a few dozen entries;
//!   appending in order (`ZADD key <now> <id>`, the sliding-window rate-limiter pattern) is
//!   O(1) and trimming the front (`ZREMRANGEBYSCORE key 0 <cutoff>`) is a drain.
//! * `Large` (`skiplist`): a `BTreeSet<(score, member)>` for order plus a
//!   `HashMap<member, score>` for O(1) member lookup; the member bytes are shared by both.
//!
//! The set converts when a *new* member would make it hold more than
//! [`ZsetLimits::max_listpack_entries`] entries or when a new member is longer than
//! [`ZsetLimits::max_listpack_value`] bytes (Redis's `zset-max-listpack-entries` and
//! `zset-max-listpack-value`, 128 and 64 by default). The limits are passed to every call that
//! may add a member, because `CONFIG SET` can change them at run time. Like Redis, an existing
//! set never converts back, however small it gets (Redis only re-compacts the freshly built
//! result of `ZUNIONSTORE` and friends, which here is a new set built from scratch anyway).
//!
//! # Complexity of the `Large` encoding
//!
//! A `BTreeSet` has no rank index, so operations addressed by rank (`ZRANK`, `ZRANGE` by
//! index, `ZREMRANGEBYRANK`, `LIMIT` offsets) walk the tree from the nearer end (for `ZRANK`,
//! the end guessed nearer from the scores): O(distance from that end) instead of Redis's
//! O(log n). Operations addressed by score or member are O(log n) plus the number of entries
//! returned or removed; `ZCOUNT` is O(log n + min(inside, outside)).
//!
//! # Lexicographic ranges on sets with mixed scores
//!
//! Redis documents `BYLEX` ranges only for sets whose members all have the same score. For
//! other sets this module behaves deterministically like Redis's listpack code, in both
//! encodings: nothing matches if the last entry is below `min` or the first entry is above
//! `max`; otherwise the match is the run of entries that starts at the first entry `>= min`
//! and continues while entries are `<= max` (for reverse queries: starts at the last entry
//! `<= max` and continues backwards while entries are `>= min`).

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap, VecDeque, btree_set, vec_deque};
use std::iter::FusedIterator;
use std::ops::Bound;

use bytes::Bytes;

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

/// One entry; tuples order by score, then member bytes.
type Entry = (Score, Bytes);

/// A score as the compact encoding stores it: `-0.0` becomes `0.0`, as in Redis's listpack
/// (see the module documentation).
fn compact_score(s: Score) -> Score {
    if s.0 == 0.0 { Score(0.0) } else { s }
}

fn cmp_entry_key(e: &Entry, score: Score, member: &[u8]) -> Ordering {
    e.0.cmp(&score).then_with(|| e.1.as_ref().cmp(member))
}

fn to_owned_pair(e: &Entry) -> (Bytes, f64) {
    (e.1.clone(), e.0.0)
}

/// The key-ordered part and the member index of the `Large` encoding.
#[derive(Clone, Debug, Default)]
struct Large {
    set: BTreeSet<Entry>,
    map: HashMap<Bytes, Score>,
}

impl Large {
    fn remove_entries(&mut self, doomed: Vec<Entry>) -> usize {
        let n = doomed.len();
        for e in doomed {
            self.set.remove(&e);
            self.map.remove(&e.1);
        }
        self.maybe_shrink();
        n
    }

    fn maybe_shrink(&mut self) {
        if self.map.capacity() > 64 && self.map.capacity() / 4 > self.map.len() {
            self.map.shrink_to_fit();
        }
    }
}

#[derive(Clone, Debug)]
enum Repr {
    Small(VecDeque<Entry>),
    Large(Large),
}

/// One sorted set. See the [module documentation](self) for its order and encodings.
#[derive(Clone, Debug)]
pub struct SortedSet {
    repr: Repr,
}

impl Default for SortedSet {
    fn default() -> Self {
        Self::new()
    }
}

type EntryIter<'a> = Box<dyn Iterator<Item = &'a Entry> + 'a>;

impl SortedSet {
    /// An empty set in the compact encoding. (Redis creates a new key directly in the
    /// `skiplist` encoding when its first member is too long or the entry limit is 0; the
    /// first [`insert`](Self::insert)/[`add`](Self::add) converts in exactly those cases, so
    /// the outcome is the same.)
    pub fn new() -> Self {
        SortedSet {
            repr: Repr::Small(VecDeque::new()),
        }
    }

    /// An empty set in the encoding Redis 7.0 gives a set created to receive `len` entries
    /// (`ZRANGESTORE` by rank knows its result size up front): `skiplist` from the start when
    /// `len` exceeds the entry limit, so its first 128 entries never pass through the compact
    /// encoding (which would turn a `-0` score into `0`); otherwise like [`new`](Self::new).
    pub fn with_expected_len(len: usize, limits: &ZsetLimits) -> Self {
        let mut z = Self::new();
        if len > limits.max_listpack_entries {
            z.convert_to_large();
        }
        z
    }

    /// Number of members (`ZCARD`).
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Small(dq) => dq.len(),
            Repr::Large(l) => l.map.len(),
        }
    }

    /// Whether the set has no members.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The encoding name `OBJECT ENCODING` prints in Redis 7.0: `"listpack"` or `"skiplist"`.
    pub fn encoding(&self) -> &'static str {
        match &self.repr {
            Repr::Small(_) => "listpack",
            Repr::Large(_) => "skiplist",
        }
    }

    /// The score of `member` (`ZSCORE`, `ZMSCORE`), or `None` if it is not in the set.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.repr {
            Repr::Small(dq) => dq.iter().find(|e| e.1.as_ref() == member).map(|e| e.0.0),
            Repr::Large(l) => l.map.get(member).map(|s| s.0),
        }
    }

    /// Whether `member` is in the set.
    pub fn contains(&self, member: &[u8]) -> bool {
        self.score(member).is_some()
    }

    /// `ZADD`/`ZINCRBY` for one score-member pair, exactly as Redis's `zsetAdd`: `NX` skips
    /// existing members, `XX` skips new ones, `INCR` adds `score` to the current score (a new
    /// member gets `score`), `GT`/`LT` skip an existing member unless its (incremented) score
    /// grows/shrinks, and a score equal to the current one changes nothing. A NaN `score`, or
    /// an increment giving NaN, is [`ZsetError::NotANumber`] and changes nothing. Option
    /// conflicts are not checked here; see [`AddFlags::validate`].
    pub fn add(
        &mut self,
        member: &[u8],
        score: f64,
        flags: AddFlags,
        limits: &ZsetLimits,
    ) -> Result<AddOutcome, ZsetError> {
        if score.is_nan() {
            return Err(ZsetError::NotANumber);
        }
        match self.score(member) {
            Some(current) => {
                if flags.nx {
                    return Ok(AddOutcome::Skipped);
                }
                let mut new = score;
                if flags.incr {
                    new += current;
                    if new.is_nan() {
                        return Err(ZsetError::NotANumber);
                    }
                }
                if (flags.lt && new >= current) || (flags.gt && new <= current) {
                    return Ok(AddOutcome::Skipped);
                }
                if new == current {
                    Ok(AddOutcome::Unchanged(new))
                } else {
                    self.change_score(member, new);
                    Ok(AddOutcome::Updated(new))
                }
            }
            None if flags.xx => Ok(AddOutcome::Skipped),
            None => {
                self.insert_new(member, score, limits);
                Ok(AddOutcome::Added(score))
            }
        }
    }

    /// Inserts `member` with `score`, or replaces its score (plain upsert, as `ZRANGESTORE`
    /// and the `*STORE` commands need). A score numerically equal to the current one (`0`
    /// versus `-0` included) leaves the entry as it is. A NaN score is refused with
    /// [`ZsetError::NotANumber`].
    pub fn insert(
        &mut self,
        member: &[u8],
        score: f64,
        limits: &ZsetLimits,
    ) -> Result<InsertOutcome, ZsetError> {
        if score.is_nan() {
            return Err(ZsetError::NotANumber);
        }
        match self.score(member) {
            Some(current) if current == score => Ok(InsertOutcome::Unchanged),
            Some(_) => {
                self.change_score(member, score);
                Ok(InsertOutcome::Updated)
            }
            None => {
                self.insert_new(member, score, limits);
                Ok(InsertOutcome::Added)
            }
        }
    }

    /// Adds a member known to be absent, converting first if the limits require it.
    fn insert_new(&mut self, member: &[u8], score: f64, limits: &ZsetLimits) {
        if let Repr::Small(dq) = &self.repr
            && (dq.len().saturating_add(1) > limits.max_listpack_entries
                || member.len() > limits.max_listpack_value)
        {
            self.convert_to_large();
        }
        let score = Score(score);
        match &mut self.repr {
            Repr::Small(dq) => {
                let score = compact_score(score);
                let pos = dq.partition_point(|e| cmp_entry_key(e, score, member) == Ordering::Less);
                dq.insert(pos, (score, Bytes::copy_from_slice(member)));
            }
            Repr::Large(l) => {
                let m = Bytes::copy_from_slice(member);
                l.map.insert(m.clone(), score);
                l.set.insert((score, m));
            }
        }
    }

    /// Replaces the score of a member known to be present.
    fn change_score(&mut self, member: &[u8], new: f64) {
        let new = Score(new);
        match &mut self.repr {
            Repr::Small(dq) => {
                let new = compact_score(new);
                let Some(idx) = dq.iter().position(|e| e.1.as_ref() == member) else {
                    return;
                };
                let fits_left =
                    idx == 0 || cmp_entry_key(&dq[idx - 1], new, member) == Ordering::Less;
                let fits_right = idx + 1 >= dq.len()
                    || cmp_entry_key(&dq[idx + 1], new, member) == Ordering::Greater;
                if fits_left && fits_right {
                    dq[idx].0 = new;
                } else if let Some((_, m)) = dq.remove(idx) {
                    let pos =
                        dq.partition_point(|e| cmp_entry_key(e, new, member) == Ordering::Less);
                    dq.insert(pos, (new, m));
                }
            }
            Repr::Large(l) => {
                let Some((key, old)) = l.map.get_key_value(member).map(|(k, s)| (k.clone(), *s))
                else {
                    return;
                };
                l.set.remove(&(old, key.clone()));
                l.set.insert((new, key.clone()));
                l.map.insert(key, new);
            }
        }
    }

    fn convert_to_large(&mut self) {
        if let Repr::Small(dq) = &mut self.repr {
            let dq = std::mem::take(dq);
            let mut map = HashMap::with_capacity(dq.len() + 1);
            for (s, m) in &dq {
                map.insert(m.clone(), *s);
            }
            let set: BTreeSet<Entry> = dq.into_iter().collect();
            self.repr = Repr::Large(Large { set, map });
        }
    }

    /// Removes `member` (`ZREM`); returns whether it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Small(dq) => match dq.iter().position(|e| e.1.as_ref() == member) {
                Some(idx) => dq.remove(idx).is_some(),
                None => false,
            },
            Repr::Large(l) => match l.map.remove_entry(member) {
                Some((m, s)) => {
                    l.set.remove(&(s, m));
                    true
                }
                None => false,
            },
        }
    }

    /// The 0-based rank of `member` in ascending order, or in descending order if `reverse`
    /// (`ZRANK`, `ZREVRANK`); `None` if it is not in the set.
    pub fn rank(&self, member: &[u8], reverse: bool) -> Option<usize> {
        let len = self.len();
        let forward = match &self.repr {
            Repr::Small(dq) => dq.iter().position(|e| e.1.as_ref() == member)?,
            Repr::Large(l) => {
                let (m, s) = l.map.get_key_value(member)?;
                let key = (*s, m.clone());
                // Count from the end that is probably nearer (guessed from the scores).
                let nearer_back = match (l.set.first(), l.set.last()) {
                    (Some(first), Some(last)) => s.0 - first.0.0 > last.0.0 - s.0,
                    _ => false,
                };
                if nearer_back {
                    let after = l
                        .set
                        .range((Bound::Excluded(key), Bound::Unbounded))
                        .count();
                    len.saturating_sub(after + 1)
                } else {
                    l.set.range(..key).count()
                }
            }
        };
        Some(if reverse {
            len.saturating_sub(forward + 1)
        } else {
            forward
        })
    }

    /// The entry at 0-based ascending `rank`, or `None` past the end (for `ZRANDMEMBER`).
    pub fn member_at(&self, rank: usize) -> Option<(&[u8], f64)> {
        let len = self.len();
        if rank >= len {
            return None;
        }
        let e = match &self.repr {
            Repr::Small(dq) => dq.get(rank)?,
            Repr::Large(l) => {
                if rank <= len / 2 {
                    l.set.iter().nth(rank)?
                } else {
                    l.set.iter().nth_back(len - 1 - rank)?
                }
            }
        };
        Some((e.1.as_ref(), e.0.0))
    }

    /// The entries at several 0-based ascending ranks, in the order the ranks are given
    /// (repeats allowed); ranks `>= len()` are left out. One pass over the set, so picking
    /// `k` random members costs O(n + k log k) rather than O(n k) (for `ZRANDMEMBER` with a
    /// count).
    pub fn members_at(&self, ranks: &[usize]) -> Vec<(&[u8], f64)> {
        match &self.repr {
            Repr::Small(dq) => ranks
                .iter()
                .filter_map(|&r| dq.get(r))
                .map(|e| (e.1.as_ref(), e.0.0))
                .collect(),
            Repr::Large(l) => {
                let mut order: Vec<(usize, usize)> = ranks
                    .iter()
                    .enumerate()
                    .filter(|&(_, &r)| r < l.set.len())
                    .map(|(i, &r)| (r, i))
                    .collect();
                order.sort_unstable();
                let mut found: Vec<Option<&Entry>> = vec![None; ranks.len()];
                let mut wanted = order.iter().peekable();
                for (rank, e) in l.set.iter().enumerate() {
                    while let Some(&&(r, i)) = wanted.peek() {
                        if r != rank {
                            break;
                        }
                        if let Some(slot) = found.get_mut(i) {
                            *slot = Some(e);
                        }
                        wanted.next();
                    }
                    if wanted.peek().is_none() {
                        break;
                    }
                }
                found
                    .into_iter()
                    .flatten()
                    .map(|e| (e.1.as_ref(), e.0.0))
                    .collect()
            }
        }
    }

    /// All entries in ascending order (descending with `.rev()`).
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            inner: match &self.repr {
                Repr::Small(dq) => IterInner::Small(dq.iter()),
                Repr::Large(l) => IterInner::Large(l.set.iter()),
            },
        }
    }

    /// Entries with ascending ranks `lo..=hi` (both `< len`), in ascending order or, if
    /// `reverse`, descending order.
    fn rank_slice(&self, lo: usize, hi: usize, reverse: bool) -> Vec<&Entry> {
        match &self.repr {
            Repr::Small(dq) => {
                let it = dq.range(lo..=hi);
                if reverse {
                    it.rev().collect()
                } else {
                    it.collect()
                }
            }
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
        self.rank_slice(lo, hi, reverse)
            .into_iter()
            .map(to_owned_pair)
            .collect()
    }

    /// Ascending index range `[lo, hi)` of entries whose scores are in `range` (compact
    /// encoding only).
    fn small_score_span(dq: &VecDeque<Entry>, range: &ScoreRange) -> (usize, usize) {
        let lo = dq.partition_point(|e| !range.gte_min(e.0.0));
        let hi = dq.partition_point(|e| range.lte_max(e.0.0));
        (lo, hi.max(lo))
    }

    /// Entries whose scores are in `range`, ascending or descending.
    fn score_iter<'a>(&'a self, range: &ScoreRange, reverse: bool) -> EntryIter<'a> {
        match &self.repr {
            Repr::Small(dq) => {
                let (lo, hi) = Self::small_score_span(dq, range);
                let it = dq.range(lo..hi);
                if reverse {
                    Box::new(it.rev())
                } else {
                    Box::new(it)
                }
            }
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
        apply_limit(self.score_iter(range, reverse), offset, count)
    }

    /// Number of entries with scores in `range` (`ZCOUNT`). In the large encoding this
    /// costs O(log n + min(inside, outside)): it counts the entries in the range and the
    /// entries outside it at the same time and stops when either count is complete, so a
    /// window that covers most of the set (`ZCOUNT key <cutoff> +inf`) is cheap too.
    pub fn count_in_score_range(&self, range: &ScoreRange) -> usize {
        match &self.repr {
            Repr::Small(dq) => {
                let (lo, hi) = Self::small_score_span(dq, range);
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
            Repr::Small(dq) => {
                let (lo, hi) = Self::small_score_span(dq, range);
                dq.drain(lo..hi);
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
            Repr::Small(dq) => {
                dq.drain(lo..=hi);
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

    /// Ascending index range `[lo, hi)` of the lexicographic run (compact encoding only); see
    /// the module documentation for sets with mixed scores.
    fn small_lex_span(dq: &VecDeque<Entry>, range: &LexRange, reverse: bool) -> (usize, usize) {
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

    /// Entries of the lexicographic run, ascending or descending.
    fn lex_iter<'a>(&'a self, range: &'a LexRange, reverse: bool) -> EntryIter<'a> {
        match &self.repr {
            Repr::Small(dq) => {
                let (lo, hi) = Self::small_lex_span(dq, range, reverse);
                let it = dq.range(lo..hi);
                if reverse {
                    Box::new(it.rev())
                } else {
                    Box::new(it)
                }
            }
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
        apply_limit(self.lex_iter(range, reverse), offset, count)
    }

    /// Number of entries with members in `range` (`ZLEXCOUNT`).
    pub fn count_in_lex_range(&self, range: &LexRange) -> usize {
        match &self.repr {
            Repr::Small(dq) => {
                let (lo, hi) = Self::small_lex_span(dq, range, false);
                hi - lo
            }
            Repr::Large(_) => self.lex_iter(range, false).count(),
        }
    }

    /// Removes the entries with members in `range` (`ZREMRANGEBYLEX`); returns how many.
    pub fn remove_range_by_lex(&mut self, range: &LexRange) -> usize {
        match &mut self.repr {
            Repr::Small(dq) => {
                let (lo, hi) = Self::small_lex_span(dq, range, false);
                dq.drain(lo..hi);
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
            Repr::Small(dq) => {
                for _ in 0..n {
                    let e = if max { dq.pop_back() } else { dq.pop_front() };
                    if let Some((s, m)) = e {
                        out.push((m, s.0));
                    }
                }
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
            Repr::Small(dq) => return (0, dq.iter().map(to_owned_pair).collect()),
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

    /// Rough number of heap and inline bytes the set uses (`MEMORY USAGE`).
    pub fn approx_memory(&self) -> usize {
        /// `Bytes` clones share one heap header once a member is referenced twice.
        const SHARED_HEADER: usize = 24;
        let base = std::mem::size_of::<Self>();
        match &self.repr {
            Repr::Small(dq) => {
                base + dq.capacity() * std::mem::size_of::<Entry>()
                    + dq.iter().map(|e| e.1.len()).sum::<usize>()
            }
            Repr::Large(l) => {
                let members: usize = l.map.keys().map(|k| k.len() + SHARED_HEADER).sum();
                // B-tree nodes are about two thirds full on average.
                let tree = l.set.len() * std::mem::size_of::<Entry>() * 3 / 2;
                let table = l.map.capacity() * (std::mem::size_of::<(Bytes, Score)>() + 1);
                base + members + tree + table
            }
        }
    }
}

impl<'a> IntoIterator for &'a SortedSet {
    type Item = (&'a [u8], f64);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// Iterator over the entries of a [`SortedSet`] as `(member, score)`, in ascending order
/// (double-ended: `.rev()` gives descending order).
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    inner: IterInner<'a>,
}

#[derive(Clone, Debug)]
enum IterInner<'a> {
    Small(vec_deque::Iter<'a, Entry>),
    Large(btree_set::Iter<'a, Entry>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        let e = match &mut self.inner {
            IterInner::Small(it) => it.next(),
            IterInner::Large(it) => it.next(),
        }?;
        Some((e.1.as_ref(), e.0.0))
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
            IterInner::Small(it) => it.next_back(),
            IterInner::Large(it) => it.next_back(),
        }?;
        Some((e.1.as_ref(), e.0.0))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl FusedIterator for Iter<'_> {}

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

/// Order-preserving map from scores to non-zero `u64` cursors (`-0` maps like `0`).
fn score_to_cursor(s: f64) -> u64 {
    let s = if s == 0.0 { 0.0 } else { s };
    let b = s.to_bits();
    if b >> 63 == 0 { b | (1 << 63) } else { !b }
}

/// Inverse of [`score_to_cursor`]; `None` for cursors that decode to NaN.
fn cursor_to_score(c: u64) -> Option<f64> {
    let b = if c >> 63 == 1 { c & !(1 << 63) } else { !c };
    let s = f64::from_bits(b);
    (!s.is_nan()).then_some(s)
}

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

fn parse_range_item(arg: &[u8]) -> Option<(f64, bool)> {
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
    fn point(&self) -> (u8, &[u8], bool) {
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

use crate::num::strtod;
/// The score parser and formatter are Redis's double syntax, shared with the other number
/// commands: they live in [`crate::num`]; these names stay for the commands that use them.
pub use crate::num::{format_double as format_score, parse_double as parse_score};

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SMALL: ZsetLimits = ZsetLimits::DEFAULT;
    /// Limits under which every set is in the `Large` encoding from its first member.
    const LARGE: ZsetLimits = ZsetLimits {
        max_listpack_entries: 0,
        max_listpack_value: 64,
    };

    fn build(entries: &[(f64, &str)], limits: &ZsetLimits) -> SortedSet {
        let mut z = SortedSet::new();
        for (s, m) in entries {
            z.insert(m.as_bytes(), *s, limits).unwrap();
        }
        z
    }

    /// Runs `f` on the same set in both encodings.
    fn both(entries: &[(f64, &str)], f: impl Fn(SortedSet)) {
        let small = build(entries, &SMALL);
        if entries.len() <= 128 {
            assert_eq!(small.encoding(), "listpack");
        }
        f(small);
        let large = build(entries, &LARGE);
        if !entries.is_empty() {
            assert_eq!(large.encoding(), "skiplist");
        }
        f(large);
    }

    fn names(v: &[(Bytes, f64)]) -> Vec<String> {
        v.iter()
            .map(|(m, _)| String::from_utf8_lossy(m).into_owned())
            .collect()
    }

    fn members(z: &SortedSet) -> Vec<String> {
        z.iter()
            .map(|(m, _)| String::from_utf8_lossy(m).into_owned())
            .collect()
    }

    fn fmt(x: f64) -> String {
        let mut v = Vec::new();
        format_score(x, &mut v);
        String::from_utf8(v).unwrap()
    }

    fn sr(min: &str, max: &str) -> ScoreRange {
        ScoreRange::parse(min.as_bytes(), max.as_bytes()).unwrap()
    }

    fn lr(min: &str, max: &str) -> LexRange {
        LexRange::parse(min.as_bytes(), max.as_bytes()).unwrap()
    }

    fn check_invariants(z: &SortedSet) {
        match &z.repr {
            Repr::Small(dq) => {
                for w in dq.iter().collect::<Vec<_>>().windows(2) {
                    assert!(w[0] < w[1], "small not strictly sorted");
                }
            }
            Repr::Large(l) => {
                assert_eq!(l.set.len(), l.map.len());
                for (s, m) in &l.set {
                    let ms = l.map.get(m).expect("member missing from map");
                    assert_eq!(ms.0.to_bits(), s.0.to_bits());
                }
            }
        }
        assert!(z.iter().all(|(_, s)| !s.is_nan()));
    }

    const ABC: &[(f64, &str)] = &[(1.0, "a"), (2.0, "b"), (3.0, "c"), (4.0, "d"), (5.0, "e")];

    // ---------------------------------------------------------------- basics

    #[test]
    fn new_set_is_empty_listpack() {
        let z = SortedSet::new();
        assert!(z.is_empty());
        assert_eq!(z.len(), 0);
        assert_eq!(z.encoding(), "listpack");
        assert_eq!(z.iter().count(), 0);
        assert_eq!(z.member_at(0), None);
        assert_eq!(SortedSet::default().len(), 0);
        assert_eq!(ZsetLimits::default(), ZsetLimits::DEFAULT);
        assert_eq!(ZsetLimits::DEFAULT.max_listpack_entries, 128);
        assert_eq!(ZsetLimits::DEFAULT.max_listpack_value, 64);
    }

    #[test]
    fn order_is_score_then_member_bytes() {
        both(
            &[
                (2.0, "b"),
                (1.0, "zz"),
                (2.0, "a"),
                (2.0, "ab"),
                (-1.0, "q"),
                (2.0, ""),
                (f64::INFINITY, "i"),
                (f64::NEG_INFINITY, "n"),
            ],
            |z| {
                assert_eq!(members(&z), ["n", "q", "zz", "", "a", "ab", "b", "i"]);
                assert_eq!(z.len(), 8);
                let back: Vec<_> = z.iter().rev().map(|(m, _)| m.to_vec()).collect();
                assert_eq!(back.first().unwrap(), b"i");
                assert_eq!(z.iter().len(), 8);
                check_invariants(&z);
            },
        );
    }

    #[test]
    fn binary_members_order_like_memcmp() {
        let mut small = SortedSet::new();
        let mut large = SortedSet::new();
        for m in [
            &b"\xff"[..],
            b"\x00",
            b"",
            b"\x00\x00",
            b"a\x00",
            b"a",
            b"\x7f",
        ] {
            small.insert(m, 0.0, &SMALL).unwrap();
            large.insert(m, 0.0, &LARGE).unwrap();
        }
        let want: Vec<&[u8]> = vec![b"", b"\x00", b"\x00\x00", b"a", b"a\x00", b"\x7f", b"\xff"];
        for z in [&small, &large] {
            let got: Vec<&[u8]> = z.iter().map(|(m, _)| m).collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn expected_len_picks_the_encoding() {
        let small = SortedSet::with_expected_len(128, &SMALL);
        assert_eq!(small.encoding(), "listpack");
        let mut large = SortedSet::with_expected_len(129, &SMALL);
        assert_eq!((large.encoding(), large.len()), ("skiplist", 0));
        large.insert(b"z", -0.0, &SMALL).unwrap();
        assert!(large.score(b"z").unwrap().is_sign_negative());
        check_invariants(&large);
    }

    #[test]
    fn negative_zero_keeps_sign_and_ties_with_zero() {
        both(&[(0.0, "b"), (-0.0, "a"), (0.0, "c")], |mut z| {
            // The compact encoding stores -0 as 0, like Redis's listpack.
            let large = z.encoding() == "skiplist";
            assert_eq!(members(&z), ["a", "b", "c"]);
            let s = z.score(b"a").unwrap();
            assert!(s == 0.0 && s.is_sign_negative() == large);
            assert_eq!(fmt(s), if large { "-0" } else { "0" });
            // Same numeric score: nothing changes, the sign stays.
            assert_eq!(
                z.insert(b"a", 0.0, &SMALL).unwrap(),
                InsertOutcome::Unchanged
            );
            assert_eq!(z.score(b"a").unwrap().is_sign_negative(), large);
            assert_eq!(
                z.add(b"b", -0.0, AddFlags::default(), &SMALL).unwrap(),
                AddOutcome::Unchanged(-0.0)
            );
            assert!(z.score(b"b").unwrap().is_sign_positive());
            // INCR 0 on -0: 0 + -0 = +0, replied but not stored (equal scores).
            let incr = AddFlags {
                incr: true,
                ..AddFlags::default()
            };
            let out = z.add(b"a", 0.0, incr, &SMALL).unwrap();
            assert_eq!(out, AddOutcome::Unchanged(0.0));
            assert!(out.score().unwrap().is_sign_positive());
            assert_eq!(z.score(b"a").unwrap().is_sign_negative(), large);
            assert_eq!(z.count_in_score_range(&sr("0", "0")), 3);
            assert_eq!(z.count_in_score_range(&sr("-0", "(0")), 0);
            assert_eq!(z.count_in_score_range(&sr("(-1", "-0")), 3);
            assert_eq!(z.rank(b"c", false), Some(2));
            check_invariants(&z);
        });
    }

    // ---------------------------------------------------------------- add / insert

    #[test]
    fn insert_outcomes() {
        for lim in [SMALL, LARGE] {
            let mut z = SortedSet::new();
            assert_eq!(z.insert(b"a", 1.0, &lim), Ok(InsertOutcome::Added));
            assert_eq!(z.insert(b"a", 1.0, &lim), Ok(InsertOutcome::Unchanged));
            assert_eq!(z.insert(b"a", 2.0, &lim), Ok(InsertOutcome::Updated));
            assert_eq!(z.insert(b"a", f64::NAN, &lim), Err(ZsetError::NotANumber));
            assert_eq!(z.score(b"a"), Some(2.0));
            assert_eq!(z.len(), 1);
        }
        let mut z = SortedSet::new();
        assert_eq!(z.insert(b"x", f64::NAN, &SMALL), Err(ZsetError::NotANumber));
        assert!(z.is_empty());
    }

    #[test]
    fn update_moves_entry() {
        both(ABC, |mut z| {
            let lim = SMALL;
            z.insert(b"a", 10.0, &lim).unwrap();
            assert_eq!(members(&z), ["b", "c", "d", "e", "a"]);
            z.insert(b"e", -1.0, &lim).unwrap();
            assert_eq!(members(&z), ["e", "b", "c", "d", "a"]);
            // In-place update keeps the position.
            z.insert(b"c", 3.5, &lim).unwrap();
            assert_eq!(members(&z), ["e", "b", "c", "d", "a"]);
            assert_eq!(z.score(b"c"), Some(3.5));
            // Tie broken by member after the move.
            z.insert(b"a", 2.0, &lim).unwrap();
            assert_eq!(members(&z), ["e", "a", "b", "c", "d"]);
            check_invariants(&z);
        });
    }

    #[test]
    fn add_nx_xx() {
        let nx = AddFlags {
            nx: true,
            ..AddFlags::default()
        };
        let xx = AddFlags {
            xx: true,
            ..AddFlags::default()
        };
        both(&[(1.0, "a")], |mut z| {
            assert_eq!(z.add(b"a", 5.0, nx, &SMALL), Ok(AddOutcome::Skipped));
            assert_eq!(z.score(b"a"), Some(1.0));
            assert_eq!(z.add(b"b", 5.0, nx, &SMALL), Ok(AddOutcome::Added(5.0)));
            assert_eq!(z.add(b"c", 5.0, xx, &SMALL), Ok(AddOutcome::Skipped));
            assert_eq!(z.score(b"c"), None);
            assert_eq!(z.add(b"a", 7.0, xx, &SMALL), Ok(AddOutcome::Updated(7.0)));
            assert_eq!(z.add(b"a", 7.0, xx, &SMALL), Ok(AddOutcome::Unchanged(7.0)));
            assert_eq!(z.len(), 2);
        });
    }

    #[test]
    fn add_gt_lt() {
        let gt = AddFlags {
            gt: true,
            ..AddFlags::default()
        };
        let lt = AddFlags {
            lt: true,
            ..AddFlags::default()
        };
        both(&[(5.0, "a")], |mut z| {
            assert_eq!(z.add(b"a", 4.0, gt, &SMALL), Ok(AddOutcome::Skipped));
            assert_eq!(z.add(b"a", 5.0, gt, &SMALL), Ok(AddOutcome::Skipped));
            assert_eq!(z.add(b"a", 6.0, gt, &SMALL), Ok(AddOutcome::Updated(6.0)));
            assert_eq!(z.add(b"a", 6.0, lt, &SMALL), Ok(AddOutcome::Skipped));
            assert_eq!(z.add(b"a", 7.0, lt, &SMALL), Ok(AddOutcome::Skipped));
            assert_eq!(z.add(b"a", 1.0, lt, &SMALL), Ok(AddOutcome::Updated(1.0)));
            // GT/LT never prevent adding new members.
            assert_eq!(z.add(b"n", -9.0, gt, &SMALL), Ok(AddOutcome::Added(-9.0)));
            assert_eq!(z.add(b"m", 9.0, lt, &SMALL), Ok(AddOutcome::Added(9.0)));
            // -0 is not greater than 0.
            z.insert(b"z", 0.0, &SMALL).unwrap();
            assert_eq!(z.add(b"z", -0.0, gt, &SMALL), Ok(AddOutcome::Skipped));
            assert_eq!(z.add(b"z", -0.0, lt, &SMALL), Ok(AddOutcome::Skipped));
        });
    }

    #[test]
    fn add_incr() {
        let incr = AddFlags {
            incr: true,
            ..AddFlags::default()
        };
        both(&[(1.5, "a"), (f64::INFINITY, "i")], |mut z| {
            assert_eq!(z.add(b"a", 2.0, incr, &SMALL), Ok(AddOutcome::Updated(3.5)));
            assert_eq!(z.add(b"new", 2.0, incr, &SMALL), Ok(AddOutcome::Added(2.0)));
            assert_eq!(
                z.add(b"i", 1.0, incr, &SMALL),
                Ok(AddOutcome::Unchanged(f64::INFINITY))
            );
            assert_eq!(
                z.add(b"i", f64::NEG_INFINITY, incr, &SMALL),
                Err(ZsetError::NotANumber)
            );
            assert_eq!(z.score(b"i"), Some(f64::INFINITY));
            // INCR with GT/LT compares the incremented score.
            let incr_gt = AddFlags { gt: true, ..incr };
            assert_eq!(z.add(b"a", -1.0, incr_gt, &SMALL), Ok(AddOutcome::Skipped));
            assert_eq!(z.score(b"a"), Some(3.5));
            assert_eq!(
                z.add(b"a", 1.0, incr_gt, &SMALL),
                Ok(AddOutcome::Updated(4.5))
            );
            let incr_lt_xx = AddFlags {
                lt: true,
                xx: true,
                ..incr
            };
            assert_eq!(
                z.add(b"a", 1.0, incr_lt_xx, &SMALL),
                Ok(AddOutcome::Skipped)
            );
            assert_eq!(
                z.add(b"a", -0.5, incr_lt_xx, &SMALL),
                Ok(AddOutcome::Updated(4.0))
            );
            assert_eq!(
                z.add(b"zz", 1.0, incr_lt_xx, &SMALL),
                Ok(AddOutcome::Skipped)
            );
            let incr_nx = AddFlags { nx: true, ..incr };
            assert_eq!(z.add(b"a", 1.0, incr_nx, &SMALL), Ok(AddOutcome::Skipped));
            check_invariants(&z);
        });
    }

    #[test]
    fn add_nan_is_error_regardless_of_flags() {
        let mut z = SortedSet::new();
        for flags in [
            AddFlags::default(),
            AddFlags {
                xx: true,
                ..AddFlags::default()
            },
            AddFlags {
                nx: true,
                ..AddFlags::default()
            },
        ] {
            assert_eq!(
                z.add(b"a", f64::NAN, flags, &SMALL),
                Err(ZsetError::NotANumber)
            );
        }
        assert!(z.is_empty());
        assert_eq!(
            ZsetError::NotANumber.to_string(),
            "resulting score is not a number (NaN)"
        );
    }

    #[test]
    fn add_outcome_helpers() {
        assert_eq!(AddOutcome::Added(1.0).score(), Some(1.0));
        assert_eq!(AddOutcome::Updated(2.0).score(), Some(2.0));
        assert_eq!(AddOutcome::Unchanged(3.0).score(), Some(3.0));
        assert_eq!(AddOutcome::Skipped.score(), None);
        assert!(AddOutcome::Added(1.0).changed());
        assert!(AddOutcome::Updated(1.0).changed());
        assert!(!AddOutcome::Unchanged(1.0).changed());
        assert!(!AddOutcome::Skipped.changed());
    }

    #[test]
    fn add_flags_validate_like_redis() {
        let f = |nx, xx, gt, lt, incr| AddFlags {
            nx,
            xx,
            gt,
            lt,
            incr,
        };
        assert_eq!(f(false, false, false, false, false).validate(3), Ok(()));
        assert_eq!(
            f(true, true, false, false, false).validate(1),
            Err(ZsetError::NxAndXx)
        );
        assert_eq!(
            f(true, true, true, false, true).validate(2),
            Err(ZsetError::NxAndXx)
        );
        assert_eq!(
            f(true, false, true, false, false).validate(1),
            Err(ZsetError::GtLtNx)
        );
        assert_eq!(
            f(true, false, false, true, false).validate(1),
            Err(ZsetError::GtLtNx)
        );
        assert_eq!(
            f(false, false, true, true, false).validate(1),
            Err(ZsetError::GtLtNx)
        );
        assert_eq!(f(false, true, true, false, false).validate(1), Ok(()));
        assert_eq!(f(false, true, false, true, true).validate(1), Ok(()));
        assert_eq!(
            f(false, false, false, false, true).validate(2),
            Err(ZsetError::IncrNeedsOnePair)
        );
        assert_eq!(
            ZsetError::NxAndXx.to_string(),
            "XX and NX options at the same time are not compatible"
        );
        assert_eq!(
            ZsetError::GtLtNx.to_string(),
            "GT, LT, and/or NX options at the same time are not compatible"
        );
        assert_eq!(
            ZsetError::IncrNeedsOnePair.to_string(),
            "INCR option supports a single increment-element pair"
        );
    }

    // ---------------------------------------------------------------- remove / score / rank

    #[test]
    fn remove_and_score() {
        both(ABC, |mut z| {
            assert!(z.remove(b"c"));
            assert!(!z.remove(b"c"));
            assert!(!z.remove(b"nope"));
            assert_eq!(z.score(b"c"), None);
            assert!(!z.contains(b"c"));
            assert!(z.contains(b"d"));
            assert_eq!(z.score(b"d"), Some(4.0));
            assert_eq!(members(&z), ["a", "b", "d", "e"]);
            for m in ["a", "b", "d", "e"] {
                assert!(z.remove(m.as_bytes()));
            }
            assert!(z.is_empty());
            check_invariants(&z);
        });
    }

    #[test]
    fn rank_and_revrank() {
        both(ABC, |z| {
            for (i, m) in ["a", "b", "c", "d", "e"].iter().enumerate() {
                assert_eq!(z.rank(m.as_bytes(), false), Some(i));
                assert_eq!(z.rank(m.as_bytes(), true), Some(4 - i));
            }
            assert_eq!(z.rank(b"x", false), None);
            assert_eq!(z.rank(b"x", true), None);
        });
        // Rank counted from either end in the large encoding, with infinities.
        both(
            &[
                (f64::NEG_INFINITY, "a"),
                (0.0, "b"),
                (1.0, "c"),
                (f64::INFINITY, "d"),
                (f64::INFINITY, "e"),
            ],
            |z| {
                assert_eq!(z.rank(b"a", false), Some(0));
                assert_eq!(z.rank(b"d", false), Some(3));
                assert_eq!(z.rank(b"e", false), Some(4));
                assert_eq!(z.rank(b"e", true), Some(0));
            },
        );
    }

    // ---------------------------------------------------------------- by rank

    #[test]
    fn range_by_rank_index_rules() {
        both(ABC, |z| {
            let r = |a, b, rev| names(&z.range_by_rank(a, b, rev));
            assert_eq!(r(0, -1, false), ["a", "b", "c", "d", "e"]);
            assert_eq!(r(0, -1, true), ["e", "d", "c", "b", "a"]);
            assert_eq!(r(1, 2, false), ["b", "c"]);
            assert_eq!(r(1, 2, true), ["d", "c"]);
            assert_eq!(r(-2, -1, false), ["d", "e"]);
            assert_eq!(r(-2, -1, true), ["b", "a"]);
            assert_eq!(r(-100, 1, false), ["a", "b"]);
            assert_eq!(r(3, 100, false), ["d", "e"]);
            assert_eq!(r(3, 100, true), ["b", "a"]);
            assert!(r(5, 10, false).is_empty());
            assert!(r(2, 1, false).is_empty());
            assert!(r(0, -6, false).is_empty());
            assert!(r(-1, -2, false).is_empty());
            assert_eq!(r(-1, -1, false), ["e"]);
            assert_eq!(r(i64::MIN, i64::MAX, false).len(), 5);
            assert!(r(i64::MAX, i64::MAX, false).is_empty());
            assert!(r(i64::MIN, i64::MIN, true).is_empty());
            assert_eq!(r(0, 0, true), ["e"]);
            let with = z.range_by_rank(0, 0, false);
            assert_eq!(with[0].1, 1.0);
        });
        assert!(SortedSet::new().range_by_rank(0, -1, false).is_empty());
    }

    #[test]
    fn range_by_rank_large_walks_from_either_end() {
        let entries: Vec<(f64, String)> = (0..300)
            .map(|i| (f64::from(i), format!("m{i:03}")))
            .collect();
        let refs: Vec<(f64, &str)> = entries.iter().map(|(s, m)| (*s, m.as_str())).collect();
        both(&refs, |z| {
            assert_eq!(z.encoding(), "skiplist");
            let r = z.range_by_rank(280, 285, false);
            assert_eq!(names(&r), ["m280", "m281", "m282", "m283", "m284", "m285"]);
            let r = z.range_by_rank(280, 285, true);
            assert_eq!(names(&r), ["m019", "m018", "m017", "m016", "m015", "m014"]);
            let r = z.range_by_rank(5, 7, true);
            assert_eq!(names(&r), ["m294", "m293", "m292"]);
            assert_eq!(z.range_by_rank(0, -1, false).len(), 300);
            assert_eq!(z.member_at(299).unwrap().0, b"m299");
            assert_eq!(z.member_at(10).unwrap().0, b"m010");
            assert_eq!(z.member_at(200).unwrap(), (&b"m200"[..], 200.0));
            assert_eq!(z.member_at(300), None);
            assert_eq!(z.rank(b"m250", false), Some(250));
            assert_eq!(z.rank(b"m010", true), Some(289));
        });
    }

    #[test]
    fn member_at_and_members_at() {
        both(ABC, |z| {
            assert_eq!(z.member_at(0), Some((&b"a"[..], 1.0)));
            assert_eq!(z.member_at(4), Some((&b"e"[..], 5.0)));
            assert_eq!(z.member_at(5), None);
            assert_eq!(z.member_at(usize::MAX), None);
            let picked = z.members_at(&[4, 0, 4, 9, 2, usize::MAX, 1]);
            let got: Vec<&[u8]> = picked.iter().map(|p| p.0).collect();
            assert_eq!(got, [&b"e"[..], b"a", b"e", b"c", b"b"]);
            assert!(z.members_at(&[]).is_empty());
        });
    }

    #[test]
    fn remove_range_by_rank_rules() {
        for (a, b, left) in [
            (0, 0, vec!["b", "c", "d", "e"]),
            (0, -1, vec![]),
            (1, 2, vec!["a", "d", "e"]),
            (-2, -1, vec!["a", "b", "c"]),
            (-100, 0, vec!["b", "c", "d", "e"]),
            (3, 100, vec!["a", "b", "c"]),
            (5, 10, vec!["a", "b", "c", "d", "e"]),
            (3, 2, vec!["a", "b", "c", "d", "e"]),
            (i64::MIN, i64::MAX, vec![]),
        ] {
            both(ABC, |mut z| {
                let removed = z.remove_range_by_rank(a, b);
                assert_eq!(members(&z), left, "range {a} {b}");
                assert_eq!(removed, 5 - left.len());
                check_invariants(&z);
            });
        }
    }

    // ---------------------------------------------------------------- by score

    #[test]
    fn range_by_score_bounds() {
        both(ABC, |z| {
            let r = |min: &str, max: &str| names(&z.range_by_score(&sr(min, max), false, 0, -1));
            assert_eq!(r("-inf", "+inf"), ["a", "b", "c", "d", "e"]);
            assert_eq!(r("2", "4"), ["b", "c", "d"]);
            assert_eq!(r("(2", "4"), ["c", "d"]);
            assert_eq!(r("2", "(4"), ["b", "c"]);
            assert_eq!(r("(2", "(4"), ["c"]);
            assert_eq!(r("(2", "(3"), Vec::<String>::new());
            assert_eq!(r("3", "3"), ["c"]);
            assert!(r("(3", "3").is_empty());
            assert!(r("3", "(3").is_empty());
            assert!(r("4", "2").is_empty());
            assert_eq!(r("2.5", "3.5"), ["c"]);
            assert_eq!(r("-inf", "(1"), Vec::<String>::new());
            assert_eq!(r("(5", "+inf"), Vec::<String>::new());
            assert_eq!(r("5", "inf"), ["e"]);
            assert_eq!(r("(-inf", "(+inf"), ["a", "b", "c", "d", "e"]);
            let rev = names(&z.range_by_score(&sr("2", "4"), true, 0, -1));
            assert_eq!(rev, ["d", "c", "b"]);
            assert_eq!(z.count_in_score_range(&sr("2", "4")), 3);
            assert_eq!(z.count_in_score_range(&sr("(2", "(4")), 1);
            assert_eq!(z.count_in_score_range(&sr("4", "2")), 0);
            assert_eq!(z.count_in_score_range(&sr("-inf", "+inf")), 5);
        });
    }

    #[test]
    fn range_by_score_infinite_scores() {
        both(
            &[
                (f64::NEG_INFINITY, "lo"),
                (0.0, "mid"),
                (f64::MAX, "max"),
                (f64::INFINITY, "hi"),
                (f64::INFINITY, "hi2"),
            ],
            |z| {
                let r =
                    |min: &str, max: &str| names(&z.range_by_score(&sr(min, max), false, 0, -1));
                assert_eq!(r("-inf", "-inf"), ["lo"]);
                assert!(r("(-inf", "-inf").is_empty());
                assert_eq!(r("(-inf", "0"), ["mid"]);
                assert_eq!(r("+inf", "+inf"), ["hi", "hi2"]);
                assert!(r("(inf", "inf").is_empty());
                assert!(r("inf", "(inf").is_empty());
                assert_eq!(r("(1.7976931348623157e308", "inf"), ["hi", "hi2"]);
                assert_eq!(r("1.7976931348623157e308", "(inf"), ["max"]);
                assert_eq!(r("-inf", "(-inf").len(), 0);
                assert_eq!(r("-1e999", "1e999").len(), 5);
                assert_eq!(z.count_in_score_range(&sr("(0", "inf")), 3);
                assert_eq!(z.count_in_score_range(&sr("(-0", "inf")), 3);
                assert_eq!(z.count_in_score_range(&sr("-0", "inf")), 4);
            },
        );
    }

    #[test]
    fn count_in_score_range_on_a_large_set() {
        let mut z = SortedSet::new();
        for i in 0..1000 {
            z.insert(format!("m{i}").as_bytes(), f64::from(i % 500), &SMALL)
                .unwrap();
        }
        assert_eq!(z.encoding(), "skiplist");
        for (min, max) in [
            ("-inf", "+inf"),
            ("0", "0"),
            ("(0", "499"),
            ("250", "(251"),
            ("10", "480"),
            ("490", "+inf"),
            ("-inf", "(3"),
            ("(499", "+inf"),
            ("600", "700"),
            ("3", "2"),
        ] {
            let r = sr(min, max);
            let want = z.iter().filter(|(_, s)| r.contains(*s)).count();
            assert_eq!(z.count_in_score_range(&r), want, "{min} {max}");
            assert_eq!(z.range_by_score(&r, false, 0, -1).len(), want);
        }
    }

    #[test]
    fn range_by_score_limit() {
        both(ABC, |z| {
            let all = sr("-inf", "+inf");
            let r = |rev, off, cnt| names(&z.range_by_score(&all, rev, off, cnt));
            assert_eq!(r(false, 1, 2), ["b", "c"]);
            assert_eq!(r(true, 1, 2), ["d", "c"]);
            assert_eq!(r(false, 0, 0), Vec::<String>::new());
            assert_eq!(r(false, 3, -1), ["d", "e"]);
            assert_eq!(r(false, 3, -5), ["d", "e"]);
            assert_eq!(r(false, 4, 10), ["e"]);
            assert!(r(false, 5, 10).is_empty());
            assert!(r(false, -1, 10).is_empty());
            assert!(r(true, -1, -1).is_empty());
            assert!(r(false, i64::MAX, 1).is_empty());
            assert_eq!(r(false, 0, i64::MAX).len(), 5);
            assert_eq!(r(false, 0, i64::MIN).len(), 5);
            let sub = sr("(1", "4");
            assert_eq!(names(&z.range_by_score(&sub, false, 1, 1)), ["c"]);
            assert_eq!(names(&z.range_by_score(&sub, true, 2, 5)), ["b"]);
            assert!(z.range_by_score(&sub, false, 3, 5).is_empty());
        });
    }

    #[test]
    fn remove_range_by_score_cases() {
        for (min, max, left) in [
            ("-inf", "+inf", vec![]),
            ("0", "2", vec!["c", "d", "e"]),
            ("(1", "(5", vec!["a", "e"]),
            ("5", "5", vec!["a", "b", "c", "d"]),
            ("6", "7", vec!["a", "b", "c", "d", "e"]),
            ("3", "1", vec!["a", "b", "c", "d", "e"]),
            ("(3", "3", vec!["a", "b", "c", "d", "e"]),
        ] {
            both(ABC, |mut z| {
                let removed = z.remove_range_by_score(&sr(min, max));
                assert_eq!(members(&z), left, "range {min} {max}");
                assert_eq!(removed, 5 - left.len());
                check_invariants(&z);
            });
        }
    }

    #[test]
    fn score_range_with_nan_fields_matches_nothing() {
        let bad = ScoreRange {
            min: f64::NAN,
            min_exclusive: false,
            max: 1.0,
            max_exclusive: false,
        };
        assert!(bad.is_empty());
        let bad2 = ScoreRange {
            max: f64::NAN,
            min: 0.0,
            ..bad
        };
        assert!(bad2.is_empty());
        both(ABC, |mut z| {
            assert!(z.range_by_score(&bad, false, 0, -1).is_empty());
            assert_eq!(z.count_in_score_range(&bad2), 0);
            assert_eq!(z.remove_range_by_score(&bad), 0);
            assert_eq!(z.len(), 5);
        });
    }

    // ---------------------------------------------------------------- by lex

    const LEX: &[(f64, &str)] = &[
        (0.0, "a"),
        (0.0, "b"),
        (0.0, "c"),
        (0.0, "d"),
        (0.0, "e"),
        (0.0, "f"),
        (0.0, "g"),
    ];

    #[test]
    fn range_by_lex_equal_scores() {
        both(LEX, |z| {
            let r = |min: &str, max: &str| names(&z.range_by_lex(&lr(min, max), false, 0, -1));
            let rr = |min: &str, max: &str| names(&z.range_by_lex(&lr(min, max), true, 0, -1));
            assert_eq!(r("-", "+"), ["a", "b", "c", "d", "e", "f", "g"]);
            assert_eq!(r("-", "[c"), ["a", "b", "c"]);
            assert_eq!(r("-", "(c"), ["a", "b"]);
            assert_eq!(r("[aaa", "(g"), ["b", "c", "d", "e", "f"]);
            assert_eq!(r("(b", "[d"), ["c", "d"]);
            assert_eq!(r("[d", "[d"), ["d"]);
            assert!(r("(d", "[d").is_empty());
            assert!(r("[e", "[d").is_empty());
            assert!(r("+", "-").is_empty());
            assert!(r("-", "-").is_empty());
            assert!(r("+", "+").is_empty());
            assert!(r("[z", "+").is_empty());
            assert!(r("-", "[0").is_empty());
            assert_eq!(r("[", "(b"), ["a"]);
            assert_eq!(rr("-", "+"), ["g", "f", "e", "d", "c", "b", "a"]);
            assert_eq!(rr("(b", "[d"), ["d", "c"]);
            assert_eq!(z.count_in_lex_range(&lr("-", "+")), 7);
            assert_eq!(z.count_in_lex_range(&lr("[b", "(f")), 4);
            assert_eq!(z.count_in_lex_range(&lr("[f", "(b")), 0);
            let lim = |rev, off, cnt| names(&z.range_by_lex(&lr("[b", "[f"), rev, off, cnt));
            assert_eq!(lim(false, 1, 2), ["c", "d"]);
            assert_eq!(lim(true, 1, 2), ["e", "d"]);
            assert!(lim(false, -1, 2).is_empty());
            assert_eq!(lim(false, 3, -1), ["e", "f"]);
            assert!(lim(false, 5, -1).is_empty());
            assert!(lim(false, 0, 0).is_empty());
        });
    }

    #[test]
    fn remove_range_by_lex_cases() {
        for (min, max, left) in [
            ("-", "+", vec![]),
            ("[b", "[d", vec!["a", "e", "f", "g"]),
            ("(b", "(d", vec!["a", "b", "d", "e", "f", "g"]),
            ("[x", "+", vec!["a", "b", "c", "d", "e", "f", "g"]),
            ("-", "(a", vec!["a", "b", "c", "d", "e", "f", "g"]),
            ("-", "[a", vec!["b", "c", "d", "e", "f", "g"]),
        ] {
            both(LEX, |mut z| {
                let removed = z.remove_range_by_lex(&lr(min, max));
                assert_eq!(members(&z), left, "range {min} {max}");
                assert_eq!(removed, 7 - left.len());
                check_invariants(&z);
            });
        }
    }

    #[test]
    fn lex_on_mixed_scores_is_the_listpack_run() {
        // Score order: c(1) a(2) d(3) b(4)
        both(&[(1.0, "c"), (2.0, "a"), (3.0, "d"), (4.0, "b")], |z| {
            // Forward: first entry >= "[b" is c; the run goes on while <= "[c": c, a.
            assert_eq!(
                names(&z.range_by_lex(&lr("[b", "[c"), false, 0, -1)),
                ["c", "a"]
            );
            // Reverse: last entry <= "[c" is b; the run goes back while >= "[b": b, d.
            assert_eq!(
                names(&z.range_by_lex(&lr("[b", "[c"), true, 0, -1)),
                ["b", "d"]
            );
            // Early out: the last entry (b) is below "[c".
            assert!(z.range_by_lex(&lr("[c", "+"), false, 0, -1).is_empty());
            // Early out: the first entry (c) is above "(c".
            assert!(z.range_by_lex(&lr("-", "(c"), false, 0, -1).is_empty());
            assert_eq!(z.count_in_lex_range(&lr("[a", "[z")), 4);
            assert_eq!(z.count_in_lex_range(&lr("[b", "[c")), 2);
        });
        both(
            &[(1.0, "c"), (2.0, "a"), (3.0, "d"), (4.0, "b")],
            |mut z| {
                assert_eq!(z.remove_range_by_lex(&lr("[b", "[c")), 2);
                assert_eq!(members(&z), ["d", "b"]);
            },
        );
    }

    #[test]
    fn lex_bounds_with_binary_and_empty_members() {
        let mut small = SortedSet::new();
        let mut large = SortedSet::new();
        for m in [&b""[..], b"\x00", b"a", b"\xff", b"\xff\xff"] {
            small.insert(m, 0.0, &SMALL).unwrap();
            large.insert(m, 0.0, &LARGE).unwrap();
        }
        for z in [&small, &large] {
            assert_eq!(z.count_in_lex_range(&lr("[", "+")), 5);
            assert_eq!(z.count_in_lex_range(&lr("(", "+")), 4);
            assert_eq!(z.count_in_lex_range(&lr("-", "[")), 1);
            assert_eq!(z.count_in_lex_range(&lr("-", "(")), 0);
            let r = LexRange::parse(b"(\xff", b"+").unwrap();
            assert_eq!(z.count_in_lex_range(&r), 1);
        }
    }

    // ---------------------------------------------------------------- pop / iter / scan

    #[test]
    fn pop_min_and_max() {
        both(ABC, |mut z| {
            assert_eq!(names(&z.pop(2, false)), ["a", "b"]);
            assert_eq!(names(&z.pop(1, true)), ["e"]);
            assert!(z.pop(0, true).is_empty());
            let rest = z.pop(10, true);
            assert_eq!(names(&rest), ["d", "c"]);
            assert_eq!(rest[0].1, 4.0);
            assert!(z.is_empty());
            assert!(z.pop(usize::MAX, false).is_empty());
            check_invariants(&z);
        });
    }

    #[test]
    fn into_iterator_and_reverse_iteration() {
        both(ABC, |z| {
            let fwd: Vec<f64> = (&z).into_iter().map(|(_, s)| s).collect();
            assert_eq!(fwd, [1.0, 2.0, 3.0, 4.0, 5.0]);
            let mut it = z.iter();
            assert_eq!(it.len(), 5);
            assert_eq!(it.next().unwrap().0, b"a");
            assert_eq!(it.next_back().unwrap().0, b"e");
            assert_eq!(it.len(), 3);
            assert_eq!(it.size_hint(), (3, Some(3)));
        });
    }

    fn full_scan(z: &SortedSet, count: usize) -> Vec<(Bytes, f64)> {
        let mut out = Vec::new();
        let mut cursor = 0;
        let mut calls = 0;
        loop {
            let (next, batch) = z.scan(cursor, count);
            out.extend(batch);
            calls += 1;
            assert!(calls <= z.len() + 2, "scan does not terminate");
            if next == 0 {
                return out;
            }
            cursor = next;
        }
    }

    #[test]
    fn scan_small_returns_everything_at_once() {
        let z = build(ABC, &SMALL);
        let (cursor, all) = z.scan(0, 1);
        assert_eq!(cursor, 0);
        assert_eq!(names(&all), ["a", "b", "c", "d", "e"]);
        let (cursor, all) = z.scan(12345, 1);
        assert_eq!((cursor, all.len()), (0, 5));
    }

    #[test]
    fn scan_large_walks_in_batches() {
        let mut entries = Vec::new();
        for i in 0..50 {
            entries.push((f64::from(i / 3), format!("m{i:02}")));
        }
        entries.push((f64::NEG_INFINITY, "ninf".to_string()));
        entries.push((f64::INFINITY, "pinf".to_string()));
        entries.push((-0.0, "negzero".to_string()));
        let refs: Vec<(f64, &str)> = entries.iter().map(|(s, m)| (*s, m.as_str())).collect();
        let z = build(&refs, &LARGE);
        let all: Vec<(Bytes, f64)> = z
            .iter()
            .map(|(m, s)| (Bytes::copy_from_slice(m), s))
            .collect();
        for count in [0, 1, 2, 3, 7, 100] {
            let got = full_scan(&z, count);
            assert_eq!(got, all, "count {count}");
        }
        // Batches never split equal scores and respect the count otherwise.
        let (c1, b1) = z.scan(0, 2);
        assert_ne!(c1, 0);
        assert_eq!(names(&b1), ["ninf", "m00", "m01", "m02", "negzero"]);
        // Garbage cursors: below every score restarts, above every score ends.
        assert_eq!(z.scan(1, 1000).1.len(), z.len());
        assert_eq!(z.scan(u64::MAX, 10), (0, Vec::new()));
        assert_eq!(z.scan(score_to_cursor(f64::INFINITY), 10).1.len(), 1);
    }

    #[test]
    fn scan_large_survives_front_trimming() {
        let entries: Vec<(f64, String)> = (0..40)
            .map(|i| (f64::from(i), format!("m{i:02}")))
            .collect();
        let refs: Vec<(f64, &str)> = entries.iter().map(|(s, m)| (*s, m.as_str())).collect();
        let mut z = build(&refs, &LARGE);
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut step = 0.0;
        loop {
            let (next, batch) = z.scan(cursor, 3);
            seen.extend(batch.into_iter().map(|(m, _)| m));
            // Between calls: trim old entries and append new ones (rate-limiter style).
            step += 1.0;
            z.remove_range_by_score(&ScoreRange::inclusive(f64::NEG_INFINITY, step));
            z.insert(format!("new{step}").as_bytes(), 100.0 + step, &LARGE)
                .unwrap();
            if next == 0 {
                break;
            }
            cursor = next;
        }
        // Every entry present for the whole iteration was returned.
        for (m, _) in z.iter() {
            if m.starts_with(b"m") {
                assert!(seen.contains(m));
            }
        }
        assert!(seen.contains(&b"m39"[..]));
    }

    #[test]
    fn cursor_encoding_is_monotonic_and_invertible() {
        let vals = [
            f64::NEG_INFINITY,
            f64::MIN,
            -1.0,
            -f64::MIN_POSITIVE,
            -5e-324,
            0.0,
            5e-324,
            1.0,
            f64::MAX,
            f64::INFINITY,
        ];
        for w in vals.windows(2) {
            assert!(score_to_cursor(w[0]) < score_to_cursor(w[1]));
        }
        for v in vals {
            assert_ne!(score_to_cursor(v), 0);
            assert_eq!(cursor_to_score(score_to_cursor(v)), Some(v));
        }
        assert_eq!(score_to_cursor(-0.0), score_to_cursor(0.0));
        assert_eq!(cursor_to_score(u64::MAX), None);
        assert_eq!(cursor_to_score(1), None);
    }

    #[test]
    fn approx_memory_grows_with_content() {
        let mut z = SortedSet::new();
        let empty = z.approx_memory();
        assert!(empty > 0);
        for i in 0..100 {
            z.insert(format!("member-{i}").as_bytes(), f64::from(i), &SMALL)
                .unwrap();
        }
        let small = z.approx_memory();
        assert!(small > empty + 100 * 8);
        for i in 100..1000 {
            z.insert(format!("member-{i}").as_bytes(), f64::from(i), &SMALL)
                .unwrap();
        }
        assert_eq!(z.encoding(), "skiplist");
        assert!(z.approx_memory() > small * 5);
    }

    // ---------------------------------------------------------------- encodings

    #[test]
    fn converts_on_the_129th_entry() {
        let mut z = SortedSet::new();
        for i in 0..128 {
            z.insert(format!("m{i}").as_bytes(), f64::from(i), &SMALL)
                .unwrap();
        }
        assert_eq!(z.encoding(), "listpack");
        // Updating existing members never converts.
        z.insert(b"m5", 1000.0, &SMALL).unwrap();
        assert_eq!(z.encoding(), "listpack");
        z.insert(b"m128", 128.0, &SMALL).unwrap();
        assert_eq!(z.encoding(), "skiplist");
        assert_eq!(z.len(), 129);
        check_invariants(&z);
        assert_eq!(z.member_at(128).unwrap(), (&b"m5"[..], 1000.0));
        assert_eq!(z.member_at(0).unwrap(), (&b"m0"[..], 0.0));
        // Never converts back.
        z.remove_range_by_rank(0, -2);
        assert_eq!(z.len(), 1);
        assert_eq!(z.encoding(), "skiplist");
        z.pop(1, false);
        assert_eq!(z.encoding(), "skiplist");
    }

    #[test]
    fn converts_on_a_65_byte_member() {
        let mut z = build(ABC, &SMALL);
        z.insert(&[b'x'; 64], 0.0, &SMALL).unwrap();
        assert_eq!(z.encoding(), "listpack");
        z.insert(&[b'y'; 65], 0.5, &SMALL).unwrap();
        assert_eq!(z.encoding(), "skiplist");
        assert_eq!(z.len(), 7);
        assert_eq!(z.rank(&[b'y'; 65], false), Some(1));
        assert_eq!(z.score(&[b'x'; 64]), Some(0.0));
        check_invariants(&z);
        // Through add() as well.
        let mut z = SortedSet::new();
        z.add(&[b'z'; 65], 1.0, AddFlags::default(), &SMALL)
            .unwrap();
        assert_eq!(z.encoding(), "skiplist");
    }

    #[test]
    fn limits_can_change_at_run_time() {
        let mut z = build(ABC, &SMALL);
        let tight = ZsetLimits {
            max_listpack_entries: 5,
            max_listpack_value: 64,
        };
        // Updates and removals do not look at the limits.
        z.insert(b"a", 9.0, &tight).unwrap();
        assert_eq!(z.encoding(), "listpack");
        z.insert(b"f", 6.0, &tight).unwrap();
        assert_eq!(z.encoding(), "skiplist");
        let mut z = SortedSet::new();
        let none = ZsetLimits {
            max_listpack_entries: 0,
            max_listpack_value: 64,
        };
        z.insert(b"a", 1.0, &none).unwrap();
        assert_eq!(z.encoding(), "skiplist");
        let mut z = SortedSet::new();
        let short = ZsetLimits {
            max_listpack_entries: 128,
            max_listpack_value: 0,
        };
        z.insert(b"", 1.0, &short).unwrap();
        assert_eq!(z.encoding(), "listpack");
        z.insert(b"a", 1.0, &short).unwrap();
        assert_eq!(z.encoding(), "skiplist");
    }

    #[test]
    fn xx_on_missing_member_does_not_convert() {
        let mut z = SortedSet::new();
        let xx = AddFlags {
            xx: true,
            ..AddFlags::default()
        };
        z.add(&[b'q'; 100], 1.0, xx, &SMALL).unwrap();
        assert_eq!(z.encoding(), "listpack");
        assert!(z.is_empty());
    }

    #[test]
    fn sliding_window_rate_limiter() {
        let mut z = SortedSet::new();
        let mut now = 1_700_000_000_000.0_f64;
        for i in 0..1000 {
            now += 7.0;
            let cutoff = now - 1000.0;
            z.remove_range_by_score(&ScoreRange::inclusive(0.0, cutoff));
            z.add(
                format!("req-{i}").as_bytes(),
                now,
                AddFlags::default(),
                &SMALL,
            )
            .unwrap();
            let window = z.len();
            assert!(window <= 143, "{window}");
            assert_eq!(
                z.count_in_score_range(&ScoreRange::inclusive(cutoff, now)),
                window
            );
            check_invariants(&z);
        }
        // 1000 ms window / 7 ms per request: 142 or 143 entries, so it converted once.
        assert_eq!(z.encoding(), "skiplist");
        let mut s = Vec::new();
        format_score(z.score(b"req-999").unwrap(), &mut s);
        assert_eq!(s, b"1700000007000");
    }

    // ---------------------------------------------------------------- parsing

    #[test]
    fn score_range_parse_forms() {
        let r = sr("1", "(2.5");
        assert_eq!(
            r,
            ScoreRange {
                min: 1.0,
                min_exclusive: false,
                max: 2.5,
                max_exclusive: true
            }
        );
        let r = sr("(-inf", "+inf");
        assert!(r.min_exclusive && !r.max_exclusive);
        assert_eq!(r.min, f64::NEG_INFINITY);
        assert_eq!(sr("-INF", "Infinity").max, f64::INFINITY);
        assert_eq!(sr("1e2", "(0x10").max, 16.0);
        // Quirks of zslParseRange kept on purpose.
        assert_eq!(sr(" 5", "6").min, 5.0);
        assert_eq!(sr("", "(").min, 0.0);
        assert!(sr("", "(").max_exclusive);
        assert_eq!(sr("1e999", "1").min, f64::INFINITY);
        assert_eq!(sr("1e-999", "1").min, 0.0);
        assert_eq!(ScoreRange::parse(b"5\x00junk", b"6").unwrap().min, 5.0);
        for bad in [
            "nan", "(nan", "5 ", "((5", "( 5x", "a", "1e", "[1", " ", "-", "0x", "inf(", "5)",
        ] {
            assert!(ScoreRange::parse(bad.as_bytes(), b"1").is_none(), "{bad:?}");
            assert!(ScoreRange::parse(b"1", bad.as_bytes()).is_none(), "{bad:?}");
        }
        assert!(ScoreRange::inclusive(1.0, 2.0).contains(1.0));
        assert!(!sr("(1", "2").contains(1.0));
        assert!(!sr("1", "(2").contains(2.0));
        assert!(sr("2", "1").is_empty());
        assert!(sr("(1", "1").is_empty());
        assert!(sr("1", "(1").is_empty());
        assert!(!sr("1", "1").is_empty());
        assert!(!sr("-0", "0").is_empty());
        assert!(sr("(inf", "inf").is_empty());
        assert!(!sr("-inf", "-inf").is_empty());
    }

    #[test]
    fn lex_range_parse_forms() {
        let r = lr("[a", "(b");
        assert_eq!(r.min, LexBound::Inclusive(Bytes::from_static(b"a")));
        assert_eq!(r.max, LexBound::Exclusive(Bytes::from_static(b"b")));
        assert_eq!(lr("-", "+").min, LexBound::NegInf);
        assert_eq!(lr("-", "+").max, LexBound::PosInf);
        assert_eq!(lr("[", "(").min, LexBound::Inclusive(Bytes::new()));
        assert_eq!(
            lr("[+", "(-").max,
            LexBound::Exclusive(Bytes::from_static(b"-"))
        );
        assert_eq!(
            LexBound::parse(b"[\x00\xff"),
            Some(LexBound::Inclusive(Bytes::from_static(b"\x00\xff")))
        );
        // C-string quirk: "+\0..." is "+".
        assert_eq!(LexBound::parse(b"+\x00x"), Some(LexBound::PosInf));
        assert_eq!(LexBound::parse(b"-\x00"), Some(LexBound::NegInf));
        for bad in ["", "a", "++", "-a", "+a", " [a", "]a", "{a"] {
            assert!(LexRange::parse(bad.as_bytes(), b"+").is_none(), "{bad:?}");
            assert!(LexRange::parse(b"-", bad.as_bytes()).is_none(), "{bad:?}");
        }
        assert!(lr("-", "-").is_empty());
        assert!(lr("+", "+").is_empty());
        assert!(lr("+", "-").is_empty());
        assert!(lr("+", "[a").is_empty());
        assert!(lr("[a", "-").is_empty());
        assert!(!lr("-", "+").is_empty());
        assert!(!lr("[a", "[a").is_empty());
        assert!(lr("(a", "[a").is_empty());
        assert!(lr("[a", "(a").is_empty());
        assert!(lr("[b", "[a").is_empty());
        assert!(!lr("[a", "(b").is_empty());
        assert!(lr("[a", "[b").contains(b"ab"));
        assert!(!lr("(a", "[b").contains(b"a"));
        assert!(!lr("[a", "(b").contains(b"b"));
    }

    #[test]
    fn strtod_agrees_with_c_library() {
        for &(input, strict, item) in PARSE_TABLE {
            let got = parse_score(input).map(f64::to_bits);
            assert_eq!(
                got,
                strict,
                "parse_score({:?})",
                String::from_utf8_lossy(input)
            );
            let got = parse_range_item(input).map(|(v, ex)| (v.to_bits(), ex));
            assert_eq!(got, item, "range item {:?}", String::from_utf8_lossy(input));
        }
        assert!(PARSE_TABLE.len() >= 300);
    }

    // ---------------------------------------------------------------- formatting

    // ---------------------------------------------------------------- model-based

    /// The naive model: a sorted vector.
    #[derive(Default, Debug)]
    struct Model {
        v: Vec<(f64, Vec<u8>)>,
        large: bool,
    }

    fn model_cmp(a: &(f64, Vec<u8>), b: &(f64, Vec<u8>)) -> Ordering {
        a.0.partial_cmp(&b.0).unwrap().then_with(|| a.1.cmp(&b.1))
    }

    impl Model {
        fn find(&self, m: &[u8]) -> Option<usize> {
            self.v.iter().position(|e| e.1 == m)
        }

        fn put(&mut self, m: &[u8], s: f64, limits: &ZsetLimits) {
            let compact = |large: bool| if !large && s == 0.0 { 0.0 } else { s };
            match self.find(m) {
                Some(i) => self.v[i].0 = compact(self.large),
                None => {
                    if !self.large
                        && (self.v.len() + 1 > limits.max_listpack_entries
                            || m.len() > limits.max_listpack_value)
                    {
                        self.large = true;
                    }
                    self.v.push((compact(self.large), m.to_vec()));
                }
            }
            self.v.sort_by(model_cmp);
        }

        fn add(
            &mut self,
            m: &[u8],
            s: f64,
            f: AddFlags,
            limits: &ZsetLimits,
        ) -> Result<AddOutcome, ZsetError> {
            if s.is_nan() {
                return Err(ZsetError::NotANumber);
            }
            match self.find(m) {
                Some(i) => {
                    let cur = self.v[i].0;
                    if f.nx {
                        return Ok(AddOutcome::Skipped);
                    }
                    let new = if f.incr { s + cur } else { s };
                    if new.is_nan() {
                        return Err(ZsetError::NotANumber);
                    }
                    if (f.lt && new >= cur) || (f.gt && new <= cur) {
                        return Ok(AddOutcome::Skipped);
                    }
                    if new == cur {
                        return Ok(AddOutcome::Unchanged(new));
                    }
                    self.put(m, new, limits);
                    Ok(AddOutcome::Updated(new))
                }
                None if f.xx => Ok(AddOutcome::Skipped),
                None => {
                    self.put(m, s, limits);
                    Ok(AddOutcome::Added(s))
                }
            }
        }

        fn ranks(&self, start: i64, stop: i64) -> Vec<usize> {
            let len = self.v.len() as i128;
            let mut a = i128::from(start);
            let mut b = i128::from(stop);
            if a < 0 {
                a += len;
            }
            if b < 0 {
                b += len;
            }
            a = a.max(0);
            if a > b || a >= len {
                return vec![];
            }
            b = b.min(len - 1);
            (a as usize..=b as usize).collect()
        }

        fn lex_run(&self, r: &LexRange, reverse: bool) -> Vec<usize> {
            let v = &self.v;
            if v.is_empty() || r.is_empty() {
                return vec![];
            }
            if !r.gte_min(&v[v.len() - 1].1) || !r.lte_max(&v[0].1) {
                return vec![];
            }
            let mut out = vec![];
            if reverse {
                let Some(mut i) = (0..v.len()).rev().find(|&i| r.lte_max(&v[i].1)) else {
                    return out;
                };
                loop {
                    if !r.gte_min(&v[i].1) {
                        break;
                    }
                    out.push(i);
                    if i == 0 {
                        break;
                    }
                    i -= 1;
                }
            } else {
                let Some(mut i) = (0..v.len()).find(|&i| r.gte_min(&v[i].1)) else {
                    return out;
                };
                while i < v.len() && r.lte_max(&v[i].1) {
                    out.push(i);
                    i += 1;
                }
            }
            out
        }

        fn pairs(&self, idx: impl IntoIterator<Item = usize>) -> Vec<(Vec<u8>, u64)> {
            idx.into_iter()
                .map(|i| (self.v[i].1.clone(), self.v[i].0.to_bits()))
                .collect()
        }

        fn limit(idx: Vec<usize>, offset: i64, count: i64) -> Vec<usize> {
            if offset < 0 {
                return vec![];
            }
            let it = idx.into_iter().skip(offset as usize);
            if count < 0 {
                it.collect()
            } else {
                it.take(count as usize).collect()
            }
        }

        fn score_idx(&self, r: &ScoreRange, reverse: bool) -> Vec<usize> {
            let mut idx: Vec<usize> = (0..self.v.len())
                .filter(|&i| r.contains(self.v[i].0))
                .collect();
            if reverse {
                idx.reverse();
            }
            idx
        }
    }

    fn real_pairs(v: Vec<(Bytes, f64)>) -> Vec<(Vec<u8>, u64)> {
        v.into_iter()
            .map(|(m, s)| (m.to_vec(), s.to_bits()))
            .collect()
    }

    #[derive(Clone, Debug)]
    enum Op {
        Add(Vec<u8>, f64, AddFlags),
        Insert(Vec<u8>, f64),
        Remove(Vec<u8>),
        RemScore(ScoreRange),
        RemRank(i64, i64),
        RemLex(LexRange),
        Pop(usize, bool),
        QueryRank(i64, i64, bool),
        QueryScore(ScoreRange, bool, i64, i64),
        QueryLex(LexRange, bool, i64, i64),
        QueryMember(Vec<u8>),
        QueryAt(Vec<usize>),
        Scan(usize),
    }

    fn member_strategy() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(
            prop::sample::select(vec![b'a', b'b', b'c', 0u8, 0xff]),
            0..5,
        )
    }

    fn score_strategy(flat: bool) -> BoxedStrategy<f64> {
        if flat {
            prop::sample::select(vec![0.0, -0.0]).boxed()
        } else {
            prop_oneof![
                4 => (-4i32..5).prop_map(f64::from),
                1 => prop::sample::select(vec![
                    -0.0,
                    0.5,
                    -2.5,
                    f64::INFINITY,
                    f64::NEG_INFINITY,
                    f64::MAX,
                    f64::MIN_POSITIVE,
                    1e300,
                ]),
            ]
            .boxed()
        }
    }

    fn score_range_strategy(flat: bool) -> impl Strategy<Value = ScoreRange> {
        (
            score_strategy(flat),
            any::<bool>(),
            score_strategy(flat),
            any::<bool>(),
        )
            .prop_map(|(min, min_exclusive, max, max_exclusive)| ScoreRange {
                min,
                min_exclusive,
                max,
                max_exclusive,
            })
    }

    fn lex_bound_strategy() -> impl Strategy<Value = LexBound> {
        prop_oneof![
            1 => Just(LexBound::NegInf),
            1 => Just(LexBound::PosInf),
            3 => member_strategy().prop_map(|m| LexBound::Inclusive(Bytes::from(m))),
            3 => member_strategy().prop_map(|m| LexBound::Exclusive(Bytes::from(m))),
        ]
    }

    fn lex_range_strategy() -> impl Strategy<Value = LexRange> {
        (lex_bound_strategy(), lex_bound_strategy()).prop_map(|(min, max)| LexRange { min, max })
    }

    fn index_strategy() -> impl Strategy<Value = i64> {
        prop_oneof![8 => -12i64..12, 1 => Just(i64::MIN), 1 => Just(i64::MAX)]
    }

    fn flags_strategy() -> impl Strategy<Value = AddFlags> {
        (
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(nx, xx, gt, lt, incr)| AddFlags {
                nx,
                xx,
                gt,
                lt,
                incr,
            })
    }

    fn op_strategy(flat: bool) -> impl Strategy<Value = Op> {
        let lim = -2i64..6;
        prop_oneof![
            6 => (member_strategy(), score_strategy(flat), flags_strategy())
                .prop_map(|(m, s, f)| Op::Add(m, s, f)),
            4 => (member_strategy(), score_strategy(flat)).prop_map(|(m, s)| Op::Insert(m, s)),
            2 => member_strategy().prop_map(Op::Remove),
            1 => score_range_strategy(flat).prop_map(Op::RemScore),
            1 => (index_strategy(), index_strategy()).prop_map(|(a, b)| Op::RemRank(a, b)),
            1 => lex_range_strategy().prop_map(Op::RemLex),
            1 => (0usize..4, any::<bool>()).prop_map(|(c, m)| Op::Pop(c, m)),
            2 => (index_strategy(), index_strategy(), any::<bool>())
                .prop_map(|(a, b, r)| Op::QueryRank(a, b, r)),
            2 => (score_range_strategy(flat), any::<bool>(), lim.clone(), lim.clone())
                .prop_map(|(r, rev, o, c)| Op::QueryScore(r, rev, o, c)),
            2 => (lex_range_strategy(), any::<bool>(), lim.clone(), lim)
                .prop_map(|(r, rev, o, c)| Op::QueryLex(r, rev, o, c)),
            2 => member_strategy().prop_map(Op::QueryMember),
            1 => prop::collection::vec(0usize..40, 0..6).prop_map(Op::QueryAt),
            1 => (0usize..5).prop_map(Op::Scan),
        ]
    }

    fn run_ops(limits: ZsetLimits, ops: Vec<Op>) {
        let mut z = SortedSet::new();
        let mut model = Model::default();
        for op in ops {
            match op {
                Op::Add(m, s, f) => {
                    assert_eq!(z.add(&m, s, f, &limits), model.add(&m, s, f, &limits));
                }
                Op::Insert(m, s) => {
                    let before = model.find(&m).map(|i| model.v[i].0);
                    let want = match before {
                        None => InsertOutcome::Added,
                        Some(cur) if cur == s => InsertOutcome::Unchanged,
                        Some(_) => InsertOutcome::Updated,
                    };
                    if want != InsertOutcome::Unchanged {
                        model.put(&m, s, &limits);
                    }
                    assert_eq!(z.insert(&m, s, &limits), Ok(want));
                }
                Op::Remove(m) => {
                    let want = model.find(&m).map(|i| model.v.remove(i)).is_some();
                    assert_eq!(z.remove(&m), want);
                }
                Op::RemScore(r) => {
                    let before = model.v.len();
                    model.v.retain(|e| !r.contains(e.0));
                    assert_eq!(z.remove_range_by_score(&r), before - model.v.len());
                }
                Op::RemRank(a, b) => {
                    let idx = model.ranks(a, b);
                    let n = idx.len();
                    if let (Some(&lo), Some(&hi)) = (idx.first(), idx.last()) {
                        model.v.drain(lo..=hi);
                    }
                    assert_eq!(z.remove_range_by_rank(a, b), n);
                }
                Op::RemLex(r) => {
                    let idx = model.lex_run(&r, false);
                    let n = idx.len();
                    if let (Some(&lo), Some(&hi)) = (idx.first(), idx.last()) {
                        model.v.drain(lo..=hi);
                    }
                    assert_eq!(z.remove_range_by_lex(&r), n);
                }
                Op::Pop(c, max) => {
                    let n = c.min(model.v.len());
                    let idx: Vec<usize> = if max {
                        (model.v.len() - n..model.v.len()).rev().collect()
                    } else {
                        (0..n).collect()
                    };
                    let want = model.pairs(idx);
                    if max {
                        model.v.truncate(model.v.len() - n);
                    } else {
                        model.v.drain(..n);
                    }
                    assert_eq!(real_pairs(z.pop(c, max)), want);
                }
                Op::QueryRank(a, b, rev) => {
                    let len = model.v.len();
                    let idx: Vec<usize> = if rev {
                        model.ranks(a, b).into_iter().map(|i| len - 1 - i).collect()
                    } else {
                        model.ranks(a, b)
                    };
                    assert_eq!(real_pairs(z.range_by_rank(a, b, rev)), model.pairs(idx));
                }
                Op::QueryScore(r, rev, o, c) => {
                    let idx = model.score_idx(&r, rev);
                    assert_eq!(z.count_in_score_range(&r), idx.len());
                    let want = model.pairs(Model::limit(idx, o, c));
                    assert_eq!(real_pairs(z.range_by_score(&r, rev, o, c)), want);
                }
                Op::QueryLex(r, rev, o, c) => {
                    assert_eq!(z.count_in_lex_range(&r), model.lex_run(&r, false).len());
                    let idx = model.lex_run(&r, rev);
                    let want = model.pairs(Model::limit(idx, o, c));
                    assert_eq!(real_pairs(z.range_by_lex(&r, rev, o, c)), want);
                }
                Op::QueryMember(m) => {
                    let i = model.find(&m);
                    assert_eq!(
                        z.score(&m).map(f64::to_bits),
                        i.map(|i| model.v[i].0.to_bits())
                    );
                    assert_eq!(z.rank(&m, false), i);
                    assert_eq!(z.rank(&m, true), i.map(|i| model.v.len() - 1 - i));
                }
                Op::QueryAt(ranks) => {
                    let want: Vec<(Vec<u8>, u64)> =
                        model.pairs(ranks.iter().copied().filter(|&r| r < model.v.len()));
                    let got: Vec<(Vec<u8>, u64)> = z
                        .members_at(&ranks)
                        .into_iter()
                        .map(|(m, s)| (m.to_vec(), s.to_bits()))
                        .collect();
                    assert_eq!(got, want);
                    for r in ranks {
                        let got = z.member_at(r).map(|(m, s)| (m.to_vec(), s.to_bits()));
                        assert_eq!(got, model.pairs((r < model.v.len()).then_some(r)).pop());
                    }
                }
                Op::Scan(count) => {
                    let got = real_pairs(full_scan(&z, count));
                    assert_eq!(got, model.pairs(0..model.v.len()));
                }
            }
            // Full state after every step.
            let got: Vec<(Vec<u8>, u64)> =
                z.iter().map(|(m, s)| (m.to_vec(), s.to_bits())).collect();
            assert_eq!(got, model.pairs(0..model.v.len()));
            assert_eq!(z.len(), model.v.len());
            assert_eq!(
                z.encoding(),
                if model.large { "skiplist" } else { "listpack" }
            );
            check_invariants(&z);
        }
    }

    fn limits_strategy() -> impl Strategy<Value = ZsetLimits> {
        (0usize..10, 0usize..5).prop_map(|(e, v)| ZsetLimits {
            max_listpack_entries: e,
            max_listpack_value: v,
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn matches_model_mixed_scores(limits in limits_strategy(),
                                      ops in prop::collection::vec(op_strategy(false), 0..80)) {
            run_ops(limits, ops);
        }

        #[test]
        fn matches_model_equal_scores(limits in limits_strategy(),
                                      ops in prop::collection::vec(op_strategy(true), 0..80)) {
            run_ops(limits, ops);
        }

        #[test]
        fn parse_score_never_panics(arg in prop::collection::vec(any::<u8>(), 0..40)) {
            let _ = parse_score(&arg);
            let _ = ScoreRange::parse(&arg, &arg);
            let _ = LexRange::parse(&arg, &arg);
        }

    }

    /// One row of [`PARSE_TABLE`]: input, `parse_score` result bits, range-item result.
    type ParseRow = (&'static [u8], Option<u64>, Option<(u64, bool)>);

    /// Expected results computed with glibc's `strtod`, applying Redis 7.0's `string2d`
    /// checks (second field) and `zslParseRange` checks (third field).
    #[rustfmt::skip]
    const PARSE_TABLE: &[ParseRow] = &[
    (b"0", Some(0x0000000000000000), Some((0x0000000000000000, false))),
    (b"-0", Some(0x8000000000000000), Some((0x8000000000000000, false))),
    (b"+0", Some(0x0000000000000000), Some((0x0000000000000000, false))),
    (b"1", Some(0x3ff0000000000000), Some((0x3ff0000000000000, false))),
    (b"-1", Some(0xbff0000000000000), Some((0xbff0000000000000, false))),
    (b"+1", Some(0x3ff0000000000000), Some((0x3ff0000000000000, false))),
    (b"1.5", Some(0x3ff8000000000000), Some((0x3ff8000000000000, false))),
    (b".5", Some(0x3fe0000000000000), Some((0x3fe0000000000000, false))),
    (b"5.", Some(0x4014000000000000), Some((0x4014000000000000, false))),
    (b"-.5", Some(0xbfe0000000000000), Some((0xbfe0000000000000, false))),
    (b"+.5", Some(0x3fe0000000000000), Some((0x3fe0000000000000, false))),
    (b".", None, None),
    (b"-", None, None),
    (b"+", None, None),
    (b"", None, Some((0x0000000000000000, false))),
    (b"  1", None, Some((0x3ff0000000000000, false))),
    (b" 1", None, Some((0x3ff0000000000000, false))),
    (b"1 ", None, None),
    (b"\x091", None, Some((0x3ff0000000000000, false))),
    (b"1\x09", None, None),
    (b"\x0b1", None, Some((0x3ff0000000000000, false))),
    (b"\x0c1", None, Some((0x3ff0000000000000, false))),
    (b"\x0d1", None, Some((0x3ff0000000000000, false))),
    (b"\x0a1", None, Some((0x3ff0000000000000, false))),
    (b"1\x0a", None, None),
    (b"1e5", Some(0x40f86a0000000000), Some((0x40f86a0000000000, false))),
    (b"1E5", Some(0x40f86a0000000000), Some((0x40f86a0000000000, false))),
    (b"1e+5", Some(0x40f86a0000000000), Some((0x40f86a0000000000, false))),
    (b"1e-5", Some(0x3ee4f8b588e368f1), Some((0x3ee4f8b588e368f1, false))),
    (b"1e", None, None),
    (b"1e+", None, None),
    (b"1e-", None, None),
    (b"e5", None, None),
    (b"1.e5", Some(0x40f86a0000000000), Some((0x40f86a0000000000, false))),
    (b".e5", None, None),
    (b".5e1", Some(0x4014000000000000), Some((0x4014000000000000, false))),
    (b"inf", Some(0x7ff0000000000000), Some((0x7ff0000000000000, false))),
    (b"-inf", Some(0xfff0000000000000), Some((0xfff0000000000000, false))),
    (b"+inf", Some(0x7ff0000000000000), Some((0x7ff0000000000000, false))),
    (b"INF", Some(0x7ff0000000000000), Some((0x7ff0000000000000, false))),
    (b"Inf", Some(0x7ff0000000000000), Some((0x7ff0000000000000, false))),
    (b"iNf", Some(0x7ff0000000000000), Some((0x7ff0000000000000, false))),
    (b"infinity", Some(0x7ff0000000000000), Some((0x7ff0000000000000, false))),
    (b"-Infinity", Some(0xfff0000000000000), Some((0xfff0000000000000, false))),
    (b"INFINITY", Some(0x7ff0000000000000), Some((0x7ff0000000000000, false))),
    (b"infinit", None, None),
    (b"infin", None, None),
    (b"in", None, None),
    (b"i", None, None),
    (b"nan", None, None),
    (b"NaN", None, None),
    (b"-nan", None, None),
    (b"nan(123)", None, None),
    (b"nan(", None, None),
    (b"nanx", None, None),
    (b"+nan", None, None),
    (b"infx", None, None),
    (b"inf ", None, None),
    (b" inf", None, Some((0x7ff0000000000000, false))),
    (b"infinityx", None, None),
    (b"-infinit", None, None),
    (b"0x10", Some(0x4030000000000000), Some((0x4030000000000000, false))),
    (b"0X10", Some(0x4030000000000000), Some((0x4030000000000000, false))),
    (b"-0x10", Some(0xc030000000000000), Some((0xc030000000000000, false))),
    (b"+0x10", Some(0x4030000000000000), Some((0x4030000000000000, false))),
    (b"0x1p3", Some(0x4020000000000000), Some((0x4020000000000000, false))),
    (b"0x1P-3", Some(0x3fc0000000000000), Some((0x3fc0000000000000, false))),
    (b"0x.8", Some(0x3fe0000000000000), Some((0x3fe0000000000000, false))),
    (b"0x8.", Some(0x4020000000000000), Some((0x4020000000000000, false))),
    (b"0x1.8p1", Some(0x4008000000000000), Some((0x4008000000000000, false))),
    (b"0x", None, None),
    (b"0X", None, None),
    (b"0xg", None, None),
    (b"0x.p1", None, None),
    (b"0x1p", None, None),
    (b"0x1p+", None, None),
    (b"0x1p-", None, None),
    (b"0x.", None, None),
    (b"0x1.fffffffffffff8p1023", None, Some((0x7ff0000000000000, false))),
    (b"0x1.fffffffffffffp1023", Some(0x7fefffffffffffff), Some((0x7fefffffffffffff, false))),
    (b"0x1.fffffffffffff7ffp1023", Some(0x7fefffffffffffff), Some((0x7fefffffffffffff, false))),
    (b"0x1p1024", None, Some((0x7ff0000000000000, false))),
    (b"0x1p1023", Some(0x7fe0000000000000), Some((0x7fe0000000000000, false))),
    (b"0x1p-1074", Some(0x0000000000000001), Some((0x0000000000000001, false))),
    (b"0x1p-1075", None, Some((0x0000000000000000, false))),
    (b"0x1.0000000000001p-1075", Some(0x0000000000000001), Some((0x0000000000000001, false))),
    (b"0x3p-1076", Some(0x0000000000000001), Some((0x0000000000000001, false))),
    (b"0x1p-1076", None, Some((0x0000000000000000, false))),
    (b"0x1p-1022", Some(0x0010000000000000), Some((0x0010000000000000, false))),
    (b"0x0.0000000000001p-1022", Some(0x0000000000000001), Some((0x0000000000000001, false))),
    (b"0x1.ffffffffffffffp-1023", Some(0x0010000000000000), Some((0x0010000000000000, false))),
    (b"0x1.fffffffffffffp-1023", Some(0x0010000000000000), Some((0x0010000000000000, false))),
    (b"0x123456789abcdef123456789p0", Some(0x45b23456789abcdf), Some((0x45b23456789abcdf, false))),
    (b"0x1.00000000000008p0", Some(0x3ff0000000000000), Some((0x3ff0000000000000, false))),
    (b"0x1.00000000000018p0", Some(0x3ff0000000000002), Some((0x3ff0000000000002, false))),
    (b"0x1.000000000000080000001p0", Some(0x3ff0000000000001), Some((0x3ff0000000000001, false))),
    (b"0x1.0000000000000800000000000000000000000000001p0", Some(0x3ff0000000000001), Some((0x3ff0000000000001, false))),
    (b"0x0p0", Some(0x0000000000000000), Some((0x0000000000000000, false))),
    (b"0x0p99999", Some(0x0000000000000000), Some((0x0000000000000000, false))),
    (b"0x00000000000000000001p0", Some(0x3ff0000000000000), Some((0x3ff0000000000000, false))),
    (b"0xffffffffffffffffffff", Some(0x44f0000000000000), Some((0x44f0000000000000, false))),
    (b"0x1p99999999999999999999", None, Some((0x7ff0000000000000, false))),
    (b"0x1p-99999999999999999999", None, Some((0x0000000000000000, false))),
    (b"0x1e3", Some(0x407e300000000000), Some((0x407e300000000000, false))),
    (b"0x1.p1", Some(0x4000000000000000), Some((0x4000000000000000, false))),
    (b"0x1.8", Some(0x3ff8000000000000), Some((0x3ff8000000000000, false))),
    (b"0x.1", Some(0x3fb0000000000000), Some((0x3fb0000000000000, false))),
    (b"-0x0", Some(0x8000000000000000), Some((0x8000000000000000, false))),
    (b"0x1p3x", None, None),
    (b"0x0.00000000000000000000000000001p100", Some(0x3ef0000000000000), Some((0x3ef0000000000000, false))),
    (b"0x.000000000000000000000000000000000000001p0", Some(0x3630000000000000), Some((0x3630000000000000, false))),
    (b"1e308", Some(0x7fe1ccf385ebc8a0), Some((0x7fe1ccf385ebc8a0, false))),
    (b"1.7976931348623157e308", Some(0x7fefffffffffffff), Some((0x7fefffffffffffff, false))),
    (b"1.7976931348623159e308", None, Some((0x7ff0000000000000, false))),
    (b"1.7976931348623158e308", Some(0x7fefffffffffffff), Some((0x7fefffffffffffff, false))),
    (b"1e309", None, Some((0x7ff0000000000000, false))),
    (b"-1e309", None, Some((0xfff0000000000000, false))),
    (b"1e-320", Some(0x00000000000007e8), Some((0x00000000000007e8, false))),
    (b"1e-324", None, Some((0x0000000000000000, false))),
    (b"2.4703282292062328e-324", Some(0x0000000000000001), Some((0x0000000000000001, false))),
    (b"2.4703282292062327e-324", None, Some((0x0000000000000000, false))),
    (b"0e-999", Some(0x0000000000000000), Some((0x0000000000000000, false))),
    (b"0e999999999999999999999", Some(0x0000000000000000), Some((0x0000000000000000, false))),
    (b"0.000000000000000000000000000000000000000000e99999", Some(0x0000000000000000), Some((0x0000000000000000, false))),
    (b"1e99999999999999999999", None, Some((0x7ff0000000000000, false))),
    (b"1e-99999999999999999999", None, Some((0x0000000000000000, false))),
    (b"0.1", Some(0x3fb999999999999a), Some((0x3fb999999999999a, false))),
    (b"0.30000000000000004", Some(0x3fd3333333333334), Some((0x3fd3333333333334, false))),
    (b"123456789012345678901234567890", Some(0x45f8ee90ff6c373e), Some((0x45f8ee90ff6c373e, false))),
    (b"1_000", None, None),
    (b"1,5", None, None),
    (b"1.5.5", None, None),
    (b"--1", None, None),
    (b"+-1", None, None),
    (b"1f", None, None),
    (b"1d", None, None),
    (b"\xd9\xa1", None, None),
    (b"1\x00", None, Some((0x3ff0000000000000, false))),
    (b"\x00", None, Some((0x0000000000000000, false))),
    (b"5\x001", None, Some((0x4014000000000000, false))),
    (b"(5", None, Some((0x4014000000000000, true))),
    (b"((5", None, None),
    (b"(", None, Some((0x0000000000000000, true))),
    (b"(inf", None, Some((0x7ff0000000000000, true))),
    (b"(-inf", None, Some((0xfff0000000000000, true))),
    (b"( 5", None, Some((0x4014000000000000, true))),
    (b" (5", None, None),
    (b"(\x00", None, Some((0x0000000000000000, true))),
    (b"(1e999", None, Some((0x7ff0000000000000, true))),
    (b"(nan", None, None),
    (b"0.0000001", Some(0x3e7ad7f29abcaf48), Some((0x3e7ad7f29abcaf48, false))),
    (b"-0.0", Some(0x8000000000000000), Some((0x8000000000000000, false))),
    (b"1e-400", None, Some((0x0000000000000000, false))),
    (b"-1e-400", None, Some((0x8000000000000000, false))),
    (b"00001", Some(0x3ff0000000000000), Some((0x3ff0000000000000, false))),
    (b"0001.0000", Some(0x3ff0000000000000), Some((0x3ff0000000000000, false))),
    (b"1e0001", Some(0x4024000000000000), Some((0x4024000000000000, false))),
    (b"1e-0", Some(0x3ff0000000000000), Some((0x3ff0000000000000, false))),
    (b"-00", Some(0x8000000000000000), Some((0x8000000000000000, false))),
    (b"0x-1", None, None),
    (b"0x+1", None, None),
    (b"1e5.5", None, None),
    (b"1e 5", None, None),
    (b"1 e5", None, None),
    (b"3.4028235e38", Some(0x47efffffe54daff8), Some((0x47efffffe54daff8, false))),
    (b"-2.5e-3", Some(0xbf647ae147ae147b), Some((0xbf647ae147ae147b, false))),
    (b"9007199254740993", Some(0x4340000000000000), Some((0x4340000000000000, false))),
    (b"9007199254740995", Some(0x4340000000000002), Some((0x4340000000000002, false))),
    (b"2.2250738585072011e-308", Some(0x000fffffffffffff), Some((0x000fffffffffffff, false))),
    (b"4.9406564584124654e-324", Some(0x0000000000000001), Some((0x0000000000000001, false))),
    (b"0.00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001", Some(0x00000000001ee257), Some((0x00000000001ee257, false))),
    (b"1000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000", None, Some((0x7ff0000000000000, false))),
    (b"1.00000000000000011102230246251565404236316680908203125", Some(0x3ff0000000000000), Some((0x3ff0000000000000, false))),
    (b"1.00000000000000011102230246251565404236316680908203124", Some(0x3ff0000000000000), Some((0x3ff0000000000000, false))),
    (b"1.00000000000000011102230246251565404236316680908203126", Some(0x3ff0000000000001), Some((0x3ff0000000000001, false))),
    (b"0085707213.3307177788e-98", Some(0x2d3bef26f7311dd9), Some((0x2d3bef26f7311dd9, false))),
    (b"3359", Some(0x40aa3e0000000000), Some((0x40aa3e0000000000, false))),
    (b"09924018587370.42068918183177415", Some(0x42a20d3b348dd4d7), Some((0x42a20d3b348dd4d7, false))),
    (b"222790246972899281", Some(0x4388bc1464d1edff), Some((0x4388bc1464d1edff, false))),
    (b"881.471303597651299", Some(0x408b8bc53ad21332), Some((0x408b8bc53ad21332, false))),
    (b"75818108110.023e1", Some(0x426610e3a601875c), Some((0x426610e3a601875c, false))),
    (b"313884092e-293", Some(0x04dddf3f62ab1203), Some((0x04dddf3f62ab1203, false))),
    (b"783945458397845785.6254074465148", Some(0x43a5c2447b562b32), Some((0x43a5c2447b562b32, false))),
    (b"341561.20534e87", Some(0x5324f59e6af69131), Some((0x5324f59e6af69131, false))),
    (b"19272731779914.6908e101", Some(0x57a90b225bc8219c), Some((0x57a90b225bc8219c, false))),
    (b"9688172463603551.19136161", Some(0x434135abb71b9fb0), Some((0x434135abb71b9fb0, false))),
    (b"701992065e28", Some(0x47951ff33d58b298), Some((0x47951ff33d58b298, false))),
    (b"685661701615534233.1424831501462267069", Some(0x43a307eb5ea1c481), Some((0x43a307eb5ea1c481, false))),
    (b"870983721959484.2140106325290227", Some(0x4308c13d9ad201e2), Some((0x4308c13d9ad201e2, false))),
    (b"212639", Some(0x4109f4f800000000), Some((0x4109f4f800000000, false))),
    (b"-31920.e-69", Some(0xb28ae47df2763910), Some((0xb28ae47df2763910, false))),
    (b"-30306132154823.076836e304", None, Some((0xfff0000000000000, false))),
    (b"334679", Some(0x41146d5c00000000), Some((0x41146d5c00000000, false))),
    (b"55173402857566079e111", Some(0x5a746068761d0e0a), Some((0x5a746068761d0e0a, false))),
    (b"-946208926117951140.96", Some(0xc3aa4338029920ed), Some((0xc3aa4338029920ed, false))),
    (b"-735202.4696601204907", Some(0xc1266fc4f0774a93), Some((0xc1266fc4f0774a93, false))),
    (b"9756163100528", Some(0x42a1bf11459ee000), Some((0x42a1bf11459ee000, false))),
    (b"-99091e-69", Some(0xb2a4def9e4fdedcc), Some((0xb2a4def9e4fdedcc, false))),
    (b"886667575e-17", Some(0x3e430a81acd46889), Some((0x3e430a81acd46889, false))),
    (b"7450.909", Some(0x40bd1ae8b4395810), Some((0x40bd1ae8b4395810, false))),
    (b"911669.e-50", Some(0x36ca060757a3a733), Some((0x36ca060757a3a733, false))),
    (b"-70381e-135", Some(0xa4e8fa745c32b5bb), Some((0xa4e8fa745c32b5bb, false))),
    (b"32048862244.2323961585988941e54", Some(0x4d537a03947e9fa1), Some((0x4d537a03947e9fa1, false))),
    (b"555909208593043854", Some(0x439edbf1eb663a46), Some((0x439edbf1eb663a46, false))),
    (b"968072214.9843060147532755624", Some(0x41ccd9ce0b7dfdbd), Some((0x41ccd9ce0b7dfdbd, false))),
    (b"361875470020145298e-295", Some(0x065487075b513b68), Some((0x065487075b513b68, false))),
    (b"-516810523549643e184", Some(0xe93148ce231e5ca2), Some((0xe93148ce231e5ca2, false))),
    (b"601e-49", Some(0x3655f58518062f54), Some((0x3655f58518062f54, false))),
    (b"5615.40305719", Some(0x40b5ef672ec18978), Some((0x40b5ef672ec18978, false))),
    (b"-1797169.750361236", Some(0xc13b6c31c017ac89), Some((0xc13b6c31c017ac89, false))),
    (b"0535636597866.3e214", Some(0x6eccf110c9822ef7), Some((0x6eccf110c9822ef7, false))),
    (b"421949992817458227.74796397522550634e-112", Some(0x2c568830af2662d8), Some((0x2c568830af2662d8, false))),
    (b"88222384.0593454973878", Some(0x419508aac03cc511), Some((0x419508aac03cc511, false))),
    (b"299516169344283.72e261", Some(0x79214d4a6db83765), Some((0x79214d4a6db83765, false))),
    (b"8544212795.79310e-208", Some(0x16d059b5cc2e481d), Some((0x16d059b5cc2e481d, false))),
    (b"62928616151.93622213524823e64", Some(0x4f76429d1022d1e8), Some((0x4f76429d1022d1e8, false))),
    (b"937710327946479937e57", Some(0x4f8095cd494750c5), Some((0x4f8095cd494750c5, false))),
    (b"53.9582645046", Some(0x404afaa8694a165b), Some((0x404afaa8694a165b, false))),
    (b"377121053.92403", Some(0x41b67a691dec8d3b), Some((0x41b67a691dec8d3b, false))),
    (b"-10978122481912684462.099442", Some(0xc3e30b4407726454), Some((0xc3e30b4407726454, false))),
    (b"-929524356261.7586e274", Some(0xfb4f4131d5cc3f8c), Some((0xfb4f4131d5cc3f8c, false))),
    (b"44720764e198", Some(0x6aa1d4622b072faf), Some((0x6aa1d4622b072faf, false))),
    (b"6616689784.1502988217047703", Some(0x41f8a62ac78267a0), Some((0x41f8a62ac78267a0, false))),
    (b"2.435424", Some(0x40037bbf93ff25e5), Some((0x40037bbf93ff25e5, false))),
    (b"8414012234114693.5191", Some(0x433de47fe259a686), Some((0x433de47fe259a686, false))),
    (b"3874336.03242172542449242e226", Some(0x7038f48655678d11), Some((0x7038f48655678d11, false))),
    (b"235297587.10213e-239", Some(0x100d396bc861812d), Some((0x100d396bc861812d, false))),
    (b"088087.", Some(0x40f5817000000000), Some((0x40f5817000000000, false))),
    (b"22447588935779.601200192863e-12", Some(0x403672953041398f), Some((0x403672953041398f, false))),
    (b"822", Some(0x4089b00000000000), Some((0x4089b00000000000, false))),
    (b"5463053019572585615e307", None, Some((0x7ff0000000000000, false))),
    (b"-20645515095533363e-1", Some(0xc31d56cb6d63c2e1), Some((0xc31d56cb6d63c2e1, false))),
    (b"678712219377719.8830998129677497886e64", Some(0x504d4eaf83a520a1), Some((0x504d4eaf83a520a1, false))),
    (b"45", Some(0x4046800000000000), Some((0x4046800000000000, false))),
    (b"164001221396", Some(0x4243179e058a0000), Some((0x4243179e058a0000, false))),
    (b"03391245710716.40412387141522505", Some(0x4288acaff7abe33c), Some((0x4288acaff7abe33c, false))),
    (b"056.039e-167", Some(0x1da085c8175cef47), Some((0x1da085c8175cef47, false))),
    (b"980233692897", Some(0x426c874f64dc2000), Some((0x426c874f64dc2000, false))),
    (b"568449964168280768", Some(0x439f8e28ec2b55eb), Some((0x439f8e28ec2b55eb, false))),
    (b"-060230637.321", Some(0xc18cb85f6a916873), Some((0xc18cb85f6a916873, false))),
    (b"-16", Some(0xc030000000000000), Some((0xc030000000000000, false))),
    (b"042433e-89", Some(0x2e6a60eef3a10a3c), Some((0x2e6a60eef3a10a3c, false))),
    (b"58803662105058.3216518930", Some(0x42cabda5b214f129), Some((0x42cabda5b214f129, false))),
    (b"-371943968891", Some(0xc255a665a41ec000), Some((0xc255a665a41ec000, false))),
    (b"788739269841484e27", Some(0x48a21bcaf39ed06a), Some((0x48a21bcaf39ed06a, false))),
    (b"47428461899990482.07247549430708", Some(0x43650ffde9f958ba), Some((0x43650ffde9f958ba, false))),
    (b"109895342e-171", Some(0x1e19505390c38958), Some((0x1e19505390c38958, false))),
    (b"-3.821416330217116113", Some(0xc00e9242b995767a), Some((0xc00e9242b995767a, false))),
    (b"-580788617656788.365587078462136183e81", Some(0xd3d166ea3e39656a), Some((0xd3d166ea3e39656a, false))),
    (b"825535261302001.27481294355481653", Some(0x4307768f3ffee78a), Some((0x4307768f3ffee78a, false))),
    (b"03766.5585081162899787", Some(0x40ad6d1df4c69c08), Some((0x40ad6d1df4c69c08, false))),
    (b"-729.29794706899487827", Some(0xc086ca623212aa2d), Some((0xc086ca623212aa2d, false))),
    (b"3528977422e242", Some(0x7428a50724d1a90d), Some((0x7428a50724d1a90d, false))),
    (b"4236638433066612.7497640e317", None, Some((0x7ff0000000000000, false))),
    (b"621", Some(0x4083680000000000), Some((0x4083680000000000, false))),
    (b"0Xb14eacd2a.ap1116", None, Some((0x7ff0000000000000, false))),
    (b"-0x5EA9b4BC3Fb61c891DA8p-28", Some(0xc317aa6d2f0fed87), Some((0xc317aa6d2f0fed87, false))),
    (b"0Xd5eA5C16cc0acD3BC.b8d567de201", Some(0x442abd4b82d9815a), Some((0x442abd4b82d9815a, false))),
    (b"0XA8ea157", Some(0x41a51d42ae000000), Some((0x41a51d42ae000000, false))),
    (b"0x5aFe329F449EFCdB545C4", Some(0x4516bf8ca7d127bf), Some((0x4516bf8ca7d127bf, false))),
    (b"0XD1FB2p-872", Some(0x0aaa3f6400000000), Some((0x0aaa3f6400000000, false))),
    (b"0x35b28fp718", Some(0x6e2ad94780000000), Some((0x6e2ad94780000000, false))),
    (b"0x7ec9881bF7aDfc8fCe.544b8392bdd2fcec88dp774", Some(0x74bfb26206fdeb7f), Some((0x74bfb26206fdeb7f, false))),
    (b"0X5244B2cfedeE9fp355", Some(0x5984912cb3fb7ba8), Some((0x5984912cb3fb7ba8, false))),
    (b"0X5fFB63c8d06ACA8p495", Some(0x6287fed8f2341ab3), Some((0x6287fed8f2341ab3, false))),
    (b"0X3ccD4D2Ee0F3a40D7C7", Some(0x448e66a6977079d2), Some((0x448e66a6977079d2, false))),
    (b"0xab20dBD50AB13577p933", Some(0x7e35641b7aa15627), Some((0x7e35641b7aa15627, false))),
    (b"-0xed8EcdC947.12ff496292fe9d80p965", Some(0xfebdb1d9b928e260), Some((0xfebdb1d9b928e260, false))),
    (b"0X0f3C6bB2aCb5fbCC2944", Some(0x44ae78d765596bf8), Some((0x44ae78d765596bf8, false))),
    (b"-0xCFC70B84c48a4B1b9p-1139", Some(0x8000000000000006), Some((0x8000000000000006, false))),
    (b"-0Xe3E77cB2019428f3dfp1", Some(0xc47c7cef96403285), Some((0xc47c7cef96403285, false))),
    (b"0Xe46021d1A4.", Some(0x426c8c043a348000), Some((0x426c8c043a348000, false))),
    (b"-0xd62ED2e052aC4cC4eBp-579", Some(0xa03ac5da5c0a558a), Some((0xa03ac5da5c0a558a, false))),
    (b"0x06FF2aca8d.440p339", Some(0x574bfcab2a351000), Some((0x574bfcab2a351000, false))),
    (b"0XbF6AAB2ad6089D5f", Some(0x43e7ed55655ac114), Some((0x43e7ed55655ac114, false))),
    (b"0Xd.506849fbb8b7ada806", Some(0x402aa0d093f7716f), Some((0x402aa0d093f7716f, false))),
    (b"0x5Cc6.2d9b1e", Some(0x40d7318b66c78000), Some((0x40d7318b66c78000, false))),
    (b"-0x46F0b64DEB28p322", Some(0xd6f1bc2d937aca00), Some((0xd6f1bc2d937aca00, false))),
    (b"-0X9e9da5.9f", Some(0xc163d3b4b3e00000), Some((0xc163d3b4b3e00000, false))),
    (b"0x6FFCDD3Cb74FEAC5cFB.b7e7e3fbp-1042", Some(0x037bff374f2dd3fb), Some((0x037bff374f2dd3fb, false))),
    (b"0xfe6cd2.551003p374", Some(0x58cfcd9a4aa20060), Some((0x58cfcd9a4aa20060, false))),
    (b"-0X0B736bADab3B23F80p1120", None, Some((0xfff0000000000000, false))),
    (b"0XA4F4dcA2D0cdcEdp-180", Some(0x38649e9b945a19ba), Some((0x38649e9b945a19ba, false))),
    (b"0x0594aabF2E.a324ac3bcp-714", Some(0x157652aafcba8c93), Some((0x157652aafcba8c93, false))),
    (b"0X61efCDf.8ec24f61a7p-43", Some(0x3ee87bf37e3b093e), Some((0x3ee87bf37e3b093e, false))),
    (b"0xc4cdCA9EE.705a177ae0p3", Some(0x425899b953dce0b4), Some((0x425899b953dce0b4, false))),
    (b"0Xc.8b375b820f11b36p-333", Some(0x2b59166eb7041e23), Some((0x2b59166eb7041e23, false))),
    (b"0X930eF4edb2Eeee3d2.42ef2p215", Some(0x519261de9db65dde), Some((0x519261de9db65dde, false))),
    (b"0XE", Some(0x402c000000000000), Some((0x402c000000000000, false))),
    (b"-0x9dca5C.0d4f3p723", Some(0xee93b94b81a9e600), Some((0xee93b94b81a9e600, false))),
    (b"0X9bcfbe.74d31efa6850b9", Some(0x416379f7ce9a63df), Some((0x416379f7ce9a63df, false))),
    (b"0x9bfb1f1ae7b5fE9.dd07c3d43", Some(0x43a37f63e35cf6c0), Some((0x43a37f63e35cf6c0, false))),
    (b"0X5fAe9E2EdD45edD", Some(0x4397eba78bb7517b), Some((0x4397eba78bb7517b, false))),
    (b"0XEBEbfa0D1", Some(0x422d7d7f41a20000), Some((0x422d7d7f41a20000, false))),
    (b"-0X606fC70E90.600e46deaae86ba174p618", Some(0xe8f81bf1c3a41804), Some((0xe8f81bf1c3a41804, false))),
    (b"0XBc74p-609", Some(0x1ad78e8000000000), Some((0x1ad78e8000000000, false))),
    (b"0xc06p235", Some(0x4f580c0000000000), Some((0x4f580c0000000000, false))),
    (b"0x5234F022B4A6Bp923", Some(0x7cc48d3c08ad29ac), Some((0x7cc48d3c08ad29ac, false))),
    (b"0xA50DAEaDD6.0e98p1131", None, Some((0x7ff0000000000000, false))),
    (b"0X581AEfEea2f.cd1b57p-524", Some(0x21d606bbfba8bf34), Some((0x21d606bbfba8bf34, false))),
    (b"-0X2Da2CEAbF8dp-581", Some(0x9e36d16755fc6800), Some((0x9e36d16755fc6800, false))),
    (b"0XF32B", Some(0x40ee656000000000), Some((0x40ee656000000000, false))),
    (b"-0Xd2Cp1089", None, Some((0xfff0000000000000, false))),
    (b"-0x5fE0E0e54f1E38672BfaB", Some(0xc517f8383953c78e), Some((0xc517f8383953c78e, false))),
    (b"0xe9dEB9fF4c1eC1fAd445C.ef6f82ep956", None, Some((0x7ff0000000000000, false))),
    (b"0xp-319", None, None),
    (b"0XfEdCdd735.e7f07df46e8p391", Some(0x5a9fdb9bae6bcfe1), Some((0x5a9fdb9bae6bcfe1, false))),
    (b"0xDp636", Some(0x67ea000000000000), Some((0x67ea000000000000, false))),
    (b"0x3e317D.27e6cde21c8dp1129", None, Some((0x7ff0000000000000, false))),
    (b"0XdEC996D8F9p436", Some(0x5dabd932db1f2000), Some((0x5dabd932db1f2000, false))),
    (b"0xC.decbe884p-444", Some(0x2469bd97d1080000), Some((0x2469bd97d1080000, false))),
    (b"-0x60d86ECeFB3EDeCB6b91C.c3f83949", Some(0xc518361bb3becfb8), Some((0xc518361bb3becfb8, false))),
    (b"0x0cba6Bd72acf1C4BF714dp611", Some(0x6b1974d7ae559e39), Some((0x6b1974d7ae559e39, false))),
    (b"0XFa67EE83C7aA27p1099", None, Some((0x7ff0000000000000, false))),
    (b"0xdp-672", Some(0x162a000000000000), Some((0x162a000000000000, false))),
    (b"0Xbcaef6", Some(0x416795dec0000000), Some((0x416795dec0000000, false))),
    (b"-0xb4c16ADb78bc499d.053cd04ac36ffep590", Some(0xe8c6982d5b6f1789), Some((0xe8c6982d5b6f1789, false))),
    (b"-0X6.e6189257cb95a9621a4p-239", Some(0xb12b9862495f2e57), Some((0xb12b9862495f2e57, false))),
    (b"0x9E76Ce89Ba0", Some(0x42a3ced9d1374000), Some((0x42a3ced9d1374000, false))),
    (b"0X2c4AAAE6bff0c4p-370", Some(0x2c262555735ff862), Some((0x2c262555735ff862, false))),
    (b"-0Xaeab86018f42CCd590a3Fp-327", Some(0xb0b5d570c031e85a), Some((0xb0b5d570c031e85a, false))),
    (b"0x7ea26", Some(0x411fa89800000000), Some((0x411fa89800000000, false))),
    (b"0x2F1eeaAceeCFC600Fc6.6", Some(0x44878f75567767e3), Some((0x44878f75567767e3, false))),
    (b"0x589FcFF665d8FCBFf5b49p-36", Some(0x42d627f3fd99763f), Some((0x42d627f3fd99763f, false))),
    (b"0X1f1aff2E", Some(0x41bf1aff2e000000), Some((0x41bf1aff2e000000, false))),
    (b"-0xE098Ab04.efc5a830fb968c5ap-54", Some(0xbe8c1315609df8b5), Some((0xbe8c1315609df8b5, false))),
    (b"0xcB0D9B5c2b1E1B04Ef3p382", Some(0x5c8961b36b8563c3), Some((0x5c8961b36b8563c3, false))),
    (b"0xB50f4C2519F3p349", Some(0x58b6a1e984a33e60), Some((0x58b6a1e984a33e60, false))),
    (b"0X01Ee.e5", Some(0x407eee5000000000), Some((0x407eee5000000000, false))),
    (b"0X83F7EFf5f303FFcED903p857", Some(0x7a707efdfebe6080), Some((0x7a707efdfebe6080, false))),
    (b"0xb466bB3e3a7d.03e18813b89bd8", Some(0x42e68cd767c74fa0), Some((0x42e68cd767c74fa0, false))),
    (b"0xd85590A1B3b4b2Ae78963.a61f8fbfbd3a8p-412", Some(0x2b6b0ab214367696), Some((0x2b6b0ab214367696, false))),
    (b"0x24CFB.44423d7336c", Some(0x410267da2211eb9a), Some((0x410267da2211eb9a, false))),
    (b"0X4BBD40d4dbCB4CeDf.902900639651bp526", Some(0x64f2ef503536f2d3), Some((0x64f2ef503536f2d3, false))),
    ];
}
