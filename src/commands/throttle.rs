//! CL.THROTTLE: redis-cell's GCRA limiter, built in.
//!
//! A thin wrapper: the arithmetic lives in `limiter::gcra` (pure, no I/O); this file reads the
//! key's stored TAT with one probe, calls it with the command's `now`, writes the new TAT back
//! (only on allowed calls, as redis-cell does) and shapes the five-integer reply. The numeric
//! arguments are parsed once per thread while they repeat (`gcra::LastArgs`). The key is a plain
//! string holding the TAT in Unix nanoseconds, so GET, TTL, TYPE, DEL and WATCH see it as they
//! would on Redis with the module loaded.

use crate::engine::{CommandSpec as C, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::limiter::gcra::{self, ThrottleError};
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
    run,
)
.with_effect(crate::repl::effects::Effect::KeyState)
.with_reported_arity(-5)
.with_acl(&["@write"])];

thread_local! {
    /// This thread's last CL.THROTTLE arguments and what they parsed to: the next call with
    /// the same ones (a limiter's usual call) skips the parse, the checks and the derivation.
    static LAST_ARGS: std::cell::RefCell<gcra::LastArgs> =
        const { std::cell::RefCell::new(gcra::LastArgs::new()) };
}

fn cell_error(e: ThrottleError) -> CmdError {
    CmdError::owned(String::from_utf8_lossy(&e.error_line()).into_owned())
}

/// `CL.THROTTLE key max_burst count period [quantity]`, parsed and applied in one function:
/// no command struct is built, returned and moved into an `apply` (what `run_borrowed`
/// does for other commands), since there is nothing between the two steps here.
fn run(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match throttle(ctx, args.get(1..).unwrap_or_default()) {
        Ok(reply) => reply,
        Err(e) => e.into(),
    }
}

/// The command on its arguments after the name.
#[inline]
fn throttle(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult<Reply> {
    // Every error that depends only on the arguments, in redis-cell's order, before the key
    // is read; the values derived from them checked once, here.
    let (key, checked) = LAST_ARGS
        .with_borrow_mut(|last| last.parse_command(args))
        .map_err(cell_error)?;
    let db = ctx.db();
    let (now_ms, now_ns) = (ctx.now_ms, ctx.now_ns);
    // One probe: the stored TAT is read and, on an allowed call, replaced in place; a
    // refused call (the common one under load) writes nothing, as redis-cell's: no value,
    // no TTL, no timer wheel.
    let probe = ctx.store.probe(db, key, now_ms);
    let stored = match probe.value() {
        None => None,
        // What parse_stored_tat would make of the integer's text, without the text.
        Some(Value::Int(n)) if *n >= 0 => Some(*n),
        Some(Value::Int(_)) => return Err(cell_error(ThrottleError::OutOfRange)),
        Some(Value::Str(b) | Value::Raw(b)) => Some(gcra::parse_stored_tat(b).map_err(cell_error)?),
        Some(_) => return Err(CmdError::WrongType),
    };
    let now_ns = i64::try_from(now_ns).map_err(|_| CmdError::NotInteger)?;
    let d = checked.throttle(now_ns, stored).map_err(cell_error)?;
    if let Some((tat, ttl_ms)) = d.write {
        probe.write(key, Value::Int(tat), Some(now_ms.saturating_add(ttl_ms)));
        // redis-cell emits nothing; sluice reports the write as the `SET key tat PX ttl`
        // it is, so a listener sees what a script-based limiter would make it see.
        ctx.notify(crate::services::notify::class::STRING, "set", key);
        ctx.notify(crate::services::notify::class::GENERIC, "expire", key);
    }
    // The five integers held inside the reply: no vector to fill, encode and give back.
    Ok(Reply::FlagInts(
        d.limited,
        [d.limit, d.remaining, d.retry_after_s, d.reset_after_s],
    ))
}
