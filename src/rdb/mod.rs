//! Redis's serialization of one value (RDB format version 10), as DUMP produces and RESTORE
//! reads it: the object type byte, the value's payload, the 2-byte RDB version and a CRC64 of
//! everything before it.
//!
//! This module owns the value encodings only (lengths, strings with their integer and LZF
//! forms, listpacks, intsets, quicklists, doubles); it depends on [`crate::store`]'s value
//! types and on nothing of the server, so an RDB snapshot or replication can reuse it.
//!
//! Output is what Redis 7.0 writes for the encodings sluice keeps (strings, quicklist 2 of
//! listpacks, intset or hashtable sets, listpack or skiplist sorted sets with binary
//! doubles, listpack or hashtable hashes), except that strings are never LZF-compressed
//! (Redis loads them either way). Input accepts everything Redis 7.0 writes, plus what it
//! still loads from older versions: the plain-list (1) and string-double sorted-set (3)
//! types and the ziplist-based types of RDB 9 and older (zipmap, ziplist, quicklist 1;
//! `ziplist.rs`), converted to today's encodings as Redis converts them.
//!
//! A hash with field TTLs (Redis 7.4's hash-field expiry) is written and read as Redis 7.4
//! does: RDB type 25 (`listpackex`: the minimum expiry, then a listpack of field, value, TTL
//! triples, 0 for none) or 24 (a table: the minimum expiry, then per field its TTL relative to
//! it plus one, or 0), with version 12 in the DUMP footer (other values keep 10, so Redis 7.0
//! still restores them); RESTORE accepts versions up to 12. A snapshot file holding such a
//! hash says version 12 in its header as Redis 7.4's do; other files keep 10.
//!
//! Every length in a payload is checked against the bytes that remain before anything is
//! allocated, so a hostile payload costs at most a pass over its own bytes.

mod crc64;
mod listpack;
pub(crate) mod snapshot;
mod stream;
mod ziplist;

pub(crate) use crc64::crc64;

use bytes::Bytes;

use crate::num::parse_i64;
use crate::store::Value;
use crate::store::value::{
    HASH_MAX_LISTPACK_ENTRIES, HashLimits, HashValue, SET_MAX_INTSET_ENTRIES, SetValue,
};
use crate::store::zset::{SortedSet, ZsetLimits};

/// The RDB format version written in the footer (Redis 7.0's).
pub(crate) const RDB_VERSION: u16 = 10;

/// The version of a payload holding a hash with field TTLs (Redis 7.4's), and the newest
/// RESTORE accepts.
pub(crate) const RDB_VERSION_FIELD_TTLS: u16 = 12;

const TYPE_STRING: u8 = 0;
const TYPE_LIST: u8 = 1;
const TYPE_SET: u8 = 2;
const TYPE_ZSET: u8 = 3;
const TYPE_HASH: u8 = 4;
const TYPE_ZSET_2: u8 = 5;
const TYPE_HASH_ZIPMAP: u8 = 9;
const TYPE_LIST_ZIPLIST: u8 = 10;
const TYPE_SET_INTSET: u8 = 11;
const TYPE_ZSET_ZIPLIST: u8 = 12;
const TYPE_HASH_ZIPLIST: u8 = 13;
const TYPE_LIST_QUICKLIST: u8 = 14;
const TYPE_HASH_LISTPACK: u8 = 16;
const TYPE_ZSET_LISTPACK: u8 = 17;
const TYPE_LIST_QUICKLIST_2: u8 = 18;
/// A small set as a listpack of its members (Redis 7.2, RDB 11).
const TYPE_SET_LISTPACK: u8 = 20;
/// Redis 7.4: a hash with field TTLs, [min expiry][count]([ttl][field][value])…
const TYPE_HASH_METADATA: u8 = 24;
/// Redis 7.4: a `listpackex`, [min expiry] then a listpack of field, value, ttl triples.
const TYPE_HASH_LISTPACK_EX: u8 = 25;

const ENC_INT8: u8 = 0;
const ENC_INT16: u8 = 1;
const ENC_INT32: u8 = 2;
const ENC_LZF: u8 = 3;

const CONTAINER_PLAIN: u64 = 1;
const CONTAINER_PACKED: u64 = 2;

/// Largest listpack a list node gets when dumped (Redis's default `list-max-listpack-size`
/// of -2: 8 KB).
const LIST_NODE_BYTES: usize = 8 * 1024;

/// Why a payload was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RdbError {
    /// The footer's version is newer than ours, or the checksum does not match (RESTORE's
    /// "DUMP payload version or checksum are wrong").
    VersionOrChecksum,
    /// The payload does not decode to a value ("Bad data format").
    BadFormat,
}

type R<T> = Result<T, RdbError>;

/// DUMP: the serialized value with its version and checksum footer.
pub(crate) fn dump(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_value(&mut out, value);
    // Values Redis 7.0 can read keep its version; a hash with field TTLs is written as 7.4.
    let version = match value {
        Value::Hash(h) if h.is_volatile() => RDB_VERSION_FIELD_TTLS,
        _ => RDB_VERSION,
    };
    out.extend_from_slice(&version.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Checks a DUMP payload's footer (RDB version, CRC64), as Redis's `verifyDumpPayload`.
pub(crate) fn verify(payload: &[u8]) -> R<()> {
    if payload.len() < 10 {
        return Err(RdbError::VersionOrChecksum);
    }
    let footer = payload.len() - 10;
    let version = u16::from_le_bytes([payload[footer], payload[footer + 1]]);
    if version > RDB_VERSION_FIELD_TTLS {
        return Err(RdbError::VersionOrChecksum);
    }
    let mut crc = [0u8; 8];
    crc.copy_from_slice(&payload[footer + 2..]);
    if crc64(0, &payload[..footer + 2]) != u64::from_le_bytes(crc) {
        return Err(RdbError::VersionOrChecksum);
    }
    Ok(())
}

/// RESTORE: verifies the footer, then decodes the value (type byte and payload). `limits`
/// are the sorted-set encoding thresholds in force.
pub(crate) fn restore(payload: &[u8], limits: &ZsetLimits) -> R<Value> {
    verify(payload)?;
    let mut r = Reader {
        buf: &payload[..payload.len() - 10],
    };
    let t = r.byte()?;
    read_value(&mut r, t, limits)
}

/// The RDB opcode of a function library (`RDB_OPCODE_FUNCTION2`): its code follows as a string.
const OPCODE_FUNCTION2: u8 = 245;

/// FUNCTION DUMP: each library's code after the function opcode, then the footer.
pub(crate) fn dump_functions<'a>(codes: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(OPCODE_FUNCTION2);
        write_string(&mut out, code);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Why a FUNCTION RESTORE payload was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FunctionsError {
    /// Bad footer (version or checksum).
    VersionOrChecksum,
    /// An opcode other than a function library.
    NotAFunction,
    /// A library entry that does not decode.
    BadFormat,
}

/// FUNCTION RESTORE: verifies the footer and returns each library's code, in order.
pub(crate) fn restore_functions(payload: &[u8]) -> Result<Vec<Bytes>, FunctionsError> {
    verify(payload).map_err(|_| FunctionsError::VersionOrChecksum)?;
    let mut r = Reader {
        buf: &payload[..payload.len() - 10],
    };
    let mut codes = Vec::new();
    while !r.buf.is_empty() {
        if r.byte().map_err(|_| FunctionsError::BadFormat)? != OPCODE_FUNCTION2 {
            return Err(FunctionsError::NotAFunction);
        }
        codes.push(r.string().map_err(|_| FunctionsError::BadFormat)?);
    }
    Ok(codes)
}

// ---------------------------------------------------------------------------------------------
// Writing

fn write_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.push(((len >> 8) as u8) | 0x40);
        out.push(len as u8);
    } else if len <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// A string as `rdbSaveRawString` writes it: short canonical integers that fit 32 bits in
/// their integer encoding, everything else verbatim.
fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() <= 11
        && let Some(n) = parse_i64(s)
        && write_int_encoded(out, n)
    {
        return;
    }
    write_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

fn write_int_encoded(out: &mut Vec<u8>, n: i64) -> bool {
    if let Ok(v) = i8::try_from(n) {
        out.extend_from_slice(&[0xC0 | ENC_INT8, v as u8]);
    } else if let Ok(v) = i16::try_from(n) {
        out.push(0xC0 | ENC_INT16);
        out.extend_from_slice(&v.to_le_bytes());
    } else if let Ok(v) = i32::try_from(n) {
        out.push(0xC0 | ENC_INT32);
        out.extend_from_slice(&v.to_le_bytes());
    } else {
        return false;
    }
    true
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Int(n) => {
            out.push(TYPE_STRING);
            if !write_int_encoded(out, *n) {
                write_string(out, itoa::Buffer::new().format(*n).as_bytes());
            }
        }
        Value::Str(b) | Value::Raw(b) => {
            out.push(TYPE_STRING);
            write_string(out, b);
        }
        Value::List(l) => {
            out.push(TYPE_LIST_QUICKLIST_2);
            let mut nodes: Vec<Vec<u8>> = Vec::new();
            let mut node = listpack::Builder::new();
            for item in l.iter() {
                if node.count() > 0 && node.bytes() + item.len() + 11 > LIST_NODE_BYTES {
                    nodes.push(std::mem::replace(&mut node, listpack::Builder::new()).finish());
                }
                node.push(item);
            }
            if node.count() > 0 {
                nodes.push(node.finish());
            }
            write_len(out, nodes.len() as u64);
            for lp in nodes {
                write_len(out, CONTAINER_PACKED);
                write_len(out, lp.len() as u64);
                out.extend_from_slice(&lp);
            }
        }
        Value::Set(s) => match &**s {
            SetValue::Ints(v) => {
                out.push(TYPE_SET_INTSET);
                let blob = intset_bytes(v);
                write_len(out, blob.len() as u64);
                out.extend_from_slice(&blob);
            }
            SetValue::Hashed(h) => {
                out.push(TYPE_SET);
                write_len(out, h.len() as u64);
                for m in h {
                    write_string(out, m);
                }
            }
        },
        Value::Hash(h) if matches!(**h, HashValue::ListpackEx(_)) => {
            out.push(TYPE_HASH_LISTPACK_EX);
            out.extend_from_slice(&h.min_field_ttl().unwrap_or(0).to_le_bytes());
            let mut lp = listpack::Builder::new();
            let mut ttl = itoa::Buffer::new();
            for (f, v) in h.iter() {
                lp.push(f);
                lp.push(v);
                lp.push(ttl.format(h.field_ttl(f).unwrap_or(0)).as_bytes());
            }
            let blob = lp.finish();
            write_len(out, blob.len() as u64);
            out.extend_from_slice(&blob);
        }
        Value::Hash(h) if h.min_field_ttl().is_some() => {
            let min = h.min_field_ttl().unwrap_or(0);
            out.push(TYPE_HASH_METADATA);
            out.extend_from_slice(&min.to_le_bytes());
            write_len(out, h.len() as u64);
            for (f, v) in h.iter() {
                // 0: no TTL; else the time relative to the minimum, plus one.
                write_len(out, h.field_ttl(f).map_or(0, |at| at - min + 1));
                write_string(out, f);
                write_string(out, v);
            }
        }
        Value::Hash(h) => {
            if h.is_listpack() {
                out.push(TYPE_HASH_LISTPACK);
                let mut lp = listpack::Builder::new();
                for (f, v) in h.iter() {
                    lp.push(f);
                    lp.push(v);
                }
                let blob = lp.finish();
                write_len(out, blob.len() as u64);
                out.extend_from_slice(&blob);
            } else {
                out.push(TYPE_HASH);
                write_len(out, h.len() as u64);
                for (f, v) in h.iter() {
                    write_string(out, f);
                    write_string(out, v);
                }
            }
        }
        Value::Stream(s) => stream::write(out, s),
        Value::ZSet(z) => {
            if z.encoding() == "listpack" {
                out.push(TYPE_ZSET_LISTPACK);
                let mut lp = listpack::Builder::new();
                let mut text = Vec::new();
                for (m, s) in z.iter() {
                    lp.push(&m);
                    text.clear();
                    crate::num::format_double(s, &mut text);
                    lp.push(&text);
                }
                let blob = lp.finish();
                write_len(out, blob.len() as u64);
                out.extend_from_slice(&blob);
            } else {
                // Highest score first, as Redis writes a skiplist (from its tail).
                out.push(TYPE_ZSET_2);
                write_len(out, z.len() as u64);
                for (m, s) in z.iter().rev() {
                    write_string(out, &m);
                    out.extend_from_slice(&s.to_le_bytes());
                }
            }
        }
    }
}

/// An intset blob: encoding width, count, then the sorted members, all little-endian.
fn intset_bytes(v: &[i64]) -> Vec<u8> {
    let width: u32 = if v.iter().all(|&n| i16::try_from(n).is_ok()) {
        2
    } else if v.iter().all(|&n| i32::try_from(n).is_ok()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + v.len() * width as usize);
    out.extend_from_slice(&width.to_le_bytes());
    out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    for &n in v {
        out.extend_from_slice(&n.to_le_bytes()[..width as usize]);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Reading

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: u64) -> R<&'a [u8]> {
        let n = usize::try_from(n).map_err(|_| RdbError::BadFormat)?;
        if n > self.buf.len() {
            return Err(RdbError::BadFormat);
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn byte(&mut self) -> R<u8> {
        Ok(self.take(1)?[0])
    }

    /// A length, or (for strings) the special encoding it announces.
    fn len_or_enc(&mut self) -> R<(u64, bool)> {
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => (u64::from(b & 0x3F), false),
            1 => (u64::from(b & 0x3F) << 8 | u64::from(self.byte()?), false),
            2 => match b {
                0x80 => {
                    let mut x = [0u8; 4];
                    x.copy_from_slice(self.take(4)?);
                    (u64::from(u32::from_be_bytes(x)), false)
                }
                0x81 => {
                    let mut x = [0u8; 8];
                    x.copy_from_slice(self.take(8)?);
                    (u64::from_be_bytes(x), false)
                }
                _ => return Err(RdbError::BadFormat),
            },
            _ => (u64::from(b & 0x3F), true),
        })
    }

    fn len(&mut self) -> R<u64> {
        match self.len_or_enc()? {
            (n, false) => Ok(n),
            _ => Err(RdbError::BadFormat),
        }
    }

    /// A string: verbatim, integer-encoded (returned as its decimal text) or LZF.
    fn string(&mut self) -> R<Bytes> {
        Ok(match self.string_or_int()? {
            Str::Bytes(b) => b,
            Str::Int(n) => Bytes::copy_from_slice(itoa::Buffer::new().format(n).as_bytes()),
        })
    }

    fn string_or_int(&mut self) -> R<Str> {
        let (n, enc) = self.len_or_enc()?;
        if !enc {
            return Ok(Str::Bytes(Bytes::copy_from_slice(self.take(n)?)));
        }
        Ok(match n as u8 {
            ENC_INT8 => Str::Int(i64::from(self.byte()? as i8)),
            ENC_INT16 => {
                let b = self.take(2)?;
                Str::Int(i64::from(i16::from_le_bytes([b[0], b[1]])))
            }
            ENC_INT32 => {
                let b = self.take(4)?;
                Str::Int(i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            }
            ENC_LZF => {
                let clen = self.len()?;
                let ulen = self.len()?;
                let data = self.take(clen)?;
                Str::Bytes(Bytes::from(lzf_decompress(data, ulen)?))
            }
            _ => return Err(RdbError::BadFormat),
        })
    }

    /// A count of items still to read, each of which takes at least `min_bytes`: a count the
    /// remaining bytes cannot hold is refused before anything is allocated for it.
    fn count(&mut self, min_bytes: u64) -> R<usize> {
        let n = self.len()?;
        if n == 0 || n.saturating_mul(min_bytes) > self.buf.len() as u64 {
            return Err(RdbError::BadFormat);
        }
        usize::try_from(n).map_err(|_| RdbError::BadFormat)
    }
}

enum Str {
    Bytes(Bytes),
    Int(i64),
}

fn read_value(r: &mut Reader<'_>, t: u8, limits: &ZsetLimits) -> R<Value> {
    let v = match t {
        TYPE_STRING => match r.string_or_int()? {
            Str::Int(n) => Value::Int(n),
            // Redis re-encodes a loaded string (`tryObjectEncoding`): canonical integers
            // become int-encoded whatever the payload used.
            Str::Bytes(b) => Value::from_bytes(&b),
        },
        TYPE_LIST => {
            let n = r.count(1)?;
            let mut l = std::collections::VecDeque::with_capacity(n);
            for _ in 0..n {
                l.push_back(r.string()?);
            }
            Value::List(Box::new(l))
        }
        TYPE_LIST_QUICKLIST_2 => {
            let nodes = r.count(2)?;
            let mut l = std::collections::VecDeque::new();
            for _ in 0..nodes {
                let container = r.len()?;
                let blob = r.string()?;
                match container {
                    CONTAINER_PLAIN => l.push_back(blob),
                    CONTAINER_PACKED => {
                        for item in listpack::entries(&blob)? {
                            l.push_back(item);
                        }
                    }
                    _ => return Err(RdbError::BadFormat),
                }
            }
            if l.is_empty() {
                return Err(RdbError::BadFormat);
            }
            Value::List(Box::new(l))
        }
        TYPE_LIST_ZIPLIST => {
            let items = ziplist::entries(&r.string()?)?;
            if items.is_empty() {
                return Err(RdbError::BadFormat);
            }
            Value::List(Box::new(items.into()))
        }
        TYPE_LIST_QUICKLIST => {
            let nodes = r.count(1)?;
            let mut l = std::collections::VecDeque::new();
            for _ in 0..nodes {
                l.extend(ziplist::entries(&r.string()?)?);
            }
            if l.is_empty() {
                return Err(RdbError::BadFormat);
            }
            Value::List(Box::new(l))
        }
        TYPE_HASH_ZIPMAP | TYPE_HASH_ZIPLIST => {
            let blob = r.string()?;
            let items = if t == TYPE_HASH_ZIPMAP {
                ziplist::zipmap_entries(&blob)?
            } else {
                ziplist::entries(&blob)?
            };
            hash_from_pairs(&items)?
        }
        TYPE_ZSET_ZIPLIST => {
            let items = ziplist::entries(&r.string()?)?;
            zset_from_pairs(&items, limits)?
        }
        TYPE_SET => {
            let n = r.count(1)?;
            let mut s = if n > SET_MAX_INTSET_ENTRIES {
                SetValue::Hashed(Default::default())
            } else {
                SetValue::Ints(Vec::new())
            };
            for _ in 0..n {
                let m = r.string()?;
                if !s.insert(&m) {
                    return Err(RdbError::BadFormat); // a duplicate member
                }
            }
            Value::Set(Box::new(s))
        }
        TYPE_SET_INTSET => {
            let blob = r.string()?;
            let ints = parse_intset(&blob)?;
            let mut s = SetValue::Ints(Vec::with_capacity(ints.len().min(SET_MAX_INTSET_ENTRIES)));
            for n in ints {
                s.insert(itoa::Buffer::new().format(n).as_bytes());
            }
            Value::Set(Box::new(s))
        }
        TYPE_SET_LISTPACK => {
            let blob = r.string()?;
            let members = listpack::entries(&blob)?;
            if members.is_empty() {
                return Err(RdbError::BadFormat);
            }
            let mut s = if members.len() > SET_MAX_INTSET_ENTRIES {
                SetValue::Hashed(Default::default())
            } else {
                SetValue::Ints(Vec::new())
            };
            for m in &members {
                if !s.insert(m) {
                    return Err(RdbError::BadFormat); // a duplicate member
                }
            }
            Value::Set(Box::new(s))
        }
        TYPE_HASH => {
            let n = r.count(2)?;
            let mut h = if n > HASH_MAX_LISTPACK_ENTRIES {
                HashValue::table_with_capacity(n)
            } else {
                HashValue::default()
            };
            for _ in 0..n {
                let f = r.string()?;
                let v = r.string()?;
                if !h.set(&f, &v, &HashLimits::DEFAULT) {
                    return Err(RdbError::BadFormat);
                }
            }
            Value::Hash(Box::new(h))
        }
        TYPE_HASH_LISTPACK => {
            let blob = r.string()?;
            let items = listpack::entries(&blob)?;
            hash_from_pairs(&items)?
        }
        TYPE_HASH_LISTPACK_EX => {
            r.take(8)?;
            let blob = r.string()?;
            let items = listpack::entries(&blob)?;
            if items.is_empty() || !items.len().is_multiple_of(3) {
                return Err(RdbError::BadFormat);
            }
            let triples: Vec<(&[u8], &[u8], u64)> = items
                .chunks(3)
                .map(|t| {
                    let at = std::str::from_utf8(&t[2])
                        .ok()
                        .and_then(|x| x.parse::<u64>().ok())
                        .ok_or(RdbError::BadFormat)?;
                    Ok((&t[0][..], &t[1][..], at))
                })
                .collect::<R<_>>()?;
            hash_with_ttls(&triples)?
        }
        TYPE_HASH_METADATA => {
            let mut b = [0u8; 8];
            b.copy_from_slice(r.take(8)?);
            let min = u64::from_le_bytes(b);
            let n = r.count(3)?;
            let mut fields = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                let ttl = r.len()?;
                let at = if ttl == 0 {
                    0
                } else {
                    (ttl + min)
                        .checked_sub(1)
                        .filter(|&at| at <= crate::store::volatile::MAX_FIELD_EXPIRE_MS << 2)
                        .ok_or(RdbError::BadFormat)?
                };
                let f = r.string()?;
                let v = r.string()?;
                fields.push((f, v, at));
            }
            let triples: Vec<(&[u8], &[u8], u64)> = fields
                .iter()
                .map(|(f, v, at)| (&f[..], &v[..], *at))
                .collect();
            hash_with_ttls(&triples)?
        }
        TYPE_ZSET | TYPE_ZSET_2 => {
            let n = r.count(2)?;
            let mut z = SortedSet::with_expected_len(n, limits);
            for _ in 0..n {
                let m = r.string()?;
                let score = if t == TYPE_ZSET_2 {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(r.take(8)?);
                    f64::from_le_bytes(b)
                } else {
                    read_string_double(r)?
                };
                add_new(&mut z, &m, score, limits)?;
            }
            Value::ZSet(Box::new(z))
        }
        TYPE_ZSET_LISTPACK => {
            let blob = r.string()?;
            let items = listpack::entries(&blob)?;
            zset_from_pairs(&items, limits)?
        }
        stream::TYPE_STREAM_LISTPACKS
        | stream::TYPE_STREAM_LISTPACKS_2
        | stream::TYPE_STREAM_LISTPACKS_3 => stream::read(r, t)?,
        _ => return Err(RdbError::BadFormat),
    };
    Ok(v)
}

/// A hash from the flat field, value, field, value… list of a ziplist, zipmap or listpack
/// encoding (Redis 7.0 and older alike); a duplicate field or an odd count is corrupt.
fn hash_from_pairs<B: AsRef<[u8]>>(items: &[B]) -> R<Value> {
    if items.is_empty() || !items.len().is_multiple_of(2) {
        return Err(RdbError::BadFormat);
    }
    let mut h = HashValue::default();
    for pair in items.chunks(2) {
        if !h.set(pair[0].as_ref(), pair[1].as_ref(), &HashLimits::DEFAULT) {
            return Err(RdbError::BadFormat);
        }
    }
    Ok(Value::Hash(Box::new(h)))
}

/// A hash with field TTLs from (field, value, expiry or 0) triples in the order Redis wrote
/// them: volatile fields are placed by expiry from the last one back, so fields expiring at
/// the same time keep their order (a new TTL goes before equal ones).
fn hash_with_ttls(triples: &[(&[u8], &[u8], u64)]) -> R<Value> {
    let mut h = HashValue::default();
    let limits = HashLimits::DEFAULT;
    for (f, v, _) in triples {
        if !h.set(f, v, &limits) {
            return Err(RdbError::BadFormat);
        }
    }
    h.make_volatile();
    for (f, _, at) in triples.iter().rev() {
        if *at != 0 {
            h.set_field_ttl(f, *at);
        }
    }
    Ok(Value::Hash(Box::new(h)))
}

/// A sorted set from the flat member, score, member, score… list of a ziplist or listpack
/// encoding (scores as text); a duplicate member, a bad score or an odd count is corrupt.
fn zset_from_pairs<B: AsRef<[u8]>>(items: &[B], limits: &ZsetLimits) -> R<Value> {
    if items.is_empty() || !items.len().is_multiple_of(2) {
        return Err(RdbError::BadFormat);
    }
    let mut z = SortedSet::new();
    for pair in items.chunks(2) {
        let score = crate::num::parse_double(pair[1].as_ref()).ok_or(RdbError::BadFormat)?;
        add_new(&mut z, pair[0].as_ref(), score, limits)?;
    }
    Ok(Value::ZSet(Box::new(z)))
}

fn add_new(z: &mut SortedSet, m: &[u8], score: f64, limits: &ZsetLimits) -> R<()> {
    use crate::store::zset::InsertOutcome;
    match z.insert(m, score, limits) {
        Ok(InsertOutcome::Added) => Ok(()),
        _ => Err(RdbError::BadFormat), // NaN or a duplicate member
    }
}

/// The old sorted-set double: a length byte (253 NaN, 254 +inf, 255 -inf) and ASCII text.
fn read_string_double(r: &mut Reader<'_>) -> R<f64> {
    let len = r.byte()?;
    match len {
        253 => Ok(f64::NAN),
        254 => Ok(f64::INFINITY),
        255 => Ok(f64::NEG_INFINITY),
        _ => {
            let text = r.take(u64::from(len))?;
            std::str::from_utf8(text)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or(RdbError::BadFormat)
        }
    }
}

fn parse_intset(blob: &[u8]) -> R<Vec<i64>> {
    if blob.len() < 8 {
        return Err(RdbError::BadFormat);
    }
    let width = u32::from_le_bytes([blob[0], blob[1], blob[2], blob[3]]) as usize;
    let count = u32::from_le_bytes([blob[4], blob[5], blob[6], blob[7]]) as usize;
    if !matches!(width, 2 | 4 | 8) || count == 0 || blob.len() - 8 != count * width {
        return Err(RdbError::BadFormat);
    }
    let mut out = Vec::with_capacity(count);
    for chunk in blob[8..].chunks_exact(width) {
        let n = match width {
            2 => i64::from(i16::from_le_bytes([chunk[0], chunk[1]])),
            4 => i64::from(i32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]])),
            _ => {
                let mut b = [0u8; 8];
                b.copy_from_slice(chunk);
                i64::from_le_bytes(b)
            }
        };
        // Strictly ascending, as an intset is kept.
        if out.last().is_some_and(|&last| last >= n) {
            return Err(RdbError::BadFormat);
        }
        out.push(n);
    }
    Ok(out)
}

/// LZF decompression (the format of liblzf, which Redis uses). `ulen` must be the exact
/// output length.
fn lzf_decompress(input: &[u8], ulen: u64) -> R<Vec<u8>> {
    // LZF expands at most about 132:1 (a 2-byte back reference of 264 bytes), so a claimed
    // length past that is a lie; refuse it before allocating.
    if ulen == 0 || ulen > (input.len() as u64).saturating_mul(133) {
        return Err(RdbError::BadFormat);
    }
    let ulen = ulen as usize;
    let mut out: Vec<u8> = Vec::with_capacity(ulen);
    let mut i = 0;
    while i < input.len() {
        let ctrl = usize::from(input[i]);
        i += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            let lit = input.get(i..i + n).ok_or(RdbError::BadFormat)?;
            if out.len() + n > ulen {
                return Err(RdbError::BadFormat);
            }
            out.extend_from_slice(lit);
            i += n;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += usize::from(*input.get(i).ok_or(RdbError::BadFormat)?);
                i += 1;
            }
            len += 2;
            let low = usize::from(*input.get(i).ok_or(RdbError::BadFormat)?);
            i += 1;
            let back = ((ctrl & 0x1f) << 8) + low + 1;
            if back > out.len() || out.len() + len > ulen {
                return Err(RdbError::BadFormat);
            }
            let start = out.len() - back;
            for k in 0..len {
                let b = out[start + k];
                out.push(b);
            }
        }
    }
    if out.len() != ulen {
        return Err(RdbError::BadFormat);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
