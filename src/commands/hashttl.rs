//! Hash-field expiry (Redis 7.4): HEXPIRE, HPEXPIRE, HEXPIREAT, HPEXPIREAT, HTTL, HPTTL,
//! HEXPIRETIME, HPEXPIRETIME, HPERSIST, and the lazy expiry of fields the other hash
//! commands apply.
//!
//! The data structures (the `listpackex` form, the table's expiry index) live in
//! `store::volatile`; the per-database index of hashes by earliest field expiry and the
//! reaper's share of field expiry in `store::shard`. This module is Redis's surface:
//! argument checks in Redis 7.4's order (the key's type first, then the time, the condition,
//! `FIELDS`, the count), its per-field reply codes (-2 no such field, 0 condition not met,
//! 1 set, 2 deleted because the time is already past; -1 no TTL for HTTL/HPERSIST), and
//! what it propagates: `HPEXPIREAT key <ms> [cond] FIELDS n <the fields set>` plus an HDEL
//! per field deleted, as Redis rewrites them (t_hash.c `hexpireGenericCommand`).

use bytes::Bytes;

use crate::engine::{ArgCursor, CommandSpec as C, Ctx, VariantCommand, run_as};
use crate::error::{CmdError, CmdResult};
use crate::num::parse_i64;
use crate::protocol::Reply;
use crate::services::notify::class;
use crate::store::Value;
use crate::store::access::HashMut;
use crate::store::value::HashValue;
use crate::store::volatile::MAX_FIELD_EXPIRE_MS;

/// The hash-field expiry commands, as Redis 7.4 declares them.
pub(crate) static COMMANDS: &[C] = &[
    C::new(
        "hexpire",
        -6,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<HExpire>(c, a, (Unit::Seconds, Base::Now)),
    )
    .with_effect(crate::repl::effects::Effect::Handled)
    .with_acl(&["@write", "@hash", "@fast"])
    .with_key_flags(&["RW", "update"]),
    C::new(
        "hpexpire",
        -6,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<HExpire>(c, a, (Unit::Millis, Base::Now)),
    )
    .with_effect(crate::repl::effects::Effect::Handled)
    .with_acl(&["@write", "@hash", "@fast"])
    .with_key_flags(&["RW", "update"]),
    C::new(
        "hexpireat",
        -6,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<HExpire>(c, a, (Unit::Seconds, Base::Epoch)),
    )
    .with_effect(crate::repl::effects::Effect::Handled)
    .with_acl(&["@write", "@hash", "@fast"])
    .with_key_flags(&["RW", "update"]),
    C::new(
        "hpexpireat",
        -6,
        &["write", "denyoom", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<HExpire>(c, a, (Unit::Millis, Base::Epoch)),
    )
    .with_effect(crate::repl::effects::Effect::Handled)
    .with_acl(&["@write", "@hash", "@fast"])
    .with_key_flags(&["RW", "update"]),
    C::new(
        "httl",
        -5,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<HTtl>(c, a, (Unit::Seconds, Base::Now)),
    )
    .with_acl(&["@read", "@hash", "@fast"])
    .with_key_flags(&["RO", "access"]),
    C::new(
        "hpttl",
        -5,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<HTtl>(c, a, (Unit::Millis, Base::Now)),
    )
    .with_acl(&["@read", "@hash", "@fast"])
    .with_key_flags(&["RO", "access"]),
    C::new(
        "hexpiretime",
        -5,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<HTtl>(c, a, (Unit::Seconds, Base::Epoch)),
    )
    .with_acl(&["@read", "@hash", "@fast"])
    .with_key_flags(&["RO", "access"]),
    C::new(
        "hpexpiretime",
        -5,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<HTtl>(c, a, (Unit::Millis, Base::Epoch)),
    )
    .with_acl(&["@read", "@hash", "@fast"])
    .with_key_flags(&["RO", "access"]),
    C::new(
        "hpersist",
        -5,
        &["write", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<HPersist>(c, a, ()),
    )
    .with_acl(&["@write", "@hash", "@fast"])
    .with_key_flags(&["RW", "update"]),
];

/// The unit of a time argument or reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    /// Seconds (HEXPIRE, HTTL…).
    Seconds,
    /// Milliseconds (HPEXPIRE, HPTTL…).
    Millis,
}

/// What a time is relative to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Base {
    /// The command's `now` (HEXPIRE, HTTL).
    Now,
    /// The Unix epoch (HEXPIREAT, HEXPIRETIME).
    Epoch,
}

/// HEXPIRE's condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cond {
    None,
    Nx,
    Xx,
    Gt,
    Lt,
}

impl Cond {
    fn word(self) -> Option<&'static [u8]> {
        match self {
            Cond::None => None,
            Cond::Nx => Some(b"NX"),
            Cond::Xx => Some(b"XX"),
            Cond::Gt => Some(b"GT"),
            Cond::Lt => Some(b"LT"),
        }
    }
}

/// Whether this command's effects go to replicas (the rule of `repl::effects::note`).
pub(super) fn propagating(ctx: &Ctx<'_>) -> bool {
    ctx.shared.repl.propagating() && !ctx.client.master_link
}

/// Notes `HDEL key field` for replicas (a field deleted by expiry, Redis's
/// `propagateHashFieldDeletion`).
pub(super) fn propagate_hdel(ctx: &mut Ctx<'_>, key: &[u8], field: &[u8]) {
    if propagating(ctx) {
        let db = ctx.db();
        ctx.propagate.push((
            db,
            vec![
                Bytes::from_static(b"HDEL"),
                Bytes::copy_from_slice(key),
                Bytes::copy_from_slice(field),
            ],
        ));
    }
}

/// Whether the store deletes expired data itself (not on a replica, whose master's HDELs
/// do it; Redis's `server.masterhost` rule).
pub(super) fn deletes_expired(ctx: &Ctx<'_>) -> bool {
    !ctx.shared.keyspace.deletions().is_replica() && !ctx.client.master_link
}

/// Which fields a lazy expiry looks at.
pub(crate) enum Which<'f> {
    /// The fields a command names (HGET, HMGET, HEXISTS…: Redis's `HFE_LAZY_EXPIRE`).
    Named(&'f [&'f [u8]]),
    /// Every expired field (HRANDFIELD's `hashTypeExpireIfNeeded`).
    All,
}

/// What a lazy expiry did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Expired {
    /// Fields deleted.
    pub fields: usize,
    /// The hash went with its last field.
    pub hash_deleted: bool,
}

/// Redis's lazy expiry of hash fields: deletes the fields of `which` that are stored but
/// expired at the command's `now`, each propagated as HDEL; a hash left empty is deleted.
/// The caller emits `hexpired` (and `del`) where Redis does ([`notify_expired`]). A key that
/// is missing, not a hash, or has no expired field costs one lookup and changes nothing.
pub(crate) fn lazy_expire(ctx: &mut Ctx<'_>, key: &[u8], which: Which<'_>) -> CmdResult<Expired> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    if !deletes_expired(ctx) {
        return Ok(Expired::default());
    }
    let due = match ctx.store.lookup_untouched(db, key, now) {
        Some(e) => matches!(&e.value, Value::Hash(h) if h.has_expired_fields(now)),
        None => false,
    };
    if !due {
        return Ok(Expired::default());
    }
    let Some(mut h): Option<HashMut> = ctx.store.modify(db, key, now)? else {
        return Ok(Expired::default());
    };
    let fields: Vec<Bytes> = match which {
        Which::Named(names) => names
            .iter()
            .filter(|f| h.is_field_expired(f, now))
            .map(|f| Bytes::copy_from_slice(f))
            .collect(),
        Which::All => h.expired_fields(now, usize::MAX),
    };
    let mut removed = Vec::with_capacity(fields.len());
    for f in fields {
        if h.remove(&f) {
            removed.push(f);
        }
    }
    if removed.is_empty() {
        h.mark_unchanged();
    }
    let hash_deleted = h.is_empty();
    drop(h);
    for f in &removed {
        propagate_hdel(ctx, key, f);
    }
    Ok(Expired {
        fields: removed.len(),
        hash_deleted: hash_deleted && !removed.is_empty(),
    })
}

/// Emits what Redis emits after a lazy field expiry: `hexpired`, then `del` if the hash went.
pub(crate) fn notify_expired(ctx: &mut Ctx<'_>, key: &[u8], e: Expired) {
    if e.fields > 0 {
        ctx.notify(class::HASH, "hexpired", key);
        if e.hash_deleted {
            ctx.notify(class::GENERIC, "del", key);
        }
    }
}

/// The `FIELDS numfields field…` block at `a`, checked as Redis does (after the other
/// arguments). `count_error` is the command's text for a bad count.
pub(super) fn parse_fields<'a>(
    a: &mut ArgCursor<'a>,
    count_error: &'static str,
) -> CmdResult<&'a [&'a [u8]]> {
    if !a.next()?.eq_ignore_ascii_case(b"FIELDS") {
        return Err(CmdError::msg(
            "ERR Mandatory argument FIELDS is missing or not at the right position",
        ));
    }
    let n = match parse_i64(a.next()?) {
        Some(n) if n >= 1 => n,
        _ => return Err(CmdError::msg(count_error)),
    };
    let fields = a.rest();
    if usize::try_from(n).ok() != Some(fields.len()) {
        return Err(CmdError::msg(
            "ERR The `numfields` parameter must match the number of arguments",
        ));
    }
    Ok(fields)
}

/// HEXPIRE / HPEXPIRE / HEXPIREAT / HPEXPIREAT key time [NX|XX|GT|LT] FIELDS n field…
#[derive(Debug)]
pub(crate) struct HExpire {
    unit: Unit,
    base: Base,
    name: &'static str,
    args: Vec<Bytes>,
}

/// Per-field results of HEXPIRE (Redis's `SetExRes`).
const NO_FIELD: i64 = -2;
const NOT_MET: i64 = 0;
const SET: i64 = 1;
const DELETED: i64 = 2;

impl VariantCommand<'_> for HExpire {
    type Variant = (Unit, Base);

    fn parse(a: &mut ArgCursor<'_>, (unit, base): (Unit, Base)) -> CmdResult<Self> {
        let name = match (unit, base) {
            (Unit::Seconds, Base::Now) => "hexpire",
            (Unit::Millis, Base::Now) => "hpexpire",
            (Unit::Seconds, Base::Epoch) => "hexpireat",
            (Unit::Millis, Base::Epoch) => "hpexpireat",
        };
        // Checked in `apply`, after the key's type, as Redis does.
        Ok(HExpire {
            unit,
            base,
            name,
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
        let t = parse_i64(a.next()?).ok_or(CmdError::NotInteger)?;
        if t < 0 {
            return Err(CmdError::msg("ERR invalid expire time, must be >= 0"));
        }
        let max = MAX_FIELD_EXPIRE_MS as i64;
        let mut ms = t;
        if self.unit == Unit::Seconds {
            if t > max / 1000 {
                return Err(CmdError::InvalidExpire(self.name));
            }
            ms = t * 1000;
        }
        let basetime = match self.base {
            Base::Now => now as i64,
            Base::Epoch => 0,
        };
        if ms > max - basetime {
            return Err(CmdError::InvalidExpire(self.name));
        }
        let at = (ms + basetime) as u64;
        let cond = match a.peek() {
            Some(w) if w.eq_ignore_ascii_case(b"NX") => Cond::Nx,
            Some(w) if w.eq_ignore_ascii_case(b"XX") => Cond::Xx,
            Some(w) if w.eq_ignore_ascii_case(b"GT") => Cond::Gt,
            Some(w) if w.eq_ignore_ascii_case(b"LT") => Cond::Lt,
            _ => Cond::None,
        };
        if cond != Cond::None {
            a.next()?;
        }
        let fields = parse_fields(&mut a, "ERR Parameter `numFields` should be greater than 0")?;
        let Some(hash) = h.as_mut() else {
            return Ok(Reply::Array(vec![Reply::Int(NO_FIELD); fields.len()]));
        };
        // Redis converts the hash to its TTL-capable form whatever the fields named.
        if !hash.is_volatile() {
            hash.make_volatile();
        }
        let past = at <= now && deletes;
        let mut replies = Vec::with_capacity(fields.len());
        let (mut set, mut deleted) = (Vec::new(), Vec::new());
        for f in fields {
            let code = if hash.get(f).is_none() {
                NO_FIELD
            } else {
                let prev = hash.field_ttl(f);
                let met = match (prev, cond) {
                    (None, Cond::Xx | Cond::Gt) => false,
                    (None, _) => true,
                    (Some(_), Cond::Nx) => false,
                    (Some(p), Cond::Gt) => p < at,
                    (Some(p), Cond::Lt) => p > at,
                    (Some(_), _) => true,
                };
                if !met {
                    NOT_MET
                } else if past {
                    hash.remove(f);
                    deleted.push(*f);
                    DELETED
                } else {
                    hash.set_field_ttl(f, at);
                    set.push(*f);
                    SET
                }
            };
            replies.push(Reply::Int(code));
        }
        let emptied = hash.is_empty();
        if set.is_empty()
            && deleted.is_empty()
            && let Some(h) = h.as_mut()
        {
            h.mark_unchanged();
        }
        drop(h);
        for f in &deleted {
            propagate_hdel(ctx, &key, f);
        }
        if !set.is_empty() || !deleted.is_empty() {
            if deleted.is_empty() {
                ctx.notify(class::HASH, "hexpire", &key);
            } else {
                ctx.notify(class::HASH, "hdel", &key);
                if emptied {
                    ctx.notify(class::GENERIC, "del", &key);
                }
            }
        }
        if !set.is_empty() && propagates {
            let mut argv = vec![
                Bytes::from_static(b"HPEXPIREAT"),
                key.clone(),
                Bytes::from(at.to_string()),
            ];
            if let Some(w) = cond.word() {
                argv.push(Bytes::from_static(w));
            }
            argv.push(Bytes::from_static(b"FIELDS"));
            argv.push(Bytes::from(set.len().to_string()));
            argv.extend(set.iter().map(|f| Bytes::copy_from_slice(f)));
            ctx.propagate.push((db, argv));
        }
        Ok(Reply::Array(replies))
    }
}

/// HTTL / HPTTL / HEXPIRETIME / HPEXPIRETIME key FIELDS n field…
#[derive(Debug)]
pub(crate) struct HTtl {
    unit: Unit,
    base: Base,
    args: Vec<Bytes>,
}

impl VariantCommand<'_> for HTtl {
    type Variant = (Unit, Base);

    fn parse(a: &mut ArgCursor<'_>, (unit, base): (Unit, Base)) -> CmdResult<Self> {
        Ok(HTtl {
            unit,
            base,
            args: crate::engine::args::owned(a.rest()),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let h = match ctx.store.read_value(db, &self.args[0], now) {
            None => None,
            Some(Value::Hash(h)) => Some(&**h),
            Some(_) => return Err(CmdError::WrongType),
        };
        let borrowed = crate::engine::args::borrowed(&self.args[1..]);
        let mut a = ArgCursor::new(&borrowed);
        let fields = parse_fields(&mut a, "ERR Number of fields must be a positive integer")?;
        let base = match self.base {
            Base::Now => now,
            Base::Epoch => 0,
        };
        let reply = |h: Option<&HashValue>, f: &[u8]| -> i64 {
            let Some(h) = h else {
                return NO_FIELD;
            };
            if h.get(f).is_none() {
                return NO_FIELD;
            }
            let Some(at) = h.field_ttl(f) else {
                return -1;
            };
            // Redis 7.4 reads a listpackex field expiring this very millisecond as gone,
            // a table's as still there.
            let gone = if h.is_listpack() { at <= now } else { at < now };
            if gone {
                return NO_FIELD;
            }
            let left = at.saturating_sub(base);
            match self.unit {
                Unit::Seconds => left.div_ceil(1000) as i64,
                Unit::Millis => left as i64,
            }
        };
        Ok(Reply::Array(
            fields.iter().map(|f| Reply::Int(reply(h, f))).collect(),
        ))
    }
}

/// HPERSIST key FIELDS n field…
#[derive(Debug)]
pub(crate) struct HPersist {
    args: Vec<Bytes>,
}

impl VariantCommand<'_> for HPersist {
    type Variant = ();

    fn parse(a: &mut ArgCursor<'_>, (): ()) -> CmdResult<Self> {
        Ok(HPersist {
            args: crate::engine::args::owned(a.rest()),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let key = self.args[0].clone();
        let mut h: Option<HashMut> = ctx.store.modify(db, &key, now)?;
        let borrowed = crate::engine::args::borrowed(&self.args[1..]);
        let mut a = ArgCursor::new(&borrowed);
        let fields = parse_fields(&mut a, "ERR Number of fields must be a positive integer")?;
        let Some(hash) = h.as_mut() else {
            return Ok(Reply::Array(vec![Reply::Int(NO_FIELD); fields.len()]));
        };
        let mut changed = false;
        let mut replies = Vec::with_capacity(fields.len());
        for f in fields {
            let code = if hash.get(f).is_none() {
                NO_FIELD
            } else {
                match hash.field_ttl(f) {
                    None => -1,
                    Some(at) if at < now => NO_FIELD,
                    Some(_) => {
                        hash.persist_field(f);
                        changed = true;
                        1
                    }
                }
            };
            replies.push(Reply::Int(code));
        }
        if !changed && let Some(h) = h.as_mut() {
            h.mark_unchanged();
        }
        drop(h);
        if changed {
            ctx.notify(class::HASH, "hpersist", &key);
        }
        Ok(Reply::Array(replies))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_block_is_checked_as_redis_does() {
        let args = |v: &[&str]| {
            v.iter()
                .map(|s| Bytes::from(s.to_string()))
                .collect::<Vec<_>>()
        };
        let e = "ERR x";
        let ok = args(&["FIELDS", "2", "a", "b"]);
        assert_eq!(
            parse_fields(&mut ArgCursor::new(&crate::engine::args::borrowed(&ok)), e)
                .unwrap()
                .len(),
            2
        );
        for (bad, want) in [
            (args(&["FIELD", "1", "a"]), "Mandatory argument FIELDS"),
            (args(&["FIELDS", "0", "a"]), "ERR x"),
            (args(&["FIELDS", "x", "a"]), "ERR x"),
            (args(&["FIELDS", "2", "a"]), "must match"),
        ] {
            let err = parse_fields(&mut ArgCursor::new(&crate::engine::args::borrowed(&bad)), e)
                .unwrap_err();
            assert!(err.to_string().contains(want), "{err}");
        }
    }
}
