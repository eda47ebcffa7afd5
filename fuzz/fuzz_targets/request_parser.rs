//! The request parser on arbitrary bytes: it must never panic, and feeding the same bytes in
//! pieces (split where the input says) must give exactly what feeding them whole gives.
//! Limits are drawn from the input too, so the small-limit error paths are explored; with
//! those only "no panic" is checked, because there, as in Redis, a header line longer than
//! the limit is refused if it arrives in pieces and parsed if it arrives in one read (Redis
//! checks the limit only while it has no line end yet). Inputs are far below the default
//! 64 KiB limit, so with the defaults splitting must not matter.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::protocol::{Args, Limits, ProtocolError, RequestParser};

/// Everything a feed produced: each request's (consumed, arguments), then how it ended (the
/// bytes left over, or the protocol error).
type Session = (Vec<(usize, Vec<Vec<u8>>)>, Result<usize, ProtocolError>);

fn args_of(buf: &[u8], args: Args) -> Vec<Vec<u8>> {
    match args {
        Args::Ranges(ranges) => ranges.into_iter().map(|r| buf[r].to_vec()).collect(),
        Args::Owned(owned) => owned.into_iter().map(|b| b.to_vec()).collect(),
    }
}

/// Feeds `chunks` one after another into a buffer, as the connection does.
fn feed(limits: Limits, chunks: &[&[u8]]) -> Session {
    let mut parser = RequestParser::new(limits);
    let mut buf: Vec<u8> = Vec::new();
    let mut requests = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match parser.parse(&buf) {
                Ok(Some(req)) => {
                    assert!(req.consumed > 0 && req.consumed <= buf.len());
                    requests.push((req.consumed, args_of(&buf, req.args)));
                    buf.drain(..req.consumed);
                }
                Ok(None) => break,
                Err(e) => return (requests, Err(e)),
            }
        }
    }
    (requests, Ok(buf.len()))
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let (control, input) = data.split_at(3);
    let tiny = control[0] & 1 != 0;
    let limits = if !tiny {
        Limits::default()
    } else {
        Limits {
            max_bulk_len: (control[1] % 32) as usize,
            max_inline_len: (control[2] % 64) as usize,
            max_multibulk_len: (control[1] >> 5) as usize,
            unauthenticated: control[0] & 2 != 0,
        }
    };
    let whole = feed(limits, &[input]);
    // Split into pieces whose sizes cycle through control bytes (1-byte pieces included).
    let step = 1 + (control[0] >> 2) as usize % 7;
    let pieces: Vec<&[u8]> = input.chunks(step).collect();
    let split = feed(limits, &pieces);
    if !tiny {
        assert_eq!(whole, split, "splitting the input changed the result");
    }
});
