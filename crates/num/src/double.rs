//! Doubles as Redis's C code reads and prints them: glibc's `strtod` (decimal, hexadecimal,
//! `inf`, with its exact rounding and range errors), Redis's `%.17g` replies, `%.Ng` in
//! general, and the C cast to an integer.

use std::io::Write as _;

use super::hex_digit;
use super::is_c_space;

/// Parses a double as Redis's `string2d`/`strtod` path does: no surrounding spaces, no NaN;
/// `inf`, `+inf`, `-inf`, exponents and leading `+` are accepted.
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    if b.is_empty() || b[0].is_ascii_whitespace() || b[b.len() - 1].is_ascii_whitespace() {
        return None;
    }
    let s = std::str::from_utf8(b).ok()?;
    let v: f64 = s.parse().ok()?;
    if v.is_nan() { None } else { Some(v) }
}

/// Parses a score argument of `ZADD`/`ZINCRBY` exactly as Redis 7.0's `string2d` does with C's
/// `strtod`: the whole argument must be a decimal number (optional sign, digits with an
/// optional point, optional exponent), a hexadecimal float (`0x1.8p3`), or `inf`/`infinity`
/// in any case with an optional sign. Rejected: empty input, leading or trailing whitespace,
/// NUL bytes, NaN, and values that overflow to infinity or underflow to zero (`1e400`,
/// `1e-400`; a result that is merely subnormal is accepted). `None` → reply
/// `ERR value is not a valid float`.
pub fn parse_double(arg: &[u8]) -> Option<f64> {
    if arg.first().is_none_or(|&b| is_c_space(b)) {
        return None;
    }
    let r = strtod(arg);
    if r.consumed != arg.len() || r.value.is_nan() || r.out_of_range {
        return None;
    }
    Some(r.value)
}

/// Appends `score` formatted as Redis 7.0 replies it (`ZSCORE`, `WITHSCORES`, `ZINCRBY`):
/// C's `%.17g`, that is 17 significant digits with trailing zeros removed, in exponent form
/// (`1e+20`, `1.0000000000000001e-05`) when the decimal exponent is below -4 or at least 17,
/// plus `inf`, `-inf` and `-0`. Examples: `1.1` → `1.1000000000000001`, `3` → `3`.
pub fn format_double(score: f64, out: &mut Vec<u8>) {
    if score.is_nan() {
        out.extend_from_slice(b"nan");
        return;
    }
    if score.is_infinite() {
        out.extend_from_slice(if score > 0.0 { b"inf" } else { b"-inf" });
        return;
    }
    if score == 0.0 {
        out.extend_from_slice(if score.is_sign_negative() {
            b"-0"
        } else {
            b"0"
        });
        return;
    }
    if score.fract() == 0.0 && score.abs() < 1e17 {
        // An integer of at most 17 digits prints exactly, without a point.
        let _ = write!(out, "{}", score as i64);
        return;
    }
    // Rust's `{:.16e}` is the exactly rounded (ties to even, as glibc) 17-digit mantissa and
    // the exponent `%e` would use; rearrange it the way `%g` does.
    let mut buf = [0u8; 40];
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    if write!(cursor, "{:.16e}", score.abs()).is_err() {
        let _ = write!(out, "{score}");
        return;
    }
    let written = usize::try_from(cursor.position()).unwrap_or(0);
    let text = buf.get(..written).unwrap_or(&[]);
    let Some(e_pos) = text.iter().position(|&b| b == b'e') else {
        let _ = write!(out, "{score}");
        return;
    };
    let mut digits = [b'0'; 17];
    let mut nd = 0;
    for &b in &text[..e_pos] {
        if b.is_ascii_digit() && nd < digits.len() {
            digits[nd] = b;
            nd += 1;
        }
    }
    let exp: i32 = std::str::from_utf8(&text[e_pos + 1..])
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // `digits` starts as zeros, so at least one digit is always there.
    let mut nd = nd.max(1);
    while nd > 1 && digits[nd - 1] == b'0' {
        nd -= 1;
    }
    let digits = &digits[..nd];
    if score < 0.0 {
        out.push(b'-');
    }
    if !(-4..17).contains(&exp) {
        out.push(digits[0]);
        if nd > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        out.push(if exp < 0 { b'-' } else { b'+' });
        let abs = exp.unsigned_abs();
        if abs < 10 {
            out.push(b'0');
        }
        let _ = write!(out, "{abs}");
    } else if exp >= 0 {
        let int_len = usize::try_from(exp).unwrap_or(0) + 1;
        if nd <= int_len {
            out.extend_from_slice(digits);
            out.resize(out.len() + (int_len - nd), b'0');
        } else {
            out.extend_from_slice(&digits[..int_len]);
            out.push(b'.');
            out.extend_from_slice(&digits[int_len..]);
        }
    } else {
        out.extend_from_slice(b"0.");
        let zeros = usize::try_from(-exp - 1).unwrap_or(0);
        out.resize(out.len() + zeros, b'0');
        out.extend_from_slice(digits);
    }
}

/// What C's `strtod` returns for a byte string.
pub struct Strtod {
    /// The number read (0 when none was).
    pub value: f64,
    /// Bytes consumed (0 when no number was recognised, whitespace included).
    pub consumed: usize,
    /// `errno == ERANGE` with a result of `±HUGE_VAL` or zero.
    pub out_of_range: bool,
}

/// Largest exponent magnitude kept while parsing; anything beyond already overflows or
/// underflows every possible mantissa.
const EXP_CLAMP: i64 = 1 << 40;

/// Reads an optionally signed decimal exponent at the start of `s`; returns it (clamped)
/// and its length, or `None` if there are no digits.
fn parse_exponent(s: &[u8]) -> Option<(i64, usize)> {
    let (neg, mut i) = match s.first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    let digits_start = i;
    let mut value: i64 = 0;
    while let Some(d) = s.get(i).filter(|b| b.is_ascii_digit()) {
        value = (value * 10 + i64::from(d - b'0')).min(EXP_CLAMP);
        i += 1;
    }
    if i == digits_start {
        return None;
    }
    Some((if neg { -value } else { value }, i))
}

/// Emulates glibc's `strtod` in the C locale.
pub fn strtod(s: &[u8]) -> Strtod {
    let none = Strtod {
        value: 0.0,
        consumed: 0,
        out_of_range: false,
    };
    let mut i = s.iter().take_while(|&&b| is_c_space(b)).count();
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let rest = &s[i..];
    let sign = |v: f64| if neg { -v } else { v };
    let starts_ci = |p: &[u8]| rest.len() >= p.len() && rest[..p.len()].eq_ignore_ascii_case(p);
    if starts_ci(b"inf") {
        let n = if starts_ci(b"infinity") { 8 } else { 3 };
        return Strtod {
            value: sign(f64::INFINITY),
            consumed: i + n,
            out_of_range: false,
        };
    }
    if starts_ci(b"nan") {
        let mut n = 3;
        if rest.get(3) == Some(&b'(') {
            let body = rest[4..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                .count();
            if rest.get(4 + body) == Some(&b')') {
                n = 5 + body;
            }
        }
        return Strtod {
            value: f64::NAN,
            consumed: i + n,
            out_of_range: false,
        };
    }
    if rest.len() >= 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
        if let Some((value, n, out_of_range)) = parse_hex(&rest[2..]) {
            return Strtod {
                value: sign(value),
                consumed: i + 2 + n,
                out_of_range,
            };
        }
        // "0x" without hex digits: only the "0" is a number.
        return Strtod {
            value: sign(0.0),
            consumed: i + 1,
            out_of_range: false,
        };
    }
    // Decimal: digits [ '.' digits ] [ e [sign] digits ], at least one mantissa digit.
    let int_digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    // An integer of at most 15 digits (below 2^53) is exactly its `f64`: the rate limiters'
    // millisecond timestamps and the `0` of a range skip the general parser.
    if (1..=15).contains(&int_digits) && !matches!(rest.get(int_digits), Some(b'.' | b'e' | b'E')) {
        let v = rest[..int_digits]
            .iter()
            .fold(0u64, |v, &d| v * 10 + u64::from(d - b'0'));
        return Strtod {
            value: sign(v as f64),
            consumed: i + int_digits,
            out_of_range: false,
        };
    }
    let mut j = int_digits;
    let mut frac_digits = 0;
    if rest.get(j) == Some(&b'.') {
        frac_digits = rest[j + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        j += 1 + frac_digits;
    }
    if int_digits + frac_digits == 0 {
        return none;
    }
    let mantissa_nonzero = rest[..j].iter().any(|&b| (b'1'..=b'9').contains(&b));
    if matches!(rest.get(j), Some(b'e' | b'E'))
        && let Some((_, n)) = parse_exponent(&rest[j + 1..])
    {
        j += 1 + n;
    }
    let Some(value) = std::str::from_utf8(&rest[..j])
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
    else {
        return none;
    };
    Strtod {
        value: sign(value),
        consumed: i + j,
        out_of_range: value.is_infinite() || (value == 0.0 && mantissa_nonzero),
    }
}

/// Parses the part of a hexadecimal float after `0x`: hex digits with an optional point
/// (at least one digit) and an optional binary exponent `p[sign]digits`. Returns the
/// correctly rounded (ties to even) magnitude, the bytes consumed, and whether it
/// overflowed or underflowed to zero; `None` if there is no hex digit.
fn parse_hex(s: &[u8]) -> Option<(f64, usize, bool)> {
    let mut mant: u64 = 0;
    let mut sig_digits = 0;
    let mut sticky = false;
    let mut exp2: i64 = 0;
    let mut any_digit = false;
    let mut i = 0;
    let mut after_point = false;
    loop {
        match s.get(i) {
            Some(&b) if b.is_ascii_hexdigit() => {
                any_digit = true;
                let d = u64::from(hex_value(b));
                if mant == 0 && d == 0 {
                    if after_point {
                        exp2 -= 4;
                    }
                } else if sig_digits < 16 {
                    mant = (mant << 4) | d;
                    sig_digits += 1;
                    if after_point {
                        exp2 -= 4;
                    }
                } else {
                    sticky |= d != 0;
                    if !after_point {
                        exp2 += 4;
                    }
                }
                exp2 = exp2.clamp(-EXP_CLAMP, EXP_CLAMP);
            }
            Some(b'.') if !after_point => after_point = true,
            _ => break,
        }
        i += 1;
    }
    if !any_digit {
        return None;
    }
    if matches!(s.get(i), Some(b'p' | b'P'))
        && let Some((e, n)) = parse_exponent(&s[i + 1..])
    {
        exp2 = (exp2 + e).clamp(-EXP_CLAMP, EXP_CLAMP);
        i += 1 + n;
    }
    if mant == 0 {
        return Some((0.0, i, false));
    }
    let (value, out_of_range) = round_binary(mant, sticky, exp2);
    Some((value, i, out_of_range))
}

/// A hex digit's value; callers have checked it is one.
fn hex_value(b: u8) -> u8 {
    hex_digit(b).unwrap_or(0)
}

/// Rounds `(mant + sticky·ε) · 2^exp2` (with `mant != 0`) to the nearest double, ties to
/// even; also says whether it overflowed to infinity or underflowed to zero.
fn round_binary(mant: u64, sticky: bool, exp2: i64) -> (f64, bool) {
    let lz = mant.leading_zeros();
    let m = mant << lz;
    // value = m · 2^(top - 63); `top` is the exponent of the leading bit.
    let top = exp2 + 63 - i64::from(lz);
    if top > 1023 {
        return (f64::INFINITY, true);
    }
    // Significant bits available at this magnitude: 53 for normals, fewer for subnormals.
    let bits = if top >= -1022 { 53 } else { 53 - (-1022 - top) };
    if bits <= 0 {
        // Below half the least subnormal, or exactly half without sticky bits (tie to 0),
        // except that exactly half with sticky bits rounds up.
        let rounds_up = bits == 0 && (m > 1 << 63 || (m == 1 << 63 && sticky));
        return if rounds_up {
            (f64::from_bits(1), false)
        } else {
            (0.0, true)
        };
    }
    let shift = u32::try_from(64 - bits).unwrap_or(63);
    let mut q = m >> shift;
    let rem = m & ((1u64 << shift) - 1);
    let half = 1u64 << (shift - 1);
    if rem > half || (rem == half && (sticky || q & 1 == 1)) {
        q += 1;
    }
    if top >= -1022 {
        let mut top = top;
        if q == 1 << 53 {
            q >>= 1;
            top += 1;
            if top > 1023 {
                return (f64::INFINITY, true);
            }
        }
        let biased = u64::try_from(top + 1023).unwrap_or(0);
        (
            f64::from_bits((biased << 52) | (q & ((1 << 52) - 1))),
            false,
        )
    } else {
        // Subnormal: value = q · 2^-1074, and q == 2^52 is the least normal, whose bit
        // pattern is q as well.
        (f64::from_bits(q), false)
    }
}

/// C's `%.{precision}g` for a double, with glibc's spellings of the special values (`inf`,
/// `-inf`, `nan`, `-nan`).
pub fn fmt_g(d: f64, precision: usize) -> String {
    let precision = precision.clamp(1, 17);
    if d.is_nan() {
        return if d.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // `{:.*e}` is the correctly rounded mantissa `%e` would print; `%g` picks fixed or
    // exponent notation from the exponent of that rounded value.
    let sci = format!("{:.*e}", precision - 1, d);
    let (mantissa, exp) = match sci.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => return sci,
    };
    if exp < -4 || exp >= precision as i32 {
        let m = trim_fraction(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", exp.unsigned_abs())
    } else {
        let decimals = (precision as i32 - 1 - exp).max(0) as usize;
        trim_fraction(&format!("{:.*}", decimals, d)).to_string()
    }
}

fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// C's `(long long)` cast of a double, as Redis's Lua replies use it: truncated toward zero; NaN and values
/// outside the i64 range become `i64::MIN`, as Redis's `(long long)` cast does on x86-64.
pub fn c_cast_i64(d: f64) -> i64 {
    if d.is_nan() || !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

#[cfg(test)]
mod tests;
