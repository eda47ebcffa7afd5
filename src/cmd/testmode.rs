//! Test-double commands, registered only with `--test-mode`: CLOCK moves time over the wire.
//!
//! Real Redis offers no way to move time, so limiter tests sleep through their windows. Here a
//! test freezes the clock, advances it past a window, and sees exactly what a real wait would
//! have produced: expiry, TTLs, CL.THROTTLE and TIME all read this clock. Advancing reaps the
//! keys that became due before replying, so DBSIZE and INFO are exact right after.

use std::time::Duration;

use super::{ArgCursor, Command, CommandSpec as C, Ctx, KeySpec, run, run_sub};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;

/// The test-mode commands.
pub static COMMANDS: &[C] = &[C::new("clock", -2, &["admin", "fast"], C::keys(0, 0, 0), run::<super::server::Help>)
    .with_subcommands(CLOCK)];

static CLOCK: &[C] = &[
    C::new("clock|freeze", 2, &["admin", "fast"], KeySpec::None, run_sub::<ClockCmd<0>>),
    C::new("clock|advance", 3, &["admin", "fast"], KeySpec::None, run_sub::<ClockCmd<1>>),
    C::new("clock|set", 3, &["admin", "fast"], KeySpec::None, run_sub::<ClockCmd<2>>),
    C::new("clock|resume", 2, &["admin", "fast"], KeySpec::None, run_sub::<ClockCmd<3>>),
    C::new("clock|now", 2, &["admin", "fast"], KeySpec::None, run_sub::<ClockCmd<4>>),
    C::new("clock|help", 2, &["admin", "fast"], KeySpec::None, run_sub::<ClockHelp>),
];

/// CLOCK FREEZE (0) | ADVANCE ms (1) | SET unix-ms (2) | RESUME (3) | NOW (4)
///
/// FREEZE, ADVANCE and SET reply with the clock's new time in Unix ms; ADVANCE and SET freeze
/// a running clock first. RESUME lets real time run on from the frozen value. NOW replies the
/// current time in Unix ms.
#[derive(Debug)]
pub struct ClockCmd<const OP: u8> {
    ms: i64,
}

impl<const OP: u8> Command for ClockCmd<OP> {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let ms = if OP == 1 || OP == 2 { a.next_i64()? } else { 0 };
        if ms < 0 {
            return Err(CmdError::msg("ERR the clock cannot move backwards"));
        }
        Ok(ClockCmd { ms })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let clock = &ctx.shared.clock;
        let result = match OP {
            0 => {
                clock.freeze();
                Ok(clock.now_ns())
            }
            1 => {
                clock.freeze();
                clock.advance(Duration::from_millis(self.ms as u64))
            }
            2 => {
                clock.freeze();
                clock.set((self.ms as u64).saturating_mul(1_000_000))
            }
            3 => {
                clock.resume();
                return Ok(Reply::ok());
            }
            _ => Ok(clock.now_ns()),
        };
        let now_ns = result.map_err(|e| CmdError::owned(e.to_string()))?;
        if OP == 1 || OP == 2 {
            ctx.shared.keyspace.reap_all(now_ns / 1_000_000);
        }
        Ok(Reply::Int((now_ns / 1_000_000) as i64))
    }
}

/// CLOCK HELP
#[derive(Debug)]
pub struct ClockHelp;

impl Command for ClockHelp {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ClockHelp)
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Array(
            [
                "CLOCK FREEZE -- stop time at its current value; replies the time in Unix ms.",
                "CLOCK ADVANCE <ms> -- move frozen time forward (freezes first); expired keys are reaped before the reply.",
                "CLOCK SET <unix-ms> -- set frozen time (never backwards).",
                "CLOCK RESUME -- let real time run again from the current value.",
                "CLOCK NOW -- the current time in Unix ms.",
            ]
            .into_iter()
            .map(|s| Reply::Status(s.into()))
            .collect(),
        ))
    }
}
