//! Sorted-set algebra and multi-key pops: `ZUNION`, `ZINTER`, `ZDIFF` and their `STORE`
//! forms, `ZINTERCARD` and `ZMPOP`.
//!
//! Inputs may be sorted sets or plain sets (members of a set score 1), exactly as Redis 7.0's
//! `zunionInterDiffGenericCommand`: the keys are read (and type-checked) before the options
//! are parsed, inputs are taken from the smallest to the largest for union and intersection,
//! and a weighted score or a sum that comes out NaN (`inf * 0`, `inf + -inf`) is 0. The
//! order in which a union sums an element's scores is that of the sources by cardinality,
//! which is Redis's, so float sums round the same way.
//!
//! Uses the set types of [`crate::store`] and the reply shaping of [`crate::commands::zset`].

use crate::services::notify::class;
use std::collections::HashMap;

use bytes::Bytes;

use crate::commands::zset::{scored_reply, zset_error};
use crate::engine::{
    ArgCursor, Command, CommandSpec as C, Ctx, FindKeys, InfoDoc, KeySpec, KeySpecDoc, Output,
    VariantCommand, run, run_as,
};
use crate::error::{CmdError, CmdResult};
use crate::num::{parse_f64, parse_i64};
use crate::protocol::Reply;
use crate::store::Value;
use crate::store::zset::SortedSet;

const fn numkeys_at_1(flags: &'static [&'static str]) -> KeySpec {
    KeySpec::Keynum {
        begin: 1,
        keynumidx: 0,
        firstkey: 1,
        step: 1,
        flags,
        notes: None,
    }
}

/// The destination (index 1) and the numkeys-counted sources (numkeys at index 2).
fn store_keys(args: &[&[u8]]) -> Vec<usize> {
    let n = args
        .get(2)
        .and_then(|b| parse_i64(b))
        .filter(|&n| n > 0)
        .unwrap_or(0) as usize;
    let end = 3usize.saturating_add(n).min(args.len());
    std::iter::once(1).chain(3..end).collect()
}

const STORE_KEYS: KeySpec = KeySpec::Custom {
    first: 1,
    last: 1,
    step: 1,
    find: store_keys,
};

const RO: &[&str] = &["RO", "access"];

/// Redis's two key specs of the STORE forms: the destination, then the numkeys sources.
static STORE_INFO: InfoDoc = InfoDoc {
    tips: &[],
    key_specs: &[
        KeySpecDoc {
            notes: None,
            flags: &["OW", "update"],
            begin: Some(1),
            keyword: None,
            find: FindKeys::Range(0, 1, 0),
        },
        KeySpecDoc {
            notes: None,
            flags: RO,
            begin: Some(2),
            keyword: None,
            find: FindKeys::Keynum(0, 1, 1),
        },
    ],
};
const READ_FLAGS: &[&str] = &["readonly", "movablekeys"];
const STORE_FLAGS: &[&str] = &["write", "denyoom", "movablekeys"];
const READ_ACL: &[&str] = &["@read", "@sortedset", "@slow"];
const WRITE_ACL: &[&str] = &["@write", "@sortedset", "@slow"];

/// The commands of this module.
pub(crate) static COMMANDS: &[C] = &[
    C::new("zunion", -3, READ_FLAGS, numkeys_at_1(RO), |c, a| {
        run_as::<ZOp>(c, a, (SetAlgebra::Union, Output::Reply))
    })
    .with_acl(READ_ACL),
    C::new("zinter", -3, READ_FLAGS, numkeys_at_1(RO), |c, a| {
        run_as::<ZOp>(c, a, (SetAlgebra::Inter, Output::Reply))
    })
    .with_acl(READ_ACL),
    C::new("zdiff", -3, READ_FLAGS, numkeys_at_1(RO), |c, a| {
        run_as::<ZOp>(c, a, (SetAlgebra::Diff, Output::Reply))
    })
    .with_acl(READ_ACL),
    C::new("zunionstore", -4, STORE_FLAGS, STORE_KEYS, |c, a| {
        run_as::<ZOp>(c, a, (SetAlgebra::Union, Output::Store))
    })
    .with_acl(WRITE_ACL)
    .with_info(&STORE_INFO),
    C::new("zinterstore", -4, STORE_FLAGS, STORE_KEYS, |c, a| {
        run_as::<ZOp>(c, a, (SetAlgebra::Inter, Output::Store))
    })
    .with_acl(WRITE_ACL)
    .with_info(&STORE_INFO),
    C::new("zdiffstore", -4, STORE_FLAGS, STORE_KEYS, |c, a| {
        run_as::<ZOp>(c, a, (SetAlgebra::Diff, Output::Store))
    })
    .with_acl(WRITE_ACL)
    .with_info(&STORE_INFO),
    C::new("zintercard", -3, READ_FLAGS, numkeys_at_1(RO), |c, a| {
        run_as::<ZOp>(c, a, (SetAlgebra::InterCard, Output::Reply))
    })
    .with_acl(READ_ACL),
    C::new(
        "zmpop",
        -4,
        &["write", "movablekeys"],
        numkeys_at_1(&["RW", "access", "delete"]),
        run::<ZMPop>,
    )
    .with_acl(WRITE_ACL),
];

/// The operation of a [`ZOp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SetAlgebra {
    /// ZUNION, ZUNIONSTORE.
    Union,
    /// ZINTER, ZINTERSTORE.
    Inter,
    /// ZDIFF, ZDIFFSTORE.
    Diff,
    /// ZINTERCARD: the size of the intersection.
    InterCard,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// Redis's `zunionInterAggregate`.
fn aggregate(target: &mut f64, val: f64, how: Aggregate) {
    match how {
        Aggregate::Sum => {
            *target += val;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if val < *target {
                *target = val;
            }
        }
        Aggregate::Max => {
            if val > *target {
                *target = val;
            }
        }
    }
}

/// `ZUNION|ZINTER|ZDIFF numkeys key … [WEIGHTS w …] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`,
/// the `STORE` forms (`destination numkeys key …`, no `WITHSCORES`) and
/// `ZINTERCARD numkeys key … [LIMIT n]`.
#[derive(Debug)]
pub(crate) struct ZOp {
    op: SetAlgebra,
    dst: Option<Bytes>,
    keys: Vec<Bytes>,
    options: Vec<Bytes>,
}

fn zop_name(op: SetAlgebra, output: Output) -> &'static str {
    match (op, output) {
        (SetAlgebra::Union, Output::Reply) => "zunion",
        (SetAlgebra::Inter, Output::Reply) => "zinter",
        (SetAlgebra::Diff, Output::Reply) => "zdiff",
        (SetAlgebra::Union, Output::Store) => "zunionstore",
        (SetAlgebra::Inter, Output::Store) => "zinterstore",
        (SetAlgebra::Diff, Output::Store) => "zdiffstore",
        (SetAlgebra::InterCard, _) => "zintercard",
    }
}

impl VariantCommand<'_> for ZOp {
    type Variant = (SetAlgebra, Output);

    fn parse(a: &mut ArgCursor<'_>, (op, output): (SetAlgebra, Output)) -> CmdResult<Self> {
        let dst = match output {
            Output::Store => Some(a.next_owned()?),
            Output::Reply => None,
        };
        let n = a.next_i64()?;
        if n < 1 {
            return Err(CmdError::owned(format!(
                "ERR at least 1 input key is needed for '{}' command",
                zop_name(op, output)
            )));
        }
        let rest = a.rest();
        if n as u64 > rest.len() as u64 {
            return Err(CmdError::Syntax);
        }
        let (keys, options) = rest.split_at(n as usize);
        Ok(ZOp {
            op,
            dst,
            keys: crate::engine::args::owned(keys),
            options: crate::engine::args::owned(options),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        // The keys first (WRONGTYPE wins over a bad option), as Redis.
        let mut srcs: Vec<Source> = Vec::with_capacity(self.keys.len());
        for k in &self.keys {
            srcs.push(Source::read(ctx, k)?);
        }
        let setnum = srcs.len();
        let (mut how, mut withscores, mut limit) = (Aggregate::Sum, false, 0u64);
        let borrowed = crate::engine::args::borrowed(&self.options);
        let mut a = ArgCursor::new(&borrowed);
        let op = self.op;
        let store = self.dst.is_some();
        let weighted = matches!(op, SetAlgebra::Union | SetAlgebra::Inter);
        while a.remaining() > 0 {
            let left = a.remaining();
            if weighted && left > setnum && a.eat("WEIGHTS") {
                for s in srcs.iter_mut() {
                    s.weight = parse_f64(a.next()?)
                        .ok_or(CmdError::msg("ERR weight value is not a float"))?;
                }
            } else if weighted && left >= 2 && a.eat("AGGREGATE") {
                let arg = a.next()?;
                how = if arg.eq_ignore_ascii_case(b"sum") {
                    Aggregate::Sum
                } else if arg.eq_ignore_ascii_case(b"min") {
                    Aggregate::Min
                } else if arg.eq_ignore_ascii_case(b"max") {
                    Aggregate::Max
                } else {
                    return Err(CmdError::Syntax);
                };
            } else if !store && op != SetAlgebra::InterCard && a.eat("WITHSCORES") {
                withscores = true;
            } else if op == SetAlgebra::InterCard && left >= 2 && a.eat("LIMIT") {
                let n = parse_i64(a.next()?)
                    .filter(|&n| n >= 0)
                    .ok_or(CmdError::msg("ERR LIMIT can't be negative"))?;
                limit = n as u64;
            } else {
                return Err(CmdError::Syntax);
            }
        }
        if op != SetAlgebra::Diff {
            // Smallest first (a stable sort, as glibc's merge-sorting qsort).
            srcs.sort_by_key(|s| s.members.len());
        }
        let result: Vec<(Bytes, f64)> = match op {
            SetAlgebra::Union => union(&srcs, how),
            SetAlgebra::Diff => diff(&srcs),
            SetAlgebra::Inter | SetAlgebra::InterCard => {
                let card = op == SetAlgebra::InterCard;
                let mut out = Vec::new();
                let stop = if card { limit } else { 0 };
                inter(&srcs, how, stop, &mut out);
                if card {
                    return Ok(Reply::Int(out.len() as i64));
                }
                out
            }
        };
        match self.dst {
            Some(dst) => {
                let (db, now) = (ctx.db(), ctx.now_ms);
                if result.is_empty() {
                    if ctx.store.remove(db, &dst, now).is_some() {
                        ctx.notify(class::GENERIC, "del", &dst);
                    }
                    return Ok(Reply::Int(0));
                }
                // Redis builds a skiplist and converts it to a listpack only if it fits, so
                // a result that does not fit keeps its -0 scores: build such a set in the
                // skiplist encoding from the start.
                let limits = ctx.shared.live.zset_limits();
                let fits = result.len() <= limits.max_listpack_entries
                    && result
                        .iter()
                        .all(|(m, _)| m.len() <= limits.max_listpack_value);
                let mut z =
                    SortedSet::with_expected_len(if fits { 0 } else { usize::MAX }, &limits);
                for (m, s) in &result {
                    z.insert(m, *s, &limits).map_err(zset_error)?;
                }
                let n = z.len() as i64;
                ctx.store.set(db, &dst, Value::ZSet(Box::new(z)), None);
                ctx.notify(class::ZSET, zop_name(op, Output::Store), &dst);
                Ok(Reply::Int(n))
            }
            None => {
                // Scores as computed (a -0 stays -0, as in Redis's skiplist), in set order.
                let mut items = result;
                items.sort_by(|a, b| {
                    a.1.partial_cmp(&b.1)
                        .unwrap_or(std::cmp::Ordering::Equal)
                        .then_with(|| a.0.cmp(&b.0))
                });
                Ok(scored_reply(items, withscores, ctx.client.resp))
            }
        }
    }
}

/// One input: its members with their scores (1 for a plain set), and its weight.
struct Source {
    members: HashMap<Bytes, f64>,
    weight: f64,
}

impl Source {
    fn read(ctx: &mut Ctx<'_>, key: &[u8]) -> CmdResult<Source> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let members = match ctx.store.read_value(db, key, now) {
            None => HashMap::new(),
            Some(Value::ZSet(z)) => z
                .iter()
                .map(|(m, s)| (Bytes::copy_from_slice(&m), s))
                .collect(),
            Some(Value::Set(s)) => s.iter().map(|m| (m, 1.0)).collect(),
            Some(_) => return Err(CmdError::WrongType),
        };
        Ok(Source {
            members,
            weight: 1.0,
        })
    }
}

/// The weighted score of a first occurrence: NaN (`inf * 0`) counts as 0.
fn weighted(score: f64, weight: f64) -> f64 {
    let s = weight * score;
    if s.is_nan() { 0.0 } else { s }
}

fn union(srcs: &[Source], how: Aggregate) -> Vec<(Bytes, f64)> {
    let mut acc: HashMap<Bytes, f64> = HashMap::new();
    for src in srcs {
        for (m, &s) in &src.members {
            let score = weighted(s, src.weight);
            match acc.get_mut(m) {
                Some(t) => aggregate(t, score, how),
                None => {
                    acc.insert(m.clone(), score);
                }
            }
        }
    }
    acc.into_iter().collect()
}

/// Members of the first (smallest) input found in all others; stops after `stop` members
/// when it is not 0 (`ZINTERCARD … LIMIT`).
fn inter(srcs: &[Source], how: Aggregate, stop: u64, out: &mut Vec<(Bytes, f64)>) {
    let Some((first, others)) = srcs.split_first() else {
        return;
    };
    'members: for (m, &s) in &first.members {
        let mut score = weighted(s, first.weight);
        for o in others {
            match o.members.get(m) {
                // Not NaN-checked here, as in Redis: a NaN product is dropped by MIN and MAX
                // and turned into 0 by SUM.
                Some(&v) => aggregate(&mut score, v * o.weight, how),
                None => continue 'members,
            }
        }
        out.push((m.clone(), score));
        if stop != 0 && out.len() as u64 >= stop {
            return;
        }
    }
}

fn diff(srcs: &[Source]) -> Vec<(Bytes, f64)> {
    let Some((first, others)) = srcs.split_first() else {
        return Vec::new();
    };
    first
        .members
        .iter()
        .filter(|(m, _)| !others.iter().any(|o| o.members.contains_key(*m)))
        .map(|(m, &s)| (m.clone(), s))
        .collect()
}

/// `ZMPOP numkeys key [key …] MIN|MAX [COUNT count]`
#[derive(Debug)]
pub(crate) struct ZMPop {
    pub(crate) keys: Vec<Bytes>,
    pub(crate) max: bool,
    pub(crate) count: u64,
}

impl Command<'_> for ZMPop {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let numkeys = parse_i64(a.next()?)
            .filter(|&n| n >= 1)
            .ok_or(CmdError::msg("ERR numkeys should be greater than 0"))?;
        let rest = a.rest();
        if numkeys as u64 >= rest.len() as u64 {
            return Err(CmdError::Syntax);
        }
        let (keys, opts) = rest.split_at(numkeys as usize);
        let mut a = ArgCursor::new(opts);
        let max = if a.eat("MIN") {
            false
        } else if a.eat("MAX") {
            true
        } else {
            return Err(CmdError::Syntax);
        };
        let mut count = None;
        while a.remaining() > 0 {
            if count.is_none() && a.remaining() >= 2 && a.eat("COUNT") {
                count = Some(
                    parse_i64(a.next()?)
                        .filter(|&n| n >= 1)
                        .ok_or(CmdError::msg("ERR count should be greater than 0"))?
                        as u64,
                );
            } else {
                return Err(CmdError::Syntax);
            }
        }
        Ok(ZMPop {
            keys: crate::engine::args::owned(keys),
            max,
            count: count.unwrap_or(1),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        for key in &self.keys {
            let Some(mut z) = ctx.store.modify::<Box<SortedSet>>(db, key, now)? else {
                continue;
            };
            let popped = z.pop(usize::try_from(self.count).unwrap_or(usize::MAX), self.max);
            drop(z);
            let event = if self.max { "zpopmax" } else { "zpopmin" };
            ctx.notify(class::ZSET, event, key);
            ctx.notify_if_deleted(key);
            return Ok(Reply::Array(vec![
                Reply::Bulk(key.clone()),
                Reply::Array(
                    popped
                        .into_iter()
                        .map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)]))
                        .collect(),
                ),
            ]));
        }
        Ok(Reply::NullArray)
    }
}
