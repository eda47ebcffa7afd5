//! A loop's thread: its state (the connections it serves, this turn's ready and write
//! lists), the turn itself (one wait, read and run every ready connection, one write pass),
//! arrivals, kills, the idle-timeout cron, and the hook a long script calls back into.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};

use super::prefetch::FirstKeys;
use super::scale::{Load, scale};
use super::serve::{Conn, Flushed, Received, Served, flush, read, run};
use super::spin::Spin;
use super::stream::{Accepted, Stream};
use super::{Arrival, Common, KillWake, Mailbox, WAKE};
use crate::commands;
use crate::server::connection::{self, Buffers, Registered, Resume};

/// How often a loop looks at idle timeouts and its load.
const CRON: Duration = Duration::from_millis(100);

/// A loop's state. Behind `RefCell`s borrowed only briefly, never across a command: a
/// long script calls back into the loop (`while_busy`) from inside its command.
pub(super) struct State {
    pub(super) index: usize,
    pub(super) common: Arc<Common>,
    pub(super) poll: RefCell<Poll>,
    pub(super) conns: RefCell<Vec<Option<Box<Conn>>>>,
    pub(super) free: RefCell<Vec<usize>>,
    /// This turn's connections read and not run yet (a long script's hook hands them over:
    /// what was read waits in their buffers, which the tokio code runs first).
    pub(super) ready: RefCell<std::collections::VecDeque<usize>>,
    /// Connections with replies to write in this turn's write pass.
    pub(super) writes: RefCell<Vec<usize>>,
    /// Tokens to look at again next turn: found ready while their connection was out of its
    /// slot (running a script), or whose last read filled the buffer.
    pub(super) deferred: RefCell<Vec<usize>>,
    /// Kills read from the mailbox while a script ran.
    pub(super) deferred_kills: RefCell<Vec<usize>>,
}

thread_local! {
    /// This thread's loop, for `while_busy`.
    static CURRENT: RefCell<Option<Rc<State>>> = const { RefCell::new(None) };
}

impl State {
    /// Loop `index`'s state, serving nothing yet.
    pub(super) fn new(index: usize, common: Arc<Common>, poll: Poll) -> State {
        State {
            index,
            common,
            poll: RefCell::new(poll),
            conns: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            ready: RefCell::new(std::collections::VecDeque::new()),
            writes: RefCell::new(Vec::new()),
            deferred: RefCell::new(Vec::new()),
            deferred_kills: RefCell::new(Vec::new()),
        }
    }

    pub(super) fn take(&self, token: usize) -> Option<Box<Conn>> {
        self.conns
            .borrow_mut()
            .get_mut(token)
            .and_then(Option::take)
    }

    pub(super) fn put(&self, token: usize, conn: Box<Conn>) {
        if let Some(slot) = self.conns.borrow_mut().get_mut(token) {
            *slot = Some(conn);
        }
    }

    pub(super) fn count(&self) -> usize {
        self.conns.borrow().len() - self.free.borrow().len()
    }

    pub(super) fn mailbox(&self) -> &Arc<Mailbox> {
        &self.common.group.mailboxes[self.index]
    }

    /// Registers a connection (new or moved here) and returns its token.
    pub(super) fn add(&self, mut conn: Box<Conn>) -> Option<usize> {
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
    pub(super) fn forget(&self, token: usize, conn: &mut Conn) {
        let _ = self.poll.borrow().registry().deregister(&mut conn.stream);
        self.free.borrow_mut().push(token);
    }

    /// Closes a connection that is out of its slot.
    pub(super) fn close(&self, token: usize, mut conn: Box<Conn>) {
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
    pub(super) fn write_pass(&self) {
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
    pub(super) fn hand_over(&self, token: usize, conn: Box<Conn>, resume: Resume) {
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
    let stream = stream.into_accepted();
    common
        .dealer
        .handle(index)
        .spawn(common.tracker.track_future(async move {
            let _slot = slot;
            let failed = match stream {
                Accepted::Tcp(s) => match tokio::net::TcpStream::from_std(s) {
                    Ok(s) => {
                        connection::resume(reg, s, buf, resume).await;
                        None
                    }
                    Err(e) => Some(e),
                },
                Accepted::Unix(s) => match tokio::net::UnixStream::from_std(s) {
                    Ok(s) => {
                        connection::resume(reg, s, buf, resume).await;
                        None
                    }
                    Err(e) => Some(e),
                },
            };
            if let Some(e) = failed {
                tracing::debug!("cannot hand a connection over to tokio: {e}");
            }
        }));
}

pub(super) fn run_loop(index: usize, poll: Poll, common: Arc<Common>) {
    // This thread's own slot of the per-request counters (no shared atomic to bump).
    crate::services::counter::claim_slot();
    let state = Rc::new(State::new(index, common.clone(), poll));
    CURRENT.with(|c| *c.borrow_mut() = Some(state.clone()));
    crate::script::set_while_busy(Some(while_busy));
    let shared = common.shared.clone();
    let mut events = Events::with_capacity(1024);
    let mut ready: Vec<usize> = Vec::new();
    let mut load = Load::new();
    let mut next_cron = Instant::now() + CRON;
    let mut turn: u32 = 0;
    let mut spin = Spin::new(shared.config().busy_poll_us);
    let mut may_spin = false;
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
        let polled = {
            let mut poll = state.poll.borrow_mut();
            // `busy-poll`: after a served turn, look for the next request before sleeping.
            match (may_spin && timeout != Some(Duration::ZERO))
                .then(|| spin.poll(&mut poll, &mut events))
            {
                Some(Ok(true)) => Ok(()),
                Some(Err(e)) => Err(e),
                _ => poll.poll(&mut events, timeout),
            }
        };
        may_spin = spin.after_turn(!events.is_empty());
        if let Err(e) = polled
            && e.kind() != std::io::ErrorKind::Interrupted
        {
            tracing::warn!("event loop {index}: {e}");
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        // A turn, for a pause to know when the commands run in it have ended (quiesce).
        let in_turn = crate::services::quiesce::enter();
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
        // Read every ready connection, then run them: the receives come one after another
        // (the kernel's receive path stays in the cache), and the entries of their first
        // keys are asked for together before the first runs.
        for &token in &ready {
            let Some(mut conn) = state.take(token) else {
                continue;
            };
            if conn.queued {
                state.put(token, conn);
                continue;
            }
            conn.queued = true;
            match read(&shared, &mut conn) {
                Received::Run => {
                    state.put(token, conn);
                    state.ready.borrow_mut().push_back(token);
                }
                Received::Idle => {
                    if conn.more {
                        state.deferred.borrow_mut().push(token);
                    }
                    state.put(token, conn);
                }
                Received::Close => state.close(token, conn),
            }
        }
        prefetch_first_keys(&state);
        loop {
            let Some(token) = state.ready.borrow_mut().pop_front() else {
                break;
            };
            let Some(mut conn) = state.take(token) else {
                continue;
            };
            // A panic in a command (a bug, or FAULT PANIC in test mode) ends its connection,
            // as it ends a tokio task, not the loop.
            let served =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&shared, &mut conn)))
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
        drop(in_turn);
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
            spin.cron(now);
            if common.scaling && load.second_passed(now) {
                scale(&state, load.busy_share());
            }
        }
    }
    crate::script::set_while_busy(None);
    CURRENT.with(|c| *c.borrow_mut() = None);
}

/// Asks the cache for the entries of the first keys of the connections this turn runs
/// (see `prefetch::FirstKeys`), before the first of them runs.
/// One connection's key would be probed right before its own lookup: nothing to overlap.
fn prefetch_first_keys(state: &State) {
    let ready = state.ready.borrow();
    if ready.len() < 2 {
        return;
    }
    let keyspace = &state.common.shared.keyspace;
    let conns = state.conns.borrow();
    let mut keys = FirstKeys::new();
    for &token in ready.iter() {
        if let Some(c) = conns.get(token).and_then(|c| c.as_deref()) {
            keys.add(keyspace, c.reg.client.db, &c.buf.rbuf);
        }
    }
    keys.prefetch(keyspace);
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Registers an arriving connection; its token when it may have input already buffered.
pub(super) fn arrive(state: &State, arrival: Arrival) -> Option<usize> {
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
            let stream = match Stream::from_accepted(stream) {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!("cannot serve {peer} on an event loop: {e}");
                    return None;
                }
            };
            let reg = Registered::new(&common.shared, peer, laddr);
            let buf = Buffers::new(&common.shared, &reg.client);
            let query_limit = common.shared.config().client_query_buffer_limit;
            let conn = Box::new(Conn {
                stream,
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
