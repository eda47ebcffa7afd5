//! The server as a process: TIME, DEBUG, SHUTDOWN, and MONITOR (the feed itself is
//! `services::monitor`).

use std::time::Duration;

use crate::commands::server::Help;
use crate::engine::{ArgCursor, Command, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::num::parse_f64;
use crate::protocol::Reply;

/// TIME
#[derive(Debug)]
pub(super) struct Time;

impl Command<'_> for Time {
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

/// DEBUG HELP | DEBUG SLEEP seconds (fractions allowed; delays this client only) | DEBUG
/// RELOAD [NOSAVE].
///
/// As in Redis, DEBUG is one command that reads its own subcommand (it has no subcommand
/// table), so anything else gets Redis's "unknown subcommand or wrong number of arguments".
#[derive(Debug)]
pub(super) enum DebugCmd {
    /// DEBUG HELP
    Help,
    /// DEBUG SLEEP seconds
    Sleep(f64),
    /// DEBUG RELOAD [NOSAVE]: save, empty, load the RDB file back.
    Reload {
        /// Save first (no NOSAVE).
        save: bool,
    },
}

impl Command<'_> for DebugCmd {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let sub = a.next()?;
        match (sub.to_ascii_lowercase().as_slice(), a.remaining()) {
            (b"help", 0) => Ok(DebugCmd::Help),
            (b"sleep", 1) => Ok(DebugCmd::Sleep(parse_f64(a.next()?).unwrap_or(0.0))),
            (b"reload", _) => {
                let mut save = true;
                for opt in a.rest() {
                    if opt.eq_ignore_ascii_case(b"nosave") {
                        save = false;
                    } else if opt.eq_ignore_ascii_case(b"merge")
                        || opt.eq_ignore_ascii_case(b"noflush")
                    {
                        return Err(CmdError::msg(
                            "ERR sluice's DEBUG RELOAD supports only the NOSAVE option",
                        ));
                    } else {
                        return Err(CmdError::msg(
                            "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
                        ));
                    }
                }
                Ok(DebugCmd::Reload { save })
            }
            _ => Err(CmdError::owned(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
                crate::engine::printable(sub, 128)
            ))),
        }
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        match self {
            DebugCmd::Help => Help.apply(ctx),
            DebugCmd::Sleep(secs) => {
                if secs > 0.0 {
                    ctx.hold = Duration::from_secs_f64(secs.min(3600.0));
                }
                Ok(Reply::ok())
            }
            DebugCmd::Reload { save } => {
                // EXEC may hold shards; reloading needs all of them.
                if ctx.in_exec {
                    return Err(CmdError::msg(
                        "ERR sluice does not run DEBUG RELOAD inside a transaction",
                    ));
                }
                crate::services::persist::debug_reload(ctx, save)
            }
        }
    }
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`
#[derive(Debug)]
pub(super) struct Shutdown {
    save: bool,
    nosave: bool,
    force: bool,
    abort: bool,
}

impl Command<'_> for Shutdown {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let mut s = Shutdown {
            save: false,
            nosave: false,
            force: false,
            abort: false,
        };
        let mut other = false;
        for opt in a.rest() {
            if opt.eq_ignore_ascii_case(b"nosave") {
                s.nosave = true;
            } else if opt.eq_ignore_ascii_case(b"save") {
                s.save = true;
            } else if opt.eq_ignore_ascii_case(b"now") {
                other = true;
            } else if opt.eq_ignore_ascii_case(b"force") {
                s.force = true;
            } else if opt.eq_ignore_ascii_case(b"abort") {
                s.abort = true;
            } else {
                return Err(CmdError::Syntax);
            }
        }
        // Redis's illegal combinations.
        if (s.abort && (s.save || s.nosave || s.force || other)) || (s.save && s.nosave) {
            return Err(CmdError::Syntax);
        }
        Ok(s)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if self.abort {
            // sluice never waits for replicas, so no shutdown is ever in progress.
            return Err(CmdError::msg("ERR No shutdown in progress."));
        }
        // A script past its threshold holds every shard: only NOSAVE may stop the server.
        if !self.nosave && ctx.shared.scripts.busy.is_running() {
            let busy = &ctx.shared.scripts.busy;
            if busy.running_for().is_some_and(|d| {
                d.as_millis() >= u128::from(ctx.shared.config().busy_reply_threshold)
            }) {
                return Err(CmdError::msg(if busy.running_function().is_some() {
                    crate::commands::scripting::BUSY_FUNCTION
                } else {
                    crate::commands::scripting::BUSY
                }));
            }
        }
        // A script that took a shard after the gate sends the request back to it (see
        // `shutdown_save_command`): no reply now.
        match crate::services::persist::shutdown_save_command(
            ctx,
            self.save,
            self.nosave,
            self.force,
        ) {
            Ok(true) => {}
            Ok(false) => return Ok(Reply::Null),
            Err(_) => return Err(CmdError::msg("ERR Errors trying to SHUTDOWN. Check logs.")),
        }
        tracing::warn!("SHUTDOWN requested by client {}", ctx.client.id());
        ctx.shared.shutdown.cancel();
        // Redis closes the connection without replying when it shuts down.
        ctx.next = crate::engine::Next::CloseWithoutReply;
        Ok(Reply::ok())
    }
}

/// MONITOR: the connection switches to streaming mode after `+OK`.
#[derive(Debug)]
pub(crate) struct Monitor;

impl Command<'_> for Monitor {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Monitor)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if ctx.in_exec {
            // Redis: EXEC runs its queue as a client that must get one reply per command.
            return Err(crate::error::CmdError::msg(
                "ERR MONITOR isn't allowed for DENY BLOCKING client",
            ));
        }
        ctx.next = crate::engine::Next::Monitor;
        Ok(Reply::ok())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;

    use crate::engine::execute_may_block;
    use crate::engine::script_race::{race_a_script, run};
    use crate::protocol::Reply;
    use crate::server::Shared;

    /// SHUTDOWN SAVE passed the busy gate, then a script took a shard (SHUTDOWN's own check
    /// saw no script past the threshold): its save gives way and the request goes back to
    /// the gate instead of waiting on the script's lock, with nothing saved and the server
    /// still up. At the gate it waits for the young script; past `busy-reply-threshold`
    /// (then set to 100 ms) the gate lets it through (SHUTDOWN is allowed while busy) and it
    /// answers -BUSY, as Redis answers a SHUTDOWN without NOSAVE during a long script.
    /// Once the script ends, SHUTDOWN SAVE saves and stops the server. The "script" is this
    /// test's main thread ([`race_a_script`]): a SHUTDOWN that waited on the lock would
    /// never answer.
    #[test]
    fn shutdown_save_gives_way_to_a_script_then_answers_busy() {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::config::Config {
            dir: Some(dir.path().display().to_string()),
            // Young for as long as the first SHUTDOWN takes, however loaded the machine.
            busy_reply_threshold: 60_000,
            ..crate::config::Config::default()
        };
        let shared = Arc::new(Shared::new(config, crate::clock::Clock::system()));
        let last = shared.keyspace.shard_count() - 1;
        let rdb = shared.config().rdb_path();
        race_a_script(&shared, last, move |shared, c, script| {
            assert!(!run(shared, c, &["SET", "k", "1"]).1);
            script.take();

            let (_, back) = run(shared, c, &["SHUTDOWN", "SAVE"]);
            assert!(back, "SHUTDOWN SAVE goes back to the gate");
            assert!(!rdb.exists(), "having saved nothing");
            assert!(!shared.shutdown.is_cancelled(), "and stopped nothing");
            let threshold = ["CONFIG", "SET", "busy-reply-threshold", "100"];
            assert!(!run(shared, c, &threshold).1);
            // The gate: it waits while the script is young, then lets SHUTDOWN through.
            let args: Vec<Bytes> = ["SHUTDOWN", "SAVE"]
                .iter()
                .map(|a| Bytes::from(a.to_string()))
                .collect();
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap();
            let gated = rt.block_on(crate::commands::scripting::busy_gate(
                shared,
                c,
                &crate::engine::args::borrowed(&args),
            ));
            assert!(gated.is_none(), "{gated:?}");
            let (reply, back) = run(shared, c, &["SHUTDOWN", "SAVE"]);
            assert!(
                !back && matches!(&reply, Reply::Error(e) if e.starts_with("BUSY ")),
                "{reply:?}"
            );
            assert!(!rdb.exists() && !shared.shutdown.is_cancelled());
            script.end();

            let args: Vec<Bytes> = ["SHUTDOWN", "SAVE"]
                .iter()
                .map(|a| Bytes::from(a.to_string()))
                .collect();
            let ran = execute_may_block(shared, c, &crate::engine::args::borrowed(&args));
            assert!(
                matches!(ran.next, crate::engine::Next::CloseWithoutReply),
                "{:?}",
                ran.reply
            );
            assert!(rdb.exists() && shared.shutdown.is_cancelled());
        });
    }
}
