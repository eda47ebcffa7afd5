//! COMMAND DOCS against a real redis-server 7.0.15: the structure of every command's docs
//! (argument names, types, tokens, flags, nesting, since, group, doc flags, history versions)
//! equals Redis's, in RESP3 and RESP2 shape; only our own prose (summary, complexity, history
//! texts, replaced_by) differs. And redis-cli's `help <command>`, which is built from these
//! docs, prints the same usage line for both servers.

use std::collections::BTreeSet;
use std::process::Command;

use redis::Value;

use crate::support::{RedisServer, sluice};

fn connect(addr: std::net::SocketAddr, resp3: bool) -> redis::Connection {
    let url = if resp3 {
        format!("redis://{addr}/?protocol=resp3")
    } else {
        format!("redis://{addr}/")
    };
    redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
}

fn docs(con: &mut redis::Connection, names: &[&str]) -> Value {
    redis::cmd("COMMAND")
        .arg("DOCS")
        .arg(names)
        .query(con)
        .unwrap_or_else(|e| panic!("COMMAND DOCS {names:?}: {e}"))
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

/// A RESP3 docs value as text, with our prose masked (`*`) and the subcommands map sorted
/// (Redis lists it in hash order).
fn shape(v: &Value, key: &str) -> String {
    match v {
        Value::Map(pairs) => {
            let mut items: Vec<String> = pairs
                .iter()
                .map(|(k, v)| {
                    let k = text(k);
                    let v = match k.as_str() {
                        "summary" | "complexity" | "replaced_by" => "*".to_string(),
                        _ => shape(v, &k),
                    };
                    format!("{k}: {v}")
                })
                .collect();
            if key == "subcommands" {
                items.sort();
            }
            format!("%{{{}}}", items.join(", "))
        }
        Value::Set(items) if key == "history" => {
            let versions: Vec<String> = items
                .iter()
                .map(|e| match e {
                    Value::Array(p) if p.len() == 2 => format!("[{}, *]", text(&p[0])),
                    other => format!("{other:?}"),
                })
                .collect();
            format!("~[{}]", versions.join(", "))
        }
        Value::Set(items) => format!(
            "~[{}]",
            items
                .iter()
                .map(|i| shape(i, ""))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(|i| shape(i, ""))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::BulkString(_) => format!("{:?}", text(v)),
        Value::SimpleString(s) => format!("+{s}"),
        Value::Int(i) => format!(":{i}"),
        other => format!("{other:?}"),
    }
}

/// A RESP3 value as RESP2 sends it (maps flattened, sets as arrays).
fn flatten(v: &Value) -> Value {
    match v {
        Value::Map(pairs) => Value::Array(
            pairs
                .iter()
                .flat_map(|(k, v)| [flatten(k), flatten(v)])
                .collect(),
        ),
        Value::Set(items) | Value::Array(items) => {
            Value::Array(items.iter().map(flatten).collect())
        }
        other => other.clone(),
    }
}

/// Where two values first differ (a path of indexes), if they do.
fn first_difference(a: &Value, b: &Value, path: String) -> Option<String> {
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Some(format!("{path}: {} vs {} items", x.len(), y.len()));
            }
            x.iter()
                .zip(y)
                .enumerate()
                .find_map(|(i, (p, q))| first_difference(p, q, format!("{path}/{i}")))
        }
        _ if a == b => None,
        _ => Some(format!("{path}: {a:?} vs {b:?}")),
    }
}

/// Every (sub)command sluice has, by full name, from its own COMMAND reply.
fn sluice_names(con: &mut redis::Connection) -> BTreeSet<String> {
    let Value::Array(entries) = redis::cmd("COMMAND")
        .query(con)
        .unwrap_or_else(|e| panic!("COMMAND: {e}"))
    else {
        panic!("COMMAND is not an array");
    };
    let mut out = BTreeSet::new();
    for e in &entries {
        let (Value::Array(fields) | Value::Set(fields)) = e else {
            continue;
        };
        out.insert(text(&fields[0]));
        if let Some(Value::Array(subs) | Value::Set(subs)) = fields.get(9) {
            for s in subs {
                if let Value::Array(f) | Value::Set(f) = s {
                    out.insert(text(&f[0]));
                }
            }
        }
    }
    out
}

fn single(v: Value) -> Option<Value> {
    match v {
        Value::Map(mut pairs) if pairs.len() == 1 => pairs.pop().map(|(_, v)| v),
        _ => None,
    }
}

#[test]
fn docs_structure_matches_redis() {
    let redis_server = RedisServer::start();
    let server = sluice();
    let mut theirs = connect(redis_server.addr(), true);
    let mut ours = connect(server.addr(), true);
    let names = sluice_names(&mut ours);
    let mut compared = 0;
    let mut mismatches = Vec::new();
    let mut empty = Vec::new();
    for name in &names {
        let Some(ours_doc) = single(docs(&mut ours, &[name])) else {
            empty.push(name.clone());
            continue;
        };
        if matches!(&ours_doc, Value::Map(p) if p.is_empty()) {
            empty.push(name.clone());
            continue;
        }
        // Commands Redis 7.0 lacks (CL.THROTTLE, CLIENT SETINFO …) have nothing to compare.
        let Some(theirs_doc) = single(docs(&mut theirs, &[name])) else {
            continue;
        };
        let (a, b) = (shape(&ours_doc, ""), shape(&theirs_doc, ""));
        if name.contains('|') || !b.contains("subcommands") {
            if a != b {
                mismatches.push(format!("{name}:\n  sluice {a}\n  redis  {b}"));
            }
        } else {
            // A container: sluice documents the subcommands it has, a subset of Redis's; the
            // subcommands themselves are compared one by one above.
            let strip = |s: &str| s.split(", subcommands:").next().unwrap_or("").to_string();
            if strip(&a) != strip(&b) {
                mismatches.push(format!("{name}:\n  sluice {a}\n  redis  {b}"));
            }
        }
        compared += 1;
    }
    assert!(empty.is_empty(), "commands without docs: {empty:?}");
    assert!(
        mismatches.is_empty(),
        "{} commands differ from Redis:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    assert!(compared > 200, "only {compared} commands compared");
}

#[test]
fn docs_resp2_is_resp3_flattened_and_names_are_kept() {
    let redis_server = RedisServer::start();
    let server = sluice();
    // Redis lists a container's subcommands in hash-table order, which may change from one
    // call to the next: its containers are left out of its half of the check.
    for (addr, names) in [
        (
            redis_server.addr(),
            &["set", "zadd", "client|kill", "CONFIG|GET", "nosuch", "get"][..],
        ),
        (
            server.addr(),
            &[
                "set",
                "zadd",
                "client",
                "CONFIG",
                "config|get",
                "nosuch",
                "get",
            ],
        ),
    ] {
        let mut r3 = connect(addr, true);
        let mut r2 = connect(addr, false);
        let v3 = docs(&mut r3, names);
        let v2 = docs(&mut r2, names);
        if let Some(path) = first_difference(&v2, &flatten(&v3), String::new()) {
            panic!("{addr}: RESP2 is not RESP3 flattened, at {path}");
        }
        let Value::Map(pairs) = &v3 else {
            panic!("{addr}: not a map: {v3:?}");
        };
        let keys: Vec<String> = pairs.iter().map(|(k, _)| text(k)).collect();
        let expected: Vec<String> = names
            .iter()
            .filter(|n| **n != "nosuch")
            .map(|n| n.to_ascii_lowercase())
            .collect();
        assert_eq!(keys, expected, "{addr}");
    }
}

/// redis-cli's usage line (the first non-empty line of `help <command>`) and its since/group
/// lines; the summary line is ours.
fn cli_help(port: u16, command: &[&str]) -> Vec<String> {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "help"])
        .args(command)
        .output()
        .expect("redis-cli is needed for this test (Debian: apt-get install redis-tools)");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.contains("summary:"))
        .map(String::from)
        .collect()
}

#[test]
fn redis_cli_help_prints_redis_usage() {
    let redis_server = RedisServer::start();
    let server = sluice();
    for command in [
        &["SET"][..],
        &["ZADD"],
        &["CLIENT", "SETNAME"],
        &["EVAL"],
        &["GETSET"],
    ] {
        let theirs = cli_help(redis_server.addr().port(), command);
        let ours = cli_help(server.addr().port(), command);
        assert!(
            theirs.len() >= 3,
            "redis-cli help {command:?} printed {theirs:?}"
        );
        assert_eq!(ours, theirs, "redis-cli help {command:?}");
    }
}
