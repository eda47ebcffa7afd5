//! `busy-poll`: a loop that has just served a request polls for the next one for a few
//! microseconds before it sleeps, while the machine has half a core idle.
//!
//! Why: a client that sends its commands one at a time and waits for each reply (a test
//! suite, a script) pays, on every round trip, for waking the server's thread from its
//! sleep in `epoll_wait`: on a virtual machine whose other CPU is idle, that wake-up (an
//! interrupt to a halted virtual CPU) costs more than the command, and the client's `send`
//! pays for it. A loop that is still polling when the next request arrives finds it at
//! once, and the client's `send` wakes nobody. The npm and Python test helpers turn it on
//! for their servers; it is off by default, since a server whose clients send from many
//! connections rarely sleeps between requests anyway, and a spin is CPU time spent waiting.
//!
//! Bounds: the loop spins only after a turn that served something (an idle server never
//! spins), for at most `busy-poll` microseconds, yields the CPU between two polls (a client
//! on the same CPU runs at once), and only while the machine had at least half a core idle
//! over the last `CRON`, its own spinning's CPU time counted as idle (read from
//! /proc/stat, as the scaling of loops reads it; not on other systems): on a busy machine
//! the spin would take CPU from someone else, so the loop sleeps at once there, as without
//! the setting.

use std::time::{Duration, Instant};

use mio::{Events, Poll};

/// Idle CPUs the machine must have had for a loop to spin: half a core. Not a whole one (as
/// `scale::IDLE_TO_GROW` asks before a loop is brought in): a Node test run is a runner
/// process and a test process with its own helper threads, and keeps 1.1 to 1.4 of a
/// 2-core machine's CPUs busy, so a whole idle core let the npm helper's servers spin only
/// seldom (benchmarks/notes.md, "Test doubles, third pass"). On a machine others keep busy
/// the idle share is near 0 either way.
const IDLE_TO_SPIN: f64 = 0.5;

/// A loop's spin budget and whether the machine leaves room for it now.
pub(super) struct Spin {
    budget: Duration,
    /// The machine had half a core idle over the last window.
    allowed: bool,
    /// /proc/stat's idle + iowait ticks at the start of the window.
    idle_ticks: Option<u64>,
    window_start: Instant,
    /// CPU time spent spinning in this window: counted as idle, since the spin would give
    /// it back (else a loop that spins would find too little idle and stop, every other
    /// window). CPU time, not wall time: a spin that yielded to others did not take theirs.
    spun: Duration,
}

impl Spin {
    /// `busy_poll_us` microseconds of polling after a served turn (0: never).
    pub(super) fn new(busy_poll_us: u64) -> Spin {
        let budget = Duration::from_micros(busy_poll_us);
        Spin {
            budget,
            allowed: false,
            idle_ticks: if budget.is_zero() { None } else { idle_ticks() },
            window_start: Instant::now(),
            spun: Duration::ZERO,
        }
    }

    /// Called from the loop's cron: whether the machine had half a core idle since the last
    /// call.
    pub(super) fn cron(&mut self, now: Instant) {
        if self.budget.is_zero() {
            return;
        }
        let span = now.saturating_duration_since(self.window_start);
        let ticks = idle_ticks();
        self.allowed = match (self.idle_ticks, ticks) {
            (Some(before), Some(after)) if !span.is_zero() => {
                // USER_HZ is 100 on Linux: a tick is 10 ms of one CPU.
                let idle_cpus = after.saturating_sub(before) as f64 / 100.0 / span.as_secs_f64();
                room_to_spin(idle_cpus + self.spun.as_secs_f64() / span.as_secs_f64())
            }
            _ => false,
        };
        self.idle_ticks = ticks;
        self.window_start = now;
        self.spun = Duration::ZERO;
    }

    /// Whether the next wait may spin, after a turn that served something or not.
    pub(super) fn after_turn(&self, served: bool) -> bool {
        served && self.allowed && !self.budget.is_zero()
    }

    /// Polls without sleeping until something is ready or the budget is spent, yielding the
    /// CPU between polls; true when something is ready (in `events`).
    pub(super) fn poll(&mut self, poll: &mut Poll, events: &mut Events) -> std::io::Result<bool> {
        let cpu_before = super::scale::thread_cpu();
        let until = Instant::now() + self.budget;
        let found = loop {
            poll.poll(events, Some(Duration::ZERO))?;
            if !events.is_empty() {
                break true;
            }
            if Instant::now() >= until {
                break false;
            }
            std::thread::yield_now();
        };
        self.spun += super::scale::thread_cpu().saturating_sub(cpu_before);
        Ok(found)
    }
}

/// Whether a window in which the machine had `idle_cpus` idle (its own spins included) leaves
/// room for the loop to spin in the next.
fn room_to_spin(idle_cpus: f64) -> bool {
    idle_cpus >= IDLE_TO_SPIN
}

/// The machine's idle and iowait ticks so far (/proc/stat's first line), where there is one.
fn idle_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    let mut fields = line.split_whitespace().skip(1).map(|f| f.parse::<u64>());
    let idle = fields.nth(3)?.ok()?;
    let iowait = fields.next().and_then(Result::ok).unwrap_or(0);
    Some(idle + iowait)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_and_never_after_an_idle_turn() {
        let mut off = Spin::new(0);
        off.allowed = true;
        assert!(!off.after_turn(true));
        let mut on = Spin::new(50);
        on.allowed = true;
        assert!(on.after_turn(true));
        assert!(!on.after_turn(false));
        on.allowed = false;
        assert!(!on.after_turn(true));
    }

    #[test]
    fn a_spin_returns_what_became_ready_or_gives_up_after_its_budget() {
        let mut poll = Poll::new().unwrap();
        let mut events = Events::with_capacity(8);
        let mut spin = Spin::new(200);
        let started = Instant::now();
        assert!(!spin.poll(&mut poll, &mut events).unwrap());
        assert!(started.elapsed() >= Duration::from_micros(200));
        let waker = mio::Waker::new(poll.registry(), mio::Token(7)).unwrap();
        waker.wake().unwrap();
        assert!(spin.poll(&mut poll, &mut events).unwrap());
        assert_eq!(events.iter().next().map(|e| e.token()), Some(mio::Token(7)));
        // The CPU time spun counts as idle for the next window's decision.
        assert!(spin.spun > Duration::ZERO);
    }

    #[test]
    fn half_a_core_idle_is_enough_to_spin() {
        // A Node test run on 2 cores: the runner, the test process and its helper threads
        // keep 1.1 to 1.4 CPUs busy, so 0.6 to 0.9 is idle, and the spin must run there.
        assert!(room_to_spin(0.6));
        assert!(room_to_spin(0.5));
        // A machine others keep busy (a load average of 10 on 2 cores): no spin.
        assert!(!room_to_spin(0.1));
        assert!(!room_to_spin(0.0));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_idle_ticks_are_read() {
        assert!(idle_ticks().is_some());
    }
}
