//! A global allocator wrapper that counts live heap bytes, so INFO's `used_memory` (and later
//! the memory cap) report what sluice really holds rather than an estimate.
//!
//! It also counts, per thread, how many allocations (and reallocations) the thread made
//! ([`thread_allocations`]): an event loop serves a connection from read to write on one
//! thread, so the difference of two readings around a request is what that request
//! allocated. The allocation test (`tests/it/alloc.rs`) holds the hot paths to zero with
//! it. The count is a thread-local `Cell` add, cheap enough to keep in release builds.
//! [`set_thread_hook`] lets that test see where an allocation happens.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Allocations and reallocations made by this thread.
    static THREAD_ALLOCS: Cell<u64> = const { Cell::new(0) };
    /// Called with the size of each allocation this thread makes (see `set_thread_hook`).
    static THREAD_HOOK: Cell<Option<fn(usize)>> = const { Cell::new(None) };
}

/// Allocations (and reallocations) the calling thread has made since it started.
pub fn thread_allocations() -> u64 {
    THREAD_ALLOCS.try_with(Cell::get).unwrap_or(0)
}

/// Calls `hook` with the size of every later allocation of the calling thread (None: stop).
/// For tests that must find where an allocation comes from (the hook may capture a
/// backtrace). The hook is unset while it runs, so its own allocations do not recurse.
pub fn set_thread_hook(hook: Option<fn(usize)>) {
    let _ = THREAD_HOOK.try_with(|h| h.set(hook));
}

/// Counts one allocation of `size` bytes made by this thread.
fn note_thread(size: usize) {
    let _ = THREAD_ALLOCS.try_with(|c| c.set(c.get() + 1));
    if let Ok(Some(hook)) = THREAD_HOOK.try_with(|h| h.take()) {
        hook(size);
        set_thread_hook(Some(hook));
    }
}

/// The system allocator, counting.
#[derive(Debug)]
pub struct CountingAlloc;

// SAFETY: every method forwards to `System` with the same arguments; the counters are only
// bookkeeping and never affect the returned memory.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size());
            note_thread(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size());
            note_thread(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) };
        ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
            add(new_size);
            note_thread(new_size);
        }
        p
    }
}

fn add(n: usize) {
    let now = ALLOCATED.fetch_add(n, Ordering::Relaxed) + n;
    if now > PEAK.load(Ordering::Relaxed) {
        PEAK.store(now, Ordering::Relaxed);
    }
}

/// Live heap bytes.
pub fn allocated() -> usize {
    ALLOCATED.load(Ordering::Relaxed)
}

/// The largest value `allocated` has had.
pub fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// Resident set size of the process, from /proc (0 where unavailable).
pub fn rss() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<usize>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

/// (user, system) CPU seconds used by the process.
pub fn cpu_times() -> (f64, f64) {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime), t(ru.ru_stime))
}
