//! The engine: the command table (name, arity, flags, key positions, handler), dispatch
//! (`execute`, `lookup`), `call()`, MULTI/EXEC, the handler's [`Ctx`] and the
//! argument cursor. The command families (`crate::commands`) plug their handlers into it;
//! the services (`crate::services`) are what it and the handlers talk to.
//!
//! A request goes through `execute`: the name is looked up (case-insensitively) and arity
//! is checked against the table, which resolves it once into its table entry; then
//! `call()` (in `call.rs`) runs it, as it runs every command EXEC runs and every command a
//! script calls. `call` applies the caller's policy (auth, cluster routing, OOM, flags),
//! queues it inside MULTI, or locks the shards of the command's keys (from the table's key
//! positions) in ascending order, reads the clock once, and runs the handler, which parses
//! its arguments into a typed struct and applies it; then it counts the call (INFO
//! commandstats, errorstats, latencystats, SLOWLOG, LATENCY, MONITOR). Every family module
//! follows that `parse → apply` split through the `Command` trait, so argument errors are
//! produced in one place per command.
//!
//! In cluster mode, `commands::cluster::route` runs between the NOAUTH and OOM checks: a
//! command whose keys this node does not own gets `-MOVED`, keys in several slots
//! `-CROSSSLOT` (Redis's order and texts). With cluster mode off it is one test of a `None`.

pub mod args;
pub(crate) mod call;
pub(crate) mod docs;
pub mod next;
#[cfg(test)]
pub(crate) mod script_race;
pub mod table;
pub mod txn;

use std::sync::atomic::Ordering;
use std::time::Duration;

pub(crate) use call::{Caller, call};
pub use next::Next;
pub(crate) use next::Ran;

use bytes::{Bytes, BytesMut};

use crate::client::ClientState;
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::server::Shared;
use crate::services::notify;
use crate::store::Locked;
use table::CommandEntry;

pub use args::ArgCursor;
pub use table::{
    Channels, CmdFlags, CmdId, CommandSpec, CommandTable, FindKeys, InfoDoc, KeySpec, KeySpecDoc,
    LockMode, Roles,
};

/// What a handler works with: the server, the calling client, the locked shards and `now`.
///
/// A client's command's context is left undropped when it owns nothing (`Ctx::end`): a new
/// field that owns memory or a lock must be added to `Ctx::owns_nothing`, or it leaks.
pub struct Ctx<'a> {
    /// Server-wide state.
    pub shared: &'a Shared,
    /// The calling client.
    pub client: &'a mut ClientState,
    /// The shards this command holds.
    pub store: Locked<'a>,
    /// The command's time, read once (Unix ms).
    pub now_ms: u64,
    /// The same instant in ns (CL.THROTTLE).
    pub now_ns: u64,
    /// True while running the commands of an EXEC.
    pub in_exec: bool,
    /// A blocking command may block (a client outside MULTI, EXEC and scripts).
    pub may_block: bool,
    /// True while a script's `redis.call` runs the command (XREAD's BLOCK is refused there).
    pub in_script: bool,
    /// What the connection does after the reply (see [`Next`]): set by the handler (QUIT,
    /// MONITOR, PSYNC, WAIT, a blocking command that blocked…) and returned by
    /// `execute_may_block`; a command EXEC runs passes its `Close` on to EXEC's.
    pub next: Next,
    /// How long the reply is held (DEBUG SLEEP, FAULT LATENCY); counted as the command's
    /// time (see `call`).
    pub hold: Duration,
    /// FAULT DISCONNECT: close the connection after this reply.
    pub disconnect: bool,
    /// Keys written that blocked clients wait on, served once the locks are released.
    pub ready: Vec<(usize, Bytes)>,
    /// Set by a script command whose error reply came from a failed `redis.call`: that
    /// call counted the error already (see `call`).
    pub error_counted: bool,
    /// What this call propagates to replicas, (database, command) in order; fed to the
    /// stream before the locks are released (see `repl`).
    pub propagate: Vec<(usize, Vec<Bytes>)>,
    /// Keyspace notifications emitted, published once the locks are released.
    pub events: notify::Events,
}

impl<'a> Ctx<'a> {
    /// A context for `client` holding `store`, with no clock read yet (`now` 0), outside
    /// EXEC and scripts, that may not block, with nothing noted.
    pub(crate) fn new(shared: &'a Shared, client: &'a mut ClientState, store: Locked<'a>) -> Self {
        Ctx {
            shared,
            client,
            store,
            now_ms: 0,
            now_ns: 0,
            in_exec: false,
            may_block: false,
            in_script: false,
            next: Next::Continue,
            hold: Duration::ZERO,
            disconnect: false,
            ready: Vec::new(),
            error_counted: false,
            propagate: Vec::new(),
            events: notify::Events::new(shared),
        }
    }

    /// The client's selected database.
    pub fn db(&self) -> usize {
        self.client.db
    }

    /// Ends a client's command's context, kept in a `ManuallyDrop` for its command.
    /// Almost always it owns nothing by now (no shard held, the vectors never grown: `call`
    /// takes what they gather), and then dropping it would only run drop glue that finds
    /// nothing (an out-of-line call for the locks' `SmallVec`s and a capacity test per
    /// vector, ~45 instructions on every command): it is left undropped, which frees nothing
    /// because there is nothing to free. A context that owns anything is dropped as before.
    /// (It is taken by reference: taken by value, the context's 400 bytes were moved into
    /// this function first, a memcpy per command, more than the drop glue it saves.)
    ///
    /// # Safety
    /// `ctx` is not used again after this call (it may have been dropped).
    #[inline]
    pub(crate) unsafe fn end(ctx: &mut std::mem::ManuallyDrop<Self>) {
        if !ctx.owns_nothing() {
            // SAFETY: the caller uses the context no more.
            unsafe { std::mem::ManuallyDrop::drop(ctx) }
        }
    }

    /// True if dropping this context would free or release nothing: its only owned parts
    /// are the locks and the three vectors (`next` is taken before [`Ctx::end`]; the other
    /// fields are references and plain values).
    #[inline]
    fn owns_nothing(&self) -> bool {
        self.store.owns_nothing()
            && self.ready.capacity() == 0
            && self.propagate.capacity() == 0
            && self.events.owns_nothing()
            && matches!(self.next, Next::Continue)
    }
}

/// A command parsed into a typed struct, then applied.
///
/// The struct may borrow its arguments (`'a`, the request's lifetime: see
/// [`ArgCursor`]); one that owns what it parsed implements `Command<'_>` and runs through
/// [`run`], one that borrows runs through [`run_borrowed`].
pub trait Command<'a>: Sized {
    /// Parses the arguments after the command name. Arity is already checked.
    fn parse(args: &mut ArgCursor<'a>) -> CmdResult<Self>;
    /// Runs the command.
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply>;
}

/// A table handler: gets the full argument list (name first), borrowed from the request
/// (the connection's read buffer, a MULTI queue, a script's call).
pub type Handler = fn(&mut Ctx<'_>, &[&[u8]]) -> Reply;

/// The handler for any `Command`: parse the arguments after the name (and, for
/// subcommands, after the subcommand name), check that the parse consumed them all, then
/// apply. That check is the one place extra arguments become `ERR syntax error`: a `parse`
/// reads what it accepts and leaves the rest, and never checks for leftovers itself.
pub fn run<C: for<'x> Command<'x>>(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    parse_and_apply(ctx, args, 1, C::parse, C::apply)
}

/// `run` for a command whose struct borrows its arguments (`Get<'a>`): the table names it
/// through a closure, `|c, a| run_borrowed::<Get>(c, a)`, so that the borrow is the call's.
pub fn run_borrowed<'a, C: Command<'a>>(ctx: &mut Ctx<'_>, args: &'a [&'a [u8]]) -> Reply {
    parse_and_apply(ctx, args, 1, C::parse, C::apply)
}

/// `run` for subcommands: arguments start after the subcommand name.
pub fn run_sub<C: for<'x> Command<'x>>(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    parse_and_apply(ctx, args, 2, C::parse, C::apply)
}

/// A command whose variants share one struct (EXPIRE/PEXPIRE/EXPIREAT…, LPUSH/RPUSH…): the
/// table entry names the variant with an enum value, and `parse` receives it. The entry is
/// a closure, `|ctx, args| run_as::<Expire>(ctx, args, ExpireKind::Pexpire)`, so the
/// variant's name is what the table shows.
pub trait VariantCommand<'a>: Sized {
    /// The enum naming the variants.
    type Variant: Copy;
    /// Parses the arguments after the command name, for `variant`. Arity is already checked.
    fn parse(args: &mut ArgCursor<'a>, variant: Self::Variant) -> CmdResult<Self>;
    /// Runs the command.
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply>;
}

/// Whether a command's variant may write: the `_RO` twins (EVAL_RO, EVALSHA_RO, SORT_RO…)
/// are the same command refusing writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The plain command.
    ReadWrite,
    /// The `_RO` variant.
    ReadOnly,
}

/// Where a command's result goes: replied (SINTER, ZUNION…) or stored at a destination key,
/// its size replied (the `STORE` forms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Replied.
    Reply,
    /// Stored at the destination key (the first argument).
    Store,
}

/// `run` for a [`VariantCommand`] (owned or borrowing: the table calls it in a closure).
pub fn run_as<'a, C: VariantCommand<'a>>(
    ctx: &mut Ctx<'_>,
    args: &'a [&'a [u8]],
    variant: C::Variant,
) -> Reply {
    parse_and_apply(ctx, args, 1, |a| C::parse(a, variant), C::apply)
}

/// `run_sub` for a [`VariantCommand`].
pub fn run_sub_as<'a, C: VariantCommand<'a>>(
    ctx: &mut Ctx<'_>,
    args: &'a [&'a [u8]],
    variant: C::Variant,
) -> Reply {
    parse_and_apply(ctx, args, 2, |a| C::parse(a, variant), C::apply)
}

/// The one path from arguments to reply: parse what follows the first `skip` arguments,
/// refuse leftovers (`ERR syntax error`), apply.
fn parse_and_apply<'a, C>(
    ctx: &mut Ctx<'_>,
    args: &'a [&'a [u8]],
    skip: usize,
    parse: impl FnOnce(&mut ArgCursor<'a>) -> CmdResult<C>,
    apply: impl FnOnce(C, &mut Ctx<'_>) -> CmdResult<Reply>,
) -> Reply {
    let mut cursor = ArgCursor::new(args.get(skip..).unwrap_or(&[]));
    let parsed = parse(&mut cursor).and_then(|c| cursor.finish().map(|()| c));
    match parsed.and_then(|c| apply(c, ctx)) {
        Ok(r) => r,
        Err(e) => e.into(),
    }
}

/// Redis's reply to an unknown command, byte for byte (trailing space included).
pub fn unknown_command(args: &[&[u8]]) -> CmdError {
    let name = args.first().map(|n| printable(n, 128)).unwrap_or_default();
    let mut rest = String::new();
    for a in args.iter().skip(1) {
        if rest.len() >= 128 {
            break;
        }
        let room = 128 - rest.len();
        rest.push('\'');
        rest.push_str(&printable(a, room));
        rest.push_str("' ");
    }
    CmdError::UnknownCommand(format!(
        "ERR unknown command '{name}', with args beginning with: {rest}"
    ))
}

/// Text of a client argument inside an error line: C-string semantics (stops at NUL),
/// truncated, with CR/LF turned into spaces so the reply stays one line.
pub fn printable(b: &[u8], max: usize) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len()).min(max);
    String::from_utf8_lossy(&b[..end]).replace(['\r', '\n'], " ")
}

/// A resolved request: the table entry to run.
pub enum Lookup<'t> {
    /// Found; arity checked.
    Found(&'t CommandEntry),
    /// An error to reply (unknown command or subcommand, wrong arity), with the entry when
    /// the command is known (its `rejected_calls` count the error).
    Error(CmdError, Option<&'t CommandEntry>),
}

/// Looks up and arity-checks a request.
pub fn lookup<'t>(table: &'t CommandTable, args: &[&[u8]]) -> Lookup<'t> {
    let Some(entry) = args.first().and_then(|name| table.get_entry(name)) else {
        return Lookup::Error(unknown_command(args), None);
    };
    let entry = if entry.spec.subcommands.is_empty() || args.len() < 2 {
        entry
    } else {
        match table.sub_entry(entry, args[1]) {
            Some(sub) => sub,
            None => {
                return Lookup::Error(
                    CmdError::owned(format!(
                        "ERR unknown subcommand '{}'. Try {} HELP.",
                        printable(args[1], 128),
                        entry.spec.name.to_ascii_uppercase()
                    )),
                    None,
                );
            }
        }
    };
    let spec = entry.spec;
    let n = args.len() as i32;
    if (spec.arity > 0 && n != spec.arity) || (spec.arity < 0 && n < -spec.arity) {
        return Lookup::Error(CmdError::WrongArity(spec.full_name()), Some(entry));
    }
    Lookup::Found(entry)
}

/// Locks what `spec` needs for `args`. The key arguments' hashes are kept with the locks,
/// so the handler's lookups and writes do not hash them again.
pub fn lock_for<'a>(shared: &'a Shared, spec: &CommandSpec, args: &'a [&'a [u8]]) -> Locked<'a> {
    match spec.lock {
        LockMode::None | LockMode::Stepwise => shared.keyspace.lock_none(),
        LockMode::All => shared.keyspace.lock_all(),
        LockMode::Keys => match spec.keys {
            // Most commands have exactly one key, at index 1: skip the position iterator.
            KeySpec::Range {
                first: 1, last: 1, ..
            } if args.len() > 1 => shared.keyspace.lock_args([args[1]]),
            _ => shared
                .keyspace
                .lock_args(spec.keys.positions(args).map(|i| args[i])),
        },
    }
}

/// [`lock_for`] without waiting, into `into` (holding nothing yet: the command's `Ctx`'s
/// `store`, so the one-key case builds its locks in place). `Err` carries the shard indexes
/// wanted when another thread holds one of them (`engine::call` then sees whether a script
/// does).
#[inline]
pub fn try_lock_for<'a>(
    shared: &'a Shared,
    spec: &CommandSpec,
    args: &'a [&'a [u8]],
    into: &mut Locked<'a>,
) -> Result<(), smallvec::SmallVec<[usize; 8]>> {
    // Inline, the case of most commands (one key, at index 1): every command passes here,
    // and a call for the match alone cost about as much as the match.
    if let (
        LockMode::Keys,
        KeySpec::Range {
            first: 1, last: 1, ..
        },
        &[_, key, ..],
    ) = (spec.lock, spec.keys, args)
    {
        return into.try_take_key(key);
    }
    try_lock_general(shared, spec, args, into)
}

/// [`try_lock_for`] for every other lock mode and key spec.
#[inline(never)]
fn try_lock_general<'a>(
    shared: &'a Shared,
    spec: &CommandSpec,
    args: &'a [&'a [u8]],
    into: &mut Locked<'a>,
) -> Result<(), smallvec::SmallVec<[usize; 8]>> {
    match spec.lock {
        LockMode::None | LockMode::Stepwise => Ok(()),
        LockMode::All => {
            *into = shared.keyspace.try_lock_all()?;
            Ok(())
        }
        LockMode::Keys => match spec.keys {
            KeySpec::Range {
                first: 1, last: 1, ..
            } if args.len() > 1 => into.try_take_key(args[1]),
            _ => {
                // One key found by the general spec (EVAL/EVALSHA with one key, FCALL…)
                // takes the one-key path too.
                let mut positions = spec.keys.positions(args);
                let Some(first) = positions.next() else {
                    *into = shared.keyspace.try_lock_args(std::iter::empty())?;
                    return Ok(());
                };
                match positions.next() {
                    None => into.try_take_key(args[first]),
                    Some(second) => {
                        *into = shared.keyspace.try_lock_args(
                            [first, second]
                                .into_iter()
                                .chain(positions)
                                .map(|i| args[i]),
                        )?;
                        Ok(())
                    }
                }
            }
        },
    }
}

/// Redis's reply to a write on a read-only replica.
pub const READONLY: &str = "READONLY You can't write against a read only replica.";

/// Whether a write from `client` must be refused: this node is a read-only replica and
/// the client is not its master link.
#[inline]
pub fn read_only_replica(shared: &Shared, client: &ClientState) -> bool {
    !client.master_link
        && shared.keyspace.deletions().is_replica()
        && shared
            .config
            .read()
            .map(|c| c.repl.read_only)
            .unwrap_or(true)
}

/// Runs one request for a client and returns the reply (queueing it inside MULTI). A
/// blocking command does not block here: it answers as inside MULTI (see
/// `execute_may_block`).
///
/// Takes owned or borrowed arguments (tests, benchmarks and the fuzzers pass `Bytes`);
/// the connections pass slices of their read buffers to `execute_may_block`.
pub fn execute<A: AsRef<[u8]>>(shared: &Shared, client: &mut ClientState, args: &[A]) -> Reply {
    execute_request(shared, client, &args::borrowed(args), false).reply
}

/// `execute` for a connection: the reply with what the connection does next ([`Ran`]). A
/// blocking command that finds nothing returns [`Next::Block`] with its registered waiter
/// and a placeholder reply, and the connection waits for the waiter's reply (see
/// `blocking`).
pub(crate) fn execute_may_block(shared: &Shared, client: &mut ClientState, args: &[&[u8]]) -> Ran {
    execute_request(shared, client, args, true)
}

/// `execute_may_block` for a request of an event loop's batch: `plain` is
/// [`call::plain`] as the batch's previous command left it (the loop reads it when the
/// batch begins). A lean command (`CommandEntry::lean`) in a plain batch runs through
/// [`call::call_lean`] and, when nothing but its reply follows it, has its reply encoded
/// into `out` here (`None`: see [`run_lean`]); after any other command but a script command
/// (`CommandEntry::keeps_policy`) `plain` is read again, so the next command sees what this
/// one changed (CONFIG SET maxmemory, MULTI, ACL SETUSER…).
pub(crate) fn execute_in_batch(
    shared: &Shared,
    client: &mut ClientState,
    args: &[&[u8]],
    plain: &mut bool,
    out: &mut BytesMut,
) -> Option<Ran> {
    let entry = match lookup(&shared.table, args) {
        Lookup::Found(entry) => entry,
        Lookup::Error(e, entry) => return Some(refuse(shared, client, args, e, entry)),
    };
    if *plain && entry.lean {
        return run_lean(shared, client, entry, args, out);
    }
    let ran = run_entry(shared, client, entry, args, true);
    if !entry.keeps_policy {
        *plain = call::plain(shared, client);
    }
    Some(ran)
}

/// [`run_entry`] for a lean command in a plain batch, which encodes the reply into `out`
/// itself (in `resp`, unless CLIENT REPLY drops it) when the connection has nothing else
/// to do with it: `Next::Continue`, no hold, no disconnect, no push queue (the loop's own
/// checks, in its order). Then it returns `None`; otherwise the [`Ran`] for the loop.
/// The reply stays where its handler wrote it until it is encoded: returned through
/// `call_lean`, the context's block and `Ran` it was moved four times, each move read back
/// in wider pieces than it had just been written in, which the CPU cannot forward from its
/// store buffer (a stall of each move, about 2% of a pipelined GET's or SET's server time).
#[inline]
fn run_lean(
    shared: &Shared,
    client: &mut ClientState,
    entry: &CommandEntry,
    args: &[&[u8]],
    out: &mut BytesMut,
) -> Option<Ran> {
    let argv_mem: usize = args.iter().map(|a| a.len()).sum();
    client.info.set_last_cmd(&entry.spec.name);
    client.info.argv_mem.store(argv_mem, Ordering::Relaxed);
    // Written by the handler (through `call_lean`), encoded from here.
    let mut reply = Reply::Null;
    let (next, hold, disconnect) = {
        // As in `run_entry`.
        let mut ended =
            std::mem::ManuallyDrop::new(Ctx::new(shared, client, shared.keyspace.lock_none()));
        let unwinding = DroppedOnUnwind(&mut ended);
        let ctx = &mut *unwinding.0;
        ctx.may_block = true;
        call::call_lean(ctx, entry, args, &mut reply);
        let after = (std::mem::take(&mut ctx.next), ctx.hold, ctx.disconnect);
        std::mem::forget(unwinding);
        // SAFETY: `ended` is not used after this.
        unsafe { Ctx::end(&mut ended) };
        after
    };
    after_tracking(shared, client, entry);
    if matches!(next, Next::Continue)
        && hold.is_zero()
        && !disconnect
        && client.push_queue().is_none()
    {
        if !client.reply_suppressed() {
            reply.encode(client.resp, out);
        }
        reply.recycle();
        // `Continue` owns nothing: no drop glue to call.
        std::mem::forget(next);
        return None;
    }
    Some(Ran {
        reply,
        next,
        hold,
        disconnect,
    })
}

/// The client's part of a request: resolve it, keep CLIENT LIST's view, then [`call`].
fn execute_request(
    shared: &Shared,
    client: &mut ClientState,
    args: &[&[u8]],
    may_block: bool,
) -> Ran {
    match lookup(&shared.table, args) {
        Lookup::Found(entry) => run_entry(shared, client, entry, args, may_block),
        Lookup::Error(e, entry) => refuse(shared, client, args, e, entry),
    }
}

/// Answers a request [`lookup`] refused (unknown command or subcommand, wrong arity).
#[cold]
#[inline(never)]
fn refuse(
    shared: &Shared,
    client: &mut ClientState,
    args: &[&[u8]],
    e: CmdError,
    entry: Option<&CommandEntry>,
) -> Ran {
    client.info.clear_last_cmd();
    // Requests refused before authentication are not logged (nothing an unauthenticated
    // client sends is kept).
    if let Some(hooks) = &shared.test
        && client.authenticated
    {
        hooks.record(shared.clock.now_ms(), client, args);
    }
    Ran::reply(call::reject(shared, client, entry, e.into()))
}

/// Runs a resolved client's request: keeps CLIENT LIST's view, then [`call`] (a lean
/// command in a plain batch takes [`run_lean`] instead).
#[inline]
fn run_entry(
    shared: &Shared,
    client: &mut ClientState,
    entry: &CommandEntry,
    args: &[&[u8]],
    may_block: bool,
) -> Ran {
    // CLIENT LIST shows the command being run (Redis sets it at lookup, before any check).
    let argv_mem: usize = args.iter().map(|a| a.len()).sum();
    client.info.set_last_cmd(&entry.spec.name);
    client.info.argv_mem.store(argv_mem, Ordering::Relaxed);
    // The `Ctx` ends with this block, where it lies (`drop(ctx)` moved its few hundred
    // bytes first, a memcpy per command), and its drop glue runs only if it owns
    // something (`Ctx::end`, which takes it by reference for the same reason).
    let (reply, next, hold, disconnect) = {
        let mut ended =
            std::mem::ManuallyDrop::new(Ctx::new(shared, client, shared.keyspace.lock_none()));
        let unwinding = DroppedOnUnwind(&mut ended);
        let ctx = &mut *unwinding.0;
        ctx.may_block = may_block;
        // A tracking client's own invalidations wait for this reply (`client::tracking`).
        let current = ctx
            .client
            .tracking
            .then(|| crate::client::tracking::Current::enter(ctx.client.id()));
        let reply = call(ctx, entry, args, Caller::Client(args));
        drop(current);
        let next = std::mem::take(&mut ctx.next);
        let ran = (reply, next, ctx.hold, ctx.disconnect);
        // Not unwinding: the context ends below, dropped only if it owns something.
        std::mem::forget(unwinding);
        // SAFETY: `ended` is not used after this.
        unsafe { Ctx::end(&mut ended) };
        ran
    };
    after_tracking(shared, client, entry);
    Ran {
        reply,
        next,
        hold,
        disconnect,
    }
}

/// Drops a client's command's context if a panic unwinds past it (a bug in a command, caught
/// by the event loop, which closes the connection and goes on serving): the shards it holds
/// are then released as a plain drop would, where the `ManuallyDrop` of `Ctx::end` would
/// keep them locked for every other client. Forgotten on the normal path.
struct DroppedOnUnwind<'c, 'a>(&'c mut std::mem::ManuallyDrop<Ctx<'a>>);

impl Drop for DroppedOnUnwind<'_, '_> {
    fn drop(&mut self) {
        // SAFETY: only reached while unwinding out of `execute_request` (the normal path
        // forgets this guard), after which the context is never used again.
        unsafe { std::mem::ManuallyDrop::drop(self.0) }
    }
}

/// Client-side caching after a client's command: CLIENT CACHING lasts for one command (or
/// one transaction), and BCAST's changed keys go out, with the tracking table trimmed to
/// `tracking-table-max-keys` (Redis does both once per event-loop turn).
fn after_tracking(shared: &Shared, client: &mut ClientState, entry: &CommandEntry) {
    client.adopt_push_queue();
    if client.caching && client.multi.is_none() && !entry.spec.roles.contains(Roles::KEEPS_CACHING)
    {
        client.caching = false;
    }
    let tracking = shared.keyspace.tracking();
    if tracking.is_active() {
        let max_keys = shared
            .config
            .read()
            .map(|c| c.tracking_table_max_keys)
            .unwrap_or(0);
        tracking.after_command(max_keys, crate::services::pubsub::push_limit(shared));
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::mem::ManuallyDrop;

    use bytes::Bytes;

    use super::Ctx;
    use crate::client::ClientState;
    use crate::server::Shared;

    /// A server's shared state with the default configuration.
    pub(crate) fn shared() -> Shared {
        Shared::new(
            crate::config::Config::default(),
            crate::clock::Clock::system(),
        )
    }

    /// A registered client of `shared`.
    pub(crate) fn client(shared: &Shared) -> ClientState {
        let info = shared
            .clients
            .register("127.0.0.1:1".into(), "127.0.0.1:2".into());
        ClientState::new(info)
    }

    /// A lean command in a plain batch has its reply encoded where the loop would have
    /// encoded it (none under CLIENT REPLY OFF); anything else comes back to the loop.
    #[test]
    fn a_lean_command_of_a_plain_batch_is_encoded_in_place() {
        let shared = shared();
        let mut client = client(&shared);
        let mut plain = super::call::plain(&shared, &client);
        assert!(plain);
        let mut out = bytes::BytesMut::new();
        let mut batch = |client: &mut ClientState, args: &[&[u8]], out: &mut bytes::BytesMut| {
            super::execute_in_batch(&shared, client, args, &mut plain, out)
        };
        assert!(batch(&mut client, &[b"SET", b"k", b"v"], &mut out).is_none());
        assert!(batch(&mut client, &[b"GET", b"k"], &mut out).is_none());
        assert_eq!(&out[..], b"+OK\r\n$1\r\nv\r\n");
        client.reply_off = true;
        assert!(batch(&mut client, &[b"GET", b"k"], &mut out).is_none());
        assert_eq!(&out[..], b"+OK\r\n$1\r\nv\r\n");
        client.reply_off = false;
        // Not lean: the loop encodes it.
        let ran = batch(&mut client, &[b"PING"], &mut out).expect("not lean");
        assert!(matches!(ran.reply, super::Reply::Status(ref s) if s == "PONG"));
        // Refused before it ran: the same.
        let ran = batch(&mut client, &[b"GET"], &mut out).expect("refused");
        assert!(matches!(ran.reply, super::Reply::Error(_)));
        assert_eq!(&out[..], b"+OK\r\n$1\r\nv\r\n");
    }

    /// A panic in a command (caught by the event loop, which keeps serving) unwinds past
    /// a context kept in a `ManuallyDrop`: the guard drops it, so the shard it held is free
    /// for the next client, as a plain drop would leave it.
    #[test]
    fn a_panic_in_a_command_releases_the_shards_its_context_held() {
        let shared = shared();
        let mut client = client(&shared);
        let key: &[u8] = b"k";
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut ended =
                ManuallyDrop::new(Ctx::new(&shared, &mut client, shared.keyspace.lock_none()));
            let unwinding = super::DroppedOnUnwind(&mut ended);
            let ctx = &mut *unwinding.0;
            assert!(ctx.store.try_take_key(key).is_ok());
            panic!("a command's bug");
        }));
        assert!(unwound.is_err());
        assert!(
            shared.keyspace.try_lock_args([key]).is_ok(),
            "the shard the panicking command held is free"
        );
    }

    /// Ends `ctx` as `execute_request` does.
    fn end(ctx: Ctx<'_>) {
        let mut ended = ManuallyDrop::new(ctx);
        // SAFETY: `ended` is not used again.
        unsafe { Ctx::end(&mut ended) };
    }

    /// `Ctx::end` leaves undropped only a context that owns nothing: one holding a shard, or with a
    /// vector grown, is dropped, so the shard is free again and nothing leaks.
    #[test]
    fn a_context_is_forgotten_only_when_it_owns_nothing() {
        let shared = shared();
        let mut client = client(&shared);
        let key: &[u8] = b"k";

        let ctx = Ctx::new(&shared, &mut client, shared.keyspace.lock_none());
        assert!(ctx.owns_nothing(), "a fresh context owns nothing");
        end(ctx);

        let mut ctx = Ctx::new(&shared, &mut client, shared.keyspace.lock_none());
        assert!(ctx.store.try_take_key(key).is_ok());
        assert!(!ctx.owns_nothing(), "a held shard is owned");
        end(ctx);
        assert!(
            shared.keyspace.try_lock_args([key]).is_ok(),
            "the shard a context held is free once it ended"
        );

        let mut ctx = Ctx::new(&shared, &mut client, shared.keyspace.lock_none());
        ctx.ready.push((0, Bytes::from_static(b"k")));
        ctx.ready.clear();
        assert!(!ctx.owns_nothing(), "a grown vector is owned, even emptied");
        end(ctx);

        let mut ctx = Ctx::new(&shared, &mut client, shared.keyspace.lock_none());
        ctx.propagate.push((0, Vec::new()));
        assert!(!ctx.owns_nothing());
        end(ctx);

        let mut ctx = Ctx::new(&shared, &mut client, shared.keyspace.lock_none());
        ctx.next = super::Next::Close;
        assert!(
            !ctx.owns_nothing(),
            "a `next` left in place is dropped with it"
        );
        end(ctx);
    }
}
