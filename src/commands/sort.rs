//! `SORT` and `SORT_RO`: sort a list, set or sorted set, numerically or by bytes, optionally
//! by the values of other keys (`BY pattern`), fetching other keys' values (`GET pattern`),
//! with `LIMIT`, `ASC|DESC`, `ALPHA`, and (`SORT` only) `STORE` into a list.
//!
//! # Locking
//!
//! The keys a `BY` or `GET` pattern names are computed from the elements being sorted, so
//! they cannot be declared in the command table before the command runs. Both commands
//! therefore hold every shard while they run (the table marks them `whole_keyspace`), like
//! KEYS; the table still declares the sorted key and the `STORE` destination, which is what
//! COMMAND reports and cluster routing reads. In cluster mode, as in Redis, `GET` and a `BY`
//! pattern with `*` are refused, so a sort there touches only its declared keys.
//!
//! Semantics follow Redis 7.0's `sortCommandGeneric`: options are parsed before the key is
//! looked up; a `BY` pattern without `*` means "don't sort" (a set stored that way is sorted
//! by bytes instead, so the stored list is deterministic); numeric sorting reads each weight
//! as `strtod` does and ties are broken by comparing the elements' bytes.

use std::cmp::Ordering;

use bytes::Bytes;

use crate::engine::{
    Access, ArgCursor, CommandSpec as C, Ctx, FindKeys, InfoDoc, KeySpec, KeySpecDoc,
    VariantCommand, run_as,
};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::store::Value;

/// The sorted key (index 1) and the `STORE` destination (the last one given, which is the one
/// written), found as Redis's `sortGetKeys` walks the options.
fn sort_keys(args: &[&[u8]]) -> Vec<usize> {
    let mut store = None;
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = &args[j];
        if a.eq_ignore_ascii_case(b"limit") && left >= 2 {
            j += 3;
        } else if (a.eq_ignore_ascii_case(b"get") || a.eq_ignore_ascii_case(b"by")) && left >= 1 {
            j += 2;
        } else if a.eq_ignore_ascii_case(b"store") && left >= 1 {
            store = Some(j + 1);
            j += 2;
        } else {
            j += 1;
        }
    }
    std::iter::once(1).chain(store).collect()
}

const SORT_KEYS: KeySpec = KeySpec::Custom {
    first: 1,
    last: 1,
    step: 1,
    find: sort_keys,
};

const SORTED_KEY: KeySpecDoc = KeySpecDoc {
    notes: None,
    flags: &["RO", "access"],
    begin: Some(1),
    keyword: None,
    find: FindKeys::Range(0, 1, 0),
};
const PATTERN_KEYS: KeySpecDoc = KeySpecDoc {
    notes: Some(
        "For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort",
    ),
    flags: &["RO", "access"],
    begin: None,
    keyword: None,
    find: FindKeys::Unknown,
};
static SORT_INFO: InfoDoc = InfoDoc {
    tips: &[],
    key_specs: &[
        SORTED_KEY,
        PATTERN_KEYS,
        KeySpecDoc {
            notes: Some(
                "For the optional STORE keyword. It is marked 'unknown' because the keyword can appear anywhere in the argument array",
            ),
            flags: &["OW", "update"],
            begin: None,
            keyword: None,
            find: FindKeys::Unknown,
        },
    ],
};
static SORT_RO_INFO: InfoDoc = InfoDoc {
    tips: &[],
    key_specs: &[SORTED_KEY, PATTERN_KEYS],
};

/// The commands of this module.
pub(crate) static COMMANDS: &[C] = &[
    C::new(
        "sort",
        -2,
        &["write", "denyoom", "movablekeys"],
        SORT_KEYS,
        |c, a| run_as::<Sort>(c, a, Access::ReadWrite),
    )
    .whole_keyspace()
    .with_info(&SORT_INFO)
    .with_acl(&[
        "@write",
        "@set",
        "@sortedset",
        "@list",
        "@slow",
        "@dangerous",
    ]),
    C::new(
        "sort_ro",
        -2,
        &["readonly", "movablekeys"],
        C::keys(1, 1, 1),
        |c, a| run_as::<Sort>(c, a, Access::ReadOnly),
    )
    .whole_keyspace()
    .with_info(&SORT_RO_INFO)
    .with_acl(&[
        "@read",
        "@set",
        "@sortedset",
        "@list",
        "@slow",
        "@dangerous",
    ]),
];

/// `SORT key [BY pattern] [LIMIT offset count] [GET pattern …] [ASC|DESC] [ALPHA]
/// [STORE destination]`; `SORT_RO` ([`Access::ReadOnly`]) without `STORE`.
#[derive(Debug)]
pub(crate) struct Sort {
    key: Bytes,
    desc: bool,
    alpha: bool,
    limit: Option<(i64, i64)>,
    store: Option<Bytes>,
    by: Option<Bytes>,
    gets: Vec<Bytes>,
    /// SORT or SORT_RO (the ACL check of BY and GET names the command).
    access: Access,
    /// Which of a pattern BY (true) and a GET came first: Redis refuses the first one.
    by_first: Option<bool>,
}

impl VariantCommand<'_> for Sort {
    type Variant = Access;

    fn parse(a: &mut ArgCursor<'_>, access: Access) -> CmdResult<Self> {
        let ro = access == Access::ReadOnly;
        let key = a.next_owned()?;
        let mut s = Sort {
            key,
            desc: false,
            alpha: false,
            limit: None,
            store: None,
            by: None,
            gets: Vec::new(),
            access,
            by_first: None,
        };
        while a.remaining() > 0 {
            let left = a.remaining() - 1;
            if a.eat("ASC") {
                s.desc = false;
            } else if a.eat("DESC") {
                s.desc = true;
            } else if a.eat("ALPHA") {
                s.alpha = true;
            } else if left >= 2 && a.eat("LIMIT") {
                let start = a.next_i64()?;
                let count = a.next_i64()?;
                s.limit = Some((start, count));
            } else if !ro && left >= 1 && a.eat("STORE") {
                s.store = Some(a.next_owned()?);
            } else if left >= 1 && a.eat("BY") {
                let by = a.next_owned()?;
                if by.contains(&b'*') {
                    s.by_first.get_or_insert(true);
                }
                s.by = Some(by);
            } else if left >= 1 && a.eat("GET") {
                s.gets.push(a.next_owned()?);
                s.by_first.get_or_insert(false);
            } else {
                return Err(CmdError::Syntax);
            }
        }
        Ok(s)
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let cluster = ctx.shared.cluster.is_some();
        // Cluster checks run in option order in Redis; a BY pattern only counts with '*'.
        if cluster {
            for_cluster_check(&self)?;
        }
        acl_check(ctx, &self)?;
        let mut dontsort = self.by.as_ref().is_some_and(|p| !p.contains(&b'*'));
        let mut alpha = self.alpha;
        let mut by = self.by.clone().filter(|_| !dontsort);
        let (db, now) = (ctx.db(), ctx.now_ms);
        enum Kind {
            List,
            Set,
            ZSet,
        }
        let (kind, elements): (Kind, Vec<Bytes>) = match ctx.store.read_value(db, &self.key, now) {
            None => (Kind::List, Vec::new()),
            Some(Value::List(l)) => (Kind::List, l.iter().cloned().collect()),
            Some(Value::Set(s)) => (Kind::Set, s.iter().collect()),
            Some(Value::ZSet(z)) => (
                Kind::ZSet,
                z.iter().map(|(m, _)| Bytes::copy_from_slice(&m)).collect(),
            ),
            Some(_) => return Err(CmdError::WrongType),
        };
        // SORT holds every shard, and so does a running script: a script counts as running
        // here only when it is the caller.
        let from_script = ctx.shared.scripts.busy.running_here();
        if dontsort && matches!(kind, Kind::Set) && (self.store.is_some() || from_script) {
            // Redis sorts a set by bytes rather than store or hand a script its hash order.
            dontsort = false;
            alpha = true;
            by = None;
        }
        let len = elements.len() as i64;
        let (limit_start, limit_count) = self.limit.unwrap_or((0, -1));
        let mut start = limit_start.max(0).min(len);
        let limit_count = limit_count.max(-1).min(len);
        let mut end = if limit_count < 0 {
            len - 1
        } else {
            start + limit_count - 1
        };
        if start >= len {
            start = len - 1;
            end = len - 2;
        }
        if end >= len {
            end = len - 1;
        }

        let mut vector: Vec<(Bytes, Weight)> = if dontsort {
            // Native order; DESC reverses lists and sorted sets (not sets, as in Redis).
            let mut v: Vec<_> = elements.into_iter().map(|e| (e, Weight::None)).collect();
            if self.desc && !matches!(kind, Kind::Set) {
                v.reverse();
            }
            v
        } else {
            let mut bad = false;
            let mut v = Vec::with_capacity(elements.len());
            for e in elements {
                let w = match &by {
                    Some(p) => match lookup_pattern(ctx, p, &e) {
                        None => {
                            v.push((
                                e,
                                if alpha {
                                    Weight::None
                                } else {
                                    Weight::Num(0.0)
                                },
                            ));
                            continue;
                        }
                        Some(val) => {
                            if alpha {
                                Weight::Bytes(val)
                            } else {
                                match strtod(&val) {
                                    Some(n) => Weight::Num(n),
                                    None => {
                                        bad = true;
                                        Weight::Num(0.0)
                                    }
                                }
                            }
                        }
                    },
                    None if alpha => Weight::None,
                    None => match strtod(&e) {
                        Some(n) => Weight::Num(n),
                        None => {
                            bad = true;
                            Weight::Num(0.0)
                        }
                    },
                };
                v.push((e, w));
            }
            if bad {
                return Err(CmdError::msg(
                    "ERR One or more scores can't be converted into double",
                ));
            }
            let by_pattern = by.is_some();
            let desc = self.desc;
            v.sort_by(|a, b| {
                let c = compare(a, b, alpha, by_pattern);
                if desc { c.reverse() } else { c }
            });
            v
        };
        let range: Vec<(Bytes, Weight)> = if start <= end && end >= 0 {
            vector.drain(start as usize..=end as usize).collect()
        } else {
            Vec::new()
        };

        if let Some(dst) = &self.store {
            let mut list = std::collections::VecDeque::new();
            for (e, _) in &range {
                if self.gets.is_empty() {
                    list.push_back(e.clone());
                }
                for g in &self.gets {
                    list.push_back(lookup_pattern(ctx, g, e).unwrap_or_default());
                }
            }
            let n = list.len() as i64;
            if n > 0 {
                ctx.store.set(db, dst, Value::List(Box::new(list)), None);
                ctx.notify(crate::services::notify::class::LIST, "sortstore", dst);
            } else if ctx.store.remove(db, dst, now).is_some() {
                ctx.notify(crate::services::notify::class::GENERIC, "del", dst);
            }
            return Ok(Reply::Int(n));
        }
        let mut out = Vec::new();
        for (e, _) in &range {
            if self.gets.is_empty() {
                out.push(Reply::Bulk(e.clone()));
            }
            for g in &self.gets {
                out.push(lookup_pattern(ctx, g, e).map_or(Reply::Null, Reply::Bulk));
            }
        }
        Ok(Reply::Array(out))
    }
}

/// BY with a pattern and GET read keys the arguments do not name: Redis allows them only to
/// a user who may read every key with this command.
fn acl_check(ctx: &Ctx<'_>, s: &Sort) -> CmdResult<()> {
    let Some(by) = s.by_first else {
        return Ok(());
    };
    let name: &[u8] = match s.access {
        Access::ReadOnly => b"sort_ro",
        Access::ReadWrite => b"sort",
    };
    let full = ctx
        .shared
        .table
        .get_entry(name)
        .is_some_and(|e| ctx.shared.acl.reads_every_key(&ctx.client.user, e));
    if full {
        Ok(())
    } else if by {
        Err(CmdError::msg(
            "ERR BY option of SORT denied due to insufficient ACL permissions.",
        ))
    } else {
        Err(CmdError::msg(
            "ERR GET option of SORT denied due to insufficient ACL permissions.",
        ))
    }
}

/// Redis refuses GET and pattern BY in cluster mode.
fn for_cluster_check(s: &Sort) -> CmdResult<()> {
    if s.by.as_ref().is_some_and(|p| p.contains(&b'*')) {
        return Err(CmdError::msg(
            "ERR BY option of SORT denied in Cluster mode.",
        ));
    }
    if !s.gets.is_empty() {
        return Err(CmdError::msg(
            "ERR GET option of SORT denied in Cluster mode.",
        ));
    }
    Ok(())
}

/// What an element is sorted by.
#[derive(Debug)]
enum Weight {
    /// No value (a missing BY key with ALPHA, or ALPHA on the element itself).
    None,
    /// A numeric weight.
    Num(f64),
    /// The bytes of a BY value (ALPHA).
    Bytes(Bytes),
}

/// Redis's `sortCompare` (without DESC).
fn compare(a: &(Bytes, Weight), b: &(Bytes, Weight), alpha: bool, by_pattern: bool) -> Ordering {
    if !alpha {
        let (x, y) = match (&a.1, &b.1) {
            (Weight::Num(x), Weight::Num(y)) => (*x, *y),
            _ => (0.0, 0.0),
        };
        return if x > y {
            Ordering::Greater
        } else if x < y {
            Ordering::Less
        } else {
            a.0.cmp(&b.0)
        };
    }
    if by_pattern {
        return match (&a.1, &b.1) {
            (Weight::Bytes(x), Weight::Bytes(y)) => x.cmp(y),
            (Weight::Bytes(_), _) => Ordering::Greater,
            (_, Weight::Bytes(_)) => Ordering::Less,
            _ => Ordering::Equal,
        };
    }
    a.0.cmp(&b.0)
}

/// Redis's `lookupKeyByPattern`: `#` is the element itself; otherwise the first `*` of the
/// pattern is replaced by the element, and a `->field` suffix after it reads a hash field.
/// A pattern without `*`, a missing key or one of the wrong type gives None.
fn lookup_pattern(ctx: &mut Ctx<'_>, pattern: &[u8], elem: &[u8]) -> Option<Bytes> {
    if pattern == b"#" {
        return Some(Bytes::copy_from_slice(elem));
    }
    let star = pattern.iter().position(|&c| c == b'*')?;
    let after = &pattern[star + 1..];
    let arrow = after
        .windows(2)
        .position(|w| w == b"->")
        .filter(|&i| i + 2 < after.len());
    let (postfix, field) = match arrow {
        Some(i) => (&after[..i], Some(&after[i + 2..])),
        None => (after, None),
    };
    let mut key = Vec::with_capacity(star + elem.len() + postfix.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(elem);
    key.extend_from_slice(postfix);
    let (db, now) = (ctx.db(), ctx.now_ms);
    match (ctx.store.read_value(db, &key, now)?, field) {
        (Value::Hash(h), Some(f)) => h.get_live(f, now).map(Bytes::copy_from_slice),
        (v @ (Value::Int(_) | Value::Str(_) | Value::Raw(_)), None) => v.as_bytes().ok(),
        _ => None,
    }
}

/// A weight read as SORT reads it with C's `strtod`: the number must end the text (or be
/// followed by a NUL, where C's string ends), and NaN or an out-of-range value is refused. An
/// empty text is 0.
fn strtod(b: &[u8]) -> Option<f64> {
    let r = crate::num::strtod(b);
    let ends = b.get(r.consumed).is_none_or(|&c| c == 0);
    (ends && !r.out_of_range && !r.value.is_nan()).then_some(r.value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtod_as_redis_sort_reads_weights() {
        assert_eq!(strtod(b""), Some(0.0));
        assert_eq!(strtod(b"  1.5"), Some(1.5));
        assert_eq!(strtod(b"1.5 "), None);
        assert_eq!(strtod(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(strtod(b"nan"), None);
        assert_eq!(strtod(b"1e400"), None);
        assert_eq!(strtod(b"1e-400"), None);
        assert_eq!(strtod(b"0e10"), Some(0.0));
        assert_eq!(strtod(b"abc"), None);
        assert_eq!(strtod(b"10"), Some(10.0));
        assert_eq!(strtod(b"0x10"), Some(16.0));
        assert_eq!(strtod(b"-0x1.8p1"), Some(-3.0));
        assert_eq!(strtod(b"1\x00junk"), Some(1.0));
    }

    #[test]
    fn sort_keys_find_the_store_destination() {
        let args: Vec<Bytes> = ["SORT", "k", "LIMIT", "0", "1", "STORE", "d", "GET", "store"]
            .iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect();
        assert_eq!(sort_keys(&crate::engine::args::borrowed(&args)), vec![1, 6]);
        let args: Vec<Bytes> = ["SORT", "k", "STORE", "a", "STORE", "b"]
            .iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect();
        assert_eq!(sort_keys(&crate::engine::args::borrowed(&args)), vec![1, 5]);
    }
}
