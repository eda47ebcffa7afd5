//! White-box tests of the sorted set: its internal invariants, the scan cursor encoding, the
//! score-bound parser against glibc's `strtod`, and a model-based run of random operations
//! that checks the representation after every step. Tests of the public behaviour alone are in
//! `tests/it/zset_store.rs`.

use std::cmp::Ordering;

use bytes::Bytes;
use proptest::prelude::*;

use super::bounds::parse_range_item;
use super::iter::{cursor_to_score, score_to_cursor};
use super::*;
use crate::num::parse_double;

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

fn names(v: &[(Bytes, f64)]) -> Vec<String> {
    v.iter()
        .map(|(m, _)| String::from_utf8_lossy(m).into_owned())
        .collect()
}

fn check_invariants(z: &SortedSet) {
    match &z.repr {
        Repr::Small(small) => {
            let d = small.decoded();
            assert_eq!(d.len(), small.len(), "entry count");
            for w in d.windows(2) {
                assert_eq!(
                    w[0].cmp_key(w[1].score, &w[1].member),
                    std::cmp::Ordering::Less,
                    "small not strictly sorted"
                );
            }
            assert!(d.iter().all(|e| e.score.0.to_bits() != (-0.0f64).to_bits()));
        }
        Repr::Large(l) => l.check(),
    }
    assert!(z.iter().all(|(_, s)| !s.is_nan()));
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
        .map(|(m, s)| (Bytes::copy_from_slice(&m), s))
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
fn strtod_agrees_with_c_library() {
    for &(input, strict, item) in PARSE_TABLE {
        let got = parse_double(input).map(f64::to_bits);
        assert_eq!(
            got,
            strict,
            "parse_double({:?})",
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
    /// Rebuilds the set the way RESTORE of a `skiplist` dump does (highest first into a set
    /// made for that many entries): a large set that fits the limits comes back compact.
    Reload,
}

fn member_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::collection::vec(
            prop::sample::select(vec![b'a', b'b', b'c', 0u8, 0xff]),
            0..5,
        ),
        // Members the compact encoding stores as integers (some equal to a score of
        // score_strategy), and near misses it must keep as bytes.
        2 => prop::sample::select(vec![
            "0", "1", "-1", "3", "-4", "1700000000000", "9007199254740992",
            "9223372036854775807", "-9223372036854775808", "-0", "01", "+1", "1.0", " 1",
            "9223372036854775808",
        ])
        .prop_map(|m| m.as_bytes().to_vec()),
    ]
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
                1_700_000_000_000.0,
                9_007_199_254_740_992.0,
                -9_007_199_254_740_991.0,
                1e20,
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
        1 => Just(Op::Reload),
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
            Op::Reload => {
                let entries: Vec<(Vec<u8>, f64)> =
                    z.iter().rev().map(|(m, s)| (m.to_vec(), s)).collect();
                z = SortedSet::with_expected_len(entries.len(), &limits);
                let old = std::mem::take(&mut model);
                model.large = old.v.len() > limits.max_listpack_entries;
                for (m, s) in &entries {
                    assert_eq!(z.insert(m, *s, &limits), Ok(InsertOutcome::Added));
                    model.put(m, *s, &limits);
                }
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
        let got: Vec<(Vec<u8>, u64)> = z.iter().map(|(m, s)| (m.to_vec(), s.to_bits())).collect();
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
    (0usize..10, prop_oneof![0usize..5, 12usize..22, Just(64)]).prop_map(|(e, v)| ZsetLimits {
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
        let _ = parse_double(&arg);
        let _ = ScoreRange::parse(&arg, &arg);
        let _ = LexRange::parse(&arg, &arg);
    }

}

/// One row of [`PARSE_TABLE`]: input, `parse_double` result bits, range-item result.
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

// Long runs: under test the large encoding's leaves hold 4 entries and its inner nodes 4
// children, so sets of a few dozen entries have trees three or four levels deep, and these
// runs split, merge and collapse nodes many times (the tree is checked after every step).
proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn matches_model_long_runs_mixed(limits in limits_strategy(),
                                     ops in prop::collection::vec(op_strategy(false), 200..600)) {
        run_ops(limits, ops);
    }

    #[test]
    fn matches_model_long_runs_equal(limits in limits_strategy(),
                                     ops in prop::collection::vec(op_strategy(true), 200..600)) {
        run_ops(limits, ops);
    }

    #[test]
    fn sliding_window_matches_model(limits in limits_strategy(),
                                    steps in prop::collection::vec((1u64..50, 0usize..4, 0u64..400), 50..400)) {
        sliding_window(limits, steps);
    }
}

/// The sliding-window pattern: `ZADD k <now> <now>` (members that are their own scores, which
/// the large encoding keeps out of its index) with a clock that moves forward, a trim of the
/// entries older than a window, and now and then a member re-added with another score.
fn sliding_window(limits: ZsetLimits, steps: Vec<(u64, usize, u64)>) {
    let mut z = SortedSet::new();
    let mut model = Model::default();
    let mut now = 1_700_000_000_000u64;
    for (dt, adds, window) in steps {
        now += dt;
        for i in 0..adds as u64 {
            let t = now + i;
            let m = t.to_string();
            let s = if i == 3 { (t - 7) as f64 } else { t as f64 };
            let want = model.add(m.as_bytes(), s, AddFlags::default(), &limits);
            assert_eq!(z.add(m.as_bytes(), s, AddFlags::default(), &limits), want);
        }
        let r = ScoreRange::inclusive(f64::NEG_INFINITY, now.saturating_sub(window) as f64);
        let before = model.v.len();
        model.v.retain(|e| !r.contains(e.0));
        assert_eq!(z.remove_range_by_score(&r), before - model.v.len());
        let last = model.v.len().checked_sub(1);
        if let Some(i) = last {
            let m = model.v[i].1.clone();
            assert_eq!(z.rank(&m, false), Some(i));
        }
        assert_eq!(z.len(), model.v.len());
        check_invariants(&z);
    }
    let got: Vec<(Vec<u8>, u64)> = z.iter().map(|(m, s)| (m.to_vec(), s.to_bits())).collect();
    assert_eq!(got, model.pairs(0..model.v.len()));
}

#[test]
fn large_tree_grows_and_shrinks() {
    let mut z = SortedSet::new();
    // A permutation of 0..500 (37 is coprime with 500), members partly self-scored.
    let keys: Vec<u64> = (0..500u64).map(|i| (i * 37) % 500).collect();
    for &k in &keys {
        let m = if k % 3 == 0 {
            format!("m{k}")
        } else {
            k.to_string()
        };
        z.insert(m.as_bytes(), k as f64, &LARGE).unwrap();
    }
    let Repr::Large(l) = &z.repr else {
        panic!("not large")
    };
    assert!(l.height() >= 4, "height {}", l.height());
    l.check();
    for k in 0..500u64 {
        let m = if k % 3 == 0 {
            format!("m{k}")
        } else {
            k.to_string()
        };
        assert_eq!(z.rank(m.as_bytes(), false), Some(k as usize));
        assert_eq!(z.score(m.as_bytes()), Some(k as f64));
    }
    // Trim the front in windows, remove single members from the middle, pop from the back.
    let mut left = 500;
    for step in 0..20 {
        let cut = (step * 10 + 9) as f64;
        left -= z.remove_range_by_score(&ScoreRange::inclusive(f64::NEG_INFINITY, cut));
        assert!(z.remove(b"400") || step > 0);
        left -= usize::from(step == 0);
        left -= z.pop(3, true).len();
        assert_eq!(z.len(), left);
        check_invariants(&z);
    }
    assert_eq!(z.remove_range_by_rank(0, -1), left);
    let Repr::Large(l) = &z.repr else {
        panic!("not large")
    };
    assert_eq!(l.height(), 1);
    l.check();
}
