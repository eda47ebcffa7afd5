//! The data path's own event loops (`io-backend loop`, the default): plain TCP connections
//! served in Redis's shape, with no task, waker or thread hand-off per request.
//!
//! Each loop is one thread around one epoll instance (through `mio`). A turn of the loop
//! waits once for readiness, then for every ready connection reads what its socket has,
//! runs every complete request in it inline (the same `engine::execute_may_block` the tokio
//! path calls) and encodes the replies into its output buffer; once every ready connection
//! has run, it writes each pending output buffer with one `send`, and waits again. A turn
//! therefore costs one `epoll_wait` however many connections it serves, and a request
//! costs its `recv`, its share of a `send`, and nothing else outside its command.
//!
//! Everything a connection can need that is not "read, run, write" is left to the tokio
//! connection code (`connection::resume`), which already does it: a connection is handed
//! over — its socket, its registry entry, its parser and buffers with whatever they hold,
//! and where it stopped (`connection::Resume`) — when a command blocks (a blocking pop that
//! found nothing), leaves the client waiting (PSYNC, WAIT, DEBUG SLEEP, a FAULT latency,
//! MONITOR, a subscription and its pushes), when CLIENT PAUSE or a running script's shards
//! gate a command, or when a write cannot complete at once (the output limits, the idle
//! timeout of a stalled write and CLIENT KILL of it are the tokio code's). It stays there.
//! Replies keep their order: everything before the hand-over is in the output buffer the
//! tokio code writes first.
//!
//! What stays here is what a rate limiter's traffic needs: CLIENT KILL and shutdown (a
//! kill wakes the loop through the client's kill switch, `client::Kill::set_waker`), the
//! idle `timeout` (checked every 100 ms, as Redis's `clientsCron`), the query buffer limit,
//! protocol errors, CLIENT REPLY, QUIT and the test-mode FAULT disconnect.
//!
//! **A script running long on a loop** (past 2 ms) calls this loop back from its hook
//! (`script::set_while_busy`), as Redis processes events from inside a script: every other
//! connection of the loop with something to read is handed over to tokio, where the busy
//! gate answers `-BUSY` past `busy-reply-threshold` and SCRIPT KILL, FUNCTION KILL and
//! SHUTDOWN NOSAVE run.
//!
//! **Loops that scale themselves.** With `threads` unset (0, the default), the loops for
//! every CPU are started but connections are dealt only to the active ones, starting with
//! one. Once a second, an active loop that spent more than `SATURATED` of the second
//! working (its thread's CPU time), on a machine with at least a whole core idle
//! (`IDLE_TO_GROW`: on a 2-core machine shared with a busy client, a second loop would only
//! take CPU from the client; measured, it served fewer decisions), activates the next loop and moves every other connection of its own there; the last
//! active loop lets go (its connections back to the others) when all of them together
//! worked less than half of what one loop fewer could. `--threads N` fixes the count: N
//! loops, all active from the start.
//!
//! Why `mio` and not raw `epoll`: it is already in the dependency tree (under tokio), its
//! `Poll`/`Registry`/`Waker` are the thin safe layer over `epoll_ctl`/`epoll_wait`/`eventfd`
//! this loop needs, and its edge-triggered registration means no `epoll_ctl` per turn. A
//! read that fills less than the buffer has drained the socket (TCP gives what it has), so
//! one `recv` per readiness suffices; a read that fills it is tried again next turn.

use std::cell::RefCell;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use mio::net::TcpStream as MioStream;
use mio::{Events, Interest, Poll, Token};
use tokio_util::task::{TaskTracker, task_tracker::TaskTrackerToken};

use super::Admitted;
use super::connection::{self, Buffers, Registered, Resume};
use crate::server::Shared;
use crate::{commands, engine};

/// The token of a loop's waker (new and moved connections, kills, shutdown).
const WAKE: Token = Token(usize::MAX);

/// Write the output early once it holds this much (as the tokio path does).
const FLUSH_AT: usize = 64 * 1024;

/// How often a loop looks at idle timeouts and its load.
const CRON: Duration = Duration::from_millis(100);

/// The share of a second an active loop must spend working to bring in the next loop.
const SATURATED: f64 = 0.9;

/// Idle CPUs the machine must have (over the last second) before a saturated loop brings
/// in another: a whole core, so the new loop runs beside the others and the clients rather
/// than in their place.
const IDLE_TO_GROW: f64 = 1.0;

/// A connection arriving at a loop.
enum Arrival {
    /// Accepted: register it here.
    New {
        stream: std::net::TcpStream,
        peer: String,
        laddr: String,
        slot: Admitted,
    },
    /// Moved from another loop (scaling).
    Moved(Box<Conn>),
}

/// What other threads reach of a loop.
struct Mailbox {
    arrivals: Mutex<Vec<Arrival>>,
    /// Tokens whose client was killed (CLIENT KILL, shutdown).
    kills: Mutex<Vec<usize>>,
    waker: mio::Waker,
    /// The loop's share of the last second spent working, in thousandths (for scaling).
    busy_permille: std::sync::atomic::AtomicU32,
}

impl Mailbox {
    fn wake(&self) {
        let _ = self.waker.wake();
    }
}

/// Wakes a loop for one connection's kill switch.
struct KillWake {
    mailbox: Arc<Mailbox>,
    token: usize,
}

impl Wake for KillWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Ok(mut k) = self.mailbox.kills.lock() {
            k.push(self.token);
        }
        self.mailbox.wake();
    }
}

/// The loops of a server.
pub struct Group {
    mailboxes: Vec<Arc<Mailbox>>,
    /// How many loops take new connections (the first `active`).
    active: AtomicUsize,
    next: AtomicUsize,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("eventloop::Group")
            .field("loops", &self.mailboxes.len())
            .field("active", &self.active.load(Ordering::Relaxed))
            .finish()
    }
}

/// What every loop of a group shares.
struct Common {
    shared: Arc<Shared>,
    group: Arc<Group>,
    /// Where connections are handed over to (tokio's loops).
    dealer: super::loops::Dealer,
    tracker: TaskTracker,
    /// Whether loops activate one another by load (`threads` unset).
    scaling: bool,
}

impl Group {
    /// Starts `n` loops (at least one); with `scaling`, only the first takes connections
    /// until it is saturated (see the module docs), else all do.
    pub fn start(
        shared: Arc<Shared>,
        dealer: super::loops::Dealer,
        tracker: TaskTracker,
        n: usize,
        scaling: bool,
    ) -> std::io::Result<Arc<Group>> {
        let n = n.max(1);
        let mut polls = Vec::with_capacity(n);
        let mut mailboxes = Vec::with_capacity(n);
        for _ in 0..n {
            let poll = Poll::new()?;
            let waker = mio::Waker::new(poll.registry(), WAKE)?;
            mailboxes.push(Arc::new(Mailbox {
                arrivals: Mutex::new(Vec::new()),
                kills: Mutex::new(Vec::new()),
                waker,
                busy_permille: std::sync::atomic::AtomicU32::new(0),
            }));
            polls.push(poll);
        }
        let group = Arc::new(Group {
            mailboxes,
            active: AtomicUsize::new(if scaling { 1 } else { n }),
            next: AtomicUsize::new(0),
            threads: Mutex::new(Vec::new()),
        });
        let common = Arc::new(Common {
            shared: shared.clone(),
            group: group.clone(),
            dealer,
            tracker,
            scaling: scaling && n > 1,
        });
        let mut threads = Vec::with_capacity(n);
        for (i, poll) in polls.into_iter().enumerate() {
            let common = common.clone();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("sluice-loop-{i}"))
                    .stack_size(crate::script::WORKER_STACK)
                    .spawn(move || run_loop(i, poll, common))?,
            );
        }
        if let Ok(mut t) = group.threads.lock() {
            *t = threads;
        }
        Ok(group)
    }

    /// Gives an accepted connection to the next active loop.
    pub(super) fn deal(
        &self,
        stream: std::net::TcpStream,
        peer: String,
        laddr: String,
        slot: Admitted,
    ) {
        let active = self.active.load(Ordering::Relaxed).max(1);
        let i = self.next.fetch_add(1, Ordering::Relaxed) % active;
        self.send(
            i,
            Arrival::New {
                stream,
                peer,
                laddr,
                slot,
            },
        );
    }

    fn send(&self, i: usize, arrival: Arrival) {
        let mb = &self.mailboxes[i % self.mailboxes.len()];
        if let Ok(mut a) = mb.arrivals.lock() {
            a.push(arrival);
        }
        mb.wake();
    }

    /// How many loops take connections now.
    pub fn active(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// Wakes every loop (shutdown: they end once their connections have).
    pub fn wake_all(&self) {
        for mb in &self.mailboxes {
            mb.wake();
        }
    }

    /// Waits for the loop threads to end (after shutdown).
    pub fn join(&self) {
        let threads = self
            .threads
            .lock()
            .map(|mut t| std::mem::take(&mut *t))
            .unwrap_or_default();
        for t in threads {
            let _ = t.join();
        }
    }
}

/// One connection served by a loop.
struct Conn {
    stream: MioStream,
    reg: Registered,
    buf: Buffers,
    _slot: Admitted,
    _track: TaskTrackerToken,
    /// The last read filled the buffer: the socket may hold more (edge-triggered).
    more: bool,
    /// In this turn's ready list already.
    queued: bool,
    /// Close once the output is written (kill, shutdown, query buffer over its limit).
    close_after_write: bool,
    /// `client-query-buffer-limit`, read once per connection as the tokio path does (the
    /// configuration is cloned to be read: not something to do per batch).
    query_limit: usize,
}

/// A loop's state. Behind `RefCell`s borrowed only briefly, never across a command: a
/// long script calls back into the loop (`while_busy`) from inside its command.
struct State {
    index: usize,
    common: Arc<Common>,
    poll: RefCell<Poll>,
    conns: RefCell<Vec<Option<Box<Conn>>>>,
    free: RefCell<Vec<usize>>,
    /// This turn's ready connections not served yet (a long script's hook hands them over).
    ready: RefCell<std::collections::VecDeque<usize>>,
    /// Connections with replies to write in this turn's write pass.
    writes: RefCell<Vec<usize>>,
    /// Tokens to look at again next turn: found ready while their connection was out of its
    /// slot (running a script), or whose last read filled the buffer.
    deferred: RefCell<Vec<usize>>,
    /// Kills read from the mailbox while a script ran.
    deferred_kills: RefCell<Vec<usize>>,
}

thread_local! {
    /// This thread's loop, for `while_busy`.
    static CURRENT: RefCell<Option<Rc<State>>> = const { RefCell::new(None) };
}

impl State {
    fn take(&self, token: usize) -> Option<Box<Conn>> {
        self.conns
            .borrow_mut()
            .get_mut(token)
            .and_then(Option::take)
    }

    fn put(&self, token: usize, conn: Box<Conn>) {
        if let Some(slot) = self.conns.borrow_mut().get_mut(token) {
            *slot = Some(conn);
        }
    }

    fn count(&self) -> usize {
        self.conns.borrow().len() - self.free.borrow().len()
    }

    fn mailbox(&self) -> &Arc<Mailbox> {
        &self.common.group.mailboxes[self.index]
    }

    /// Registers a connection (new or moved here) and returns its token.
    fn add(&self, mut conn: Box<Conn>) -> Option<usize> {
        let token = match self.free.borrow_mut().pop() {
            Some(t) => t,
            None => {
                let mut conns = self.conns.borrow_mut();
                conns.push(None);
                conns.len() - 1
            }
        };
        let registered = self.poll.borrow().registry().register(
            &mut conn.stream,
            Token(token),
            Interest::READABLE,
        );
        if let Err(e) = registered {
            tracing::debug!("cannot register a connection with its event loop: {e}");
            self.free.borrow_mut().push(token);
            return None;
        }
        conn.reg
            .client
            .info
            .kill
            .set_waker(Waker::from(Arc::new(KillWake {
                mailbox: self.mailbox().clone(),
                token,
            })));
        self.put(token, conn);
        Some(token)
    }

    /// Frees a connection's slot (the connection was taken out of it).
    fn forget(&self, token: usize, conn: &mut Conn) {
        let _ = self.poll.borrow().registry().deregister(&mut conn.stream);
        self.free.borrow_mut().push(token);
    }

    /// Closes a connection that is out of its slot.
    fn close(&self, token: usize, mut conn: Box<Conn>) {
        self.forget(token, &mut conn);
        let shared = &self.common.shared;
        // Unwatching locks the watched keys' shards, which a long script may hold: do it
        // where waiting costs no other client anything.
        if !conn.reg.client.watched.is_empty() && commands::scripting::script_running(shared) {
            let shared = shared.clone();
            self.common
                .dealer
                .handle(self.index)
                .spawn(self.common.tracker.track_future(async move {
                    let watched = conn.reg.client.watched.clone();
                    commands::scripting::wait_idle(&shared, &watched).await;
                    drop(conn);
                }));
        }
    }

    /// Writes the replies of every connection that has some (one `send` each); a write that
    /// cannot complete hands its connection over to tokio.
    fn write_pass(&self) {
        let shared = &self.common.shared;
        let writes = std::mem::take(&mut *self.writes.borrow_mut());
        for token in writes {
            let Some(mut conn) = self.take(token) else {
                continue;
            };
            match flush(shared, &mut conn) {
                Flushed::Done if conn.close_after_write => self.close(token, conn),
                Flushed::Done => self.put(token, conn),
                Flushed::Stalled => self.hand_over(token, conn, Resume::Read),
                Flushed::Failed => self.close(token, conn),
            }
        }
    }

    /// Hands a connection (out of its slot) over to the tokio connection code.
    fn hand_over(&self, token: usize, conn: Box<Conn>, resume: Resume) {
        let mut conn = conn;
        self.forget(token, &mut conn);
        hand_over(&self.common, self.index, conn, resume);
    }
}

/// Hands a connection no longer registered with any loop to tokio.
fn hand_over(common: &Common, index: usize, conn: Box<Conn>, resume: Resume) {
    let Conn {
        stream,
        reg,
        buf,
        _slot: slot,
        ..
    } = *conn;
    let stream = std::net::TcpStream::from(stream);
    common
        .dealer
        .handle(index)
        .spawn(common.tracker.track_future(async move {
            let _slot = slot;
            match tokio::net::TcpStream::from_std(stream) {
                Ok(stream) => connection::resume(reg, stream, buf, resume).await,
                Err(e) => tracing::debug!("cannot hand a connection over to tokio: {e}"),
            }
        }));
}

/// What serving a connection's input left to do.
enum Served {
    /// Keep it; its replies (if any) are written in this turn's write pass.
    Keep,
    /// Close it now, without writing (QUIT-like ends flush first themselves).
    Close,
    /// Hand it over to tokio.
    HandOver(Resume),
}

fn run_loop(index: usize, poll: Poll, common: Arc<Common>) {
    let state = Rc::new(State {
        index,
        common: common.clone(),
        poll: RefCell::new(poll),
        conns: RefCell::new(Vec::new()),
        free: RefCell::new(Vec::new()),
        ready: RefCell::new(std::collections::VecDeque::new()),
        writes: RefCell::new(Vec::new()),
        deferred: RefCell::new(Vec::new()),
        deferred_kills: RefCell::new(Vec::new()),
    });
    CURRENT.with(|c| *c.borrow_mut() = Some(state.clone()));
    crate::script::set_while_busy(Some(while_busy));
    let shared = common.shared.clone();
    let mut events = Events::with_capacity(1024);
    let mut ready: Vec<usize> = Vec::new();
    let mut load = Load::new();
    let mut next_cron = Instant::now() + CRON;
    let mut turn: u32 = 0;
    loop {
        let shutting_down = shared.shutdown.is_cancelled();
        if shutting_down && state.count() == 0 {
            break;
        }
        // Something left to read from last turn: look at the sockets without sleeping.
        let timeout = if !state.deferred.borrow().is_empty() {
            Some(Duration::ZERO)
        } else if state.count() > 0 || shutting_down {
            Some(CRON)
        } else {
            None
        };
        let polled = state.poll.borrow_mut().poll(&mut events, timeout);
        if let Err(e) = polled
            && e.kind() != std::io::ErrorKind::Interrupted
        {
            tracing::warn!("event loop {index}: {e}");
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let mut kills = std::mem::take(&mut *state.deferred_kills.borrow_mut());
        for ev in events.iter() {
            if ev.token() == WAKE {
                let arrivals = std::mem::take(&mut *lock(&state.mailbox().arrivals));
                for arrival in arrivals {
                    if let Some(token) = arrive(&state, arrival) {
                        ready.push(token);
                    }
                }
                kills.append(&mut lock(&state.mailbox().kills));
            } else {
                ready.push(ev.token().0);
            }
        }
        ready.append(&mut state.deferred.borrow_mut());
        for token in kills {
            if let Some(conn) = state.take(token) {
                if conn.reg.client.info.kill.is_ending() {
                    state.close(token, conn);
                } else {
                    state.put(token, conn);
                }
            }
        }
        // Read and run every ready connection.
        state.ready.borrow_mut().extend(ready.iter().copied());
        loop {
            let Some(token) = state.ready.borrow_mut().pop_front() else {
                break;
            };
            let Some(mut conn) = state.take(token) else {
                continue;
            };
            if conn.queued {
                state.put(token, conn);
                continue;
            }
            conn.queued = true;
            // A panic in a command (a bug, or FAULT PANIC in test mode) ends its connection,
            // as it ends a tokio task, not the loop.
            let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                serve(&shared, &mut conn)
            }))
            .unwrap_or_else(|_| {
                tracing::warn!(
                    "a command panicked: closing client {}",
                    conn.reg.client.id()
                );
                Served::Close
            });
            match served {
                Served::Keep => {
                    if conn.more {
                        state.deferred.borrow_mut().push(token);
                    }
                    if !conn.buf.wbuf.is_empty() || conn.close_after_write {
                        state.writes.borrow_mut().push(token);
                    }
                    state.put(token, conn);
                }
                Served::Close => state.close(token, conn),
                Served::HandOver(resume) => state.hand_over(token, conn, resume),
            }
        }
        for token in ready.drain(..) {
            if let Some(conn) = state
                .conns
                .borrow_mut()
                .get_mut(token)
                .and_then(|c| c.as_mut())
            {
                conn.queued = false;
            }
        }
        // What the replies acknowledge reaches the append-only file first (and the disk,
        // with `appendfsync always`), as Redis flushes it before writing replies.
        if !state.writes.borrow().is_empty() {
            shared.repl.aof.before_reply();
        }
        // Write every pending reply, one send per connection.
        state.write_pass();
        // The clock is read for the cron only every 32 turns, or when a wait timed out.
        turn = turn.wrapping_add(1);
        if !events.is_empty() && !turn.is_multiple_of(32) {
            continue;
        }
        let now = Instant::now();
        if now >= next_cron {
            next_cron = now + CRON;
            cron(&state);
            if common.scaling && load.second_passed(now) {
                scale(&state, load.busy_share());
            }
        }
    }
    crate::script::set_while_busy(None);
    CURRENT.with(|c| *c.borrow_mut() = None);
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Registers an arriving connection; its token when it may have input already buffered.
fn arrive(state: &State, arrival: Arrival) -> Option<usize> {
    let common = &state.common;
    match arrival {
        Arrival::New {
            stream,
            peer,
            laddr,
            slot,
        } => {
            if common.shared.shutdown.is_cancelled() {
                return None;
            }
            if let Err(e) = stream.set_nonblocking(true) {
                tracing::debug!("cannot serve {peer} on an event loop: {e}");
                return None;
            }
            let reg = Registered::new(&common.shared, peer, laddr);
            let buf = Buffers::new(&common.shared, &reg.client);
            let query_limit = common.shared.config().client_query_buffer_limit;
            let conn = Box::new(Conn {
                stream: MioStream::from_std(stream),
                reg,
                buf,
                _slot: slot,
                _track: common.tracker.token(),
                more: false,
                queued: false,
                close_after_write: false,
                query_limit,
            });
            // Edge-triggered registration reports data already there.
            state.add(conn);
            None
        }
        Arrival::Moved(conn) => state.add(conn),
    }
}

/// Reads what the socket has and runs every complete request (see the module docs).
fn serve(shared: &Shared, conn: &mut Conn) -> Served {
    let client = &mut conn.reg.client;
    let buf = &mut conn.buf;
    if client.info.kill.is_ending() {
        return Served::Close;
    }
    // Read once.
    buf.make_room();
    if buf.rbuf.capacity() == buf.rbuf.len() {
        buf.rbuf.reserve(64);
    }
    let spare = buf.rbuf.spare_capacity_mut();
    let room = spare.len();
    // SAFETY: recv writes at most `room` bytes into the buffer's spare capacity, which we
    // own; `set_len` below covers only what it wrote.
    // The system call itself, not libc's `recv`: that wrapper is a thread-cancellation
    // point and pays to enable and disable cancellation around every call.
    let n = unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            conn.stream.as_raw_fd(),
            spare.as_mut_ptr(),
            room,
            0,
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    };
    conn.more = false;
    if n == 0 {
        return Served::Close;
    }
    if n < 0 {
        let e = std::io::Error::last_os_error();
        match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted => {
                conn.more = e.kind() == std::io::ErrorKind::Interrupted;
                // Nothing new; requests left in the buffer (a connection moved here) run.
                if buf.rbuf.is_empty() {
                    return Served::Keep;
                }
                0
            }
            _ => return Served::Close,
        };
    }
    if n > 0 {
        let n = n as usize;
        // SAFETY: the first `n` bytes of the spare capacity were written by recv.
        unsafe { buf.rbuf.set_len(buf.rbuf.len() + n) };
        conn.more = n == room;
        // Like Redis, a client's last interaction is its last read, not each command.
        client.info.mark_active();
        shared
            .stats
            .net_input_bytes
            .fetch_add(n as u64, Ordering::Relaxed);
    }
    let served = run_requests(shared, conn);
    if matches!(served, Served::Keep) {
        after_batch(conn);
    }
    served
}

/// Runs every complete request in the read buffer: the tokio path's inner loop, minus
/// what it hands over for.
fn run_requests(shared: &Shared, conn: &mut Conn) -> Served {
    let client = &mut conn.reg.client;
    let buf = &mut conn.buf;
    let info = client.info.clone();
    loop {
        let req = match buf.parser.parse(&buf.rbuf) {
            Ok(Some(req)) => req,
            Ok(None) => break,
            Err(e) => {
                connection::protocol_error(shared, &mut buf.wbuf, &e);
                let _ = write_now(shared, &conn.stream, &mut buf.wbuf);
                return Served::Close;
            }
        };
        let frame = buf.rbuf.split_to(req.consumed).freeze();
        // Redis's qbuf: the unprocessed input, this command included.
        info.qbuf
            .store(req.consumed + buf.rbuf.len(), Ordering::Relaxed);
        buf.parser.fill_args(req.args, &frame, &mut buf.args);
        if buf.args.is_empty() {
            continue;
        }
        // CLIENT PAUSE and a running script's shards are waited for on the tokio path.
        if shared.pause.is_set()
            || (commands::scripting::script_running(shared)
                && !commands::scripting::gate_clear(shared, client, &buf.args))
        {
            return Served::HandOver(Resume::Gate);
        }
        let was_authenticated = client.authenticated;
        let reply = match engine::execute_may_block(shared, client, &buf.args) {
            // A script took a shard this command needs after the check above.
            _ if std::mem::take(&mut client.regate) => return Served::HandOver(Resume::Gate),
            (_, Some(waiter)) => {
                return Served::HandOver(Resume::Blocked(waiter, was_authenticated));
            }
            (reply, None) => reply,
        };
        if client.authenticated != was_authenticated {
            buf.parser
                .set_limits(connection::limits(&shared.config(), client.authenticated));
        }
        if client.psync.is_some()
            || client.wait_acks.is_some()
            || client.sleep.is_some()
            || client.monitor
            || client.push_queue().is_some()
        {
            // The tokio path knows what to do next (and answers, in order).
            return Served::HandOver(Resume::After(reply, client.authenticated));
        }
        if client.no_reply {
            return Served::Close;
        }
        if !client.reply_suppressed() {
            reply.encode(client.resp, &mut buf.wbuf);
        }
        reply.recycle();
        if let Some(n) = client.disconnect_after {
            if n <= 1 {
                let _ = write_now(shared, &conn.stream, &mut buf.wbuf);
                return Served::Close;
            }
            client.disconnect_after = Some(n - 1);
        }
        if client.close_after_reply {
            let _ = write_now(shared, &conn.stream, &mut buf.wbuf);
            return Served::Close;
        }
        if buf.wbuf.len() >= FLUSH_AT {
            match write_now(shared, &conn.stream, &mut buf.wbuf) {
                Flushed::Done => {}
                Flushed::Stalled => return Served::HandOver(Resume::Read),
                Flushed::Failed => return Served::Close,
            }
        }
    }
    // Release the last request's slices of the read buffer (see connection::run).
    buf.args.clear();
    Served::Keep
}

/// The end of a batch: CLIENT LIST's view of the buffers, and the checks the tokio path
/// makes between batches.
fn after_batch(conn: &mut Conn) {
    let info = &conn.reg.client.info;
    info.qbuf.store(conn.buf.rbuf.len(), Ordering::Relaxed);
    info.buf_mem.store(conn.buf.memory(), Ordering::Relaxed);
    if conn.buf.rbuf.len() > conn.query_limit {
        tracing::warn!(
            "closing client {}: query buffer over client-query-buffer-limit",
            info.id
        );
        conn.close_after_write = true;
    }
    if info.kill.is_ending() {
        conn.close_after_write = true;
    }
}

enum Flushed {
    Done,
    /// Not all of it: the rest is still in the buffer.
    Stalled,
    Failed,
}

/// Writes the output buffer with one `send` (more only if the kernel took part of it).
fn write_now(shared: &Shared, stream: &MioStream, wbuf: &mut BytesMut) -> Flushed {
    if wbuf.is_empty() {
        return Flushed::Done;
    }
    // Nothing acknowledged leaves before it is in the append-only file (a no-op after the
    // turn's own flush, below, unless another loop appended meanwhile).
    shared.repl.aof.before_reply();
    // `client-output-buffer-limit normal`: a client near its limits is the tokio path's
    // to judge (it closes it, or starts the soft limit's clock), before anything is
    // written, as Redis checks when it adds a reply. With no limit set (the default) this
    // is two loads.
    let limit = shared.live.output_buffer_limit();
    if limit.hard > 0 || limit.soft > 0 {
        let buffered = wbuf.len() + connection::kernel_unsent(stream);
        if (limit.hard > 0 && buffered > limit.hard) || (limit.soft > 0 && buffered > limit.soft) {
            return Flushed::Stalled;
        }
    }
    while !wbuf.is_empty() {
        // SAFETY: send reads `wbuf.len()` initialized bytes of a buffer we own.
        // The system call itself (see `serve`'s receive).
        let n = unsafe {
            libc::syscall(
                libc::SYS_sendto,
                stream.as_raw_fd(),
                wbuf.as_ptr(),
                wbuf.len(),
                libc::MSG_NOSIGNAL,
                std::ptr::null::<libc::sockaddr>(),
                0 as libc::socklen_t,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::Interrupted => continue,
                std::io::ErrorKind::WouldBlock => return Flushed::Stalled,
                _ => return Flushed::Failed,
            }
        }
        let n = n as usize;
        shared
            .stats
            .net_output_bytes
            .fetch_add(n as u64, Ordering::Relaxed);
        if n == wbuf.len() {
            wbuf.clear();
        } else {
            wbuf.advance(n);
            return Flushed::Stalled;
        }
    }
    Flushed::Done
}

fn flush(shared: &Shared, conn: &mut Conn) -> Flushed {
    write_now(shared, &conn.stream, &mut conn.buf.wbuf)
}

/// Every `CRON`: idle timeouts (Redis's `clientsCron`).
fn cron(state: &State) {
    let timeout = state.common.shared.live.timeout();
    if timeout == 0 {
        return;
    }
    let idle: Vec<usize> = state
        .conns
        .borrow()
        .iter()
        .enumerate()
        .filter_map(|(t, c)| {
            c.as_ref()
                .filter(|c| c.reg.client.info.idle_secs() >= timeout)
                .map(|_| t)
        })
        .collect();
    for token in idle {
        if let Some(conn) = state.take(token) {
            tracing::debug!("closing client {}: idle timeout", conn.reg.client.id());
            state.close(token, conn);
        }
    }
}

/// A loop's share of a second spent working (its thread's CPU time, so a wait costs
/// nothing to measure), and the machine's idle CPUs over the same second.
struct Load {
    window_start: Instant,
    cpu_at_start: Duration,
    busy: f64,
    idle_cpus: Option<f64>,
    last_idle_ticks: Option<u64>,
}

/// The calling thread's CPU time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

impl Load {
    fn new() -> Load {
        Load {
            window_start: Instant::now(),
            cpu_at_start: thread_cpu(),
            busy: 0.0,
            idle_cpus: None,
            last_idle_ticks: None,
        }
    }

    /// True once a second has passed since the window began (then the window restarts).
    fn second_passed(&mut self, now: Instant) -> bool {
        let span = now - self.window_start;
        if span < Duration::from_secs(1) {
            return false;
        }
        let cpu = thread_cpu();
        self.busy = cpu.saturating_sub(self.cpu_at_start).as_secs_f64() / span.as_secs_f64();
        self.window_start = now;
        self.cpu_at_start = cpu;
        self.idle_cpus = self.read_idle(span);
        true
    }

    fn busy_share(&self) -> (f64, Option<f64>) {
        (self.busy, self.idle_cpus)
    }

    /// Idle CPUs over the last window, from /proc/stat's idle and iowait ticks (Linux;
    /// USER_HZ is 100 there).
    fn read_idle(&mut self, span: Duration) -> Option<f64> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let line = stat.lines().next()?;
        let fields: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|f| f.parse().ok())
            .collect();
        let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
        let prev = self.last_idle_ticks.replace(idle)?;
        Some(idle.saturating_sub(prev) as f64 / 100.0 / span.as_secs_f64())
    }
}

/// Brings in the next loop when this one is saturated and the machine has room for it,
/// moving every other connection of this loop there; lets the last loop go (its
/// connections back to the others) when the load falls well within one loop fewer.
fn scale(state: &State, (busy, idle_cpus): (f64, Option<f64>)) {
    let group = &state.common.group;
    state
        .mailbox()
        .busy_permille
        .store((busy * 1000.0) as u32, Ordering::Relaxed);
    let active = group.active.load(Ordering::Relaxed);
    if state.index >= active {
        return;
    }
    if state.index > 0 && state.index == active - 1 {
        let total: f64 = group.mailboxes[..active]
            .iter()
            .map(|m| m.busy_permille.load(Ordering::Relaxed) as f64 / 1000.0)
            .sum();
        if total < SATURATED * 0.5 * (active - 1) as f64
            && group
                .active
                .compare_exchange(active, active - 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            tracing::info!(
                "event loops {active} → {}: load {:.0}% of a loop",
                active - 1,
                total * 100.0
            );
            move_connections(state, false, |n| n % (active - 1));
        }
        return;
    }
    if active >= group.mailboxes.len()
        || busy < SATURATED
        || idle_cpus.is_none_or(|idle| idle < IDLE_TO_GROW)
    {
        return;
    }
    if group
        .active
        .compare_exchange(active, active + 1, Ordering::AcqRel, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    tracing::info!(
        "event loop {} saturated ({:.0}% busy): loop {} takes connections too",
        state.index,
        busy * 100.0,
        active
    );
    move_connections(state, true, |_| active);
}

/// Moves this loop's connections (every other one, or all) elsewhere: the n-th moved to the
/// loop `to(n)`.
fn move_connections(state: &State, every_other: bool, to: impl Fn(usize) -> usize) {
    let tokens: Vec<usize> = state
        .conns
        .borrow()
        .iter()
        .enumerate()
        .filter_map(|(t, c)| c.as_ref().map(|_| t))
        .enumerate()
        .filter_map(|(i, t)| (!every_other || i % 2 == 1).then_some(t))
        .collect();
    for (n, token) in tokens.into_iter().enumerate() {
        if let Some(mut conn) = state.take(token) {
            state.forget(token, &mut conn);
            state.common.group.send(to(n), Arrival::Moved(conn));
        }
    }
}

/// Called from a long script's hook on this loop's thread (`script::set_while_busy`):
/// every other connection with input is handed over to tokio, where the busy gate answers
/// it (`-BUSY`, SCRIPT KILL, SHUTDOWN NOSAVE …). The connection running the script is out
/// of its slot; what is found ready for it is kept for after the script.
fn while_busy() {
    let Some(state) = CURRENT.with(|c| c.borrow().clone()) else {
        return;
    };
    let mut events = Events::with_capacity(256);
    {
        let Ok(mut poll) = state.poll.try_borrow_mut() else {
            return;
        };
        if poll.poll(&mut events, Some(Duration::ZERO)).is_err() {
            return;
        }
    }
    // Replies this turn's connections served before the script's have not been written
    // yet: their clients wait for them, so they go out now (as Redis's
    // `processEventsWhileBlocked` writes pending replies).
    state.write_pass();
    // Connections this turn found ready and has not served yet: their readiness was
    // consumed, so they are handed over now, not when next reported.
    let waiting: Vec<usize> = state.ready.borrow_mut().drain(..).collect();
    let later: Vec<usize> = std::mem::take(&mut *state.deferred.borrow_mut());
    for token in waiting.into_iter().chain(later) {
        match state.take(token) {
            Some(conn) => state.hand_over(token, conn, Resume::Read),
            None => state.deferred.borrow_mut().push(token),
        }
    }
    for ev in events.iter() {
        if ev.token() == WAKE {
            let arrivals = std::mem::take(&mut *lock(&state.mailbox().arrivals));
            for arrival in arrivals {
                // Registered here, then found ready on the next call (or after the script).
                if let Some(token) = arrive(&state, arrival) {
                    state.deferred.borrow_mut().push(token);
                }
            }
            let kills = std::mem::take(&mut *lock(&state.mailbox().kills));
            state.deferred_kills.borrow_mut().extend(kills);
            continue;
        }
        let token = ev.token().0;
        match state.take(token) {
            Some(conn) => state.hand_over(token, conn, Resume::Read),
            None => state.deferred.borrow_mut().push(token),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use super::*;
    use crate::clock::Clock;
    use crate::config::Config;

    /// A connection on this thread, served by the loop's own functions (no thread, no
    /// poll): what one turn does for it.
    fn conn(shared: &Arc<Shared>) -> (Box<Conn>, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, peer) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        let reg = Registered::new(shared, peer.to_string(), "127.0.0.1:6379".into());
        let buf = Buffers::new(shared, &reg.client);
        let conn = Box::new(Conn {
            stream: MioStream::from_std(server),
            reg,
            buf,
            _slot: Admitted(Arc::new(AtomicUsize::new(1))),
            _track: TaskTracker::new().token(),
            more: false,
            queued: false,
            close_after_write: false,
            query_limit: 1 << 30,
        });
        (conn, client)
    }

    /// Sends `request`, serves it as a turn would, and returns the reply's bytes.
    fn turn(
        shared: &Shared,
        conn: &mut Conn,
        client: &mut std::net::TcpStream,
        request: &[u8],
        reply: &mut [u8],
    ) -> usize {
        client.write_all(request).unwrap();
        loop {
            assert!(matches!(serve(shared, conn), Served::Keep));
            if !conn.buf.wbuf.is_empty() {
                break;
            }
        }
        assert!(matches!(flush(shared, conn), Flushed::Done));
        client.read(reply).unwrap()
    }

    fn command(args: &[&[u8]]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    #[test]
    fn a_request_on_the_loop_allocates_nothing() {
        let config = Config {
            slowlog_log_slower_than: -1,
            ..Config::default()
        };
        let shared = Arc::new(Shared::new(config, Clock::frozen()));
        let (mut conn, mut client) = conn(&shared);
        let mut reply = [0u8; 4096];
        let requests = [
            command(&[b"SET", b"k", b"12345"]),
            command(&[b"GET", b"k"]),
            command(&[b"INCR", b"n"]),
            command(&[b"EXPIRE", b"n", b"100"]),
            command(&[b"CL.THROTTLE", b"t", b"15", b"30", b"60", b"1"]),
        ];
        for r in &requests {
            for _ in 0..200 {
                turn(&shared, &mut conn, &mut client, r, &mut reply);
            }
        }
        for r in &requests {
            let before = crate::alloc_stats::thread_allocations();
            for _ in 0..500 {
                let n = turn(&shared, &mut conn, &mut client, r, &mut reply);
                assert!(n > 0 && reply[0] != b'-', "{:?}", &reply[..n]);
            }
            let made = crate::alloc_stats::thread_allocations() - before;
            assert_eq!(made, 0, "{}", String::from_utf8_lossy(r));
        }
    }

    /// A loop's state on this thread, for driving its functions by hand.
    fn state(index: usize, common: &Arc<Common>, poll: Poll) -> State {
        State {
            index,
            common: common.clone(),
            poll: RefCell::new(poll),
            conns: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            ready: RefCell::new(std::collections::VecDeque::new()),
            writes: RefCell::new(Vec::new()),
            deferred: RefCell::new(Vec::new()),
            deferred_kills: RefCell::new(Vec::new()),
        }
    }

    #[test]
    fn a_saturated_loop_brings_in_the_next_and_an_idle_one_gives_its_connections_back() {
        let shared = Arc::new(Shared::new(Config::default(), Clock::frozen()));
        let loops = super::super::loops::Loops::start(1, crate::config::IoBackend::Epoll).unwrap();
        let polls = [Poll::new().unwrap(), Poll::new().unwrap()];
        let mailboxes = polls
            .iter()
            .map(|p| {
                Arc::new(Mailbox {
                    arrivals: Mutex::new(Vec::new()),
                    kills: Mutex::new(Vec::new()),
                    waker: mio::Waker::new(p.registry(), WAKE).unwrap(),
                    busy_permille: std::sync::atomic::AtomicU32::new(0),
                })
            })
            .collect();
        let group = Arc::new(Group {
            mailboxes,
            active: AtomicUsize::new(1),
            next: AtomicUsize::new(0),
            threads: Mutex::new(Vec::new()),
        });
        let common = Arc::new(Common {
            shared: shared.clone(),
            group: group.clone(),
            dealer: loops.dealer().clone(),
            tracker: TaskTracker::new(),
            scaling: true,
        });
        let [p0, p1] = polls;
        let (first, second) = (state(0, &common, p0), state(1, &common, p1));
        let mut clients = Vec::new();
        for _ in 0..2 {
            let (conn, client) = conn(&shared);
            first.add(conn).unwrap();
            clients.push(client);
        }
        // Busy, but no idle CPU on the machine: one loop it stays.
        scale(&first, (0.95, Some(0.1)));
        assert_eq!(group.active(), 1);
        // Half a core idle (the client's share of a 2-core machine): still one loop.
        scale(&first, (0.95, Some(0.5)));
        assert_eq!(group.active(), 1);
        // Busy with room: the second loop takes every other connection.
        scale(&first, (0.95, Some(1.0)));
        assert_eq!(group.active(), 2);
        assert_eq!(first.count(), 1);
        let moved: Vec<Arrival> = std::mem::take(&mut *lock(&group.mailboxes[1].arrivals));
        assert_eq!(moved.len(), 1);
        let token = moved
            .into_iter()
            .filter_map(|a| arrive(&second, a))
            .next()
            .unwrap();
        // The moved connection is served there.
        let mut conn = second.take(token).unwrap();
        let mut reply = [0u8; 64];
        let n = turn(
            &shared,
            &mut conn,
            &mut clients[1],
            &command(&[b"PING"]),
            &mut reply,
        );
        assert_eq!(&reply[..n], b"+PONG\r\n");
        second.put(token, conn);
        // Both idle: the last loop gives its connection back to the first.
        scale(&first, (0.05, Some(1.0)));
        scale(&second, (0.05, Some(1.0)));
        assert_eq!(group.active(), 1);
        assert_eq!(second.count(), 0);
        let back: Vec<Arrival> = std::mem::take(&mut *lock(&group.mailboxes[0].arrivals));
        assert_eq!(back.len(), 1);
        let token = back
            .into_iter()
            .filter_map(|a| arrive(&first, a))
            .next()
            .unwrap();
        let mut conn = first.take(token).unwrap();
        let n = turn(
            &shared,
            &mut conn,
            &mut clients[1],
            &command(&[b"PING"]),
            &mut reply,
        );
        assert_eq!(&reply[..n], b"+PONG\r\n");
    }
}
