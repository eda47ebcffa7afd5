//! String range commands: SETRANGE, GETRANGE, SUBSTR and LCS, plus the helpers every
//! command that edits a string in place uses (these and the bitmap commands).
//!
//! A string edited in place becomes `Value::Raw`, as Redis turns an `int` or `embstr` object
//! into a private `raw` one before changing it. The bytes are taken out of the entry, edited
//! as a `Vec` and put back, so a big bitmap is not copied on every SETBIT (the `Bytes` →
//! `Vec` conversion reuses the allocation when nothing else holds it).
//!
//! Sizes are checked against `proto-max-bulk-len` exactly as Redis checks them, so one
//! request never allocates more than Redis would let it.

use bytes::Bytes;

use crate::engine::args::is;
use crate::engine::{ArgCursor, Command, CommandSpec as C, Ctx, run};
use crate::error::{CmdError, CmdResult};
use crate::num::parse_i64;
use crate::protocol::Reply;
use crate::store::Value;
use crate::store::access::{StringMut, StringValue};

/// The string range commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[C] = &[
    C::new("setrange", 4, &["write", "denyoom"], C::keys(1, 1, 1), run::<SetRange>).with_acl(&["@write", "@string", "@slow"]),
    C::new("getrange", 4, &["readonly"], C::keys(1, 1, 1), run::<GetRange>).with_acl(&["@read", "@string", "@slow"]),
    C::new("substr", 4, &["readonly"], C::keys(1, 1, 1), run::<GetRange>).with_acl(&["@read", "@string", "@slow"]),
    C::new("lcs", -3, &["readonly"], C::keys(1, 2, 1), run::<Lcs>).with_acl(&["@read", "@string", "@slow"]),
];

/// The largest string a client may build (`proto-max-bulk-len`).
pub(crate) fn max_string_len(ctx: &Ctx<'_>) -> u64 {
    ctx.shared
        .config
        .read()
        .map(|c| c.proto_max_bulk_len as u64)
        .unwrap_or(512 << 20)
}

/// Redis's checkStringLength: a string of `size + append` bytes must fit the limit.
pub(crate) fn check_string_length(ctx: &Ctx<'_>, size: u64, append: u64) -> CmdResult<()> {
    match size.checked_add(append) {
        Some(total) if total <= max_string_len(ctx) => Ok(()),
        _ => Err(CmdError::msg(
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
        )),
    }
}

/// The bytes of a string value (an `Int` rendered as its decimal text).
pub(crate) fn string_bytes(v: &Value) -> CmdResult<Bytes> {
    v.as_bytes()
}

/// Grows `v` with zero bytes to at least `len` bytes (Redis's sdsgrowzero).
pub(crate) fn grow_zero(v: &mut Vec<u8>, len: usize) {
    if v.len() < len {
        v.resize(len, 0);
    }
}

/// SETRANGE key offset value
#[derive(Debug)]
pub(crate) struct SetRange {
    key: Bytes,
    offset: Bytes,
    value: Bytes,
}

impl Command<'_> for SetRange {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(SetRange {
            key: a.next_owned()?,
            offset: a.next_owned()?,
            value: a.next_owned()?,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let offset = parse_i64(&self.offset).ok_or(CmdError::NotInteger)?;
        if offset < 0 {
            return Err(CmdError::msg("ERR offset is out of range"));
        }
        let offset = offset as u64;
        let (db, now) = (ctx.db(), ctx.now_ms);
        let len = self.value.len() as u64;
        let old_len = match ctx.store.lookup(db, &self.key, now).map(|e| &e.value) {
            None => None,
            Some(v) => Some(string_bytes(v)?.len()),
        };
        if len == 0 {
            return Ok(Reply::Int(old_len.unwrap_or(0) as i64));
        }
        check_string_length(ctx, offset, len)?;
        // Both fit in proto-max-bulk-len, which is a usize.
        let (offset, end) = (offset as usize, (offset + len) as usize);
        let write = |v: &mut Vec<u8>| {
            grow_zero(v, end);
            v[offset..end].copy_from_slice(&self.value);
            v.len()
        };
        let new_len = {
            let mut s: StringMut = ctx
                .store
                .modify_or_create(db, &self.key, now, || StringValue::raw(Vec::new()))?;
            s.edit(write)
        };
        ctx.notify(
            crate::services::notify::class::STRING,
            "setrange",
            &self.key,
        );
        Ok(Reply::Int(new_len as i64))
    }
}

/// Resolves GETRANGE's inclusive `[start, end]` over a string of `len` bytes, as Redis does;
/// None when the range is empty.
fn getrange_bounds(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let start = if start < 0 { start + len } else { start }.max(0);
    let end = if end < 0 { end + len } else { end }.max(0);
    let end = end.min(len - 1);
    if start > end || len == 0 {
        return None;
    }
    Some((start as usize, end as usize))
}

/// GETRANGE key start end (and its old name SUBSTR)
#[derive(Debug)]
pub(crate) struct GetRange {
    key: Bytes,
    start: i64,
    end: i64,
}

impl Command<'_> for GetRange {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(GetRange {
            key: a.next_owned()?,
            start: a.next_i64()?,
            end: a.next_i64()?,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let Some(v) = ctx.store.read_value(db, &self.key, now) else {
            return Ok(Reply::Bulk(Bytes::new()));
        };
        let s = string_bytes(v)?;
        Ok(Reply::Bulk(
            match getrange_bounds(self.start, self.end, s.len()) {
                Some((a, b)) => s.slice(a..=b),
                None => Bytes::new(),
            },
        ))
    }
}

/// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]`
#[derive(Debug)]
pub(crate) struct Lcs {
    a: Bytes,
    b: Bytes,
    options: Vec<Bytes>,
}

/// One run of matching bytes: (start, end) in each string, inclusive.
type Match = ((u32, u32), (u32, u32));

/// The LCS of `a` and `b` by the dynamic-programming table, walked back from the end as
/// Redis walks it: the common subsequence and the matching runs, last run first.
fn lcs(a: &[u8], b: &[u8], want_string: bool) -> (u32, Vec<u8>, Vec<Match>) {
    let (alen, blen) = (a.len(), b.len());
    let w = blen + 1;
    let mut t = vec![0u32; (alen + 1) * w];
    for i in 1..=alen {
        for j in 1..=blen {
            t[i * w + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    let total = t[alen * w + blen];
    let mut result = Vec::new();
    let mut matches = Vec::new();
    if !want_string {
        return (total, result, matches);
    }
    result.resize(total as usize, 0);
    let mut idx = total as usize;
    let (mut i, mut j) = (alen, blen);
    // `cur` is the run being extended backwards: (a_start, a_end, b_start, b_end).
    let mut cur: Option<(usize, usize, usize, usize)> = None;
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[idx - 1] = a[i - 1];
            match &mut cur {
                None => cur = Some((i - 1, i - 1, j - 1, j - 1)),
                Some(r) if r.0 == i && r.2 == j => {
                    r.0 -= 1;
                    r.2 -= 1;
                }
                Some(_) => emit = true,
            }
            if cur.is_some_and(|r| r.0 == 0 || r.2 == 0) {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if cur.is_some() {
                emit = true;
            }
        }
        if emit && let Some(r) = cur.take() {
            matches.push(((r.0 as u32, r.1 as u32), (r.2 as u32, r.3 as u32)));
        }
    }
    (total, result, matches)
}

impl Command<'_> for Lcs {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Lcs {
            a: a.next_owned()?,
            b: a.next_owned()?,
            options: crate::engine::args::owned(a.rest()),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let wrong = || CmdError::msg("ERR The specified keys must contain string values");
        let a = match ctx.store.read_value(db, &self.a, now) {
            None => Bytes::new(),
            Some(v) => string_bytes(v).map_err(|_| wrong())?,
        };
        let b = match ctx.store.read_value(db, &self.b, now) {
            None => Bytes::new(),
            Some(v) => string_bytes(v).map_err(|_| wrong())?,
        };
        let (mut idx, mut len, mut withlen, mut minlen) = (false, false, false, 0i64);
        let mut i = 0;
        while i < self.options.len() {
            let opt = &self.options[i];
            let more = i + 1 < self.options.len();
            if is(opt, "idx") {
                idx = true;
            } else if is(opt, "len") {
                len = true;
            } else if is(opt, "withmatchlen") {
                withlen = true;
            } else if is(opt, "minmatchlen") && more {
                minlen = parse_i64(&self.options[i + 1])
                    .ok_or(CmdError::NotInteger)?
                    .max(0);
                i += 1;
            } else {
                return Err(CmdError::Syntax);
            }
            i += 1;
        }
        if len && idx {
            return Err(CmdError::msg(
                "ERR If you want both the length and indexes, please just use IDX.",
            ));
        }
        if a.len() as u64 >= u64::from(u32::MAX - 1) || b.len() as u64 >= u64::from(u32::MAX - 1) {
            return Err(CmdError::msg("ERR String too long for LCS"));
        }
        let cells = (a.len() as u64 + 1).saturating_mul(b.len() as u64 + 1);
        if cells.saturating_mul(4) > max_string_len(ctx) {
            return Err(CmdError::msg(
                "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
            ));
        }
        let (total, result, matches) = lcs(&a, &b, idx || !len);
        if idx {
            let runs = matches
                .into_iter()
                .filter(|m| {
                    let n = i64::from(m.0.1 - m.0.0 + 1);
                    minlen == 0 || n >= minlen
                })
                .map(|((a0, a1), (b0, b1))| {
                    let mut item = vec![
                        Reply::Array(vec![Reply::Int(a0.into()), Reply::Int(a1.into())]),
                        Reply::Array(vec![Reply::Int(b0.into()), Reply::Int(b1.into())]),
                    ];
                    if withlen {
                        item.push(Reply::Int(i64::from(a1 - a0 + 1)));
                    }
                    Reply::Array(item)
                })
                .collect();
            return Ok(Reply::Map(vec![
                (Reply::bulk(b"matches"), Reply::Array(runs)),
                (Reply::bulk(b"len"), Reply::Int(total.into())),
            ]));
        }
        if len {
            return Ok(Reply::Int(total.into()));
        }
        Ok(Reply::Bulk(Bytes::from(result)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getrange_bounds_follow_redis() {
        assert_eq!(getrange_bounds(0, -1, 5), Some((0, 4)));
        assert_eq!(getrange_bounds(-3, -1, 5), Some((2, 4)));
        assert_eq!(getrange_bounds(-1, -3, 5), None);
        assert_eq!(getrange_bounds(3, 100, 5), Some((3, 4)));
        assert_eq!(getrange_bounds(5, 10, 5), None);
        assert_eq!(getrange_bounds(-100, -50, 5), Some((0, 0)));
        assert_eq!(getrange_bounds(0, 0, 0), None);
        assert_eq!(getrange_bounds(i64::MIN, i64::MAX, 5), Some((0, 4)));
        assert_eq!(getrange_bounds(i64::MAX, i64::MIN, 5), None);
    }

    #[test]
    fn lcs_string_and_runs() {
        let (n, s, m) = lcs(b"ohmytext", b"mynewtext", true);
        assert_eq!((n, &s[..]), (6, &b"mytext"[..]));
        assert_eq!(m, vec![((4, 7), (5, 8)), ((2, 3), (0, 1))]);
        let (n, s, m) = lcs(b"", b"abc", true);
        assert_eq!((n, s.len(), m.len()), (0, 0, 0));
        assert_eq!(lcs(b"abc", b"abc", false).0, 3);
    }
}
