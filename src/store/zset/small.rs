//! The `listpack` encoding: every entry of a small set in one contiguous byte buffer, in
//! (score, member) order, plus the entry count. The buffer is built exactly sized and edited
//! in place, keeping at most 16 bytes of unused room, so that a sliding window (add one
//! entry, trim the oldest) reuses its memory instead of reallocating on every change.
//!
//! # Layout of one entry
//!
//! A header byte, then the score, then the member:
//!
//! * header bit 0: the score is an integer or, when set, a raw `f64` (8 bytes, little
//!   endian). A score is stored as an integer when it is integral and its magnitude is below
//!   2^53, so the `f64` comes back exactly (`-0` is stored as `0`, as Redis's listpack does;
//!   see the module documentation of `zset`). An integer score is a varint: the difference
//!   from the previous entry's score when that one is an integer too (entries are in
//!   ascending order, so it is never negative; a sliding window's timestamps a few ms apart
//!   take one or two bytes), otherwise the zigzag-encoded value itself.
//! * header bits 1–2: the member is
//!   `0` the decimal text of the integer score itself (no bytes: the sliding-window pattern
//!   `ZADD k <now> <now>` costs a header and a varint per entry),
//!   `1` the canonical decimal text of some other `i64` (a zigzag varint), or
//!   `2` arbitrary bytes (a varint length, then the bytes).
//!
//! "Canonical decimal text" is what Redis's `string2ll` accepts (no sign on positives, no
//! leading zeros, no `-0`), so formatting the integer gives back the member's exact bytes.
//!
//! The buffer is decoded front to back; every operation is O(buffer), like Redis's listpack,
//! which is what keeps small sets small (the default limits are 128 entries of 64 bytes).
//! Members that are integers are handed out as [`Member`] values formatted on the stack.

use std::cmp::Ordering;
use std::ops::{Deref, Range};

use smallvec::SmallVec;

use crate::num::parse_i64;
use crate::store::varint::{Sink, get as get_varint, put as put_varint};

/// One or two entries' encoding on their way into the buffer: on the stack unless a
/// member is long (the default `zset-max-listpack-value` is 64 bytes).
type EntryBuf = SmallVec<[u8; 96]>;

/// Bytes a buffer may keep beyond its length after an edit: a set that gains and loses an
/// entry in turn (a sliding window's add and trim) is then edited in place, without a
/// reallocation each time, for at most this much unused memory.
const SLACK: usize = 16;

use super::{LexRange, Score, ScoreRange};

const SCORE_F64: u8 = 1;
const MEMBER_SHIFT: u8 = 1;
const MEMBER_IS_SCORE: u8 = 0;
const MEMBER_INT: u8 = 1;
const MEMBER_BYTES: u8 = 2;

/// Largest magnitude below which an integral `f64` is stored as an integer (every integer
/// of smaller magnitude is exactly representable).
const EXACT_INT: f64 = 9_007_199_254_740_992.0; // 2^53

/// A member as the sorted-set API hands it out: borrowed bytes, or the decimal text of an
/// integer member of the compact encoding, formatted on the stack. Dereferences to `[u8]`.
#[derive(Clone, Copy)]
pub struct Member<'a>(MemberRepr<'a>);

#[derive(Clone, Copy)]
enum MemberRepr<'a> {
    Bytes(&'a [u8]),
    Int { buf: [u8; 20], len: u8 },
}

impl<'a> Member<'a> {
    pub(super) fn borrowed(b: &'a [u8]) -> Self {
        Member(MemberRepr::Bytes(b))
    }

    fn int(n: i64) -> Self {
        let mut f = itoa::Buffer::new();
        let s = f.format(n).as_bytes();
        let mut buf = [0u8; 20];
        let len = s.len().min(20);
        buf[..len].copy_from_slice(&s[..len]);
        Member(MemberRepr::Int {
            buf,
            len: len as u8,
        })
    }
}

impl Deref for Member<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            MemberRepr::Bytes(b) => b,
            MemberRepr::Int { buf, len } => &buf[..usize::from(*len)],
        }
    }
}

impl AsRef<[u8]> for Member<'_> {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl std::fmt::Debug for Member<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

impl PartialEq for Member<'_> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl PartialEq<[u8]> for Member<'_> {
    fn eq(&self, other: &[u8]) -> bool {
        **self == *other
    }
}

impl PartialEq<&[u8]> for Member<'_> {
    fn eq(&self, other: &&[u8]) -> bool {
        **self == **other
    }
}

impl<const N: usize> PartialEq<&[u8; N]> for Member<'_> {
    fn eq(&self, other: &&[u8; N]) -> bool {
        **self == other[..]
    }
}

/// One decoded entry and where its bytes are in the buffer.
#[derive(Clone, Copy, Debug)]
pub(super) struct Decoded<'a> {
    pub(super) score: Score,
    pub(super) member: Member<'a>,
    pub(super) span: (usize, usize),
}

impl Decoded<'_> {
    #[cfg(test)]
    pub(super) fn cmp_key(&self, score: Score, member: &[u8]) -> Ordering {
        self.score
            .cmp(&score)
            .then_with(|| (*self.member).cmp(member))
    }
}

/// The compact encoding of one sorted set.
#[derive(Clone, Debug, Default)]
pub(super) struct Small {
    buf: Vec<u8>,
    len: u32,
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// The score as an integer, when the compact encoding stores it as one.
/// `-0` is not one: the compact encoding never holds it (its callers store `0`), and the
/// leaves of the `Large` encoding, which keep it, store it as a raw `f64`.
///
/// Tested by a round trip through `i64` rather than `f64::fract`, which is a libm call on
/// every decoded entry (NaN and infinities fail the round trip).
fn int_score(s: f64) -> Option<i64> {
    let n = s as i64;
    (n as f64 == s && s.abs() < EXACT_INT && !(s == 0.0 && s.is_sign_negative())).then_some(n)
}

/// What an entry's integer score is stored against: the previous entry's score when that
/// one is stored as an integer ([`int_score`] of it), else `None` (also for the first
/// entry). Walks carry it as the integer [`decode_raw`] read, so no entry's score is
/// converted back from `f64`.
type Prev = Option<i64>;

/// Appends the encoding of one entry (`score` already compacted: never `-0`) that follows
/// an entry whose integer score is `prev`.
fn encode(out: &mut impl Sink, score: f64, member: &[u8], prev: Prev) {
    let member = match parse_i64(member) {
        Some(m) => RawMember::Int(m),
        None => RawMember::Bytes(member),
    };
    encode_raw(out, score, int_score(score), member, prev);
}

/// [`encode`] of an entry as [`decode_raw`] gave it (`int` is [`int_score`] of `score`, and a
/// `Bytes` member is not the text of an integer), so re-encoding an entry formats and
/// parses nothing.
fn encode_raw(
    out: &mut impl Sink,
    score: f64,
    int: Option<i64>,
    member: RawMember<'_>,
    prev: Prev,
) {
    let member_kind = match (int, member) {
        (Some(s), RawMember::Int(m)) if s == m => MEMBER_IS_SCORE,
        (_, RawMember::Int(_)) => MEMBER_INT,
        (_, RawMember::Bytes(_)) => MEMBER_BYTES,
    };
    let score_kind = if int.is_some() { 0 } else { SCORE_F64 };
    out.put_byte(score_kind | (member_kind << MEMBER_SHIFT));
    match (int, prev) {
        (Some(s), Some(p)) => put_varint(out, s.wrapping_sub(p) as u64),
        (Some(s), None) => put_varint(out, zigzag(s)),
        (None, _) => out.put_bytes(&score.to_le_bytes()),
    }
    match (member_kind, member) {
        (MEMBER_INT, RawMember::Int(m)) => put_varint(out, zigzag(m)),
        (MEMBER_BYTES, RawMember::Bytes(b)) => {
            put_varint(out, b.len() as u64);
            out.put_bytes(b);
        }
        _ => {}
    }
}

/// Decodes the entry at `pos`, which follows an entry whose integer score is `prev`. The
/// buffer is only ever written by [`encode`], so `None` (a truncated entry) does not
/// happen; it ends iteration rather than panicking.
fn decode(buf: &[u8], pos: usize, prev: Prev) -> Option<Decoded<'_>> {
    let (score, _, member, end) = decode_raw(buf, pos, prev)?;
    Some(decoded(score, member, (pos, end)))
}

fn decoded(score: Score, member: RawMember<'_>, span: (usize, usize)) -> Decoded<'_> {
    Decoded {
        score,
        member: match member {
            RawMember::Int(n) => Member::int(n),
            RawMember::Bytes(b) => Member::borrowed(b),
        },
        span,
    }
}

/// A member as stored: integers are not formatted yet.
#[derive(Clone, Copy)]
enum RawMember<'a> {
    Int(i64),
    Bytes(&'a [u8]),
}

/// Decodes the entry at `pos` (see [`decode`]) without formatting an integer member;
/// returns its score, the score as the next entry's [`Prev`], its member and its end.
fn decode_raw(buf: &[u8], pos: usize, prev: Prev) -> Option<(Score, Prev, RawMember<'_>, usize)> {
    let mut p = pos;
    let h = *buf.get(p)?;
    p += 1;
    let (score, int) = if h & SCORE_F64 != 0 {
        let raw: [u8; 8] = buf.get(p..p + 8)?.try_into().ok()?;
        p += 8;
        (f64::from_le_bytes(raw), None)
    } else {
        let v = get_varint(buf, &mut p)?;
        let n = match prev {
            Some(prev) => prev.checked_add(i64::try_from(v).ok()?)?,
            None => unzigzag(v),
        };
        (n as f64, Some(n))
    };
    let member = match h >> MEMBER_SHIFT {
        MEMBER_IS_SCORE => RawMember::Int(int?),
        MEMBER_INT => RawMember::Int(unzigzag(get_varint(buf, &mut p)?)),
        _ => {
            let n = usize::try_from(get_varint(buf, &mut p)?).ok()?;
            let b = buf.get(p..p.checked_add(n)?)?;
            p += n;
            RawMember::Bytes(b)
        }
    };
    Some((Score(score), int, member, p))
}

/// Order of a stored entry against (score, member); an integer member is formatted only when
/// the scores tie, which keeps searches of integer-member buffers cheap.
fn cmp_raw(s: Score, m: RawMember<'_>, score: Score, member: &[u8]) -> Ordering {
    s.cmp(&score).then_with(|| match m {
        RawMember::Bytes(b) => b.cmp(member),
        RawMember::Int(n) => itoa::Buffer::new().format(n).as_bytes().cmp(member),
    })
}

/// Whether a stored member is `member`, whose `parse_i64` is `as_int`: [`encode`] stores a
/// member as an integer exactly when `parse_i64` accepts it, so integers compare as
/// integers and nothing is formatted.
fn is_member(m: RawMember<'_>, as_int: Option<i64>, member: &[u8]) -> bool {
    match (m, as_int) {
        (RawMember::Int(n), Some(q)) => n == q,
        (RawMember::Bytes(b), None) => b == member,
        _ => false,
    }
}

/// Where a key falls in a buffer (see [`Small::seek`]).
pub(super) struct Seek {
    /// Number of entries below the key.
    pub(super) index: usize,
    /// Byte offset of the first entry at or above the key.
    pos: usize,
    /// What that entry's score is stored against.
    prev: Prev,
    /// The stored score of the entry equal to the key, if there is one.
    pub(super) equal: Option<Score>,
}

/// Iterator over the decoded entries, front to back.
pub(super) struct Entries<'a> {
    buf: &'a [u8],
    pos: usize,
    prev: Prev,
}

impl<'a> Iterator for Entries<'a> {
    type Item = Decoded<'a>;

    fn next(&mut self) -> Option<Decoded<'a>> {
        let (score, int, member, end) = decode_raw(self.buf, self.pos, self.prev)?;
        let d = decoded(score, member, (self.pos, end));
        self.pos = end;
        self.prev = int;
        Some(d)
    }
}

impl Small {
    pub(super) fn len(&self) -> usize {
        self.len as usize
    }

    /// Asks the CPU for the buffer's first and last lines.
    pub(super) fn prefetch(&self) {
        if let Some(last) = self.buf.len().checked_sub(1) {
            let p = self.buf.as_ptr();
            crate::store::prefetch::prefetch_line(p);
            crate::store::prefetch::prefetch_line(p.wrapping_add(last));
        }
    }

    /// Heap bytes held.
    pub(super) fn heap_bytes(&self) -> usize {
        self.buf.capacity()
    }

    /// Bytes of encoding.
    pub(super) fn byte_len(&self) -> usize {
        self.buf.len()
    }

    /// A buffer holding `entries`, which must be in strictly ascending order.
    pub(super) fn from_entries<'m>(entries: impl IntoIterator<Item = (Score, &'m [u8])>) -> Self {
        let mut buf = Vec::new();
        let mut prev = None;
        let mut len = 0u32;
        for (score, member) in entries {
            encode(&mut buf, score.0, member, prev);
            prev = int_score(score.0);
            len = len.saturating_add(1);
        }
        buf.shrink_to_fit();
        Small { buf, len }
    }

    /// Appends the entries of `other`, which must all be above this buffer's.
    pub(super) fn append(&mut self, other: &Small) {
        let d = self.decoded();
        let o = other.decoded();
        *self = Small::from_entries(d.iter().chain(o.iter()).map(|e| (e.score, &*e.member)));
    }

    pub(super) fn entries(&self) -> Entries<'_> {
        Entries {
            buf: &self.buf,
            pos: 0,
            prev: None,
        }
    }

    /// Every entry decoded, for the operations that index or walk backwards.
    pub(super) fn decoded(&self) -> Vec<Decoded<'_>> {
        let mut v = Vec::with_capacity(self.len());
        v.extend(self.entries());
        v
    }

    /// The index and entry of `member`. The member is parsed once and compared with integer
    /// entries as an integer ([`is_member`]), rather than every entry's integer formatted
    /// and compared as text: a sliding window's `ZADD` walks the whole set.
    pub(super) fn find(&self, member: &[u8]) -> Option<(usize, Decoded<'_>)> {
        let as_int = parse_i64(member);
        let (mut pos, mut prev, mut index) = (0, None, 0);
        while let Some((_, int, m, end)) = decode_raw(&self.buf, pos, prev) {
            if is_member(m, as_int, member) {
                return decode(&self.buf, pos, prev).map(|d| (index, d));
            }
            pos = end;
            prev = int;
            index += 1;
        }
        None
    }

    /// [`Small::find`]'s score of `member` or, when it is absent, [`Small::seek`]'s place
    /// for (`score`, `member`), for [`Small::insert_at`]: `ZADD`'s two walks of the set in
    /// one.
    pub(super) fn locate(&self, member: &[u8], score: Score) -> Result<Score, Seek> {
        let as_int = parse_i64(member);
        let (mut pos, mut prev, mut index) = (0, None, 0);
        let mut place = None;
        while let Some((s, int, m, end)) = decode_raw(&self.buf, pos, prev) {
            if is_member(m, as_int, member) {
                return Ok(s);
            }
            // Not the member, so never `Equal`: the first entry above is the place.
            if place.is_none() && cmp_raw(s, m, score, member) == Ordering::Greater {
                place = Some(Seek {
                    index,
                    pos,
                    prev,
                    equal: None,
                });
            }
            pos = end;
            prev = int;
            index += 1;
        }
        Err(place.unwrap_or(Seek {
            index,
            pos,
            prev,
            equal: None,
        }))
    }

    /// Where (score, member) falls: the entries below it, and the equal entry if any.
    pub(super) fn seek(&self, score: Score, member: &[u8]) -> Seek {
        let (mut pos, mut prev, mut index) = (0, None, 0);
        while let Some((s, int, m, end)) = decode_raw(&self.buf, pos, prev) {
            match cmp_raw(s, m, score, member) {
                Ordering::Less => {
                    pos = end;
                    prev = int;
                    index += 1;
                }
                Ordering::Equal => {
                    return Seek {
                        index,
                        pos,
                        prev,
                        equal: Some(s),
                    };
                }
                Ordering::Greater => break,
            }
        }
        Seek {
            index,
            pos,
            prev,
            equal: None,
        }
    }

    /// Inserts an entry known to be absent at its place in the order.
    pub(super) fn insert(&mut self, score: Score, member: &[u8]) {
        let at = self.seek(score, member);
        self.insert_at(at, score, member);
    }

    /// [`Small::insert`] at the place [`Small::seek`] or [`Small::locate`] found for it (no
    /// change to the buffer since).
    pub(super) fn insert_at(&mut self, at: Seek, score: Score, member: &[u8]) {
        let next = decode_raw(&self.buf, at.pos, at.prev);
        let mut enc = EntryBuf::new();
        encode(&mut enc, score.0, member, at.prev);
        let (at, end) = match next {
            Some((n, int, m, end)) => {
                // The next entry's score may be a difference from its predecessor's: it now
                // follows the new entry.
                encode_raw(&mut enc, n.0, int, m, int_score(score.0));
                (at.pos, end)
            }
            None => (self.buf.len(), self.buf.len()),
        };
        self.replace(at..end, &enc);
        self.len = self.len.saturating_add(1);
    }

    /// Removes `n` consecutive entries occupying `bytes` (from [`byte_span`] or a
    /// [`Decoded::span`]).
    pub(super) fn remove_span(&mut self, bytes: (usize, usize), n: usize) {
        let (a, b) = bytes;
        if n == 0 || a >= b {
            return;
        }
        // One walk to the gap's end, for what the entries at its two edges are stored against.
        let (mut pos, mut prev, mut before) = (0, None, None);
        while pos < b {
            if pos == a {
                before = prev;
            }
            let Some((_, int, _, end)) = decode_raw(&self.buf, pos, prev) else {
                return;
            };
            pos = end;
            prev = int;
        }
        self.cut(a, before, b, prev, n);
    }

    /// Removes the `n` entries in bytes `a..b`, where the entry at `a` is stored against
    /// `before` and the one at `b` against `last`.
    fn cut(&mut self, a: usize, before: Prev, b: usize, last: Prev, n: usize) {
        let mut enc = EntryBuf::new();
        let mut end = b;
        // The entry after the gap may be a difference from its old predecessor: re-encode it
        // against its new one.
        if let Some((s, int, m, e)) = decode_raw(&self.buf, b, last) {
            encode_raw(&mut enc, s.0, int, m, before);
            end = e;
        }
        self.replace(a..end, &enc);
        self.len = self
            .len
            .saturating_sub(u32::try_from(n).unwrap_or(u32::MAX));
    }

    /// Removes the entries whose scores are in `range` (not empty), in one walk that stops
    /// past the range (`ZREMRANGEBYSCORE`, a sliding window's trim); returns how many.
    pub(super) fn remove_score_range(&mut self, range: &ScoreRange) -> usize {
        let (mut pos, mut prev) = (0, None);
        let mut first = None;
        let mut n = 0;
        while let Some((s, int, _, end)) = decode_raw(&self.buf, pos, prev) {
            if !range.lte_max(s.0) {
                break;
            }
            if range.gte_min(s.0) {
                // In order, so every entry from the first in range to here is in it.
                first.get_or_insert((pos, prev));
                n += 1;
            }
            pos = end;
            prev = int;
        }
        let Some((a, before)) = first else {
            return 0;
        };
        self.cut(a, before, pos, prev, n);
        n
    }

    /// Replaces `range` of the buffer with `with`, in place: the buffer grows to exactly
    /// the size needed, and is shrunk to fit once more than [`SLACK`] bytes are unused.
    fn replace(&mut self, range: Range<usize>, with: &[u8]) {
        if range.start > range.end || range.end > self.buf.len() {
            return;
        }
        let new_len = self.buf.len() - range.len() + with.len();
        if new_len > self.buf.capacity() {
            self.buf.reserve_exact(new_len - self.buf.len());
        }
        self.buf.splice(range, with.iter().copied());
        if self.buf.capacity() - self.buf.len() > SLACK {
            self.buf.shrink_to_fit();
        }
    }

    /// Scores and byte spans of the entries, front to back, without formatting members.
    fn spans(&self) -> impl Iterator<Item = (f64, usize, usize)> + '_ {
        let (mut pos, mut prev) = (0, None);
        std::iter::from_fn(move || {
            let (score, int, _, end) = decode_raw(&self.buf, pos, prev)?;
            let start = pos;
            pos = end;
            prev = int;
            Some((score.0, start, end))
        })
    }

    /// Ascending index range `[lo, hi)` of the entries whose scores are in `range` (not
    /// empty), in one pass that stops past the range.
    pub(super) fn score_span(&self, range: &ScoreRange) -> (usize, usize) {
        let (mut lo, mut hi) = (0, 0);
        for (i, (score, _, _)) in self.spans().enumerate() {
            if !range.gte_min(score) {
                lo = i + 1;
            }
            if !range.lte_max(score) {
                break;
            }
            hi = i + 1;
        }
        (lo, hi.max(lo))
    }

    /// Removes the entries with ascending indexes `lo..hi`; returns how many.
    pub(super) fn remove_ranks(&mut self, lo: usize, hi: usize) -> usize {
        let hi = hi.min(self.len());
        if lo >= hi {
            return 0;
        }
        let (mut start, mut end) = (None, 0);
        for (i, (_, a, b)) in self.spans().enumerate() {
            if i == lo {
                start = Some(a);
            }
            if i + 1 == hi {
                end = b;
                break;
            }
        }
        let Some(start) = start else {
            return 0;
        };
        self.remove_span((start, end), hi - lo);
        hi - lo
    }
}

/// An entry as the commands' replies take it.
pub(super) fn owned(d: &Decoded<'_>) -> (bytes::Bytes, f64) {
    (bytes::Bytes::copy_from_slice(&d.member), d.score.0)
}

/// The byte range covering entries `lo..hi` of `d`.
pub(super) fn byte_span(d: &[Decoded<'_>], lo: usize, hi: usize) -> (usize, usize) {
    match (d.get(lo), hi.checked_sub(1).and_then(|h| d.get(h))) {
        (Some(a), Some(b)) if lo < hi => (a.span.0, b.span.1),
        _ => (0, 0),
    }
}

/// Ascending index range `[lo, hi)` of entries whose scores are in `range` (the tests'
/// reference for [`Small::score_span`]).
#[cfg(test)]
pub(super) fn score_span(d: &[Decoded<'_>], range: &ScoreRange) -> (usize, usize) {
    let lo = d.partition_point(|e| !range.gte_min(e.score.0));
    let hi = d.partition_point(|e| range.lte_max(e.score.0));
    (lo, hi.max(lo))
}

/// Ascending index range `[lo, hi)` of the lexicographic run; see the module documentation
/// of `zset` for sets with mixed scores.
pub(super) fn lex_span(d: &[Decoded<'_>], range: &LexRange, reverse: bool) -> (usize, usize) {
    let (Some(first), Some(last)) = (d.first(), d.last()) else {
        return (0, 0);
    };
    if range.is_empty() || !range.gte_min(&last.member) || !range.lte_max(&first.member) {
        return (0, 0);
    }
    if first.score == last.score {
        // All scores tie, so the entries are sorted by member.
        let lo = d.partition_point(|e| !range.gte_min(&e.member));
        let hi = d.partition_point(|e| range.lte_max(&e.member));
        return (lo, hi.max(lo));
    }
    if reverse {
        let Some(top) = d.iter().rposition(|e| range.lte_max(&e.member)) else {
            return (0, 0);
        };
        let lo = d[..=top]
            .iter()
            .rposition(|e| !range.gte_min(&e.member))
            .map_or(0, |p| p + 1);
        (lo, top + 1)
    } else {
        let Some(lo) = d.iter().position(|e| range.gte_min(&e.member)) else {
            return (0, 0);
        };
        let hi = d[lo..]
            .iter()
            .position(|e| !range.lte_max(&e.member))
            .map_or(d.len(), |p| lo + p);
        (lo, hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(score: f64, member: &[u8]) {
        let mut s = Small::default();
        s.insert(Score(score), member);
        s.insert(Score(score), b"~~~~"); // a second entry after it, encoded as a difference
        let d = s.decoded();
        assert_eq!(d.len(), 2);
        let tail = d[1].span.0;
        assert_eq!(&*d[1].member, b"~~~~");
        s.remove_span(d[1].span, 1);
        assert_eq!(s.buf.len(), tail);
        let d = s.decoded();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].score.0.to_bits(), score.to_bits(), "{score}");
        assert_eq!(&*d[0].member, member);
        assert_eq!(d[0].span, (0, s.buf.len()));
    }

    #[test]
    fn find_compares_integer_members_as_integers_and_finds_what_text_would() {
        let members: [&[u8]; 12] = [
            b"5",
            b"05",
            b"+5",
            b"-0",
            b"0",
            b" 5",
            b"abc",
            b"",
            b"9223372036854775807",
            b"9223372036854775808",
            b"-9223372036854775808",
            b"1700000000000",
        ];
        let mut s = Small::default();
        // Scores that make some members the text of their own score, others not.
        for (i, m) in members.iter().enumerate() {
            let score = parse_i64(m).map_or(i as f64, |n| n as f64);
            s.insert(Score(score), m);
        }
        let all = s.decoded();
        for probe in members
            .iter()
            .chain([&b"6"[..], b"00", b"-1", b"ab"].iter())
        {
            let want = all.iter().position(|d| *d.member == **probe);
            let got = s.find(probe);
            assert_eq!(
                got.map(|(i, _)| i),
                want,
                "{:?}",
                String::from_utf8_lossy(probe)
            );
            if let Some((i, d)) = got {
                assert_eq!(&*d.member, *probe);
                assert_eq!(d.span, all[i].span);
            }
        }
    }

    #[test]
    fn locate_is_find_then_seek() {
        let members: [&[u8]; 8] = [b"1", b"2", b"3", b"a", b"b", b"10", b"-4", b"zz"];
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..300 {
            let mut s = Small::default();
            for m in members {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if !x.is_multiple_of(3) {
                    s.insert(Score((x % 4) as f64), m);
                }
            }
            for m in members.iter().chain([&b"4"[..], b"c"].iter()) {
                for score in [0.0, 1.0, 2.5, 3.0, 9.0] {
                    let score = Score(score);
                    match s.locate(m, score) {
                        Ok(found) => assert_eq!(Some(found), s.find(m).map(|(_, d)| d.score)),
                        Err(place) => {
                            assert!(s.find(m).is_none());
                            let seek = s.seek(score, m);
                            assert_eq!(
                                (place.index, place.pos, place.prev),
                                (seek.index, seek.pos, seek.prev)
                            );
                            let mut a = s.clone();
                            a.insert_at(place, score, m);
                            let mut b = s.clone();
                            b.insert(score, m);
                            assert_eq!(a.buf, b.buf);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn entries_round_trip() {
        for (s, m) in [
            (1_700_000_000_000.0, &b"1700000000000"[..]),
            (1_700_000_000_000.0, b"1700000000001"),
            (0.0, b"0"),
            (0.0, b"-0"),
            (-5.0, b"-5"),
            (1.5, b"1"),
            (f64::INFINITY, b"x"),
            (f64::NEG_INFINITY, b""),
            (9_007_199_254_740_992.0, b"9007199254740992"),
            (-9_007_199_254_740_991.0, b"9223372036854775807"),
            (3.0, b"-9223372036854775808"),
            (3.0, b"03"),
            (3.0, b"+3"),
            (1e300, b"abc"),
            (f64::MIN_POSITIVE, b"a\0b"),
        ] {
            roundtrip(s, m);
        }
    }

    #[test]
    fn sliding_window_entry_is_two_bytes_after_the_first() {
        let mut s = Small::default();
        for i in 0..10u64 {
            let t = 1_700_000_000_000u64 + i * 100;
            s.insert(Score(t as f64), t.to_string().as_bytes());
        }
        assert_eq!(s.len(), 10);
        // 7 bytes for the first (header + 6-byte varint), then header + 100 as a varint.
        assert_eq!(s.buf.len(), 7 + 9 * 2);
        assert_eq!(s.heap_bytes(), s.buf.len());
        // Trimming the front re-encodes the new first entry in full.
        let d = s.decoded();
        let span = byte_span(&d, 0, 3);
        s.remove_span(span, 3);
        let d = s.decoded();
        assert_eq!(d.len(), 7);
        assert_eq!(&*d[0].member, b"1700000000300");
        assert_eq!(s.buf.len(), 7 + 6 * 2);
    }

    #[test]
    fn one_pass_score_span_matches_the_decoded_one() {
        let mut s = Small::default();
        for (score, m) in [(1.0, "a"), (2.0, "b"), (2.0, "c"), (3.5, "d"), (7.0, "e")] {
            s.insert(Score(score), m.as_bytes());
        }
        let bounds = [
            f64::NEG_INFINITY,
            0.0,
            1.0,
            2.0,
            3.0,
            3.5,
            7.0,
            8.0,
            f64::INFINITY,
        ];
        for range in ranges_over(&bounds) {
            assert_eq!(
                s.score_span(&range),
                score_span(&s.decoded(), &range),
                "{range:?}"
            );
        }
    }

    /// Every non-empty score range with ends among `bounds`, each end inclusive or not.
    fn ranges_over(bounds: &[f64]) -> Vec<ScoreRange> {
        let mut out = Vec::new();
        for &min in bounds {
            for &max in bounds {
                for (min_exclusive, max_exclusive) in
                    [(false, false), (true, false), (false, true), (true, true)]
                {
                    let range = ScoreRange {
                        min,
                        max,
                        min_exclusive,
                        max_exclusive,
                    };
                    if !range.is_empty() {
                        out.push(range);
                    }
                }
            }
        }
        out
    }

    /// The one-walk trim leaves what removing the score span by rank leaves, byte for byte,
    /// on sets mixing integer and `f64` scores, integer and byte members.
    #[test]
    fn remove_score_range_is_remove_ranks_of_the_score_span() {
        let entries: [(f64, &str); 9] = [
            (-3.0, "-3"),
            (-1.5, "a"),
            (0.0, "0"),
            (2.0, "b"),
            (2.0, "7"),
            (5.0, "5"),
            (5.25, "c"),
            (9.0, "9"),
            (1e17, "big"),
        ];
        let bounds = [
            f64::NEG_INFINITY,
            -3.0,
            -1.0,
            0.0,
            2.0,
            5.0,
            5.25,
            9.0,
            1e18,
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..40 {
            let mut s = Small::default();
            for (score, m) in entries {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if !x.is_multiple_of(4) {
                    s.insert(Score(score), m.as_bytes());
                }
            }
            for range in ranges_over(&bounds) {
                let (lo, hi) = s.score_span(&range);
                let mut by_rank = s.clone();
                let n = by_rank.remove_ranks(lo, hi);
                // Built afresh from the entries left: the encoding an edit must give.
                let d = s.decoded();
                let left = d
                    .iter()
                    .filter(|e| !(range.gte_min(e.score.0) && range.lte_max(e.score.0)));
                let want = Small::from_entries(left.map(|e| (e.score, &*e.member)));
                let mut got = s.clone();
                assert_eq!(got.remove_score_range(&range), n, "{range:?}");
                assert_eq!(got.buf, want.buf, "{range:?}");
                assert_eq!(by_rank.buf, want.buf, "{range:?}");
                assert_eq!((got.len(), by_rank.len()), (want.len(), want.len()));
            }
        }
    }

    #[test]
    fn a_window_that_adds_and_trims_edits_in_place() {
        let mut s = Small::default();
        let at = |i: u64| 1_700_000_000_000u64 + i * 100;
        for i in 0..10 {
            s.insert(Score(at(i) as f64), at(i).to_string().as_bytes());
        }
        for i in 10..100 {
            s.insert(Score(at(i) as f64), at(i).to_string().as_bytes());
            assert_eq!(s.remove_ranks(0, 1), 1);
            assert!(s.heap_bytes() - s.byte_len() <= SLACK);
        }
        assert_eq!(s.len(), 10);
        let first = s.entries().next().map(|d| d.member.to_vec());
        assert_eq!(first, Some(at(90).to_string().into_bytes()));
    }

    #[test]
    fn truncated_buffer_ends_iteration() {
        let mut s = Small::default();
        s.insert(Score(1.5), b"member");
        for cut in 0..s.buf.len() {
            let t = Small {
                buf: s.buf[..cut].to_vec(),
                len: 1,
            };
            assert_eq!(t.entries().count(), 0);
        }
    }
}
