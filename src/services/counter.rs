//! Counters bumped on every request (INFO's command and byte totals, each command's calls,
//! time and failures) without an atomic read-modify-write shared by every thread: each
//! event loop thread owns a slot of every counter, which it alone writes, with a plain
//! load and store; other threads add to a common slot atomically; a reader sums the slots.
//!
//! A slot is owned by one thread for the life of the process (slots are handed out once,
//! process-wide, so two servers in one test process never share one), so the load and
//! store cannot lose a concurrent update. Resetting (CONFIG RESETSTAT) does not write the
//! slots: it records their sum as the new zero, so an owner's next store cannot undo it.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Slots threads can own; threads past these share the common slot.
const OWNED: usize = 8;

/// The next slot to hand out (slot 0 is the common one).
static NEXT: AtomicUsize = AtomicUsize::new(1);

thread_local! {
    /// This thread's slot: 0 (the common slot) unless it claimed one.
    static SLOT: Cell<usize> = const { Cell::new(0) };
}

/// Gives the calling thread a slot of its own, for good (an event loop calls this once,
/// when it starts). A thread that already has one keeps it.
pub(crate) fn claim_slot() {
    if SLOT.get() != 0 {
        return;
    }
    let slot = NEXT
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n <= OWNED).then_some(n + 1)
        })
        .unwrap_or(0);
    SLOT.set(slot);
}

/// A counter summed over its slots (see the module docs).
#[derive(Debug, Default)]
pub struct Counter {
    slots: [AtomicU64; OWNED + 1],
    /// The slots' sum at the last reset.
    zero: AtomicU64,
}

impl Counter {
    /// Adds `n`.
    #[inline]
    pub fn add(&self, n: u64) {
        let slot = SLOT.get();
        let Some(c) = self.slots.get(slot) else {
            return;
        };
        if slot == 0 {
            c.fetch_add(n, Ordering::Relaxed);
        } else {
            // This thread alone writes this slot.
            c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        }
    }

    fn sum(&self) -> u64 {
        self.slots
            .iter()
            .fold(0u64, |s, c| s.wrapping_add(c.load(Ordering::Relaxed)))
    }

    /// The total since the last reset.
    pub fn get(&self) -> u64 {
        // A reader on another thread may see a slot older than the reset did: never below 0.
        self.sum().saturating_sub(self.zero.load(Ordering::Relaxed))
    }

    /// Starts counting from 0 again.
    pub fn reset(&self) {
        self.zero.store(self.sum(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_and_common_slots_add_up_and_reset() {
        let c = std::sync::Arc::new(Counter::default());
        c.add(2);
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let c = c.clone();
                std::thread::spawn(move || {
                    if i % 2 == 0 {
                        claim_slot();
                    }
                    for _ in 0..1000 {
                        c.add(1);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(c.get(), 4002);
        c.reset();
        assert_eq!(c.get(), 0);
        c.add(5);
        assert_eq!(c.get(), 5);
    }

    #[test]
    fn a_claimed_slot_is_kept() {
        std::thread::spawn(|| {
            claim_slot();
            let first = SLOT.get();
            claim_slot();
            assert_eq!(SLOT.get(), first);
        })
        .join()
        .unwrap();
    }
}
