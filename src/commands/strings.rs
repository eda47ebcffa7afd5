//! String commands: GET, SET and its variants, counters (INCR…), APPEND, STRLEN.
//!
//! The fixed-window limiter lives here (`SET k 1 EX p NX`, `INCR k`), so counters are stored
//! as `Value::Int` and INCR does no parsing or allocation when the value is already one.

use crate::services::notify::class;
use bytes::Bytes;

use crate::engine::{
    ArgCursor, Command, CommandSpec as C, Ctx, VariantCommand, run, run_as, run_borrowed,
};
use crate::error::{CmdError, CmdResult};
use crate::num::long_double::{self, LongDouble};
use crate::num::parse_i64;
use crate::protocol::Reply;
use crate::protocol::reply::Short;
use crate::store::Value;
use crate::store::access::{StringMut, StringValue};

/// The string commands.
pub(crate) static COMMANDS: &[C] = &[
    C::new("get", 2, &["readonly", "fast"], C::keys(1, 1, 1), |c, a| {
        run_borrowed::<Get>(c, a)
    })
    .with_acl(&["@read", "@string", "@fast"]),
    C::new(
        "set",
        -3,
        &["write", "denyoom"],
        C::keys(1, 1, 1),
        |c, a| run_borrowed::<Set>(c, a),
    )
    .with_effect(crate::repl::effects::Effect::Set)
    .with_acl(&["@write", "@string", "@slow"])
    .with_key_flags(&["RW", "access", "update", "variable_flags"])
    .with_variable_key_flags(set_key_flags)
    .with_key_notes("RW and ACCESS due to the optional `GET` argument"),
    C::new(
        "setnx",
        3,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        run::<SetNx>,
    )
    .with_acl(&["@write", "@string", "@fast"])
    .with_key_flags(&["OW", "insert"]),
    C::new(
        "setex",
        4,
        &["write", "denyoom"],
        C::keys(1, 1, 1),
        |c, a| run_as::<SetEx>(c, a, Precision::Seconds),
    )
    .with_effect(crate::repl::effects::Effect::KeyState)
    .with_acl(&["@write", "@string", "@slow"])
    .with_key_flags(&["OW", "update"]),
    C::new(
        "psetex",
        4,
        &["write", "denyoom"],
        C::keys(1, 1, 1),
        |c, a| run_as::<SetEx>(c, a, Precision::Millis),
    )
    .with_effect(crate::repl::effects::Effect::KeyState)
    .with_acl(&["@write", "@string", "@slow"])
    .with_key_flags(&["OW", "update"]),
    C::new(
        "getset",
        3,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        run::<GetSet>,
    )
    .with_acl(&["@write", "@string", "@fast"])
    .with_key_flags(&["RW", "access", "update"]),
    C::new(
        "getdel",
        2,
        &["write", "fast"],
        C::keys(1, 1, 1),
        run::<GetDel>,
    )
    .with_effect(crate::repl::effects::Effect::GetDel)
    .with_acl(&["@write", "@string", "@fast"])
    .with_key_flags(&["RW", "access", "delete"]),
    C::new("getex", -2, &["write", "fast"], C::keys(1, 1, 1), |c, a| {
        run_borrowed::<GetEx>(c, a)
    })
    .with_effect(crate::repl::effects::Effect::GetEx)
    .with_acl(&["@write", "@string", "@fast"])
    .with_key_flags(&["RW", "access", "update"])
    .with_key_notes("RW and UPDATE because it changes the TTL"),
    C::new(
        "mget",
        -2,
        &["readonly", "fast"],
        C::keys(1, -1, 1),
        run::<MGet>,
    )
    .with_acl(&["@read", "@string", "@fast"])
    .with_tips(&["request_policy:multi_shard"]),
    C::new(
        "mset",
        -3,
        &["write", "denyoom"],
        C::keys(1, -1, 2),
        |c, a| run_as::<MSet>(c, a, MSetMode::Always),
    )
    .with_acl(&["@write", "@string", "@slow"])
    .with_tips(&[
        "request_policy:multi_shard",
        "response_policy:all_succeeded",
    ])
    .with_key_flags(&["OW", "update"]),
    C::new(
        "msetnx",
        -3,
        &["write", "denyoom"],
        C::keys(1, -1, 2),
        |c, a| run_as::<MSet>(c, a, MSetMode::IfNoneExists),
    )
    .with_acl(&["@write", "@string", "@slow"])
    .with_tips(&["request_policy:multi_shard", "response_policy:agg_min"])
    .with_key_flags(&["OW", "insert"]),
    C::new(
        "incr",
        2,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<Incr>(c, a, Step::Up),
    )
    .with_acl(&["@write", "@string", "@fast"])
    .with_key_flags(&["RW", "access", "update"]),
    C::new(
        "decr",
        2,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<Incr>(c, a, Step::Down),
    )
    .with_acl(&["@write", "@string", "@fast"])
    .with_key_flags(&["RW", "access", "update"]),
    C::new(
        "incrby",
        3,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<IncrBy>(c, a, Step::Up),
    )
    .with_acl(&["@write", "@string", "@fast"])
    .with_key_flags(&["RW", "access", "update"]),
    C::new(
        "decrby",
        3,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<IncrBy>(c, a, Step::Down),
    )
    .with_acl(&["@write", "@string", "@fast"])
    .with_key_flags(&["RW", "access", "update"]),
    C::new(
        "incrbyfloat",
        3,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        run::<IncrByFloat>,
    )
    .with_effect(crate::repl::effects::Effect::IncrByFloat)
    .with_acl(&["@write", "@string", "@fast"])
    .with_key_flags(&["RW", "access", "update"]),
    C::new(
        "append",
        3,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        run::<Append>,
    )
    .with_acl(&["@write", "@string", "@fast"])
    .with_key_flags(&["RW", "insert"]),
    C::new(
        "strlen",
        2,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<StrLen>,
    )
    .with_acl(&["@read", "@string", "@fast"])
    .with_key_flags(&["RO"]),
];

/// SET's key flags in one request: SET … GET reads the old value (`RW access update`);
/// without GET it only overwrites (`OW update`), as Redis's `setGetKeys` says.
fn set_key_flags(args: &[&[u8]]) -> &'static [&'static str] {
    if args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get")) {
        &["RW", "access", "update"]
    } else {
        &["OW", "update"]
    }
}

/// Reads a string value: None if missing, WRONGTYPE for other types.
fn read_string(ctx: &mut Ctx<'_>, key: &[u8]) -> CmdResult<Option<Bytes>> {
    let db = ctx.db();
    match ctx.store.read_value(db, key, ctx.now_ms) {
        None => Ok(None),
        Some(v) => v.as_bytes().map(Some),
    }
}

/// How a command's TTL argument is expressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TtlUnit {
    /// EX: relative seconds.
    Seconds,
    /// PX: relative ms.
    Millis,
    /// EXAT: absolute Unix seconds.
    UnixSeconds,
    /// PXAT: absolute Unix ms.
    UnixMillis,
}

impl TtlUnit {
    /// The unit an (uppercased) EX / PX / EXAT / PXAT option names.
    pub(crate) fn from_option(opt: &[u8]) -> Option<TtlUnit> {
        match opt {
            b"EX" => Some(TtlUnit::Seconds),
            b"PX" => Some(TtlUnit::Millis),
            b"EXAT" => Some(TtlUnit::UnixSeconds),
            b"PXAT" => Some(TtlUnit::UnixMillis),
            _ => None,
        }
    }
}

/// Reads a TTL option's value into `ttl` (SET, GETEX). Redis lets the same unit repeat (the
/// last value wins) but refuses another unit, a conflicting option (`conflict`: KEEPTTL,
/// PERSIST) or a missing value, all as a syntax error.
fn read_ttl_option<'a>(
    a: &mut ArgCursor<'a>,
    unit: TtlUnit,
    ttl: &mut Option<(TtlUnit, &'a [u8])>,
    conflict: bool,
) -> CmdResult<()> {
    if ttl.as_ref().is_some_and(|(u, _)| *u != unit) || conflict || a.remaining() == 0 {
        return Err(CmdError::Syntax);
    }
    *ttl = Some((unit, a.next()?));
    Ok(())
}

/// Turns a SET/GETEX/SETEX TTL argument into an absolute Unix ms deadline, with Redis's
/// checks: not an integer → "not an integer"; ≤ 0 or overflowing → "invalid expire time".
pub(crate) fn expire_deadline(
    arg: &[u8],
    unit: TtlUnit,
    now_ms: u64,
    cmd: &'static str,
) -> CmdResult<u64> {
    let n = parse_i64(arg).ok_or(CmdError::NotInteger)?;
    let invalid = CmdError::InvalidExpire(cmd);
    if n <= 0 {
        return Err(invalid);
    }
    let ms = match unit {
        TtlUnit::Seconds | TtlUnit::UnixSeconds => n.checked_mul(1000).ok_or(invalid.clone())?,
        _ => n,
    };
    let at = match unit {
        TtlUnit::Seconds | TtlUnit::Millis => {
            ms.checked_add(now_ms as i64).ok_or(invalid.clone())?
        }
        _ => ms,
    };
    if at <= 0 {
        return Err(invalid);
    }
    Ok(at as u64)
}

/// GET key
#[derive(Debug)]
pub(crate) struct Get<'a> {
    key: &'a [u8],
}

impl<'a> Command<'a> for Get<'a> {
    fn parse(a: &mut ArgCursor<'a>) -> CmdResult<Self> {
        Ok(Get { key: a.next()? })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        // A value stored inside its entry (an integer, a short string) is replied from
        // inside the reply, a longer one shares the stored bytes: GET allocates nothing.
        Ok(match ctx.store.read_value(db, self.key, ctx.now_ms) {
            None => Reply::Null,
            Some(Value::Int(n)) => Reply::Short(Short::int(*n)),
            Some(Value::Str(s) | Value::Raw(s)) if s.is_inline() => Reply::short_or_bulk(s),
            Some(v) => Reply::Bulk(v.as_bytes()?),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Cond {
    Always,
    Nx,
    Xx,
    /// Redis 8.4's IFEQ / IFNE / IFDEQ / IFDNE (compare-and-set, `cmd::strex`).
    If(super::strex::Compare),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ttl {
    /// Drop any TTL.
    Clear,
    /// KEEPTTL.
    Keep,
    /// An absolute deadline (ms).
    At(u64),
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL]`
#[derive(Debug)]
pub(crate) struct Set<'a> {
    key: &'a [u8],
    value: &'a [u8],
    cond: Cond,
    get: bool,
    ttl: Option<(TtlUnit, &'a [u8])>,
    keep_ttl: bool,
}

impl<'a> Command<'a> for Set<'a> {
    fn parse(a: &mut ArgCursor<'a>) -> CmdResult<Self> {
        let mut s = Set {
            key: a.next()?,
            value: a.next()?,
            cond: Cond::Always,
            get: false,
            ttl: None,
            keep_ttl: false,
        };
        while let Some(opt) = a.peek() {
            let opt = crate::engine::args::upper(opt);
            a.next()?;
            let unit = match &opt[..] {
                b"NX" if matches!(s.cond, Cond::Always | Cond::Nx) => {
                    s.cond = Cond::Nx;
                    continue;
                }
                b"XX" if matches!(s.cond, Cond::Always | Cond::Xx) => {
                    s.cond = Cond::Xx;
                    continue;
                }
                // One condition of NX, XX, IFEQ, IFNE, IFDEQ, IFDNE (redis.io/commands/set).
                b"IFEQ" | b"IFNE" | b"IFDEQ" | b"IFDNE"
                    if s.cond == Cond::Always && a.remaining() > 0 =>
                {
                    let arg = a.next()?;
                    s.cond = Cond::If(
                        super::strex::Compare::from_option(&opt, Bytes::copy_from_slice(arg))
                            .ok_or(CmdError::Syntax)?,
                    );
                    continue;
                }
                b"GET" => {
                    s.get = true;
                    continue;
                }
                b"KEEPTTL" if s.ttl.is_none() => {
                    s.keep_ttl = true;
                    continue;
                }
                other => TtlUnit::from_option(other).ok_or(CmdError::Syntax)?,
            };
            read_ttl_option(a, unit, &mut s.ttl, s.keep_ttl)?;
        }
        Ok(s)
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let ttl = match &self.ttl {
            Some((unit, arg)) => Ttl::At(expire_deadline(arg, *unit, ctx.now_ms, "set")?),
            None if self.keep_ttl => Ttl::Keep,
            None => Ttl::Clear,
        };
        let db = ctx.db();
        let expire_at = match ttl {
            Ttl::At(at) => Some(at),
            Ttl::Clear | Ttl::Keep => None,
        };
        if !self.get
            && !matches!(ttl, Ttl::Keep)
            && matches!(self.cond, Cond::Always | Cond::Nx | Cond::Xx)
        {
            // Without GET, KEEPTTL or a compare, one probe of the key decides NX / XX and
            // stores the value where the key is (`Locked::probe`), where a lookup and then
            // the store each probed it.
            let probe = ctx.store.probe(db, self.key, ctx.now_ms);
            let met = match self.cond {
                Cond::Nx => probe.value().is_none(),
                Cond::Xx => probe.value().is_some(),
                _ => true,
            };
            if !met {
                return Ok(Reply::Null);
            }
            probe.write(self.key, Value::from_bytes(self.value), expire_at);
            ctx.notify(class::STRING, "set", self.key);
            if expire_at.is_some() {
                ctx.notify(class::GENERIC, "expire", self.key);
            }
            return Ok(Reply::ok());
        }
        let old = if self.get {
            Some(read_string(ctx, self.key)?)
        } else {
            None
        };
        let exists = ctx.store.exists(db, self.key, ctx.now_ms);
        let met = match &self.cond {
            Cond::Always => true,
            Cond::Nx => !exists,
            Cond::Xx => exists,
            // A key of another type is WRONGTYPE (Redis 8.4 compares strings only).
            Cond::If(c) => c.holds(read_string(ctx, self.key)?.as_deref()),
        };
        if !met {
            return Ok(match old {
                Some(v) => v.into(),
                None => Reply::Null,
            });
        }
        store_string(ctx, self.key, Value::from_bytes(self.value), ttl);
        ctx.notify(class::STRING, "set", self.key);
        if let Ttl::At(_) = ttl {
            ctx.notify(class::GENERIC, "expire", self.key);
        }
        Ok(match old {
            Some(v) => v.into(),
            None => Reply::ok(),
        })
    }
}

fn store_string(ctx: &mut Ctx<'_>, key: &[u8], value: Value, ttl: Ttl) {
    let db = ctx.db();
    match ttl {
        Ttl::Clear => ctx.store.set(db, key, value, None),
        Ttl::At(at) => ctx.store.set(db, key, value, Some(at)),
        Ttl::Keep => ctx.store.set_keep_ttl(db, key, value, ctx.now_ms),
    }
}

/// SETNX key value
#[derive(Debug)]
pub(crate) struct SetNx {
    key: Bytes,
    value: Bytes,
}

impl Command<'_> for SetNx {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(SetNx {
            key: a.next_owned()?,
            value: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        if ctx.store.exists(db, &self.key, ctx.now_ms) {
            return Ok(Reply::Int(0));
        }
        ctx.store
            .set(db, &self.key, Value::from_bytes(&self.value), None);
        ctx.notify(class::STRING, "set", &self.key);
        Ok(Reply::Int(1))
    }
}

/// The unit of a relative time argument: SETEX/PSETEX, EXPIRE/PEXPIRE, TTL/PTTL…
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Precision {
    /// Seconds (SETEX, EXPIRE, TTL…).
    Seconds,
    /// Milliseconds (PSETEX, PEXPIRE, PTTL…).
    Millis,
}

/// SETEX key seconds value / PSETEX key ms value
#[derive(Debug)]
pub(crate) struct SetEx {
    precision: Precision,
    key: Bytes,
    ttl: Bytes,
    value: Bytes,
}

impl VariantCommand<'_> for SetEx {
    type Variant = Precision;

    fn parse(a: &mut ArgCursor<'_>, precision: Precision) -> CmdResult<Self> {
        Ok(SetEx {
            precision,
            key: a.next_owned()?,
            ttl: a.next_owned()?,
            value: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (unit, name) = match self.precision {
            Precision::Millis => (TtlUnit::Millis, "psetex"),
            Precision::Seconds => (TtlUnit::Seconds, "setex"),
        };
        let at = expire_deadline(&self.ttl, unit, ctx.now_ms, name)?;
        store_string(ctx, &self.key, Value::from_bytes(&self.value), Ttl::At(at));
        ctx.notify(class::STRING, "set", &self.key);
        ctx.notify(class::GENERIC, "expire", &self.key);
        Ok(Reply::ok())
    }
}

/// GETSET key value
#[derive(Debug)]
pub(crate) struct GetSet {
    key: Bytes,
    value: Bytes,
}

impl Command<'_> for GetSet {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(GetSet {
            key: a.next_owned()?,
            value: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let old = read_string(ctx, &self.key)?;
        store_string(ctx, &self.key, Value::from_bytes(&self.value), Ttl::Clear);
        ctx.notify(class::STRING, "set", &self.key);
        Ok(old.into())
    }
}

/// GETDEL key
#[derive(Debug)]
pub(crate) struct GetDel {
    key: Bytes,
}

impl Command<'_> for GetDel {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(GetDel {
            key: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let old = read_string(ctx, &self.key)?;
        if old.is_some() {
            let db = ctx.db();
            ctx.store.remove(db, &self.key, ctx.now_ms);
            ctx.notify(class::GENERIC, "del", &self.key);
        }
        Ok(old.into())
    }
}

/// GETEX key [EX s|PX ms|EXAT t|PXAT t|PERSIST]
#[derive(Debug)]
pub(crate) struct GetEx<'a> {
    key: &'a [u8],
    ttl: Option<(TtlUnit, &'a [u8])>,
    persist: bool,
}

impl<'a> Command<'a> for GetEx<'a> {
    fn parse(a: &mut ArgCursor<'a>) -> CmdResult<Self> {
        let mut g = GetEx {
            key: a.next()?,
            ttl: None,
            persist: false,
        };
        while let Some(opt) = a.peek() {
            let opt = crate::engine::args::upper(opt);
            a.next()?;
            let unit = match &opt[..] {
                b"PERSIST" if g.ttl.is_none() => {
                    g.persist = true;
                    continue;
                }
                other => TtlUnit::from_option(other).ok_or(CmdError::Syntax)?,
            };
            read_ttl_option(a, unit, &mut g.ttl, g.persist)?;
        }
        Ok(g)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        // As in Redis: a missing key or WRONGTYPE is reported before a bad TTL.
        let Some(value) = read_string(ctx, self.key)? else {
            return Ok(Reply::Null);
        };
        let at = match &self.ttl {
            Some((unit, arg)) => Some(expire_deadline(arg, *unit, ctx.now_ms, "getex")?),
            None => None,
        };
        let db = ctx.db();
        if let Some(at) = at {
            if at <= ctx.now_ms {
                ctx.store.remove(db, self.key, ctx.now_ms);
                ctx.notify(class::GENERIC, "del", self.key);
            } else {
                ctx.store.set_expire(db, self.key, Some(at), ctx.now_ms);
                ctx.notify(class::GENERIC, "expire", self.key);
            }
        } else if self.persist {
            crate::commands::keys::expire::persist(ctx, self.key);
        }
        Ok(Reply::Bulk(value))
    }
}

/// MGET key [key …]
#[derive(Debug)]
pub(crate) struct MGet {
    keys: Vec<Bytes>,
}

impl Command<'_> for MGet {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(MGet {
            keys: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let out = self
            .keys
            .iter()
            .map(|k| {
                match ctx
                    .store
                    .read_value(db, k, ctx.now_ms)
                    .map(|v| v.as_bytes())
                {
                    Some(Ok(b)) => Reply::Bulk(b),
                    _ => Reply::Null,
                }
            })
            .collect();
        Ok(Reply::Array(out))
    }
}

/// Whether MSET writes unconditionally or, as MSETNX, only when no key exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MSetMode {
    /// MSET.
    Always,
    /// MSETNX: all or nothing, nothing if any key exists.
    IfNoneExists,
}

/// MSET / MSETNX key value [key value …]
#[derive(Debug)]
pub(crate) struct MSet {
    mode: MSetMode,
    pairs: Vec<(Bytes, Bytes)>,
}

impl VariantCommand<'_> for MSet {
    type Variant = MSetMode;

    fn parse(a: &mut ArgCursor<'_>, mode: MSetMode) -> CmdResult<Self> {
        let rest = a.rest();
        if !rest.len().is_multiple_of(2) {
            return Err(CmdError::WrongArity(
                match mode {
                    MSetMode::Always => "mset",
                    MSetMode::IfNoneExists => "msetnx",
                }
                .into(),
            ));
        }
        Ok(MSet {
            mode,
            pairs: rest
                .chunks(2)
                .map(|p| (Bytes::copy_from_slice(p[0]), Bytes::copy_from_slice(p[1])))
                .collect(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let nx = self.mode == MSetMode::IfNoneExists;
        if nx
            && self
                .pairs
                .iter()
                .any(|(k, _)| ctx.store.exists(db, k, ctx.now_ms))
        {
            return Ok(Reply::Int(0));
        }
        for (k, v) in &self.pairs {
            ctx.store.set(db, k, Value::from_bytes(v), None);
            ctx.notify(class::STRING, "set", k);
        }
        Ok(if nx { Reply::Int(1) } else { Reply::ok() })
    }
}

/// Adds `by` to the integer at `key` (created as 0), keeping its TTL.
fn incr_by(ctx: &mut Ctx<'_>, key: &[u8], by: i64) -> CmdResult<Reply> {
    let db = ctx.db();
    // One probe serves the read and the write (an error writes nothing).
    let probe = ctx.store.probe(db, key, ctx.now_ms);
    let current = match probe.value() {
        // A missing key is created as `by` itself: 0 + by cannot overflow.
        None => 0,
        Some(Value::Int(n)) => *n,
        Some(Value::Str(b) | Value::Raw(b)) => match parse_i64(b) {
            Some(n) => n,
            None => return Err(CmdError::NotInteger),
        },
        Some(_) => return Err(CmdError::WrongType),
    };
    let Some(next) = current.checked_add(by) else {
        return Err(CmdError::Overflow);
    };
    probe.write_keep_ttl(key, Value::Int(next));
    ctx.notify(class::STRING, "incrby", key);
    Ok(Reply::Int(next))
}

/// Which way INCR/INCRBY (up) or DECR/DECRBY (down) moves the counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// INCR, INCRBY.
    Up,
    /// DECR, DECRBY.
    Down,
}

/// INCR key / DECR key
#[derive(Debug)]
pub(crate) struct Incr<'a> {
    key: &'a [u8],
    by: i64,
}

impl<'a> VariantCommand<'a> for Incr<'a> {
    type Variant = Step;

    fn parse(a: &mut ArgCursor<'a>, step: Step) -> CmdResult<Self> {
        Ok(Incr {
            key: a.next()?,
            by: match step {
                Step::Up => 1,
                Step::Down => -1,
            },
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        incr_by(ctx, self.key, self.by)
    }
}

/// INCRBY key n / DECRBY key n
#[derive(Debug)]
pub(crate) struct IncrBy<'a> {
    key: &'a [u8],
    by: i64,
}

impl<'a> VariantCommand<'a> for IncrBy<'a> {
    type Variant = Step;

    fn parse(a: &mut ArgCursor<'a>, step: Step) -> CmdResult<Self> {
        let key = a.next()?;
        let by = a.next_i64()?;
        let by = match step {
            Step::Up => by,
            Step::Down => by
                .checked_neg()
                .ok_or(CmdError::msg("ERR decrement would overflow"))?,
        };
        Ok(IncrBy { key, by })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        incr_by(ctx, self.key, self.by)
    }
}

/// INCRBYFLOAT key increment
///
/// Computed in emulated x87 `long double`, as Redis does on x86-64, so the stored text is
/// Redis's to the last digit (`0.1 + 0.2` is `0.3`).
#[derive(Debug)]
pub(crate) struct IncrByFloat {
    key: Bytes,
    /// Parsed in `apply`, after the type check: Redis answers WRONGTYPE before it looks at
    /// the increment (unlike INCRBY, which checks its increment first).
    by: Bytes,
}

impl Command<'_> for IncrByFloat {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(IncrByFloat {
            key: a.next_owned()?,
            by: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let current = match ctx
            .store
            .lookup(db, &self.key, ctx.now_ms)
            .map(|e| &e.value)
        {
            None => LongDouble::ZERO,
            Some(Value::Int(n)) => long_double::parse(itoa::Buffer::new().format(*n).as_bytes())
                .ok_or(CmdError::NotFloat)?,
            Some(Value::Str(b) | Value::Raw(b)) => {
                long_double::parse(b).ok_or(CmdError::NotFloat)?
            }
            Some(_) => return Err(CmdError::WrongType),
        };
        let by = long_double::parse(&self.by).ok_or(CmdError::NotFloat)?;
        let next = long_double::add(current, by);
        if !next.is_finite() {
            return Err(CmdError::msg("ERR increment would produce NaN or Infinity"));
        }
        let text = Bytes::from(long_double::format_human(next));
        ctx.store
            .set_keep_ttl(db, &self.key, Value::Str(text.clone().into()), ctx.now_ms);
        ctx.notify(class::STRING, "incrbyfloat", &self.key);
        Ok(Reply::Bulk(text))
    }
}

/// APPEND key value
#[derive(Debug)]
pub(crate) struct Append {
    key: Bytes,
    value: Bytes,
}

impl Command<'_> for Append {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Append {
            key: a.next_owned()?,
            value: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let max = ctx
            .shared
            .config
            .read()
            .map(|c| c.proto_max_bulk_len)
            .unwrap_or(usize::MAX);
        let total = {
            // A new key is stored as SET stores it (Redis: "42" gets the int encoding).
            let mut s: StringMut = ctx.store.modify_or_create(db, &self.key, ctx.now_ms, || {
                StringValue::from_bytes(&self.value)
            })?;
            if s.is_created() {
                self.value.len()
            } else {
                let total = s.str_len().saturating_add(self.value.len());
                if total > max {
                    return Err(CmdError::msg(
                        "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
                    ));
                }
                s.append(&self.value);
                total
            }
        };
        ctx.notify(class::STRING, "append", &self.key);
        Ok(Reply::Int(total as i64))
    }
}

/// STRLEN key
#[derive(Debug)]
pub(crate) struct StrLen {
    key: Bytes,
}

impl Command<'_> for StrLen {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(StrLen {
            key: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Int(
            read_string(ctx, &self.key)?.map_or(0, |b| b.len() as i64),
        ))
    }
}
