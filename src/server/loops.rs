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

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::runtime::{Handle, Runtime};

/// The running event loops (and the thread the key reapers run on).
pub struct Loops {
    runtimes: Vec<Runtime>,
    dealer: Dealer,
    reaper: Option<Runtime>,
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
}

/// A runtime with one worker thread named `name`.
fn one_worker(name: String) -> std::io::Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(name)
        // Scripts run on these threads (and on the blocking threads that take a loop over
        // from a long script): see `script::WORKER_STACK`.
        .thread_stack_size(crate::script::WORKER_STACK)
        // Blocking threads only take a loop over from a long script (rare); they need not
        // linger.
        .thread_keep_alive(Duration::from_secs(2))
        .enable_all()
        .build()
}

impl Loops {
    /// Starts `n` loops (at least one) and the reaper thread.
    pub fn start(n: usize) -> std::io::Result<Loops> {
        let mut runtimes = Vec::with_capacity(n.max(1));
        for i in 0..n.max(1) {
            runtimes.push(one_worker(format!("sluice-loop-{i}"))?);
        }
        let handles: Arc<[Handle]> = runtimes.iter().map(|rt| rt.handle().clone()).collect();
        // Reapers wake per shard at most every 100 ms and work in bounded batches; on a
        // thread of their own they never sit between a loop's read and its write.
        let reaper = Some(one_worker("sluice-reaper".into())?);
        Ok(Loops {
            runtimes,
            dealer: Dealer {
                handles,
                next: Arc::new(AtomicUsize::new(0)),
            },
            reaper,
        })
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
}

impl Drop for Loops {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which is refused inside an async context (the caller of
        // `Server::run` is one); by now every connection has finished or timed out, so what
        // is left (reapers, idle accept loops) may be dropped in the background.
        for rt in self.runtimes.drain(..).chain(self.reaper.take()) {
            rt.shutdown_background();
        }
    }
}
