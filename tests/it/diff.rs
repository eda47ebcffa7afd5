//! The differential test: every `tests/diff/*.txt` transcript is sent, line by line, to a real
//! `redis-server` and to sluice, and the reply bytes must be identical.
//!
//! # Transcript format
//!
//! - Blank lines and lines starting with `#` are ignored.
//! - Every other line is a command, split into arguments by redis-cli's inline rules
//!   (whitespace separates; `"double quotes"` allow `\n \r \t \b \a \\ \" \xHH`;
//!   `'single quotes'` allow `\'`) and sent as a RESP multibulk request.
//! - Directives in square brackets may start a line, before the command:
//!   - `[sort]`: the reply is an array, set or map; its top-level elements (a map's
//!     key/value pairs) are sorted by their encoded bytes on both sides before comparing;
//!   - `[sortpairs]`: like `[sort]`, for a flat array of pairs (RESP2 HGETALL): sorts the
//!     (field, value) pairs;
//!   - `[any]`: only the reply's type byte (its first byte) is compared;
//!   - `[sleep N]`: sleep N ms (N ≤ 300) before sending;
//!   - `[raw] text`: the rest of the line, after unescaping `\r \n \t \b \a \0 \\ \" \xHH`, is
//!     sent as raw bytes. All the replies that arrive are compared, and whether the server
//!     closed the connection (protocol errors do). If either side closed, both connections are
//!     reopened (with `HELLO 2`, without `FLUSHALL`) for the following lines. A `[raw]` line
//!     must provoke at least one reply (an empty line alone gets none: follow it by `PING\r\n`).
//! - Every command line must get exactly one reply within 2 s; no reply is a mismatch.
//!
//! Each file gets its own fresh `redis-server` and sluice, one connection to each, and
//! `FLUSHALL` + `HELLO 2` (replies discarded) before its first line. Client ids are kept equal
//! on both sides (after connecting, the side with the lower id reconnects until they match), so
//! `CLIENT ID` and `HELLO` replies compare exactly. `QUIT` lines also wait for the connection to
//! close and reopen both.
//!
//! `SLUICE_DIFF_VERBOSE=1 cargo test --test it diff::<file> -- --nocapture` prints every line
//! with both replies, which helps when writing a transcript.
//!
//! Each file named in `transcripts!` below is its own `#[test]`; `unlisted_transcripts` runs
//! every other file in the directory, so a new transcript is never silently skipped.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::{Conn, Read1, RedisServer, escape, frame_len, sluice};

/// How long a command may take to answer.
const REPLY_TIMEOUT: Duration = Duration::from_secs(2);
/// After a `[raw]` line's first reply: the connection counts as settled after this long
/// without more bytes.
const RAW_QUIET: Duration = Duration::from_millis(60);
/// Upper bound for `[sleep N]`.
const MAX_SLEEP_MS: u64 = 300;

macro_rules! transcripts {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                run_files(&[transcript_dir().join(concat!(stringify!($name), ".txt"))]);
            }
        )*
        /// The transcripts that have their own test.
        const LISTED: &[&str] = &[$(concat!(stringify!($name), ".txt")),*];
    };
}

transcripts!(
    strings,
    keys,
    server,
    txn,
    protocol,
    types,
    hash,
    list,
    set,
    zset,
    string_ranges,
    bitmap,
    set_algebra,
    list_mpop,
    hyperloglog,
);

/// Runs every transcript not listed above.
#[test]
fn unlisted_transcripts() {
    let files: Vec<PathBuf> = all_transcripts()
        .into_iter()
        .filter(|p| {
            !LISTED
                .iter()
                .any(|l| p.file_name().is_some_and(|n| n == *l))
        })
        .collect();
    run_files(&files);
}

fn transcript_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("diff")
}

fn all_transcripts() -> Vec<PathBuf> {
    let dir = transcript_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    files
}

/// Runs each file; panics listing every mismatch of every file.
fn run_files(files: &[PathBuf]) {
    let mut failures = Vec::new();
    for path in files {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        failures.extend(run_transcript(&name, &text));
    }
    if !failures.is_empty() {
        panic!(
            "{} mismatch(es) between redis-server and sluice:\n\n{}\n",
            failures.len(),
            failures.join("\n\n")
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Transcript parsing

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    /// Sort elements (a map's pairs).
    Elements,
    /// Sort consecutive (field, value) pairs of a flat array.
    Pairs,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Payload {
    Args(Vec<Vec<u8>>),
    Raw(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Step {
    line: usize,
    text: String,
    sort: Sort,
    any: bool,
    sleep_ms: u64,
    payload: Payload,
}

/// Parses a transcript into steps; errors name the line.
fn parse_transcript(name: &str, text: &str) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    for (i, raw_line) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw_line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let err = |m: String| format!("{name}:{line}: bad transcript line `{raw_line}`: {m}");
        let mut step = Step {
            line,
            text: trimmed.trim_end().to_string(),
            sort: Sort::None,
            any: false,
            sleep_ms: 0,
            payload: Payload::Args(Vec::new()),
        };
        let mut rest = trimmed;
        let mut raw = None;
        while let Some(after) = rest.strip_prefix('[') {
            let close = after
                .find(']')
                .ok_or_else(|| err("unclosed directive".into()))?;
            let directive = &after[..close];
            rest = &after[close + 1..];
            let mut words = directive.split_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some("sort"), None, _) => step.sort = Sort::Elements,
                (Some("sortpairs"), None, _) => step.sort = Sort::Pairs,
                (Some("any"), None, _) => step.any = true,
                (Some("sleep"), Some(n), None) => {
                    let ms: u64 = n.parse().map_err(|_| err(format!("bad sleep `{n}`")))?;
                    if ms > MAX_SLEEP_MS {
                        return Err(err(format!(
                            "sleep {ms} ms is over the {MAX_SLEEP_MS} ms limit"
                        )));
                    }
                    step.sleep_ms = ms;
                }
                (Some("raw"), None, _) => {
                    // The text after one separating space, verbatim.
                    let text = rest.strip_prefix(' ').unwrap_or(rest);
                    raw = Some(unescape_raw(text).map_err(err)?);
                    break;
                }
                _ => return Err(err(format!("unknown directive [{directive}]"))),
            }
            rest = rest.trim_start();
        }
        step.payload = match raw {
            Some(bytes) => {
                if bytes.is_empty() {
                    return Err(err("empty [raw] line".into()));
                }
                Payload::Raw(bytes)
            }
            None => {
                let args =
                    split_args(rest.as_bytes()).ok_or_else(|| err("unbalanced quotes".into()))?;
                if args.is_empty() {
                    return Err(err("no command".into()));
                }
                Payload::Args(args)
            }
        };
        steps.push(step);
    }
    Ok(steps)
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// Splits a line like redis-cli / Redis's `sdssplitargs`; `None` on unbalanced quotes.
fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let mut i = 0;
    let is_space = |b: u8| matches!(b, b' ' | b'\n' | b'\r' | b'\t' | 0x0b | 0x0c);
    loop {
        while i < line.len() && is_space(line[i]) {
            i += 1;
        }
        if i >= line.len() {
            return Some(args);
        }
        let mut cur = Vec::new();
        let (mut in_dq, mut in_sq) = (false, false);
        loop {
            let c = line.get(i).copied();
            if in_dq {
                match c {
                    None => return None,
                    Some(b'\\')
                        if line.get(i + 1) == Some(&b'x')
                            && line.get(i + 2).copied().and_then(hex).is_some()
                            && line.get(i + 3).copied().and_then(hex).is_some() =>
                    {
                        cur.push(hex(line[i + 2])? * 16 + hex(line[i + 3])?);
                        i += 3;
                    }
                    Some(b'\\') if i + 1 < line.len() => {
                        i += 1;
                        cur.push(match line[i] {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'a' => 0x07,
                            other => other,
                        });
                    }
                    Some(b'"') => {
                        if line.get(i + 1).is_some_and(|&n| !is_space(n)) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    Some(other) => cur.push(other),
                }
            } else if in_sq {
                match c {
                    None => return None,
                    Some(b'\\') if line.get(i + 1) == Some(&b'\'') => {
                        i += 1;
                        cur.push(b'\'');
                    }
                    Some(b'\'') => {
                        if line.get(i + 1).is_some_and(|&n| !is_space(n)) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    Some(other) => cur.push(other),
                }
            } else {
                match c {
                    None => break,
                    Some(b) if is_space(b) => break,
                    Some(b'"') => in_dq = true,
                    Some(b'\'') => in_sq = true,
                    Some(other) => cur.push(other),
                }
            }
            i += 1;
        }
        args.push(cur);
    }
}

/// Unescapes a `[raw]` line: `\r \n \t \b \a \0 \\ \" \' \xHH`.
fn unescape_raw(text: &str) -> Result<Vec<u8>, String> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let Some(&e) = b.get(i + 1) else {
            return Err("trailing backslash".into());
        };
        i += 2;
        out.push(match e {
            b'r' => b'\r',
            b'n' => b'\n',
            b't' => b'\t',
            b'b' => 0x08,
            b'a' => 0x07,
            b'0' => 0,
            b'\\' | b'"' | b'\'' => e,
            b'x' => {
                let v = b
                    .get(i..i + 2)
                    .and_then(|h| Some(hex(h[0])? * 16 + hex(h[1])?));
                i += 2;
                v.ok_or("bad \\x escape")?
            }
            other => return Err(format!("unknown escape \\{}", other as char)),
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Running

/// One connection to each server.
struct Pair {
    redis_addr: std::net::SocketAddr,
    sluice_addr: std::net::SocketAddr,
    redis: Conn,
    sluice: Conn,
}

fn client_id(conn: &mut Conn) -> i64 {
    let reply = conn.cmd(&[b"CLIENT", b"ID"]);
    std::str::from_utf8(&reply)
        .ok()
        .and_then(|s| s.strip_prefix(':'))
        .and_then(|s| s.trim_end().parse().ok())
        .unwrap_or_else(|| panic!("CLIENT ID answered {}", escape(&reply)))
}

impl Pair {
    fn open(redis_addr: std::net::SocketAddr, sluice_addr: std::net::SocketAddr) -> Pair {
        let mut pair = Pair {
            redis_addr,
            sluice_addr,
            redis: Conn::connect(redis_addr),
            sluice: Conn::connect(sluice_addr),
        };
        pair.equalize_ids();
        for conn in [&mut pair.redis, &mut pair.sluice] {
            conn.cmd(&[b"HELLO", b"2"]);
        }
        pair
    }

    /// Reconnects the side with the lower client id until both ids are equal.
    fn equalize_ids(&mut self) {
        for _ in 0..10_000 {
            let (r, s) = (client_id(&mut self.redis), client_id(&mut self.sluice));
            match r.cmp(&s) {
                std::cmp::Ordering::Equal => return,
                std::cmp::Ordering::Less => self.redis = Conn::connect(self.redis_addr),
                std::cmp::Ordering::Greater => self.sluice = Conn::connect(self.sluice_addr),
            }
        }
        panic!("could not make the client ids of redis-server and sluice equal");
    }

    fn reopen(&mut self) {
        *self = Pair::open(self.redis_addr, self.sluice_addr);
    }
}

/// What one side did in answer to a step.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    replies: Vec<Vec<u8>>,
    /// The connection closed.
    closed: bool,
    /// Something other than complete replies: a timeout, bytes left over, garbage.
    trouble: Option<String>,
}

impl Outcome {
    fn render(&self) -> String {
        let mut parts: Vec<String> = self.replies.iter().map(|r| escape(r)).collect();
        if let Some(t) = &self.trouble {
            parts.push(format!("<{t}>"));
        }
        if self.closed {
            parts.push("<connection closed>".into());
        }
        if parts.is_empty() {
            "<nothing>".into()
        } else {
            parts.join(" ")
        }
    }

    /// The form that is compared, after the step's directives.
    fn normalized(&self, step: &Step) -> Outcome {
        let replies = self
            .replies
            .iter()
            .map(|r| {
                if step.any {
                    r[..1].to_vec()
                } else {
                    sort_reply(r, step.sort)
                }
            })
            .collect();
        Outcome {
            replies,
            closed: self.closed,
            trouble: self.trouble.clone(),
        }
    }
}

/// Reads the single reply to a command.
fn read_command_reply(conn: &mut Conn) -> Outcome {
    let mut out = Outcome {
        replies: Vec::new(),
        closed: false,
        trouble: None,
    };
    match conn.read_one(REPLY_TIMEOUT) {
        Read1::Reply(r) => out.replies.push(r),
        Read1::Eof(rest) => {
            out.closed = true;
            if !rest.is_empty() {
                out.trouble = Some(format!("incomplete reply {}", escape(&rest)));
            }
        }
        Read1::Timeout(rest) => {
            out.trouble = Some(format!(
                "no reply within {:?} (got {})",
                REPLY_TIMEOUT,
                escape(&rest)
            ));
        }
        Read1::Garbage(e) => out.trouble = Some(e),
    }
    out
}

/// Moves every complete reply already buffered on `conn` into `out`, and notes a seen EOF.
/// Never waits.
fn drain_buffered(conn: &mut Conn, out: &mut Outcome) {
    while out.trouble.is_none() && !out.closed {
        match conn.read_one(Duration::ZERO) {
            Read1::Reply(r) => out.replies.push(r),
            Read1::Eof(rest) => {
                out.closed = true;
                if !rest.is_empty() {
                    out.trouble = Some(format!("incomplete reply {}", escape(&rest)));
                }
            }
            Read1::Timeout(_) => return,
            Read1::Garbage(e) => out.trouble = Some(e),
        }
    }
}

/// Collects every reply to a `[raw]` line, until both connections are quiet or closed.
fn read_raw_replies(pair: &mut Pair) -> (Outcome, Outcome) {
    let mut outs = [
        read_command_reply(&mut pair.redis),
        read_command_reply(&mut pair.sluice),
    ];
    let mut conns = [&mut pair.redis, &mut pair.sluice];
    let mut last_activity = [Instant::now(); 2];
    loop {
        let mut active = false;
        for (k, conn) in conns.iter_mut().enumerate() {
            drain_buffered(conn, &mut outs[k]);
            if outs[k].trouble.is_some()
                || outs[k].closed
                || last_activity[k].elapsed() >= RAW_QUIET
            {
                continue;
            }
            active = true;
            if conn.poll(Duration::from_millis(5)) {
                last_activity[k] = Instant::now();
            }
        }
        if !active {
            break;
        }
    }
    let [a, b] = outs;
    (a, b)
}

/// Sends a transcript to both servers; returns the mismatches.
fn run_transcript(name: &str, text: &str) -> Vec<String> {
    let steps = match parse_transcript(name, text) {
        Ok(s) => s,
        Err(e) => return vec![e],
    };
    let redis_server = RedisServer::start();
    let sluice_server = sluice();
    let mut pair = Pair::open(redis_server.addr(), sluice_server.addr());
    for conn in [&mut pair.redis, &mut pair.sluice] {
        conn.cmd(&[b"FLUSHALL"]);
    }

    let verbose = std::env::var_os("SLUICE_DIFF_VERBOSE").is_some();
    let mut mismatches = Vec::new();
    for step in &steps {
        // Bytes nobody asked for mean the previous step got more than one reply: report them
        // and start this line on fresh connections.
        let mut stray = false;
        for (side, conn) in [("redis", &pair.redis), ("sluice", &pair.sluice)] {
            if !conn.buffered().is_empty() {
                stray = true;
                mismatches.push(format!(
                    "{name}:{}: {}\n  {side} sent unexpected bytes before this line: {}",
                    step.line,
                    step.text,
                    escape(conn.buffered())
                ));
            }
        }
        if stray {
            pair.reopen();
        }
        if step.sleep_ms > 0 {
            std::thread::sleep(Duration::from_millis(step.sleep_ms));
        }
        let (redis, sluice) = match &step.payload {
            Payload::Raw(bytes) => {
                // A write error means the peer is gone: the read below reports it.
                let _ = pair.redis.try_send_raw(bytes);
                let _ = pair.sluice.try_send_raw(bytes);
                read_raw_replies(&mut pair)
            }
            Payload::Args(args) => {
                let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
                let request = crate::support::encode_command(&refs);
                let _ = pair.redis.try_send_raw(&request);
                let _ = pair.sluice.try_send_raw(&request);
                let mut r = read_command_reply(&mut pair.redis);
                let mut s = read_command_reply(&mut pair.sluice);
                if args[0].eq_ignore_ascii_case(b"QUIT") {
                    for (o, c) in [(&mut r, &mut pair.redis), (&mut s, &mut pair.sluice)] {
                        let deadline = Instant::now() + Duration::from_secs(1);
                        while !c.is_closed() && Instant::now() < deadline {
                            c.poll(Duration::from_millis(20));
                        }
                        o.closed |= c.is_closed();
                    }
                }
                (r, s)
            }
        };
        if verbose {
            eprintln!(
                "{name}:{}: {}\n  redis:  {}\n  sluice: {}",
                step.line,
                step.text,
                redis.render(),
                sluice.render()
            );
        }
        // No reply in time, bytes that are not RESP, a reply cut off: a mismatch even when
        // both sides do it.
        let trouble = redis.trouble.is_some() || sluice.trouble.is_some();
        if trouble || redis.normalized(step) != sluice.normalized(step) {
            mismatches.push(format!(
                "{name}:{}: {}\n  redis:  {}\n  sluice: {}",
                step.line,
                step.text,
                redis.render(),
                sluice.render()
            ));
        }
        let broken = |o: &Outcome| o.closed || o.trouble.is_some();
        if broken(&redis) || broken(&sluice) {
            pair.reopen();
        }
    }
    mismatches
}

/// Sorts the top-level elements of an aggregate reply (see `Sort`); other replies unchanged.
fn sort_reply(reply: &[u8], sort: Sort) -> Vec<u8> {
    if sort == Sort::None || !matches!(reply.first(), Some(b'*' | b'~' | b'%')) {
        return reply.to_vec();
    }
    let Some(eol) = reply.windows(2).position(|w| w == b"\r\n") else {
        return reply.to_vec();
    };
    let Some(count) = std::str::from_utf8(&reply[1..eol])
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
    else {
        return reply.to_vec();
    };
    let per_item = if reply[0] == b'%' { 2 } else { 1 };
    let mut frames = Vec::new();
    let mut at = eol + 2;
    for _ in 0..count * per_item {
        match frame_len(&reply[at..]) {
            Ok(Some(n)) => {
                frames.push(&reply[at..at + n]);
                at += n;
            }
            _ => return reply.to_vec(),
        }
    }
    let group = if sort == Sort::Pairs {
        2 * per_item
    } else {
        per_item
    };
    if frames.len() % group != 0 {
        return reply.to_vec();
    }
    let mut items: Vec<Vec<u8>> = frames.chunks(group).map(|c| c.concat()).collect();
    items.sort();
    let mut out = reply[..eol + 2].to_vec();
    for item in items {
        out.extend_from_slice(&item);
    }
    out.extend_from_slice(&reply[at..]);
    out
}

#[test]
fn split_args_follows_redis_cli() {
    let s = |l: &str| split_args(l.as_bytes());
    assert_eq!(
        s("set a b"),
        Some(vec![b"set".to_vec(), b"a".to_vec(), b"b".to_vec()])
    );
    assert_eq!(
        s("  get   \"x y\"  "),
        Some(vec![b"get".to_vec(), b"x y".to_vec()])
    );
    assert_eq!(
        s(r#"set "a\x41\n\"" 'it\'s'"#),
        Some(vec![b"set".to_vec(), b"aA\n\"".to_vec(), b"it's".to_vec()])
    );
    assert_eq!(
        s(r#"set "" ''"#),
        Some(vec![b"set".to_vec(), vec![], vec![]])
    );
    assert_eq!(s(r#"a"b c""#), Some(vec![b"ab c".to_vec()]));
    assert_eq!(s(r#"set "a"b"#), None);
    assert_eq!(s(r#"set "abc"#), None);
    assert_eq!(s("set 'abc"), None);
    assert_eq!(s(""), Some(vec![]));
}

#[test]
fn transcript_directives_parse() {
    let steps = parse_transcript(
        "t",
        "# c\n\n[sort] keys *\n[any] [sleep 5] time\n[raw] PING\\r\\n\n[sortpairs] hgetall h\n",
    )
    .expect("parses");
    assert_eq!(steps.len(), 4);
    assert_eq!(steps[0].sort, Sort::Elements);
    assert!(steps[1].any && steps[1].sleep_ms == 5);
    assert_eq!(steps[2].payload, Payload::Raw(b"PING\r\n".to_vec()));
    assert_eq!(steps[3].sort, Sort::Pairs);
    assert!(parse_transcript("t", "[sleep 301] ping").is_err());
    assert!(parse_transcript("t", "[bogus] ping").is_err());
    assert!(parse_transcript("t", "set \"a").is_err());
}

#[test]
fn sorting_is_by_encoded_elements() {
    assert_eq!(
        sort_reply(b"*3\r\n$1\r\nc\r\n$1\r\na\r\n:1\r\n", Sort::Elements),
        b"*3\r\n$1\r\na\r\n$1\r\nc\r\n:1\r\n"
    );
    assert_eq!(
        sort_reply(
            b"*4\r\n$1\r\nb\r\n$1\r\n1\r\n$1\r\na\r\n$1\r\n2\r\n",
            Sort::Pairs
        ),
        b"*4\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nb\r\n$1\r\n1\r\n"
    );
    assert_eq!(
        sort_reply(b"%2\r\n+b\r\n:1\r\n+a\r\n:2\r\n", Sort::Elements),
        b"%2\r\n+a\r\n:2\r\n+b\r\n:1\r\n"
    );
    assert_eq!(sort_reply(b"-ERR x\r\n", Sort::Elements), b"-ERR x\r\n");
}

#[test]
fn frame_len_reads_resp2_and_resp3() {
    for frame in [
        &b"$-1\r\n"[..],
        b"*-1\r\n",
        b"*2\r\n$-1\r\n:1\r\n",
        b"_\r\n",
        b"%1\r\n+a\r\n_\r\n",
        b"-ERR \xff bad\r\n",
        b"=9\r\ntxt:hello\r\n",
        b",1.5\r\n",
        b"~1\r\n+x\r\n",
    ] {
        let mut buf = frame.to_vec();
        buf.extend_from_slice(b"+NEXT\r\n");
        assert_eq!(frame_len(&buf), Ok(Some(frame.len())), "{}", escape(frame));
        assert_eq!(
            frame_len(&frame[..frame.len() - 1]),
            Ok(None),
            "{}",
            escape(frame)
        );
    }
}

#[test]
fn harness_reports_every_mismatch_with_its_line() {
    // CLIENT SETINFO exists in sluice but not in Redis 7.0; an empty line gets no reply from
    // either side. Both are reported, and the lines after them still run.
    let transcript = "PING\nCLIENT SETINFO lib-name x\n[raw] \\r\\n\nSET k v\n[any] CLIENT SETINFO lib-ver 1\nGET k\n";
    let mismatches = run_transcript("selftest.txt", transcript);
    assert_eq!(mismatches.len(), 3, "{mismatches:#?}");
    assert!(mismatches[0].starts_with(
        "selftest.txt:2: CLIENT SETINFO lib-name x\n  redis:  -ERR unknown subcommand"
    ));
    assert!(mismatches[0].contains("\n  sluice: +OK\\r\\n"));
    assert!(mismatches[1].starts_with("selftest.txt:3: [raw] \\r\\n\n"));
    assert!(mismatches[1].contains("no reply within"));
    assert!(mismatches[2].starts_with("selftest.txt:5: "));
}
