//! Per-connection state (protocol version, database, name, MULTI queue, watches) and the
//! registry of all connected clients.
//!
//! This sits below `cmd`, so commands such as EXEC or CLIENT LIST use it without reaching up
//! into `server`. The registry is a `DashMap`: it needs no atomicity with the keyspace, only
//! short inserts, removals and snapshots.

pub(crate) mod multi;
pub(crate) mod push;
pub(crate) mod tracking;

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicPtr, AtomicU8, AtomicU64, AtomicUsize, Ordering,
};
use std::task::Waker;
use std::time::Instant;

use bytes::Bytes;
use dashmap::DashMap;
use tokio_util::sync::CancellationToken;

/// What the registry and CLIENT LIST / KILL know about a client, shared with its connection.
#[derive(Debug)]
pub struct ClientInfo {
    /// CLIENT ID.
    pub id: u64,
    /// Peer address (`ip:port`).
    pub(crate) addr: String,
    /// Local address (`ip:port`).
    pub(crate) laddr: String,
    created: Instant,
    last_active_ms: AtomicU64,
    /// CLIENT SETNAME.
    pub(crate) name: Mutex<Option<Bytes>>,
    /// CLIENT SETINFO lib-name / lib-ver.
    pub(crate) lib: Mutex<(Option<Bytes>, Option<Bytes>)>,
    /// Selected database.
    pub(crate) db: AtomicUsize,
    /// Protocol version.
    pub(crate) resp: AtomicU8,
    /// Commands queued in MULTI, or -1.
    pub(crate) multi: AtomicI64,
    /// Last command name (lowercase); see [`ClientInfo::set_last_cmd`].
    last_cmd: AtomicPtr<&'static str>,
    /// Raised by CLIENT KILL or server shutdown.
    pub(crate) kill: Kill,
    /// Bytes in the input buffer from the current command on (Redis's `qbuf`).
    pub(crate) qbuf: AtomicUsize,
    /// Bytes of the current command's arguments (Redis's `argv-mem`).
    pub(crate) argv_mem: AtomicUsize,
    /// Bytes of the commands queued by MULTI, counted as Redis does: their arguments plus
    /// one pointer per argument (`multi-mem`).
    pub(crate) multi_mem: AtomicUsize,
    /// Capacity of the connection's read and write buffers, updated per batch.
    pub(crate) buf_mem: AtomicUsize,
    /// CLIENT NO-EVICT / NO-TOUCH flags.
    pub(crate) no_evict: AtomicBool,
    /// CLIENT NO-TOUCH.
    pub(crate) no_touch: AtomicBool,
    /// Subscribed channels, patterns and shard channels (CLIENT LIST `sub`, `psub`, `ssub`).
    pub(crate) subs: [AtomicUsize; 3],
    /// Blocked on keys (BLPOP…): CLIENT LIST's `b` flag.
    pub(crate) blocked: AtomicBool,
    /// Cluster mode: READONLY was sent (a replica serves this connection's reads of its
    /// master's slots); CLIENT LIST's `r` flag.
    pub(crate) readonly: AtomicBool,
    /// What kind of client for CLIENT KILL/LIST TYPE: [`KIND_NORMAL`], [`KIND_REPLICA`]
    /// (a replica's feed on its master) or [`KIND_MASTER`] (a replica's link to its master).
    pub(crate) kind: AtomicU8,
    /// The ACL user it is logged in as (CLIENT LIST `user`, CLIENT KILL USER).
    pub(crate) user: Mutex<Bytes>,
    /// The connection's push queue, once it has one (a subscription or tracking): where
    /// invalidation messages for it go.
    pub(crate) push: Mutex<Option<Arc<push::PushQueue>>>,
    /// CLIENT TRACKING's mode (`client::tracking`).
    pub(crate) tracking: Mutex<tracking::Mode>,
    /// Another client made `push` for this one (it redirects its invalidations here): the
    /// connection takes it up after its next command (`ClientState::adopt_push_queue`).
    pub(crate) push_offered: AtomicBool,
}

/// `ClientInfo::kind` of an ordinary client.
pub(crate) const KIND_NORMAL: u8 = 0;
/// `ClientInfo::kind` of a replica's connection on its master.
pub(crate) const KIND_REPLICA: u8 = 1;
/// `ClientInfo::kind` of a replica's link to its master.
pub(crate) const KIND_MASTER: u8 = 2;

impl ClientInfo {
    /// A local client, as Redis's `islocalClient` decides for `enable-debug-command local`
    /// and `enable-protected-configs local`: on the Unix socket (whose address is its path,
    /// not an IP address), or from 127.0.0.1 or ::1.
    pub(crate) fn is_local(&self) -> bool {
        match self.addr.parse::<std::net::SocketAddr>() {
            Ok(peer) => match peer.ip() {
                std::net::IpAddr::V4(ip) => ip == std::net::Ipv4Addr::LOCALHOST,
                std::net::IpAddr::V6(ip) => ip == std::net::Ipv6Addr::LOCALHOST,
            },
            Err(_) => true,
        }
    }

    /// Connected through the Unix socket (CLIENT LIST's `U` flag): its address is the
    /// socket's path with port 0 (`path:0`), never an IP address and port (nor the AOF
    /// loader's `aof`).
    pub fn is_unix_socket(&self) -> bool {
        self.addr.ends_with(":0") && self.addr.parse::<std::net::SocketAddr>().is_err()
    }

    /// Redis's client type: `normal`, `slave`, `master` or `pubsub`.
    pub(crate) fn type_name(&self) -> &'static str {
        match self.kind.load(Ordering::Relaxed) {
            KIND_REPLICA => "slave",
            KIND_MASTER => "master",
            _ if self.subs.iter().any(|s| s.load(Ordering::Relaxed) > 0) => "pubsub",
            _ => "normal",
        }
    }
}

impl ClientInfo {
    /// Seconds since the connection opened.
    pub(crate) fn age_secs(&self) -> u64 {
        self.created.elapsed().as_secs()
    }

    /// Seconds since the last command.
    pub(crate) fn idle_secs(&self) -> u64 {
        coarse_ms().saturating_sub(self.last_active_ms.load(Ordering::Relaxed)) / 1000
    }

    /// Records the name of the command being run, for CLIENT LIST. It takes a command table
    /// entry's `&'static` name field so that this is one relaxed store per command, not a lock.
    #[inline]
    pub(crate) fn set_last_cmd(&self, name: &'static &'static str) {
        self.last_cmd
            .store(std::ptr::from_ref(name).cast_mut(), Ordering::Relaxed);
    }

    /// Forgets the last command (an unknown command: Redis shows `cmd=NULL`).
    pub(crate) fn clear_last_cmd(&self) {
        self.last_cmd
            .store(std::ptr::from_ref(&NO_CMD).cast_mut(), Ordering::Relaxed);
    }

    /// The last command's name ("" before the first).
    pub(crate) fn last_cmd(&self) -> &'static str {
        let p = self.last_cmd.load(Ordering::Relaxed);
        // SAFETY: `last_cmd` only ever holds pointers made from `&'static &'static str`
        // (`NO_CMD` and `set_last_cmd`), so it is valid and immutable for the whole program.
        unsafe { *p }
    }

    /// Records activity (data was read from the client).
    #[inline]
    pub(crate) fn mark_active(&self) {
        self.last_active_ms.store(coarse_ms(), Ordering::Relaxed);
    }

    /// The ACL user it is logged in as.
    pub(crate) fn user(&self) -> Bytes {
        self.user.lock().map(|u| u.clone()).unwrap_or_default()
    }

    /// The client's name, or empty.
    pub(crate) fn name(&self) -> Option<Bytes> {
        self.name.lock().map(|n| n.clone()).unwrap_or(None)
    }

    /// What this client costs: its buffers, its arguments and queue, and its state
    /// (CLIENT LIST's `tot-mem`).
    pub(crate) fn memory(&self) -> usize {
        self.buf_mem.load(Ordering::Relaxed)
            + self.argv_mem.load(Ordering::Relaxed)
            + self.multi_mem.load(Ordering::Relaxed)
            + std::mem::size_of::<ClientInfo>()
            + std::mem::size_of::<ClientState>()
    }

    /// One line of CLIENT LIST / CLIENT INFO, in Redis 7.0.15's format (without the newline).
    /// 7.0 has no `lib-name`/`lib-ver` (7.2) nor `watch` (7.4) fields, so neither is shown.
    pub(crate) fn render(&self) -> String {
        let name = self
            .name()
            .map(|n| String::from_utf8_lossy(&n).into_owned())
            .unwrap_or_default();
        let cmd = self.last_cmd();
        let multi = self.multi.load(Ordering::Relaxed);
        let [sub, psub, ssub] = [0, 1, 2].map(|i| self.subs[i].load(Ordering::Relaxed));
        let mut flags = String::new();
        if sub + psub + ssub > 0 {
            flags.push('P');
        }
        if multi >= 0 {
            flags.push('x');
        }
        if self.blocked.load(Ordering::Relaxed) {
            flags.push('b');
        }
        let redir = match self.tracking.lock() {
            Ok(m) if m.on => {
                flags.push('t');
                if m.broken_redirect {
                    flags.push('R');
                }
                if m.bcast {
                    flags.push('B');
                }
                m.redirect as i64
            }
            _ => -1,
        };
        // Redis's order: … t R B, then U (a Unix socket client), then r.
        if self.is_unix_socket() {
            flags.push('U');
        }
        if self.readonly.load(Ordering::Relaxed) {
            flags.push('r');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let qbuf = self.qbuf.load(Ordering::Relaxed);
        let argv_mem = self.argv_mem.load(Ordering::Relaxed);
        let multi_mem = self.multi_mem.load(Ordering::Relaxed);
        let tot_mem = self.memory();
        format!(
            "id={} addr={} laddr={} fd=8 name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free=0 argv-mem={} multi-mem={} rbs=16384 rbp=0 obl=0 oll=0 omem=0 tot-mem={} events=r cmd={} user={} redir={} resp={}",
            self.id,
            self.addr,
            self.laddr,
            name,
            self.age_secs(),
            self.idle_secs(),
            flags,
            self.db.load(Ordering::Relaxed),
            sub,
            psub,
            ssub,
            multi,
            qbuf,
            argv_mem,
            multi_mem,
            tot_mem,
            if cmd.is_empty() { "NULL" } else { cmd },
            String::from_utf8_lossy(&self.user()),
            redir,
            self.resp.load(Ordering::Relaxed),
        )
    }
}

/// Milliseconds on a monotonic clock of a scheduler tick's resolution, for the idle time
/// (whole seconds): read per batch a connection reads, so it must be cheap. On Linux,
/// `CLOCK_MONOTONIC_COARSE` is a memory read in the vDSO; elsewhere, `Instant`.
#[cfg(target_os = "linux")]
fn coarse_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1000)
        .saturating_add(ts.tv_nsec as u64 / 1_000_000)
}

#[cfg(not(target_os = "linux"))]
fn coarse_ms() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// A connection's kill switch: CLIENT KILL, or the server shutting down.
///
/// The connection checks it between batches and waits on it beside its read, once per
/// request at pipeline 1, so both must be cheap: the check is one atomic load, and
/// [`Kill::watch`] registers the connection task's waker once (a shared token's
/// `cancelled()` would take a lock to register and another to deregister every time).
/// [`Kill::cancelled`] serves any other task that waits for CLIENT KILL.
///
/// Shutdown is a reason of its own: it ends a connection's wait for its next request, but
/// not a write of replies already made (the graceful shutdown delivers them), which only
/// CLIENT KILL interrupts.
#[derive(Debug, Default)]
pub(crate) struct Kill {
    /// `KILLED` and `SHUTDOWN` bits.
    raised: AtomicU8,
    /// The waker of the connection task watching (`watch`), if it registered one. Kept
    /// when woken, so that a second reason wakes it again.
    waker: Mutex<Option<Waker>>,
    token: CancellationToken,
}

const KILLED: u8 = 1;
const SHUTDOWN: u8 = 2;

impl Kill {
    /// CLIENT KILL: the connection's task is woken, every `cancelled()` future completes.
    pub(crate) fn cancel(&self) {
        self.token.cancel();
        self.raise(KILLED);
    }

    /// The server is shutting down: the connection ends once it has no reply to write.
    pub(crate) fn shut_down(&self) {
        self.raise(SHUTDOWN);
    }

    fn raise(&self, why: u8) {
        self.raised.fetch_or(why, Ordering::SeqCst);
        let waker = self.waker.lock().ok().and_then(|w| w.clone());
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Registers `waker` to be woken by CLIENT KILL or shutdown, for a connection served
    /// outside a task (`server::eventloop`); a task's `watch` replaces it later.
    pub(crate) fn set_waker(&self, waker: Waker) {
        if let Ok(mut slot) = self.waker.lock() {
            *slot = Some(waker);
        }
    }

    /// True once killed by CLIENT KILL.
    #[inline]
    pub(crate) fn is_cancelled(&self) -> bool {
        self.raised.load(Ordering::Acquire) & KILLED != 0
    }

    /// True once killed or shutting down: the connection takes no further request.
    #[inline]
    pub(crate) fn is_ending(&self) -> bool {
        self.raised.load(Ordering::Acquire) != 0
    }

    /// Completes on CLIENT KILL (any task, any number of waiters).
    pub(crate) fn cancelled(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.token.cancelled()
    }

    /// Completes when killed or shutting down ([`Kill::is_ending`]): for the connection's
    /// own task, which may keep one pinned for the whole connection and poll it once per
    /// request. Only the latest task to poll a watch is woken (one waker is kept), so other
    /// tasks use [`Kill::cancelled`].
    pub(crate) fn watch(&self) -> KillWatch<'_> {
        self.watch_for(KILLED | SHUTDOWN)
    }

    /// `watch`, for CLIENT KILL only.
    pub(crate) fn watch_killed(&self) -> KillWatch<'_> {
        self.watch_for(KILLED)
    }

    fn watch_for(&self, mask: u8) -> KillWatch<'_> {
        KillWatch {
            kill: self,
            mask,
            registered: None,
        }
    }
}

/// The future of [`Kill::watch`].
#[derive(Debug)]
pub(crate) struct KillWatch<'a> {
    kill: &'a Kill,
    mask: u8,
    /// The waker this future stored in `kill`, to re-register only when the task's changes.
    registered: Option<Waker>,
}

impl std::future::Future for KillWatch<'_> {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        let mask = self.mask;
        if self.kill.raised.load(Ordering::Acquire) & mask != 0 {
            return std::task::Poll::Ready(());
        }
        if !self
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            let waker = cx.waker().clone();
            if let Ok(mut slot) = self.kill.waker.lock() {
                *slot = Some(waker.clone());
            }
            self.registered = Some(waker);
            // `raise` sets the flag before it reads the waker: re-checked after
            // registering, a kill is either seen here or wakes this task.
            if self.kill.raised.load(Ordering::SeqCst) & mask != 0 {
                return std::task::Poll::Ready(());
            }
        }
        std::task::Poll::Pending
    }
}

/// `ClientInfo::last_cmd` before the first command.
static NO_CMD: &str = "";

/// All connected clients.
#[derive(Debug, Default)]
pub struct Registry {
    clients: DashMap<u64, Arc<ClientInfo>>,
    next_id: AtomicU64,
    /// Set by `kill_all`: the server is shutting down.
    closing: AtomicBool,
}

impl Registry {
    /// Registers a new connection and returns its shared info.
    pub fn register(&self, addr: String, laddr: String) -> Arc<ClientInfo> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let info = Arc::new(ClientInfo {
            id,
            addr,
            laddr,
            created: Instant::now(),
            last_active_ms: AtomicU64::new(coarse_ms()),
            name: Mutex::new(None),
            lib: Mutex::new((None, None)),
            db: AtomicUsize::new(0),
            resp: AtomicU8::new(2),
            multi: AtomicI64::new(-1),
            last_cmd: AtomicPtr::new(std::ptr::from_ref(&NO_CMD).cast_mut()),
            kill: Kill::default(),
            qbuf: AtomicUsize::new(0),
            argv_mem: AtomicUsize::new(0),
            multi_mem: AtomicUsize::new(0),
            buf_mem: AtomicUsize::new(0),
            no_evict: AtomicBool::new(false),
            no_touch: AtomicBool::new(false),
            subs: Default::default(),
            blocked: AtomicBool::new(false),
            readonly: AtomicBool::new(false),
            kind: AtomicU8::new(KIND_NORMAL),
            user: Mutex::new(Bytes::from_static(b"default")),
            push: Mutex::new(None),
            tracking: Mutex::new(tracking::Mode::default()),
            push_offered: AtomicBool::new(false),
        });
        self.clients.insert(id, info.clone());
        // A connection registered while `kill_all` ran is killed too (it checks `closing`
        // after its own insert, `kill_all` sets it before looking at the clients).
        if self.closing.load(Ordering::SeqCst) {
            info.kill.shut_down();
        }
        info
    }

    /// Server shutdown: tells every connection, and any that registers from now on, to end
    /// once its replies are written (`Kill::shut_down`).
    pub(crate) fn shut_down_all(&self) {
        self.closing.store(true, Ordering::SeqCst);
        for c in self.clients.iter() {
            c.kill.shut_down();
        }
    }

    /// What the connected clients of one kind (`KIND_*`) cost in memory, summed: INFO
    /// memory's `mem_clients_normal` / `mem_clients_slaves`. O(clients), as CLIENT LIST.
    pub(crate) fn memory_of_kind(&self, kind: u8) -> usize {
        self.clients
            .iter()
            .filter(|c| c.kind.load(Ordering::Relaxed) == kind)
            .map(|c| c.memory())
            .sum()
    }

    /// Removes a closed connection.
    pub fn unregister(&self, id: u64) {
        self.clients.remove(&id);
    }

    /// How many clients are connected.
    pub fn len(&self) -> usize {
        self.clients.len()
    }

    /// True when no client is connected.
    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    /// A snapshot of all clients, ordered by id.
    pub(crate) fn snapshot(&self) -> Vec<Arc<ClientInfo>> {
        let mut all: Vec<Arc<ClientInfo>> =
            self.clients.iter().map(|e| e.value().clone()).collect();
        all.sort_by_key(|c| c.id);
        all
    }

    /// One client by id.
    pub(crate) fn get(&self, id: u64) -> Option<Arc<ClientInfo>> {
        self.clients.get(&id).map(|e| e.value().clone())
    }
}

/// The state one connection carries between commands.
#[derive(Debug)]
pub struct ClientState {
    /// Shared with the registry.
    pub(crate) info: Arc<ClientInfo>,
    /// Protocol version (2 or 3).
    pub(crate) resp: u8,
    /// Selected database.
    pub(crate) db: usize,
    /// Commands queued since MULTI, or None outside a transaction.
    pub(crate) multi: Option<multi::MultiQueue>,
    /// A queued command was refused: EXEC must abort.
    pub(crate) multi_failed: bool,
    /// The emptied queue of an earlier transaction, reused by the next MULTI.
    spare_multi: multi::MultiQueue,
    /// Keys this client WATCHes (database, key).
    pub(crate) watched: Vec<(usize, Bytes)>,
    /// Set by the keyspace when a watched key is modified.
    pub(crate) dirty: Arc<AtomicBool>,
    /// Authenticated (always true while no password is configured).
    pub authenticated: bool,
    /// The ACL user the connection runs as (`default` until AUTH names another).
    pub(crate) user: Bytes,
    /// Pub/sub subscriptions and their push queue, from the first SUBSCRIBE (or CLIENT
    /// TRACKING ON) on.
    pub subs: Option<Box<push::Subscriptions>>,
    /// CLIENT TRACKING is on (its mode is in `info.tracking`).
    pub(crate) tracking: bool,
    /// CLIENT CACHING YES|NO, for the next command (or transaction).
    pub(crate) caching: bool,
    /// A script running for this client called a read-only command (tracking remembers
    /// the script's keys when it ends).
    pub(crate) script_read: bool,
    /// CLIENT REPLY OFF: no replies until CLIENT REPLY ON.
    pub(crate) reply_off: bool,
    /// CLIENT REPLY SKIP was the previous command: no reply to this one.
    pub(crate) reply_skip: bool,
    /// CLIENT REPLY SKIP is the current command.
    pub(crate) reply_skip_next: bool,
    /// This is a replica's link to its master: its writes are allowed on a read-only
    /// replica, keys never expire for it, and it propagates nothing itself.
    pub(crate) master_link: bool,
    /// ASKING was the previous command: the next one may use a slot being imported.
    pub(crate) asking: bool,
    /// Set by cluster routing for a command on a slot being migrated (`(slot, true)`) or
    /// imported (`(slot, false)`): its keys are checked once their shards are locked.
    pub(crate) cluster_check: Option<(u16, bool)>,
    /// REPLCONF listening-port / ip-address of a replica connecting to this node.
    pub(crate) repl_port: u16,
    /// REPLCONF ip-address.
    pub(crate) repl_ip: Option<String>,
}

impl ClientState {
    /// Fresh state for a new connection.
    pub fn new(info: Arc<ClientInfo>) -> Self {
        ClientState {
            info,
            resp: 2,
            db: 0,
            multi: None,
            multi_failed: false,
            spare_multi: multi::MultiQueue::default(),
            watched: Vec::new(),
            dirty: Arc::new(AtomicBool::new(false)),
            authenticated: true,
            user: Bytes::from_static(b"default"),
            subs: None,
            tracking: false,
            caching: false,
            script_read: false,
            reply_off: false,
            reply_skip: false,
            reply_skip_next: false,
            master_link: false,
            asking: false,
            cluster_check: None,
            repl_port: 0,
            repl_ip: None,
        }
    }

    /// True while subscribed to anything (Redis's `CLIENT_PUBSUB`).
    pub(crate) fn subscribed(&self) -> bool {
        self.subs.as_ref().is_some_and(|s| s.active())
    }

    /// The client's subscriptions, made (with the push queue other clients reach through
    /// `info.push`) on first use.
    pub(crate) fn subscriptions(&mut self) -> &mut push::Subscriptions {
        let resp = self.resp;
        let info = &self.info;
        self.subs.get_or_insert_with(|| {
            let s = Box::new(push::Subscriptions::new(resp));
            if let Ok(mut p) = info.push.lock() {
                *p = Some(s.queue.clone());
            }
            s
        })
    }

    /// Takes up the push queue another client made for this connection (CLIENT TRACKING
    /// REDIRECT to it), so that it waits for its messages from now on.
    #[inline]
    pub(crate) fn adopt_push_queue(&mut self) {
        if !self.info.push_offered.load(Ordering::Relaxed) {
            return;
        }
        self.info.push_offered.store(false, Ordering::Relaxed);
        if self.subs.is_none() {
            let queue = self.info.push.lock().ok().and_then(|q| q.clone());
            if let Some(q) = queue {
                q.set_resp(self.resp);
                self.subs = Some(Box::new(push::Subscriptions::with_queue(q)));
            }
        }
    }

    /// The push queue, once the client has subscribed.
    pub fn push_queue(&self) -> Option<&Arc<push::PushQueue>> {
        self.subs.as_ref().map(|s| &s.queue)
    }

    /// Called once per request, after it ran: true if its reply must be dropped (CLIENT REPLY
    /// OFF, or SKIP for this command or the one before it). It also moves SKIP on to the next
    /// request, as Redis does after every command.
    pub(crate) fn reply_suppressed(&mut self) -> bool {
        let drop = self.reply_off || self.reply_skip || self.reply_skip_next;
        self.reply_skip = std::mem::take(&mut self.reply_skip_next);
        drop
    }

    /// Logs the connection in as `user` (AUTH, HELLO AUTH, RESET).
    pub(crate) fn set_user(&mut self, user: Bytes) {
        if let Ok(mut u) = self.info.user.lock() {
            *u = user.clone();
        }
        self.user = user;
        self.authenticated = true;
    }

    /// The client id.
    pub(crate) fn id(&self) -> u64 {
        self.info.id
    }

    /// Switches protocol version.
    pub(crate) fn set_resp(&mut self, resp: u8) {
        self.resp = resp;
        self.info.resp.store(resp, Ordering::Relaxed);
        if let Some(s) = &self.subs {
            s.queue.set_resp(resp);
        }
    }

    /// Switches database.
    pub(crate) fn set_db(&mut self, db: usize) {
        self.db = db;
        self.info.db.store(db, Ordering::Relaxed);
    }

    /// Enters MULTI state with an empty queue (the last transaction's, when kept).
    pub(crate) fn begin_multi(&mut self) {
        self.multi = Some(std::mem::take(&mut self.spare_multi));
        self.multi_failed = false;
    }

    /// Keeps the queue EXEC has run, emptied, for the next MULTI (small ones only).
    pub(crate) fn recycle_multi(&mut self, mut queue: multi::MultiQueue) {
        if queue.worth_keeping() {
            queue.clear();
            self.spare_multi = queue;
        }
    }

    /// Leaves MULTI state (EXEC, DISCARD, RESET).
    pub(crate) fn end_multi(&mut self) {
        if let Some(queue) = self.multi.take() {
            self.recycle_multi(queue);
        }
        self.multi_failed = false;
        self.info.multi.store(-1, Ordering::Relaxed);
        self.info.multi_mem.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Wake, Waker};

    use super::Kill;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A watch wakes its task for a kill or a shutdown; a write's watch (`watch_killed`)
    /// lets a shutdown pass and still wakes for the kill after it.
    #[test]
    fn kill_and_shutdown_wake_the_watching_task() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let kill = Kill::default();
        let mut any = std::pin::pin!(kill.watch());
        let mut killed = std::pin::pin!(kill.watch_killed());
        assert!(any.as_mut().poll(&mut cx).is_pending());
        // Polled again with the same waker: nothing to register, still pending.
        assert!(any.as_mut().poll(&mut cx).is_pending());
        assert!(killed.as_mut().poll(&mut cx).is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        kill.shut_down();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(kill.is_ending() && !kill.is_cancelled());
        assert!(any.as_mut().poll(&mut cx).is_ready());
        assert!(killed.as_mut().poll(&mut cx).is_pending());
        kill.cancel();
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            2,
            "the kept waker is woken again"
        );
        assert!(kill.is_cancelled());
        assert!(killed.as_mut().poll(&mut cx).is_ready());
    }

    /// A watch created after the kill is ready at its first poll.
    #[test]
    fn a_watch_after_the_kill_is_ready() {
        let kill = Kill::default();
        kill.cancel();
        let mut cx = Context::from_waker(Waker::noop());
        assert!(std::pin::pin!(kill.watch()).poll(&mut cx).is_ready());
        assert!(std::pin::pin!(kill.watch_killed()).poll(&mut cx).is_ready());
    }
}
