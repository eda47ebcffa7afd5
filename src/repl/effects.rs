//! What a command propagates: its effects, with absolute times.
//!
//! Most writes are deterministic given the data, and propagate as they were sent. The
//! others propagate what they did, as Redis 7 does: a relative TTL (EXPIRE, SET EX,
//! SETEX, GETEX…) becomes the key's state with its absolute expiry, CL.THROTTLE the value
//! it stored (`SET key value PXAT t`) or DEL, SPOP and the blocking pops the resulting
//! key, GETDEL a DEL. "The key's state" is `SET key value [PXAT t]` for a string, `DEL` for
//! a missing key, and `RESTORE key t payload REPLACE ABSTTL` for other types: the replica
//! ends with exactly the master's key whatever the command computed from its clock or its
//! random numbers. Scripts and EXEC are not propagated themselves: each write they run
//! is noted here, and `cmd::execute` wraps them in MULTI/EXEC.

use bytes::Bytes;

use crate::cmd::{CmdFlags, CommandSpec, Ctx};
use crate::protocol::Reply;

/// Notes in `ctx.propagate` what `spec` (run with `args`, answering `reply`) must
/// propagate. Called by every path that runs a command (plain, EXEC, scripts), right
/// after the handler, with its locks held.
pub fn note(ctx: &mut Ctx<'_>, spec: &CommandSpec, args: &[Bytes], reply: &Reply) {
    if !ctx.shared.repl.active() || ctx.client.master_link || reply.is_error() {
        return;
    }
    if !spec.has(CmdFlags::WRITE) {
        return;
    }
    let db = ctx.client.db;
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let lower = spec.name;
    match lower {
        "expire" | "pexpire" | "expireat" | "pexpireat" => {
            if matches!(reply, Reply::Int(1)) {
                state(ctx, db, &arg(1));
            }
        }
        "set" if has_relative_expiry(args) => state(ctx, db, &arg(1)),
        "setex" | "psetex" | "incrbyfloat" | "restore" | "cl.throttle" | "spop" => {
            state(ctx, db, &arg(1))
        }
        "getex" if args.len() > 2 => state(ctx, db, &arg(1)),
        "getex" => {}
        "getdel" => {
            if !matches!(reply, Reply::Null) {
                ctx.propagate
                    .push((db, vec![Bytes::from_static(b"DEL"), arg(1)]));
            }
        }
        "hincrbyfloat" => state(ctx, db, &arg(1)),
        "blpop" | "brpop" | "bzpopmin" | "bzpopmax" | "blmpop" | "bzmpop" => {
            // The reply names the key it popped from; nil: nothing happened.
            if let Reply::Array(items) = reply
                && let Some(key) = items.first().and_then(reply_bytes)
            {
                state(ctx, db, &key);
            }
        }
        "blmove" | "brpoplpush" => {
            if !matches!(reply, Reply::Null | Reply::NullArray) {
                state(ctx, db, &arg(1));
                state(ctx, db, &arg(2));
            }
        }
        "exec" | "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => {}
        _ => ctx.propagate.push((db, args.to_vec())),
    }
}

/// Notes the state of `key` after a blocked client was served (see `cmd::blocking`).
pub fn note_served(ctx: &mut Ctx<'_>, db: usize, keys: &[&Bytes]) {
    if !ctx.shared.repl.active() {
        return;
    }
    for k in keys {
        state(ctx, db, k);
    }
}

fn reply_bytes(r: &Reply) -> Option<Bytes> {
    match r {
        Reply::Bulk(b) => Some(b.clone()),
        _ => None,
    }
}

/// SET with an expiry option: EX, PX, EXAT, or PXAT too (one already past deletes the key
/// on the master, which must reach the replica as DEL).
fn has_relative_expiry(args: &[Bytes]) -> bool {
    args.iter().skip(3).any(|a| {
        a.eq_ignore_ascii_case(b"ex")
            || a.eq_ignore_ascii_case(b"px")
            || a.eq_ignore_ascii_case(b"exat")
            || a.eq_ignore_ascii_case(b"pxat")
    })
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
