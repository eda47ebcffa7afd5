//! One stream node: a listpack in Redis's stream layout.
//!
//! ```text
//! master entry: count | deleted | num-fields | field_1 … field_N | 0
//! each entry:   flags | ms-diff | seq-diff | [num-fields | f_1 | v_1 …] or [v_1 … v_N] | lp-count
//! ```
//!
//! `count` is the node's live entries, `deleted` those flagged deleted; an entry whose
//! field names are the master's (flag SAMEFIELDS) stores only its values; the IDs are
//! differences from the node's key (the master ID); `lp-count` lets Redis walk backwards.

use bytes::Bytes;

use super::lp;
use super::{StreamEntry, StreamId};

/// The entry flag of a deleted entry.
pub const FLAG_DELETED: i64 = 1;
/// The entry flag of an entry that uses the master entry's field names.
pub const FLAG_SAMEFIELDS: i64 = 2;

/// A node's listpack.
#[derive(Debug, Clone)]
pub struct Node {
    lp: Vec<u8>,
}

/// An entry as it sits in its node.
#[derive(Debug)]
pub struct RawEntry {
    /// Its ID.
    pub id: StreamId,
    /// Flagged deleted.
    pub deleted: bool,
    /// Where its flags element starts.
    pub flags_pos: usize,
    /// Field, value, …
    pub fields: Vec<Bytes>,
}

impl RawEntry {
    /// The entry without its place.
    pub fn into_entry(self) -> StreamEntry {
        StreamEntry {
            id: self.id,
            fields: self.fields,
        }
    }
}

/// What deleting an entry did.
#[derive(Debug, PartialEq, Eq)]
pub enum Deleted {
    /// Not there (or already deleted).
    No,
    /// Flagged.
    Yes,
    /// It was the node's last live entry: the node must go.
    LastOne,
}

/// The master entry, read.
struct Master {
    count: i64,
    deleted: i64,
    fields: Vec<Bytes>,
    /// Where the first entry starts.
    end: usize,
}

impl Node {
    /// A node whose master entry (and first entry) is `id` with `fields`.
    pub fn new(id: StreamId, fields: &[Bytes]) -> Node {
        let mut enc = Vec::with_capacity(64);
        lp::encode_int_elem(&mut enc, 1);
        lp::encode_int_elem(&mut enc, 0);
        let n = fields.len() / 2;
        lp::encode_int_elem(&mut enc, n as i64);
        for f in fields.iter().step_by(2) {
            lp::encode(&mut enc, f);
        }
        lp::encode_int_elem(&mut enc, 0);
        let mut lp = lp::new();
        lp::append_encoded(&mut lp, &enc, n + 4);
        let mut node = Node { lp };
        node.push_entry(id, id, fields, true);
        node
    }

    /// A node from a listpack read from an RDB file, if it is one in the stream layout
    /// whose entries' IDs stay within `(master, …]`; returns it with its live count.
    pub fn from_listpack(master: StreamId, lp: Vec<u8>) -> Option<(Node, u64)> {
        lp::validate(&lp)?;
        let node = Node { lp };
        let m = node.master()?;
        if m.count < 1 || m.deleted < 0 {
            return None;
        }
        let mut live = 0i64;
        let mut deleted = 0i64;
        let mut pos = m.end;
        while lp::read(&node.lp, pos).is_some() {
            let (e, next) = node.read_entry(master, &m, pos)?;
            if e.id < master {
                return None;
            }
            if e.deleted {
                deleted += 1;
            } else {
                live += 1;
            }
            pos = next;
        }
        (live == m.count && deleted == m.deleted).then_some((node, live as u64))
    }

    /// The listpack (RDB).
    pub fn listpack(&self) -> &[u8] {
        &self.lp
    }

    /// The listpack's size.
    pub fn bytes(&self) -> usize {
        self.lp.len()
    }

    /// Gives back spare capacity.
    pub fn shrink(&mut self) {
        self.lp.shrink_to_fit();
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.lp.capacity()
    }

    /// Live entries.
    pub fn live(&self) -> u64 {
        self.master().map_or(0, |m| m.count.max(0) as u64)
    }

    /// Entries, live and deleted.
    pub fn total(&self) -> u64 {
        self.master()
            .map_or(0, |m| (m.count + m.deleted).max(0) as u64)
    }

    fn master(&self) -> Option<Master> {
        let (count, p) = lp::read(&self.lp, lp::HEADER)?;
        let (deleted, p) = lp::read(&self.lp, p)?;
        let (n, mut p) = lp::read(&self.lp, p)?;
        let n = n.int();
        if !(0..=i64::from(u32::MAX)).contains(&n) {
            return None;
        }
        // Each field takes at least two bytes: a count the listpack cannot hold is refused
        // before anything is allocated for it (a node may come from an RDB file).
        if n as usize > self.lp.len() / 2 {
            return None;
        }
        let mut fields = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let (f, next) = lp::read(&self.lp, p)?;
            fields.push(f.to_bytes());
            p = next;
        }
        let (_, end) = lp::read(&self.lp, p)?; // the master terminator
        Some(Master {
            count: count.int(),
            deleted: deleted.int(),
            fields,
            end,
        })
    }

    /// Reads the entry at `pos`; returns it and where the next one starts.
    fn read_entry(&self, master: StreamId, m: &Master, pos: usize) -> Option<(RawEntry, usize)> {
        let lp = &self.lp;
        let (flags, p) = lp::read(lp, pos)?;
        let (ms, p) = lp::read(lp, p)?;
        let (seq, mut p) = lp::read(lp, p)?;
        let flags = flags.int();
        let id = StreamId::new(
            master.ms.wrapping_add(ms.int() as u64),
            master.seq.wrapping_add(seq.int() as u64),
        );
        let mut fields = Vec::new();
        if flags & FLAG_SAMEFIELDS != 0 {
            fields.reserve(m.fields.len() * 2);
            for f in &m.fields {
                let (v, next) = lp::read(lp, p)?;
                fields.push(f.clone());
                fields.push(v.to_bytes());
                p = next;
            }
        } else {
            let (n, next) = lp::read(lp, p)?;
            p = next;
            let n = usize::try_from(n.int()).ok()?;
            if n > lp.len() {
                return None;
            }
            fields.reserve(n * 2);
            for _ in 0..n * 2 {
                let (x, next) = lp::read(lp, p)?;
                fields.push(x.to_bytes());
                p = next;
            }
        }
        let (_, next) = lp::read(lp, p)?; // lp-count
        Some((
            RawEntry {
                id,
                deleted: flags & FLAG_DELETED != 0,
                flags_pos: pos,
                fields,
            },
            next,
        ))
    }

    /// Every entry, live and deleted, in ID order.
    pub fn entries(&self, master: StreamId) -> std::vec::IntoIter<RawEntry> {
        let mut out = Vec::new();
        if let Some(m) = self.master() {
            let mut pos = m.end;
            while let Some((e, next)) = self.read_entry(master, &m, pos) {
                out.push(e);
                pos = next;
            }
        }
        out.into_iter()
    }

    /// The last entry's ID, deleted or not (Redis's `lpGetEdgeStreamID`).
    pub fn last_id(&self, master: StreamId) -> StreamId {
        self.entries(master).next_back().map_or(master, |e| e.id)
    }

    /// Appends an entry to a node keyed `master`.
    pub fn append(&mut self, master: StreamId, id: StreamId, fields: &[Bytes]) {
        let Some(m) = self.master() else {
            return;
        };
        let same = m.fields.len() * 2 == fields.len()
            && m.fields
                .iter()
                .zip(fields.iter().step_by(2))
                .all(|(a, b)| a == b);
        lp::replace_int(&mut self.lp, lp::HEADER, m.count + 1);
        self.push_entry(master, id, fields, same);
    }

    fn push_entry(&mut self, master: StreamId, id: StreamId, fields: &[Bytes], same: bool) {
        let mut enc = Vec::with_capacity(16 + fields.iter().map(|f| f.len() + 2).sum::<usize>());
        let n = fields.len() / 2;
        let mut elems = 4; // flags, ms-diff, seq-diff, lp-count
        lp::encode_int_elem(&mut enc, if same { FLAG_SAMEFIELDS } else { 0 });
        lp::encode_int_elem(&mut enc, id.ms.wrapping_sub(master.ms) as i64);
        lp::encode_int_elem(&mut enc, id.seq.wrapping_sub(master.seq) as i64);
        if same {
            for v in fields.iter().skip(1).step_by(2) {
                lp::encode(&mut enc, v);
            }
            elems += n;
            lp::encode_int_elem(&mut enc, (n + 3) as i64);
        } else {
            lp::encode_int_elem(&mut enc, n as i64);
            for f in fields {
                lp::encode(&mut enc, f);
            }
            elems += 1 + 2 * n;
            lp::encode_int_elem(&mut enc, (2 * n + 4) as i64);
        }
        lp::append_encoded(&mut self.lp, &enc, elems);
    }

    /// Flags entry `id` deleted and updates the master counts.
    pub fn delete(&mut self, master: StreamId, id: StreamId) -> Deleted {
        let Some(e) = self.entries(master).find(|e| e.id == id && !e.deleted) else {
            return Deleted::No;
        };
        let Some(m) = self.master() else {
            return Deleted::No;
        };
        if m.count <= 1 {
            return Deleted::LastOne;
        }
        self.flag_deleted(e.flags_pos);
        self.set_counts(m.count - 1, m.deleted + 1);
        Deleted::Yes
    }

    fn flag_deleted(&mut self, flags_pos: usize) {
        let flags = lp::read(&self.lp, flags_pos).map_or(0, |(f, _)| f.int());
        // Flags are 0..=3, one byte either way: the entry keeps its size.
        lp::replace_int(&mut self.lp, flags_pos, flags | FLAG_DELETED);
    }

    fn set_counts(&mut self, count: i64, deleted: i64) {
        lp::replace_int(&mut self.lp, lp::HEADER, count);
        if let Some((_, p)) = lp::read(&self.lp, lp::HEADER) {
            lp::replace_int(&mut self.lp, p, deleted);
        }
    }

    /// Flags entries from the front until `stop(id, removed so far)` says stop (checked
    /// before every entry, deleted ones included, as Redis's trim does); returns how many
    /// live entries it flagged. The node stays even if it emptied (Redis's trim keeps it).
    pub fn trim_front(
        &mut self,
        master: StreamId,
        mut stop: impl FnMut(StreamId, u64) -> bool,
    ) -> u64 {
        let Some(m) = self.master() else {
            return 0;
        };
        let mut removed = 0u64;
        for e in self.entries(master) {
            if stop(e.id, removed) {
                break;
            }
            if !e.deleted {
                self.flag_deleted(e.flags_pos);
                removed += 1;
            }
        }
        if removed > 0 {
            self.set_counts(m.count - removed as i64, m.deleted + removed as i64);
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_redis_s_listpack() {
        let f = |s: &[&str]| {
            s.iter()
                .map(|x| Bytes::from(x.to_string()))
                .collect::<Vec<_>>()
        };
        let m = StreamId::new(1000, 0);
        let mut n = Node::new(m, &f(&["a", "1", "b", "2"]));
        n.append(m, StreamId::new(1000, 1), &f(&["a", "3", "b", "4"]));
        n.append(m, StreamId::new(1001, 0), &f(&["c", "5"]));
        assert_eq!(n.live(), 3);
        // 1 0 2 a b 0 | 2 0 0 1 2 5 | 2 0 1 3 4 5 | 0 1 -1000? no: seq-diff 0 …
        let all: Vec<_> = n.entries(m).map(|e| (e.id, e.fields)).collect();
        assert_eq!(all[1], (StreamId::new(1000, 1), f(&["a", "3", "b", "4"])));
        assert_eq!(all[2], (StreamId::new(1001, 0), f(&["c", "5"])));
        assert_eq!(n.delete(m, StreamId::new(1000, 1)), Deleted::Yes);
        assert_eq!(n.delete(m, StreamId::new(1000, 1)), Deleted::No);
        assert_eq!(n.live(), 2);
        assert_eq!(n.total(), 3);
        let (again, live) = Node::from_listpack(m, n.listpack().to_vec()).unwrap_or((n.clone(), 0));
        assert_eq!(live, 2);
        assert_eq!(again.listpack(), n.listpack());
        assert_eq!(n.last_id(m), StreamId::new(1001, 0));
    }

    #[test]
    fn hostile_listpacks_are_refused_without_panicking() {
        let m = StreamId::new(1, 0);
        let f = |s: &[&str]| {
            s.iter()
                .map(|x| Bytes::from(x.to_string()))
                .collect::<Vec<_>>()
        };
        let good = Node::new(m, &f(&["a", "1"])).listpack().to_vec();
        // Every truncation and every single-byte change either loads or is refused.
        for cut in 0..good.len() {
            assert!(Node::from_listpack(m, good[..cut].to_vec()).is_none());
        }
        for i in 0..good.len() {
            for b in [0u8, 1, 0x7f, 0x80, 0xbf, 0xc0, 0xf0, 0xf4, 0xff] {
                let mut bad = good.clone();
                bad[i] = b;
                let _ = Node::from_listpack(m, bad);
            }
        }
        // A master entry claiming four billion fields.
        let mut enc = Vec::new();
        for n in [1i64, 0, u32::MAX as i64, 0] {
            lp::encode_int_elem(&mut enc, n);
        }
        let mut huge = lp::new();
        lp::append_encoded(&mut huge, &enc, 4);
        assert!(Node::from_listpack(m, huge).is_none());
    }
}
