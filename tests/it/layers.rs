//! The layering of `src/`, checked: the dependency directions ARCHITECTURE.md promises that
//! the compiler does not enforce (the modules of `src/` are one crate, so any file may name
//! any other; `num` and `limiter` are crates of their own, `crates/`, which the compiler
//! keeps from reaching up). Each rule says which modules a layer may not reach; the few places that do today
//! are listed in `KNOWN`, each with the reason, and the test fails both when a new crossing
//! appears and when a listed one is gone (so the list only shrinks).
//!
//! A dependency is a `crate::a::b` path in code (comments are ignored), including the
//! grouped forms `crate::{a, b}` and `crate::a::{b, c}`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The floor: imports nothing of the crate above it.
const FLOOR: &[&str] = &[
    "protocol",
    "num",
    "limiter",
    "clock",
    "error",
    "logging",
    "alloc_stats",
    "client",
];

/// Everything above the store (the store and the floor may not reach any of it).
const ABOVE_STORE: &[&str] = &[
    "rdb",
    "aof",
    "script",
    "cluster",
    "repl",
    "services",
    "commands",
    "engine",
    "server",
    "testing",
    "supervisor",
    "conffile",
    "conf_rewrite",
];

/// A rule: files of module `from` may not reach any of `to` (a top module, or
/// `top::second` for one of the layered folders).
struct Rule {
    from: &'static [&'static str],
    to: &'static [&'static str],
    why: &'static str,
}

const RULES: &[Rule] = &[
    Rule {
        from: FLOOR,
        to: &[
            "store",
            "config",
            "rdb",
            "script",
            "cluster",
            "repl",
            "services",
            "commands",
            "engine",
            "server",
            "testing",
            "supervisor",
            "conffile",
            "conf_rewrite",
        ],
        why: "the floor imports nothing above it",
    },
    Rule {
        from: &["store"],
        to: ABOVE_STORE,
        why: "the store knows no command, service or server",
    },
    Rule {
        from: &["config"],
        to: ABOVE_STORE,
        why: "the configuration is read by everyone and reads nobody",
    },
    Rule {
        from: &["rdb", "script", "cluster"],
        to: &[
            "repl", "services", "commands", "engine", "server", "testing",
        ],
        why: "the formats, the Lua host and the slot map sit below the engine",
    },
    Rule {
        from: &["aof"],
        to: &["services", "commands", "engine", "server", "testing"],
        why: "the append-only file's files and writer sit beside the formats, below the engine",
    },
    Rule {
        from: &["services"],
        to: &[
            "commands",
            "server::connection",
            "server::loops",
            "server::uring",
            "server::eventloop",
        ],
        why: "services are what commands talk to, never the reverse",
    },
    Rule {
        from: &["engine"],
        to: &[
            "server::connection",
            "server::loops",
            "server::uring",
            "server::eventloop",
        ],
        why: "the engine is handed the server's state, not its sockets",
    },
    Rule {
        from: &["commands"],
        to: &[
            "server::connection",
            "server::loops",
            "server::uring",
            "server::eventloop",
        ],
        why: "a handler returns to the connection; it does not reach into it",
    },
    Rule {
        from: &["repl"],
        to: &[
            "commands",
            "server::connection",
            "server::loops",
            "server::uring",
            "server::eventloop",
        ],
        why: "replication runs commands through the engine",
    },
    Rule {
        from: &["engine"],
        to: &["commands"],
        why: "the engine reaches the families only through their table rows (`all_families`)",
    },
];

/// Crossings that are the design, not debt: the table joins the families' rows.
const ALLOWED: &[(&str, &str)] = &[
    ("src/engine/table.rs", "commands::all_families"),
    ("src/engine/docs/mod.rs", "commands::all_families"),
];

/// Crossings that exist today, as (file, target), each to be removed by a later change.
const KNOWN: &[(&str, &str, &str)] = &[
    (
        "src/repl/replica.rs",
        "commands",
        "the link syncs the cluster role (commands::cluster::sync_role)",
    ),
    (
        "src/engine/call.rs",
        "commands::scripting",
        "call asks the script host which shards a script holds",
    ),
    (
        "src/engine/call.rs",
        "commands::cluster",
        "call runs cluster routing, which lives with the CLUSTER commands",
    ),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {dir:?}: {e}")) {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a line: what precedes a `//` comment (string literals holding `//` are rare
/// enough in `use` paths to ignore).
fn code(line: &str) -> &str {
    match line.find("//") {
        Some(i) => &line[..i],
        None => line,
    }
}

fn ident(s: &str) -> (&str, &str) {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    (&s[..end], &s[end..])
}

/// The names of a `{a, b::c, d as e}` group, first segment each, up to its closing brace.
fn group(s: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut depth = 0;
    let mut at_start = true;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                if depth == 0 {
                    break;
                }
                depth -= 1;
            }
            ',' if depth == 0 => at_start = true,
            c if at_start && depth == 0 && (c.is_ascii_alphabetic() || c == '_') => {
                let (name, _) = ident(&s[i..]);
                names.push(name.to_string());
                at_start = false;
            }
            _ => {}
        }
    }
    names
}

/// Every `top` and `top::second` a file's code names.
fn targets(text: &str) -> BTreeSet<String> {
    // Join the code lines so grouped `use` statements spanning lines parse whole.
    let joined: String = text
        .lines()
        .map(|l| code(l).to_string() + " ")
        .collect::<String>();
    let mut out = BTreeSet::new();
    let mut rest = joined.as_str();
    while let Some(i) = rest.find("crate::") {
        let before = &rest[..i];
        rest = &rest[i + "crate::".len()..];
        if before.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            continue; // `$crate::` or a longer name
        }
        if let Some(inner) = rest.strip_prefix('{') {
            out.extend(group(inner));
            continue;
        }
        // `top::second` when a second segment follows (so a rule may allow one item of a
        // module it forbids), else `top`.
        let (top, after) = ident(rest);
        match after.strip_prefix("::") {
            Some(after) => match after.strip_prefix('{') {
                Some(inner) => {
                    for second in group(inner) {
                        out.insert(format!("{top}::{second}"));
                    }
                }
                None => {
                    out.insert(format!("{top}::{}", ident(after).0));
                }
            },
            None => {
                out.insert(top.to_string());
            }
        }
    }
    out
}

/// The top module a file belongs to (`src/engine/call.rs` → `engine`).
fn module_of(rel: &str) -> String {
    let path = rel.strip_prefix("src/").unwrap_or(rel);
    let first = path.split('/').next().unwrap_or(path);
    first.strip_suffix(".rs").unwrap_or(first).to_string()
}

fn reaches(target: &str, forbidden: &str) -> bool {
    target == forbidden || target.starts_with(&format!("{forbidden}::"))
}

#[test]
fn dependencies_run_one_way() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    let mut crossings = BTreeSet::new();
    let mut new = Vec::new();
    for file in &files {
        let rel = file
            .strip_prefix(root)
            .expect("under the root")
            .to_string_lossy()
            .replace('\\', "/");
        let from = module_of(&rel);
        let text = std::fs::read_to_string(file).expect("read source");
        for target in targets(&text) {
            for rule in RULES {
                if !rule.from.contains(&from.as_str()) {
                    continue;
                }
                let Some(hit) = rule.to.iter().find(|f| reaches(&target, f)) else {
                    continue;
                };
                if ALLOWED
                    .iter()
                    .any(|(f, t)| *f == rel && reaches(&target, t))
                {
                    continue;
                }
                let known = KNOWN
                    .iter()
                    .find(|(f, t, _)| *f == rel && reaches(&target, t));
                match known {
                    Some((f, t, _)) => {
                        crossings.insert((*f, *t));
                    }
                    None => new.push(format!("{rel} uses crate::{target} ({hit}: {})", rule.why)),
                }
            }
        }
    }
    new.sort();
    new.dedup();
    assert!(
        new.is_empty(),
        "new dependencies against the layering (see ARCHITECTURE.md):\n  {}",
        new.join("\n  ")
    );
    let gone: Vec<_> = KNOWN
        .iter()
        .filter(|(f, t, _)| !crossings.contains(&(*f, *t)))
        .map(|(f, t, _)| format!("{f} -> {t}"))
        .collect();
    assert!(
        gone.is_empty(),
        "these known crossings are gone: remove them from KNOWN in tests/it/layers.rs:\n  {}",
        gone.join("\n  ")
    );
}

#[test]
fn the_parser_sees_grouped_and_plain_paths() {
    let t = targets(
        "use crate::{engine, services::pause};\nuse crate::commands::{zset::limits, list};\n\
         // crate::server::loops in a comment\nlet x = crate::server::Shared::new();",
    );
    let want: BTreeSet<String> = [
        "engine",
        "services",
        "commands::zset",
        "commands::list",
        "server::Shared",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(t, want);
}
