//! CLIENT PAUSE and CLIENT UNPAUSE (their rows are in CLIENT's table, `client.rs`): they
//! set and clear the server-wide pause that `services::pause` keeps and gates on.

use crate::engine::{ArgCursor, Command, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::services::pause::{ALL, WRITE};

/// The table handler of CLIENT PAUSE: more than two arguments get Redis's generic CLIENT
/// error, which names the subcommand as the client typed it.
pub(crate) fn client_pause(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    if args.len() > 4 {
        return Reply::Error(
            format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
                crate::engine::printable(args[1], 128)
            )
            .into(),
        );
    }
    crate::engine::run_sub::<ClientPause>(ctx, args)
}

/// CLIENT PAUSE timeout [WRITE|ALL]
#[derive(Debug)]
pub(crate) struct ClientPause {
    mode: u8,
    timeout_ms: u64,
}

impl Command<'_> for ClientPause {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let timeout = a.next()?;
        // Redis reads the mode before the timeout.
        let mode = if a.remaining() == 0 {
            ALL
        } else if a.eat("write") {
            WRITE
        } else if a.eat("all") {
            ALL
        } else {
            return Err(CmdError::msg("ERR CLIENT PAUSE mode must be WRITE or ALL"));
        };
        let t = crate::num::parse_i64(timeout).ok_or(CmdError::msg(
            "ERR timeout is not an integer or out of range",
        ))?;
        if t < 0 {
            return Err(CmdError::msg("ERR timeout is negative"));
        }
        Ok(ClientPause {
            mode,
            timeout_ms: t as u64,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        // A timeout of 0 is an end of 0: already over (Redis does the same).
        let end = if self.timeout_ms == 0 {
            0
        } else {
            ctx.now_ms.saturating_add(self.timeout_ms)
        };
        ctx.shared.pause.pause(self.mode, end, ctx.now_ms);
        crate::services::pause::hold_expiry(ctx.shared);
        // Redis's guarantee: once OK is answered, no write is running. Commands on other
        // threads that read no pause may be: wait for their turns (microseconds, or a
        // script running on another loop; bounded all the same). Not inside EXEC, whose
        // held keys another thread's command may be waiting for.
        if ctx.shared.pause.is_set()
            && !ctx.in_exec
            && !ctx.in_script
            && !crate::services::quiesce::Snapshot::take().wait(PAUSE_SETTLES_WITHIN)
        {
            tracing::warn!("CLIENT PAUSE: a command begun before the pause is still running");
        }
        Ok(Reply::ok())
    }
}

/// How long CLIENT PAUSE waits for the commands running when it began.
const PAUSE_SETTLES_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// CLIENT UNPAUSE
#[derive(Debug)]
pub(crate) struct ClientUnpause;

impl Command<'_> for ClientUnpause {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ClientUnpause)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        ctx.shared.pause.unpause();
        crate::services::pause::hold_expiry(ctx.shared);
        Ok(Reply::ok())
    }
}
