use super::*;
use crate::protocol::request::{Args, Limits};

/// Every request `fill` and `take` give for `buf`, filling again at the bound, as the event
/// loop does: each request's bytes and arguments, then the error that ended it, if any.
/// The first request is listed alone and the batch filled behind it only if more bytes
/// follow, as the event loop does.
type Run = (Vec<(Range<usize>, Vec<Vec<u8>>)>, Option<ProtocolError>);

fn through_batch(parser: &mut RequestParser, batch: &mut Batch, buf: &[u8], from: usize) -> Run {
    through(parser, batch, buf, from, true)
}

/// [`through_batch`], or (`first_alone` false) every request from `from` on listed by
/// `fill`.
fn through(
    parser: &mut RequestParser,
    batch: &mut Batch,
    buf: &[u8],
    from: usize,
    first_alone: bool,
) -> Run {
    let mut out = Vec::new();
    let mut inline = Vec::new();
    let mut at = from;
    let mut listed = !first_alone;
    if listed {
        parser.forget_listed();
        batch.fill(parser, buf, at, |_, _| {});
    }
    loop {
        let req = if !listed {
            parser.forget_listed();
            let pending = &buf[at..];
            let req = match parser.list(pending) {
                Ok(Some(req)) => req,
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e)),
            };
            // An inline request's arguments wait in the parser: nothing is listed after it.
            if req.consumed < pending.len() && !req.is_inline() {
                listed = true;
                batch.fill(parser, buf, at + req.consumed, |_, _| {});
            }
            Taken::new(at, req)
        } else {
            let Some(req) = batch.take() else {
                match batch.stop().clone() {
                    Stop::Incomplete => return (out, None),
                    Stop::Bound => {
                        parser.forget_listed();
                        batch.fill(parser, buf, at, |_, _| {});
                        continue;
                    }
                    Stop::Error(e) => return (out, Some(e)),
                }
            };
            req
        };
        assert_eq!(req.start, at, "requests are listed back to back");
        let range = req.start..req.end;
        at = req.end;
        let mut stack = [&[][..]; ARGV_INLINE];
        let mut heap = Vec::new();
        let argv = batch.slices(req, parser, buf, &mut inline, &mut stack, &mut heap);
        out.push((range, argv.iter().map(|a| a.to_vec()).collect()));
        batch.recycle(heap);
    }
}

/// The same, one `parse` per request from the front of what is left (the parser as the
/// tokio path uses it).
fn one_by_one(parser: &mut RequestParser, buf: &[u8], from: usize) -> Run {
    let mut out = Vec::new();
    let mut at = from;
    loop {
        match parser.parse(&buf[at..]) {
            Ok(Some(req)) => {
                let frame = &buf[at..at + req.consumed];
                let args = match req.args {
                    Args::Ranges(r) => r.iter().map(|r| frame[r.clone()].to_vec()).collect(),
                    Args::Owned(v) => v.iter().map(|a| a.to_vec()).collect(),
                };
                out.push((at..at + req.consumed, args));
                at += req.consumed;
            }
            Ok(None) => return (out, None),
            Err(e) => return (out, Some(e)),
        }
    }
}

use crate::protocol::request::client_bytes as resp;

#[test]
fn lists_each_complete_request_and_leaves_the_partial_one_to_the_parser() {
    let mut buf = [
        resp(&[b"GET", b"k1"]),
        resp(&[b"SET", b"k2", b"v"]),
        b"*0\r\n".to_vec(),
        resp(&[b"MULTI"]),
    ]
    .concat();
    let whole = buf.len();
    let tail = resp(&[b"SET", b"k3", b"value"]);
    buf.extend_from_slice(&tail[..tail.len() - 4]);
    let mut parser = RequestParser::new(Limits::default());
    let mut batch = Batch::new();
    let (listed, error) = through_batch(&mut parser, &mut batch, &buf, 0);
    assert_eq!(error, None);
    let args: Vec<Vec<Vec<u8>>> = listed.iter().map(|(_, a)| a.clone()).collect();
    assert_eq!(
        args,
        vec![
            vec![b"GET".to_vec(), b"k1".to_vec()],
            vec![b"SET".to_vec(), b"k2".to_vec(), b"v".to_vec()],
            vec![],
            vec![b"MULTI".to_vec()],
        ]
    );
    assert_eq!(listed.last().map(|(r, _)| r.end), Some(whole));
    assert!(parser.in_progress(), "the partial request is the parser's");
    // The rest arrives: the parser resumes where the fill left it.
    buf.extend_from_slice(&tail[tail.len() - 4..]);
    let (listed, error) = through_batch(&mut parser, &mut batch, &buf, whole);
    assert_eq!(error, None);
    assert_eq!(
        listed,
        vec![(
            whole..buf.len(),
            vec![b"SET".to_vec(), b"k3".to_vec(), b"value".to_vec()]
        )]
    );
}

#[test]
fn heads_are_each_requests_name_and_first_argument() {
    let buf = [
        resp(&[b"GET", b"k1"]),
        resp(&[b"MULTI"]),
        b"*0\r\n".to_vec(),
        resp(&[b"ZADD", b"z", b"1", b"m"]),
        b"PING\r\n".to_vec(),
    ]
    .concat();
    let mut parser = RequestParser::new(Limits::default());
    let mut batch = Batch::new();
    let mut heads = Vec::new();
    batch.fill(&mut parser, &buf, 0, |frame, ranges| {
        let arg = |i: usize| ranges.get(i).map(|r| frame[r.clone()].to_vec());
        heads.push((arg(0).unwrap_or_default(), arg(1)))
    });
    assert_eq!(batch.len(), 5);
    assert_eq!(
        heads,
        vec![
            (b"GET".to_vec(), Some(b"k1".to_vec())),
            (b"MULTI".to_vec(), None),
            (b"ZADD".to_vec(), Some(b"z".to_vec())),
        ]
    );
}

#[test]
fn an_error_comes_after_the_requests_before_it() {
    let buf = [
        resp(&[b"GET", b"k1"]),
        resp(&[b"GET", b"k2"]),
        b"*1\r\nx\r\n".to_vec(),
    ]
    .concat();
    let mut parser = RequestParser::new(Limits::default());
    let mut batch = Batch::new();
    let (listed, error) = through_batch(&mut parser, &mut batch, &buf, 0);
    assert_eq!(listed.len(), 2);
    assert_eq!(error, Some(ProtocolError::ExpectedDollar(b'x')));
}

#[test]
fn an_inline_request_ends_a_fill_and_the_next_fill_goes_on() {
    let buf = [
        resp(&[b"GET", b"a"]),
        b"PING \"x y\"\r\n".to_vec(),
        resp(&[b"GET", b"b"]),
    ]
    .concat();
    let mut parser = RequestParser::new(Limits::default());
    let mut batch = Batch::new();
    batch.fill(&mut parser, &buf, 0, |_, _| {});
    assert_eq!(batch.len(), 2);
    assert_eq!(batch.stop(), &Stop::Bound);
    let mut batch = Batch::new();
    let mut parser = RequestParser::new(Limits::default());
    let (listed, error) = through_batch(&mut parser, &mut batch, &buf, 0);
    assert_eq!(error, None);
    assert_eq!(listed.len(), 3);
    assert_eq!(listed[1].1, vec![b"PING".to_vec(), b"x y".to_vec()]);
}

#[test]
fn a_fill_is_bounded_and_the_next_one_goes_on() {
    let one = resp(&[b"GET", b"k"]);
    let buf = one.repeat(MAX_REQUESTS * 2 + 3);
    let mut parser = RequestParser::new(Limits::default());
    let mut batch = Batch::new();
    batch.fill(&mut parser, &buf, 0, |_, _| {});
    assert_eq!(batch.len(), MAX_REQUESTS);
    assert_eq!(batch.stop(), &Stop::Bound);
    let many: Vec<Vec<u8>> = (0..MAX_RANGES + 10)
        .map(|i| format!("a{i}").into_bytes())
        .collect();
    let many: Vec<&[u8]> = many.iter().map(|a| &a[..]).collect();
    let buf = [resp(&many), one.clone()].concat();
    batch.fill(&mut parser, &buf, 0, |_, _| {});
    assert_eq!(
        batch.len(),
        1,
        "a request past the argument bound is a fill of its own"
    );
    let mut parser = RequestParser::new(Limits::default());
    let (listed, error) = through_batch(&mut parser, &mut batch, &buf, 0);
    assert_eq!((listed.len(), error), (2, None));
    assert_eq!(listed[0].1.len(), MAX_RANGES + 10);
}

#[test]
fn discard_leaves_the_parser_at_the_start_of_a_request() {
    let first = resp(&[b"GET", b"k1"]);
    let buf = [first.clone(), resp(&[b"SET", b"k2", b"vvvvvv"])].concat();
    let partial = &buf[..buf.len() - 3];
    let mut parser = RequestParser::new(Limits::default());
    let mut batch = Batch::new();
    batch.fill(&mut parser, partial, 0, |_, _| {});
    assert_eq!(batch.len(), 1);
    assert!(parser.in_progress());
    batch.discard(&mut parser);
    assert!(!parser.in_progress());
    assert!(batch.take().is_none());
    // The buffer from the first request on, parsed again from its front.
    let (listed, error) = one_by_one(&mut parser, &buf, 0);
    assert_eq!((listed.len(), error), (2, None));
}

/// Pipelines of well-formed and malformed requests, cut at every length, give what parsing
/// one request at a time gives, whether the rest arrives at once or never.
#[test]
fn the_same_requests_and_errors_as_one_parse_per_request() {
    let pieces: Vec<Vec<u8>> = vec![
        resp(&[b"GET", b"k1"]),
        resp(&[b"SET", b"key", b"a value of some length"]),
        resp(&[b"MULTI"]),
        b"*0\r\n".to_vec(),
        b"*-1\r\n".to_vec(),
        b"PING\r\n".to_vec(),
        b"\r\n".to_vec(),
        b"SET a 'b c'\n".to_vec(),
        b"*1\r\n$4\r\nPING\r\n".to_vec(),
        b"*01\r\n$4\r\nPING\r\n".to_vec(),
        b"*2\r\n$3\r\nGET\r\n$010\r\n0123456789\r\n".to_vec(),
        b"*1\r\n$-3\r\n".to_vec(),
        b"*x\r\n".to_vec(),
        b"*1\r\n:1\r\n".to_vec(),
        b"*1\r\n$3\r\nabcXY".to_vec(),
        b"'unbalanced\r\n".to_vec(),
    ];
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rand = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut batch = Batch::new();
    for _ in 0..300 {
        let n = 1 + (rand() % 6) as usize;
        let buf: Vec<u8> = (0..n)
            .flat_map(|_| pieces[(rand() % pieces.len() as u64) as usize].clone())
            .collect();
        for cut in 0..=buf.len() {
            let part = &buf[..cut];
            let mut b = RequestParser::new(Limits::default());
            let expected = one_by_one(&mut b, part, 0);
            let from = expected.0.last().map_or(0, |(r, _)| r.end);
            let rest = (expected.1.is_none()).then(|| one_by_one(&mut b, &buf, from));
            // As the event loop takes them (the first request listed alone), and listed
            // by fills alone.
            for first_alone in [true, false] {
                let mut a = RequestParser::new(Limits::default());
                let (listed, error) = through(&mut a, &mut batch, part, 0, first_alone);
                assert_eq!((listed, error), expected, "{part:?}");
                if let Some(rest) = &rest {
                    // The rest arrives: both parsers resume from where they stopped.
                    let got = through(&mut a, &mut batch, &buf, from, first_alone);
                    assert_eq!(&got, rest, "{buf:?} cut at {cut}");
                }
            }
        }
    }
}
