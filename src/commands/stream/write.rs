//! XADD, XTRIM, XDEL and XSETID.

use bytes::Bytes;

use super::{id_reply, long_long, lookup_stream, node_limits, parse_id, parse_strict_id};
use crate::engine::{ArgCursor, Command, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::services::notify::class;
use crate::store::stream::{AppendError, Stream, StreamId, Trim};

/// The text before the first NUL, as C's string functions see an argument.
fn c_str(a: &[u8]) -> &[u8] {
    a.iter().position(|&b| b == 0).map_or(a, |n| &a[..n])
}

fn kw(a: &[u8], keyword: &str) -> bool {
    c_str(a).eq_ignore_ascii_case(keyword.as_bytes())
}

/// Notes `argv` for replicas when this server feeds any (Redis propagates a stream write
/// only when it changed something, with its arguments rewritten; see each command).
pub(super) fn propagate(ctx: &mut Ctx<'_>, argv: Vec<Bytes>) {
    if ctx.shared.repl.active() && !ctx.client.master_link {
        let db = ctx.db();
        ctx.propagate.push((db, argv));
    }
}

/// The trimming options of XADD and XTRIM (Redis's `streamAddTrimArgs`).
#[derive(Debug, Default)]
pub(super) struct TrimArgs {
    how: Option<Trim>,
    approx: bool,
    limit: u64,
    /// Index (in the full arguments) of the MAXLEN/MINID threshold, for the rewrite.
    arg_idx: usize,
    /// XADD: the ID, if not `*`, and whether its sequence was given.
    id: Option<(StreamId, bool)>,
    nomkstream: bool,
}

/// Parses XADD's (`xadd`) or XTRIM's options from `args` (the whole command), as Redis's
/// `streamParseAddOrTrimArgsOrReply`; returns them with XADD's ID position.
fn parse_trim(
    args: &[&[u8]],
    xadd: bool,
    from_master: bool,
    node_entries: u64,
) -> CmdResult<(TrimArgs, usize)> {
    let mut t = TrimArgs::default();
    let mut limit_given = false;
    let mut limit: i64 = 0;
    let mut i = 2;
    let incompatible = || {
        CmdError::msg(
            "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
        )
    };
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = &args[i];
        let maxlen = kw(opt, "maxlen");
        if xadd && c_str(opt) == b"*" && !opt.is_empty() {
            break;
        } else if (maxlen || kw(opt, "minid")) && more > 0 {
            if t.how.is_some() {
                return Err(incompatible());
            }
            t.approx = false;
            let next = c_str(args[i + 1]);
            if more >= 2 && next == b"~" {
                t.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let value = &args[i + 1];
            t.how = Some(if maxlen {
                let n = long_long(value)?;
                if n < 0 {
                    return Err(CmdError::msg("ERR The MAXLEN argument must be >= 0."));
                }
                Trim::MaxLen(n as u64)
            } else {
                Trim::MinId(parse_strict_id(value, 0)?)
            });
            i += 1;
            t.arg_idx = i;
        } else if kw(opt, "limit") && more > 0 {
            limit = long_long(args[i + 1])?;
            if limit < 0 {
                return Err(CmdError::msg("ERR The LIMIT argument must be >= 0."));
            }
            limit_given = true;
            i += 1;
        } else if xadd && kw(opt, "nomkstream") {
            t.nomkstream = true;
        } else if xadd {
            t.id = Some(parse_id(opt, 0, true, true)?);
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if limit != 0 && t.how.is_none() {
        return Err(CmdError::msg(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && t.how.is_none() {
        return Err(CmdError::msg(
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    t.limit = if from_master {
        0
    } else if limit_given {
        if !t.approx {
            return Err(CmdError::msg(
                "ERR syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
        limit as u64
    } else if t.approx {
        // 100 nodes' worth (Redis's default), capped both ways.
        match node_entries.saturating_mul(100) {
            0 => 10_000,
            n => n.min(1_000_000),
        }
    } else {
        0
    };
    Ok((t, i))
}

/// Runs the trim and rewrites `argv` for replicas as Redis does after an approximate trim
/// (`~` → `=`, the threshold → the length, or the first ID, that resulted).
fn trim_and_rewrite(s: &mut Stream, t: &TrimArgs, argv: &mut [Bytes]) -> u64 {
    let Some(how) = t.how else {
        return 0;
    };
    let deleted = s.trim(how, t.approx, t.limit);
    if t.approx && t.arg_idx >= 1 && t.arg_idx < argv.len() {
        argv[t.arg_idx - 1] = Bytes::from_static(b"=");
        argv[t.arg_idx] = match how {
            Trim::MaxLen(_) => Bytes::from(s.len().to_string()),
            // An empty stream's edge is the largest ID, as Redis's streamGetEdgeID says.
            Trim::MinId(_) => s.first_entry().map_or(StreamId::MAX, |e| e.id).to_bytes(),
        };
    }
    deleted
}

/// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value …
#[derive(Debug)]
pub(crate) struct XAdd {
    args: Vec<Bytes>,
}

impl super::Named for XAdd {
    fn name_slot(&mut self) -> &mut Bytes {
        &mut self.args[0]
    }
}

impl Command<'_> for XAdd {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        // Parsed in `apply`: the defaults depend on the configuration and the caller.
        let mut args = vec![Bytes::from_static(b"XADD")];
        args.extend(a.rest().iter().map(|x| Bytes::copy_from_slice(x)));
        Ok(XAdd { args })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let mut argv = self.args;
        let entries = node_limits(ctx.shared).max_entries;
        let (t, idpos) = parse_trim(
            &crate::engine::args::borrowed(&argv),
            true,
            ctx.client.master_link,
            entries,
        )?;
        let field_pos = idpos + 1;
        let nfields = argv.len().saturating_sub(field_pos);
        if nfields < 2 || nfields % 2 == 1 {
            return Err(CmdError::WrongArity("xadd".into()));
        }
        if let Some((id, true)) = t.id
            && id == StreamId::MIN
        {
            return Err(CmdError::msg(
                "ERR The ID specified in XADD must be greater than 0-0",
            ));
        }
        let key = argv[1].clone();
        let limits = node_limits(ctx.shared);
        let (db, now) = (ctx.db(), ctx.now_ms);
        let exists = lookup_stream(ctx, &key)?.is_some();
        if !exists {
            if t.nomkstream {
                return Ok(Reply::Null);
            }
            ctx.store
                .set(db, &key, crate::store::Value::Stream(Box::default()), None);
        }
        let Some(s) = lookup_stream(ctx, &key)? else {
            return Ok(Reply::Null);
        };
        if s.last_id == StreamId::MAX {
            return Err(CmdError::msg(
                "ERR The stream has exhausted the last possible ID, unable to add more items",
            ));
        }
        let too_small = || {
            CmdError::msg(
                "ERR The ID specified in XADD is equal or smaller than the target stream top item",
            )
        };
        let id = match t.id {
            Some((id, true)) => id,
            // Redis fails this one without setting errno, so it answers with its other text.
            Some((id, false)) if id.ms == s.last_id.ms => s
                .last_id
                .incr()
                .filter(|n| n.ms == id.ms)
                .ok_or_else(|| CmdError::msg("ERR Elements are too large to be stored"))?,
            Some((id, false)) => id,
            None => s.next_id(now).ok_or_else(too_small)?,
        };
        match s.append(id, &argv[field_pos..], limits) {
            Ok(()) => {}
            Err(AppendError::IdTooSmall) => return Err(too_small()),
            Err(AppendError::TooLarge) => {
                return Err(CmdError::msg("ERR Elements are too large to be stored"));
            }
        }
        let trimmed = trim_and_rewrite(s, &t, &mut argv);
        ctx.store.touch(db, &key);
        ctx.notify(class::STREAM, "xadd", &key);
        if trimmed > 0 {
            ctx.notify(class::STREAM, "xtrim", &key);
        }
        if !matches!(t.id, Some((_, true))) {
            argv[idpos] = id.to_bytes();
        }
        propagate(ctx, argv);
        crate::services::blocking::note_ready(ctx, db, key);
        Ok(id_reply(id))
    }
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]
#[derive(Debug)]
pub(crate) struct XTrim {
    args: Vec<Bytes>,
}

impl super::Named for XTrim {
    fn name_slot(&mut self) -> &mut Bytes {
        &mut self.args[0]
    }
}

impl Command<'_> for XTrim {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let mut args = vec![Bytes::from_static(b"XTRIM")];
        args.extend(a.rest().iter().map(|x| Bytes::copy_from_slice(x)));
        Ok(XTrim { args })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let mut argv = self.args;
        let entries = node_limits(ctx.shared).max_entries;
        let (t, _) = parse_trim(
            &crate::engine::args::borrowed(&argv),
            false,
            ctx.client.master_link,
            entries,
        )?;
        let key = argv[1].clone();
        let Some(s) = lookup_stream(ctx, &key)? else {
            return Ok(Reply::Int(0));
        };
        let deleted = trim_and_rewrite(s, &t, &mut argv);
        if deleted > 0 {
            ctx.notify(class::STREAM, "xtrim", &key);
            let db = ctx.db();
            ctx.store.touch(db, &key);
            propagate(ctx, argv);
        }
        Ok(Reply::Int(deleted as i64))
    }
}

/// XDEL key id [id …]
#[derive(Debug)]
pub(crate) struct XDel {
    args: Vec<Bytes>,
}

impl super::Named for XDel {
    fn name_slot(&mut self) -> &mut Bytes {
        &mut self.args[0]
    }
}

impl Command<'_> for XDel {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let mut args = vec![Bytes::from_static(b"XDEL")];
        args.extend(a.rest().iter().map(|x| Bytes::copy_from_slice(x)));
        Ok(XDel { args })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let key = self.args[1].clone();
        // The key is looked up (and type-checked) before any ID is parsed, as Redis does.
        if lookup_stream(ctx, &key)?.is_none() {
            return Ok(Reply::Int(0));
        }
        let ids = self.args[2..]
            .iter()
            .map(|x| parse_strict_id(x, 0))
            .collect::<CmdResult<Vec<_>>>()?;
        let Some(s) = lookup_stream(ctx, &key)? else {
            return Ok(Reply::Int(0));
        };
        let mut deleted = 0;
        for id in ids {
            if s.delete(id) {
                if id > s.max_deleted_id {
                    s.max_deleted_id = id;
                }
                deleted += 1;
            }
        }
        if deleted > 0 {
            let db = ctx.db();
            ctx.store.touch(db, &key);
            ctx.notify(class::STREAM, "xdel", &key);
            propagate(ctx, self.args);
        }
        Ok(Reply::Int(deleted))
    }
}

/// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]
#[derive(Debug)]
pub(crate) struct XSetId {
    key: Bytes,
    id: StreamId,
    entries_added: i64,
    max_deleted: StreamId,
    args: Vec<Bytes>,
}

impl super::Named for XSetId {
    fn name_slot(&mut self) -> &mut Bytes {
        &mut self.args[0]
    }
}

impl Command<'_> for XSetId {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next_owned()?;
        let id_arg = a.next_owned()?;
        let id = parse_strict_id(&id_arg, 0)?;
        let mut entries_added = -1;
        let mut max_deleted = StreamId::MIN;
        let rest = a.rest();
        let mut i = 0;
        while i < rest.len() {
            let more = rest.len() - 1 - i;
            let opt = &rest[i];
            if kw(opt, "entriesadded") && more > 0 {
                entries_added = long_long(rest[i + 1])?;
                if entries_added < 0 {
                    return Err(CmdError::msg("ERR entries_added must be positive"));
                }
                i += 2;
            } else if kw(opt, "maxdeletedid") && more > 0 {
                max_deleted = parse_strict_id(rest[i + 1], 0)?;
                if id < max_deleted {
                    return Err(CmdError::msg(
                        "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                    ));
                }
                i += 2;
            } else {
                return Err(CmdError::Syntax);
            }
        }
        let mut args = vec![Bytes::from_static(b"XSETID"), key.clone(), id_arg];
        args.extend(rest.iter().map(|x| Bytes::copy_from_slice(x)));
        Ok(XSetId {
            key,
            id,
            entries_added,
            max_deleted,
            args,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let Some(s) = lookup_stream(ctx, &self.key)? else {
            return Err(CmdError::NoSuchKey);
        };
        if !s.is_empty() {
            let max = s.last_entry().map_or(StreamId::MIN, |e| e.id);
            if self.id < max {
                return Err(CmdError::msg(
                    "ERR The ID specified in XSETID is smaller than the target stream top item",
                ));
            }
            if self.entries_added != -1 && s.len() > self.entries_added as u64 {
                return Err(CmdError::msg(
                    "ERR The entries_added specified in XSETID is smaller than the target stream length",
                ));
            }
        }
        s.last_id = self.id;
        if self.entries_added != -1 {
            s.entries_added = self.entries_added as u64;
        }
        if self.max_deleted != StreamId::MIN {
            s.max_deleted_id = self.max_deleted;
        }
        ctx.notify(class::STREAM, "xsetid", &self.key);
        propagate(ctx, self.args);
        Ok(Reply::ok())
    }
}
