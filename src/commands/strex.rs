//! The string commands Redis added for lock-free and rate-limiting writes: DIGEST, DELEX and
//! MSETEX (Redis 8.4), INCREX (Redis 8.8, with Valkey 9.2's NX | XX) and DELIFEQ (Valkey 9.0); SET's IFEQ/IFNE/IFDEQ/IFDNE conditions live in
//! `cmd::strings` and use [`digest`] from here.
//!
//! No Redis 8 server could be built on this machine, so each behaviour is taken from the
//! command pages (redis.io/commands/digest, /delex, /msetex, /increx, /set) and Redis's
//! command JSON files (arity, flags, key specs); where a page does not say (an error's exact
//! text, a keyspace event's name), the choice is marked "inferred" here and in
//! docs/newer-commands.md. `tests/diff/strings_8.txt` holds the expectations with their
//! sources.

use bytes::Bytes;

use super::hashttl::propagating;
use super::strings::{TtlUnit, expire_deadline};
use crate::engine::table::KeySpec;
use crate::engine::{ArgCursor, Command, CommandSpec as C, Ctx, run};
use crate::error::{CmdError, CmdResult};
use crate::num::long_double::{self, LongDouble};
use crate::num::parse_i64;
use crate::protocol::Reply;
use crate::services::notify::class;
use crate::store::Value;

/// DIGEST, DELEX, MSETEX, INCREX as Redis declares them, and Valkey 9.0's DELIFEQ.
pub(crate) static COMMANDS: &[C] = &[
    C::new(
        "digest",
        2,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<Digest>,
    )
    .with_acl(&["@read", "@string", "@fast"])
    .with_key_flags(&["RO", "access"]),
    C::new(
        "delex",
        -2,
        &["write", "fast"],
        C::keys(1, 1, 1),
        run::<DelEx>,
    )
    .with_effect(crate::repl::effects::Effect::Handled)
    .with_acl(&["@write", "@string", "@fast"])
    .with_key_flags(&["RW", "delete"]),
    C::new("delifeq", 3, &["write"], C::keys(1, 1, 1), run::<DelIfEq>)
        .with_effect(crate::repl::effects::Effect::Handled)
        .with_acl(&["@write", "@string", "@slow"])
        .with_key_flags(&["RM", "access", "delete"]),
    C::new(
        "msetex",
        -4,
        &["write", "denyoom", "movablekeys"],
        KeySpec::Keynum {
            begin: 1,
            keynumidx: 0,
            firstkey: 1,
            step: 2,
            flags: &["OW", "update"],
            notes: None,
        },
        run::<MSetEx>,
    )
    .with_effect(crate::repl::effects::Effect::Handled)
    .with_acl(&["@write", "@string", "@slow"]),
    C::new(
        "increx",
        -2,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        run::<IncrEx>,
    )
    .with_effect(crate::repl::effects::Effect::KeyState)
    .with_acl(&["@write", "@string", "@fast"])
    .with_key_flags(&["RW", "access", "update"]),
];

/// The XXH3-64 digest of a string value (default secret, no seed), as DIGEST shows it: 16
/// lowercase hex digits.
pub(crate) fn digest(bytes: &[u8]) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(bytes))
}

/// Whether the digest argument `given` names the digest of `value`. Compared as hex text,
/// without case (inferred: the pages give the digest as hex and say nothing of malformed
/// ones, which here simply never match).
pub(crate) fn digest_matches(value: &[u8], given: &[u8]) -> bool {
    digest(value).as_bytes().eq_ignore_ascii_case(given)
}

/// A compare-and-set / compare-and-delete condition (SET and DELEX).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Compare {
    /// IFEQ: the value is these bytes.
    Eq(Bytes),
    /// IFNE: the value is not these bytes (or the key is missing).
    Ne(Bytes),
    /// IFDEQ: the value's digest is this.
    DigestEq(Bytes),
    /// IFDNE: the value's digest is not this (or the key is missing).
    DigestNe(Bytes),
}

impl Compare {
    /// The condition an (uppercased) option names, with its argument.
    pub(crate) fn from_option(opt: &[u8], arg: Bytes) -> Option<Compare> {
        Some(match opt {
            b"IFEQ" => Compare::Eq(arg),
            b"IFNE" => Compare::Ne(arg),
            b"IFDEQ" => Compare::DigestEq(arg),
            b"IFDNE" => Compare::DigestNe(arg),
            _ => return None,
        })
    }

    /// Whether the condition holds for the current string value (None: no key).
    pub(crate) fn holds(&self, current: Option<&[u8]>) -> bool {
        match (self, current) {
            (Compare::Eq(_) | Compare::DigestEq(_), None) => false,
            (Compare::Ne(_) | Compare::DigestNe(_), None) => true,
            (Compare::Eq(v), Some(c)) => c == &v[..],
            (Compare::Ne(v), Some(c)) => c != &v[..],
            (Compare::DigestEq(d), Some(c)) => digest_matches(c, d),
            (Compare::DigestNe(d), Some(c)) => !digest_matches(c, d),
        }
    }
}

/// The string value at `key` for a condition: None if missing, WRONGTYPE if not a string
/// (Redis 8.4: "keys must be of type string when using one of the options").
fn current_string(ctx: &mut Ctx<'_>, key: &[u8]) -> CmdResult<Option<Bytes>> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    match ctx.store.lookup(db, key, now) {
        None => Ok(None),
        Some(e) => e.value.as_bytes().map(Some),
    }
}

/// DIGEST key: the XXH3 digest of a string value as 16 hex digits; nil for a missing key.
#[derive(Debug)]
pub(crate) struct Digest {
    key: Bytes,
}

impl Command<'_> for Digest {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Digest {
            key: a.next_owned()?,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        Ok(match ctx.store.read_value(db, &self.key, now) {
            None => Reply::Null,
            Some(v) => Reply::Bulk(Bytes::from(digest(&v.as_bytes()?))),
        })
    }
}

/// DELIFEQ key value (Valkey 9.0): DELEX key IFEQ value, the lock release without a script.
/// 1 if deleted, else 0; WRONGTYPE for a key that is not a string (valkey.io/commands/delifeq).
#[derive(Debug)]
pub(crate) struct DelIfEq(DelEx);

impl Command<'_> for DelIfEq {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next_owned()?;
        let value = a.next_owned()?;
        Ok(DelIfEq(DelEx {
            key,
            cond: Some(Compare::Eq(value)),
        }))
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        self.0.apply(ctx)
    }
}

/// DELEX key [IFEQ v | IFNE v | IFDEQ d | IFDNE d]: DEL of one key, or, with a condition on
/// its string value, only when the condition holds. 1 if deleted, else 0. Propagated as DEL.
#[derive(Debug)]
pub(crate) struct DelEx {
    key: Bytes,
    cond: Option<Compare>,
}

impl Command<'_> for DelEx {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next_owned()?;
        let rest = a.rest();
        let cond = match rest {
            [] => None,
            [opt, arg] => Some(
                Compare::from_option(
                    &crate::engine::args::upper(opt),
                    Bytes::copy_from_slice(arg),
                )
                .ok_or(CmdError::Syntax)?,
            ),
            // Inferred from the page's syntax (one optional condition with its argument).
            _ => return Err(CmdError::WrongArity("delex".into())),
        };
        Ok(DelEx { key, cond })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        if let Some(cond) = &self.cond {
            let current = current_string(ctx, &self.key)?;
            if current.is_none() || !cond.holds(current.as_deref()) {
                return Ok(Reply::Int(0));
            }
        }
        let deleted = ctx.store.remove(db, &self.key, now).is_some();
        if deleted {
            ctx.notify(class::GENERIC, "del", &self.key);
            if propagating(ctx) {
                ctx.propagate
                    .push((db, vec![Bytes::from_static(b"DEL"), self.key.clone()]));
            }
        }
        Ok(Reply::Int(i64::from(deleted)))
    }
}

/// MSETEX numkeys key value [key value …] [NX | XX] [EX s | PX ms | EXAT ts | PXAT ms-ts |
/// KEEPTTL]: sets every key with one expiry (reply 1), or none when NX / XX is not met for
/// all of them (reply 0).
#[derive(Debug)]
pub(crate) struct MSetEx {
    pairs: Vec<Bytes>,
    nx: bool,
    xx: bool,
    ttl: Option<(TtlUnit, Bytes)>,
    keep_ttl: bool,
}

impl Command<'_> for MSetEx {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let n = parse_i64(a.next()?).ok_or(CmdError::NotInteger)?;
        let n = match usize::try_from(n) {
            Ok(n) if n >= 1 && n.saturating_mul(2) <= a.remaining() => n,
            // Inferred text: numkeys out of range or more than the pairs given.
            _ => return Err(CmdError::msg("ERR invalid numkeys value")),
        };
        let mut pairs = Vec::with_capacity(n * 2);
        for _ in 0..n * 2 {
            pairs.push(a.next_owned()?);
        }
        let mut m = MSetEx {
            pairs,
            nx: false,
            xx: false,
            ttl: None,
            keep_ttl: false,
        };
        while let Some(opt) = a.peek() {
            let opt = crate::engine::args::upper(opt);
            a.next()?;
            match &opt[..] {
                b"NX" if !m.xx => m.nx = true,
                b"XX" if !m.nx => m.xx = true,
                b"KEEPTTL" if m.ttl.is_none() => m.keep_ttl = true,
                other => {
                    let unit = TtlUnit::from_option(other).ok_or(CmdError::Syntax)?;
                    if m.keep_ttl || m.ttl.is_some() || a.remaining() == 0 {
                        return Err(CmdError::Syntax);
                    }
                    m.ttl = Some((unit, a.next_owned()?));
                }
            }
        }
        Ok(m)
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let at = match &self.ttl {
            Some((unit, arg)) => Some(expire_deadline(arg, *unit, now, "msetex")?),
            None => None,
        };
        if self.nx || self.xx {
            for p in self.pairs.chunks_exact(2) {
                let exists = ctx.store.exists(db, &p[0], now);
                if (self.nx && exists) || (self.xx && !exists) {
                    return Ok(Reply::Int(0));
                }
            }
        }
        for p in self.pairs.chunks_exact(2) {
            let value = Value::from_bytes(&p[1]);
            if self.keep_ttl {
                ctx.store.set_keep_ttl(db, &p[0], value, now);
            } else {
                ctx.store.set(db, &p[0], value, at);
            }
            ctx.notify(class::STRING, "set", &p[0]);
            if at.is_some() {
                ctx.notify(class::GENERIC, "expire", &p[0]);
            }
        }
        if propagating(ctx) {
            // Each key's state, with the absolute time: exact whatever the replica's clock.
            for p in self.pairs.chunks_exact(2) {
                let mut argv = vec![Bytes::from_static(b"SET"), p[0].clone(), p[1].clone()];
                match at {
                    Some(at) => {
                        argv.push(Bytes::from_static(b"PXAT"));
                        argv.push(Bytes::from(at.to_string()));
                    }
                    None if self.keep_ttl => argv.push(Bytes::from_static(b"KEEPTTL")),
                    None => {}
                }
                ctx.propagate.push((db, argv));
            }
        }
        Ok(Reply::Int(1))
    }
}

/// A number INCREX works with: an integer, or (BYFLOAT) an x87 long double.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Num {
    Int(i64),
    Float(LongDouble),
}

/// INCREX's expiry option.
#[derive(Debug, Clone, PartialEq, Eq)]
enum IncrTtl {
    /// None given: the TTL stays as it is.
    Keep,
    /// EX / PX / EXAT / PXAT and its argument.
    Set(TtlUnit, Bytes),
    /// PERSIST.
    Persist,
}

/// INCREX key [BYFLOAT f | BYINT n] [LBOUND l] [UBOUND u] [SATURATE] [EX s | PX ms | EXAT ts
/// | PXAT ms-ts | PERSIST] [ENX] (Redis 8.8): adds the increment (1 by default) and replies
/// `[new value, increment applied]`. A result outside the bounds (the type's limits when
/// none is given) leaves the key and its TTL alone and replies `[current, 0]`, or with
/// SATURATE is capped at the bound. The expiry option applies when the key is written; ENX
/// sets it only if the key has no TTL. Valkey 9.2's NX | XX run it only when the key is
/// missing | present; otherwise nothing changes and the reply is `[current, 0]`, the shape of
/// every skipped increment (inferred: Valkey's page does not show that reply). Propagated as
/// the key's state (SET … PXAT / KEEPTTL).
#[derive(Debug)]
pub(crate) struct IncrEx {
    key: Bytes,
    /// NX (`Some(false)`: only a missing key) or XX (`Some(true)`: only an existing one).
    exists: Option<bool>,
    by: Option<(bool, Bytes)>,
    lower: Option<Bytes>,
    upper: Option<Bytes>,
    saturate: bool,
    ttl: IncrTtl,
    enx: bool,
}

/// Compares two long doubles (both finite).
fn ld_cmp(a: LongDouble, b: LongDouble) -> std::cmp::Ordering {
    let neg_b = match b {
        LongDouble::Finite { neg, mant, exp } => LongDouble::Finite {
            neg: !neg,
            mant,
            exp,
        },
        other => other,
    };
    match long_double::add(a, neg_b) {
        LongDouble::Finite { mant: 0, .. } => std::cmp::Ordering::Equal,
        LongDouble::Finite { neg: true, .. } | LongDouble::Inf { neg: true } => {
            std::cmp::Ordering::Less
        }
        _ => std::cmp::Ordering::Greater,
    }
}

impl Command<'_> for IncrEx {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let mut x = IncrEx {
            key: a.next_owned()?,
            exists: None,
            by: None,
            lower: None,
            upper: None,
            saturate: false,
            ttl: IncrTtl::Keep,
            enx: false,
        };
        // Options in any order; one repeated, or two of one group, is a syntax error
        // (inferred: the page lists them as exclusive groups).
        while let Some(opt) = a.peek() {
            let opt = crate::engine::args::upper(opt);
            a.next()?;
            match &opt[..] {
                b"BYINT" | b"BYFLOAT" if x.by.is_none() && a.remaining() > 0 => {
                    x.by = Some((&opt[..] == b"BYFLOAT", a.next_owned()?));
                }
                b"LBOUND" if x.lower.is_none() && a.remaining() > 0 => {
                    x.lower = Some(a.next_owned()?);
                }
                b"UBOUND" if x.upper.is_none() && a.remaining() > 0 => {
                    x.upper = Some(a.next_owned()?);
                }
                b"SATURATE" if !x.saturate => x.saturate = true,
                b"NX" if x.exists.is_none() => x.exists = Some(false),
                b"XX" if x.exists.is_none() => x.exists = Some(true),
                b"PERSIST" if x.ttl == IncrTtl::Keep => x.ttl = IncrTtl::Persist,
                b"ENX" if !x.enx => x.enx = true,
                other => match TtlUnit::from_option(other) {
                    Some(unit) if x.ttl == IncrTtl::Keep && a.remaining() > 0 => {
                        x.ttl = IncrTtl::Set(unit, a.next_owned()?);
                    }
                    _ => return Err(CmdError::Syntax),
                },
            }
        }
        // "ENX must be combined with EX, PX, EXAT, or PXAT and is incompatible with PERSIST."
        if x.enx && !matches!(x.ttl, IncrTtl::Set(..)) {
            return Err(CmdError::Syntax);
        }
        Ok(x)
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let float = self.by.as_ref().is_some_and(|(f, _)| *f);
        let num = |b: &Bytes| -> CmdResult<Num> {
            if float {
                match long_double::parse(b) {
                    Some(v) if v.is_finite() => Ok(Num::Float(v)),
                    _ => Err(CmdError::NotFloat),
                }
            } else {
                parse_i64(b).map(Num::Int).ok_or(CmdError::NotInteger)
            }
        };
        let by = match &self.by {
            Some((_, b)) => num(b)?,
            None => Num::Int(1),
        };
        let lower = self.lower.as_ref().map(&num).transpose()?;
        let upper = self.upper.as_ref().map(&num).transpose()?;
        let at = match &self.ttl {
            IncrTtl::Set(unit, arg) => Some(expire_deadline(arg, *unit, now, "increx")?),
            _ => None,
        };
        if let (Some(l), Some(u)) = (lower, upper) {
            let bad = match (l, u) {
                (Num::Int(l), Num::Int(u)) => l > u,
                (Num::Float(l), Num::Float(u)) => ld_cmp(l, u) == std::cmp::Ordering::Greater,
                _ => false,
            };
            if bad {
                // Inferred text ("LBOUND must be less than or equal to UBOUND").
                return Err(CmdError::msg(
                    "ERR LBOUND must be less than or equal to UBOUND",
                ));
            }
        }
        // The current value and whether the key has a TTL.
        let (current, has_ttl) = match ctx.store.lookup(db, &self.key, now) {
            None => (None, false),
            Some(e) => {
                let has_ttl = e.expire_at().is_some();
                let v = match &e.value {
                    Value::Int(n) if !float => Num::Int(*n),
                    v @ (Value::Int(_) | Value::Str(_) | Value::Raw(_)) => num(&v.as_bytes()?)?,
                    _ => return Err(CmdError::WrongType),
                };
                (Some(v), has_ttl)
            }
        };
        let cur = current.unwrap_or(if float {
            Num::Float(LongDouble::ZERO)
        } else {
            Num::Int(0)
        });
        let resp3 = ctx.client.resp >= 3;
        let reply = |v: Num, d: Num| -> Reply {
            let one = |n: Num| match n {
                Num::Int(i) => Reply::Int(i),
                Num::Float(f) => {
                    let text = long_double::format_human(f);
                    if resp3 {
                        Reply::Double(text.parse().unwrap_or(0.0))
                    } else {
                        Reply::Bulk(Bytes::from(text))
                    }
                }
            };
            Reply::Array(vec![one(v), one(d)])
        };
        if self.exists.is_some_and(|want| want != current.is_some()) {
            let zero = match cur {
                Num::Int(_) => Num::Int(0),
                Num::Float(_) => Num::Float(LongDouble::ZERO),
            };
            return Ok(reply(cur, zero));
        }
        // The new value, or None when out of bounds without SATURATE.
        let (new, applied) = match (cur, by) {
            (Num::Int(c), Num::Int(b)) => {
                let lo = match lower {
                    Some(Num::Int(l)) => l,
                    _ => i64::MIN,
                };
                let hi = match upper {
                    Some(Num::Int(u)) => u,
                    _ => i64::MAX,
                };
                let sum = i128::from(c) + i128::from(b);
                let clamped = sum.clamp(i128::from(lo), i128::from(hi));
                if clamped != sum && !self.saturate {
                    return Ok(reply(Num::Int(c), Num::Int(0)));
                }
                let new = clamped as i64;
                let delta =
                    i64::try_from(clamped - i128::from(c)).map_err(|_| CmdError::Overflow)?;
                (Num::Int(new), Num::Int(delta))
            }
            (Num::Float(c), Num::Float(b)) => {
                let sum = long_double::add(c, b);
                if !sum.is_finite() {
                    return Err(CmdError::msg("ERR increment would produce NaN or Infinity"));
                }
                let mut new = sum;
                if let Some(Num::Float(l)) = lower
                    && ld_cmp(sum, l) == std::cmp::Ordering::Less
                {
                    new = l;
                }
                if let Some(Num::Float(u)) = upper
                    && ld_cmp(sum, u) == std::cmp::Ordering::Greater
                {
                    new = u;
                }
                if new != sum && !self.saturate {
                    return Ok(reply(Num::Float(c), Num::Float(LongDouble::ZERO)));
                }
                let neg_c = match c {
                    LongDouble::Finite { neg, mant, exp } => LongDouble::Finite {
                        neg: !neg,
                        mant,
                        exp,
                    },
                    other => other,
                };
                (Num::Float(new), Num::Float(long_double::add(new, neg_c)))
            }
            _ => return Err(CmdError::NotInteger),
        };
        let value = match new {
            Num::Int(n) => Value::Int(n),
            Num::Float(f) => Value::Str(Bytes::from(long_double::format_human(f)).into()),
        };
        let set_ttl = at.filter(|_| !(self.enx && has_ttl));
        match (&self.ttl, set_ttl) {
            (_, Some(at)) => ctx.store.set(db, &self.key, value, Some(at)),
            (IncrTtl::Persist, _) => ctx.store.set(db, &self.key, value, None),
            _ => ctx.store.set_keep_ttl(db, &self.key, value, now),
        }
        // Inferred event names: INCRBY's / INCRBYFLOAT's, then the TTL's.
        let event = if float { "incrbyfloat" } else { "incrby" };
        ctx.notify(class::STRING, event, &self.key);
        if set_ttl.is_some() {
            ctx.notify(class::GENERIC, "expire", &self.key);
        } else if self.ttl == IncrTtl::Persist && has_ttl {
            ctx.notify(class::GENERIC, "persist", &self.key);
        }
        Ok(reply(new, applied))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_is_redis_xxh3_in_hex() {
        // redis.io/commands/digest's example.
        assert_eq!(digest(b"Hello world"), "b6acb9d84a38ff74");
        assert!(digest_matches(b"Hello world", b"B6ACB9D84A38FF74"));
        assert!(!digest_matches(b"Hello world", b"b6acb9d84a38ff7"));
    }

    #[test]
    fn conditions_on_a_missing_key() {
        let v = || Bytes::from_static(b"x");
        assert!(!Compare::Eq(v()).holds(None));
        assert!(Compare::Ne(v()).holds(None));
        assert!(!Compare::DigestEq(v()).holds(None));
        assert!(Compare::DigestNe(v()).holds(None));
        assert!(Compare::Eq(v()).holds(Some(b"x")));
        assert!(Compare::Ne(v()).holds(Some(b"y")));
    }

    #[test]
    fn long_doubles_compare() {
        let p = |s: &str| long_double::parse(s.as_bytes()).unwrap();
        use std::cmp::Ordering::*;
        assert_eq!(ld_cmp(p("1.5"), p("2")), Less);
        assert_eq!(ld_cmp(p("2"), p("2.0")), Equal);
        assert_eq!(ld_cmp(p("-1"), p("-3")), Greater);
    }
}
