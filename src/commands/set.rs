//! Set commands: membership, cardinality, random members (SPOP, SRANDMEMBER), SSCAN, and the
//! set algebra (SINTER, SUNION, SDIFF, their STORE forms, SINTERCARD) and SMOVE.
//!
//! Algebra results are built as Redis builds them (an intset until a member or the size says
//! otherwise), so a STORE form's OBJECT ENCODING and an all-integer result's order match.
//!
//! The two encodings (a sorted intset of integers while small, a hash table after) live in
//! `store::value::SetValue`. Replies follow Redis 7.0 per protocol: SMEMBERS and SPOP with a
//! count are RESP3 sets, SRANDMEMBER with a count is an array.

use crate::services::notify::class;
use bytes::Bytes;
use rand::RngExt;

use crate::commands::hash::{
    parse_random_count, random_picks, scan_matches, scan_options, scan_reply,
};
use crate::engine::args::is;
use crate::engine::args::parse_scan_cursor;
use crate::engine::{
    ArgCursor, Command, CommandSpec as C, Ctx, KeySpec, KeySpecDoc, Output, VariantCommand, run,
    run_as,
};
use crate::error::{CmdError, CmdResult};
use crate::num::parse_i64;
use crate::protocol::Reply;
use crate::store::Value;
use crate::store::access::SetMut;
use crate::store::value::{SetValue, scan_hash, scan_step};

/// The set commands.
pub(crate) static COMMANDS: &[C] = &[
    C::new(
        "sadd",
        -3,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        run::<SAdd>,
    )
    .with_acl(&["@write", "@set", "@fast"])
    .with_key_flags(&["RW", "insert"]),
    C::new(
        "srem",
        -3,
        &["write", "fast"],
        C::keys(1, 1, 1),
        run::<SRem>,
    )
    .with_acl(&["@write", "@set", "@fast"])
    .with_key_flags(&["RW", "delete"]),
    C::new(
        "smembers",
        2,
        &["readonly"],
        C::keys(1, 1, 1),
        run::<SMembers>,
    )
    .with_acl(&["@read", "@set", "@slow"])
    .with_tips(&["nondeterministic_output_order"]),
    C::new(
        "sismember",
        3,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<SIsMember>,
    )
    .with_acl(&["@read", "@set", "@fast"])
    .with_key_flags(&["RO"]),
    C::new(
        "smismember",
        -3,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<SMIsMember>,
    )
    .with_acl(&["@read", "@set", "@fast"]),
    C::new(
        "scard",
        2,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<SCard>,
    )
    .with_acl(&["@read", "@set", "@fast"])
    .with_key_flags(&["RO"]),
    C::new(
        "spop",
        -2,
        &["write", "fast"],
        C::keys(1, 1, 1),
        run::<SPop>,
    )
    .with_effect(crate::repl::effects::Effect::SPop)
    .with_acl(&["@write", "@set", "@fast"])
    .with_tips(&["nondeterministic_output"])
    .with_key_flags(&["RW", "access", "delete"]),
    C::new(
        "srandmember",
        -2,
        &["readonly"],
        C::keys(1, 1, 1),
        run::<SRandMember>,
    )
    .with_acl(&["@read", "@set", "@slow"])
    .with_tips(&["nondeterministic_output"]),
    C::new("sscan", -3, &["readonly"], C::keys(1, 1, 1), run::<SScan>)
        .with_acl(&["@read", "@set", "@slow"])
        .with_tips(&["nondeterministic_output"]),
];

/// Reads a set for a read command (keyspace hit/miss counted): None if missing, WRONGTYPE
/// for other types.
fn read_set<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> CmdResult<Option<&'c mut SetValue>> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    match ctx.store.read_value(db, key, now) {
        None => Ok(None),
        Some(Value::Set(s)) => Ok(Some(s)),
        Some(_) => Err(CmdError::WrongType),
    }
}

/// The set at `key` for a change in place (no stats): None if missing, WRONGTYPE for
/// others. The guard signals WATCH and deletes an emptied set when dropped.
fn write_set<'l, 'a, 'k>(
    ctx: &'l mut Ctx<'a>,
    key: &'k [u8],
) -> CmdResult<Option<SetMut<'l, 'a, 'k>>> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    ctx.store.modify(db, key, now)
}

/// The set at `key`, or a new empty one whose encoding suits `first` (Redis picks a new
/// set's encoding from its first member), stored when the guard drops if filled.
fn set_or_create<'l, 'a, 'k>(
    ctx: &'l mut Ctx<'a>,
    key: &'k [u8],
    first: &[u8],
) -> CmdResult<SetMut<'l, 'a, 'k>> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    ctx.store
        .modify_or_create(db, key, now, || Box::new(SetValue::new_for(first)))
}

/// SADD key member [member …]
#[derive(Debug)]
pub(crate) struct SAdd {
    key: Bytes,
    members: Vec<Bytes>,
}

impl Command<'_> for SAdd {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next_owned()?;
        let members = a.rest().to_vec();
        if members.is_empty() {
            return Err(CmdError::WrongArity("sadd".into()));
        }
        Ok(SAdd {
            key,
            members: crate::engine::args::owned(&members),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let mut set = set_or_create(ctx, &self.key, &self.members[0])?;
        let added = self.members.iter().filter(|m| set.insert(m)).count();
        if added == 0 {
            set.mark_unchanged();
        } else {
            drop(set);
            ctx.notify(class::SET, "sadd", &self.key);
        }
        Ok(Reply::Int(added as i64))
    }
}

/// SREM key member [member …]
#[derive(Debug)]
pub(crate) struct SRem {
    key: Bytes,
    members: Vec<Bytes>,
}

impl Command<'_> for SRem {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(SRem {
            key: a.next_owned()?,
            members: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let Some(mut set) = write_set(ctx, &self.key)? else {
            return Ok(Reply::Int(0));
        };
        let removed = self.members.iter().filter(|m| set.remove(m)).count();
        if removed == 0 {
            set.mark_unchanged();
        } else {
            drop(set);
            ctx.notify(class::SET, "srem", &self.key);
            ctx.notify_if_deleted(&self.key);
        }
        Ok(Reply::Int(removed as i64))
    }
}

/// SMEMBERS key
#[derive(Debug)]
pub(crate) struct SMembers {
    key: Bytes,
}

impl Command<'_> for SMembers {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(SMembers {
            key: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let set = read_set(ctx, &self.key)?;
        Ok(Reply::Set(
            set.iter().flat_map(|s| s.iter()).map(Reply::Bulk).collect(),
        ))
    }
}

/// SISMEMBER key member
#[derive(Debug)]
pub(crate) struct SIsMember {
    key: Bytes,
    member: Bytes,
}

impl Command<'_> for SIsMember {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(SIsMember {
            key: a.next_owned()?,
            member: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let found = read_set(ctx, &self.key)?.is_some_and(|s| s.contains(&self.member));
        Ok(Reply::Int(found as i64))
    }
}

/// SMISMEMBER key member [member …]
#[derive(Debug)]
pub(crate) struct SMIsMember {
    key: Bytes,
    members: Vec<Bytes>,
}

impl Command<'_> for SMIsMember {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(SMIsMember {
            key: a.next_owned()?,
            members: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let set = read_set(ctx, &self.key)?;
        let set = set.as_deref();
        Ok(Reply::Array(
            self.members
                .iter()
                .map(|m| Reply::Int(set.is_some_and(|s| s.contains(m)) as i64))
                .collect(),
        ))
    }
}

/// SCARD key
#[derive(Debug)]
pub(crate) struct SCard {
    key: Bytes,
}

impl Command<'_> for SCard {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(SCard {
            key: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let n = read_set(ctx, &self.key)?.map_or(0, |s| s.len());
        Ok(Reply::Int(n as i64))
    }
}

/// `SPOP key [count]`
#[derive(Debug)]
pub(crate) struct SPop {
    key: Bytes,
    count: Option<usize>,
}

impl Command<'_> for SPop {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next_owned()?;
        let count = match a.rest() {
            [] => None,
            [c] => {
                // Redis's getPositiveLongFromObjectOrReply: one message for both failures.
                let n = parse_i64(c).filter(|n| *n >= 0);
                let n = n.ok_or(CmdError::msg("ERR value is out of range, must be positive"))?;
                Some(usize::try_from(n).unwrap_or(usize::MAX))
            }
            _ => return Err(CmdError::Syntax),
        };
        Ok(SPop { key, count })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let Some(mut set) = write_set(ctx, &self.key)? else {
            return Ok(if self.count.is_some() {
                Reply::Set(vec![])
            } else {
                Reply::Null
            });
        };
        let Some(count) = self.count else {
            let i = rand::random_range(0..set.len().max(1));
            let member = set.remove_index(i);
            drop(set);
            ctx.notify(class::SET, "spop", &self.key);
            ctx.notify_if_deleted(&self.key);
            return Ok(member.into());
        };
        if count == 0 {
            return Ok(Reply::Set(vec![]));
        }
        if count >= set.len() {
            let all = set.iter().map(Reply::Bulk).collect();
            // Emptied, so the guard deletes the key when it drops.
            **set = SetValue::Ints(Vec::new());
            drop(set);
            ctx.notify(class::SET, "spop", &self.key);
            ctx.notify(class::GENERIC, "del", &self.key);
            return Ok(Reply::Set(all));
        }
        let mut rng = rand::rng();
        let mut popped = Vec::with_capacity(count);
        for _ in 0..count {
            let i = rng.random_range(0..set.len());
            popped.extend(set.remove_index(i).map(Reply::Bulk));
        }
        drop(set);
        ctx.notify(class::SET, "spop", &self.key);
        ctx.notify_if_deleted(&self.key);
        Ok(Reply::Set(popped))
    }
}

/// `SRANDMEMBER key [count]`
#[derive(Debug)]
pub(crate) struct SRandMember {
    key: Bytes,
    count: Option<i64>,
}

impl Command<'_> for SRandMember {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next_owned()?;
        let count = match a.rest() {
            [] => None,
            [c] => Some(parse_random_count(c)?),
            _ => return Err(CmdError::Syntax),
        };
        Ok(SRandMember { key, count })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let set = read_set(ctx, &self.key)?;
        let Some(count) = self.count else {
            return Ok(set
                .and_then(|s| s.get_index(rand::random_range(0..s.len().max(1))))
                .into());
        };
        let Some(set) = set else {
            return Ok(Reply::Array(vec![]));
        };
        let picks = random_picks(set.len(), count)?;
        Ok(Reply::Array(
            picks
                .into_iter()
                .filter_map(|i| set.get_index(i))
                .map(Reply::Bulk)
                .collect(),
        ))
    }
}

/// SSCAN key cursor [MATCH pattern] [COUNT count]
///
/// An intset is returned whole, in order, with cursor 0, whatever the cursor, as Redis does;
/// a hash table is walked with `scan_step`'s cursors (each member once, whatever is deleted).
#[derive(Debug)]
pub(crate) struct SScan {
    key: Bytes,
    cursor: u64,
    options: Vec<Bytes>,
}

impl Command<'_> for SScan {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next_owned()?;
        let cursor = parse_scan_cursor(a.next()?)?;
        Ok(SScan {
            key,
            cursor,
            options: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let Some(set) = read_set(ctx, &self.key)? else {
            return Ok(scan_reply(0, vec![]));
        };
        let (pattern, count) = scan_options(&crate::engine::args::borrowed(&self.options))?;
        let (positions, next) = if set.is_intset() {
            ((0..set.len()).collect(), 0)
        } else {
            scan_step(set.len(), self.cursor, count, |i| {
                set.get_index(i).map(|m| scan_hash(&m))
            })
        };
        let items = positions
            .into_iter()
            .filter_map(|i| set.get_index(i))
            .filter(|m| scan_matches(pattern.as_ref(), m))
            .map(Reply::Bulk)
            .collect();
        Ok(scan_reply(next, items))
    }
}

/// The set-algebra commands (SINTER, SUNION, SDIFF, their STORE forms, SINTERCARD) and SMOVE.
#[rustfmt::skip]
pub(crate) static ALGEBRA_COMMANDS: &[C] = &[
    C::new("sinter", -2, &["readonly"], C::keys(1, -1, 1), |c, a| run_as::<SetOp>(c, a, (SetAlgebra::Inter, Output::Reply))).with_acl(&["@read", "@set", "@slow"]).with_tips(&["nondeterministic_output_order"]),
    C::new("sunion", -2, &["readonly"], C::keys(1, -1, 1), |c, a| run_as::<SetOp>(c, a, (SetAlgebra::Union, Output::Reply))).with_acl(&["@read", "@set", "@slow"]).with_tips(&["nondeterministic_output_order"]),
    C::new("sdiff", -2, &["readonly"], C::keys(1, -1, 1), |c, a| run_as::<SetOp>(c, a, (SetAlgebra::Diff, Output::Reply))).with_acl(&["@read", "@set", "@slow"]).with_tips(&["nondeterministic_output_order"]),
    C::new("sinterstore", -3, &["write", "denyoom"], C::keys(1, -1, 1), |c, a| run_as::<SetOp>(c, a, (SetAlgebra::Inter, Output::Store))).with_acl(&["@write", "@set", "@slow"])
        .with_key_specs(&[KeySpecDoc::range(&["RW", "update"], 1, 0), KeySpecDoc::range(&["RO", "access"], 2, -1)]),
    C::new("sunionstore", -3, &["write", "denyoom"], C::keys(1, -1, 1), |c, a| run_as::<SetOp>(c, a, (SetAlgebra::Union, Output::Store))).with_acl(&["@write", "@set", "@slow"])
        .with_key_specs(&[KeySpecDoc::range(&["OW", "update"], 1, 0), KeySpecDoc::range(&["RO", "access"], 2, -1)]),
    C::new("sdiffstore", -3, &["write", "denyoom"], C::keys(1, -1, 1), |c, a| run_as::<SetOp>(c, a, (SetAlgebra::Diff, Output::Store))).with_acl(&["@write", "@set", "@slow"])
        .with_key_specs(&[KeySpecDoc::range(&["OW", "update"], 1, 0), KeySpecDoc::range(&["RO", "access"], 2, -1)]),
    C::new("sintercard", -3, &["readonly", "movablekeys"], KeySpec::Keynum { begin: 1, keynumidx: 0, firstkey: 1, step: 1, flags: &["RO", "access"], notes: None }, run::<SInterCard>)
        .with_acl(&["@read", "@set", "@slow"]),
    C::new("smove", 4, &["write", "fast"], C::keys(1, 2, 1), run::<SMove>).with_acl(&["@write", "@set", "@fast"])
        .with_key_specs(&[KeySpecDoc::range(&["RW", "access", "delete"], 1, 0), KeySpecDoc::range(&["RW", "insert"], 2, 0)]),
];

/// The operation of a [`SetOp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SetAlgebra {
    /// SINTER, SINTERSTORE.
    Inter,
    /// SUNION, SUNIONSTORE.
    Union,
    /// SDIFF, SDIFFSTORE.
    Diff,
}

/// Reads the source sets in order (missing keys are None), WRONGTYPE for any other type.
/// With `all_needed` (intersections), a missing key makes the answer empty: then nothing is
/// copied and None is returned.
fn source_sets(
    ctx: &mut Ctx<'_>,
    keys: &[&[u8]],
    all_needed: bool,
) -> CmdResult<Option<Vec<Option<SetValue>>>> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    // First pass: one read lookup per key (keyspace hits and misses as Redis counts them)
    // and the type checks, before anything is copied.
    let mut present = Vec::with_capacity(keys.len());
    for k in keys {
        present.push(match ctx.store.read_value(db, k, now) {
            None => false,
            Some(Value::Set(_)) => true,
            Some(_) => return Err(CmdError::WrongType),
        });
    }
    if all_needed && present.contains(&false) {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(keys.len());
    for (k, here) in keys.iter().zip(present) {
        out.push(match ctx.store.lookup(db, k, now).map(|e| &e.value) {
            Some(Value::Set(s)) if here => Some((**s).clone()),
            _ => None,
        });
    }
    Ok(Some(out))
}

/// An empty result set, as Redis's createIntsetObject: an intset until a member says not.
fn empty_result() -> SetValue {
    SetValue::new_for(b"0")
}

/// The intersection: the members of the smallest set found in every other, in the smallest
/// set's order; `limit` (SINTERCARD) stops counting early. None when any set is missing.
fn intersect(sets: &[Option<SetValue>], limit: usize) -> Option<SetValue> {
    let mut present: Vec<&SetValue> = sets.iter().map(|s| s.as_ref()).collect::<Option<_>>()?;
    present.sort_by_key(|s| s.len());
    let (first, rest) = present.split_first()?;
    let mut out = empty_result();
    for m in first.iter() {
        if rest.iter().all(|s| s.contains(&m)) {
            out.insert(&m);
            if limit != 0 && out.len() >= limit {
                break;
            }
        }
    }
    Some(out)
}

/// The union of the sets present, built by adding each set's members in turn.
fn union(sets: &[Option<SetValue>]) -> SetValue {
    let mut out = empty_result();
    for s in sets.iter().flatten() {
        for m in s.iter() {
            out.insert(&m);
        }
    }
    out
}

/// The first set minus the others, built with the algorithm Redis would pick for these
/// sizes, so the result's encoding is Redis's too (removing members never turns a hash
/// table back into an intset).
fn difference(sets: &[Option<SetValue>], keys: &[&[u8]]) -> SetValue {
    let mut out = empty_result();
    let Some(Some(first)) = sets.first() else {
        return out;
    };
    // A later key naming the first set empties the result.
    if keys[1..]
        .iter()
        .zip(&sets[1..])
        .any(|(k, s)| s.is_some() && *k == keys[0])
    {
        return out;
    }
    let others: Vec<&SetValue> = sets[1..].iter().flatten().collect();
    let n = others.len() + 1;
    let algo_one =
        (first.len() * n) / 2 <= first.len() + others.iter().map(|s| s.len()).sum::<usize>();
    if algo_one {
        for m in first.iter() {
            if !others.iter().any(|s| s.contains(&m)) {
                out.insert(&m);
            }
        }
    } else {
        for m in first.iter() {
            out.insert(&m);
        }
        for s in others {
            if out.is_empty() {
                break;
            }
            for m in s.iter() {
                out.remove(&m);
            }
        }
    }
    out
}

/// SINTER / SUNION / SDIFF key [key …] and SINTERSTORE / SUNIONSTORE / SDIFFSTORE
/// destination key [key …]
#[derive(Debug)]
pub(crate) struct SetOp {
    op: SetAlgebra,
    dest: Option<Bytes>,
    keys: Vec<Bytes>,
}

impl VariantCommand<'_> for SetOp {
    type Variant = (SetAlgebra, Output);

    fn parse(a: &mut ArgCursor<'_>, (op, output): (SetAlgebra, Output)) -> CmdResult<Self> {
        let dest = match output {
            Output::Store => Some(a.next_owned()?),
            Output::Reply => None,
        };
        Ok(SetOp {
            op,
            dest,
            keys: crate::engine::args::owned(a.rest()),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let result = match source_sets(
            ctx,
            &crate::engine::args::borrowed(&self.keys),
            self.op == SetAlgebra::Inter,
        )? {
            None => empty_result(),
            Some(sets) => match self.op {
                SetAlgebra::Inter => intersect(&sets, 0).unwrap_or_else(empty_result),
                SetAlgebra::Union => union(&sets),
                SetAlgebra::Diff => difference(&sets, &crate::engine::args::borrowed(&self.keys)),
            },
        };
        let Some(dest) = self.dest else {
            return Ok(Reply::Set(result.iter().map(Reply::Bulk).collect()));
        };
        let (db, now) = (ctx.db(), ctx.now_ms);
        let n = result.len();
        if n == 0 {
            if ctx.store.remove(db, &dest, now).is_some() {
                ctx.notify(class::GENERIC, "del", &dest);
            }
        } else {
            ctx.store.set(db, &dest, Value::Set(Box::new(result)), None);
            let event = match self.op {
                SetAlgebra::Inter => "sinterstore",
                SetAlgebra::Union => "sunionstore",
                SetAlgebra::Diff => "sdiffstore",
            };
            ctx.notify(class::SET, event, &dest);
        }
        Ok(Reply::Int(n as i64))
    }
}

/// SINTERCARD numkeys key [key …] [LIMIT limit]
#[derive(Debug)]
pub(crate) struct SInterCard {
    keys: Vec<Bytes>,
    limit: usize,
}

/// Parses a numkeys argument as Redis's getRangeLongFromObjectOrReply(1, LONG_MAX) with the
/// message "numkeys should be greater than 0" (for a non-integer too).
pub(crate) fn parse_numkeys(arg: &[u8]) -> CmdResult<usize> {
    match parse_i64(arg) {
        Some(n) if n >= 1 => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
        _ => Err(CmdError::msg("ERR numkeys should be greater than 0")),
    }
}

impl Command<'_> for SInterCard {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let numkeys = parse_numkeys(a.next()?)?;
        if numkeys > a.remaining() {
            return Err(CmdError::msg(
                "ERR Number of keys can't be greater than number of args",
            ));
        }
        let rest = a.rest();
        let (keys, opts) = rest.split_at(numkeys);
        let mut limit = 0;
        let mut i = 0;
        while i < opts.len() {
            if is(opts[i], "limit") && i + 1 < opts.len() {
                let n = parse_i64(opts[i + 1])
                    .filter(|n| *n >= 0)
                    .ok_or(CmdError::msg("ERR LIMIT can't be negative"))?;
                limit = usize::try_from(n).unwrap_or(usize::MAX);
                i += 2;
            } else {
                return Err(CmdError::Syntax);
            }
        }
        Ok(SInterCard {
            keys: crate::engine::args::owned(keys),
            limit,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let n = source_sets(ctx, &crate::engine::args::borrowed(&self.keys), true)?
            .and_then(|sets| intersect(&sets, self.limit))
            .map_or(0, |s| s.len());
        Ok(Reply::Int(n as i64))
    }
}

/// SMOVE source destination member
#[derive(Debug)]
pub(crate) struct SMove {
    source: Bytes,
    destination: Bytes,
    member: Bytes,
}

impl Command<'_> for SMove {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(SMove {
            source: a.next_owned()?,
            destination: a.next_owned()?,
            member: a.next_owned()?,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        // As Redis: a missing source answers 0 before either type is checked.
        if write_set(ctx, &self.source)?.is_none() {
            return Ok(Reply::Int(0));
        }
        write_set(ctx, &self.destination)?;
        if self.source == self.destination {
            let found = write_set(ctx, &self.source)?.is_some_and(|s| s.contains(&self.member));
            return Ok(Reply::Int(found as i64));
        }
        if let Some(mut src) = write_set(ctx, &self.source)?
            && !src.remove(&self.member)
        {
            src.mark_unchanged();
            return Ok(Reply::Int(0));
        }
        ctx.notify(class::SET, "srem", &self.source);
        ctx.notify_if_deleted(&self.source);
        let mut dst = set_or_create(ctx, &self.destination, &self.member)?;
        if !dst.insert(&self.member) {
            dst.mark_unchanged();
        } else {
            drop(dst);
            ctx.notify(class::SET, "sadd", &self.destination);
        }
        Ok(Reply::Int(1))
    }
}
