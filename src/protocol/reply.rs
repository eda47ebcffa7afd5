//! Replies and their encoding in RESP2 or RESP3.
//!
//! Commands build a `Reply`; the connection encodes it with the protocol version the client
//! chose with HELLO. The two protocols differ only in nulls, maps, sets, doubles and verbatim
//! strings, so one encoder with a version switch serves both. The encoder writes straight
//! into the connection's output buffer with integer formatting and no intermediate frames.
//!
//! A request on the hot paths allocates nothing for its reply: status texts are `'static`,
//! a short bulk string (an inline string value, an integer's text) is held inside the reply
//! (`Reply::Short`), and the vectors of arrays built with [`Reply::pooled_array`] come from
//! a per-thread pool that the connection refills with [`Reply::recycle`] once the reply is
//! encoded (an event loop serves a connection on one thread, so a vector goes back to the
//! pool it came from).

use std::borrow::Cow;
use std::cell::RefCell;

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
    /// A double already written out in another of Redis's forms (GEOPOS's coordinates,
    /// `addReplyHumanLongDouble`'s trimmed `%.17Lf`): RESP3 `,text`, RESP2 a bulk string.
    DoubleText(Bytes),
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
    /// A bulk string of at most [`Short::CAPACITY`] bytes held inside the reply (no
    /// allocation): encoded exactly as `Bulk`.
    Short(Short),
    /// An array of five integers, the first a flag (0 or 1), held inside the reply:
    /// CL.THROTTLE's `[limited, limit, remaining, retry_after, reset_after]`. Encoded exactly
    /// as the `Array` of five `Int`s it stands for ([`Reply::flag_ints_items`]), in one copy,
    /// with no vector to take from the pool and give back.
    FlagInts(bool, [i64; 4]),
}

// A reply is moved by value through every command's return; keep it at five words.
const _: () = assert!(std::mem::size_of::<Reply>() == 40);

/// The bytes of a short bulk string, inside the reply.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Short {
    len: u8,
    buf: [u8; Short::CAPACITY],
}

impl Short {
    /// The most bytes a `Short` holds (enough for any `i64`'s text; `Reply` stays 40 bytes).
    pub const CAPACITY: usize = 30;

    /// `bytes`, if they fit.
    pub fn new(bytes: &[u8]) -> Option<Short> {
        let mut buf = [0u8; Short::CAPACITY];
        buf.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(Short {
            len: bytes.len() as u8,
            buf,
        })
    }

    /// The decimal text of `n`.
    pub fn int(n: i64) -> Short {
        let mut f = itoa::Buffer::new();
        let text = f.format(n).as_bytes();
        let mut buf = [0u8; Short::CAPACITY];
        buf[..text.len()].copy_from_slice(text);
        Short {
            len: text.len() as u8,
            buf,
        }
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }
}

impl std::fmt::Debug for Short {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", Bytes::copy_from_slice(self.as_bytes()))
    }
}

/// At most this many vectors wait in a thread's pool.
const POOL_VECS: usize = 16;
/// Vectors larger than this are not pooled (one huge reply must not pin its memory).
const POOL_MAX_CAPACITY: usize = 1024;

thread_local! {
    /// Emptied reply vectors, reused by `Reply::pooled_array`.
    static POOL: RefCell<Vec<Vec<Reply>>> = const { RefCell::new(Vec::new()) };
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

    /// A bulk string reply of `bytes`: held inside the reply when short, else copied.
    pub fn short_or_bulk(bytes: &[u8]) -> Reply {
        match Short::new(bytes) {
            Some(s) => Reply::Short(s),
            None => Reply::bulk(bytes),
        }
    }

    /// The five integers a [`Reply::FlagInts`] stands for, in wire order.
    pub fn flag_ints_items(flag: bool, ints: &[i64; 4]) -> [i64; 5] {
        [i64::from(flag), ints[0], ints[1], ints[2], ints[3]]
    }

    /// An empty vector for an array reply of up to `capacity` elements, from this thread's
    /// pool when it has one (see [`Reply::recycle`]).
    pub fn pooled_vec(capacity: usize) -> Vec<Reply> {
        let mut v = POOL
            .try_with(|p| p.try_borrow_mut().ok().and_then(|mut p| p.pop()))
            .ok()
            .flatten()
            .unwrap_or_default();
        v.reserve(capacity);
        v
    }

    /// An array reply of `items`, in a vector from this thread's pool.
    pub fn pooled_array(items: impl IntoIterator<Item = Reply>) -> Reply {
        let items = items.into_iter();
        let mut v = Reply::pooled_vec(items.size_hint().0);
        v.extend(items);
        Reply::Array(v)
    }

    /// Gives this reply's vectors (an array's and those of arrays inside it) back to this
    /// thread's pool, once the reply has been encoded.
    #[inline]
    pub fn recycle(self) {
        if let Reply::Array(v) | Reply::Push(v) | Reply::Set(v) | Reply::Multi(v) = self {
            Reply::recycle_vec(v);
        }
    }

    fn recycle_vec(mut v: Vec<Reply>) {
        if v.capacity() > POOL_MAX_CAPACITY {
            return;
        }
        if v.iter().any(Reply::is_aggregate) {
            for item in v.drain(..) {
                item.recycle();
            }
        } else {
            v.clear();
        }
        let _ = POOL.try_with(|p| {
            if let Ok(mut p) = p.try_borrow_mut()
                && p.len() < POOL_VECS
            {
                p.push(v);
            }
        });
    }

    /// True for the replies that hold a vector of replies.
    fn is_aggregate(&self) -> bool {
        matches!(
            self,
            Reply::Array(_) | Reply::Push(_) | Reply::Set(_) | Reply::Multi(_) | Reply::Map(_)
        )
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
            Reply::Short(s) => bulk(out, s.as_bytes()),
            Reply::FlagInts(flag, ints) => flag_ints(out, *flag, ints),
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
            Reply::DoubleText(text) if resp >= 3 => line(out, b',', text),
            Reply::DoubleText(text) => bulk(out, text),
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

/// `<prefix><n>\r\n`, assembled on the stack and appended in one copy (arrays of integers,
/// such as CL.THROTTLE's, are mostly these lines).
fn int_line(out: &mut BytesMut, prefix: u8, n: i64) {
    // One or two digits (array sizes, short bulk lengths, most of CL.THROTTLE's fields):
    // a fixed-size copy, nothing formatted.
    match n {
        0..=9 => return out.extend_from_slice(&[prefix, b'0' + n as u8, b'\r', b'\n']),
        10..=99 => {
            let (tens, ones) = (b'0' + (n / 10) as u8, b'0' + (n % 10) as u8);
            return out.extend_from_slice(&[prefix, tens, ones, b'\r', b'\n']);
        }
        _ => {}
    }
    let mut buf = itoa::Buffer::new();
    let digits = buf.format(n).as_bytes();
    // A prefix, at most 20 digits, CR LF.
    let mut text = [0u8; 23];
    let len = digits.len();
    text[0] = prefix;
    text[1..=len].copy_from_slice(digits);
    text[len + 1..len + 3].copy_from_slice(b"\r\n");
    out.extend_from_slice(&text[..len + 3]);
}

/// `*5\r\n:<flag>\r\n` then four `:<n>\r\n` lines, assembled on the stack and appended in
/// one copy (the same in RESP2 and RESP3).
fn flag_ints(out: &mut BytesMut, flag: bool, ints: &[i64; 4]) {
    let header = if flag {
        b"*5\r\n:1\r\n"
    } else {
        b"*5\r\n:0\r\n"
    };
    // A limiter's usual reply (limit, remaining, retry-after, reset-after all in -1..=99):
    // each line copied from the table as one 8-byte word, nothing formatted or zeroed
    // beyond 31 bytes.
    if let [Some(a), Some(b), Some(c), Some(d)] = ints.map(small_int_line) {
        // The header, three lines of at most 5 bytes, and the last line's whole word (31
        // bytes), appended as a whole 32 and cut back: a copy of a fixed size is a few
        // moves, where one of `len` bytes is a call to `memcpy`.
        let mut text = [0u8; 32];
        text[..8].copy_from_slice(header);
        let mut len = 8;
        for (line, n) in [a, b, c, d] {
            text[len..len + 8].copy_from_slice(line);
            len += usize::from(*n);
        }
        let keep = out.len() + len;
        out.extend_from_slice(&text);
        out.truncate(keep);
        return;
    }
    // The header and the flag's line (8 bytes), then four lines of at most 23 bytes each.
    let mut text = [0u8; 8 + 4 * 23];
    text[..8].copy_from_slice(header);
    let mut len = 8;
    for &n in ints {
        len += write_int_line(&mut text[len..], n);
    }
    out.extend_from_slice(&text[..len]);
}

/// `:<n>\r\n` for every `n` in -1..=99 (index `n + 1`), padded to 8 bytes, with its length.
static SMALL_INT_LINES: [([u8; 8], u8); 101] = small_int_lines();

const fn small_int_lines() -> [([u8; 8], u8); 101] {
    let mut table = [([0u8; 8], 0u8); 101];
    table[0] = (*b":-1\r\n\0\0\0", 5);
    let mut n = 0;
    while n < 100 {
        let mut line = [0u8; 8];
        line[0] = b':';
        let len = if n < 10 {
            line[1] = b'0' + n as u8;
            line[2] = b'\r';
            line[3] = b'\n';
            4
        } else {
            line[1] = b'0' + (n / 10) as u8;
            line[2] = b'0' + (n % 10) as u8;
            line[3] = b'\r';
            line[4] = b'\n';
            5
        };
        table[n + 1] = (line, len);
        n += 1;
    }
    table
}

/// `n`'s line in [`SMALL_INT_LINES`], if it has one.
#[inline]
fn small_int_line(n: i64) -> Option<&'static ([u8; 8], u8)> {
    usize::try_from(n.wrapping_add(1))
        .ok()
        .and_then(|i| SMALL_INT_LINES.get(i))
}

/// Writes `:<n>\r\n` at the start of `to` (at least 23 bytes) and returns its length.
fn write_int_line(to: &mut [u8], n: i64) -> usize {
    to[0] = b':';
    let digits = match n {
        0..=9 => {
            to[1] = b'0' + n as u8;
            1
        }
        10..=99 => {
            to[1] = b'0' + (n / 10) as u8;
            to[2] = b'0' + (n % 10) as u8;
            2
        }
        // CL.THROTTLE's retry-after on every allowed call.
        -1 => {
            to[1..3].copy_from_slice(b"-1");
            2
        }
        _ => {
            let mut buf = itoa::Buffer::new();
            let text = buf.format(n).as_bytes();
            to[1..=text.len()].copy_from_slice(text);
            text.len()
        }
    };
    to[digits + 1..digits + 3].copy_from_slice(b"\r\n");
    digits + 3
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
    fn short_bulks_encode_as_bulks() {
        for text in [&b""[..], b"xyz", &[b'x'; Short::CAPACITY]] {
            assert_eq!(
                enc(&Reply::short_or_bulk(text), 2),
                enc(&Reply::bulk(text), 2)
            );
        }
        assert!(matches!(
            Reply::short_or_bulk(&[b'x'; Short::CAPACITY]),
            Reply::Short(_)
        ));
        assert!(matches!(
            Reply::short_or_bulk(&[b'x'; Short::CAPACITY + 1]),
            Reply::Bulk(_)
        ));
        for n in [0, -1, i64::MIN, i64::MAX] {
            assert_eq!(Short::int(n).as_bytes(), n.to_string().as_bytes());
        }
    }

    #[test]
    fn flag_ints_encode_as_the_array_they_stand_for() {
        let edges = [0, 1, -1, 9, 10, 99, 100, -10, -99, -100, i64::MIN, i64::MAX];
        for flag in [false, true] {
            for &n in &edges {
                for ints in [[n, 0, 0, 0], [0, n, 1, n], [n, n, n, n], [99, 100, -1, n]] {
                    let array = Reply::Array(
                        Reply::flag_ints_items(flag, &ints)
                            .iter()
                            .map(|&n| Reply::Int(n))
                            .collect(),
                    );
                    for resp in [2, 3] {
                        assert_eq!(
                            enc(&Reply::FlagInts(flag, ints), resp),
                            enc(&array, resp),
                            "{flag} {ints:?}"
                        );
                    }
                }
            }
        }
    }

    /// A reply appended after others' bytes leaves them as they were and ends where its
    /// own bytes end (the table's copy writes a whole 32 bytes and cuts back).
    #[test]
    fn flag_ints_append_after_what_is_there() {
        for ints in [
            [15, 0, 2, 59],
            [99, 99, 99, 99],
            [-1, -1, -1, -1],
            [100, 0, 0, 0],
        ] {
            let mut out = BytesMut::from(&b"+OK\r\n"[..]);
            Reply::FlagInts(true, ints).encode(2, &mut out);
            Reply::Int(7).encode(2, &mut out);
            let mut want = b"+OK\r\n".to_vec();
            want.extend(enc(&Reply::FlagInts(true, ints), 2));
            want.extend(b":7\r\n");
            assert_eq!(&out[..], &want[..], "{ints:?}");
        }
    }

    /// Every field value around the small-integer table's edges, in every position, the
    /// table's lines against the general formatting.
    #[test]
    fn flag_ints_from_the_table_match_the_general_lines() {
        for n in (-3..=102).chain([i64::MIN, i64::MIN + 1, i64::MAX, i64::MAX - 1]) {
            for ints in [
                [n, 0, 0, 0],
                [0, n, 0, 0],
                [0, 0, n, 0],
                [0, 0, 0, n],
                [n; 4],
            ] {
                for flag in [false, true] {
                    let mut want = format!("*5\r\n:{}\r\n", u8::from(flag));
                    for i in ints {
                        want.push_str(&format!(":{i}\r\n"));
                    }
                    assert_eq!(
                        enc(&Reply::FlagInts(flag, ints), 2),
                        want.as_bytes(),
                        "{ints:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn recycled_vectors_are_reused_on_the_same_thread() {
        let r = Reply::pooled_array([Reply::Int(1), Reply::pooled_array([Reply::Int(2)])]);
        assert_eq!(enc(&r, 2), b"*2\r\n:1\r\n*1\r\n:2\r\n");
        let Reply::Array(v) = &r else { unreachable!() };
        let outer = v.as_ptr();
        r.recycle();
        // The last vector given back (the outer one) is the first taken again.
        let again = Reply::pooled_vec(2);
        assert_eq!(again.as_ptr(), outer);
        assert!(again.is_empty());
    }

    #[test]
    fn scalars() {
        assert_eq!(enc(&Reply::ok(), 2), b"+OK\r\n");
        assert_eq!(enc(&Reply::Int(i64::MIN), 3), b":-9223372036854775808\r\n");
        for n in [-10, -1, 0, 7, 9, 10, 42, 99, 100, 12345, i64::MAX] {
            assert_eq!(enc(&Reply::Int(n), 2), format!(":{n}\r\n").as_bytes());
        }
        assert_eq!(
            enc(&Reply::Bulk(Bytes::from(vec![b'x'; 10])), 2),
            b"$10\r\nxxxxxxxxxx\r\n"
        );
        assert_eq!(
            enc(&Reply::from(CmdError::Syntax), 2),
            b"-ERR syntax error\r\n"
        );
        assert_eq!(enc(&Reply::Double(1.5), 2), b"$3\r\n1.5\r\n");
        assert_eq!(enc(&Reply::Double(1.5), 3), b",1.5\r\n");
        let text = Reply::DoubleText(Bytes::from_static(b"13.36138933897018433"));
        assert_eq!(enc(&text, 2), b"$20\r\n13.36138933897018433\r\n");
        assert_eq!(enc(&text, 3), b",13.36138933897018433\r\n");
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
