//! The expiry index of one keyspace shard: a hierarchical timer wheel.
//!
//! Each shard owns one [`TimerWheel`] holding the deadline of every key that has a TTL. The
//! key's entry keeps the [`TimerId`] it was given, so EXPIRE/PERSIST/DEL touch the wheel in
//! O(1). The shard's reaper sleeps until [`TimerWheel::next_deadline`], then, under the shard
//! lock, calls [`TimerWheel::poll_expired`] with a bounded batch size, deletes the keys it
//! gets back, releases the lock and calls again while it returns `true`.
//!
//! # Why a wheel
//!
//! * **O(1) refresh.** A rate limiter re-arms the TTL of the same key on every request. Insert,
//!   [`reschedule`](TimerWheel::reschedule) and [`remove`](TimerWheel::remove) only unlink a
//!   node from one intrusive doubly linked list and push it onto another; no heap sift, no
//!   tree rebalancing.
//! * **Cost follows expiring keys, not keys.** Each level keeps a 64-bit occupancy bitmap, so
//!   finding the next non-empty slot is a `trailing_zeros` per level, whatever the time gap:
//!   moving the clock forward by a year costs the same as moving it by a millisecond when
//!   nothing is due. A timer is touched only when it is inserted, changed, removed, cascaded
//!   to a finer level (at most once per level it passes) or popped.
//! * **Bounded batches.** `poll_expired(now, max, ..)` pops at most `max` timers and performs
//!   at most `max` cascade steps (moving one timer, or detaching one slot) per call, so even a
//!   million keys expiring in the same millisecond are reaped in short lock holds. A slot that
//!   is being cascaded is drained incrementally across calls.
//!
//! # How deadlines map to slots
//!
//! Time is in 1 ms ticks (u64 milliseconds since the Unix epoch, always supplied by the
//! caller; the wheel never reads a clock). The wheel has a current time `W` — the latest
//! `now_ms` a poll reached — and 6 levels of 64 slots; a slot of level `k` spans `64^k` ms, so
//! the levels together span `64^6` ms = 2^36 ms (about 795 days). Read a deadline `d` as
//! base-64 digits: the level of `d` is the most significant digit in which `d` differs from
//! `W` and its slot is `d`'s digit at that level. Hence every timer at level `k` shares all
//! digits above `k` with `W` and lies in a slot strictly after `W`'s own, all timers at level
//! `k` are earlier than all timers at level `k + 1`, and the earliest slot of the lowest
//! non-empty level holds the earliest timers.
//!
//! * `d <= W`: the timer is already due and goes to the *due* list, popped by the next poll.
//! * `d` differs from `W` above bit 35 (beyond the top level's span): the timer goes to the
//!   *overflow* list, rescanned only when `W` reaches the 2^36 ms block of its earliest entry.
//!
//! When a poll advances `W` to the start of the next occupied slot, that slot's timers are
//! re-placed relative to the new `W`: each moves to a finer level (or is popped if its
//! deadline has come), which happens at most five times per timer. If no occupied slot starts
//! at or before `now_ms`, `W` jumps straight to `now_ms`.
//!
//! # Ids
//!
//! Nodes live in a `Vec` with a free list; a [`TimerId`] is the node index plus a generation
//! that is bumped whenever the node is freed (popped, removed or cleared). A stale id — used
//! after its timer fired or was removed, or used twice — no longer matches and is ignored, so
//! misuse cannot panic or disturb another timer. (Generations are 32 bits; an id would only
//! be mistaken for a new timer after its node were reused 2^32 times.)

use std::fmt;
use std::num::NonZeroU32;

/// Bits of a deadline consumed by one level.
const SLOT_BITS: u32 = 6;
/// Slots per level.
const SLOTS: usize = 1 << SLOT_BITS;
/// Number of levels.
const LEVELS: usize = 6;
/// List index of the first overflow list (wheel slots are `0..WHEEL_SLOTS`).
const OVERFLOW: usize = LEVELS * SLOTS;
/// List index of the due list (the two overflow lists are `OVERFLOW` and `OVERFLOW + 1`).
const DUE: usize = OVERFLOW + 2;
/// Number of lists.
const LISTS: usize = DUE + 1;
/// Mask of the bits the levels span: deadlines differing from `W` only in these are in the wheel.
const SPAN_MASK: u64 = (1 << (SLOT_BITS * LEVELS as u32)) - 1;
/// "No node" link.
const NIL: u32 = u32::MAX;
/// `Node::list` of a node on the free list.
const FREE: u16 = u16::MAX;

/// Handle to a scheduled timer; stored in the key's entry so a TTL change is O(1).
///
/// Eight bytes (and `Option<TimerId>` is eight bytes too). An id stays valid until its timer
/// is popped by [`TimerWheel::poll_expired`], removed, or the wheel is cleared; after that
/// every operation treats it as stale and does nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimerId {
    index: u32,
    generation: NonZeroU32,
}

/// One timer, or a free node.
#[derive(Clone, Copy)]
struct Node<T> {
    deadline: u64,
    /// Previous node in the same list, or `NIL`.
    prev: u32,
    /// Next node in the same list (or on the free list), or `NIL`.
    next: u32,
    generation: NonZeroU32,
    /// The list holding the node, or `FREE`.
    list: u16,
    /// Kept (stale, never read) while the node is free; `T: Copy` so nothing needs dropping.
    payload: T,
}

/// A hierarchical timer wheel of 6 levels × 64 slots with 1 ms ticks; see the module docs.
///
/// `T` is the payload handed back when a timer fires (for example a key handle).
pub struct TimerWheel<T: Copy> {
    /// The wheel's current time `W`: never later than the last `now_ms` a poll was given.
    now: u64,
    nodes: Vec<Node<T>>,
    /// Head of the free list threaded through `Node::next`.
    free_head: u32,
    /// Live timers.
    len: usize,
    /// Head of every list: the wheel slots, the two overflow lists, the due list.
    heads: [u32; LISTS],
    /// Per list, a lower bound on its deadlines: the minimum of every deadline added since the
    /// list was last empty (removals may leave it too low, never too high). `u64::MAX` if empty.
    mins: [u64; LISTS],
    /// Per level, bit `s` set iff slot `s` is non-empty (the slot being drained excepted).
    occupied: [u64; LEVELS],
    /// Which overflow list (0 or 1) receives new far-future timers; the other is empty unless
    /// it is being drained.
    active_overflow: usize,
    /// The list being cascaded: detached from the wheel, its timers are re-placed (or popped)
    /// a bounded number per poll. `W` does not advance until it is empty.
    draining: Option<usize>,
    /// Generation given to newly created nodes; raised by `clear` so that no id handed out
    /// before the clear can match a node created after it.
    generation_base: NonZeroU32,
    /// `len` when `compact` last ran (`usize::MAX` before): it runs again only once `len` has
    /// halved or doubled, which keeps its O(slots) scans rare.
    compacted_at_len: usize,
}

impl<T: Copy> fmt::Debug for TimerWheel<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerWheel")
            .field("now", &self.now)
            .field("len", &self.len)
            .field("capacity", &self.nodes.capacity())
            .field("next_deadline", &self.next_deadline())
            .finish()
    }
}

/// The generation after `g`, skipping zero on wrap-around.
fn bump(g: NonZeroU32) -> NonZeroU32 {
    g.checked_add(1).unwrap_or(NonZeroU32::MIN)
}

impl<T: Copy> TimerWheel<T> {
    /// Creates an empty wheel whose current time is `now_ms`.
    pub fn new(now_ms: u64) -> Self {
        TimerWheel {
            now: now_ms,
            nodes: Vec::new(),
            free_head: NIL,
            len: 0,
            heads: [NIL; LISTS],
            mins: [u64::MAX; LISTS],
            occupied: [0; LEVELS],
            active_overflow: 0,
            draining: None,
            generation_base: NonZeroU32::MIN,
            compacted_at_len: usize::MAX,
        }
    }

    /// Number of scheduled timers.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no timer is scheduled.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Schedules `payload` to be due at `deadline_ms`. O(1).
    ///
    /// A deadline at or before the wheel's current time is due on the next poll. The wheel
    /// holds at most `u32::MAX - 1` timers (far beyond any memory budget); past that the
    /// timer is not stored and the returned id is stale.
    pub fn insert(&mut self, deadline_ms: u64, payload: T) -> TimerId {
        let node = Node {
            deadline: deadline_ms,
            prev: NIL,
            next: NIL,
            generation: self.generation_base,
            list: FREE,
            payload,
        };
        let index = if self.free_head != NIL {
            let index = self.free_head;
            let slot = &mut self.nodes[index as usize];
            self.free_head = slot.next;
            *slot = Node {
                generation: slot.generation,
                ..node
            };
            index
        } else {
            match u32::try_from(self.nodes.len()) {
                Ok(index) if index != NIL => {
                    self.nodes.push(node);
                    index
                }
                _ => {
                    return TimerId {
                        index: NIL,
                        generation: NonZeroU32::MIN,
                    };
                }
            }
        };
        self.len += 1;
        self.place(index);
        TimerId {
            index,
            generation: self.nodes[index as usize].generation,
        }
    }

    /// Moves an existing timer to a new deadline (O(1)); returns false if `id` is stale.
    ///
    /// The new deadline may be earlier or later than the old one; at or before the wheel's
    /// current time it is due on the next poll.
    pub fn reschedule(&mut self, id: TimerId, deadline_ms: u64) -> bool {
        let Some(index) = self.lookup(id) else {
            return false;
        };
        self.unlink(index);
        self.nodes[index as usize].deadline = deadline_ms;
        self.place(index);
        true
    }

    /// Cancels a timer; returns its payload, or None if stale. O(1).
    pub fn remove(&mut self, id: TimerId) -> Option<T> {
        let index = self.lookup(id)?;
        self.unlink(index);
        let payload = self.nodes[index as usize].payload;
        self.release(index);
        Some(payload)
    }

    /// The earliest deadline that may be due: a **lower bound**, never later than the true
    /// earliest deadline, and `None` iff the wheel is empty. O(levels).
    ///
    /// It is exact unless a timer that was the earliest of its slot (or of the due or overflow
    /// list) has been removed or rescheduled since that slot last filled up; then it may be
    /// earlier than the true earliest deadline, which only costs the reaper a spurious wake-up:
    /// the poll at that time cascades the slot and the next call is exact again. When timers
    /// are already due it returns a time at or before the wheel's current time.
    ///
    /// After [`poll_expired`](Self::poll_expired)`(now_ms, ..)` has returned `false`, the
    /// result is `None` or later than `now_ms`, so a reaper never spins.
    pub fn next_deadline(&self) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        if self.heads[DUE] != NIL {
            return Some(self.mins[DUE]);
        }
        let mut best: Option<u64> = None;
        if let Some(list) = self.draining
            && self.heads[list] != NIL
        {
            // Everything still waiting in the drained list is at or after `W`.
            best = Some(self.mins[list].max(self.now));
        }
        let wheel = if let Some((level, slot)) = self.first_occupied() {
            let list = level * SLOTS + slot as usize;
            Some(self.slot_start(level, slot).max(self.mins[list]))
        } else {
            let list = OVERFLOW + self.active_overflow;
            if self.heads[list] != NIL {
                self.next_block().map(|block| block.max(self.mins[list]))
            } else {
                None
            }
        };
        match (best, wheel) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b).or(Some(self.now)),
        }
    }

    /// Advances the wheel to `now_ms` and pushes up to `max` due timers (deadline <= now_ms)
    /// into `out` as (id, payload), removing them from the wheel. Returns true if more due
    /// timers remain (the caller will call again after releasing its lock).
    ///
    /// Work per call is bounded: at most `max` timers are popped and at most `max` cascade
    /// steps are taken (moving one timer to a finer level, or detaching one slot), plus an
    /// O(levels) bitmap scan per slot detached. A cascade cut short resumes on the next call.
    /// Empty slots are skipped through the occupancy bitmaps, so a `now_ms` far ahead (a test
    /// clock moved by a year, a system resumed from suspend) costs nothing extra.
    ///
    /// `true` means "call again": due timers (or cascading that may uncover some) remain; it
    /// may occasionally be returned when the next call then finds nothing. `false` guarantees
    /// that no timer with a deadline at or before `now_ms` is left. With `max == 0` nothing is
    /// done. A `now_ms` earlier than an earlier poll's is a no-op returning `false`.
    pub fn poll_expired(&mut self, now_ms: u64, max: usize, out: &mut Vec<(TimerId, T)>) -> bool {
        self.poll_counted(now_ms, max, out).0
    }

    /// Remove everything (FLUSHALL), releasing the node storage. Every id handed out before
    /// becomes stale. Keeps the wheel's current time.
    pub fn clear(&mut self) {
        let mut base = self.generation_base;
        for node in &self.nodes {
            base = base.max(node.generation);
        }
        *self = TimerWheel {
            generation_base: bump(base),
            ..TimerWheel::new(self.now)
        };
    }

    /// Gives node storage back after most timers went away (a mass expiry): when at most an
    /// eighth of the node slots hold a timer, drops the free slots after the last live one
    /// and rebuilds the free list. O(slots), so it only runs again once the live count has
    /// halved or doubled since it last ran; the reaper calls it after its batches.
    ///
    /// Ids stay valid: live nodes keep their index, and nodes created in the dropped slots
    /// later get a generation above any those slots had, so a stale id never matches them.
    pub fn compact(&mut self) {
        let slots = self.nodes.len();
        let last = self.compacted_at_len;
        let changed = last == usize::MAX || self.len * 2 <= last || self.len >= last * 2;
        if slots < 1024 || self.len * 8 > slots || !changed {
            return;
        }
        self.compacted_at_len = self.len.max(1);
        let keep = self
            .nodes
            .iter()
            .rposition(|n| n.list != FREE)
            .map_or(0, |i| i + 1);
        let mut base = self.generation_base;
        for node in &self.nodes[keep..] {
            base = base.max(node.generation);
        }
        if keep < slots {
            self.generation_base = bump(base);
        }
        self.nodes.truncate(keep);
        self.nodes.shrink_to(keep + keep / 8);
        self.free_head = NIL;
        for i in (0..keep).rev() {
            if self.nodes[i].list == FREE {
                self.nodes[i].next = self.free_head;
                self.free_head = i as u32;
            }
        }
    }

    /// Visits up to `want` scheduled timers as (id, deadline, payload), for eviction's
    /// sampling of keys with a TTL. Each sample starts at its own position in the node storage
    /// (derived from `seed`; neighbouring nodes were often created together, so one run of
    /// them would be a poor sample) and walks forward to the next live node, looking at no
    /// more than `max_steps` nodes in all. The same timer may be visited twice.
    pub fn sample(
        &self,
        seed: u64,
        want: usize,
        max_steps: usize,
        mut visit: impl FnMut(TimerId, u64, T),
    ) {
        let n = self.nodes.len();
        if n == 0 || self.len == 0 || want == 0 {
            return;
        }
        let per_sample = (max_steps / want).clamp(1, n);
        let mut state = seed;
        for _ in 0..want {
            // splitmix64: cheap, well-mixed positions from one seed.
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            let mut i = ((z ^ (z >> 31)) % n as u64) as usize;
            for _ in 0..per_sample {
                let node = &self.nodes[i];
                if node.list != FREE {
                    let id = TimerId {
                        index: i as u32,
                        generation: node.generation,
                    };
                    visit(id, node.deadline, node.payload);
                    break;
                }
                i = if i + 1 == n { 0 } else { i + 1 };
            }
        }
    }

    /// Bytes of memory used (for INFO/MEMORY accounting), approximate: the fixed tables plus
    /// the node storage (its high-water mark; freed nodes are reused, and `clear` releases it).
    pub fn memory_usage(&self) -> usize {
        size_of::<Self>() + self.nodes.capacity() * size_of::<Node<T>>()
    }

    /// `poll_expired`, also returning the number of elementary steps taken (timers popped,
    /// timers moved, slots detached, bitmap scans) so tests can check the work bound.
    fn poll_counted(
        &mut self,
        now_ms: u64,
        max: usize,
        out: &mut Vec<(TimerId, T)>,
    ) -> (bool, usize) {
        if now_ms < self.now {
            return (false, 0);
        }
        let mut popped = 0;
        let mut steps = 0;
        let mut scans = 0;
        loop {
            while popped < max {
                let index = self.heads[DUE];
                if index == NIL {
                    break;
                }
                self.unlink(index);
                self.emit(index, out);
                popped += 1;
            }
            if popped >= max {
                return (self.may_have_due(now_ms), popped + steps + scans);
            }
            if let Some(list) = self.draining {
                let index = self.heads[list];
                if index != NIL {
                    if self.nodes[index as usize].deadline <= self.now {
                        self.unlink(index);
                        self.emit(index, out);
                        popped += 1;
                    } else if steps < max {
                        self.unlink(index);
                        self.place(index);
                        steps += 1;
                    } else {
                        return (self.may_have_due(now_ms), popped + steps + scans);
                    }
                    continue;
                }
                self.draining = None;
            }
            if self.now == now_ms {
                return (false, popped + steps + scans);
            }
            scans += 1;
            match self.next_event() {
                Some((start, list)) if start <= now_ms => {
                    if steps >= max {
                        return (true, popped + steps + scans);
                    }
                    steps += 1;
                    self.now = start;
                    self.detach(list);
                }
                _ => {
                    // Nothing starts by `now_ms`: every timer stays valid relative to it.
                    self.now = now_ms;
                    return (false, popped + steps + scans);
                }
            }
        }
    }

    /// Whether a timer at or before `now_ms` may remain.
    fn may_have_due(&self, now_ms: u64) -> bool {
        self.next_deadline().is_some_and(|d| d <= now_ms)
    }

    /// The live node `id` refers to.
    fn lookup(&self, id: TimerId) -> Option<u32> {
        let node = self.nodes.get(id.index as usize)?;
        (node.list != FREE && node.generation == id.generation).then_some(id.index)
    }

    /// Pushes a node (already unlinked) to `out` and frees it.
    fn emit(&mut self, index: u32, out: &mut Vec<(TimerId, T)>) {
        let node = &self.nodes[index as usize];
        out.push((
            TimerId {
                index,
                generation: node.generation,
            },
            node.payload,
        ));
        self.release(index);
    }

    /// Frees an unlinked node, invalidating its id.
    fn release(&mut self, index: u32) {
        let node = &mut self.nodes[index as usize];
        node.generation = bump(node.generation);
        node.list = FREE;
        node.prev = NIL;
        node.next = self.free_head;
        self.free_head = index;
        self.len -= 1;
    }

    /// The list a deadline belongs to, relative to the current time.
    fn list_for(&self, deadline: u64) -> usize {
        if deadline <= self.now {
            return DUE;
        }
        let highest = 63 - (deadline ^ self.now).leading_zeros();
        let level = (highest / SLOT_BITS) as usize;
        if level >= LEVELS {
            OVERFLOW + self.active_overflow
        } else {
            let slot = (deadline >> (level as u32 * SLOT_BITS)) as usize & (SLOTS - 1);
            level * SLOTS + slot
        }
    }

    /// Links an unlinked node into the list its deadline belongs to.
    fn place(&mut self, index: u32) {
        let deadline = self.nodes[index as usize].deadline;
        let list = self.list_for(deadline);
        let head = self.heads[list];
        let node = &mut self.nodes[index as usize];
        node.prev = NIL;
        node.next = head;
        node.list = list as u16;
        if head != NIL {
            self.nodes[head as usize].prev = index;
        }
        self.heads[list] = index;
        self.mins[list] = self.mins[list].min(deadline);
        if list < OVERFLOW {
            self.occupied[list / SLOTS] |= 1 << (list % SLOTS);
        }
    }

    /// Unlinks a node from its list, keeping the list's bitmap bit and bound up to date.
    fn unlink(&mut self, index: u32) {
        let Node {
            prev, next, list, ..
        } = self.nodes[index as usize];
        let list = list as usize;
        if prev != NIL {
            self.nodes[prev as usize].next = next;
        } else {
            self.heads[list] = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        }
        if self.heads[list] == NIL {
            self.mins[list] = u64::MAX;
            if list < OVERFLOW {
                self.occupied[list / SLOTS] &= !(1 << (list % SLOTS));
            }
        }
    }

    /// The lowest level with an occupied slot and its earliest occupied slot.
    fn first_occupied(&self) -> Option<(usize, u32)> {
        (0..LEVELS)
            .find(|&level| self.occupied[level] != 0)
            .map(|level| (level, self.occupied[level].trailing_zeros()))
    }

    /// When slot `slot` of level `level` begins, given the current time.
    fn slot_start(&self, level: usize, slot: u32) -> u64 {
        let shift = level as u32 * SLOT_BITS;
        let block = (1u64 << (shift + SLOT_BITS)) - 1;
        (self.now & !block) | (u64::from(slot) << shift)
    }

    /// Start of the 2^36 ms block after the current time's, if there is one.
    fn next_block(&self) -> Option<u64> {
        (self.now | SPAN_MASK).checked_add(1)
    }

    /// The earliest time at which a list must be cascaded, and that list.
    fn next_event(&self) -> Option<(u64, usize)> {
        if let Some((level, slot)) = self.first_occupied() {
            return Some((self.slot_start(level, slot), level * SLOTS + slot as usize));
        }
        let list = OVERFLOW + self.active_overflow;
        if self.heads[list] == NIL {
            return None;
        }
        // Every overflow timer lies in a later block than `W` and at or after its list's
        // lower bound, so nothing is missed by jumping to the later of the two blocks.
        let start = self.next_block()?.max(self.mins[list] & !SPAN_MASK);
        Some((start, list))
    }

    /// Takes a list out of the wheel to be drained (the current time is its start).
    fn detach(&mut self, list: usize) {
        if list < OVERFLOW {
            self.occupied[list / SLOTS] &= !(1 << (list % SLOTS));
        } else {
            // Far-future timers re-placed while draining go to the other overflow list.
            self.active_overflow ^= 1;
        }
        self.draining = Some(list);
    }
}

#[cfg(test)]
mod tests;
