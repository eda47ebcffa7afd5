//! The compact encodings of RDB 9 and older, which Redis 7.0 still loads (and converts):
//! ziplists (lists, hashes and sorted sets before listpacks, and the nodes of quicklist 1)
//! and zipmaps (hashes before Redis 2.6). Only read, never written.
//!
//! Every offset is checked against the blob before it is used, so a hostile blob costs at
//! most a pass over its own bytes.

use bytes::Bytes;

use super::{R, RdbError};

const ZIP_END: u8 = 0xFF;

fn int_text(n: i64) -> Bytes {
    Bytes::copy_from_slice(itoa::Buffer::new().format(n).as_bytes())
}

/// The elements of a ziplist, integers as their decimal text. Checks the header's total
/// length, each entry's bounds and the terminator.
pub(super) fn entries(zl: &[u8]) -> R<Vec<Bytes>> {
    let bad = RdbError::BadFormat;
    if zl.len() < 11 || u32::from_le_bytes([zl[0], zl[1], zl[2], zl[3]]) as usize != zl.len() {
        return Err(bad);
    }
    let declared = u16::from_le_bytes([zl[8], zl[9]]);
    let get = |from: usize, n: usize| -> R<&[u8]> {
        let end = from.checked_add(n).ok_or(bad)?;
        zl.get(from..end).ok_or(bad)
    };
    let mut out = Vec::new();
    let mut p = 10;
    loop {
        let first = *zl.get(p).ok_or(bad)?;
        if first == ZIP_END {
            break;
        }
        // The previous entry's length: one byte, or 0xFE and four more.
        p += if first < 0xFE { 1 } else { 5 };
        let enc = *zl.get(p).ok_or(bad)?;
        let item = match enc >> 6 {
            0 => {
                let len = usize::from(enc & 0x3F);
                p += 1;
                let s = get(p, len)?;
                p += len;
                Bytes::copy_from_slice(s)
            }
            1 => {
                let lo = *zl.get(p + 1).ok_or(bad)?;
                let len = (usize::from(enc & 0x3F) << 8) | usize::from(lo);
                p += 2;
                let s = get(p, len)?;
                p += len;
                Bytes::copy_from_slice(s)
            }
            2 => {
                if enc != 0x80 {
                    return Err(bad);
                }
                let h = get(p + 1, 4)?;
                let len = u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize;
                p += 5;
                let s = get(p, len)?;
                p += len;
                Bytes::copy_from_slice(s)
            }
            _ => {
                p += 1;
                let (n, width) = match enc {
                    0xC0 => {
                        let d = get(p, 2)?;
                        (i64::from(i16::from_le_bytes([d[0], d[1]])), 2)
                    }
                    0xD0 => {
                        let d = get(p, 4)?;
                        (i64::from(i32::from_le_bytes([d[0], d[1], d[2], d[3]])), 4)
                    }
                    0xE0 => {
                        let d = get(p, 8)?;
                        let mut x = [0u8; 8];
                        x.copy_from_slice(d);
                        (i64::from_le_bytes(x), 8)
                    }
                    0xF0 => {
                        let d = get(p, 3)?;
                        (i64::from(i32::from_le_bytes([0, d[0], d[1], d[2]]) >> 8), 3)
                    }
                    0xFE => (i64::from(*get(p, 1)?.first().ok_or(bad)? as i8), 1),
                    0xF1..=0xFD => (i64::from(enc & 0x0F) - 1, 0),
                    _ => return Err(bad),
                };
                p += width;
                int_text(n)
            }
        };
        out.push(item);
    }
    if p != zl.len() - 1 || (declared != u16::MAX && usize::from(declared) != out.len()) {
        return Err(bad);
    }
    Ok(out)
}

/// The field/value pairs of a zipmap, flattened (field, value, field, value…).
pub(super) fn zipmap_entries(zm: &[u8]) -> R<Vec<Bytes>> {
    let bad = RdbError::BadFormat;
    let mut p = 1; // the first byte is a count, unreliable past 253
    let mut out = Vec::new();
    let len_at = |p: &mut usize| -> R<Option<usize>> {
        let b = *zm.get(*p).ok_or(bad)?;
        *p += 1;
        Ok(match b {
            0xFF => None,
            0xFE => {
                let d = zm.get(*p..*p + 4).ok_or(bad)?;
                *p += 4;
                Some(u32::from_le_bytes([d[0], d[1], d[2], d[3]]) as usize)
            }
            n => Some(usize::from(n)),
        })
    };
    while let Some(klen) = len_at(&mut p)? {
        let key = zm.get(p..p.checked_add(klen).ok_or(bad)?).ok_or(bad)?;
        p += klen;
        let vlen = len_at(&mut p)?.ok_or(bad)?;
        let free = usize::from(*zm.get(p).ok_or(bad)?);
        p += 1;
        let value = zm.get(p..p.checked_add(vlen).ok_or(bad)?).ok_or(bad)?;
        p += vlen + free;
        out.push(Bytes::copy_from_slice(key));
        out.push(Bytes::copy_from_slice(value));
    }
    if p != zm.len() {
        return Err(bad);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ziplist of `items` (each already encoded: its encoding byte(s) and data), with
    /// one-byte previous lengths.
    fn ziplist(items: &[&[u8]]) -> Vec<u8> {
        let mut body = Vec::new();
        let mut prev = 0u8;
        for it in items {
            body.push(prev);
            body.extend_from_slice(it);
            prev = (it.len() + 1) as u8;
        }
        let total = 10 + body.len() + 1;
        let mut out = Vec::new();
        out.extend_from_slice(&(total as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(items.len() as u16).to_le_bytes());
        out.extend_from_slice(&body);
        out.push(ZIP_END);
        out
    }

    #[test]
    fn every_entry_encoding_decodes() {
        let zl = ziplist(&[
            b"\x03abc",
            b"\x40\x02hi",
            b"\xC0\x2c\x01",                         // int16 300
            b"\xD0\xa0\x86\x01\x00",                 // int32 100000
            b"\xE0\x00\x00\x00\x00\x01\x00\x00\x00", // int64 2^32
            b"\xF0\xff\xff\xff",                     // int24 -1
            b"\xFE\x80",                             // int8 -128
            b"\xF1",                                 // 0
            b"\xFD",                                 // 12
        ]);
        let got: Vec<String> = entries(&zl)
            .unwrap()
            .iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect();
        assert_eq!(
            got,
            [
                "abc",
                "hi",
                "300",
                "100000",
                "4294967296",
                "-1",
                "-128",
                "0",
                "12"
            ]
        );
        for cut in 0..zl.len() {
            assert!(entries(&zl[..cut]).is_err());
        }
        let mut wrong_count = zl.clone();
        wrong_count[8] = 3;
        assert!(entries(&wrong_count).is_err());
    }

    #[test]
    fn zipmaps_decode_with_their_free_bytes() {
        // 2 pairs: "f" -> "v" (1 free byte), "long" -> "xy".
        let zm = b"\x02\x01f\x01\x01v\x00\x04long\x02\x00xy\xff";
        let got = zipmap_entries(zm).unwrap();
        assert_eq!(
            got,
            [&b"f"[..], b"v", b"long", b"xy"].map(Bytes::from_static)
        );
        for cut in 0..zm.len() {
            assert!(zipmap_entries(&zm[..cut]).is_err());
        }
    }
}
