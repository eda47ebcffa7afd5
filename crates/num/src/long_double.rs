//! Redis's `long double` (x87 80-bit extended precision on x86-64 Linux) in software, for
//! HINCRBYFLOAT and INCRBYFLOAT.
//!
//! Redis parses with `strtold`, adds in `long double` and prints with `%.17Lf` before
//! trimming zeros, so its replies carry 64 bits of significand: `0.1 + 0.2` is `0.3`, where an
//! f64 sum prints `0.30000000000000004`; `1e300` prints 301 digits. Matching them byte for
//! byte needs the same format: a 64-bit significand with an explicit integer bit and binary
//! exponents from −16445 (denormals) to 16320. Every operation here is exact and then rounded
//! once to nearest, ties to even (as the x87 unit, glibc's `strtold` and glibc's `printf` do),
//! on small arbitrary-precision integers.
use std::cmp::Ordering;

/// Exponent of the least significant bit of the smallest denormal: 2^−16445.
const MIN_EXP: i64 = -16445;
/// Exponent of the least significant bit of the largest finite value, (2^64 − 1)·2^16320.
const MAX_EXP: i64 = 16320;
/// Redis's `MAX_LONG_DOUBLE_CHARS`: longer texts are refused before parsing.
const MAX_CHARS: usize = 5 * 1024;

/// A long double value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LongDouble {
    /// ±`mant`·2^`exp`, `mant` normalised (top bit set) unless `exp` is the minimum.
    Finite {
        /// Sign.
        neg: bool,
        /// Significand.
        mant: u64,
        /// Binary exponent of the significand's lowest bit.
        exp: i64,
    },
    /// ±infinity.
    Inf {
        /// Sign.
        neg: bool,
    },
    /// Not a number (only as the sum of opposite infinities).
    Nan,
}

impl LongDouble {
    /// Positive zero.
    pub const ZERO: LongDouble = LongDouble::Finite {
        neg: false,
        mant: 0,
        exp: 0,
    };

    /// True unless infinite or NaN.
    pub fn is_finite(self) -> bool {
        matches!(self, LongDouble::Finite { .. })
    }
}

/// A natural number as little-endian 32-bit limbs, without high zero limbs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(n: u64) -> Big {
        let mut b = Big(vec![n as u32, (n >> 32) as u32]);
        b.trim();
        b
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn bit_len(&self) -> i64 {
        match self.0.last() {
            None => 0,
            Some(&top) => (self.0.len() as i64 - 1) * 32 + (32 - top.leading_zeros() as i64),
        }
    }

    fn bit(&self, i: i64) -> bool {
        i >= 0
            && self
                .0
                .get((i / 32) as usize)
                .is_some_and(|l| (l >> (i % 32)) & 1 == 1)
    }

    /// True if any bit below position `i` is set.
    fn any_below(&self, i: i64) -> bool {
        if i <= 0 {
            return false;
        }
        let full = (i / 32) as usize;
        let rem = (i % 32) as u32;
        self.0.iter().take(full).any(|&l| l != 0)
            || (rem > 0
                && self
                    .0
                    .get(full)
                    .is_some_and(|&l| l & ((1u32 << rem) - 1) != 0))
    }

    fn mul_add_small(&mut self, m: u32, add: u32) {
        let mut carry = u64::from(add);
        for l in &mut self.0 {
            let v = u64::from(*l) * u64::from(m) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
        self.trim();
    }

    fn mul_pow10(&mut self, mut k: u64) {
        while k >= 9 {
            self.mul_add_small(1_000_000_000, 0);
            k -= 9;
        }
        self.mul_add_small(10u32.pow(k as u32), 0);
    }

    fn shl(&self, n: i64) -> Big {
        if self.is_zero() || n <= 0 {
            return self.clone();
        }
        let (limbs, bits) = ((n / 32) as usize, (n % 32) as u32);
        let mut out = vec![0u32; limbs];
        out.reserve(self.0.len() + 1);
        let mut carry = 0u32;
        for &l in &self.0 {
            if bits == 0 {
                out.push(l);
            } else {
                out.push((l << bits) | carry);
                carry = l >> (32 - bits);
            }
        }
        if carry > 0 {
            out.push(carry);
        }
        Big(out)
    }

    fn shr(&self, n: i64) -> Big {
        if n <= 0 {
            return self.clone();
        }
        let (limbs, bits) = ((n / 32) as usize, (n % 32) as u32);
        let src = self.0.get(limbs..).unwrap_or(&[]);
        let mut out: Vec<u32> = (0..src.len())
            .map(|i| {
                let lo = src[i] >> bits;
                let hi = if bits == 0 {
                    0
                } else {
                    src.get(i + 1).map_or(0, |&h| h << (32 - bits))
                };
                lo | hi
            })
            .collect();
        while out.last() == Some(&0) {
            out.pop();
        }
        Big(out)
    }

    fn cmp(&self, other: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }

    fn add(&self, other: &Big) -> Big {
        let (long, short) = if self.0.len() >= other.0.len() {
            (self, other)
        } else {
            (other, self)
        };
        let mut out = Vec::with_capacity(long.0.len() + 1);
        let mut carry = 0u64;
        for (i, &l) in long.0.iter().enumerate() {
            let v = u64::from(l) + u64::from(short.0.get(i).copied().unwrap_or(0)) + carry;
            out.push(v as u32);
            carry = v >> 32;
        }
        if carry > 0 {
            out.push(carry as u32);
        }
        Big(out)
    }

    /// `self - other`, for `self >= other`.
    fn sub(&self, other: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len());
        let mut borrow = 0i64;
        for (i, &l) in self.0.iter().enumerate() {
            let mut v = i64::from(l) - i64::from(other.0.get(i).copied().unwrap_or(0)) - borrow;
            borrow = 0;
            if v < 0 {
                v += 1 << 32;
                borrow = 1;
            }
            out.push(v as u32);
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    /// Quotient and remainder of `self / d` for a quotient below 2^65.
    fn div_small_quotient(&self, d: &Big) -> (u128, Big) {
        let mut r = self.clone();
        let mut q = 0u128;
        for bit in (0..65).rev() {
            let ds = d.shl(bit);
            if r.cmp(&ds) != Ordering::Less {
                r = r.sub(&ds);
                q |= 1 << bit;
            }
        }
        (q, r)
    }

    /// Decimal digits.
    fn to_decimal(&self) -> String {
        let mut limbs = self.0.clone();
        let mut chunks = Vec::new();
        while !limbs.is_empty() {
            let mut rem = 0u64;
            for l in limbs.iter_mut().rev() {
                let v = (rem << 32) | u64::from(*l);
                *l = (v / 1_000_000_000) as u32;
                rem = v % 1_000_000_000;
            }
            while limbs.last() == Some(&0) {
                limbs.pop();
            }
            chunks.push(rem as u32);
        }
        let mut s = chunks
            .last()
            .map_or_else(|| "0".to_string(), |c| c.to_string());
        for c in chunks.iter().rev().skip(1) {
            s.push_str(&format!("{c:09}"));
        }
        s
    }
}

/// Rounds ±(num / den)·2^e2 to the nearest long double, ties to even.
fn round(neg: bool, num: &Big, den: &Big, e2: i64) -> LongDouble {
    if num.is_zero() {
        return LongDouble::Finite {
            neg,
            mant: 0,
            exp: 0,
        };
    }
    // floor(log2(num / den)) is l or l - 1.
    let l = num.bit_len() - den.bit_len();
    let at_least = if l >= 0 {
        num.cmp(&den.shl(l))
    } else {
        num.shl(-l).cmp(den)
    } != Ordering::Less;
    let top = if at_least { l } else { l - 1 } + e2;
    let mut exp = (top - 63).max(MIN_EXP);
    if exp > MAX_EXP {
        return LongDouble::Inf { neg };
    }
    let sh = exp - e2;
    let (n2, d2) = if sh >= 0 {
        (num.clone(), den.shl(sh))
    } else {
        (num.shl(-sh), den.clone())
    };
    let (mut q, r) = n2.div_small_quotient(&d2);
    let up = match r.shl(1).cmp(&d2) {
        Ordering::Greater => true,
        Ordering::Equal => q & 1 == 1,
        Ordering::Less => false,
    };
    if up {
        q += 1;
    }
    if q >> 64 != 0 {
        q >>= 1;
        exp += 1;
        if exp > MAX_EXP {
            return LongDouble::Inf { neg };
        }
    }
    LongDouble::Finite {
        neg,
        mant: q as u64,
        exp,
    }
}

/// Parses a float as Redis's `string2ld` does: `strtold` syntax (decimal, hexadecimal with
/// a binary exponent, `inf`/`infinity`), the whole text and nothing more (no spaces), at
/// most 5119 bytes; NaN, and values that overflow or underflow to zero, are refused.
/// Infinity is returned for the caller to refuse with its own message.
pub fn parse(text: &[u8]) -> Option<LongDouble> {
    if text.is_empty() || text.len() >= MAX_CHARS {
        return None;
    }
    let (neg, body) = match text[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
        return Some(LongDouble::Inf { neg });
    }
    let v = match body {
        [b'0', b'x' | b'X', hex @ ..] => parse_hex(neg, hex)?,
        _ => parse_decimal(neg, body)?,
    };
    match v {
        LongDouble::Finite { .. } => Some(v),
        _ => None,
    }
}

/// The digits of a mantissa with an optional point, and what follows them.
struct Mantissa<'a> {
    /// The digits as an integer.
    value: Big,
    /// Digits after the point.
    frac: i64,
    /// Digits from the first nonzero one.
    significant: i64,
    /// At least one digit was read.
    any: bool,
    /// The text after the mantissa.
    rest: &'a [u8],
}

fn mantissa(s: &[u8], radix: u32) -> Mantissa<'_> {
    // Digits are gathered in chunks that fit a limb (10^9, 16^7) to multiply the big
    // number once per chunk.
    let chunk_digits = if radix == 10 { 9 } else { 7 };
    let mut n = Big(Vec::new());
    let (mut chunk, mut chunk_len) = (0u32, 0u32);
    let (mut frac, mut significant, mut any, mut seen_point, mut i) = (0i64, 0i64, false, false, 0);
    while i < s.len() {
        let c = s[i];
        if c == b'.' && !seen_point {
            seen_point = true;
        } else if let Some(d) = (c as char).to_digit(radix) {
            any = true;
            if significant > 0 || d != 0 {
                chunk = chunk * radix + d;
                chunk_len += 1;
                significant += 1;
                if chunk_len == chunk_digits {
                    n.mul_add_small(radix.pow(chunk_len), chunk);
                    (chunk, chunk_len) = (0, 0);
                }
            }
            if seen_point {
                frac += 1;
            }
        } else {
            break;
        }
        i += 1;
    }
    if chunk_len > 0 {
        n.mul_add_small(radix.pow(chunk_len), chunk);
    }
    Mantissa {
        value: n,
        frac,
        significant,
        any,
        rest: &s[i..],
    }
}

/// An exponent part: `marker [sign] digits`, saturating. None unless it is the whole rest.
fn exponent(s: &[u8], markers: [u8; 2]) -> Option<i64> {
    let Some((&m, rest)) = s.split_first() else {
        return Some(0);
    };
    if !markers.contains(&m) {
        return None;
    }
    let (neg, digits) = match rest.first() {
        Some(b'-') => (true, &rest[1..]),
        Some(b'+') => (false, &rest[1..]),
        _ => (false, rest),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let e = digits
        .iter()
        .fold(0i64, |e, &d| (e * 10 + i64::from(d - b'0')).min(1 << 40));
    Some(if neg { -e } else { e })
}

fn parse_decimal(neg: bool, s: &[u8]) -> Option<LongDouble> {
    let m = mantissa(s, 10);
    if !m.any {
        return None;
    }
    let e10 = exponent(m.rest, [b'e', b'E'])? - m.frac;
    let digits = m.value;
    if digits.is_zero() {
        return Some(LongDouble::Finite {
            neg,
            mant: 0,
            exp: 0,
        });
    }
    // The value lies in [10^(mag-1), 10^mag): settle the far cases without big powers.
    // The largest finite value is about 1.19e4932, half the smallest denormal 1.8e-4951.
    let mag = m.significant + e10;
    if mag > 4933 {
        return Some(LongDouble::Inf { neg });
    }
    if mag < -4951 {
        return None;
    }
    let v = if e10 >= 0 {
        let mut num = digits;
        num.mul_pow10(e10 as u64);
        round(neg, &num, &Big::from_u64(1), 0)
    } else {
        let mut den = Big::from_u64(1);
        den.mul_pow10(e10.unsigned_abs());
        round(neg, &digits, &den, 0)
    };
    nonzero(v)
}

fn parse_hex(neg: bool, s: &[u8]) -> Option<LongDouble> {
    let m = mantissa(s, 16);
    if !m.any {
        return None;
    }
    let e2 = exponent(m.rest, [b'p', b'P'])? - 4 * m.frac;
    let digits = m.value;
    if digits.is_zero() {
        return Some(LongDouble::Finite {
            neg,
            mant: 0,
            exp: 0,
        });
    }
    let top = digits.bit_len() - 1 + e2;
    if top > 16384 {
        return Some(LongDouble::Inf { neg });
    }
    if top < MIN_EXP - 2 {
        return None;
    }
    nonzero(round(neg, &digits, &Big::from_u64(1), e2))
}

/// `strtold` reports a nonzero text that rounds to zero as an underflow, which Redis refuses.
fn nonzero(v: LongDouble) -> Option<LongDouble> {
    match v {
        LongDouble::Finite { mant: 0, .. } => None,
        v => Some(v),
    }
}

/// The exactly rounded sum.
pub fn add(a: LongDouble, b: LongDouble) -> LongDouble {
    use LongDouble::{Finite, Inf, Nan};
    match (a, b) {
        (Nan, _) | (_, Nan) => Nan,
        (Inf { neg: x }, Inf { neg: y }) if x != y => Nan,
        (Inf { neg }, _) | (_, Inf { neg }) => Inf { neg },
        (Finite { mant: 0, .. }, v) | (v, Finite { mant: 0, .. }) => v,
        (
            Finite {
                neg: na,
                mant: ma,
                exp: ea,
            },
            Finite {
                neg: nb,
                mant: mb,
                exp: eb,
            },
        ) => {
            let e = ea.min(eb);
            let x = Big::from_u64(ma).shl(ea - e);
            let y = Big::from_u64(mb).shl(eb - e);
            let (neg, sum) = if na == nb {
                (na, x.add(&y))
            } else {
                match x.cmp(&y) {
                    Ordering::Equal => return LongDouble::ZERO,
                    Ordering::Greater => (na, x.sub(&y)),
                    Ordering::Less => (nb, y.sub(&x)),
                }
            };
            round(neg, &sum, &Big::from_u64(1), e)
        }
    }
}

/// The exact value of a double (a long double holds every double).
pub fn from_f64(d: f64) -> LongDouble {
    if d.is_nan() {
        return LongDouble::Nan;
    }
    let neg = d.is_sign_negative();
    if d.is_infinite() {
        return LongDouble::Inf { neg };
    }
    let bits = d.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i64;
    let frac = bits & ((1u64 << 52) - 1);
    let (mant, exp) = if biased == 0 {
        (frac, -1074)
    } else {
        (frac | (1u64 << 52), biased - 1075)
    };
    if mant == 0 {
        return LongDouble::Finite {
            neg,
            mant: 0,
            exp: 0,
        };
    }
    let shift = mant.leading_zeros();
    LongDouble::Finite {
        neg,
        mant: mant << shift,
        exp: exp - i64::from(shift),
    }
}

/// Formats as Redis's `ld2string(…, LD_STR_HUMAN)`: `%.17Lf`, trailing zeros (and a
/// trailing point) removed, `-0` written `0`; infinities as `inf` / `-inf`.
pub fn format_human(v: LongDouble) -> String {
    let (neg, mant, exp) = match v {
        LongDouble::Finite { neg, mant, exp } => (neg, mant, exp),
        LongDouble::Inf { neg } => return if neg { "-inf" } else { "inf" }.to_string(),
        LongDouble::Nan => return "nan".to_string(),
    };
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    if exp >= 0 {
        out.push_str(&Big::from_u64(mant).shl(exp).to_decimal());
    } else {
        let mut n = Big::from_u64(mant);
        n.mul_pow10(17);
        let s = -exp;
        let mut q = n.shr(s);
        let half = n.bit(s - 1);
        if half && (n.any_below(s - 1) || q.bit(0)) {
            q = q.add(&Big::from_u64(1));
        }
        let digits = q.to_decimal();
        let digits = format!("{digits:0>18}");
        let (int, frac) = digits.split_at(digits.len() - 17);
        out.push_str(int);
        let frac = frac.trim_end_matches('0');
        if !frac.is_empty() {
            out.push('.');
            out.push_str(frac);
        }
    }
    if out == "-0" { "0".to_string() } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_as_redis_prints_coordinates() {
        assert_eq!(
            format_human(from_f64(13.361389338970184)),
            "13.36138933897018433"
        );
        assert_eq!(format_human(from_f64(-0.0)), "0");
        assert_eq!(format_human(from_f64(0.5)), "0.5");
        assert_eq!(format_human(from_f64(-180.0)), "-180");
        assert_eq!(format_human(from_f64(1e-20)), "0");
    }

    fn sum(texts: &[&str]) -> String {
        let mut acc = LongDouble::ZERO;
        for t in texts {
            acc = add(acc, parse(t.as_bytes()).unwrap());
            // Redis stores the text and parses it back on the next increment.
            acc = parse(format_human(acc).as_bytes()).unwrap_or(LongDouble::ZERO);
        }
        format_human(acc)
    }

    #[test]
    fn decimal_sums_print_like_redis() {
        assert_eq!(sum(&["0.1", "0.2"]), "0.3");
        assert_eq!(sum(&["10.5", "0.1"]), "10.6");
        assert_eq!(sum(&["5.0e3", "200"]), "5200");
        assert_eq!(sum(&["-5", "3.5"]), "-1.5");
        assert_eq!(sum(&["1.5e-18"]), "0");
        assert_eq!(sum(&["-0.000000000000000015"]), "-0.00000000000000002");
        assert_eq!(sum(&["-1e-30"]), "0");
        assert_eq!(sum(&["0x10", "+5", ".5", "5.", "-.5e1"]), "21.5");
    }

    #[test]
    fn ties_round_to_even_when_printing() {
        assert_eq!(sum(&["0.000003814697265625"]), "0.00000381469726562");
        assert_eq!(sum(&["0.000011444091796875"]), "0.00001144409179688");
    }

    #[test]
    fn wide_values_print_all_digits() {
        let big = "1000000000000000000008997324079559193870523944273290747938260082321265646596180935755849152083750497190350372508614274835903592556184672983913096260520748646287327135641843653294084255107606016789726652932370030551382947620994540294772781889620606179267611627097410650567187386105690089424915104006144";
        assert_eq!(sum(&["1e300"]), big);
        let max = format_human(parse(b"1.18e4932").unwrap());
        assert_eq!(max.len(), 4933);
        assert!(max.starts_with("118000000000000000000065281291809369920269043714016047172983124"));
    }

    #[test]
    fn parse_refuses_what_strtold_or_redis_refuse() {
        for t in [
            "",
            " 1",
            "1 ",
            "1e",
            "0x",
            "0x1p",
            ".",
            "e5",
            "1_000",
            "nan",
            "-nan",
            "1e5000",
            "1e-5000",
            "1e-4951",
            "1.19e4932",
            "5\0",
            "infinit",
            "--1",
        ] {
            assert_eq!(parse(t.as_bytes()), None, "{t:?}");
        }
        assert_eq!(parse(&vec![b'1'; 5120]), None);
        assert_eq!(parse(&vec![b'1'; 5119]), None);
        assert!(parse(b"1e-4950").is_some_and(|v| v.is_finite()));
        assert_eq!(parse(b"-INFINITY"), Some(LongDouble::Inf { neg: true }));
        assert_eq!(parse(b"0e999999999999"), Some(LongDouble::ZERO));
        assert_eq!(format_human(parse(b"0X1P-2").unwrap()), "0.25");
        assert_eq!(format_human(parse(b"0x.8").unwrap()), "0.5");
    }

    #[test]
    fn overflow_and_infinities() {
        let big = parse(b"1.18e4932").unwrap();
        assert!(!add(big, big).is_finite());
        assert!(!add(LongDouble::Inf { neg: false }, LongDouble::ZERO).is_finite());
        assert_eq!(
            add(
                LongDouble::Inf { neg: false },
                LongDouble::Inf { neg: true }
            ),
            LongDouble::Nan
        );
        let x = parse(b"2.5").unwrap();
        let y = parse(b"-2.5").unwrap();
        assert_eq!(format_human(add(x, y)), "0");
    }
}
