//! The blocking commands: BLPOP, BRPOP, BRPOPLPUSH, BLMOVE, BLMPOP, BZPOPMIN, BZPOPMAX,
//! BZMPOP, and CLIENT UNBLOCK (its row is in CLIENT's table, `commands::server`).
//!
//! A blocking command first runs as its non-blocking form under its keys' locks (LMPOP,
//! LMOVE, ZMPOP from their families). If that finds nothing and the caller may block (a
//! client outside MULTI; never EXEC, a script or `engine::execute` itself), it registers
//! what it waits to do, an [`Op`], with `services::blocking` (the registry and the serving
//! of clients whose keys became ready), which reruns it through the
//! [`Rerun`](blocking::Rerun) trait when a key is ready. XREAD/XREADGROUP's BLOCK
//! (`commands::stream::read`) registers through [`block_on_streams`].

use bytes::Bytes;

use crate::commands::list::{End, LMPop, LMove};
use crate::commands::zsetops::ZMPop;
use crate::engine::{
    ArgCursor, Command, CommandSpec as C, Ctx, KeySpec, KeySpecDoc, VariantCommand, run_as,
};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::services::blocking::{self, Rerun, Wants};

const LIST_ACL: &[&str] = &["@write", "@list", "@slow", "@blocking"];
const ZSET_ACL: &[&str] = &["@write", "@sortedset", "@fast", "@blocking"];
const MOVE_SPECS: &[KeySpecDoc] = &[
    KeySpecDoc::range(&["RW", "access", "delete"], 1, 0),
    KeySpecDoc::range(&["RW", "insert"], 2, 0),
];

/// The blocking commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[C] = &[
    C::new("blpop", -3, &["write", "noscript", "blocking"], C::keys(1, -2, 1), |c, a| run_as::<Block>(c, a, Blocking::Blpop)).with_effect(crate::repl::effects::Effect::BPop(crate::repl::effects::Side::First)).with_acl(LIST_ACL).with_key_flags(&["RW", "access", "delete"]),
    C::new("brpop", -3, &["write", "noscript", "blocking"], C::keys(1, -2, 1), |c, a| run_as::<Block>(c, a, Blocking::Brpop)).with_effect(crate::repl::effects::Effect::BPop(crate::repl::effects::Side::Last)).with_acl(LIST_ACL).with_key_flags(&["RW", "access", "delete"]),
    C::new("brpoplpush", 4, &["write", "denyoom", "noscript", "blocking"], C::keys(1, 2, 1), |c, a| run_as::<Block>(c, a, Blocking::Brpoplpush)).with_effect(crate::repl::effects::Effect::BRPopLPush).with_acl(LIST_ACL).with_key_specs(MOVE_SPECS),
    C::new("blmove", 6, &["write", "denyoom", "noscript", "blocking"], C::keys(1, 2, 1), |c, a| run_as::<Block>(c, a, Blocking::Blmove)).with_effect(crate::repl::effects::Effect::BLMove).with_acl(LIST_ACL).with_key_specs(MOVE_SPECS),
    C::new("blmpop", -5, &["write", "blocking", "movablekeys"], KeySpec::Keynum { begin: 2, keynumidx: 0, firstkey: 1, step: 1, flags: &["RW", "access", "delete"], notes: None }, |c, a| run_as::<Block>(c, a, Blocking::Blmpop)).with_effect(crate::repl::effects::Effect::BMPop { zset: false }).with_acl(LIST_ACL),
    C::new("bzpopmin", -3, &["write", "noscript", "fast", "blocking"], C::keys(1, -2, 1), |c, a| run_as::<Block>(c, a, Blocking::Bzpopmin)).with_effect(crate::repl::effects::Effect::BZPop(crate::repl::effects::Side::First)).with_acl(ZSET_ACL).with_key_flags(&["RW", "access", "delete"]),
    C::new("bzpopmax", -3, &["write", "noscript", "fast", "blocking"], C::keys(1, -2, 1), |c, a| run_as::<Block>(c, a, Blocking::Bzpopmax)).with_effect(crate::repl::effects::Effect::BZPop(crate::repl::effects::Side::Last)).with_acl(ZSET_ACL).with_key_flags(&["RW", "access", "delete"]),
    C::new("bzmpop", -5, &["write", "blocking", "movablekeys"], KeySpec::Keynum { begin: 2, keynumidx: 0, firstkey: 1, step: 1, flags: &["RW", "access", "delete"], notes: None }, |c, a| run_as::<Block>(c, a, Blocking::Bzmpop)).with_effect(crate::repl::effects::Effect::BMPop { zset: true }).with_acl(&["@write", "@sortedset", "@slow", "@blocking"]),
];

/// Which blocking command a [`Block`] is (the table names it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Blocking {
    /// BLPOP key [key …] timeout
    Blpop,
    /// BRPOP key [key …] timeout
    Brpop,
    /// BRPOPLPUSH source destination timeout
    Brpoplpush,
    /// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout
    Blmove,
    /// BLMPOP timeout numkeys key [key …] LEFT|RIGHT [COUNT count]
    Blmpop,
    /// BZPOPMIN key [key …] timeout
    Bzpopmin,
    /// BZPOPMAX key [key …] timeout
    Bzpopmax,
    /// BZMPOP timeout numkeys key [key …] MIN|MAX [COUNT count]
    Bzmpop,
}

/// What a blocked client waits to do.
#[derive(Debug)]
enum Op {
    /// BLPOP / BRPOP: one element, replied `[key, element]`.
    Pop(LMPop),
    /// BLMPOP: `[key, [elements]]`.
    MPop(LMPop),
    /// BLMOVE / BRPOPLPUSH.
    Move(LMove),
    /// BZPOPMIN / BZPOPMAX: `[key, member, score]`.
    ZPop(ZMPop),
    /// BZMPOP: `[key, [[member, score], …]]`.
    ZMPop(ZMPop),
    /// XREAD / XREADGROUP with BLOCK: `[[key, entries]]` (a map in RESP3).
    Stream(crate::commands::stream::read::Wait),
}

impl Rerun for Op {
    fn keys(&self) -> &[Bytes] {
        match self {
            Op::Pop(p) | Op::MPop(p) => &p.keys,
            Op::Move(m) => std::slice::from_ref(&m.source),
            Op::ZPop(z) | Op::ZMPop(z) => &z.keys,
            Op::Stream(w) => &w.keys,
        }
    }

    /// Its non-blocking form on the key it popped from (Redis rewrites a served blocking
    /// pop the same way).
    fn effect(&self, key: &Bytes, reply: &Reply) -> Option<Vec<Bytes>> {
        use crate::repl::effects::{Side, list_pop, mpop_result, zset_pop};
        let side = |end: End| match end {
            End::Left => Side::First,
            End::Right => Side::Last,
        };
        let zside = |max: bool| if max { Side::Last } else { Side::First };
        if matches!(reply, Reply::Null | Reply::NullArray) {
            return None;
        }
        Some(match self {
            // A stream read notes its own effects (XCLAIM, XGROUP SETID) as it serves.
            Op::Stream(_) => return None,
            Op::Pop(p) => vec![Bytes::from_static(list_pop(side(p.end))), key.clone()],
            Op::ZPop(z) => vec![Bytes::from_static(zset_pop(zside(z.max))), key.clone()],
            Op::MPop(p) => {
                let (_, n) = mpop_result(reply)?;
                vec![
                    Bytes::from_static(list_pop(side(p.end))),
                    key.clone(),
                    n.to_string().into(),
                ]
            }
            Op::ZMPop(z) => {
                let (_, n) = mpop_result(reply)?;
                vec![
                    Bytes::from_static(zset_pop(zside(z.max))),
                    key.clone(),
                    n.to_string().into(),
                ]
            }
            Op::Move(m) => vec![
                Bytes::from_static(b"LMOVE"),
                m.source.clone(),
                m.destination.clone(),
                Bytes::from_static(end_word(m.from)),
                Bytes::from_static(end_word(m.to)),
            ],
        })
    }

    fn wants(&self) -> Wants {
        match self {
            Op::Pop(_) | Op::MPop(_) | Op::Move(_) => Wants::List,
            Op::ZPop(_) | Op::ZMPop(_) => Wants::ZSet,
            Op::Stream(w) => Wants::Stream {
                group: w.is_group(),
            },
        }
    }

    fn destination(&self) -> Option<&Bytes> {
        match self {
            Op::Move(m) => Some(&m.destination),
            _ => None,
        }
    }

    fn attempt(&self, ctx: &mut Ctx<'_>, only: Option<&Bytes>) -> CmdResult<Option<Reply>> {
        let keys = match only {
            Some(k) => vec![k.clone()],
            None => self.keys().to_vec(),
        };
        let reply = match self {
            Op::Stream(w) => match only {
                Some(k) => return w.attempt(ctx, k),
                None => return Ok(None),
            },
            Op::Pop(p) => {
                let r = LMPop {
                    keys,
                    end: p.end,
                    count: 1,
                }
                .apply(ctx)?;
                // [key, [element]] → [key, element]
                match r {
                    Reply::Array(mut kv) if kv.len() == 2 => match kv.pop() {
                        Some(Reply::Array(mut els)) if !els.is_empty() => {
                            kv.push(els.swap_remove(0));
                            Reply::Array(kv)
                        }
                        _ => return Ok(None),
                    },
                    _ => return Ok(None),
                }
            }
            Op::MPop(p) => LMPop {
                keys,
                end: p.end,
                count: p.count,
            }
            .apply(ctx)?,
            Op::Move(m) => LMove {
                source: m.source.clone(),
                destination: m.destination.clone(),
                from: m.from,
                to: m.to,
            }
            .apply(ctx)?,
            Op::ZPop(z) => {
                let r = ZMPop {
                    keys,
                    max: z.max,
                    count: 1,
                }
                .apply(ctx)?;
                // [key, [[member, score]]] → [key, member, score]
                match r {
                    Reply::Array(mut kv) if kv.len() == 2 => match kv.pop() {
                        Some(Reply::Array(mut pairs)) if !pairs.is_empty() => {
                            if let Reply::Array(pair) = pairs.swap_remove(0) {
                                kv.extend(pair);
                            }
                            Reply::Array(kv)
                        }
                        _ => return Ok(None),
                    },
                    _ => return Ok(None),
                }
            }
            Op::ZMPop(z) => ZMPop {
                keys,
                max: z.max,
                count: z.count,
            }
            .apply(ctx)?,
        };
        Ok(match reply {
            Reply::Null | Reply::NullArray => None,
            r => Some(r),
        })
    }
}

impl Op {
    /// The reply when the client may not block (MULTI, scripts): Redis treats it as an
    /// immediate timeout, except that BLMOVE/BRPOPLPUSH answer a null bulk there.
    fn denied_reply(&self) -> Reply {
        match self {
            Op::Move(_) => Reply::Null,
            _ => Reply::NullArray,
        }
    }
}

/// Parses a blocking timeout in seconds (Redis's `getTimeoutFromObjectOrReply`): a long
/// double, times 1000, rounded up to whole milliseconds. 0 means forever.
fn parse_timeout(arg: &[u8]) -> CmdResult<u64> {
    let not_float = || CmdError::msg("ERR timeout is not a float or out of range");
    let ld = crate::num::long_double::parse(arg).ok_or_else(not_float)?;
    let ms = if ld.is_finite() {
        let v = crate::num::parse_f64(arg).ok_or_else(not_float)?;
        (v * 1000.0).ceil()
    } else {
        // Redis converts ±inf to a long long, which gives LLONG_MIN on x86-64.
        f64::NEG_INFINITY
    };
    // Past i64's range the conversion gives LLONG_MIN too (x86-64's cvt), hence "negative".
    if !(0.0..9_223_372_036_854_775_808.0).contains(&ms) {
        return Err(CmdError::msg("ERR timeout is negative"));
    }
    Ok(ms as u64)
}

/// One blocking command, parsed: what to pop and the timeout (ms, 0 = forever).
#[derive(Debug)]
pub(crate) struct Block {
    op: Op,
    timeout_ms: u64,
}

impl VariantCommand<'_> for Block {
    type Variant = Blocking;
    fn parse(a: &mut ArgCursor<'_>, kind: Blocking) -> CmdResult<Self> {
        use Blocking::*;
        let (op, timeout_ms) = match kind {
            Blpop | Brpop | Bzpopmin | Bzpopmax => {
                let all = a.rest();
                let (timeout, keys) = all.split_last().ok_or(CmdError::Syntax)?;
                let timeout_ms = parse_timeout(timeout)?;
                let keys = keys.to_vec();
                let op = match kind {
                    Blpop | Brpop => Op::Pop(LMPop {
                        keys: crate::engine::args::owned(&keys),
                        end: if kind == Blpop { End::Left } else { End::Right },
                        count: 1,
                    }),
                    _ => Op::ZPop(ZMPop {
                        keys: crate::engine::args::owned(&keys),
                        max: kind == Bzpopmax,
                        count: 1,
                    }),
                };
                (op, timeout_ms)
            }
            Brpoplpush => {
                let source = a.next_owned()?;
                let destination = a.next_owned()?;
                let timeout_ms = parse_timeout(a.next()?)?;
                let op = Op::Move(LMove {
                    source,
                    destination,
                    from: End::Right,
                    to: End::Left,
                });
                (op, timeout_ms)
            }
            Blmove => {
                let source = a.next_owned()?;
                let destination = a.next_owned()?;
                let from = End::parse(a.next()?)?;
                let to = End::parse(a.next()?)?;
                let timeout_ms = parse_timeout(a.next()?)?;
                let op = Op::Move(LMove {
                    source,
                    destination,
                    from,
                    to,
                });
                (op, timeout_ms)
            }
            Blmpop => {
                // numkeys, direction and COUNT are checked before the timeout, as Redis does.
                let timeout = a.next()?;
                let op = Op::MPop(LMPop::parse(a)?);
                (op, parse_timeout(timeout)?)
            }
            Bzmpop => {
                let timeout = a.next()?;
                let op = Op::ZMPop(ZMPop::parse(a)?);
                (op, parse_timeout(timeout)?)
            }
        };
        Ok(Block { op, timeout_ms })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if let Some(reply) = self.op.attempt(ctx, None)? {
            return Ok(reply);
        }
        if !ctx.may_block {
            return Ok(self.op.denied_reply());
        }
        Ok(blocking::register(ctx, Box::new(self.op), self.timeout_ms))
    }
}

/// XREAD / XREADGROUP's BLOCK, when nothing could be served at once (the caller checked
/// `may_block`): registers the reader; `timeout_ms` 0 waits forever.
pub(crate) fn block_on_streams(
    ctx: &mut Ctx<'_>,
    wait: crate::commands::stream::read::Wait,
    timeout_ms: u64,
) -> Reply {
    blocking::register(ctx, Box::new(Op::Stream(wait)), timeout_ms)
}

/// `CLIENT UNBLOCK client-id [TIMEOUT|ERROR]`
#[derive(Debug)]
pub(crate) struct ClientUnblock {
    id: i64,
    error: bool,
}

impl Command<'_> for ClientUnblock {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let id = a.next()?;
        let error = match a.remaining() {
            0 => false,
            1 => {
                let reason = a.next_bytes()?;
                if reason.eq_ignore_ascii_case(b"timeout") {
                    false
                } else if reason.eq_ignore_ascii_case(b"error") {
                    true
                } else {
                    return Err(CmdError::msg(
                        "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
                    ));
                }
            }
            // Checked by `client_unblock`, which knows the subcommand as typed.
            _ => return Err(CmdError::Syntax),
        };
        let id = crate::num::parse_i64(id).ok_or(CmdError::NotInteger)?;
        Ok(ClientUnblock { id, error })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let done =
            u64::try_from(self.id).is_ok_and(|id| blocking::unblock(ctx.shared, id, self.error));
        Ok(Reply::Int(i64::from(done)))
    }
}

/// CLIENT UNBLOCK's handler: too many arguments get Redis's subcommand error, which quotes
/// the subcommand as the client typed it.
pub(crate) fn client_unblock(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    if args.len() > 4 {
        let typed = args
            .get(1)
            .map(|a| crate::engine::printable(a, 128))
            .unwrap_or_default();
        return Reply::Error(
            format!(
                "ERR unknown subcommand or wrong number of arguments for '{typed}'. Try CLIENT HELP."
            )
            .into(),
        );
    }
    crate::engine::run_sub::<ClientUnblock>(ctx, args)
}

/// LEFT or RIGHT, as LMOVE takes it.
fn end_word(end: End) -> &'static [u8] {
    match end {
        End::Left => b"LEFT",
        End::Right => b"RIGHT",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_as_redis_parses_them() {
        assert_eq!(parse_timeout(b"0").ok(), Some(0));
        assert_eq!(parse_timeout(b"1").ok(), Some(1000));
        assert_eq!(parse_timeout(b"0.0001").ok(), Some(1));
        assert_eq!(parse_timeout(b"1.5").ok(), Some(1500));
        assert_eq!(parse_timeout(b"-0.0001").ok(), Some(0));
        let neg = "ERR timeout is negative";
        let bad = "ERR timeout is not a float or out of range";
        for (arg, err) in [
            (&b"-1"[..], neg),
            (b"inf", neg),
            (b"1e300", neg),
            (b"abc", bad),
            (b"", bad),
            (b" 1", bad),
            (b"nan", bad),
        ] {
            assert_eq!(
                parse_timeout(arg).err().map(|e| e.to_string()),
                Some(err.to_string()),
                "{arg:?}"
            );
        }
    }
}
