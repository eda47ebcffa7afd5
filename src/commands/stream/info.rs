//! XINFO STREAM [FULL [COUNT n]], XINFO GROUPS, XINFO CONSUMERS, XINFO HELP.
//!
//! `radix-tree-nodes` is the node count of the radix tree Redis would hold for the same
//! node keys ([`rax_nodes`]), so the reply matches Redis's while the tree's shape is the
//! one its inserts build.

use bytes::Bytes;

use super::{entry_reply, id_reply, long_long, read_stream, subcommand_error};
use crate::engine::{ArgCursor, Command, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::store::stream::group::ENTRIES_READ_UNKNOWN;
use crate::store::stream::{Stream, StreamId};

fn field(name: &'static str) -> Reply {
    Reply::Bulk(Bytes::from_static(name.as_bytes()))
}

fn entries_read(n: i64) -> Reply {
    if n == ENTRIES_READ_UNKNOWN {
        Reply::Null
    } else {
        Reply::Int(n)
    }
}

fn lag(s: &Stream, g: &crate::store::stream::Group) -> Reply {
    s.group_lag(g).map_or(Reply::Null, Reply::Int)
}

fn stream_of<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> CmdResult<&'c mut Stream> {
    read_stream(ctx, key)?.ok_or(CmdError::NoSuchKey)
}

/// The node count of Redis's radix tree (`rax`) holding these 16-byte keys (sorted), as
/// its inserts shape it: a branching point is one node holding the first byte of each
/// branch, the rest of a branch up to the next branching point (or the key) one more node,
/// each key one node, and the root one node (holding the common prefix, if any).
pub(crate) fn rax_nodes(keys: &[[u8; 16]]) -> u64 {
    fn lcp(keys: &[[u8; 16]], from: usize) -> usize {
        let (a, b) = (&keys[0], &keys[keys.len() - 1]);
        (from..16).take_while(|&i| a[i] == b[i]).count()
    }
    fn vertex(keys: &[[u8; 16]], depth: usize) -> u64 {
        if depth >= 16 || keys.len() == 1 && depth == 16 {
            return 1;
        }
        let mut total = 1;
        let mut i = 0;
        while i < keys.len() {
            let b = keys[i][depth];
            let j = i + keys[i..].iter().take_while(|k| k[depth] == b).count();
            let group = &keys[i..j];
            let next = if group.len() == 1 {
                16
            } else {
                depth + 1 + lcp(group, depth + 1)
            };
            if next > depth + 1 {
                total += 1;
            }
            total += vertex(group, next);
            i = j;
        }
        total
    }
    if keys.is_empty() {
        return 1;
    }
    let common = if keys.len() == 1 { 16 } else { lcp(keys, 0) };
    if common > 0 {
        1 + vertex(keys, common)
    } else {
        vertex(keys, 0)
    }
}

/// XINFO STREAM key [FULL [COUNT count]]
pub(super) fn xinfo_stream(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match stream_info(ctx, args) {
        Ok(r) => r,
        Err(e) => e.into(),
    }
}

fn stream_info(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult<Reply> {
    let s = stream_of(ctx, args[2])?;
    let opts = &args[3..];
    let mut full = false;
    let mut count: i64 = 10;
    if !opts.is_empty() {
        if (opts.len() != 1 && opts.len() != 3) || !opts[0].eq_ignore_ascii_case(b"full") {
            return Err(subcommand_error(args));
        }
        full = true;
        if opts.len() == 3 {
            if !opts[1].eq_ignore_ascii_case(b"count") {
                return Err(subcommand_error(args));
            }
            count = long_long(opts[2])?;
            if count < 0 {
                count = 10;
            }
        }
    }
    let keys: Vec<[u8; 16]> = s.nodes().map(|(id, _)| id.encode()).collect();
    let mut m = vec![
        (field("length"), Reply::Int(s.len() as i64)),
        (field("radix-tree-keys"), Reply::Int(keys.len() as i64)),
        (
            field("radix-tree-nodes"),
            Reply::Int(rax_nodes(&keys) as i64),
        ),
        (field("last-generated-id"), id_reply(s.last_id)),
        (field("max-deleted-entry-id"), id_reply(s.max_deleted_id)),
        (field("entries-added"), Reply::Int(s.entries_added as i64)),
        (field("recorded-first-entry-id"), id_reply(s.first_id())),
    ];
    if !full {
        m.push((field("groups"), Reply::Int(s.groups.len() as i64)));
        m.push((
            field("first-entry"),
            s.first_entry().map_or(Reply::Null, entry_reply),
        ));
        m.push((
            field("last-entry"),
            s.last_entry().map_or(Reply::Null, entry_reply),
        ));
        return Ok(Reply::Map(m));
    }
    let limit = if count == 0 {
        usize::MAX
    } else {
        count as usize
    };
    m.push((
        field("entries"),
        Reply::Array(
            s.range(StreamId::MIN, StreamId::MAX, false)
                .take(limit)
                .map(entry_reply)
                .collect(),
        ),
    ));
    let groups = s
        .groups
        .iter()
        .map(|(name, g)| {
            let pending = g
                .pel
                .iter()
                .take(limit)
                .map(|(id, p)| {
                    Reply::Array(vec![
                        id_reply(*id),
                        Reply::Bulk(p.consumer.clone()),
                        Reply::Int(p.delivery_time as i64),
                        Reply::Int(p.delivery_count as i64),
                    ])
                })
                .collect();
            let consumers = g
                .consumers
                .iter()
                .map(|(cname, c)| {
                    let pending = c
                        .pending
                        .iter()
                        .take(limit)
                        .map(|id| {
                            let p = g.pel.get(id);
                            Reply::Array(vec![
                                id_reply(*id),
                                Reply::Int(p.map_or(0, |p| p.delivery_time as i64)),
                                Reply::Int(p.map_or(0, |p| p.delivery_count as i64)),
                            ])
                        })
                        .collect();
                    Reply::Map(vec![
                        (field("name"), Reply::Bulk(cname.clone())),
                        (field("seen-time"), Reply::Int(c.seen_time as i64)),
                        (field("pel-count"), Reply::Int(c.pending.len() as i64)),
                        (field("pending"), Reply::Array(pending)),
                    ])
                })
                .collect();
            Reply::Map(vec![
                (field("name"), Reply::Bulk(name.clone())),
                (field("last-delivered-id"), id_reply(g.last_id)),
                (field("entries-read"), entries_read(g.entries_read)),
                (field("lag"), lag(s, g)),
                (field("pel-count"), Reply::Int(g.pel.len() as i64)),
                (field("pending"), Reply::Array(pending)),
                (field("consumers"), Reply::Array(consumers)),
            ])
        })
        .collect();
    m.push((field("groups"), Reply::Array(groups)));
    Ok(Reply::Map(m))
}

/// XINFO GROUPS key
#[derive(Debug)]
pub(crate) struct XInfoGroups {
    key: Bytes,
}

impl Command<'_> for XInfoGroups {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(XInfoGroups {
            key: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let s = stream_of(ctx, &self.key)?;
        Ok(Reply::Array(
            s.groups
                .iter()
                .map(|(name, g)| {
                    Reply::Map(vec![
                        (field("name"), Reply::Bulk(name.clone())),
                        (field("consumers"), Reply::Int(g.consumers.len() as i64)),
                        (field("pending"), Reply::Int(g.pel.len() as i64)),
                        (field("last-delivered-id"), id_reply(g.last_id)),
                        (field("entries-read"), entries_read(g.entries_read)),
                        (field("lag"), lag(s, g)),
                    ])
                })
                .collect(),
        ))
    }
}

/// XINFO CONSUMERS key group
#[derive(Debug)]
pub(crate) struct XInfoConsumers {
    key: Bytes,
    group: Bytes,
}

impl Command<'_> for XInfoConsumers {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(XInfoConsumers {
            key: a.next_owned()?,
            group: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let now = ctx.now_ms as i64;
        let s = stream_of(ctx, &self.key)?;
        let Some(g) = s.groups.get(&self.group) else {
            return Err(CmdError::Other(
                format!(
                    "NOGROUP No such consumer group '{}' for key name '{}'",
                    String::from_utf8_lossy(&self.group),
                    String::from_utf8_lossy(&self.key)
                )
                .into(),
            ));
        };
        Ok(Reply::Array(
            g.consumers
                .iter()
                .map(|(name, c)| {
                    Reply::Map(vec![
                        (field("name"), Reply::Bulk(name.clone())),
                        (field("pending"), Reply::Int(c.pending.len() as i64)),
                        (field("idle"), Reply::Int((now - c.seen_time as i64).max(0))),
                    ])
                })
                .collect(),
        ))
    }
}

/// XINFO HELP
#[derive(Debug)]
pub(crate) struct XInfoHelp;

impl Command<'_> for XInfoHelp {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(XInfoHelp)
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        const LINES: &[&str] = &[
            "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
            "HELP",
            "    Prints this help.",
        ];
        Ok(Reply::Array(
            LINES.iter().map(|l| Reply::status(l)).collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rax_node_counts() {
        let k = |ms: u64, seq: u64| StreamId::new(ms, seq).encode();
        assert_eq!(rax_nodes(&[]), 1);
        assert_eq!(rax_nodes(&[k(1, 0)]), 2);
        // Two keys diverging at byte 7 (ms 1 and 2): root chain, branch, two
        // one-byte-short chains (bytes 8..16), two leaves.
        assert_eq!(rax_nodes(&[k(1, 0), k(2, 0)]), 6);
    }
}
