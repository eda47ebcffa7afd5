//! Unit tests of the sorted-set commands' parsing and replies.

use super::*;

fn args(words: &[&str]) -> Vec<Bytes> {
    words
        .iter()
        .map(|w| Bytes::copy_from_slice(w.as_bytes()))
        .collect()
}

fn range(
    words: &[&str],
    store: bool,
    kind: Option<Kind>,
    rev: Option<bool>,
) -> CmdResult<RangeQuery> {
    let v = args(words);
    RangeQuery::parse(
        &mut ArgCursor::new(&crate::engine::args::borrowed(&v)),
        store,
        kind,
        rev,
    )
}

#[test]
fn scan_cursors_follow_strtoul() {
    assert_eq!(parse_scan_cursor(b"0"), Ok(0));
    assert_eq!(parse_scan_cursor(b""), Ok(0));
    assert_eq!(parse_scan_cursor(b"+7"), Ok(7));
    assert_eq!(parse_scan_cursor(b"-1"), Ok(u64::MAX));
    assert_eq!(parse_scan_cursor(b"-0"), Ok(0));
    assert_eq!(parse_scan_cursor(b"18446744073709551615"), Ok(u64::MAX));
    assert_eq!(parse_scan_cursor(b"-18446744073709551615"), Ok(1));
    assert_eq!(parse_scan_cursor(b"12\x00junk"), Ok(12));
    for bad in [
        &b"18446744073709551616"[..],
        b"-18446744073709551616",
        b" 0",
        b"0 ",
        b"+",
        b"-",
        b"0x10",
        b"abc",
    ] {
        assert!(parse_scan_cursor(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn range_options_in_redis_order() {
    let q = range(
        &[
            "k",
            "(1",
            "+inf",
            "BYSCORE",
            "LIMIT",
            "1",
            "2",
            "WITHSCORES",
        ],
        false,
        None,
        None,
    )
    .expect("valid");
    assert_eq!(
        q.by,
        RangeBy::Score(ScoreRange::parse(b"(1", b"+inf").expect("bounds"))
    );
    assert_eq!(
        (q.offset, q.count, q.withscores, q.reverse),
        (1, 2, true, false)
    );
    // REV swaps the bounds of score and lex ranges only.
    let q = range(&["k", "5", "1", "byscore", "rev"], false, None, None).expect("valid");
    assert_eq!(q.by, RangeBy::Score(ScoreRange::inclusive(1.0, 5.0)));
    let q = range(&["k", "5", "1", "rev"], false, None, None).expect("valid");
    assert_eq!(q.by, RangeBy::Rank(5, 1));
    // LIMIT with count -1 is accepted (and ignored) by rank.
    assert!(range(&["k", "0", "-1", "limit", "3", "-1"], false, None, None).is_ok());
    let err = |r: CmdResult<RangeQuery>| r.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        err(range(
            &["k", "0", "-1", "limit", "0", "1"],
            false,
            None,
            None
        ))
        .contains("LIMIT is only")
    );
    assert!(
        err(range(
            &["k", "a", "b", "bylex", "withscores"],
            false,
            None,
            None
        ))
        .contains("WITHSCORES not")
    );
    // Options are checked before the bounds.
    assert_eq!(
        err(range(&["k", "x", "y", "foo"], false, None, None)),
        "ERR syntax error"
    );
    assert_eq!(
        err(range(&["k", "0", "1", "rev", "rev"], false, None, None)),
        "ERR syntax error"
    );
    assert_eq!(
        err(range(&["k", "0", "1", "withscores"], true, None, None)),
        "ERR syntax error"
    );
    assert_eq!(
        err(range(
            &["k", "0", "1", "rev"],
            false,
            Some(Kind::Score),
            Some(false)
        )),
        "ERR syntax error"
    );
    assert_eq!(
        err(range(&["k", "x", "1"], false, None, None)),
        CmdError::NotInteger.to_string()
    );
    assert_eq!(
        err(range(&["k", "x", "1", "byscore"], false, None, None)),
        "ERR min or max is not a float"
    );
    assert_eq!(
        err(range(&["k", "x", "1", "bylex"], false, None, None)),
        "ERR min or max not valid string range item"
    );
}

#[test]
fn scored_replies_per_protocol() {
    let items = vec![(Bytes::from_static(b"a"), 1.5)];
    assert_eq!(
        scored_reply(items.clone(), true, 2),
        Reply::Array(vec![Reply::bulk(b"a"), Reply::Double(1.5)])
    );
    assert_eq!(
        scored_reply(items.clone(), true, 3),
        Reply::Array(vec![Reply::Array(vec![
            Reply::bulk(b"a"),
            Reply::Double(1.5)
        ])])
    );
    assert_eq!(
        scored_reply(items, false, 3),
        Reply::Array(vec![Reply::bulk(b"a")])
    );
}
