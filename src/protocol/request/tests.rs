//! Tests of the request parser: multibulk and inline forms, requests split across reads at
//! every byte, Redis's limits and error texts, and random inputs.

use super::*;
use proptest::prelude::*;

fn parser() -> RequestParser {
    RequestParser::new(Limits::default())
}

/// The arguments of `req` as owned byte strings, whichever variant they came in.
fn resolve(buf: &[u8], req: &Request) -> Vec<Vec<u8>> {
    match &req.args {
        Args::Ranges(ranges) => ranges.iter().map(|r| buf[r.clone()].to_vec()).collect(),
        Args::Owned(args) => args.iter().map(|a| a.to_vec()).collect(),
    }
}

/// A one-argument range list (a `vec![a..b]` literal reads to clippy like a mistake).
fn just(range: Range<usize>) -> Vec<Range<usize>> {
    vec![range]
}

type Parsed = (usize, Vec<Vec<u8>>);

/// Parses `input` in one call with a fresh parser.
fn once(input: &[u8]) -> Result<Option<Parsed>, ProtocolError> {
    parser()
        .parse(input)
        .map(|r| r.map(|req| (req.consumed, resolve(input, &req))))
}

fn complete(input: &[u8]) -> Parsed {
    match once(input) {
        Ok(Some(parsed)) => parsed,
        other => panic!(
            "{:?}: expected a request, got {other:?}",
            input.escape_ascii().to_string()
        ),
    }
}

fn error(input: &[u8]) -> ProtocolError {
    match once(input) {
        Err(e) => e,
        other => panic!(
            "{:?}: expected an error, got {other:?}",
            input.escape_ascii().to_string()
        ),
    }
}

fn pending(input: &[u8]) {
    assert_eq!(once(input), Ok(None), "{}", input.escape_ascii());
}

fn strings(args: &[&[u8]]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.to_vec()).collect()
}

fn encode(args: &[Vec<u8>]) -> Vec<u8> {
    let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    super::client_bytes(&args)
}

/// What a connection sees feeding `chunks` in order: the requests, then either the bytes left
/// over or the error that closed it.
#[derive(Debug, PartialEq)]
struct Session {
    requests: Vec<Parsed>,
    end: Result<usize, ProtocolError>,
}

/// Feeds chunks the way a connection does: append, read requests with `next` until
/// Ok(None), drop what each consumed.
fn feed<'a>(
    parser: &mut RequestParser,
    chunks: impl IntoIterator<Item = &'a [u8]>,
    mut next: impl FnMut(&mut RequestParser, &[u8]) -> Result<Option<Parsed>, ProtocolError>,
) -> Session {
    let mut buf = Vec::new();
    let mut requests = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match next(parser, &buf) {
                Ok(Some(parsed)) => {
                    assert!(parsed.0 > 0 && parsed.0 <= buf.len());
                    buf.drain(..parsed.0);
                    requests.push(parsed);
                }
                Ok(None) => break,
                Err(e) => {
                    return Session {
                        requests,
                        end: Err(e),
                    };
                }
            }
        }
    }
    Session {
        requests,
        end: Ok(buf.len()),
    }
}

/// [`feed`] through [`RequestParser::parse`].
fn drive<'a>(parser: &mut RequestParser, chunks: impl IntoIterator<Item = &'a [u8]>) -> Session {
    feed(parser, chunks, |parser, buf| {
        Ok(parser
            .parse(buf)?
            .map(|req| (req.consumed, resolve(buf, &req))))
    })
}

/// [`feed`] through [`RequestParser::list`], as the event loop parses.
fn drive_listed(parser: &mut RequestParser, chunks: &[Vec<u8>]) -> Session {
    feed(parser, chunks.iter().map(Vec::as_slice), |parser, buf| {
        parser.forget_listed();
        let Some(listed) = parser.list(buf)? else {
            return Ok(None);
        };
        let args = if listed.is_inline() {
            parser.take_inline().iter().map(|a| a.to_vec()).collect()
        } else {
            let ranges = &parser.listed()[listed.first..listed.first + listed.count];
            ranges.iter().map(|r| buf[r.clone()].to_vec()).collect()
        };
        Ok(Some((listed.consumed, args)))
    })
}

/// Cuts `input` at the given points (sorted, clamped, duplicates giving empty chunks).
fn chunks_at(input: &[u8], points: &[usize]) -> Vec<Vec<u8>> {
    let mut points: Vec<usize> = points.iter().map(|&p| p.min(input.len())).collect();
    points.sort_unstable();
    let mut chunks = Vec::new();
    let mut last = 0;
    for p in points {
        chunks.push(input[last..p].to_vec());
        last = p;
    }
    chunks.push(input[last..].to_vec());
    chunks
}

fn drive_chunks(parser: &mut RequestParser, chunks: &[Vec<u8>]) -> Session {
    drive(parser, chunks.iter().map(Vec::as_slice))
}

// ---- multibulk ----

#[test]
fn unauthenticated_clients_are_capped() {
    let limits = Limits {
        unauthenticated: true,
        ..Limits::default()
    };
    let mut p = RequestParser::new(limits);
    assert_eq!(
        p.parse(b"*11\r\n"),
        Err(ProtocolError::UnauthenticatedMultibulkLength)
    );
    let mut p = RequestParser::new(limits);
    assert_eq!(
        p.parse(b"*1\r\n$16385\r\n"),
        Err(ProtocolError::UnauthenticatedBulkLength)
    );
    let mut p = RequestParser::new(limits);
    assert!(
        p.parse(b"*2\r\n$4\r\nAUTH\r\n$3\r\npwd\r\n")
            .unwrap()
            .is_some()
    );
    assert_eq!(
        ProtocolError::UnauthenticatedBulkLength.to_string(),
        "Protocol error: unauthenticated bulk length"
    );
}

#[test]
fn multibulk_gives_ranges_into_the_buffer() {
    let input = b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n";
    let req = parser().parse(input).unwrap().unwrap();
    assert_eq!(req.consumed, input.len());
    assert_eq!(req.args, Args::Ranges(vec![8..11, 17..18]));
    assert_eq!(req.args.len(), 2);
    assert!(!req.args.is_empty());
}

#[test]
fn multibulk_binary_and_empty_arguments() {
    assert_eq!(
        complete(b"*3\r\n$0\r\n\r\n$4\r\n\r\n\0\xff\r\n$1\r\n*\r\n"),
        (27, strings(&[b"", b"\r\n\0\xff", b"*"]))
    );
}

#[test]
fn multibulk_stops_at_the_end_of_the_request() {
    let input = b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPI";
    assert_eq!(complete(input), (14, strings(&[b"PING"])));
}

#[test]
fn zero_and_negative_counts_are_skipped() {
    for (input, consumed) in [
        (&b"*0\r\n"[..], 4),
        (b"*-1\r\n", 5),
        (b"*-5\r\n", 5),
        (b"*-9223372036854775808\r\n", 23),
        (b"*0\r\n*1\r\n", 4),
    ] {
        let req = parser().parse(input).unwrap().unwrap();
        assert_eq!(req.consumed, consumed, "{}", input.escape_ascii());
        assert_eq!(req.args, Args::Ranges(Vec::new()));
        assert!(req.args.is_empty());
    }
}

#[test]
fn invalid_multibulk_length() {
    for input in [
        &b"*\r\n"[..],
        b"*x\r\n",
        b"*+1\r\n",
        b"*01\r\n",
        b"*00\r\n",
        b"*-0\r\n",
        b"*-\r\n",
        b"* 1\r\n",
        b"*1 \r\n",
        b"*1\n\r\n",
        b"*1x\r\n",
        b"*2147483648\r\n",
        b"*9223372036854775808\r\n",
        b"*-9223372036854775809\r\n",
        b"*123456789012345678901\r\n",
        b"*99999999999999999999\r\n",
    ] {
        assert_eq!(
            error(input),
            ProtocolError::InvalidMultibulkLength,
            "{}",
            input.escape_ascii()
        );
    }
}

#[test]
fn multibulk_count_limit_is_inclusive() {
    let limits = Limits {
        max_multibulk_len: 3,
        ..Limits::default()
    };
    assert_eq!(
        RequestParser::new(limits).parse(b"*4\r\n"),
        Err(ProtocolError::InvalidMultibulkLength)
    );
    let mut p = RequestParser::new(limits);
    assert_eq!(p.parse(b"*3\r\n"), Ok(None));
    assert!(p.in_progress());
}

#[test]
fn huge_declared_count_does_not_preallocate() {
    let mut p = parser();
    assert_eq!(p.parse(b"*2147483647\r\n"), Ok(None));
    assert!(p.in_progress());
    assert!(p.ranges.capacity() <= MAX_PREALLOC_ARGS);
    assert_eq!(p.parse(b"*2147483647\r\n$1\r\na\r\n"), Ok(None));
    assert_eq!(p.ranges, just(17..18));
}

#[test]
fn too_big_mbulk_count_string() {
    let mut input = vec![b'*'];
    input.resize(64 * 1024, b'1');
    pending(&input);
    input.push(b'1');
    assert_eq!(error(&input), ProtocolError::TooBigMbulkCount);
    // A '\r' anywhere ends the line, however long it is.
    input.extend_from_slice(b"\r\n");
    assert_eq!(error(&input), ProtocolError::InvalidMultibulkLength);
}

#[test]
fn count_line_needs_the_byte_after_cr_but_does_not_check_it() {
    pending(b"*1\r");
    assert_eq!(complete(b"*1\rX$3\rYfoo\r\n"), (13, strings(&[b"foo"])));
    assert_eq!(complete(b"*0\rX"), (4, vec![]));
}

#[test]
fn expected_dollar() {
    for (input, byte) in [
        (&b"*1\r\nX\r\n"[..], b'X'),
        (b"*1\r\n:1\r\n", b':'),
        (b"*1\r\n*1\r\n", b'*'),
        (b"*1\r\n\r\n", b'\r'),
        (b"*1\r\n\n$1\r\n", b'\n'),
        (b"*2\r\n$1\r\na\r\n3\r\nfoo\r\n", b'3'),
        (b"*1\r\n\xe9\r\n", 0xe9),
    ] {
        assert_eq!(
            error(input),
            ProtocolError::ExpectedDollar(byte),
            "{}",
            input.escape_ascii()
        );
    }
    // Redis only looks at the first byte once the line (and the byte after its '\r') is in.
    pending(b"*1\r\nX");
    pending(b"*1\r\nX\r");
    pending(b"*1\r\nX\0\r\n");
}

#[test]
fn invalid_bulk_length() {
    for input in [
        &b"*1\r\n$\r\n"[..],
        b"*1\r\n$x\r\n",
        b"*1\r\n$-1\r\n",
        b"*1\r\n$-0\r\n",
        b"*1\r\n$+1\r\n",
        b"*1\r\n$01\r\n",
        b"*1\r\n$ 1\r\n",
        b"*1\r\n$1 \r\n",
        b"*1\r\n$536870913\r\n",
        b"*1\r\n$9223372036854775808\r\n",
    ] {
        assert_eq!(
            error(input),
            ProtocolError::InvalidBulkLength,
            "{}",
            input.escape_ascii()
        );
    }
    let mut p = parser();
    assert_eq!(p.parse(b"*1\r\n$536870912\r\n"), Ok(None));
    assert!(p.in_progress());
}

#[test]
fn bulk_length_limit_is_inclusive() {
    let limits = Limits {
        max_bulk_len: 3,
        ..Limits::default()
    };
    let input = b"*1\r\n$3\r\nabc\r\n";
    let req = RequestParser::new(limits).parse(input).unwrap().unwrap();
    assert_eq!(req.args, Args::Ranges(just(8..11)));
    assert_eq!(
        RequestParser::new(limits).parse(b"*1\r\n$4\r\n"),
        Err(ProtocolError::InvalidBulkLength)
    );
}

#[test]
fn too_big_bulk_count_string() {
    let mut input = b"*2\r\n$1\r\na\r\n$".to_vec();
    let start = 11;
    input.resize(start + 64 * 1024, b'1');
    pending(&input);
    input.push(b'1');
    assert_eq!(error(&input), ProtocolError::TooBigBulkCount);
}

#[test]
fn payload_terminator_is_skipped_unchecked() {
    assert_eq!(complete(b"*1\r\n$3\r\nfooXY"), (13, strings(&[b"foo"])));
    pending(b"*1\r\n$3\r\nfoo\r");
    pending(b"*1\r\n$3\r\nfoo");
}

#[test]
fn nul_hides_line_ends_like_strchr() {
    // Redis searches with strchr, which stops at NUL: the line never ends, so the request
    // waits until the size limit turns it into an error.
    pending(b"*1\0\r\n");
    let mut input = b"*1\0\r\n".to_vec();
    input.resize(64 * 1024 + 1, b'x');
    assert_eq!(error(&input), ProtocolError::TooBigMbulkCount);

    pending(b"*1\r\n$\x003\r\nfoo\r\n");
    let mut input = b"*1\r\n$\x003\r\nfoo\r\n".to_vec();
    input.resize(4 + 64 * 1024 + 1, b'x');
    assert_eq!(error(&input), ProtocolError::TooBigBulkCount);

    pending(b"PING\0\r\n");
    let mut input = b"PING\0\r\n".to_vec();
    input.resize(64 * 1024 + 1, b'x');
    assert_eq!(error(&input), ProtocolError::TooBigInlineRequest);

    // NUL inside a payload is just data.
    assert_eq!(complete(b"*1\r\n$1\r\n\0\r\n"), (11, strings(&[b"\0"])));
}

#[test]
fn nul_block_is_remembered() {
    let mut p = parser();
    let mut input = b"*1\0".to_vec();
    assert_eq!(p.parse(&input), Ok(None));
    let before = p.examined;
    input.extend_from_slice(&[b'\r'; 1000]);
    assert_eq!(p.parse(&input), Ok(None));
    assert_eq!(p.examined, before);
}

// ---- inline ----

#[test]
fn inline_lines() {
    assert_eq!(complete(b"PING\r\n"), (6, strings(&[b"PING"])));
    assert_eq!(complete(b"PING\n"), (5, strings(&[b"PING"])));
    assert_eq!(
        complete(b"SET a b\r\nGET a\r\n"),
        (9, strings(&[b"SET", b"a", b"b"]))
    );
    assert_eq!(
        complete(b"  SET\t a  b \r\n"),
        (14, strings(&[b"SET", b"a", b"b"]))
    );
    // Only one '\r' is stripped; the other is whitespace.
    assert_eq!(complete(b"PING\r\r\n"), (7, strings(&[b"PING"])));
    assert_eq!(complete(b"a\rb\n"), (4, strings(&[b"a", b"b"])));
    pending(b"PING");
    pending(b"PING\r");
    pending(b"");
}

#[test]
fn empty_inline_lines_are_skipped() {
    for (input, consumed) in [
        (&b"\r\n"[..], 2),
        (b"\n", 1),
        (b"   \t \r\n", 7),
        (b"\x0b\x0c\n", 3),
        (b"\r\r\n", 3),
    ] {
        let req = parser().parse(input).unwrap().unwrap();
        assert_eq!(req.consumed, consumed, "{}", input.escape_ascii());
        assert_eq!(req.args, Args::Owned(Vec::new()));
    }
}

#[test]
fn inline_quoting_follows_sdssplitargs() {
    let cases: &[(&[u8], &[&[u8]])] = &[
        (b"set \"a b\" 'c d'", &[b"set", b"a b", b"c d"]),
        (b"\"\" ''", &[b"", b""]),
        (b"\"\\n\\r\\t\\b\\a\\\\\\\"\\q\"", &[b"\n\r\t\x08\x07\\\"q"]),
        (b"\"\\x41\\x6a\\xFF\\x00\"", &[b"Aj\xff\0"]),
        // \x without two hex digits is just an escaped 'x'.
        (b"\"\\xZZ\\x4\"", &[b"xZZx4"]),
        (b"'it\\'s \\n \"x\"'", &[b"it's \\n \"x\""]),
        (b"\"it's\"", &[b"it's"]),
        // A quote may open in the middle of an argument.
        (b"foo\"bar baz\"", &[b"foobar baz"]),
        (b"a'b c' d", &[b"ab c", b"d"]),
        // \v and \f separate only when they lead; inside an argument they are data.
        (b"\x0ba\x0bb", &[b"a\x0bb"]),
        (b"a\x0cb", &[b"a\x0cb"]),
        // ...but do count as whitespace after a closing quote.
        (b"\"a\"\x0bb", &[b"a", b"b"]),
        (b"\"a\"\tb", &[b"a", b"b"]),
        (b"\xff\xfe", &[b"\xff\xfe"]),
    ];
    for &(line, expected) in cases {
        let mut input = line.to_vec();
        input.extend_from_slice(b"\r\n");
        assert_eq!(
            complete(&input),
            (input.len(), strings(expected)),
            "{}",
            line.escape_ascii()
        );
    }
}

#[test]
fn unbalanced_quotes() {
    for line in [
        &b"\"foo"[..],
        b"'foo",
        b"\"foo\"bar",
        b"'foo'bar",
        b"\"foo\\\"",
        b"'foo\\'",
        b"set a \"b",
        b"\"\"\"\"",
        b"\"\\",
    ] {
        for end in [&b"\n"[..], b"\r\n"] {
            let input = [line, end].concat();
            assert_eq!(
                error(&input),
                ProtocolError::UnbalancedQuotes,
                "{}",
                input.escape_ascii()
            );
        }
    }
}

#[test]
fn too_big_inline_request() {
    let mut input = vec![b'a'; 64 * 1024];
    pending(&input);
    input.push(b'a');
    assert_eq!(error(&input), ProtocolError::TooBigInlineRequest);
    // Like Redis, the limit only bites while no newline has arrived: a long line that is
    // already complete when parsed is accepted.
    input.push(b'\n');
    assert_eq!(complete(&input).1[0].len(), 64 * 1024 + 1);
}

#[test]
fn inline_limit_is_configurable() {
    let limits = Limits {
        max_inline_len: 4,
        ..Limits::default()
    };
    assert_eq!(RequestParser::new(limits).parse(b"PING"), Ok(None));
    assert_eq!(
        RequestParser::new(limits).parse(b"PINGS"),
        Err(ProtocolError::TooBigInlineRequest)
    );
    assert_eq!(
        RequestParser::new(limits).parse(b"*1234"),
        Err(ProtocolError::TooBigMbulkCount)
    );
    assert_eq!(
        RequestParser::new(limits).parse(b"*1\r\n$1234"),
        Err(ProtocolError::TooBigBulkCount)
    );
}

// ---- errors and state ----

#[test]
fn error_texts() {
    let cases = [
        (
            ProtocolError::InvalidMultibulkLength,
            "Protocol error: invalid multibulk length",
        ),
        (
            ProtocolError::TooBigMbulkCount,
            "Protocol error: too big mbulk count string",
        ),
        (
            ProtocolError::ExpectedDollar(b'X'),
            "Protocol error: expected '$', got 'X'",
        ),
        (
            ProtocolError::ExpectedDollar(b'\r'),
            "Protocol error: expected '$', got ' '",
        ),
        (
            ProtocolError::ExpectedDollar(b'\n'),
            "Protocol error: expected '$', got ' '",
        ),
        (
            ProtocolError::ExpectedDollar(0xe9),
            "Protocol error: expected '$', got '\u{e9}'",
        ),
        (
            ProtocolError::InvalidBulkLength,
            "Protocol error: invalid bulk length",
        ),
        (
            ProtocolError::TooBigBulkCount,
            "Protocol error: too big bulk count string",
        ),
        (
            ProtocolError::TooBigInlineRequest,
            "Protocol error: too big inline request",
        ),
        (
            ProtocolError::UnbalancedQuotes,
            "Protocol error: unbalanced quotes in request",
        ),
    ];
    for (error, text) in cases {
        assert_eq!(error.to_string(), text);
    }
}

#[test]
fn default_limits_are_redis_defaults() {
    let limits = Limits::default();
    assert_eq!(limits.max_bulk_len, 512 * 1024 * 1024);
    assert_eq!(limits.max_inline_len, 65536);
    assert_eq!(limits.max_multibulk_len, 2_147_483_647);
}

#[test]
fn in_progress_tracks_multibulk_argument_parsing() {
    let mut p = parser();
    let input = b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n";
    assert!(!p.in_progress());
    assert_eq!(p.parse(&input[..3]), Ok(None));
    assert!(!p.in_progress(), "count line not accepted yet");
    assert_eq!(p.parse(&input[..4]), Ok(None));
    assert!(p.in_progress());
    assert_eq!(p.parse(&input[..10]), Ok(None));
    assert!(p.in_progress());
    assert!(p.parse(input).unwrap().is_some());
    assert!(!p.in_progress());

    assert_eq!(p.parse(b"PING"), Ok(None));
    assert!(!p.in_progress(), "inline requests are not tracked");
}

#[test]
fn set_limits_applies_to_the_rest_of_a_request() {
    let mut p = parser();
    assert_eq!(p.parse(b"*2\r\n$3\r\nfoo\r\n"), Ok(None));
    p.set_limits(Limits {
        max_bulk_len: 2,
        ..Limits::default()
    });
    assert_eq!(
        p.parse(b"*2\r\n$3\r\nfoo\r\n$3\r\nbar\r\n"),
        Err(ProtocolError::InvalidBulkLength)
    );
}

#[test]
fn parser_is_fresh_after_an_error() {
    let mut p = parser();
    // Fail after one argument has been collected.
    assert_eq!(p.parse(b"*2\r\n$1\r\na\r\n"), Ok(None));
    assert_eq!(p.ranges.len(), 1);
    assert_eq!(
        p.parse(b"*2\r\n$1\r\na\r\nX\r\n"),
        Err(ProtocolError::ExpectedDollar(b'X'))
    );
    assert!(!p.in_progress());
    assert!(p.ranges.is_empty());
    let input = b"*1\r\n$1\r\na\r\n";
    assert_eq!(
        p.parse(input).unwrap().unwrap().args,
        Args::Ranges(just(8..9))
    );
}

#[test]
fn contract_violations_do_not_panic() {
    let mut p = parser();
    assert_eq!(p.parse(b"*2\r\n$3\r\nfoo\r\n$3\r"), Ok(None));
    // Shrunk and rewritten buffers: meaningless results, but no panic.
    let _ = p.parse(b"*2");
    let _ = p.parse(b"");
    let _ = p.parse(b"\r\n\r\n");
    let _ = p.parse(b"*2\r\n$3\r\nfoo\r\n$3\r\nbar\r\n");
}

// ---- splitting, pipelining, linearity ----

fn corpus() -> Vec<Vec<u8>> {
    let mut inputs: Vec<Vec<u8>> = [
        &b"*1\r\n$4\r\nPING\r\n"[..],
        b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nva\r\nl\r\n",
        b"*2\r\n$0\r\n\r\n$2\r\n\0\0\r\n",
        b"*0\r\n",
        b"*-1\r\n",
        b"*1\rX$3\rYfoo\r\n",
        b"PING\r\n",
        b"PING\n",
        b"\r\n",
        b"set \"a b\" 'c\\'d' \"\\x41\\n\"\r\n",
        b"   \n",
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect();
    inputs.push(encode(&[
        b"SET".to_vec(),
        vec![b'x'; 300],
        (0..=255).collect(),
    ]));
    inputs
}

#[test]
fn every_split_gives_the_same_result() {
    for input in corpus() {
        let whole = parser().parse(&input).unwrap().unwrap();
        assert_eq!(whole.consumed, input.len(), "{}", input.escape_ascii());
        for cut in 0..input.len() {
            let mut p = parser();
            assert_eq!(
                p.parse(&input[..cut]),
                Ok(None),
                "{} cut {cut}",
                input.escape_ascii()
            );
            assert_eq!(
                p.parse(&input).unwrap().as_ref(),
                Some(&whole),
                "{} cut {cut}",
                input.escape_ascii()
            );
        }
        // And byte by byte, every prefix in turn.
        let mut p = parser();
        for cut in 0..input.len() {
            assert_eq!(p.parse(&input[..cut]), Ok(None));
        }
        assert_eq!(p.parse(&input).unwrap().as_ref(), Some(&whole));
    }
}

#[test]
fn every_split_of_an_error_gives_the_same_error() {
    for input in [
        &b"*1\r\nX\r\n"[..],
        b"*1\r\n$-1\r\n",
        b"*x\r\n",
        b"set \"a\r\n",
    ] {
        let whole = error(input);
        for cut in 0..input.len() {
            let mut p = parser();
            assert_eq!(p.parse(&input[..cut]), Ok(None));
            assert_eq!(p.parse(input), Err(whole.clone()));
        }
    }
}

#[test]
fn pipelined_requests() {
    let input: Vec<u8> = [
        &b"PING\r\n"[..],
        b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n",
        b"*0\r\n",
        b"SET a \"b c\"\n",
        b"\r\n",
        b"*1\r\n$4\r\nQUIT\r\n",
        b"*1\r\n$4\r\nEC",
    ]
    .concat();
    let expected = vec![
        (6, strings(&[b"PING"])),
        (20, strings(&[b"GET", b"a"])),
        (4, vec![]),
        (12, strings(&[b"SET", b"a", b"b c"])),
        (2, vec![]),
        (14, strings(&[b"QUIT"])),
    ];
    let mut p = parser();
    let session = drive(&mut p, [input.as_slice()]);
    assert_eq!(session.requests, expected);
    assert_eq!(session.end, Ok(10));
    assert!(p.in_progress());

    // Same stream, one byte per read.
    let mut p = parser();
    let session = drive(&mut p, input.chunks(1));
    assert_eq!(session.requests, expected);
    assert_eq!(session.end, Ok(10));

    // An error ends the stream after the requests before it.
    let mut p = parser();
    let bad = [&input[..26], b"*1\r\n!"].concat();
    let session = drive(&mut p, [bad.as_slice(), b"\r\n"]);
    assert_eq!(session.requests, expected[..2].to_vec());
    assert_eq!(session.end, Err(ProtocolError::ExpectedDollar(b'!')));
}

#[test]
fn large_frame_in_4k_reads_is_linear() {
    let args: Vec<Vec<u8>> = (0..40_000)
        .map(|i| format!("arg-{i}").into_bytes())
        .collect();
    let input = encode(&args);
    let mut p = parser();
    let mut buf = Vec::new();
    let mut calls = 0;
    let mut result = None;
    for chunk in input.chunks(4096) {
        assert!(result.is_none());
        buf.extend_from_slice(chunk);
        calls += 1;
        result = p.parse(&buf).unwrap();
    }
    let req = result.expect("complete after the last read");
    assert_eq!(req.consumed, input.len());
    assert_eq!(resolve(&buf, &req), args);
    // Each byte searched at most once, plus at most one '\r' revisited per call.
    assert!(
        p.examined <= input.len() + calls,
        "{} > {} + {calls}",
        p.examined,
        input.len()
    );
}

#[test]
fn byte_at_a_time_is_linear() {
    let args: Vec<Vec<u8>> = (0..2_000).map(|i| format!("{i}").into_bytes()).collect();
    let input = encode(&args);
    let mut p = parser();
    for cut in 0..input.len() {
        assert_eq!(p.parse(&input[..cut]), Ok(None));
    }
    let req = p.parse(&input).unwrap().unwrap();
    assert_eq!(resolve(&input, &req), args);
    assert!(p.examined <= 2 * input.len() + 1);
}

#[test]
fn bulk_payload_is_never_scanned() {
    let payload = vec![b'\r'; 1 << 20];
    let input = encode(&[b"SET".to_vec(), b"k".to_vec(), payload]);
    let mut p = parser();
    let mut buf = Vec::new();
    let mut calls = 0;
    let mut result = None;
    for chunk in input.chunks(4096) {
        buf.extend_from_slice(chunk);
        calls += 1;
        result = p.parse(&buf).unwrap();
    }
    assert_eq!(result.unwrap().consumed, input.len());
    assert!(p.examined <= 64 + calls, "{}", p.examined);
}

#[test]
fn long_inline_line_in_small_reads_is_linear() {
    let mut input = b"SET k ".to_vec();
    input.resize(60_000, b'v');
    input.extend_from_slice(b"\r\n");
    let mut p = parser();
    let mut calls = 0;
    for cut in (0..input.len()).step_by(7) {
        calls += 1;
        assert_eq!(p.parse(&input[..cut]), Ok(None));
    }
    let req = p.parse(&input).unwrap().unwrap();
    assert_eq!(req.consumed, input.len());
    assert!(p.examined <= input.len() + calls);
}

// ---- the short way for plain lines ----

#[test]
fn plain_lines_cover_the_edges_of_their_form() {
    // Lengths of 0 and of 18 digits' worth, a count of one, and what falls back: a leading
    // zero, a sign, 19 digits, a line not complete yet.
    assert_eq!(complete(b"*1\r\n$0\r\n\r\n"), (10, strings(&[b""])));
    assert_eq!(
        error(b"*1\r\n$01\r\nx\r\n"),
        ProtocolError::InvalidBulkLength
    );
    assert_eq!(
        error(b"*1\r\n$+1\r\nx\r\n"),
        ProtocolError::InvalidBulkLength
    );
    assert_eq!(
        error(b"*1\r\n$1000000000000000000\r\n"),
        ProtocolError::InvalidBulkLength
    );
    assert_eq!(error(b"*01\r\n"), ProtocolError::InvalidMultibulkLength);
    pending(b"*1\r\n$1\r");
    pending(b"*1\r\n$1\r\nx\r");
    assert_eq!(complete(b"*1\r\n$1\r\nx\r\n"), (11, strings(&[b"x"])));
    // The byte after a line's CR is skipped unchecked on the short way too.
    assert_eq!(complete(b"*1\rX$1\rYxZZ"), (11, strings(&[b"x"])));
}

#[test]
fn short_length_lines_read_at_fixed_offsets_as_the_loop_reads_them() {
    // Every line of up to five bytes over digits, CR, LF and a few other bytes, at the
    // front of the buffer and after one byte: the one and two digit forms against the loop.
    let alphabet = b"0159\r\n$-x";
    let mut lines: Vec<Vec<u8>> = vec![Vec::new()];
    for _ in 0..5 {
        let longer: Vec<Vec<u8>> = lines
            .iter()
            .filter(|l| l.len() == lines.last().map_or(0, Vec::len))
            .flat_map(|l| {
                alphabet.iter().map(move |&b| {
                    let mut l = l.clone();
                    l.push(b);
                    l
                })
            })
            .collect();
        lines.extend(longer);
    }
    for line in &lines {
        for from in [0, 1] {
            let mut buf = vec![b'$'; from];
            buf.extend_from_slice(line);
            assert_eq!(
                super::plain_line(&buf, from),
                super::plain_line_loop(&buf, from),
                "{:?} from {from}",
                String::from_utf8_lossy(&buf)
            );
        }
        // A whole argument's masks against the loop: `$`, the line, then a payload of
        // 0 to 12 bytes (so short, whole and cut payloads of the lengths read).
        for payload in [0, 1, 5, 9, 10, 12] {
            let mut buf = b"x$".to_vec();
            buf.extend_from_slice(line);
            buf.extend(std::iter::repeat_n(b'y', payload));
            let by_loop = super::plain_line_loop(&buf, 2)
                .filter(|&(len, data)| len <= 99 && data + len + 2 <= buf.len())
                .map(|(len, data)| (data, data + len));
            assert_eq!(
                super::short_bulk(&buf, 1),
                by_loop,
                "{:?}",
                String::from_utf8_lossy(&buf)
            );
        }
    }
}

#[test]
fn a_request_parsed_the_short_way_then_one_that_is_not() {
    // A plain request, then one whose second length line has a sign: the general path
    // takes over at that line, with the first argument already taken.
    let mut input = encode(&strings(&[b"GET", b"k"]));
    input.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$-1\r\n");
    let session = drive(&mut parser(), [input.as_slice()]);
    assert_eq!(session.requests, vec![(20, strings(&[b"GET", b"k"]))]);
    assert_eq!(session.end, Err(ProtocolError::InvalidBulkLength));
}

#[test]
fn short_requests_are_taken_whole_and_the_rest_left_to_the_general_path() {
    let short = |limits: Limits, input: &[u8]| {
        let mut p = RequestParser::new(limits);
        let got = p.short_request(input);
        (got, p.ranges.clone())
    };
    let d = Limits::default();
    // The common forms: one and two digit lengths, an empty argument, bytes after it.
    let mut input = client_bytes(&[b"CL.THROTTLE", b"k", b"15", b"", b"60"]);
    let len = input.len();
    input.extend_from_slice(b"*1\r\n");
    let (consumed, ranges) = short(d, &input);
    assert_eq!(consumed, Some(len));
    let args: Vec<&[u8]> = ranges.iter().map(|r| &input[r.clone()]).collect();
    assert_eq!(args, [&b"CL.THROTTLE"[..], b"k", b"15", b"", b"60"]);
    // A payload of 99 bytes is short; the byte after each CR is not checked.
    let long = vec![b'x'; 99];
    assert_eq!(short(d, &client_bytes(&[&long])).0, Some(110));
    assert_eq!(short(d, b"*1\rX$1\rYxZZ").0, Some(11));
    // Everything else is left, with nothing written: 100 bytes, a leading zero, a sign,
    // not complete, a count the bytes cannot hold, zero, the limits, inline.
    let declined: [(Limits, &[u8]); 12] = [
        (d, &client_bytes(&[&[b'x'; 100]])),
        (d, b"*1\r\n$01\r\nx\r\n"),
        (d, b"*1\r\n$+1\r\nx\r\n"),
        (d, b"*01\r\n$1\r\nx\r\n"),
        (d, b"*1\r\n$1\r\nx\r"),
        (d, b"*2\r\n$1\r\nx\r\n$1\r\n"),
        (d, b"*3\r\n$1\r\nx\r\n$1\r\nx\r\n"),
        (d, b"*0\r\n"),
        (
            Limits {
                max_multibulk_len: 1,
                ..d
            },
            &client_bytes(&[b"GET", b"k"]),
        ),
        (
            Limits {
                unauthenticated: true,
                ..d
            },
            &client_bytes(&[&b"k"[..]; 11]),
        ),
        (
            Limits {
                max_bulk_len: 98,
                ..d
            },
            &client_bytes(&[b"GET", b"k"]),
        ),
        (d, b"GET k\r\n"),
    ];
    for (limits, input) in declined {
        assert_eq!(
            short(limits, input),
            (None, vec![]),
            "{}",
            input.escape_ascii()
        );
    }
    // At the limits it is taken: an unauthenticated client's ten arguments.
    let ten = client_bytes(&[&b"k"[..]; 10]);
    let unauthenticated = Limits {
        unauthenticated: true,
        ..d
    };
    assert_eq!(short(unauthenticated, &ten).0, Some(ten.len()));
}

// ---- properties ----

/// Bytes biased towards the ones that matter to the protocol.
/// `frames` encoded, with a few bytes replaced (`mutations`), split at `points`: the
/// session `read` makes of them with a parser under `limits`, and the session the general
/// path alone makes (what every short way must read the same).
fn against_general(
    frames: &[Vec<Vec<u8>>],
    mutations: &[(prop::sample::Index, u8)],
    points: &[prop::sample::Index],
    limits: Limits,
    read: fn(&mut RequestParser, &[Vec<u8>]) -> Session,
) -> (Session, Session) {
    let mut input: Vec<u8> = frames.iter().flat_map(|f| encode(f)).collect();
    for (at, byte) in mutations {
        let i = at.index(input.len());
        input[i] = *byte;
    }
    let points: Vec<usize> = points.iter().map(|i| i.index(input.len() + 1)).collect();
    let chunks = chunks_at(&input, &points);
    let mut general = RequestParser::new(limits);
    general.general_only = true;
    let expected = drive_chunks(&mut general, &chunks);
    (read(&mut RequestParser::new(limits), &chunks), expected)
}

fn protocol_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        3 => any::<u8>(),
        2 => prop::sample::select(&b"*$\r\n\r\n0123456789-+ \t\"'\\x\0"[..]),
    ]
}

fn arg_vec() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(protocol_byte(), 0..40), 1..12)
}

/// The tail of an arbitrary byte stream starting the ways requests start.
fn noise() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(vec![
            &b""[..],
            b"*",
            b"*2\r\n",
            b"*2\r\n$",
            b"*1\r\n$3\r\n",
            b"\"",
        ]),
        prop::collection::vec(protocol_byte(), 0..200),
    )
        .prop_map(|(prefix, rest)| [prefix, &rest[..]].concat())
}

proptest! {
    /// `fill_args` hands out every argument with the bytes the parser found, as slices
    /// of the frame's memory.
    #[test]
    fn fill_args_gives_the_parsed_arguments(frames in prop::collection::vec(arg_vec(), 1..4)) {
        let mut input = Vec::new();
        for args in &frames {
            input.extend_from_slice(&encode(args));
        }
        let mut buf = bytes::BytesMut::from(&input[..]);
        let mut p = parser();
        let mut out = Vec::new();
        for args in &frames {
            let req = p.parse(&buf).expect("valid").expect("complete");
            let frame = buf.split_to(req.consumed).freeze();
            let start = frame.as_ptr() as usize;
            let end = start + frame.len();
            p.fill_args(req.args, frame, &mut out);
            prop_assert_eq!(out.iter().map(|a| a.to_vec()).collect::<Vec<_>>(), args.clone());
            for a in &out {
                let at = a.as_ptr() as usize;
                prop_assert!(a.is_empty() || (at >= start && at + a.len() <= end));
            }
        }
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn multibulk_round_trip_agrees_with_redis_protocol(args in arg_vec()) {
        let input = encode(&args);
        prop_assert_eq!(complete(&input), (input.len(), args.clone()));

        let (frame, used) = redis_protocol::resp2::decode::decode(&input)
            .expect("valid RESP")
            .expect("complete frame");
        prop_assert_eq!(used, input.len());
        let redis_protocol::resp2::types::OwnedFrame::Array(frames) = frame else {
            panic!("not an array");
        };
        let theirs: Vec<Vec<u8>> = frames
            .into_iter()
            .map(|f| match f {
                redis_protocol::resp2::types::OwnedFrame::BulkString(b) => b,
                other => panic!("not a bulk string: {other:?}"),
            })
            .collect();
        prop_assert_eq!(theirs, args);
    }

    #[test]
    fn pipelined_frames_survive_any_split(
        frames in prop::collection::vec(arg_vec(), 1..5),
        points in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let input: Vec<u8> = frames.iter().flat_map(|f| encode(f)).collect();
        let points: Vec<usize> = points.iter().map(|i| i.index(input.len() + 1)).collect();
        let session = drive_chunks(&mut parser(), &chunks_at(&input, &points));
        let expected: Vec<Parsed> = frames
            .iter()
            .map(|f| (encode(f).len(), f.clone()))
            .collect();
        prop_assert_eq!(session.requests, expected);
        prop_assert_eq!(session.end, Ok(0));
    }

    #[test]
    fn inline_quoted_round_trip(args in arg_vec(), single in any::<bool>()) {
        let mut line = Vec::new();
        for arg in &args {
            if single && !arg.iter().any(|&b| matches!(b, b'\'' | b'\\' | b'\n' | 0)) {
                // Single quotes keep everything but \' verbatim.
                line.push(b'\'');
                line.extend_from_slice(arg);
                line.push(b'\'');
            } else {
                line.push(b'"');
                for &b in arg {
                    line.extend_from_slice(format!("\\x{b:02x}").as_bytes());
                }
                line.push(b'"');
            }
            line.push(b' ');
        }
        line.extend_from_slice(b"\r\n");
        prop_assert_eq!(complete(&line), (line.len(), args));
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_split_does_not_matter(
        input in noise(),
        points in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let whole = drive(&mut parser(), [input.as_slice()]);
        let points: Vec<usize> = points.iter().map(|i| i.index(input.len() + 1)).collect();
        let split = drive_chunks(&mut parser(), &chunks_at(&input, &points));
        prop_assert_eq!(split, whole);
    }

    #[test]
    fn arbitrary_bytes_with_tiny_limits_never_panic(
        input in noise(),
        points in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        max_bulk_len in 0usize..8,
        max_inline_len in 0usize..16,
        max_multibulk_len in 0usize..4,
    ) {
        let limits = Limits { max_bulk_len, max_inline_len, max_multibulk_len, unauthenticated: false };
        let points: Vec<usize> = points.iter().map(|i| i.index(input.len() + 1)).collect();
        let _ = drive_chunks(&mut RequestParser::new(limits), &chunks_at(&input, &points));
    }

    /// The short way for plain lines reads every input as the general path alone does:
    /// frames with a few bytes changed (digits, signs, NULs, CRs where lines are), under
    /// any limits, authenticated or not, in any split.
    #[test]
    fn plain_lines_read_as_the_general_path_reads_them(
        frames in prop::collection::vec(arg_vec(), 1..4),
        mutations in prop::collection::vec((any::<prop::sample::Index>(), protocol_byte()), 0..3),
        points in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        max_bulk_len in prop::sample::select(vec![0usize, 1, 3, 39, 512 * 1024 * 1024]),
        max_multibulk_len in prop::sample::select(vec![0usize, 1, 2, 11, i32::MAX as usize]),
        unauthenticated in any::<bool>(),
    ) {
        let limits = Limits { max_bulk_len, max_inline_len: 64 * 1024, max_multibulk_len, unauthenticated };
        let (read, general) = against_general(&frames, &mutations, &points, limits, drive_chunks);
        prop_assert_eq!(read, general);
    }

    /// The same, with the count and length lines written in the forms the short way must
    /// leave to the general path (leading zeros, signs, spaces, NULs, 19 digits, no LF).
    #[test]
    fn odd_length_lines_read_as_the_general_path_reads_them(
        frames in prop::collection::vec((arg_vec(), prop::collection::vec(0u8..10, 13)), 1..4),
        points in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        unauthenticated in any::<bool>(),
    ) {
        let line = |out: &mut Vec<u8>, kind: u8, n: usize, form: u8| {
            out.push(kind);
            let digits = n.to_string();
            let digits = match form {
                1 => format!("0{digits}"),
                2 => format!("+{digits}"),
                3 => format!("-{digits}"),
                4 => format!("{digits} "),
                5 => format!("\0{digits}"),
                6 => format!("{n:019}"),
                7 => format!("{}", n + 1),
                _ => digits,
            };
            out.extend_from_slice(digits.as_bytes());
            out.extend_from_slice(if form == 8 { b"\rX" } else { b"\r\n" });
        };
        let mut input = Vec::new();
        for (args, forms) in &frames {
            line(&mut input, b'*', args.len(), forms[0]);
            for (i, arg) in args.iter().enumerate() {
                line(&mut input, b'$', arg.len(), forms[1 + i]);
                input.extend_from_slice(arg);
                input.extend_from_slice(b"\r\n");
            }
        }
        let limits = Limits { unauthenticated, ..Limits::default() };
        let points: Vec<usize> = points.iter().map(|i| i.index(input.len() + 1)).collect();
        let chunks = chunks_at(&input, &points);
        let mut general = RequestParser::new(limits);
        general.general_only = true;
        let expected = drive_chunks(&mut general, &chunks);
        prop_assert_eq!(drive_chunks(&mut RequestParser::new(limits), &chunks), expected);
    }

    /// Requests listed the event loop's way (`list`, which takes short requests whole)
    /// read as the general path alone parses them: frames with a few bytes changed, under
    /// any limits, in any split.
    #[test]
    fn listed_requests_read_as_the_general_path_reads_them(
        frames in prop::collection::vec(arg_vec(), 1..4),
        mutations in prop::collection::vec((any::<prop::sample::Index>(), protocol_byte()), 0..3),
        points in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        max_bulk_len in prop::sample::select(vec![0usize, 3, 98, 99, 512 * 1024 * 1024]),
        max_multibulk_len in prop::sample::select(vec![0usize, 1, 2, 11, i32::MAX as usize]),
        unauthenticated in any::<bool>(),
    ) {
        let limits = Limits { max_bulk_len, max_inline_len: 64 * 1024, max_multibulk_len, unauthenticated };
        let (read, general) = against_general(&frames, &mutations, &points, limits, drive_listed);
        prop_assert_eq!(read, general);
    }

    #[test]
    fn noise_reads_as_the_general_path_reads_it(
        input in noise(),
        points in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let points: Vec<usize> = points.iter().map(|i| i.index(input.len() + 1)).collect();
        let chunks = chunks_at(&input, &points);
        let mut general = parser();
        general.general_only = true;
        let expected = drive_chunks(&mut general, &chunks);
        prop_assert_eq!(drive_chunks(&mut parser(), &chunks), expected);
    }

    #[test]
    fn mutated_frames_never_panic(
        args in arg_vec(),
        at in any::<prop::sample::Index>(),
        byte in protocol_byte(),
        points in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let mut input = encode(&args);
        let i = at.index(input.len());
        input[i] = byte;
        let whole = drive(&mut parser(), [input.as_slice()]);
        let points: Vec<usize> = points.iter().map(|i| i.index(input.len() + 1)).collect();
        prop_assert_eq!(drive_chunks(&mut parser(), &chunks_at(&input, &points)), whole);
    }

}
