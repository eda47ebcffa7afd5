//! The listpack elements a stream node is made of (Redis's `listpack.c` format): a 6-byte
//! header (total bytes, element count), each element its encoding, data and back-length,
//! then a 0xFF terminator. Strings that are canonical 64-bit integers are stored as
//! integers, as Redis's `lpAppend` does, so a node here is byte for byte the listpack Redis
//! would build (RDB writes it as it is, and its size is Redis's).
//!
//! Nodes are built only by this module's writers; the reader still never indexes past the
//! buffer (a node loaded from an RDB file is checked with [`validate`] first).

use crate::num::parse_i64;

/// Bytes of the header.
pub(crate) const HEADER: usize = 6;

/// One element, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Elem<'a> {
    /// An integer element.
    Int(i64),
    /// A string element.
    Str(&'a [u8]),
}

impl Elem<'_> {
    /// The element as an integer (a string that is one counts), 0 otherwise.
    pub(crate) fn int(self) -> i64 {
        match self {
            Elem::Int(n) => n,
            Elem::Str(s) => parse_i64(s).unwrap_or(0),
        }
    }

    /// The element's bytes: a string's own, an integer's decimal text.
    pub(crate) fn to_bytes(self) -> bytes::Bytes {
        match self {
            Elem::Int(n) => bytes::Bytes::copy_from_slice(itoa::Buffer::new().format(n).as_bytes()),
            Elem::Str(s) => bytes::Bytes::copy_from_slice(s),
        }
    }
}

/// An empty listpack.
pub(crate) fn new() -> Vec<u8> {
    let mut lp = vec![0; HEADER];
    lp.push(0xFF);
    set_header(&mut lp, 0);
    lp
}

fn set_header(lp: &mut [u8], count: usize) {
    let total = lp.len() as u32;
    lp[..4].copy_from_slice(&total.to_le_bytes());
    let count = u16::try_from(count).unwrap_or(u16::MAX);
    lp[4..6].copy_from_slice(&count.to_le_bytes());
}

/// The element count the header declares (`u16::MAX`: unknown, count by walking).
pub(crate) fn count(lp: &[u8]) -> usize {
    let declared = u16::from_le_bytes([lp[4], lp[5]]);
    if declared != u16::MAX {
        return usize::from(declared);
    }
    let mut n = 0;
    let mut p = HEADER;
    while let Some((_, next)) = read(lp, p) {
        n += 1;
        p = next;
    }
    n
}

/// The encoded element for `item` (string or integer), with its back-length.
pub(crate) fn encode(out: &mut Vec<u8>, item: &[u8]) {
    match parse_i64(item) {
        Some(n) if item.len() <= 20 => encode_int_elem(out, n),
        _ => {
            let start = out.len();
            encode_str(out, item);
            let len = out.len() - start;
            encode_backlen(out, len);
        }
    }
}

/// The encoded element for integer `n`, with its back-length.
pub(crate) fn encode_int_elem(out: &mut Vec<u8>, n: i64) {
    let start = out.len();
    encode_int(out, n);
    let len = out.len() - start;
    encode_backlen(out, len);
}

/// Appends already encoded elements (`count` of them) before the terminator.
pub(crate) fn append_encoded(lp: &mut Vec<u8>, encoded: &[u8], added: usize) {
    let n = count(lp) + added;
    lp.pop();
    lp.extend_from_slice(encoded);
    lp.push(0xFF);
    set_header(lp, n);
}

/// Replaces the element at `pos` by integer `n` (its size may change).
pub(crate) fn replace_int(lp: &mut Vec<u8>, pos: usize, n: i64) {
    let Some((_, next)) = read(lp, pos) else {
        return;
    };
    let mut enc = Vec::with_capacity(12);
    encode_int_elem(&mut enc, n);
    let elems = count(lp);
    lp.splice(pos..next, enc);
    set_header(lp, elems);
}

fn encode_int(out: &mut Vec<u8>, n: i64) {
    if (0..=127).contains(&n) {
        out.push(n as u8);
    } else if (-4096..=4095).contains(&n) {
        let v = if n < 0 { (1 << 13) + n } else { n } as u16;
        out.push(0xC0 | (v >> 8) as u8);
        out.push(v as u8);
    } else if let Ok(v) = i16::try_from(n) {
        out.push(0xF1);
        out.extend_from_slice(&v.to_le_bytes());
    } else if (-(1 << 23)..(1 << 23)).contains(&n) {
        out.push(0xF2);
        out.extend_from_slice(&(n as i32).to_le_bytes()[..3]);
    } else if let Ok(v) = i32::try_from(n) {
        out.push(0xF3);
        out.extend_from_slice(&v.to_le_bytes());
    } else {
        out.push(0xF4);
        out.extend_from_slice(&n.to_le_bytes());
    }
}

fn encode_str(out: &mut Vec<u8>, s: &[u8]) {
    let len = s.len();
    if len < 64 {
        out.push(0x80 | len as u8);
    } else if len < 4096 {
        out.push(0xE0 | (len >> 8) as u8);
        out.push(len as u8);
    } else {
        out.push(0xF0);
        out.extend_from_slice(&(len as u32).to_le_bytes());
    }
    out.extend_from_slice(s);
}

fn encode_backlen(out: &mut Vec<u8>, l: usize) {
    let size = backlen_size(l);
    for i in (0..size).rev() {
        let byte = ((l >> (7 * i)) & 127) as u8;
        out.push(if i == size - 1 { byte } else { byte | 128 });
    }
}

/// How many bytes an entry length takes written backwards (Redis's `lpEncodeBacklen`).
pub(crate) fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..16383 => 2,
        16383..2_097_151 => 3,
        2_097_151..268_435_455 => 4,
        _ => 5,
    }
}

/// The element at `p` and where the next one starts; None at the terminator or past the
/// end of a malformed buffer.
pub(crate) fn read(lp: &[u8], p: usize) -> Option<(Elem<'_>, usize)> {
    let b = *lp.get(p)?;
    if b == 0xFF {
        return None;
    }
    let bytes = |from: usize, n: usize| lp.get(from..from.checked_add(n)?);
    let (elem, data_end) = if b & 0x80 == 0 {
        (Elem::Int(i64::from(b)), p + 1)
    } else if b & 0xC0 == 0x80 {
        let len = usize::from(b & 0x3F);
        (Elem::Str(bytes(p + 1, len)?), p + 1 + len)
    } else if b & 0xE0 == 0xC0 {
        let lo = *lp.get(p + 1)?;
        let v = (i64::from(b & 0x1F) << 8) | i64::from(lo);
        (
            Elem::Int(if v >= 1 << 12 { v - (1 << 13) } else { v }),
            p + 2,
        )
    } else if b & 0xF0 == 0xE0 {
        let lo = *lp.get(p + 1)?;
        let len = (usize::from(b & 0x0F) << 8) | usize::from(lo);
        (Elem::Str(bytes(p + 2, len)?), p + 2 + len)
    } else {
        match b {
            0xF0 => {
                let h = bytes(p + 1, 4)?;
                let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
                (Elem::Str(bytes(p + 5, len)?), p + 5 + len)
            }
            0xF1 => {
                let d = bytes(p + 1, 2)?;
                (
                    Elem::Int(i64::from(i16::from_le_bytes([d[0], d[1]]))),
                    p + 3,
                )
            }
            0xF2 => {
                let d = bytes(p + 1, 3)?;
                (
                    Elem::Int(i64::from(i32::from_le_bytes([0, d[0], d[1], d[2]]) >> 8)),
                    p + 4,
                )
            }
            0xF3 => {
                let d = bytes(p + 1, 4)?;
                (
                    Elem::Int(i64::from(i32::from_le_bytes([d[0], d[1], d[2], d[3]]))),
                    p + 5,
                )
            }
            0xF4 => {
                let d = bytes(p + 1, 8)?;
                let mut x = [0u8; 8];
                x.copy_from_slice(d);
                (Elem::Int(i64::from_le_bytes(x)), p + 9)
            }
            _ => return None,
        }
    };
    Some((elem, data_end + backlen_size(data_end - p)))
}

/// Checks a listpack from outside (an RDB file): header, every element's bounds and
/// back-length, the terminator; returns its element count.
pub(crate) fn validate(lp: &[u8]) -> Option<usize> {
    if lp.len() < HEADER + 1
        || u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize != lp.len()
    {
        return None;
    }
    let mut p = HEADER;
    let mut n = 0usize;
    while lp.get(p) != Some(&0xFF) {
        let (_, next) = read(lp, p)?;
        if next >= lp.len() {
            return None;
        }
        // The back-length must decode to the element's size.
        let back = &lp[..next];
        let mut decoded = 0usize;
        let mut q = next;
        let mut shift = 0;
        loop {
            q = q.checked_sub(1)?;
            let c = back[q];
            decoded |= usize::from(c & 127) << shift;
            shift += 7;
            if c & 128 == 0 || shift > 35 {
                break;
            }
        }
        if decoded + (next - q) != next - p {
            return None;
        }
        n += 1;
        p = next;
    }
    let declared = u16::from_le_bytes([lp[4], lp[5]]);
    (p == lp.len() - 1 && (declared == u16::MAX || usize::from(declared) == n)).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_round_trip_and_validate() {
        let items: Vec<Vec<u8>> = vec![
            b"0".to_vec(),
            b"127".to_vec(),
            b"-1".to_vec(),
            b"4095".to_vec(),
            b"-4096".to_vec(),
            b"30000".to_vec(),
            b"8000000".to_vec(),
            b"2000000000".to_vec(),
            b"9223372036854775807".to_vec(),
            b"01".to_vec(),
            b"".to_vec(),
            vec![b'x'; 63],
            vec![b'y'; 64],
            vec![b'z'; 5000],
        ];
        let mut lp = new();
        let mut enc = Vec::new();
        for i in &items {
            encode(&mut enc, i);
        }
        append_encoded(&mut lp, &enc, items.len());
        assert_eq!(validate(&lp), Some(items.len()));
        let mut p = HEADER;
        for i in &items {
            let (e, next) = read(&lp, p).unwrap_or((Elem::Int(-999), 0));
            assert_eq!(&e.to_bytes()[..], &i[..]);
            p = next;
        }
        assert!(read(&lp, p).is_none());
        replace_int(&mut lp, HEADER, 1000);
        assert_eq!(read(&lp, HEADER).map(|e| e.0), Some(Elem::Int(1000)));
        assert_eq!(validate(&lp), Some(items.len()));
        let mut bad = lp.clone();
        bad[0] ^= 1;
        assert_eq!(validate(&bad), None);
    }
}
