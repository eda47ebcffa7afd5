//! Replies and their encoding in RESP2 or RESP3.
//!
//! Commands build a `Reply`; the connection encodes it with the protocol version the client
//! chose with HELLO. The two protocols differ only in nulls, maps, sets, doubles and verbatim
//! strings, so one encoder with a version switch serves both. The encoder writes straight
//! into the connection's output buffer with integer formatting and no intermediate frames.

use std::borrow::Cow;

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::CmdError;

/// One reply value.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+text`
    Status(Cow<'static, str>),
    /// `-text` (the text carries its own prefix such as `ERR`).
    Error(Cow<'static, str>),
    /// `:n`
    Int(i64),
    /// `$len` + bytes
    Bulk(Bytes),
    /// A missing value: RESP2 `$-1`, RESP3 `_`.
    Null,
    /// A missing aggregate (aborted EXEC): RESP2 `*-1`, RESP3 `_`.
    NullArray,
    /// `*n` followed by n replies.
    Array(Vec<Reply>),
    /// RESP3 `%n` map; RESP2 sends a flat array of 2n elements.
    Map(Vec<(Reply, Reply)>),
    /// RESP3 `~n` set; RESP2 sends an array.
    Set(Vec<Reply>),
    /// RESP3 `,` double; RESP2 sends Redis's text form as a bulk string.
    Double(f64),
    /// RESP3 `=` verbatim text (`txt:` prefix); RESP2 sends a bulk string.
    Verbatim(Bytes),
    /// RESP3 `#t` / `#f`; RESP2 sends `:1` / `:0` (Lua scripts under `redis.setresp(3)`).
    Bool(bool),
    /// RESP3 `(` big number; RESP2 sends a bulk string.
    BigNumber(Bytes),
    /// RESP3 `>n` push (pub/sub messages and confirmations); RESP2 sends an array.
    Push(Vec<Reply>),
    /// Several replies one after another, or none: what a command that answers once per
    /// argument (SUBSCRIBE a b) leaves inside EXEC's array, as Redis does.
    Multi(Vec<Reply>),
}

impl Reply {
    /// `+OK`
    pub const fn ok() -> Reply {
        Reply::Status(Cow::Borrowed("OK"))
    }

    /// A status reply with a fixed text.
    pub const fn status(text: &'static str) -> Reply {
        Reply::Status(Cow::Borrowed(text))
    }

    /// A bulk string copied from a slice.
    pub fn bulk(bytes: &[u8]) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(bytes))
    }

    /// A bulk string holding the decimal text of `n`.
    pub fn bulk_int(n: i64) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(
            itoa::Buffer::new().format(n).as_bytes(),
        ))
    }

    /// An array of bulk strings.
    pub fn bulks<I, B>(items: I) -> Reply
    where
        I: IntoIterator<Item = B>,
        B: Into<Bytes>,
    {
        Reply::Array(items.into_iter().map(|b| Reply::Bulk(b.into())).collect())
    }

    /// True for error replies.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Appends the encoding of this reply for protocol `resp` (2 or 3) to `out`.
    pub fn encode(&self, resp: u8, out: &mut BytesMut) {
        match self {
            Reply::Status(s) => line(out, b'+', s.as_bytes()),
            Reply::Error(s) => line(out, b'-', s.as_bytes()),
            Reply::Int(n) => int_line(out, b':', *n),
            Reply::Bulk(b) => bulk(out, b),
            Reply::Null if resp >= 3 => out.put_slice(b"_\r\n"),
            Reply::Null => out.put_slice(b"$-1\r\n"),
            Reply::NullArray if resp >= 3 => out.put_slice(b"_\r\n"),
            Reply::NullArray => out.put_slice(b"*-1\r\n"),
            Reply::Array(items) => {
                int_line(out, b'*', items.len() as i64);
                for item in items {
                    item.encode(resp, out);
                }
            }
            Reply::Push(items) => {
                int_line(out, if resp >= 3 { b'>' } else { b'*' }, items.len() as i64);
                for item in items {
                    item.encode(resp, out);
                }
            }
            Reply::Multi(items) => {
                for item in items {
                    item.encode(resp, out);
                }
            }
            Reply::Set(items) => {
                int_line(out, if resp >= 3 { b'~' } else { b'*' }, items.len() as i64);
                for item in items {
                    item.encode(resp, out);
                }
            }
            Reply::Map(pairs) => {
                if resp >= 3 {
                    int_line(out, b'%', pairs.len() as i64);
                } else {
                    int_line(out, b'*', 2 * pairs.len() as i64);
                }
                for (k, v) in pairs {
                    k.encode(resp, out);
                    v.encode(resp, out);
                }
            }
            Reply::Double(d) => {
                let mut text = Vec::with_capacity(24);
                format_double(*d, &mut text);
                if resp >= 3 {
                    line(out, b',', &text);
                } else {
                    bulk(out, &text);
                }
            }
            Reply::Bool(b) if resp >= 3 => out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
            Reply::Bool(b) => int_line(out, b':', *b as i64),
            Reply::BigNumber(n) if resp >= 3 => line(out, b'(', n),
            Reply::BigNumber(n) => bulk(out, n),
            Reply::Verbatim(b) => {
                if resp >= 3 {
                    int_line(out, b'=', b.len() as i64 + 4);
                    out.put_slice(b"txt:");
                    out.put_slice(b);
                    out.put_slice(b"\r\n");
                } else {
                    bulk(out, b);
                }
            }
        }
    }
}

impl From<CmdError> for Reply {
    fn from(e: CmdError) -> Reply {
        Reply::Error(Cow::Owned(e.to_string()))
    }
}

impl From<i64> for Reply {
    fn from(n: i64) -> Reply {
        Reply::Int(n)
    }
}

impl From<bool> for Reply {
    fn from(b: bool) -> Reply {
        Reply::Int(b as i64)
    }
}

impl From<Option<Bytes>> for Reply {
    fn from(b: Option<Bytes>) -> Reply {
        b.map_or(Reply::Null, Reply::Bulk)
    }
}

// Doubles are formatted as Redis 7.0 replies them (`%.17g`; `inf` and `-inf`).
use crate::num::format_double;

fn line(out: &mut BytesMut, prefix: u8, text: &[u8]) {
    out.reserve(text.len() + 3);
    out.put_u8(prefix);
    out.put_slice(text);
    out.put_slice(b"\r\n");
}

fn int_line(out: &mut BytesMut, prefix: u8, n: i64) {
    let mut buf = itoa::Buffer::new();
    line(out, prefix, buf.format(n).as_bytes());
}

fn bulk(out: &mut BytesMut, b: &[u8]) {
    int_line(out, b'$', b.len() as i64);
    out.reserve(b.len() + 2);
    out.put_slice(b);
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(r: &Reply, resp: u8) -> Vec<u8> {
        let mut out = BytesMut::new();
        r.encode(resp, &mut out);
        out.to_vec()
    }

    #[test]
    fn nulls_differ_by_protocol() {
        assert_eq!(enc(&Reply::Null, 2), b"$-1\r\n");
        assert_eq!(enc(&Reply::Null, 3), b"_\r\n");
        assert_eq!(enc(&Reply::NullArray, 2), b"*-1\r\n");
        assert_eq!(enc(&Reply::NullArray, 3), b"_\r\n");
    }

    #[test]
    fn aggregates() {
        let m = Reply::Map(vec![(Reply::bulk(b"a"), Reply::Int(-1))]);
        assert_eq!(enc(&m, 2), b"*2\r\n$1\r\na\r\n:-1\r\n");
        assert_eq!(enc(&m, 3), b"%1\r\n$1\r\na\r\n:-1\r\n");
        let s = Reply::Set(vec![Reply::bulk(b"")]);
        assert_eq!(enc(&s, 2), b"*1\r\n$0\r\n\r\n");
        assert_eq!(enc(&s, 3), b"~1\r\n$0\r\n\r\n");
        assert_eq!(enc(&Reply::Array(vec![]), 2), b"*0\r\n");
    }

    #[test]
    fn scalars() {
        assert_eq!(enc(&Reply::ok(), 2), b"+OK\r\n");
        assert_eq!(enc(&Reply::Int(i64::MIN), 3), b":-9223372036854775808\r\n");
        assert_eq!(
            enc(&Reply::from(CmdError::Syntax), 2),
            b"-ERR syntax error\r\n"
        );
        assert_eq!(enc(&Reply::Double(1.5), 2), b"$3\r\n1.5\r\n");
        assert_eq!(enc(&Reply::Double(1.5), 3), b",1.5\r\n");
        assert_eq!(enc(&Reply::Bool(true), 3), b"#t\r\n");
        assert_eq!(enc(&Reply::Bool(false), 2), b":0\r\n");
        assert_eq!(
            enc(&Reply::BigNumber(Bytes::from_static(b"12")), 3),
            b"(12\r\n"
        );
        assert_eq!(
            enc(&Reply::BigNumber(Bytes::from_static(b"12")), 2),
            b"$2\r\n12\r\n"
        );
        assert_eq!(
            enc(&Reply::Verbatim(Bytes::from_static(b"x")), 3),
            b"=5\r\ntxt:x\r\n"
        );
    }
}
