//! The consumer-group commands: XGROUP (CREATE, SETID, DESTROY, CREATECONSUMER,
//! DELCONSUMER, HELP), XACK, XPENDING (summary and extended forms), XCLAIM, XAUTOCLAIM.

use bytes::Bytes;

use super::read::{setid_effect, xclaim_effect};
use super::write::propagate;
use super::{
    entry_reply, id_reply, long_long, lookup_stream, parse_loose_id, parse_strict_id, read_stream,
    subcommand_error,
};
use crate::engine::{ArgCursor, Command, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::services::notify::class;
use crate::store::Value;
use crate::store::stream::group::ENTRIES_READ_UNKNOWN;
use crate::store::stream::{Group, Stream, StreamId};

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn no_key_or_group(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::Other(
        format!(
            "NOGROUP No such key '{}' or consumer group '{}'",
            lossy(key),
            lossy(group)
        )
        .into(),
    )
}

/// An interval's start as XPENDING / XAUTOCLAIM read it (`(` exclusive).
fn interval_start(arg: &[u8]) -> CmdResult<StreamId> {
    if arg.len() > 1 && arg[0] == b'(' {
        parse_strict_id(&arg[1..], 0)?
            .incr()
            .ok_or_else(|| CmdError::msg("ERR invalid start ID for the interval"))
    } else {
        parse_loose_id(arg, 0)
    }
}

fn interval_end(arg: &[u8]) -> CmdResult<StreamId> {
    if arg.len() > 1 && arg[0] == b'(' {
        parse_strict_id(&arg[1..], u64::MAX)?
            .decr()
            .ok_or_else(|| CmdError::msg("ERR invalid end ID for the interval"))
    } else {
        parse_loose_id(arg, u64::MAX)
    }
}

/// The handler of every XGROUP subcommand (Redis's `xgroupCommand`: options and the key
/// are checked before the subcommand's own arity).
pub(super) fn xgroup(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match xgroup_apply(ctx, args) {
        Ok(r) => r,
        Err(e) => e.into(),
    }
}

const XGROUP_HELP: &[&str] = &[
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Prints this help.",
];

fn xgroup_apply(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult<Reply> {
    let sub = &args[1];
    let is = |name: &str| sub.eq_ignore_ascii_case(name.as_bytes());
    let argc = args.len();
    let mut mkstream = false;
    let mut entries_read = ENTRIES_READ_UNKNOWN;
    let (db, now) = (ctx.db(), ctx.now_ms);
    let mut exists = false;
    if argc >= 4 {
        let (create, setid) = (is("create"), is("setid"));
        let mut i = 5;
        while i < argc {
            if create && args[i].eq_ignore_ascii_case(b"mkstream") {
                mkstream = true;
                i += 1;
            } else if (create || setid)
                && args[i].eq_ignore_ascii_case(b"entriesread")
                && i + 1 < argc
            {
                entries_read = long_long(args[i + 1])?;
                if entries_read < 0 && entries_read != ENTRIES_READ_UNKNOWN {
                    return Err(CmdError::msg(
                        "ERR value for ENTRIESREAD must be positive or -1",
                    ));
                }
                i += 2;
            } else {
                return Err(subcommand_error(args));
            }
        }
        exists = lookup_stream(ctx, args[2])?.is_some();
    }
    let key = args
        .get(2)
        .map(|a| Bytes::copy_from_slice(a))
        .unwrap_or_default();
    let name = args
        .get(3)
        .map(|a| Bytes::copy_from_slice(a))
        .unwrap_or_default();
    if argc >= 4 && !mkstream {
        let Some(s) = lookup_stream(ctx, &key)? else {
            return Err(CmdError::msg(
                "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.",
            ));
        };
        if !s.groups.contains_key(&name)
            && (is("setid") || is("createconsumer") || is("delconsumer"))
        {
            return Err(CmdError::Other(
                format!(
                    "NOGROUP No such consumer group '{}' for key name '{}'",
                    lossy(&name),
                    lossy(&key)
                )
                .into(),
            ));
        }
    }
    if argc == 2 && is("help") {
        return Ok(Reply::Array(
            XGROUP_HELP.iter().map(|l| Reply::status(l)).collect(),
        ));
    }
    if is("create") && (5..=8).contains(&argc) {
        let id = if args[4] == b"$" {
            match lookup_stream(ctx, &key)? {
                Some(s) => s.last_id,
                None => StreamId::MIN,
            }
        } else {
            parse_strict_id(args[4], 0)?
        };
        if !exists {
            ctx.store.set(db, &key, Value::Stream(Box::default()), None);
        }
        let Some(s) = lookup_stream(ctx, &key)? else {
            return Ok(Reply::Null);
        };
        if s.groups.contains_key(&name) {
            return Err(CmdError::msg(
                "BUSYGROUP Consumer Group name already exists",
            ));
        }
        s.groups.insert(name, Group::new(id, entries_read));
        if !exists {
            crate::services::blocking::note_ready(ctx, db, key.clone());
        }
        ctx.notify(class::STREAM, "xgroup-create", &key);
        propagate(ctx, crate::engine::args::owned(args));
        return Ok(Reply::ok());
    }
    if is("setid") && (argc == 5 || argc == 7) {
        let Some(s) = lookup_stream(ctx, &key)? else {
            return Err(subcommand_error(args));
        };
        let id = if args[4] == b"$" {
            s.last_id
        } else {
            parse_loose_id(args[4], 0)?
        };
        if let Some(g) = s.groups.get_mut(&name) {
            g.last_id = id;
            g.entries_read = entries_read;
        }
        ctx.notify(class::STREAM, "xgroup-setid", &key);
        propagate(ctx, crate::engine::args::owned(args));
        return Ok(Reply::ok());
    }
    if is("destroy") && argc == 4 {
        let removed = lookup_stream(ctx, &key)?.is_some_and(|s| s.groups.remove(&name).is_some());
        if !removed {
            return Ok(Reply::Int(0));
        }
        ctx.notify(class::STREAM, "xgroup-destroy", &key);
        crate::services::blocking::note_ready(ctx, db, key.clone());
        propagate(ctx, crate::engine::args::owned(args));
        return Ok(Reply::Int(1));
    }
    if is("createconsumer") && argc == 5 {
        let created = match lookup_stream(ctx, &key)?.and_then(|s| s.groups.get_mut(&name)) {
            Some(g) => {
                g.consumer_or_create(&Bytes::copy_from_slice(args[4]), now)
                    .1
            }
            None => false,
        };
        if created {
            ctx.notify(class::STREAM, "xgroup-createconsumer", &key);
            propagate(ctx, crate::engine::args::owned(args));
        }
        return Ok(Reply::Int(i64::from(created)));
    }
    if is("delconsumer") && argc == 5 {
        let pending = lookup_stream(ctx, &key)?
            .and_then(|s| s.groups.get_mut(&name))
            .and_then(|g| g.delete_consumer(args[4]));
        if let Some(n) = pending {
            ctx.notify(class::STREAM, "xgroup-delconsumer", &key);
            propagate(ctx, crate::engine::args::owned(args));
            return Ok(Reply::Int(n as i64));
        }
        return Ok(Reply::Int(0));
    }
    Err(subcommand_error(args))
}

/// XACK key group id [id …]
#[derive(Debug)]
pub(crate) struct XAck {
    args: Vec<Bytes>,
}

impl super::Named for XAck {
    fn name_slot(&mut self) -> &mut Bytes {
        &mut self.args[0]
    }
}

impl Command<'_> for XAck {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let mut args = vec![Bytes::from_static(b"XACK")];
        args.extend(a.rest().iter().map(|x| Bytes::copy_from_slice(x)));
        Ok(XAck { args })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (key, group) = (&self.args[1], &self.args[2]);
        // The key and group are looked up before the IDs are parsed, as Redis does.
        let has_group = read_stream(ctx, key)?.is_some_and(|s| s.groups.contains_key(group));
        if !has_group {
            return Ok(Reply::Int(0));
        }
        let ids = self.args[3..]
            .iter()
            .map(|x| parse_strict_id(x, 0))
            .collect::<CmdResult<Vec<_>>>()?;
        let mut acked = 0;
        if let Some(g) = lookup_stream(ctx, key)?.and_then(|s| s.groups.get_mut(group)) {
            acked = ids.into_iter().filter(|&id| g.ack(id)).count();
        }
        if acked > 0 {
            propagate(ctx, self.args);
        }
        Ok(Reply::Int(acked as i64))
    }
}

/// XPENDING key group [[IDLE min-idle] start end count [consumer]]
#[derive(Debug)]
pub(crate) struct XPending {
    args: Vec<Bytes>,
}

impl Command<'_> for XPending {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let mut args = vec![Bytes::from_static(b"XPENDING")];
        args.extend(a.rest().iter().map(|x| Bytes::copy_from_slice(x)));
        Ok(XPending { args })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let args = &self.args;
        let argc = args.len();
        if argc != 3 && !(6..=9).contains(&argc) {
            return Err(CmdError::Syntax);
        }
        let mut ext = None;
        if argc >= 6 {
            let mut at = 3;
            let mut min_idle = 0;
            if args[3].eq_ignore_ascii_case(b"idle") {
                min_idle = long_long(&args[4])?;
                if argc < 8 {
                    return Err(CmdError::Syntax);
                }
                at += 2;
            }
            let count = long_long(&args[at + 2])?.max(0);
            let start = interval_start(&args[at])?;
            let end = interval_end(&args[at + 1])?;
            let consumer = args.get(at + 3).cloned();
            ext = Some((min_idle, count, start, end, consumer));
        }
        let now = ctx.now_ms;
        let (key, group) = (&args[1], &args[2]);
        let g = read_stream(ctx, key)?
            .and_then(|s| s.groups.get(group))
            .ok_or_else(|| no_key_or_group(key, group))?;
        let Some((min_idle, count, start, end, consumer)) = ext else {
            if g.pel.is_empty() {
                return Ok(Reply::Array(vec![
                    Reply::Int(0),
                    Reply::Null,
                    Reply::Null,
                    Reply::NullArray,
                ]));
            }
            let first = g.pel.keys().next().copied().unwrap_or_default();
            let last = g.pel.keys().next_back().copied().unwrap_or_default();
            let owners = g
                .consumers
                .iter()
                .filter(|(_, c)| !c.pending.is_empty())
                .map(|(n, c)| {
                    Reply::Array(vec![
                        Reply::Bulk(n.clone()),
                        Reply::Bulk(Bytes::from(c.pending.len().to_string())),
                    ])
                })
                .collect();
            return Ok(Reply::Array(vec![
                Reply::Int(g.pel.len() as i64),
                id_reply(first),
                id_reply(last),
                Reply::Array(owners),
            ]));
        };
        let ids: Vec<StreamId> = match &consumer {
            Some(name) => match g.consumers.get(name) {
                None => return Ok(Reply::Array(Vec::new())),
                Some(c) if start <= end => c.pending.range(start..=end).copied().collect(),
                Some(_) => Vec::new(),
            },
            None if start <= end => g.pel.range(start..=end).map(|(id, _)| *id).collect(),
            None => Vec::new(),
        };
        let mut out = Vec::new();
        let mut left = count;
        for id in ids {
            if left == 0 {
                break;
            }
            let Some(p) = g.pel.get(&id) else { continue };
            let idle = (now as i64).saturating_sub(p.delivery_time as i64);
            if min_idle != 0 && idle < min_idle {
                continue;
            }
            left -= 1;
            out.push(Reply::Array(vec![
                id_reply(id),
                Reply::Bulk(p.consumer.clone()),
                Reply::Int(idle.max(0)),
                Reply::Int(p.delivery_count as i64),
            ]));
        }
        Ok(Reply::Array(out))
    }
}

/// The stream and group of XCLAIM / XAUTOCLAIM, or NOGROUP.
fn stream_with_group<'c>(
    ctx: &'c mut Ctx<'_>,
    key: &Bytes,
    group: &Bytes,
) -> CmdResult<&'c mut Stream> {
    match read_stream(ctx, key)? {
        Some(s) if s.groups.contains_key(group) => Ok(s),
        _ => Err(no_key_or_group(key, group)),
    }
}

fn c_text(a: &[u8]) -> String {
    lossy(a.iter().position(|&b| b == 0).map_or(a, |n| &a[..n]))
}

/// XCLAIM key group consumer min-idle-time id [id …] [IDLE ms] [TIME ms] [RETRYCOUNT n]
/// [FORCE] [JUSTID] [LASTID id]
pub(super) fn xclaim(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match xclaim_apply(ctx, args) {
        Ok(r) => r,
        Err(e) => e.into(),
    }
}

fn xclaim_apply(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult<Reply> {
    let named = crate::engine::args::owned(&args[1..4]);
    let (key, group, name) = (&named[0], &named[1], &named[2]);
    stream_with_group(ctx, key, group)?;
    let bad = |what: &'static str| move |_| CmdError::msg(what);
    let min_idle = long_long(args[4])
        .map_err(bad("ERR Invalid min-idle-time argument for XCLAIM"))?
        .max(0);
    let mut j = 5;
    let mut ids = Vec::new();
    while j < args.len() {
        match parse_strict_id(args[j], 0) {
            Ok(id) => ids.push((id, args[j])),
            Err(_) => break,
        }
        j += 1;
    }
    let now = ctx.now_ms as i64;
    let (mut force, mut justid) = (false, false);
    let mut delivery: i64 = -1;
    let mut retry: i64 = -1;
    let mut last_id = StreamId::MIN;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let o = &args[j];
        if o.eq_ignore_ascii_case(b"force") {
            force = true;
        } else if o.eq_ignore_ascii_case(b"justid") {
            justid = true;
        } else if o.eq_ignore_ascii_case(b"idle") && more > 0 {
            j += 1;
            let idle =
                long_long(args[j]).map_err(bad("ERR Invalid IDLE option argument for XCLAIM"))?;
            delivery = now.wrapping_sub(idle);
        } else if o.eq_ignore_ascii_case(b"time") && more > 0 {
            j += 1;
            delivery =
                long_long(args[j]).map_err(bad("ERR Invalid TIME option argument for XCLAIM"))?;
        } else if o.eq_ignore_ascii_case(b"retrycount") && more > 0 {
            j += 1;
            retry = long_long(args[j])
                .map_err(bad("ERR Invalid RETRYCOUNT option argument for XCLAIM"))?;
        } else if o.eq_ignore_ascii_case(b"lastid") && more > 0 {
            j += 1;
            last_id = parse_strict_id(args[j], 0)?;
        } else {
            return Err(CmdError::Other(
                format!("ERR Unrecognized XCLAIM option '{}'", c_text(o)).into(),
            ));
        }
        j += 1;
    }
    let s = stream_with_group(ctx, key, group)?;
    let Some(mut g) = s.groups.remove(group) else {
        return Ok(Reply::Array(Vec::new()));
    };
    let mut propagate_last = false;
    if last_id > g.last_id {
        g.last_id = last_id;
        propagate_last = true;
    }
    if delivery == -1 || delivery < 0 || delivery > now {
        delivery = now;
    }
    let mut out = Vec::new();
    let mut effects = Vec::new();
    let mut created = false;
    for (id, arg) in ids {
        let entry = s.get(id);
        let Some(entry) = entry else {
            if g.pel.contains_key(&id) {
                effects.push(with_id_arg(
                    xclaim_effect(key, group, &g, id),
                    Bytes::copy_from_slice(arg),
                ));
                propagate_last = false;
                g.ack(id);
            }
            continue;
        };
        let existed = g.pel.contains_key(&id);
        if !existed && !force {
            continue;
        }
        if existed && min_idle != 0 {
            let idle = now - g.pel.get(&id).map_or(0, |p| p.delivery_time as i64);
            if idle < min_idle {
                continue;
            }
        }
        if !g.consumers.contains_key(name) {
            created = true;
        }
        let (c, _) = g.consumer_or_create(name, now as u64);
        c.seen_time = now as u64;
        let before = if existed {
            g.pel.get(&id).map_or(0, |p| p.delivery_count)
        } else {
            1
        };
        let count = if retry >= 0 {
            retry as u64
        } else if !justid {
            before + 1
        } else {
            before
        };
        g.assign(id, name, delivery as u64, count);
        out.push(if justid {
            id_reply(id)
        } else {
            entry_reply(entry)
        });
        effects.push(with_id_arg(
            xclaim_effect(key, group, &g, id),
            Bytes::copy_from_slice(arg),
        ));
        propagate_last = false;
    }
    if propagate_last {
        effects.push(setid_effect(key, group, &g));
    }
    s.groups.insert(group.clone(), g);
    if created {
        ctx.notify(class::STREAM, "xgroup-createconsumer", key);
    }
    for e in effects {
        propagate(ctx, e);
    }
    Ok(Reply::Array(out))
}

/// XCLAIM propagates the ID as the client wrote it.
fn with_id_arg(mut argv: Vec<Bytes>, arg: Bytes) -> Vec<Bytes> {
    argv[5] = arg;
    argv
}

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]
pub(super) fn xautoclaim(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match xautoclaim_apply(ctx, args) {
        Ok(r) => r,
        Err(e) => e.into(),
    }
}

fn xautoclaim_apply(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult<Reply> {
    let named = crate::engine::args::owned(&args[1..4]);
    let (key, group, name) = (&named[0], &named[1], &named[2]);
    let min_idle = long_long(args[4])
        .map_err(|_| CmdError::msg("ERR Invalid min-idle-time argument for XAUTOCLAIM"))?
        .max(0);
    let start = interval_start(args[5])?;
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if args[j].eq_ignore_ascii_case(b"count") && more > 0 {
            let max = i64::MAX / 16;
            count = match crate::num::parse_i64(args[j + 1]) {
                Some(n) if (1..=max).contains(&n) => n,
                _ => return Err(CmdError::msg("ERR COUNT must be > 0")),
            };
            j += 1;
        } else if args[j].eq_ignore_ascii_case(b"justid") {
            justid = true;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let now = ctx.now_ms;
    let s = stream_with_group(ctx, key, group)?;
    let Some(mut g) = s.groups.remove(group) else {
        return Ok(Reply::Array(Vec::new()));
    };
    let mut attempts = count.saturating_mul(10);
    let mut cursor = Some(start);
    let mut out = Vec::new();
    let mut deleted = Vec::new();
    let mut effects = Vec::new();
    let mut created = false;
    while attempts > 0 && count > 0 {
        attempts -= 1;
        let Some(id) = cursor.and_then(|c| g.pel.range(c..).next().map(|(id, _)| *id)) else {
            cursor = None;
            break;
        };
        cursor = id.incr();
        let Some(entry) = s.get(id) else {
            effects.push(xclaim_effect(key, group, &g, id));
            g.ack(id);
            deleted.push(id_reply(id));
            count -= 1;
            continue;
        };
        let Some(p) = g.pel.get(&id) else { continue };
        if min_idle != 0 && (now as i64) - (p.delivery_time as i64) < min_idle {
            continue;
        }
        let deliveries = p.delivery_count + u64::from(!justid);
        if !g.consumers.contains_key(name) {
            created = true;
        }
        let (c, _) = g.consumer_or_create(name, now);
        c.seen_time = now;
        g.assign(id, name, now, deliveries);
        out.push(if justid {
            id_reply(id)
        } else {
            entry_reply(entry)
        });
        count -= 1;
        effects.push(xclaim_effect(key, group, &g, id));
    }
    let next = cursor
        .and_then(|c| g.pel.range(c..).next().map(|(id, _)| *id))
        .unwrap_or(StreamId::MIN);
    s.groups.insert(group.clone(), g);
    if created {
        ctx.notify(class::STREAM, "xgroup-createconsumer", key);
    }
    for e in effects {
        propagate(ctx, e);
    }
    Ok(Reply::Array(vec![
        id_reply(next),
        Reply::Array(out),
        Reply::Array(deleted),
    ]))
}
