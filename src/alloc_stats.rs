//! A global allocator wrapper that counts live heap bytes, so INFO's `used_memory` (and later
//! the memory cap) report what sluice really holds rather than an estimate.
//!
//! It also counts, per thread, how many allocations (and reallocations) the thread made
//! ([`thread_allocations`]): an event loop serves a connection from read to write on one
//! thread, so the difference of two readings around a request is what that request
//! allocated. The allocation test (`tests/it/alloc.rs`) holds the hot paths to zero with
//! it. The count is a thread-local add, cheap enough to keep in release builds.
//! [`set_thread_hook`] lets that test see where an allocation happens.
//!
//! The live-byte count is kept per thread too and added to the shared atomic only when a
//! thread's share passes [`FOLD_BYTES`] either way (or the thread reads the count, or ends):
//! an allocation makes one thread-local access and, in steady state, no atomic one. A free
//! into the thread's lists is not checked against the bound (its path stays small enough
//! to inline into Lua's allocator); the lists hold at most [`KEEP_BYTES`]. So [`allocated`]
//! can count up to `FOLD_BYTES` less than the live heap per other thread (a few threads: the
//! event loops, the reaper, the main thread), which is what `maxmemory` can be passed by
//! beyond a command's worth, and up to `FOLD_BYTES + KEEP_BYTES` more (frees not yet
//! counted: the cap is then only reached early).
//!
//! Small blocks (up to [`SMALL_MAX`] bytes) freed by a thread are kept in that thread's
//! [`ThreadCache`], one free list per size class of glibc's chunks, and handed out again to its next
//! allocations of the same class without going through glibc. A script run makes and its
//! collector frees a handful of such blocks (KEYS/ARGV tables, their arrays, the key's
//! string), and the collector frees them in sweeps of dozens, past glibc's per-thread cache
//! of 7 a size (`_int_free`, `_int_malloc`). A cached block counts as freed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
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

/// Bytes a thread's allocations may move [`ALLOCATED`] by before it adds them there: the
/// most by which `allocated()` can fall short of the live heap, per other thread (the calling
/// thread's own bytes are added before it reads). A request allocates and frees about as
/// much, so in steady state a thread adds to the shared counter rarely instead of twice per
/// allocation.
pub const FOLD_BYTES: isize = 16 * 1024;

/// Everything the allocator keeps per thread, in one thread-local so an allocation reaches
/// it with one lookup.
struct ThreadState {
    cache: ThreadCache,
    /// Bytes allocated minus bytes freed by this thread not yet added to [`ALLOCATED`]
    /// (at most [`FOLD_BYTES`] above zero, `FOLD_BYTES + KEEP_BYTES` below).
    unfolded: isize,
    /// Allocations and reallocations made by this thread.
    allocs: u64,
    /// Called with the size of each allocation this thread makes (see `set_thread_hook`).
    hook: Option<fn(usize)>,
}

impl ThreadState {
    /// Counts `bytes` allocated (negative: freed) by this thread, adding them to the shared
    /// count once they pass [`FOLD_BYTES`].
    fn note_bytes(&mut self, bytes: isize) {
        self.unfolded += bytes;
        if self.unfolded.unsigned_abs() > FOLD_BYTES.unsigned_abs() {
            fold(std::mem::take(&mut self.unfolded));
        }
    }

    /// Counts one allocation of `size` bytes (in place of `freed` bytes: a reallocation);
    /// the hook to call, if one is set (taken, so its own allocations do not recurse: the
    /// caller calls it and puts it back).
    fn note_alloc(&mut self, size: usize, freed: usize) -> Option<fn(usize)> {
        self.note_bytes(size as isize - freed as isize);
        self.allocs += 1;
        if self.hook.is_some() {
            self.hook.take()
        } else {
            None
        }
    }
}

impl Drop for ThreadState {
    /// A thread's end adds its last bytes to the shared count (the cache frees its blocks).
    fn drop(&mut self) {
        fold(std::mem::take(&mut self.unfolded));
    }
}

thread_local! {
    static THREAD: UnsafeCell<ThreadState> = const {
        UnsafeCell::new(ThreadState {
            cache: ThreadCache::new(),
            unfolded: 0,
            allocs: 0,
            hook: None,
        })
    };
}

/// Runs `f` on the calling thread's state (None once the thread is being torn down).
#[inline(always)]
fn with_thread<R>(f: impl FnOnce(&mut ThreadState) -> R) -> Option<R> {
    // SAFETY: the state is only touched here, by its own thread, and no `f` allocates (the
    // hook is called outside), so no second borrow can happen while this one lives.
    THREAD.try_with(|t| f(unsafe { &mut *t.get() })).ok()
}

/// Adds `bytes` (negative: subtracts) to the shared count and raises the peak.
#[cold]
#[inline(never)]
fn fold(bytes: isize) {
    // Two's-complement wrapping: adding a negative delta as usize subtracts it.
    let now = ALLOCATED
        .fetch_add(bytes as usize, Ordering::Relaxed)
        .wrapping_add(bytes as usize);
    // Another thread's frees of blocks this one allocated can be folded first, so the
    // count may dip below zero for a moment: it reads as 0 then, and sets no peak.
    if (now as isize) > PEAK.load(Ordering::Relaxed) as isize {
        PEAK.store(now, Ordering::Relaxed);
    }
}

/// Allocations (and reallocations) the calling thread has made since it started.
pub fn thread_allocations() -> u64 {
    with_thread(|t| t.allocs).unwrap_or(0)
}

/// Calls `hook` with the size of every later allocation of the calling thread (None: stop).
/// For tests that must find where an allocation comes from (the hook may capture a
/// backtrace). The hook is unset while it runs, so its own allocations do not recurse.
pub fn set_thread_hook(hook: Option<fn(usize)>) {
    let _ = with_thread(|t| t.hook = hook);
}

/// The system allocator, counting.
#[derive(Debug)]
pub struct CountingAlloc;

/// Allocates `layout` (zeroed if `zeroed`), counted in one access to the thread's state.
///
/// # Safety
/// As `GlobalAlloc::alloc`.
#[inline(always)]
unsafe fn allocate(layout: Layout, zeroed: bool) -> *mut u8 {
    // The common case, a kept block and no hook, returns at once with no call in its path
    // (so no registers to save); the rest is `allocate_slow`'s.
    if let Some(class) = class_of(layout) {
        let kept = with_thread(|t| {
            if t.hook.is_some() {
                return None;
            }
            let block = t.cache.pop(class)?;
            t.note_bytes(layout.size() as isize);
            t.allocs += 1;
            Some(block)
        });
        if let Some(Some(block)) = kept {
            if zeroed {
                // SAFETY: the block has at least `layout.size()` bytes.
                unsafe { block.write_bytes(0, layout.size()) };
            }
            return block;
        }
    }
    // SAFETY: forwarded.
    unsafe { allocate_slow(layout, zeroed) }
}

/// Allocates `layout` (zeroed if `zeroed`): a kept block of its class, or one from the
/// system, counted in one access to the thread's state, and the hook called.
///
/// # Safety
/// As `GlobalAlloc::alloc`.
#[inline(never)]
unsafe fn allocate_slow(layout: Layout, zeroed: bool) -> *mut u8 {
    let size = layout.size();
    let class = class_of(layout);
    // Counted before the block is had: a failed allocation is rare and undone below.
    let (kept, hook) = with_thread(|t| {
        let kept = class.and_then(|c| t.cache.pop(c));
        (kept, t.note_alloc(size, 0))
    })
    .unwrap_or_else(|| {
        fold(size as isize);
        (None, None)
    });
    let p = match (kept, class) {
        (Some(block), _) => block,
        // SAFETY: a valid non-zero layout.
        (None, Some(c)) => unsafe { System.alloc(class_layout(c)) },
        // SAFETY: forwarded unchanged.
        (None, None) if zeroed => unsafe { System.alloc_zeroed(layout) },
        // SAFETY: forwarded unchanged.
        (None, None) => unsafe { System.alloc(layout) },
    };
    if p.is_null() {
        undo_alloc(size, hook);
        return p;
    }
    if zeroed && class.is_some() {
        // SAFETY: the block has at least `size` bytes.
        unsafe { p.write_bytes(0, size) };
    }
    if let Some(hook) = hook {
        call_hook(hook, size);
    }
    p
}

/// Calls the thread's allocation hook (taken out while it runs) and puts it back.
#[cold]
#[inline(never)]
fn call_hook(hook: fn(usize), size: usize) {
    hook(size);
    set_thread_hook(Some(hook));
}

/// Takes back the count of a failed allocation of `size` bytes (and puts its hook back).
#[cold]
#[inline(never)]
fn undo_alloc(size: usize, hook: Option<fn(usize)>) {
    let undone = with_thread(|t| {
        t.note_bytes(-(size as isize));
        t.allocs -= 1;
        if hook.is_some() {
            t.hook = hook;
        }
    });
    if undone.is_none() {
        fold(-(size as isize));
    }
}

/// Gives a block not kept back to the system, and counts it.
///
/// # Safety
/// As `GlobalAlloc::dealloc`.
#[inline(never)]
unsafe fn free_to_system(ptr: *mut u8, layout: Layout) {
    match class_of(layout) {
        // SAFETY: the block was allocated with its class's layout.
        Some(c) => unsafe { System.dealloc(ptr, class_layout(c)) },
        // SAFETY: forwarded unchanged.
        None => unsafe { System.dealloc(ptr, layout) },
    }
    note_bytes(-(layout.size() as isize));
}

/// Counts `bytes` allocated (negative: freed) by the calling thread.
fn note_bytes(bytes: isize) {
    if with_thread(|t| t.note_bytes(bytes)).is_none() {
        fold(bytes);
    }
}

// SAFETY: small blocks are allocated from `System` with their class's full size and
// alignment 16 (which covers every layout of the class), and kept in the freeing thread's
// lists until handed out again for a layout of the same class; everything else forwards to
// `System` with the same arguments. The counters are only bookkeeping.
unsafe impl GlobalAlloc for CountingAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded.
        unsafe { allocate(layout, false) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded.
        unsafe { allocate(layout, true) }
    }

    #[inline(always)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // The common case, a small block kept, is the whole of what is inlined into the
        // callers (Lua frees through here several times a script): no fold check, which
        // `free_to_system` makes (the kept bytes are bounded by `KEEP_BYTES` meanwhile).
        let size = layout.size();
        if let Some(class) = class_of(layout) {
            let kept = with_thread(|t| {
                let kept = t.cache.push(class, ptr);
                if kept {
                    t.unfolded -= size as isize;
                }
                kept
            });
            if kept == Some(true) {
                return;
            }
        }
        // SAFETY: forwarded.
        unsafe { free_to_system(ptr, layout) }
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
            match with_thread(|t| t.note_alloc(new_size, layout.size())) {
                Some(None) => {}
                Some(Some(hook)) => call_hook(hook, new_size),
                None => fold(new_size as isize - layout.size() as isize),
            }
        }
        p
    }
}

/// Live heap bytes, short by at most [`FOLD_BYTES`] for each thread other than the caller
/// (whose own bytes are added first; see the module's comment): INFO's `used_memory`, the
/// `maxmemory` checks (which can so let the heap pass the cap by that much more) and the
/// MEMORY commands read it.
pub fn allocated() -> usize {
    let _ = with_thread(|t| fold(std::mem::take(&mut t.unfolded)));
    (ALLOCATED.load(Ordering::Relaxed) as isize).max(0) as usize
}

/// The largest value `allocated` has had (to within the same bound).
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
            let kept = with_thread(|t| t.cache.kept).expect("the thread's cache");
            assert!(
                kept <= KEEP_BYTES && kept > KEEP_BYTES - SMALL_MAX,
                "{kept}"
            );
        });
    }

    #[test]
    fn a_threads_bytes_reach_the_shared_count_once_they_pass_the_bound() {
        let mut t = ThreadState {
            cache: ThreadCache::new(),
            unfolded: 0,
            allocs: 0,
            hook: None,
        };
        t.note_bytes(FOLD_BYTES);
        assert_eq!(t.unfolded, FOLD_BYTES);
        t.note_bytes(1);
        assert_eq!(t.unfolded, 0, "folded");
        t.note_bytes(-FOLD_BYTES);
        assert_eq!(t.unfolded, -FOLD_BYTES);
        t.note_bytes(-1);
        assert_eq!(t.unfolded, 0, "folded");
        // A reallocation counts the difference, and counts as one allocation.
        assert!(t.note_alloc(100, 40).is_none());
        assert_eq!((t.unfolded, t.allocs), (60, 1));
        t.note_bytes(-60);
    }

    #[test]
    fn the_callers_own_bytes_are_counted_before_it_reads() {
        on_new_thread(|| {
            let _ = allocated();
            let block = vec![1u8; 1000];
            let unfolded = with_thread(|t| t.unfolded).expect("the thread's state");
            assert!(unfolded >= 1000, "{unfolded}");
            let _ = allocated();
            assert_eq!(with_thread(|t| t.unfolded), Some(0));
            drop(block);
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
