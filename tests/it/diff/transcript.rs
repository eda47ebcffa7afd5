//! Reading a transcript file into steps, and writing it back with fresh recorded replies.

use super::render;

/// Upper bound for `[sleep N]`.
const MAX_SLEEP_MS: u64 = 300;
/// Connections a transcript may use (`[conn N]`).
pub const MAX_CONNS: u8 = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    None,
    /// Sort elements (a map's pairs).
    Elements,
    /// Sort consecutive (field, value) pairs of a flat array.
    Pairs,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    Args(Vec<Vec<u8>>),
    Raw(Vec<u8>),
    /// `[collect N]`: read the reply a `[send]` line left pending on connection N.
    Collect,
}

/// What a step got from Redis, as recorded in the file: its replies and whether the
/// connection closed after them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recorded {
    pub replies: Vec<Vec<u8>>,
    pub closed: bool,
}

/// The marker line for a connection the server closed.
pub const CLOSED: &str = "(connection closed)";

impl Recorded {
    /// The reply lines, without their `< ` prefix.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.replies.iter().map(|r| render::render(r)).collect();
        if self.closed {
            lines.push(CLOSED.to_string());
        }
        lines
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub line: usize,
    pub text: String,
    pub sort: Sort,
    pub any: bool,
    /// `[now]`: the reply depends on the wall clock, so the recording is an example.
    pub now: bool,
    pub sleep_ms: u64,
    /// `[conn N]`: the connection (1 = the main one) the line is sent on or collected from.
    pub conn: u8,
    /// `[send]`: send without reading the reply (a later `[collect N]` reads it).
    pub send: bool,
    pub payload: Payload,
    /// Redis's recorded replies: `< ` lines count for both protocols, `<2 ` / `<3 ` lines
    /// for one (and then replace the `< ` lines for it). `None`: nothing recorded.
    pub recorded: [Option<Recorded>; 2],
}

impl Step {
    /// The recorded outcome for RESP `proto` (2 or 3).
    pub fn recorded(&self, proto: u8) -> Option<&Recorded> {
        self.recorded[usize::from(proto == 3)].as_ref()
    }
}

/// The recorded lines of one step while reading: `< `, `<2 `, `<3 `.
#[derive(Default)]
struct Pending {
    both: Option<Recorded>,
    only: [Option<Recorded>; 2],
}

impl Pending {
    fn finish(self) -> [Option<Recorded>; 2] {
        let [two, three] = self.only;
        [
            two.or_else(|| self.both.clone()),
            three.or_else(|| self.both.clone()),
        ]
    }
}

/// Parses a transcript into steps; errors name the line.
pub fn parse_transcript(name: &str, text: &str) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    let mut pending = Pending::default();
    for (i, raw_line) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw_line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let err = |m: String| format!("{name}:{line}: bad transcript line `{raw_line}`: {m}");
        if let Some(rest) = trimmed.strip_prefix('<') {
            if steps.is_empty() {
                return Err(err("a recorded reply before any command".into()));
            }
            let (slot, body) = if let Some(b) = rest.strip_prefix("2 ") {
                (&mut pending.only[0], b)
            } else if let Some(b) = rest.strip_prefix("3 ") {
                (&mut pending.only[1], b)
            } else if let Some(b) = rest.strip_prefix(' ') {
                (&mut pending.both, b)
            } else {
                return Err(err(
                    "a recorded reply starts with `< `, `<2 ` or `<3 `".into()
                ));
            };
            let rec = slot.get_or_insert_with(Recorded::default);
            if rec.closed {
                return Err(err(format!("a reply after `{CLOSED}`")));
            }
            if body == CLOSED {
                rec.closed = true;
            } else {
                rec.replies.push(render::parse(body).map_err(err)?);
            }
            continue;
        }
        if let Some(prev) = steps.last_mut() {
            prev.recorded = std::mem::take(&mut pending).finish();
        }
        let mut step = Step {
            line,
            text: trimmed.trim_end().to_string(),
            sort: Sort::None,
            any: false,
            now: false,
            sleep_ms: 0,
            conn: 1,
            send: false,
            payload: Payload::Args(Vec::new()),
            recorded: [None, None],
        };
        let mut rest = trimmed;
        let mut raw = None;
        let mut collect = false;
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
                (Some("now"), None, _) => step.now = true,
                (Some("sleep"), Some(n), None) => {
                    let ms: u64 = n.parse().map_err(|_| err(format!("bad sleep `{n}`")))?;
                    if ms > MAX_SLEEP_MS {
                        return Err(err(format!(
                            "sleep {ms} ms is over the {MAX_SLEEP_MS} ms limit"
                        )));
                    }
                    step.sleep_ms = ms;
                }
                (Some(d @ ("conn" | "collect")), Some(n), None) => {
                    let n: u8 = n
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_CONNS).contains(n))
                        .ok_or_else(|| err(format!("bad connection `{n}` (1..={MAX_CONNS})")))?;
                    step.conn = n;
                    collect = d == "collect";
                }
                (Some("send"), None, _) => step.send = true,
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
        if step.send && (raw.is_some() || collect) {
            return Err(err("[send] goes with a command".into()));
        }
        step.payload = match raw {
            None if collect => {
                if !rest.trim().is_empty() {
                    return Err(err("[collect N] takes no command".into()));
                }
                Payload::Collect
            }
            Some(_) if step.conn != 1 => {
                return Err(err("[raw] lines go to the main connection".into()));
            }
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
    if let Some(prev) = steps.last_mut() {
        prev.recorded = pending.finish();
    }
    Ok(steps)
}

/// The file with every step's recorded lines replaced by `fresh` (per step, the RESP2 and
/// RESP3 outcomes; `None` where Redis gave none, e.g. it timed out). The same outcome in
/// both protocols is written once as `< ` lines.
pub fn rewrite(text: &str, steps: &[Step], fresh: &[[Option<Recorded>; 2]]) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    let mut next = steps.iter().zip(fresh).peekable();
    for (i, raw_line) in text.lines().enumerate() {
        if raw_line.trim_start().starts_with('<') {
            continue;
        }
        out.push_str(raw_line);
        out.push('\n');
        let Some((_, [two, three])) = next.next_if(|(s, _)| s.line == i + 1) else {
            continue;
        };
        let mut emit = |prefix: &str, rec: &Recorded| {
            for l in rec.lines() {
                out.push_str(prefix);
                out.push_str(&l);
                out.push('\n');
            }
        };
        match (two, three) {
            (Some(a), Some(b)) if a == b => emit("< ", a),
            (a, b) => {
                if let Some(a) = a {
                    emit("<2 ", a);
                }
                if let Some(b) = b {
                    emit("<3 ", b);
                }
            }
        }
    }
    out
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// Splits a line like redis-cli / Redis's `sdssplitargs`; `None` on unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
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
        "# c\n\n[sort] keys *\n[any] [sleep 5] time\n[raw] PING\\r\\n\n[sortpairs] [now] hgetall h\n",
    )
    .expect("parses");
    assert_eq!(steps.len(), 4);
    assert_eq!(steps[0].sort, Sort::Elements);
    assert!(steps[1].any && steps[1].sleep_ms == 5);
    assert_eq!(steps[2].payload, Payload::Raw(b"PING\r\n".to_vec()));
    assert_eq!(steps[3].sort, Sort::Pairs);
    assert!(steps[3].now && !steps[2].now);
    assert!(steps.iter().all(|s| s.recorded == [None, None]));
    assert!(parse_transcript("t", "[sleep 301] ping").is_err());
    assert!(parse_transcript("t", "[bogus] ping").is_err());
    assert!(parse_transcript("t", "set \"a").is_err());
}

#[test]
fn recorded_replies_parse_and_rewrite() {
    let text = "# c\nPING\n< +PONG\n\nHGETALL h\n<2 [\"f\", \"v\"]\n<3 {\"f\": \"v\"}\n[raw] QUIT\\r\\n\n< +OK\n< (connection closed)\nGET k\n";
    let steps = parse_transcript("t", text).expect("parses");
    let rec = |replies: &[&[u8]], closed| Recorded {
        replies: replies.iter().map(|r| r.to_vec()).collect(),
        closed,
    };
    let pong = rec(&[b"+PONG\r\n"], false);
    assert_eq!(steps[0].recorded, [Some(pong.clone()), Some(pong.clone())]);
    assert_eq!(
        steps[1].recorded(2),
        Some(&rec(&[b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n"], false))
    );
    assert_eq!(
        steps[1].recorded(3),
        Some(&rec(&[b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n"], false))
    );
    assert_eq!(steps[2].recorded(3), Some(&rec(&[b"+OK\r\n"], true)));
    assert_eq!(steps[3].recorded, [None, None]);
    let fresh: Vec<[Option<Recorded>; 2]> = steps.iter().map(|s| s.recorded.clone()).collect();
    assert_eq!(rewrite(text, &steps, &fresh), text);
    // Only RESP2 known: a `<2` line, the old lines dropped.
    let only2 = [
        [Some(pong.clone()), None],
        [None, None],
        [None, None],
        [None, None],
    ];
    assert_eq!(
        rewrite(text, &steps, &only2),
        "# c\nPING\n<2 +PONG\n\nHGETALL h\n[raw] QUIT\\r\\n\nGET k\n"
    );
    assert!(parse_transcript("t", "< +OK\nPING").is_err());
    assert!(parse_transcript("t", "PING\n<+OK").is_err());
    assert!(parse_transcript("t", "PING\n< [+OK").is_err());
    assert!(parse_transcript("t", "QUIT\n< (connection closed)\n< +OK").is_err());
}
