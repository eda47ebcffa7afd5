//! Hash commands: HSET and friends, counters in fields (HINCRBY, HINCRBYFLOAT), random
//! fields, HSCAN.
//!
//! The data structure and its two encodings (listpack order while small, a hash table after)
//! live in `store::value::HashValue`; this module is the Redis surface: argument checks in
//! Redis's order, reply shapes per protocol, and WATCH signalling only when something was
//! written. HINCRBYFLOAT does its arithmetic in emulated x87 extended precision
//! ([`crate::num::long_double`]) because that is what Redis's `long double` is on x86-64 Linux, and the
//! stored text (`0.1 + 0.2` is `0.3` there) depends on it.

use crate::services::notify::class;
use bytes::Bytes;
use rand::RngExt;

use crate::commands::keys::parse_scan_options;
use crate::engine::args::{glob_match, parse_scan_cursor};
use crate::engine::{ArgCursor, Command, CommandSpec as C, Ctx, VariantCommand, run, run_as};
use crate::error::{CmdError, CmdResult};
use crate::num::parse_i64;
use crate::protocol::Reply;
use crate::store::Value;
use crate::store::access::HashMut;
use crate::store::value::{HashLimits, HashValue, scan_hash, scan_step};

use super::hashttl::{Which, lazy_expire, notify_expired};

/// Redis 7.4's lazy expiry of the fields a command names (`HFE_LAZY_EXPIRE`), with its
/// notifications: `hexpired`, then `del` if the hash went with them.
fn expire_named(ctx: &mut Ctx<'_>, key: &[u8], fields: &[&[u8]]) -> CmdResult<()> {
    let e = lazy_expire(ctx, key, Which::Named(fields))?;
    notify_expired(ctx, key, e);
    Ok(())
}

/// The hash commands.
pub(crate) static COMMANDS: &[C] = &[
    C::new(
        "hset",
        -4,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<HSet>(c, a, HSetReply::Created),
    )
    .with_acl(&["@write", "@hash", "@fast"]),
    C::new(
        "hsetnx",
        4,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        run::<HSetNx>,
    )
    .with_acl(&["@write", "@hash", "@fast"])
    .with_key_flags(&["RW", "insert"]),
    C::new(
        "hmset",
        -4,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<HSet>(c, a, HSetReply::Ok),
    )
    .with_acl(&["@write", "@hash", "@fast"]),
    C::new(
        "hget",
        3,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<HGet>,
    )
    .with_acl(&["@read", "@hash", "@fast"]),
    C::new(
        "hmget",
        -3,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<HMGet>,
    )
    .with_acl(&["@read", "@hash", "@fast"]),
    C::new("hgetall", 2, &["readonly"], C::keys(1, 1, 1), |c, a| {
        run_as::<HGetAll>(c, a, HashPart::Both)
    })
    .with_acl(&["@read", "@hash", "@slow"])
    .with_tips(&["nondeterministic_output_order"]),
    C::new("hkeys", 2, &["readonly"], C::keys(1, 1, 1), |c, a| {
        run_as::<HGetAll>(c, a, HashPart::Fields)
    })
    .with_acl(&["@read", "@hash", "@slow"])
    .with_tips(&["nondeterministic_output_order"]),
    C::new("hvals", 2, &["readonly"], C::keys(1, 1, 1), |c, a| {
        run_as::<HGetAll>(c, a, HashPart::Values)
    })
    .with_acl(&["@read", "@hash", "@slow"])
    .with_tips(&["nondeterministic_output_order"]),
    C::new(
        "hdel",
        -3,
        &["write", "fast"],
        C::keys(1, 1, 1),
        run::<HDel>,
    )
    .with_acl(&["@write", "@hash", "@fast"])
    .with_key_flags(&["RW", "delete"]),
    C::new(
        "hexists",
        3,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<HExists>,
    )
    .with_acl(&["@read", "@hash", "@fast"])
    .with_key_flags(&["RO"]),
    C::new(
        "hlen",
        2,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<HLen>,
    )
    .with_acl(&["@read", "@hash", "@fast"])
    .with_key_flags(&["RO"]),
    C::new(
        "hstrlen",
        3,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<HStrLen>,
    )
    .with_acl(&["@read", "@hash", "@fast"])
    .with_key_flags(&["RO"]),
    C::new(
        "hincrby",
        4,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        run::<HIncrBy>,
    )
    .with_acl(&["@write", "@hash", "@fast"])
    .with_key_flags(&["RW", "access", "update"]),
    C::new(
        "hincrbyfloat",
        4,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        run::<HIncrByFloat>,
    )
    .with_effect(crate::repl::effects::Effect::HIncrByFloat)
    .with_acl(&["@write", "@hash", "@fast"])
    .with_key_flags(&["RW", "access", "update"]),
    C::new(
        "hrandfield",
        -2,
        &["readonly"],
        C::keys(1, 1, 1),
        run::<HRandField>,
    )
    .with_acl(&["@read", "@hash", "@slow"])
    .with_tips(&["nondeterministic_output"]),
    C::new("hscan", -3, &["readonly"], C::keys(1, 1, 1), run::<HScan>)
        .with_acl(&["@read", "@hash", "@slow"])
        .with_tips(&["nondeterministic_output"]),
];

/// The most elements a negative-count HRANDFIELD or SRANDMEMBER may return.
///
/// Redis builds whatever reply is asked for (`SRANDMEMBER s -9223372036854775807` runs the
/// server out of memory); sluice builds a reply in memory before sending it, so it refuses
/// past this bound with Redis's plain range error instead.
pub(crate) const MAX_RANDOM_REPEAT: u64 = 1 << 20;

/// The encoding thresholds in force (`hash-max-listpack-entries`/`-value`, which CONFIG SET
/// changes at run time).
pub(super) fn hash_limits(shared: &crate::server::Shared) -> HashLimits {
    let (max_listpack_entries, max_listpack_value) = shared.live.hash_listpack_limits();
    HashLimits {
        max_listpack_entries,
        max_listpack_value,
    }
}

/// Reads a hash for a read command (keyspace hit/miss counted): None if missing, WRONGTYPE
/// for other types.
fn read_hash<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> CmdResult<Option<&'c mut HashValue>> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    match ctx.store.read_value(db, key, now) {
        None => Ok(None),
        Some(Value::Hash(h)) => Ok(Some(h)),
        Some(_) => Err(CmdError::WrongType),
    }
}

/// The hash at `key` for a change in place (no stats): None if missing, WRONGTYPE for
/// others. The guard signals WATCH and deletes an emptied hash when dropped.
fn write_hash<'l, 'a, 'k>(
    ctx: &'l mut Ctx<'a>,
    key: &'k [u8],
) -> CmdResult<Option<HashMut<'l, 'a, 'k>>> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    ctx.store.modify(db, key, now)
}

/// The hash at `key`, or a new empty one (Redis's `hashTypeLookupWriteOrCreate`), stored
/// when the guard drops if a field was put in it.
fn hash_or_create<'l, 'a, 'k>(
    ctx: &'l mut Ctx<'a>,
    key: &'k [u8],
) -> CmdResult<HashMut<'l, 'a, 'k>> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    ctx.store.modify_or_create(db, key, now, Box::default)
}

/// The options of HSCAN/SSCAN, parsed when the key has been found and type-checked (Redis
/// reports a bad option only then: `HSCAN missing 0 COUNT 0` is an empty scan).
pub(crate) fn scan_options(opts: &[&[u8]]) -> CmdResult<(Option<Bytes>, usize)> {
    let mut a = ArgCursor::new(opts);
    let (pattern, count, _) = parse_scan_options(&mut a, false)?;
    // MATCH * filters nothing; Redis skips matching for it too.
    Ok((pattern.filter(|p| &p[..] != b"*"), count))
}

/// True if `item` passes an optional MATCH pattern.
pub(crate) fn scan_matches(pattern: Option<&Bytes>, item: &[u8]) -> bool {
    pattern.is_none_or(|p| glob_match(p, item, false))
}

/// The reply of a scan step: the next cursor and the items.
pub(crate) fn scan_reply(cursor: u64, items: Vec<Reply>) -> Reply {
    let cursor = Reply::Bulk(Bytes::copy_from_slice(
        itoa::Buffer::new().format(cursor).as_bytes(),
    ));
    Reply::Array(vec![cursor, Reply::Array(items)])
}

/// Parses the count of HRANDFIELD / SRANDMEMBER: an integer in -LONG_MAX..=LONG_MAX.
pub(crate) fn parse_random_count(arg: &[u8]) -> CmdResult<i64> {
    match parse_i64(arg) {
        None => Err(CmdError::NotInteger),
        Some(i64::MIN) => Err(CmdError::msg(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        )),
        Some(n) => Ok(n),
    }
}

/// What HSET (the number of new fields) and HMSET (`OK`) reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HSetReply {
    /// HSET: how many fields were created.
    Created,
    /// HMSET: `+OK`.
    Ok,
}

/// HSET / HMSET key field value [field value …]
#[derive(Debug)]
pub(crate) struct HSet {
    reply: HSetReply,
    key: Bytes,
    pairs: Vec<Bytes>,
}

impl VariantCommand<'_> for HSet {
    type Variant = HSetReply;

    fn parse(a: &mut ArgCursor<'_>, reply: HSetReply) -> CmdResult<Self> {
        let key = a.next_owned()?;
        let pairs = a.rest();
        if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
            return Err(CmdError::WrongArity(
                match reply {
                    HSetReply::Created => "hset",
                    HSetReply::Ok => "hmset",
                }
                .into(),
            ));
        }
        Ok(HSet {
            reply,
            key,
            pairs: crate::engine::args::owned(pairs),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let limits = hash_limits(ctx.shared);
        let mut h = hash_or_create(ctx, &self.key)?;
        // A change as far as WATCH knows even if it rewrote the same values, as in Redis.
        let created = self
            .pairs
            .chunks_exact(2)
            .filter(|p| h.set(&p[0], &p[1], &limits))
            .count();
        drop(h);
        ctx.notify(class::HASH, "hset", &self.key);
        Ok(match self.reply {
            HSetReply::Ok => Reply::ok(),
            HSetReply::Created => Reply::Int(created as i64),
        })
    }
}

/// HSETNX key field value
#[derive(Debug)]
pub(crate) struct HSetNx {
    key: Bytes,
    field: Bytes,
    value: Bytes,
}

impl Command<'_> for HSetNx {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(HSetNx {
            key: a.next_owned()?,
            field: a.next_owned()?,
            value: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let limits = hash_limits(ctx.shared);
        expire_named(ctx, &self.key, &[&self.field[..]])?;
        let mut h = hash_or_create(ctx, &self.key)?;
        if h.contains(&self.field) {
            return Ok(Reply::Int(0));
        }
        h.set(&self.field, &self.value, &limits);
        drop(h);
        ctx.notify(class::HASH, "hset", &self.key);
        Ok(Reply::Int(1))
    }
}

/// HGET key field
#[derive(Debug)]
pub(crate) struct HGet {
    key: Bytes,
    field: Bytes,
}

impl Command<'_> for HGet {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(HGet {
            key: a.next_owned()?,
            field: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        expire_named(ctx, &self.key, &[&self.field[..]])?;
        let now = ctx.now_ms;
        let value = read_hash(ctx, &self.key)?
            .and_then(|h| h.get_live(&self.field, now).map(Bytes::copy_from_slice));
        Ok(value.into())
    }
}

/// HMGET key field [field …]
#[derive(Debug)]
pub(crate) struct HMGet {
    key: Bytes,
    fields: Vec<Bytes>,
}

impl Command<'_> for HMGet {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(HMGet {
            key: a.next_owned()?,
            fields: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        expire_named(ctx, &self.key, &crate::engine::args::borrowed(&self.fields))?;
        let now = ctx.now_ms;
        let h = read_hash(ctx, &self.key)?;
        let h = h.as_deref();
        Ok(Reply::Array(
            self.fields
                .iter()
                .map(|f| {
                    h.and_then(|h| h.get_live(f, now).map(Bytes::copy_from_slice))
                        .into()
                })
                .collect(),
        ))
    }
}

/// What a whole-hash read returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HashPart {
    /// HGETALL: fields and values.
    Both,
    /// HKEYS: fields.
    Fields,
    /// HVALS: values.
    Values,
}

/// HGETALL / HKEYS / HVALS key
#[derive(Debug)]
pub(crate) struct HGetAll {
    part: HashPart,
    key: Bytes,
}

impl VariantCommand<'_> for HGetAll {
    type Variant = HashPart;

    fn parse(a: &mut ArgCursor<'_>, part: HashPart) -> CmdResult<Self> {
        Ok(HGetAll {
            part,
            key: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let now = ctx.now_ms;
        let h = read_hash(ctx, &self.key)?;
        // Expired fields are skipped, not deleted (Redis 7.4's `hashTypeNext`).
        let pairs = h.iter().flat_map(|h| h.iter_live(now));
        Ok(match self.part {
            HashPart::Both => Reply::Map(
                pairs
                    .map(|(f, v)| {
                        (
                            Reply::Bulk(Bytes::copy_from_slice(f)),
                            Reply::Bulk(Bytes::copy_from_slice(v)),
                        )
                    })
                    .collect(),
            ),
            HashPart::Fields => Reply::Array(
                pairs
                    .map(|(f, _)| Reply::Bulk(Bytes::copy_from_slice(f)))
                    .collect(),
            ),
            HashPart::Values => Reply::Array(
                pairs
                    .map(|(_, v)| Reply::Bulk(Bytes::copy_from_slice(v)))
                    .collect(),
            ),
        })
    }
}

/// HDEL key field [field …]
#[derive(Debug)]
pub(crate) struct HDel {
    key: Bytes,
    fields: Vec<Bytes>,
}

impl Command<'_> for HDel {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(HDel {
            key: a.next_owned()?,
            fields: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let Some(mut h) = write_hash(ctx, &self.key)? else {
            return Ok(Reply::Int(0));
        };
        let deleted = self.fields.iter().filter(|f| h.remove(f)).count();
        if deleted == 0 {
            h.mark_unchanged();
            return Ok(Reply::Int(0));
        }
        drop(h);
        ctx.notify(class::HASH, "hdel", &self.key);
        ctx.notify_if_deleted(&self.key);
        Ok(Reply::Int(deleted as i64))
    }
}

/// HEXISTS key field
#[derive(Debug)]
pub(crate) struct HExists {
    key: Bytes,
    field: Bytes,
}

impl Command<'_> for HExists {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(HExists {
            key: a.next_owned()?,
            field: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        expire_named(ctx, &self.key, &[&self.field[..]])?;
        let now = ctx.now_ms;
        let found =
            read_hash(ctx, &self.key)?.is_some_and(|h| h.get_live(&self.field, now).is_some());
        Ok(Reply::Int(found as i64))
    }
}

/// HLEN key
#[derive(Debug)]
pub(crate) struct HLen {
    key: Bytes,
}

impl Command<'_> for HLen {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(HLen {
            key: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let n = read_hash(ctx, &self.key)?.map_or(0, |h| h.len());
        Ok(Reply::Int(n as i64))
    }
}

/// HSTRLEN key field
#[derive(Debug)]
pub(crate) struct HStrLen {
    key: Bytes,
    field: Bytes,
}

impl Command<'_> for HStrLen {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(HStrLen {
            key: a.next_owned()?,
            field: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        expire_named(ctx, &self.key, &[&self.field[..]])?;
        let now = ctx.now_ms;
        let n = read_hash(ctx, &self.key)?
            .and_then(|h| h.get_live(&self.field, now).map(|v| v.len()))
            .unwrap_or(0);
        Ok(Reply::Int(n as i64))
    }
}

/// HINCRBY key field increment
#[derive(Debug)]
pub(crate) struct HIncrBy {
    key: Bytes,
    field: Bytes,
    incr: i64,
}

impl Command<'_> for HIncrBy {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next_owned()?;
        let field = a.next_owned()?;
        let incr = a.next_i64()?;
        Ok(HIncrBy { key, field, incr })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let limits = hash_limits(ctx.shared);
        expire_named(ctx, &self.key, &[&self.field[..]])?;
        let mut h = hash_or_create(ctx, &self.key)?;
        let old = match h.get(&self.field) {
            Some(v) => parse_i64(v).ok_or(CmdError::msg("ERR hash value is not an integer"))?,
            None => 0,
        };
        let new = old.checked_add(self.incr).ok_or(CmdError::Overflow)?;
        // The field keeps its TTL (Redis's HASH_SET_KEEP_TTL).
        h.set_with(
            &self.field,
            itoa::Buffer::new().format(new).as_bytes(),
            &limits,
            true,
        );
        drop(h);
        ctx.notify(class::HASH, "hincrby", &self.key);
        Ok(Reply::Int(new))
    }
}

/// HINCRBYFLOAT key field increment
#[derive(Debug)]
pub(crate) struct HIncrByFloat {
    key: Bytes,
    field: Bytes,
    incr: crate::num::long_double::LongDouble,
}

impl Command<'_> for HIncrByFloat {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next_owned()?;
        let field = a.next_owned()?;
        let incr = crate::num::long_double::parse(a.next()?).ok_or(CmdError::NotFloat)?;
        if !incr.is_finite() {
            return Err(CmdError::msg("ERR value is NaN or Infinity"));
        }
        Ok(HIncrByFloat { key, field, incr })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let limits = hash_limits(ctx.shared);
        expire_named(ctx, &self.key, &[&self.field[..]])?;
        let mut h = hash_or_create(ctx, &self.key)?;
        let old = match h.get(&self.field) {
            Some(v) => crate::num::long_double::parse(v)
                .ok_or(CmdError::msg("ERR hash value is not a float"))?,
            None => crate::num::long_double::LongDouble::ZERO,
        };
        let new = crate::num::long_double::add(old, self.incr);
        if !new.is_finite() {
            return Err(CmdError::msg("ERR increment would produce NaN or Infinity"));
        }
        let text = crate::num::long_double::format_human(new);
        h.set_with(&self.field, text.as_bytes(), &limits, true);
        drop(h);
        ctx.notify(class::HASH, "hincrbyfloat", &self.key);
        Ok(Reply::Bulk(Bytes::from(text)))
    }
}

/// `HRANDFIELD key [count [WITHVALUES]]`
#[derive(Debug)]
pub(crate) struct HRandField {
    key: Bytes,
    count: Option<i64>,
    with_values: bool,
}

impl Command<'_> for HRandField {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next_owned()?;
        let count = match a.peek() {
            Some(c) => Some(parse_random_count(c)?),
            None => None,
        };
        let rest = a.rest();
        let with_values = match rest.get(1..).unwrap_or(&[]) {
            [] => false,
            [w] if w.eq_ignore_ascii_case(b"WITHVALUES") => true,
            _ => return Err(CmdError::Syntax),
        };
        if with_values && count.is_some_and(|c| c.unsigned_abs() > (i64::MAX / 2) as u64) {
            return Err(CmdError::msg("ERR value is out of range"));
        }
        Ok(HRandField {
            key,
            count,
            with_values,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let resp3 = ctx.client.resp >= 3;
        // Every expired field goes first (Redis 7.4's `hashTypeExpireIfNeeded`).
        let e = lazy_expire(ctx, &self.key, Which::All)?;
        notify_expired(ctx, &self.key, e);
        let h = read_hash(ctx, &self.key)?;
        let Some(count) = self.count else {
            let field = h.and_then(|h| {
                h.get_index(rand::random_range(0..h.len().max(1)))
                    .map(|(f, _)| Bytes::copy_from_slice(f))
            });
            return Ok(field.into());
        };
        let Some(h) = h else {
            return Ok(Reply::Array(vec![]));
        };
        let picks = random_picks(h.len(), count)?;
        let mut out =
            Vec::with_capacity(picks.len() * if self.with_values && !resp3 { 2 } else { 1 });
        for (f, v) in picks.into_iter().filter_map(|i| h.get_index(i)) {
            match (self.with_values, resp3) {
                (false, _) => out.push(Reply::Bulk(Bytes::copy_from_slice(f))),
                (true, false) => {
                    out.push(Reply::Bulk(Bytes::copy_from_slice(f)));
                    out.push(Reply::Bulk(Bytes::copy_from_slice(v)));
                }
                (true, true) => out.push(Reply::Array(vec![
                    Reply::Bulk(Bytes::copy_from_slice(f)),
                    Reply::Bulk(Bytes::copy_from_slice(v)),
                ])),
            }
        }
        Ok(Reply::Array(out))
    }
}

/// The positions HRANDFIELD / SRANDMEMBER with a count return from an aggregate of `len`
/// elements, as Redis picks them: a negative count repeats independent picks; a count at
/// least the size returns every element in order; a smaller one distinct random elements.
pub(crate) fn random_picks(len: usize, count: i64) -> CmdResult<Vec<usize>> {
    if count == 0 || len == 0 {
        return Ok(Vec::new());
    }
    let mut rng = rand::rng();
    if count < 0 {
        let n = count.unsigned_abs();
        if n > MAX_RANDOM_REPEAT {
            return Err(CmdError::msg("ERR value is out of range"));
        }
        return Ok((0..n).map(|_| rng.random_range(0..len)).collect());
    }
    let n = usize::try_from(count).unwrap_or(usize::MAX);
    if n >= len {
        return Ok((0..len).collect());
    }
    Ok(rand::seq::index::sample(&mut rng, len, n).into_vec())
}

/// HSCAN key cursor [MATCH pattern] [COUNT count]
///
/// A listpack hash is returned whole with cursor 0, whatever the cursor, as Redis does; a
/// hash table is walked with `scan_step`'s cursors (each field once, whatever is deleted).
#[derive(Debug)]
pub(crate) struct HScan {
    key: Bytes,
    cursor: u64,
    options: Vec<Bytes>,
}

impl Command<'_> for HScan {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next_owned()?;
        let cursor = parse_scan_cursor(a.next()?)?;
        Ok(HScan {
            key,
            cursor,
            options: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let now = ctx.now_ms;
        let Some(h) = read_hash(ctx, &self.key)? else {
            return Ok(scan_reply(0, vec![]));
        };
        let (pattern, count) = scan_options(&crate::engine::args::borrowed(&self.options))?;
        let (positions, next) = if h.is_listpack() {
            ((0..h.len()).collect(), 0)
        } else {
            scan_step(h.len(), self.cursor, count, |i| {
                h.get_index(i).map(|(f, _)| scan_hash(f))
            })
        };
        let mut items = Vec::new();
        for (f, v) in positions.into_iter().filter_map(|i| h.get_index(i)) {
            if scan_matches(pattern.as_ref(), f) && !h.is_field_expired(f, now) {
                items.push(Reply::Bulk(Bytes::copy_from_slice(f)));
                items.push(Reply::Bulk(Bytes::copy_from_slice(v)));
            }
        }
        Ok(scan_reply(next, items))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_cursors_parse_like_strtoul() {
        for (t, v) in [
            ("0", 0),
            ("", 0),
            ("\0", 0),
            ("5\0x", 5),
            ("+7", 7),
            ("-1", u64::MAX),
            ("18446744073709551615", u64::MAX),
        ] {
            assert_eq!(parse_scan_cursor(t.as_bytes()), Ok(v), "{t:?}");
        }
        for t in [
            " 5",
            "-",
            "+",
            "x",
            "1 ",
            "18446744073709551616",
            "-18446744073709551616",
            "0x10",
        ] {
            assert!(parse_scan_cursor(t.as_bytes()).is_err(), "{t:?}");
        }
    }

    #[test]
    fn random_picks_follow_redis_cases() {
        assert!(random_picks(5, 0).unwrap().is_empty());
        assert!(random_picks(0, -3).unwrap().is_empty());
        assert_eq!(random_picks(3, 10).unwrap(), vec![0, 1, 2]);
        let repeated = random_picks(2, -50).unwrap();
        assert_eq!(repeated.len(), 50);
        assert!(repeated.iter().all(|&i| i < 2));
        let mut distinct = random_picks(100, 10).unwrap();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 10);
        assert!(random_picks(3, -(MAX_RANDOM_REPEAT as i64) - 1).is_err());
    }
}
