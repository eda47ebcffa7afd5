//! The manifest of Redis 7.0's multi-part append-only file: which files make the AOF, in
//! which order, of which type. One line per file, `file <name> seq <n> type <b|h|i>`: at
//! most one base (`b`, first), the history files (`h`, replaced by a rewrite and about to
//! be deleted) and the incremental files (`i`, in increasing `seq`). Names are Redis's
//! (`appendonly.aof.1.base.rdb`, `appendonly.aof.1.incr.aof`, the manifest
//! `appendonly.aof.manifest`), so each server reads the other's directory.
//!
//! Reading follows Redis's rules and refuses what it refuses (with its texts): an empty
//! manifest, a line over 1024 bytes, fewer than six words or an odd count, a name that is
//! a path, a missing field, two bases, a non-increasing incremental `seq`, an unknown
//! type. Writing goes to `temp-<manifest>`, is synced, renamed over the manifest and the
//! folder synced, so a crash leaves the old manifest or the new one, never half of one.

use std::io::Write;
use std::path::Path;

use crate::protocol::request::split_args;

/// The longest line Redis reads in a manifest.
const MAX_LINE: usize = 1024;

/// A file's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The snapshot the incremental files apply to.
    Base,
    /// Replaced by a rewrite; deleted once the new manifest is written.
    History,
    /// Commands, applied after the base in `seq` order.
    Incr,
}

impl Kind {
    fn letter(self) -> char {
        match self {
            Kind::Base => 'b',
            Kind::History => 'h',
            Kind::Incr => 'i',
        }
    }
}

/// One line of the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The file's name inside the AOF folder.
    pub(crate) name: String,
    /// Its sequence number.
    pub(crate) seq: i64,
    /// Its role.
    pub(crate) kind: Kind,
}

/// The whole manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Manifest {
    /// The base file, if any.
    pub(crate) base: Option<Entry>,
    /// History files.
    pub(crate) history: Vec<Entry>,
    /// Incremental files in order.
    pub(crate) incr: Vec<Entry>,
    /// The last base `seq` used.
    pub(crate) base_seq: i64,
    /// The last incremental `seq` used.
    pub(crate) incr_seq: i64,
}

/// The manifest's file name for `appendfilename`.
pub(crate) fn manifest_name(prefix: &str) -> String {
    format!("{prefix}.manifest")
}

impl Manifest {
    /// Parses a manifest's text, with Redis's error texts.
    pub(crate) fn parse(text: &[u8]) -> Result<Manifest, String> {
        let mut m = Manifest::default();
        let mut max_seq = 0i64;
        let mut lines = 0usize;
        let mut rest = text;
        while !rest.is_empty() {
            let (line, next, has_newline) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (&rest[..i], &rest[i + 1..], true),
                None => (rest, &rest[rest.len()..], false),
            };
            rest = next;
            lines += 1;
            if line.first() == Some(&b'#') {
                continue;
            }
            if !has_newline || line.len() >= MAX_LINE {
                return Err(fatal(
                    line,
                    lines,
                    "The AOF manifest file contains too long line",
                ));
            }
            let trimmed = trim(line);
            if trimmed.is_empty() {
                return Err(fatal(line, lines, "Invalid AOF manifest file format"));
            }
            let words = match split_args(trimmed) {
                Some(w) if w.len() >= 6 && w.len() % 2 == 0 => w,
                _ => return Err(fatal(line, lines, "Invalid AOF manifest file format")),
            };
            let (mut name, mut seq, mut kind) = (None, 0i64, None);
            for pair in words.chunks(2) {
                let value = &pair[1];
                if pair[0].eq_ignore_ascii_case(b"file") {
                    let n = String::from_utf8_lossy(value).into_owned();
                    if n.contains('/') {
                        return Err(fatal(line, lines, "File can't be a path, just a filename"));
                    }
                    name = Some(n);
                } else if pair[0].eq_ignore_ascii_case(b"seq") {
                    seq = atoll(value);
                } else if pair[0].eq_ignore_ascii_case(b"type") {
                    kind = value.first().copied();
                }
            }
            let (Some(name), Some(kind)) = (name.filter(|n| !n.is_empty()), kind) else {
                return Err(fatal(line, lines, "Invalid AOF manifest file format"));
            };
            if seq == 0 {
                return Err(fatal(line, lines, "Invalid AOF manifest file format"));
            }
            match kind {
                b'b' => {
                    if m.base.is_some() {
                        return Err(fatal(line, lines, "Found duplicate base file information"));
                    }
                    m.base_seq = seq;
                    m.base = Some(Entry {
                        name,
                        seq,
                        kind: Kind::Base,
                    });
                }
                b'h' => m.history.push(Entry {
                    name,
                    seq,
                    kind: Kind::History,
                }),
                b'i' => {
                    if seq <= max_seq {
                        return Err(fatal(line, lines, "Found a non-monotonic sequence number"));
                    }
                    max_seq = seq;
                    m.incr_seq = seq;
                    m.incr.push(Entry {
                        name,
                        seq,
                        kind: Kind::Incr,
                    });
                }
                _ => return Err(fatal(line, lines, "Unknown AOF file type")),
            }
        }
        if lines == 0 {
            return Err("Found an empty AOF manifest".into());
        }
        Ok(m)
    }

    /// The manifest's text: the base, then the history, then the incremental files.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        for e in self.base.iter().chain(&self.history).chain(&self.incr) {
            out.push_str(&format!(
                "file {} seq {} type {}\n",
                repr_if_needed(&e.name),
                e.seq,
                e.kind.letter()
            ));
        }
        out
    }

    /// Whether the manifest names no base and no incremental file.
    pub(crate) fn is_empty(&self) -> bool {
        self.base.is_none() && self.incr.is_empty()
    }

    /// Names a new base (`<prefix>.<seq>.base.rdb|aof`), the old one becoming history.
    pub(crate) fn new_base(&mut self, prefix: &str, rdb: bool) -> String {
        if let Some(mut old) = self.base.take() {
            old.kind = Kind::History;
            self.history.insert(0, old);
        }
        self.base_seq += 1;
        let name = format!(
            "{prefix}.{}.base.{}",
            self.base_seq,
            if rdb { "rdb" } else { "aof" }
        );
        self.base = Some(Entry {
            name: name.clone(),
            seq: self.base_seq,
            kind: Kind::Base,
        });
        name
    }

    /// Names a new incremental file (`<prefix>.<seq>.incr.aof`) and appends it.
    pub(crate) fn new_incr(&mut self, prefix: &str) -> String {
        self.incr_seq += 1;
        let name = format!("{prefix}.{}.incr.aof", self.incr_seq);
        self.incr.push(Entry {
            name: name.clone(),
            seq: self.incr_seq,
            kind: Kind::Incr,
        });
        name
    }

    /// The incremental file written to now: the last one (None if there is none).
    pub(crate) fn last_incr(&self) -> Option<&str> {
        self.incr.last().map(|e| e.name.as_str())
    }

    /// After a rewrite: every incremental file but the last (the one being written)
    /// becomes history.
    pub(crate) fn retire_incr_but_last(&mut self) {
        let keep = self.incr.pop();
        for mut e in self.incr.drain(..).rev() {
            e.kind = Kind::History;
            self.history.insert(0, e);
        }
        self.incr.extend(keep);
    }

    /// Writes the manifest into `dir` atomically (temp file, sync, rename, folder sync).
    pub(crate) fn persist(&self, dir: &Path, prefix: &str) -> std::io::Result<()> {
        let name = manifest_name(prefix);
        let temp = dir.join(format!("temp-{name}"));
        {
            let mut f = std::fs::File::create(&temp)?;
            f.write_all(self.render().as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&temp, dir.join(&name))?;
        sync_dir(dir)
    }
}

/// Syncs a folder, so a rename or a new file in it survives a crash.
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

fn fatal(line: &[u8], n: usize, why: &str) -> String {
    format!(
        "Reading the manifest file, at line {n}: '{}': {why}",
        String::from_utf8_lossy(trim(line))
    )
}

fn trim(line: &[u8]) -> &[u8] {
    let ws = |b: &u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    let start = line.iter().position(|b| !ws(b)).unwrap_or(line.len());
    let end = line.iter().rposition(|b| !ws(b)).map_or(start, |i| i + 1);
    &line[start..end.max(start)]
}

/// C's `atoll`: leading blanks, a sign, digits; anything else ends it (0 if none).
fn atoll(v: &[u8]) -> i64 {
    let s = std::str::from_utf8(v).unwrap_or("").trim_start();
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let n = digits
        .bytes()
        .take_while(u8::is_ascii_digit)
        .fold(0i64, |acc, d| {
            acc.saturating_mul(10).saturating_add(i64::from(d - b'0'))
        });
    if neg { -n } else { n }
}

/// A name as Redis writes it in the manifest: quoted with C escapes when it has a space,
/// a quote, a backslash or a byte that is not printable (its `sdsneedsrepr`).
fn repr_if_needed(name: &str) -> String {
    let needs = name
        .bytes()
        .any(|b| b == b' ' || b == b'"' || b == b'\\' || !(0x21..0x7f).contains(&b));
    if !needs {
        return name.to_string();
    }
    let mut out = String::from("\"");
    for b in name.bytes() {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            7 => out.push_str("\\a"),
            8 => out.push_str("\\b"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_order() {
        let mut m = Manifest::default();
        assert_eq!(
            m.new_base("appendonly.aof", true),
            "appendonly.aof.1.base.rdb"
        );
        assert_eq!(m.new_incr("appendonly.aof"), "appendonly.aof.1.incr.aof");
        m.new_incr("appendonly.aof");
        m.retire_incr_but_last();
        m.new_base("appendonly.aof", true);
        let text = m.render();
        assert_eq!(
            text,
            "file appendonly.aof.2.base.rdb seq 2 type b\n\
             file appendonly.aof.1.base.rdb seq 1 type h\n\
             file appendonly.aof.1.incr.aof seq 1 type h\n\
             file appendonly.aof.2.incr.aof seq 2 type i\n"
        );
        assert_eq!(Manifest::parse(text.as_bytes()).unwrap(), m);
    }

    #[test]
    fn refuses_what_redis_refuses() {
        let bad = |t: &str| Manifest::parse(t.as_bytes()).unwrap_err();
        assert!(bad("").contains("empty AOF manifest"));
        assert!(bad("file a seq 1\n").contains("Invalid AOF manifest file format"));
        assert!(bad("file a/b seq 1 type b\n").contains("just a filename"));
        assert!(bad("file a seq 1 type b\nfile b seq 2 type b\n").contains("duplicate base"));
        assert!(bad("file a seq 2 type i\nfile b seq 2 type i\n").contains("non-monotonic"));
        assert!(bad("file a seq 1 type x\n").contains("Unknown AOF file type"));
        assert!(bad("file a seq 1 type b").contains("too long line"));
        assert!(bad("\n").contains("Invalid AOF manifest file format"));
        // Comments and extra pairs (forward compatibility) are accepted.
        let m = Manifest::parse(b"# hi\nfile a seq 1 type b extra 1\n").unwrap();
        assert_eq!(m.base.unwrap().name, "a");
    }

    #[test]
    fn odd_names_are_quoted() {
        let m = Manifest {
            base: Some(Entry {
                name: "a b".into(),
                seq: 1,
                kind: Kind::Base,
            }),
            ..Manifest::default()
        };
        assert_eq!(m.render(), "file \"a b\" seq 1 type b\n");
        assert_eq!(Manifest::parse(m.render().as_bytes()).unwrap().base, m.base);
    }
}
