//! Argument parsing shared by every command: a cursor over the arguments and Redis's strict
//! number parsers.
//!
//! Redis is strict where many parsers are lenient: `string2ll` refuses spaces, a leading `+`
//! and leading zeros, and `strtod`-based doubles refuse surrounding spaces and NaN. Clients see
//! the difference as error replies, so every command parses through these few functions.

use bytes::Bytes;

use crate::error::{CmdError, CmdResult};
use crate::num::{parse_f64, parse_i64};

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
///
/// The arguments are borrowed (slices of the connection's read buffer, of a MULTI queue,
/// of a script's call): a command that keeps an argument past its reply copies it
/// ([`ArgCursor::next_owned`]), and one that only reads it borrows it for nothing.
#[derive(Debug)]
pub struct ArgCursor<'a> {
    args: &'a [&'a [u8]],
    pos: usize,
}

impl<'a> ArgCursor<'a> {
    /// A cursor over `args` (name excluded).
    pub fn new(args: &'a [&'a [u8]]) -> Self {
        ArgCursor { args, pos: 0 }
    }

    /// The next argument, or a syntax error if there is none.
    #[allow(clippy::should_implement_trait)] // fallible, unlike Iterator::next
    pub fn next(&mut self) -> CmdResult<&'a [u8]> {
        // A match, not `ok_or`: that builds the error on every read and drops it unused
        // (an out-of-line drop of `CmdError`, on every argument of every command).
        let Some(&a) = self.args.get(self.pos) else {
            return Err(CmdError::Syntax);
        };
        self.pos += 1;
        Ok(a)
    }

    /// The next argument as a slice.
    pub fn next_bytes(&mut self) -> CmdResult<&'a [u8]> {
        self.next()
    }

    /// The next argument copied out, for a command that keeps it (a borrowed argument
    /// lives only as long as its request).
    pub fn next_owned(&mut self) -> CmdResult<Bytes> {
        self.next().map(Bytes::copy_from_slice)
    }

    /// The next argument as an i64 (Redis's "value is not an integer" on failure).
    pub fn next_i64(&mut self) -> CmdResult<i64> {
        match parse_i64(self.next()?) {
            Some(n) => Ok(n),
            None => Err(CmdError::NotInteger),
        }
    }

    /// The next argument as a double (Redis's "value is not a valid float" on failure).
    pub fn next_f64(&mut self) -> CmdResult<f64> {
        match parse_f64(self.next()?) {
            Some(f) => Ok(f),
            None => Err(CmdError::NotFloat),
        }
    }

    /// The next argument without consuming it.
    pub fn peek(&self) -> Option<&'a [u8]> {
        self.args.get(self.pos).copied()
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
    pub fn rest(&mut self) -> &'a [&'a [u8]] {
        let r = &self.args[self.pos..];
        self.pos = self.args.len();
        r
    }

    /// Syntax error if any argument is left. `engine::run` calls it after every `parse`, so
    /// commands do not.
    pub fn finish(&self) -> CmdResult<()> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(CmdError::Syntax)
        }
    }
}

pub use crate::protocol::request::{borrowed_args as borrowed, owned_args as owned};

/// True if `a` equals `keyword` ignoring ASCII case.
pub fn is(a: &[u8], keyword: &str) -> bool {
    a.eq_ignore_ascii_case(keyword.as_bytes())
}

/// An option keyword uppercased on the stack, for `match`ing without allocating. An
/// argument longer than [`Upper::MAX`] bytes, which no keyword is, reads as empty.
pub struct Upper {
    buf: [u8; Upper::MAX],
    len: usize,
}

impl Upper {
    /// The longest keyword kept.
    pub const MAX: usize = 16;
}

impl std::ops::Deref for Upper {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// `a` uppercased (ASCII), for matching against keywords (see [`Upper`]).
pub fn upper(a: &[u8]) -> Upper {
    let mut buf = [0u8; Upper::MAX];
    match buf.get_mut(..a.len()) {
        Some(dst) => {
            dst.copy_from_slice(a);
            dst.make_ascii_uppercase();
            Upper { buf, len: a.len() }
        }
        None => Upper { buf, len: 0 },
    }
}

/// Redis's glob matching (`stringmatchlen`): `*`, `?`, `[...]` with ranges and `^`, `\\`
/// escapes, with Redis 7.0's answers on every pattern, in O(pattern × string) time and no
/// recursion, whatever the client sends.
///
/// Redis's matcher recurses at each `*` and, since 7.0.9, gives up on longer matches for
/// earlier stars once a later star has tried every position. That makes only the most recent
/// `*` worth backtracking to, which is what this loop does. Its quirks are kept: an empty
/// string matches only an empty pattern (even `*` does not match it), an unterminated `[`
/// class runs to the end of the pattern, a trailing `\\` matches itself, and inside a class
/// an escaped character is compared case-sensitively even with `nocase`, and, as Redis caps
/// its recursion, a pattern that needs more than 1000 non-trailing `*` matches nothing.
pub fn glob_match(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    if s.is_empty() {
        return pattern.is_empty();
    }
    let p = pattern;
    let (mut pi, mut si) = (0usize, 0usize);
    // The latest `*`: where the pattern resumes after it, and where in `s` that was tried.
    let mut star: Option<(usize, usize)> = None;
    // Stars passed so far: Redis's recursion depth (`nesting`), which it caps at 1000.
    let mut depth = 0usize;
    loop {
        // Invariant: si < s.len(). One step of the pattern, or a mismatch.
        let step_ok = match p.get(pi) {
            None => false,
            Some(b'*') => {
                while p.get(pi + 1) == Some(&b'*') {
                    pi += 1;
                }
                if pi + 1 == p.len() {
                    return true;
                }
                if depth == MAX_GLOB_NESTING {
                    return false;
                }
                depth += 1;
                star = Some((pi + 1, si));
                pi += 1;
                continue;
            }
            Some(b'?') => {
                si += 1;
                pi += 1;
                true
            }
            Some(b'[') => {
                let (matched, end) = class(p, pi + 1, s[si], nocase);
                pi = end + 1;
                si += 1;
                matched
            }
            Some(&c) => {
                let c = if c == b'\\' && pi + 1 < p.len() {
                    pi += 1;
                    p[pi]
                } else {
                    c
                };
                pi += 1;
                si += 1;
                eq(c, s[si - 1])
            }
        };
        if step_ok && si == s.len() {
            while p.get(pi) == Some(&b'*') {
                pi += 1;
            }
            if pi == p.len() {
                return true;
            }
        } else if step_ok {
            continue;
        }
        // Mismatch: let the latest star take one more character, if any would remain.
        match star {
            Some((resume, tried)) if tried + 1 < s.len() => {
                star = Some((resume, tried + 1));
                pi = resume;
                si = tried + 1;
            }
            _ => return false,
        }
    }
}

/// Redis's cap on the `*` nesting of a glob pattern.
const MAX_GLOB_NESTING: usize = 1000;

/// Matches `c` against the class starting at `p[start]` (just after `[`), as Redis does;
/// returns whether it matched and the index of the class's last pattern byte (its `]`, or
/// the pattern's last byte when the class is unterminated).
fn class(p: &[u8], start: usize, c: u8, nocase: bool) -> (bool, usize) {
    let mut i = start;
    let not = p.get(i) == Some(&b'^');
    if not {
        i += 1;
    }
    let mut matched = false;
    loop {
        let rest = p.len().saturating_sub(i);
        match p.get(i) {
            Some(b'\\') if rest >= 2 => {
                i += 1;
                if p[i] == c {
                    matched = true;
                }
            }
            Some(b']') => break,
            None => {
                // Unterminated: the class ends with the pattern.
                i -= 1;
                break;
            }
            Some(&lo) if rest >= 3 && p[i + 1] == b'-' => {
                let hi = p[i + 2];
                let (mut lo, mut hi, mut x) = (lo.min(hi), lo.max(hi), c);
                if nocase {
                    lo = lo.to_ascii_lowercase();
                    hi = hi.to_ascii_lowercase();
                    x = x.to_ascii_lowercase();
                }
                if (lo..=hi).contains(&x) {
                    matched = true;
                }
                i += 2;
            }
            Some(&x) => {
                let same = if nocase {
                    x.eq_ignore_ascii_case(&c)
                } else {
                    x == c
                };
                if same {
                    matched = true;
                }
            }
        }
        i += 1;
    }
    (matched != not, i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upper_keeps_short_keywords_only() {
        assert_eq!(&*upper(b"pX"), b"PX");
        assert_eq!(&*upper(b""), b"");
        assert_eq!(&*upper(&[b'k'; Upper::MAX]), &[b'K'; Upper::MAX][..]);
        assert_eq!(&*upper(&[b'k'; Upper::MAX + 1]), b"");
    }

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
