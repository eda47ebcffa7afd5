//! The stream commands (Redis 7.0's `t_stream.c`): XADD, XRANGE, XREVRANGE, XLEN, XDEL,
//! XTRIM, XSETID (`write`, `read`), XREAD and XREADGROUP with BLOCK (`read`; blocking
//! through `services::blocking`), the consumer-group commands XGROUP, XACK, XPENDING,
//! XCLAIM, XAUTOCLAIM (`groups`), and XINFO (`info`).
//!
//! The data structure lives in `store::stream`; this module is the Redis surface: argument
//! checks in Redis's order with its texts, reply shapes per protocol, notifications, WATCH
//! signalling only where Redis signals (XADD, XDEL, XTRIM, XGROUP CREATE MKSTREAM), and
//! what replicas get (XADD with the ID it made and `~` trims made exact; XREADGROUP and
//! XCLAIM as `XCLAIM … FORCE JUSTID LASTID`, `XGROUP SETID`, `XGROUP CREATECONSUMER`,
//! as Redis's `streamPropagateXCLAIM` and friends).

mod groups;
mod info;
pub(crate) mod read;
mod write;

use bytes::Bytes;

use crate::engine::{CommandSpec as C, Ctx, FindKeys, InfoDoc, KeySpec, KeySpecDoc, run, run_sub};
use crate::error::{CmdError, CmdResult};
use crate::num::{is_c_space, parse_i64};
use crate::protocol::Reply;
use crate::repl::effects::Effect;
use crate::store::Value;
use crate::store::stream::{NodeLimits, Stream, StreamEntry, StreamId};

const W_FAST: &[&str] = &["@write", "@stream", "@fast"];
const W_SLOW: &[&str] = &["@write", "@stream", "@slow"];
const R_FAST: &[&str] = &["@read", "@stream", "@fast"];
const R_SLOW: &[&str] = &["@read", "@stream", "@slow"];

/// XREAD / XREADGROUP's keys: the first half of what follows `STREAMS`.
fn streams_keys(args: &[&[u8]]) -> Vec<usize> {
    let Some(at) = args
        .iter()
        .skip(1)
        .position(|a| a.eq_ignore_ascii_case(b"streams"))
        .map(|p| p + 2)
    else {
        return Vec::new();
    };
    let n = args.len().saturating_sub(at) / 2;
    (at..at + n).collect()
}

const STREAMS_KEYS: KeySpec = KeySpec::Custom {
    first: 0,
    last: 0,
    step: 0,
    find: streams_keys,
};

const fn streams_spec(startfrom: i64) -> KeySpecDoc {
    KeySpecDoc {
        notes: None,
        flags: &["RO", "access"],
        begin: Some(startfrom),
        keyword: Some("STREAMS"),
        find: FindKeys::Range(-1, 1, 2),
    }
}
static XREAD_INFO: InfoDoc = InfoDoc {
    tips: &[],
    key_specs: &[streams_spec(1)],
};
static XREADGROUP_INFO: InfoDoc = InfoDoc {
    tips: &[],
    key_specs: &[streams_spec(4)],
};

const ND: &[&str] = &["nondeterministic_output"];
static XADD_INFO: InfoDoc = InfoDoc {
    tips: ND,
    key_specs: &[KeySpecDoc::range(&["RW", "update"], 1, 0)
        .with_notes("UPDATE instead of INSERT because of the optional trimming feature")],
};
static XTRIM_INFO: InfoDoc = InfoDoc {
    tips: ND,
    key_specs: &[KeySpecDoc::range(&["RW", "delete"], 1, 0)],
};
static XCLAIM_INFO: InfoDoc = InfoDoc {
    tips: ND,
    key_specs: &[KeySpecDoc::range(&["RW", "update"], 1, 0)],
};
static XAUTOCLAIM_INFO: InfoDoc = InfoDoc {
    tips: ND,
    key_specs: &[KeySpecDoc::range(&["RW", "delete"], 1, 0)],
};
static XPENDING_INFO: InfoDoc = InfoDoc {
    tips: ND,
    key_specs: &[KeySpecDoc::range(&["RO", "access"], 1, 0)],
};
static XINFO_CONSUMERS_INFO: InfoDoc = InfoDoc {
    tips: ND,
    key_specs: &[KeySpecDoc::range(&["RO", "access"], 2, 0)],
};

/// The stream commands, with Redis 7.0's arity, flags, key positions and ACL categories.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[C] = &[
    C::new("xadd", -5, &["write", "denyoom", "fast"], C::keys(1, 1, 1), run_named::<write::XAdd>).with_effect(Effect::Handled).with_acl(W_FAST).with_info(&XADD_INFO),
    C::new("xrange", -4, &["readonly"], C::keys(1, 1, 1), |c, a| read::range(c, a, false)).with_acl(R_SLOW).with_key_flags(&["RO", "access"]),
    C::new("xrevrange", -4, &["readonly"], C::keys(1, 1, 1), |c, a| read::range(c, a, true)).with_acl(R_SLOW).with_key_flags(&["RO", "access"]),
    C::new("xlen", 2, &["readonly", "fast"], C::keys(1, 1, 1), run::<read::XLen>).with_acl(R_FAST).with_key_flags(&["RO"]),
    C::new("xdel", -3, &["write", "fast"], C::keys(1, 1, 1), run_named::<write::XDel>).with_effect(Effect::Handled).with_acl(W_FAST).with_key_flags(&["RW", "delete"]),
    C::new("xtrim", -4, &["write"], C::keys(1, 1, 1), run_named::<write::XTrim>).with_effect(Effect::Handled).with_acl(W_SLOW).with_info(&XTRIM_INFO),
    C::new("xsetid", -3, &["write", "denyoom", "fast"], C::keys(1, 1, 1), run_named::<write::XSetId>).with_effect(Effect::Handled).with_acl(W_FAST).with_key_flags(&["RW", "update"]),
    C::new("xread", -4, &["readonly", "blocking", "movablekeys"], STREAMS_KEYS, |c, a| read::xread(c, a, false)).with_acl(&["@read", "@stream", "@slow", "@blocking"]).with_info(&XREAD_INFO),
    C::new("xreadgroup", -7, &["write", "blocking", "movablekeys"], STREAMS_KEYS, |c, a| read::xread(c, a, true)).with_effect(Effect::Handled).with_acl(&["@write", "@stream", "@slow", "@blocking"]).with_info(&XREADGROUP_INFO),
    C::new("xack", -4, &["write", "fast"], C::keys(1, 1, 1), run_named::<groups::XAck>).with_effect(Effect::Handled).with_acl(W_FAST).with_key_flags(&["RW", "update"]),
    C::new("xpending", -3, &["readonly"], C::keys(1, 1, 1), run::<groups::XPending>).with_acl(R_SLOW).with_info(&XPENDING_INFO),
    C::new("xclaim", -6, &["write", "fast"], C::keys(1, 1, 1), groups::xclaim).with_effect(Effect::Handled).with_acl(W_FAST).with_info(&XCLAIM_INFO),
    C::new("xautoclaim", -6, &["write", "fast"], C::keys(1, 1, 1), groups::xautoclaim).with_effect(Effect::Handled).with_acl(W_FAST).with_info(&XAUTOCLAIM_INFO),
    C::new("xgroup", -2, &[], C::keys(0, 0, 0), run::<crate::commands::server::Help>).with_acl(&["@slow"]).with_subcommands(XGROUP),
    C::new("xinfo", -2, &[], C::keys(0, 0, 0), run::<crate::commands::server::Help>).with_acl(&["@slow"]).with_subcommands(XINFO),
];

#[rustfmt::skip]
static XGROUP: &[C] = &[
    C::new("xgroup|create", -5, &["write", "denyoom"], C::keys(2, 2, 1), groups::xgroup).with_effect(Effect::Handled).with_acl(W_SLOW).with_key_flags(&["RW", "insert"]),
    C::new("xgroup|setid", -5, &["write"], C::keys(2, 2, 1), groups::xgroup).with_effect(Effect::Handled).with_acl(W_SLOW).with_key_flags(&["RW", "update"]),
    C::new("xgroup|destroy", 4, &["write"], C::keys(2, 2, 1), groups::xgroup).with_effect(Effect::Handled).with_acl(W_SLOW).with_key_flags(&["RW", "delete"]),
    C::new("xgroup|createconsumer", 5, &["write", "denyoom"], C::keys(2, 2, 1), groups::xgroup).with_effect(Effect::Handled).with_acl(W_SLOW).with_key_flags(&["RW", "insert"]),
    C::new("xgroup|delconsumer", 5, &["write"], C::keys(2, 2, 1), groups::xgroup).with_effect(Effect::Handled).with_acl(W_SLOW).with_key_flags(&["RW", "delete"]),
    C::new("xgroup|help", 2, &["loading", "stale"], C::keys(0, 0, 0), groups::xgroup).with_acl(&["@stream", "@slow"]),
];

#[rustfmt::skip]
static XINFO: &[C] = &[
    C::new("xinfo|stream", -3, &["readonly"], C::keys(2, 2, 1), info::xinfo_stream).with_acl(R_SLOW).with_key_flags(&["RO", "access"]),
    C::new("xinfo|groups", 3, &["readonly"], C::keys(2, 2, 1), run_sub::<info::XInfoGroups>).with_acl(R_SLOW).with_key_flags(&["RO", "access"]),
    C::new("xinfo|consumers", 4, &["readonly"], C::keys(2, 2, 1), run_sub::<info::XInfoConsumers>).with_acl(R_SLOW).with_info(&XINFO_CONSUMERS_INFO),
    C::new("xinfo|help", 2, &["loading", "stale"], C::keys(0, 0, 0), run_sub::<info::XInfoHelp>).with_acl(&["@stream", "@slow"]),
];

/// A write whose propagated form is its own arguments, rewritten: replicas get the command
/// name as the caller wrote it (a script's `xadd` stays lowercase, as in Redis).
pub(crate) trait Named: for<'x> crate::engine::Command<'x> {
    /// The propagated arguments' first slot.
    fn name_slot(&mut self) -> &mut Bytes;
}

/// `run` for a [`Named`] command: parse, refuse leftovers, keep the name, apply.
fn run_named<C: Named>(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let mut cursor = crate::engine::ArgCursor::new(args.get(1..).unwrap_or(&[]));
    let parsed = C::parse(&mut cursor).and_then(|c| cursor.finish().map(|()| c));
    let result = parsed.and_then(|mut c| {
        *c.name_slot() = Bytes::copy_from_slice(args[0]);
        c.apply(ctx)
    });
    match result {
        Ok(r) => r,
        Err(e) => e.into(),
    }
}

/// Redis's one error for an ID it cannot parse.
pub(crate) const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

fn invalid_id() -> CmdError {
    CmdError::msg(INVALID_ID)
}

/// Redis's `string2ull`: a canonical long long that is not negative, else what C's
/// `strtoull` reads when it consumes the whole text (leading spaces, a sign, a negative
/// number wrapping around), refusing overflow and empty text.
fn parse_ull(s: &[u8]) -> Option<u64> {
    if let Some(n) = parse_i64(s) {
        return u64::try_from(n).ok();
    }
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let digits = &s[i..];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// An ID argument as Redis's `streamGenericParseIDOrReply` reads it: `-` and `+` unless
/// `strict`, `<ms>` (sequence `missing_seq`), `<ms>-<seq>`, and, when `seq_star` (XADD),
/// `<ms>-*`. Returns the ID and whether the sequence was given. The text is read up to its
/// first NUL byte, as C does, and may be at most 127 bytes.
pub(crate) fn parse_id(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    seq_star: bool,
) -> CmdResult<(StreamId, bool)> {
    if arg.len() > 127 {
        return Err(invalid_id());
    }
    let s = arg.iter().position(|&b| b == 0).map_or(arg, |n| &arg[..n]);
    if s == b"-" || s == b"+" {
        if strict {
            return Err(invalid_id());
        }
        return Ok((
            if s == b"-" {
                StreamId::MIN
            } else {
                StreamId::MAX
            },
            true,
        ));
    }
    let (ms, seq) = match s.iter().position(|&b| b == b'-') {
        Some(d) => (&s[..d], Some(&s[d + 1..])),
        None => (s, None),
    };
    let ms = parse_ull(ms).ok_or_else(invalid_id)?;
    match seq {
        None => Ok((StreamId::new(ms, missing_seq), true)),
        Some(b"*") if seq_star => Ok((StreamId::new(ms, 0), false)),
        Some(seq) => Ok((
            StreamId::new(ms, parse_ull(seq).ok_or_else(invalid_id)?),
            true,
        )),
    }
}

/// A non-strict ID (`-`/`+` allowed).
pub(crate) fn parse_loose_id(arg: &[u8], missing_seq: u64) -> CmdResult<StreamId> {
    parse_id(arg, missing_seq, false, false).map(|(id, _)| id)
}

/// A strict ID (`-`/`+` refused).
pub(crate) fn parse_strict_id(arg: &[u8], missing_seq: u64) -> CmdResult<StreamId> {
    parse_id(arg, missing_seq, true, false).map(|(id, _)| id)
}

/// Redis's `getLongLongFromObjectOrReply`.
pub(crate) fn long_long(arg: &[u8]) -> CmdResult<i64> {
    parse_i64(arg).ok_or(CmdError::NotInteger)
}

/// An ID as a bulk reply.
pub(crate) fn id_reply(id: StreamId) -> Reply {
    Reply::Bulk(id.to_bytes())
}

/// `[id, [field, value, …]]`.
pub(crate) fn entry_reply(e: StreamEntry) -> Reply {
    Reply::Array(vec![
        id_reply(e.id),
        Reply::Array(e.fields.into_iter().map(Reply::Bulk).collect()),
    ])
}

/// The stream at `key` for a read command (keyspace hit/miss counted): None if missing,
/// WRONGTYPE for other types.
pub(crate) fn read_stream<'c>(
    ctx: &'c mut Ctx<'_>,
    key: &[u8],
) -> CmdResult<Option<&'c mut Stream>> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    match ctx.store.read_value(db, key, now) {
        None => Ok(None),
        Some(Value::Stream(s)) => Ok(Some(s)),
        Some(_) => Err(CmdError::WrongType),
    }
}

/// The stream at `key` by a write lookup (no stats, no WATCH signal): None if missing.
pub(crate) fn lookup_stream<'c>(
    ctx: &'c mut Ctx<'_>,
    key: &[u8],
) -> CmdResult<Option<&'c mut Stream>> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    match ctx.store.lookup(db, key, now).map(|e| &mut e.value) {
        None => Ok(None),
        Some(Value::Stream(s)) => Ok(Some(s)),
        Some(_) => Err(CmdError::WrongType),
    }
}

/// `stream-node-max-bytes` and `stream-node-max-entries` in force.
pub(crate) fn node_limits(shared: &crate::server::Shared) -> NodeLimits {
    let (max_bytes, max_entries) = shared.live.stream_node_limits();
    NodeLimits {
        max_bytes,
        max_entries,
    }
}

/// Redis's `addReplySubcommandSyntaxError` for XGROUP / XINFO.
pub(crate) fn subcommand_error(args: &[&[u8]]) -> CmdError {
    let name = args
        .first()
        .map(|a| String::from_utf8_lossy(a).to_uppercase())
        .unwrap_or_default();
    let sub = args
        .get(1)
        .map(|a| crate::engine::printable(a, 128))
        .unwrap_or_default();
    CmdError::Other(
        format!(
            "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try {name} HELP."
        )
        .into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_as_redis_reads_them() {
        let ok = |s: &str, missing: u64| parse_loose_id(s.as_bytes(), missing).ok();
        assert_eq!(ok("5", 0), Some(StreamId::new(5, 0)));
        assert_eq!(ok("5", u64::MAX), Some(StreamId::new(5, u64::MAX)));
        assert_eq!(ok("5-3", 0), Some(StreamId::new(5, 3)));
        assert_eq!(ok("-", 0), Some(StreamId::MIN));
        assert_eq!(ok("+", 0), Some(StreamId::MAX));
        assert_eq!(ok("007-1", 0), Some(StreamId::new(7, 1)));
        assert_eq!(ok(" 7", 0), Some(StreamId::new(7, 0)));
        assert_eq!(
            ok("18446744073709551615-0", 0),
            Some(StreamId::new(u64::MAX, 0))
        );
        assert_eq!(ok("18446744073709551616", 0), None);
        assert_eq!(ok("-1", 0), None);
        assert_eq!(ok("1-", 0), None);
        assert_eq!(ok("a", 0), None);
        assert_eq!(ok("1-*", 0), None);
        assert_eq!(ok("1\0zz", 0), Some(StreamId::new(1, 0)));
        assert!(parse_strict_id(b"+", 0).is_err());
        assert_eq!(
            parse_id(b"9-*", 0, true, true).ok(),
            Some((StreamId::new(9, 0), false))
        );
    }
}
