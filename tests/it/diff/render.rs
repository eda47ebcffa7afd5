//! Replies as transcript text: one RESP2/RESP3 reply ⇄ one readable line that converts back
//! to exactly the same bytes.
//!
//! | RESP | written |
//! |---|---|
//! | bulk string `$3\r\nabc\r\n` | `"abc"` (escapes `\\ \" \r \n \t \xHH`) |
//! | `$-1`, `*-1`, RESP3 `_` | `(nil)`, `(nil-array)`, `(null)` |
//! | simple string, error, integer, double, big number | `+OK`, `-ERR …`, `:3`, `,1.5`, `(12` |
//! | boolean | `#t`, `#f` |
//! | verbatim string, blob error | `="txt:…"`, `!"…"` |
//! | array, set, push | `[a, b]`, `~[a, b]`, `>[a, b]` |
//! | map, attribute | `{k: v, …}`, `\|{k: v} value` |
//!
//! The text after `+ - : , (` is written bare when it is printable ASCII with no `\`, and
//! (inside an aggregate) no `, ] }` (and in a map key no `:`); otherwise it is quoted:
//! `-"ERR a, b"`. Anything that would not convert back byte for byte is written `RAW"…"`,
//! the escaped reply bytes.

/// The line for one complete reply (`reply` holds exactly one RESP frame).
pub fn render(reply: &[u8]) -> String {
    let mut out = String::new();
    let mut at = 0;
    let ok = write_value(reply, &mut at, &mut out, Ctx::Top).is_some() && at == reply.len();
    if ok && parse(&out).as_deref() == Ok(reply) {
        out
    } else {
        format!("RAW{}", quote(reply))
    }
}

/// The RESP bytes a rendered line stands for.
pub fn parse(text: &str) -> Result<Vec<u8>, String> {
    let mut p = Parser {
        s: text.as_bytes(),
        at: 0,
    };
    let mut out = Vec::new();
    p.value(&mut out, Ctx::Top)?;
    if p.at != p.s.len() {
        return Err(format!(
            "unexpected `{}` after the reply",
            String::from_utf8_lossy(&p.s[p.at..])
        ));
    }
    Ok(out)
}

/// Where a value stands: decides which characters end bare text.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Top,
    Element,
    Key,
}

impl Ctx {
    fn ends_bare(self, b: u8) -> bool {
        match self {
            Ctx::Top => false,
            Ctx::Element => matches!(b, b',' | b']' | b'}'),
            Ctx::Key => matches!(b, b',' | b']' | b'}' | b':'),
        }
    }
}

/// `"…"` with `\\ \" \r \n \t` and `\xHH` for every other byte outside printable ASCII.
pub fn quote(bytes: &[u8]) -> String {
    format!("\"{}\"", crate::support::escape(bytes))
}

/// Bare if it reads back unchanged, quoted otherwise.
fn text(bytes: &[u8], ctx: Ctx) -> String {
    let bare = bytes.first() != Some(&b'"')
        && bytes.first() != Some(&b' ')
        && bytes.last() != Some(&b' ')
        && bytes
            .iter()
            .all(|&b| (0x20..=0x7e).contains(&b) && b != b'\\' && !ctx.ends_bare(b));
    if bare {
        String::from_utf8_lossy(bytes).into_owned()
    } else {
        quote(bytes)
    }
}

/// The line at `*at` up to its CRLF; moves past it.
fn line<'a>(buf: &'a [u8], at: &mut usize) -> Option<&'a [u8]> {
    let rest = buf.get(*at..)?;
    let eol = rest.windows(2).position(|w| w == b"\r\n")?;
    *at += eol + 2;
    Some(&rest[..eol])
}

fn number(l: &[u8]) -> Option<i64> {
    std::str::from_utf8(l).ok()?.parse().ok()
}

fn blob<'a>(buf: &'a [u8], at: &mut usize, len: i64) -> Option<&'a [u8]> {
    let len = usize::try_from(len).ok()?;
    let body = buf.get(*at..*at + len)?;
    if buf.get(*at + len..*at + len + 2)? != b"\r\n" {
        return None;
    }
    *at += len + 2;
    Some(body)
}

fn write_value(buf: &[u8], at: &mut usize, out: &mut String, ctx: Ctx) -> Option<()> {
    let l = line(buf, at)?;
    let (&kind, rest) = l.split_first()?;
    match kind {
        b'$' if rest == b"-1" => out.push_str("(nil)"),
        b'*' if rest == b"-1" => out.push_str("(nil-array)"),
        b'_' if rest.is_empty() => out.push_str("(null)"),
        b'#' if rest == b"t" || rest == b"f" => out.push_str(std::str::from_utf8(l).ok()?),
        b'$' => out.push_str(&quote(blob(buf, at, number(rest)?)?)),
        b'=' | b'!' => {
            out.push(kind as char);
            out.push_str(&quote(blob(buf, at, number(rest)?)?));
        }
        b'+' | b'-' | b':' | b',' | b'(' => {
            out.push(kind as char);
            out.push_str(&text(rest, ctx));
        }
        b'*' | b'~' | b'>' => {
            if kind != b'*' {
                out.push(kind as char);
            }
            out.push('[');
            for i in 0..number(rest)? {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(buf, at, out, Ctx::Element)?;
            }
            out.push(']');
        }
        b'%' | b'|' => {
            if kind == b'|' {
                out.push('|');
            }
            out.push('{');
            for i in 0..number(rest)? {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(buf, at, out, Ctx::Key)?;
                out.push_str(": ");
                write_value(buf, at, out, Ctx::Element)?;
            }
            out.push('}');
            if kind == b'|' {
                out.push(' ');
                write_value(buf, at, out, ctx)?;
            }
        }
        _ => return None,
    }
    Some(())
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at column {}", self.at + 1))
    }

    fn eat(&mut self, token: &str) -> bool {
        if self.s[self.at..].starts_with(token.as_bytes()) {
            self.at += token.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, token: &str) -> Result<(), String> {
        if self.eat(token) {
            Ok(())
        } else {
            self.err(&format!("expected `{token}`"))
        }
    }

    /// A `"…"` string's bytes.
    fn quoted(&mut self) -> Result<Vec<u8>, String> {
        self.expect("\"")?;
        let mut out = Vec::new();
        loop {
            let Some(&b) = self.s.get(self.at) else {
                return self.err("unterminated string");
            };
            self.at += 1;
            match b {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(&e) = self.s.get(self.at) else {
                        return self.err("trailing backslash");
                    };
                    self.at += 1;
                    out.push(match e {
                        b'r' => b'\r',
                        b'n' => b'\n',
                        b't' => b'\t',
                        b'\\' | b'"' => e,
                        b'x' => {
                            let hex = self
                                .s
                                .get(self.at..self.at + 2)
                                .and_then(|h| std::str::from_utf8(h).ok())
                                .and_then(|h| u8::from_str_radix(h, 16).ok());
                            let Some(v) = hex else {
                                return self.err("bad \\x escape");
                            };
                            self.at += 2;
                            v
                        }
                        _ => return self.err("unknown escape"),
                    });
                }
                _ => out.push(b),
            }
        }
    }

    /// Bare or quoted text.
    fn text(&mut self, ctx: Ctx) -> Result<Vec<u8>, String> {
        if self.s.get(self.at) == Some(&b'"') {
            return self.quoted();
        }
        let start = self.at;
        while self.at < self.s.len() && !ctx.ends_bare(self.s[self.at]) {
            self.at += 1;
        }
        Ok(self.s[start..self.at].to_vec())
    }

    fn value(&mut self, out: &mut Vec<u8>, ctx: Ctx) -> Result<(), String> {
        for (token, resp) in [
            ("(nil)", &b"$-1\r\n"[..]),
            ("(nil-array)", b"*-1\r\n"),
            ("(null)", b"_\r\n"),
            ("#t", b"#t\r\n"),
            ("#f", b"#f\r\n"),
        ] {
            if self.eat(token) {
                out.extend_from_slice(resp);
                return Ok(());
            }
        }
        if self.eat("RAW") {
            out.extend(self.quoted()?);
            return Ok(());
        }
        let Some(&kind) = self.s.get(self.at) else {
            return self.err("missing reply");
        };
        match kind {
            b'"' => {
                let body = self.quoted()?;
                blob_to(out, b'$', &body);
            }
            b'=' | b'!' => {
                self.at += 1;
                let body = self.quoted()?;
                blob_to(out, kind, &body);
            }
            b'+' | b'-' | b':' | b',' | b'(' => {
                self.at += 1;
                let body = self.text(ctx)?;
                out.push(kind);
                out.extend_from_slice(&body);
                out.extend_from_slice(b"\r\n");
            }
            b'[' | b'~' | b'>' => {
                let kind = if kind == b'[' {
                    b'*'
                } else {
                    self.at += 1;
                    kind
                };
                self.expect("[")?;
                let mut items = Vec::new();
                let mut n = 0;
                while !self.eat("]") {
                    if n > 0 {
                        self.expect(", ")?;
                    }
                    self.value(&mut items, Ctx::Element)?;
                    n += 1;
                }
                out.extend_from_slice(format!("{}{n}\r\n", kind as char).as_bytes());
                out.extend(items);
            }
            b'{' | b'|' => {
                let kind = if kind == b'|' {
                    self.at += 1;
                    b'|'
                } else {
                    b'%'
                };
                self.expect("{")?;
                let mut items = Vec::new();
                let mut n = 0;
                while !self.eat("}") {
                    if n > 0 {
                        self.expect(", ")?;
                    }
                    self.value(&mut items, Ctx::Key)?;
                    self.expect(": ")?;
                    self.value(&mut items, Ctx::Element)?;
                    n += 1;
                }
                out.extend_from_slice(format!("{}{n}\r\n", kind as char).as_bytes());
                out.extend(items);
                if kind == b'|' {
                    self.expect(" ")?;
                    self.value(out, ctx)?;
                }
            }
            _ => return self.err("unknown reply type"),
        }
        Ok(())
    }
}

fn blob_to(out: &mut Vec<u8>, kind: u8, body: &[u8]) {
    out.extend_from_slice(format!("{}{}\r\n", kind as char, body.len()).as_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}

#[test]
fn replies_round_trip() {
    for (resp, text) in [
        (&b"+OK\r\n"[..], "+OK"),
        (b"-ERR syntax error\r\n", "-ERR syntax error"),
        (b"-ERR a, b\r\n", "-ERR a, b"),
        (b":-3\r\n", ":-3"),
        (b"$-1\r\n", "(nil)"),
        (b"*-1\r\n", "(nil-array)"),
        (b"_\r\n", "(null)"),
        (b"$0\r\n\r\n", "\"\""),
        (b"$4\r\na\r\n\"\r\n", "\"a\\r\\n\\\"\""),
        (b"$2\r\n\x00\xff\r\n", "\"\\x00\\xff\""),
        (b",1.5\r\n", ",1.5"),
        (b"#t\r\n", "#t"),
        (b"(123\r\n", "(123"),
        (b"=9\r\ntxt:hello\r\n", "=\"txt:hello\""),
        (b"*0\r\n", "[]"),
        (
            b"*3\r\n+OK\r\n:1\r\n-ERR x, y\r\n",
            "[+OK, :1, -\"ERR x, y\"]",
        ),
        (b"*2\r\n$-1\r\n*1\r\n$1\r\na\r\n", "[(nil), [\"a\"]]"),
        (b"~2\r\n$1\r\na\r\n,inf\r\n", "~[\"a\", ,inf]"),
        (
            b"%2\r\n+a:b\r\n:1\r\n:2\r\n_\r\n",
            "{+\"a:b\": :1, :2: (null)}",
        ),
        (b">2\r\n$1\r\nm\r\n+x y\r\n", ">[\"m\", +x y]"),
        (b"|1\r\n+k\r\n:1\r\n+OK\r\n", "|{+k: :1} +OK"),
        (b"+ padded \r\n", "+\" padded \""),
        (b"-ERR \xff\r\n", "-\"ERR \\xff\""),
        (b"+\r\n", "+"),
    ] {
        assert_eq!(render(resp), text, "{}", quote(resp));
        assert_eq!(parse(text).as_deref(), Ok(resp), "{text}");
    }
    // Not RESP: kept as raw bytes.
    assert_eq!(render(b"?x\r\n"), "RAW\"?x\\r\\n\"");
    assert_eq!(parse("RAW\"?x\\r\\n\"").as_deref(), Ok(&b"?x\r\n"[..]));
    assert!(parse("[+OK").is_err());
    assert!(parse("\"abc").is_err());
    assert!(parse("+OK trailing]").is_ok());
    assert!(parse("[+OK] x").is_err());
}
