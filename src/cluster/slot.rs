//! Hash slots: CRC16 (XMODEM) of the key, or of its `{hash tag}`, modulo 16384.
//!
//! This is the function every Redis Cluster client computes to pick a node, so it must agree
//! with theirs bit for bit. The rules:
//!
//! - CRC16 with polynomial 0x1021, initial value 0, no reflection, no final XOR (the
//!   "XMODEM" variant; `crc16(b"123456789") == 0x31C3`).
//! - If the key contains a `{` and, somewhere after it, a `}` with at least one byte
//!   between them, only the bytes between the *first* `{` and the first `}` after it are
//!   hashed: `{user1000}.following` and `{user1000}.followers` share a slot. An empty tag
//!   (`foo{}{bar}`) hashes the whole key; `foo{{bar}}` hashes `{bar`.
//! - The slot is the CRC modulo 16384 (the low 14 bits).

/// Number of hash slots.
pub const SLOTS: usize = 16384;

/// The highest slot number.
pub const MAX_SLOT: u16 = (SLOTS - 1) as u16;

/// The CRC16-XMODEM lookup table, built at compile time.
const TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// CRC16-XMODEM of `bytes`.
#[inline]
pub fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ TABLE[(((crc >> 8) as u8) ^ b) as usize]
    })
}

/// The part of `key` that is hashed: its hash tag if it has a non-empty one, else all of it.
#[inline]
pub fn hashed_part(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{')
        && let Some(len) = key[open + 1..].iter().position(|&b| b == b'}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

/// The hash slot of `key` (0..=16383).
#[inline]
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hashed_part(key)) & MAX_SLOT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_check_value() {
        // The standard check value of CRC-16/XMODEM.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(crc16(b""), 0);
    }

    #[test]
    fn slots_match_redis() {
        // Each checked against redis-server 7.0.15's CLUSTER KEYSLOT.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), 3443);
        assert_eq!(key_slot(b"{user1000}.followers"), 3443);
        assert_eq!(key_slot(b"foo{}{bar}"), 8363);
        assert_eq!(key_slot(b"foo{{bar}}zap"), 4015);
        assert_eq!(key_slot(b"foo{bar}{zap}"), 5061);
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b""), 0);
        assert_eq!(key_slot(b"a"), 15495);
        assert_eq!(key_slot(b"b"), 3300);
        assert_eq!(key_slot(b"x"), 16287);
    }

    #[test]
    fn hash_tags() {
        assert_eq!(hashed_part(b"{}"), b"{}");
        assert_eq!(hashed_part(b"{"), b"{");
        assert_eq!(hashed_part(b"}{a}"), b"a");
        assert_eq!(hashed_part(b"a{b"), b"a{b");
        assert_eq!(hashed_part(b"x{y}z"), b"y");
        assert_eq!(hashed_part(b"{{}}"), b"{");
    }
}
