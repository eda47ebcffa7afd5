//! Tests of the timer wheel: insertion, cascading, removal, the next deadline, and a
//! model-based run against a `BTreeMap`.
//!
//! They drive the wheel through `TimerWheel`, a small id-based store written for them: nodes
//! in a vector with a free list, ids that carry a generation so that a stale one is
//! recognised. (The keyspace's store is its entry storage, tested in `store::shard`.)

use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TimerId {
    index: u32,
    generation: u32,
}

#[derive(Debug, Clone, Copy)]
struct TestNode<T> {
    deadline: u64,
    link: Link,
    generation: u32,
    live: bool,
    payload: T,
}

impl<T> Nodes for Vec<TestNode<T>> {
    fn deadline(&self, i: u32) -> u64 {
        self[i as usize].deadline
    }

    fn link(&mut self, i: u32) -> &mut Link {
        &mut self[i as usize].link
    }
}

struct TimerWheel<T: Copy> {
    wheel: Wheel,
    nodes: Vec<TestNode<T>>,
    free: Vec<u32>,
}

impl<T: Copy> TimerWheel<T> {
    fn new(now: u64) -> Self {
        TimerWheel {
            wheel: Wheel::new(now),
            nodes: Vec::new(),
            free: Vec::new(),
        }
    }

    fn len(&self) -> usize {
        self.wheel.len()
    }

    fn is_empty(&self) -> bool {
        self.wheel.is_empty()
    }

    fn next_deadline(&self) -> Option<u64> {
        self.wheel.next_deadline()
    }

    fn insert(&mut self, deadline: u64, payload: T) -> TimerId {
        let index = match self.free.pop() {
            Some(i) => {
                let n = &mut self.nodes[i as usize];
                n.deadline = deadline;
                n.payload = payload;
                n.live = true;
                i
            }
            None => {
                self.nodes.push(TestNode {
                    deadline,
                    link: Link::UNLINKED,
                    generation: 0,
                    live: true,
                    payload,
                });
                (self.nodes.len() - 1) as u32
            }
        };
        self.wheel.schedule(&mut self.nodes, index);
        TimerId {
            index,
            generation: self.nodes[index as usize].generation,
        }
    }

    fn lookup(&self, id: TimerId) -> Option<u32> {
        let n = self.nodes.get(id.index as usize)?;
        (n.live && n.generation == id.generation).then_some(id.index)
    }

    fn release(&mut self, i: u32) -> T {
        let n = &mut self.nodes[i as usize];
        assert!(!n.link.is_linked());
        n.live = false;
        n.generation += 1;
        self.free.push(i);
        n.payload
    }

    fn reschedule(&mut self, id: TimerId, deadline: u64) -> bool {
        let Some(i) = self.lookup(id) else {
            return false;
        };
        self.nodes[i as usize].deadline = deadline;
        self.wheel.schedule(&mut self.nodes, i);
        true
    }

    fn remove(&mut self, id: TimerId) -> Option<T> {
        let i = self.lookup(id)?;
        self.wheel.remove(&mut self.nodes, i);
        Some(self.release(i))
    }

    fn poll_expired(&mut self, now: u64, max: usize, out: &mut Vec<(TimerId, T)>) -> bool {
        self.poll_counted(now, max, out).0
    }

    fn poll_counted(&mut self, now: u64, max: usize, out: &mut Vec<(TimerId, T)>) -> (bool, usize) {
        let mut popped = Vec::new();
        let r = self
            .wheel
            .poll_counted(&mut self.nodes, now, max, &mut popped);
        for i in popped {
            let id = TimerId {
                index: i,
                generation: self.nodes[i as usize].generation,
            };
            out.push((id, self.release(i)));
        }
        r
    }

    fn clear(&mut self) {
        for i in 0..self.nodes.len() as u32 {
            if self.nodes[i as usize].live {
                self.wheel.remove(&mut self.nodes, i);
                self.release(i);
            }
        }
        assert!(self.wheel.is_empty());
    }
}

/// Polls until `false`, checking every batch's size, and returns all payloads popped.
fn drain(wheel: &mut TimerWheel<u64>, now: u64, max: usize) -> Vec<u64> {
    let mut all = Vec::new();
    for _ in 0..1_000_000 {
        let mut out = Vec::new();
        let more = wheel.poll_expired(now, max, &mut out);
        assert!(out.len() <= max);
        all.extend(out.iter().map(|&(_, p)| p));
        if !more {
            return all;
        }
    }
    panic!("poll_expired never returned false");
}

fn sorted(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v
}

#[test]
fn link_is_small() {
    assert_eq!(size_of::<Link>(), 12);
}

/// The keyspace keeps its entries dense: deleting one moves the last entry into its place,
/// and `moved` repoints the wheel. Every survivor still pops exactly at its deadline.
#[test]
fn moved_nodes_keep_their_place() {
    let mut nodes: Vec<TestNode<u64>> = Vec::new();
    let mut w = Wheel::new(0);
    for i in 0..200u64 {
        nodes.push(TestNode {
            deadline: 10 + (i * 37) % 300,
            link: Link::UNLINKED,
            generation: 0,
            live: true,
            payload: i,
        });
        w.schedule(&mut nodes, i as u32);
    }
    // Delete every third node, swap-removing as the keyspace does.
    let mut pos = 0;
    while pos < nodes.len() {
        if nodes[pos].payload.is_multiple_of(3) {
            w.remove(&mut nodes, pos as u32);
            let last = (nodes.len() - 1) as u32;
            nodes.swap_remove(pos);
            if pos as u32 != last {
                w.moved(&mut nodes, last, pos as u32);
            }
        } else {
            pos += 1;
        }
    }
    assert_eq!(w.len(), nodes.len());
    let mut popped = Vec::new();
    for now in 0..400u64 {
        let mut out = Vec::new();
        while w.poll_expired(&mut nodes, now, 7, &mut out) {}
        for i in out {
            let n = &nodes[i as usize];
            assert_eq!(n.deadline, now, "popped exactly at its deadline");
            popped.push(n.payload);
        }
    }
    popped.sort_unstable();
    let want: Vec<u64> = (0..200).filter(|i: &u64| !i.is_multiple_of(3)).collect();
    assert_eq!(popped, want);
    assert!(w.is_empty());
}

#[test]
fn pops_at_exact_deadline() {
    let mut w = TimerWheel::new(1_000);
    for (i, d) in [1_001u64, 1_063, 1_064, 1_065, 5_000, 1_000_000]
        .into_iter()
        .enumerate()
    {
        w.insert(d, i as u64);
    }
    assert_eq!(w.len(), 6);
    let expect: [(u64, Vec<u64>); 6] = [
        (1_001, vec![0]),
        (1_063, vec![1]),
        (1_064, vec![2]),
        (1_065, vec![3]),
        (5_000, vec![4]),
        (1_000_000, vec![5]),
    ];
    for (d, payloads) in expect {
        assert_eq!(w.next_deadline(), Some(d), "exact next deadline");
        assert!(drain(&mut w, d - 1, 16).is_empty(), "nothing before {d}");
        assert_eq!(drain(&mut w, d, 16), payloads);
    }
    assert!(w.is_empty());
    assert_eq!(w.next_deadline(), None);
}

#[test]
fn deadline_at_or_before_now_is_due_immediately() {
    let mut w = TimerWheel::new(10_000);
    w.insert(10_000, 1);
    w.insert(3, 2);
    w.insert(0, 3);
    assert!(w.next_deadline().unwrap() <= 10_000);
    assert_eq!(sorted(drain(&mut w, 10_000, 8)), vec![1, 2, 3]);
    // After time has moved, the new "now" counts too.
    drain(&mut w, 20_000, 8);
    w.insert(20_000, 4);
    w.insert(15_000, 5);
    assert_eq!(sorted(drain(&mut w, 20_000, 8)), vec![4, 5]);
    assert!(w.is_empty());
}

#[test]
fn far_future_and_overflow() {
    let start = 1_700_000_000_000u64;
    let mut w = TimerWheel::new(start);
    let year = 365 * 24 * 3_600 * 1_000u64;
    let deadlines = [
        start + (1 << 36) - 1,
        start + (1 << 36),
        start + (1 << 36) + 1,
        start + 3 * year,
        start + 10 * year,
        start + 10 * year + 1,
        u64::MAX - 1,
        u64::MAX,
    ];
    for (i, &d) in deadlines.iter().enumerate() {
        w.insert(d, i as u64);
    }
    for (i, &d) in deadlines.iter().enumerate() {
        assert!(w.next_deadline().unwrap() <= d);
        assert!(drain(&mut w, d - 1, 4).is_empty(), "early at {i}");
        assert_eq!(drain(&mut w, d, 4), vec![i as u64]);
    }
    assert!(w.is_empty());
}

#[test]
fn big_jump_skips_empty_slots() {
    let start = 1_700_000_000_000u64;
    let year = 365 * 24 * 3_600 * 1_000u64;
    let mut w = TimerWheel::new(start);
    w.insert(start + year, 1);
    w.insert(start + 5 * year, 2);
    w.insert(start + 50 * year, 3);
    let mut out = Vec::new();
    let (more, work) = w.poll_counted(start + 6 * year, 512, &mut out);
    assert!(!more);
    assert_eq!(sorted(out.iter().map(|&(_, p)| p).collect()), vec![1, 2]);
    assert!(work < 100, "work {work} for a 6-year jump");
    // An empty wheel jumps for free.
    let mut e: TimerWheel<u64> = TimerWheel::new(0);
    assert_eq!(e.poll_counted(u64::MAX, 512, &mut out), (false, 1));
    assert_eq!(e.poll_counted(u64::MAX, 512, &mut out), (false, 0));
}

#[test]
fn reschedule_earlier_and_later() {
    let mut w = TimerWheel::new(0);
    let a = w.insert(100_000, 1);
    let b = w.insert(200, 2);
    assert!(w.reschedule(a, 50));
    assert!(w.reschedule(b, 1_000_000));
    assert_eq!(w.next_deadline(), Some(50));
    assert!(drain(&mut w, 49, 8).is_empty());
    assert_eq!(drain(&mut w, 50, 8), vec![1]);
    assert!(drain(&mut w, 200_000, 8).is_empty());
    // Reschedule into the past: due on the next poll.
    assert!(w.reschedule(b, 10));
    assert_eq!(drain(&mut w, 200_000, 8), vec![2]);
    assert!(!w.reschedule(a, 5), "popped id is stale");
    assert!(w.is_empty());
}

#[test]
fn reschedule_within_its_slot_leaves_the_list_alone() {
    // Level 1 at W = 0: slot 2 spans 128..192 ms.
    let mut w = TimerWheel::new(0);
    let a = w.insert(130, 1);
    let b = w.insert(140, 2);
    let c = w.insert(150, 3);
    let links = |w: &TimerWheel<u64>| w.nodes.iter().map(|n| n.link).collect::<Vec<_>>();
    let before = links(&w);
    // Later and earlier, inside the slot: no link moves, the middle node's neighbours
    // included.
    assert!(w.reschedule(b, 191));
    assert!(w.reschedule(a, 128));
    assert_eq!(links(&w), before);
    assert_eq!(w.next_deadline(), Some(128));
    // Out of the slot: relinked.
    assert!(w.reschedule(c, 200));
    assert_ne!(links(&w), before);
    assert_eq!(sorted(drain(&mut w, 191, 8)), vec![1, 2]);
    assert_eq!(drain(&mut w, 200, 8), vec![3]);
    assert!(w.is_empty());
}

#[test]
fn refresh_many_times_keeps_one_timer() {
    let mut w = TimerWheel::new(0);
    let id = w.insert(1_000, 7);
    for t in 0..10_000u64 {
        assert!(drain(&mut w, t, 8).is_empty());
        assert!(w.reschedule(id, t + 1_000));
        assert_eq!(w.len(), 1);
    }
    assert_eq!(drain(&mut w, 10_999, 8), vec![7]);
}

#[test]
fn remove_cancels() {
    let mut w = TimerWheel::new(0);
    let a = w.insert(10, 1);
    let b = w.insert(10, 2);
    let c = w.insert(1 << 40, 3);
    assert_eq!(w.remove(a), Some(1));
    assert_eq!(w.remove(c), Some(3));
    assert_eq!(w.len(), 1);
    assert_eq!(drain(&mut w, u64::MAX, 8), vec![2]);
    assert_eq!(w.remove(b), None);
}

#[test]
fn stale_ids_are_harmless() {
    let mut w = TimerWheel::new(0);
    let a = w.insert(10, 1);
    assert_eq!(w.remove(a), Some(1));
    // The node is reused by the next insert; the old id must not reach it.
    let b = w.insert(20, 2);
    assert_eq!(a.index, b.index);
    assert_eq!(w.remove(a), None);
    assert!(!w.reschedule(a, 5));
    assert_eq!(w.len(), 1);
    let forged = TimerId {
        index: 1_000,
        generation: 1,
    };
    assert_eq!(w.remove(forged), None);
    assert!(!w.reschedule(forged, 1));
    let mut out = Vec::new();
    assert!(!w.poll_expired(20, 8, &mut out));
    assert_eq!(out, vec![(b, 2)]);
    assert_eq!(w.remove(b), None, "fired id is stale");
    assert!(!w.reschedule(b, 100));
    assert!(w.is_empty());
}

#[test]
fn batches_are_bounded() {
    let mut w = TimerWheel::new(0);
    for i in 0..100 {
        w.insert(50 + i % 3, i);
    }
    let mut out = Vec::new();
    let mut calls = 0;
    loop {
        let before = out.len();
        let more = w.poll_expired(60, 32, &mut out);
        assert!(out.len() - before <= 32);
        calls += 1;
        if !more {
            break;
        }
        assert!(out.len() < 100 || calls < 10);
    }
    assert_eq!(out.len(), 100);
    assert!(calls >= 4);
    let mut ids: Vec<TimerId> = out.iter().map(|&(id, _)| id).collect();
    ids.sort_unstable_by_key(|id| id.index);
    ids.dedup();
    assert_eq!(ids.len(), 100);
    // max == 0 does nothing.
    w.insert(0, 1);
    assert!(w.poll_expired(60, 0, &mut out));
    assert_eq!(w.len(), 1);
}

#[test]
fn batch_full_with_nothing_left_reports_false() {
    let mut w = TimerWheel::new(0);
    for i in 0..4 {
        w.insert(10, i);
    }
    let mut out = Vec::new();
    assert!(!w.poll_expired(10, 4, &mut out));
    assert_eq!(out.len(), 4);
}

#[test]
fn clear_removes_everything() {
    let mut w = TimerWheel::new(0);
    let ids: Vec<TimerId> = (0..1_000).map(|i| w.insert(i * 1_000, i)).collect();
    w.clear();
    assert!(w.is_empty());
    assert_eq!(w.next_deadline(), None);
    let fresh = w.insert(5, 99);
    for &id in &ids {
        assert_eq!(w.remove(id), None);
        assert!(!w.reschedule(id, 1));
    }
    assert_ne!(fresh, ids[0]);
    assert_eq!(drain(&mut w, u64::MAX, 8), vec![99]);
}

#[test]
fn time_going_backwards_is_a_no_op() {
    let mut w = TimerWheel::new(1_000);
    w.insert(900, 1);
    w.insert(2_000, 2);
    assert!(drain(&mut w, 1_500, 8) == vec![1]);
    let mut out = Vec::new();
    assert_eq!(w.poll_counted(1_200, 8, &mut out), (false, 0));
    assert!(out.is_empty());
    assert_eq!(drain(&mut w, 2_000, 8), vec![2]);
}

#[test]
fn next_deadline_lower_bound_after_removal() {
    let mut w = TimerWheel::new(0);
    let a = w.insert(10_000, 1);
    w.insert(10_500, 2);
    w.remove(a);
    let bound = w.next_deadline().unwrap();
    assert!(bound <= 10_500);
    // The spurious wake-up at the stale bound makes it exact again.
    assert!(drain(&mut w, bound, 8).is_empty());
    assert_eq!(w.next_deadline(), Some(10_500));
}

/// Drains `n` timers all due at the same millisecond in batches of 512, checking that no
/// call takes more than a bounded number of steps.
fn drain_same_ms(n: u64, start: u64, deadline: u64) {
    const MAX: usize = 512;
    let mut w = TimerWheel::new(start);
    for i in 0..n {
        w.insert(deadline, i);
    }
    let mut out = Vec::with_capacity(MAX);
    let mut seen = vec![false; n as usize];
    let mut popped = 0u64;
    let mut calls = 0u64;
    loop {
        out.clear();
        let (more, work) = w.poll_counted(deadline, MAX, &mut out);
        calls += 1;
        assert!(out.len() <= MAX);
        assert!(
            work <= 2 * MAX + 2 * LEVELS,
            "call {calls} took {work} steps"
        );
        for &(_, p) in &out {
            assert!(!std::mem::replace(&mut seen[p as usize], true));
        }
        popped += out.len() as u64;
        if !more {
            break;
        }
        assert!(calls < 100_000);
    }
    assert_eq!(popped, n);
    assert!(w.is_empty());
    // Each timer cascades at most once per level: the total stays linear.
    assert!(
        calls <= n * LEVELS as u64 / MAX as u64 + 10,
        "{calls} calls"
    );
}

#[test]
fn million_timers_same_ms_drain_in_bounded_batches() {
    drain_same_ms(1_000_000, 1_000, 1_000 + 3_000_000);
}

#[test]
fn million_already_due_timers_drain_in_bounded_batches() {
    drain_same_ms(1_000_000, 5_000, 5_000);
}

#[test]
fn a_mass_expiry_is_popped_where_it_waits() {
    // 10,000 timers of one millisecond, placed at level 2 (slot 98,304..102,399).
    let (start, deadline, n) = (1_000u64, 101_000u64, 10_000u64);
    let mut w = TimerWheel::new(start);
    for i in 0..n {
        w.insert(deadline, i);
    }
    let mut out = Vec::new();
    // Polls after their slot has begun but before they are due move none of them.
    for now in [deadline - 4_000, deadline - 50, deadline - 1] {
        assert_eq!(w.poll_counted(now, 512, &mut out), (false, 1), "at {now}");
        assert!(out.is_empty());
        assert_eq!(w.next_deadline(), Some(deadline));
    }
    // Once due they are popped from that slot: one step each, none re-placed.
    let (mut work, mut calls) = (0, 0);
    loop {
        out.clear();
        let (more, w_) = w.poll_counted(deadline, 512, &mut out);
        work += w_;
        calls += 1;
        if !more {
            break;
        }
    }
    assert!(w.is_empty());
    assert!(
        work <= n as usize + 2 * calls,
        "{work} steps in {calls} calls"
    );
}

#[test]
fn mutation_during_interrupted_cascade() {
    let mut w = TimerWheel::new(0);
    let ids: Vec<TimerId> = (0..100).map(|i| w.insert(5_000 + i, i)).collect();
    let mut out = Vec::new();
    // Detach the slot and move only a few timers.
    assert!(w.poll_expired(5_050, 3, &mut out) || out.is_empty());
    assert!(w.wheel.draining.is_some());
    for id in &ids[..10] {
        assert!(w.remove(*id).is_some());
    }
    for id in &ids[10..20] {
        assert!(w.reschedule(*id, 1 << 40));
    }
    w.insert(5_001, 1_000);
    assert!(w.next_deadline().unwrap() <= 5_001);
    let got = sorted(drain(&mut w, 5_050, 3));
    let mut expect: Vec<u64> = (20..=50).collect();
    expect.push(1_000);
    assert_eq!(got, sorted(expect));
    assert_eq!(w.len(), 49 + 10);
}

#[derive(Debug, Clone, Copy)]
enum When {
    Past(u64),
    After(u64),
    Max,
}

impl When {
    fn at(self, now: u64) -> u64 {
        match self {
            When::Past(d) => now.saturating_sub(d),
            When::After(d) => now.saturating_add(d),
            When::Max => u64::MAX,
        }
    }
}

fn when() -> impl Strategy<Value = When> {
    prop_oneof![
        1 => (0u64..5_000).prop_map(When::Past),
        4 => (0u64..200).prop_map(When::After),
        3 => (0u64..300_000).prop_map(When::After),
        3 => (0u64..=10_000_000_000).prop_map(When::After),
        2 => (0u64..1 << 45).prop_map(When::After),
        1 => Just(When::Max),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Insert(When),
    Reschedule(usize, When),
    Remove(usize),
    Stale(usize, When),
    Poll {
        advance: u64,
        max: usize,
        drain: bool,
    },
    Clear,
}

fn op() -> impl Strategy<Value = Op> {
    let advance = prop_oneof![Just(0u64), 0u64..100, 0u64..100_000, 0u64..=10_000_000_000,];
    prop_oneof![
        40 => when().prop_map(Op::Insert),
        15 => (any::<usize>(), when()).prop_map(|(i, w)| Op::Reschedule(i, w)),
        10 => any::<usize>().prop_map(Op::Remove),
        5 => (any::<usize>(), when()).prop_map(|(i, w)| Op::Stale(i, w)),
        20 => (advance, 1usize..40, any::<bool>())
            .prop_map(|(advance, max, drain)| Op::Poll { advance, max, drain }),
        1 => Just(Op::Clear),
    ]
}

/// Checks the wheel against the model: size, and the lower-bound `next_deadline`.
fn check(w: &TimerWheel<u64>, model: &BTreeMap<u64, (TimerId, u64)>) {
    assert_eq!(w.len(), model.len());
    let earliest = model.values().map(|&(_, d)| d).min();
    match (w.next_deadline(), earliest) {
        (None, None) => {}
        (Some(bound), Some(true_min)) => {
            assert!(
                bound <= true_min,
                "next_deadline {bound} > earliest {true_min}"
            )
        }
        (got, want) => panic!("next_deadline {got:?} with earliest {want:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn matches_model(
        start in prop_oneof![Just(0u64), 0u64..1 << 45, Just(u64::MAX - (1 << 40))],
        ops in prop::collection::vec(op(), 1..250),
    ) {
        let mut w: TimerWheel<u64> = TimerWheel::new(start);
        let mut model: BTreeMap<u64, (TimerId, u64)> = BTreeMap::new();
        let mut dead: Vec<TimerId> = Vec::new();
        let mut now = start;
        let mut next_payload = 0u64;
        for op in ops {
            match op {
                Op::Insert(when) => {
                    let d = when.at(now);
                    let id = w.insert(d, next_payload);
                    model.insert(next_payload, (id, d));
                    next_payload += 1;
                }
                Op::Reschedule(i, when) => {
                    if let Some((&p, &(id, _))) = model.iter().nth(i % model.len().max(1)) {
                        let d = when.at(now);
                        prop_assert!(w.reschedule(id, d));
                        model.insert(p, (id, d));
                    }
                }
                Op::Remove(i) => {
                    if let Some((&p, &(id, _))) = model.iter().nth(i % model.len().max(1)) {
                        prop_assert_eq!(w.remove(id), Some(p));
                        model.remove(&p);
                        dead.push(id);
                    }
                }
                Op::Stale(i, when) => {
                    if let Some(&id) = dead.get(i % dead.len().max(1)) {
                        prop_assert!(!w.reschedule(id, when.at(now)));
                        prop_assert_eq!(w.remove(id), None);
                    }
                }
                Op::Poll { advance, max, drain } => {
                    now = now.saturating_add(advance);
                    let mut calls = 0;
                    loop {
                        let mut out = Vec::new();
                        let more = w.poll_expired(now, max, &mut out);
                        calls += 1;
                        prop_assert!(out.len() <= max);
                        for (id, p) in out {
                            // Popped exactly once, never early, with its own id.
                            let entry = model.remove(&p);
                            prop_assert!(entry.is_some(), "payload {} popped twice", p);
                            let (want_id, d) = entry.unwrap_or((id, 0));
                            prop_assert_eq!(id, want_id);
                            prop_assert!(d <= now, "popped {} early: {} > {}", p, d, now);
                            dead.push(id);
                        }
                        if !more {
                            // Never missed.
                            let missed = model.values().filter(|&&(_, d)| d <= now).count();
                            prop_assert_eq!(missed, 0);
                            prop_assert!(w.next_deadline().is_none_or(|d| d > now));
                            break;
                        }
                        if !drain {
                            break;
                        }
                        prop_assert!(calls < 100_000);
                    }
                }
                Op::Clear => {
                    w.clear();
                    dead.extend(model.values().map(|&(id, _)| id));
                    model.clear();
                }
            }
            check(&w, &model);
        }
        // Finally everything fires by the end of time, exactly once.
        now = u64::MAX;
        let mut out = Vec::new();
        while w.poll_expired(now, 64, &mut out) {}
        for (_, p) in out {
            prop_assert!(model.remove(&p).is_some());
        }
        prop_assert!(model.is_empty());
        prop_assert!(w.is_empty());
    }
}
