//! Moving a value to another name or database: RENAME, RENAMENX, COPY, MOVE.

use crate::services::notify::class;
use bytes::Bytes;

use crate::commands::keys::db::{db_index, int_arg};
use crate::engine::{ArgCursor, Command, Ctx, VariantCommand};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;

/// Whether RENAME replaces an existing target (RENAME) or gives up (RENAMENX).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RenameMode {
    /// RENAME.
    Overwrite,
    /// RENAMENX.
    IfTargetMissing,
}

/// RENAME / RENAMENX key newkey
#[derive(Debug)]
pub(super) struct Rename {
    mode: RenameMode,
    from: Bytes,
    to: Bytes,
}

impl VariantCommand<'_> for Rename {
    type Variant = RenameMode;

    fn parse(a: &mut ArgCursor<'_>, mode: RenameMode) -> CmdResult<Self> {
        Ok(Rename {
            mode,
            from: a.next_owned()?,
            to: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let now = ctx.now_ms;
        let nx = self.mode == RenameMode::IfTargetMissing;
        if !ctx.store.exists(db, &self.from, now) {
            return Err(CmdError::NoSuchKey);
        }
        if self.from == self.to {
            return Ok(if nx { Reply::Int(0) } else { Reply::ok() });
        }
        if nx && ctx.store.exists(db, &self.to, now) {
            return Ok(Reply::Int(0));
        }
        let Some(entry) = ctx.store.remove(db, &self.from, now) else {
            return Err(CmdError::NoSuchKey);
        };
        let expire = entry.expire_at();
        // Redis deletes an existing destination and adds the key anew (a `new` event).
        ctx.store.remove(db, &self.to, now);
        ctx.store.set(db, &self.to, entry.value, expire);
        ctx.notify(class::GENERIC, "rename_from", &self.from);
        ctx.notify(class::GENERIC, "rename_to", &self.to);
        Ok(if nx { Reply::Int(1) } else { Reply::ok() })
    }
}

/// `COPY source destination [DB destination-db] [REPLACE]`
///
/// The destination is the same key bytes' shard whatever its database, so the table's two
/// key positions cover it.
#[derive(Debug)]
pub(super) struct Copy {
    src: Bytes,
    dst: Bytes,
    options: Vec<Bytes>,
}

impl Command<'_> for Copy {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Copy {
            src: a.next_owned()?,
            dst: a.next_owned()?,
            options: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let src_db = ctx.db();
        let (mut dst_db, mut replace) = (src_db, false);
        // Redis's order: each option in turn, a DB index checked (range included) where it
        // stands, so it fails before a later syntax error.
        let borrowed = crate::engine::args::borrowed(&self.options);
        let mut a = ArgCursor::new(&borrowed);
        while a.remaining() > 0 {
            if a.eat("REPLACE") {
                replace = true;
            } else if a.remaining() >= 2 && a.eat("DB") {
                dst_db = db_index(ctx, int_arg(a.next()?, None)?)?;
            } else {
                return Err(CmdError::Syntax);
            }
        }
        if ctx.shared.cluster.is_some() && (src_db != 0 || dst_db != 0) {
            return Err(CmdError::msg(
                "ERR Copying to another database is not allowed in cluster mode",
            ));
        }
        if src_db == dst_db && self.src == self.dst {
            return Err(same_object());
        }
        let now = ctx.now_ms;
        let Some(entry) = ctx.store.lookup(src_db, &self.src, now) else {
            return Ok(Reply::Int(0));
        };
        let (value, expire) = (entry.value.clone(), entry.expire_at());
        if ctx.store.exists(dst_db, &self.dst, now) {
            if !replace {
                return Ok(Reply::Int(0));
            }
            ctx.store.remove(dst_db, &self.dst, now);
        }
        ctx.store.set(dst_db, &self.dst, value, expire);
        ctx.notify_db(class::GENERIC, dst_db, "copy_to", &self.dst);
        if dst_db != src_db {
            crate::services::blocking::note_ready(ctx, dst_db, self.dst.clone());
        }
        Ok(Reply::Int(1))
    }
}

fn same_object() -> CmdError {
    CmdError::msg("ERR source and destination objects are the same")
}

/// `MOVE key db`
#[derive(Debug)]
pub(super) struct Move {
    key: Bytes,
    db: Bytes,
}

impl Command<'_> for Move {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Move {
            key: a.next_owned()?,
            db: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if ctx.shared.cluster.is_some() {
            return Err(CmdError::msg("ERR MOVE is not allowed in cluster mode"));
        }
        let src_db = ctx.db();
        let dst_db = db_index(ctx, int_arg(&self.db, None)?)?;
        if src_db == dst_db {
            return Err(same_object());
        }
        let now = ctx.now_ms;
        if !ctx.store.exists(src_db, &self.key, now) || ctx.store.exists(dst_db, &self.key, now) {
            return Ok(Reply::Int(0));
        }
        let Some(entry) = ctx.store.remove(src_db, &self.key, now) else {
            return Ok(Reply::Int(0));
        };
        let expire = entry.expire_at();
        ctx.store.set(dst_db, &self.key, entry.value, expire);
        ctx.notify_db(class::GENERIC, src_db, "move_from", &self.key);
        ctx.notify_db(class::GENERIC, dst_db, "move_to", &self.key);
        crate::services::blocking::note_ready(ctx, dst_db, self.key.clone());
        Ok(Reply::Int(1))
    }
}
