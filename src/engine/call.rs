//! The one path every command runs through: `call`, for a client's request, a command
//! EXEC runs from its queue, and a script's `redis.call` / `redis.pcall` alike.
//!
//! `call` owns what Redis's `processCommand` + `call()` own: the policy that may refuse a
//! command for its caller (authentication, `no-multi` inside MULTI, the ACL check of the
//! command, its keys and its channels, cluster routing, OOM,
//! the RESP2 subscribed context, `noscript` and writes from read-only scripts or on a
//! read-only replica), running the handler, noting what it propagates to replicas, and the
//! accounting after it (INFO commandstats / errorstats / latencystats,
//! SLOWLOG, LATENCY, MONITOR). The callers only do what is theirs: `execute` resolves the
//! request and keeps CLIENT LIST's view; EXEC checks WATCH and takes every lock; a script
//! host keeps its held shards and turns errors into Lua values.
//!
//! On an event loop, what that policy reads is read once per batch of a connection's
//! requests ([`plain`]); while it admits everything, the batch's keyed data commands
//! (`CommandSpec::is_lean`) run through [`call_lean`], which skips the checks, and any
//! other command but a script command (`CommandSpec::keeps_batch_policy`: a script calls
//! only commands that leave it) has it read again before the next command runs.
//!
//! A command is resolved once (`CommandTable` entry): MULTI queues the entry's id, EXEC runs
//! that entry, and statistics are counted into it. What Redis decides by comparing handler
//! pointers (EXEC, the commands a subscribed RESP2 client may send…) is the entry's
//! [`Roles`], given once when the table is built, not a comparison of names per command.
//!
//! Accounting follows Redis 7.0.15: a refused command counts `rejected_calls`, one that ran
//! and replied an error `failed_calls`; every error reply counts once in
//! `total_error_replies` and under its prefix in errorstats. A script's error that came from
//! a failed `redis.call` was counted by that call, so the script command counts only as
//! failed, as Redis's `ignore_error_stats_update` does.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::clock::Tick;

use crate::client::ClientState;
use crate::commands::cluster;
use crate::engine::table::CommandEntry;
use crate::engine::{CmdFlags, Ctx, Next, Roles, lock_for, try_lock_for};
use crate::protocol::Reply;
use crate::server::Shared;
use crate::services::{acl, blocking, maxmemory, monitor, notify};

/// Who runs the command.
#[derive(Debug)]
pub(crate) enum Caller<'r, 'a> {
    /// A client's request: `call` checks it, queues it inside MULTI, or locks its shards
    /// and runs it. The `Ctx` comes with no shard held; the arguments are given again with
    /// the lifetime of the locks, which keep the key arguments' hashes.
    Client(&'a [&'a [u8]]),
    /// EXEC running a queued command with the transaction's locks and `now`.
    Exec,
    /// A script's `redis.call` / `redis.pcall`, with the script's locks and `now`.
    Script(&'r mut ScriptRules),
}

/// What a script's calls are held to, and what `call` tells the script host back.
#[derive(Debug, Default)]
pub(crate) struct ScriptRules {
    /// Writes are refused (`*_RO`, `no-writes`).
    pub(crate) read_only: bool,
    /// `allow-oom`: commands that may grow memory run past maxmemory.
    pub(crate) allow_oom: bool,
    /// Cluster mode: the one slot the script's calls may touch, once known.
    pub(crate) slot: Option<u16>,
    /// Cluster mode: the calls may touch several slots.
    pub(crate) cross_slot_ok: bool,
    /// The protocol the script speaks (`redis.setresp`).
    pub(crate) resp: u8,
    /// A call wrote: the script can no longer be killed.
    pub(crate) wrote: bool,
    /// The last error a call replied (already counted in the error statistics).
    pub(crate) last_error: Option<String>,
}

const DEBUG_NOT_ALLOWED: &str = "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";
const NOT_IN_MULTI: &str = "ERR Command not allowed inside a transaction";
const NOT_FROM_SCRIPT: &str = "ERR This Redis command is not allowed from script";
const RO_SCRIPT: &str = "ERR Write commands are not allowed from read-only scripts.";

/// Runs `entry` with `args` (name first) for `caller` and returns its reply.
pub(crate) fn call<'a>(
    ctx: &mut Ctx<'a>,
    entry: &CommandEntry,
    args: &[&[u8]],
    mut caller: Caller<'_, 'a>,
) -> Reply {
    let shared = ctx.shared;
    let spec = entry.spec;
    // Time a command asked to be held (DEBUG SLEEP, FAULT LATENCY) counts as its own, as
    // a real sleep in Redis would: SLOWLOG and LATENCY see it. What earlier commands of the
    // batch asked for is set aside once the command is past its checks, then added back.
    let held_before;
    // Kept to the end of the reply: cluster routing's guard, the busy announcement.
    let mut _routed = None;
    let mut _announced = None;
    // Where the previous command of this batch ended (see `clock::lap`); taken now, so a
    // command that stops early (queued, refused) leaves none for the next.
    let mut lap = crate::clock::take_lap();
    let started = match &mut caller {
        Caller::Client(keys) => {
            let keys: &'a [&'a [u8]] = keys;
            match client_policy(ctx, entry, args) {
                Ok(guard) => _routed = Some(guard),
                Err(reply) => return reply,
            }
            if ctx.client.multi.is_some() && !spec.immediate {
                queue(ctx.client, entry, args);
                return Reply::status("QUEUED");
            }
            held_before = std::mem::take(&mut ctx.hold);
            if let Some(hooks) = &shared.test
                && let Some(reply) =
                    hooks.check(spec.name.split('|').next().unwrap_or(spec.name), ctx)
            {
                account(ctx, entry, args, &reply, 0, &caller);
                ctx.hold = held_before;
                return reply;
            }
            // A script is marked busy, with the shards it will hold, before it takes them,
            // so commands arriving meanwhile for those shards wait at the busy gate instead
            // of blocking their thread on a shard a long script keeps.
            _announced = entry.spec.runs_script().then(|| {
                let held = crate::commands::scripting::shards_to_hold(shared, spec, keys);
                shared
                    .scripts
                    .busy
                    .announce_holding(held, lap.unwrap_or_else(Tick::now))
            });
            // Passing the busy gate was no promise: a script may have taken a shard this
            // command needs since. Waiting on its lock would hold this thread (and every
            // connection of its loop) for the whole script, where Redis waits for a short
            // script and answers -BUSY past busy-reply-threshold; so a connection that can
            // wait goes back to the gate, which does that. Another command holding the
            // shard lets go within microseconds: that wait blocks, as it always did.
            match try_lock_for(shared, spec, keys, &mut ctx.store) {
                Ok(()) => {}
                Err(wanted) => {
                    // The wait below is not the command's own time.
                    lap = None;
                    // This command's own announcement is not what it waits for.
                    drop(_announced.take());
                    if ctx.may_block && shared.scripts.busy.blocking(Some(&wanted)).is_some() {
                        ctx.hold = held_before;
                        ctx.next = Next::Regate;
                        return Reply::Null;
                    }
                    _announced = entry.spec.runs_script().then(|| {
                        let held = crate::commands::scripting::shards_to_hold(shared, spec, keys);
                        shared.scripts.busy.announce_holding(held, Tick::now())
                    });
                    ctx.store = lock_for(shared, spec, keys);
                }
            }
            if entry.spec.runs_script() {
                // After the blocked clients a writer is serving on these shards, as in Redis.
                blocking::wait_for_serving(shared, &mut ctx.store, || lock_for(shared, spec, keys));
            }
            // One clock read (or the previous command's end) gives the command's `now`
            // and the start of its timing.
            let started = lap.unwrap_or_else(Tick::now);
            let now_ns = shared.clock.now_ns_at(started);
            // For a replica's master link no key has expired: the master's DELs expire them.
            let now_ns = if ctx.client.master_link { 0 } else { now_ns };
            ctx.now_ns = now_ns;
            ctx.now_ms = now_ns / 1_000_000;
            // A slot being migrated or imported: its keys are checked now that they are
            // locked (see `commands::cluster::check_moving_keys`).
            if let Some((slot, migrating)) = ctx.client.cluster_check.take()
                && let Some(reply) =
                    crate::commands::cluster::check_moving_keys(ctx, spec, args, slot, migrating)
            {
                return reject(shared, ctx.client, Some(entry), reply);
            }
            started
        }
        Caller::Exec => {
            if spec.has(CmdFlags::NO_MULTI) {
                return reject(
                    shared,
                    ctx.client,
                    Some(entry),
                    Reply::Error(NOT_IN_MULTI.into()),
                );
            }
            // The rules may have changed since the command was queued (Redis's execCommand).
            if let Err(denied) = shared.acl.check(&ctx.client.user, entry, args) {
                shared.acl.log_denied(
                    ctx.client,
                    entry,
                    args,
                    denied,
                    acl::log::Context::Multi,
                    shared.clock.now_ms(),
                );
                let text = denied.exec_error();
                count_error(shared, &text);
                return Reply::Error(text.into());
            }
            held_before = std::mem::take(&mut ctx.hold);
            lap.unwrap_or_else(Tick::now)
        }
        Caller::Script(rules) => {
            if let Some(refused) = script_policy(shared, ctx.client, entry, args, rules) {
                // Counted here, as Redis's scriptCall does (the script's own error reply,
                // which starts with this one, is then not counted again).
                entry.stats.rejected();
                if let Reply::Error(text) = &refused {
                    count_error(shared, text);
                    rules.last_error = Some(text.to_string());
                }
                return refused;
            }
            held_before = std::mem::take(&mut ctx.hold);
            Tick::now()
        }
    };
    if entry.spec.runs_script() && !matches!(caller, Caller::Script(_)) {
        // Scripts are `skip_monitor`, but Redis shows the script command itself before the
        // commands it calls.
        feed_monitors(ctx, entry, args, false);
    }
    let mut reserved = None;
    let reply = run(ctx, entry, args, &mut caller, &mut reserved);
    if matches!(caller, Caller::Client(_)) && matches!(ctx.next, Next::Regate) {
        // The handler found a script on a shard it locks by itself and ran nothing (see
        // `back_to_gate`): not a call; the request goes through the busy gate again.
        ctx.hold = held_before;
        return reply;
    }
    let ended = Tick::now();
    // A script's calls are timed each on its own: the Lua run between two calls is not
    // the second call's time.
    if !matches!(caller, Caller::Script(_)) {
        crate::clock::lap(ended);
    }
    let usec = took_usec(ended.ns_since(started), ctx.hold);
    if !held_before.is_zero() {
        ctx.hold += held_before;
    }
    account(ctx, entry, args, &reply, usec, &caller);
    if matches!(caller, Caller::Client(_)) {
        // Clients blocked on keys the command wrote are served (their pops emit their own
        // events) after its statistics and slow log entry, before its reply goes out and
        // before the next command runs (Redis's handleClientsBlockedOnKeys after `call`).
        if !ctx.ready.is_empty() {
            let ready = std::mem::take(&mut ctx.ready);
            blocking::serve(ctx.shared, ready);
            // Serving them is not the next command's time.
            crate::clock::lap(Tick::now());
        }
    }
    drop(reserved);
    // A script's end (a script command's, or EXEC's, which may run one): the ready keys
    // whose serve met its shards are served now that it is no longer marked running
    // (`blocking::serve_deferred`).
    if matches!(caller, Caller::Client(_))
        && (spec.runs_script() || spec.roles.contains(Roles::EXEC))
    {
        drop(_announced.take());
        blocking::serve_deferred(shared);
    }
    if ctx.client.tracking {
        remember_read(ctx, entry, args, &caller);
    }
    if let Caller::Script(rules) = &mut caller
        && let Reply::Error(text) = &reply
    {
        rules.last_error = Some(text.to_string());
    }
    reply
}

/// Whether every per-command check [`call`] would make on a lean command
/// (`CommandEntry::lean`) passes for `client` by the state alone, and nothing `call` adds
/// around such a command is wanted: read once per batch of a connection's requests (and
/// again after any command that is neither lean nor a script command, which may have
/// changed it), it lets the batch's lean commands run through [`call_lean`].
///
/// What it reads changes only by a command: this client's own (AUTH, MULTI, CLIENT
/// TRACKING, SUBSCRIBE…, none of them lean or callable from scripts, so the batch reads it
/// again before its next command) or another client's (CONFIG SET, ACL SETUSER, MONITOR, REPLICAOF…), which Redis,
/// serving one client's batch at a time, would also apply between this client's batches;
/// or by the server between batches (a failed background save: Redis's cron). What can
/// change while a command runs (blocked clients, replicas, keyspace notifications' classes,
/// a running script's shards, SLOWLOG's threshold) is still checked per command.
pub(crate) fn plain(shared: &Shared, client: &ClientState) -> bool {
    let (min_replicas, _) = shared.live.min_replicas();
    // `client_policy`'s checks, in its order (test mode's hooks are `call_lean`'s own).
    client.authenticated
        && client.multi.is_none()
        && !client.master_link
        && shared.acl.unrestricted(&client.user)
        && shared.cluster.is_none()
        && client.cluster_check.is_none()
        && shared.live.maxmemory() == 0
        && !client.tracking
        && !crate::services::persist::may_refuse_writes(shared)
        && min_replicas == 0
        && !crate::engine::read_only_replica(shared, client)
        && !client.subscribed()
        // `account`'s.
        && shared.live.latency_threshold_ms() == 0
        && !shared.monitors.active()
}

/// [`call`] for a client's lean command (`CommandEntry::lean`) in a plain batch
/// ([`plain`]): `client_policy` would refuse nothing and the command is not queued (no
/// MULTI), no script is announced, there is no slot to check, no read to remember for
/// tracking and nothing to show MONITOR; what is left is test mode's command log and faults,
/// the locks, the clock, the handler and its accounting.
///
/// The reply is written over `reply` (the caller's `Reply::Null`, which it encodes from
/// there), not returned: returned, it was moved once more, through a copy that split its
/// tag from the rest and read the rest back in overlapping pieces, which stalls on the
/// store buffer.
pub(crate) fn call_lean<'a>(
    ctx: &mut Ctx<'a>,
    entry: &CommandEntry,
    args: &'a [&'a [u8]],
    reply: &mut Reply,
) {
    let shared = ctx.shared;
    let spec = entry.spec;
    let client = Caller::Client(args);
    if let Some(hooks) = &shared.test {
        hooks.record(
            shared.clock.now_ms(),
            ctx.client,
            &monitor::redact(spec.redaction, args),
        );
        if let Some(early) = hooks.check(spec.name.split('|').next().unwrap_or(spec.name), ctx) {
            // As in `call`: a command that stops early leaves no start for the next.
            crate::clock::interrupt();
            account(ctx, entry, args, &early, 0, &client);
            *reply = early;
            return;
        }
    }
    // A running script's shard: back to the busy gate, as in `call`.
    if let Err(wanted) = try_lock_for(shared, spec, args, &mut ctx.store) {
        // The wait is not this command's time, and other commands ran meanwhile: its
        // `now` and its timing start after it.
        crate::clock::interrupt();
        if ctx.may_block && shared.scripts.busy.blocking(Some(&wanted)).is_some() {
            ctx.next = Next::Regate;
            *reply = Reply::Null;
            return;
        }
        ctx.store = lock_for(shared, spec, args);
    }
    // The lean run's `now` and timing (see `clock::lean_start`): one clock read per run.
    let started = crate::clock::lean_start();
    let now_ns = shared.clock.now_ns_at(started.now);
    ctx.now_ns = now_ns;
    ctx.now_ms = now_ns / 1_000_000;
    let mut reserved = None;
    // Over the caller's placeholder, which owns nothing: a plain assignment would call the
    // reply's drop glue on it, out of line, for every command.
    std::mem::forget(std::mem::replace(
        reply,
        run(ctx, entry, args, &mut Caller::Client(args), &mut reserved),
    ));
    // Only handlers that lock by themselves go back to the gate; none is lean.
    debug_assert!(!matches!(ctx.next, Next::Regate), "{}", spec.name);
    let usec = took_usec(crate::clock::lean_end(started), ctx.hold);
    account(ctx, entry, args, reply, usec, &client);
    if !ctx.ready.is_empty() {
        let ready = std::mem::take(&mut ctx.ready);
        blocking::serve(shared, ready);
        crate::clock::lap(Tick::now());
    }
    drop(reserved);
}

/// For a handler that takes shard locks by itself (EXEC, SCAN, UNWATCH …) and found one of
/// `wanted` held: true if a running script holds it and the client's connection can send
/// the request back to the busy gate (`ctx.next` is then `Next::Regate`; the handler must
/// return at once, having changed nothing). The gate then waits for a young script or
/// answers `-BUSY` past `busy-reply-threshold`, where waiting on the lock would hold the
/// thread, and every connection of its loop, for the whole script. False: wait on the lock
/// (another command's short hold, or a caller that cannot go back: EXEC's and a script's
/// own calls, a connection that cannot wait).
pub(crate) fn back_to_gate(ctx: &mut Ctx<'_>, wanted: &[usize]) -> bool {
    let send_back = ctx.may_block
        && !ctx.in_exec
        && !ctx.in_script
        && ctx.shared.scripts.busy.blocking(Some(wanted)).is_some();
    if send_back {
        ctx.next = Next::Regate;
    }
    send_back
}

/// Client-side caching: a read by a tracking client (default mode) remembers its keys for
/// invalidation, as Redis's `call` does. A script's reads remember the keys the script
/// declared, once it ends; the script commands themselves remember nothing else.
fn remember_read(ctx: &mut Ctx<'_>, entry: &CommandEntry, args: &[&[u8]], caller: &Caller<'_, '_>) {
    let spec = entry.spec;
    let read = spec.has(CmdFlags::READONLY) && !spec.has(CmdFlags::PUBSUB);
    if matches!(caller, Caller::Script(_)) {
        ctx.client.script_read |= read;
        return;
    }
    let remember = if spec.runs_script() {
        std::mem::take(&mut ctx.client.script_read)
    } else {
        read
    };
    if !remember {
        return;
    }
    let Ok(mode) = ctx.client.info.tracking.lock() else {
        return;
    };
    let caching = ctx.client.caching;
    if mode.bcast || (mode.optin && !caching) || (mode.optout && caching) {
        return;
    }
    drop(mode);
    ctx.shared.keyspace.tracking().remember(
        ctx.client.id(),
        spec.keys
            .positions(args)
            .filter_map(|i| args.get(i))
            .map(|k| &k[..]),
    );
}

/// The handler, with what the caller changes around it.
/// For a client's command that made blocked clients ready, it also gives the reservation of
/// their shards (`blocking::reserve`) in `reserved`, to hold until `call` has served them.
/// (Not returned beside the reply: a tuple is one more move of the reply, read back in
/// wider pieces than the handler wrote it, which stalls on the store buffer.)
#[inline(always)]
fn run<'a>(
    ctx: &mut Ctx<'a>,
    entry: &CommandEntry,
    args: &[&[u8]],
    caller: &mut Caller<'_, '_>,
    reserved: &mut Option<blocking::Reserved<'a>>,
) -> Reply {
    let spec = entry.spec;
    let reply = match caller {
        Caller::Script(rules) => {
            let client_resp = std::mem::replace(&mut ctx.client.resp, rules.resp);
            // Blocking commands called from a script answer at once (Redis's DENY_BLOCKING).
            let may_block = std::mem::replace(&mut ctx.may_block, false);
            let in_script = std::mem::replace(&mut ctx.in_script, true);
            let reply = (spec.handler)(ctx, args);
            ctx.may_block = may_block;
            ctx.in_script = in_script;
            ctx.client.resp = client_resp;
            reply
        }
        Caller::Client(_) | Caller::Exec => (spec.handler)(ctx, args),
    };
    blocking::note_write(ctx, spec, args);
    crate::repl::effects::note(ctx, spec, entry.spec.effect, args, &reply);
    if matches!(caller, Caller::Client(_)) {
        // Fed while the locks are held, so writes to one key reach the replication stream
        // in the order they were applied (EXEC feeds its own within its lock hold).
        // Tested before taking: moving an empty vector out and dropping it costs a call
        // of its drop glue, on every command.
        if !ctx.propagate.is_empty() {
            let effects = std::mem::take(&mut ctx.propagate);
            ctx.shared.repl.propagate(&effects);
        }
        // The key events the shards logged are taken while the shards are still held, then
        // the locks are dropped before anything else. Notifications go out with no lock
        // held; the blocked clients the command made ready are served once it has been
        // accounted for (`call`).
        ctx.take_store_events();
        // Reserved while the locks are still held: no script runs on these shards before
        // the blocked clients are served (see `blocking::reserve`).
        let shared = ctx.shared;
        if !ctx.ready.is_empty() {
            *reserved = Some(blocking::reserve(shared, &ctx.ready));
        }
        ctx.store.release();
        notify::publish_taken(shared, &mut ctx.events);
    }
    reply
}

/// A client's request before it runs or is queued: Redis's `processCommand` checks, in its
/// order. `Ok` carries cluster routing's guard, held until the reply.
fn client_policy<'s>(
    ctx: &mut Ctx<'s>,
    entry: &CommandEntry,
    args: &[&[u8]],
) -> Result<cluster::Routed<'s>, Reply> {
    let shared = ctx.shared;
    let spec = entry.spec;
    let client = &mut *ctx.client;
    // Before authentication, as in Redis's processCommand.
    if entry.spec.roles.contains(Roles::PROTECTED)
        && !shared
            .config()
            .debug_command()
            .admits(client.info.is_local())
    {
        return Err(reject(
            shared,
            client,
            Some(entry),
            Reply::Error(DEBUG_NOT_ALLOWED.into()),
        ));
    }
    if !client.authenticated && !spec.has(CmdFlags::NO_AUTH) && !shared.acl.default_nopass() {
        return Err(reject(
            shared,
            client,
            Some(entry),
            Reply::Error("NOAUTH Authentication required.".into()),
        ));
    }
    // Requests refused before authentication are not logged (nothing an unauthenticated
    // client sends is kept), and secrets are logged as `(redacted)`, as MONITOR shows them.
    if let Some(hooks) = &shared.test {
        hooks.record(
            shared.clock.now_ms(),
            client,
            &monitor::redact(spec.redaction, args),
        );
    }
    if client.multi.is_some() && spec.has(CmdFlags::NO_MULTI) {
        return Err(reject(
            shared,
            client,
            Some(entry),
            Reply::Error(NOT_IN_MULTI.into()),
        ));
    }
    // ACL: the user may run this command on these keys and channels (Redis checks it here,
    // after authentication and MULTI's refusals, before cluster routing).
    if !client.master_link
        && let Err(denied) = shared.acl.check(&client.user, entry, args)
    {
        let context = if client.multi.is_some() {
            acl::log::Context::Multi
        } else {
            acl::log::Context::Toplevel
        };
        shared
            .acl
            .log_denied(client, entry, args, denied, context, shared.clock.now_ms());
        let text = denied.client_error(spec.name);
        return Err(reject(
            shared,
            client,
            Some(entry),
            Reply::Error(text.into()),
        ));
    }
    // Cluster mode: MOVED / CROSSSLOT, or the guard to hold until the reply (see cluster.rs).
    let routed = match cluster::route(shared, client, entry, args) {
        Ok(guard) => guard,
        Err(reply) => return Err(reject(shared, client, Some(entry), reply)),
    };
    let over = maxmemory::check(shared, client, entry);
    // Invalidations of keys evicted just now go before the reply, as in Redis.
    if client.tracking
        && let Some(q) = client.push_queue()
    {
        q.release_held();
    }
    if let Some(reply) = over {
        return Err(reject(shared, client, Some(entry), reply));
    }
    // MISCONF: writes refused after a failed background save (see persist.rs).
    if let Some(reply) = crate::services::persist::misconf(shared, spec) {
        return Err(reject(shared, client, Some(entry), reply));
    }
    // NOREPLICAS: writes (an EXEC that queued one too) refused on a master without enough
    // good replicas (`min-replicas-to-write`, `min-replicas-max-lag`).
    let (needed, _) = shared.live.min_replicas();
    if needed > 0
        && !client.master_link
        && (spec.has(CmdFlags::WRITE)
            || (spec.roles.contains(Roles::EXEC) && queued_write(shared, client)))
        && !shared.repl.enough_good_replicas(needed)
    {
        return Err(reject(
            shared,
            client,
            Some(entry),
            Reply::Error(NOREPLICAS.into()),
        ));
    }
    if spec.has(CmdFlags::WRITE) && crate::engine::read_only_replica(shared, client) {
        return Err(reject(
            shared,
            client,
            Some(entry),
            Reply::Error(crate::engine::READONLY.into()),
        ));
    }
    // A RESP2 connection that is subscribed only takes what Redis takes in that context.
    if client.resp == 2
        && client.subscribed()
        && !entry.spec.roles.contains(Roles::WHILE_SUBSCRIBED)
    {
        let text = format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            spec.full_name()
        );
        return Err(reject(
            shared,
            client,
            Some(entry),
            Reply::Error(text.into()),
        ));
    }
    Ok(routed)
}

/// Redis's reply to a write on a master without enough good replicas.
pub(crate) const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

/// Whether the client's MULTI queue holds a write.
fn queued_write(shared: &Shared, client: &ClientState) -> bool {
    client.multi.as_ref().is_some_and(|queue| {
        queue.ids().any(|cmd| {
            shared
                .table
                .entry(crate::engine::table::CmdId(cmd))
                .is_some_and(|e| e.spec.has(CmdFlags::WRITE))
        })
    })
}

/// A script's call: refused as Redis refuses it from scripts (the reply text), or allowed.
fn script_policy(
    shared: &Shared,
    client: &ClientState,
    entry: &CommandEntry,
    args: &[&[u8]],
    rules: &mut ScriptRules,
) -> Option<Reply> {
    let spec = entry.spec;
    // Commands that lock shards themselves would wait forever on the locks the script holds.
    if !spec.callable_from_scripts() {
        return Some(Reply::Error(NOT_FROM_SCRIPT.into()));
    }
    if let Err(denied) = shared.acl.check(&client.user, entry, args) {
        shared.acl.log_denied(
            client,
            entry,
            args,
            denied,
            acl::log::Context::Lua,
            shared.clock.now_ms(),
        );
        return Some(Reply::Error(
            format!("ERR The user executing the script {}", denied.message()).into(),
        ));
    }
    let writes = spec.has(CmdFlags::WRITE);
    // A read-only script may not call what may replicate either (PUBLISH…), as in Redis.
    if (writes || spec.roles.contains(Roles::MAY_REPLICATE)) && rules.read_only {
        return Some(Reply::Error(RO_SCRIPT.into()));
    }
    if writes && crate::engine::read_only_replica(shared, client) {
        return Some(Reply::Error(crate::engine::READONLY.into()));
    }
    if writes {
        let (needed, _) = shared.live.min_replicas();
        if needed > 0 && !shared.repl.enough_good_replicas(needed) {
            return Some(Reply::Error(NOREPLICAS.into()));
        }
    }
    let maxmemory = shared.live.maxmemory();
    if maxmemory > 0
        && !rules.allow_oom
        && spec.has(CmdFlags::DENYOOM)
        && crate::alloc_stats::allocated() > maxmemory
    {
        return Some(Reply::Error(crate::store::evict::OOM_ERROR.into()));
    }
    if writes {
        rules.wrote = true;
    }
    cluster::script_check(
        shared,
        client,
        spec,
        args,
        &mut rules.slot,
        rules.cross_slot_ok,
    )
}

/// Queues a command inside MULTI: its resolved entry and its arguments (copied into the
/// queue's own buffer: `client::multi`).
fn queue(client: &mut ClientState, entry: &CommandEntry, args: &[&[u8]]) {
    let argv_mem: usize = args.iter().map(|a| a.len()).sum();
    if let Some(queue) = client.multi.as_mut() {
        queue.push(entry.id.0, args);
        client
            .info
            .multi
            .store(queue.len() as i64, Ordering::Relaxed);
        client.info.multi_mem.fetch_add(
            argv_mem + args.len() * std::mem::size_of::<usize>(),
            Ordering::Relaxed,
        );
    }
}

/// Refuses a command before it runs (Redis's rejectCommand): counts the error and the
/// command's `rejected_calls`, and inside MULTI dooms the transaction so EXEC answers
/// EXECABORT. `entry` is None for an unknown command.
pub(crate) fn reject(
    shared: &Shared,
    client: &mut ClientState,
    entry: Option<&CommandEntry>,
    reply: Reply,
) -> Reply {
    if client.multi.is_some() {
        client.multi_failed = true;
    }
    if let Some(entry) = entry {
        entry.stats.rejected();
    }
    if let Reply::Error(text) = &reply {
        count_error(shared, text);
    }
    reply
}

/// Counts one error reply: `total_error_replies` and its prefix's errorstat.
pub(crate) fn count_error(shared: &Shared, text: &str) {
    shared
        .stats
        .total_error_replies
        .fetch_add(1, Ordering::Relaxed);
    shared.errors.count(text);
}

/// A command's time in whole microseconds: `ran_ns` on the clock plus what it asked to be
/// held. Almost always nothing was held: then one division, no `Duration` arithmetic (this
/// runs for every command).
#[inline]
fn took_usec(ran_ns: u64, hold: Duration) -> u64 {
    if hold.is_zero() {
        return ran_ns / 1_000;
    }
    let took = Duration::from_nanos(ran_ns).saturating_add(hold);
    took.as_secs()
        .saturating_mul(1_000_000)
        .saturating_add(u64::from(took.subsec_micros()))
}

/// After a command ran (`usec`: its time, [`took_usec`]): statistics, SLOWLOG, LATENCY,
/// MONITOR.
fn account(
    ctx: &mut Ctx<'_>,
    entry: &CommandEntry,
    args: &[&[u8]],
    reply: &Reply,
    usec: u64,
    caller: &Caller<'_, '_>,
) {
    let shared = ctx.shared;
    let spec = entry.spec;
    // A script whose error came from a failed call: that call counted it already.
    let counted = std::mem::take(&mut ctx.error_counted);
    let failed = match reply {
        Reply::Error(text) => {
            if !counted {
                count_error(shared, text);
            }
            true
        }
        _ => counted,
    };
    // A command that blocked gets its latency sample, and its slow log entry, when it is
    // unblocked (`services::blocking`), with the time until then.
    entry.stats.ran(
        usec,
        failed,
        shared.live.latency_tracking() && !matches!(ctx.next, Next::Block(_)),
    );
    if let Next::Block(w) = &ctx.next {
        w.set_origin(entry.id, args, usec);
    }
    shared.stats.total_commands.add(1);
    let from_script = matches!(caller, Caller::Script(_));
    let threshold_ms = shared.live.latency_threshold_ms();
    if threshold_ms > 0 && usec / 1000 >= threshold_ms {
        let event = if spec.has(CmdFlags::FAST) {
            "fast-command"
        } else {
            "command"
        };
        shared
            .latency
            .add(event, shared.clock.now_ms() / 1000, usec / 1000);
    }
    if !spec.has(CmdFlags::SKIP_SLOWLOG)
        && !matches!(ctx.next, Next::Block(_))
        && shared.slowlog.is_slow(&shared.live, usec)
    {
        shared.slowlog.push(
            &shared.live,
            shared.clock.now_ms() / 1000,
            usec,
            &monitor::redact(spec.redaction, args),
            ctx.client,
            from_script,
        );
    }
    if !spec.has(CmdFlags::ADMIN) && !spec.has(CmdFlags::SKIP_MONITOR) {
        feed_monitors(ctx, entry, args, from_script);
    }
}

/// Sends the command to MONITOR clients (commands from scripts show as `lua`'s).
#[inline]
fn feed_monitors(ctx: &Ctx<'_>, entry: &CommandEntry, args: &[&[u8]], from_script: bool) {
    // Inline: every command passes here, and almost always nobody monitors.
    if ctx.shared.monitors.active() {
        publish_to_monitors(ctx, entry, args, from_script);
    }
}

#[inline(never)]
fn publish_to_monitors(ctx: &Ctx<'_>, entry: &CommandEntry, args: &[&[u8]], from_script: bool) {
    let shared = ctx.shared;
    let hard = shared.live.output_buffer_limit().hard;
    let cap = if hard > 0 { hard } else { monitor::MONITOR_CAP };
    let addr = if from_script {
        "lua"
    } else {
        &ctx.client.info.addr
    };
    shared.monitors.publish(
        shared.clock.now_ns() / 1000,
        ctx.client.db,
        addr,
        &monitor::redact(entry.spec.redaction, args),
        cap,
    );
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use bytes::Bytes;

    use crate::client::ClientState;
    use crate::engine::script_race::{on_a_connection, race_a_script, run};
    use crate::engine::{Next, execute, execute_may_block};
    use crate::protocol::Reply;
    use crate::script::Held;
    use crate::server::Shared;

    /// A command's time with nothing held is the clock's difference in whole µs; with a
    /// hold, the hold is added before truncating, as the `Duration` sum was.
    #[test]
    fn took_usec_truncates_the_sum() {
        use super::took_usec;
        for ns in [
            0,
            999,
            1_000,
            1_999,
            999_999_999,
            1_000_000_000,
            3_000_000_500,
            u64::MAX,
        ] {
            assert_eq!(took_usec(ns, Duration::ZERO), ns / 1_000, "{ns}");
            for hold in [
                Duration::from_nanos(1),
                Duration::from_nanos(500),
                Duration::from_millis(3),
            ] {
                let sum = Duration::from_nanos(ns).saturating_add(hold);
                let want = sum.as_secs() * 1_000_000 + u64::from(sum.subsec_micros());
                assert_eq!(took_usec(ns, hold), want, "{ns} {hold:?}");
            }
        }
        assert_eq!(took_usec(999, Duration::from_nanos(1)), 1);
    }

    /// The busy-script window: a command that passed the busy gate before a script took its
    /// shard must not wait on the shard's lock for the whole script (its thread would stall,
    /// where Redis answers -BUSY past the threshold). The connection's request comes back
    /// unrun, to go through the gate again; a command on another shard runs.
    #[test]
    fn a_script_holding_the_shard_sends_the_request_back_to_the_gate() {
        let shared = Arc::new(Shared::new(
            crate::config::Config::default(),
            crate::clock::Clock::system(),
        ));
        let key = Bytes::from_static(b"k");
        let shard = shared.keyspace.shard_of(&key);
        let other = (0u32..)
            .map(|i| Bytes::from(format!("other{i}")))
            .find(|k| shared.keyspace.shard_of(k) != shard)
            .unwrap();
        // This thread plays the script: running, holding the key's shard (and its lock).
        let _running = shared
            .scripts
            .busy
            .begin_as(None, Held::Some([shard].into_iter().collect()));
        let held_key = key.clone();
        let _lock = shared.keyspace.lock_args([&held_key[..]]);
        let (tx, rx) = std::sync::mpsc::channel();
        let connection = on_a_connection(&shared, move |shared, client| {
            let get = [Bytes::from_static(b"GET"), key];
            let got = execute_may_block(shared, client, &crate::engine::args::borrowed(&get));
            let sent_back = matches!(got.next, Next::Regate);
            let set = [Bytes::from_static(b"SET"), other, Bytes::from_static(b"v")];
            let set = execute_may_block(shared, client, &crate::engine::args::borrowed(&set));
            let set_sent_back = matches!(set.next, Next::Regate);
            tx.send((sent_back, set.reply, set_sent_back)).unwrap();
        });
        let (sent_back, other_reply, other_sent_back) = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the command waited on the script's shard lock");
        assert!(sent_back, "GET on the script's shard goes back to the gate");
        assert!(matches!(other_reply, Reply::Status(_)), "{other_reply:?}");
        assert!(!other_sent_back, "SET on another shard runs");
        connection.join().unwrap();
        let stats = shared.table.entries().iter().find(|e| e.spec.name == "get");
        assert_eq!(
            stats.map(|e| e.stats.calls.get()),
            Some(0),
            "a request sent back is not counted"
        );
    }

    /// A script command leaves the batch's policy state as it was (`keeps_batch_policy`:
    /// the batch does not read it again) because no command a script may call changes it.
    /// Every command that changes something [`super::plain`] reads is listed here with
    /// what it changes; walking the whole table, none of them is callable from scripts.
    /// (A new input of `plain` adds the commands that change it here.)
    #[test]
    fn no_script_callable_command_changes_the_batch_policy() {
        use crate::engine::{Lookup, lookup};
        let table = crate::engine::table::CommandTable::build();
        let changers: &[(&[&str], &str)] = &[
            (&["auth", "p"], "authenticated, the user"),
            (&["hello", "3"], "authenticated, the user"),
            (&["reset"], "the user, MULTI, tracking, subscriptions"),
            (&["multi"], "MULTI"),
            (&["exec"], "MULTI"),
            (&["discard"], "MULTI"),
            (&["replconf", "ack", "0"], "the master's link"),
            (&["psync", "?", "-1"], "the master's link"),
            (&["sync"], "the master's link"),
            (&["acl", "setuser", "u"], "the user's rules"),
            (&["acl", "deluser", "u"], "the user's rules"),
            (&["acl", "load"], "the user's rules"),
            (
                &["config", "set", "maxmemory", "1"],
                "maxmemory, min-replicas, latency",
            ),
            (&["client", "tracking", "on"], "tracking"),
            (&["bgsave"], "a failed save"),
            (&["save"], "a failed save"),
            (&["bgrewriteaof"], "a failed AOF write"),
            (&["debug", "reload"], "a failed save"),
            (&["replicaof", "no", "one"], "the replication role"),
            (&["slaveof", "no", "one"], "the replication role"),
            (&["failover"], "the replication role"),
            (&["subscribe", "c"], "subscriptions"),
            (&["psubscribe", "c"], "subscriptions"),
            (&["ssubscribe", "c"], "subscriptions"),
            (&["unsubscribe"], "subscriptions"),
            (&["punsubscribe"], "subscriptions"),
            (&["sunsubscribe"], "subscriptions"),
            (&["monitor"], "MONITOR"),
        ];
        let mut changer_names = Vec::new();
        for (words, what) in changers {
            let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
            let entry = match lookup(&table, &args) {
                Lookup::Found(entry) => entry,
                Lookup::Error(e, _) => panic!("{words:?} ({what}): {e:?}"),
            };
            assert!(
                !entry.keeps_policy,
                "{words:?} changes {what}: the batch must read it again"
            );
            changer_names.push(entry.spec.name);
        }
        let mut callable = 0;
        for entry in table.entries() {
            let spec = entry.spec;
            if spec.runs_script() {
                assert!(entry.keeps_policy, "{}", spec.name);
                assert!(!spec.callable_from_scripts(), "{} nests", spec.name);
            }
            if spec.callable_from_scripts() {
                callable += 1;
                assert!(
                    !changer_names.contains(&spec.name),
                    "{} is callable from scripts and changes the batch's policy state",
                    spec.name
                );
            }
        }
        assert!(callable > 200, "{callable} commands callable from scripts");
    }

    /// A batch is plain only while every check `call_lean` skips would pass: each state
    /// those checks read, changed on its own, makes it not plain.
    #[test]
    fn a_batch_is_plain_only_while_no_check_could_refuse() {
        let shared = crate::engine::tests::shared();
        let mut client = crate::engine::tests::client(&shared);
        let plain = |shared: &Shared, client: &ClientState| super::plain(shared, client);
        assert!(
            plain(&shared, &client),
            "a default server and client are plain"
        );

        let run = |client: &mut ClientState, words: &[&str]| {
            let args: Vec<Bytes> = words.iter().map(|w| Bytes::from(w.to_string())).collect();
            execute(&shared, client, &crate::engine::args::borrowed(&args))
        };
        let mut changes: Vec<(&[&str], &[&str])> = vec![
            (&["MULTI"], &["DISCARD"]),
            (
                &["CLIENT", "TRACKING", "on"],
                &["CLIENT", "TRACKING", "off"],
            ),
            (
                &["CONFIG", "SET", "maxmemory", "1gb"],
                &["CONFIG", "SET", "maxmemory", "0"],
            ),
            (
                &["CONFIG", "SET", "min-replicas-to-write", "1"],
                &["CONFIG", "SET", "min-replicas-to-write", "0"],
            ),
            (
                &["CONFIG", "SET", "latency-monitor-threshold", "1"],
                &["CONFIG", "SET", "latency-monitor-threshold", "0"],
            ),
            (
                &["ACL", "SETUSER", "default", "-get"],
                &["ACL", "SETUSER", "default", "+@all"],
            ),
            (
                &["ACL", "SETUSER", "default", "resetkeys"],
                &["ACL", "SETUSER", "default", "~*"],
            ),
        ];
        for (change, undo) in changes.drain(..) {
            run(&mut client, change);
            assert!(!plain(&shared, &client), "after {change:?}");
            run(&mut client, undo);
            assert!(plain(&shared, &client), "after {undo:?}");
        }

        client.authenticated = false;
        assert!(!plain(&shared, &client), "not authenticated");
        client.authenticated = true;
        client.master_link = true;
        assert!(!plain(&shared, &client), "the master's link");
        client.master_link = false;
        client.cluster_check = Some((0, true));
        assert!(!plain(&shared, &client), "a slot to check");
        client.cluster_check = None;

        let monitor = shared.monitors.join();
        assert!(!plain(&shared, &client), "a monitor");
        drop(monitor);
        assert!(plain(&shared, &client));
    }

    fn calls_of(shared: &Shared, name: &str) -> u64 {
        shared
            .table
            .entries()
            .iter()
            .find(|e| e.spec.name == name)
            .map_or(0, |e| e.stats.calls.get())
    }

    /// The window for handlers that lock by themselves: a script takes the shard of a
    /// watched and queued key after the client's commands passed the gate. EXEC, DISCARD,
    /// UNWATCH, RESET and SCAN each come back unrun (the transaction still queued, the
    /// watch still there, nothing counted) instead of waiting on the lock; once the script
    /// ends, each runs. The "script" is this test's main thread ([`race_a_script`]), holding
    /// the shard's lock and marked busy on it, so the outcome does not depend on timing: a
    /// command that waited on the lock would never answer, and the test would fail on its
    /// timeout.
    #[test]
    fn handlers_that_lock_by_themselves_go_back_to_the_gate() {
        let shared = Arc::new(Shared::new(
            crate::config::Config::default(),
            crate::clock::Clock::system(),
        ));
        // A key in shard 0, where SCAN starts.
        let key = (0u32..)
            .map(|i| format!("k{i}"))
            .find(|k| shared.keyspace.shard_of(k.as_bytes()) == 0)
            .unwrap();
        race_a_script(&shared, 0, move |shared, c, script| {
            let ok = |(r, back): (Reply, bool)| {
                assert!(!back);
                r
            };
            ok(run(shared, c, &["SET", &key, "v"]));
            ok(run(shared, c, &["WATCH", &key]));
            ok(run(shared, c, &["MULTI"]));
            let queued = ok(run(shared, c, &["GET", &key]));
            assert!(matches!(queued, Reply::Status(ref s) if s == "QUEUED"));
            script.take();

            // The script holds the shard now.
            for command in [&["EXEC"][..], &["DISCARD"][..]] {
                let (_, back) = run(shared, c, command);
                assert!(back, "{command:?} goes back to the gate");
                assert_eq!(
                    c.multi.as_ref().map(crate::client::multi::MultiQueue::len),
                    Some(1),
                    "{command:?}"
                );
                assert_eq!(c.info.multi.load(std::sync::atomic::Ordering::Relaxed), 1);
                assert_eq!(c.watched.len(), 1, "{command:?}");
            }
            assert_eq!(calls_of(shared, "exec"), 0);
            assert_eq!(calls_of(shared, "discard"), 0);
            script.end();

            // The script ended: the transaction runs, and the watch is dropped.
            let exec = ok(run(shared, c, &["EXEC"]));
            assert!(
                matches!(&exec, Reply::Array(r) if format!("{r:?}") == r#"[Short(b"v")]"#),
                "{exec:?}"
            );
            assert!(c.watched.is_empty() && c.multi.is_none());
            assert_eq!(calls_of(shared, "exec"), 1);

            ok(run(shared, c, &["WATCH", &key]));
            script.take();
            for command in [&["UNWATCH"][..], &["RESET"][..], &["SCAN", "0"][..]] {
                let (_, back) = run(shared, c, command);
                assert!(back, "{command:?} goes back to the gate");
                assert_eq!(c.watched.len(), 1, "{command:?}");
            }
            for name in ["unwatch", "reset", "scan"] {
                assert_eq!(calls_of(shared, name), 0, "{name}");
            }
            script.end();
            let scan = ok(run(shared, c, &["SCAN", "0"]));
            assert!(matches!(scan, Reply::Array(_)), "{scan:?}");
            let unwatch = ok(run(shared, c, &["UNWATCH"]));
            assert!(matches!(unwatch, Reply::Status(_)), "{unwatch:?}");
            assert!(c.watched.is_empty());
        });
    }

    /// SAVE and DEBUG declare no key but lock shards by themselves (SAVE walks every shard,
    /// DEBUG RELOAD holds them all): the busy gate stops them while any script runs, as
    /// Redis answers them -BUSY, instead of letting them wait on a script's shard.
    #[test]
    fn keyless_commands_that_lock_shards_wait_at_the_gate() {
        let shared = Arc::new(crate::engine::tests::shared());
        let client = crate::engine::tests::client(&shared);
        let args =
            |a: &[&str]| -> Vec<Bytes> { a.iter().map(|s| Bytes::from(s.to_string())).collect() };
        let clear = |a: &[&str]| {
            crate::commands::scripting::gate_clear(
                &shared,
                &client,
                &crate::engine::args::borrowed(&args(a)),
            )
        };
        let running = shared
            .scripts
            .busy
            .begin_as(None, Held::Some([0].into_iter().collect()));
        assert!(!clear(&["SAVE"]));
        assert!(!clear(&["DEBUG", "RELOAD"]));
        assert!(clear(&["PING"]), "a command that needs no shard goes on");
        drop(running);
        assert!(clear(&["SAVE"]));
    }

    /// Without a running script, contention on a shard is another command's short hold:
    /// the request waits for the lock and runs. A caller that cannot wait (no connection to
    /// gate it again) always waits.
    #[test]
    fn contention_without_a_script_waits_for_the_lock() {
        let shared = Arc::new(Shared::new(
            crate::config::Config::default(),
            crate::clock::Clock::system(),
        ));
        let key = Bytes::from_static(b"k");
        let held_key = key.clone();
        let lock = shared.keyspace.lock_args([&held_key[..]]);
        let (tx, rx) = std::sync::mpsc::channel();
        let connection = on_a_connection(&shared, move |shared, client| {
            let get = [Bytes::from_static(b"GET"), key];
            // `execute` cannot send a request back: it has no gate to send it to.
            tx.send(execute(
                shared,
                client,
                &crate::engine::args::borrowed(&get),
            ))
            .unwrap();
        });
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
        drop(lock);
        let reply = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(matches!(reply, Reply::Null), "{reply:?}");
        connection.join().unwrap();
    }
}
