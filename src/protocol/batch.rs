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
//! Nothing is allocated per request once the vectors have grown to the batch's size: the
//! arguments of every listed request are kept one after another in one vector, and a
//! request's argument slices are put in the caller's array on the stack (up to
//! [`ARGV_INLINE`]) or a vector reused from request to request.

use std::mem;
use std::ops::Range;

use bytes::Bytes;

use super::request::{Args, ProtocolError, RequestParser};

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

/// One listed request.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// Its bytes in the buffer `fill` read.
    start: usize,
    end: usize,
    /// Where its arguments' ranges (relative to `start`) begin in `ranges`.
    first: usize,
    /// How many there are; [`INLINE`] for an inline request, whose (unescaped) arguments
    /// are `Batch::inline`.
    count: usize,
}

/// [`Entry::count`] of an inline request.
const INLINE: usize = usize::MAX;

/// A request taken from the batch.
#[derive(Debug)]
pub struct Taken {
    /// Where its bytes start in the buffer the batch was filled from.
    pub start: usize,
    /// Where they end.
    pub end: usize,
    first: usize,
    count: usize,
}

/// The listed requests of a batch (see the module docs).
#[derive(Debug)]
pub struct Batch {
    entries: Vec<Entry>,
    /// Every listed request's argument ranges, one request after another.
    ranges: Vec<Range<usize>>,
    /// The next entry to take.
    next: usize,
    /// The arguments of the inline request listed last, if any.
    inline: Vec<Bytes>,
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
            ranges: Vec::new(),
            next: 0,
            inline: Vec::new(),
            stop: Stop::Bound,
            spare: Vec::new(),
        }
    }

    /// Lists the complete requests in `buf` from `from` on, parsed by `parser`, which must
    /// be at the start of a request there or in the middle of the one starting there (as
    /// the last fill left it). Whatever was listed before is dropped. `head` is called with
    /// each listed multibulk request's bytes and its arguments' ranges in them (the name
    /// first) as it is listed: the event loop's prefetch picks its key there, without
    /// another walk.
    #[inline]
    pub fn fill<'b>(
        &mut self,
        parser: &mut RequestParser,
        buf: &'b [u8],
        from: usize,
        mut head: impl FnMut(&'b [u8], &[Range<usize>]),
    ) {
        self.entries.clear();
        self.ranges.clear();
        self.next = 0;
        let mut at = from;
        self.stop = loop {
            if self.entries.len() >= MAX_REQUESTS || self.ranges.len() >= MAX_RANGES {
                break Stop::Bound;
            }
            let pending = buf.get(at..).unwrap_or_default();
            let req = match parser.parse(pending) {
                Ok(Some(req)) => req,
                Ok(None) => break Stop::Incomplete,
                Err(e) => break Stop::Error(e),
            };
            let end = at + req.consumed;
            match req.args {
                Args::Ranges(ranges) => {
                    let first = self.ranges.len();
                    if !ranges.is_empty() {
                        head(buf.get(at..end).unwrap_or_default(), &ranges);
                    }
                    self.ranges.extend_from_slice(&ranges);
                    parser.recycle(ranges);
                    self.entries.push(Entry {
                        start: at,
                        end,
                        first,
                        count: self.ranges.len() - first,
                    });
                    at = end;
                }
                Args::Owned(args) => {
                    self.inline = args;
                    self.entries.push(Entry {
                        start: at,
                        end,
                        first: 0,
                        count: INLINE,
                    });
                    break Stop::Bound;
                }
            }
        };
    }

    /// The next listed request, in order; `None` once all are taken (then see
    /// [`Batch::stop`]).
    #[inline]
    pub fn take(&mut self) -> Option<Taken> {
        let entry = self.entries.get(self.next)?;
        self.next += 1;
        Some(Taken {
            start: entry.start,
            end: entry.end,
            first: entry.first,
            count: entry.count,
        })
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
        self.ranges.clear();
        self.next = 0;
        self.inline = Vec::new();
        self.stop = Stop::Bound;
        parser.reset();
        // One huge request's arguments are not kept allocated for the connection's life.
        self.release_large();
    }

    /// After a batch that listed a request of many arguments: lets go of the memory.
    pub fn release_large(&mut self) {
        if self.ranges.capacity() > MAX_RANGES * 2 {
            self.ranges = Vec::new();
        }
        if self.spare.capacity() > MAX_RANGES * 2 {
            self.spare = Vec::new();
        }
    }

    /// `taken`'s arguments, borrowed from `buf` (the buffer the batch was filled from) or,
    /// for an inline request, from `inline`, where its unescaped arguments are moved for as
    /// long as they are borrowed. Up to [`ARGV_INLINE`] of them are put in `stack`; more in
    /// `heap`, which becomes the batch's reused vector (give it back with
    /// [`Batch::recycle`]): nothing is allocated once that has grown.
    #[inline]
    pub fn slices<'a, 'b>(
        &mut self,
        taken: Taken,
        buf: &'b [u8],
        inline: &'b mut Vec<Bytes>,
        stack: &'a mut [&'b [u8]; ARGV_INLINE],
        heap: &'a mut Vec<&'b [u8]>,
    ) -> &'a [&'b [u8]] {
        if taken.count == INLINE {
            *inline = mem::take(&mut self.inline);
            let inline: &'b Vec<Bytes> = inline;
            return argv(&mut self.spare, inline.iter().map(|a| &a[..]), stack, heap);
        }
        let frame = buf.get(taken.start..taken.end).unwrap_or_default();
        let ranges = self
            .ranges
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
