//! A stream value (Redis 7.0's `t_stream.c` data structure): entries in nodes keyed by the
//! ID of their first entry, each node a listpack in Redis's stream layout ([`node`]), plus
//! the stream's counters and its consumer groups ([`group`]).
//!
//! Why Redis's layout and not a map of entries: entries are delta-encoded against their
//! node's master entry (IDs as two small integers, field names omitted when they repeat
//! the master's), so an entry of a few short fields costs a dozen bytes or so; and because
//! node boundaries fall where Redis's do (`stream-node-max-entries` / `-max-bytes`), the
//! approximate trims (`MAXLEN ~`, `MINID ~`, which only drop whole nodes) remove exactly
//! the entries Redis removes, and the RDB writer stores the nodes as they are.
//!
//! A deleted entry is only flagged in its node (the node's live count drops), as Redis
//! does; a node whose last live entry goes is dropped.

pub mod group;
pub(crate) mod lp;
pub mod node;

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;

pub use group::{Consumer, Group, Pending};
pub use node::Node;

/// A stream entry ID: milliseconds and a sequence number, ordered as a pair.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    /// The milliseconds part.
    pub ms: u64,
    /// The sequence part.
    pub seq: u64,
}

impl StreamId {
    /// `0-0`.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// The largest ID.
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// An ID from its parts.
    pub const fn new(ms: u64, seq: u64) -> Self {
        StreamId { ms, seq }
    }

    /// The next ID, None past the largest.
    pub fn incr(self) -> Option<StreamId> {
        if self.seq < u64::MAX {
            Some(StreamId::new(self.ms, self.seq + 1))
        } else if self.ms < u64::MAX {
            Some(StreamId::new(self.ms + 1, 0))
        } else {
            None
        }
    }

    /// The previous ID, None before `0-0`.
    pub fn decr(self) -> Option<StreamId> {
        if self.seq > 0 {
            Some(StreamId::new(self.ms, self.seq - 1))
        } else if self.ms > 0 {
            Some(StreamId::new(self.ms - 1, u64::MAX))
        } else {
            None
        }
    }

    /// `<ms>-<seq>`.
    pub fn to_bytes(self) -> Bytes {
        let mut s = itoa::Buffer::new().format(self.ms).to_owned();
        s.push('-');
        s.push_str(itoa::Buffer::new().format(self.seq));
        Bytes::from(s)
    }

    /// The 16 big-endian bytes Redis keys its radix tree with (and writes in RDB files).
    pub fn encode(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.ms.to_be_bytes());
        b[8..].copy_from_slice(&self.seq.to_be_bytes());
        b
    }

    /// The ID of 16 big-endian bytes.
    pub fn decode(b: &[u8]) -> Option<StreamId> {
        if b.len() != 16 {
            return None;
        }
        let mut ms = [0u8; 8];
        let mut seq = [0u8; 8];
        ms.copy_from_slice(&b[..8]);
        seq.copy_from_slice(&b[8..]);
        Some(StreamId::new(
            u64::from_be_bytes(ms),
            u64::from_be_bytes(seq),
        ))
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// One entry, decoded: its ID and field-value pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEntry {
    /// The entry's ID.
    pub id: StreamId,
    /// Field, value, field, value …
    pub fields: Vec<Bytes>,
}

/// `stream-node-max-bytes` and `stream-node-max-entries` (0: no limit of that kind).
#[derive(Debug, Clone, Copy)]
pub struct NodeLimits {
    /// Bytes of a node's listpack before a new node is started.
    pub max_bytes: usize,
    /// Entries (live and deleted) of a node before a new node is started.
    pub max_entries: u64,
}

impl NodeLimits {
    /// Redis's defaults.
    pub const DEFAULT: NodeLimits = NodeLimits {
        max_bytes: 4096,
        max_entries: 100,
    };
}

/// The largest listpack Redis builds (and the largest entry it accepts), 1 GiB.
pub const LISTPACK_MAX_SIZE: usize = 1 << 30;

/// How XADD / XTRIM trim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trim {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Drop the entries below this ID.
    MinId(StreamId),
}

/// A stream.
#[derive(Debug, Clone, Default)]
pub struct Stream {
    nodes: BTreeMap<StreamId, Node>,
    length: u64,
    /// The ID of the last entry ever added (or set by XSETID).
    pub last_id: StreamId,
    /// The largest ID deleted by XDEL (XSETID may set it).
    pub max_deleted_id: StreamId,
    /// Entries ever added (XSETID may set it).
    pub entries_added: u64,
    /// The consumer groups by name.
    pub groups: BTreeMap<Bytes, Group>,
}

/// Why an append failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendError {
    /// The ID is not above the stream's last ID.
    IdTooSmall,
    /// The elements are too large for a listpack.
    TooLarge,
}

impl Stream {
    /// Live entries.
    pub fn len(&self) -> u64 {
        self.length
    }

    /// True without live entries (a stream key stays even then).
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// The nodes (RDB, MEMORY USAGE, tests).
    pub fn nodes(&self) -> impl DoubleEndedIterator<Item = (&StreamId, &Node)> {
        self.nodes.iter()
    }

    /// Rebuilds a stream from loaded parts; the nodes' listpacks are already validated.
    pub fn from_parts(nodes: BTreeMap<StreamId, Node>, length: u64) -> Stream {
        Stream {
            nodes,
            length,
            ..Stream::default()
        }
    }

    /// The heap bytes the stream holds (MEMORY USAGE's estimate).
    pub fn approx_memory(&self) -> usize {
        let nodes: usize = self.nodes.values().map(|n| n.heap_bytes() + 48).sum();
        let groups: usize = self.groups.values().map(|g| g.approx_memory()).sum();
        64 + nodes + groups
    }

    /// The first live entry's ID, `0-0` when empty.
    pub fn first_id(&self) -> StreamId {
        self.first_entry().map_or(StreamId::MIN, |e| e.id)
    }

    /// The first live entry.
    pub fn first_entry(&self) -> Option<StreamEntry> {
        self.range(StreamId::MIN, StreamId::MAX, false).next()
    }

    /// The last live entry.
    pub fn last_entry(&self) -> Option<StreamEntry> {
        self.range(StreamId::MIN, StreamId::MAX, true).next()
    }

    /// The next ID XADD `*` makes at `now_ms` (Redis's `streamNextID`): the clock if past
    /// the last ID, else the last ID plus one; None if that overflows.
    pub fn next_id(&self, now_ms: u64) -> Option<StreamId> {
        if now_ms > self.last_id.ms {
            Some(StreamId::new(now_ms, 0))
        } else {
            self.last_id.incr()
        }
    }

    /// Appends an entry (`fields`: field, value, …) with ID `id`, which must be above the
    /// last ID; starts a new node where Redis would.
    pub fn append(
        &mut self,
        id: StreamId,
        fields: &[Bytes],
        limits: NodeLimits,
    ) -> Result<(), AppendError> {
        if id <= self.last_id {
            return Err(AppendError::IdTooSmall);
        }
        let total: usize = fields.iter().map(|f| f.len()).sum();
        if total > LISTPACK_MAX_SIZE {
            return Err(AppendError::TooLarge);
        }
        let max_bytes = match limits.max_bytes {
            0 => LISTPACK_MAX_SIZE,
            n => n.min(LISTPACK_MAX_SIZE),
        };
        let tail = self.nodes.last_entry().filter(|n| {
            let node = n.get();
            !(node.bytes() + total >= max_bytes
                || (limits.max_entries != 0 && node.total() >= limits.max_entries))
        });
        match tail {
            Some(mut n) => {
                let master = *n.key();
                n.get_mut().append(master, id, fields);
            }
            None => {
                // The full tail gives back its spare capacity, as Redis shrinks a closed node.
                if let Some(mut last) = self.nodes.last_entry() {
                    last.get_mut().shrink();
                }
                self.nodes.insert(id, Node::new(id, fields));
            }
        }
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
        Ok(())
    }

    /// The live entries from `start` to `end` (inclusive), forward or reversed.
    pub fn range(&self, start: StreamId, end: StreamId, rev: bool) -> RangeIter<'_> {
        RangeIter {
            stream: self,
            start,
            end,
            rev,
            buf: Vec::new(),
            next_node: if rev { Some(end) } else { Some(start) },
            first: true,
        }
    }

    /// True if entry `id` exists (live).
    pub fn contains(&self, id: StreamId) -> bool {
        self.get(id).is_some()
    }

    /// Entry `id`, if live.
    pub fn get(&self, id: StreamId) -> Option<StreamEntry> {
        self.range(id, id, false).next()
    }

    /// Deletes entry `id`; false if it was not there. Drops its node when it empties.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((&master, node)) = self.nodes.range_mut(..=id).next_back() else {
            return false;
        };
        match node.delete(master, id) {
            node::Deleted::No => false,
            node::Deleted::Yes => {
                self.length -= 1;
                true
            }
            node::Deleted::LastOne => {
                self.nodes.remove(&master);
                self.length -= 1;
                true
            }
        }
    }

    /// Trims as Redis's `streamTrim`: whole nodes from the head while they can go, then
    /// (unless `approx`) entries inside the next node; `limit` (0: none) caps the entries
    /// removed. Returns how many were removed.
    pub fn trim(&mut self, how: Trim, approx: bool, limit: u64) -> u64 {
        let mut deleted = 0u64;
        while let Some(mut first) = self.nodes.first_entry() {
            if let Trim::MaxLen(max) = how
                && self.length <= max
            {
                break;
            }
            let master = *first.key();
            let entries = first.get().live();
            if limit != 0 && deleted + entries > limit {
                break;
            }
            let remove = match how {
                Trim::MaxLen(max) => self.length - entries >= max,
                Trim::MinId(min) => first.get().last_id(master) < min,
            };
            if remove {
                first.remove();
                self.length -= entries;
                deleted += entries;
                continue;
            }
            if approx {
                break;
            }
            let length = self.length;
            let removed = first.get_mut().trim_front(master, |id, removed| match how {
                Trim::MaxLen(max) => length - removed <= max,
                Trim::MinId(min) => id >= min,
            });
            self.length -= removed;
            deleted += removed;
            break;
        }
        deleted
    }
}

/// Iterates a stream's live entries over an ID range (see [`Stream::range`]); decodes one
/// node at a time.
pub struct RangeIter<'a> {
    stream: &'a Stream,
    start: StreamId,
    end: StreamId,
    rev: bool,
    /// The current node's matching entries, in the order they are returned (reversed).
    buf: Vec<StreamEntry>,
    /// Where the next node lookup starts; None when done.
    next_node: Option<StreamId>,
    first: bool,
}

impl Iterator for RangeIter<'_> {
    type Item = StreamEntry;
    fn next(&mut self) -> Option<StreamEntry> {
        loop {
            if let Some(e) = self.buf.pop() {
                return Some(e);
            }
            let from = self.next_node?;
            if self.start > self.end {
                self.next_node = None;
                return None;
            }
            let nodes = &self.stream.nodes;
            let found = if self.rev {
                nodes.range(..=from).next_back()
            } else if self.first {
                // The node holding `start` may begin before it.
                nodes
                    .range(..=from)
                    .next_back()
                    .or_else(|| nodes.range(from..).next())
            } else {
                nodes
                    .range((Bound::Included(from), Bound::Unbounded))
                    .next()
            };
            self.first = false;
            let Some((&master, node)) = found else {
                self.next_node = None;
                return None;
            };
            if self.rev {
                if master < self.start {
                    self.next_node = None;
                } else {
                    self.next_node = master.decr();
                }
            } else {
                if master > self.end {
                    self.next_node = None;
                    return None;
                }
                // The next node's key is above every ID of this node.
                self.next_node = node.last_id(master).incr();
                if node.last_id(master) >= self.end {
                    self.next_node = None;
                }
            }
            let (start, end) = (self.start, self.end);
            let mut got: Vec<StreamEntry> = node
                .entries(master)
                .filter(|e| !e.deleted && e.id >= start && e.id <= end)
                .map(|e| e.into_entry())
                .collect();
            if !self.rev {
                got.reverse();
            }
            self.buf = got;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fv(pairs: &[(&str, &str)]) -> Vec<Bytes> {
        pairs
            .iter()
            .flat_map(|(f, v)| [Bytes::from(f.to_string()), Bytes::from(v.to_string())])
            .collect()
    }

    fn ids(it: impl Iterator<Item = StreamEntry>) -> Vec<u64> {
        it.map(|e| e.id.ms).collect()
    }

    #[test]
    fn appends_ranges_deletes_and_trims_across_nodes() {
        let mut s = Stream::default();
        let limits = NodeLimits {
            max_bytes: 4096,
            max_entries: 10,
        };
        for i in 1..=35u64 {
            let f = if i % 3 == 0 {
                fv(&[("a", "1"), ("b", "x")])
            } else {
                fv(&[("other", &i.to_string())])
            };
            assert_eq!(s.append(StreamId::new(i, 0), &f, limits), Ok(()));
        }
        assert_eq!(
            s.append(StreamId::new(35, 0), &fv(&[("a", "1")]), limits),
            Err(AppendError::IdTooSmall)
        );
        assert_eq!(s.len(), 35);
        assert_eq!(s.nodes.len(), 4);
        assert_eq!(
            ids(s.range(StreamId::MIN, StreamId::MAX, false)),
            (1..=35).collect::<Vec<_>>()
        );
        assert_eq!(
            ids(s.range(StreamId::new(8, 0), StreamId::new(12, 0), true)),
            vec![12, 11, 10, 9, 8]
        );
        let e = s.get(StreamId::new(6, 0));
        assert_eq!(e.map(|e| e.fields), Some(fv(&[("a", "1"), ("b", "x")])));
        assert_eq!(
            s.get(StreamId::new(7, 0)).map(|e| e.fields),
            Some(fv(&[("other", "7")]))
        );
        assert!(s.delete(StreamId::new(5, 0)));
        assert!(!s.delete(StreamId::new(5, 0)));
        assert!(!s.contains(StreamId::new(5, 0)));
        assert_eq!(s.len(), 34);
        // Approximate trim keeps partial nodes.
        assert_eq!(s.trim(Trim::MaxLen(30), true, 0), 0);
        assert_eq!(s.trim(Trim::MaxLen(24), true, 0), 9);
        assert_eq!(s.len(), 25);
        assert_eq!(s.trim(Trim::MaxLen(22), false, 0), 3);
        assert_eq!(s.first_id(), StreamId::new(14, 0));
        assert_eq!(s.trim(Trim::MinId(StreamId::new(30, 0)), false, 0), 16);
        assert_eq!(s.first_id(), StreamId::new(30, 0));
        for i in 30..=35 {
            assert!(s.delete(StreamId::new(i, 0)));
        }
        assert!(s.is_empty());
        assert_eq!(s.nodes.len(), 0);
        assert_eq!(s.first_id(), StreamId::MIN);
    }

    #[test]
    fn ids_order_and_step() {
        assert_eq!(StreamId::new(1, u64::MAX).incr(), Some(StreamId::new(2, 0)));
        assert_eq!(StreamId::MAX.incr(), None);
        assert_eq!(StreamId::new(2, 0).decr(), Some(StreamId::new(1, u64::MAX)));
        assert_eq!(StreamId::MIN.decr(), None);
        let id = StreamId::new(123, 45);
        assert_eq!(StreamId::decode(&id.encode()), Some(id));
        assert_eq!(&id.to_bytes()[..], b"123-45");
    }
}
