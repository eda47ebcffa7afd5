//! Consumer groups: a group's last delivered ID and read counter, its pending entries
//! list (PEL: delivered, not yet acknowledged, by ID) and its consumers, each with the IDs
//! of the pending entries it owns. Both maps are ordered, as Redis's radix trees are, so
//! XPENDING, XINFO and the RDB see them in Redis's order.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use super::{Stream, StreamId};

/// `entries-read` unknown (Redis's `SCG_INVALID_ENTRIES_READ`).
pub const ENTRIES_READ_UNKNOWN: i64 = -1;

/// A pending entry: who owns it, when it was last delivered, how often.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// The consumer it was delivered to.
    pub consumer: Bytes,
    /// Unix ms of the last delivery.
    pub delivery_time: u64,
    /// Deliveries so far.
    pub delivery_count: u64,
}

/// A consumer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Consumer {
    /// Unix ms it was last active.
    pub seen_time: u64,
    /// The pending entries it owns.
    pub pending: BTreeSet<StreamId>,
}

/// A consumer group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Group {
    /// The last ID delivered to it.
    pub last_id: StreamId,
    /// Its logical read counter, or [`ENTRIES_READ_UNKNOWN`].
    pub entries_read: i64,
    /// Pending entries by ID.
    pub pel: BTreeMap<StreamId, Pending>,
    /// Consumers by name.
    pub consumers: BTreeMap<Bytes, Consumer>,
}

impl Group {
    /// A group starting after `last_id`.
    pub fn new(last_id: StreamId, entries_read: i64) -> Group {
        Group {
            last_id,
            entries_read,
            ..Group::default()
        }
    }

    /// Heap bytes held (an estimate).
    pub fn approx_memory(&self) -> usize {
        let consumers: usize = self
            .consumers
            .iter()
            .map(|(n, c)| n.len() + 64 + c.pending.len() * 24)
            .sum();
        96 + self.pel.len() * 80 + consumers
    }

    /// The consumer `name`, made (seen now) if missing; true if it was made.
    pub fn consumer_or_create(&mut self, name: &Bytes, now_ms: u64) -> (&mut Consumer, bool) {
        let created = !self.consumers.contains_key(name);
        let c = self
            .consumers
            .entry(name.clone())
            .or_insert_with(|| Consumer {
                seen_time: now_ms,
                pending: BTreeSet::new(),
            });
        (c, created)
    }

    /// Drops consumer `name` and its pending entries; how many it had, None if unknown.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pending {
            self.pel.remove(id);
        }
        Some(c.pending.len())
    }

    /// Acknowledges `id`; false if it was not pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        let Some(p) = self.pel.remove(&id) else {
            return false;
        };
        if let Some(c) = self.consumers.get_mut(&p.consumer) {
            c.pending.remove(&id);
        }
        true
    }

    /// Makes `id` pending for `consumer` (delivered now, `count` times), moving it from
    /// its previous owner.
    pub fn assign(&mut self, id: StreamId, consumer: &Bytes, now_ms: u64, count: u64) {
        if let Some(old) = self.pel.get(&id)
            && old.consumer != *consumer
            && let Some(c) = self.consumers.get_mut(&old.consumer)
        {
            c.pending.remove(&id);
        }
        self.pel.insert(
            id,
            Pending {
                consumer: consumer.clone(),
                delivery_time: now_ms,
                delivery_count: count,
            },
        );
        if let Some(c) = self.consumers.get_mut(consumer) {
            c.pending.insert(id);
        }
    }
}

impl Stream {
    /// Whether a tombstone (an XDEL'ed ID) may lie in `start..=end` (Redis's
    /// `streamRangeHasTombstones`).
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.is_empty() || self.max_deleted_id == StreamId::MIN {
            return false;
        }
        if self.first_id() > self.max_deleted_id {
            return false;
        }
        start <= self.max_deleted_id && self.max_deleted_id <= end
    }

    /// An ID's logical read counter when it can be known (Redis's
    /// `streamEstimateDistanceFromFirstEverEntry`), else [`ENTRIES_READ_UNKNOWN`].
    pub fn estimate_entries_read(&self, id: StreamId) -> i64 {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return 0;
        }
        if self.is_empty() && id <= self.last_id {
            return added;
        }
        if id == self.last_id {
            return added;
        }
        if id > self.last_id {
            return ENTRIES_READ_UNKNOWN;
        }
        let first = self.first_id();
        if self.max_deleted_id == StreamId::MIN || self.max_deleted_id < first {
            if id < first {
                return added - self.length as i64;
            }
            if id == first {
                return added - self.length as i64 + 1;
            }
        }
        ENTRIES_READ_UNKNOWN
    }

    /// A group's lag (Redis's `streamReplyWithCGLag`), None when it cannot be known.
    pub fn group_lag(&self, g: &Group) -> Option<i64> {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != ENTRIES_READ_UNKNOWN
            && !self.range_has_tombstones(g.last_id, StreamId::MAX)
        {
            return Some(added - g.entries_read);
        }
        match self.estimate_entries_read(g.last_id) {
            ENTRIES_READ_UNKNOWN => None,
            read => Some(added - read),
        }
    }
}
