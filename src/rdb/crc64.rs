//! CRC-64/Jones as Redis computes it (reflected polynomial 0xad93d23594c935a9, initial value
//! 0, no final xor): the checksum of DUMP payloads and RDB files.

/// The reflected form of the Jones polynomial.
const POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;

const TABLE: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY_REFLECTED
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// Continues the CRC `crc` over `data` (start with 0).
pub(crate) fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    for &b in data {
        crc = TABLE[((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    #[test]
    fn check_value_of_redis_crc64() {
        // Redis's own test vector (crc64.c).
        assert_eq!(super::crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }
}
