//! The operators' statistics end to end, against a real redis-server where behaviour must
//! match: INFO commandstats (calls, rejected and failed calls from plain commands, EXEC and
//! scripts), errorstats, SLOWLOG (entries, trimming, redaction, script calls) and LATENCY
//! (driven by FAULT LATENCY and a frozen clock, so nothing depends on the machine's speed).

use std::collections::BTreeMap;

use redis::{Connection, Value};

use crate::support::{RedisServer, sluice};

fn connect(port: u16) -> Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap()
}

/// Runs one command, whatever its reply (errors included).
fn run(con: &mut Connection, args: &[&str]) -> Value {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<Value>(con) {
        Ok(v) => v,
        Err(e) => Value::SimpleString(format!("error: {e}")),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::VerbatimString { text, .. } => text.clone(),
        Value::Int(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

/// An INFO section as field → value, with the named `key=value,…` parts dropped from each
/// value (the timings, which differ from server to server).
fn info(con: &mut Connection, section: &str, drop: &[&str]) -> BTreeMap<String, String> {
    let body = text(&run(con, &["INFO", section]));
    body.lines()
        .filter(|l| !l.starts_with('#') && l.contains(':'))
        .map(|l| {
            let (k, v) = l.split_once(':').unwrap();
            let kept: Vec<&str> = v
                .split(',')
                .filter(|part| !drop.iter().any(|d| part.starts_with(&format!("{d}="))))
                .collect();
            (k.to_string(), kept.join(","))
        })
        .collect()
}

/// The same commands on both servers.
fn both(redis: &mut Connection, sluice: &mut Connection, script: &[&[&str]]) {
    for args in script {
        let (r, s) = (run(redis, args), run(sluice, args));
        if args[0] != "HELLO" {
            // (HELLO's reply has the client id, which differs.)
            assert_eq!(text(&r), text(&s), "{args:?}");
        }
    }
}

#[test]
fn commandstats_and_errorstats_count_as_redis_counts() {
    let redis_server = RedisServer::start();
    let server = sluice();
    let mut r = connect(redis_server.port());
    let mut s = connect(server.addr().port());
    let script: &[&[&str]] = &[
        &["CONFIG", "RESETSTAT"],
        &["SET", "a", "1"],
        &["SET", "a"],
        &["INCR", "s"],
        &["SET", "s", "x"],
        &["INCR", "s"],
        &["LPUSH", "s", "x"],
        &["NOSUCH", "x"],
        &["CONFIG", "GET", "maxmemory"],
        &["CONFIG", "NOSUCH"],
        &["MULTI"],
        &["INCR", "a"],
        &["INCR", "s"],
        &["GET", "a"],
        &["EXEC"],
        &["MULTI"],
        &["GET"],
        &["EXEC"],
        &["EXEC"],
        &[
            "EVAL",
            "redis.call('incr', 'a') return redis.call('get', 'a')",
            "0",
        ],
        &["EVAL", "return redis.pcall('incr', 's')", "0"],
        &["EVAL", "return redis.call('incr', 's')", "0"],
        &["EVAL", "redis.pcall('incr', 's') return 1", "0"],
        &["EVAL", "return redis.error_reply('MINE is mine')", "0"],
        &["EVAL", "return redis.call('multi')", "0"],
        &["EVAL", "return redis.call('nosuch')", "0"],
        &["EVAL"],
    ];
    both(&mut r, &mut s, script);
    let timings = ["usec", "usec_per_call"];
    let mut redis_stats = info(&mut r, "commandstats", &timings);
    let mut sluice_stats = info(&mut s, "commandstats", &timings);
    // The clients' own connection set-up (redis-rs's CLIENT SETINFO) is not ours to compare.
    for m in [&mut redis_stats, &mut sluice_stats] {
        m.retain(|k, _| !k.starts_with("cmdstat_client|") && k != "cmdstat_info");
    }
    assert_eq!(sluice_stats, redis_stats);
    assert_eq!(
        sluice_stats["cmdstat_incr"],
        "calls=8,rejected_calls=0,failed_calls=5"
    );
    assert_eq!(
        info(&mut s, "errorstats", &[]),
        info(&mut r, "errorstats", &[])
    );
    let total = |c: &mut Connection| info(c, "stats", &[])["total_error_replies"].clone();
    assert_eq!(total(&mut s), total(&mut r));
    // CONFIG RESETSTAT forgets them all.
    both(&mut r, &mut s, &[&["CONFIG", "RESETSTAT"]]);
    assert!(info(&mut s, "errorstats", &[]).is_empty());
    assert_eq!(total(&mut s), "0");
    let left = info(&mut s, "commandstats", &timings);
    assert!(
        left.keys()
            .all(|k| k == "cmdstat_config|resetstat" || k == "cmdstat_info"),
        "{left:?}"
    );
}

#[test]
fn latencystats_shows_the_percentiles_of_every_called_command() {
    let server = sluice();
    let mut s = connect(server.addr().port());
    run(&mut s, &["CONFIG", "RESETSTAT"]);
    for _ in 0..20 {
        run(&mut s, &["SET", "k", "v"]);
    }
    let stats = info(&mut s, "latencystats", &[]);
    let set = &stats["latency_percentiles_usec_set"];
    let fields: Vec<&str> = set
        .split(',')
        .map(|f| f.split('=').next().unwrap())
        .collect();
    assert_eq!(fields, ["p50", "p99", "p99.9"], "{set}");
    // Not in the default sections, as in Redis.
    assert!(!text(&run(&mut s, &["INFO"])).contains("latency_percentiles"));
    run(&mut s, &["CONFIG", "SET", "latency-tracking", "no"]);
    run(&mut s, &["CONFIG", "RESETSTAT"]);
    run(&mut s, &["GET", "k"]);
    assert!(info(&mut s, "latencystats", &[]).is_empty());
}

/// SLOWLOG GET's entries as (arguments, client name), and the address of each. Ids must
/// count down by one from the newest.
fn slowlog(con: &mut Connection) -> (Vec<(Vec<String>, String)>, Vec<String>) {
    let Value::Array(entries) = run(con, &["SLOWLOG", "GET", "-1"]) else {
        panic!("SLOWLOG GET is an array");
    };
    let mut out = Vec::new();
    let mut addrs = Vec::new();
    let mut ids = Vec::new();
    for e in entries {
        let Value::Array(f) = e else { panic!("entry") };
        let Value::Array(args) = &f[3] else {
            panic!("arguments")
        };
        let Value::Int(id) = f[0] else { panic!("id") };
        ids.push(id);
        out.push((args.iter().map(text).collect(), text(&f[5])));
        addrs.push(text(&f[4]));
    }
    assert!(ids.windows(2).all(|w| w[0] == w[1] + 1), "{ids:?}");
    (out, addrs)
}

#[test]
fn slowlog_keeps_trimmed_redacted_entries_as_redis_does() {
    let redis_server = RedisServer::start();
    let server = sluice();
    let mut r = connect(redis_server.port());
    let mut s = connect(server.addr().port());
    let long = "x".repeat(200);
    let mut rpush: Vec<String> = vec!["RPUSH".into(), "l".into()];
    rpush.extend((1..=40).map(|i| i.to_string()));
    let rpush: Vec<&str> = rpush.iter().map(|a| a.as_str()).collect();
    let script: &[&[&str]] = &[
        &["SLOWLOG", "RESET"],
        &["CONFIG", "SET", "slowlog-log-slower-than", "0"],
        &["CLIENT", "SETNAME", "me"],
        &["SET", "k", &long],
        &rpush,
        &["AUTH", "user", "secret"],
        &["HELLO", "2", "AUTH", "default", "secret"],
        &["CONFIG", "SET", "requirepass", ""],
        &["MULTI"],
        &["GET", "k"],
        &["EXEC"],
        &["EVAL", "redis.call('set', 'a', 'b') return 1", "0"],
    ];
    both(&mut r, &mut s, script);
    let (redis_log, redis_addrs) = slowlog(&mut r);
    let (sluice_log, sluice_addrs) = slowlog(&mut s);
    assert_eq!(sluice_log, redis_log);
    // The script's call shows Redis's script client; every other entry the client's address.
    for addrs in [&redis_addrs, &sluice_addrs] {
        assert_eq!(addrs.iter().filter(|a| *a == "?:0").count(), 1, "{addrs:?}");
        assert!(
            addrs
                .iter()
                .all(|a| a == "?:0" || a.starts_with("127.0.0.1:"))
        );
    }
    let secret = sluice_log
        .iter()
        .flat_map(|(a, _)| a)
        .any(|a| a == "secret");
    assert!(!secret, "secrets are redacted: {sluice_log:?}");
    // slowlog-max-len trims the oldest.
    both(
        &mut r,
        &mut s,
        &[&["CONFIG", "SET", "slowlog-max-len", "2"], &["PING"]],
    );
    assert_eq!(slowlog(&mut s).0, slowlog(&mut r).0);
}

#[test]
fn a_command_slowed_by_a_fault_shows_in_slowlog_and_latency() {
    let server = sluice();
    let mut s = connect(server.addr().port());
    let frozen = text(&run(&mut s, &["CLOCK", "FREEZE"]));
    let second: i64 = frozen.parse::<i64>().unwrap() / 1000;
    run(
        &mut s,
        &["CONFIG", "SET", "latency-monitor-threshold", "30"],
    );
    run(&mut s, &["SLOWLOG", "RESET"]);
    run(
        &mut s,
        &["FAULT", "LATENCY", "60", "COMMAND", "get", "COUNT", "1"],
    );
    run(&mut s, &["GET", "k"]);
    let Value::Array(entries) = run(&mut s, &["SLOWLOG", "GET", "1"]) else {
        panic!("array")
    };
    let Value::Array(e) = &entries[0] else {
        panic!("entry")
    };
    assert_eq!(e[1], Value::Int(second), "the clock's time");
    let Value::Int(usec) = e[2] else {
        panic!("usec")
    };
    assert!(usec >= 60_000, "{usec}");
    assert_eq!(
        e[3],
        Value::Array(vec![
            Value::BulkString(b"GET".to_vec()),
            Value::BulkString(b"k".to_vec())
        ])
    );
    // GET is `fast`: its event is fast-command.
    let Value::Array(latest) = run(&mut s, &["LATENCY", "LATEST"]) else {
        panic!("array")
    };
    assert_eq!(latest.len(), 1, "{latest:?}");
    let Value::Array(ev) = &latest[0] else {
        panic!("event")
    };
    assert_eq!(text(&ev[0]), "fast-command");
    assert_eq!(ev[1], Value::Int(second));
    let Value::Int(ms) = ev[2] else { panic!("ms") };
    assert!(ms >= 60, "{ms}");
    assert_eq!(ev[3], ev[2]);
    let Value::Array(history) = run(&mut s, &["LATENCY", "HISTORY", "fast-command"]) else {
        panic!("array")
    };
    assert_eq!(
        history,
        vec![Value::Array(vec![Value::Int(second), Value::Int(ms)])]
    );
    assert_eq!(run(&mut s, &["LATENCY", "RESET"]), Value::Int(1));
    assert_eq!(run(&mut s, &["LATENCY", "LATEST"]), Value::Array(vec![]));
}

/// The MONITOR lines a server sends while `script` runs on another connection, with the
/// timestamp and the client's port left out.
fn monitored(port: u16, script: &[&[&str]]) -> Vec<String> {
    use std::io::{BufRead, BufReader, Write};
    let mut mon = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    mon.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    mon.write_all(b"MONITOR\r\n").unwrap();
    let mut reader = BufReader::new(mon.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert_eq!(line, "+OK\r\n");
    let mut con = connect(port);
    for args in script {
        run(&mut con, args);
    }
    run(&mut con, &["ECHO", "end"]);
    let mut lines = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        // `+<time> [<db> <addr>] args`: keep the db, the address's kind and the arguments.
        let (_, rest) = line.split_once(" [").unwrap();
        let (who, args) = rest.split_once("] ").unwrap();
        let who = match who.split_once(' ') {
            Some((db, addr)) if addr.starts_with("127.0.0.1:") => format!("{db} client"),
            _ => who.to_string(),
        };
        let shown = format!("[{who}] {}", args.trim_end());
        if shown.ends_with("\"ECHO\" \"end\"") {
            break;
        }
        if !shown.contains("\"CLIENT\"") {
            lines.push(shown);
        }
    }
    lines
}

#[test]
fn monitor_shows_exec_and_script_calls_as_redis_does() {
    let redis_server = RedisServer::start();
    let server = sluice();
    let script: &[&[&str]] = &[
        &["MULTI"],
        &["SET", "a", "1"],
        &["INCR", "a"],
        &["EXEC"],
        &[
            "EVAL",
            "redis.call('set', 'b', 'x') return redis.call('get', 'b')",
            "0",
        ],
        &["AUTH", "u", "p"],
        &["CONFIG", "SET", "requirepass", ""],
    ];
    let redis_lines = monitored(redis_server.port(), script);
    let sluice_lines = monitored(server.addr().port(), script);
    assert_eq!(sluice_lines, redis_lines);
    assert!(sluice_lines.iter().any(|l| l.starts_with("[0 lua]")));
}

/// LATENCY HISTOGRAM's shape, as Redis's: per command its calls and a map of µs levels (HDR's
/// logarithmic steps) to cumulative counts that ends at the number of calls; a command named
/// stands for its subcommands; the same shape from redis-server.
#[test]
fn latency_histogram_reports_cumulative_counts_per_command() {
    fn shape(port: u16) -> Vec<(String, i64, bool)> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let mut c = client.get_connection().unwrap();
        let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
        for _ in 0..3 {
            let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
        }
        let _: Value = redis::cmd("CONFIG")
            .arg("GET")
            .arg("port")
            .query(&mut c)
            .unwrap();
        let v: Value = redis::cmd("LATENCY")
            .arg("HISTOGRAM")
            .arg("set")
            .arg("config")
            .query(&mut c)
            .unwrap();
        let Value::Array(items) = v else {
            panic!("{v:?}")
        };
        let mut out = Vec::new();
        for pair in items.chunks(2) {
            let (Value::BulkString(name), Value::Array(fields)) = (&pair[0], &pair[1]) else {
                panic!("{pair:?}")
            };
            let Value::Int(calls) = fields[1] else {
                panic!("{fields:?}")
            };
            let Value::Array(hist) = &fields[3] else {
                panic!("{fields:?}")
            };
            let counts: Vec<i64> = hist
                .chunks(2)
                .map(|p| match p[1] {
                    Value::Int(n) => n,
                    _ => panic!("{p:?}"),
                })
                .collect();
            let rising = counts.windows(2).all(|w| w[0] < w[1]);
            out.push((
                String::from_utf8_lossy(name).to_string(),
                calls,
                rising && counts.last() == Some(&calls),
            ));
        }
        out.sort();
        out
    }
    let redis = RedisServer::start();
    let server = sluice();
    let want = shape(redis.port());
    assert_eq!(shape(server.addr().port()), want);
    assert!(want.contains(&("set".to_string(), 3, true)), "{want:?}");
}

/// Runs `args` on a new connection in a thread once the server counts it blocked, and
/// returns the reply's text when it ends.
fn blocked_on(
    port: u16,
    control: &mut Connection,
    args: &'static [&'static str],
) -> std::thread::JoinHandle<String> {
    let blocked = |c: &mut Connection| info(c, "clients", &[])["blocked_clients"].clone();
    let before: usize = blocked(control).parse().unwrap();
    let handle = std::thread::spawn(move || {
        let mut c = connect(port);
        match run(&mut c, &["CLIENT", "SETNAME", "blocker"]) {
            Value::Okay | Value::SimpleString(_) => {}
            other => panic!("{other:?}"),
        }
        text(&run(&mut c, args))
    });
    for _ in 0..200 {
        if blocked(control).parse::<usize>().unwrap() > before {
            return handle;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("{args:?} never blocked");
}

/// The id of the client named `blocker` (CLIENT LIST).
fn blocker_id(con: &mut Connection) -> String {
    let list = text(&run(con, &["CLIENT", "LIST"]));
    let line = list.lines().find(|l| l.contains("name=blocker")).unwrap();
    line.split(' ')
        .next()
        .unwrap()
        .trim_start_matches("id=")
        .to_string()
}

/// A blocked command's statistics and slow log entry, as Redis's `updateStatsOnUnblock`
/// keeps them: failed_calls when it is served an error (XGROUP DESTROY under a blocked
/// XREADGROUP) or ended by CLIENT UNBLOCK, and the slow log entry of a BLPOP served later
/// under its own arguments, after the entries of the command that served it.
fn unblocked_accounting(port: u16) -> (BTreeMap<String, String>, Vec<String>, Vec<String>) {
    let mut c = connect(port);
    for args in [
        &["CONFIG", "RESETSTAT"][..],
        &["CONFIG", "SET", "slowlog-log-slower-than", "0"],
        &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"],
    ] {
        run(&mut c, args);
    }
    let reader = blocked_on(
        port,
        &mut c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ],
    );
    run(&mut c, &["XGROUP", "DESTROY", "s", "g"]);
    let mut replies = vec![reader.join().unwrap()];
    let popper = blocked_on(port, &mut c, &["BLPOP", "l", "0"]);
    run(&mut c, &["SLOWLOG", "RESET"]);
    run(&mut c, &["MULTI"]);
    run(&mut c, &["LPUSH", "l", "foo"]);
    run(&mut c, &["EXEC"]);
    replies.push(popper.join().unwrap());
    let Value::Array(entries) = run(&mut c, &["SLOWLOG", "GET"]) else {
        panic!("array")
    };
    let logged: Vec<String> = entries
        .iter()
        .map(|e| match e {
            Value::Array(fields) => match &fields[3] {
                Value::Array(args) => args.iter().map(text).collect::<Vec<_>>().join(" "),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .filter(|l| !l.starts_with("SLOWLOG") && !l.starts_with("INFO"))
        .collect();
    let unblocked = blocked_on(port, &mut c, &["BLPOP", "l2", "0"]);
    let id = blocker_id(&mut c);
    run(&mut c, &["CLIENT", "UNBLOCK", &id, "ERROR"]);
    replies.push(unblocked.join().unwrap());
    let stats = info(&mut c, "commandstats", &["usec", "usec_per_call"])
        .into_iter()
        .filter(|(k, _)| k == "cmdstat_xreadgroup" || k == "cmdstat_blpop")
        .collect();
    (stats, logged, replies)
}

#[test]
fn blocked_commands_are_accounted_when_unblocked_as_redis_does() {
    let redis_server = RedisServer::start();
    let server = sluice();
    let (redis_stats, redis_log, redis_replies) = unblocked_accounting(redis_server.port());
    let (stats, log, replies) = unblocked_accounting(server.addr().port());
    assert_eq!(replies, redis_replies);
    assert_eq!(stats, redis_stats);
    assert_eq!(
        stats["cmdstat_xreadgroup"],
        "calls=1,rejected_calls=0,failed_calls=1"
    );
    assert_eq!(
        stats["cmdstat_blpop"],
        "calls=2,rejected_calls=0,failed_calls=1"
    );
    assert_eq!(log, redis_log);
    assert_eq!(log.first().map(String::as_str), Some("BLPOP l 0"));
}

/// INFO's lazyfree counters after UNLINK, side by side with redis-server: a large set (a
/// hashtable of 1,000 members) and a stream of 200 nodes with a group are freed on the
/// lazyfree thread, a small list and a string in place (Redis's effort threshold of 64).
#[test]
fn unlink_frees_large_values_lazily_as_redis_counts() {
    fn lazyfreed(c: &mut Connection) -> (String, String) {
        for _ in 0..200 {
            let m = info(c, "memory", &[]);
            if m["lazyfree_pending_objects"] == "0" {
                return ("0".into(), m["lazyfreed_objects"].clone());
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("lazyfree never done");
    }
    let redis_server = RedisServer::start();
    let server = sluice();
    let mut r = connect(redis_server.port());
    let mut s = connect(server.addr().port());
    let mut script: Vec<Vec<String>> = vec![
        vec!["CONFIG".into(), "RESETSTAT".into()],
        vec![
            "CONFIG".into(),
            "SET".into(),
            "stream-node-max-entries".into(),
            "5".into(),
        ],
    ];
    let mut sadd = vec!["SADD".to_string(), "big".into()];
    sadd.extend((0..1000).map(|i| format!("m{i}")));
    script.push(sadd);
    for i in 0..1000 {
        script.push(vec![
            "XADD".into(),
            "st".into(),
            format!("{}-1", i + 1),
            "f".into(),
            "v".into(),
        ]);
    }
    script.push(vec![
        "XGROUP".into(),
        "CREATE".into(),
        "st".into(),
        "g".into(),
        "0".into(),
    ]);
    script.push(vec!["RPUSH".into(), "small".into(), "a".into(), "b".into()]);
    script.push(vec!["SET".into(), "str".into(), "x".into()]);
    script.push(vec![
        "UNLINK".into(),
        "big".into(),
        "small".into(),
        "str".into(),
    ]);
    let owned: Vec<Vec<&str>> = script
        .iter()
        .map(|a| a.iter().map(String::as_str).collect())
        .collect();
    let refs: Vec<&[&str]> = owned.iter().map(Vec::as_slice).collect();
    both(&mut r, &mut s, &refs);
    assert_eq!(lazyfreed(&mut s), lazyfreed(&mut r));
    assert_eq!(lazyfreed(&mut s), ("0".to_string(), "1".to_string()));
    both(&mut r, &mut s, &[&["UNLINK", "st"]]);
    assert_eq!(lazyfreed(&mut s), lazyfreed(&mut r));
    assert_eq!(lazyfreed(&mut s).1, "2");
}
