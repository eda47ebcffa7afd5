//! CL.THROTTLE: redis-cell's GCRA limiter, built in.
//!
//! A thin wrapper: the arithmetic lives in `limiter::gcra` (pure, no I/O); this file reads the
//! key's stored TAT, calls it with the command's `now`, writes the new TAT back (only on
//! allowed calls, as redis-cell does) and shapes the five-integer reply. The key is a plain
//! string holding the TAT in Unix nanoseconds, so GET, TTL, TYPE, DEL and WATCH see it as they
//! would on Redis with the module loaded.

use crate::engine::{ArgCursor, Command, CommandSpec as C, Ctx, run_borrowed};
use crate::error::{CmdError, CmdResult};
use crate::limiter::gcra::{self, CheckedArgs, ThrottleError};
use crate::protocol::Reply;
use crate::store::Value;

/// The throttle command. Arity -1 for dispatch, as Redis registers module commands, so that
/// a short argument list gets redis-cell's usage error rather than Redis's arity error;
/// COMMAND reports -5 (the real minimum) for clients that read it.
///
/// Flagged `denyoom` (redis-cell registers only `write`): a call on a new key creates one, so
/// under `maxmemory` with `noeviction` a flood of new keys must be refused, not stored.
pub(crate) static COMMANDS: &[C] = &[C::new(
    "cl.throttle",
    -1,
    &["write", "denyoom"],
    C::keys(1, 1, 1),
    |c, a| run_borrowed::<Throttle>(c, a),
)
.with_effect(crate::repl::effects::Effect::KeyState)
.with_reported_arity(-5)
.with_acl(&["@write"])];

fn cell_error(e: ThrottleError) -> CmdError {
    CmdError::owned(String::from_utf8_lossy(&e.error_line()).into_owned())
}

/// `CL.THROTTLE key max_burst count period [quantity]`
#[derive(Debug)]
pub(crate) struct Throttle<'a> {
    key: &'a [u8],
    /// Checked and derived once, here (the GCRA step does not derive them again).
    args: CheckedArgs,
}

impl<'a> Command<'a> for Throttle<'a> {
    fn parse(a: &mut ArgCursor<'a>) -> CmdResult<Self> {
        let rest = a.rest();
        let (_, args) = gcra::parse_command_checked(rest).map_err(cell_error)?;
        // The key is the first argument (parse_command accepted it), borrowed.
        let key = rest.first().copied().unwrap_or_default();
        Ok(Throttle { key, args })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let (now_ms, now_ns) = (ctx.now_ms, ctx.now_ns);
        let args = &self.args;
        // One lookup: the stored TAT is read and, on an allowed call, replaced in place.
        let decision = ctx.store.update(db, self.key, now_ms, |stored| {
            let stored = match stored {
                None => None,
                // What parse_stored_tat would make of the integer's text, without the text.
                Some(Value::Int(n)) if *n >= 0 => Some(*n),
                Some(Value::Int(_)) => return Err(cell_error(ThrottleError::OutOfRange)),
                Some(Value::Str(b) | Value::Raw(b)) => {
                    Some(gcra::parse_stored_tat(b).map_err(cell_error)?)
                }
                Some(_) => return Err(CmdError::WrongType),
            };
            let now_ns = i64::try_from(now_ns).map_err(|_| CmdError::NotInteger)?;
            let decision = args.throttle(now_ns, stored).map_err(cell_error)?;
            let write = decision
                .write
                .map(|(tat, ttl_ms)| (Value::Int(tat), Some(now_ms.saturating_add(ttl_ms))));
            Ok((decision, write))
        })?;
        if decision.write.is_some() {
            // redis-cell emits nothing; sluice reports the write as the `SET key tat PX ttl`
            // it is, so a listener sees what a script-based limiter would make it see.
            ctx.notify(crate::services::notify::class::STRING, "set", self.key);
            ctx.notify(crate::services::notify::class::GENERIC, "expire", self.key);
        }
        // The five integers held inside the reply: no vector to fill, encode and give back.
        Ok(Reply::FlagInts(
            decision.limited,
            [
                decision.limit,
                decision.remaining,
                decision.retry_after_s,
                decision.reset_after_s,
            ],
        ))
    }
}
