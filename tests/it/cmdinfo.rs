//! COMMAND, COMMAND INFO, COMMAND LIST, COMMAND COUNT and COMMAND GETKEYS against a real
//! redis-server 7.0.15: every command and subcommand sluice lists answers COMMAND INFO exactly
//! as Redis does (name, arity, flags, first/last/step, ACL categories, tips, key specs), in
//! RESP2 and RESP3, except for the differences listed below with their reasons.
//!
//! Cluster clients route by the key specs and tips (redis-py, Lettuce, Jedis), ioredis reads
//! the flags: these are not cosmetic.

use std::collections::{BTreeMap, BTreeSet};

use redis::Value;

use crate::support::{Conn, RedisServer, escape, sluice};

/// Commands sluice has and Redis 7.0.15 does not.
const ABSENT_FROM_REDIS: &[&str] = &[
    // The rate limiter itself (redis-cell's command, built in). Its entry is sluice's own:
    // arity -5, `write denyoom`, key 1 with an `RW update` key spec.
    "cl.throttle",
    // Test mode only (the in-process server runs in test mode): the clock, fault injection,
    // the command log and the reset.
    "clock",
    "cmdlog",
    "fault",
    // Redis 7.4's hash-field expiry: their COMMAND INFO rows are compared with Redis 7.4.1's
    // in the transcript tests/diff/hash_field_expiry.txt.
    "hexpire",
    "hpexpire",
    "hexpireat",
    "hpexpireat",
    "httl",
    "hpttl",
    "hexpiretime",
    "hpexpiretime",
    "hpersist",
    // Redis 8.0's HGETEX/HSETEX/HGETDEL: rows from Redis's command JSON files, in the
    // transcript tests/diff/hash_field_expiry_8.txt.
    "hgetex",
    "hsetex",
    "hgetdel",
    // Redis 8.4/8.8's string commands: rows from Redis's command JSON files, in the
    // transcript tests/diff/strings_8.txt.
    "digest",
    "delex",
    "msetex",
    "increx",
    // Valkey 9.0's DELIFEQ: its row from Valkey's command JSON file, in the transcript
    // tests/diff/valkey_9.txt.
    "delifeq",
    "testmode",
];

/// Subcommands sluice has and Redis 7.0.15 does not.
const EXTRA_SUBCOMMANDS: &[&str] = &[
    // Redis 7.2's; redis-py and other clients send CLIENT SETINFO on connect.
    "client|setinfo",
    "client|no-touch",
    // What RESP3 clients send at connect (redis-py 7, go-redis, node-redis, Jedis): accepted
    // with +OK, nothing announced (see README).
    "client|maint_notifications",
];

/// Subcommands Redis 7.0.15 lists that sluice does not implement; its containers list only
/// what it implements (a client asking for one gets an unknown-subcommand error, as COMMAND
/// INFO says).
const MISSING_SUBCOMMANDS: &[&str] = &[];

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

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

fn items(v: &Value) -> &[Value] {
    match v {
        Value::Array(items) | Value::Set(items) => items,
        _ => &[],
    }
}

fn query(con: &mut redis::Connection, args: &[&str]) -> Value {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(con).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// The COMMAND INFO entries of `names`, by name (None for an unknown name).
fn infos(con: &mut redis::Connection, names: &[String]) -> Vec<Value> {
    let mut args = vec!["COMMAND", "INFO"];
    args.extend(names.iter().map(String::as_str));
    items(&query(con, &args)).to_vec()
}

/// Compares one entry (and its subcommands, by name: Redis lists them in the order of a
/// hash table seeded at random on each start). Subcommand names missing on either side are
/// collected in `extra`/`missing`.
fn compare(
    ours: &Value,
    theirs: &Value,
    mismatches: &mut Vec<String>,
    extra: &mut BTreeSet<String>,
    missing: &mut BTreeSet<String>,
) {
    let (a, b) = (items(ours), items(theirs));
    let name = a.first().map(text).unwrap_or_default();
    if a.len() != 10 || b.len() != 10 {
        mismatches.push(format!("{name}: {} vs {} fields", a.len(), b.len()));
        return;
    }
    const FIELDS: [&str; 9] = [
        "name",
        "arity",
        "flags",
        "first",
        "last",
        "step",
        "acl",
        "tips",
        "key specs",
    ];
    for (i, field) in FIELDS.iter().enumerate() {
        if a[i] != b[i] {
            mismatches.push(format!(
                "{name} {field}:\n  sluice {:?}\n  redis  {:?}",
                a[i], b[i]
            ));
        }
    }
    if std::mem::discriminant(&a[9]) != std::mem::discriminant(&b[9]) {
        mismatches.push(format!("{name} subcommands: reply type differs"));
    }
    let by_name = |v: &Value| -> BTreeMap<String, Value> {
        items(v)
            .iter()
            .map(|s| (items(s).first().map(text).unwrap_or_default(), s.clone()))
            .collect()
    };
    let (ours_subs, theirs_subs) = (by_name(&a[9]), by_name(&b[9]));
    for (sub, entry) in &ours_subs {
        match theirs_subs.get(sub) {
            Some(t) => compare(entry, t, mismatches, extra, missing),
            None => {
                extra.insert(sub.clone());
            }
        }
    }
    missing.extend(
        theirs_subs
            .keys()
            .filter(|s| !ours_subs.contains_key(*s))
            .cloned(),
    );
}

fn check_protocol(redis_server: &RedisServer, server: &sluice::TestServer, resp3: bool) {
    let mut theirs = connect(redis_server.addr(), resp3);
    let mut ours = connect(server.addr(), resp3);
    // COMMAND LIST names the subcommands too (as Redis 7.0); COMMAND COUNT counts the
    // commands alone.
    let listed: Vec<String> = items(&query(&mut ours, &["COMMAND", "LIST"]))
        .iter()
        .map(text)
        .collect();
    let names: Vec<String> = listed
        .iter()
        .filter(|n| !n.contains('|'))
        .cloned()
        .collect();
    assert!(listed.iter().any(|n| n == "client|tracking"), "{listed:?}");
    let count = query(&mut ours, &["COMMAND", "COUNT"]);
    assert_eq!(count, Value::Int(names.len() as i64), "COMMAND COUNT");
    assert!(names.len() > 150, "COMMAND LIST: {names:?}");

    let (ours_infos, theirs_infos) = (infos(&mut ours, &names), infos(&mut theirs, &names));
    let mut mismatches = Vec::new();
    let mut extra = BTreeSet::new();
    let mut missing = BTreeSet::new();
    let mut absent = BTreeSet::new();
    let mut sub_names = Vec::new();
    for ((name, o), t) in names.iter().zip(&ours_infos).zip(&theirs_infos) {
        if *t == Value::Nil {
            absent.insert(name.clone());
            continue;
        }
        compare(o, t, &mut mismatches, &mut extra, &mut missing);
        sub_names.extend(items(&items(o)[9]).iter().map(|s| text(&items(s)[0])));
    }

    // Subcommands asked for by their full names (`client|list`) give the same entries.
    let (ours_subs, theirs_subs) = (infos(&mut ours, &sub_names), infos(&mut theirs, &sub_names));
    for (o, t) in ours_subs.iter().zip(&theirs_subs) {
        if *t != Value::Nil {
            compare(
                o,
                t,
                &mut mismatches,
                &mut BTreeSet::new(),
                &mut BTreeSet::new(),
            );
        }
    }

    // COMMAND (every entry) gives COMMAND INFO's entries.
    let all = query(&mut ours, &["COMMAND"]);
    let listed: BTreeMap<String, Value> = items(&all)
        .iter()
        .map(|e| (text(&items(e)[0]), e.clone()))
        .collect();
    assert_eq!(listed.len(), names.len(), "COMMAND vs COMMAND LIST");
    for (name, info) in names.iter().zip(&ours_infos) {
        assert_eq!(
            listed.get(name),
            Some(info),
            "COMMAND vs COMMAND INFO {name}"
        );
    }

    let set = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert!(
        mismatches.is_empty(),
        "COMMAND INFO differs from Redis (resp3 {resp3}):\n{}",
        mismatches.join("\n")
    );
    assert_eq!(absent, set(ABSENT_FROM_REDIS), "commands Redis lacks");
    assert_eq!(extra, set(EXTRA_SUBCOMMANDS), "subcommands Redis lacks");
    assert_eq!(
        missing,
        set(MISSING_SUBCOMMANDS),
        "Redis's subcommands sluice lacks"
    );
}

#[test]
fn command_info_matches_redis() {
    let redis_server = RedisServer::start();
    let server = sluice();
    check_protocol(&redis_server, &server, false);
    check_protocol(&redis_server, &server, true);
}

/// COMMAND LIST FILTERBY gives, for each filter, the names Redis gives that sluice has (as a
/// set: Redis's order is its hash tables'); the errors are the same.
#[test]
fn command_list_filterby_matches_redis() {
    let redis_server = RedisServer::start();
    let server = sluice();
    let mut theirs = connect(redis_server.addr(), false);
    let mut ours = connect(server.addr(), false);
    let all: BTreeSet<String> = items(&query(&mut ours, &["COMMAND", "LIST"]))
        .iter()
        .flat_map(|n| {
            let n = text(n);
            let subs = items(&infos(&mut ours, std::slice::from_ref(&n))[0])[9].clone();
            let subs: Vec<String> = items(&subs).iter().map(|s| text(&items(s)[0])).collect();
            std::iter::once(n).chain(subs)
        })
        .collect();
    let mut categories: Vec<String> = items(&query(&mut theirs, &["ACL", "CAT"]))
        .iter()
        .map(text)
        .collect();
    categories.extend(["CONNECTION".to_string(), "nosuch".to_string()]);
    let mut filters: Vec<[String; 2]> = categories
        .into_iter()
        .map(|c| ["ACLCAT".to_string(), c])
        .collect();
    for p in ["*", "cl*", "CLIENT|*", "*get*", "?et", "[a-c]*", "nosuch"] {
        filters.push(["PATTERN".to_string(), p.to_string()]);
    }
    filters.push(["MODULE".to_string(), "redis-cell".to_string()]);
    let mut mismatches = Vec::new();
    for [kind, value] in &filters {
        let args = ["COMMAND", "LIST", "FILTERBY", kind, value];
        let set = |con: &mut redis::Connection| -> BTreeSet<String> {
            items(&query(con, &args)).iter().map(text).collect()
        };
        // sluice's own names (allow-listed above, with the test-mode commands' subcommands)
        // are not Redis's to compare.
        let (ours_names, own): (BTreeSet<String>, BTreeSet<String>) =
            set(&mut ours).into_iter().partition(|n| {
                let top = n.split('|').next().unwrap_or("");
                !ABSENT_FROM_REDIS.contains(&top) && !EXTRA_SUBCOMMANDS.contains(&n.as_str())
            });
        assert!(own.iter().all(|n| all.contains(n)), "{own:?}");
        let theirs_names: BTreeSet<String> = set(&mut theirs)
            .into_iter()
            .filter(|n| all.contains(n))
            .collect();
        if ours_names != theirs_names {
            mismatches.push(format!(
                "{args:?}: only sluice {:?}, only redis {:?}",
                ours_names.difference(&theirs_names).collect::<Vec<_>>(),
                theirs_names.difference(&ours_names).collect::<Vec<_>>()
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));

    let mut theirs = Conn::connect(redis_server.addr());
    let mut ours = Conn::connect(server.addr());
    let bad: &[&[&[u8]]] = &[
        &[b"COMMAND", b"LIST", b"FILTERBY"],
        &[b"COMMAND", b"LIST", b"FILTERBY", b"ACLCAT"],
        &[b"COMMAND", b"LIST", b"FILTERBY", b"NOSUCH", b"x"],
        &[b"COMMAND", b"LIST", b"FILTERBY", b"ACLCAT", b"read", b"x"],
        &[b"COMMAND", b"LIST", b"x"],
    ];
    for args in bad {
        assert_eq!(
            escape(&ours.cmd(args)),
            escape(&theirs.cmd(args)),
            "{args:?}"
        );
    }
}

/// Argument lists for COMMAND GETKEYS: every kind of key spec (single key, ranges with a
/// step, numkeys, destination plus sources, options after the keys), and the errors.
const GETKEYS_SAMPLES: &[&[&str]] = &[
    &["get", "k"],
    &["set", "k", "v", "EX", "10"],
    &["mget", "a", "b", "c"],
    &["mset", "a", "1", "b", "2"],
    &["msetnx", "a", "1", "b", "2"],
    &["del", "a", "b"],
    &["exists", "a", "b", "c"],
    &["unlink", "a"],
    &["touch", "a", "b"],
    &["rename", "a", "b"],
    &["renamenx", "a", "b"],
    &["copy", "a", "b"],
    &["lmove", "a", "b", "LEFT", "RIGHT"],
    &["rpoplpush", "a", "b"],
    &["blpop", "a", "b", "0"],
    &["bzpopmin", "a", "b", "0"],
    &["lmpop", "2", "a", "b", "LEFT"],
    &["zmpop", "2", "a", "b", "MIN"],
    &["zrangestore", "d", "s", "0", "-1"],
    &["zunionstore", "d", "2", "a", "b"],
    &["zinterstore", "d", "2", "a", "b", "WEIGHTS", "1", "2"],
    &["zunion", "2", "a", "b"],
    &["zdiff", "2", "a", "b"],
    &["sinterstore", "d", "a", "b"],
    &["smove", "a", "b", "m"],
    &["sintercard", "2", "a", "b"],
    &["bitop", "AND", "d", "a", "b"],
    &["pfmerge", "d", "a", "b"],
    &["pfcount", "a", "b"],
    &["eval", "return 1", "2", "a", "b", "x"],
    &["eval", "return 1", "0"],
    &[
        "evalsha",
        "0000000000000000000000000000000000000000",
        "1",
        "a",
    ],
    &["eval_ro", "return 1", "1", "a"],
    &["fcall", "f", "1", "a", "x"],
    &["fcall_ro", "f", "0"],
    &["watch", "a", "b"],
    &["object", "encoding", "a"],
    &["memory", "usage", "a"],
    &["expire", "a", "10"],
    &["getex", "a", "PERSIST"],
    &["incr", "a"],
    &["hset", "h", "f", "v"],
    &["zadd", "z", "1", "m"],
    &["sort", "a", "BY", "w_*", "STORE", "d"],
    &["sort_ro", "a"],
    &["restore", "a", "0", "x"],
    &["dump", "a"],
    // Errors.
    &["ping"],
    &["get"],
    &["nosuchcommand", "a"],
    &["eval", "return 1", "5", "a"],
    &["eval", "return 1", "-1"],
    &["lmpop", "0", "a", "LEFT"],
    &["zunionstore", "d", "3", "a"],
];

/// More argument lists for the flags: the ones where the arguments decide them (SET's GET,
/// BITFIELD's operations).
const GETKEYSANDFLAGS_SAMPLES: &[&[&str]] = &[
    &["set", "k", "v", "GET"],
    &["set", "k", "v", "NX", "get"],
    &["bitfield", "k", "GET", "u8", "0"],
    &["bitfield", "k", "OVERFLOW", "WRAP", "GET", "u8", "0"],
    &["bitfield", "k", "SET", "u8", "0", "1"],
    &["bitfield", "k", "INCRBY", "u8", "0", "1"],
    &["bitfield", "k", "GET", "u8"],
    &["bitfield_ro", "k", "GET", "u8", "0"],
    &["sort", "a", "STORE", "d", "BY", "nosort"],
    &["sort", "a", "GET", "#", "GET", "x_*"],
    &["getdel", "k"],
    &["lpush", "k", "v"],
    &["zadd", "z", "1", "m"],
    &["smove", "a", "b", "m"],
    &["bitop", "AND", "d", "a", "b"],
    &["pfmerge", "d", "a"],
    &["sunionstore", "d", "a", "b"],
    &["zdiffstore", "d", "2", "a", "b"],
];

#[test]
fn command_getkeys_matches_redis() {
    let redis_server = RedisServer::start();
    let server = sluice();
    let mut theirs = Conn::connect(redis_server.addr());
    let mut ours = Conn::connect(server.addr());
    let mut mismatches = Vec::new();
    for resp3 in [false, true] {
        if resp3 {
            ours.cmd(&[b"HELLO", b"3"]);
            theirs.cmd(&[b"HELLO", b"3"]);
        }
        for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
            for sample in GETKEYS_SAMPLES.iter().chain(GETKEYSANDFLAGS_SAMPLES) {
                let mut args: Vec<&[u8]> = vec![b"COMMAND", sub.as_bytes()];
                args.extend(sample.iter().map(|a| a.as_bytes()));
                let (a, b) = (ours.cmd(&args), theirs.cmd(&args));
                if a != b {
                    mismatches.push(format!(
                        "{sub} {sample:?} (resp3 {resp3}):\n  sluice {}\n  redis  {}",
                        escape(&a),
                        escape(&b)
                    ));
                }
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));

    // CL.THROTTLE (not in Redis): its one key, with its key spec's flags.
    let throttle: &[&[u8]] = &[
        b"COMMAND",
        b"GETKEYSANDFLAGS",
        b"CL.THROTTLE",
        b"k",
        b"15",
        b"30",
        b"60",
    ];
    assert_eq!(
        escape(&ours.cmd(throttle)),
        escape(b"*1\r\n*2\r\n$1\r\nk\r\n~2\r\n+RW\r\n+update\r\n")
    );
}
