//! The request parser: turns the bytes a client sends into argument lists, for both RESP
//! multibulk requests (`*<n>\r\n$<len>\r\n<bytes>\r\n...`) and inline requests (a plain text
//! line, as telnet sends). It owns Redis 7's exact protocol error texts and size limits, so a
//! client sees the same `-ERR Protocol error: ...` here as from Redis.
//!
//! The parser is resumable. A socket hands us a request in arbitrary pieces, and a 500 MB
//! `SET` or a 40,000-argument `MSET` can arrive over thousands of reads; re-parsing from the
//! front on every read would make such a request cost O(n²). So [`RequestParser`] keeps, between
//! calls, how far it has already searched for a line terminator, how many arguments are still
//! to come, the length of the bulk it is waiting for and the argument ranges found so far: every
//! byte is looked at O(1) times however the request is split. Lengths declared by the client are
//! never trusted for allocation (a 13-byte `*2147483647\r\n` must not reserve gigabytes): the
//! argument list starts with room for at most 1024 entries and grows only as arguments arrive.
//!
//! Most requests arrive whole and in one form: a short count, then arguments of at most 99
//! bytes whose `$<len>` lines are one or two plain digits. Such a request, found at the front
//! of the buffer with nothing of it parsed yet, is read in one loop without the state machine
//! (`RequestParser::short_request`); anything else, or any doubt, goes the resumable way,
//! which reads the same bytes the same way (the tests compare the two on mutated input).
//!
//! Redis finds line ends with `strchr`, which stops at a NUL byte: in Redis a NUL before a
//! header or inline line's terminator means that line never ends, and the request fails only
//! once it passes the size limit. We search the same way, so malformed input fails as it does in
//! Redis. (Payload bytes are never searched, so NULs in bulk arguments are ordinary data.)

use std::mem;
use std::ops::Range;

use bytes::Bytes;

use crate::num::{hex_digit, is_c_space, parse_i64};

/// Longest payload [`RequestParser::short_request`] reads (two digits). Every limit a client
/// can be under is above it (proto-max-bulk-len's least is 1 MiB, an unauthenticated
/// client's 16 KiB); tests' smaller limits take the general loop.
const SHORT_MAX: usize = 99;

/// Cap on the argument vector's initial capacity, so the declared count cannot drive allocation
/// (Redis caps its `argv` the same way).
const MAX_PREALLOC_ARGS: usize = 1024;

/// Borrowed arguments copied out, for what keeps them past the request (the replication
/// stream, a blocked client's keys, a subscription's channels…).
pub fn owned_args(args: &[&[u8]]) -> Vec<Bytes> {
    args.iter().map(|a| Bytes::copy_from_slice(a)).collect()
}

/// Owned arguments seen as borrowed ones (what a handler takes), on the stack up to eight.
pub fn borrowed_args<B: AsRef<[u8]>>(args: &[B]) -> smallvec::SmallVec<[&[u8]; 8]> {
    args.iter().map(AsRef::as_ref).collect()
}

/// Size limits, Redis's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// proto-max-bulk-len: largest bulk argument (default 512 MiB).
    pub max_bulk_len: usize,
    /// Largest inline request line (Redis PROTO_INLINE_MAX_SIZE, 64 KiB).
    ///
    /// Redis uses the same constant to bound the `*<n>` and `$<len>` lines of a multibulk
    /// request, and so does this parser.
    pub max_inline_len: usize,
    /// Largest multibulk argument count (Redis: INT_MAX for authenticated clients).
    pub max_multibulk_len: usize,
    /// The client has not authenticated while a password is required: Redis then caps
    /// requests at 10 arguments of 16 KiB, so a stranger cannot make it buffer much.
    pub unauthenticated: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
            max_inline_len: 64 * 1024,
            max_multibulk_len: i32::MAX as usize,
            unauthenticated: false,
        }
    }
}

/// A protocol error: the connection gets `-ERR <Display text>` and is then closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// The `*<n>` count is not a valid integer or exceeds `max_multibulk_len`.
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    /// No end of the `*<n>` line within `max_inline_len` bytes.
    #[error("Protocol error: too big mbulk count string")]
    TooBigMbulkCount,
    /// An argument did not start with `$`; holds the byte found instead.
    #[error("Protocol error: expected '$', got '{}'", shown_byte(*.0))]
    ExpectedDollar(u8),
    /// The `$<len>` length is not a valid integer, is negative, or exceeds `max_bulk_len`.
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    /// No end of a `$<len>` line within `max_inline_len` bytes.
    #[error("Protocol error: too big bulk count string")]
    TooBigBulkCount,
    /// No newline within `max_inline_len` bytes of an inline request.
    #[error("Protocol error: too big inline request")]
    TooBigInlineRequest,
    /// An inline request has an unterminated quote, or a closing quote not followed by a space.
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
    /// More than 10 arguments before authentication.
    #[error("Protocol error: unauthenticated multibulk length")]
    UnauthenticatedMultibulkLength,
    /// An argument over 16 KiB before authentication.
    #[error("Protocol error: unauthenticated bulk length")]
    UnauthenticatedBulkLength,
}

/// Most arguments an unauthenticated client may send in one request.
pub const UNAUTHENTICATED_MAX_ARGS: usize = 10;
/// Largest argument an unauthenticated client may send.
pub const UNAUTHENTICATED_MAX_BULK: usize = 16384;

/// How Redis ends up printing the byte in "expected '$', got '%c'": its error replies turn CR and
/// LF into spaces so the reply stays one line. Other bytes Redis sends raw; a `String` cannot hold
/// a lone byte >= 0x80, so those come out as the Latin-1 character of the same value.
fn shown_byte(byte: u8) -> char {
    match byte {
        b'\r' | b'\n' => ' ',
        other => char::from(other),
    }
}

/// The arguments of one complete request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Args {
    /// Multibulk: byte ranges of each argument, relative to the start of the buffer passed to `parse`.
    Ranges(Vec<Range<usize>>),
    /// Inline: arguments after unquoting/unescaping (so they cannot be slices).
    Owned(Vec<Bytes>),
}

impl Args {
    /// Number of arguments.
    pub fn len(&self) -> usize {
        match self {
            Args::Ranges(ranges) => ranges.len(),
            Args::Owned(args) => args.len(),
        }
    }

    /// True for a request Redis skips silently (empty inline line, `*0`, `*-1`).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One complete request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// How many bytes at the front of the buffer the request used (the caller drops them).
    pub consumed: usize,
    /// The arguments; empty for requests Redis skips silently (empty inline line, `*0`, `*-1`).
    pub args: Args,
}

/// Progress of a search for a line terminator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scan {
    /// No terminator and no NUL before this offset; the search resumes here.
    From(usize),
    /// A NUL came first. Redis's `strchr` stops there, so this line can never end and only the
    /// size limit still applies; remembering it keeps later calls O(1).
    Blocked,
}

/// Where the current request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing of the current request has been looked at.
    Start,
    /// An inline request: looking for its `\n`.
    Inline { scan: Scan },
    /// A multibulk request: looking for the `\r` ending its `*<n>` line.
    Count { scan: Scan },
    /// Looking for the `\r` ending the `$<len>` line that starts at `start`.
    BulkLen {
        start: usize,
        remaining: usize,
        scan: Scan,
    },
    /// Waiting for `len` payload bytes at `start`, plus the two that follow them.
    BulkData {
        start: usize,
        len: usize,
        remaining: usize,
    },
}

/// The outcome of looking for a line end.
enum Line {
    /// The terminator is at this offset, and the line is complete.
    End(usize),
    /// Not complete yet; resume with this scan.
    Pending(Scan),
}

/// A request [`RequestParser::list`] parsed: its arguments' ranges stay in the parser's
/// list ([`RequestParser::listed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listed {
    /// How many bytes at the front of the buffer passed to `list` the request used.
    pub consumed: usize,
    /// Where its ranges (relative to the start of that buffer) begin in the list.
    pub first: usize,
    /// How many there are; [`INLINE`] for an inline request, whose (unescaped) arguments
    /// are taken with [`RequestParser::take_inline`].
    pub count: usize,
}

/// [`Listed::count`] of an inline request.
pub const INLINE: usize = usize::MAX;

impl Listed {
    /// An inline request: its arguments are the parser's until taken, so nothing may be
    /// listed after it before they are.
    #[inline]
    pub fn is_inline(&self) -> bool {
        self.count == INLINE
    }
}

/// What [`RequestParser::advance`] completed.
enum Parsed {
    /// A multibulk request (its ranges at the end of `RequestParser::ranges`).
    Multibulk { consumed: usize },
    /// An inline request, its arguments unescaped.
    Inline { consumed: usize, args: Vec<Bytes> },
}

/// Parses requests from the front of a growing buffer, keeping its progress between calls.
#[derive(Debug)]
pub struct RequestParser {
    limits: Limits,
    state: State,
    /// The argument ranges of the requests [`RequestParser::list`] has listed (up to
    /// `current`), then those of the request under way: each request's ranges are written
    /// once, here, where the event loop's batch reads them.
    ranges: Vec<Range<usize>>,
    /// Where the ranges of the request under way begin in `ranges`.
    current: usize,
    /// The arguments of the inline request listed last (see [`RequestParser::take_inline`]).
    inline: Vec<Bytes>,
    /// An emptied argument vector handed back by [`RequestParser::recycle`], reused by the next
    /// multibulk request so that parsing allocates nothing per request.
    spare: Vec<Range<usize>>,
    /// Bytes inspected by line searches, so tests can prove the work is linear.
    #[cfg(test)]
    examined: usize,
    /// Tests compare the short way for plain lines with the general path alone.
    #[cfg(test)]
    general_only: bool,
}

impl RequestParser {
    /// A parser with nothing parsed yet.
    pub fn new(limits: Limits) -> Self {
        RequestParser {
            limits,
            state: State::Start,
            ranges: Vec::new(),
            current: 0,
            inline: Vec::new(),
            spare: Vec::new(),
            #[cfg(test)]
            examined: 0,
            #[cfg(test)]
            general_only: false,
        }
    }

    /// `buf` always starts at the first byte of the current, not yet complete request; between
    /// calls the caller only appends bytes to it (and after `Ok(Some(req))` drops `req.consumed`
    /// bytes from the front). Returns Ok(None) when more bytes are needed. The request's
    /// ranges come in a vector of their own (give it back with [`RequestParser::recycle`]).
    ///
    /// After `Ok(Some(_))` or an error the parser is ready for the next request. If the caller
    /// breaks the contract (shrinks or rewrites `buf` mid-request) the results are meaningless,
    /// but the parser still does not panic.
    pub fn parse(&mut self, buf: &[u8]) -> Result<Option<Request>, ProtocolError> {
        self.forget_listed();
        if self.ranges.capacity() == 0 {
            self.ranges = mem::take(&mut self.spare);
        }
        if self.state == State::Start
            && let Some(consumed) = self.short_request(buf)
        {
            return Ok(Some(Request {
                consumed,
                args: Args::Ranges(mem::take(&mut self.ranges)),
            }));
        }
        match self.advance(buf) {
            Ok(None) => Ok(None),
            Ok(Some(parsed)) => {
                self.state = State::Start;
                Ok(Some(match parsed {
                    Parsed::Multibulk { consumed } => Request {
                        consumed,
                        args: Args::Ranges(mem::take(&mut self.ranges)),
                    },
                    Parsed::Inline { consumed, args } => Request {
                        consumed,
                        args: Args::Owned(args),
                    },
                }))
            }
            Err(e) => {
                self.state = State::Start;
                // The failed request's ranges must not leak into the next request.
                self.ranges = Vec::new();
                Err(e)
            }
        }
    }

    /// As [`RequestParser::parse`], but the request's ranges stay in the parser's list,
    /// after those of the requests listed before it (see [`RequestParser::listed`]), and
    /// an inline request's arguments in the parser until [`RequestParser::take_inline`]:
    /// nothing is moved or copied per request. The list grows until
    /// [`RequestParser::forget_listed`].
    #[inline]
    pub fn list(&mut self, buf: &[u8]) -> Result<Option<Listed>, ProtocolError> {
        if self.state == State::Start
            && let Some(consumed) = self.short_request(buf)
        {
            let first = self.current;
            self.current = self.ranges.len();
            return Ok(Some(Listed {
                consumed,
                first,
                count: self.current - first,
            }));
        }
        match self.advance(buf) {
            Ok(None) => Ok(None),
            Ok(Some(parsed)) => {
                self.state = State::Start;
                let first = self.current;
                let count = match parsed {
                    Parsed::Multibulk { consumed } => {
                        self.current = self.ranges.len();
                        return Ok(Some(Listed {
                            consumed,
                            first,
                            count: self.current - first,
                        }));
                    }
                    Parsed::Inline { consumed, args } => {
                        self.inline = args;
                        consumed
                    }
                };
                Ok(Some(Listed {
                    consumed: count,
                    first,
                    count: INLINE,
                }))
            }
            Err(e) => {
                self.state = State::Start;
                self.ranges.truncate(self.current);
                Err(e)
            }
        }
    }

    /// The argument ranges of the requests listed since [`RequestParser::forget_listed`],
    /// one request after another (see [`Listed::first`]).
    #[inline]
    pub fn listed(&self) -> &[Range<usize>] {
        self.ranges.get(..self.current).unwrap_or_default()
    }

    /// Takes the arguments of the inline request listed last.
    pub fn take_inline(&mut self) -> Vec<Bytes> {
        mem::take(&mut self.inline)
    }

    /// Drops the listed requests' ranges (the caller is done with them), keeping those of
    /// the request under way, if any.
    #[inline]
    pub fn forget_listed(&mut self) {
        if self.current != 0 {
            if self.current == self.ranges.len() {
                self.ranges.clear();
            } else {
                self.ranges.drain(..self.current);
            }
            self.current = 0;
        }
    }

    /// Forgets the request under way, if any, and what is listed: the next call starts a
    /// request at the front of the buffer it is given (a caller that parsed ahead, then
    /// handed the rest over).
    pub fn reset(&mut self) {
        self.state = State::Start;
        self.ranges.clear();
        self.current = 0;
        self.inline = Vec::new();
        self.release_large();
    }

    /// After a request of many arguments: lets go of the list's memory, so one huge request
    /// does not pin it for the connection's lifetime.
    pub fn release_large(&mut self) {
        if self.ranges.is_empty() && self.ranges.capacity() > 2 * MAX_PREALLOC_ARGS {
            self.ranges = Vec::new();
        }
    }

    /// Takes back the argument vector of a request the caller is done with; the next
    /// multibulk request reuses its memory. Vectors above `MAX_PREALLOC_ARGS` entries are
    /// dropped, so one huge request does not pin its memory for the connection's lifetime.
    pub fn recycle(&mut self, mut ranges: Vec<Range<usize>>) {
        if ranges.capacity() <= MAX_PREALLOC_ARGS && ranges.capacity() > self.spare.capacity() {
            ranges.clear();
            self.spare = ranges;
        }
    }

    /// Puts a parsed request's arguments into `out` (cleared first) as slices of `frame`,
    /// the request's bytes frozen, and takes back its range vector for the next request.
    /// `out` is the caller's vector, reused from request to request.
    pub fn fill_args(&mut self, args: Args, frame: Bytes, out: &mut Vec<Bytes>) {
        out.clear();
        match args {
            Args::Ranges(ranges) => {
                out.extend(ranges.iter().map(|r| frame.slice(r.clone())));
                self.recycle(ranges);
            }
            Args::Owned(owned) => *out = owned,
        }
    }

    /// Replace the limits (CONFIG SET proto-max-bulk-len etc.).
    ///
    /// Like Redis, a limit applies when the part it governs is parsed, so a request already
    /// under way is checked against the new limits from here on.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// The limits in force.
    #[inline]
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// True while a multibulk request is partially parsed (the connection uses it for its
    /// query-buffer accounting).
    ///
    /// That is, once its `*<n>` line has been accepted with n > 0 and until its last argument
    /// arrives (Redis's `c->multibulklen != 0`).
    pub fn in_progress(&self) -> bool {
        matches!(self.state, State::BulkLen { .. } | State::BulkData { .. })
    }

    fn advance(&mut self, buf: &[u8]) -> Result<Option<Parsed>, ProtocolError> {
        loop {
            match self.state {
                State::Start => {
                    let Some(&first) = buf.first() else {
                        return Ok(None);
                    };
                    // Redis decides the request type from the first byte alone.
                    self.state = if first == b'*' {
                        let plain = if self.plain_enabled() {
                            self.plain_count(buf)
                        } else {
                            None
                        };
                        match plain {
                            Some(state) => state,
                            None => State::Count {
                                scan: Scan::From(0),
                            },
                        }
                    } else {
                        State::Inline {
                            scan: Scan::From(0),
                        }
                    };
                }
                State::Inline { scan } => {
                    return match self.find_line(buf, scan, b'\n') {
                        Line::End(newline) => Self::inline_request(buf, newline).map(Some),
                        Line::Pending(scan) => {
                            self.state = State::Inline { scan };
                            if buf.len() > self.limits.max_inline_len {
                                Err(ProtocolError::TooBigInlineRequest)
                            } else {
                                Ok(None)
                            }
                        }
                    };
                }
                State::Count { scan } => match self.find_line(buf, scan, b'\r') {
                    Line::End(cr) => {
                        let count = buf
                            .get(1..cr)
                            .and_then(parse_i64)
                            .ok_or(ProtocolError::InvalidMultibulkLength)?;
                        let start = cr + 2;
                        if count <= 0 {
                            return Ok(Some(Parsed::Multibulk { consumed: start }));
                        }
                        let count = usize::try_from(count)
                            .ok()
                            .filter(|&n| n <= self.limits.max_multibulk_len)
                            .ok_or(ProtocolError::InvalidMultibulkLength)?;
                        if self.limits.unauthenticated && count > UNAUTHENTICATED_MAX_ARGS {
                            return Err(ProtocolError::UnauthenticatedMultibulkLength);
                        }
                        self.ranges.reserve(count.min(MAX_PREALLOC_ARGS));
                        self.state = State::BulkLen {
                            start,
                            remaining: count,
                            scan: Scan::From(start),
                        };
                    }
                    Line::Pending(scan) => {
                        self.state = State::Count { scan };
                        return if buf.len() > self.limits.max_inline_len {
                            Err(ProtocolError::TooBigMbulkCount)
                        } else {
                            Ok(None)
                        };
                    }
                },
                State::BulkLen {
                    start,
                    remaining,
                    scan,
                } => {
                    // Fresh `$<len>` lines in their common form take the short way; the
                    // general path takes over at the first line that is not.
                    let (start, remaining, scan) =
                        if scan == Scan::From(start) && self.plain_enabled() {
                            match self.plain_bulks(buf, start, remaining) {
                                Ok(done) => return Ok(done),
                                Err((start, remaining)) => (start, remaining, Scan::From(start)),
                            }
                        } else {
                            (start, remaining, scan)
                        };
                    match self.find_line(buf, scan, b'\r') {
                        Line::End(cr) => {
                            // Redis only checks for '$' once the whole line is there, so a bad
                            // first byte waits for a '\r' too.
                            match buf.get(start) {
                                Some(b'$') => {}
                                Some(&other) => return Err(ProtocolError::ExpectedDollar(other)),
                                None => return Ok(None),
                            }
                            let len = buf
                                .get(start + 1..cr)
                                .and_then(parse_i64)
                                .and_then(|len| usize::try_from(len).ok())
                                .filter(|&len| len <= self.limits.max_bulk_len)
                                .ok_or(ProtocolError::InvalidBulkLength)?;
                            if self.limits.unauthenticated && len > UNAUTHENTICATED_MAX_BULK {
                                return Err(ProtocolError::UnauthenticatedBulkLength);
                            }
                            self.state = State::BulkData {
                                start: cr + 2,
                                len,
                                remaining,
                            };
                        }
                        Line::Pending(scan) => {
                            self.state = State::BulkLen {
                                start,
                                remaining,
                                scan,
                            };
                            return if buf.len().saturating_sub(start) > self.limits.max_inline_len {
                                Err(ProtocolError::TooBigBulkCount)
                            } else {
                                Ok(None)
                            };
                        }
                    }
                }
                State::BulkData {
                    start,
                    len,
                    remaining,
                } => {
                    // An end past usize::MAX can never arrive: keep waiting, as Redis would.
                    let Some(end) = start.checked_add(len) else {
                        return Ok(None);
                    };
                    // Redis skips the two bytes after the payload without checking that they
                    // are "\r\n"; so do we.
                    let Some(next) = end.checked_add(2).filter(|&next| next <= buf.len()) else {
                        return Ok(None);
                    };
                    self.ranges.push(start..end);
                    let remaining = remaining.saturating_sub(1);
                    if remaining == 0 {
                        return Ok(Some(Parsed::Multibulk { consumed: next }));
                    }
                    self.state = State::BulkLen {
                        start: next,
                        remaining,
                        scan: Scan::From(next),
                    };
                }
            }
        }
    }

    /// Whether plain lines take the short way (always, but in tests comparing the two).
    #[inline]
    fn plain_enabled(&self) -> bool {
        #[cfg(test)]
        {
            !self.general_only
        }
        #[cfg(not(test))]
        {
            true
        }
    }

    /// The `*<n>` line at the front of `buf` in its common form (see [`plain_line`]), with a
    /// count the limits allow: the state after it. `None` leaves the line to `State::Count`
    /// (zero, negative or malformed counts, an incomplete line, the limits' errors).
    fn plain_count(&mut self, buf: &[u8]) -> Option<State> {
        let (count, start) = plain_line(buf, 1)?;
        if count == 0
            || count > self.limits.max_multibulk_len
            || (self.limits.unauthenticated && count > UNAUTHENTICATED_MAX_ARGS)
        {
            return None;
        }
        self.ranges.reserve(count.min(MAX_PREALLOC_ARGS));
        Some(State::BulkLen {
            start,
            remaining: count,
            scan: Scan::From(start),
        })
    }

    /// Arguments whose `$<len>` lines are in their common form, from `start` on, taken in
    /// one pass without the resumable line search (which would find the same `\r`: the
    /// line holds nothing but digits). `Ok` with the request once its last argument is in,
    /// or `Ok(None)` when a payload is not complete yet (the state then waits for it);
    /// `Err` with the line (its start, the arguments still to come) to leave to the general
    /// path.
    fn plain_bulks(
        &mut self,
        buf: &[u8],
        mut start: usize,
        mut remaining: usize,
    ) -> Result<Option<Parsed>, (usize, usize)> {
        let max_len = if self.limits.unauthenticated {
            UNAUTHENTICATED_MAX_BULK.min(self.limits.max_bulk_len)
        } else {
            self.limits.max_bulk_len
        };
        loop {
            let plain = match buf.get(start) {
                Some(b'$') => plain_line(buf, start + 1).filter(|&(len, _)| len <= max_len),
                _ => None,
            };
            let Some((len, data)) = plain else {
                self.state = State::BulkLen {
                    start,
                    remaining,
                    scan: Scan::From(start),
                };
                return Err((start, remaining));
            };
            // Payload and its two unchecked bytes, as `State::BulkData` takes them.
            let end = data + len;
            let next = end + 2;
            if next > buf.len() {
                self.state = State::BulkData {
                    start: data,
                    len,
                    remaining,
                };
                return Ok(None);
            }
            self.ranges.push(data..end);
            remaining -= 1;
            if remaining == 0 {
                return Ok(Some(Parsed::Multibulk { consumed: next }));
            }
            start = next;
        }
    }

    /// A whole request of the short form at the front of `buf`, with nothing of it parsed
    /// yet: `*` and a count the limits allow, then that many arguments each complete in
    /// `buf` with a length line of `$`, one or two digits (no leading zero), CR and a byte
    /// (a name, keys, short values: the common request). Its ranges are appended to the
    /// list, written in place after one reservation; the bytes it used are returned. `None`
    /// leaves the list as it was and the request to [`RequestParser::advance`], which
    /// reads it as it always has (a request not complete yet, longer lengths, the limits'
    /// errors, inline requests): the count must fit in the bytes there are (six at least an
    /// argument), so whatever is looked at here and then again there is bounded by the
    /// bytes, however large the count a client declares.
    #[inline(always)]
    fn short_request(&mut self, buf: &[u8]) -> Option<usize> {
        if buf.first() != Some(&b'*') || !self.plain_enabled() {
            return None;
        }
        let (count, mut start) = plain_line(buf, 1)?;
        let max_count = if self.limits.unauthenticated {
            UNAUTHENTICATED_MAX_ARGS.min(self.limits.max_multibulk_len)
        } else {
            self.limits.max_multibulk_len
        };
        let max_len = if self.limits.unauthenticated {
            UNAUTHENTICATED_MAX_BULK.min(self.limits.max_bulk_len)
        } else {
            self.limits.max_bulk_len
        };
        if count == 0 || count > max_count || count > (buf.len() - start) / 6 || max_len < SHORT_MAX
        {
            return None;
        }
        // One reservation; with the capacity checked beside each push the compiler drops
        // push's own check and its growth path from the loop.
        let base = self.ranges.len();
        self.ranges.reserve(count);
        let ranges = &mut self.ranges;
        for _ in 0..count {
            let short = short_bulk(buf, start);
            let Some((data, end)) = short.filter(|_| ranges.len() < ranges.capacity()) else {
                ranges.truncate(base);
                return None;
            };
            ranges.push(data..end);
            start = end + 2;
        }
        Some(start)
    }

    /// Looks for `terminator` the way Redis's `strchr` does: from where the last call stopped,
    /// giving up for good at a NUL. A `\r` ends a line only once the byte after it (unchecked,
    /// as in Redis) is also in the buffer; `\n` ends an inline line by itself.
    fn find_line(&mut self, buf: &[u8], scan: Scan, terminator: u8) -> Line {
        let Scan::From(from) = scan else {
            return Line::Pending(Scan::Blocked);
        };
        let rest = buf.get(from..).unwrap_or_default();
        let hit = rest.iter().position(|&b| b == terminator || b == 0);
        #[cfg(test)]
        {
            self.examined += hit.map_or(rest.len(), |i| i + 1);
        }
        match hit {
            None => Line::Pending(Scan::From(from + rest.len())),
            Some(i) if rest.get(i) == Some(&0) => Line::Pending(Scan::Blocked),
            Some(i) => {
                let at = from + i;
                if terminator == b'\r' && at + 2 > buf.len() {
                    // Found the '\r' but not the byte after it: resume right at the '\r'.
                    Line::Pending(Scan::From(at))
                } else {
                    Line::End(at)
                }
            }
        }
    }

    /// Builds the request for an inline line whose `\n` is at `newline`.
    fn inline_request(buf: &[u8], newline: usize) -> Result<Parsed, ProtocolError> {
        let mut end = newline;
        if end > 0 && buf.get(end - 1) == Some(&b'\r') {
            end -= 1;
        }
        let line = buf.get(..end).unwrap_or_default();
        let args = split_args(line).ok_or(ProtocolError::UnbalancedQuotes)?;
        Ok(Parsed::Inline {
            consumed: newline + 1,
            args,
        })
    }
}

/// A length line's digits in their common form, from `from` to a `\r` with a byte after it
/// (Redis skips that byte unchecked): the value and where the next line starts. `None` for
/// anything else: no digit, a sign, a leading zero (other than `0` itself), more than 18
/// digits, another byte before the `\r`, or a line not complete yet. Whatever this accepts,
/// the general path (`find_line` for the `\r`, `parse_i64` for the value) reads the same.
#[inline(always)]
fn plain_line(buf: &[u8], from: usize) -> Option<(usize, usize)> {
    // One or two digits (counts, keys, a limiter's short values): read at fixed offsets,
    // without the loop. What this declines, the loop reads.
    if let Some(&[a, b, c]) = buf.get(from..from + 3) {
        let (da, db) = (a.wrapping_sub(b'0'), b.wrapping_sub(b'0'));
        if da <= 9 && b == b'\r' {
            return Some((usize::from(da), from + 3));
        }
        if (1..=9).contains(&da) && db <= 9 && c == b'\r' && from + 4 <= buf.len() {
            return Some((usize::from(da) * 10 + usize::from(db), from + 4));
        }
    }
    plain_line_loop(buf, from)
}

/// The argument at `from` if its length line is `$`, one or two digits (no leading zero),
/// CR and a byte, and its payload and the two bytes after it are in `buf`: the payload's
/// range (see [`RequestParser::short_request`]).
#[inline(always)]
fn short_bulk(buf: &[u8], from: usize) -> Option<(usize, usize)> {
    let &[dollar, high, cr_one, cr_two] = buf.get(from..)?.first_chunk::<4>()?;
    let high = high.wrapping_sub(b'0');
    let (data, len) = if cr_one == b'\r' && high <= 9 {
        (from + 4, usize::from(high))
    } else {
        let low = cr_one.wrapping_sub(b'0');
        if cr_two != b'\r' || !(1..=9).contains(&high) || low > 9 {
            return None;
        }
        (from + 5, usize::from(high) * 10 + usize::from(low))
    };
    // The payload and the two bytes Redis skips after it; this also covers the byte after
    // the length line's CR.
    let end = data + len;
    (dollar == b'$' && end + 2 <= buf.len()).then_some((data, end))
}

/// [`plain_line`] for lines of any length, one byte at a time. Out of line, so that the
/// fixed-offset test is all the argument loop inlines.
#[inline(never)]
fn plain_line_loop(buf: &[u8], from: usize) -> Option<(usize, usize)> {
    let digits = buf.get(from..)?;
    let mut value = 0u64;
    let mut n = 0;
    loop {
        match *digits.get(n)? {
            c @ b'0'..=b'9' if n < 18 => value = value * 10 + u64::from(c - b'0'),
            b'\r' if n > 0 => break,
            _ => return None,
        }
        n += 1;
    }
    if n > 1 && digits.first() == Some(&b'0') {
        return None;
    }
    let next = from + n + 2;
    let value = usize::try_from(value).ok()?;
    (next <= buf.len()).then_some((value, next))
}

/// Redis's `sdssplitargs`, which splits an inline line into arguments; `None` means unbalanced
/// quotes. It is followed quirk for quirk, since telnet users and scripts rely on its exact
/// behaviour: a quote may open mid-argument (`a"b c"` is `ab c`), an argument that is not quoted
/// ends only at space, tab, CR or LF (not `\v`/`\f`, though those are skipped between arguments),
/// and a closing quote must be followed by whitespace or the end of the line.
pub fn split_args(line: &[u8]) -> Option<Vec<Bytes>> {
    // The C code walks a NUL-terminated string; reading past the end as NUL keeps the port
    // faithful without index arithmetic that could go out of bounds.
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let mut args = Vec::new();
    let mut p = 0;
    loop {
        while at(p) != 0 && is_c_space(at(p)) {
            p += 1;
        }
        if at(p) == 0 {
            return Some(args);
        }
        let mut current = Vec::new();
        let mut in_double = false;
        let mut in_single = false;
        let mut done = false;
        while !done {
            let c = at(p);
            if in_double {
                let hex = if c == b'\\' && at(p + 1) == b'x' {
                    hex_digit(at(p + 2))
                        .zip(hex_digit(at(p + 3)))
                        .map(|(high, low)| high * 16 + low)
                } else {
                    None
                };
                if let Some(byte) = hex {
                    current.push(byte);
                    p += 3;
                } else if c == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    current.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    if at(p + 1) != 0 && !is_c_space(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    current.push(c);
                }
            } else if in_single {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    current.push(b'\'');
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !is_c_space(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    current.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    other => current.push(other),
                }
            }
            if at(p) != 0 {
                p += 1;
            }
        }
        args.push(Bytes::from(current));
    }
}

/// Appends `argv` to `out` as a client writes a request: a RESP array of bulk strings. The
/// replication stream and the AOF carry commands in this form too (`repl`, `aof`); tests and
/// benchmarks use it to write requests.
pub fn encode(out: &mut Vec<u8>, argv: &[impl AsRef<[u8]>]) {
    // Every write goes through here once per AOF and once per stream: no `format!` (an
    // allocation and the formatting machinery per argument were a quarter of a fixed-window
    // decision's instructions with the AOF on).
    let mut n = itoa::Buffer::new();
    out.reserve(argv.iter().map(|a| a.as_ref().len() + 16).sum::<usize>() + 16);
    out.push(b'*');
    out.extend_from_slice(n.format(argv.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in argv {
        out.push(b'$');
        out.extend_from_slice(n.format(a.as_ref().len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a.as_ref());
        out.extend_from_slice(b"\r\n");
    }
}

/// `args` as a client writes them (for tests that feed the parser or a connection request
/// bytes).
#[cfg(test)]
pub(crate) fn client_bytes(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    encode(&mut out, args);
    out
}

#[cfg(test)]
mod tests;
