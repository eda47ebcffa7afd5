//! COMMAND DOCS: the documentation of every command and subcommand, as Redis 7.0 shapes it
//! (summary, since, group, complexity, doc flags, history, arguments, subcommands).
//!
//! Owns the data files `src/engine/docs/<group>.txt` (embedded in the binary and parsed once, on
//! first use) and the reply built from them. It uses only `protocol::Reply` and the command
//! table's names; `commands::server` calls [`docs_reply`] for COMMAND DOCS.
//!
//! The structure of each entry (argument names, types, tokens, flags, nesting, since versions,
//! groups, doc flags) is Redis 7.0.15's interface, generated from a live redis-server by
//! `scripts/gen_command_docs.py` and checked against one by `tests/it/docs.rs`; redis-cli's
//! `help <command>` and its hints are built from it. The prose (summary, complexity, history
//! texts, replaced-by) is our own.
//!
//! # The data format
//!
//! An entry starts at column 0 with `name group since [doc flag …] [deprecated_since=V]`;
//! its indented lines are `summary …`, `complexity …`, `replaced_by …`, `history V text`
//! (repeatable) and `args …` (repeatable; the lines are joined). Lines starting with `#` are
//! comments. An argument is written
//!
//! - `=TOKEN`: a `pure-token` named after its token in lower case;
//! - `name=TOKEN`: a `pure-token` with another name;
//! - `name:type[=TOKEN][(children)]`: any other type; `oneof` and `block` take children;
//!
//! followed by its modifiers, in this order: `#n` key spec index, `@V` since, `!V` deprecated
//! since, then the flags `?` optional, `*` multiple, `+` multiple_token. A name or token that
//! is not a plain word is written in double quotes (`"ip:port"`, `"~"`, `""`).

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::protocol::Reply;

/// The data files, one per Redis command group, and sluice's test-mode commands.
const FILES: &[(&str, &str)] = &[
    ("bitmap", include_str!("bitmap.txt")),
    ("cluster", include_str!("cluster.txt")),
    ("connection", include_str!("connection.txt")),
    ("generic", include_str!("generic.txt")),
    ("geo", include_str!("geo.txt")),
    ("stream", include_str!("stream.txt")),
    ("hash", include_str!("hash.txt")),
    ("hyperloglog", include_str!("hyperloglog.txt")),
    ("list", include_str!("list.txt")),
    ("pubsub", include_str!("pubsub.txt")),
    ("scripting", include_str!("scripting.txt")),
    ("server", include_str!("server.txt")),
    ("set", include_str!("set.txt")),
    ("sorted-set", include_str!("sorted-set.txt")),
    ("string", include_str!("string.txt")),
    ("testmode", include_str!("testmode.txt")),
    ("transactions", include_str!("transactions.txt")),
];

/// The deepest nesting of `oneof`/`block` arguments the parser accepts (Redis's deepest is 3).
const MAX_DEPTH: usize = 8;

/// One argument of a command.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ArgDoc {
    /// Its name (`key`, `condition`).
    pub name: String,
    /// Redis's argument type (`key`, `string`, `integer`, `pure-token`, `oneof`, `block`, …).
    pub kind: &'static str,
    /// The index of the key spec of a `key` argument.
    pub key_spec_index: Option<i64>,
    /// The keyword that introduces it.
    pub token: Option<String>,
    /// The version that added it.
    pub since: Option<String>,
    /// The version that deprecated it.
    pub deprecated_since: Option<String>,
    /// `optional`, `multiple`, `multiple_token`, in Redis's order.
    pub flags: Vec<&'static str>,
    /// The arguments of a `oneof` or `block`.
    pub children: Vec<ArgDoc>,
}

/// One command's (or subcommand's) documentation.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct CommandDoc {
    /// Full name (`set`, `client|setname`).
    pub name: String,
    /// What it does, in one line.
    pub summary: String,
    /// The Redis version that added it.
    pub since: String,
    /// Redis's command group.
    pub group: String,
    /// Its time complexity.
    pub complexity: Option<String>,
    /// `deprecated`, `syscmd`.
    pub doc_flags: Vec<String>,
    /// The version that deprecated it.
    pub deprecated_since: Option<String>,
    /// What to use instead.
    pub replaced_by: Option<String>,
    /// (version, change) pairs.
    pub history: Vec<(String, String)>,
    /// Its arguments.
    pub args: Vec<ArgDoc>,
}

/// Every entry, by full name; parsed on first use. A data file that does not parse leaves
/// the table without its entries (the unit tests make that impossible to land).
fn table() -> &'static HashMap<String, CommandDoc> {
    static TABLE: OnceLock<HashMap<String, CommandDoc>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut all = HashMap::new();
        for (file, text) in FILES {
            match parse_file(text) {
                Ok(docs) => all.extend(docs.into_iter().map(|d| (d.name.clone(), d))),
                Err(e) => tracing::error!("command docs {file}.txt: {e}"),
            }
        }
        all
    })
}

/// The documentation of one (sub)command, by its full lowercase name.
pub(crate) fn lookup(name: &str) -> Option<&'static CommandDoc> {
    table().get(name)
}

/// Every documented name (for the tests).
#[cfg(test)]
pub(crate) fn names() -> Vec<&'static str> {
    table().keys().map(String::as_str).collect()
}

/// The COMMAND DOCS value for one command: its fields and, for a container, the docs of the
/// subcommands given (full names). A command without an entry gets an empty map.
pub(crate) fn docs_reply(name: &str, subcommands: &[&str]) -> Reply {
    let mut fields = match lookup(name) {
        Some(doc) => doc_fields(doc),
        None => Vec::new(),
    };
    if !subcommands.is_empty() {
        fields.push((
            Reply::bulk(b"subcommands"),
            Reply::Map(
                subcommands
                    .iter()
                    .map(|s| (Reply::bulk(s.as_bytes()), docs_reply(s, &[])))
                    .collect(),
            ),
        ));
    }
    Reply::Map(fields)
}

fn text(s: &str) -> Reply {
    Reply::bulk(s.as_bytes())
}

/// The fields in Redis's order (`addReplyCommandDocs`).
fn doc_fields(doc: &CommandDoc) -> Vec<(Reply, Reply)> {
    let mut f = vec![
        (text("summary"), text(&doc.summary)),
        (text("since"), text(&doc.since)),
        (text("group"), text(&doc.group)),
    ];
    if let Some(c) = &doc.complexity {
        f.push((text("complexity"), text(c)));
    }
    if !doc.doc_flags.is_empty() {
        f.push((
            text("doc_flags"),
            Reply::Set(
                doc.doc_flags
                    .iter()
                    .map(|s| Reply::Status(s.clone().into()))
                    .collect(),
            ),
        ));
    }
    if let Some(v) = &doc.deprecated_since {
        f.push((text("deprecated_since"), text(v)));
    }
    if let Some(v) = &doc.replaced_by {
        f.push((text("replaced_by"), text(v)));
    }
    if !doc.history.is_empty() {
        f.push((
            text("history"),
            Reply::Set(
                doc.history
                    .iter()
                    .map(|(v, t)| Reply::Array(vec![text(v), text(t)]))
                    .collect(),
            ),
        ));
    }
    if !doc.args.is_empty() {
        f.push((text("arguments"), args_reply(&doc.args)));
    }
    f
}

/// An argument list, each argument's fields in Redis's order (`addReplyCommandArgList`).
fn args_reply(args: &[ArgDoc]) -> Reply {
    Reply::Array(
        args.iter()
            .map(|a| {
                let mut f = vec![(text("name"), text(&a.name)), (text("type"), text(a.kind))];
                if let Some(i) = a.key_spec_index {
                    f.push((text("key_spec_index"), Reply::Int(i)));
                }
                if let Some(t) = &a.token {
                    f.push((text("token"), text(t)));
                }
                if let Some(v) = &a.since {
                    f.push((text("since"), text(v)));
                }
                if let Some(v) = &a.deprecated_since {
                    f.push((text("deprecated_since"), text(v)));
                }
                if !a.flags.is_empty() {
                    f.push((
                        text("flags"),
                        Reply::Set(a.flags.iter().map(|s| Reply::status(s)).collect()),
                    ));
                }
                if a.kind == "oneof" || a.kind == "block" {
                    f.push((text("arguments"), args_reply(&a.children)));
                }
                Reply::Map(f)
            })
            .collect(),
    )
}

/// The argument types Redis 7.0 has.
const TYPES: &[&str] = &[
    "string",
    "integer",
    "double",
    "key",
    "pattern",
    "unix-time",
    "pure-token",
    "oneof",
    "block",
];

/// Parses one data file.
pub(crate) fn parse_file(text: &str) -> Result<Vec<CommandDoc>, String> {
    let mut docs: Vec<CommandDoc> = Vec::new();
    let mut args_text: Vec<String> = Vec::new();
    let finish = |docs: &mut Vec<CommandDoc>, args_text: &mut Vec<String>| -> Result<(), String> {
        if let Some(doc) = docs.last_mut() {
            let joined = args_text.join(" ");
            doc.args = parse_args(&joined).map_err(|e| format!("{}: {e}", doc.name))?;
        }
        args_text.clear();
        Ok(())
    };
    for (n, line) in text.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}", n + 1);
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        if !line.starts_with(' ') {
            finish(&mut docs, &mut args_text).map_err(at)?;
            let mut words = line.split_whitespace();
            let (Some(name), Some(group), Some(since)) = (words.next(), words.next(), words.next())
            else {
                return Err(at("an entry needs `name group since`".into()));
            };
            let mut doc = CommandDoc {
                name: name.to_string(),
                group: group.to_string(),
                since: since.to_string(),
                ..CommandDoc::default()
            };
            for w in words {
                match w.split_once('=') {
                    Some(("deprecated_since", v)) => doc.deprecated_since = Some(v.to_string()),
                    None if w == "deprecated" || w == "syscmd" => doc.doc_flags.push(w.into()),
                    _ => return Err(at(format!("unknown entry attribute {w}"))),
                }
            }
            docs.push(doc);
            continue;
        }
        let Some(doc) = docs.last_mut() else {
            return Err(at("an indented line before any entry".into()));
        };
        let line = line.trim_start();
        let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
        let rest = rest.trim();
        match key {
            "summary" => doc.summary = rest.to_string(),
            "complexity" => doc.complexity = Some(rest.to_string()),
            "replaced_by" => doc.replaced_by = Some(rest.to_string()),
            "history" => {
                let (v, t) = rest.split_once(' ').unwrap_or((rest, ""));
                doc.history.push((v.to_string(), t.trim().to_string()));
            }
            "args" => args_text.push(rest.to_string()),
            _ => return Err(at(format!("unknown line `{key}`"))),
        }
    }
    finish(&mut docs, &mut args_text)?;
    Ok(docs)
}

/// Parses an argument list (see the module docs for the notation).
pub(crate) fn parse_args(text: &str) -> Result<Vec<ArgDoc>, String> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let args = p.list(0)?;
    p.skip_ws();
    if p.i != p.s.len() {
        return Err(format!("unexpected `{}` at {}", p.s[p.i] as char, p.i));
    }
    Ok(args)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn skip_ws(&mut self) {
        while self.peek() == Some(b' ') {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// Arguments up to `)` or the end.
    fn list(&mut self, depth: usize) -> Result<Vec<ArgDoc>, String> {
        if depth > MAX_DEPTH {
            return Err("arguments nested too deep".into());
        }
        let mut out = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None | Some(b')') => return Ok(out),
                _ => out.push(self.arg(depth)?),
            }
        }
    }

    /// A plain word or a double-quoted string.
    fn word(&mut self) -> Result<String, String> {
        let start = self.i;
        if self.eat(b'"') {
            while self.peek().is_some_and(|c| c != b'"') {
                self.i += 1;
            }
            let w = String::from_utf8_lossy(&self.s[start + 1..self.i]).into_owned();
            if !self.eat(b'"') {
                return Err(format!("unterminated quote at {start}"));
            }
            return Ok(w);
        }
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || b"_-./|".contains(&c))
        {
            self.i += 1;
        }
        if self.i == start {
            return Err(format!("a name or token expected at {start}"));
        }
        Ok(String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    /// A version after `@` or `!`.
    fn version(&mut self) -> Result<String, String> {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit() || c == b'.') {
            self.i += 1;
        }
        if self.i == start {
            return Err(format!("a version expected at {start}"));
        }
        Ok(String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    fn arg(&mut self, depth: usize) -> Result<ArgDoc, String> {
        let mut a = ArgDoc {
            name: String::new(),
            kind: "pure-token",
            key_spec_index: None,
            token: None,
            since: None,
            deprecated_since: None,
            flags: Vec::new(),
            children: Vec::new(),
        };
        if self.eat(b'=') {
            let token = self.word()?;
            a.name = token.to_ascii_lowercase();
            a.token = Some(token);
        } else {
            a.name = self.word()?;
            if self.eat(b':') {
                let kind = self.word()?;
                a.kind = TYPES
                    .iter()
                    .find(|t| **t == kind)
                    .ok_or_else(|| format!("unknown type {kind}"))?;
                if self.eat(b'=') {
                    a.token = Some(self.word()?);
                }
                if a.kind == "oneof" || a.kind == "block" {
                    if !self.eat(b'(') {
                        return Err(format!("{} needs `(` children `)`", a.name));
                    }
                    a.children = self.list(depth + 1)?;
                    if !self.eat(b')') {
                        return Err(format!("{}: `)` expected", a.name));
                    }
                }
            } else if self.eat(b'=') {
                a.token = Some(self.word()?);
            } else {
                return Err(format!("{}: `:type` or `=TOKEN` expected", a.name));
            }
        }
        if self.eat(b'#') {
            let start = self.i;
            while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                self.i += 1;
            }
            let digits = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
            a.key_spec_index = Some(
                digits
                    .parse()
                    .map_err(|_| format!("{}: key spec index expected", a.name))?,
            );
        }
        if self.eat(b'@') {
            a.since = Some(self.version()?);
        }
        if self.eat(b'!') {
            a.deprecated_since = Some(self.version()?);
        }
        for (c, flag) in [
            (b'?', "optional"),
            (b'*', "multiple"),
            (b'+', "multiple_token"),
        ] {
            if self.eat(c) {
                a.flags.push(flag);
            }
        }
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_parses() {
        for (file, text) in FILES {
            if let Err(e) = parse_file(text) {
                panic!("{file}.txt: {e}");
            }
        }
    }

    /// Every command and subcommand of the table has an entry (and no entry is left over).
    #[test]
    fn every_command_has_docs() {
        let mut in_table = std::collections::BTreeSet::new();
        for family in crate::commands::all_families() {
            for spec in family {
                in_table.insert(spec.name);
                in_table.extend(spec.subcommands.iter().map(|s| s.name));
            }
        }
        let documented: std::collections::BTreeSet<&str> = names().into_iter().collect();
        let missing: Vec<_> = in_table.difference(&documented).collect();
        assert!(
            missing.is_empty(),
            "commands without a COMMAND DOCS entry in src/engine/docs/<group>.txt \
             (scripts/gen_command_docs.py writes their structure): {missing:?}"
        );
        let stale: Vec<_> = documented.difference(&in_table).collect();
        assert!(
            stale.is_empty(),
            "entries for commands sluice lacks: {stale:?}"
        );
    }

    #[test]
    fn every_entry_has_our_text() {
        let mut missing = Vec::new();
        for (file, text) in FILES {
            for doc in parse_file(text).unwrap_or_default() {
                let todo = |s: &str| s.is_empty() || s.contains("TODO");
                if todo(&doc.summary)
                    || doc.complexity.as_deref().is_some_and(todo)
                    || doc.replaced_by.as_deref().is_some_and(todo)
                    || doc.history.iter().any(|(_, t)| todo(t))
                {
                    missing.push(format!("{file}.txt: {}", doc.name));
                }
            }
        }
        assert!(missing.is_empty(), "entries without our text: {missing:?}");
    }

    #[test]
    fn notation() {
        let args = parse_args(
            r#"key:key#0 condition:oneof(=NX =XX)@2.6.12? agg:oneof=AGGREGATE(=SUM)? equal="=" "ip:port":string x:integer*+"#,
        )
        .unwrap_or_default();
        assert_eq!(args.len(), 6);
        assert_eq!(args[0].key_spec_index, Some(0));
        assert_eq!(args[1].children.len(), 2);
        assert_eq!(args[1].children[1].token.as_deref(), Some("XX"));
        assert_eq!(args[1].children[1].name, "xx");
        assert_eq!(args[1].since.as_deref(), Some("2.6.12"));
        assert_eq!(args[1].flags, ["optional"]);
        assert_eq!(args[2].token.as_deref(), Some("AGGREGATE"));
        assert_eq!(args[3].token.as_deref(), Some("="));
        assert_eq!(args[3].kind, "pure-token");
        assert_eq!(args[4].name, "ip:port");
        assert!(parse_args("x:integer x:nosuch").is_err());
        assert!(parse_args("a:oneof(b:oneof(").is_err());
        assert!(parse_args(&"a:block(".repeat(100)).is_err());
    }
}
