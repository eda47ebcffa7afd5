//! Set commands: membership, cardinality, random members (SPOP, SRANDMEMBER), SSCAN.
//!
//! The two encodings (a sorted intset of integers while small, a hash table after) live in
//! `store::value::SetValue`. Replies follow Redis 7.0 per protocol: SMEMBERS and SPOP with a
//! count are RESP3 sets, SRANDMEMBER with a count is an array.

use bytes::Bytes;
use rand::RngExt;

use super::args::parse_scan_cursor;
use super::hash::{parse_random_count, random_picks, scan_matches, scan_options, scan_reply};
use super::{ArgCursor, Command, CommandSpec as C, Ctx, run};
use crate::cmd::args::parse_i64;
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::store::Value;
use crate::store::value::{SetValue, scan_hash, scan_step};

/// The set commands.
pub static COMMANDS: &[C] = &[
    C::new(
        "sadd",
        -3,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        run::<SAdd>,
    )
    .with_acl(&["@write", "@set", "@fast"]),
    C::new(
        "srem",
        -3,
        &["write", "fast"],
        C::keys(1, 1, 1),
        run::<SRem>,
    )
    .with_acl(&["@write", "@set", "@fast"]),
    C::new(
        "smembers",
        2,
        &["readonly"],
        C::keys(1, 1, 1),
        run::<SMembers>,
    )
    .with_acl(&["@read", "@set", "@slow"]),
    C::new(
        "sismember",
        3,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<SIsMember>,
    )
    .with_acl(&["@read", "@set", "@fast"]),
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
    .with_acl(&["@read", "@set", "@fast"]),
    C::new(
        "spop",
        -2,
        &["write", "fast"],
        C::keys(1, 1, 1),
        run::<SPop>,
    )
    .with_acl(&["@write", "@set", "@fast"]),
    C::new(
        "srandmember",
        -2,
        &["readonly"],
        C::keys(1, 1, 1),
        run::<SRandMember>,
    )
    .with_acl(&["@read", "@set", "@slow"]),
    C::new("sscan", -3, &["readonly"], C::keys(1, 1, 1), run::<SScan>)
        .with_acl(&["@read", "@set", "@slow"]),
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

/// Looks a set up for a write command (no stats): None if missing, WRONGTYPE for others.
fn write_set<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> CmdResult<Option<&'c mut SetValue>> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    match ctx.store.lookup(db, key, now).map(|e| &mut e.value) {
        None => Ok(None),
        Some(Value::Set(s)) => Ok(Some(s)),
        Some(_) => Err(CmdError::WrongType),
    }
}

/// SADD key member [member …]
#[derive(Debug)]
pub struct SAdd {
    key: Bytes,
    members: Vec<Bytes>,
}

impl Command for SAdd {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next()?.clone();
        let members = a.rest().to_vec();
        if members.is_empty() {
            return Err(CmdError::WrongArity("sadd".into()));
        }
        Ok(SAdd { key, members })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        // Redis picks the encoding of a new set from its first member.
        let first = &self.members[0];
        let Value::Set(set) = ctx.store.get_or_create(db, &self.key, now, || {
            Value::Set(Box::new(SetValue::new_for(first)))
        }) else {
            return Err(CmdError::WrongType);
        };
        let added = self.members.iter().filter(|m| set.insert(m)).count();
        if added > 0 {
            ctx.store.touch(db, &self.key);
        }
        Ok(Reply::Int(added as i64))
    }
}

/// SREM key member [member …]
#[derive(Debug)]
pub struct SRem {
    key: Bytes,
    members: Vec<Bytes>,
}

impl Command for SRem {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(SRem {
            key: a.next()?.clone(),
            members: a.rest().to_vec(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let Some(set) = write_set(ctx, &self.key)? else {
            return Ok(Reply::Int(0));
        };
        let removed = self.members.iter().filter(|m| set.remove(m)).count();
        if removed > 0 {
            let db = ctx.db();
            ctx.store.touch_and_prune(db, &self.key);
        }
        Ok(Reply::Int(removed as i64))
    }
}

/// SMEMBERS key
#[derive(Debug)]
pub struct SMembers {
    key: Bytes,
}

impl Command for SMembers {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(SMembers {
            key: a.next()?.clone(),
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
pub struct SIsMember {
    key: Bytes,
    member: Bytes,
}

impl Command for SIsMember {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(SIsMember {
            key: a.next()?.clone(),
            member: a.next()?.clone(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let found = read_set(ctx, &self.key)?.is_some_and(|s| s.contains(&self.member));
        Ok(Reply::Int(found as i64))
    }
}

/// SMISMEMBER key member [member …]
#[derive(Debug)]
pub struct SMIsMember {
    key: Bytes,
    members: Vec<Bytes>,
}

impl Command for SMIsMember {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(SMIsMember {
            key: a.next()?.clone(),
            members: a.rest().to_vec(),
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
pub struct SCard {
    key: Bytes,
}

impl Command for SCard {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(SCard {
            key: a.next()?.clone(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let n = read_set(ctx, &self.key)?.map_or(0, |s| s.len());
        Ok(Reply::Int(n as i64))
    }
}

/// `SPOP key [count]`
#[derive(Debug)]
pub struct SPop {
    key: Bytes,
    count: Option<usize>,
}

impl Command for SPop {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next()?.clone();
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
        let db = ctx.db();
        let Some(set) = write_set(ctx, &self.key)? else {
            return Ok(if self.count.is_some() {
                Reply::Set(vec![])
            } else {
                Reply::Null
            });
        };
        let Some(count) = self.count else {
            let member = set.remove_index(rand::random_range(0..set.len().max(1)));
            ctx.store.touch_and_prune(db, &self.key);
            return Ok(member.into());
        };
        if count == 0 {
            return Ok(Reply::Set(vec![]));
        }
        if count >= set.len() {
            let all = set.iter().map(Reply::Bulk).collect();
            let now = ctx.now_ms;
            ctx.store.remove(db, &self.key, now);
            return Ok(Reply::Set(all));
        }
        let mut rng = rand::rng();
        let mut popped = Vec::with_capacity(count);
        for _ in 0..count {
            let i = rng.random_range(0..set.len());
            popped.extend(set.remove_index(i).map(Reply::Bulk));
        }
        ctx.store.touch_and_prune(db, &self.key);
        Ok(Reply::Set(popped))
    }
}

/// `SRANDMEMBER key [count]`
#[derive(Debug)]
pub struct SRandMember {
    key: Bytes,
    count: Option<i64>,
}

impl Command for SRandMember {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next()?.clone();
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
pub struct SScan {
    key: Bytes,
    cursor: u64,
    options: Vec<Bytes>,
}

impl Command for SScan {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next()?.clone();
        let cursor = parse_scan_cursor(a.next()?)?;
        Ok(SScan {
            key,
            cursor,
            options: a.rest().to_vec(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let Some(set) = read_set(ctx, &self.key)? else {
            return Ok(scan_reply(0, vec![]));
        };
        let (pattern, count) = scan_options(&self.options)?;
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
