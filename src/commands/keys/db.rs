//! Databases as a whole: DBSIZE, FLUSHDB, FLUSHALL, SELECT, SWAPDB.

use crate::engine::{ArgCursor, Command, Ctx, VariantCommand};
use crate::error::{CmdError, CmdResult};
use crate::num::parse_i64;
use crate::protocol::Reply;

/// DBSIZE
#[derive(Debug)]
pub(super) struct DbSize;

impl Command<'_> for DbSize {
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
pub(super) struct Flush {
    scope: FlushScope,
}

/// What a flush empties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FlushScope {
    /// FLUSHDB: the client's database.
    Db,
    /// FLUSHALL: every database.
    All,
}

impl VariantCommand<'_> for Flush {
    type Variant = FlushScope;

    fn parse(a: &mut ArgCursor<'_>, scope: FlushScope) -> CmdResult<Self> {
        if a.remaining() > 1 || (a.remaining() == 1 && !a.eat("ASYNC") && !a.eat("SYNC")) {
            return Err(CmdError::Syntax);
        }
        Ok(Flush { scope })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        for shard in ctx.store.shards_mut() {
            if self.scope == FlushScope::All {
                for d in 0..shard.databases() {
                    shard.flush_db(d);
                }
            } else {
                shard.flush_db(db);
            }
        }
        // Tracking clients hear of a flush as one null (Redis's
        // trackingInvalidateKeysOnFlush), not key by key.
        ctx.shared.keyspace.tracking().flush();
        let flushed = if self.scope == FlushScope::All {
            0..ctx.store.keyspace().databases()
        } else {
            db..db + 1
        };
        crate::services::blocking::note_flushed(ctx, flushed);
        Ok(Reply::ok())
    }
}

/// Redis reads database indexes as a C `int`: an integer outside its range fails with `msg`
/// (Redis's generic range error when there is none).
pub(super) fn int_arg(b: &[u8], msg: Option<&'static str>) -> CmdResult<i64> {
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
pub(super) fn db_index(ctx: &Ctx<'_>, n: i64) -> CmdResult<usize> {
    let dbs = ctx.shared.keyspace.databases();
    if n < 0 || n as usize >= dbs {
        return Err(CmdError::DbIndexOutOfRange);
    }
    Ok(n as usize)
}

/// SELECT index
#[derive(Debug)]
pub(super) struct Select {
    index: i64,
}

impl Command<'_> for Select {
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
pub(super) struct SwapDb {
    a: i64,
    b: i64,
}

impl Command<'_> for SwapDb {
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
            // Clients blocked on a key of either database may find it now (Redis's
            // scanDatabaseForReadyKeys); `serve` checks each key's presence and type.
            for db in [a, b] {
                for key in ctx.shared.blocked.keys_in_db(db) {
                    crate::services::blocking::note_ready(ctx, db, key);
                }
            }
        }
        Ok(Reply::ok())
    }
}
