//! The data path's own event loops (`io-backend loop`, the default): plain TCP connections
//! and the Unix socket's served in Redis's shape, with no task, waker or thread hand-off per
//! request.
//!
//! Each loop is one thread around one epoll instance (through `mio`). A turn of the loop
//! waits once for readiness, then reads what the socket of every ready connection has; then,
//! connection by connection, runs every complete request read inline (the same
//! `engine::execute_may_block` the tokio path calls) and encodes the replies into its output
//! buffer (the entries of all their first keys prefetched together before); once every
//! ready connection has run, it writes each pending output buffer with one `send`, and
//! waits again. A turn therefore costs one `epoll_wait` however many connections it serves,
//! and a request costs its `recv`, its share of a `send`, and nothing else outside its
//! command.
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
//! read that fills less than the buffer has drained the socket (TCP and Unix stream sockets
//! give what they have), so one `recv` per readiness suffices; a read that fills it is tried
//! again next turn.
//!
//! The parts: this file the group of loops and what other threads reach of each (its
//! mailbox: arrivals, kills, its waker); `turn` a loop's thread and state (the turn, the
//! write pass, arrivals, the idle-timeout cron, the long-script hook); `serve` one
//! connection's read, run and write; `stream` its socket, TCP or Unix; `scale` a loop's load
//! and the bringing in and letting go of loops; `spin` the optional polling for the next
//! request before a loop sleeps (`busy-poll`).

mod prefetch;
mod scale;
mod serve;
mod spin;
mod stream;
#[cfg(test)]
mod tests;
mod turn;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Wake;

use mio::{Poll, Token};
use tokio_util::task::TaskTracker;

use super::Admitted;
use crate::server::Shared;
use serve::Conn;
pub use stream::Accepted;
use turn::run_loop;

/// The token of a loop's waker (new and moved connections, kills, shutdown).
const WAKE: Token = Token(usize::MAX);

/// A connection arriving at a loop.
enum Arrival {
    /// Accepted: register it here.
    New {
        stream: Accepted,
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
    pub(super) fn deal(&self, stream: Accepted, peer: String, laddr: String, slot: Admitted) {
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
