//! Number formatting and conversion as Redis's Lua does them.
//!
//! Lua 5.1 has only doubles. Where Redis turns one into text it uses C's `%.17g` (arguments of
//! `redis.call`) or `%.14g` (`tostring`, cjson); where it turns one into an integer reply it
//! uses a C cast, which on x86-64 yields `i64::MIN` for NaN and out-of-range values.

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

/// The integer a Lua number becomes in a reply: truncated toward zero; NaN and values
/// outside the i64 range become `i64::MIN`, as Redis's `(long long)` cast does on x86-64.
pub fn lua_number_to_i64(d: f64) -> i64 {
    if d.is_nan() || !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g17_matches_c() {
        assert_eq!(fmt_g(0.1, 17), "0.10000000000000001");
        assert_eq!(fmt_g(1.0, 17), "1");
        assert_eq!(fmt_g(1.5, 17), "1.5");
        assert_eq!(fmt_g(1.23456789012345, 17), "1.23456789012345");
        assert_eq!(fmt_g(1e20, 17), "1e+20");
        assert_eq!(fmt_g(123456789012345678.0, 17), "1.2345678901234568e+17");
        assert_eq!(fmt_g(-0.0, 17), "-0");
        assert_eq!(fmt_g(f64::INFINITY, 17), "inf");
        assert_eq!(fmt_g(-f64::NAN.abs(), 17), "-nan");
        assert_eq!(fmt_g(1e-5, 17), "1.0000000000000001e-05");
        assert_eq!(fmt_g(100000000000000000.0, 17), "1e+17");
        assert_eq!(fmt_g(99999999999999999.0, 17), "1e+17");
    }

    #[test]
    fn g14_matches_c() {
        assert_eq!(fmt_g(123456789012345.0, 14), "1.2345678901234e+14");
        assert_eq!(fmt_g(0.1, 14), "0.1");
        assert_eq!(fmt_g(1e100, 14), "1e+100");
        assert_eq!(fmt_g(2f64.powi(53), 14), "9.007199254741e+15");
        assert_eq!(fmt_g(1.5, 14), "1.5");
        assert_eq!(fmt_g(0.0001, 14), "0.0001");
        assert_eq!(fmt_g(0.00001, 14), "1e-05");
    }

    #[test]
    fn casts_like_x86() {
        assert_eq!(lua_number_to_i64(3.99), 3);
        assert_eq!(lua_number_to_i64(-3.99), -3);
        assert_eq!(lua_number_to_i64(f64::INFINITY), i64::MIN);
        assert_eq!(lua_number_to_i64(f64::NAN), i64::MIN);
        assert_eq!(lua_number_to_i64(2f64.powi(63)), i64::MIN);
        assert_eq!(lua_number_to_i64(-(2f64.powi(63))), i64::MIN);
        assert_eq!(lua_number_to_i64(9007199254740993.0), 9007199254740992);
    }
}
