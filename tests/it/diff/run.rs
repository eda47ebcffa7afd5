//! Running a transcript: the connections, sending each step, reading its replies, and the
//! comparisons after `[sort]`/`[any]`/`[now]`.

use std::time::{Duration, Instant};

use super::Mode;
use super::render;
use super::transcript::{Payload, Recorded, Sort, Step};
use crate::support::{Conn, Read1, RedisServer, escape, frame_len, sluice};

/// How long a command may take to answer.
const REPLY_TIMEOUT: Duration = Duration::from_secs(2);
/// After a `[raw]` line's first reply: the connection counts as settled after this long
/// without more bytes.
const RAW_QUIET: Duration = Duration::from_millis(60);
/// The lowest client id a run starts with: above the connections either server may see while
/// starting (redis-server's readiness PINGs), so every run, live or offline, uses the same ids.
const ID_FLOOR: i64 = 100;
/// How long a `[send]` line waits for its command to take effect: a reply, or one more
/// blocked client on the server (seen from a control connection).
const SEND_SETTLE: Duration = Duration::from_millis(500);

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
pub struct Outcome {
    pub replies: Vec<Vec<u8>>,
    /// The connection closed.
    pub closed: bool,
    /// Something other than complete replies: a timeout, bytes left over, garbage.
    pub trouble: Option<String>,
}

impl Outcome {
    pub fn recorded(rec: &Recorded) -> Outcome {
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
    pub fn normalized(&self, step: &Step, recorded: bool) -> Outcome {
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
        // Handled by the caller (it reads without sending).
        Payload::Collect => Vec::new(),
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

/// The connection pair a line goes to: the main one, or `[conn N]`'s (opened on first use,
/// with equal client ids on both sides like the main one).
fn target<'p>(main: &'p mut Pair, extras: &'p mut [Option<Pair>], n: u8) -> &'p mut Pair {
    if n <= 1 {
        return main;
    }
    let (redis_addr, sluice_addr, proto) = (main.redis_addr, main.sluice_addr, main.proto);
    extras[usize::from(n) - 1].get_or_insert_with(|| Pair::open(redis_addr, sluice_addr, proto))
}

/// `blocked_clients` from INFO, on a control connection.
fn blocked_clients(conn: &mut Conn) -> i64 {
    let info = conn.cmd(&[b"INFO", b"clients"]);
    String::from_utf8_lossy(&info)
        .lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// A `[send]` line: sends the command on `pair` and waits (at most `SEND_SETTLE`) until
/// each side has either answered (the reply stays buffered for `[collect N]`) or counts one
/// more blocked client, so the next line runs after the command took effect.
fn send_pending(pair: &mut Pair, control: &mut Pair, step: &Step) {
    let Payload::Args(args) = &step.payload else {
        return;
    };
    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let request = crate::support::encode_command(&refs);
    let before: Vec<i64> = control.conns().into_iter().map(blocked_clients).collect();
    let deadline = Instant::now() + SEND_SETTLE;
    for ((conn, ctl), before) in pair.conns().into_iter().zip(control.conns()).zip(before) {
        let _ = conn.try_send_raw(&request);
        while conn.buffered().is_empty()
            && !conn.is_closed()
            && Instant::now() < deadline
            && blocked_clients(ctl) <= before
        {
            conn.poll(Duration::from_millis(5));
        }
    }
}

/// The result of one run of a transcript.
pub struct Run {
    pub proto: u8,
    pub mismatches: Vec<String>,
    /// Per step, what Redis answered (live runs; `None` on trouble).
    pub fresh: Vec<Option<Recorded>>,
    /// Steps with nothing recorded for this protocol, in an offline run.
    pub unchecked: usize,
}

/// Sends a transcript's steps to both servers (offline: to sluice) in RESP `proto`.
pub fn run_steps(name: &str, steps: &[Step], proto: u8, mode: Mode) -> Run {
    run_steps_with(name, steps, proto, mode, None)
}

/// `run_steps`, against the redis-server at `binary` when given (a newer build than the
/// one on PATH, for a transcript that requires it).
pub fn run_steps_with(
    name: &str,
    steps: &[Step],
    proto: u8,
    mode: Mode,
    binary: Option<&std::path::Path>,
) -> Run {
    let redis_server = (mode != Mode::Offline).then(|| match binary {
        Some(b) => RedisServer::start_binary(b),
        None => RedisServer::start(),
    });
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
    // `[conn N]` pairs (index N - 1; the main pair is N = 1) and the control pair `[send]`
    // lines watch the servers from.
    let mut extras: Vec<Option<Pair>> = (0..super::transcript::MAX_CONNS).map(|_| None).collect();
    let mut control: Option<Pair> = None;
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
        if step.send {
            let control = control
                .get_or_insert_with(|| Pair::open(pair.redis_addr, pair.sluice_addr, pair.proto));
            send_pending(target(&mut pair, &mut extras, step.conn), control, step);
            run.fresh.push(None);
            continue;
        }
        let mut outcomes = match step.payload {
            Payload::Collect => target(&mut pair, &mut extras, step.conn)
                .conns()
                .into_iter()
                .map(read_command_reply)
                .collect(),
            _ => send_step(target(&mut pair, &mut extras, step.conn), step),
        };
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
            if step.conn <= 1 {
                pair.reopen();
            } else {
                extras[usize::from(step.conn) - 1] = None;
            }
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
