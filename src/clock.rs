//! The server's clock: real time, or time a test moves by hand.
//!
//! Every time-dependent rule (expiry, TTL replies, CL.THROTTLE, TIME) reads `now` once per
//! command (once per EXEC; once per run of an event loop batch's lean commands,
//! [`lean_start`]) from here and passes it down, so one command never sees two different
//! times. `now` comes only from `CLOCK_MONOTONIC` (or test mode's clock); the CPU's cycle
//! counter ([`Cycles`]) only times lean commands, on one thread. Real time is anchored to
//! a monotonic [`Tick`], so an NTP step cannot mass-expire keys, yet it still reports Unix
//! time for EXPIREAT, TIME and GCRA state.
//!
//! The test-double commands can freeze the clock, move it forward, and resume real time.
//! Time never goes backwards: resuming continues from the frozen value, and setting an
//! earlier time is refused.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A monotonic instant in nanoseconds (`CLOCK_MONOTONIC`, the clock `Instant` reads): what
/// a command's `now` and its timing come from. A plain `u64`, because every command
/// converts one to Unix time and subtracts two, which `Instant`'s (seconds, nanoseconds)
/// pair does with checked, normalizing arithmetic, at several times the instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tick(u64);

impl Tick {
    /// Now.
    #[inline]
    pub fn now() -> Tick {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes the timespec we own; CLOCK_MONOTONIC always exists
        // (on failure `ts` stays 0, a time in the past, never a panic).
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        Tick(
            (ts.tv_sec as u64)
                .wrapping_mul(1_000_000_000)
                .wrapping_add(ts.tv_nsec as u64),
        )
    }

    /// Nanoseconds from `earlier` to this tick (0 if `earlier` is later).
    #[inline]
    pub fn ns_since(self, earlier: Tick) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

/// A shared handle to the clock; cloning it is cheap and all clones see the same time.
#[derive(Debug, Clone)]
pub struct Clock {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    anchor: Tick,
    anchor_unix_ns: u64,
    /// Added to real time; set when real time resumes after a freeze so it continues from
    /// the frozen value instead of jumping back.
    offset_ns: AtomicU64,
    frozen: AtomicBool,
    frozen_ns: AtomicU64,
    /// Woken whenever manual time moves, so reapers re-check their deadlines.
    changed: tokio::sync::Notify,
}

/// Why a clock change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClockError {
    /// The requested time is before the current one.
    #[error("ERR the clock cannot move backwards")]
    Backwards,
    /// The clock is running; freeze it first.
    #[error("ERR the clock is not frozen (use CLOCK FREEZE first)")]
    NotFrozen,
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

impl Clock {
    /// Real time.
    pub fn system() -> Self {
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_nanos() as u64;
        Clock {
            inner: Arc::new(Inner {
                anchor: Tick::now(),
                anchor_unix_ns: unix,
                offset_ns: AtomicU64::new(0),
                frozen: AtomicBool::new(false),
                frozen_ns: AtomicU64::new(0),
                changed: tokio::sync::Notify::new(),
            }),
        }
    }

    /// A clock frozen at the current real time.
    pub fn frozen() -> Self {
        let c = Self::system();
        c.freeze();
        c
    }

    fn real_ns(&self) -> u64 {
        let i = &self.inner;
        // Saturating: CLOCK SET / ADVANCE may have taken time to the end of u64, and real
        // time resumed from there must stay there rather than overflow.
        i.anchor_unix_ns
            .saturating_add(Tick::now().ns_since(i.anchor))
            .saturating_add(i.offset_ns.load(Ordering::Relaxed))
    }

    /// Nanoseconds since the Unix epoch.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        if self.inner.frozen.load(Ordering::Relaxed) {
            self.inner.frozen_ns.load(Ordering::Acquire)
        } else {
            self.real_ns()
        }
    }

    /// `now_ns` and the [`Tick`] it corresponds to, from a single clock read (in frozen
    /// mode the tick is read on its own), for callers that also time what they do.
    #[inline]
    pub fn now_ns_and_tick(&self) -> (u64, Tick) {
        let at = Tick::now();
        (self.now_ns_at(at), at)
    }

    /// `now_ns` as of `at`, a tick the caller read (in frozen mode, the frozen time).
    #[inline]
    pub fn now_ns_at(&self, at: Tick) -> u64 {
        let i = &self.inner;
        if i.frozen.load(Ordering::Relaxed) {
            i.frozen_ns.load(Ordering::Acquire)
        } else {
            i.anchor_unix_ns
                .saturating_add(at.ns_since(i.anchor))
                .saturating_add(i.offset_ns.load(Ordering::Relaxed))
        }
    }

    /// Milliseconds since the Unix epoch.
    #[inline]
    pub fn now_ms(&self) -> u64 {
        self.now_ns() / 1_000_000
    }

    /// True while time only moves by hand.
    pub fn is_frozen(&self) -> bool {
        self.inner.frozen.load(Ordering::Relaxed)
    }

    /// Stops time at its current value.
    pub fn freeze(&self) {
        if !self.is_frozen() {
            // Whole milliseconds, so a test can `CLOCK SET` the value `CLOCK FREEZE` replied.
            let now = self.real_ns();
            self.inner
                .frozen_ns
                .store(now - now % 1_000_000, Ordering::Release);
            self.inner.frozen.store(true, Ordering::Release);
        }
    }

    /// Lets real time run again, continuing from the frozen value.
    pub fn resume(&self) {
        if self.is_frozen() {
            let frozen = self.inner.frozen_ns.load(Ordering::Acquire);
            let real = self.real_ns();
            if frozen > real {
                self.inner
                    .offset_ns
                    .fetch_add(frozen - real, Ordering::AcqRel);
            }
            self.inner.frozen.store(false, Ordering::Release);
            self.inner.changed.notify_waiters();
        }
    }

    /// Back to real time, as a new clock would read it (`TESTMODE RESET`): unfrozen, with
    /// no offset. The one way time may go backwards, from a frozen or advanced value to the
    /// real one; the reset empties the keyspace in the same step, so no key's deadline
    /// depends on the time it leaves behind.
    ///
    /// Waiters are woken only when time did move (it was frozen or offset): a test suite
    /// resets before every test, and waking the reaper's thread for a clock that never left
    /// real time cost each reset a thread wake-up and a reaper pass (more CPU than the
    /// reset itself, and on a busy machine the loop's thread was preempted by the woken one).
    pub fn reset(&self) {
        let offset = self.inner.offset_ns.swap(0, Ordering::AcqRel);
        let frozen = self.inner.frozen.swap(false, Ordering::AcqRel);
        self.inner.frozen_ns.store(0, Ordering::Release);
        if frozen || offset != 0 {
            self.inner.changed.notify_waiters();
        }
    }

    /// Moves frozen time forward by `by`.
    pub fn advance(&self, by: Duration) -> Result<u64, ClockError> {
        if !self.is_frozen() {
            return Err(ClockError::NotFrozen);
        }
        let by = by.as_nanos().min(u64::MAX as u128) as u64;
        let prev = self.inner.frozen_ns.load(Ordering::Acquire);
        let now = prev.saturating_add(by);
        self.inner.frozen_ns.store(now, Ordering::Release);
        self.inner.changed.notify_waiters();
        Ok(now)
    }

    /// Sets frozen time to `unix_ns`; refuses to go backwards.
    pub fn set(&self, unix_ns: u64) -> Result<u64, ClockError> {
        if !self.is_frozen() {
            return Err(ClockError::NotFrozen);
        }
        let prev = self.inner.frozen_ns.load(Ordering::Acquire);
        if unix_ns < prev {
            return Err(ClockError::Backwards);
        }
        self.inner.frozen_ns.store(unix_ns, Ordering::Release);
        self.inner.changed.notify_waiters();
        Ok(unix_ns)
    }

    /// Completes when manual time next moves (CLOCK ADVANCE/SET/resume). Create it before
    /// reading the time it guards, so that a move in between is not missed.
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.inner.changed.notified()
    }

    /// Waits at most `max` of real time, or until manual time moves.
    pub async fn sleep_at_most(&self, max: Duration) {
        let changed = self.inner.changed.notified();
        tokio::select! {
            _ = tokio::time::sleep(max) => {}
            _ = changed => {}
        }
    }
}

/// Back-to-back commands share clock reads: while a thread runs one connection's batch of
/// requests (an event loop between its read and its write), the instant a command ends is
/// kept as the start of the next one, so a command costs one clock read instead of two.
/// What runs between the two (encoding a reply, parsing the next request, the next
/// command's checks) is counted in the next command's time: well under a microsecond,
/// where Redis reports whole microseconds. Outside a batch nothing is kept.
///
/// A batch's lean commands (`engine::call::call_lean`) go further, once this thread has
/// learned the CPU's cycle counter's rate ([`Cycles`]): a run of them shares one clock read,
/// the first one's `now` (the previous command's end, or a read), and each is timed by the
/// cycle counter from the previous one's end instead of reading the clock again. So:
/// - `now` still comes only from `CLOCK_MONOTONIC` (never from the counter), and a run's
///   commands share it, so expiry and TTL replies never see time go backwards; a run is
///   at most [`RUN_MAX_NS`] old: past that the next lean command reads the clock again;
/// - each command's duration is its own (a slow or preempted command is the one SLOWLOG,
///   commandstats and the latency histogram see, as in Redis), in nanoseconds scaled from
///   cycles at the learned rate;
/// - any other command, a lock wait, or serving blocked clients ends the run.
///
/// Test mode's clock (CLOCK FREEZE / ADVANCE / SET) is unchanged: `now` is the frozen value
/// whatever tick it is given, and durations are real time in both modes.
/// This thread's batch: what [`lap`] kept and the lean run under way.
struct Laps {
    /// Inside a batch.
    on: Cell<bool>,
    /// The end of the previous command, if it was read and not taken.
    lap: Cell<Option<Tick>>,
    /// The lean run's `now`: the clock read (or lap) it started from.
    run_now: Cell<Tick>,
    /// The cycle count past which the run is too old to go on (0: no run).
    run_until: Cell<u64>,
    /// The cycle count when the run's last command ended: the next one's start.
    run_last: Cell<u64>,
}

impl Laps {
    #[inline]
    fn clear(&self) {
        self.lap.set(None);
        self.run_until.set(0);
    }
}

/// How old a lean run's shared `now` may get before a command reads the clock again.
pub const RUN_MAX_NS: u64 = 100_000;

thread_local! {
    static LAPS: Laps = const {
        Laps {
            on: Cell::new(false),
            lap: Cell::new(None),
            run_now: Cell::new(Tick(0)),
            run_until: Cell::new(0),
            run_last: Cell::new(0),
        }
    };
}

/// Starts a batch on this thread: from here to [`batch_end`], a command's end ([`lap`]) is
/// the next command's start ([`take_lap`]), and lean commands share runs ([`lean_start`]).
#[inline]
pub fn batch_begin() {
    LAPS.with(|l| {
        l.on.set(true);
        l.clear();
    });
}

/// Ends this thread's batch: nothing read before is reused after.
#[inline]
pub fn batch_end() {
    LAPS.with(|l| {
        l.on.set(false);
        l.clear();
    });
}

/// The end of the command that ran just before on this thread in this batch, if any, for
/// a command that is not lean: taking it means no later command reuses it, and it ends
/// any lean run (the command reads the clock if the one before was lean).
#[inline]
pub fn take_lap() -> Option<Tick> {
    LAPS.with(|l| {
        l.run_until.set(0);
        l.lap.take()
    })
}

/// A command ended at `at` (read): inside a batch, the next command starts there, and a
/// lean run, if any, has ended.
#[inline]
pub fn lap(at: Tick) {
    LAPS.with(|l| {
        if l.on.get() {
            l.lap.set(Some(at));
            l.run_until.set(0);
        }
    });
}

/// Forgets what this batch kept: the next command reads the clock (after a wait that is
/// no command's time, or a command that stopped early).
#[inline]
pub fn interrupt() {
    LAPS.with(Laps::clear);
}

/// Where a lean command's time starts: see [`lean_start`].
#[derive(Debug, Clone, Copy)]
pub struct LeanStart {
    /// The command's `now`.
    pub now: Tick,
    /// The cycle count it is timed from; `None`: timed by the clock from `now`.
    cycles: Option<u64>,
}

/// A lean command starts (its locks held): its `now` and where its timing starts. Inside
/// a batch, once [`Cycles`] knows the rate, the lean run's shared `now` (a run starts from
/// the previous command's end, or a clock read) and the previous lean command's end in
/// cycles; otherwise as any command, the previous command's end or a clock read.
#[inline]
pub fn lean_start() -> LeanStart {
    LAPS.with(|l| {
        let last = l.run_last.get();
        if last < l.run_until.get() {
            return LeanStart {
                now: l.run_now.get(),
                cycles: Some(last),
            };
        }
        let lap = l.lap.take();
        // Acquire: the rate, stored before, is then seen by `lean_end`.
        let max = RUN_MAX_CYCLES.load(Ordering::Acquire);
        if max != 0 && l.on.get() {
            let now = lap.unwrap_or_else(Tick::now);
            let at = Cycles::now();
            l.run_now.set(now);
            l.run_until.set(at.saturating_add(max));
            l.run_last.set(at);
            return LeanStart {
                now,
                cycles: Some(at),
            };
        }
        // The rate is not known yet (or no batch): the clock, as for any command, and a
        // read paired with the counter to learn the rate from.
        match lap {
            Some(now) => LeanStart { now, cycles: None },
            None => {
                let now = Tick::now();
                if max == 0 {
                    Cycles::learn(now);
                }
                LeanStart { now, cycles: None }
            }
        }
    })
}

/// A lean command that started at `start` ended: its duration in nanoseconds. The end is
/// kept as the next command's start (in the run, or as a lap).
#[inline]
pub fn lean_end(start: LeanStart) -> u64 {
    match start.cycles {
        Some(began) => {
            let at = Cycles::now();
            LAPS.with(|l| l.run_last.set(at));
            Cycles::to_ns(at.saturating_sub(began), Cycles::rate())
        }
        None => {
            let ended = Tick::now();
            lap(ended);
            ended.ns_since(start.now)
        }
    }
}

/// The CPU's cycle counter (x86_64's `rdtsc`, read without a fence, as Redis's
/// `getMonotonicUs` does), for timing a lean command on one thread. Never for `now`: the
/// counters of two cores may differ by tens of nanoseconds and an unfenced read is not
/// ordered after a lock (see `ticks_never_go_back_across_threads`), which a duration
/// (saturating at 0) can bear and a time cannot.
///
/// Its rate is learned from the clock without slowing start-up: each thread pairs a
/// clock read it makes anyway (a batch's first lean command) with a counter read, and once
/// two pairs are [`Cycles::LEARN_NS`] apart their ratio is the rate, shared by all threads.
/// Until then, and for good where the counter does not run at a constant rate (no
/// invariant TSC, or another architecture), lean commands read the clock.
pub struct Cycles;

/// Nanoseconds per cycle, times 2^32; 0 while unknown.
static NS_PER_CYCLE: AtomicU64 = AtomicU64::new(0);

/// [`RUN_MAX_NS`] in cycles; 0 while the rate is unknown (no lean run then).
static RUN_MAX_CYCLES: AtomicU64 = AtomicU64::new(0);

/// What this thread knows towards learning the rate.
#[derive(Clone, Copy)]
enum Learning {
    /// Not started.
    Unknown,
    /// The first pair: a clock read and the counter beside it.
    From(Tick, u64),
    /// The counter cannot time anything here.
    Never,
}

thread_local! {
    static LEARNING: std::cell::Cell<Learning> = const { std::cell::Cell::new(Learning::Unknown) };
}

impl Cycles {
    /// How far apart the two clock reads the rate is learned from must be (a read's
    /// tens of nanoseconds over this are 0.1 ppm).
    pub const LEARN_NS: u64 = 200_000_000;

    /// The counter now (0 where there is none).
    #[inline]
    pub fn now() -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: rdtsc is available on every x86_64 CPU and reads no memory.
            #[allow(unused_unsafe)]
            unsafe {
                core::arch::x86_64::_rdtsc()
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            0
        }
    }

    /// Nanoseconds per cycle times 2^32, 0 while unknown.
    #[inline]
    pub fn rate() -> u64 {
        NS_PER_CYCLE.load(Ordering::Relaxed)
    }

    /// `cycles` in nanoseconds at `per_cycle` ([`Cycles::rate`]).
    #[inline]
    pub fn to_ns(cycles: u64, per_cycle: u64) -> u64 {
        ((u128::from(cycles) * u128::from(per_cycle)) >> 32).min(u128::from(u64::MAX)) as u64
    }

    /// The rate from two pairs of reads `ns` and `cycles` apart, if it is one a CPU's
    /// counter can have (between 50 MHz and 20 GHz).
    pub fn rate_from(ns: u64, cycles: u64) -> Option<u64> {
        if cycles == 0 || ns < cycles / 20 || ns > cycles.saturating_mul(20) {
            return None;
        }
        let rate = (u128::from(ns) << 32) / u128::from(cycles);
        u64::try_from(rate).ok().filter(|&r| r != 0)
    }

    /// A clock read this thread made (`at`), paired with the counter read now, towards the
    /// rate; once learned, it is set for every thread.
    #[cold]
    fn learn(at: Tick) {
        Self::learn_after(at, Self::now(), Self::LEARN_NS);
    }

    fn learn_after(at: Tick, cycles: u64, min_ns: u64) {
        match LEARNING.get() {
            Learning::Never => {}
            Learning::Unknown => LEARNING.set(if invariant_counter() {
                Learning::From(at, cycles)
            } else {
                Learning::Never
            }),
            Learning::From(t0, c0) => {
                let ns = at.ns_since(t0);
                if ns < min_ns {
                    return;
                }
                match Self::rate_from(ns, cycles.wrapping_sub(c0)) {
                    Some(rate) => {
                        NS_PER_CYCLE.store(rate, Ordering::Relaxed);
                        let max = (u128::from(RUN_MAX_NS) << 32) / u128::from(rate);
                        let max = max.clamp(1, u128::from(u64::MAX)) as u64;
                        RUN_MAX_CYCLES.store(max, Ordering::Release);
                    }
                    // Not a rate a counter can have (it stopped, or went back): start over.
                    None => LEARNING.set(Learning::From(at, cycles)),
                }
            }
        }
    }
}

/// Whether the CPU says its cycle counter runs at a constant rate in every power state
/// (CPUID 0x80000007, EDX bit 8: Linux's `constant_tsc` and `nonstop_tsc`).
fn invariant_counter() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::__cpuid;
        // SAFETY: cpuid is available on every x86_64 CPU; leaves past the maximum one
        // answer zeros (checked first anyway).
        #[allow(unused_unsafe)]
        let (max, power) = unsafe {
            let max = __cpuid(0x8000_0000).eax;
            let power = if max >= 0x8000_0007 {
                __cpuid(0x8000_0007).edx
            } else {
                0
            };
            (max, power)
        };
        max >= 0x8000_0007 && power & (1 << 8) != 0
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lap_is_kept_only_inside_a_batch_and_taken_once() {
        let at = Tick::now();
        lap(at);
        assert_eq!(take_lap(), None, "outside a batch nothing is kept");
        batch_begin();
        assert_eq!(take_lap(), None);
        lap(at);
        assert_eq!(take_lap(), Some(at));
        assert_eq!(take_lap(), None, "taken once");
        lap(at);
        batch_end();
        assert_eq!(take_lap(), None, "nothing survives the batch");
    }

    /// Learns the cycle counter's rate on this thread from two real pairs of reads 20 ms
    /// apart (as the loops do from their batches, 200 ms apart); false where the counter
    /// cannot time anything.
    fn learn_rate() -> bool {
        if Cycles::rate() != 0 {
            return true;
        }
        let pair = || (Tick::now(), Cycles::now());
        let (t0, c0) = pair();
        Cycles::learn_after(t0, c0, 20_000_000);
        std::thread::sleep(Duration::from_millis(20));
        let (t1, c1) = pair();
        Cycles::learn_after(t1, c1, 20_000_000);
        Cycles::rate() != 0
    }

    #[test]
    fn the_rate_is_one_a_counter_can_have() {
        assert_eq!(Cycles::rate_from(1_000, 0), None);
        assert_eq!(Cycles::rate_from(1, 1_000), None, "1 THz");
        assert_eq!(Cycles::rate_from(1_000, 10), None, "10 MHz");
        assert_eq!(
            Cycles::rate_from(1_000, 3_000),
            Some((1u64 << 32) / 3),
            "3 GHz"
        );
        let rate = Cycles::rate_from(1_000, 1_000).unwrap();
        assert_eq!(Cycles::to_ns(2_500, rate), 2_500);
        assert_eq!(Cycles::to_ns(u64::MAX, u64::MAX), u64::MAX, "saturates");
    }

    /// A batch's lean commands share one clock read for their `now`, but each is timed on
    /// its own: a slow one is the one SLOWLOG sees, not its run. Outside a batch, before
    /// the rate is known, or after anything that ends the run, the clock is read.
    #[test]
    fn a_lean_run_shares_its_now_and_times_each_command() {
        let outside = lean_start();
        assert!(outside.cycles.is_none(), "no run outside a batch");
        if !learn_rate() {
            return;
        }
        batch_begin();
        let first = lean_start();
        lean_end(first);
        let second = lean_start();
        assert_eq!(second.now, first.now, "one read for the run");
        assert!(first.cycles.is_some() && second.cycles.is_some());
        std::thread::sleep(Duration::from_millis(5));
        let slow = lean_end(second);
        let third = lean_start();
        let quick = lean_end(third);
        assert!((5_000_000..100_000_000).contains(&slow), "{slow}");
        assert!(
            quick < 1_000_000,
            "{quick}: the slow command's time is not the next one's"
        );
        assert!(third.now > first.now, "a run is at most RUN_MAX_NS old");
        // A command that is not lean ends the run: it reads the clock.
        assert_eq!(take_lap(), None);
        let after = lean_start();
        assert!(after.now > third.now);
        lean_end(after);
        // A run past its age reads the clock again.
        let old = lean_start();
        assert_eq!(old.now, after.now);
        std::thread::sleep(Duration::from_nanos(2 * RUN_MAX_NS));
        lean_end(old);
        let renewed = lean_start();
        assert!(renewed.now > old.now, "a run is at most RUN_MAX_NS old");
        // A wait (a lock), or serving blocked clients (a lap), ends it too.
        interrupt();
        let waited = lean_start();
        assert!(waited.now > renewed.now);
        let served = Tick::now();
        lap(served);
        assert_eq!(lean_start().now, served, "a run starts from the lap");
        batch_end();
        assert!(lean_start().cycles.is_none(), "nothing survives the batch");
    }

    #[test]
    fn now_at_an_instant_matches_the_pair() {
        let c = Clock::system();
        let (ns, at) = c.now_ns_and_tick();
        assert_eq!(c.now_ns_at(at), ns);
        c.freeze();
        assert_eq!(c.now_ns_at(Tick::now()), c.now_ns());
    }

    /// A tick is `Instant`'s clock in nanoseconds: it moves forward with it, and the
    /// difference of two is the time between them.
    #[test]
    fn ticks_measure_what_instants_measure() {
        let (t0, i0) = (Tick::now(), std::time::Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (i1, t1) = (std::time::Instant::now(), Tick::now());
        let ticked = t1.ns_since(t0);
        let elapsed = i1.duration_since(i0).as_nanos() as u64;
        assert!(ticked >= elapsed, "{ticked} < {elapsed}");
        assert!(ticked < elapsed + 5_000_000, "{ticked} vs {elapsed}");
        assert_eq!(t0.ns_since(t1), 0, "never negative");
    }

    /// A tick read after another (the two ordered by a lock) is never earlier, whichever
    /// threads and cores read them: a command's `now` must not go back when its connection
    /// moves between event loops, nor between a command and the reaper.
    #[test]
    fn ticks_never_go_back_across_threads() {
        let last = std::sync::Arc::new(std::sync::Mutex::new(Tick::now()));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let last = last.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000 {
                        let mut last = last.lock().unwrap();
                        let now = Tick::now();
                        assert!(now >= *last, "{now:?} before {:?}", *last);
                        *last = now;
                        drop(last);
                        if i % 1000 == 0 {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn reset_returns_to_real_time() {
        let c = Clock::system();
        c.freeze();
        c.advance(Duration::from_secs(3600)).unwrap();
        c.resume();
        assert!(c.now_ms() > real_ms() + 3_599_000);
        c.freeze();
        c.reset();
        assert!(!c.is_frozen());
        let (now, real) = (c.now_ms(), real_ms());
        assert!(now.abs_diff(real) < 1000, "{now} vs {real}");
    }

    #[test]
    fn reset_wakes_waiters_only_when_time_moved() {
        use std::future::Future;
        use std::task::{Context, Waker};
        let c = Clock::system();
        let mut cx = Context::from_waker(Waker::noop());
        let mut waiter = std::pin::pin!(c.changed());
        waiter.as_mut().enable();
        // Already on real time: nothing moved, the reaper sleeps on.
        c.reset();
        assert!(waiter.as_mut().poll(&mut cx).is_pending());
        c.freeze();
        c.reset();
        assert!(waiter.as_mut().poll(&mut cx).is_ready());
        // Resumed after an advance: real time plus an offset, which the reset takes away.
        c.freeze();
        c.advance(Duration::from_secs(60)).unwrap();
        c.resume();
        let mut waiter = std::pin::pin!(c.changed());
        waiter.as_mut().enable();
        c.reset();
        assert!(waiter.as_mut().poll(&mut cx).is_ready());
    }

    fn real_ms() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    }

    #[test]
    fn frozen_time_moves_only_by_hand() {
        let c = Clock::frozen();
        let t = c.now_ns();
        assert_eq!(c.now_ns(), t);
        c.advance(Duration::from_millis(1500)).unwrap();
        assert_eq!(c.now_ns(), t + 1_500_000_000);
        assert_eq!(c.set(t), Err(ClockError::Backwards));
        c.set(t + 2_000_000_000).unwrap();
        assert_eq!(c.now_ms(), (t + 2_000_000_000) / 1_000_000);
    }

    #[test]
    fn time_at_the_end_of_u64_saturates_instead_of_overflowing() {
        let c = Clock::frozen();
        c.set(u64::MAX - 1).unwrap();
        c.advance(Duration::from_secs(u64::MAX)).unwrap();
        assert_eq!(c.now_ns(), u64::MAX);
        c.resume();
        assert_eq!(c.now_ns(), u64::MAX);
        assert_eq!(c.now_ns_and_tick().0, u64::MAX);
    }

    #[test]
    fn resume_never_goes_backwards() {
        let c = Clock::frozen();
        let t = c.now_ns();
        c.advance(Duration::from_secs(3600)).unwrap();
        c.resume();
        assert!(c.now_ns() >= t + 3_600_000_000_000);
        assert_eq!(
            c.advance(Duration::from_secs(1)),
            Err(ClockError::NotFrozen)
        );
    }
}
