//! List commands: pushes and pops at both ends, indexed access, ranges, trimming, removal,
//! insertion around a pivot, LPOS searches and LMOVE between lists.
//!
//! A list is a `VecDeque<Bytes>`: O(1) at both ends (the common queue use) and O(1) indexed
//! access. A command that changes a list borrows it through `Locked::modify` (`ListMut`),
//! whose guard signals WATCH and deletes the key when its last element goes, as Redis does.
//!
//! Argument errors come in Redis's order, which is not the same for every command: LRANGE,
//! LTRIM and LREM parse their integers before looking at the key (a bad integer wins over a
//! missing key or WRONGTYPE), while LINDEX and LSET look the key up first. Each `parse` keeps
//! as raw bytes exactly the arguments Redis checks late, and `apply` checks them in Redis's
//! order.
//!
//! WATCH: a command signals the key only when Redis's does. That is whenever something
//! changed, and also for LTRIM, LSET and LMOVE even when the list ends up as it was (Redis
//! signals those unconditionally); LREM that removes nothing, LINSERT without its pivot,
//! LPUSHX on a missing key and LPOP with a count of 0 signal nothing.

use crate::services::notify::class;
use std::collections::VecDeque;

use bytes::Bytes;

use crate::engine::args::is;
use crate::engine::{
    ArgCursor, Command, CommandSpec as C, Ctx, KeySpec, KeySpecDoc, VariantCommand, run, run_as,
};
use crate::error::{CmdError, CmdResult};
use crate::num::parse_i64;
use crate::protocol::Reply;
use crate::store::access::ListMut;
use crate::store::{Locked, Value};

/// The list commands.
// One line per command, like the other families' tables: arity, flags, keys and ACL
// categories as `COMMAND INFO` reports them on Redis 7.0.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[C] = &[
    C::new("lpush", -3, &["write", "denyoom", "fast"], C::keys(1, 1, 1), |c, a| run_as::<Push>(c, a, (End::Left, PushMode::Always))).with_acl(&["@write", "@list", "@fast"]).with_key_flags(&["RW", "insert"]),
    C::new("rpush", -3, &["write", "denyoom", "fast"], C::keys(1, 1, 1), |c, a| run_as::<Push>(c, a, (End::Right, PushMode::Always))).with_acl(&["@write", "@list", "@fast"]).with_key_flags(&["RW", "insert"]),
    C::new("lpushx", -3, &["write", "denyoom", "fast"], C::keys(1, 1, 1), |c, a| run_as::<Push>(c, a, (End::Left, PushMode::IfExists))).with_acl(&["@write", "@list", "@fast"]).with_key_flags(&["RW", "insert"]),
    C::new("rpushx", -3, &["write", "denyoom", "fast"], C::keys(1, 1, 1), |c, a| run_as::<Push>(c, a, (End::Right, PushMode::IfExists))).with_acl(&["@write", "@list", "@fast"]).with_key_flags(&["RW", "insert"]),
    C::new("lpop", -2, &["write", "fast"], C::keys(1, 1, 1), |c, a| run_as::<Pop>(c, a, End::Left)).with_acl(&["@write", "@list", "@fast"]).with_key_flags(&["RW", "access", "delete"]),
    C::new("rpop", -2, &["write", "fast"], C::keys(1, 1, 1), |c, a| run_as::<Pop>(c, a, End::Right)).with_acl(&["@write", "@list", "@fast"]).with_key_flags(&["RW", "access", "delete"]),
    C::new("llen", 2, &["readonly", "fast"], C::keys(1, 1, 1), run::<LLen>).with_acl(&["@read", "@list", "@fast"]).with_key_flags(&["RO"]),
    C::new("lindex", 3, &["readonly"], C::keys(1, 1, 1), run::<LIndex>).with_acl(&["@read", "@list", "@slow"]),
    C::new("lrange", 4, &["readonly"], C::keys(1, 1, 1), run::<LRange>).with_acl(&["@read", "@list", "@slow"]),
    C::new("ltrim", 4, &["write"], C::keys(1, 1, 1), run::<LTrim>).with_acl(&["@write", "@list", "@slow"]).with_key_flags(&["RW", "delete"]),
    C::new("lset", 4, &["write", "denyoom"], C::keys(1, 1, 1), run::<LSet>).with_acl(&["@write", "@list", "@slow"]),
    C::new("lrem", 4, &["write"], C::keys(1, 1, 1), run::<LRem>).with_acl(&["@write", "@list", "@slow"]).with_key_flags(&["RW", "delete"]),
    C::new("linsert", 5, &["write", "denyoom"], C::keys(1, 1, 1), run::<LInsert>).with_acl(&["@write", "@list", "@slow"]).with_key_flags(&["RW", "insert"]),
    C::new("lpos", -3, &["readonly"], C::keys(1, 1, 1), run::<LPos>).with_acl(&["@read", "@list", "@slow"]),
    C::new("lmove", 5, &["write", "denyoom"], C::keys(1, 2, 1), run::<LMove>).with_acl(&["@write", "@list", "@slow"])
        .with_key_specs(&[KeySpecDoc::range(&["RW", "access", "delete"], 1, 0), KeySpecDoc::range(&["RW", "insert"], 2, 0)]),
    C::new("rpoplpush", 3, &["write", "denyoom"], C::keys(1, 2, 1), run::<RPopLPush>).with_acl(&["@write", "@list", "@slow"])
        .with_key_specs(&[KeySpecDoc::range(&["RW", "access", "delete"], 1, 0), KeySpecDoc::range(&["RW", "insert"], 2, 0)]),
    C::new("lmpop", -4, &["write", "movablekeys"], KeySpec::Keynum { begin: 1, keynumidx: 0, firstkey: 1, step: 1, flags: &["RW", "access", "delete"], notes: None }, run::<LMPop>)
        .with_acl(&["@write", "@list", "@slow"]),
];

/// The list at `key` for a change in place (no stats): None if missing, WRONGTYPE for
/// another type. The guard signals WATCH and deletes an emptied list when dropped.
fn list_mut<'l, 'a, 'k>(
    store: &'l mut Locked<'a>,
    db: usize,
    key: &'k [u8],
    now_ms: u64,
) -> CmdResult<Option<ListMut<'l, 'a, 'k>>> {
    store.modify(db, key, now_ms)
}

/// The list at `key` for a read (counts a keyspace hit or miss): None if missing,
/// WRONGTYPE for another type.
fn list_read<'s>(
    store: &'s mut Locked<'_>,
    db: usize,
    key: &[u8],
    now_ms: u64,
) -> CmdResult<Option<&'s VecDeque<Bytes>>> {
    match store.read_value(db, key, now_ms) {
        None => Ok(None),
        Some(Value::List(l)) => Ok(Some(l)),
        Some(_) => Err(CmdError::WrongType),
    }
}

/// The list at `key`, or a new empty one (without TTL) stored when the guard drops if
/// something was pushed; WRONGTYPE for another type.
fn list_or_create<'l, 'a, 'k>(
    store: &'l mut Locked<'a>,
    db: usize,
    key: &'k [u8],
    now_ms: u64,
) -> CmdResult<ListMut<'l, 'a, 'k>> {
    store.modify_or_create(db, key, now_ms, VecDeque::new)
}

/// A stored copy of a client argument (never a slice of the connection's read buffer).
fn stored(b: &Bytes) -> Bytes {
    Bytes::copy_from_slice(b)
}

/// Resolves a list index as LINDEX and LSET do: negative counts from the tail (-1 is the
/// last element). None when it falls outside the list.
pub(crate) fn resolve_index(index: i64, len: usize) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    // A negative index plus a non-negative length cannot overflow.
    let i = if index < 0 { index + len } else { index };
    if (0..len).contains(&i) {
        Some(i as usize)
    } else {
        None
    }
}

/// Resolves an inclusive `[start, end]` range as LRANGE and LTRIM do: negative indexes count
/// from the tail, a start before the head is clamped to the head and an end past the tail to
/// the tail. None when the range is empty.
pub(crate) fn resolve_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = i64::try_from(len).ok()?;
    let start = if start < 0 {
        (start + len).max(0)
    } else {
        start
    };
    let end = if end < 0 { end + len } else { end };
    if start > end || start >= len {
        return None;
    }
    Some((start as usize, end.min(len - 1) as usize))
}

/// Which end of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// The head (LPUSH, LPOP, LEFT).
    Left,
    /// The tail (RPUSH, RPOP, RIGHT).
    Right,
}

impl End {
    /// The event a pop from this end emits.
    pub(crate) fn pop_event(self) -> &'static str {
        match self {
            End::Left => "lpop",
            End::Right => "rpop",
        }
    }

    /// The event a push at this end emits.
    pub(crate) fn push_event(self) -> &'static str {
        match self {
            End::Left => "lpush",
            End::Right => "rpush",
        }
    }

    /// LEFT or RIGHT (any case), else a syntax error.
    pub(crate) fn parse(b: &[u8]) -> CmdResult<End> {
        if is(b, "left") {
            Ok(End::Left)
        } else if is(b, "right") {
            Ok(End::Right)
        } else {
            Err(CmdError::Syntax)
        }
    }

    fn pop(self, l: &mut VecDeque<Bytes>) -> Option<Bytes> {
        match self {
            End::Left => l.pop_front(),
            End::Right => l.pop_back(),
        }
    }

    /// Pops up to `n` elements from this end, in pop order (LPOP/RPOP/LMPOP with a count).
    fn pop_many(self, l: &mut VecDeque<Bytes>, n: usize) -> Vec<Reply> {
        let n = n.min(l.len());
        match self {
            End::Left => l.drain(..n).map(Reply::Bulk).collect(),
            End::Right => l.drain(l.len() - n..).rev().map(Reply::Bulk).collect(),
        }
    }

    fn push(self, l: &mut VecDeque<Bytes>, v: Bytes) {
        match self {
            End::Left => l.push_front(v),
            End::Right => l.push_back(v),
        }
    }
}

/// LPUSH / RPUSH / LPUSHX / RPUSHX key element [element …]
///
/// At [`End::Left`] each element is pushed at the head in turn, so they end up reversed.
#[derive(Debug)]
pub(crate) struct Push {
    end: End,
    mode: PushMode,
    key: Bytes,
    elements: Vec<Bytes>,
}

/// Whether a push creates the list (LPUSH, RPUSH) or needs it to exist (LPUSHX, RPUSHX).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PushMode {
    /// LPUSH, RPUSH.
    Always,
    /// LPUSHX, RPUSHX.
    IfExists,
}

impl VariantCommand<'_> for Push {
    type Variant = (End, PushMode);

    fn parse(a: &mut ArgCursor<'_>, (end, mode): (End, PushMode)) -> CmdResult<Self> {
        Ok(Push {
            end,
            mode,
            key: a.next_owned()?,
            elements: crate::engine::args::owned(a.rest()),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        if list_mut(&mut ctx.store, db, &self.key, now)?.is_none()
            && self.mode == PushMode::IfExists
        {
            return Ok(Reply::Int(0));
        }
        let end = self.end;
        let mut l = list_or_create(&mut ctx.store, db, &self.key, now)?;
        l.reserve(self.elements.len());
        for e in &self.elements {
            end.push(&mut l, stored(e));
        }
        let len = l.len();
        drop(l);
        ctx.notify(class::LIST, end.push_event(), &self.key);
        Ok(Reply::Int(len as i64))
    }
}

/// `LPOP / RPOP key [count]`
#[derive(Debug)]
pub(crate) struct Pop {
    end: End,
    key: Bytes,
    count: Option<usize>,
}

impl VariantCommand<'_> for Pop {
    type Variant = End;

    fn parse(a: &mut ArgCursor<'_>, end: End) -> CmdResult<Self> {
        let key = a.next_owned()?;
        if a.remaining() > 1 {
            return Err(CmdError::WrongArity(
                match end {
                    End::Left => "lpop",
                    End::Right => "rpop",
                }
                .into(),
            ));
        }
        let count = match a.rest().first() {
            None => None,
            Some(c) => {
                let n = parse_i64(c).and_then(|n| usize::try_from(n).ok());
                Some(n.ok_or(CmdError::msg("ERR value is out of range, must be positive"))?)
            }
        };
        Ok(Pop { end, key, count })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let end = self.end;
        let Some(mut l) = list_mut(&mut ctx.store, db, &self.key, now)? else {
            return Ok(if self.count.is_some() {
                Reply::NullArray
            } else {
                Reply::Null
            });
        };
        let reply = match self.count {
            None => match end.pop(&mut l) {
                Some(v) => Reply::Bulk(v),
                None => return Ok(Reply::Null),
            },
            Some(0) => return Ok(Reply::Array(Vec::new())),
            Some(n) => Reply::Array(end.pop_many(&mut l, n)),
        };
        drop(l);
        ctx.notify(class::LIST, end.pop_event(), &self.key);
        ctx.notify_if_deleted(&self.key);
        Ok(reply)
    }
}

/// LLEN key
#[derive(Debug)]
pub(crate) struct LLen {
    key: Bytes,
}

impl Command<'_> for LLen {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(LLen {
            key: a.next_owned()?,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let len = list_read(&mut ctx.store, db, &self.key, now)?.map_or(0, |l| l.len());
        Ok(Reply::Int(len as i64))
    }
}

/// LINDEX key index (the key is looked up before the index is parsed, as in Redis).
#[derive(Debug)]
pub(crate) struct LIndex {
    key: Bytes,
    index: Bytes,
}

impl Command<'_> for LIndex {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(LIndex {
            key: a.next_owned()?,
            index: a.next_owned()?,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let Some(l) = list_read(&mut ctx.store, db, &self.key, now)? else {
            return Ok(Reply::Null);
        };
        let index = parse_i64(&self.index).ok_or(CmdError::NotInteger)?;
        Ok(resolve_index(index, l.len())
            .and_then(|i| l.get(i))
            .cloned()
            .into())
    }
}

/// LRANGE key start stop
#[derive(Debug)]
pub(crate) struct LRange {
    key: Bytes,
    start: i64,
    end: i64,
}

impl Command<'_> for LRange {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(LRange {
            key: a.next_owned()?,
            start: a.next_i64()?,
            end: a.next_i64()?,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let Some(l) = list_read(&mut ctx.store, db, &self.key, now)? else {
            return Ok(Reply::Array(Vec::new()));
        };
        Ok(Reply::Array(
            match resolve_range(self.start, self.end, l.len()) {
                Some((s, e)) => l.range(s..=e).cloned().map(Reply::Bulk).collect(),
                None => Vec::new(),
            },
        ))
    }
}

/// LTRIM key start stop
#[derive(Debug)]
pub(crate) struct LTrim {
    key: Bytes,
    start: i64,
    end: i64,
}

impl Command<'_> for LTrim {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(LTrim {
            key: a.next_owned()?,
            start: a.next_i64()?,
            end: a.next_i64()?,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let Some(mut l) = list_mut(&mut ctx.store, db, &self.key, now)? else {
            return Ok(Reply::ok());
        };
        match resolve_range(self.start, self.end, l.len()) {
            Some((s, e)) => {
                l.truncate(e + 1);
                l.drain(..s);
            }
            None => l.clear(),
        }
        // Redis signals LTRIM even when it keeps every element.
        l.mark_changed();
        drop(l);
        ctx.notify(class::LIST, "ltrim", &self.key);
        ctx.notify_if_deleted(&self.key);
        Ok(Reply::ok())
    }
}

/// LSET key index element (the key is looked up before the index is parsed, as in Redis).
#[derive(Debug)]
pub(crate) struct LSet {
    key: Bytes,
    index: Bytes,
    element: Bytes,
}

impl Command<'_> for LSet {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(LSet {
            key: a.next_owned()?,
            index: a.next_owned()?,
            element: a.next_owned()?,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let Some(mut l) = list_mut(&mut ctx.store, db, &self.key, now)? else {
            return Err(CmdError::NoSuchKey);
        };
        let index = parse_i64(&self.index).ok_or(CmdError::NotInteger)?;
        // Resolved through a read first: an index out of range changes nothing.
        let i = resolve_index(index, l.len()).ok_or(CmdError::msg("ERR index out of range"))?;
        l[i] = stored(&self.element);
        drop(l);
        ctx.notify(class::LIST, "lset", &self.key);
        Ok(Reply::ok())
    }
}

/// LREM key count element: count > 0 removes the first `count` matches from the head,
/// count < 0 the first `-count` from the tail, 0 every match.
#[derive(Debug)]
pub(crate) struct LRem {
    key: Bytes,
    count: i64,
    element: Bytes,
}

impl Command<'_> for LRem {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(LRem {
            key: a.next_owned()?,
            count: a.next_i64()?,
            element: a.next_owned()?,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let Some(mut l) = list_mut(&mut ctx.store, db, &self.key, now)? else {
            return Ok(Reply::Int(0));
        };
        let removed = remove_matches(&mut l, &self.element, self.count);
        if removed == 0 {
            l.mark_unchanged();
        } else {
            drop(l);
            ctx.notify(class::LIST, "lrem", &self.key);
            ctx.notify_if_deleted(&self.key);
        }
        Ok(Reply::Int(removed as i64))
    }
}

/// Removes the elements equal to `element` as LREM's `count` says; returns how many went.
pub(crate) fn remove_matches(l: &mut VecDeque<Bytes>, element: &[u8], count: i64) -> usize {
    // i64::MIN's magnitude (2^63) is beyond any list length: it removes every match, as
    // Redis's (overflowing) negation ends up doing.
    let limit = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    let limit = if limit == 0 { usize::MAX } else { limit };
    // Matches to keep before removing starts: from the tail, that is all but the last `limit`.
    let mut skip = if count < 0 {
        let total = l.iter().filter(|e| &e[..] == element).count();
        total.saturating_sub(limit)
    } else {
        0
    };
    let mut removed = 0;
    l.retain(|e| {
        if removed == limit || &e[..] != element {
            return true;
        }
        if skip > 0 {
            skip -= 1;
            return true;
        }
        removed += 1;
        false
    });
    removed
}

/// LINSERT key BEFORE|AFTER pivot element
#[derive(Debug)]
pub(crate) struct LInsert {
    key: Bytes,
    after: bool,
    pivot: Bytes,
    element: Bytes,
}

impl Command<'_> for LInsert {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next_owned()?;
        let place = a.next_bytes()?;
        let after = if is(place, "after") {
            true
        } else if is(place, "before") {
            false
        } else {
            return Err(CmdError::Syntax);
        };
        Ok(LInsert {
            key,
            after,
            pivot: a.next_owned()?,
            element: a.next_owned()?,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let Some(mut l) = list_mut(&mut ctx.store, db, &self.key, now)? else {
            return Ok(Reply::Int(0));
        };
        let Some(pos) = l.iter().position(|e| *e == self.pivot) else {
            return Ok(Reply::Int(-1));
        };
        l.insert(pos + usize::from(self.after), stored(&self.element));
        let len = l.len();
        drop(l);
        ctx.notify(class::LIST, "linsert", &self.key);
        Ok(Reply::Int(len as i64))
    }
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]
#[derive(Debug)]
pub(crate) struct LPos {
    key: Bytes,
    element: Bytes,
    rank: i64,
    /// None: no COUNT option (reply with one index or nil); Some(0): every match.
    count: Option<i64>,
    /// 0: scan the whole list.
    maxlen: i64,
}

impl Command<'_> for LPos {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let mut p = LPos {
            key: a.next_owned()?,
            element: a.next_owned()?,
            rank: 1,
            count: None,
            maxlen: 0,
        };
        // Options are checked one by one, so the first bad one decides the error. Redis
        // reports a malformed COUNT or MAXLEN with the "can't be negative" text even when it is
        // not a number at all.
        while a.remaining() > 0 {
            let opt = a.next_bytes()?;
            if a.remaining() == 0 {
                return Err(CmdError::Syntax);
            }
            if is(opt, "rank") {
                p.rank = a.next_i64()?;
                if p.rank == 0 {
                    return Err(CmdError::msg(
                        "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... \
                         or use negative to start from the end of the list",
                    ));
                }
            } else if is(opt, "count") {
                let n = parse_i64(a.next()?).filter(|n| *n >= 0);
                p.count = Some(n.ok_or(CmdError::msg("ERR COUNT can't be negative"))?);
            } else if is(opt, "maxlen") {
                let n = parse_i64(a.next()?).filter(|n| *n >= 0);
                p.maxlen = n.ok_or(CmdError::msg("ERR MAXLEN can't be negative"))?;
            } else {
                return Err(CmdError::Syntax);
            }
        }
        Ok(p)
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let Some(l) = list_read(&mut ctx.store, db, &self.key, now)? else {
            return Ok(if self.count.is_some() {
                Reply::Array(Vec::new())
            } else {
                Reply::Null
            });
        };
        let found = lpos(l, &self.element, self.rank, self.count, self.maxlen);
        Ok(match self.count {
            Some(_) => Reply::Array(found.into_iter().map(Reply::Int).collect()),
            None => found.first().map_or(Reply::Null, |&i| Reply::Int(i)),
        })
    }
}

/// The indexes LPOS reports. Without COUNT, at most one.
///
/// This follows Redis's loop step by step, including its wrapping signed arithmetic: a rank
/// of i64::MIN stays negative when negated, so it scans from the tail, accepts the first
/// match and, with COUNT, never reaches the count (Redis 7.0 does the same).
pub(crate) fn lpos(
    l: &VecDeque<Bytes>,
    element: &[u8],
    rank: i64,
    count: Option<i64>,
    maxlen: i64,
) -> Vec<i64> {
    let from_tail = rank < 0;
    let rank = if from_tail { rank.wrapping_neg() } else { rank };
    let len = l.len();
    let mut found = Vec::new();
    let mut matches: i64 = 0;
    for (index, step) in (0..len).enumerate() {
        let index = index as i64;
        if maxlen != 0 && index >= maxlen {
            break;
        }
        let pos = if from_tail { len - 1 - step } else { step };
        if l.get(pos).is_none_or(|e| &e[..] != element) {
            continue;
        }
        matches += 1;
        if matches < rank {
            continue;
        }
        found.push(pos as i64);
        match count {
            None => break,
            Some(c) if c != 0 && matches.wrapping_sub(rank).wrapping_add(1) >= c => break,
            Some(_) => {}
        }
    }
    found
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT
///
/// Like Redis, the destination's type is checked before anything is popped, so a WRONGTYPE
/// destination leaves the source untouched; a missing source replies nil without looking at
/// the destination. Source and destination may be the same list (a rotation).
#[derive(Debug)]
pub(crate) struct LMove {
    pub(crate) source: Bytes,
    pub(crate) destination: Bytes,
    pub(crate) from: End,
    pub(crate) to: End,
}

impl Command<'_> for LMove {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let source = a.next_owned()?;
        let destination = a.next_owned()?;
        let from = End::parse(a.next_bytes()?)?;
        let to = End::parse(a.next_bytes()?)?;
        Ok(LMove {
            source,
            destination,
            from,
            to,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let Some(mut src) = list_mut(&mut ctx.store, db, &self.source, now)? else {
            return Ok(Reply::Null);
        };
        if self.source == self.destination {
            let Some(v) = self.from.pop(&mut src) else {
                return Ok(Reply::Null);
            };
            self.to.push(&mut src, v.clone());
            drop(src);
            ctx.notify(class::LIST, self.to.push_event(), &self.source);
            ctx.notify(class::LIST, self.from.pop_event(), &self.source);
            return Ok(Reply::Bulk(v));
        }
        if src.is_empty() {
            return Ok(Reply::Null);
        }
        drop(src);
        // Type-check the destination before popping.
        list_mut(&mut ctx.store, db, &self.destination, now)?;
        let Some(v) = list_mut(&mut ctx.store, db, &self.source, now)?
            .and_then(|mut src| self.from.pop(&mut src))
        else {
            return Ok(Reply::Null);
        };
        let mut dst = list_or_create(&mut ctx.store, db, &self.destination, now)?;
        self.to.push(&mut dst, v.clone());
        drop(dst);
        // Redis's order: the push, then the pop, then the emptied source's `del`.
        ctx.notify(class::LIST, self.to.push_event(), &self.destination);
        ctx.notify(class::LIST, self.from.pop_event(), &self.source);
        ctx.notify_if_deleted(&self.source);
        Ok(Reply::Bulk(v))
    }
}

/// RPOPLPUSH source destination: LMOVE source destination RIGHT LEFT.
#[derive(Debug)]
pub(crate) struct RPopLPush(LMove);

impl Command<'_> for RPopLPush {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(RPopLPush(LMove {
            source: a.next_owned()?,
            destination: a.next_owned()?,
            from: End::Right,
            to: End::Left,
        }))
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        self.0.apply(ctx)
    }
}

/// LMPOP numkeys key [key …] LEFT|RIGHT [COUNT count]
///
/// Pops from the first non-empty list of the keys, in order; a key of another type met
/// before it is WRONGTYPE. Replies `[key, [elements]]`, or a null array if every list is
/// missing.
#[derive(Debug)]
pub(crate) struct LMPop {
    pub(crate) keys: Vec<Bytes>,
    pub(crate) end: End,
    pub(crate) count: usize,
}

impl Command<'_> for LMPop {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let numkeys = crate::commands::set::parse_numkeys(a.next()?)?;
        if numkeys >= a.remaining() {
            return Err(CmdError::Syntax);
        }
        let keys = (0..numkeys)
            .map(|_| a.next_owned())
            .collect::<CmdResult<Vec<_>>>()?;
        let end = End::parse(a.next_bytes()?)?;
        let mut count = None;
        while let Some(opt) = a.peek() {
            a.next()?;
            if count.is_none() && is(opt, "count") && a.remaining() > 0 {
                let n = parse_i64(a.next()?)
                    .filter(|n| *n >= 1)
                    .ok_or(CmdError::msg("ERR count should be greater than 0"))?;
                count = Some(usize::try_from(n).unwrap_or(usize::MAX));
            } else {
                return Err(CmdError::Syntax);
            }
        }
        Ok(LMPop {
            keys,
            end,
            count: count.unwrap_or(1),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        for key in &self.keys {
            let Some(mut l) = list_mut(&mut ctx.store, db, key, now)? else {
                continue;
            };
            if l.is_empty() {
                continue;
            }
            let popped = self.end.pop_many(&mut l, self.count);
            drop(l);
            ctx.notify(class::LIST, self.end.pop_event(), key);
            ctx.notify_if_deleted(key);
            return Ok(Reply::Array(vec![
                Reply::Bulk(key.clone()),
                Reply::Array(popped),
            ]));
        }
        Ok(Reply::NullArray)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> VecDeque<Bytes> {
        items
            .iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    #[test]
    fn indexes() {
        assert_eq!(resolve_index(0, 3), Some(0));
        assert_eq!(resolve_index(2, 3), Some(2));
        assert_eq!(resolve_index(3, 3), None);
        assert_eq!(resolve_index(-1, 3), Some(2));
        assert_eq!(resolve_index(-3, 3), Some(0));
        assert_eq!(resolve_index(-4, 3), None);
        assert_eq!(resolve_index(0, 0), None);
        assert_eq!(resolve_index(-1, 0), None);
        assert_eq!(resolve_index(i64::MAX, 3), None);
        assert_eq!(resolve_index(i64::MIN, 3), None);
    }

    #[test]
    fn ranges() {
        assert_eq!(resolve_range(0, -1, 3), Some((0, 2)));
        assert_eq!(resolve_range(1, 1, 3), Some((1, 1)));
        assert_eq!(resolve_range(-2, -1, 3), Some((1, 2)));
        assert_eq!(resolve_range(-100, 100, 3), Some((0, 2)));
        assert_eq!(resolve_range(2, 1, 3), None);
        assert_eq!(resolve_range(3, 10, 3), None);
        assert_eq!(resolve_range(0, -4, 3), None);
        assert_eq!(resolve_range(-5, -4, 3), None);
        assert_eq!(resolve_range(0, 0, 0), None);
        assert_eq!(resolve_range(0, -1, 0), None);
        assert_eq!(resolve_range(i64::MIN, i64::MAX, 3), Some((0, 2)));
        assert_eq!(resolve_range(i64::MAX, i64::MIN, 3), None);
        assert_eq!(resolve_range(i64::MIN, i64::MIN, 3), None);
    }

    #[test]
    fn lrem_counts() {
        let base = list(&["a", "b", "a", "c", "a"]);
        let run = |count: i64| {
            let mut l = base.clone();
            let n = remove_matches(&mut l, b"a", count);
            (n, l)
        };
        assert_eq!(run(0), (3, list(&["b", "c"])));
        assert_eq!(run(2), (2, list(&["b", "c", "a"])));
        assert_eq!(run(-2), (2, list(&["a", "b", "c"])));
        assert_eq!(run(-1), (1, list(&["a", "b", "a", "c"])));
        assert_eq!(run(10), (3, list(&["b", "c"])));
        assert_eq!(run(-10), (3, list(&["b", "c"])));
        assert_eq!(run(i64::MIN), (3, list(&["b", "c"])));
        assert_eq!(run(i64::MAX), (3, list(&["b", "c"])));
        let mut l = base.clone();
        assert_eq!(remove_matches(&mut l, b"z", 0), 0);
        assert_eq!(l, base);
    }

    #[test]
    fn lpos_scans() {
        let l = list(&["a", "b", "c", "a", "b", "c", "a"]);
        assert_eq!(lpos(&l, b"a", 1, None, 0), vec![0]);
        assert_eq!(lpos(&l, b"a", 2, None, 0), vec![3]);
        assert_eq!(lpos(&l, b"a", -1, None, 0), vec![6]);
        assert_eq!(lpos(&l, b"a", -2, None, 0), vec![3]);
        assert_eq!(lpos(&l, b"a", 4, None, 0), Vec::<i64>::new());
        assert_eq!(lpos(&l, b"a", 1, Some(0), 0), vec![0, 3, 6]);
        assert_eq!(lpos(&l, b"a", -1, Some(2), 0), vec![6, 3]);
        assert_eq!(lpos(&l, b"a", 2, Some(0), 4), vec![3]);
        assert_eq!(lpos(&l, b"a", -2, None, 3), Vec::<i64>::new());
        assert_eq!(lpos(&l, b"a", i64::MIN, Some(1), 0), vec![6, 3, 0]);
        assert_eq!(lpos(&l, b"a", i64::MIN, None, 0), vec![6]);
        assert_eq!(lpos(&l, b"a", i64::MAX, Some(0), 0), Vec::<i64>::new());
        assert_eq!(lpos(&VecDeque::new(), b"a", 1, None, 0), Vec::<i64>::new());
    }
}
