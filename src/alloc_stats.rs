//! A global allocator wrapper that counts live heap bytes, so INFO's `used_memory` (and later
//! the memory cap) report what sluice really holds rather than an estimate.
//!
//! It also counts, per thread, how many allocations (and reallocations) the thread made
//! ([`thread_allocations`]): an event loop serves a connection from read to write on one
//! thread, so the difference of two readings around a request is what that request
//! allocated. The allocation test (`tests/it/alloc.rs`) holds the hot paths to zero with
//! it. The count is a thread-local `Cell` add, cheap enough to keep in release builds.
//! [`set_thread_hook`] lets that test see where an allocation happens.
//!
//! Small blocks (up to [`SMALL_MAX`] bytes) freed by a thread are kept in that thread's
//! `ThreadCache`, one free list per size class of glibc's chunks, and handed out again to its next
//! allocations of the same class without going through glibc. A script run makes and its
//! collector frees a handful of such blocks (KEYS/ARGV tables, their arrays, the key's
//! string), and the collector frees them in sweeps of dozens, past glibc's per-thread cache
//! of 7 a size (`_int_free`, `_int_malloc`). The live-byte count stays exact: a cached block
//! counts as freed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, UnsafeCell};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// Size classes: 1-24, 25-40, …, 249-264 bytes, the sizes glibc's chunks of 32, 48, …, 272
/// bytes hold (a chunk has an 8-byte header and a 16-byte granule). A block is taken from
/// glibc at its class's largest size, which costs the same chunk as any size of the class:
/// classes of 16-byte multiples would have put a 17-24-byte block in a 48-byte chunk
/// instead of a 32-byte one, and a key's small blocks would have grown.
const CLASSES: usize = 16;
/// The largest size, in bytes, of a block kept in a thread's cache.
pub const SMALL_MAX: usize = 24 + 16 * (CLASSES - 1);
/// Bytes a thread keeps in its lists at most. Lua's collector frees a whole cycle's garbage
/// in sweeps (about as much as the VM's live heap, a few hundred KiB), and the allocations
/// that follow should find those blocks: a cap of 64 blocks a class caught only one free in
/// six.
const KEEP_BYTES: usize = 512 * 1024;

/// The class of a small layout (None: too large, or aligned beyond what `malloc` gives).
fn class_of(layout: Layout) -> Option<usize> {
    (layout.size() <= SMALL_MAX && layout.align() <= 16)
        .then(|| layout.size().saturating_sub(9) / 16)
}

/// The layout every block of `class` is allocated with from the system: the class's largest
/// size, so any block of the class can serve any size in it.
fn class_layout(class: usize) -> Layout {
    // SAFETY: 24 + 16 * class <= SMALL_MAX is non-zero and far below isize::MAX, and 16 is
    // a power of two.
    unsafe { Layout::from_size_align_unchecked(24 + 16 * class, 16) }
}

/// One thread's free lists of small blocks: each free block's first word points to the next.
pub(crate) struct ThreadCache {
    heads: [*mut u8; CLASSES],
    /// Bytes in the lists (each block counted at its class's full size).
    kept: usize,
}

impl ThreadCache {
    const fn new() -> ThreadCache {
        ThreadCache {
            heads: [ptr::null_mut(); CLASSES],
            kept: 0,
        }
    }

    /// A kept block of `class`, if there is one.
    fn pop(&mut self, class: usize) -> Option<*mut u8> {
        let head = self.heads[class];
        if head.is_null() {
            return None;
        }
        // SAFETY: a block in the list is at least 16 bytes, 16-aligned, and holds the next
        // block's address in its first word (written by `push`).
        self.heads[class] = unsafe { head.cast::<*mut u8>().read() };
        self.kept -= class_layout(class).size();
        Some(head)
    }

    /// Keeps `block` of `class` unless the lists hold [`KEEP_BYTES`] already (then false:
    /// the caller frees it).
    fn push(&mut self, class: usize, block: *mut u8) -> bool {
        let size = class_layout(class).size();
        if self.kept + size > KEEP_BYTES {
            return false;
        }
        // SAFETY: the block is free, at least 16 bytes and 16-aligned (it was allocated with
        // `class_layout(class)`).
        unsafe { block.cast::<*mut u8>().write(self.heads[class]) };
        self.heads[class] = block;
        self.kept += size;
        true
    }
}

impl Drop for ThreadCache {
    /// A thread's end gives its kept blocks back to the system.
    fn drop(&mut self) {
        for class in 0..CLASSES {
            while let Some(block) = self.pop(class) {
                // SAFETY: every kept block was allocated with `class_layout(class)`.
                unsafe { System.dealloc(block, class_layout(class)) };
            }
        }
    }
}

/// Runs `f` on the calling thread's cache (None once the thread is being torn down).
fn with_cache<R>(f: impl FnOnce(&mut ThreadCache) -> R) -> Option<R> {
    // SAFETY: the cache is only touched here, by its own thread, and `f` (pop or push) does
    // not allocate, so no second borrow can happen while this one lives.
    CACHE.try_with(|c| f(unsafe { &mut *c.get() })).ok()
}

thread_local! {
    /// Small blocks this thread freed, for its next allocations.
    static CACHE: UnsafeCell<ThreadCache> = const { UnsafeCell::new(ThreadCache::new()) };
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

/// A small block of `layout`'s class: a kept one, or a new one of the class's full size.
///
/// # Safety
/// As `GlobalAlloc::alloc`.
unsafe fn alloc_small(class: usize) -> *mut u8 {
    if let Some(Some(block)) = with_cache(|c| c.pop(class)) {
        return block;
    }
    // SAFETY: a valid non-zero layout.
    unsafe { System.alloc(class_layout(class)) }
}

// SAFETY: small blocks are allocated from `System` with their class's full size and
// alignment 16 (which covers every layout of the class), and kept in the freeing thread's
// lists until handed out again for a layout of the same class; everything else forwards to
// `System` with the same arguments. The counters are only bookkeeping.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = match class_of(layout) {
            // SAFETY: forwarded.
            Some(class) => unsafe { alloc_small(class) },
            // SAFETY: forwarded unchanged.
            None => unsafe { System.alloc(layout) },
        };
        if !p.is_null() {
            add(layout.size());
            note_thread(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = match class_of(layout) {
            // SAFETY: forwarded; the block has at least `layout.size()` bytes.
            Some(class) => unsafe {
                let p = alloc_small(class);
                if !p.is_null() {
                    p.write_bytes(0, layout.size());
                }
                p
            },
            // SAFETY: forwarded unchanged.
            None => unsafe { System.alloc_zeroed(layout) },
        };
        if !p.is_null() {
            add(layout.size());
            note_thread(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match class_of(layout) {
            Some(class) => {
                if with_cache(|c| c.push(class, ptr)) != Some(true) {
                    // SAFETY: the block was allocated with its class's layout.
                    unsafe { System.dealloc(ptr, class_layout(class)) };
                }
            }
            // SAFETY: forwarded unchanged.
            None => unsafe { System.dealloc(ptr, layout) },
        }
        ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract: `new_size` with `layout.align()` is a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        let p = match (class_of(layout), class_of(new_layout)) {
            // The block already holds its class's full size.
            (Some(old), Some(new)) if old == new => ptr,
            // Across a class or into the small sizes: a new block, the bytes copied, the old
            // block freed, so every small block keeps its class's full size.
            (Some(_), _) | (_, Some(_)) => {
                // SAFETY: forwarded to this allocator's own methods with valid layouts.
                unsafe {
                    let p = self.alloc(new_layout);
                    if !p.is_null() {
                        ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                        // `alloc` and `dealloc` did the bookkeeping.
                    }
                    return p;
                }
            }
            // SAFETY: forwarded unchanged.
            (None, None) => unsafe { System.realloc(ptr, layout, new_size) },
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a thread of its own, so no other test's allocations share its cache.
    fn on_new_thread(f: impl FnOnce() + Send + 'static) {
        std::thread::spawn(f).join().expect("the test's thread");
    }

    #[test]
    fn a_freed_small_block_serves_the_threads_next_allocation_of_its_class() {
        on_new_thread(|| {
            let a = Box::new([7u8; 20]);
            let at = &*a as *const [u8; 20] as usize;
            drop(a);
            // 1-24 bytes: the same class, the same block.
            let b = Box::new([1u8; 24]);
            assert_eq!(&*b as *const [u8; 24] as usize, at);
            assert_eq!(*b, [1u8; 24]);
        });
    }

    #[test]
    fn zeroed_and_reallocated_small_blocks_keep_their_bytes() {
        on_new_thread(|| {
            // Leave a dirty block of the 49-64 class in the cache.
            drop(vec![0xAAu8; 60]);
            let layout = Layout::from_size_align(60, 1).expect("a layout");
            // SAFETY: a valid layout; the block is read within its size and freed once.
            unsafe {
                let z = CountingAlloc.alloc_zeroed(layout);
                assert!(!z.is_null());
                assert!(std::slice::from_raw_parts(z, 60).iter().all(|&x| x == 0));
                CountingAlloc.dealloc(z, layout);
            }
            let mut v: Vec<u8> = Vec::with_capacity(10);
            v.extend(0..10u8);
            for n in 10..600u16 {
                v.push((n % 251) as u8); // grows through every class and past them
            }
            assert!(v.iter().enumerate().all(|(i, &x)| x == ((i % 251) as u8)));
            v.truncate(5);
            v.shrink_to_fit(); // from a large block back into a small class
            assert_eq!(v, [0, 1, 2, 3, 4]);
        });
    }

    #[test]
    fn a_thread_keeps_at_most_its_share_of_bytes() {
        on_new_thread(|| {
            let n = KEEP_BYTES / 256 + 100;
            let blocks: Vec<Box<[u8; 250]>> = (0..n).map(|_| Box::new([0u8; 250])).collect();
            drop(blocks);
            let kept = with_cache(|c| c.kept).expect("the thread's cache");
            assert!(
                kept <= KEEP_BYTES && kept > KEEP_BYTES - SMALL_MAX,
                "{kept}"
            );
        });
    }

    #[test]
    fn a_class_takes_the_chunk_glibc_gives_each_of_its_sizes() {
        for size in 1..=SMALL_MAX {
            let class = class_of(Layout::from_size_align(size, 1).unwrap()).unwrap();
            // SAFETY: a malloc'ed block, measured and freed at once.
            let usable = unsafe {
                let p = libc::malloc(size);
                assert!(!p.is_null());
                let usable = libc::malloc_usable_size(p);
                libc::free(p);
                usable
            };
            assert_eq!(class_layout(class).size(), usable, "size {size}");
        }
    }

    #[test]
    fn large_and_over_aligned_layouts_are_not_small() {
        assert_eq!(class_of(Layout::from_size_align(1, 1).unwrap()), Some(0));
        assert_eq!(class_of(Layout::from_size_align(24, 8).unwrap()), Some(0));
        assert_eq!(class_of(Layout::from_size_align(25, 8).unwrap()), Some(1));
        assert_eq!(
            class_of(Layout::from_size_align(264, 16).unwrap()),
            Some(15)
        );
        assert_eq!(class_of(Layout::from_size_align(265, 8).unwrap()), None);
        assert_eq!(class_of(Layout::from_size_align(64, 32).unwrap()), None);
    }
}
