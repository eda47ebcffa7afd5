//! A pipelined batch's complete requests, parsed in one pass: each request's bytes and the
//! ranges of its arguments, for the event loop to prefetch the batch's keys from and then
//! run request by request, without walking the bytes again.
//!
//! [`Batch::fill`] runs the [`RequestParser`] over the read buffer from a given offset until
//! it needs more bytes, meets a protocol error or reaches the batch's bound
//! ([`MAX_REQUESTS`] requests, or [`MAX_RANGES`] arguments after a request); the caller
//! takes the requests in order and fills again once they are all taken (see [`Stop`]). An
//! error is kept, not reported: Redis answers the complete requests before the bad one
//! first. The parser is left where it stopped, mid-request for a partial one at the end, as
//! if each request had been parsed as it came to run. A caller that stops taking before the
//! batch ends (a connection handed over, the limits changed by AUTH) calls
//! [`Batch::discard`], which also resets the parser, so the requests left are parsed again
//! from the buffer, from the front, as before.
//!
//! Nothing is moved or allocated per request once the vectors have grown to the batch's
//! size: the parser writes each request's argument ranges once, into its own list
//! ([`RequestParser::list`]), one request after another, and the batch's entries say where
//! each request's are; a request's argument slices are put in the caller's array on the
//! stack (up to [`ARGV_INLINE`]) or a vector reused from request to request. The caller
//! may list a request with the parser itself (the event loop's batch's first, before it
//! knows whether more follow) and take it the same way ([`Taken::new`]); the list is
//! emptied by the caller ([`RequestParser::forget_listed`]) once it has taken everything.

use std::mem;
use std::ops::Range;

use bytes::Bytes;

use super::request::{INLINE, Listed, ProtocolError, RequestParser};

/// Most requests one fill lists (a pipeline of 16 sliding-window transactions is 96
/// requests).
pub const MAX_REQUESTS: usize = 128;

/// A fill stops after the request that takes the argument list to this many (so a
/// request of 40,000 arguments is a fill of its own).
pub const MAX_RANGES: usize = 1024;

/// Why the last fill ended: what to do once its requests are all taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The next request is not complete: the batch is over.
    Incomplete,
    /// The bound, or an inline request (listed last): fill again from where it ended.
    Bound,
    /// The next request is malformed: report this, after the listed requests' replies.
    Error(ProtocolError),
}

/// A listed request, to take from the batch (or the one request the caller listed itself:
/// [`Taken::new`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    /// Where its bytes start in the buffer the batch was filled from.
    pub start: usize,
    /// Where they end.
    pub end: usize,
    /// Where its arguments' ranges (relative to `start`) begin in the parser's list.
    first: usize,
    /// How many there are; [`INLINE`] for an inline request, whose (unescaped) arguments
    /// the parser holds.
    count: usize,
}

impl Taken {
    /// The request `listed` says the parser listed at `start` in the buffer.
    #[inline]
    pub fn new(start: usize, listed: Listed) -> Taken {
        Taken {
            start,
            end: start + listed.consumed,
            first: listed.first,
            count: listed.count,
        }
    }
}

/// The listed requests of a batch (see the module docs).
#[derive(Debug)]
pub struct Batch {
    entries: Vec<Taken>,
    /// The next entry to take.
    next: usize,
    stop: Stop,
    /// An emptied vector for the next request's argument slices (see [`Batch::slices`]).
    spare: Vec<Range<usize>>,
}

impl Default for Batch {
    fn default() -> Self {
        Batch::new()
    }
}

impl Batch {
    /// An empty batch (nothing listed, nothing to report: fill to begin).
    pub fn new() -> Batch {
        Batch {
            entries: Vec::new(),
            next: 0,
            stop: Stop::Bound,
            spare: Vec::new(),
        }
    }

    /// Lists the complete requests in `buf` from `from` on, parsed by `parser`, which must
    /// be at the start of a request there or in the middle of the one starting there (as
    /// the last fill left it). Whatever was listed before is dropped from the batch (the
    /// parser's list keeps its ranges until the caller calls
    /// [`RequestParser::forget_listed`]). `head` is called with each listed multibulk
    /// request's bytes and its arguments' ranges in them (the name first) as it is listed:
    /// the event loop's prefetch picks its key there, without another walk.
    #[inline]
    pub fn fill<'b>(
        &mut self,
        parser: &mut RequestParser,
        buf: &'b [u8],
        from: usize,
        mut head: impl FnMut(&'b [u8], &[Range<usize>]),
    ) {
        self.entries.clear();
        self.next = 0;
        let bound = parser.listed().len() + MAX_RANGES;
        let mut at = from;
        self.stop = loop {
            if self.entries.len() >= MAX_REQUESTS || parser.listed().len() >= bound {
                break Stop::Bound;
            }
            let pending = buf.get(at..).unwrap_or_default();
            let listed = match parser.list(pending) {
                Ok(Some(listed)) => listed,
                Ok(None) => break Stop::Incomplete,
                Err(e) => break Stop::Error(e),
            };
            let taken = Taken::new(at, listed);
            self.entries.push(taken);
            at = taken.end;
            if listed.is_inline() {
                break Stop::Bound;
            }
            if listed.count > 0 {
                let frame = buf.get(taken.start..taken.end).unwrap_or_default();
                let ranges = parser
                    .listed()
                    .get(listed.first..listed.first + listed.count)
                    .unwrap_or_default();
                head(frame, ranges);
            }
        };
    }

    /// The next listed request, in order; `None` once all are taken (then see
    /// [`Batch::stop`]).
    #[inline]
    pub fn take(&mut self) -> Option<Taken> {
        let taken = *self.entries.get(self.next)?;
        self.next += 1;
        Some(taken)
    }

    /// How many requests the last fill listed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if the last fill listed nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Why the last fill ended.
    pub fn stop(&self) -> &Stop {
        &self.stop
    }

    /// Drops what is listed and not taken, and resets `parser` to the start of a request:
    /// the requests after the last one taken are parsed again, from the buffer.
    pub fn discard(&mut self, parser: &mut RequestParser) {
        self.entries.clear();
        self.next = 0;
        self.stop = Stop::Bound;
        parser.reset();
        // One huge request's arguments are not kept allocated for the connection's life.
        self.release_large();
    }

    /// After a batch that listed a request of many arguments: lets go of the memory.
    pub fn release_large(&mut self) {
        if self.spare.capacity() > MAX_RANGES * 2 {
            self.spare = Vec::new();
        }
    }

    /// `taken`'s arguments, borrowed from `buf` (the buffer the batch was filled from)
    /// through the ranges `parser` listed or, for an inline request, from `inline`, where
    /// the parser's unescaped arguments are moved for as long as they are borrowed. Up to
    /// [`ARGV_INLINE`] of them are put in `stack`; more in `heap`, which becomes the
    /// batch's reused vector (give it back with [`Batch::recycle`]): nothing is allocated
    /// once that has grown.
    #[inline]
    pub fn slices<'a, 'b>(
        &mut self,
        taken: Taken,
        parser: &mut RequestParser,
        buf: &'b [u8],
        inline: &'b mut Vec<Bytes>,
        stack: &'a mut [&'b [u8]; ARGV_INLINE],
        heap: &'a mut Vec<&'b [u8]>,
    ) -> &'a [&'b [u8]] {
        if taken.count == INLINE {
            *inline = parser.take_inline();
            let inline: &'b Vec<Bytes> = inline;
            return argv(&mut self.spare, inline.iter().map(|a| &a[..]), stack, heap);
        }
        let frame = buf.get(taken.start..taken.end).unwrap_or_default();
        let ranges = parser
            .listed()
            .get(taken.first..)
            .and_then(|r| r.get(..taken.count))
            .unwrap_or_default();
        if ranges.len() <= ARGV_INLINE {
            let stack = stack.get_mut(..ranges.len()).unwrap_or_default();
            for (slot, r) in stack.iter_mut().zip(ranges) {
                *slot = frame.get(r.start..r.end).unwrap_or_default();
            }
            return stack;
        }
        let args = ranges
            .iter()
            .map(|r| frame.get(r.clone()).unwrap_or_default());
        argv(&mut self.spare, args, stack, heap)
    }

    /// Takes back the vector [`Batch::slices`] may have put arguments in, for the next
    /// request of many arguments (in place again).
    #[inline]
    pub fn recycle(&mut self, mut heap: Vec<&[u8]>) {
        if heap.capacity() > 0 {
            heap.clear();
            self.spare = heap.into_iter().map(|_| 0..0).collect();
        }
    }
}

/// Arguments up to this many are passed in an array on the stack.
pub const ARGV_INLINE: usize = 8;

/// `args` in `stack` if they fit, else in `heap`, made of `spare` in place (one size and
/// alignment: the standard library reuses the allocation).
#[inline]
fn argv<'a, 'b>(
    spare: &mut Vec<Range<usize>>,
    args: impl ExactSizeIterator<Item = &'b [u8]>,
    stack: &'a mut [&'b [u8]; ARGV_INLINE],
    heap: &'a mut Vec<&'b [u8]>,
) -> &'a [&'b [u8]] {
    let n = args.len();
    if n <= ARGV_INLINE {
        for (slot, arg) in stack.iter_mut().zip(args) {
            *slot = arg;
        }
        return stack.get(..n).unwrap_or_default();
    }
    *heap = mem::take(spare).into_iter().map(|_| &[][..]).collect();
    heap.extend(args);
    heap
}

#[cfg(test)]
mod tests;
