//! HyperLogLog in Redis's exact representation, free of the server: the bytes a key holds
//! are the bytes Redis 7.0 would hold for the same additions, so PFCOUNT agrees with Redis
//! and a value copied between the two servers (GET/SET) keeps working.
//!
//! The format (learned from Redis's `hyperloglog.c`; the code here is our own):
//!
//! - a 16-byte header: `HYLL`, the encoding (0 dense, 1 sparse), three zero bytes, and the
//!   cached cardinality as 8 little-endian bytes whose top bit set means "stale";
//! - 16384 registers (the low 14 bits of a 64-bit MurmurHash64A of the element, seed
//!   `0xadc83b19`, pick the register; the run of zeros in the other 50 bits, plus one, is the
//!   value kept if larger);
//! - dense: 6 bits per register, little-endian bit order, 12288 bytes;
//! - sparse: run-length opcodes `00xxxxxx` (ZERO, 1..64 zero registers), `01xxxxxx yyyyyyyy`
//!   (XZERO, 1..16384 zero registers), `1vvvvvxx` (VAL, 1..4 registers of value 1..32). A
//!   sparse HLL becomes dense when a value above 32 is needed or it would grow past
//!   `hll-sparse-max-bytes` (3000 by default);
//! - the estimate is Ertl's improved estimator over the register histogram (Redis ≥ 5).

/// Header bytes.
pub(crate) const HDR: usize = 16;
/// Number of registers.
pub(crate) const REGISTERS: usize = 1 << 14;
/// Bits per dense register.
const BITS: usize = 6;
/// Largest register value.
const REGISTER_MAX: u8 = (1 << BITS) - 1;
/// Size of a dense HLL string.
pub(crate) const DENSE_SIZE: usize = HDR + (REGISTERS * BITS).div_ceil(8);
/// Redis's default `hll-sparse-max-bytes`.
pub(crate) const SPARSE_MAX_BYTES: usize = 3000;
/// Hash bits left after the register index.
const Q: usize = 64 - 14;

const DENSE: u8 = 0;
const SPARSE: u8 = 1;

const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;

/// The HLL's bytes are not a valid representation (Redis's INVALIDOBJ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Corrupt;

/// MurmurHash64A as Redis uses it (little-endian reads on every platform).
pub(crate) fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in chunks.by_ref() {
        let mut k = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element falls in and the value it proposes (Redis's hllPatLen).
pub(crate) fn pattern(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, 0xadc8_3b19);
    let index = (hash as usize) & (REGISTERS - 1);
    let rest = (hash >> 14) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

// ---- header ----------------------------------------------------------------------------------

/// A new, empty HLL: sparse, one XZERO covering every register, cache stale-free zero.
pub(crate) fn new_sparse() -> Vec<u8> {
    let mut h = vec![0u8; HDR];
    h[..4].copy_from_slice(b"HYLL");
    h[4] = SPARSE;
    let mut left = REGISTERS;
    while left > 0 {
        let n = left.min(XZERO_MAX_LEN);
        push_xzero(&mut h, n);
        left -= n;
    }
    h
}

/// True if `s` passes Redis's isHLLObject checks: magic, a known encoding, and for dense
/// the exact length. (A sparse body is validated as it is read.)
pub(crate) fn is_hll(s: &[u8]) -> bool {
    s.len() >= HDR
        && &s[..4] == b"HYLL"
        && s[4] <= SPARSE
        && (s[4] != DENSE || s.len() == DENSE_SIZE)
}

/// The cached cardinality, if it is valid.
pub(crate) fn cached(h: &[u8]) -> Option<u64> {
    let card: [u8; 8] = h.get(8..16)?.try_into().ok()?;
    (card[7] & 0x80 == 0).then(|| u64::from_le_bytes(card))
}

/// Stores the cardinality in the cache.
pub(crate) fn set_cached(h: &mut [u8], card: u64) {
    if let Some(c) = h.get_mut(8..16) {
        c.copy_from_slice(&card.to_le_bytes());
    }
}

/// Marks the cached cardinality stale.
pub(crate) fn invalidate(h: &mut [u8]) {
    if let Some(b) = h.get_mut(15) {
        *b |= 0x80;
    }
}

fn is_dense(h: &[u8]) -> bool {
    h[4] == DENSE
}

// ---- dense -----------------------------------------------------------------------------------

fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * BITS / 8;
    let fb = (i * BITS) & 7;
    let b0 = u16::from(regs.get(byte).copied().unwrap_or(0));
    let b1 = u16::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) as u8) & REGISTER_MAX
}

fn dense_put(regs: &mut [u8], i: usize, v: u8) {
    let byte = i * BITS / 8;
    let fb = (i * BITS) & 7;
    let v = u16::from(v);
    if let Some(b) = regs.get_mut(byte) {
        *b &= !((u16::from(REGISTER_MAX) << fb) as u8);
        *b |= (v << fb) as u8;
    }
    if let Some(b) = regs.get_mut(byte + 1) {
        *b &= !((u16::from(REGISTER_MAX) >> (8 - fb)) as u8);
        *b |= (v >> (8 - fb)) as u8;
    }
}

/// Raises register `i` of a dense HLL to `v`; true if it changed.
fn dense_set(h: &mut [u8], i: usize, v: u8) -> bool {
    let regs = &mut h[HDR..];
    if v > dense_get(regs, i) {
        dense_put(regs, i, v);
        true
    } else {
        false
    }
}

// ---- sparse ----------------------------------------------------------------------------------

/// The opcode at `p`: (registers covered, value, opcode length).
fn opcode(h: &[u8], p: usize) -> (usize, u8, usize) {
    let b = h[p];
    if b & 0xc0 == 0 {
        (usize::from(b & 0x3f) + 1, 0, 1)
    } else if b & 0x80 != 0 {
        (usize::from(b & 0x3) + 1, ((b >> 2) & 0x1f) + 1, 1)
    } else {
        let lo = usize::from(h.get(p + 1).copied().unwrap_or(0));
        ((usize::from(b & 0x3f) << 8 | lo) + 1, 0, 2)
    }
}

fn is_val(b: u8) -> bool {
    b & 0x80 != 0
}

fn is_xzero(b: u8) -> bool {
    b & 0xc0 == 0x40
}

fn val_op(v: u8, len: usize) -> u8 {
    ((v - 1) << 2 | (len as u8 - 1)) | 0x80
}

fn push_xzero(out: &mut Vec<u8>, len: usize) {
    let l = len - 1;
    out.push((l >> 8) as u8 | 0x40);
    out.push((l & 0xff) as u8);
}

fn push_zero_run(out: &mut Vec<u8>, len: usize) {
    if len > ZERO_MAX_LEN {
        push_xzero(out, len);
    } else {
        out.push((len - 1) as u8);
    }
}

/// Converts a sparse HLL to dense in place (a no-op for dense). The header, cache included,
/// is kept.
pub(crate) fn to_dense(h: &mut Vec<u8>) -> Result<(), Corrupt> {
    if is_dense(h) {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HDR].copy_from_slice(&h[..HDR]);
    dense[4] = DENSE;
    let mut idx = 0;
    let mut p = HDR;
    while p < h.len() {
        let (run, v, len) = opcode(h, p);
        if v > 0 {
            // A run past the last register: corrupt (the patched Redis 7.0.15 refuses it).
            if run + idx > REGISTERS {
                return Err(Corrupt);
            }
            for i in idx..idx + run {
                dense_put(&mut dense[HDR..], i, v);
            }
        }
        idx += run;
        p += len;
    }
    if idx != REGISTERS {
        return Err(Corrupt);
    }
    *h = dense;
    Ok(())
}

/// Raises register `index` of a sparse HLL to `count`, rewriting the opcodes as Redis does
/// (promoting to dense when needed). Ok(true) if it changed.
fn sparse_set(h: &mut Vec<u8>, index: usize, count: u8, max_bytes: usize) -> Result<bool, Corrupt> {
    if count > VAL_MAX_VALUE {
        return promote(h, index, count);
    }
    // Step 1: find the opcode covering `index`.
    let mut p = HDR;
    let mut first = 0;
    let mut prev = None;
    let mut span = 0;
    while p < h.len() {
        let (run, _, len) = opcode(h, p);
        span = run;
        if index < first + span {
            break;
        }
        prev = Some(p);
        p += len;
        first += span;
    }
    if span == 0 || p >= h.len() {
        return Err(Corrupt);
    }
    let b = h[p];
    let (runlen, curval, oplen) = opcode(h, p);
    let updated_in_place = if is_val(b) {
        if curval >= count {
            return Ok(false);
        }
        runlen == 1
    } else {
        // ZERO of length 1.
        !is_xzero(b) && runlen == 1
    };
    if updated_in_place {
        h[p] = val_op(count, 1);
    } else {
        // Step 2: split the opcode into up to three.
        let last = first + span - 1;
        let mut seq = Vec::with_capacity(5);
        if is_val(b) {
            if index != first {
                seq.push(val_op(curval, index - first));
            }
            seq.push(val_op(count, 1));
            if index != last {
                seq.push(val_op(curval, last - index));
            }
        } else {
            if index != first {
                push_zero_run(&mut seq, index - first);
            }
            seq.push(val_op(count, 1));
            if index != last {
                push_zero_run(&mut seq, last - index);
            }
        }
        // Step 3: put the new sequence in place of the old opcode.
        if seq.len() > oplen && h.len() + seq.len() - oplen > max_bytes {
            return promote(h, index, count);
        }
        // An XZERO cut short by the end of the string (a corrupt value) is replaced as Redis
        // replaces it: the string grows by the size difference only, so the new sequence's
        // last byte is lost.
        let new_len = h.len() + seq.len() - oplen;
        let tail = h.get(p + oplen..).map(<[u8]>::to_vec).unwrap_or_default();
        h.truncate(p);
        h.extend_from_slice(&seq);
        h.extend_from_slice(&tail);
        h.truncate(new_len);
    }
    // Step 4: merge adjacent VAL opcodes of the same value, scanning up to five opcodes
    // from the one before the change.
    let mut p = prev.unwrap_or(HDR);
    let mut scan = 5;
    while p < h.len() && scan > 0 {
        scan -= 1;
        if is_xzero(h[p]) {
            p += 2;
            continue;
        }
        if !is_val(h[p]) {
            p += 1;
            continue;
        }
        if p + 1 < h.len() && is_val(h[p + 1]) {
            let (l1, v1, _) = opcode(h, p);
            let (l2, v2, _) = opcode(h, p + 1);
            if v1 == v2 && l1 + l2 <= VAL_MAX_LEN {
                h[p + 1] = val_op(v1, l1 + l2);
                h.remove(p);
                continue;
            }
        }
        p += 1;
    }
    invalidate(h);
    Ok(true)
}

fn promote(h: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    to_dense(h)?;
    Ok(dense_set(h, index, count))
}

/// Raises register `index` to `count` in either encoding; Ok(true) if it changed.
pub(crate) fn set_register(
    h: &mut Vec<u8>,
    index: usize,
    count: u8,
    max_bytes: usize,
) -> Result<bool, Corrupt> {
    if is_dense(h) {
        Ok(dense_set(h, index, count))
    } else {
        sparse_set(h, index, count, max_bytes)
    }
}

/// Adds an element (PFADD); Ok(true) if a register changed. The caller invalidates the
/// cache when anything changed.
pub(crate) fn add(h: &mut Vec<u8>, ele: &[u8], max_bytes: usize) -> Result<bool, Corrupt> {
    let (index, count) = pattern(ele);
    set_register(h, index, count, max_bytes)
}

/// Folds an HLL into `max` (one byte per register), keeping the larger value.
pub(crate) fn merge_into(max: &mut [u8], h: &[u8]) -> Result<(), Corrupt> {
    if is_dense(h) {
        let regs = &h[HDR..];
        for (i, m) in max.iter_mut().enumerate().take(REGISTERS) {
            *m = (*m).max(dense_get(regs, i));
        }
        return Ok(());
    }
    let mut i = 0;
    let mut p = HDR;
    while p < h.len() {
        let (run, v, len) = opcode(h, p);
        if v > 0 {
            if run + i > REGISTERS {
                return Err(Corrupt);
            }
            for m in &mut max[i..i + run] {
                *m = (*m).max(v);
            }
        }
        i += run;
        p += len;
    }
    if i == REGISTERS { Ok(()) } else { Err(Corrupt) }
}

// ---- counting --------------------------------------------------------------------------------

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

/// 0.5 / ln(2), spelled as Redis spells it so the same double results.
#[allow(clippy::excessive_precision)]
const ALPHA_INF: f64 = 0.721347520444481703680;

/// The estimate from a register histogram (Ertl, "New cardinality estimation algorithms for
/// HyperLogLog sketches"), rounded as Redis rounds it.
fn estimate(histo: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - f64::from(histo[Q + 1])) / m);
    for j in (1..=Q).rev() {
        z += f64::from(histo[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histo[0]) / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// The estimate of an HLL's registers (the cache is not read).
pub(crate) fn count(h: &[u8]) -> Result<u64, Corrupt> {
    let mut histo = [0u32; 64];
    if is_dense(h) {
        let regs = &h[HDR..];
        for i in 0..REGISTERS {
            histo[usize::from(dense_get(regs, i))] += 1;
        }
    } else {
        let mut idx = 0;
        let mut p = HDR;
        while p < h.len() {
            let (run, v, len) = opcode(h, p);
            histo[usize::from(v)] += run as u32;
            idx += run;
            p += len;
        }
        if idx != REGISTERS {
            return Err(Corrupt);
        }
    }
    Ok(estimate(&histo))
}

/// The estimate of registers given one byte each (PFCOUNT of several keys).
pub(crate) fn count_registers(max: &[u8]) -> u64 {
    let mut histo = [0u32; 64];
    for &r in max.iter().take(REGISTERS) {
        histo[usize::from(r & 63)] += 1;
    }
    estimate(&histo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur_matches_reference_values() {
        // The empty key with seed 0 hashes to 0; every element lands in a register.
        assert_eq!(murmur64a(b"", 0), 0);
        let (i, c) = pattern(b"a");
        assert!(i < REGISTERS && (1..=51).contains(&c));
    }

    #[test]
    fn empty_hll_is_one_xzero_and_counts_zero() {
        let h = new_sparse();
        assert_eq!(h.len(), HDR + 2);
        assert_eq!(&h[HDR..], &[0x7f, 0xff]);
        assert!(is_hll(&h));
        assert_eq!(count(&h), Ok(0));
    }

    #[test]
    fn sparse_and_dense_agree() {
        let mut s = new_sparse();
        for i in 0..2000u32 {
            add(&mut s, format!("e{i}").as_bytes(), usize::MAX).unwrap();
        }
        assert_eq!(s[4], SPARSE);
        let mut d = s.clone();
        to_dense(&mut d).unwrap();
        assert_eq!(d.len(), DENSE_SIZE);
        assert_eq!(count(&s), count(&d));
        let n = count(&s).unwrap();
        assert!((1900..2100).contains(&n), "{n}");
        let mut max = vec![0u8; REGISTERS];
        merge_into(&mut max, &s).unwrap();
        assert_eq!(count_registers(&max), n);
        let mut max2 = vec![0u8; REGISTERS];
        merge_into(&mut max2, &d).unwrap();
        assert_eq!(max, max2);
    }

    #[test]
    fn sparse_promotes_past_max_bytes() {
        let mut s = new_sparse();
        let mut i = 0u32;
        while s[4] == SPARSE {
            add(&mut s, &i.to_le_bytes(), SPARSE_MAX_BYTES).unwrap();
            assert!(s.len() <= SPARSE_MAX_BYTES || s[4] == DENSE);
            i += 1;
        }
        assert_eq!(s.len(), DENSE_SIZE);
    }

    #[test]
    fn corrupt_sparse_is_detected() {
        let mut h = new_sparse();
        h.truncate(HDR + 1);
        assert_eq!(count(&h), Err(Corrupt));
        let mut h = new_sparse();
        h.push(0x80);
        assert_eq!(count(&h), Err(Corrupt));
        let mut max = vec![0u8; REGISTERS];
        assert_eq!(merge_into(&mut max, &h), Err(Corrupt));
        assert_eq!(to_dense(&mut h.clone()), Err(Corrupt));
        h.truncate(HDR + 1);
        assert_eq!(to_dense(&mut h), Err(Corrupt));
        let mut h = new_sparse();
        h.truncate(HDR);
        assert_eq!(add(&mut h, b"x", SPARSE_MAX_BYTES), Err(Corrupt));
        // An XZERO missing its second byte reads it as 0, as Redis reads the terminator.
        let mut h = new_sparse();
        h.truncate(HDR + 1);
        assert_eq!(add(&mut h, b"a", SPARSE_MAX_BYTES), Ok(true));
        assert_eq!(&h[HDR..], &[0x71, 0xa6, 0x84, 0x4d]);
    }

    #[test]
    fn cache_bits() {
        let mut h = new_sparse();
        assert_eq!(cached(&h), Some(0));
        invalidate(&mut h);
        assert_eq!(cached(&h), None);
        set_cached(&mut h, 42);
        assert_eq!(cached(&h), Some(42));
    }

    /// Hostile values: any bytes after a sparse header are counted, merged, densified and
    /// added to without a panic, and the string never grows past what Redis allows.
    #[test]
    fn random_sparse_bodies_never_panic() {
        use rand::RngExt;
        let mut rng = rand::rng();
        for round in 0..3000 {
            let mut h = new_sparse();
            h.truncate(HDR);
            let len = rng.random_range(0..24);
            h.extend((0..len).map(|_| rng.random::<u8>()));
            if round % 3 == 0 {
                // Mostly-valid bodies reach the deeper paths.
                h.truncate(HDR);
                h.extend_from_slice(&[0x7f, 0xff]);
                let at = rng.random_range(HDR..h.len() + 1);
                h.insert(at, rng.random::<u8>());
            }
            let _ = count(&h);
            let mut max = vec![0u8; REGISTERS];
            let _ = merge_into(&mut max, &h);
            let _ = to_dense(&mut h.clone());
            for i in 0..20u32 {
                let _ = add(&mut h, &i.to_le_bytes(), SPARSE_MAX_BYTES);
                assert!(h.len() <= SPARSE_MAX_BYTES + 8 || h.len() == DENSE_SIZE);
            }
            let _ = count(&h);
        }
    }
}
