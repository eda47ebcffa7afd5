//! The server as a process: TIME, DEBUG, SHUTDOWN.

use std::time::Duration;

use super::Help;
use crate::cmd::{ArgCursor, Command, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::num::parse_f64;
use crate::protocol::Reply;

/// TIME
#[derive(Debug)]
pub struct Time;

impl Command for Time {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Time)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let us = ctx.now_ns / 1000;
        Ok(Reply::Array(vec![
            Reply::bulk_int((us / 1_000_000) as i64),
            Reply::bulk_int((us % 1_000_000) as i64),
        ]))
    }
}

/// DEBUG HELP | DEBUG SLEEP seconds (fractions allowed; delays this client only).
///
/// As in Redis, DEBUG is one command that reads its own subcommand (it has no subcommand
/// table), so anything else gets Redis's "unknown subcommand or wrong number of arguments".
#[derive(Debug)]
pub enum DebugCmd {
    /// DEBUG HELP
    Help,
    /// DEBUG SLEEP seconds
    Sleep(f64),
}

impl Command for DebugCmd {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let sub = a.next()?;
        match (sub.to_ascii_lowercase().as_slice(), a.remaining()) {
            (b"help", 0) => Ok(DebugCmd::Help),
            (b"sleep", 1) => Ok(DebugCmd::Sleep(parse_f64(a.next()?).unwrap_or(0.0))),
            _ => Err(CmdError::owned(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
                crate::cmd::printable(sub, 128)
            ))),
        }
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        match self {
            DebugCmd::Help => Help.apply(ctx),
            DebugCmd::Sleep(secs) => {
                if secs > 0.0 {
                    ctx.client.sleep = Some(Duration::from_secs_f64(secs.min(3600.0)));
                }
                Ok(Reply::ok())
            }
        }
    }
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`
#[derive(Debug)]
pub struct Shutdown;

impl Command for Shutdown {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        for opt in a.rest() {
            if !["nosave", "save", "now", "force", "abort"]
                .iter()
                .any(|o| opt.eq_ignore_ascii_case(o.as_bytes()))
            {
                return Err(CmdError::Syntax);
            }
        }
        Ok(Shutdown)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        tracing::warn!("SHUTDOWN requested by client {}", ctx.client.id());
        ctx.shared.shutdown.cancel();
        // Redis closes the connection without replying when it shuts down.
        ctx.client.close_after_reply = true;
        ctx.client.no_reply = true;
        Ok(Reply::ok())
    }
}
