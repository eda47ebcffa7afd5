//! DUMP and RESTORE: a key's value in Redis's serialization (see [`crate::rdb`]), so a value
//! dumped by Redis 7.0 restores into sluice and the reverse.

use bytes::Bytes;

use crate::engine::{
    ArgCursor, Command, CommandSpec as C, Ctx, FindKeys, InfoDoc, KeySpecDoc, run,
};
use crate::error::{CmdError, CmdResult};
use crate::num::parse_i64;
use crate::protocol::Reply;
use crate::rdb::{self, RdbError};

/// The commands of this module.
pub(crate) static COMMANDS: &[C] = &[
    C::new("dump", 2, &["readonly"], C::keys(1, 1, 1), run::<Dump>)
        .with_acl(&["@keyspace", "@read", "@slow"])
        .with_info(&InfoDoc {
            tips: &["nondeterministic_output"],
            key_specs: &[KeySpecDoc {
                notes: None,
                flags: &["RO", "access"],
                begin: Some(1),
                keyword: None,
                find: FindKeys::Range(0, 1, 0),
            }],
        }),
    C::new(
        "restore",
        -4,
        &["write", "denyoom"],
        C::keys(1, 1, 1),
        run::<Restore>,
    )
    .with_effect(crate::repl::effects::Effect::KeyState)
    .with_acl(&["@keyspace", "@write", "@slow", "@dangerous"])
    .with_info(&InfoDoc {
        tips: &[],
        key_specs: &[KeySpecDoc {
            notes: None,
            flags: &["OW", "update"],
            begin: Some(1),
            keyword: None,
            find: FindKeys::Range(0, 1, 0),
        }],
    }),
];

/// `DUMP key`
#[derive(Debug)]
pub(crate) struct Dump {
    key: Bytes,
}

impl Command<'_> for Dump {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Dump {
            key: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        Ok(match ctx.store.read_value(db, &self.key, now) {
            None => Reply::Null,
            Some(v) => Reply::Bulk(Bytes::from(rdb::dump(v))),
        })
    }
}

/// `RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]`
#[derive(Debug)]
pub(crate) struct Restore {
    key: Bytes,
    ttl: Bytes,
    payload: Bytes,
    replace: bool,
    absttl: bool,
    idle_s: Option<i64>,
}

impl Command<'_> for Restore {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next_owned()?;
        let ttl = a.next_owned()?;
        let payload = a.next_owned()?;
        let (mut replace, mut absttl, mut idle_s, mut freq) = (false, false, None, None);
        while a.remaining() > 0 {
            let more = a.remaining() > 1;
            if a.eat("REPLACE") {
                replace = true;
            } else if a.eat("ABSTTL") {
                absttl = true;
            } else if more && freq.is_none() && a.eat("IDLETIME") {
                let n = a.next_i64()?;
                if n < 0 {
                    return Err(CmdError::msg("ERR Invalid IDLETIME value, must be >= 0"));
                }
                idle_s = Some(n);
            } else if more && idle_s.is_none() && a.eat("FREQ") {
                // Accepted and checked as Redis does; sluice keeps no LFU counters.
                let n = a.next_i64()?;
                if !(0..=255).contains(&n) {
                    return Err(CmdError::msg(
                        "ERR Invalid FREQ value, must be >= 0 and <= 255",
                    ));
                }
                freq = Some(n);
            } else {
                return Err(CmdError::Syntax);
            }
        }
        Ok(Restore {
            key,
            ttl,
            payload,
            replace,
            absttl,
            idle_s,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        if !self.replace && ctx.store.exists(db, &self.key, now) {
            return Err(CmdError::msg("BUSYKEY Target key name already exists."));
        }
        let ttl = parse_i64(&self.ttl).ok_or(CmdError::NotInteger)?;
        if ttl < 0 {
            return Err(CmdError::msg("ERR Invalid TTL value, must be >= 0"));
        }
        let value =
            rdb::restore(&self.payload, &ctx.shared.live.zset_limits()).map_err(|e| match e {
                RdbError::VersionOrChecksum => {
                    CmdError::msg("ERR DUMP payload version or checksum are wrong")
                }
                RdbError::BadFormat => CmdError::msg("ERR Bad data format"),
            })?;
        let deleted = self.replace && ctx.store.remove(db, &self.key, now).is_some();
        let at = match ttl {
            0 => None,
            t if self.absttl => Some(t),
            t => Some(t.saturating_add(now as i64)),
        };
        if let Some(at) = at
            && at <= now as i64
        {
            // Already expired: nothing is created (a replaced key stays deleted).
            if deleted {
                ctx.notify(crate::services::notify::class::GENERIC, "del", &self.key);
            }
            return Ok(Reply::ok());
        }
        ctx.store.set(db, &self.key, value, at.map(|t| t as u64));
        ctx.notify(
            crate::services::notify::class::GENERIC,
            "restore",
            &self.key,
        );
        if let Some(idle) = self.idle_s
            && let Some(e) = ctx.store.lookup_untouched(db, &self.key, now)
        {
            e.set_idle(now, (idle as u64).saturating_mul(1000));
        }
        Ok(Reply::ok())
    }
}
