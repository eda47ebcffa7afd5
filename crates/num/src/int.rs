//! Integers and bytes as Redis's C code reads them: `string2ll`, `isspace`, hex digits.

/// Parses a signed 64-bit integer exactly as Redis's `string2ll` does.
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    if b == b"0" {
        return Some(0);
    }
    let (neg, digits) = match b[0] {
        b'-' => (true, &b[1..]),
        _ => (false, b),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else {
        i64::try_from(v).ok()
    }
}

/// C's `isspace` in the "C" locale (what `strtod` and `sdssplitargs` skip). It includes `\v`
/// and `\f`, which Rust's `is_ascii_whitespace` does not.
pub fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The value of one hexadecimal digit, either case.
pub fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parse_i64_matches_a_reference(s in "-?[0-9]{0,22}|[+ 0-9x-]{0,4}") {
            let reference = {
                let bytes = s.as_bytes();
                let digits = bytes.strip_prefix(b"-").unwrap_or(bytes);
                let canonical = !digits.is_empty()
                    && digits.iter().all(u8::is_ascii_digit)
                    && (digits[0] != b'0' || s == "0");
                if canonical { s.parse::<i64>().ok() } else { None }
            };
            prop_assert_eq!(parse_i64(s.as_bytes()), reference);
        }
    }

    #[test]
    fn strict_integers() {
        for (s, v) in [
            ("0", Some(0)),
            ("-1", Some(-1)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
        ] {
            assert_eq!(parse_i64(s.as_bytes()), v, "{s}");
        }
        for s in [
            "",
            "+1",
            "01",
            "-0",
            " 1",
            "1 ",
            "9223372036854775808",
            "-9223372036854775809",
            "1.0",
            "0x1",
            "-",
            "123456789012345678901",
        ] {
            assert_eq!(parse_i64(s.as_bytes()), None, "{s}");
        }
    }

    #[test]
    fn c_space_and_hex() {
        assert!(is_c_space(0x0b) && is_c_space(0x0c) && !is_c_space(0));
        assert_eq!(hex_digit(b'F'), Some(15));
        assert_eq!(hex_digit(b'g'), None);
    }
}
