//! Redis 8.0's hash commands built on field expiry: HGETEX, HSETEX and HGETDEL.
//!
//! No Redis 8 server can be built on this machine (the redis/redis snapshot available
//! stops before 8.0), so the behaviour here follows Redis 8's source (`hgetexCommand`,
//! `hsetexCommand`, `hgetdelCommand` and `hsetexParseArgs` in t_hash.c; the command JSON
//! files for arity, flags and key specs) and the command pages (redis.io/commands/hgetex,
//! /hsetex, /hgetdel); `tests/diff/hash_field_expiry_8.txt` cites them line by line. The
//! field expiry machinery is `cmd::hashttl`'s.

use bytes::Bytes;

use super::hashttl::{Base, Unit, deletes_expired, parse_fields, propagate_hdel, propagating};
use crate::engine::{ArgCursor, CommandSpec as C, Ctx, VariantCommand, run_as};
use crate::error::{CmdError, CmdResult};
use crate::num::parse_i64;
use crate::protocol::Reply;
use crate::services::notify::class;
use crate::store::access::HashMut;
use crate::store::volatile::MAX_FIELD_EXPIRE_MS;

/// HGETEX, HSETEX, HGETDEL as Redis 8.0 declares them.
pub(crate) static COMMANDS: &[C] = &[
    C::new(
        "hgetex",
        -5,
        &["write", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<HGetEx>(c, a, ()),
    )
    .with_effect(crate::repl::effects::Effect::Handled)
    .with_acl(&["@write", "@hash", "@fast"])
    .with_key_flags(&["RW", "access", "update"])
    .with_key_notes("RW and UPDATE because it changes the TTL"),
    C::new(
        "hsetex",
        -6,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<HSetEx>(c, a, ()),
    )
    .with_effect(crate::repl::effects::Effect::Handled)
    .with_acl(&["@write", "@hash", "@fast"])
    .with_key_flags(&["RW", "update"]),
    C::new(
        "hgetdel",
        -5,
        &["write", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<HGetDel>(c, a, ()),
    )
    .with_effect(crate::repl::effects::Effect::Handled)
    .with_acl(&["@write", "@hash", "@fast"])
    .with_key_flags(&["RW", "access", "delete"]),
];

/// Parses an expiry time as Redis 8's `parseExpireTime`: an integer ≥ 0, within the field
/// expiry range once in milliseconds and added to `basetime`; `name` is the command's, for
/// the range error.
fn parse_expire_time(arg: &[u8], unit: Unit, basetime: u64, name: &'static str) -> CmdResult<u64> {
    let t = parse_i64(arg).ok_or(CmdError::NotInteger)?;
    if t < 0 {
        return Err(CmdError::msg("ERR invalid expire time, must be >= 0"));
    }
    let max = MAX_FIELD_EXPIRE_MS as i64;
    let mut ms = t;
    if unit == Unit::Seconds {
        if t > max / 1000 {
            return Err(CmdError::InvalidExpire(name));
        }
        ms = t * 1000;
    }
    let base = basetime as i64;
    if ms > max - base {
        return Err(CmdError::InvalidExpire(name));
    }
    Ok((ms + base) as u64)
}

/// The expiry option of HGETEX / HSETEX.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expiry {
    /// None given.
    Keep,
    /// EX / PX / EXAT / PXAT: the absolute time in ms, and whether it was given as PXAT.
    At(u64, bool),
    /// HGETEX PERSIST.
    Persist,
    /// HSETEX KEEPTTL.
    KeepTtl,
}

/// The unit and base of an expiry keyword (EX, PX, EXAT, PXAT), and whether it is PXAT.
fn expiry_word(word: &[u8]) -> Option<(Unit, Base, bool)> {
    let w = |s: &str| word.eq_ignore_ascii_case(s.as_bytes());
    if w("EX") {
        Some((Unit::Seconds, Base::Now, false))
    } else if w("PX") {
        Some((Unit::Millis, Base::Now, false))
    } else if w("EXAT") {
        Some((Unit::Seconds, Base::Epoch, false))
    } else if w("PXAT") {
        Some((Unit::Millis, Base::Epoch, true))
    } else {
        None
    }
}

const ONE_EXPIRY: &str = "ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified";

/// HGETEX key [EX s | PX ms | EXAT ts | PXAT ms-ts | PERSIST] FIELDS n field…: the values
/// (nil for a missing or expired field), and the fields found get the new TTL (or lose
/// theirs). Propagated as HPEXPIREAT / HPERSIST of the fields changed and HDEL of the fields
/// deleted (expired, or given a time already past).
#[derive(Debug)]
pub(crate) struct HGetEx {
    args: Vec<Bytes>,
}

impl VariantCommand<'_> for HGetEx {
    type Variant = ();

    fn parse(a: &mut ArgCursor<'_>, (): ()) -> CmdResult<Self> {
        Ok(HGetEx {
            args: crate::engine::args::owned(a.rest()),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let deletes = deletes_expired(ctx);
        let propagates = propagating(ctx);
        let key = self.args[0].clone();
        let mut h: Option<HashMut> = ctx.store.modify(db, &key, now)?;
        let borrowed = crate::engine::args::borrowed(&self.args[1..]);
        let mut a = ArgCursor::new(&borrowed);
        let opt = a.peek().unwrap_or_default();
        let expiry = if let Some((unit, base, pxat)) = expiry_word(opt) {
            a.next()?;
            let basetime = if base == Base::Now { now } else { 0 };
            Expiry::At(
                parse_expire_time(a.next()?, unit, basetime, "hgetex")?,
                pxat,
            )
        } else if opt.eq_ignore_ascii_case(b"PERSIST") {
            a.next()?;
            Expiry::Persist
        } else {
            Expiry::Keep
        };
        let fields = parse_fields(&mut a, "ERR Number of fields must be a positive integer")?;
        let Some(hash) = h.as_mut() else {
            return Ok(Reply::Array(vec![Reply::Null; fields.len()]));
        };
        if expiry != Expiry::Keep && !hash.is_volatile() {
            hash.make_volatile();
        }
        let mut replies = Vec::with_capacity(fields.len());
        let (mut expired, mut deleted, mut updated) = (Vec::new(), Vec::new(), Vec::new());
        for f in fields {
            if deletes && hash.is_field_expired(f, now) {
                hash.remove(f);
                expired.push(*f);
                replies.push(Reply::Null);
                continue;
            }
            let Some(v) = hash.get_live(f, now) else {
                replies.push(Reply::Null);
                continue;
            };
            replies.push(Reply::Bulk(Bytes::copy_from_slice(v)));
            match expiry {
                Expiry::At(at, _) if at <= now && deletes => {
                    hash.remove(f);
                    deleted.push(*f);
                }
                Expiry::At(at, _) => {
                    hash.set_field_ttl(f, at);
                    updated.push(*f);
                }
                Expiry::Persist => {
                    hash.persist_field(f);
                    updated.push(*f);
                }
                Expiry::Keep | Expiry::KeepTtl => {}
            }
        }
        let emptied = hash.is_empty();
        if expired.is_empty()
            && deleted.is_empty()
            && updated.is_empty()
            && let Some(h) = h.as_mut()
        {
            h.mark_unchanged();
        }
        drop(h);
        for f in expired.iter().chain(&deleted) {
            propagate_hdel(ctx, &key, f);
        }
        if !expired.is_empty() {
            ctx.notify(class::HASH, "hexpired", &key);
        }
        if !updated.is_empty() {
            let mut argv = match expiry {
                Expiry::Persist => {
                    ctx.notify(class::HASH, "hpersist", &key);
                    vec![Bytes::from_static(b"HPERSIST"), key.clone()]
                }
                Expiry::At(at, _) => {
                    ctx.notify(class::HASH, "hexpire", &key);
                    vec![
                        Bytes::from_static(b"HPEXPIREAT"),
                        key.clone(),
                        Bytes::from(at.to_string()),
                    ]
                }
                Expiry::Keep | Expiry::KeepTtl => Vec::new(),
            };
            if propagates && !argv.is_empty() {
                argv.push(Bytes::from_static(b"FIELDS"));
                argv.push(Bytes::from(updated.len().to_string()));
                argv.extend(updated.iter().map(|f| Bytes::copy_from_slice(f)));
                ctx.propagate.push((db, argv));
            }
        } else if !deleted.is_empty() {
            ctx.notify(class::HASH, "hdel", &key);
        }
        if emptied && !(expired.is_empty() && deleted.is_empty()) {
            ctx.notify(class::GENERIC, "del", &key);
        }
        Ok(Reply::Array(replies))
    }
}

/// HSETEX key [FNX | FXX] [EX s | PX ms | EXAT ts | PXAT ms-ts | KEEPTTL] FIELDS n field
/// value…: sets every field (reply 1) or, when FNX / FXX is not met, none (reply 0), and
/// their TTL; without an expiry option an existing field loses its TTL, with KEEPTTL it
/// keeps it. The options are checked before the key's type, as `hsetexParseArgs` does;
/// propagated with its time as an absolute PXAT.
#[derive(Debug)]
pub(crate) struct HSetEx {
    args: Vec<Bytes>,
}

/// HSETEX's parsed options: FNX, FXX, the expiry, and where the field-value pairs start.
struct SetExArgs {
    fnx: bool,
    fxx: bool,
    expiry: Expiry,
    first: usize,
}

/// `hsetexParseArgs`: options in any order until FIELDS, whose count must match the pairs
/// (an arity error if not).
fn parse_setex(args: &[&[u8]], now: u64) -> CmdResult<SetExArgs> {
    let arity = || CmdError::WrongArity("hsetex".into());
    let mut o = SetExArgs {
        fnx: false,
        fxx: false,
        expiry: Expiry::Keep,
        first: 0,
    };
    let mut i = 1;
    while let Some(w) = args.get(i) {
        if w.eq_ignore_ascii_case(b"FIELDS") {
            // The count and at least one pair must follow.
            if i + 3 > args.len() {
                return Err(arity());
            }
            let n = match parse_i64(args[i + 1]) {
                Some(n) if (1..=i64::from(i32::MAX)).contains(&n) => n as usize,
                _ => return Err(CmdError::msg("ERR invalid number of fields")),
            };
            let remaining = args.len() - i - 2;
            if !remaining.is_multiple_of(2) || n != remaining / 2 {
                return Err(arity());
            }
            o.first = i + 2;
            return Ok(o);
        } else if let Some((unit, base, pxat)) = expiry_word(w) {
            if o.expiry != Expiry::Keep {
                return Err(CmdError::msg(ONE_EXPIRY));
            }
            let Some(t) = args.get(i + 1) else {
                return Err(CmdError::msg("ERR missing expire time"));
            };
            let basetime = if base == Base::Now { now } else { 0 };
            o.expiry = Expiry::At(parse_expire_time(t, unit, basetime, "hsetex")?, pxat);
            i += 1;
        } else if w.eq_ignore_ascii_case(b"KEEPTTL") {
            if o.expiry != Expiry::Keep {
                return Err(CmdError::msg(ONE_EXPIRY));
            }
            o.expiry = Expiry::KeepTtl;
        } else if w.eq_ignore_ascii_case(b"FXX") || w.eq_ignore_ascii_case(b"FNX") {
            if o.fnx || o.fxx {
                return Err(CmdError::msg(
                    "ERR Only one of FXX or FNX arguments can be specified",
                ));
            }
            if w.eq_ignore_ascii_case(b"FXX") {
                o.fxx = true;
            } else {
                o.fnx = true;
            }
        } else {
            let text = String::from_utf8_lossy(w).replace(['\r', '\n'], " ");
            return Err(CmdError::owned(format!("ERR unknown argument: {text}")));
        }
        i += 1;
    }
    // Unreachable with the arity of -6 (at most three option words fit without FIELDS).
    Err(arity())
}

impl VariantCommand<'_> for HSetEx {
    type Variant = ();

    fn parse(a: &mut ArgCursor<'_>, (): ()) -> CmdResult<Self> {
        Ok(HSetEx {
            args: crate::engine::args::owned(a.rest()),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let deletes = deletes_expired(ctx);
        let propagates = propagating(ctx);
        let args = &self.args;
        let key = args[0].clone();
        let o = parse_setex(&crate::engine::args::borrowed(args), now)?;
        let pairs = &args[o.first..];
        let limits = super::hash::hash_limits(ctx.shared);
        if o.fxx
            && ctx
                .store
                .modify::<Box<crate::store::value::HashValue>>(db, &key, now)?
                .is_none()
        {
            return Ok(Reply::Int(0));
        }
        let mut h: HashMut = ctx.store.modify_or_create(db, &key, now, Box::default)?;
        // FNX / FXX look at the fields first; an expired one is deleted on the way (and
        // counts as missing), as Redis's lazy expiry does.
        let mut expired = Vec::new();
        let mut met = true;
        if o.fnx || o.fxx {
            for p in pairs.chunks_exact(2) {
                let f = &p[0];
                if deletes && h.is_field_expired(f, now) {
                    h.remove(f);
                    expired.push(f.clone());
                }
                let exists = h.get(f).is_some() && !h.is_field_expired(f, now);
                if (o.fxx && !exists) || (o.fnx && exists) {
                    met = false;
                    break;
                }
            }
        }
        let (mut deleted, mut updated) = (Vec::new(), 0usize);
        if met {
            if matches!(o.expiry, Expiry::At(..)) && !h.is_volatile() {
                h.make_volatile();
            }
            let keep = o.expiry != Expiry::Keep;
            for p in pairs.chunks_exact(2) {
                h.set_with(&p[0], &p[1], &limits, keep);
                if let Expiry::At(at, _) = o.expiry {
                    if at <= now && deletes {
                        h.remove(&p[0]);
                        deleted.push(p[0].clone());
                    } else {
                        h.set_field_ttl(&p[0], at);
                        updated += 1;
                    }
                }
            }
        } else if expired.is_empty() {
            h.mark_unchanged();
        }
        let emptied = h.is_empty();
        drop(h);
        for f in expired.iter().chain(&deleted) {
            propagate_hdel(ctx, &key, f);
        }
        if !expired.is_empty() {
            ctx.notify(class::HASH, "hexpired", &key);
        }
        if met {
            ctx.notify(class::HASH, "hset", &key);
            if !deleted.is_empty() {
                ctx.notify(class::HASH, "hdel", &key);
            } else if updated > 0 {
                ctx.notify(class::HASH, "hexpire", &key);
            }
            // With fields deleted for a time already past, their HDELs are the effect.
            if propagates && deleted.is_empty() {
                let mut argv = vec![Bytes::from_static(b"HSETEX")];
                argv.extend(args.iter().cloned());
                if let Expiry::At(at, false) = o.expiry
                    && let Some(pos) = argv[..o.first + 1]
                        .iter()
                        .position(|w| expiry_word(w).is_some())
                {
                    argv[pos] = Bytes::from_static(b"PXAT");
                    argv[pos + 1] = Bytes::from(at.to_string());
                }
                ctx.propagate.push((db, argv));
            }
        }
        if emptied && (!expired.is_empty() || !deleted.is_empty()) {
            ctx.notify(class::GENERIC, "del", &key);
        }
        Ok(Reply::Int(i64::from(met)))
    }
}

/// HGETDEL key FIELDS n field…: the values (nil for a missing or expired field), and the
/// fields found are deleted, the key with the last one. Propagated as HDEL.
#[derive(Debug)]
pub(crate) struct HGetDel {
    args: Vec<Bytes>,
}

impl VariantCommand<'_> for HGetDel {
    type Variant = ();

    fn parse(a: &mut ArgCursor<'_>, (): ()) -> CmdResult<Self> {
        Ok(HGetDel {
            args: crate::engine::args::owned(a.rest()),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let deletes = deletes_expired(ctx);
        let propagates = propagating(ctx);
        let key = self.args[0].clone();
        let mut h: Option<HashMut> = ctx.store.modify(db, &key, now)?;
        let borrowed = crate::engine::args::borrowed(&self.args[1..]);
        let mut a = ArgCursor::new(&borrowed);
        let fields = parse_fields(&mut a, "ERR Number of fields must be a positive integer")?;
        let mut replies = Vec::with_capacity(fields.len());
        let (mut expired, mut deleted) = (Vec::new(), Vec::new());
        let mut emptied = false;
        if let Some(hash) = h.as_mut() {
            for f in fields {
                if deletes && hash.is_field_expired(f, now) {
                    hash.remove(f);
                    expired.push(*f);
                    replies.push(Reply::Null);
                    continue;
                }
                match hash.get_live(f, now) {
                    Some(v) => {
                        replies.push(Reply::Bulk(Bytes::copy_from_slice(v)));
                        hash.remove(f);
                        deleted.push(*f);
                    }
                    None => replies.push(Reply::Null),
                }
            }
            emptied = hash.is_empty();
            if expired.is_empty()
                && deleted.is_empty()
                && let Some(h) = h.as_mut()
            {
                h.mark_unchanged();
            }
        } else {
            replies.resize(fields.len(), Reply::Null);
        }
        drop(h);
        for f in &expired {
            propagate_hdel(ctx, &key, f);
        }
        if !expired.is_empty() {
            ctx.notify(class::HASH, "hexpired", &key);
        }
        if !deleted.is_empty() {
            ctx.notify(class::HASH, "hdel", &key);
            if propagates {
                let mut argv = vec![Bytes::from_static(b"HDEL"), key.clone()];
                argv.extend(deleted.iter().map(|f| Bytes::copy_from_slice(f)));
                ctx.propagate.push((db, argv));
            }
        }
        if emptied {
            ctx.notify(class::GENERIC, "del", &key);
        }
        Ok(Reply::Array(replies))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<Bytes> {
        v.iter().map(|s| Bytes::from(s.to_string())).collect()
    }

    #[test]
    fn hsetex_options_parse_as_redis_8() {
        let ok = parse_setex(
            &crate::engine::args::borrowed(&args(&[
                "k", "FNX", "EX", "10", "FIELDS", "1", "f", "v",
            ])),
            5,
        )
        .unwrap();
        assert!(ok.fnx && !ok.fxx && ok.first == 6);
        assert_eq!(ok.expiry, Expiry::At(10_005, false));
        for (bad, want) in [
            (
                vec!["k", "EX", "1", "PX", "1", "FIELDS", "1", "f", "v"],
                "Only one of EX",
            ),
            (
                vec!["k", "KEEPTTL", "EX", "1", "FIELDS", "1", "f", "v"],
                "Only one of EX",
            ),
            (
                vec!["k", "FNX", "FXX", "FIELDS", "1", "f", "v"],
                "Only one of FXX",
            ),
            (
                vec!["k", "FOO", "FIELDS", "1", "f", "v"],
                "unknown argument: FOO",
            ),
            (
                vec!["k", "FIELDS", "0", "f", "v"],
                "invalid number of fields",
            ),
            (
                vec!["k", "FIELDS", "2", "f", "v"],
                "wrong number of arguments",
            ),
            (
                vec!["k", "FIELDS", "1", "f", "v", "w"],
                "wrong number of arguments",
            ),
            (
                vec!["k", "EX", "-1", "FIELDS", "1", "f", "v"],
                "must be >= 0",
            ),
            (
                vec!["k", "FIELDS", "1", "f", "v", "EX"],
                "wrong number of arguments",
            ),
        ] {
            let err = parse_setex(&crate::engine::args::borrowed(&args(&bad)), 0)
                .err()
                .unwrap()
                .to_string();
            assert!(err.contains(want), "{bad:?}: {err}");
        }
    }
}
