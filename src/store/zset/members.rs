//! What is addressed by member: construction, `ZADD`/`ZINCRBY` semantics, upserts, removal,
//! score and rank lookups, sampling by rank, and the memory estimate.

use super::{
    AddFlags, AddOutcome, InsertOutcome, Large, Member, Repr, Score, Small, SortedSet, ZsetError,
    ZsetLimits, compact_score,
};

impl SortedSet {
    /// An empty set in the compact encoding. (Redis creates a new key directly in the
    /// `skiplist` encoding when its first member is too long or the entry limit is 0; the
    /// first [`insert`](Self::insert)/[`add`](Self::add) converts in exactly those cases, so
    /// the outcome is the same.)
    pub fn new() -> Self {
        SortedSet {
            repr: Repr::Small(Small::default()),
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
            Repr::Small(s) => s.len(),
            Repr::Large(l) => l.len(),
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
            Repr::Small(s) => s.find(member).map(|(_, d)| d.score.0),
            Repr::Large(l) => l.score(member).map(|s| s.0),
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
        // A compact set is walked once: the member's score, or where it would go.
        let (present, place) = match &self.repr {
            Repr::Small(s) => match s.locate(member, compact_score(Score(score))) {
                Ok(current) => (Some(current.0), None),
                Err(place) => (None, Some(place)),
            },
            Repr::Large(l) => (l.score(member).map(|s| s.0), None),
        };
        match present {
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
                self.insert_new_at(member, score, limits, place);
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
        self.insert_new_at(member, score, limits, None);
    }

    /// [`Self::insert_new`], at `place` if a compact set's walk found it (`Small::locate`
    /// with this score, nothing changed since).
    fn insert_new_at(
        &mut self,
        member: &[u8],
        score: f64,
        limits: &ZsetLimits,
        place: Option<super::small::Seek>,
    ) {
        if let Repr::Small(s) = &self.repr
            && (s.len().saturating_add(1) > limits.max_listpack_entries
                || member.len() > limits.max_listpack_value)
        {
            self.convert_to_large();
        }
        let score = Score(score);
        match (&mut self.repr, place) {
            (Repr::Small(s), Some(place)) => s.insert_at(place, compact_score(score), member),
            (Repr::Small(s), None) => s.insert(compact_score(score), member),
            (Repr::Large(l), _) => l.insert(score, member),
        }
    }

    /// Replaces the score of a member known to be present.
    fn change_score(&mut self, member: &[u8], new: f64) {
        let new = Score(new);
        match &mut self.repr {
            Repr::Small(s) => {
                let Some((_, d)) = s.find(member) else {
                    return;
                };
                let span = d.span;
                s.remove_span(span, 1);
                s.insert(compact_score(new), member);
            }
            Repr::Large(l) => {
                if l.remove(member).is_some() {
                    l.insert(new, member);
                }
            }
        }
    }

    pub(super) fn convert_to_large(&mut self) {
        if let Repr::Small(small) = &self.repr {
            let mut large = Large::default();
            for d in small.entries() {
                large.insert(d.score, &d.member);
            }
            self.repr = Repr::Large(Box::new(large));
        }
    }

    /// Removes `member` (`ZREM`); returns whether it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Small(s) => match s.find(member).map(|(_, d)| d.span) {
                Some(span) => {
                    s.remove_span(span, 1);
                    true
                }
                None => false,
            },
            Repr::Large(l) => l.remove(member).is_some(),
        }
    }

    /// The 0-based rank of `member` in ascending order, or in descending order if `reverse`
    /// (`ZRANK`, `ZREVRANK`); `None` if it is not in the set.
    pub fn rank(&self, member: &[u8], reverse: bool) -> Option<usize> {
        let len = self.len();
        let forward = match &self.repr {
            Repr::Small(s) => s.find(member)?.0,
            Repr::Large(l) => l.rank_of(l.score(member)?, member, false),
        };
        Some(if reverse {
            len.saturating_sub(forward + 1)
        } else {
            forward
        })
    }

    /// The entry at 0-based ascending `rank`, or `None` past the end (for `ZRANDMEMBER`).
    pub fn member_at(&self, rank: usize) -> Option<(Member<'_>, f64)> {
        let len = self.len();
        if rank >= len {
            return None;
        }
        let d = match &self.repr {
            Repr::Small(s) => s.entries().nth(rank)?,
            Repr::Large(l) => l.at(rank)?,
        };
        Some((d.member, d.score.0))
    }

    /// The entries at several 0-based ascending ranks, in the order the ranks are given
    /// (repeats allowed); ranks `>= len()` are left out (for `ZRANDMEMBER` with a count). A
    /// compact set is decoded once; a large one is descended once per rank, O(k log n).
    pub fn members_at(&self, ranks: &[usize]) -> Vec<(Member<'_>, f64)> {
        match &self.repr {
            Repr::Small(s) => {
                let d = s.decoded();
                ranks
                    .iter()
                    .filter_map(|&r| d.get(r))
                    .map(|e| (e.member, e.score.0))
                    .collect()
            }
            Repr::Large(l) => ranks
                .iter()
                .filter_map(|&r| l.at(r))
                .map(|e| (e.member, e.score.0))
                .collect(),
        }
    }

    /// Rough number of heap and inline bytes the set uses (`MEMORY USAGE`).
    pub fn approx_memory(&self) -> usize {
        let base = std::mem::size_of::<Self>();
        match &self.repr {
            Repr::Small(s) => base + s.heap_bytes(),
            Repr::Large(l) => base + std::mem::size_of::<Large>() + l.heap_bytes(),
        }
    }
}
