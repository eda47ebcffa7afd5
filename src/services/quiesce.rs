//! Knowing when every command that got past the pause gate before a pause began has
//! finished: the guarantee Redis has for free (one thread: once CLIENT PAUSE or a manual
//! failover's pause is set, no write is running) on a server whose commands run on several
//! threads at once.
//!
//! Each thread that runs commands owns a slot, a turn counter it alone writes: odd while it
//! is in a turn (an event loop from the end of its wait to the end of its run pass, the
//! tokio path for one command), even between turns. A turn begins (`enter`) before the
//! thread reads the pause (the gate), with a sequentially consistent store; a pause is set
//! with a sequentially consistent store before its `Snapshot` reads the slots. So either the
//! thread sees the pause and holds its command, or the snapshot sees the thread in its turn
//! and the pause waits (`Snapshot::settled`) until that turn has ended: the slot is even, or
//! has moved on to a later turn (which read the pause). An event loop stores twice per turn,
//! never per request; the tokio path, the slow path of handed-over connections, twice per
//! command.
//!
//! Slots are handed out on a thread's first turn and given back when the thread exits (tokio's
//! blocking pool starts and ends threads all day long); a counter never goes back, so a
//! snapshot of a slot's earlier owner is not confused by its next one. Only threads past
//! `OWNED` alive at once share one counter of turns in progress, settled once it is seen at
//! zero — which a busy server may rarely show, so the slots must not run out. A pause in one
//! server of a test process may wait for another's turns too: later, never wrong.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Slots threads can own (event loops, tokio workers, the blocking pool's threads that run
/// commands).
const OWNED: usize = 128;

/// No slot claimed yet.
const UNCLAIMED: usize = usize::MAX;
/// Past the owned slots: the shared counter.
const SHARED: usize = OWNED;

/// One thread's turn counter, alone on its cache line.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Slot(AtomicU64);

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot(AtomicU64::new(0));

static SLOTS: [Slot; OWNED] = [EMPTY; OWNED];
/// Turns in progress on threads without a slot of their own.
static IN_SHARED: AtomicUsize = AtomicUsize::new(0);
/// The next slot never handed out.
static NEXT: AtomicUsize = AtomicUsize::new(0);
/// Slots given back by threads that exited, a bit each.
static FREE: [AtomicU64; OWNED / 64] = [const { AtomicU64::new(0) }; OWNED / 64];

thread_local! {
    /// This thread's slot, and how deep in turns it is (a turn inside a turn is the outer one).
    static MINE: Cell<(usize, u32)> = const { Cell::new((UNCLAIMED, 0)) };
    /// Gives this thread's slot back when the thread exits.
    static OWNER: SlotOwner = const { SlotOwner };
}

/// The thread-exit hook of a thread that owns a slot.
struct SlotOwner;

impl Drop for SlotOwner {
    fn drop(&mut self) {
        let (slot, depth) = MINE.get();
        // Whatever runs later on this exiting thread counts on the shared counter.
        MINE.set((SHARED, depth));
        if slot < OWNED && depth == 0 {
            FREE[slot / 64].fetch_or(1 << (slot % 64), Ordering::Release);
        }
    }
}

/// A slot given back, or one never handed out, or `SHARED` when all are taken.
fn claim() -> usize {
    for (word, bits) in FREE.iter().enumerate() {
        let mut seen = bits.load(Ordering::Acquire);
        while seen != 0 {
            let bit = seen.trailing_zeros() as usize;
            match bits.compare_exchange_weak(
                seen,
                seen & !(1 << bit),
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => return word * 64 + bit,
                Err(now) => seen = now,
            }
        }
    }
    NEXT.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
        (n < OWNED).then_some(n + 1)
    })
    .unwrap_or(SHARED)
}

fn my_slot() -> usize {
    let (slot, depth) = MINE.get();
    if slot != UNCLAIMED {
        return slot;
    }
    let slot = claim();
    if slot < OWNED && OWNER.try_with(|_| ()).is_err() {
        // The thread is already exiting: nobody would give the slot back.
        FREE[slot / 64].fetch_or(1 << (slot % 64), Ordering::Release);
        MINE.set((SHARED, depth));
        return SHARED;
    }
    MINE.set((slot, depth));
    slot
}

/// A turn in progress on this thread; ends when dropped (on the same thread: never hold one
/// across an `.await`).
#[derive(Debug)]
pub(crate) struct Turn {
    /// The slot, when this is the thread's outermost turn.
    outer: Option<usize>,
}

/// Begins a turn on this thread: call before reading the pause, end it once the commands
/// run in it have finished.
#[inline]
pub(crate) fn enter() -> Turn {
    let slot = my_slot();
    let (_, depth) = MINE.get();
    MINE.set((slot, depth + 1));
    if depth > 0 {
        return Turn { outer: None };
    }
    match SLOTS.get(slot) {
        Some(s) => {
            let next = s.0.load(Ordering::Relaxed) | 1;
            s.0.store(next, Ordering::SeqCst);
        }
        None => {
            IN_SHARED.fetch_add(1, Ordering::SeqCst);
        }
    }
    Turn { outer: Some(slot) }
}

impl Drop for Turn {
    #[inline]
    fn drop(&mut self) {
        let (slot, depth) = MINE.get();
        MINE.set((slot, depth.saturating_sub(1)));
        let Some(slot) = self.outer else {
            return;
        };
        match SLOTS.get(slot) {
            // Release: what the turn's commands did (the replication offset they moved) is
            // seen by whoever sees the turn ended.
            Some(s) => {
                s.0.store(s.0.load(Ordering::Relaxed) + 1, Ordering::Release)
            }
            None => {
                IN_SHARED.fetch_sub(1, Ordering::Release);
            }
        }
    }
}

/// The turns in progress when a pause began (take it after setting the pause).
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    /// Each owned slot's counter, odd ones only (`None`: nothing to wait for).
    running: Vec<Option<u64>>,
    /// The calling thread's slot and whether it was in a turn (its own turn, which takes the
    /// pause, is not waited for), or None.
    own: Option<usize>,
    shared_done: bool,
}

impl Snapshot {
    /// Reads every slot (after the pause's store).
    pub(crate) fn take() -> Snapshot {
        std::sync::atomic::fence(Ordering::SeqCst);
        let (mine, depth) = MINE.get();
        let own = (depth > 0 && mine != UNCLAIMED).then_some(mine);
        let handed = NEXT.load(Ordering::SeqCst).min(OWNED);
        let running = SLOTS[..handed]
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let v = s.0.load(Ordering::SeqCst);
                (v & 1 == 1 && own != Some(i)).then_some(v)
            })
            .collect();
        let mut snap = Snapshot {
            running,
            own,
            shared_done: false,
        };
        snap.settled();
        snap
    }

    /// True once every turn in progress at the snapshot has ended: no command that passed
    /// the gate before the pause is still running. Remembers what it has seen ended.
    pub(crate) fn settled(&mut self) -> bool {
        for (i, r) in self.running.iter_mut().enumerate() {
            if let Some(v) = *r
                && SLOTS[i].0.load(Ordering::Acquire) != v
            {
                *r = None;
            }
        }
        if !self.shared_done {
            // The caller's own turn on the shared counter is not waited for.
            let own = usize::from(self.own == Some(SHARED));
            self.shared_done = IN_SHARED.load(Ordering::Acquire) <= own;
        }
        self.shared_done && self.running.iter().all(Option::is_none)
    }

    /// Waits on this thread, at most `limit`, until `settled`; true if it is. For a command
    /// that must not answer before (CLIENT PAUSE): the turns waited for are other threads'
    /// commands, microseconds long, unless one is a long script.
    pub(crate) fn wait(&mut self, limit: Duration) -> bool {
        let start = Instant::now();
        let mut spins = 0u32;
        while !self.settled() {
            if start.elapsed() >= limit {
                return false;
            }
            spins += 1;
            if spins < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Barrier};

    #[test]
    fn a_turn_in_progress_is_waited_for_and_a_new_one_is_not() {
        let started = Arc::new(Barrier::new(2));
        let finish = Arc::new(Barrier::new(2));
        let (s, f) = (started.clone(), finish.clone());
        let t = std::thread::spawn(move || {
            let turn = enter();
            s.wait();
            f.wait();
            drop(turn);
            // A later turn (which would read the pause) does not hold the snapshot.
            let _next = enter();
            std::thread::sleep(Duration::from_millis(50));
        });
        started.wait();
        let mut snap = Snapshot::take();
        assert!(!snap.settled(), "the other thread is in its turn");
        assert!(!snap.wait(Duration::from_millis(20)));
        finish.wait();
        assert!(snap.wait(Duration::from_secs(10)));
        t.join().unwrap();
    }

    #[test]
    fn the_callers_own_turn_and_nested_turns() {
        let outer = enter();
        let inner = enter();
        drop(inner);
        let mut snap = Snapshot::take();
        // (Other tests' threads may be in turns: they end; this thread's would never.)
        assert!(
            snap.wait(Duration::from_secs(10)),
            "the caller's own turn is not waited for"
        );
        drop(outer);
        let (slot, depth) = MINE.get();
        assert_eq!(depth, 0);
        if slot < OWNED {
            assert_eq!(
                SLOTS[slot].0.load(Ordering::Relaxed) & 1,
                0,
                "even between turns"
            );
        }
    }

    /// Threads that exit give their slots back: far more threads than slots over a process's
    /// life (tokio's blocking pool) still each get one of their own, so a pause never depends
    /// on seeing the shared counter at zero.
    #[test]
    fn exited_threads_give_their_slots_back() {
        for _ in 0..(OWNED * 3) {
            std::thread::spawn(|| drop(enter())).join().unwrap();
        }
        let slot = std::thread::spawn(|| {
            drop(enter());
            MINE.get().0
        })
        .join()
        .unwrap();
        assert!(
            slot < OWNED,
            "a thread after {} exited ones got {slot}",
            OWNED * 3
        );
    }

    /// The pause's guarantee under load: a thread that passed the gate (read no pause in
    /// its turn) has finished its work once the snapshot taken after the pause is settled.
    #[test]
    fn nothing_that_passed_the_gate_runs_after_settled() {
        let paused = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let passed = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let (paused, done, passed, stop) =
                    (paused.clone(), done.clone(), passed.clone(), stop.clone());
                std::thread::spawn(move || {
                    for _ in 0..200_000 {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let _turn = enter();
                        if paused.load(Ordering::SeqCst) {
                            continue;
                        }
                        passed.fetch_add(1, Ordering::Relaxed);
                        std::hint::spin_loop();
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(5));
        paused.store(true, Ordering::SeqCst);
        let mut snap = Snapshot::take();
        assert!(snap.wait(Duration::from_secs(10)));
        let (p, d) = (passed.load(Ordering::Acquire), done.load(Ordering::Acquire));
        assert_eq!(p, d, "every command past the gate has finished");
        // And none passes afterwards.
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(passed.load(Ordering::Acquire), p);
        stop.store(true, Ordering::Relaxed);
        for w in workers {
            w.join().unwrap();
        }
    }
}
