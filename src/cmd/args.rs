//! Argument parsing shared by every command: a cursor over the arguments and Redis's strict
//! number parsers.
//!
//! Redis is strict where many parsers are lenient: `string2ll` refuses spaces, a leading `+`
//! and leading zeros, and `strtod`-based doubles refuse surrounding spaces and NaN. Clients see
//! the difference as error replies, so every command parses through these few functions.

use bytes::Bytes;

use crate::error::{CmdError, CmdResult};
/// The strict number parsers live in [`crate::num`]; commands reach them through here.
pub use crate::num::{parse_f64, parse_i64};

/// Parses a SCAN-family cursor as Redis 7.0 does (`strtoul` in base 10): the text stops at a
/// NUL byte, an empty text is 0, a sign is allowed and `-n` wraps around; a leading space,
/// any other character or overflow is `ERR invalid cursor`.
pub fn parse_scan_cursor(b: &[u8]) -> CmdResult<u64> {
    let invalid = || CmdError::msg("ERR invalid cursor");
    let b = &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())];
    let (neg, digits) = match b.first() {
        None => return Ok(0),
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        Some(_) => (false, b),
    };
    if digits.is_empty() {
        return Err(invalid());
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return Err(invalid());
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(c - b'0')))
            .ok_or_else(invalid)?;
    }
    Ok(if neg { v.wrapping_neg() } else { v })
}

/// A cursor over a command's arguments (the command name excluded).
#[derive(Debug)]
pub struct ArgCursor<'a> {
    args: &'a [Bytes],
    pos: usize,
}

impl<'a> ArgCursor<'a> {
    /// A cursor over `args` (name excluded).
    pub fn new(args: &'a [Bytes]) -> Self {
        ArgCursor { args, pos: 0 }
    }

    /// The next argument, or a syntax error if there is none.
    #[allow(clippy::should_implement_trait)] // fallible, unlike Iterator::next
    pub fn next(&mut self) -> CmdResult<&'a Bytes> {
        let a = self.args.get(self.pos).ok_or(CmdError::Syntax)?;
        self.pos += 1;
        Ok(a)
    }

    /// The next argument as a slice.
    pub fn next_bytes(&mut self) -> CmdResult<&'a [u8]> {
        self.next().map(|b| &b[..])
    }

    /// The next argument as an i64 (Redis's "value is not an integer" on failure).
    pub fn next_i64(&mut self) -> CmdResult<i64> {
        parse_i64(self.next()?).ok_or(CmdError::NotInteger)
    }

    /// The next argument as a double (Redis's "value is not a valid float" on failure).
    pub fn next_f64(&mut self) -> CmdResult<f64> {
        parse_f64(self.next()?).ok_or(CmdError::NotFloat)
    }

    /// The next argument without consuming it.
    pub fn peek(&self) -> Option<&'a Bytes> {
        self.args.get(self.pos)
    }

    /// Consumes the next argument if it equals `keyword` (case-insensitive).
    pub fn eat(&mut self, keyword: &str) -> bool {
        match self.peek() {
            Some(a) if a.eq_ignore_ascii_case(keyword.as_bytes()) => {
                self.pos += 1;
                true
            }
            _ => false,
        }
    }

    /// Arguments not consumed yet.
    pub fn remaining(&self) -> usize {
        self.args.len() - self.pos
    }

    /// All arguments not consumed yet (consuming them).
    pub fn rest(&mut self) -> &'a [Bytes] {
        let r = &self.args[self.pos..];
        self.pos = self.args.len();
        r
    }

    /// Syntax error if any argument is left.
    pub fn finish(&self) -> CmdResult<()> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(CmdError::Syntax)
        }
    }
}

/// True if `a` equals `keyword` ignoring ASCII case.
pub fn is(a: &[u8], keyword: &str) -> bool {
    a.eq_ignore_ascii_case(keyword.as_bytes())
}

/// Redis's glob matching (`stringmatchlen`): `*`, `?`, `[...]` with ranges and `^`, `\` escapes.
pub fn glob_match(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    fn eq(a: u8, b: u8, nocase: bool) -> bool {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    }
    fn rec(p: &[u8], s: &[u8], nocase: bool, depth: usize) -> bool {
        if depth > 1000 {
            return false;
        }
        let (mut pi, mut si) = (0, 0);
        while pi < p.len() {
            match p[pi] {
                b'*' => {
                    while pi + 1 < p.len() && p[pi + 1] == b'*' {
                        pi += 1;
                    }
                    if pi + 1 == p.len() {
                        return true;
                    }
                    for start in si..=s.len() {
                        if rec(&p[pi + 1..], &s[start..], nocase, depth + 1) {
                            return true;
                        }
                    }
                    return false;
                }
                b'?' => {
                    if si >= s.len() {
                        return false;
                    }
                    si += 1;
                }
                b'[' => {
                    if si >= s.len() {
                        return false;
                    }
                    pi += 1;
                    let not = pi < p.len() && p[pi] == b'^';
                    if not {
                        pi += 1;
                    }
                    let mut matched = false;
                    loop {
                        if pi >= p.len() {
                            pi -= 1;
                            break;
                        }
                        if p[pi] == b'\\' && pi + 2 < p.len() {
                            pi += 1;
                            if p[pi] == s[si] {
                                matched = true;
                            }
                        } else if p[pi] == b']' {
                            break;
                        } else if pi + 2 < p.len() && p[pi + 1] == b'-' {
                            let (mut lo, mut hi) = (p[pi], p[pi + 2]);
                            if lo > hi {
                                std::mem::swap(&mut lo, &mut hi);
                            }
                            let c = s[si];
                            if nocase {
                                let c = c.to_ascii_lowercase();
                                if c >= lo.to_ascii_lowercase() && c <= hi.to_ascii_lowercase() {
                                    matched = true;
                                }
                            } else if c >= lo && c <= hi {
                                matched = true;
                            }
                            pi += 2;
                        } else if eq(p[pi], s[si], nocase) {
                            matched = true;
                        }
                        pi += 1;
                    }
                    if not {
                        matched = !matched;
                    }
                    if !matched {
                        return false;
                    }
                    si += 1;
                }
                b'\\' if pi + 1 < p.len() => {
                    pi += 1;
                    if si >= s.len() || !eq(p[pi], s[si], nocase) {
                        return false;
                    }
                    si += 1;
                }
                c => {
                    if si >= s.len() || !eq(c, s[si], nocase) {
                        return false;
                    }
                    si += 1;
                }
            }
            pi += 1;
        }
        si == s.len()
    }
    rec(pattern, s, nocase, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match(b"*", b"anything", false));
        assert!(glob_match(b"h?llo", b"hello", false));
        assert!(glob_match(b"h[ae]llo", b"hallo", false));
        assert!(!glob_match(b"h[^e]llo", b"hello", false));
        assert!(glob_match(b"h[a-b]llo", b"hbllo", false));
        assert!(glob_match(b"rate:*:u1", b"rate:x:u1", false));
        assert!(!glob_match(b"rate:*:u1", b"rate:x:u2", false));
        assert!(glob_match(b"a\\*", b"a*", false));
        assert!(glob_match(b"A*", b"abc", true));
    }
}
