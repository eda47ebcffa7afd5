//! The `skiplist` encoding's storage: a counted B+tree whose leaves are compact buffers (the
//! `listpack` layout of `small.rs`), plus a hash index from members to scores.
//!
//! # Order: a counted B+tree of packed leaves
//!
//! Each leaf is a [`Small`]: up to [`LEAF_MAX`] entries (or [`LEAF_MAX_BYTES`] of encoding)
//! packed in (score, member) order, so a sliding window's `ZADD k <now> <now>` entry costs
//! about two bytes, as in the compact encoding. Inner nodes hold up to [`FANOUT`] children,
//! each with the number of entries below it (for O(log n) rank) and a separator key: every
//! key in a child is `>=` its separator and `<` the next child's (the first child's
//! separator is never read). Separators stay valid when entries are removed, so removal
//! never has to update them. A leaf is decoded whole when touched: O(leaf) work per
//! operation, bounded by the leaf limits.
//!
//! Removal merges adjacent underfull siblings of the same parent and drops empty children;
//! the root collapses while it has one child. Whole ranges of ranks are removed in one
//! descent (`ZREMRANGEBYSCORE` of a window's oldest entries touches the first leaves only).
//!
//! # Member index
//!
//! A `hashbrown` table of 12-byte records (a 32-bit hash of the member and the exact bits of
//! its score). A record matches a member when the hash matches and the tree holds
//! (score, member); two members with equal hash and score give identical records, so
//! removing any one of them is right. An entry whose member is the decimal text of its own
//! integral score (the sliding-window pattern) has no record at all: looking a member up
//! first tries the tree at (member as a number, member). The hash is keyed per process
//! ([`std::hash::RandomState`]), so clients cannot aim collisions.

use std::cmp::Ordering;
use std::hash::{BuildHasher, RandomState};
use std::sync::OnceLock;

use hashbrown::HashTable;

use crate::num::parse_i64;

use super::Score;
use super::small::{Decoded, Small, byte_span};

/// Most entries in one leaf (kept small under test so that splits and merges happen). Every
/// operation decodes one leaf up to its key, so this trades speed (a search decodes half a
/// leaf on average) against the per-leaf overhead of about 120 bytes (node slot, separator,
/// allocation): at 32, leaves average 16 to 32 entries, 4 to 8 bytes of overhead an entry.
#[cfg(not(test))]
const LEAF_MAX: usize = 32;
#[cfg(test)]
const LEAF_MAX: usize = 4;
/// Most encoded bytes in one leaf holding two entries or more.
#[cfg(not(test))]
const LEAF_MAX_BYTES: usize = 2048;
#[cfg(test)]
const LEAF_MAX_BYTES: usize = 48;
/// A leaf below this many entries is merged with a neighbour when the two fit in one.
const LEAF_MIN: usize = LEAF_MAX / 4 + 1;
/// Most children of an inner node.
#[cfg(not(test))]
const FANOUT: usize = 64;
#[cfg(test)]
const FANOUT: usize = 4;
/// An inner node below this many children is merged with a neighbour when the two fit.
const FANOUT_MIN: usize = FANOUT / 4 + 1;

/// Largest magnitude below which an integral score is an exact integer.
const EXACT_INT: f64 = 9_007_199_254_740_992.0; // 2^53

/// A separator key of an inner node.
#[derive(Clone, Debug)]
struct Sep {
    score: Score,
    member: Box<[u8]>,
}

impl Sep {
    fn cmp_key(&self, score: Score, member: &[u8]) -> Ordering {
        self.score
            .cmp(&score)
            .then_with(|| (*self.member).cmp(member))
    }
}

#[derive(Clone, Debug)]
struct Child {
    sep: Sep,
    count: usize,
    node: Node,
}

#[derive(Clone, Debug)]
enum Node {
    Leaf(Small),
    Inner(Vec<Child>),
}

impl Node {
    fn count(&self) -> usize {
        match self {
            Node::Leaf(s) => s.len(),
            Node::Inner(kids) => kids.iter().map(|c| c.count).sum(),
        }
    }
}

/// One index record: the member's 32-bit hash and its score's bits (12 bytes, align 4).
#[derive(Clone, Copy, Debug)]
struct Rec {
    hash: u32,
    score: [u32; 2],
}

impl Rec {
    fn new(hash: u32, score: Score) -> Self {
        let b = score.0.to_bits();
        Rec {
            hash,
            score: [b as u32, (b >> 32) as u32],
        }
    }

    fn score_bits(&self) -> u64 {
        u64::from(self.score[0]) | (u64::from(self.score[1]) << 32)
    }

    fn score(&self) -> Score {
        Score(f64::from_bits(self.score_bits()))
    }
}

fn member_hash(member: &[u8]) -> u32 {
    static KEYS: OnceLock<RandomState> = OnceLock::new();
    let h = KEYS.get_or_init(RandomState::new).hash_one(member);
    (h ^ (h >> 32)) as u32
}

/// The table's 64-bit hash from a record's 32 bits: the multiplication moves entropy into the
/// top bits, which `hashbrown` uses as the control byte, and keeps the low bits distinct.
fn spread(h: u32) -> u64 {
    u64::from(h).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Whether `member` is the decimal text of its own integral score (such entries have no
/// index record; `-0` is not: its member `0` would be looked up at score `0`).
fn self_scored(score: Score, member: &[u8]) -> bool {
    self_score(member).is_some_and(|s| s.0.to_bits() == score.0.to_bits())
}

/// The score a self-scored `member` would have.
fn self_score(member: &[u8]) -> Option<Score> {
    let n = parse_i64(member)?;
    let f = n as f64;
    (f.abs() < EXACT_INT).then_some(Score(f))
}

/// The `Large` encoding: the tree, its entry count and the member index.
#[derive(Clone, Debug)]
pub(super) struct Large {
    root: Node,
    len: usize,
    index: HashTable<Rec>,
}

impl Default for Large {
    fn default() -> Self {
        Large {
            root: Node::Leaf(Small::default()),
            len: 0,
            index: HashTable::new(),
        }
    }
}

/// Index of the child of `kids` whose key range holds (score, member).
fn route(kids: &[Child], score: Score, member: &[u8]) -> usize {
    kids.get(1..).map_or(0, |rest| {
        rest.partition_point(|c| c.sep.cmp_key(score, member) != Ordering::Greater)
    })
}

fn leaf_too_big(s: &Small) -> bool {
    s.len() > LEAF_MAX || (s.len() >= 2 && s.byte_len() > LEAF_MAX_BYTES)
}

fn insert_rec(node: &mut Node, score: Score, member: &[u8]) -> Option<(Sep, Node)> {
    match node {
        Node::Leaf(s) => {
            s.insert(score, member);
            if !leaf_too_big(s) {
                return None;
            }
            let d = s.decoded();
            let mid = d.len() / 2;
            let sep = d.get(mid).map(|e| Sep {
                score: e.score,
                member: e.member.to_vec().into_boxed_slice(),
            })?;
            let left = Small::from_entries(d[..mid].iter().map(|e| (e.score, &*e.member)));
            let right = Small::from_entries(d[mid..].iter().map(|e| (e.score, &*e.member)));
            *s = left;
            Some((sep, Node::Leaf(right)))
        }
        Node::Inner(kids) => {
            let i = route(kids, score, member);
            let c = kids.get_mut(i)?;
            c.count += 1;
            let (sep, right) = insert_rec(&mut c.node, score, member)?;
            c.count = c.node.count();
            let count = right.count();
            kids.insert(
                i + 1,
                Child {
                    sep,
                    count,
                    node: right,
                },
            );
            if kids.len() <= FANOUT {
                return None;
            }
            let rk = kids.split_off(kids.len() / 2);
            let sep = rk.first()?.sep.clone();
            Some((sep, Node::Inner(rk)))
        }
    }
}

/// Removes ascending ranks `lo..hi` below `node`, telling `gone` every removed entry.
fn remove_rec(node: &mut Node, lo: usize, hi: usize, gone: &mut dyn FnMut(Score, &[u8])) {
    match node {
        Node::Leaf(s) => {
            let d = s.decoded();
            let hi = hi.min(d.len());
            if lo >= hi {
                return;
            }
            for e in &d[lo..hi] {
                gone(e.score, &e.member);
            }
            let span = byte_span(&d, lo, hi);
            s.remove_span(span, hi - lo);
        }
        Node::Inner(kids) => {
            let mut off = 0;
            for c in kids.iter_mut() {
                let (a, b) = (off, off + c.count);
                off = b;
                if b <= lo || a >= hi {
                    continue;
                }
                remove_rec(&mut c.node, lo.saturating_sub(a), hi.min(b) - a, gone);
                c.count = c.node.count();
                if off >= hi {
                    break;
                }
            }
            tidy(kids);
        }
    }
}

/// Drops empty children (keeping one) and merges adjacent underfull siblings that fit in one.
fn tidy(kids: &mut Vec<Child>) {
    if kids.iter().all(|c| c.count == 0) {
        kids.truncate(1);
    } else {
        kids.retain(|c| c.count > 0);
    }
    let mut i = 0;
    while i + 1 < kids.len() {
        let merge = match (&kids[i].node, &kids[i + 1].node) {
            (Node::Leaf(a), Node::Leaf(b)) => {
                (a.len() < LEAF_MIN || b.len() < LEAF_MIN)
                    && a.len() + b.len() <= LEAF_MAX
                    && a.byte_len() + b.byte_len() <= LEAF_MAX_BYTES
            }
            (Node::Inner(a), Node::Inner(b)) => {
                (a.len() < FANOUT_MIN || b.len() < FANOUT_MIN) && a.len() + b.len() <= FANOUT
            }
            _ => false,
        };
        if !merge {
            i += 1;
            continue;
        }
        let right = kids.remove(i + 1);
        let left = &mut kids[i];
        match (&mut left.node, right.node) {
            (Node::Leaf(a), Node::Leaf(b)) => a.append(&b),
            (Node::Inner(a), Node::Inner(mut b)) => {
                // `b`'s first separator was never read; the parent's separator of `b` is
                // a valid one for it.
                if let Some(first) = b.first_mut() {
                    first.sep = right.sep;
                }
                a.append(&mut b);
            }
            _ => {}
        }
        left.count = left.node.count();
    }
}

fn collect<'a>(node: &'a Node, lo: usize, hi: usize, out: &mut Vec<Decoded<'a>>) {
    match node {
        Node::Leaf(s) => out.extend(s.entries().skip(lo).take(hi.saturating_sub(lo))),
        Node::Inner(kids) => {
            let mut off = 0;
            for c in kids {
                let (a, b) = (off, off + c.count);
                off = b;
                if b > lo && a < hi {
                    collect(&c.node, lo.saturating_sub(a), hi.min(b) - a, out);
                }
                if off >= hi {
                    break;
                }
            }
        }
    }
}

impl Large {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The stored score of the entry equal to (score, member), if there is one.
    fn tree_find(&self, score: Score, member: &[u8]) -> Option<Score> {
        let mut node = &self.root;
        loop {
            match node {
                Node::Inner(kids) => node = &kids.get(route(kids, score, member))?.node,
                Node::Leaf(s) => return s.seek(score, member).equal,
            }
        }
    }

    /// The score of `member`.
    pub(super) fn score(&self, member: &[u8]) -> Option<Score> {
        if let Some(s) = self_score(member)
            && let Some(found) = self.tree_find(s, member)
        {
            return Some(found);
        }
        let h = member_hash(member);
        self.index
            .find(spread(h), |r| {
                r.hash == h && self.tree_find(r.score(), member).is_some()
            })
            .map(Rec::score)
    }

    /// Number of entries below (score, member), or at or below it when `inclusive`.
    pub(super) fn rank_of(&self, score: Score, member: &[u8], inclusive: bool) -> usize {
        let mut node = &self.root;
        let mut base = 0;
        loop {
            match node {
                Node::Inner(kids) => {
                    let i = route(kids, score, member);
                    base += kids.iter().take(i).map(|c| c.count).sum::<usize>();
                    match kids.get(i) {
                        Some(c) => node = &c.node,
                        None => return base,
                    }
                }
                Node::Leaf(s) => {
                    let at = s.seek(score, member);
                    return base + at.index + usize::from(inclusive && at.equal.is_some());
                }
            }
        }
    }

    /// Number of entries with scores below `s`.
    pub(super) fn count_below(&self, s: f64) -> usize {
        self.rank_of(Score(s), b"", false)
    }

    /// Number of entries with scores at or below `s`.
    pub(super) fn count_at_or_below(&self, s: f64) -> usize {
        if s == f64::INFINITY {
            self.len
        } else {
            self.count_below(s.next_up())
        }
    }

    /// The entry at ascending `rank`.
    pub(super) fn at(&self, mut rank: usize) -> Option<Decoded<'_>> {
        let mut node = &self.root;
        loop {
            match node {
                Node::Inner(kids) => {
                    let mut next = None;
                    for c in kids {
                        if rank < c.count {
                            next = Some(&c.node);
                            break;
                        }
                        rank -= c.count;
                    }
                    node = next?;
                }
                Node::Leaf(s) => return s.entries().nth(rank),
            }
        }
    }

    /// The entries with ascending ranks `lo..hi`, in order.
    pub(super) fn range(&self, lo: usize, hi: usize) -> Vec<Decoded<'_>> {
        let hi = hi.min(self.len);
        let mut out = Vec::with_capacity(hi.saturating_sub(lo));
        if lo < hi {
            collect(&self.root, lo, hi, &mut out);
        }
        out
    }

    /// Adds an entry whose member is known to be absent.
    pub(super) fn insert(&mut self, score: Score, member: &[u8]) {
        if let Some((sep, right)) = insert_rec(&mut self.root, score, member) {
            let left = std::mem::replace(&mut self.root, Node::Leaf(Small::default()));
            let (lc, rc) = (left.count(), right.count());
            self.root = Node::Inner(vec![
                Child {
                    sep: sep.clone(),
                    count: lc,
                    node: left,
                },
                Child {
                    sep,
                    count: rc,
                    node: right,
                },
            ]);
        }
        self.len += 1;
        if !self_scored(score, member) {
            let h = member_hash(member);
            self.index
                .insert_unique(spread(h), Rec::new(h, score), |r| spread(r.hash));
        }
    }

    /// Removes ascending ranks `lo..hi`; returns how many entries went.
    pub(super) fn remove_ranks(&mut self, lo: usize, hi: usize) -> usize {
        let hi = hi.min(self.len);
        if lo >= hi {
            return 0;
        }
        let Large { root, index, len } = self;
        remove_rec(root, lo, hi, &mut |score, member| {
            if self_scored(score, member) {
                return;
            }
            let h = member_hash(member);
            let bits = score.0.to_bits();
            if let Ok(e) = index.find_entry(spread(h), |r| r.hash == h && r.score_bits() == bits) {
                e.remove();
            }
        });
        while let Node::Inner(kids) = root
            && kids.len() <= 1
        {
            match kids.pop() {
                Some(c) => *root = c.node,
                None => *root = Node::Leaf(Small::default()),
            }
        }
        let before = *len;
        *len = root.count();
        if index.capacity() > 64 && index.capacity() / 4 > index.len() {
            index.shrink_to_fit(|r| spread(r.hash));
        }
        before - *len
    }

    /// Removes `member`; returns its score if it was there.
    pub(super) fn remove(&mut self, member: &[u8]) -> Option<Score> {
        let score = self.score(member)?;
        let r = self.rank_of(score, member, false);
        self.remove_ranks(r, r + 1);
        Some(score)
    }

    /// Heap bytes held (leaves, nodes, separators and the index).
    pub(super) fn heap_bytes(&self) -> usize {
        fn node_bytes(n: &Node) -> usize {
            match n {
                Node::Leaf(s) => s.heap_bytes(),
                Node::Inner(kids) => {
                    kids.capacity() * std::mem::size_of::<Child>()
                        + kids
                            .iter()
                            .map(|c| c.sep.member.len() + node_bytes(&c.node))
                            .sum::<usize>()
                }
            }
        }
        let buckets = if self.index.capacity() == 0 {
            0
        } else {
            (self.index.capacity() * 8 / 7).next_power_of_two()
        };
        node_bytes(&self.root) + buckets * (std::mem::size_of::<Rec>() + 1)
    }

    /// Height of the tree (tests only): 1 for a lone leaf.
    #[cfg(test)]
    pub(super) fn height(&self) -> usize {
        let mut h = 1;
        let mut node = &self.root;
        while let Node::Inner(kids) = node {
            h += 1;
            match kids.first() {
                Some(c) => node = &c.node,
                None => break,
            }
        }
        h
    }

    /// Checks the structure (tests only): counts, order across leaves, separators, and the
    /// index holding exactly the entries that need a record.
    #[cfg(test)]
    pub(super) fn check(&self) {
        fn walk(n: &Node, lower: Option<(Score, Vec<u8>)>, upper: Option<(Score, Vec<u8>)>) {
            match n {
                Node::Leaf(s) => {
                    assert!(s.len() <= LEAF_MAX, "leaf too large");
                    for e in s.entries() {
                        if let Some((ls, lm)) = &lower {
                            assert_ne!(e.cmp_key(*ls, lm), Ordering::Less, "below separator");
                        }
                        if let Some((us, um)) = &upper {
                            assert_eq!(e.cmp_key(*us, um), Ordering::Less, "above separator");
                        }
                    }
                }
                Node::Inner(kids) => {
                    assert!(!kids.is_empty() && kids.len() <= FANOUT, "fan-out");
                    for (i, c) in kids.iter().enumerate() {
                        assert_eq!(c.count, c.node.count(), "child count");
                        let lo = if i == 0 {
                            lower.clone()
                        } else {
                            Some((c.sep.score, c.sep.member.to_vec()))
                        };
                        let hi = kids
                            .get(i + 1)
                            .map(|n| (n.sep.score, n.sep.member.to_vec()))
                            .or_else(|| upper.clone());
                        walk(&c.node, lo, hi);
                    }
                }
            }
        }
        walk(&self.root, None, None);
        assert_eq!(self.len, self.root.count(), "len");
        let all = self.range(0, self.len);
        assert_eq!(all.len(), self.len);
        for w in all.windows(2) {
            assert_eq!(w[0].cmp_key(w[1].score, &w[1].member), Ordering::Less);
        }
        let need = all
            .iter()
            .filter(|e| !self_scored(e.score, &e.member))
            .count();
        assert_eq!(self.index.len(), need, "index size");
        for e in &all {
            let s = self.score(&e.member).expect("member not found");
            assert_eq!(s.0.to_bits(), e.score.0.to_bits());
        }
    }
}
