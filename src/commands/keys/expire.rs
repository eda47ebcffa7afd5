//! A key's lifetime: EXPIRE and its variants, TTL and its variants, PERSIST.

use crate::services::notify::class;
use bytes::Bytes;

use crate::commands::strings::Precision;
use crate::engine::{ArgCursor, Command, Ctx, VariantCommand};
use crate::error::{CmdError, CmdResult};
use crate::num::parse_i64;
use crate::protocol::Reply;

/// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT key time [NX|XX|GT|LT] (the table names the unit
/// and whether the time is relative or absolute)
#[derive(Debug)]
pub(crate) struct Expire<'a> {
    unit: (Precision, Time),
    key: &'a [u8],
    when: i64,
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

/// Whether a time argument or reply is relative to now (EXPIRE, TTL) or a Unix time
/// (EXPIREAT, EXPIRETIME).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Time {
    /// A duration from now.
    Relative,
    /// A Unix timestamp.
    Absolute,
}

impl Expire<'_> {
    fn name(&self) -> &'static str {
        match self.unit {
            (Precision::Seconds, Time::Relative) => "expire",
            (Precision::Millis, Time::Relative) => "pexpire",
            (Precision::Seconds, Time::Absolute) => "expireat",
            (Precision::Millis, Time::Absolute) => "pexpireat",
        }
    }
}

impl<'a> VariantCommand<'a> for Expire<'a> {
    type Variant = (Precision, Time);

    fn parse(a: &mut ArgCursor<'a>, unit: (Precision, Time)) -> CmdResult<Self> {
        let key = a.next()?;
        let when = a.next()?;
        let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
        for opt in a.rest() {
            match &crate::engine::args::upper(opt)[..] {
                b"NX" => nx = true,
                b"XX" => xx = true,
                b"GT" => gt = true,
                b"LT" => lt = true,
                _ => {
                    return Err(CmdError::owned(format!(
                        "ERR Unsupported option {}",
                        crate::engine::printable(opt, usize::MAX)
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
        let when = parse_i64(when).ok_or(CmdError::NotInteger)?;
        Ok(Expire {
            unit,
            key,
            when,
            nx,
            xx,
            gt,
            lt,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let invalid = CmdError::InvalidExpire(self.name());
        let mut when = self.when;
        if self.unit.0 == Precision::Seconds {
            when = when.checked_mul(1000).ok_or(invalid.clone())?;
        }
        if self.unit.1 == Time::Relative {
            when = when.checked_add(ctx.now_ms as i64).ok_or(invalid)?;
        }
        let db = ctx.db();
        let Some(entry) = ctx.store.lookup(db, self.key, ctx.now_ms) else {
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
            ctx.store.remove(db, self.key, ctx.now_ms);
            ctx.notify(class::GENERIC, "del", self.key);
        } else {
            ctx.store
                .set_expire(db, self.key, Some(when as u64), ctx.now_ms);
            ctx.notify(class::GENERIC, "expire", self.key);
        }
        Ok(Reply::Int(1))
    }
}

/// TTL, PTTL, EXPIRETIME, PEXPIRETIME key
#[derive(Debug)]
pub(crate) struct Ttl {
    unit: (Precision, Time),
    key: Bytes,
}

impl VariantCommand<'_> for Ttl {
    type Variant = (Precision, Time);

    fn parse(a: &mut ArgCursor<'_>, unit: (Precision, Time)) -> CmdResult<Self> {
        Ok(Ttl {
            unit,
            key: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        // LOOKUP_NOTOUCH, as Redis: asking for a TTL is not a use of the key.
        let Some(entry) = ctx.store.read_untouched(db, &self.key, ctx.now_ms) else {
            return Ok(Reply::Int(-2));
        };
        let Some(at) = entry.expire_at() else {
            return Ok(Reply::Int(-1));
        };
        let absolute = self.unit.1 == Time::Absolute;
        let ms = if absolute {
            at
        } else {
            at.saturating_sub(ctx.now_ms)
        } as i64;
        let millis = self.unit.0 == Precision::Millis;
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
pub(crate) struct Persist {
    key: Bytes,
}

impl Command<'_> for Persist {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Persist {
            key: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Int(persist(ctx, &self.key) as i64))
    }
}

/// Removes `key`'s TTL (PERSIST, GETEX PERSIST) and emits `persist`: whether it had one. A
/// key without one is left alone, so neither WATCH nor a notification fires for nothing.
pub(crate) fn persist(ctx: &mut Ctx<'_>, key: &[u8]) -> bool {
    let db = ctx.db();
    let has_ttl = ctx
        .store
        .lookup(db, key, ctx.now_ms)
        .is_some_and(|e| e.expire_at().is_some());
    if has_ttl {
        ctx.store.set_expire(db, key, None, ctx.now_ms);
        ctx.notify(class::GENERIC, "persist", key);
    }
    has_ttl
}
