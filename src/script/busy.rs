//! The running scripts, as other connections see them: one [`Slot`] per thread (a thread's
//! VM runs one script at a time, and several threads run scripts at once), each with its
//! start time, the shards it holds, its kill and wrote flags and, for FCALL, the function.
//!
//! Connections read it to wait or answer `-BUSY` when a command needs a shard a long script
//! holds; SCRIPT KILL / FUNCTION KILL set kill flags; the instruction-count hook of the
//! thread's VM polls its own slot. The slot list is a leaf lock taken when a thread runs its
//! first script and by the readers (the gate, KILL, FUNCTION STATS); a script's own hot path
//! reaches its slot through a thread-local.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::ThreadId;
use std::time::Duration;

use crate::clock::Tick;

use bytes::Bytes;
use smallvec::SmallVec;

/// A script running longer than this gives its runtime worker away (see `hand_off_worker`).
const HAND_OFF_AFTER: Duration = Duration::from_millis(2);

/// How often a long script offers its worker again (in case the first offer was not taken).
const HAND_OFF_AGAIN: Duration = Duration::from_millis(50);

/// Lets the tokio runtime replace the worker thread a long script runs on.
///
/// A multi-thread runtime keeps one parked worker polling the sockets; a worker busy in a
/// long script is not parked, and the others may sleep on a condition variable waiting to be
/// told there is work, so nobody reads the sockets: other clients would get neither `-BUSY`
/// nor their SCRIPT KILL through. `block_in_place` hands this worker's queue and its turn at
/// polling to a fresh thread; the short sleep gives that thread time to take them before
/// `block_in_place` returns (it takes them back if still there). Only scripts that already
/// ran for `HAND_OFF_AFTER` pay for this.
fn hand_off_worker() {
    use tokio::runtime::{Handle, RuntimeFlavor};
    if Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread) {
        tokio::task::block_in_place(|| std::thread::sleep(Duration::from_millis(1)));
    } else if let Some(hook) = WHILE_BUSY.get() {
        hook();
    }
}

thread_local! {
    /// What a long script on this thread calls instead of `block_in_place` when the thread
    /// is not a tokio worker: an event loop's own way of serving its other connections
    /// meanwhile (`server::eventloop`, as Redis processes events from inside a script).
    static WHILE_BUSY: std::cell::Cell<Option<fn()>> = const { std::cell::Cell::new(None) };
}

/// Sets (or clears) this thread's hook for long scripts (see `WHILE_BUSY`).
pub fn set_while_busy(hook: Option<fn()>) {
    WHILE_BUSY.set(hook);
}

fn anchor() -> Tick {
    static ANCHOR: std::sync::OnceLock<Tick> = std::sync::OnceLock::new();
    *ANCHOR.get_or_init(Tick::now)
}

/// `at` as a script's start mark: microseconds since the anchor, plus one (0 is "none").
/// A [`Tick`], the clock commands read, so a tick the command already has can serve.
fn mark_at(at: Tick) -> u64 {
    at.ns_since(anchor()) / 1000 + 1
}

fn now_mark() -> u64 {
    mark_at(Tick::now())
}

/// The shards a running script holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// Every shard.
    All,
    /// These shard indexes.
    Some(SmallVec<[usize; 8]>),
}

impl Held {
    /// True if a command needing `needs` (None: every shard) would wait for these.
    fn overlaps(&self, needs: Option<&[usize]>) -> bool {
        match (self, needs) {
            (Held::All, _) | (_, None) => true,
            (Held::Some(held), Some(needs)) => needs.iter().any(|i| held.contains(i)),
        }
    }
}

/// One thread's running script.
#[derive(Debug)]
struct Slot {
    thread: ThreadId,
    /// Microseconds since `anchor()` when the script started, plus one; 0: none.
    started_us: AtomicU64,
    kill: AtomicBool,
    wrote: AtomicBool,
    /// Microseconds of running time at which the worker is next handed off.
    next_hand_off_us: AtomicU64,
    /// The running script is a function (FCALL): its name and command line.
    function: Mutex<Option<(String, Vec<Bytes>)>>,
    /// `function` holds a name. Written and read only by the slot's own thread (readers on
    /// other threads lock `function`), so that an EVAL script after an EVAL script leaves
    /// the mutex alone.
    has_function: AtomicBool,
    held: Mutex<Held>,
}

impl Slot {
    fn new() -> Self {
        Slot {
            thread: std::thread::current().id(),
            started_us: AtomicU64::new(0),
            kill: AtomicBool::new(false),
            wrote: AtomicBool::new(false),
            next_hand_off_us: AtomicU64::new(0),
            function: Mutex::new(None),
            has_function: AtomicBool::new(false),
            held: Mutex::new(Held::All),
        }
    }

    fn running_for(&self) -> Option<Duration> {
        match self.started_us.load(Ordering::Acquire) {
            0 => None,
            t => Some(Duration::from_micros(now_mark().saturating_sub(t))),
        }
    }

    fn function(&self) -> Option<(String, Vec<Bytes>)> {
        self.function
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn is_function(&self) -> bool {
        self.function
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }
}

type Slots = Mutex<Vec<Arc<Slot>>>;

/// This thread's slot in one `Busy`'s list; leaves the list when the thread ends (the
/// runtime replaces threads that handed their worker off), so the list stays as long as
/// the threads that live.
struct Here {
    id: u64,
    slot: Arc<Slot>,
    list: Weak<Slots>,
}

impl Drop for Here {
    fn drop(&mut self) {
        if let Some(list) = self.list.upgrade() {
            list.lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|s| !Arc::ptr_eq(s, &self.slot));
        }
    }
}

thread_local! {
    /// This thread's slot in the `Busy` with the given id (a thread serves one server; tests
    /// with several fall back to the list).
    static HERE: RefCell<Option<Here>> = const { RefCell::new(None) };
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What other connections need to know about the scripts being run.
#[derive(Debug)]
pub struct Busy {
    id: u64,
    slots: Arc<Slots>,
    /// Scripts running (or announced) now.
    running: AtomicUsize,
    /// Connections in [`Busy::wait_end`]: a script's end notifies `ended` (a lock and
    /// an atomic add in tokio) only when one waits.
    waiting: AtomicUsize,
    ended: tokio::sync::Notify,
}

impl Default for Busy {
    fn default() -> Self {
        Busy {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            slots: Arc::new(Mutex::new(Vec::new())),
            running: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            ended: tokio::sync::Notify::new(),
        }
    }
}

/// What SCRIPT KILL did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillOutcome {
    /// No script is running (past the threshold).
    NotBusy,
    /// The running script(s) wrote: Redis refuses to stop them.
    Unkillable,
    /// The script(s) will stop at their next hook check.
    Killed,
    /// SCRIPT KILL while a function runs, or FUNCTION KILL while an EVAL script runs.
    WrongKind,
}

/// The oldest running script a command would wait for (see [`Busy::blocking`]).
#[derive(Debug, Clone, Copy)]
pub struct Blocker {
    /// How long it has run.
    pub ran: Duration,
    /// It is a function (FCALL): `-BUSY` names FUNCTION KILL.
    pub function: bool,
}

impl Busy {
    fn slots(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Slot>>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` with this thread's slot, creating it on the thread's first script. The
    /// slot is borrowed where the thread-local keeps it (no reference count is taken: a
    /// script's start, end and writes each come here, and every count is an atomic
    /// read-modify-write); `f` only touches the slot's own fields, never `HERE`.
    #[inline]
    fn with_here<R>(&self, f: impl FnOnce(&Slot) -> R) -> R {
        let ran = HERE.with(move |h| match &*h.borrow() {
            Some(here) if here.id == self.id => Ok(f(&here.slot)),
            _ => Err(f),
        });
        match ran {
            Ok(out) => out,
            Err(f) => f(&self.join_here()),
        }
    }

    /// This thread's slot, made (or found in the list) on its first script and kept in
    /// `HERE`.
    #[cold]
    fn join_here(&self) -> Arc<Slot> {
        let me = std::thread::current().id();
        let slot = {
            let mut slots = self.slots();
            match slots.iter().find(|s| s.thread == me) {
                Some(s) => s.clone(),
                None => {
                    let s = Arc::new(Slot::new());
                    slots.push(s.clone());
                    s
                }
            }
        };
        let here = Here {
            id: self.id,
            slot: slot.clone(),
            list: Arc::downgrade(&self.slots),
        };
        // The slot this replaces (another server's, in tests) leaves its list.
        let old = HERE.with(|h| h.borrow_mut().replace(here));
        drop(old);
        slot
    }

    /// True while some script runs (one atomic load: checked before every command).
    #[inline]
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire) != 0
    }

    /// True while a script runs on this thread (the caller is that script's command).
    pub fn running_here(&self) -> bool {
        self.is_running() && self.with_here(|s| s.started_us.load(Ordering::Acquire) != 0)
    }

    /// How long the oldest running script has run (real time, whatever the server clock
    /// does).
    pub fn running_for(&self) -> Option<Duration> {
        if !self.is_running() {
            return None;
        }
        self.slots().iter().filter_map(|s| s.running_for()).max()
    }

    /// The oldest running script holding a shard of `needs` (None: any shard), if any.
    pub fn blocking(&self, needs: Option<&[usize]>) -> Option<Blocker> {
        if !self.is_running() {
            return None;
        }
        let slots = self.slots();
        let mut oldest: Option<Blocker> = None;
        for slot in slots.iter() {
            let Some(ran) = slot.running_for() else {
                continue;
            };
            let held = slot.held.lock().unwrap_or_else(|e| e.into_inner());
            if !held.overlaps(needs) {
                continue;
            }
            if oldest.is_none_or(|o| ran > o.ran) {
                oldest = Some(Blocker {
                    ran,
                    function: slot.is_function(),
                });
            }
        }
        oldest
    }

    /// Marks a script as about to start on this thread, before it takes its shards: a
    /// command arriving meanwhile then waits at the busy gate instead of blocking its
    /// event-loop thread on a shard the script is taking. The mark is withdrawn when the
    /// guard drops unless [`Busy::begin_as`] replaced it (the script ran).
    pub fn announce(&self) -> Announced<'_> {
        self.announce_holding(Held::All, Tick::now())
    }

    /// [`Busy::announce`] for a script about to take the shards `held`, whose command
    /// started `at` (in a batch, the previous command's end: no clock read of its own).
    pub fn announce_holding(&self, held: Held, at: Tick) -> Announced<'_> {
        let mark = mark_at(at);
        let set = self.with_here(|s| {
            *s.held.lock().unwrap_or_else(|e| e.into_inner()) = held;
            s.started_us
                .compare_exchange(0, mark, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        });
        if set {
            self.running.fetch_add(1, Ordering::AcqRel);
        }
        Announced(self, set.then_some(mark))
    }

    /// Marks a script holding every shard as started; it ends when the guard drops.
    pub fn begin(&self) -> BusyGuard<'_> {
        self.begin_as(None, Held::All)
    }

    /// Like [`Busy::begin`]; `function` names the function FCALL runs, and its command;
    /// `held` the shards the script holds.
    pub fn begin_as(&self, function: Option<(String, Vec<Bytes>)>, held: Held) -> BusyGuard<'_> {
        self.begin_holding(function, false, || held)
    }

    /// [`Busy::begin_as`] for a script that holds the shards its command announced
    /// ([`Busy::announce_holding`]) and no others: those stay the slot's, and `held` is
    /// asked for the shards only if nothing was announced on this thread. The held-shards
    /// lock is then taken once per script, by the announcement.
    pub fn begin_announced(
        &self,
        function: Option<(String, Vec<Bytes>)>,
        held: impl FnOnce() -> Held,
    ) -> BusyGuard<'_> {
        self.begin_holding(function, true, held)
    }

    fn begin_holding(
        &self,
        function: Option<(String, Vec<Bytes>)>,
        keep_announced: bool,
        held: impl FnOnce() -> Held,
    ) -> BusyGuard<'_> {
        let was = self.with_here(|s| {
            if function.is_some() || s.has_function.load(Ordering::Relaxed) {
                s.has_function.store(function.is_some(), Ordering::Relaxed);
                *s.function.lock().unwrap_or_else(|e| e.into_inner()) = function;
            }
            let announced = s.started_us.load(Ordering::Acquire) != 0;
            if !(keep_announced && announced) {
                *s.held.lock().unwrap_or_else(|e| e.into_inner()) = held();
            }
            s.kill.store(false, Ordering::Relaxed);
            s.wrote.store(false, Ordering::Relaxed);
            s.next_hand_off_us
                .store(HAND_OFF_AFTER.as_micros() as u64, Ordering::Relaxed);
            // Announced as its command started (`announce_holding`), microseconds ago: that
            // is the start, without a clock read. One microsecond later, so that the mark
            // is not the announcement's, which its guard then leaves alone.
            let was = s.started_us.load(Ordering::Acquire);
            let mark = if was == 0 { now_mark() } else { was + 1 };
            s.started_us.store(mark, Ordering::Release);
            was
        });
        if was == 0 {
            self.running.fetch_add(1, Ordering::AcqRel);
        }
        BusyGuard(self)
    }

    /// The script running on this thread now holds `held` (it took more shards).
    pub fn set_held(&self, held: Held) {
        self.with_here(|s| *s.held.lock().unwrap_or_else(|e| e.into_inner()) = held);
    }

    /// Records that the script running on this thread wrote (KILL then refuses to stop it).
    pub fn mark_write(&self) {
        self.with_here(|s| s.wrote.store(true, Ordering::Relaxed));
    }

    /// True if the script running on this thread wrote.
    pub fn wrote_here(&self) -> bool {
        self.with_here(|s| s.wrote.load(Ordering::Relaxed))
    }

    /// Stops the script running on this thread at its next hook check (it is re-run holding
    /// every shard; see `commands::scripting`).
    pub fn stop_here(&self) {
        self.with_here(|s| s.kill.store(true, Ordering::Release));
    }

    /// A running function's name and command, if a function runs.
    pub fn running_function(&self) -> Option<(String, Vec<Bytes>)> {
        if !self.is_running() {
            return None;
        }
        self.slots()
            .iter()
            .filter(|s| s.started_us.load(Ordering::Acquire) != 0)
            .find_map(|s| s.function())
    }

    /// SCRIPT KILL, whatever the scripts' age.
    pub fn request_kill(&self) -> KillOutcome {
        self.request_kill_as(false, Duration::ZERO)
    }

    /// SCRIPT KILL (`function` false) or FUNCTION KILL (true): stops every script of that
    /// kind that has run for `past` (the busy threshold) and wrote nothing. NotBusy if no
    /// script has run that long; otherwise Killed if one was stopped, else Unkillable if
    /// one of the right kind wrote, else WrongKind.
    pub fn request_kill_as(&self, function: bool, past: Duration) -> KillOutcome {
        if !self.is_running() {
            return KillOutcome::NotBusy;
        }
        let (mut any, mut killed, mut unkillable) = (false, false, false);
        for slot in self.slots().iter() {
            if slot.running_for().is_none_or(|ran| ran < past) {
                continue;
            }
            any = true;
            if slot.is_function() != function {
                continue;
            }
            if slot.wrote.load(Ordering::Relaxed) {
                unkillable = true;
            } else {
                slot.kill.store(true, Ordering::Release);
                killed = true;
            }
        }
        match (any, killed, unkillable) {
            (false, ..) => KillOutcome::NotBusy,
            (_, true, _) => KillOutcome::Killed,
            (_, _, true) => KillOutcome::Unkillable,
            _ => KillOutcome::WrongKind,
        }
    }

    /// Stops every running script whatever it did (server shutdown).
    pub fn abort(&self) {
        if self.is_running() {
            for slot in self.slots().iter() {
                if slot.started_us.load(Ordering::Acquire) != 0 {
                    slot.kill.store(true, Ordering::Release);
                }
            }
        }
    }

    /// True if the script running on this thread must stop.
    pub(super) fn killed(&self) -> bool {
        self.with_here(|s| s.kill.load(Ordering::Acquire))
    }

    /// What the running script's long operations call now and then (the instruction-count
    /// hook, the pattern matcher, the reply conversion): gives the event loop away once the
    /// script has run a while (see `hand_off_worker`), and says whether to stop.
    pub(super) fn poll(&self) -> bool {
        let hand_off = self.with_here(|s| {
            if s.kill.load(Ordering::Acquire) {
                return None;
            }
            // Again every HAND_OFF_AGAIN: on a loaded machine the fresh thread may not have
            // taken the loop over before `block_in_place` returned and took it back.
            let ran = s.running_for().map_or(0, |t| t.as_micros() as u64);
            let due = ran >= s.next_hand_off_us.load(Ordering::Relaxed);
            if due {
                s.next_hand_off_us
                    .store(ran + HAND_OFF_AGAIN.as_micros() as u64, Ordering::Relaxed);
            }
            Some(due)
        });
        match hand_off {
            None => true,
            Some(due) => {
                if due {
                    hand_off_worker();
                }
                false
            }
        }
    }

    /// Waits until a script ends (or none runs), or `max` passes.
    pub async fn wait_end(&self, max: Duration) {
        // Counted before the `Notified` is made and `running` read (all `SeqCst`, as the
        // ending side's `running` write and `waiting` read): either the ending script sees
        // this waiter and notifies (a `Notified` made before `notify_waiters` completes),
        // or this waiter sees its end in `running`.
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.waiting);
        let notified = self.ended.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.running.load(Ordering::SeqCst) == 0 {
            return;
        }
        tokio::select! {
            _ = notified => {}
            _ = tokio::time::sleep(max) => {}
        }
    }

    fn end_here(&self, mark: Option<u64>) {
        let ended = self.with_here(|s| match mark {
            None => {
                s.kill.store(false, Ordering::Relaxed);
                s.started_us.swap(0, Ordering::AcqRel) != 0
            }
            // A mark `begin_as` replaced (the script ran and ended) is left with a load.
            Some(mark) => {
                s.started_us.load(Ordering::Acquire) == mark
                    && s.started_us
                        .compare_exchange(mark, 0, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
            }
        });
        if ended {
            self.running.fetch_sub(1, Ordering::SeqCst);
            if self.waiting.load(Ordering::SeqCst) != 0 {
                self.ended.notify_waiters();
            }
        }
    }
}

/// A connection counted in [`Busy::wait_end`]'s `waiting` until it stops waiting (or its
/// future is dropped).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Ends the running-script state when dropped.
#[derive(Debug)]
pub struct BusyGuard<'a>(&'a Busy);

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        self.0.end_here(None);
    }
}

/// A script announced by [`Busy::announce`]; withdraws the mark it set, if still there.
#[derive(Debug)]
pub struct Announced<'a>(&'a Busy, Option<u64>);

impl Drop for Announced<'_> {
    fn drop(&mut self) {
        if self.1.is_some() {
            self.0.end_here(self.1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// An announced script runs from its command's start (the tick given, no clock read of
    /// its own), and the announcement's guard, dropped while the script runs, leaves it be.
    #[test]
    fn an_announced_script_runs_from_its_commands_start() {
        let busy = Busy::default();
        let started = Tick::now();
        std::thread::sleep(Duration::from_millis(30));
        let announced = busy.announce_holding(Held::All, started);
        let running = busy.begin();
        let ran = busy.running_for().expect("running");
        assert!(ran >= Duration::from_millis(30), "{ran:?}");
        drop(announced);
        assert!(busy.running_here() && busy.is_running());
        drop(running);
        assert!(!busy.is_running());
        // Not announced: it runs from its own start.
        let running = busy.begin();
        let ran = busy.running_for().expect("running");
        assert!(ran < Duration::from_millis(30), "{ran:?}");
        drop(running);
        assert_eq!(busy.running_for(), None);
    }

    /// A script that holds what its command announced keeps the announced shards; one
    /// that was not announced holds what it says.
    #[test]
    fn an_announced_script_keeps_the_shards_it_announced() {
        let busy = Busy::default();
        let announced = busy.announce_holding(Held::Some(SmallVec::from_slice(&[1])), Tick::now());
        let running = busy.begin_announced(None, || Held::All);
        drop(announced);
        assert!(busy.blocking(Some(&[1])).is_some());
        assert!(busy.blocking(Some(&[0])).is_none());
        drop(running);
        let running = busy.begin_announced(None, || Held::Some(SmallVec::from_slice(&[2])));
        assert!(busy.blocking(Some(&[2])).is_some());
        assert!(busy.blocking(Some(&[1])).is_none());
        drop(running);
        assert!(!busy.is_running());
    }

    #[test]
    fn scripts_on_two_threads_are_tracked_apart() {
        let busy = Arc::new(Busy::default());
        let _here = busy.begin_as(None, Held::Some(SmallVec::from_slice(&[1, 3])));
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let other = busy.clone();
        let t = std::thread::spawn(move || {
            let _g = other.begin_as(
                Some(("f".into(), vec![])),
                Held::Some(SmallVec::from_slice(&[2])),
            );
            other.mark_write();
            tx.send(()).ok();
            done_rx.recv().ok();
        });
        rx.recv().ok();
        assert!(busy.is_running());
        assert!(busy.running_here());
        assert!(!busy.wrote_here());
        assert!(busy.blocking(Some(&[0])).is_none());
        assert!(busy.blocking(Some(&[3])).is_some_and(|b| !b.function));
        assert!(busy.blocking(Some(&[2])).is_some_and(|b| b.function));
        assert!(busy.blocking(None).is_some());
        // FUNCTION KILL: the function wrote; SCRIPT KILL stops the script.
        assert_eq!(
            busy.request_kill_as(true, Duration::ZERO),
            KillOutcome::Unkillable
        );
        assert_eq!(
            busy.request_kill_as(false, Duration::ZERO),
            KillOutcome::Killed
        );
        assert!(busy.killed());
        assert_eq!(
            busy.request_kill_as(false, Duration::from_secs(3600)),
            KillOutcome::NotBusy
        );
        done_tx.send(()).ok();
        t.join().ok();
        assert!(busy.running_function().is_none());
        drop(_here);
        assert!(!busy.is_running());
    }

    #[test]
    fn a_script_after_a_function_on_the_same_thread_is_no_function() {
        let busy = Busy::default();
        let f = busy.begin_as(Some(("f".into(), vec![])), Held::All);
        assert!(busy.running_function().is_some());
        drop(f);
        let _script = busy.begin_as(None, Held::All);
        assert!(busy.running_function().is_none());
        assert!(busy.blocking(None).is_some_and(|b| !b.function));
    }

    #[test]
    fn a_connection_waiting_for_a_script_is_woken_when_it_ends() {
        let busy = Arc::new(Busy::default());
        let script = busy.begin();
        let waiter = busy.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .expect("a runtime");
            let start = Instant::now();
            rt.block_on(waiter.wait_end(Duration::from_secs(30)));
            tx.send(start.elapsed()).ok();
        });
        // The waiter is counted before it reads whether a script runs.
        while busy.waiting.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        drop(script);
        let waited = rx.recv_timeout(Duration::from_secs(20));
        t.join().ok();
        assert!(
            waited.is_ok_and(|w| w < Duration::from_secs(10)),
            "{waited:?}"
        );
        assert_eq!(busy.waiting.load(Ordering::SeqCst), 0);
    }
}
