//! Loops that scale themselves (see the module docs of `eventloop`): a loop's load over
//! each second, and the decision to bring in the next loop or let the last one go, moving
//! connections between loops.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Arrival;
use super::turn::State;

/// The share of a second an active loop must spend working to bring in the next loop.
const SATURATED: f64 = 0.9;

/// Idle CPUs the machine must have (over the last second) before a saturated loop brings
/// in another: a whole core, so the new loop runs beside the others and the clients rather
/// than in their place.
const IDLE_TO_GROW: f64 = 1.0;

/// A loop's share of a second spent working (its thread's CPU time, so a wait costs
/// nothing to measure), and the machine's idle CPUs over the same second.
pub(super) struct Load {
    window_start: Instant,
    cpu_at_start: Duration,
    busy: f64,
    idle_cpus: Option<f64>,
    last_idle_ticks: Option<u64>,
}

/// The calling thread's CPU time.
pub(super) fn thread_cpu() -> Duration {
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
    pub(super) fn new() -> Load {
        Load {
            window_start: Instant::now(),
            cpu_at_start: thread_cpu(),
            busy: 0.0,
            idle_cpus: None,
            last_idle_ticks: None,
        }
    }

    /// True once a second has passed since the window began (then the window restarts).
    pub(super) fn second_passed(&mut self, now: Instant) -> bool {
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

    pub(super) fn busy_share(&self) -> (f64, Option<f64>) {
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
pub(super) fn scale(state: &State, (busy, idle_cpus): (f64, Option<f64>)) {
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
