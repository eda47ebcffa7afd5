//! What a command propagates: its effects, with absolute times.
//!
//! Most writes are deterministic given the data, and propagate as they were sent. The
//! others propagate what they did, as Redis 7 does: EXPIRE and its forms become
//! `PEXPIREAT key <deadline>` (DEL when the time was past), a relative TTL given with a value
//! (SET EX, SETEX, GETEX…) the key's state with its absolute expiry, CL.THROTTLE the value
//! it stored (`SET key value PXAT t`) or DEL, SPOP and the blocking pops the resulting
//! key, GETDEL a DEL. "The key's state" is `SET key value [PXAT t]` for a string, `DEL` for
//! a missing key, and `RESTORE key t payload REPLACE ABSTTL` for other types: the replica
//! ends with exactly the master's key whatever the command computed from its clock or its
//! random numbers. Where Redis propagates a cheaper equivalent that is exact on any copy of
//! the data, so does sluice: SPOP as SREM of the members popped, INCRBYFLOAT as `SET …
//! KEEPTTL`, HINCRBYFLOAT as HSET, a blocking pop as its non-blocking form. Scripts and EXEC
//! are not propagated themselves: each write they run is noted here, and `engine::call` wraps
//! them in MULTI/EXEC. Each table entry carries its rule ([`Effect`], given once when the
//! table is built).

use bytes::Bytes;

use crate::engine::{CmdFlags, CommandSpec, Ctx};
use crate::protocol::Reply;

/// How a write command propagates, declared with its table row
/// ([`CommandSpec::with_effect`](crate::engine::CommandSpec::with_effect)), so that nothing
/// compares command names per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Effect {
    /// Propagated as it was sent (deterministic given the data).
    #[default]
    Verbatim,
    /// Not propagated itself (EXEC, scripts, functions): the writes it runs are noted one by
    /// one, and reads propagate nothing.
    Inner,
    /// The state of its key (`args[1]`): relative TTLs, CL.THROTTLE, RESTORE.
    KeyState,
    /// EXPIRE and its forms, when the TTL was applied (reply 1): `PEXPIREAT key <deadline>`,
    /// or DEL when a time already past deleted the key, as Redis propagates them.
    ExpireIfSet,
    /// SET: verbatim, or its key's state when it carries an expiry option.
    Set,
    /// GETEX: the key's state when it carries an option.
    GetEx,
    /// GETDEL: DEL when the key existed.
    GetDel,
    /// INCRBYFLOAT: `SET key <new value> KEEPTTL`, as Redis propagates it.
    IncrByFloat,
    /// HINCRBYFLOAT: `HSET key field <new value>`, as Redis propagates it.
    HIncrByFloat,
    /// SPOP: `SREM key <the members popped>`.
    SPop,
    /// BLPOP / BRPOP: the non-blocking pop (`LPOP` / `RPOP key`).
    BPop(Side),
    /// BZPOPMIN / BZPOPMAX: `ZPOPMIN` / `ZPOPMAX key`.
    BZPop(Side),
    /// BLMPOP / BZMPOP: the pop of as many elements as it returned, from the key it named.
    BMPop {
        /// BZMPOP (ZPOPMIN/ZPOPMAX) rather than BLMPOP (LPOP/RPOP).
        zset: bool,
    },
    /// BLMOVE: `LMOVE` with the same arguments, less the timeout.
    BLMove,
    /// BRPOPLPUSH: `RPOPLPUSH source destination`.
    BRPopLPush,
    /// The handler notes its own effects in `Ctx::propagate` (HEXPIRE and its forms:
    /// `HPEXPIREAT` of the fields it set, HDEL of those it deleted).
    Handled,
}

/// Which end a pop takes from (LEFT / MIN, RIGHT / MAX).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The head of a list, the lowest score of a sorted set.
    First,
    /// The tail of a list, the highest score of a sorted set.
    Last,
}

/// Notes in `ctx.propagate` what `spec` (run with `args`, answering `reply`) must
/// propagate, by its entry's `effect`. Called by `engine::call` for every path that runs a
/// command (plain, EXEC, scripts), right after the handler, with its locks held.
#[inline]
pub(crate) fn note(
    ctx: &mut Ctx<'_>,
    spec: &CommandSpec,
    effect: Effect,
    args: &[&[u8]],
    reply: &Reply,
) {
    // Inline: every command passes here, and without replicas or an AOF nothing propagates.
    if ctx.shared.repl.propagating() {
        note_effects(ctx, spec, effect, args, reply);
    }
}

#[inline(never)]
fn note_effects(
    ctx: &mut Ctx<'_>,
    spec: &CommandSpec,
    effect: Effect,
    args: &[&[u8]],
    reply: &Reply,
) {
    if ctx.client.master_link || reply.is_error() {
        return;
    }
    if !spec.has(CmdFlags::WRITE) {
        return;
    }
    let db = ctx.client.db;
    let arg = |i: usize| {
        args.get(i)
            .map(|a| Bytes::copy_from_slice(a))
            .unwrap_or_default()
    };
    let key = arg(1);
    let argv: Vec<Bytes> = match effect {
        Effect::Inner | Effect::Handled => return,
        Effect::Verbatim => crate::protocol::request::owned_args(args),
        Effect::KeyState => return state(ctx, db, &key),
        Effect::ExpireIfSet => {
            if matches!(reply, Reply::Int(1)) {
                expiry(ctx, db, &key);
            }
            return;
        }
        Effect::Set if has_expiry_option(args) => return state(ctx, db, &key),
        Effect::Set => crate::protocol::request::owned_args(args),
        Effect::GetEx if args.len() > 2 => return state(ctx, db, &key),
        Effect::GetEx => return,
        Effect::GetDel if matches!(reply, Reply::Null) => return,
        Effect::GetDel => vec![Bytes::from_static(b"DEL"), key],
        Effect::IncrByFloat => match reply {
            Reply::Bulk(v) => vec![
                Bytes::from_static(b"SET"),
                key,
                v.clone(),
                Bytes::from_static(b"KEEPTTL"),
            ],
            _ => return state(ctx, db, &key),
        },
        // A field with a TTL keeps it on the replica too: Redis 8 propagates
        // `HSETEX key KEEPTTL FIELDS 1 field value` for that reason.
        Effect::HIncrByFloat if field_has_ttl(ctx, db, &key, &arg(2)) => match reply {
            Reply::Bulk(v) => vec![
                Bytes::from_static(b"HSETEX"),
                key,
                Bytes::from_static(b"KEEPTTL"),
                Bytes::from_static(b"FIELDS"),
                Bytes::from_static(b"1"),
                arg(2),
                v.clone(),
            ],
            _ => return state(ctx, db, &key),
        },
        Effect::HIncrByFloat => match reply {
            Reply::Bulk(v) => vec![Bytes::from_static(b"HSET"), key, arg(2), v.clone()],
            _ => return state(ctx, db, &key),
        },
        Effect::SPop => {
            let mut argv = vec![Bytes::from_static(b"SREM"), key];
            match reply {
                Reply::Bulk(m) => argv.push(m.clone()),
                Reply::Array(ms) | Reply::Set(ms) => argv.extend(ms.iter().filter_map(bulk)),
                _ => {}
            }
            if argv.len() == 2 {
                return;
            }
            argv
        }
        Effect::BPop(side) => match popped_key(reply) {
            Some(k) => vec![Bytes::from_static(list_pop(side)), k],
            None => return,
        },
        Effect::BZPop(side) => match popped_key(reply) {
            Some(k) => vec![Bytes::from_static(zset_pop(side)), k],
            None => return,
        },
        Effect::BMPop { zset } => {
            // BLMPOP/BZMPOP timeout numkeys key… LEFT|RIGHT|MIN|MAX [COUNT n]
            let side = args
                .get(2)
                .and_then(|n| std::str::from_utf8(n).ok()?.parse::<usize>().ok())
                .and_then(|numkeys| args.get(3usize.checked_add(numkeys)?))
                .map(|w| {
                    if w.eq_ignore_ascii_case(b"left") || w.eq_ignore_ascii_case(b"min") {
                        Side::First
                    } else {
                        Side::Last
                    }
                });
            match (side, mpop_result(reply)) {
                (Some(side), Some((k, n))) => {
                    let name = if zset { zset_pop(side) } else { list_pop(side) };
                    vec![Bytes::from_static(name), k, n.to_string().into()]
                }
                _ => return,
            }
        }
        Effect::BLMove if matches!(reply, Reply::Null | Reply::NullArray) => return,
        Effect::BLMove => {
            let mut argv = vec![Bytes::from_static(b"LMOVE")];
            argv.extend(
                args.iter()
                    .skip(1)
                    .take(4)
                    .map(|a| Bytes::copy_from_slice(a)),
            );
            argv
        }
        Effect::BRPopLPush if matches!(reply, Reply::Null | Reply::NullArray) => return,
        Effect::BRPopLPush => vec![Bytes::from_static(b"RPOPLPUSH"), key, arg(2)],
    };
    ctx.propagate.push((db, argv));
}

/// Notes the effect of a blocked client served later (see `services::blocking`): the
/// non-blocking form of its pop, `argv`.
pub(crate) fn note_served(ctx: &mut Ctx<'_>, db: usize, argv: Vec<Bytes>) {
    if ctx.shared.repl.propagating() {
        ctx.propagate.push((db, argv));
    }
}

/// LPOP or RPOP.
pub(crate) fn list_pop(side: Side) -> &'static [u8] {
    match side {
        Side::First => b"LPOP",
        Side::Last => b"RPOP",
    }
}

/// ZPOPMIN or ZPOPMAX.
pub(crate) fn zset_pop(side: Side) -> &'static [u8] {
    match side {
        Side::First => b"ZPOPMIN",
        Side::Last => b"ZPOPMAX",
    }
}

fn bulk(r: &Reply) -> Option<Bytes> {
    match r {
        Reply::Bulk(b) => Some(b.clone()),
        _ => None,
    }
}

/// The key a pop's reply names first (`[key, …]`); None for nil.
fn popped_key(reply: &Reply) -> Option<Bytes> {
    match reply {
        Reply::Array(items) => items.first().and_then(bulk),
        _ => None,
    }
}

/// An MPOP reply `[key, [elements]]`: the key and how many elements it popped.
pub(crate) fn mpop_result(reply: &Reply) -> Option<(Bytes, usize)> {
    let Reply::Array(items) = reply else {
        return None;
    };
    let key = items.first().and_then(bulk)?;
    let n = popped_len(items.get(1)?);
    (n > 0).then_some((key, n))
}

fn popped_len(r: &Reply) -> usize {
    match r {
        Reply::Array(v) => v.len(),
        Reply::Map(v) => v.len(),
        _ => 0,
    }
}

/// SET with an expiry option: EX, PX, EXAT, or PXAT too (one already past deletes the key
/// on the master, which must reach the replica as DEL).
fn has_expiry_option(args: &[&[u8]]) -> bool {
    args.iter().skip(3).any(|a| {
        a.eq_ignore_ascii_case(b"ex")
            || a.eq_ignore_ascii_case(b"px")
            || a.eq_ignore_ascii_case(b"exat")
            || a.eq_ignore_ascii_case(b"pxat")
    })
}

/// Whether `field` of the hash at `key` has a TTL.
fn field_has_ttl(ctx: &mut Ctx<'_>, db: usize, key: &[u8], field: &[u8]) -> bool {
    let now = ctx.now_ms;
    ctx.store.lookup_untouched(db, key, now).is_some_and(
        |e| matches!(&e.value, crate::store::Value::Hash(h) if h.field_ttl(field).is_some()),
    )
}

/// Notes an expiry just set on `key` as Redis 7.0 propagates it: `PEXPIREAT key <the
/// absolute deadline>` (exact on any copy of the data, and as long as the command whatever
/// the key holds: a sliding-window log's EXPIRE after each ZADD would otherwise carry the
/// whole sorted set), DEL if the time was already past and the key is gone.
fn expiry(ctx: &mut Ctx<'_>, db: usize, key: &Bytes) {
    let now = ctx.now_ms;
    let at = match ctx.store.lookup_untouched(db, key, now) {
        None => None,
        Some(e) => match e.expire_at() {
            Some(at) => Some(at),
            // EXPIRE answered 1 without a deadline on the key: send its state.
            None => return state(ctx, db, key),
        },
    };
    let effect = match at {
        None => vec![Bytes::from_static(b"DEL"), key.clone()],
        Some(at) => vec![
            Bytes::from_static(b"PEXPIREAT"),
            key.clone(),
            at.to_string().into(),
        ],
    };
    ctx.propagate.push((db, effect));
}

/// Notes the key's state: SET with PXAT, DEL, or RESTORE … ABSTTL.
fn state(ctx: &mut Ctx<'_>, db: usize, key: &Bytes) {
    let now = ctx.now_ms;
    let effect = match ctx.store.lookup_untouched(db, key, now) {
        None => vec![Bytes::from_static(b"DEL"), key.clone()],
        Some(e) => {
            let at = e.expire_at();
            match e.value.as_bytes() {
                Ok(v) => {
                    let mut argv = vec![Bytes::from_static(b"SET"), key.clone(), v];
                    if let Some(at) = at {
                        argv.push(Bytes::from_static(b"PXAT"));
                        argv.push(at.to_string().into());
                    }
                    argv
                }
                Err(_) => vec![
                    Bytes::from_static(b"RESTORE"),
                    key.clone(),
                    at.unwrap_or(0).to_string().into(),
                    crate::rdb::dump(&e.value).into(),
                    Bytes::from_static(b"REPLACE"),
                    Bytes::from_static(b"ABSTTL"),
                ],
            }
        }
    };
    ctx.propagate.push((db, effect));
}
