//! TEMPORARY stub until the timing wheel lands.
#![allow(missing_docs)]
use std::collections::BTreeMap;
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimerId(u64);
#[derive(Debug)]
pub struct TimerWheel<T: Copy> { next: u64, by_id: std::collections::HashMap<u64, (u64, T)>, order: BTreeMap<(u64, u64), ()> }
impl<T: Copy> TimerWheel<T> {
    pub fn new(_now: u64) -> Self { TimerWheel { next: 0, by_id: Default::default(), order: BTreeMap::new() } }
    pub fn insert(&mut self, d: u64, p: T) -> TimerId { self.next += 1; self.by_id.insert(self.next, (d, p)); self.order.insert((d, self.next), ()); TimerId(self.next) }
    pub fn reschedule(&mut self, id: TimerId, d: u64) -> bool { match self.by_id.get_mut(&id.0) { Some(e) => { self.order.remove(&(e.0, id.0)); e.0 = d; self.order.insert((d, id.0), ()); true } None => false } }
    pub fn remove(&mut self, id: TimerId) -> Option<T> { let (d, p) = self.by_id.remove(&id.0)?; self.order.remove(&(d, id.0)); Some(p) }
    pub fn next_deadline(&self) -> Option<u64> { self.order.keys().next().map(|k| k.0) }
    pub fn poll_expired(&mut self, now: u64, max: usize, out: &mut Vec<(TimerId, T)>) -> bool {
        while out.len() < max { let Some((&(d, id), _)) = self.order.iter().next() else { return false }; if d > now { return false } self.order.remove(&(d, id)); let (_, p) = self.by_id.remove(&id).unwrap(); out.push((TimerId(id), p)); }
        self.order.keys().next().is_some_and(|k| k.0 <= now)
    }
    pub fn clear(&mut self) { self.by_id.clear(); self.order.clear(); }
    pub fn memory_usage(&self) -> usize { self.by_id.len() * 64 }
}
