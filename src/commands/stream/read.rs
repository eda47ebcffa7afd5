//! XRANGE, XREVRANGE, XLEN, and XREAD / XREADGROUP (Redis's `xreadCommand` and, for a
//! blocked client served later, `serveClientsBlockedOnStreamKey`).

use bytes::Bytes;

use super::write::propagate;
use super::{entry_reply, id_reply, long_long, parse_id, read_stream};
use crate::engine::{ArgCursor, Command, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::services::notify::class;
use crate::store::stream::group::ENTRIES_READ_UNKNOWN;
use crate::store::stream::{Group, Stream, StreamId};

/// XRANGE key start end [COUNT n] / XREVRANGE key end start [COUNT n]
pub(super) fn range(ctx: &mut Ctx<'_>, args: &[&[u8]], rev: bool) -> Reply {
    match xrange(ctx, args, rev) {
        Ok(r) => r,
        Err(e) => e.into(),
    }
}

/// An interval bound: `(` makes it exclusive (then `-`/`+` are refused).
fn interval(arg: &[u8], missing_seq: u64) -> CmdResult<(StreamId, bool)> {
    if arg.len() > 1 && arg[0] == b'(' {
        Ok((super::parse_strict_id(&arg[1..], missing_seq)?, true))
    } else {
        Ok((super::parse_loose_id(arg, missing_seq)?, false))
    }
}

fn xrange(ctx: &mut Ctx<'_>, args: &[&[u8]], rev: bool) -> CmdResult<Reply> {
    let (start_arg, end_arg) = if rev {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    let (mut start, ex) = interval(start_arg, 0)?;
    if ex {
        start = start
            .incr()
            .ok_or_else(|| CmdError::msg("ERR invalid start ID for the interval"))?;
    }
    let (mut end, ex) = interval(end_arg, u64::MAX)?;
    if ex {
        end = end
            .decr()
            .ok_or_else(|| CmdError::msg("ERR invalid end ID for the interval"))?;
    }
    let mut count: i64 = -1;
    let mut j = 4;
    while j < args.len() {
        if args[j].eq_ignore_ascii_case(b"count") && j + 1 < args.len() {
            count = long_long(args[j + 1])?.max(0);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let Some(s) = read_stream(ctx, args[1])? else {
        return Ok(Reply::Array(Vec::new()));
    };
    if count == 0 {
        return Ok(Reply::NullArray);
    }
    let limit = if count < 0 {
        usize::MAX
    } else {
        count as usize
    };
    Ok(Reply::Array(
        s.range(start, end, rev)
            .take(limit)
            .map(entry_reply)
            .collect(),
    ))
}

/// XLEN key
#[derive(Debug)]
pub(crate) struct XLen {
    key: Bytes,
}

impl Command<'_> for XLen {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(XLen {
            key: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Int(
            read_stream(ctx, &self.key)?.map_or(0, |s| s.len() as i64),
        ))
    }
}

/// XREADGROUP's group, consumer and NOACK.
#[derive(Debug, Clone)]
pub(crate) struct GroupRead {
    group: Bytes,
    consumer: Bytes,
    noack: bool,
}

/// What a client blocked in XREAD / XREADGROUP waits for (kept by its waiter).
#[derive(Debug)]
pub(crate) struct Wait {
    /// The keys, in the order given.
    pub keys: Vec<Bytes>,
    /// Per key, the ID entries must be above (`>`: the largest ID, re-read from the group).
    ids: Vec<StreamId>,
    group: Option<GroupRead>,
    count: usize,
}

/// The `>` ID as Redis keeps it.
const NEW_ONLY: StreamId = StreamId::MAX;

const BLOCKED_DEFAULT_COUNT: usize = 1000;

/// XREAD [COUNT n] [BLOCK ms] STREAMS key … id … / XREADGROUP GROUP g c [COUNT n]
/// [BLOCK ms] [NOACK] STREAMS key … id …
pub(super) fn xread(ctx: &mut Ctx<'_>, args: &[&[u8]], group_form: bool) -> Reply {
    match xread_apply(ctx, args, group_form) {
        Ok(r) => r,
        Err(e) => e.into(),
    }
}

fn timeout_ms(arg: &[u8], now_ms: u64) -> CmdResult<u64> {
    let t = crate::num::parse_i64(arg)
        .ok_or_else(|| CmdError::msg("ERR timeout is not an integer or out of range"))?;
    if t < 0 {
        return Err(CmdError::msg("ERR timeout is negative"));
    }
    if t > 0 && t > i64::MAX - now_ms as i64 {
        return Err(CmdError::msg("ERR timeout is out of range"));
    }
    Ok(t as u64)
}

fn xread_apply(ctx: &mut Ctx<'_>, args: &[&[u8]], group_form: bool) -> CmdResult<Reply> {
    let mut block: Option<u64> = None;
    let mut count: i64 = 0;
    let mut streams_at = 0;
    let mut group: Option<GroupRead> = None;
    let mut noack = false;
    let name = String::from_utf8_lossy(args[0]).into_owned();
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let o = &args[i];
        if o.eq_ignore_ascii_case(b"block") && more > 0 {
            if ctx.in_script {
                return Err(CmdError::Other(
                    format!("ERR {name} command is not allowed with BLOCK option from scripts")
                        .into(),
                ));
            }
            i += 1;
            block = Some(timeout_ms(args[i], ctx.now_ms)?);
        } else if o.eq_ignore_ascii_case(b"count") && more > 0 {
            i += 1;
            count = long_long(args[i])?.max(0);
        } else if o.eq_ignore_ascii_case(b"streams") && more > 0 {
            streams_at = i + 1;
            if !(args.len() - streams_at).is_multiple_of(2) {
                return Err(CmdError::msg(
                    "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                ));
            }
            break;
        } else if o.eq_ignore_ascii_case(b"group") && more >= 2 {
            if !group_form {
                return Err(CmdError::msg(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            group = Some(GroupRead {
                group: Bytes::copy_from_slice(args[i + 1]),
                consumer: Bytes::copy_from_slice(args[i + 2]),
                noack: false,
            });
            i += 2;
        } else if o.eq_ignore_ascii_case(b"noack") {
            if !group_form {
                return Err(CmdError::msg(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            noack = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if streams_at == 0 {
        return Err(CmdError::Syntax);
    }
    if group_form && group.is_none() {
        return Err(CmdError::msg("ERR Missing GROUP option for XREADGROUP"));
    }
    if let Some(g) = &mut group {
        g.noack = noack;
    }
    let n = (args.len() - streams_at) / 2;
    let keys: Vec<Bytes> = crate::engine::args::owned(&args[streams_at..streams_at + n]);
    let mut ids = Vec::with_capacity(n);
    for (k, key) in keys.iter().enumerate() {
        let arg = &args[streams_at + n + k];
        let s = read_stream(ctx, key)?;
        if let Some(g) = &group
            && s.as_ref().is_none_or(|s| !s.groups.contains_key(&g.group))
        {
            return Err(CmdError::Other(
                format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(&g.group)
                )
                .into(),
            ));
        }
        let id = if &arg[..] == b"$" {
            if group_form {
                return Err(CmdError::msg(
                    "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.",
                ));
            }
            s.map_or(StreamId::MIN, |s| s.last_id)
        } else if &arg[..] == b">" {
            if !group_form {
                return Err(CmdError::msg(
                    "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
                ));
            }
            NEW_ONLY
        } else {
            parse_id(arg, 0, true, false)?.0
        };
        ids.push(id);
    }
    let mut wait = Wait {
        keys,
        ids,
        group,
        count: count as usize,
    };
    let mut served = Vec::new();
    for k in 0..wait.keys.len() {
        let key = wait.keys[k].clone();
        if let Some(entries) = serve_key(ctx, &wait, k, &key, false)? {
            served.push((Reply::Bulk(key), entries));
        }
    }
    if !served.is_empty() {
        return Ok(keyed_reply(ctx.client.resp, served));
    }
    let Some(timeout) = block else {
        return Ok(Reply::NullArray);
    };
    if !ctx.may_block {
        return Ok(Reply::NullArray);
    }
    if wait.count == 0 {
        wait.count = BLOCKED_DEFAULT_COUNT;
    }
    Ok(crate::commands::blocking::block_on_streams(
        ctx, wait, timeout,
    ))
}

/// `[[key, entries], …]` in RESP2, `{key: entries, …}` in RESP3.
fn keyed_reply(resp: u8, served: Vec<(Reply, Reply)>) -> Reply {
    if resp >= 3 {
        Reply::Map(served)
    } else {
        Reply::Array(
            served
                .into_iter()
                .map(|(k, v)| Reply::Array(vec![k, v]))
                .collect(),
        )
    }
}

/// Serves key number `k` of `wait` if it has something for the reader: `later` is the
/// blocked client's turn (Redis compares with the stream's last ID and re-reads a group's
/// last ID then; the first attempt compares with the last live entry). None when there is
/// nothing to send for it.
fn serve_key(
    ctx: &mut Ctx<'_>,
    wait: &Wait,
    k: usize,
    key: &Bytes,
    later: bool,
) -> CmdResult<Option<Reply>> {
    let now = ctx.now_ms;
    let group = wait.group.clone();
    let count = wait.count;
    let mut gt = wait.ids[k];
    let mut history = false;
    let mut new_consumer = false;
    let mut effects: Vec<Vec<Bytes>> = Vec::new();
    let reply = {
        let Some(s) = read_stream(ctx, key)? else {
            return Ok(None);
        };
        let last_live = s.last_entry().map(|e| e.id);
        match &group {
            Some(g) => {
                let Some(grp) = s.groups.get(&g.group) else {
                    if later {
                        return Err(CmdError::msg(
                            "NOGROUP the consumer group this client was blocked on no longer exists",
                        ));
                    }
                    return Ok(None);
                };
                if later {
                    gt = grp.last_id;
                    if s.last_id <= gt {
                        return Ok(None);
                    }
                } else if gt != NEW_ONLY {
                    history = true;
                } else if last_live.is_some_and(|m| m > grp.last_id) {
                    gt = grp.last_id;
                } else {
                    return Ok(None);
                }
            }
            None => {
                let more = if later {
                    s.last_id > gt
                } else {
                    last_live.is_some_and(|m| m > gt)
                };
                if !more {
                    return Ok(None);
                }
            }
        }
        let start = gt.incr().unwrap_or(StreamId::MAX);
        match &group {
            None => Reply::Array(
                s.range(start, StreamId::MAX, false)
                    .take(if count == 0 { usize::MAX } else { count })
                    .map(entry_reply)
                    .collect(),
            ),
            Some(g) => {
                // Out of the map while entries are read, so both can be borrowed.
                let Some(mut grp) = s.groups.remove(&g.group) else {
                    return Ok(None);
                };
                let (c, created) = grp.consumer_or_create(&g.consumer, now);
                c.seen_time = now;
                new_consumer = created;
                if created && g.noack {
                    effects.push(vec![
                        Bytes::from_static(b"XGROUP"),
                        Bytes::from_static(b"CREATECONSUMER"),
                        key.clone(),
                        g.group.clone(),
                        g.consumer.clone(),
                    ]);
                }
                let r = if history {
                    history_reply(s, &mut grp, &g.consumer, start, count, now)
                } else {
                    deliver(s, &mut grp, g, key, start, count, now, &mut effects)
                };
                s.groups.insert(g.group.clone(), grp);
                r
            }
        }
    };
    if new_consumer {
        ctx.notify(class::STREAM, "xgroup-createconsumer", key);
    }
    for e in effects {
        propagate(ctx, e);
    }
    Ok(Some(reply))
}

/// XREADGROUP with an ID: the consumer's own pending entries from `start`, each with its
/// fields (or nil if the entry is gone), counting a delivery for those still there.
fn history_reply(
    s: &Stream,
    grp: &mut Group,
    consumer: &Bytes,
    start: StreamId,
    count: usize,
    now: u64,
) -> Reply {
    let ids: Vec<StreamId> = grp
        .consumers
        .get(consumer)
        .map(|c| {
            c.pending
                .range(start..)
                .take(if count == 0 { usize::MAX } else { count })
                .copied()
                .collect()
        })
        .unwrap_or_default();
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        match s.get(id) {
            Some(e) => {
                if let Some(p) = grp.pel.get_mut(&id) {
                    p.delivery_time = now;
                    p.delivery_count += 1;
                }
                out.push(entry_reply(e));
            }
            None => out.push(Reply::Array(vec![id_reply(id), Reply::NullArray])),
        }
    }
    Reply::Array(out)
}

/// Delivers new entries from `start` to a group's consumer (Redis's `streamReplyWithRange`
/// with a group): moves the group's last ID and read counter, makes each entry pending for
/// the consumer (unless NOACK), and notes the XCLAIM / XGROUP SETID replicas get.
#[allow(clippy::too_many_arguments)]
fn deliver(
    s: &Stream,
    grp: &mut Group,
    g: &GroupRead,
    key: &Bytes,
    start: StreamId,
    count: usize,
    now: u64,
    effects: &mut Vec<Vec<Bytes>>,
) -> Reply {
    let mut out = Vec::new();
    let mut moved = false;
    for e in s
        .range(start, StreamId::MAX, false)
        .take(if count == 0 { usize::MAX } else { count })
    {
        let id = e.id;
        if id > grp.last_id {
            if grp.entries_read != ENTRIES_READ_UNKNOWN
                && !s.range_has_tombstones(id, StreamId::MAX)
            {
                grp.entries_read += 1;
            } else if s.entries_added > 0 {
                grp.entries_read = s.estimate_entries_read(id);
            }
            grp.last_id = id;
            moved = true;
        }
        out.push(entry_reply(e));
        if !g.noack {
            grp.assign(id, &g.consumer, now, 1);
            effects.push(xclaim_effect(key, &g.group, grp, id));
        }
    }
    if g.noack && moved {
        effects.push(setid_effect(key, &g.group, grp));
    }
    Reply::Array(out)
}

/// `XCLAIM key group consumer 0 id TIME ms RETRYCOUNT n FORCE JUSTID LASTID group-last-id`
/// (Redis's `streamPropagateXCLAIM`) for pending entry `id`.
pub(super) fn xclaim_effect(key: &Bytes, group: &Bytes, grp: &Group, id: StreamId) -> Vec<Bytes> {
    let (consumer, time, count) = grp.pel.get(&id).map_or((Bytes::new(), 0, 0), |p| {
        (p.consumer.clone(), p.delivery_time, p.delivery_count)
    });
    vec![
        Bytes::from_static(b"XCLAIM"),
        key.clone(),
        group.clone(),
        consumer,
        Bytes::from_static(b"0"),
        id.to_bytes(),
        Bytes::from_static(b"TIME"),
        Bytes::from(time.to_string()),
        Bytes::from_static(b"RETRYCOUNT"),
        Bytes::from(count.to_string()),
        Bytes::from_static(b"FORCE"),
        Bytes::from_static(b"JUSTID"),
        Bytes::from_static(b"LASTID"),
        grp.last_id.to_bytes(),
    ]
}

/// `XGROUP SETID key group last-id ENTRIESREAD n` (Redis's `streamPropagateGroupID`).
pub(super) fn setid_effect(key: &Bytes, group: &Bytes, grp: &Group) -> Vec<Bytes> {
    vec![
        Bytes::from_static(b"XGROUP"),
        Bytes::from_static(b"SETID"),
        key.clone(),
        group.clone(),
        grp.last_id.to_bytes(),
        Bytes::from_static(b"ENTRIESREAD"),
        Bytes::from(grp.entries_read.to_string()),
    ]
}

impl Wait {
    /// True for XREADGROUP.
    pub(crate) fn is_group(&self) -> bool {
        self.group.is_some()
    }

    /// Serves the blocked reader from `key` (it became ready): its reply, None if the key
    /// has nothing for it yet.
    pub(crate) fn attempt(&self, ctx: &mut Ctx<'_>, key: &Bytes) -> CmdResult<Option<Reply>> {
        let Some(k) = self.keys.iter().position(|x| x == key) else {
            return Ok(None);
        };
        Ok(serve_key(ctx, self, k, key, true)?
            .map(|entries| keyed_reply(ctx.client.resp, vec![(Reply::Bulk(key.clone()), entries)])))
    }
}
