//! The persistence commands: SAVE, BGSAVE \[SCHEDULE\], LASTSAVE (RDB files, run by
//! `services::persist`) and BGREWRITEAOF (the append-only file's rewrite, run by
//! `services::aof`).

use std::sync::atomic::Ordering;

use crate::engine::{ArgCursor, Command, CommandSpec, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::services::{aof, persist};

type C = CommandSpec;

/// SAVE, BGSAVE, LASTSAVE, BGREWRITEAOF.
pub(crate) static COMMANDS: &[C] = &[
    C::new(
        "save",
        1,
        &["admin", "noscript", "no_async_loading", "no_multi"],
        C::keys(0, 0, 0),
        crate::engine::run::<Save>,
    )
    .with_acl(&["@admin", "@slow", "@dangerous"])
    // It walks every shard on the caller's thread: the busy gate must hold it.
    .with_roles(crate::engine::Roles::NEEDS_SHARDS)
    .self_locking(),
    C::new(
        "bgsave",
        -1,
        &["admin", "noscript", "no_async_loading"],
        C::keys(0, 0, 0),
        crate::engine::run::<Bgsave>,
    )
    .with_acl(&["@admin", "@slow", "@dangerous"])
    .self_locking(),
    C::new(
        "lastsave",
        1,
        &["loading", "stale", "fast"],
        C::keys(0, 0, 0),
        crate::engine::run::<Lastsave>,
    )
    .with_acl(&["@admin", "@fast", "@dangerous"])
    .with_tips(&["nondeterministic_output"]),
    C::new(
        "bgrewriteaof",
        1,
        &["admin", "noscript", "no_async_loading"],
        C::keys(0, 0, 0),
        crate::engine::run::<BgRewriteAof>,
    )
    .with_acl(&["@admin", "@slow", "@dangerous"])
    .self_locking(),
];

/// SAVE
#[derive(Debug)]
pub(crate) struct Save;

impl Command<'_> for Save {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Save)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        persist::save_command(ctx)
    }
}

/// BGSAVE \[SCHEDULE\]
#[derive(Debug)]
pub(crate) struct Bgsave;

impl Command<'_> for Bgsave {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        match a.rest() {
            [] => Ok(Bgsave),
            [s] if s.eq_ignore_ascii_case(b"schedule") => Ok(Bgsave),
            _ => Err(CmdError::Syntax),
        }
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let persist = &ctx.shared.persist;
        if persist.saving() {
            return Err(CmdError::msg("ERR Background save already in progress"));
        }
        // Inside EXEC Redis defers the fork to after the transaction; so do we.
        if ctx.in_exec {
            persist.schedule_bgsave();
            return Ok(Reply::status("Background saving scheduled"));
        }
        if persist::start_bgsave(ctx.shared) {
            Ok(Reply::status("Background saving started"))
        } else if persist.saving() {
            Err(CmdError::msg("ERR Background save already in progress"))
        } else {
            Err(CmdError::msg("ERR"))
        }
    }
}

/// LASTSAVE
#[derive(Debug)]
pub(crate) struct Lastsave;

impl Command<'_> for Lastsave {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Lastsave)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let s = ctx.shared.persist.lastsave_s();
        Ok(Reply::Int(i64::try_from(s).unwrap_or(i64::MAX)))
    }
}

/// BGREWRITEAOF
#[derive(Debug)]
pub(crate) struct BgRewriteAof;

impl Command<'_> for BgRewriteAof {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(BgRewriteAof)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let aof = &ctx.shared.repl.aof;
        if aof.stats.rewriting.load(Ordering::Acquire) {
            return Err(CmdError::msg(
                "ERR Background append only file rewriting already in progress",
            ));
        }
        if ctx.in_exec || ctx.shared.persist.saving() {
            aof.stats.scheduled.store(true, Ordering::Release);
            aof.stats.failures.store(0, Ordering::Relaxed);
            return Ok(Reply::status(
                "Background append only file rewriting scheduled",
            ));
        }
        if aof.state() == crate::aof::State::Off {
            // Redis writes a base (and a manifest naming only it) with the AOF off too.
            return if aof::start_off_rewrite(ctx.shared) {
                Ok(Reply::status(
                    "Background append only file rewriting started",
                ))
            } else {
                Err(CmdError::msg(
                    "ERR Background append only file rewriting already in progress",
                ))
            };
        }
        if aof::start_rewrite(ctx.shared) {
            Ok(Reply::status(
                "Background append only file rewriting started",
            ))
        } else {
            Err(CmdError::msg(
                "ERR Can't execute an AOF background rewriting. Please check the server logs for more information.",
            ))
        }
    }
}
