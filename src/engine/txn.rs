//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! Queue-time checks are `engine::call`'s client policy (name, arity, auth, routing, OOM…);
//! MULTI queues the resolved table entry with the arguments. Everything else is checked
//! when EXEC runs the command through `call` (as `Caller::Exec`), so its errors become
//! elements of the EXEC reply, as in Redis. EXEC's own part: it collects the keys of every
//! queued and watched command, locks their shards in ascending order (all shards if any
//! command needs them), reads the clock once, checks the watches, and runs the queue: no
//! other client's command can interleave, and there is no global lock.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use smallvec::SmallVec;

use crate::client::ClientState;
use crate::engine::{
    ArgCursor, Caller, CmdId, Command, CommandSpec as C, Ctx, LockMode, Next, call, run,
};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::server::Shared;

/// The transaction commands.
pub(crate) static COMMANDS: &[C] = &[
    C::new(
        "multi",
        1,
        &["noscript", "loading", "stale", "fast", "allow_busy"],
        C::keys(0, 0, 0),
        run::<Multi>,
    )
    .with_roles(crate::engine::Roles::STARTS_MULTI)
    .immediate()
    .with_acl(&["@fast", "@transaction"]),
    C::new(
        "exec",
        // Arity is checked by the handler: a wrong count aborts the transaction (see `Exec`).
        -1,
        &["noscript", "loading", "stale", "skip_slowlog"],
        C::keys(0, 0, 0),
        run::<Exec>,
    )
    .with_roles(
        crate::engine::Roles::EXEC
            .union(crate::engine::Roles::ENDS_MULTI)
            .union(crate::engine::Roles::NEEDS_SHARDS),
    )
    .with_effect(crate::repl::effects::Effect::Inner)
    .with_reported_arity(1)
    .immediate()
    .with_acl(&["@slow", "@transaction"]),
    C::new(
        "discard",
        1,
        &["noscript", "loading", "stale", "fast", "allow_busy"],
        C::keys(0, 0, 0),
        run::<Discard>,
    )
    .with_roles(crate::engine::Roles::ENDS_MULTI)
    .immediate()
    .with_acl(&["@fast", "@transaction"]),
    C::new(
        "watch",
        -2,
        &["noscript", "loading", "stale", "fast", "allow_busy"],
        C::keys(1, -1, 1),
        run::<Watch>,
    )
    .with_roles(crate::engine::Roles::NEEDS_SHARDS)
    .immediate()
    .with_acl(&["@fast", "@transaction"])
    .with_key_flags(&["RO"]),
    C::new(
        "unwatch",
        1,
        &["noscript", "loading", "stale", "fast", "allow_busy"],
        C::keys(0, 0, 0),
        run::<Unwatch>,
    )
    .self_locking()
    .with_acl(&["@fast", "@transaction"]),
];

/// Drops every WATCH of a client and clears its dirty flag. The caller must hold no shard
/// lock (it locks the watched keys' shards itself).
pub fn unwatch_client(shared: &Shared, client: &mut ClientState) {
    let watched = std::mem::take(&mut client.watched);
    unwatch_keys(shared, client.id(), watched);
    client.dirty.store(false, Ordering::Release);
}

/// Drops the WATCH entries of client `id` on `watched`; the caller must hold no shard lock.
pub(crate) fn unwatch_keys(shared: &Shared, id: u64, watched: Vec<(usize, Bytes)>) {
    if watched.is_empty() {
        return;
    }
    let mut locked = shared.keyspace.lock_keys(watched.iter().map(|(_, k)| k));
    for (db, key) in &watched {
        locked.unwatch(*db, key, id);
    }
}

/// `unwatch_client` from inside a handler: releases the handler's locks first.
pub(crate) fn unwatch_all(ctx: &mut Ctx<'_>) {
    ctx.store.release();
    unwatch_client(ctx.shared, ctx.client);
}

/// `unwatch_all` for a client's own UNWATCH, DISCARD or RESET: false, with nothing changed,
/// when a running script holds a watched key's shard and the request goes back to the busy
/// gate (`engine::call::back_to_gate`) instead of waiting on that shard's lock.
pub fn unwatch_all_or_regate(ctx: &mut Ctx<'_>) -> bool {
    ctx.store.release();
    if ctx.client.watched.is_empty() {
        ctx.client.dirty.store(false, Ordering::Release);
        return true;
    }
    let keyspace = &ctx.shared.keyspace;
    let mut shards: SmallVec<[usize; 8]> = ctx
        .client
        .watched
        .iter()
        .map(|(_, k)| keyspace.shard_of(k))
        .collect();
    shards.sort_unstable();
    shards.dedup();
    let Some(mut locked) = keyspace.try_lock_indexes(&shards) else {
        if crate::engine::call::back_to_gate(ctx, &shards) {
            return false;
        }
        unwatch_client(ctx.shared, ctx.client);
        return true;
    };
    let id = ctx.client.id();
    for (db, key) in std::mem::take(&mut ctx.client.watched) {
        locked.unwatch(db, &key, id);
    }
    ctx.client.dirty.store(false, Ordering::Release);
    true
}

/// EXEC's unwatch while it still holds the watched keys' shards (a script could take one
/// the moment they are dropped, and the unwatch would wait on it for the whole script).
/// Keys whose shard is not held (none, unless a queued command released some) stay in the
/// client's list for `unwatch_all`.
fn unwatch_held(run: &mut Ctx<'_>) {
    if run.client.watched.is_empty() {
        return;
    }
    let id = run.client.id();
    let keyspace = &run.shared.keyspace;
    let store = &mut run.store;
    run.client.watched.retain(|(db, key)| {
        if store.held_shard(keyspace.shard_of(key)).is_none() {
            return true;
        }
        store.unwatch(*db, key, id);
        false
    });
}

/// MULTI
#[derive(Debug)]
pub(crate) struct Multi;

impl Command<'_> for Multi {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Multi)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if ctx.client.multi.is_some() {
            return Err(CmdError::msg("ERR MULTI calls can not be nested"));
        }
        ctx.client.begin_multi();
        ctx.client.info.multi.store(0, Ordering::Relaxed);
        Ok(Reply::ok())
    }
}

/// DISCARD
#[derive(Debug)]
pub(crate) struct Discard;

impl Command<'_> for Discard {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Discard)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if ctx.client.multi.is_none() {
            return Err(CmdError::msg("ERR DISCARD without MULTI"));
        }
        if !unwatch_all_or_regate(ctx) {
            return Ok(Reply::Null);
        }
        ctx.client.end_multi();
        Ok(Reply::ok())
    }
}

/// WATCH key [key …]
#[derive(Debug)]
pub(crate) struct Watch {
    keys: Vec<Bytes>,
}

impl Command<'_> for Watch {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Watch {
            keys: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if ctx.client.multi.is_some() {
            return Err(CmdError::msg("ERR WATCH inside MULTI is not allowed"));
        }
        if ctx.client.dirty.load(Ordering::Acquire) {
            // Already doomed: the next EXEC fails whatever is watched now.
            return Ok(Reply::ok());
        }
        let db = ctx.db();
        let id = ctx.client.id();
        // The shard's registry says whether the key is watched already (O(1)); a clean
        // client's registrations are all there (only a dirty one loses any, see
        // `Shard::touch`), so its list never holds a key twice.
        let dirty = ctx.client.dirty.clone();
        for key in self.keys {
            if ctx.store.watch(db, &key, id, &dirty, ctx.now_ms) {
                ctx.client.watched.push((db, key));
            }
        }
        Ok(Reply::ok())
    }
}

/// UNWATCH
#[derive(Debug)]
pub(crate) struct Unwatch;

impl Command<'_> for Unwatch {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Unwatch)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if !ctx.in_exec && !unwatch_all_or_regate(ctx) {
            return Ok(Reply::Null);
        }
        Ok(Reply::ok())
    }
}

/// EXEC
#[derive(Debug)]
pub(crate) struct Exec {
    /// Arguments after EXEC (Redis's arity error, which aborts the transaction).
    extra_args: bool,
}

/// Clears CLIENT LIST's view of the transaction when EXEC is done.
struct ShownUntilExecEnds(Option<std::sync::Arc<crate::client::ClientInfo>>);

impl ShownUntilExecEnds {
    /// The transaction is still queued (EXEC went back to the busy gate): keep the view.
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for ShownUntilExecEnds {
    fn drop(&mut self) {
        if let Some(info) = &self.0 {
            info.multi.store(-1, Ordering::Relaxed);
            info.multi_mem.store(0, Ordering::Relaxed);
        }
    }
}

impl Command<'_> for Exec {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Exec {
            extra_args: !a.rest().is_empty(),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if self.extra_args {
            // Redis rejects a malformed EXEC by aborting the transaction (in MULTI or not).
            ctx.client.end_multi();
            unwatch_all(ctx);
            return Err(CmdError::msg(
                "EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command",
            ));
        }
        let Some(queue) = ctx.client.multi.take() else {
            return Err(CmdError::msg("ERR EXEC without MULTI"));
        };
        let failed = ctx.client.multi_failed;
        // The client leaves MULTI now, but CLIENT LIST keeps showing the transaction (flags=x,
        // multi, multi-mem) until EXEC returns, as Redis does.
        let shown = ShownUntilExecEnds(Some(ctx.client.info.clone()));
        ctx.client.multi_failed = false;
        if failed {
            drop(shown);
            unwatch_all(ctx);
            return Err(CmdError::msg(
                "EXECABORT Transaction discarded because of previous errors.",
            ));
        }
        let shared = ctx.shared;
        // Each queued command was resolved when it was queued; its arguments are lent once,
        // for the key collection and the calls.
        let lent = queue.lend();
        let entries: SmallVec<[_; 8]> = lent
            .iter()
            .map(|(cmd, args)| (shared.table.entry(CmdId(cmd)), args))
            .collect();

        // Lock everything the transaction touches, in ascending shard order. The queued
        // commands' keys are hashed once, here: their handlers run with these locks, which
        // remember the hashes (the queue outlives them).
        // Scripts take every shard when they declare no keys or `lua-script-locking` is
        // `global`; otherwise their declared keys' (see commands::scripting).
        let needs_all = entries.iter().any(|(e, args)| {
            e.is_some_and(|e| {
                matches!(e.spec.lock, LockMode::All | LockMode::Stepwise)
                    || (e.spec.runs_script()
                        && (shared.live.scripts_lock_all()
                            || e.spec.keys.positions(args).next().is_none()))
            })
        });
        ctx.store.release(); // (EXEC itself locks nothing; never hold two sets at once)
        let mut watched: SmallVec<[usize; 4]> = SmallVec::new();
        let mut keys: SmallVec<[&[u8]; 8]> = SmallVec::new();
        if !needs_all {
            watched.extend(
                ctx.client
                    .watched
                    .iter()
                    .map(|(_, k)| shared.keyspace.shard_of(k)),
            );
            for (entry, args) in &entries {
                if let Some(entry) = entry {
                    keys.extend(
                        entry
                            .spec
                            .keys
                            .positions(args)
                            .filter_map(|i| args.get(i).copied()),
                    );
                }
            }
        }
        // A script may have taken one of these shards since EXEC passed the busy gate:
        // back to the gate with the transaction still queued, rather than wait on its lock
        // for the whole script (see `engine::call::back_to_gate`).
        let tried = || {
            if needs_all {
                shared.keyspace.try_lock_all()
            } else {
                shared
                    .keyspace
                    .try_lock_args_and(keys.iter().copied(), &watched)
            }
        };
        let locked = || {
            if needs_all {
                shared.keyspace.lock_all()
            } else {
                shared
                    .keyspace
                    .lock_args_and(keys.iter().copied(), &watched)
            }
        };
        let mut store = match tried() {
            Ok(store) => store,
            Err(wanted) => {
                if crate::engine::call::back_to_gate(ctx, &wanted) {
                    // (`keys` borrows the queue until here: it stays queued as a copy.)
                    ctx.client.multi = Some(queue.clone());
                    shown.keep();
                    return Ok(Reply::Null);
                }
                locked()
            }
        };
        if entries
            .iter()
            .any(|(e, _)| e.is_some_and(|e| e.spec.runs_script()))
        {
            // A transaction that runs a script holds its shards as long: after the blocked
            // clients a writer is serving on them, as a script outside one (`engine::call`).
            crate::services::blocking::wait_for_serving(shared, &mut store, locked);
        }
        drop(keys);
        // Read once the shards are held; the first queued command's timing starts there.
        let at = crate::clock::Tick::now();
        crate::clock::lap(at);
        let now_ns = if ctx.client.master_link {
            0
        } else {
            shared.clock.now_ns_at(at)
        };
        ctx.now_ns = now_ns;
        ctx.now_ms = now_ns / 1_000_000;
        let now_ms = ctx.now_ms;
        let mut run = Ctx::new(shared, &mut *ctx.client, store);
        run.now_ms = now_ms;
        run.now_ns = now_ns;
        run.in_exec = true;

        let id = run.client.id();
        let watched = std::mem::take(&mut run.client.watched);
        let expired = watched
            .iter()
            .any(|(db, key)| run.store.watched_key_expired(*db, key, id, now_ms));
        run.client.watched = watched;
        if expired || run.client.dirty.load(Ordering::Acquire) {
            unwatch_held(&mut run);
            drop(run);
            unwatch_all(ctx);
            return Ok(Reply::NullArray);
        }

        // From the thread's pool: the connection gives it back once the reply is written.
        let mut replies = Reply::pooled_vec(queue.len());
        for (entry, args) in entries {
            let reply = match entry {
                Some(entry) => call(&mut run, entry, args, Caller::Exec),
                // Only resolved commands are queued; an id the table lacks is a bug.
                None => crate::engine::unknown_command(args).into(),
            };
            replies.push(reply);
        }
        drop(lent);
        let ready = std::mem::take(&mut run.ready);
        // What the queued commands asked of the connection: a hold (DEBUG SLEEP) and a
        // close (QUIT, CLIENT KILL of itself) are EXEC's; nothing else is set inside EXEC.
        let (hold, next) = (run.hold, std::mem::take(&mut run.next));
        // The transaction's effects, wrapped in MULTI/EXEC, while its locks are held.
        shared.repl.propagate(&run.propagate);
        let events = run.take_events();
        unwatch_held(&mut run);
        drop(run);
        ctx.ready.extend(ready);
        ctx.events.extend(events);
        ctx.hold += hold;
        if !matches!(next, Next::Continue) {
            ctx.next = next;
        }
        unwatch_all(ctx);
        ctx.client.recycle_multi(queue);
        Ok(Reply::Array(replies))
    }
}
