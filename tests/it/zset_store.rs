//! The sorted-set value (`sluice::store::zset`) through its public API, in both encodings:
//! order, `ZADD` flag semantics, ranges by rank, score and lex, pops, iteration, scans,
//! conversion between encodings and the range parsers. (The white-box tests, which look at
//! the representation, are beside the code in `src/store/zset/tests.rs`.)

use bytes::Bytes;
use sluice::num::format_double;
use sluice::store::zset::*;

/// What the public API can see of the invariants: entries strictly ascending (score, then
/// member bytes), no NaN, and `len` agreeing with the iterator both ways.
fn check_order(z: &SortedSet) {
    let v: Vec<(Vec<u8>, f64)> = z.iter().map(|(m, s)| (m.to_vec(), s)).collect();
    for w in v.windows(2) {
        let ord = w[0]
            .1
            .partial_cmp(&w[1].1)
            .map(|o| o.then_with(|| w[0].0.cmp(&w[1].0)));
        assert_eq!(ord, Some(std::cmp::Ordering::Less), "not strictly sorted");
    }
    assert!(v.iter().all(|(_, s)| !s.is_nan()));
    assert_eq!(v.len(), z.len());
    assert_eq!(z.iter().rev().count(), z.len());
}

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

/// `member_at` with the member copied out, for comparisons.
fn at(z: &SortedSet, rank: usize) -> Option<(Vec<u8>, f64)> {
    z.member_at(rank).map(|(m, s)| (m.to_vec(), s))
}

fn members(z: &SortedSet) -> Vec<String> {
    z.iter()
        .map(|(m, _)| String::from_utf8_lossy(&m).into_owned())
        .collect()
}

fn fmt(x: f64) -> String {
    let mut v = Vec::new();
    format_double(x, &mut v);
    String::from_utf8(v).unwrap()
}

fn sr(min: &str, max: &str) -> ScoreRange {
    ScoreRange::parse(min.as_bytes(), max.as_bytes()).unwrap()
}

fn lr(min: &str, max: &str) -> LexRange {
    LexRange::parse(min.as_bytes(), max.as_bytes()).unwrap()
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
    assert_eq!(at(&z, 0), None);
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
            check_order(&z);
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
        let got: Vec<Vec<u8>> = z.iter().map(|(m, _)| m.to_vec()).collect();
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
    check_order(&large);
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
        check_order(&z);
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
        check_order(&z);
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
        check_order(&z);
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
        check_order(&z);
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
        assert_eq!(at(&z, 299).unwrap().0, b"m299".to_vec());
        assert_eq!(at(&z, 10).unwrap().0, b"m010".to_vec());
        assert_eq!(at(&z, 200).unwrap(), (b"m200".to_vec(), 200.0));
        assert_eq!(at(&z, 300), None);
        assert_eq!(z.rank(b"m250", false), Some(250));
        assert_eq!(z.rank(b"m010", true), Some(289));
    });
}

#[test]
fn member_at_and_members_at() {
    both(ABC, |z| {
        assert_eq!(at(&z, 0), Some((b"a".to_vec(), 1.0)));
        assert_eq!(at(&z, 4), Some((b"e".to_vec(), 5.0)));
        assert_eq!(at(&z, 5), None);
        assert_eq!(at(&z, usize::MAX), None);
        let picked = z.members_at(&[4, 0, 4, 9, 2, usize::MAX, 1]);
        let got: Vec<&[u8]> = picked.iter().map(|p| &*p.0).collect();
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
            check_order(&z);
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
            let r = |min: &str, max: &str| names(&z.range_by_score(&sr(min, max), false, 0, -1));
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
            check_order(&z);
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
            check_order(&z);
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
        check_order(&z);
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
            assert!(seen.contains(&*m));
        }
    }
    assert!(seen.contains(&b"m39"[..]));
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
    check_order(&z);
    assert_eq!(at(&z, 128).unwrap(), (b"m5".to_vec(), 1000.0));
    assert_eq!(at(&z, 0).unwrap(), (b"m0".to_vec(), 0.0));
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
    check_order(&z);
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
        check_order(&z);
    }
    // 1000 ms window / 7 ms per request: 142 or 143 entries, so it converted once.
    assert_eq!(z.encoding(), "skiplist");
    let mut s = Vec::new();
    format_double(z.score(b"req-999").unwrap(), &mut s);
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
