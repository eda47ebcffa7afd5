//! The server's clock: real time, or time a test moves by hand.
//!
//! Every time-dependent rule (expiry, TTL replies, CL.THROTTLE, TIME) reads `now` once per
//! command (once per EXEC) from here and passes it down, so one command never sees two
//! different times. Real time is anchored to a monotonic [`Tick`], so an NTP step cannot
//! mass-expire keys, yet it still reports Unix time for EXPIREAT, TIME and GCRA state.
//!
//! The test-double commands can freeze the clock, move it forward, and resume real time.
//! Time never goes backwards: resuming continues from the frozen value, and setting an
//! earlier time is refused.

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
#[derive(Clone, Copy)]
enum Laps {
    Off,
    On(Option<Tick>),
}

thread_local! {
    static LAPS: std::cell::Cell<Laps> = const { std::cell::Cell::new(Laps::Off) };
}

/// Starts a batch on this thread: from here to [`batch_end`], a command's end ([`lap`]) is
/// the next command's start ([`take_lap`]).
#[inline]
pub fn batch_begin() {
    LAPS.set(Laps::On(None));
}

/// Ends this thread's batch: nothing read before is reused after.
#[inline]
pub fn batch_end() {
    LAPS.set(Laps::Off);
}

/// The end of the command that ran just before on this thread in this batch, if any;
/// taking it means no later command reuses it.
#[inline]
pub fn take_lap() -> Option<Tick> {
    match LAPS.get() {
        Laps::On(Some(at)) => {
            LAPS.set(Laps::On(None));
            Some(at)
        }
        _ => None,
    }
}

/// A command ended at `at`: inside a batch, the next command starts there.
#[inline]
pub fn lap(at: Tick) {
    if let Laps::On(_) = LAPS.get() {
        LAPS.set(Laps::On(Some(at)));
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
