//! The registry of blocked clients, and the serving of clients blocked on keys that became
//! ready (Redis's `blocked.c`). The blocking commands are `commands::blocking` (the pops,
//! CLIENT UNBLOCK) and `commands::stream::read` (XREAD/XREADGROUP's BLOCK); what a waiter
//! reruns is theirs, behind the [`Rerun`] trait, so this module names no command.
//!
//! A blocking command first runs as its non-blocking form under its keys' locks. If that
//! finds nothing and the caller may block (a client outside MULTI; never EXEC, a script or
//! `engine::execute` itself), it [`register`]s a [`Waiter`] in [`BlockedClients`] while it
//! still holds those locks, so that a push can never slip between "empty" and "registered",
//! and leaves it in `Ctx::next` ([`Next::Block`](crate::engine::Next::Block)) for the
//! connection, which waits without holding any lock.
//!
//! Serving is done by whoever made a key ready, as Redis's `handleClientsBlockedOnKeys`
//! does: every write command (from a client, EXEC or a script) notes its keys that have
//! waiters in `Ctx::ready`, and once the outermost command has released its locks,
//! [`serve`] walks each ready key's waiters in the order they blocked, runs their pop with
//! the waiter's database under the key's lock, and hands the reply over. So a pusher's next
//! command already sees the list emptied, and a MULTI/EXEC or a script is served after it
//! finishes. Lock order: shard locks, then a waiter's state, then the registry (a leaf).
//!
//! Timeouts are deadlines on the server's clock (Unix ms; 0 = forever), so CLOCK ADVANCE in
//! test mode ends them; CLIENT UNBLOCK ends one early. A waiter whose connection goes away
//! is marked gone (by a drop guard in the connection) before it can be served.
//!
//! A client may block on a hundred thousand keys, and many clients on one key, so every
//! operation on the registry costs O(1) per key it touches (amortized), never a scan of a
//! key's other waiters: a waiter's keys are deduplicated once when it blocks; each key keeps
//! its waiters in blocking order with a count of the live ones, and a waiter that leaves
//! only lowers the counts of its keys (its entries are dropped from the front as serving
//! meets them, or all at once when a key's queue holds more dead entries than live ones);
//! serving asks for the next waiter after the last one it looked at, by sequence number;
//! and a write notes a key ready only if it now holds a list or a sorted set (Redis's
//! `signalKeyAsReady`), so a blocking command that blocks makes nothing ready.
//!
//! Statistics follow Redis 7.0's `updateStatsOnUnblock`: a command that blocks counts its
//! call (and its time so far) when it blocks; when it is served, or ended by CLIENT UNBLOCK,
//! its time is added again, an error reply counts as a failed call, its latency histogram
//! gets the sample and the slow log the entry, under the arguments the client sent
//! (`Waiter::origin`, set by `engine::call` once the command blocked). A timeout adds
//! nothing, as in Redis.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::client::{ClientInfo, ClientState};
use crate::engine::Ctx;
use crate::error::CmdResult;
use crate::protocol::Reply;
use crate::server::Shared;
use crate::store::Value;

/// The type of value that serves a waiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wants {
    /// A list (BLPOP, BRPOP, BLMPOP, BLMOVE, BRPOPLPUSH).
    List,
    /// A sorted set (BZPOPMIN, BZPOPMAX, BZMPOP).
    ZSet,
    /// A stream (XREAD; `group`: XREADGROUP, woken with an error when its stream is
    /// deleted or replaced).
    Stream {
        /// XREADGROUP.
        group: bool,
    },
}

/// What a blocked client runs when a key it waits on is ready: its command's non-blocking
/// form, kept parsed (implemented by `commands::blocking`).
pub(crate) trait Rerun: std::fmt::Debug + Send + Sync {
    /// The keys the client waits on, as given.
    fn keys(&self) -> &[Bytes];
    /// The type of value that serves it.
    fn wants(&self) -> Wants;
    /// The other key serving it writes (BLMOVE's destination), locked with the ready key.
    fn destination(&self) -> Option<&Bytes>;
    /// Runs the non-blocking form on `only` (the one ready key) or, with None, on all its
    /// keys; `None` when there was nothing to pop.
    fn attempt(&self, ctx: &mut Ctx<'_>, only: Option<&Bytes>) -> CmdResult<Option<Reply>>;
    /// What serving it propagates to replicas, given the key it was served from and the
    /// reply; None if nothing is (nothing was popped, or it notes its own effects).
    fn effect(&self, key: &Bytes, reply: &Reply) -> Option<Vec<Bytes>>;

    /// Served by a list.
    fn is_list(&self) -> bool {
        self.wants() == Wants::List
    }

    /// Served by a stream.
    fn is_stream(&self) -> bool {
        matches!(self.wants(), Wants::Stream { .. })
    }

    /// XREADGROUP: woken with an error when its stream is deleted or replaced.
    fn is_group_read(&self) -> bool {
        self.wants() == Wants::Stream { group: true }
    }
}

/// Registers the caller as a waiter for `op` (its keys' locks are held) and leaves it in
/// `ctx.next` ([`Next::Block`](crate::engine::Next::Block)) for the connection.
pub(crate) fn register(ctx: &mut Ctx<'_>, op: Box<dyn Rerun>, timeout_ms: u64) -> Reply {
    {
        let deadline_ms = match timeout_ms {
            0 => 0,
            t => ctx.now_ms.saturating_add(t).max(1),
        };
        let keys = distinct(op.keys());
        let waiter = Arc::new(Waiter {
            info: ctx.client.info.clone(),
            db: ctx.db(),
            resp: ctx.client.resp,
            op,
            keys,
            seq: AtomicU64::new(0),
            registered: AtomicBool::new(false),
            deadline_ms,
            state: Mutex::new(State::Waiting),
            notify: tokio::sync::Notify::new(),
            origin: std::sync::OnceLock::new(),
        });
        ctx.shared.blocked.add(&waiter);
        ctx.next = crate::engine::Next::Block(waiter);
        // Never sent: the connection waits for the waiter's reply instead.
        Reply::NullArray
    }
}

/// Each key once, in the order given (BLPOP k k …): the registry's work is per distinct key.
fn distinct(keys: &[Bytes]) -> Box<[Bytes]> {
    let mut seen = HashSet::with_capacity(keys.len());
    keys.iter()
        .filter(|k| seen.insert(&k[..]))
        .cloned()
        .collect()
}

/// Where a waiter stands.
#[derive(Debug)]
enum State {
    /// Blocked.
    Waiting,
    /// Served, timed out or unblocked: the reply to send.
    Done(Reply),
    /// Its connection went away.
    Gone,
}

/// A client blocked on keys.
#[derive(Debug)]
pub struct Waiter {
    info: Arc<ClientInfo>,
    db: usize,
    resp: u8,
    op: Box<dyn Rerun>,
    /// The distinct keys it waits on, in the order given.
    keys: Box<[Bytes]>,
    /// Its place in the blocking order, given by the registry when it is added.
    seq: AtomicU64,
    /// True while the registry holds it (changed only under the registry's lock).
    registered: AtomicBool,
    /// Unix ms on the server's clock; 0 = forever.
    deadline_ms: u64,
    state: Mutex<State>,
    /// Signalled once the state leaves `Waiting` (a stored permit, so never missed).
    notify: tokio::sync::Notify,
    /// The command that blocked, for its statistics when it is unblocked.
    origin: std::sync::OnceLock<Origin>,
}

/// What a blocked command's statistics need when it is unblocked.
#[derive(Debug)]
struct Origin {
    /// Its table entry.
    cmd: crate::engine::CmdId,
    /// The arguments as the client sent them (what the slow log shows).
    args: Box<[Bytes]>,
    /// µs it ran before it blocked.
    usec: u64,
}

impl Waiter {
    /// Remembers the command that blocked (`engine::call`, as it accounts for the call).
    pub(crate) fn set_origin(&self, cmd: crate::engine::CmdId, args: &[&[u8]], usec: u64) {
        let _ = self.origin.set(Origin {
            cmd,
            args: crate::protocol::request::owned_args(args).into(),
            usec,
        });
    }

    /// The deadline (Unix ms on the server's clock), or None to wait forever.
    pub fn deadline_ms(&self) -> Option<u64> {
        (self.deadline_ms > 0).then_some(self.deadline_ms)
    }

    /// Waits until the state may have changed.
    pub async fn changed(&self) {
        self.notify.notified().await;
    }

    /// The reply, once the client is no longer blocked.
    pub fn take_reply(&self) -> Option<Reply> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match std::mem::replace(&mut *st, State::Gone) {
            State::Done(r) => Some(r),
            other => {
                *st = other;
                None
            }
        }
    }

    /// Ends the wait with `reply` unless it already ended; true if this call ended it.
    fn finish(&self, reply: Reply) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(*st, State::Waiting) {
            *st = State::Done(reply);
            drop(st);
            self.notify.notify_one();
            true
        } else {
            false
        }
    }

    /// Ends the wait as a timeout (Redis replies a null array for every blocking pop).
    pub fn time_out(&self) -> bool {
        self.finish(Reply::NullArray)
    }
}

/// Every blocked client, by key and by client id.
#[derive(Debug, Default)]
pub struct BlockedClients {
    /// How many clients are blocked: the write path's only cost while none is.
    count: AtomicUsize,
    /// How many of them are XREADGROUP readers (a write that deletes or replaces their
    /// stream must wake them with an error; only looked for while there are some).
    group_readers: AtomicUsize,
    inner: Mutex<Inner>,
    /// Shards a writer has blocked clients still to serve on ([`reserve`]), counted per
    /// shard index modulo their number (a collision only makes a script wait for a serve
    /// on another shard), and their sum: the script's only cost while nobody serves.
    serving: [AtomicUsize; SERVING_SLOTS],
    serving_total: AtomicUsize,
    /// Ready keys whose serve met a running script on a shard it must lock (BLMOVE's
    /// destination), to serve once a script ends ([`serve_deferred`]); and their number,
    /// what a script's end looks at.
    deferred: Mutex<Deferred>,
    deferred_len: AtomicUsize,
}

/// Ready keys left for after a script, in the order they were left, each once.
#[derive(Debug, Default)]
struct Deferred {
    order: VecDeque<(usize, Bytes)>,
    set: HashSet<(usize, Bytes)>,
}

/// How many counters [`BlockedClients::serving`] spreads the shards over.
const SERVING_SLOTS: usize = 32;

#[derive(Debug, Default)]
struct Inner {
    by_key: HashMap<(usize, Bytes), KeyQueue>,
    by_client: HashMap<u64, Arc<Waiter>>,
    /// The next waiter's sequence number (the blocking order).
    next_seq: u64,
}

/// The waiters of one key, in blocking order (ascending sequence numbers). Entries of
/// waiters that left stay until serving meets them at the front or a compaction drops them;
/// `live` counts the others, and the queue goes when it reaches 0.
#[derive(Debug, Default)]
struct KeyQueue {
    waiters: VecDeque<Arc<Waiter>>,
    live: usize,
}

impl KeyQueue {
    /// Drops the entries of waiters that left from the front.
    fn trim_front(&mut self) {
        while self
            .waiters
            .front()
            .is_some_and(|w| !w.registered.load(Ordering::Relaxed))
        {
            self.waiters.pop_front();
        }
    }

    /// After a waiter left: trims, and compacts once dead entries outnumber live ones (so
    /// each compaction's cost is paid by as many removals before it).
    fn forget_one(&mut self) {
        self.live -= 1;
        self.trim_front();
        if self.waiters.len() > 2 * self.live + 8 {
            self.waiters
                .retain(|w| w.registered.load(Ordering::Relaxed));
        }
    }
}

impl BlockedClients {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many clients are blocked (INFO blocked_clients).
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// True when no client is blocked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn add(&self, w: &Arc<Waiter>) {
        let mut inner = self.lock();
        inner.next_seq += 1;
        w.seq.store(inner.next_seq, Ordering::Relaxed);
        w.registered.store(true, Ordering::Relaxed);
        for key in w.keys.iter() {
            let q = inner.by_key.entry((w.db, key.clone())).or_default();
            q.waiters.push_back(w.clone());
            q.live += 1;
        }
        if let Some(old) = inner.by_client.insert(w.info.id, w.clone()) {
            // A client blocks once at a time; should an old waiter linger, forget it.
            if !Arc::ptr_eq(&old, w) {
                self.unregister(&mut inner, &old);
            }
        }
        w.info.blocked.store(true, Ordering::Relaxed);
        if w.op.is_group_read() {
            self.group_readers.fetch_add(1, Ordering::Relaxed);
        }
        self.count.store(inner.by_client.len(), Ordering::Relaxed);
    }

    /// True while some client is blocked in XREADGROUP.
    fn has_group_readers(&self) -> bool {
        self.group_readers.load(Ordering::Relaxed) > 0
    }

    /// Takes `w` out of its keys' queues (O(1) amortized per key); false if it was not in.
    fn unregister(&self, inner: &mut Inner, w: &Arc<Waiter>) -> bool {
        if !w.registered.swap(false, Ordering::Relaxed) {
            return false;
        }
        if w.op.is_group_read() {
            self.group_readers.fetch_sub(1, Ordering::Relaxed);
        }
        for key in w.keys.iter() {
            let k = (w.db, key.clone());
            if let Some(q) = inner.by_key.get_mut(&k) {
                q.forget_one();
                if q.live == 0 {
                    inner.by_key.remove(&k);
                }
            }
        }
        // Mostly empty: give the table back (amortized O(1), as Redis resizes dicts).
        let map = &mut inner.by_key;
        if map.capacity() > 64 && map.len() * 4 < map.capacity() {
            map.shrink_to(map.len() * 2);
        }
        true
    }

    /// Forgets a waiter (served, timed out, unblocked or disconnected). Idempotent.
    pub fn remove(&self, w: &Arc<Waiter>) {
        let mut inner = self.lock();
        self.unregister(&mut inner, w);
        if inner
            .by_client
            .get(&w.info.id)
            .is_some_and(|x| Arc::ptr_eq(x, w))
        {
            inner.by_client.remove(&w.info.id);
            w.info.blocked.store(false, Ordering::Relaxed);
        }
        self.count.store(inner.by_client.len(), Ordering::Relaxed);
    }

    fn has_waiters(&self, db: usize, key: &[u8]) -> bool {
        // A tuple key cannot be looked up borrowed, so the key is copied, only while
        // someone is blocked.
        self.lock()
            .by_key
            .contains_key(&(db, Bytes::copy_from_slice(key)))
    }

    /// The first live waiter on `key` that blocked after sequence number `after` (0: the
    /// first of all), in blocking order.
    fn next_waiter(&self, db: usize, key: &Bytes, after: u64) -> Option<Arc<Waiter>> {
        let mut inner = self.lock();
        let q = inner.by_key.get_mut(&(db, key.clone()))?;
        q.trim_front();
        let from = q
            .waiters
            .partition_point(|w| w.seq.load(Ordering::Relaxed) <= after);
        q.waiters
            .range(from..)
            .find(|w| w.registered.load(Ordering::Relaxed))
            .cloned()
    }

    /// The keys of database `db` clients are blocked on (SWAPDB: Redis's
    /// `scanDatabaseForReadyKeys` walks them too).
    pub fn keys_in_db(&self, db: usize) -> Vec<Bytes> {
        if self.is_empty() {
            return Vec::new();
        }
        self.lock()
            .by_key
            .keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, k)| k.clone())
            .collect()
    }

    /// The waiter of client `id`, if it is blocked.
    pub fn of_client(&self, id: u64) -> Option<Arc<Waiter>> {
        self.lock().by_client.get(&id).cloned()
    }
}

/// Notes the keys of a write command that clients wait on and that now hold a list or a
/// sorted set (Redis's `signalKeyAsReady`), for [`serve`] once the outermost command has
/// released its locks. Called after every write handler (client, EXEC, script), with its
/// shards still held; costs one atomic load while no client is blocked, then O(1) per key
/// (a key named twice is noted twice, and served once: the second finds nothing to do).
#[inline]
pub(crate) fn note_write(ctx: &mut Ctx<'_>, spec: &crate::engine::CommandSpec, args: &[&[u8]]) {
    // Inline: every command passes here, and almost always nobody is blocked.
    if ctx.shared.blocked.is_empty() || !spec.has(crate::engine::CmdFlags::WRITE) {
        return;
    }
    note_write_waited(ctx, spec, args);
}

/// `note_write` when some client is blocked: the written keys someone waits on are ready.
#[inline(never)]
fn note_write_waited(ctx: &mut Ctx<'_>, spec: &crate::engine::CommandSpec, args: &[&[u8]]) {
    let db = ctx.db();
    // A stream command makes its key ready itself where Redis does; any other write that
    // leaves a stream at a key (RENAME, COPY, RESTORE …) made it by Redis's `dbAdd`, which
    // signals it.
    let stream_command = spec.acl.contains(&"@stream");
    for i in spec.keys.positions(args) {
        let key = args[i];
        if ctx.shared.blocked.has_waiters(db, key)
            && (poppable(ctx, db, key)
                || ctx.shared.blocked.has_group_readers() && !holds_stream(ctx, db, key)
                || !stream_command && holds_stream(ctx, db, key))
        {
            ctx.ready.push((db, Bytes::copy_from_slice(key)));
        }
    }
}

/// True if `key` holds a value a blocked client could pop from (the store lookup serving
/// would make anyway; the key's shard is held). A stream is made ready only by the stream
/// commands that can feed a reader (XADD, XGROUP CREATE … MKSTREAM, XGROUP DESTROY, which
/// call [`note_ready`], as Redis's `signalKeyAsReady`): an XREADGROUP that blocks writes
/// its key too, and must not wake itself.
fn poppable(ctx: &mut Ctx<'_>, db: usize, key: &[u8]) -> bool {
    matches!(
        ctx.store
            .lookup_untouched(db, key, ctx.now_ms)
            .map(|e| &e.value),
        Some(Value::List(_) | Value::ZSet(_))
    )
}

/// True if `key` holds a stream (a key without one wakes the XREADGROUP readers blocked on
/// it with an error, as Redis 7.0.15 does when a stream is deleted or overwritten).
fn holds_stream(ctx: &mut Ctx<'_>, db: usize, key: &[u8]) -> bool {
    matches!(
        ctx.store
            .lookup_untouched(db, key, ctx.now_ms)
            .map(|e| &e.value),
        Some(Value::Stream(_))
    )
}

/// Notes that `key` of database `db` may now serve blocked clients (a key that arrived by
/// MOVE, COPY … DB or SWAPDB, which `note_write` does not see: it looks at the client's
/// database). Costs one atomic load while no client is blocked.
pub(crate) fn note_ready(ctx: &mut Ctx<'_>, db: usize, key: Bytes) {
    if ctx.shared.blocked.is_empty() {
        return;
    }
    if ctx.shared.blocked.has_waiters(db, &key) {
        ctx.ready.push((db, key));
    }
}

/// After FLUSHDB / FLUSHALL of databases `dbs`: the keys XREADGROUP readers wait on are
/// gone, so they are woken with an error (Redis's `scanDatabaseForDeletedStreams`). Costs
/// one atomic load while no such reader is blocked.
pub(crate) fn note_flushed(ctx: &mut Ctx<'_>, dbs: std::ops::Range<usize>) {
    if !ctx.shared.blocked.has_group_readers() {
        return;
    }
    for db in dbs {
        for key in ctx.shared.blocked.keys_in_db(db) {
            ctx.ready.push((db, key));
        }
    }
}

/// The shards of a writer's ready keys, reserved from before it lets its locks go until it
/// served their blocked clients (dropped after [`serve`]).
///
/// Redis serves the clients blocked on the keys a command wrote right after it, before any
/// other command runs. Here the writer serves them after releasing its locks, and a script
/// could take one of those shards in between: the writer's thread (and every connection
/// of its loop) would then wait on the script's lock for the whole script, and the script
/// would see the pushed element its blocked client was due. So a script that took a
/// reserved shard gives its locks back until the serve is done ([`wait_for_serving`]),
/// which puts it after the blocked clients, as in Redis. Costs nothing when `ready` is
/// empty (no client was blocked on the keys written).
pub(crate) fn reserve<'s>(shared: &'s Shared, ready: &[(usize, Bytes)]) -> Reserved<'s> {
    let reg = &shared.blocked;
    let slots: smallvec::SmallVec<[usize; 4]> = ready
        .iter()
        .map(|(_, key)| shared.keyspace.shard_of(key) % SERVING_SLOTS)
        .collect();
    for &slot in &slots {
        reg.serving[slot].fetch_add(1, Ordering::SeqCst);
        reg.serving_total.fetch_add(1, Ordering::SeqCst);
    }
    Reserved { reg, slots }
}

/// Shards reserved for serving blocked clients ([`reserve`]); released on drop.
pub(crate) struct Reserved<'s> {
    reg: &'s BlockedClients,
    slots: smallvec::SmallVec<[usize; 4]>,
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        for &slot in &self.slots {
            self.reg.serving[slot].fetch_sub(1, Ordering::SeqCst);
            self.reg.serving_total.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl BlockedClients {
    /// Whether a writer still has blocked clients to serve on one of `shards`.
    fn serving_on(&self, shards: &[usize]) -> bool {
        self.serving_total.load(Ordering::SeqCst) > 0
            && shards
                .iter()
                .any(|&i| self.serving[i % SERVING_SLOTS].load(Ordering::SeqCst) > 0)
    }
}

/// For a script that has just taken its shards (`store`): while a writer has blocked
/// clients to serve on one of them ([`reserve`]), gives them back, waits for the serve
/// (microseconds: it waits on no script) and takes them again with `relock`. One atomic
/// load while nobody serves. The writer reserves before it releases its locks and the
/// script looks after taking them, so a serve is never missed.
pub(crate) fn wait_for_serving<'a>(
    shared: &Shared,
    store: &mut crate::store::Locked<'a>,
    relock: impl Fn() -> crate::store::Locked<'a>,
) {
    let reg = &shared.blocked;
    if reg.serving_total.load(Ordering::SeqCst) == 0 {
        return;
    }
    let mut held = store.held_indexes();
    while reg.serving_on(&held) {
        store.release();
        let mut rounds = 0u32;
        while reg.serving_on(&held) {
            // A serve takes microseconds; past a few rounds (a loaded machine) sleep a bit.
            rounds += 1;
            if rounds < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
        *store = relock();
        held = store.held_indexes();
    }
}

/// How many times a serve tries again a shard a running script is marked on before it
/// leaves the key for after the script (see [`lock_or_defer`]).
const SERVE_TRIES: u32 = 80;

/// The locks serving a waiter needs (the ready key's shard and, for BLMOVE, its
/// destination's), or None when a running script holds one of them.
///
/// The writer passed the busy gate for its own keys only, and serving locks the
/// destination's shard too, which a script may hold for as long as it runs: waiting on it
/// would hold the writer's thread (and every connection of its loop) for the whole
/// script, where in Redis nothing runs beside a script. A script that is only taking or
/// handing back its shards (`wait_for_serving`, which the destination's reservation here
/// makes it do) lets go within microseconds, so the lock is tried again for a bounded
/// while (about a millisecond); a script still holding it after that is running, and the
/// key is left for after it. A shard held by another command (no script marked on it) is
/// waited for, as always.
fn lock_or_defer<'a>(shared: &'a Shared, keys: &[&'a [u8]]) -> Option<crate::store::Locked<'a>> {
    let mut tries = 0u32;
    loop {
        match shared.keyspace.try_lock_args(keys.iter().copied()) {
            Ok(locked) => return Some(locked),
            Err(wanted) => {
                if shared.scripts.busy.blocking(Some(&wanted)).is_none() {
                    return Some(shared.keyspace.lock_args(keys.iter().copied()));
                }
            }
        }
        tries += 1;
        if tries > SERVE_TRIES {
            return None;
        }
        if tries < 16 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
    }
}

/// Leaves the ready key `(db, key)` for after the running script that holds a shard its
/// serve needs. The script's end serves it ([`serve_deferred`], called by `engine::call`
/// after a script command or EXEC, once the script is no longer marked running). Had the
/// script ended meanwhile, its end may have looked before the key was left: so the key is
/// left first, then the scripts are looked at again (each side writes, then reads what
/// the other writes, with a full fence between), and if none holds the shards any more
/// this serves it at once.
fn defer(shared: &Shared, db: usize, key: Bytes, shards: &[usize]) {
    let reg = &shared.blocked;
    {
        let mut d = reg.deferred.lock().unwrap_or_else(|e| e.into_inner());
        if d.set.insert((db, key.clone())) {
            d.order.push_back((db, key));
        }
        reg.deferred_len.store(d.order.len(), Ordering::SeqCst);
    }
    std::sync::atomic::fence(Ordering::SeqCst);
    if shared.scripts.busy.blocking(Some(shards)).is_none() {
        serve_deferred(shared);
    }
}

/// Serves the ready keys left for after a script ([`defer`]); one atomic load when there
/// are none. Called with no lock held, after a script command (or EXEC) ends, once its
/// script is no longer marked running.
pub(crate) fn serve_deferred(shared: &Shared) {
    let reg = &shared.blocked;
    std::sync::atomic::fence(Ordering::SeqCst);
    if reg.deferred_len.load(Ordering::SeqCst) == 0 {
        return;
    }
    let ready: Vec<(usize, Bytes)> = {
        let mut d = reg.deferred.lock().unwrap_or_else(|e| e.into_inner());
        d.set.clear();
        reg.deferred_len.store(0, Ordering::SeqCst);
        d.order.drain(..).collect()
    };
    serve(shared, ready);
}

/// Serves the clients blocked on `ready` keys, first blocked first served, including keys
/// that serving makes ready in turn (BLMOVE's destination). Called with no lock held.
/// A key whose serve needs a shard a running script holds is left for after the script
/// ([`lock_or_defer`]), with its waiters in their order.
pub(crate) fn serve(shared: &Shared, ready: Vec<(usize, Bytes)>) {
    let mut queue: VecDeque<(usize, Bytes)> = ready.into();
    'keys: while let Some((db, key)) = queue.pop_front() {
        let mut after = 0;
        while let Some(w) = shared.blocked.next_waiter(db, &key, after) {
            after = w.seq.load(Ordering::Relaxed);
            let started = std::time::Instant::now();
            let dst = w.op.destination().cloned();
            let mut client = ClientState::new(w.info.clone());
            // Served as that client's command: its own invalidations follow its reply.
            let _current = crate::client::tracking::Current::enter(w.info.id);
            client.db = w.db;
            client.resp = w.resp;
            let mut lock_keys: Vec<&[u8]> = vec![&key[..]];
            if let Some(d) = &dst {
                lock_keys.push(&d[..]);
            }
            // The destination's shard is reserved as the writer reserved the key's: a
            // script taking it from now on waits for this serve (`wait_for_serving`).
            let dst_ready: Vec<(usize, Bytes)> = dst.iter().map(|d| (w.db, d.clone())).collect();
            let reserved = reserve(shared, &dst_ready);
            let Some(store) = lock_or_defer(shared, &lock_keys) else {
                drop(reserved);
                let shards: smallvec::SmallVec<[usize; 2]> = lock_keys
                    .iter()
                    .map(|k| shared.keyspace.shard_of(k))
                    .collect();
                defer(shared, db, key.clone(), &shards);
                continue 'keys;
            };
            let mut st = w.state.lock().unwrap_or_else(|e| e.into_inner());
            if !matches!(*st, State::Waiting) {
                continue;
            }
            let now_ns = shared.clock.now_ns();
            let mut ctx = Ctx::new(shared, &mut client, store);
            ctx.now_ms = now_ns / 1_000_000;
            ctx.now_ns = now_ns;
            // Only a key of the type the client waits for serves it (Redis's check); a
            // missing key serves nobody.
            let right_type = match ctx.store.lookup(db, &key, ctx.now_ms).map(|e| &e.value) {
                Some(Value::List(_)) => w.op.is_list(),
                Some(Value::ZSet(_)) => !w.op.is_list() && !w.op.is_stream(),
                Some(Value::Stream(_)) => w.op.is_stream(),
                _ => false,
            };
            let present = ctx.store.lookup(db, &key, ctx.now_ms).is_some();
            if w.op.is_group_read() && !right_type {
                // The stream is gone or replaced: its group went with it (Redis's
                // `unblockDeletedStreamReadgroupClients`).
                drop(ctx);
                let text = "UNBLOCKED the stream key no longer exists";
                crate::engine::call::count_error(shared, text);
                *st = State::Done(Reply::Error(text.into()));
                drop(st);
                unblocked_stats(shared, &w, &client, 0, true);
                w.notify.notify_one();
                shared.blocked.remove(&w);
                continue;
            }
            match present {
                false if shared.blocked.has_group_readers() => continue,
                false => break,
                true if !right_type => continue,
                true => {}
            }
            let reply = match w.op.attempt(&mut ctx, Some(&key)) {
                Ok(Some(r)) => r,
                Err(e) if w.op.is_stream() => {
                    // Counted as Redis counts an error a blocked command ends with.
                    let text = e.to_string();
                    crate::engine::call::count_error(shared, &text);
                    Reply::Error(text.into())
                }
                // A stream reader waits for IDs of its own: the next one may be served.
                Ok(None) if w.op.is_stream() => continue,
                Ok(None) => break,
                Err(e) => e.into(),
            };
            // The pop's effect: the state of the keys it changed, under their locks.
            if let Some(argv) = w.op.effect(&key, &reply) {
                crate::repl::effects::note_served(&mut ctx, db, argv);
            }
            shared.repl.propagate(&ctx.propagate);
            let events = ctx.take_events();
            drop(ctx);
            let failed = matches!(reply, Reply::Error(_));
            *st = State::Done(reply);
            drop(st);
            let reply_us = started.elapsed().as_micros() as u64;
            unblocked_stats(shared, &w, &client, reply_us, failed);
            crate::services::notify::publish(shared, events);
            w.notify.notify_one();
            shared.blocked.remove(&w);
            if let Some(d) = &dst
                && shared.blocked.has_waiters(w.db, d)
            {
                queue.push_back((w.db, d.clone()));
            }
        }
    }
}

/// CLIENT UNBLOCK's work: ends client `id`'s wait as a timeout or with an error; false if
/// it was not blocked.
pub(crate) fn unblock(shared: &Shared, id: u64, error: bool) -> bool {
    let Some(w) = shared.blocked.of_client(id) else {
        return false;
    };
    let reply = if error {
        Reply::Error("UNBLOCKED client unblocked via CLIENT UNBLOCK".into())
    } else {
        Reply::NullArray
    };
    let done = w.finish(reply);
    shared.blocked.remove(&w);
    if done {
        // Redis counts the call as failed whichever way CLIENT UNBLOCK ends it.
        unblocked_stats(shared, &w, &ClientState::new(w.info.clone()), 0, true);
    }
    done
}

/// Redis's `updateStatsOnUnblock`: the unblocked command's time (what it ran before it
/// blocked, plus `reply_us` to serve it) into its commandstats and latency histogram, a
/// failed call if it ended with an error, and its slow log entry.
fn unblocked_stats(shared: &Shared, w: &Waiter, client: &ClientState, reply_us: u64, failed: bool) {
    let Some(origin) = w.origin.get() else {
        return;
    };
    let Some(entry) = shared.table.entry(origin.cmd) else {
        return;
    };
    let usec = origin.usec.saturating_add(reply_us);
    entry
        .stats
        .unblocked(usec, failed, shared.live.latency_tracking());
    if !entry.spec.has(crate::engine::CmdFlags::SKIP_SLOWLOG)
        && shared.slowlog.is_slow(&shared.live, usec)
    {
        shared.slowlog.push(
            &shared.live,
            shared.clock.now_ms() / 1000,
            usec,
            &crate::services::monitor::redact(
                entry.spec.redaction,
                &crate::protocol::request::borrowed_args(&origin.args),
            ),
            client,
            false,
        );
    }
}

/// Marks a waiter gone and forgets it; the connection's guard calls this when it stops
/// waiting for any reason, so a closed client is never served.
pub(crate) fn release(shared: &Shared, w: &Arc<Waiter>) {
    {
        let mut st = w.state.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(*st, State::Waiting) {
            *st = State::Gone;
        }
    }
    shared.blocked.remove(w);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A waiter's rerun for these tests: with `pops` false it serves nothing (the
    /// registry's order is what is tested); with `pops` true it is served as BLPOP is: LPOP
    /// of the ready key, run through the command table's handler on the serving context (the
    /// blocking commands live above this layer).
    #[derive(Debug)]
    struct Keys {
        keys: Vec<Bytes>,
        pops: bool,
    }

    impl Rerun for Keys {
        fn keys(&self) -> &[Bytes] {
            &self.keys
        }
        fn wants(&self) -> Wants {
            Wants::List
        }
        fn destination(&self) -> Option<&Bytes> {
            None
        }
        fn attempt(&self, ctx: &mut Ctx<'_>, only: Option<&Bytes>) -> CmdResult<Option<Reply>> {
            if !self.pops {
                return Ok(None);
            }
            let key = only.unwrap_or(&self.keys[0]).clone();
            let lpop = ctx
                .shared
                .table
                .entries()
                .iter()
                .find(|e| e.spec.name == "lpop")
                .map(|e| e.spec.handler)
                .expect("LPOP is in the table");
            let reply = lpop(ctx, &[b"LPOP", &key[..]]);
            Ok(match reply {
                Reply::Bulk(v) => Some(Reply::Array(vec![Reply::Bulk(key), Reply::Bulk(v)])),
                _ => None,
            })
        }
        fn effect(&self, _: &Bytes, _: &Reply) -> Option<Vec<Bytes>> {
            None
        }
    }

    fn waiter(clients: &crate::client::Registry, keys: &[&[u8]]) -> Arc<Waiter> {
        let keys: Vec<Bytes> = keys.iter().map(|k| Bytes::copy_from_slice(k)).collect();
        Arc::new(Waiter {
            info: clients.register("t".into(), "t".into()),
            db: 0,
            resp: 2,
            op: Box::new(Keys {
                keys: keys.clone(),
                pops: false,
            }),
            keys: keys.into(),
            seq: AtomicU64::new(0),
            registered: AtomicBool::new(false),
            deadline_ms: 0,
            state: Mutex::new(State::Waiting),
            notify: tokio::sync::Notify::new(),
            origin: std::sync::OnceLock::new(),
        })
    }

    fn order(reg: &BlockedClients, key: &Bytes) -> Vec<u64> {
        let mut ids = Vec::new();
        let mut after = 0;
        while let Some(w) = reg.next_waiter(0, key, after) {
            after = w.seq.load(Ordering::Relaxed);
            ids.push(w.info.id);
        }
        ids
    }

    #[test]
    fn waiters_are_served_in_blocking_order_and_the_queue_stays_compact() {
        let clients = crate::client::Registry::default();
        let reg = BlockedClients::default();
        let key = Bytes::from_static(b"k");
        let ws: Vec<_> = (0..1000)
            .map(|_| waiter(&clients, &[b"k", b"other"]))
            .collect();
        for w in &ws {
            reg.add(w);
        }
        let ids: Vec<u64> = ws.iter().map(|w| w.info.id).collect();
        assert_eq!(order(&reg, &key), ids);
        assert_eq!(reg.len(), 1000);
        // Leaving from anywhere costs no scan, and the dead entries never outnumber the
        // live ones by more than a few.
        for w in ws.iter().rev().step_by(2) {
            reg.remove(w);
            let inner = reg.lock();
            let q = &inner.by_key[&(0, key.clone())];
            assert!(
                q.waiters.len() <= 2 * q.live + 8,
                "{} {}",
                q.waiters.len(),
                q.live
            );
        }
        let left: Vec<u64> = ids.iter().copied().step_by(2).collect();
        assert_eq!(order(&reg, &key), left);
        for w in &ws {
            reg.remove(w); // again for half of them: idempotent
        }
        assert_eq!(reg.len(), 0);
        assert!(reg.lock().by_key.is_empty());
    }

    #[test]
    fn a_key_named_twice_is_registered_once() {
        let k = |s: &'static [u8]| Bytes::from_static(s);
        let keys = [k(b"a"), k(b"b"), k(b"a"), k(b"c"), k(b"b")];
        assert_eq!(&distinct(&keys)[..], &[k(b"a"), k(b"b"), k(b"c")][..]);
    }

    /// The window between a writer's release of its locks and its serving of the clients
    /// blocked on the keys it wrote: a script (a real EVAL, through `engine::call`) that
    /// takes the key's shard then gives it back until the serve is done, so the blocked
    /// client gets the pushed element first, as in Redis (which serves it before the next
    /// command), and the serve does not wait on the script. This thread plays the writer
    /// between its release and its serve, holding the reservation; were the script to keep
    /// the shard, the serve would never end and the test would fail on its timeout.
    #[test]
    fn a_script_waits_for_the_blocked_clients_a_writer_is_serving() {
        let shared = Arc::new(crate::engine::tests::shared());
        let mut writer = crate::engine::tests::client(&shared);
        let key = Bytes::from_static(b"q");
        let push = [
            Bytes::from_static(b"RPUSH"),
            key.clone(),
            Bytes::from_static(b"x"),
        ];
        let _ = crate::engine::execute(
            &shared,
            &mut writer,
            &crate::protocol::request::borrowed_args(&push),
        );
        // A client blocked on the key (registered as BLPOP registers it).
        let blocked = {
            let w = waiter(&shared.clients, &[b"q"]);
            let mut w = Arc::into_inner(w).expect("a new waiter has one owner");
            w.op = Box::new(Keys {
                keys: vec![key.clone()],
                pops: true,
            });
            Arc::new(w)
        };
        shared.blocked.add(&blocked);
        // The writer's reservation, taken while it held the shard, then its release.
        let ready = vec![(0, key.clone())];
        let reserved = reserve(&shared, &ready);
        let (tx, rx) = std::sync::mpsc::channel();
        let script = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let info = shared
                    .clients
                    .register("127.0.0.1:3".into(), "127.0.0.1:4".into());
                let mut c = ClientState::new(info);
                let eval: Vec<Bytes> = ["EVAL", "return redis.call('LPOP', KEYS[1])", "1", "q"]
                    .iter()
                    .map(|a| Bytes::from(a.to_string()))
                    .collect();
                tx.send(crate::engine::execute(
                    &shared,
                    &mut c,
                    &crate::protocol::request::borrowed_args(&eval),
                ))
                .unwrap();
            })
        };
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(200))
                .is_err(),
            "the script ran before the blocked client was served"
        );
        let (served_tx, served_rx) = std::sync::mpsc::channel();
        let writer = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                serve(&shared, ready);
                served_tx.send(()).unwrap();
            })
        };
        served_rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the serve waited on the script's lock");
        writer.join().unwrap();
        let got = blocked.take_reply();
        assert!(
            format!("{got:?}").contains(r#"b"x""#),
            "the blocked client got {got:?}"
        );
        drop(reserved);
        let popped = rx.recv_timeout(std::time::Duration::from_secs(20)).unwrap();
        assert!(
            matches!(popped, Reply::Null | Reply::NullArray),
            "{popped:?}"
        );
        script.join().unwrap();
    }

    /// The busy-script window for BLMOVE's destination: a writer passed the busy gate for its
    /// own key (BLMOVE's source), and serving the blocked BLMOVE also locks the destination's
    /// shard, which a running script holds. The writer does not wait on the script's lock
    /// for the whole script: LPUSH answers, the BLMOVE stays blocked and the element stays
    /// in the source, and once the script ends, its command's end (here another EVAL's, the
    /// same path in `engine::call`) serves the BLMOVE. The "script" is this test's thread,
    /// marked running on the destination's shard and holding its lock, so the outcome does
    /// not depend on timing: a writer that waited on the lock would never answer.
    #[test]
    fn a_serve_leaves_blmove_for_after_the_script_holding_its_destination() {
        use std::time::Duration;
        let shared = Arc::new(crate::server::Shared::new(
            crate::config::Config::default(),
            crate::clock::Clock::system(),
        ));
        let src = "src";
        let dst_shard_of = |k: &str| shared.keyspace.shard_of(k.as_bytes());
        let dst = (0u32..)
            .map(|i| format!("dst{i}"))
            .find(|k| dst_shard_of(k) != dst_shard_of(src))
            .unwrap();
        let dst_shard = dst_shard_of(&dst);
        let args =
            |a: &[&str]| -> Vec<Bytes> { a.iter().map(|s| Bytes::from(s.to_string())).collect() };
        let client = |n: u16| {
            ClientState::new(
                shared
                    .clients
                    .register(format!("127.0.0.1:{n}"), "127.0.0.1:2".into()),
            )
        };
        let mut blocked = client(1);
        let ran = crate::engine::execute_may_block(
            &shared,
            &mut blocked,
            &crate::engine::args::borrowed(&args(&["BLMOVE", src, &dst, "LEFT", "RIGHT", "0"])),
        );
        let crate::engine::Next::Block(waiter) = ran.next else {
            panic!("BLMOVE did not block: {:?}", ran.reply);
        };
        let running = shared.scripts.busy.begin_as(
            None,
            crate::script::Held::Some([dst_shard].into_iter().collect()),
        );
        let lock = shared.keyspace.lock_indexes(&[dst_shard]);
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = {
            let shared = shared.clone();
            let push = args(&["LPUSH", src, "x"]);
            std::thread::spawn(move || {
                let info = shared
                    .clients
                    .register("127.0.0.1:3".into(), "127.0.0.1:2".into());
                let mut c = ClientState::new(info);
                tx.send(
                    crate::engine::execute_may_block(
                        &shared,
                        &mut c,
                        &crate::engine::args::borrowed(&push),
                    )
                    .reply,
                )
                .unwrap();
            })
        };
        let pushed = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the writer waited on the script's lock");
        writer.join().unwrap();
        assert!(matches!(pushed, Reply::Int(1)), "{pushed:?}");
        assert!(waiter.take_reply().is_none(), "BLMOVE is still blocked");
        let mut other = client(4);
        let llen = crate::engine::execute(&shared, &mut other, &args(&["LLEN", src]));
        assert!(
            matches!(llen, Reply::Int(1)),
            "the element waits in the source: {llen:?}"
        );
        // The script ends; its command's end serves what was left for after it.
        drop(lock);
        drop(running);
        let eval = crate::engine::execute(&shared, &mut other, &args(&["EVAL", "return 1", "0"]));
        assert!(matches!(eval, Reply::Int(1)), "{eval:?}");
        let got = waiter.take_reply();
        assert!(format!("{got:?}").contains(r#"b"x""#), "BLMOVE got {got:?}");
        let moved =
            crate::engine::execute(&shared, &mut other, &args(&["LRANGE", &dst, "0", "-1"]));
        assert!(format!("{moved:?}").contains(r#"b"x""#), "{moved:?}");
        let llen = crate::engine::execute(&shared, &mut other, &args(&["LLEN", src]));
        assert!(matches!(llen, Reply::Int(0)), "{llen:?}");
    }
}
