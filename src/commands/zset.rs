//! Sorted-set commands: `ZADD`, `ZINCRBY`, `ZREM`, the counts, scores and ranks, the whole
//! `ZRANGE` family (including `ZRANGESTORE`), the `ZREMRANGEBY*` trims, `ZPOPMIN`/`ZPOPMAX`,
//! `ZRANDMEMBER` and `ZSCAN`.
//!
//! The sliding-window limiter is the reason these exist (`ZADD key <now> <id>`,
//! `ZREMRANGEBYSCORE key 0 <cutoff>`, `ZCARD key`, usually inside MULTI), so those paths do one
//! lookup and no allocation beyond the members they store. Everything about the set itself
//! (order, encodings, range parsing, score formatting) lives in [`crate::store::zset`]; this
//! module parses arguments in Redis 7.0's order (which decides *which* error a client sees
//! when several apply), looks the key up, and shapes the reply.
//!
//! # Replies with scores
//!
//! Scores are [`Reply::Double`], which RESP2 sends as a bulk string in Redis's `%.17g` form
//! and RESP3 as a double. `WITHSCORES` replies are flat `[member, score, …]` arrays in RESP2
//! and arrays of `[member, score]` pairs in RESP3, exactly as Redis 7.0 sends them (a map
//! would lose the order). The exceptions are Redis's too: `ZPOPMIN`/`ZPOPMAX` without a count
//! stay flat in RESP3, and `ZSCAN` sends scores as bulk strings in both protocols.
//!
//! # Keyspace notifications to WATCH
//!
//! A command that changes nothing (a `ZADD` whose scores are already there, a
//! `ZREMRANGEBYSCORE` that matches nothing) does not touch the key, so it does not abort the
//! transactions of clients watching it; a set that becomes empty is deleted.

use crate::services::notify::class;
use bytes::Bytes;

use crate::commands::keys::parse_scan_options;
use crate::engine::args::parse_scan_cursor;
use crate::engine::args::{glob_match, is};
use crate::engine::{
    ArgCursor, Command, CommandSpec as C, Ctx, KeySpecDoc, VariantCommand, run, run_as,
    run_borrowed,
};
use crate::error::{CmdError, CmdResult};
use crate::num::{format_double, parse_double, parse_i64};
use crate::protocol::Reply;
use crate::store::Value;
use crate::store::access::SortedSetMut;
use crate::store::zset::{
    AddFlags, AddOutcome, LexRange, Member, ScoreRange, SortedSet, ZsetError, ZsetLimits,
};

/// The sorted-set commands, with Redis 7.0's arity, flags, key positions and ACL categories.
pub(crate) static COMMANDS: &[C] = &[
    C::new(
        "zadd",
        -4,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_borrowed::<ZAdd>(c, a),
    )
    .with_acl(&["@write", "@sortedset", "@fast"]),
    C::new(
        "zincrby",
        4,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_borrowed::<ZIncrBy>(c, a),
    )
    .with_acl(&["@write", "@sortedset", "@fast"])
    .with_key_flags(&["RW", "access", "update"]),
    C::new(
        "zrem",
        -3,
        &["write", "fast"],
        C::keys(1, 1, 1),
        run::<ZRem>,
    )
    .with_acl(&["@write", "@sortedset", "@fast"])
    .with_key_flags(&["RW", "delete"]),
    C::new(
        "zcard",
        2,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_borrowed::<ZCard>(c, a),
    )
    .with_acl(&["@read", "@sortedset", "@fast"])
    .with_key_flags(&["RO"]),
    C::new(
        "zcount",
        4,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<ZCount>,
    )
    .with_acl(&["@read", "@sortedset", "@fast"]),
    C::new(
        "zlexcount",
        4,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<ZLexCount>,
    )
    .with_acl(&["@read", "@sortedset", "@fast"]),
    C::new(
        "zscore",
        3,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<ZScore>,
    )
    .with_acl(&["@read", "@sortedset", "@fast"]),
    C::new(
        "zmscore",
        -3,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<ZMScore>,
    )
    .with_acl(&["@read", "@sortedset", "@fast"]),
    C::new(
        "zrank",
        3,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<ZRank>(c, a, Order::Ascending),
    )
    .with_acl(&["@read", "@sortedset", "@fast"]),
    C::new(
        "zrevrank",
        3,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<ZRank>(c, a, Order::Descending),
    )
    .with_acl(&["@read", "@sortedset", "@fast"]),
    C::new("zrange", -4, &["readonly"], C::keys(1, 1, 1), |c, a| {
        run_as::<ZRange>(c, a, RangeCommand::ZRange)
    })
    .with_acl(&["@read", "@sortedset", "@slow"]),
    C::new(
        "zrangebyscore",
        -4,
        &["readonly"],
        C::keys(1, 1, 1),
        |c, a| run_as::<ZRange>(c, a, RangeCommand::ZRangeByScore),
    )
    .with_acl(&["@read", "@sortedset", "@slow"]),
    C::new(
        "zrevrangebyscore",
        -4,
        &["readonly"],
        C::keys(1, 1, 1),
        |c, a| run_as::<ZRange>(c, a, RangeCommand::ZRevRangeByScore),
    )
    .with_acl(&["@read", "@sortedset", "@slow"]),
    C::new(
        "zrangebylex",
        -4,
        &["readonly"],
        C::keys(1, 1, 1),
        |c, a| run_as::<ZRange>(c, a, RangeCommand::ZRangeByLex),
    )
    .with_acl(&["@read", "@sortedset", "@slow"]),
    C::new(
        "zrevrangebylex",
        -4,
        &["readonly"],
        C::keys(1, 1, 1),
        |c, a| run_as::<ZRange>(c, a, RangeCommand::ZRevRangeByLex),
    )
    .with_acl(&["@read", "@sortedset", "@slow"]),
    C::new("zrevrange", -4, &["readonly"], C::keys(1, 1, 1), |c, a| {
        run_as::<ZRange>(c, a, RangeCommand::ZRevRange)
    })
    .with_acl(&["@read", "@sortedset", "@slow"]),
    C::new(
        "zrangestore",
        -5,
        &["write", "denyoom"],
        C::keys(1, 2, 1),
        run::<ZRangeStore>,
    )
    .with_acl(&["@write", "@sortedset", "@slow"])
    .with_key_specs(&[
        KeySpecDoc::range(&["OW", "update"], 1, 0),
        KeySpecDoc::range(&["RO", "access"], 2, 0),
    ]),
    C::new(
        "zremrangebyscore",
        4,
        &["write"],
        C::keys(1, 1, 1),
        |c, a| run_as::<ZRemRange>(c, a, Kind::Score),
    )
    .with_acl(&["@write", "@sortedset", "@slow"])
    .with_key_flags(&["RW", "delete"]),
    C::new(
        "zremrangebyrank",
        4,
        &["write"],
        C::keys(1, 1, 1),
        |c, a| run_as::<ZRemRange>(c, a, Kind::Rank),
    )
    .with_acl(&["@write", "@sortedset", "@slow"])
    .with_key_flags(&["RW", "delete"]),
    C::new("zremrangebylex", 4, &["write"], C::keys(1, 1, 1), |c, a| {
        run_as::<ZRemRange>(c, a, Kind::Lex)
    })
    .with_acl(&["@write", "@sortedset", "@slow"])
    .with_key_flags(&["RW", "delete"]),
    C::new(
        "zpopmin",
        -2,
        &["write", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<ZPop>(c, a, Order::Ascending),
    )
    .with_acl(&["@write", "@sortedset", "@fast"])
    .with_key_flags(&["RW", "access", "delete"]),
    C::new(
        "zpopmax",
        -2,
        &["write", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<ZPop>(c, a, Order::Descending),
    )
    .with_acl(&["@write", "@sortedset", "@fast"])
    .with_key_flags(&["RW", "access", "delete"]),
    C::new(
        "zrandmember",
        -2,
        &["readonly"],
        C::keys(1, 1, 1),
        run::<ZRandMember>,
    )
    .with_acl(&["@read", "@sortedset", "@slow"])
    .with_tips(&["nondeterministic_output"]),
    C::new("zscan", -3, &["readonly"], C::keys(1, 1, 1), run::<ZScan>)
        .with_acl(&["@read", "@sortedset", "@slow"])
        .with_tips(&["nondeterministic_output"]),
];

/// Most elements a negative-count `ZRANDMEMBER` may reply. Redis has no limit and tries to
/// build any reply asked for (`ZRANDMEMBER key -9223372036854775807` makes it run out of
/// memory); sluice refuses counts past this with Redis's own `value is out of range`.
const RANDOM_REPLY_LIMIT: u64 = 1 << 20;

fn min_max_not_float() -> CmdError {
    CmdError::msg("ERR min or max is not a float")
}

fn lex_range_invalid() -> CmdError {
    CmdError::msg("ERR min or max not valid string range item")
}

/// The reply line of a [`ZsetError`].
pub(crate) fn zset_error(e: ZsetError) -> CmdError {
    CmdError::msg(match e {
        ZsetError::NotANumber => "ERR resulting score is not a number (NaN)",
        ZsetError::NxAndXx => "ERR XX and NX options at the same time are not compatible",
        ZsetError::GtLtNx => "ERR GT, LT, and/or NX options at the same time are not compatible",
        ZsetError::IncrNeedsOnePair => "ERR INCR option supports a single increment-element pair",
    })
}

/// The sorted set at `key` for a read (counts a keyspace hit or miss): `None` if the key is
/// missing, WRONGTYPE if it holds another type.
fn read_zset<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> CmdResult<Option<&'c mut SortedSet>> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    match ctx.store.read(db, key, now) {
        None => Ok(None),
        Some(e) => match &mut e.value {
            Value::ZSet(z) => Ok(Some(z)),
            _ => Err(CmdError::WrongType),
        },
    }
}

/// The sorted set at `key` for a change in place (no stats): None if missing, WRONGTYPE
/// for others. The guard signals WATCH and deletes an emptied set when dropped.
fn write_zset<'l, 'a, 'k>(
    ctx: &'l mut Ctx<'a>,
    key: &'k [u8],
) -> CmdResult<Option<SortedSetMut<'l, 'a, 'k>>> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    ctx.store.modify(db, key, now)
}

/// Members with optional scores, shaped as Redis 7.0 replies them for protocol `resp`:
/// members only; or, with scores, `[m1, s1, m2, s2, …]` in RESP2 and `[[m1, s1], …]` in RESP3.
pub(crate) fn scored_reply<M: Into<Bytes>>(
    items: Vec<(M, f64)>,
    withscores: bool,
    resp: u8,
) -> Reply {
    if !withscores {
        return Reply::Array(
            items
                .into_iter()
                .map(|(m, _)| Reply::Bulk(m.into()))
                .collect(),
        );
    }
    if resp >= 3 {
        return Reply::Array(
            items
                .into_iter()
                .map(|(m, s)| Reply::Array(vec![Reply::Bulk(m.into()), Reply::Double(s)]))
                .collect(),
        );
    }
    let mut out = Vec::with_capacity(items.len().saturating_mul(2));
    for (m, s) in items {
        out.push(Reply::Bulk(m.into()));
        out.push(Reply::Double(s));
    }
    Reply::Array(out)
}

/// `ZADD` (and `ZINCRBY`) parsed: the options, then score-member pairs, all validated before
/// the key is looked up, as Redis does.
#[derive(Debug)]
pub(crate) struct AddArgs<'a> {
    pub(crate) key: &'a [u8],
    pub(crate) flags: AddFlags,
    pub(crate) ch: bool,
    /// Borrowed from the request; one or two pairs (the rate limiters' ZADD) need no
    /// allocation.
    pub(crate) pairs: smallvec::SmallVec<[(f64, &'a [u8]); 2]>,
}

impl<'a> AddArgs<'a> {
    /// Parses `key [NX|XX] [GT|LT] [CH] [INCR] score member [score member …]`. `ZINCRBY`
    /// goes through the same parser with `INCR` preset, so `ZINCRBY key nx m` is a syntax
    /// error in sluice as in Redis (the option eats the increment, leaving an odd count).
    fn parse(a: &mut ArgCursor<'a>, incr: bool) -> CmdResult<Self> {
        let key = a.next()?;
        let mut flags = AddFlags {
            incr,
            ..AddFlags::default()
        };
        let mut ch = false;
        while let Some(opt) = a.peek() {
            if is(opt, "nx") {
                flags.nx = true;
            } else if is(opt, "xx") {
                flags.xx = true;
            } else if is(opt, "ch") {
                ch = true;
            } else if is(opt, "incr") {
                flags.incr = true;
            } else if is(opt, "gt") {
                flags.gt = true;
            } else if is(opt, "lt") {
                flags.lt = true;
            } else {
                break;
            }
            a.next()?;
        }
        let rest = a.rest();
        if rest.is_empty() || !rest.len().is_multiple_of(2) {
            return Err(CmdError::Syntax);
        }
        flags.validate(rest.len() / 2).map_err(zset_error)?;
        let pairs = rest
            .chunks_exact(2)
            .map(|p| Ok((parse_double(p[0]).ok_or(CmdError::NotFloat)?, p[1])))
            .collect::<CmdResult<_>>()?;
        Ok(AddArgs {
            key,
            flags,
            ch,
            pairs,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        self.apply_counting(ctx).0
    }

    /// Adds the pairs; returns the reply and how many members were added or changed (what
    /// Redis counts as dirty). GEOADD comes here too, as Redis's calls `zaddCommand`.
    pub(crate) fn apply_counting(self, ctx: &mut Ctx<'_>) -> (CmdResult<Reply>, i64) {
        let tally = match self.tally(ctx) {
            Ok(t) => t,
            Err(e) => return (Err(e), 0),
        };
        let changed = tally.added + tally.updated;
        let reply = match tally.error {
            Some(e) => Err(zset_error(e)),
            None => Ok(if self.flags.incr {
                tally.score.map_or(Reply::Null, Reply::Double)
            } else if self.ch {
                Reply::Int(changed)
            } else {
                Reply::Int(tally.added)
            }),
        };
        (reply, changed)
    }

    fn tally(&self, ctx: &mut Ctx<'_>) -> CmdResult<AddTally> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let limits = ctx.shared.live.zset_limits();
        // With XX a missing key stays missing; otherwise a new set is stored if filled.
        let z = if self.flags.xx {
            write_zset(ctx, self.key)?
        } else {
            Some(
                ctx.store
                    .modify_or_create(db, self.key, now, || Box::new(SortedSet::new()))?,
            )
        };
        // No key and XX: nothing to do. The guard drops (storing, signalling) in the closure.
        let tally = z.map_or_else(AddTally::default, |mut z| {
            let tally = self.add_to(&mut z, &limits);
            if tally.added + tally.updated == 0 {
                z.mark_unchanged();
            }
            tally
        });
        // Redis notifies what was done even when a later pair failed.
        if tally.added + tally.updated > 0 {
            let event = if self.flags.incr { "zincr" } else { "zadd" };
            ctx.notify(class::ZSET, event, self.key);
        }
        Ok(tally)
    }

    /// Adds the pairs in order, stopping at the first error (entries added before it stay,
    /// as in Redis).
    fn add_to(&self, z: &mut SortedSet, limits: &ZsetLimits) -> AddTally {
        let mut tally = AddTally::default();
        for (score, member) in &self.pairs {
            match z.add(member, *score, self.flags, limits) {
                Ok(outcome) => {
                    match outcome {
                        AddOutcome::Added(_) => tally.added += 1,
                        AddOutcome::Updated(_) => tally.updated += 1,
                        AddOutcome::Unchanged(_) | AddOutcome::Skipped => {}
                    }
                    tally.score = outcome.score();
                }
                Err(e) => {
                    tally.error = Some(e);
                    break;
                }
            }
        }
        tally
    }
}

/// What one `ZADD` did.
#[derive(Debug, Default)]
struct AddTally {
    added: i64,
    updated: i64,
    /// The score of the last pair processed (the `INCR` reply), `None` if it was skipped.
    score: Option<f64>,
    error: Option<ZsetError>,
}

/// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member …]`
#[derive(Debug)]
pub(crate) struct ZAdd<'a>(AddArgs<'a>);

impl<'a> Command<'a> for ZAdd<'a> {
    fn parse(a: &mut ArgCursor<'a>) -> CmdResult<Self> {
        AddArgs::parse(a, false).map(ZAdd)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        self.0.apply(ctx)
    }
}

/// `ZINCRBY key increment member`: `ZADD key INCR increment member`.
#[derive(Debug)]
pub(crate) struct ZIncrBy<'a>(AddArgs<'a>);

impl<'a> Command<'a> for ZIncrBy<'a> {
    fn parse(a: &mut ArgCursor<'a>) -> CmdResult<Self> {
        AddArgs::parse(a, true).map(ZIncrBy)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        self.0.apply(ctx)
    }
}

/// `ZREM key member [member …]`
#[derive(Debug)]
pub(crate) struct ZRem {
    key: Bytes,
    members: Vec<Bytes>,
}

impl Command<'_> for ZRem {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ZRem {
            key: a.next_owned()?,
            members: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let Some(mut z) = write_zset(ctx, &self.key)? else {
            return Ok(Reply::Int(0));
        };
        let mut removed = 0;
        for m in &self.members {
            if z.remove(m) {
                removed += 1;
                if z.is_empty() {
                    break;
                }
            }
        }
        if removed == 0 {
            z.mark_unchanged();
        } else {
            drop(z);
            ctx.notify(class::ZSET, "zrem", &self.key);
            ctx.notify_if_deleted(&self.key);
        }
        Ok(Reply::Int(removed))
    }
}

/// `ZCARD key`
#[derive(Debug)]
pub(crate) struct ZCard<'a> {
    key: &'a [u8],
}

impl<'a> Command<'a> for ZCard<'a> {
    fn parse(a: &mut ArgCursor<'a>) -> CmdResult<Self> {
        Ok(ZCard { key: a.next()? })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let n = read_zset(ctx, self.key)?.map_or(0, |z| z.len());
        Ok(Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)))
    }
}

/// `ZCOUNT key min max`
#[derive(Debug)]
pub(crate) struct ZCount {
    key: Bytes,
    range: ScoreRange,
}

impl Command<'_> for ZCount {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next_owned()?;
        let range = ScoreRange::parse(a.next()?, a.next()?).ok_or_else(min_max_not_float)?;
        Ok(ZCount { key, range })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let n = read_zset(ctx, &self.key)?.map_or(0, |z| z.count_in_score_range(&self.range));
        Ok(Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)))
    }
}

/// `ZLEXCOUNT key min max`
#[derive(Debug)]
pub(crate) struct ZLexCount {
    key: Bytes,
    range: LexRange,
}

impl Command<'_> for ZLexCount {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next_owned()?;
        let range = LexRange::parse(a.next()?, a.next()?).ok_or_else(lex_range_invalid)?;
        Ok(ZLexCount { key, range })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let n = read_zset(ctx, &self.key)?.map_or(0, |z| z.count_in_lex_range(&self.range));
        Ok(Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)))
    }
}

/// `ZSCORE key member`
#[derive(Debug)]
pub(crate) struct ZScore {
    key: Bytes,
    member: Bytes,
}

impl Command<'_> for ZScore {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ZScore {
            key: a.next_owned()?,
            member: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let score = read_zset(ctx, &self.key)?.and_then(|z| z.score(&self.member));
        Ok(score.map_or(Reply::Null, Reply::Double))
    }
}

/// `ZMSCORE key member [member …]`
#[derive(Debug)]
pub(crate) struct ZMScore {
    key: Bytes,
    members: Vec<Bytes>,
}

impl Command<'_> for ZMScore {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ZMScore {
            key: a.next_owned()?,
            members: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let z = read_zset(ctx, &self.key)?;
        let z = z.as_deref();
        let scores = self
            .members
            .iter()
            .map(|m| {
                z.and_then(|z| z.score(m))
                    .map_or(Reply::Null, Reply::Double)
            })
            .collect();
        Ok(Reply::Array(scores))
    }
}

/// Which end of a sorted set a command counts or pops from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// Lowest score first: ZRANK, ZPOPMIN.
    Ascending,
    /// Highest score first: ZREVRANK, ZPOPMAX.
    Descending,
}

/// `ZRANK key member` / `ZREVRANK key member`
#[derive(Debug)]
pub(crate) struct ZRank {
    order: Order,
    key: Bytes,
    member: Bytes,
}

impl VariantCommand<'_> for ZRank {
    type Variant = Order;

    fn parse(a: &mut ArgCursor<'_>, order: Order) -> CmdResult<Self> {
        Ok(ZRank {
            order,
            key: a.next_owned()?,
            member: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let reverse = self.order == Order::Descending;
        let rank = read_zset(ctx, &self.key)?.and_then(|z| z.rank(&self.member, reverse));
        Ok(rank.map_or(Reply::Null, |r| {
            Reply::Int(i64::try_from(r).unwrap_or(i64::MAX))
        }))
    }
}

/// What a range selects.
#[derive(Debug, Clone, PartialEq)]
enum RangeBy {
    /// By 0-based rank (negative from the end), both inclusive.
    Rank(i64, i64),
    /// By score.
    Score(ScoreRange),
    /// By member.
    Lex(LexRange),
}

/// The kind of range a command fixes before its options are read (and which ZREMRANGEBY*
/// runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// By 0-based rank, negative from the end.
    Rank,
    /// By score interval.
    Score,
    /// By member interval.
    Lex,
}

/// A parsed `ZRANGE`-family request (Redis's `zrangeGenericCommand`).
#[derive(Debug, Clone, PartialEq)]
struct RangeQuery {
    src: Bytes,
    by: RangeBy,
    reverse: bool,
    /// `LIMIT` offset (0 without LIMIT; a negative offset selects nothing).
    offset: i64,
    /// `LIMIT` count (-1 without LIMIT; any negative count means all).
    count: i64,
    withscores: bool,
}

impl RangeQuery {
    /// Parses `src min max [options…]` the way Redis 7.0 does, in its order: the options
    /// first (`WITHSCORES` unless storing, `LIMIT offset count`, and `REV`/`BYSCORE`/`BYLEX`
    /// only where the command leaves them open, each once), then the option conflicts, then
    /// the bounds (swapped for reverse score and lex ranges, which are given as `max min`).
    /// `kind`/`reverse` are `None` where the command leaves them to the options (`ZRANGE`,
    /// `ZRANGESTORE`).
    fn parse(
        a: &mut ArgCursor<'_>,
        store: bool,
        kind: Option<Kind>,
        reverse: Option<bool>,
    ) -> CmdResult<Self> {
        let src = a.next_owned()?;
        let mut min = a.next()?;
        let mut max = a.next()?;
        let (mut kind, mut reverse) = (kind, reverse);
        let (mut withscores, mut offset, mut count) = (false, 0i64, -1i64);
        while let Some(opt) = a.peek() {
            a.next()?;
            if !store && is(opt, "withscores") {
                withscores = true;
            } else if is(opt, "limit") && a.remaining() >= 2 {
                offset = a.next_i64()?;
                count = a.next_i64()?;
            } else if reverse.is_none() && is(opt, "rev") {
                reverse = Some(true);
            } else if kind.is_none() && is(opt, "bylex") {
                kind = Some(Kind::Lex);
            } else if kind.is_none() && is(opt, "byscore") {
                kind = Some(Kind::Score);
            } else {
                return Err(CmdError::Syntax);
            }
        }
        let reverse = reverse.unwrap_or(false);
        let kind = kind.unwrap_or(Kind::Rank);
        if count != -1 && kind == Kind::Rank {
            return Err(CmdError::msg(
                "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
            ));
        }
        if withscores && kind == Kind::Lex {
            return Err(CmdError::msg(
                "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
            ));
        }
        if reverse && kind != Kind::Rank {
            std::mem::swap(&mut min, &mut max);
        }
        let by = match kind {
            Kind::Rank => RangeBy::Rank(
                parse_i64(min).ok_or(CmdError::NotInteger)?,
                parse_i64(max).ok_or(CmdError::NotInteger)?,
            ),
            Kind::Score => {
                RangeBy::Score(ScoreRange::parse(min, max).ok_or_else(min_max_not_float)?)
            }
            Kind::Lex => RangeBy::Lex(LexRange::parse(min, max).ok_or_else(lex_range_invalid)?),
        };
        Ok(RangeQuery {
            src,
            by,
            reverse,
            offset,
            count,
            withscores,
        })
    }

    /// The selected entries, in reply order.
    fn select(&self, z: &SortedSet) -> Vec<(Bytes, f64)> {
        match &self.by {
            RangeBy::Rank(start, stop) => z.range_by_rank(*start, *stop, self.reverse),
            RangeBy::Score(r) => z.range_by_score(r, self.reverse, self.offset, self.count),
            RangeBy::Lex(r) => z.range_by_lex(r, self.reverse, self.offset, self.count),
        }
    }
}

/// The commands of the reading `ZRANGE` family: all but ZRANGE fix the kind of range and
/// its direction by their name. The variants are the commands' names, prefix and all.
#[allow(clippy::enum_variant_names)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RangeCommand {
    /// `ZRANGE key min max [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]`.
    ZRange,
    /// `ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]`.
    ZRangeByScore,
    /// `ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]`.
    ZRevRangeByScore,
    /// `ZRANGEBYLEX key min max [LIMIT offset count]`.
    ZRangeByLex,
    /// `ZREVRANGEBYLEX key max min [LIMIT offset count]`.
    ZRevRangeByLex,
    /// `ZREVRANGE key start stop [WITHSCORES]`.
    ZRevRange,
}

/// The reading `ZRANGE` family (see [`RangeCommand`]).
#[derive(Debug)]
pub(crate) struct ZRange(RangeQuery);

impl VariantCommand<'_> for ZRange {
    type Variant = RangeCommand;

    fn parse(a: &mut ArgCursor<'_>, command: RangeCommand) -> CmdResult<Self> {
        let (kind, reverse) = match command {
            RangeCommand::ZRange => (None, None),
            RangeCommand::ZRangeByScore => (Some(Kind::Score), Some(false)),
            RangeCommand::ZRevRangeByScore => (Some(Kind::Score), Some(true)),
            RangeCommand::ZRangeByLex => (Some(Kind::Lex), Some(false)),
            RangeCommand::ZRevRangeByLex => (Some(Kind::Lex), Some(true)),
            RangeCommand::ZRevRange => (Some(Kind::Rank), Some(true)),
        };
        RangeQuery::parse(a, false, kind, reverse).map(ZRange)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let q = self.0;
        let resp = ctx.client.resp;
        let items = match read_zset(ctx, &q.src)? {
            Some(z) => q.select(z),
            None => Vec::new(),
        };
        Ok(scored_reply(items, q.withscores, resp))
    }
}

/// `ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]`
///
/// Stores the selection as a new sorted set at `dst` (replacing any value of any type and
/// its TTL), or deletes `dst` when the selection is empty; replies its size.
#[derive(Debug)]
pub(crate) struct ZRangeStore {
    dst: Bytes,
    query: RangeQuery,
}

impl Command<'_> for ZRangeStore {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let dst = a.next_owned()?;
        let query = RangeQuery::parse(a, true, None, None)?;
        Ok(ZRangeStore { dst, query })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let items = match read_zset(ctx, &self.query.src)? {
            Some(z) => self.query.select(z),
            None => Vec::new(),
        };
        let (db, now) = (ctx.db(), ctx.now_ms);
        if items.is_empty() {
            if ctx.store.remove(db, &self.dst, now).is_some() {
                ctx.notify(class::GENERIC, "del", &self.dst);
            }
            return Ok(Reply::Int(0));
        }
        let limits = ctx.shared.live.zset_limits();
        // Redis sizes the new set up front only for rank ranges.
        let mut z = match self.query.by {
            RangeBy::Rank(..) => SortedSet::with_expected_len(items.len(), &limits),
            _ => SortedSet::new(),
        };
        for (m, s) in &items {
            z.insert(m, *s, &limits).map_err(zset_error)?;
        }
        let n = i64::try_from(z.len()).unwrap_or(i64::MAX);
        ctx.store.set(db, &self.dst, Value::ZSet(Box::new(z)), None);
        ctx.notify(class::ZSET, "zrangestore", &self.dst);
        Ok(Reply::Int(n))
    }
}

/// `ZREMRANGEBYSCORE key min max`, `ZREMRANGEBYRANK key start stop`,
/// `ZREMRANGEBYLEX key min max`.
#[derive(Debug)]
pub(crate) struct ZRemRange<'a> {
    key: &'a [u8],
    by: RangeBy,
}

impl<'a> VariantCommand<'a> for ZRemRange<'a> {
    type Variant = Kind;

    fn parse(a: &mut ArgCursor<'a>, kind: Kind) -> CmdResult<Self> {
        let key = a.next()?;
        let (min, max) = (a.next()?, a.next()?);
        let by = match kind {
            Kind::Rank => RangeBy::Rank(
                parse_i64(min).ok_or(CmdError::NotInteger)?,
                parse_i64(max).ok_or(CmdError::NotInteger)?,
            ),
            Kind::Lex => RangeBy::Lex(LexRange::parse(min, max).ok_or_else(lex_range_invalid)?),
            Kind::Score => {
                RangeBy::Score(ScoreRange::parse(min, max).ok_or_else(min_max_not_float)?)
            }
        };
        Ok(ZRemRange { key, by })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let Some(mut z) = write_zset(ctx, self.key)? else {
            return Ok(Reply::Int(0));
        };
        let removed = match &self.by {
            RangeBy::Rank(start, stop) => z.remove_range_by_rank(*start, *stop),
            RangeBy::Score(r) => z.remove_range_by_score(r),
            RangeBy::Lex(r) => z.remove_range_by_lex(r),
        };
        if removed == 0 {
            z.mark_unchanged();
        } else {
            drop(z);
            let event = match self.by {
                RangeBy::Rank(..) => "zremrangebyrank",
                RangeBy::Score(_) => "zremrangebyscore",
                RangeBy::Lex(_) => "zremrangebylex",
            };
            ctx.notify(class::ZSET, event, self.key);
            ctx.notify_if_deleted(self.key);
        }
        Ok(Reply::Int(i64::try_from(removed).unwrap_or(i64::MAX)))
    }
}

/// `ZPOPMIN key [count]` / `ZPOPMAX key [count]`
#[derive(Debug)]
pub(crate) struct ZPop {
    order: Order,
    key: Bytes,
    count: Option<u64>,
}

impl VariantCommand<'_> for ZPop {
    type Variant = Order;

    fn parse(a: &mut ArgCursor<'_>, order: Order) -> CmdResult<Self> {
        let key = a.next_owned()?;
        if a.remaining() > 1 {
            return Err(CmdError::Syntax);
        }
        let count = match a.rest().first() {
            None => None,
            Some(arg) => Some(
                parse_i64(arg)
                    .and_then(|n| u64::try_from(n).ok())
                    .ok_or(CmdError::msg("ERR value is out of range, must be positive"))?,
            ),
        };
        Ok(ZPop { order, key, count })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let resp = ctx.client.resp;
        let Some(mut z) = write_zset(ctx, &self.key)? else {
            return Ok(Reply::Array(Vec::new()));
        };
        let n = self.count.unwrap_or(1);
        if n == 0 {
            return Ok(Reply::Array(Vec::new()));
        }
        let max = self.order == Order::Descending;
        let popped = z.pop(usize::try_from(n).unwrap_or(usize::MAX), max);
        drop(z);
        let event = if max { "zpopmax" } else { "zpopmin" };
        ctx.notify(class::ZSET, event, &self.key);
        ctx.notify_if_deleted(&self.key);
        // Without a count the reply is one flat pair, in RESP3 too.
        let resp = if self.count.is_some() { resp } else { 2 };
        Ok(scored_reply(popped, true, resp))
    }
}

/// `ZRANDMEMBER key [count [WITHSCORES]]`
#[derive(Debug)]
pub(crate) struct ZRandMember {
    key: Bytes,
    count: Option<i64>,
    withscores: bool,
}

impl Command<'_> for ZRandMember {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next_owned()?;
        let Some(arg) = a.peek() else {
            return Ok(ZRandMember {
                key,
                count: None,
                withscores: false,
            });
        };
        a.next()?;
        let count = parse_i64(arg).ok_or(CmdError::NotInteger)?;
        if count == i64::MIN {
            return Err(CmdError::msg(
                "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
            ));
        }
        let withscores = match a.rest() {
            [] => false,
            [w] if is(w, "withscores") => true,
            _ => return Err(CmdError::Syntax),
        };
        if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
            return Err(CmdError::msg("ERR value is out of range"));
        }
        Ok(ZRandMember {
            key,
            count: Some(count),
            withscores,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let resp = ctx.client.resp;
        let z = read_zset(ctx, &self.key)?;
        let Some(count) = self.count else {
            let member = z
                .filter(|z| !z.is_empty())
                .and_then(|z| z.member_at(rand::random_range(0..z.len())))
                .map(|(m, _)| Reply::bulk(&m));
            return Ok(member.unwrap_or(Reply::Null));
        };
        let Some(z) = z.filter(|z| !z.is_empty()) else {
            return Ok(Reply::Array(Vec::new()));
        };
        let len = z.len();
        let picks: Vec<(Bytes, f64)> = if count == 0 {
            Vec::new()
        } else if count < 0 {
            // Repeats allowed, in random order.
            let n = count.unsigned_abs();
            if n > RANDOM_REPLY_LIMIT {
                return Err(CmdError::msg("ERR value is out of range"));
            }
            let ranks: Vec<usize> = (0..n).map(|_| rand::random_range(0..len)).collect();
            owned(z.members_at(&ranks))
        } else if usize::try_from(count).is_ok_and(|c| c >= len) {
            // The whole set; Redis sends it highest first.
            z.iter()
                .rev()
                .map(|(m, s)| (Bytes::copy_from_slice(&m), s))
                .collect()
        } else {
            let amount = usize::try_from(count).unwrap_or(len).min(len);
            let ranks = rand::seq::index::sample(&mut rand::rng(), len, amount).into_vec();
            owned(z.members_at(&ranks))
        };
        Ok(scored_reply(picks, self.withscores, resp))
    }
}

fn owned(entries: Vec<(Member<'_>, f64)>) -> Vec<(Bytes, f64)> {
    entries
        .into_iter()
        .map(|(m, s)| (Bytes::copy_from_slice(&m), s))
        .collect()
}

/// `ZSCAN key cursor [MATCH pattern] [COUNT count]`
///
/// A compact set comes back whole with cursor 0, as in Redis. A large one is walked in score
/// order (see [`SortedSet::scan`]), so its cursors are not Redis's: they are only meaningful
/// to sluice, but give the same guarantee (every member present throughout is returned).
#[derive(Debug)]
pub(crate) struct ZScan {
    key: Bytes,
    cursor: u64,
    /// The options, parsed only once the key is known to be a sorted set (Redis's order: a
    /// missing key replies an empty scan even with bad options).
    options: Vec<Bytes>,
}

impl Command<'_> for ZScan {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next_owned()?;
        let cursor = parse_scan_cursor(a.next()?)?;
        Ok(ZScan {
            key,
            cursor,
            options: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let Some(z) = read_zset(ctx, &self.key)? else {
            return Ok(Reply::Array(vec![
                Reply::bulk(b"0"),
                Reply::Array(Vec::new()),
            ]));
        };
        let (pattern, count, _) = parse_scan_options(
            &mut ArgCursor::new(&crate::engine::args::borrowed(&self.options)),
            false,
        )?;
        let (next, entries) = z.scan(self.cursor, count);
        let mut out = Vec::with_capacity(entries.len().saturating_mul(2));
        let mut text = Vec::with_capacity(24);
        for (m, s) in entries {
            if pattern.as_ref().is_some_and(|p| !glob_match(p, &m, false)) {
                continue;
            }
            text.clear();
            format_double(s, &mut text);
            out.push(Reply::Bulk(m));
            out.push(Reply::bulk(&text));
        }
        Ok(Reply::Array(vec![
            Reply::Bulk(Bytes::copy_from_slice(
                itoa::Buffer::new().format(next).as_bytes(),
            )),
            Reply::Array(out),
        ]))
    }
}

#[cfg(test)]
mod tests;
