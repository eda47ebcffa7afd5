//! Listpacks, Redis's compact sequence of strings and integers: a 6-byte header (total bytes,
//! element count), entries of encoding + data + back-length, and a 0xFF terminator.

use bytes::Bytes;

use super::{R, RdbError};
use crate::store::stream::lp;

/// Builds a listpack, encoding each canonical integer string as an integer as Redis does.
pub(super) struct Builder {
    buf: Vec<u8>,
    count: usize,
}

impl Builder {
    /// An empty listpack.
    pub(super) fn new() -> Self {
        Builder {
            buf: vec![0; 6],
            count: 0,
        }
    }

    /// Entries so far.
    pub(super) fn count(&self) -> usize {
        self.count
    }

    /// Bytes so far.
    pub(super) fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Appends one element (an integer when it is one's canonical text, as Redis does).
    pub(super) fn push(&mut self, item: &[u8]) {
        lp::encode(&mut self.buf, item);
        self.count += 1;
    }

    /// The finished listpack.
    pub(super) fn finish(mut self) -> Vec<u8> {
        self.buf.push(0xFF);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        let count = u16::try_from(self.count).unwrap_or(u16::MAX);
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// The elements of a listpack, integers as their decimal text. Checks the header, every
/// entry's bounds and back-length, and the terminator.
pub(super) fn entries(lp: &[u8]) -> R<Vec<Bytes>> {
    let bad = RdbError::BadFormat;
    if lp.len() < 7 || u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize != lp.len() {
        return Err(bad);
    }
    let declared = u16::from_le_bytes([lp[4], lp[5]]);
    let mut out = Vec::new();
    let mut p = 6;
    loop {
        let b = *lp.get(p).ok_or(bad)?;
        if b == 0xFF {
            break;
        }
        let (data_start, item): (usize, Bytes) = if b & 0x80 == 0 {
            (p + 1, int_text(i64::from(b)))
        } else if b & 0xC0 == 0x80 {
            let len = usize::from(b & 0x3F);
            (p + 1 + len, str_at(lp, p + 1, len)?)
        } else if b & 0xE0 == 0xC0 {
            let lo = *lp.get(p + 1).ok_or(bad)?;
            let v = (i64::from(b & 0x1F) << 8) | i64::from(lo);
            let v = if v >= 1 << 12 { v - (1 << 13) } else { v };
            (p + 2, int_text(v))
        } else if b & 0xF0 == 0xE0 {
            let lo = *lp.get(p + 1).ok_or(bad)?;
            let len = (usize::from(b & 0x0F) << 8) | usize::from(lo);
            (p + 2 + len, str_at(lp, p + 2, len)?)
        } else {
            match b {
                0xF0 => {
                    let h = lp.get(p + 1..p + 5).ok_or(bad)?;
                    let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
                    (p + 5 + len, str_at(lp, p + 5, len)?)
                }
                0xF1 => {
                    let d = lp.get(p + 1..p + 3).ok_or(bad)?;
                    (p + 3, int_text(i64::from(i16::from_le_bytes([d[0], d[1]]))))
                }
                0xF2 => {
                    let d = lp.get(p + 1..p + 4).ok_or(bad)?;
                    // Sign-extend 24 bits.
                    let v = i32::from_le_bytes([0, d[0], d[1], d[2]]) >> 8;
                    (p + 4, int_text(i64::from(v)))
                }
                0xF3 => {
                    let d = lp.get(p + 1..p + 5).ok_or(bad)?;
                    (
                        p + 5,
                        int_text(i64::from(i32::from_le_bytes([d[0], d[1], d[2], d[3]]))),
                    )
                }
                0xF4 => {
                    let d = lp.get(p + 1..p + 9).ok_or(bad)?;
                    let mut x = [0u8; 8];
                    x.copy_from_slice(d);
                    (p + 9, int_text(i64::from_le_bytes(x)))
                }
                _ => return Err(bad),
            }
        };
        let entry_len = data_start - p;
        let back = lp::backlen_size(entry_len);
        if data_start + back > lp.len() - 1 {
            return Err(bad);
        }
        let mut decoded = 0usize;
        for (i, &c) in lp[data_start..data_start + back].iter().enumerate() {
            let continuation = c & 128 != 0;
            if continuation != (i != 0) {
                return Err(bad);
            }
            decoded = (decoded << 7) | usize::from(c & 127);
        }
        if decoded != entry_len {
            return Err(bad);
        }
        out.push(item);
        p = data_start + back;
    }
    if p != lp.len() - 1 || (declared != u16::MAX && usize::from(declared) != out.len()) {
        return Err(bad);
    }
    Ok(out)
}

fn str_at(lp: &[u8], start: usize, len: usize) -> R<Bytes> {
    let end = start.checked_add(len).ok_or(RdbError::BadFormat)?;
    lp.get(start..end)
        .map(Bytes::copy_from_slice)
        .ok_or(RdbError::BadFormat)
}

fn int_text(n: i64) -> Bytes {
    Bytes::copy_from_slice(itoa::Buffer::new().format(n).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_encoding() {
        let items: Vec<Vec<u8>> = vec![
            b"0".to_vec(),
            b"127".to_vec(),
            b"128".to_vec(),
            b"-1".to_vec(),
            b"-4096".to_vec(),
            b"4095".to_vec(),
            b"-32768".to_vec(),
            b"8388607".to_vec(),
            b"-8388608".to_vec(),
            b"2147483647".to_vec(),
            b"-9223372036854775808".to_vec(),
            b"01".to_vec(),
            b"".to_vec(),
            vec![b'x'; 63],
            vec![b'y'; 64],
            vec![b'z'; 4095],
            vec![b'w'; 70_000],
        ];
        let mut b = Builder::new();
        for i in &items {
            b.push(i);
        }
        let lp = b.finish();
        let back = entries(&lp).unwrap();
        assert_eq!(back.len(), items.len());
        for (a, b) in items.iter().zip(&back) {
            assert_eq!(&a[..], &b[..]);
        }
    }

    #[test]
    fn refuses_truncated_and_corrupt_listpacks() {
        let mut b = Builder::new();
        b.push(b"hello");
        b.push(b"12345");
        let lp = b.finish();
        for cut in 0..lp.len() {
            assert!(entries(&lp[..cut]).is_err());
        }
        let mut bad = lp.clone();
        bad[4] = 9; // wrong count
        assert!(entries(&bad).is_err());
    }
}
