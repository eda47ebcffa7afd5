//! Generic key commands: existence, deletion, expiry, type, iteration, renaming, databases.

use bytes::Bytes;

use super::{ArgCursor, Command, CommandSpec as C, Ctx, run, run_sub};
use crate::cmd::args::{glob_match, parse_i64};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::store::Value;

/// The key commands.
pub static COMMANDS: &[C] = &[
    C::new("del", -2, &["write"], C::keys(1, -1, 1), run::<Del>).with_acl(&[
        "@keyspace",
        "@write",
        "@slow",
    ]),
    C::new(
        "unlink",
        -2,
        &["write", "fast"],
        C::keys(1, -1, 1),
        run::<Del>,
    )
    .with_acl(&["@keyspace", "@write", "@fast"]),
    C::new(
        "exists",
        -2,
        &["readonly", "fast"],
        C::keys(1, -1, 1),
        run::<Exists>,
    )
    .with_acl(&["@keyspace", "@read", "@fast"]),
    C::new(
        "expire",
        -3,
        &["write", "fast"],
        C::keys(1, 1, 1),
        run::<Expire<0>>,
    )
    .with_acl(&["@keyspace", "@write", "@fast"]),
    C::new(
        "pexpire",
        -3,
        &["write", "fast"],
        C::keys(1, 1, 1),
        run::<Expire<1>>,
    )
    .with_acl(&["@keyspace", "@write", "@fast"]),
    C::new(
        "expireat",
        -3,
        &["write", "fast"],
        C::keys(1, 1, 1),
        run::<Expire<2>>,
    )
    .with_acl(&["@keyspace", "@write", "@fast"]),
    C::new(
        "pexpireat",
        -3,
        &["write", "fast"],
        C::keys(1, 1, 1),
        run::<Expire<3>>,
    )
    .with_acl(&["@keyspace", "@write", "@fast"]),
    C::new(
        "ttl",
        2,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<Ttl<0>>,
    )
    .with_acl(&["@keyspace", "@read", "@fast"]),
    C::new(
        "pttl",
        2,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<Ttl<1>>,
    )
    .with_acl(&["@keyspace", "@read", "@fast"]),
    C::new(
        "expiretime",
        2,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<Ttl<2>>,
    )
    .with_acl(&["@keyspace", "@read", "@fast"]),
    C::new(
        "pexpiretime",
        2,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<Ttl<3>>,
    )
    .with_acl(&["@keyspace", "@read", "@fast"]),
    C::new(
        "persist",
        2,
        &["write", "fast"],
        C::keys(1, 1, 1),
        run::<Persist>,
    )
    .with_acl(&["@keyspace", "@write", "@fast"]),
    C::new(
        "type",
        2,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<Type>,
    )
    .with_acl(&["@keyspace", "@read", "@fast"]),
    C::new("keys", 2, &["readonly"], C::keys(0, 0, 0), run::<Keys>)
        .whole_keyspace()
        .with_acl(&["@keyspace", "@read", "@slow", "@dangerous"]),
    C::new("scan", -2, &["readonly"], C::keys(0, 0, 0), run::<Scan>)
        .whole_keyspace()
        .with_acl(&["@keyspace", "@read", "@slow"]),
    C::new(
        "rename",
        3,
        &["write"],
        C::keys(1, 2, 1),
        run::<Rename<false>>,
    )
    .with_acl(&["@keyspace", "@write", "@slow"]),
    C::new(
        "renamenx",
        3,
        &["write", "fast"],
        C::keys(1, 2, 1),
        run::<Rename<true>>,
    )
    .with_acl(&["@keyspace", "@write", "@fast"]),
    C::new(
        "randomkey",
        1,
        &["readonly"],
        C::keys(0, 0, 0),
        run::<RandomKey>,
    )
    .whole_keyspace()
    .with_acl(&["@keyspace", "@read", "@slow"]),
    C::new(
        "dbsize",
        1,
        &["readonly", "fast"],
        C::keys(0, 0, 0),
        run::<DbSize>,
    )
    .whole_keyspace()
    .with_acl(&["@keyspace", "@read", "@fast"]),
    C::new(
        "flushdb",
        -1,
        &["write"],
        C::keys(0, 0, 0),
        run::<Flush<false>>,
    )
    .whole_keyspace()
    .with_acl(&["@keyspace", "@write", "@slow", "@dangerous"]),
    C::new(
        "flushall",
        -1,
        &["write"],
        C::keys(0, 0, 0),
        run::<Flush<true>>,
    )
    .whole_keyspace()
    .with_acl(&["@keyspace", "@write", "@slow", "@dangerous"]),
    C::new(
        "select",
        2,
        &["loading", "stale", "fast"],
        C::keys(0, 0, 0),
        run::<Select>,
    )
    .with_acl(&["@keyspace", "@fast"]),
    C::new(
        "swapdb",
        3,
        &["write", "fast"],
        C::keys(0, 0, 0),
        run::<SwapDb>,
    )
    .whole_keyspace()
    .with_acl(&["@keyspace", "@write", "@fast", "@dangerous"]),
    C::new(
        "object",
        -2,
        &[],
        C::keys(0, 0, 0),
        run::<super::server::Help>,
    )
    .with_subcommands(OBJECT),
    C::new(
        "memory",
        -2,
        &[],
        C::keys(0, 0, 0),
        run::<super::server::Help>,
    )
    .with_subcommands(MEMORY),
];

static OBJECT: &[C] = &[
    C::new(
        "object|encoding",
        3,
        &["readonly"],
        C::keys(2, 2, 1),
        run_sub::<ObjectEncoding>,
    ),
    C::new(
        "object|idletime",
        3,
        &["readonly"],
        C::keys(2, 2, 1),
        run_sub::<ObjectNumber<0>>,
    ),
    C::new(
        "object|refcount",
        3,
        &["readonly"],
        C::keys(2, 2, 1),
        run_sub::<ObjectNumber<1>>,
    ),
    C::new(
        "object|freq",
        3,
        &["readonly"],
        C::keys(2, 2, 1),
        run_sub::<ObjectNumber<2>>,
    ),
    C::new(
        "object|help",
        2,
        &["loading", "stale"],
        C::keys(0, 0, 0),
        run_sub::<super::server::Help>,
    ),
];

static MEMORY: &[C] = &[
    C::new(
        "memory|usage",
        -3,
        &["readonly"],
        C::keys(2, 2, 1),
        run_sub::<MemoryUsage>,
    ),
    C::new(
        "memory|help",
        2,
        &["loading", "stale"],
        C::keys(0, 0, 0),
        run_sub::<super::server::Help>,
    ),
];

/// DEL / UNLINK key [key …]
#[derive(Debug)]
pub struct Del {
    keys: Vec<Bytes>,
}

impl Command for Del {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Del {
            keys: a.rest().to_vec(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let n = self
            .keys
            .iter()
            .filter(|k| ctx.store.remove(db, k, ctx.now_ms).is_some())
            .count();
        Ok(Reply::Int(n as i64))
    }
}

/// EXISTS key [key …] (duplicates count each time)
#[derive(Debug)]
pub struct Exists {
    keys: Vec<Bytes>,
}

impl Command for Exists {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Exists {
            keys: a.rest().to_vec(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let n = self
            .keys
            .iter()
            .filter(|k| ctx.store.read(db, k, ctx.now_ms).is_some())
            .count();
        Ok(Reply::Int(n as i64))
    }
}

/// EXPIRE (0), PEXPIRE (1), EXPIREAT (2), PEXPIREAT (3) key time [NX|XX|GT|LT]
#[derive(Debug)]
pub struct Expire<const KIND: u8> {
    key: Bytes,
    when: i64,
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

impl<const KIND: u8> Expire<KIND> {
    fn name() -> &'static str {
        ["expire", "pexpire", "expireat", "pexpireat"][KIND as usize]
    }
}

impl<const KIND: u8> Command for Expire<KIND> {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next()?.clone();
        let when = a.next()?.clone();
        let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
        for opt in a.rest() {
            match &opt.to_ascii_uppercase()[..] {
                b"NX" => nx = true,
                b"XX" => xx = true,
                b"GT" => gt = true,
                b"LT" => lt = true,
                _ => {
                    return Err(CmdError::owned(format!(
                        "ERR Unsupported option {}",
                        super::printable(opt, usize::MAX)
                    )));
                }
            }
        }
        if nx && (xx || gt || lt) {
            return Err(CmdError::msg(
                "ERR NX and XX, GT or LT options at the same time are not compatible",
            ));
        }
        if gt && lt {
            return Err(CmdError::msg(
                "ERR GT and LT options at the same time are not compatible",
            ));
        }
        let when = parse_i64(&when).ok_or(CmdError::NotInteger)?;
        Ok(Expire {
            key,
            when,
            nx,
            xx,
            gt,
            lt,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let invalid = CmdError::InvalidExpire(Self::name());
        let mut when = self.when;
        if KIND == 0 || KIND == 2 {
            when = when.checked_mul(1000).ok_or(invalid.clone())?;
        }
        if KIND < 2 {
            when = when.checked_add(ctx.now_ms as i64).ok_or(invalid)?;
        }
        let db = ctx.db();
        let Some(entry) = ctx.store.lookup(db, &self.key, ctx.now_ms) else {
            return Ok(Reply::Int(0));
        };
        let current = entry.expire_at().map(|t| t as i64);
        let refused = (self.nx && current.is_some())
            || (self.xx && current.is_none())
            || (self.gt && current.is_none_or(|c| when <= c))
            || (self.lt && current.is_some_and(|c| when >= c));
        if refused {
            return Ok(Reply::Int(0));
        }
        if when <= ctx.now_ms as i64 {
            ctx.store.remove(db, &self.key, ctx.now_ms);
        } else {
            ctx.store
                .set_expire(db, &self.key, Some(when as u64), ctx.now_ms);
        }
        Ok(Reply::Int(1))
    }
}

/// TTL (0), PTTL (1), EXPIRETIME (2), PEXPIRETIME (3) key
#[derive(Debug)]
pub struct Ttl<const KIND: u8> {
    key: Bytes,
}

impl<const KIND: u8> Command for Ttl<KIND> {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Ttl {
            key: a.next()?.clone(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let Some(entry) = ctx.store.read(db, &self.key, ctx.now_ms) else {
            return Ok(Reply::Int(-2));
        };
        let Some(at) = entry.expire_at() else {
            return Ok(Reply::Int(-1));
        };
        let absolute = KIND >= 2;
        let ms = if absolute {
            at
        } else {
            at.saturating_sub(ctx.now_ms)
        } as i64;
        let millis = KIND == 1 || KIND == 3;
        // Rounded in i128: a deadline near i64::MAX ms must not overflow (Redis answers the
        // rounded value there too).
        Ok(Reply::Int(if millis {
            ms
        } else {
            ((i128::from(ms) + 500) / 1000) as i64
        }))
    }
}

/// PERSIST key
#[derive(Debug)]
pub struct Persist {
    key: Bytes,
}

impl Command for Persist {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Persist {
            key: a.next()?.clone(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let has_ttl = ctx
            .store
            .lookup(db, &self.key, ctx.now_ms)
            .is_some_and(|e| e.expire_at().is_some());
        if has_ttl {
            ctx.store.set_expire(db, &self.key, None, ctx.now_ms);
        }
        Ok(Reply::Int(has_ttl as i64))
    }
}

/// TYPE key
#[derive(Debug)]
pub struct Type {
    key: Bytes,
}

impl Command for Type {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Type {
            key: a.next()?.clone(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let name = ctx
            .store
            .lookup(db, &self.key, ctx.now_ms)
            .map_or("none", |e| e.value.type_name());
        Ok(Reply::status(name))
    }
}

/// Calls `f` with the hash, key and type name of every live key of the current database in
/// the held shards (whole-keyspace commands hold them all). Borrowed, so callers copy only
/// the keys they reply with.
fn for_each_live(ctx: &mut Ctx<'_>, mut f: impl FnMut(u64, &[u8], &'static str)) {
    let db = ctx.db();
    let now = ctx.now_ms;
    for shard in ctx.store.shards_mut() {
        for e in shard.db(db).iter() {
            if !e.is_expired(now) {
                f(
                    crate::store::shard::Db::entry_hash(e),
                    &e.key,
                    e.value.type_name(),
                );
            }
        }
    }
}

/// KEYS pattern
#[derive(Debug)]
pub struct Keys {
    pattern: Bytes,
}

impl Command for Keys {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Keys {
            pattern: a.next()?.clone(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let all = &self.pattern[..] == b"*";
        let mut keys = Vec::new();
        for_each_live(ctx, |_, k, _| {
            if all || glob_match(&self.pattern, k, false) {
                keys.push(Reply::bulk(k));
            }
        });
        Ok(Reply::Array(keys))
    }
}

/// SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]
///
/// The cursor is a position in hash order: each call returns the next COUNT keys by hash at
/// or after it. Keys present for the whole scan are returned exactly once, whatever is
/// inserted or deleted meanwhile, as Redis guarantees.
#[derive(Debug)]
pub struct Scan {
    cursor: u64,
    pattern: Option<Bytes>,
    count: usize,
    type_name: Option<String>,
}

/// Parses the options shared by SCAN and the per-type scans (HSCAN, SSCAN, ZSCAN).
pub fn parse_scan_options(
    a: &mut ArgCursor<'_>,
    allow_type: bool,
) -> CmdResult<(Option<Bytes>, usize, Option<String>)> {
    let (mut pattern, mut count, mut type_name) = (None, 10usize, None);
    while a.remaining() > 0 {
        if a.eat("MATCH") && a.remaining() > 0 {
            pattern = Some(a.next()?.clone());
        } else if a.eat("COUNT") && a.remaining() > 0 {
            let n = a.next_i64()?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            count = n as usize;
        } else if allow_type && a.eat("TYPE") && a.remaining() > 0 {
            type_name = Some(String::from_utf8_lossy(a.next()?).to_ascii_lowercase());
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok((pattern, count, type_name))
}

impl Command for Scan {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let cursor = crate::cmd::args::parse_scan_cursor(a.next()?)?;
        let (pattern, count, type_name) = parse_scan_options(a, true)?;
        Ok(Scan {
            cursor,
            pattern,
            count,
            type_name,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        // Find the hash that ends this batch (the COUNT-th smallest at or after the cursor)
        // without sorting or copying the whole keyspace.
        let mut hashes = Vec::new();
        for_each_live(ctx, |h, _, _| {
            if h >= self.cursor {
                hashes.push(h);
            }
        });
        let mut end = None;
        if hashes.len() > self.count {
            let boundary = *hashes.select_nth_unstable(self.count).1;
            // Never split keys sharing a hash across two calls.
            if hashes.iter().any(|&h| h < boundary) {
                end = Some(boundary);
            }
        }
        let mut keys = Vec::new();
        for_each_live(ctx, |h, k, t| {
            if h >= self.cursor && end.is_none_or(|e| h < e) {
                keys.push((h, Bytes::copy_from_slice(k), t));
            }
        });
        keys.sort_unstable_by_key(|(h, _, _)| *h);
        let next = end.unwrap_or(0);
        let found = keys
            .into_iter()
            .filter(|(_, k, t)| {
                self.pattern
                    .as_ref()
                    .is_none_or(|p| glob_match(p, k, false))
                    && self.type_name.as_ref().is_none_or(|want| want == t)
            })
            .map(|(_, k, _)| Reply::Bulk(k))
            .collect();
        Ok(Reply::Array(vec![
            Reply::Bulk(Bytes::from(next.to_string())),
            Reply::Array(found),
        ]))
    }
}

/// RENAME / RENAMENX key newkey
#[derive(Debug)]
pub struct Rename<const NX: bool> {
    from: Bytes,
    to: Bytes,
}

impl<const NX: bool> Command for Rename<NX> {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Rename {
            from: a.next()?.clone(),
            to: a.next()?.clone(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let now = ctx.now_ms;
        if !ctx.store.exists(db, &self.from, now) {
            return Err(CmdError::NoSuchKey);
        }
        if self.from == self.to {
            return Ok(if NX { Reply::Int(0) } else { Reply::ok() });
        }
        if NX && ctx.store.exists(db, &self.to, now) {
            return Ok(Reply::Int(0));
        }
        let Some(entry) = ctx.store.remove(db, &self.from, now) else {
            return Err(CmdError::NoSuchKey);
        };
        let expire = entry.expire_at();
        ctx.store.set(db, &self.to, entry.value, expire);
        Ok(if NX { Reply::Int(1) } else { Reply::ok() })
    }
}

/// RANDOMKEY
#[derive(Debug)]
pub struct RandomKey;

impl Command for RandomKey {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(RandomKey)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let mut live = 0usize;
        for_each_live(ctx, |_, _, _| live += 1);
        if live == 0 {
            return Ok(Reply::Null);
        }
        let mut pick = rand::random_range(0..live);
        let mut chosen = Reply::Null;
        for_each_live(ctx, |_, k, _| {
            if pick == 0 {
                chosen = Reply::bulk(k);
            }
            pick = pick.wrapping_sub(1);
        });
        Ok(chosen)
    }
}

/// DBSIZE
#[derive(Debug)]
pub struct DbSize;

impl Command for DbSize {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(DbSize)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        // Redis counts keys not yet reaped too; so do we (the reaper keeps that small).
        let db = ctx.db();
        let n: usize = ctx.store.shards_mut().map(|s| s.db(db).len()).sum();
        Ok(Reply::Int(n as i64))
    }
}

/// FLUSHDB / FLUSHALL [ASYNC|SYNC]
#[derive(Debug)]
pub struct Flush<const ALL: bool>;

impl<const ALL: bool> Command for Flush<ALL> {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        if a.remaining() > 1 || (a.remaining() == 1 && !a.eat("ASYNC") && !a.eat("SYNC")) {
            return Err(CmdError::Syntax);
        }
        Ok(Flush)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        for shard in ctx.store.shards_mut() {
            if ALL {
                for d in 0..shard.databases() {
                    shard.flush_db(d);
                }
            } else {
                shard.flush_db(db);
            }
        }
        Ok(Reply::ok())
    }
}

/// Redis reads database indexes as a C `int`: an integer outside its range fails with `msg`
/// (Redis's generic range error when there is none).
fn int_arg(b: &[u8], msg: Option<&'static str>) -> CmdResult<i64> {
    let n = parse_i64(b).ok_or(msg.map_or(CmdError::NotInteger, CmdError::msg))?;
    if i32::try_from(n).is_err() {
        return Err(msg.map_or(
            CmdError::msg(
                "ERR value is out of range, value must between -2147483648 and 2147483647",
            ),
            CmdError::msg,
        ));
    }
    Ok(n)
}

/// Parses a database index for SELECT ("not an integer", then "out of range").
fn db_index(ctx: &Ctx<'_>, n: i64) -> CmdResult<usize> {
    let dbs = ctx.shared.keyspace.databases();
    if n < 0 || n as usize >= dbs {
        return Err(CmdError::DbIndexOutOfRange);
    }
    Ok(n as usize)
}

/// SELECT index
#[derive(Debug)]
pub struct Select {
    index: i64,
}

impl Command for Select {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Select {
            index: int_arg(a.next()?, None)?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if ctx.shared.cluster.is_some() && self.index != 0 {
            return Err(CmdError::msg("ERR SELECT is not allowed in cluster mode"));
        }
        let db = db_index(ctx, self.index)?;
        ctx.client.set_db(db);
        Ok(Reply::ok())
    }
}

/// SWAPDB index index
#[derive(Debug)]
pub struct SwapDb {
    a: i64,
    b: i64,
}

impl Command for SwapDb {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let first = int_arg(a.next()?, Some("ERR invalid first DB index"))?;
        let second = int_arg(a.next()?, Some("ERR invalid second DB index"))?;
        Ok(SwapDb {
            a: first,
            b: second,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if ctx.shared.cluster.is_some() {
            return Err(CmdError::msg("ERR SWAPDB is not allowed in cluster mode"));
        }
        let a = db_index(ctx, self.a)?;
        let b = db_index(ctx, self.b)?;
        if a != b {
            for shard in ctx.store.shards_mut() {
                shard.swap_dbs(a, b);
            }
        }
        Ok(Reply::ok())
    }
}

/// OBJECT ENCODING key
#[derive(Debug)]
pub struct ObjectEncoding {
    key: Bytes,
}

impl Command for ObjectEncoding {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ObjectEncoding {
            key: a.next()?.clone(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        Ok(match ctx.store.lookup(db, &self.key, ctx.now_ms) {
            None => Reply::Null,
            Some(e) => Reply::bulk(e.value.encoding().as_bytes()),
        })
    }
}

/// OBJECT IDLETIME (0) / REFCOUNT (1) / FREQ (2) key
#[derive(Debug)]
pub struct ObjectNumber<const KIND: u8> {
    key: Bytes,
}

impl<const KIND: u8> Command for ObjectNumber<KIND> {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ObjectNumber {
            key: a.next()?.clone(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let Some(e) = ctx.store.lookup_untouched(db, &self.key, ctx.now_ms) else {
            return Ok(Reply::Null);
        };
        Ok(match KIND {
            0 => Reply::Int((e.idle_ms(ctx.now_ms) / 1000) as i64),
            1 => Reply::Int(match e.value {
                Value::Int(n) if (0..10000).contains(&n) => i32::MAX as i64,
                _ => 1,
            }),
            _ => {
                return Err(CmdError::msg(
                    "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
                ));
            }
        })
    }
}

/// MEMORY USAGE key [SAMPLES n]
#[derive(Debug)]
pub struct MemoryUsage {
    key: Bytes,
}

impl Command for MemoryUsage {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next()?.clone();
        // As Redis: SAMPLES may repeat; a negative count is a syntax error.
        while a.remaining() > 0 {
            if a.remaining() >= 2 && a.eat("SAMPLES") {
                if a.next_i64()? < 0 {
                    return Err(CmdError::Syntax);
                }
            } else {
                return Err(CmdError::Syntax);
            }
        }
        Ok(MemoryUsage { key })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        Ok(match ctx.store.lookup(db, &self.key, ctx.now_ms) {
            None => Reply::Null,
            Some(e) => Reply::Int((48 + e.key.len() + e.value.approx_memory()) as i64),
        })
    }
}
