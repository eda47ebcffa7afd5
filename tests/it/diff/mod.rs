//! The differential test: every `tests/diff/*.txt` transcript is sent, line by line, to a real
//! `redis-server` and to sluice, and the reply bytes must be identical; the file also records
//! what Redis answered, so it reads as documentation and `cargo test` can check sluice without
//! a redis-server.
//!
//! # Transcript format
//!
//! - Blank lines and lines starting with `#` are ignored.
//! - Lines starting with `<` are Redis's recorded replies to the command line above them, one
//!   reply a line, written as `render.rs` describes (`< +OK`, `< :3`, `< "value"`, `< (nil)`,
//!   `< ["a", "b"]`, `< {"f": "v"}`, `< -ERR …`), then `< (connection closed)` if Redis closed
//!   the connection. `< ` lines hold for both protocols; where RESP2 and RESP3 differ the file
//!   has `<2 ` lines and `<3 ` lines instead. A command without recorded lines is fine (it is
//!   only compared against a live redis-server).
//! - Every other line is a command, split into arguments by redis-cli's inline rules
//!   (whitespace separates; `"double quotes"` allow `\n \r \t \b \a \\ \" \xHH`;
//!   `'single quotes'` allow `\'`) and sent as a RESP multibulk request.
//! - Directives in square brackets may start a line, before the command:
//!   - `[sort]`: the reply is an array, set or map; its top-level elements (a map's
//!     key/value pairs) are sorted by their encoded bytes on both sides before comparing;
//!   - `[sortpairs]`: like `[sort]`, for a flat array of pairs (RESP2 HGETALL): sorts the
//!     (field, value) pairs;
//!   - `[any]`: only the reply's type byte (its first byte) is compared;
//!   - `[now]`: the reply depends on the wall clock (a TTL of an absolute expiry time): it
//!     is compared exactly with the live Redis, but by type only with the recorded reply;
//!   - `[sleep N]`: sleep N ms (N ≤ 300) before sending;
//!   - `[raw] text`: the rest of the line, after unescaping `\r \n \t \b \a \0 \\ \" \xHH`, is
//!     sent as raw bytes. All the replies that arrive are compared, and whether the server
//!     closed the connection (protocol errors do). If either side closed, both connections are
//!     reopened (with `HELLO 2` or `HELLO 3` as the run, without `FLUSHALL`) for the following
//!     lines. A `[raw]` line must provoke at least one reply (an empty line alone gets none:
//!     follow it by `PING\r\n`).
//! - Every command line must get exactly one reply within 2 s; no reply is a mismatch.
//!
//! # Runs
//!
//! Each file runs twice, in RESP2 and in RESP3: each run gets its own fresh `redis-server` and
//! sluice, one connection to each, and `HELLO 2` (or `HELLO 3`) + `FLUSHALL` (replies
//! discarded) before the first line. Client ids are kept equal on both sides and the same from
//! run to run (both sides reconnect until their ids are equal and at least [`ID_FLOOR`]), so
//! `CLIENT ID` and `HELLO` replies compare exactly and can be recorded. `QUIT` lines also wait
//! for the connection to close and reopen both.
//!
//! With a redis-server (the full test command always has one), sluice is compared with the live
//! Redis, and the recorded replies with what Redis says now: a recorded reply Redis no longer
//! gives fails the test as stale. Without one on `PATH` (or with `SLUICE_DIFF_OFFLINE=1`),
//! sluice is compared with the recorded replies, after the same `[sort]`/`[any]` treatment.
//!
//! - `SLUICE_DIFF_REGENERATE=1 cargo test --test it diff` rewrites every file's recorded
//!   replies from a live redis-server (run it after adding or changing lines, then review
//!   `git diff tests/diff`).
//! - `SLUICE_DIFF_VERBOSE=1 cargo test --test it diff::<file> -- --nocapture` prints every line
//!   with both replies, which helps when writing a transcript.
//!
//! Each file named in `transcripts!` below is its own `#[test]`; `unlisted_transcripts` runs
//! every other file in the directory, so a new transcript is never silently skipped.

mod render;
mod transcript;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::{Conn, Read1, RedisServer, escape, frame_len, sluice};
use transcript::{Payload, Recorded, Sort, Step, parse_transcript};

/// How long a command may take to answer.
const REPLY_TIMEOUT: Duration = Duration::from_secs(2);
/// After a `[raw]` line's first reply: the connection counts as settled after this long
/// without more bytes.
const RAW_QUIET: Duration = Duration::from_millis(60);
/// The lowest client id a run starts with: above the connections either server may see while
/// starting (redis-server's readiness PINGs), so every run, live or offline, uses the same ids.
const ID_FLOOR: i64 = 100;

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
    strings, keys, server, txn, protocol, types, hash, list, set, zset
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

/// What the replies are checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A live redis-server; `regenerate` rewrites the recorded replies from it.
    Live { regenerate: bool },
    /// The recorded replies only.
    Offline,
}

fn mode() -> Mode {
    let set = |v: &str| std::env::var_os(v).is_some_and(|x| !x.is_empty() && x != "0");
    let regenerate = set("SLUICE_DIFF_REGENERATE");
    let have_redis = !set("SLUICE_DIFF_OFFLINE")
        && !matches!(
            std::process::Command::new("redis-server").arg("--version").output(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound
        );
    match (have_redis, regenerate) {
        (true, _) => Mode::Live { regenerate },
        (false, true) => panic!("SLUICE_DIFF_REGENERATE needs redis-server on PATH"),
        (false, false) => Mode::Offline,
    }
}

/// Runs each file in RESP2 and RESP3; panics listing every mismatch of every file.
fn run_files(files: &[PathBuf]) {
    let mode = mode();
    let mut failures = Vec::new();
    for path in files {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let steps = match parse_transcript(&name, &text) {
            Ok(s) => s,
            Err(e) => {
                failures.push(e);
                continue;
            }
        };
        let two = run_steps(&name, &steps, 2, mode);
        let three = run_steps(&name, &steps, 3, mode);
        for run in [&two, &three] {
            if run.unchecked > 0 {
                eprintln!(
                    "{name} (RESP{}): {} line(s) have no recorded reply; without redis-server they are not checked",
                    run.proto, run.unchecked
                );
            }
        }
        failures.extend(two.mismatches);
        failures.extend(three.mismatches);
        if mode == (Mode::Live { regenerate: true }) {
            let fresh: Vec<[Option<Recorded>; 2]> = steps
                .iter()
                .zip(two.fresh.into_iter().zip(three.fresh))
                .map(|(step, (a, b))| settle(step, [a, b]))
                .collect();
            let new_text = transcript::rewrite(&text, &steps, &fresh);
            if new_text != text {
                std::fs::write(path, new_text)
                    .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
                eprintln!("{name}: recorded replies regenerated");
            }
        }
    }
    if !failures.is_empty() {
        let against = match mode {
            Mode::Offline => "the recorded replies (no redis-server)",
            Mode::Live { .. } => "redis-server",
        };
        panic!(
            "{} mismatch(es) between {against} and sluice:\n\n{}\n",
            failures.len(),
            failures.join("\n\n")
        );
    }
}

/// What regenerating writes for a step, given Redis's fresh outcomes: a recorded outcome
/// that still holds (after `[sort]`/`[any]`) is kept, so a reply that varies from run to run
/// does not churn the file; outcomes the same in both protocols are written once.
fn settle(step: &Step, fresh: [Option<Recorded>; 2]) -> [Option<Recorded>; 2] {
    let same = |a: &Recorded, b: &Recorded| {
        Outcome::recorded(a).normalized(step, true) == Outcome::recorded(b).normalized(step, true)
    };
    let [two, three] = [2, 3].map(|proto| {
        let new = fresh[usize::from(proto == 3)].clone()?;
        Some(match step.recorded(proto) {
            Some(old) if same(old, &new) => old.clone(),
            _ => new,
        })
    });
    match (two, three) {
        (Some(a), Some(b)) if same(&a, &b) => [Some(a.clone()), Some(a)],
        other => [other.0, other.1],
    }
}

// ---------------------------------------------------------------------------------------------
// Running

/// One connection to each server (no redis connection when offline).
struct Pair {
    redis_addr: Option<std::net::SocketAddr>,
    sluice_addr: std::net::SocketAddr,
    redis: Option<Conn>,
    sluice: Conn,
    proto: u8,
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
    fn open(
        redis_addr: Option<std::net::SocketAddr>,
        sluice_addr: std::net::SocketAddr,
        proto: u8,
    ) -> Pair {
        let mut pair = Pair {
            redis_addr,
            sluice_addr,
            redis: redis_addr.map(Conn::connect),
            sluice: Conn::connect(sluice_addr),
            proto,
        };
        pair.equalize_ids();
        let hello: &[u8] = if proto == 3 { b"3" } else { b"2" };
        for conn in pair.conns() {
            conn.cmd(&[b"HELLO", hello]);
        }
        pair
    }

    fn conns(&mut self) -> Vec<&mut Conn> {
        let mut v: Vec<&mut Conn> = self.redis.iter_mut().collect();
        v.push(&mut self.sluice);
        v
    }

    /// Reconnects until both sides have the same client id, at least `ID_FLOOR`.
    fn equalize_ids(&mut self) {
        for _ in 0..10_000 {
            let s = client_id(&mut self.sluice);
            let r = self.redis.as_mut().map(client_id);
            let want = s.max(r.unwrap_or(0)).max(ID_FLOOR);
            if s < want {
                self.sluice = Conn::connect(self.sluice_addr);
            } else if let (Some(r), Some(addr)) = (r, self.redis_addr)
                && r < want
            {
                self.redis = Some(Conn::connect(addr));
            } else {
                return;
            }
        }
        panic!("could not make the client ids of redis-server and sluice equal");
    }

    fn reopen(&mut self) {
        *self = Pair::open(self.redis_addr, self.sluice_addr, self.proto);
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
    fn recorded(rec: &Recorded) -> Outcome {
        Outcome {
            replies: rec.replies.clone(),
            closed: rec.closed,
            trouble: None,
        }
    }

    fn render(&self) -> String {
        let mut parts: Vec<String> = self.replies.iter().map(|r| render::render(r)).collect();
        if let Some(t) = &self.trouble {
            parts.push(format!("<{t}>"));
        }
        if self.closed {
            parts.push("<connection closed>".into());
        }
        if parts.is_empty() {
            "<nothing>".into()
        } else {
            parts.join("  |  ")
        }
    }

    /// The form that is compared, after the step's directives. `recorded`: one side is a
    /// recording, so a `[now]` reply is compared by its type only.
    fn normalized(&self, step: &Step, recorded: bool) -> Outcome {
        let replies = self
            .replies
            .iter()
            .map(|r| {
                if step.any || (recorded && step.now) {
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

/// Collects every reply to a `[raw]` line, until every connection is quiet or closed.
fn read_raw_replies(mut conns: Vec<&mut Conn>) -> Vec<Outcome> {
    let mut outs: Vec<Outcome> = conns.iter_mut().map(|c| read_command_reply(c)).collect();
    let mut last_activity = vec![Instant::now(); conns.len()];
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
    outs
}

/// Sends one step to every connection of `pair`; the outcomes in `pair.conns()` order.
fn send_step(pair: &mut Pair, step: &Step) -> Vec<Outcome> {
    match &step.payload {
        Payload::Raw(bytes) => {
            for conn in pair.conns() {
                // A write error means the peer is gone: the read reports it.
                let _ = conn.try_send_raw(bytes);
            }
            read_raw_replies(pair.conns())
        }
        Payload::Args(args) => {
            let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
            let request = crate::support::encode_command(&refs);
            let quit = args[0].eq_ignore_ascii_case(b"QUIT");
            let mut conns = pair.conns();
            for conn in conns.iter_mut() {
                let _ = conn.try_send_raw(&request);
            }
            conns
                .into_iter()
                .map(|c| {
                    let mut o = read_command_reply(c);
                    if quit {
                        let deadline = Instant::now() + Duration::from_secs(1);
                        while !c.is_closed() && Instant::now() < deadline {
                            c.poll(Duration::from_millis(20));
                        }
                        o.closed |= c.is_closed();
                    }
                    o
                })
                .collect()
        }
    }
}

/// The result of one run of a transcript.
struct Run {
    proto: u8,
    mismatches: Vec<String>,
    /// Per step, what Redis answered (live runs; `None` on trouble).
    fresh: Vec<Option<Recorded>>,
    /// Steps with nothing recorded for this protocol, in an offline run.
    unchecked: usize,
}

/// Sends a transcript's steps to both servers (offline: to sluice) in RESP `proto`.
fn run_steps(name: &str, steps: &[Step], proto: u8, mode: Mode) -> Run {
    let redis_server = (mode != Mode::Offline).then(RedisServer::start);
    let sluice_server = sluice();
    let mut pair = Pair::open(
        redis_server.as_ref().map(|r| r.addr()),
        sluice_server.addr(),
        proto,
    );
    for conn in pair.conns() {
        conn.cmd(&[b"FLUSHALL"]);
    }

    let verbose = std::env::var_os("SLUICE_DIFF_VERBOSE").is_some();
    let regenerate = mode == Mode::Live { regenerate: true };
    let mut run = Run {
        proto,
        mismatches: Vec::new(),
        fresh: Vec::new(),
        unchecked: 0,
    };
    for step in steps {
        let at = format!("{name}:{} (RESP{proto}): {}", step.line, step.text);
        // Bytes nobody asked for mean the previous step got more than one reply: report them
        // and start this line on fresh connections.
        let mut stray = false;
        for (side, conn) in [
            ("redis", pair.redis.as_ref()),
            ("sluice", Some(&pair.sluice)),
        ] {
            if let Some(conn) = conn
                && !conn.buffered().is_empty()
            {
                stray = true;
                run.mismatches.push(format!(
                    "{at}\n  {side} sent unexpected bytes before this line: {}",
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
        let mut outcomes = send_step(&mut pair, step);
        let sluice = outcomes.pop().expect("sluice's outcome");
        let redis = outcomes.pop();
        let recorded = step.recorded(proto).map(Outcome::recorded);
        if verbose {
            let mut s = format!("{at}\n");
            if let Some(r) = &redis {
                s += &format!("  redis:    {}\n", r.render());
            }
            if let Some(r) = &recorded {
                s += &format!("  recorded: {}\n", r.render());
            }
            eprintln!("{s}  sluice:   {}", sluice.render());
        }
        // No reply in time, bytes that are not RESP, a reply cut off: a mismatch even when
        // both sides do it.
        let (expected, label) = match (&redis, &recorded) {
            (Some(r), _) => (Some(r), "redis:   "),
            (None, Some(rec)) => (Some(rec), "recorded:"),
            (None, None) => {
                run.unchecked += 1;
                (None, "")
            }
        };
        if let Some(exp) = expected
            && (exp.trouble.is_some()
                || sluice.trouble.is_some()
                || exp.normalized(step, redis.is_none())
                    != sluice.normalized(step, redis.is_none()))
        {
            run.mismatches.push(format!(
                "{at}\n  {label} {}\n  sluice:    {}",
                exp.render(),
                sluice.render()
            ));
        }
        if let (Some(r), Some(rec)) = (&redis, &recorded)
            && !regenerate
            && r.trouble.is_none()
            && r.normalized(step, true) != rec.normalized(step, true)
        {
            run.mismatches.push(format!(
                "{at}\n  the recorded reply is stale (regenerate: SLUICE_DIFF_REGENERATE=1 cargo test --test it diff)\n  recorded:  {}\n  redis:     {}",
                rec.render(),
                r.render()
            ));
        }
        run.fresh.push(
            redis
                .as_ref()
                .filter(|r| r.trouble.is_none())
                .map(|r| Recorded {
                    replies: r.replies.clone(),
                    closed: r.closed,
                }),
        );
        let broken = |o: &Outcome| o.closed || o.trouble.is_some();
        if redis.as_ref().is_some_and(broken) || broken(&sluice) {
            pair.reopen();
        }
    }
    run
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
    // A map's elements are already its (field, value) pairs: `[sortpairs]` (written for
    // RESP2's flat HGETALL) sorts a RESP3 map the same way.
    // RESP3's HRANDFIELD … WITHVALUES nests each pair in an array of its own: the same.
    let nested = frames.first().is_some_and(|f| f.first() == Some(&b'*'));
    let group = if sort == Sort::Pairs && !nested {
        2
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
    assert_eq!(
        sort_reply(b"%2\r\n+b\r\n:1\r\n+a\r\n:2\r\n", Sort::Pairs),
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
        // A set of maps (RESP3 COMMAND INFO): the crate refuses it, the fallback measures it.
        b"~1\r\n%1\r\n+a\r\n~0\r\n",
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
    if mode() == Mode::Offline {
        eprintln!("no redis-server: the live harness self-test does not run");
        return;
    }
    let steps = parse_transcript("selftest.txt", transcript).expect("parses");
    let run = run_steps("selftest.txt", &steps, 2, Mode::Live { regenerate: false });
    let mismatches = run.mismatches;
    assert_eq!(mismatches.len(), 3, "{mismatches:#?}");
    assert!(mismatches[0].starts_with(
        "selftest.txt:2 (RESP2): CLIENT SETINFO lib-name x\n  redis:    -ERR unknown subcommand"
    ));
    assert!(mismatches[0].contains("\n  sluice:    +OK"));
    assert!(mismatches[1].starts_with("selftest.txt:3 (RESP2): [raw] \\r\\n\n"));
    assert!(mismatches[1].contains("no reply within"));
    assert!(mismatches[2].starts_with("selftest.txt:5 (RESP2): "));
}

#[test]
fn recorded_replies_are_checked() {
    // A stale recording fails a live run; offline, sluice is held to the recording, and a line
    // without one is counted as unchecked.
    let transcript = "SET k v\n< +OK\nGET k\n< \"other\"\nPING\n";
    let steps = parse_transcript("selftest.txt", transcript).expect("parses");
    let offline = run_steps("selftest.txt", &steps, 3, Mode::Offline);
    assert_eq!(offline.mismatches.len(), 1, "{:#?}", offline.mismatches);
    assert!(
        offline.mismatches[0].contains("recorded: \"other\"\n  sluice:    \"v\""),
        "{:#?}",
        offline.mismatches
    );
    assert_eq!(offline.unchecked, 1);
    if mode() == Mode::Offline {
        eprintln!("no redis-server: the live half of this self-test does not run");
        return;
    }
    let live = run_steps("selftest.txt", &steps, 3, Mode::Live { regenerate: false });
    assert_eq!(live.mismatches.len(), 1, "{:#?}", live.mismatches);
    assert!(live.mismatches[0].contains("stale"));
    assert_eq!(
        live.fresh[1],
        Some(Recorded {
            replies: vec![b"$1\r\nv\r\n".to_vec()],
            closed: false
        })
    );
}
