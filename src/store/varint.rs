//! LEB128 variable-length unsigned integers (7 bits per byte, high bit: more follows), the
//! length and score encoding of the packed aggregates (`zset/small.rs`, the large sorted
//! set's leaves, `listpack.rs`). Reading is bounded: a run past the buffer or past 64 bits
//! is `None`, never a panic.

/// Where encodings are appended: a buffer, or a stack buffer for one entry being spliced
/// into a packed aggregate (no allocation).
pub(crate) trait Sink {
    /// Appends one byte.
    fn put_byte(&mut self, b: u8);
    /// Appends bytes.
    fn put_bytes(&mut self, b: &[u8]);
}

impl Sink for Vec<u8> {
    fn put_byte(&mut self, b: u8) {
        self.push(b);
    }
    fn put_bytes(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
}

impl<A: smallvec::Array<Item = u8>> Sink for smallvec::SmallVec<A> {
    fn put_byte(&mut self, b: u8) {
        self.push(b);
    }
    fn put_bytes(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
}

/// Appends `u`.
pub(crate) fn put(out: &mut impl Sink, mut u: u64) {
    while u >= 0x80 {
        out.put_byte((u as u8) | 0x80);
        u >>= 7;
    }
    out.put_byte(u as u8);
}

/// Reads one value at `*pos` and moves `*pos` past it.
pub(crate) fn get(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut u = 0u64;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        u |= u64::from(b & 0x7f).checked_shl(shift)?;
        if b & 0x80 == 0 {
            return Some(u);
        }
        shift += 7;
        if shift >= 64 {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trips_and_refuses_cut_or_overlong_input() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut out = Vec::new();
            super::put(&mut out, v);
            let mut pos = 0;
            assert_eq!(super::get(&out, &mut pos), Some(v));
            assert_eq!(pos, out.len());
            let mut pos = 0;
            assert_eq!(super::get(&out[..out.len() - 1], &mut pos), None);
        }
        let mut pos = 0;
        assert_eq!(super::get(&[0xff; 11], &mut pos), None);
    }
}
