//! The event loops: N threads, each serving its own connections from read to write.
//!
//! A connection is dealt to one loop when it is accepted (round robin) and stays there: its
//! requests are read, run against the shared keyspace (shards under their own locks) and
//! answered on that one thread, with no hand-off or wake-up between threads on the way.
//! This replaces one work-stealing runtime, where a request could be read by one worker,
//! woken on another and written from a third.
//!
//! Each loop is a tokio runtime with exactly one worker thread. One worker means no work
//! stealing and no cross-thread wake-ups (the worker polls the sockets itself when idle), so
//! it behaves as a single-threaded event loop. It is the multi-thread *flavour* with one
//! worker rather than a current-thread runtime for one reason: a Lua script that runs long
//! must not stall the other connections of its loop forever (Redis answers them `-BUSY`
//! past `busy-reply-threshold`, and takes SCRIPT KILL). `block_in_place`, which only this
//! flavour offers, hands the loop to a fresh thread while the script keeps its own (see
//! `script::hand_off_worker`); only a script already running for milliseconds pays for it.
//!
//! The loops are not the caller's runtime: `Server::run` can be awaited from any runtime
//! flavour (the binary's, a test's), which only waits for shutdown.
//!
//! I/O backend (`io-backend`): with epoll, a connection is a tokio socket (readiness from the
//! runtime's epoll, one `read`/`write` call per operation). With io_uring, each loop also
//! has a ring and a task driving it (`uring`): plain TCP connections queue their reads and
//! writes there and each turn of the loop submits them in one call. The loop, its runtime
//! and the connection code are the same either way; only the stream differs. Whether
//! io_uring can be used is probed once here, at start (`uring::probe`): where it cannot
//! (an old kernel, a seccomp profile denying `io_uring_setup`), every loop runs epoll and
//! the log says why.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::runtime::{Handle, Runtime};

use crate::config::IoBackend;

#[cfg(target_os = "linux")]
use super::uring::{self, Ring};

/// Where io_uring is not built in, there is no ring.
#[cfg(not(target_os = "linux"))]
#[derive(Debug)]
pub enum Ring {}

/// The backend the loops actually run (what `IoBackend` resolved to at start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Running {
    /// sluice's own event loops for plain TCP (`eventloop`), tokio's for the rest.
    Loop,
    /// tokio's sockets on the runtime's epoll.
    Epoll,
    /// A ring per loop for plain TCP connections.
    Uring,
}

impl Running {
    /// Its name in the log: `epoll` or `io_uring`.
    pub fn name(self) -> &'static str {
        match self {
            Running::Loop => "loop",
            Running::Epoll => "epoll",
            Running::Uring => "io_uring",
        }
    }
}

/// The running event loops, and the threads the key reapers and replication's supervisor
/// run on.
pub struct Loops {
    /// `io-backend loop`: plain TCP connections go to `eventloop`'s loops.
    own_loops: bool,
    runtimes: Vec<Runtime>,
    dealer: Dealer,
    reaper: Option<Runtime>,
    replication: Option<Runtime>,
}

impl std::fmt::Debug for Loops {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loops")
            .field("threads", &self.dealer.handles.len())
            .finish()
    }
}

/// Deals accepted connections to the loops, round robin. Cheap to clone; holding one does
/// not keep the loops running.
#[derive(Clone, Debug)]
pub struct Dealer {
    handles: Arc<[Handle]>,
    /// Each loop's ring (same order as `handles`), when io_uring runs.
    rings: Option<Arc<[Arc<Ring>]>>,
    next: Arc<AtomicUsize>,
}

impl Dealer {
    /// The loop `i` (modulo the count).
    pub fn handle(&self, i: usize) -> &Handle {
        &self.handles[i % self.handles.len()]
    }

    /// The loop the next accepted connection goes to.
    pub fn next(&self) -> &Handle {
        self.handle(self.next.fetch_add(1, Ordering::Relaxed))
    }

    /// The loop the next accepted connection goes to, with its ring when io_uring runs.
    pub fn next_with_ring(&self) -> (&Handle, Option<&Arc<Ring>>) {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len();
        let ring = self.rings.as_ref().and_then(|r| r.get(i));
        (&self.handles[i], ring)
    }
}

/// A runtime with one worker thread named `name`.
fn one_worker(name: String) -> std::io::Result<Runtime> {
    worker_builder(name).build()
}

/// How much lower than the loops the reapers' thread runs (its nice value; Linux only).
///
/// A mass expiry (a million keys at one window boundary) keeps the reapers busy for a few
/// hundred milliseconds on a core a loop may need. At the same priority the scheduler lets
/// the reaper finish its slice before a loop woken by a request runs, which is what GET's
/// p99 during a mass expiry measured (benchmarks/notes.md, "GET p99 during the mass
/// expiry"). At nice 10 a loop preempts the reaper at once and the reaper still has every
/// cycle the loops leave idle, and its share (about a tenth) when they are busy, so
/// expired keys still go within the second. Any process may lower its own threads'
/// priority; nothing needs raising it back.
const REAPER_NICE: libc::c_int = 10;

/// The runtime the reapers run on: one worker thread at `REAPER_NICE`.
fn reaper_worker() -> std::io::Result<Runtime> {
    worker_builder("sluice-reaper".into())
        .on_thread_start(|| {
            #[cfg(target_os = "linux")]
            // SAFETY: setpriority takes plain integers; on Linux, `who` 0 with PRIO_PROCESS is
            // the calling thread alone. Failure leaves the thread at its priority: harmless.
            unsafe {
                libc::setpriority(libc::PRIO_PROCESS, 0, REAPER_NICE);
            }
        })
        .build()
}

fn worker_builder(name: String) -> tokio::runtime::Builder {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .worker_threads(1)
        .thread_name(name)
        // Scripts run on these threads (and on the blocking threads that take a loop over
        // from a long script): see `script::WORKER_STACK`.
        .thread_stack_size(crate::script::WORKER_STACK)
        // Blocking threads only take a loop over from a long script (rare); they need not
        // linger.
        .thread_keep_alive(Duration::from_secs(2))
        .enable_all();
    builder
}

/// Checks whether io_uring can be used (the error says why not).
pub type Probe = fn() -> std::io::Result<()>;

#[cfg(target_os = "linux")]
const PROBE: Probe = uring::probe;

#[cfg(not(target_os = "linux"))]
const PROBE: Probe = || {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "io_uring is Linux only",
    ))
};

/// A ring for each runtime, each registered with its runtime's reactor and driven there, or
/// why not (then none is driven).
#[cfg(target_os = "linux")]
fn start_rings(runtimes: &[Runtime], probe: Probe) -> std::io::Result<Arc<[Arc<Ring>]>> {
    probe()?;
    let mut rings = Vec::with_capacity(runtimes.len());
    let mut registered = Vec::with_capacity(runtimes.len());
    for rt in runtimes {
        let ring = Ring::new()?;
        let _in = rt.enter();
        registered.push(ring.register()?);
        rings.push(ring);
    }
    // Only once every loop has its ring, so that a failure leaves no driver behind.
    for (rt, reg) in runtimes.iter().zip(registered) {
        rt.spawn(uring::drive(reg));
    }
    Ok(rings.into())
}

#[cfg(not(target_os = "linux"))]
fn start_rings(_: &[Runtime], probe: Probe) -> std::io::Result<Arc<[Arc<Ring>]>> {
    probe()?;
    Err(std::io::ErrorKind::Unsupported.into())
}

impl Loops {
    /// Starts `n` loops (at least one) on `backend`, and the reaper thread.
    pub fn start(n: usize, backend: IoBackend) -> std::io::Result<Loops> {
        Self::start_with_probe(n, backend, PROBE)
    }

    /// `start`, with `probe` deciding whether io_uring is available (tests make it fail).
    pub fn start_with_probe(n: usize, backend: IoBackend, probe: Probe) -> std::io::Result<Loops> {
        let mut runtimes = Vec::with_capacity(n.max(1));
        for i in 0..n.max(1) {
            runtimes.push(one_worker(format!("sluice-loop-{i}"))?);
        }
        let handles: Arc<[Handle]> = runtimes.iter().map(|rt| rt.handle().clone()).collect();
        let rings = match backend {
            IoBackend::Epoll | IoBackend::Loop => None,
            IoBackend::Uring | IoBackend::Auto => match start_rings(&runtimes, probe) {
                Ok(rings) => Some(rings),
                Err(e) if backend == IoBackend::Uring => {
                    tracing::warn!("io_uring is unavailable ({e}): serving with epoll instead");
                    None
                }
                Err(e) => {
                    tracing::info!("io_uring is unavailable ({e}): serving with epoll");
                    None
                }
            },
        };
        // Reapers wake per shard at most every 100 ms and work in bounded batches; on a
        // thread of their own they never sit between a loop's read and its write.
        let reaper = Some(reaper_worker()?);
        // Replication's supervisor and the master link it starts: off the loops, at their
        // priority (not the reapers': a replica's link must keep up with its master).
        let replication = Some(one_worker("sluice-repl".into())?);
        Ok(Loops {
            own_loops: backend == IoBackend::Loop,
            runtimes,
            dealer: Dealer {
                handles,
                rings,
                next: Arc::new(AtomicUsize::new(0)),
            },
            reaper,
            replication,
        })
    }

    /// The backend the loops run.
    pub fn running(&self) -> Running {
        match self.dealer.rings {
            Some(_) => Running::Uring,
            None if self.own_loops => Running::Loop,
            None => Running::Epoll,
        }
    }

    /// How many loops there are (at least one).
    pub fn count(&self) -> usize {
        self.dealer.handles.len()
    }

    /// What deals connections to the loops.
    pub fn dealer(&self) -> &Dealer {
        &self.dealer
    }

    /// The reaper thread's runtime.
    pub fn reaper(&self) -> Option<&Handle> {
        self.reaper.as_ref().map(|r| r.handle())
    }

    /// The runtime replication's supervisor (and the link to a master it starts) runs on.
    pub fn replication(&self) -> Option<&Handle> {
        self.replication.as_ref().map(|r| r.handle())
    }
}

impl Drop for Loops {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which is refused inside an async context (the caller of
        // `Server::run` is one); by now every connection has finished or timed out, so what
        // is left (reapers, idle accept loops) may be dropped in the background.
        let background = self
            .reaper
            .take()
            .into_iter()
            .chain(self.replication.take());
        for rt in self.runtimes.drain(..).chain(background) {
            rt.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unavailable() -> std::io::Result<()> {
        Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "io_uring_setup denied (test)",
        ))
    }

    #[test]
    fn uring_falls_back_to_epoll_when_unavailable() {
        for backend in [IoBackend::Uring, IoBackend::Auto] {
            let loops = Loops::start_with_probe(2, backend, unavailable).unwrap();
            assert_eq!(loops.running(), Running::Epoll);
            let (handle, ring) = loops.dealer().next_with_ring();
            assert!(ring.is_none());
            // The loops still run tasks.
            let (tx, rx) = std::sync::mpsc::channel();
            handle.spawn(async move { tx.send(7).unwrap() });
            assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), 7);
        }
    }

    #[test]
    fn epoll_never_probes() {
        fn must_not_run() -> std::io::Result<()> {
            panic!("probed with --io-backend epoll")
        }
        let loops = Loops::start_with_probe(1, IoBackend::Epoll, must_not_run).unwrap();
        assert_eq!(loops.running(), Running::Epoll);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn uring_runs_where_the_probe_passes() {
        let loops = Loops::start(2, IoBackend::Uring).unwrap();
        let expected = match uring::probe() {
            Ok(()) => Running::Uring,
            Err(_) => Running::Epoll,
        };
        assert_eq!(loops.running(), expected);
    }

    /// The nice value of the thread a task on `handle` runs on, relative to the test's own.
    #[cfg(target_os = "linux")]
    fn nice_on(handle: &Handle) -> libc::c_int {
        let (tx, rx) = std::sync::mpsc::channel();
        handle.spawn(async move {
            // SAFETY: plain integers; `who` 0 is the calling thread on Linux.
            let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
            tx.send(nice).unwrap()
        });
        rx.recv_timeout(Duration::from_secs(5)).unwrap()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_reapers_run_below_the_loops_and_replication_does_not() {
        let loops = Loops::start(1, IoBackend::Loop).unwrap();
        let base = nice_on(loops.dealer().next());
        let reaper = nice_on(loops.reaper().unwrap());
        // Where the test already runs above nice 10, an unprivileged thread cannot go back
        // down to it (and a privileged one may): either way it is not above the loops.
        assert!(
            reaper == REAPER_NICE || (base > REAPER_NICE && reaper == base),
            "reaper at nice {reaper}, loops at {base}"
        );
        assert_eq!(nice_on(loops.replication().unwrap()), base);
    }
}
