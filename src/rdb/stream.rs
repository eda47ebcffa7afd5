//! Streams in RDB files and DUMP payloads: Redis 7.0's `RDB_TYPE_STREAM_LISTPACKS_2` (19),
//! written as Redis writes it, and read along with the older `RDB_TYPE_STREAM_LISTPACKS`
//! (15, without the first ID, tombstone and counters Redis 7.0 added) and Redis 7.2's
//! `RDB_TYPE_STREAM_LISTPACKS_3` (21, with a consumer's active time, which 7.0 lacks).
//!
//! Layout: the node count; per node its 16-byte master ID and its listpack (as strings);
//! the length; the last ID, the first ID and the largest deleted ID (two lengths each,
//! type 19 only for the last two) and `entries-added` (type 19); the groups: name, last ID,
//! `entries-read` (type 19), the PEL (raw 16-byte ID, 8-byte delivery time, delivery count
//! per entry), the consumers (name, 8-byte seen time, their pending IDs, raw).

use std::collections::BTreeMap;

use super::{R, RdbError, Reader, write_len, write_string};
use crate::store::Value;
use crate::store::stream::{Consumer, Group, Node, Pending, Stream, StreamId};

/// Redis 7.0's stream type.
pub(super) const TYPE_STREAM_LISTPACKS_2: u8 = 19;
/// Redis 5/6's stream type.
pub(super) const TYPE_STREAM_LISTPACKS: u8 = 15;
/// Redis 7.2's stream type (consumers also keep an active time, dropped here: 7.0 has none).
pub(super) const TYPE_STREAM_LISTPACKS_3: u8 = 21;

fn write_id(out: &mut Vec<u8>, id: StreamId) {
    write_len(out, id.ms);
    write_len(out, id.seq);
}

/// Writes a stream value (type byte included).
pub(super) fn write(out: &mut Vec<u8>, s: &Stream) {
    out.push(TYPE_STREAM_LISTPACKS_2);
    let nodes: Vec<_> = s.nodes().collect();
    write_len(out, nodes.len() as u64);
    for (master, node) in nodes {
        write_len(out, 16);
        out.extend_from_slice(&master.encode());
        write_len(out, node.listpack().len() as u64);
        out.extend_from_slice(node.listpack());
    }
    write_len(out, s.len());
    write_id(out, s.last_id);
    write_id(out, s.first_id());
    write_id(out, s.max_deleted_id);
    write_len(out, s.entries_added);
    write_len(out, s.groups.len() as u64);
    for (name, g) in &s.groups {
        write_string(out, name);
        write_id(out, g.last_id);
        // -1 (unknown) is written as the unsigned length it casts to, as Redis does.
        write_len(out, g.entries_read as u64);
        write_len(out, g.pel.len() as u64);
        for (id, p) in &g.pel {
            out.extend_from_slice(&id.encode());
            out.extend_from_slice(&p.delivery_time.to_le_bytes());
            write_len(out, p.delivery_count);
        }
        write_len(out, g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            write_string(out, cname);
            out.extend_from_slice(&c.seen_time.to_le_bytes());
            write_len(out, c.pending.len() as u64);
            for id in &c.pending {
                out.extend_from_slice(&id.encode());
            }
        }
    }
}

fn read_id(r: &mut Reader<'_>) -> R<StreamId> {
    Ok(StreamId::new(r.len()?, r.len()?))
}

fn read_raw_id(r: &mut Reader<'_>) -> R<StreamId> {
    StreamId::decode(r.take(16)?).ok_or(RdbError::BadFormat)
}

fn read_u64_le(r: &mut Reader<'_>) -> R<u64> {
    let b = r.take(8)?;
    let mut x = [0u8; 8];
    x.copy_from_slice(b);
    Ok(u64::from_le_bytes(x))
}

/// A length-prefixed count that may be 0, bounded by the bytes left (each item ≥ `min`).
fn small_count(r: &mut Reader<'_>, min: u64) -> R<usize> {
    let n = r.len()?;
    if n.saturating_mul(min) > r.buf.len() as u64 {
        return Err(RdbError::BadFormat);
    }
    usize::try_from(n).map_err(|_| RdbError::BadFormat)
}

/// Reads a stream of type `t` (19 or 15), checking what Redis's loader checks: every node
/// a valid stream listpack under its master ID, counts that add up, consumers' pending
/// entries present in their group's PEL.
pub(super) fn read(r: &mut Reader<'_>, t: u8) -> R<Value> {
    let bad = RdbError::BadFormat;
    let n_nodes = small_count(r, 2)?;
    let mut nodes = BTreeMap::new();
    let mut live = 0u64;
    for _ in 0..n_nodes {
        let key = r.string()?;
        let master = StreamId::decode(&key).ok_or(bad)?;
        let lp = r.string()?.to_vec();
        let (node, n) = Node::from_listpack(master, lp).ok_or(bad)?;
        if nodes.insert(master, node).is_some() {
            return Err(bad);
        }
        live += n;
    }
    let length = r.len()?;
    if length != live {
        return Err(bad);
    }
    let mut s = Stream::from_parts(nodes, length);
    s.last_id = read_id(r)?;
    let v7 = t != TYPE_STREAM_LISTPACKS;
    if v7 {
        let _first = read_id(r)?;
        s.max_deleted_id = read_id(r)?;
        s.entries_added = r.len()?;
    } else {
        // Redis 6 kept no counter: Redis estimates it as the length.
        s.entries_added = length;
    }
    if s.last_entry().is_some_and(|e| e.id > s.last_id) {
        return Err(bad);
    }
    let n_groups = small_count(r, 4)?;
    for _ in 0..n_groups {
        let name = r.string()?;
        let last_id = read_id(r)?;
        let entries_read = if v7 {
            r.len()? as i64
        } else {
            s.estimate_entries_read(last_id)
        };
        let mut g = Group::new(last_id, entries_read);
        let n_pel = small_count(r, 17)?;
        for _ in 0..n_pel {
            let id = read_raw_id(r)?;
            let delivery_time = read_u64_le(r)?;
            let delivery_count = r.len()?;
            g.pel.insert(
                id,
                Pending {
                    consumer: bytes::Bytes::new(),
                    delivery_time,
                    delivery_count,
                },
            );
        }
        let n_consumers = small_count(r, 10)?;
        for _ in 0..n_consumers {
            let cname = r.string()?;
            let seen_time = read_u64_le(r)?;
            if t == TYPE_STREAM_LISTPACKS_3 {
                read_u64_le(r)?;
            }
            let n = small_count(r, 16)?;
            let mut c = Consumer {
                seen_time,
                ..Consumer::default()
            };
            for _ in 0..n {
                let id = read_raw_id(r)?;
                let p = g.pel.get_mut(&id).ok_or(bad)?;
                if !p.consumer.is_empty() {
                    return Err(bad);
                }
                p.consumer = cname.clone();
                c.pending.insert(id);
            }
            if g.consumers.insert(cname, c).is_some() {
                return Err(bad);
            }
        }
        // Every pending entry has an owner.
        if g.pel.values().any(|p| p.consumer.is_empty()) {
            return Err(bad);
        }
        if s.groups.insert(name, g).is_some() {
            return Err(bad);
        }
    }
    Ok(Value::Stream(Box::new(s)))
}
