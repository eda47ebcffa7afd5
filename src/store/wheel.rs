//! The expiry index of one database: a hierarchical timer wheel whose nodes are the keys'
//! own entries.
//!
//! A [`Wheel`] holds no timer storage of its own. Each key with a TTL is linked into one of
//! the wheel's lists through a 12-byte [`Link`] kept inside its entry, and the wheel reads
//! the key's deadline from the entry too; both are reached through the [`Nodes`] trait, by
//! the entry's index in its database's entry storage. So a TTL costs the key 12 bytes and no
//! allocation: no node vector, no timer id. EXPIRE/PERSIST/DEL re-link or unlink the entry in
//! O(1). The reaper sleeps until [`Wheel::next_deadline`], then, under the shard lock, calls
//! [`Wheel::poll_expired`] with a bounded batch size, deletes the keys it gets back, releases
//! the lock and calls again while it returns `true`.
//!
//! # Why a wheel
//!
//! * **O(1) refresh.** A rate limiter re-arms the TTL of the same key on every request.
//!   [`schedule`](Wheel::schedule) and [`remove`](Wheel::remove) only unlink an entry from one
//!   intrusive doubly linked list and push it onto another; no heap sift, no tree
//!   rebalancing.
//! * **Cost follows expiring keys, not keys.** Each level keeps a 64-bit occupancy bitmap, so
//!   finding the next non-empty slot is a `trailing_zeros` per level, whatever the time gap:
//!   moving the clock forward by a year costs the same as moving it by a millisecond when
//!   nothing is due. A timer is touched only when it is inserted, changed, removed, cascaded
//!   to a finer level (at most once per level it passes) or popped.
//! * **Bounded batches.** `poll_expired(nodes, now, max, ..)` pops at most `max` timers and
//!   performs at most `max` cascade steps (moving one timer, or detaching one slot) per call,
//!   so even a million keys expiring in the same millisecond are reaped in short lock holds.
//!   A slot that is being cascaded is drained incrementally across calls.
//!
//! # How deadlines map to slots
//!
//! Time is in 1 ms ticks (u64 milliseconds since the Unix epoch, always supplied by the
//! caller; the wheel never reads a clock). The wheel has a current time `W` — never later
//! than the latest `now_ms` a poll was given — and 6 levels of 64 slots; a slot of level `k`
//! spans `64^k` ms, so the levels together span `64^6` ms = 2^36 ms (about 795 days). Read a
//! deadline `d` as base-64 digits: the level of `d` is the most significant digit in which
//! `d` differs from `W` and its slot is `d`'s digit at that level. Hence every timer at level
//! `k` shares all digits above `k` with `W` and lies in a slot strictly after `W`'s own, all
//! timers at level `k` are earlier than all timers at level `k + 1`, and the earliest slot of
//! the lowest non-empty level holds the earliest timers.
//!
//! * `d <= W`: the timer is already due and goes to the *due* list, popped by the next poll.
//! * `d` differs from `W` above bit 35 (beyond the top level's span): the timer goes to the
//!   *overflow* list, rescanned only when `W` reaches the 2^36 ms block of its earliest entry.
//!
//! A poll advances `W` to the start of the next occupied slot once that slot's earliest timer
//! is due (by the slot's lower bound), and re-places the slot's timers relative to the new
//! `W`: each due by the poll's `now_ms` is popped where it is, the others move to a finer
//! level, which happens at most five times per timer. So the keys of a mass expiry (one
//! deadline, one slot) are never moved: they wait in the slot they were placed in and are
//! popped from it. While the earliest slot's timers are not due the poll leaves it, and `W`,
//! behind `now_ms` (timers inserted meanwhile are placed relative to that `W`, maybe at a
//! coarser level); if no occupied slot starts at or before `now_ms`, `W` jumps to `now_ms`.
//!
//! # The caller's side of the contract
//!
//! The wheel trusts its caller (the database that owns both the wheel and the entries): a
//! node's deadline changes only together with a [`schedule`](Wheel::schedule) call, a node
//! is removed from the storage only after [`remove`](Wheel::remove) or after it was popped,
//! and a node moved to another index (the storage is kept dense) is reported through
//! [`moved`](Wheel::moved). Node indexes are `u32`; `NIL` (`u32::MAX`) is never one.

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
/// "No node" link; never a node index.
pub(crate) const NIL: u32 = u32::MAX;
/// `Link::list` of a node that is in no list.
const UNLINKED: u16 = u16::MAX;

/// A node's place in the wheel: its neighbours in its list and the list. Kept inside the
/// node (the key's entry); 12 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Link {
    /// Previous node in the same list, or `NIL`.
    prev: u32,
    /// Next node in the same list, or `NIL`.
    next: u32,
    /// The list holding the node, or `UNLINKED`.
    list: u16,
}

impl Link {
    /// The link of a node in no list.
    pub(crate) const UNLINKED: Link = Link {
        prev: NIL,
        next: NIL,
        list: UNLINKED,
    };

    /// True if the node is in one of the wheel's lists.
    #[inline]
    pub(crate) fn is_linked(&self) -> bool {
        self.list != UNLINKED
    }
}

impl Default for Link {
    fn default() -> Self {
        Link::UNLINKED
    }
}

/// The storage the wheel's nodes live in, addressed by index.
pub(crate) trait Nodes {
    /// The deadline of node `i`, in ms: due once `now_ms >= deadline`.
    fn deadline(&self, i: u32) -> u64;
    /// The link of node `i`.
    fn link(&mut self, i: u32) -> &mut Link;
}

/// A hierarchical timer wheel of 6 levels × 64 slots with 1 ms ticks; see the module docs.
#[derive(Clone)]
pub(crate) struct Wheel {
    /// The wheel's current time `W`: never later than the last `now_ms` a poll was given.
    now: u64,
    /// Linked nodes.
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
}

impl std::fmt::Debug for Wheel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wheel")
            .field("now", &self.now)
            .field("len", &self.len)
            .field("next_deadline", &self.next_deadline())
            .finish()
    }
}

impl Wheel {
    /// Creates an empty wheel whose current time is `now_ms`.
    pub(crate) fn new(now_ms: u64) -> Self {
        Wheel {
            now: now_ms,
            len: 0,
            heads: [NIL; LISTS],
            mins: [u64::MAX; LISTS],
            occupied: [0; LEVELS],
            active_overflow: 0,
            draining: None,
        }
    }

    /// Number of linked nodes.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether no node is linked.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Links node `i` by its (new) deadline, first unlinking it if it is linked: call it
    /// whenever a node's deadline is set or changed. O(1).
    ///
    /// A deadline at or before the wheel's current time is due on the next poll.
    pub(crate) fn schedule<N: Nodes + ?Sized>(&mut self, nodes: &mut N, i: u32) {
        let link = *nodes.link(i);
        if link.is_linked() {
            // A rate limiter's key is re-armed on every call, to a deadline that mostly
            // stays in the slot it was in: then the node stays where it is in its list, and
            // the neighbours an unlink and a relink would write (other keys' entries, likely
            // not in cache) are left alone. The list's bound stays a lower bound with the
            // new deadline taken in. A list being drained is never a deadline's list
            // (`list_for` places relative to its start), so this is only a guard.
            let deadline = nodes.deadline(i);
            let list = self.list_for(deadline);
            if usize::from(link.list) == list && self.draining != Some(list) {
                self.mins[list] = self.mins[list].min(deadline);
                return;
            }
            self.unlink(nodes, i);
        } else {
            self.len += 1;
        }
        self.place(nodes, i);
    }

    /// Unlinks node `i` if it is linked. O(1).
    pub(crate) fn remove<N: Nodes + ?Sized>(&mut self, nodes: &mut N, i: u32) {
        if nodes.link(i).is_linked() {
            self.unlink(nodes, i);
            *nodes.link(i) = Link::UNLINKED;
            self.len -= 1;
        }
    }

    /// Node `from` now lives at index `to` (with its link): repoints its neighbours, or its
    /// list's head, at `to`. O(1). Nothing to do for an unlinked node.
    pub(crate) fn moved<N: Nodes + ?Sized>(&mut self, nodes: &mut N, from: u32, to: u32) {
        let Link { prev, next, list } = *nodes.link(to);
        if list == UNLINKED {
            return;
        }
        debug_assert!(prev != NIL || self.heads[list as usize] == from);
        if prev != NIL {
            nodes.link(prev).next = to;
        } else {
            self.heads[list as usize] = to;
        }
        if next != NIL {
            nodes.link(next).prev = to;
        }
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
    /// After [`poll_expired`](Self::poll_expired)`(.., now_ms, ..)` has returned `false`, the
    /// result is `None` or later than `now_ms`, so a reaper never spins.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
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

    /// Advances the wheel toward `now_ms` and pushes up to `max` due nodes (deadline <= now_ms)
    /// into `out`, unlinking them. Returns true if more due nodes remain (the caller will call
    /// again after releasing its lock).
    ///
    /// Work per call is bounded: at most `max` nodes are popped and at most `max` cascade
    /// steps are taken (moving one node to a finer level, or detaching one slot), plus an
    /// O(levels) bitmap scan per slot detached. A cascade cut short resumes on the next call.
    /// Empty slots are skipped through the occupancy bitmaps, so a `now_ms` far ahead (a test
    /// clock moved by a year, a system resumed from suspend) costs nothing extra.
    ///
    /// `true` means "call again": due nodes (or cascading that may uncover some) remain; it
    /// may occasionally be returned when the next call then finds nothing. `false` guarantees
    /// that no node with a deadline at or before `now_ms` is left. With `max == 0` nothing is
    /// done. A `now_ms` earlier than an earlier poll's is a no-op returning `false`.
    pub(crate) fn poll_expired<N: Nodes + ?Sized>(
        &mut self,
        nodes: &mut N,
        now_ms: u64,
        max: usize,
        out: &mut Vec<u32>,
    ) -> bool {
        self.poll_counted(nodes, now_ms, max, out).0
    }

    /// Visits up to `want` linked nodes, earliest lists first (the due list, then the wheel's
    /// slots in time order, then the overflow lists), for eviction's sampling of keys with a
    /// TTL when random probes found none. O(want + lists).
    pub(crate) fn first_nodes<N: Nodes + ?Sized>(
        &self,
        nodes: &mut N,
        want: usize,
        mut visit: impl FnMut(u32),
    ) {
        let mut seen = 0;
        let order = std::iter::once(DUE).chain(0..DUE);
        for list in order {
            let mut i = self.heads[list];
            while i != NIL {
                if seen == want {
                    return;
                }
                visit(i);
                seen += 1;
                i = nodes.link(i).next;
            }
        }
    }

    /// Bytes of memory used (for INFO/MEMORY accounting): the wheel's fixed tables; its nodes
    /// are the entries, counted with them.
    pub(crate) fn memory_usage(&self) -> usize {
        size_of::<Self>()
    }

    /// `poll_expired`, also returning the number of elementary steps taken (timers popped,
    /// timers moved, slots detached, bitmap scans) so tests can check the work bound.
    fn poll_counted<N: Nodes + ?Sized>(
        &mut self,
        nodes: &mut N,
        now_ms: u64,
        max: usize,
        out: &mut Vec<u32>,
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
                self.pop(nodes, index, out);
                popped += 1;
            }
            if popped >= max {
                return (self.may_have_due(now_ms), popped + steps + scans);
            }
            if let Some(list) = self.draining {
                let index = self.heads[list];
                if index != NIL {
                    // Due by the poll's time, not only by the slot's start: a mass expiry's
                    // timers, whose slot is detached when they come due, are popped where
                    // they are instead of cascading down to the due list level by level.
                    if nodes.deadline(index) <= now_ms {
                        self.pop(nodes, index, out);
                        popped += 1;
                    } else if steps < max {
                        self.unlink(nodes, index);
                        self.place(nodes, index);
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
                // Nothing in the earliest list is due yet: leave it (and `W`) as they are, so
                // that its timers are cascaded once they come due (and then popped where they
                // are) rather than re-placed now, which for the keys of a mass expiry would
                // cost a move per key per level. Every later list's timers are later still.
                Some((start, list)) if start <= now_ms && self.mins[list] > now_ms => {
                    return (false, popped + steps + scans);
                }
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

    /// Unlinks a node, marks it unlinked and pushes it to `out`.
    fn pop<N: Nodes + ?Sized>(&mut self, nodes: &mut N, index: u32, out: &mut Vec<u32>) {
        self.unlink(nodes, index);
        *nodes.link(index) = Link::UNLINKED;
        self.len -= 1;
        out.push(index);
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

    /// Links a node (not in any list) into the list its deadline belongs to.
    fn place<N: Nodes + ?Sized>(&mut self, nodes: &mut N, index: u32) {
        let deadline = nodes.deadline(index);
        let list = self.list_for(deadline);
        let head = self.heads[list];
        *nodes.link(index) = Link {
            prev: NIL,
            next: head,
            list: list as u16,
        };
        if head != NIL {
            nodes.link(head).prev = index;
        }
        self.heads[list] = index;
        self.mins[list] = self.mins[list].min(deadline);
        if list < OVERFLOW {
            self.occupied[list / SLOTS] |= 1 << (list % SLOTS);
        }
    }

    /// Unlinks a node from its list, keeping the list's bitmap bit and bound up to date. The
    /// node's own link is left as it was (the caller re-places it or marks it unlinked).
    fn unlink<N: Nodes + ?Sized>(&mut self, nodes: &mut N, index: u32) {
        let Link { prev, next, list } = *nodes.link(index);
        let list = list as usize;
        if prev != NIL {
            nodes.link(prev).next = next;
        } else {
            self.heads[list] = next;
        }
        if next != NIL {
            nodes.link(next).prev = prev;
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
