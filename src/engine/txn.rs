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
    ArgCursor, Caller, CmdId, Command, CommandSpec as C, Ctx, LockMode, call, run,
};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::server::Shared;

/// The transaction commands.
pub static COMMANDS: &[C] = &[
    C::new(
        "multi",
        1,
        &["noscript", "loading", "stale", "fast", "allow_busy"],
        C::keys(0, 0, 0),
        run::<Multi>,
    )
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
pub fn unwatch_keys(shared: &Shared, id: u64, watched: Vec<(usize, Bytes)>) {
    if watched.is_empty() {
        return;
    }
    let mut locked = shared.keyspace.lock_keys(watched.iter().map(|(_, k)| k));
    for (db, key) in &watched {
        locked.unwatch(*db, key, id);
    }
}

/// `unwatch_client` from inside a handler: releases the handler's locks first.
pub fn unwatch_all(ctx: &mut Ctx<'_>) {
    ctx.store.release();
    unwatch_client(ctx.shared, ctx.client);
}

/// MULTI
#[derive(Debug)]
pub struct Multi;

impl Command for Multi {
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
pub struct Discard;

impl Command for Discard {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Discard)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if ctx.client.multi.is_none() {
            return Err(CmdError::msg("ERR DISCARD without MULTI"));
        }
        ctx.client.end_multi();
        unwatch_all(ctx);
        Ok(Reply::ok())
    }
}

/// WATCH key [key …]
#[derive(Debug)]
pub struct Watch {
    keys: Vec<Bytes>,
}

impl Command for Watch {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Watch {
            keys: a.rest().to_vec(),
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
pub struct Unwatch;

impl Command for Unwatch {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Unwatch)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if !ctx.in_exec {
            unwatch_all(ctx);
        }
        Ok(Reply::ok())
    }
}

/// EXEC
#[derive(Debug)]
pub struct Exec {
    /// Arguments after EXEC (Redis's arity error, which aborts the transaction).
    extra_args: bool,
}

/// Clears CLIENT LIST's view of the transaction when EXEC is done.
struct ShownUntilExecEnds(std::sync::Arc<crate::client::ClientInfo>);

impl Drop for ShownUntilExecEnds {
    fn drop(&mut self) {
        self.0.multi.store(-1, Ordering::Relaxed);
        self.0.multi_mem.store(0, Ordering::Relaxed);
    }
}

impl Command for Exec {
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
        let shown = ShownUntilExecEnds(ctx.client.info.clone());
        ctx.client.multi_failed = false;
        if failed {
            drop(shown);
            unwatch_all(ctx);
            return Err(CmdError::msg(
                "EXECABORT Transaction discarded because of previous errors.",
            ));
        }
        let shared = ctx.shared;
        // Each queued command was resolved when it was queued.
        let entries: SmallVec<[_; 8]> = queue
            .iter()
            .map(|q| shared.table.entry(CmdId(q.cmd)))
            .collect();

        // Lock everything the transaction touches, in ascending shard order. The queued
        // commands' keys are hashed once, here: their handlers run with these locks, which
        // remember the hashes (the queue outlives them).
        // Scripts take every shard when they declare no keys or `lua-script-locking` is
        // `global`; otherwise their declared keys' (see commands::scripting).
        let needs_all = queue.iter().zip(&entries).any(|(q, e)| {
            e.is_some_and(|e| {
                matches!(e.spec.lock, LockMode::All | LockMode::Stepwise)
                    || (e.spec.runs_script()
                        && (shared.live.scripts_lock_all()
                            || e.spec.keys.positions(&q.args).next().is_none()))
            })
        });
        ctx.store.release(); // (EXEC itself locks nothing; never hold two sets at once)
        let store = if needs_all {
            shared.keyspace.lock_all()
        } else {
            let watched: SmallVec<[usize; 4]> = ctx
                .client
                .watched
                .iter()
                .map(|(_, k)| shared.keyspace.shard_of(k))
                .collect();
            let mut keys: SmallVec<[&[u8]; 8]> = SmallVec::new();
            for (q, entry) in queue.iter().zip(&entries) {
                if let Some(entry) = entry {
                    let args = &q.args;
                    keys.extend(entry.spec.keys.positions(args).map(|i| &args[i][..]));
                }
            }
            shared.keyspace.lock_args_and(keys, &watched)
        };
        // Read once the shards are held; the first queued command's timing starts there.
        let at = std::time::Instant::now();
        crate::clock::lap(at);
        let now_ns = if ctx.client.master_link {
            0
        } else {
            shared.clock.now_ns_at(at)
        };
        ctx.now_ns = now_ns;
        ctx.now_ms = now_ns / 1_000_000;
        let now_ms = ctx.now_ms;
        let mut run = Ctx {
            shared,
            client: &mut *ctx.client,
            store,
            now_ms,
            now_ns,
            in_exec: true,
            may_block: false,
            blocked: None,
            ready: Vec::new(),
            error_counted: false,
            in_script: false,
            propagate: Vec::new(),
            events: crate::services::notify::Events::new(shared),
        };

        let id = run.client.id();
        let watched = std::mem::take(&mut run.client.watched);
        let expired = watched
            .iter()
            .any(|(db, key)| run.store.watched_key_expired(*db, key, id, now_ms));
        run.client.watched = watched;
        if expired || run.client.dirty.load(Ordering::Acquire) {
            drop(run);
            unwatch_all(ctx);
            return Ok(Reply::NullArray);
        }

        // From the thread's pool: the connection gives it back once the reply is written.
        let mut replies = Reply::pooled_vec(queue.len());
        for (q, entry) in queue.iter().zip(entries) {
            let reply = match entry {
                Some(entry) => call(&mut run, entry, &q.args, Caller::Exec),
                // Only resolved commands are queued; an id the table lacks is a bug.
                None => crate::engine::unknown_command(&q.args).into(),
            };
            replies.push(reply);
        }
        let ready = std::mem::take(&mut run.ready);
        // The transaction's effects, wrapped in MULTI/EXEC, while its locks are held.
        shared.repl.propagate(&run.propagate);
        let events = run.take_events();
        drop(run);
        ctx.ready.extend(ready);
        ctx.events.extend(events);
        unwatch_all(ctx);
        ctx.client.recycle_multi(queue);
        Ok(Reply::Array(replies))
    }
}
