//! Bitmap commands: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD and BITFIELD_RO.
//!
//! Bits are numbered as Redis numbers them: bit 0 is the most significant bit of byte 0, and
//! a BITFIELD integer is read most significant bit first across byte boundaries. Writes grow
//! the string with zero bytes up to the highest bit they touch, after the same offset check
//! Redis makes (`offset / 8 < proto-max-bulk-len`), so one request allocates at most what
//! Redis would. The in-place editing helpers are `strrange`'s.

use crate::services::notify::class;
use bytes::Bytes;

use crate::commands::strrange::{grow_zero, max_string_len, string_bytes};
use crate::engine::args::is;
use crate::engine::{
    Access, ArgCursor, Command, CommandSpec as C, Ctx, KeySpecDoc, VariantCommand, run, run_as,
};
use crate::error::{CmdError, CmdResult};
use crate::num::parse_i64;
use crate::protocol::Reply;
use crate::store::Value;
use crate::store::access::{StringMut, StringValue};

/// The bitmap commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[C] = &[
    C::new("setbit", 4, &["write", "denyoom"], C::keys(1, 1, 1), run::<SetBit>).with_acl(&["@write", "@bitmap", "@slow"])
        .with_key_specs(&[KeySpecDoc::range(&["RW", "access", "update"], 1, 0)]),
    C::new("getbit", 3, &["readonly", "fast"], C::keys(1, 1, 1), run::<GetBit>).with_acl(&["@read", "@bitmap", "@fast"]),
    C::new("bitcount", -2, &["readonly"], C::keys(1, 1, 1), run::<BitCount>).with_acl(&["@read", "@bitmap", "@slow"]),
    C::new("bitpos", -3, &["readonly"], C::keys(1, 1, 1), run::<BitPos>).with_acl(&["@read", "@bitmap", "@slow"]),
    C::new("bitop", -4, &["write", "denyoom"], C::keys(2, -1, 1), run::<BitOp>).with_acl(&["@write", "@bitmap", "@slow"])
        .with_key_specs(&[KeySpecDoc::range(&["OW", "update"], 2, 0), KeySpecDoc::range(&["RO", "access"], 3, -1)]),
    C::new("bitfield", -2, &["write", "denyoom"], C::keys(1, 1, 1), |c, a| run_as::<BitField>(c, a, Access::ReadWrite)).with_acl(&["@write", "@bitmap", "@slow"])
        .with_key_specs(&[KeySpecDoc::range(&["RW", "access", "update", "variable_flags"], 1, 0)
            .with_notes("This command allows both access and modification of the key")])
        .with_variable_key_flags(bitfield_key_flags),
    C::new("bitfield_ro", -2, &["readonly", "fast"], C::keys(1, 1, 1), |c, a| run_as::<BitField>(c, a, Access::ReadOnly)).with_acl(&["@read", "@bitmap", "@fast"]),
];

/// BITFIELD's key flags in one request: with only GET and OVERFLOW operations it reads
/// (`RO access`), else it reads and writes (Redis's `bitfieldGetKeys`).
fn bitfield_key_flags(args: &[&[u8]]) -> &'static [&'static str] {
    let mut i = 2;
    while i < args.len() {
        let left = args.len() - i - 1;
        let a = &args[i];
        if a.eq_ignore_ascii_case(b"get") && left >= 2 {
            i += 3;
        } else if a.eq_ignore_ascii_case(b"overflow") && left >= 1 {
            i += 2;
        } else {
            return &["RW", "access", "update"];
        }
    }
    &["RO", "access"]
}

const BIT_OFFSET_ERR: &str = "ERR bit offset is not an integer or out of range";

/// Redis's getBitOffsetFromArgument: a non-negative integer whose byte is inside
/// proto-max-bulk-len; with `bits` > 0, `#n` means `n * bits` (BITFIELD).
fn bit_offset(ctx: &Ctx<'_>, arg: &[u8], bits: u32) -> CmdResult<u64> {
    let err = || CmdError::msg(BIT_OFFSET_ERR);
    let (hash, digits) = match arg.split_first() {
        Some((b'#', rest)) if bits > 0 => (true, rest),
        _ => (false, arg),
    };
    let mut n = parse_i64(digits).ok_or_else(err)?;
    if hash {
        // C's signed overflow wraps in practice; the range check below then refuses it.
        n = n.wrapping_mul(i64::from(bits));
    }
    if n < 0 || (n as u64 >> 3) >= max_string_len(ctx) {
        return Err(err());
    }
    Ok(n as u64)
}

/// The bit at `offset` (0 past the end).
fn get_bit(s: &[u8], offset: u64) -> bool {
    let byte = (offset >> 3) as usize;
    s.get(byte)
        .is_some_and(|b| b & (1 << (7 - (offset & 7))) != 0)
}

/// SETBIT key offset value
#[derive(Debug)]
pub(crate) struct SetBit {
    key: Bytes,
    offset: Bytes,
    value: Bytes,
}

impl Command<'_> for SetBit {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(SetBit {
            key: a.next_owned()?,
            offset: a.next_owned()?,
            value: a.next_owned()?,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let offset = bit_offset(ctx, &self.offset, 0)?;
        let on = match parse_i64(&self.value) {
            Some(0) => false,
            Some(1) => true,
            _ => return Err(CmdError::msg("ERR bit is not an integer or out of range")),
        };
        let (db, now) = (ctx.db(), ctx.now_ms);
        let byte = (offset >> 3) as usize;
        let mask = 1u8 << (7 - (offset & 7));
        let flip = |v: &mut Vec<u8>| {
            let old_len = v.len();
            grow_zero(v, byte + 1);
            let old = v[byte] & mask != 0;
            if on {
                v[byte] |= mask;
            } else {
                v[byte] &= !mask;
            }
            (old, old_len != v.len() || old != on)
        };
        let (old, dirty) = {
            let mut s: StringMut = ctx
                .store
                .modify_or_create(db, &self.key, now, || StringValue::raw(Vec::new()))?;
            // A created key always grows, so it is always dirty (and always stored).
            let (old, dirty) = s.edit(flip);
            if !dirty {
                s.mark_unchanged();
            }
            (old, dirty)
        };
        if dirty {
            ctx.notify(class::STRING, "setbit", &self.key);
        }
        Ok(Reply::Int(old as i64))
    }
}

/// GETBIT key offset
#[derive(Debug)]
pub(crate) struct GetBit {
    key: Bytes,
    offset: Bytes,
}

impl Command<'_> for GetBit {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(GetBit {
            key: a.next_owned()?,
            offset: a.next_owned()?,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let offset = bit_offset(ctx, &self.offset, 0)?;
        let (db, now) = (ctx.db(), ctx.now_ms);
        let Some(v) = ctx.store.read_value(db, &self.key, now) else {
            return Ok(Reply::Int(0));
        };
        let s = string_bytes(v)?;
        Ok(Reply::Int(get_bit(&s, offset) as i64))
    }
}

/// Set bits in `s`.
fn popcount(s: &[u8]) -> u64 {
    let mut chunks = s.chunks_exact(8);
    let mut n: u64 = chunks
        .by_ref()
        .map(|c| {
            u64::from(
                u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]).count_ones(),
            )
        })
        .sum();
    n += chunks
        .remainder()
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum::<u64>();
    n
}

/// Redis's redisBitpos: the position of the first `bit` in `s`; for a 1 not found, -1; for a
/// 0 not found, the first bit past the end.
fn first_bit(s: &[u8], bit: bool) -> i64 {
    for (i, &b) in s.iter().enumerate() {
        let b = if bit { b } else { !b };
        if b != 0 {
            return i as i64 * 8 + i64::from(b.leading_zeros());
        }
    }
    if bit { -1 } else { s.len() as i64 * 8 }
}

/// Resolves a BITCOUNT/BITPOS range over `len` bytes, in bytes or bits, to byte indexes and
/// the masks of the edge bits outside the range (Redis's first/last_byte_neg_mask).
/// None when the range is empty.
fn bit_range(mut start: i64, mut end: i64, len: i64, bits: bool) -> Option<(i64, i64, u8, u8)> {
    let total = if bits { len << 3 } else { len };
    if start < 0 {
        start += total;
    }
    if end < 0 {
        end += total;
    }
    start = start.max(0);
    end = end.max(0).min(total - 1);
    let (mut first_mask, mut last_mask) = (0u8, 0u8);
    if bits && start <= end {
        first_mask = !((1u16 << (8 - (start & 7))) - 1) as u8;
        last_mask = ((1u16 << (7 - (end & 7))) - 1) as u8;
        start >>= 3;
        end >>= 3;
    }
    (start <= end).then_some((start, end, first_mask, last_mask))
}

/// BIT or BYTE, else a syntax error.
fn unit_is_bit(arg: &[u8]) -> CmdResult<bool> {
    if is(arg, "bit") {
        Ok(true)
    } else if is(arg, "byte") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// BITCOUNT key [start end [BYTE|BIT]]
#[derive(Debug)]
pub(crate) struct BitCount {
    key: Bytes,
    rest: Vec<Bytes>,
}

impl Command<'_> for BitCount {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(BitCount {
            key: a.next_owned()?,
            rest: crate::engine::args::owned(a.rest()),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        // As Redis: the key is looked up (and type-checked) before the range is parsed.
        let Some(v) = ctx.store.read_value(db, &self.key, now) else {
            return Ok(Reply::Int(0));
        };
        let s = string_bytes(v)?;
        let len = s.len() as i64;
        let (start, end, fm, lm) = match &self.rest[..] {
            [] => {
                if len == 0 {
                    return Ok(Reply::Int(0));
                }
                (0, len - 1, 0, 0)
            }
            [start, end, unit @ ..] if unit.len() <= 1 => {
                let start = parse_i64(start).ok_or(CmdError::NotInteger)?;
                let end = parse_i64(end).ok_or(CmdError::NotInteger)?;
                if start < 0 && end < 0 && start > end {
                    return Ok(Reply::Int(0));
                }
                let bits = match unit.first() {
                    Some(u) => unit_is_bit(u)?,
                    None => false,
                };
                match bit_range(start, end, len, bits) {
                    Some(r) => r,
                    None => return Ok(Reply::Int(0)),
                }
            }
            _ => return Err(CmdError::Syntax),
        };
        let (a, b) = (start as usize, end as usize);
        let mut count = popcount(&s[a..=b]);
        count -= u64::from((s[a] & fm).count_ones());
        count -= u64::from((s[b] & lm).count_ones());
        Ok(Reply::Int(count as i64))
    }
}

/// BITPOS key bit [start [end [BYTE|BIT]]]
#[derive(Debug)]
pub(crate) struct BitPos {
    key: Bytes,
    bit: Bytes,
    rest: Vec<Bytes>,
}

impl Command<'_> for BitPos {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(BitPos {
            key: a.next_owned()?,
            bit: a.next_owned()?,
            rest: crate::engine::args::owned(a.rest()),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let bit = match parse_i64(&self.bit).ok_or(CmdError::NotInteger)? {
            0 => false,
            1 => true,
            _ => return Err(CmdError::msg("ERR The bit argument must be 1 or 0.")),
        };
        let (db, now) = (ctx.db(), ctx.now_ms);
        let Some(v) = ctx.store.read_value(db, &self.key, now) else {
            return Ok(Reply::Int(if bit { -1 } else { 0 }));
        };
        let s = string_bytes(v)?;
        let len = s.len() as i64;
        let mut end_given = false;
        let range = match &self.rest[..] {
            [] => (len > 0).then_some((0, len - 1, 0, 0)),
            [start, more @ ..] if more.len() <= 2 => {
                let start = parse_i64(start).ok_or(CmdError::NotInteger)?;
                let bits = match more.get(1) {
                    Some(u) => unit_is_bit(u)?,
                    None => false,
                };
                let end = match more.first() {
                    Some(e) => {
                        end_given = true;
                        parse_i64(e).ok_or(CmdError::NotInteger)?
                    }
                    None => len - 1,
                };
                // Without an end, the range runs to the last byte (or bit): `len - 1` is
                // clamped to it either way.
                let end = if !end_given && bits {
                    (len << 3) - 1
                } else {
                    end
                };
                bit_range(start, end, len, bits)
            }
            _ => return Err(CmdError::Syntax),
        };
        let Some((start, end, fm, lm)) = range else {
            return Ok(Reply::Int(-1));
        };
        Ok(Reply::Int(bitpos_in(
            &s, bit, start, end, fm, lm, end_given,
        )))
    }
}

/// The BITPOS search over bytes `start..=end` of `s`, the edge masks excluding bits outside
/// the range, with Redis's answer when nothing is found.
fn bitpos_in(s: &[u8], bit: bool, start: i64, end: i64, fm: u8, lm: u8, end_given: bool) -> i64 {
    let (mut start, end) = (start as usize, end as usize);
    let mut bytes = end - start + 1;
    // Bits outside the range are forced to the value not searched for.
    let edge = |b: u8, mask: u8| if bit { b & !mask } else { b | mask };
    let pos = 'found: {
        if fm != 0 {
            let mut c = edge(s[start], fm);
            if lm != 0 && bytes == 1 {
                c = edge(c, lm);
            }
            let p = first_bit(&[c], bit);
            if bytes == 1 || (p != -1 && p != 8) {
                break 'found p;
            }
            start += 1;
            bytes -= 1;
        }
        let cur = bytes - usize::from(lm != 0);
        if cur > 0 {
            let p = first_bit(&s[start..start + cur], bit);
            if bytes == cur || (p != -1 && p != (cur as i64) << 3) {
                break 'found p;
            }
            start += cur;
            bytes -= cur;
        }
        first_bit(&[edge(s[end], lm)], bit)
    };
    if end_given && !bit && pos == (bytes as i64) << 3 {
        return -1;
    }
    if pos == -1 {
        -1
    } else {
        pos + ((start as i64) << 3)
    }
}

/// BITOP AND|OR|XOR|NOT destkey key [key …]
#[derive(Debug)]
pub(crate) struct BitOp {
    op: Op,
    dest: Bytes,
    keys: Vec<Bytes>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    And,
    Or,
    Xor,
    Not,
}

impl Command<'_> for BitOp {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let name = a.next()?;
        let op = if is(name, "and") {
            Op::And
        } else if is(name, "or") {
            Op::Or
        } else if is(name, "xor") {
            Op::Xor
        } else if is(name, "not") {
            Op::Not
        } else {
            return Err(CmdError::Syntax);
        };
        let dest = a.next_owned()?;
        let keys = a.rest().to_vec();
        if op == Op::Not && keys.len() != 1 {
            return Err(CmdError::msg(
                "ERR BITOP NOT must be called with a single source key.",
            ));
        }
        Ok(BitOp {
            op,
            dest,
            keys: crate::engine::args::owned(&keys),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let mut srcs = Vec::with_capacity(self.keys.len());
        for k in &self.keys {
            srcs.push(match ctx.store.read_value(db, k, now) {
                None => Bytes::new(),
                Some(v) => string_bytes(v)?,
            });
        }
        let maxlen = srcs.iter().map(|s| s.len()).max().unwrap_or(0);
        if maxlen == 0 {
            if ctx.store.remove(db, &self.dest, now).is_some() {
                ctx.notify(class::GENERIC, "del", &self.dest);
            }
            return Ok(Reply::Int(0));
        }
        let byte = |s: &Bytes, j: usize| s.get(j).copied().unwrap_or(0);
        let mut res = vec![0u8; maxlen];
        for (j, out) in res.iter_mut().enumerate() {
            let mut o = byte(&srcs[0], j);
            match self.op {
                Op::Not => o = !o,
                Op::And => srcs[1..].iter().for_each(|s| o &= byte(s, j)),
                Op::Or => srcs[1..].iter().for_each(|s| o |= byte(s, j)),
                Op::Xor => srcs[1..].iter().for_each(|s| o ^= byte(s, j)),
            }
            *out = o;
        }
        ctx.store.set(db, &self.dest, Value::Raw(res.into()), None);
        ctx.notify(class::STRING, "set", &self.dest);
        Ok(Reply::Int(maxlen as i64))
    }
}

/// What BITFIELD does when a value does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set(i64),
    IncrBy(i64),
}

#[derive(Debug, Clone, Copy)]
struct Field {
    op: FieldOp,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

/// An integer type `i1`..`i64` or `u1`..`u63`.
fn field_type(arg: &[u8]) -> CmdResult<(bool, u32)> {
    let err = || {
        CmdError::msg(
            "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
        )
    };
    let (signed, digits) = match arg.split_first() {
        Some((b'i', d)) => (true, d),
        Some((b'u', d)) => (false, d),
        _ => return Err(err()),
    };
    // Redis reads the digits as a C string: they stop at a NUL byte.
    let digits = &digits[..digits.iter().position(|&c| c == 0).unwrap_or(digits.len())];
    match parse_i64(digits) {
        Some(n) if n >= 1 && n <= if signed { 64 } else { 63 } => Ok((signed, n as u32)),
        _ => Err(err()),
    }
}

/// Reads `bits` bits at `offset`, most significant first (bits past the end read as 0).
fn get_field(s: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0u64, |v, i| (v << 1) | u64::from(get_bit(s, offset + i)))
}

/// Writes the low `bits` bits of `value` at `offset` (the string is long enough).
fn set_field(s: &mut [u8], offset: u64, bits: u32, value: u64) {
    for i in 0..u64::from(bits) {
        let on = value & (1u64 << (u64::from(bits) - 1 - i)) != 0;
        let at = offset + i;
        let (byte, mask) = ((at >> 3) as usize, 1u8 << (7 - (at & 7)));
        if on {
            s[byte] |= mask;
        } else {
            s[byte] &= !mask;
        }
    }
}

/// Sign-extends a `bits`-wide value.
fn to_signed(v: u64, bits: u32) -> i64 {
    if bits < 64 && v & (1u64 << (bits - 1)) != 0 {
        (v | (u64::MAX << bits)) as i64
    } else {
        v as i64
    }
}

/// `value + incr` in an unsigned field of `bits` bits: the result to store, or None when it
/// overflows under FAIL.
fn unsigned_add(value: u64, incr: i64, bits: u32, ow: Overflow) -> Option<u64> {
    let max = (1u64 << bits) - 1;
    let sum = i128::from(value) + i128::from(incr);
    if (0..=i128::from(max)).contains(&sum) {
        return Some(sum as u64);
    }
    match ow {
        Overflow::Fail => None,
        Overflow::Sat => Some(if sum < 0 { 0 } else { max }),
        Overflow::Wrap => Some(value.wrapping_add(incr as u64) & max),
    }
}

/// `value + incr` in a signed field of `bits` bits, as `unsigned_add`.
fn signed_add(value: i64, incr: i64, bits: u32, ow: Overflow) -> Option<i64> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let sum = i128::from(value) + i128::from(incr);
    if (i128::from(min)..=i128::from(max)).contains(&sum) {
        return Some(sum as i64);
    }
    match ow {
        Overflow::Fail => None,
        Overflow::Sat => Some(if sum < 0 { min } else { max }),
        Overflow::Wrap => Some(to_signed(
            (value as u64).wrapping_add(incr as u64) & mask_of(bits),
            bits,
        )),
    }
}

fn mask_of(bits: u32) -> u64 {
    if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// BITFIELD key [GET type offset] [SET type offset value] [INCRBY type offset increment]
/// [OVERFLOW WRAP|SAT|FAIL] …, and BITFIELD_RO key [GET type offset …]
#[derive(Debug)]
pub(crate) struct BitField {
    access: Access,
    key: Bytes,
    args: Vec<Bytes>,
}

impl VariantCommand<'_> for BitField {
    type Variant = Access;

    fn parse(a: &mut ArgCursor<'_>, access: Access) -> CmdResult<Self> {
        Ok(BitField {
            access,
            key: a.next_owned()?,
            args: crate::engine::args::owned(a.rest()),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let mut ops = Vec::new();
        let mut overflow = Overflow::Wrap;
        let mut highest: Option<u64> = None;
        let mut j = 0;
        while j < self.args.len() {
            let sub = &self.args[j];
            let rem = self.args.len() - j - 1;
            let kind = if is(sub, "get") && rem >= 2 {
                0
            } else if is(sub, "set") && rem >= 3 {
                1
            } else if is(sub, "incrby") && rem >= 3 {
                2
            } else if is(sub, "overflow") && rem >= 1 {
                let t = &self.args[j + 1];
                overflow = if is(t, "wrap") {
                    Overflow::Wrap
                } else if is(t, "sat") {
                    Overflow::Sat
                } else if is(t, "fail") {
                    Overflow::Fail
                } else {
                    return Err(CmdError::msg("ERR Invalid OVERFLOW type specified"));
                };
                j += 2;
                continue;
            } else {
                return Err(CmdError::Syntax);
            };
            let (signed, bits) = field_type(&self.args[j + 1])?;
            let offset = bit_offset(ctx, &self.args[j + 2], bits)?;
            let op = if kind == 0 {
                FieldOp::Get
            } else {
                let last = offset + u64::from(bits) - 1;
                highest = Some(highest.map_or(last, |h| h.max(last)));
                let v = parse_i64(&self.args[j + 3]).ok_or(CmdError::NotInteger)?;
                if kind == 1 {
                    FieldOp::Set(v)
                } else {
                    FieldOp::IncrBy(v)
                }
            };
            ops.push(Field {
                op,
                signed,
                bits,
                offset,
                overflow,
            });
            j += if kind == 0 { 3 } else { 4 };
        }
        let (db, now) = (ctx.db(), ctx.now_ms);
        let Some(highest) = highest else {
            // Only GETs: a read lookup, missing keys read as zeros.
            let s = match ctx.store.read_value(db, &self.key, now) {
                None => Bytes::new(),
                Some(v) => string_bytes(v)?,
            };
            return Ok(Reply::Array(
                ops.iter().map(|f| read_reply(&s, f)).collect(),
            ));
        };
        if self.access == Access::ReadOnly {
            return Err(CmdError::msg(
                "ERR BITFIELD_RO only supports the GET subcommand",
            ));
        }
        let need = (highest >> 3) as usize + 1;
        let run = |v: &mut Vec<u8>| {
            // A created key starts empty, so it has grown too.
            let grown = v.len() < need;
            grow_zero(v, need);
            let mut changes = 0;
            let replies: Vec<Reply> = ops
                .iter()
                .map(|f| {
                    let old = get_field(v, f.offset, f.bits);
                    let (new, reply) = match (f.op, f.signed) {
                        (FieldOp::Get, _) => return read_reply(v, f),
                        (FieldOp::IncrBy(by), true) => {
                            match signed_add(to_signed(old, f.bits), by, f.bits, f.overflow) {
                                Some(n) => (n as u64 & mask_of(f.bits), Reply::Int(n)),
                                None => return Reply::Null,
                            }
                        }
                        (FieldOp::Set(x), true) => match signed_add(x, 0, f.bits, f.overflow) {
                            Some(n) => (
                                n as u64 & mask_of(f.bits),
                                Reply::Int(to_signed(old, f.bits)),
                            ),
                            None => return Reply::Null,
                        },
                        (FieldOp::IncrBy(by), false) => {
                            match unsigned_add(old, by, f.bits, f.overflow) {
                                Some(n) => (n, Reply::Int(n as i64)),
                                None => return Reply::Null,
                            }
                        }
                        (FieldOp::Set(x), false) => match unsigned_set(x, f.bits, f.overflow) {
                            Some(n) => (n, Reply::Int(old as i64)),
                            None => return Reply::Null,
                        },
                    };
                    set_field(v, f.offset, f.bits, new);
                    if grown || old != new {
                        changes += 1;
                    }
                    reply
                })
                .collect();
            (replies, changes)
        };
        let (replies, changes) = {
            // A created key is stored even if every write failed, then unsignalled (Redis's
            // bare dbAdd).
            let mut s: StringMut = ctx
                .store
                .modify_or_create(db, &self.key, now, || StringValue::raw(Vec::new()))?;
            let (replies, changes) = s.edit(run);
            if changes == 0 {
                s.mark_unchanged();
            }
            (replies, changes)
        };
        if changes > 0 {
            ctx.notify(class::STRING, "setbit", &self.key);
        }
        Ok(Reply::Array(replies))
    }
}

/// SET of `x` into an unsigned field: Redis checks the value as an unsigned 64-bit number
/// (a negative `x` is huge), so it overflows unless it fits.
fn unsigned_set(x: i64, bits: u32, ow: Overflow) -> Option<u64> {
    let max = (1u64 << bits) - 1;
    let v = x as u64;
    if v <= max {
        return Some(v);
    }
    match ow {
        Overflow::Fail => None,
        Overflow::Sat => Some(max),
        Overflow::Wrap => Some(v & max),
    }
}

/// A GET's reply.
fn read_reply(s: &[u8], f: &Field) -> Reply {
    let v = get_field(s, f.offset, f.bits);
    Reply::Int(if f.signed {
        to_signed(v, f.bits)
    } else {
        v as i64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_bit_like_redis() {
        assert_eq!(first_bit(&[0x00, 0x10], true), 11);
        assert_eq!(first_bit(&[0x00], true), -1);
        assert_eq!(first_bit(&[0xff, 0xfe], false), 15);
        assert_eq!(first_bit(&[0xff], false), 8);
    }

    #[test]
    fn fields_round_trip_across_bytes() {
        let mut s = vec![0u8; 3];
        set_field(&mut s, 5, 10, 0x2ab);
        assert_eq!(get_field(&s, 5, 10), 0x2ab);
        assert_eq!(to_signed(get_field(&s, 5, 10), 10), 0x2ab - 1024);
        assert_eq!(get_field(&s, 20, 8), get_field(&s, 20, 4) << 4);
    }

    #[test]
    fn overflow_modes() {
        assert_eq!(unsigned_add(250, 10, 8, Overflow::Wrap), Some(4));
        assert_eq!(unsigned_add(250, 10, 8, Overflow::Sat), Some(255));
        assert_eq!(unsigned_add(5, -10, 8, Overflow::Sat), Some(0));
        assert_eq!(unsigned_add(5, -10, 8, Overflow::Fail), None);
        assert_eq!(signed_add(127, 1, 8, Overflow::Wrap), Some(-128));
        assert_eq!(signed_add(-128, -1, 8, Overflow::Sat), Some(-128));
        assert_eq!(signed_add(i64::MAX, 1, 64, Overflow::Wrap), Some(i64::MIN));
        assert_eq!(signed_add(i64::MAX, 1, 64, Overflow::Fail), None);
        assert_eq!(unsigned_set(-1, 8, Overflow::Wrap), Some(255));
        assert_eq!(unsigned_set(-1, 8, Overflow::Sat), Some(255));
    }
}
