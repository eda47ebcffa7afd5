//! TESTMODE RESET: a server that went through everything a test can do to it, once reset,
//! answers like a server that has just started. Each check compares the reset server with a
//! new `TestServer` given the same commands afterwards.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::{Connection, Value};
use sluice::TestServer;

use crate::support::Conn;

fn connect(server: &TestServer) -> Connection {
    redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

/// A connection that sends nothing of its own (no CLIENT SETINFO), so that what the
/// server counts is exactly what the test sends on it.
fn quiet_connect(server: &TestServer) -> Connection {
    use redis::IntoConnectionInfo;
    let info = server.url().into_connection_info().unwrap();
    let settings = info.redis_settings().clone().set_skip_set_lib_name();
    redis::Client::open(info.set_redis_settings(settings))
        .unwrap()
        .get_connection()
        .unwrap()
}

/// Waits (bounded) until the server counts `n` connected clients.
fn wait_for_clients(server: &TestServer, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.shared().clients.len() != n {
        assert!(
            Instant::now() < deadline,
            "{} clients connected, expected {n}",
            server.shared().clients.len()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn ok(con: &mut Connection, args: &[&str]) {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    if let Err(e) = c.query::<Value>(con) {
        panic!("{args:?} failed: {e}");
    }
}

fn real_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Everything a test can leave behind, on every floor of the server.
fn dirty(server: &TestServer, con: &mut Connection) -> Vec<Conn> {
    // An error reply: errorstats.
    ok(con, &["SET", "counter", "not a number"]);
    assert!(redis::cmd("INCR").arg("counter").query::<i64>(con).is_err());
    for args in [
        &["SET", "plain", "1"][..],
        &["SET", "ttl", "1", "EX", "100"],
        &["HSET", "h", "f", "v"],
        &["ZADD", "z", "1", "m"],
        &["SELECT", "3"],
        &["SET", "in-db-3", "x"],
        &["SELECT", "0"],
        &["GET", "missing"],
        &["GET", "plain"],
        &["CLOCK", "FREEZE"],
        &["CLOCK", "ADVANCE", "3600000"],
        &["SET", "expires-later", "1", "PX", "10"],
        &["CLOCK", "ADVANCE", "20"], // one key expired: expired_keys
        &["SCRIPT", "LOAD", "return 1"],
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib\nredis.register_function('f', function() return 1 end)",
        ],
        &[
            "CONFIG",
            "SET",
            "maxmemory",
            "10mb",
            "maxmemory-policy",
            "allkeys-lru",
        ],
        &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
        &["CONFIG", "SET", "hll-sparse-max-bytes", "5000"],
        &["CONFIG", "SET", "save", "3600 1"],
        &["CONFIG", "SET", "slowlog-log-slower-than", "0"],
        &["CONFIG", "SET", "latency-monitor-threshold", "1"],
        &["FAULT", "LATENCY", "5", "COMMAND", "echo"],
        &["ECHO", "slow"], // SLOWLOG and LATENCY entries
        &[
            "FAULT",
            "ERROR",
            "LOADING pretend",
            "COUNT",
            "0",
            "COMMAND",
            "get",
        ],
    ] {
        ok(con, args);
    }
    // Other connections a new server would not have: a subscriber, a pattern subscriber,
    // a client blocked on a list, a monitor.
    let mut others = Vec::new();
    for args in [
        &[&b"SUBSCRIBE"[..], b"news"][..],
        &[b"PSUBSCRIBE", b"n*"],
        &[b"BLPOP", b"queue", b"0"],
        &[b"MONITOR"],
    ] {
        let mut c = Conn::connect(server.addr());
        c.send(args);
        if args[0] != b"BLPOP" {
            c.read_reply();
        }
        others.push(c);
    }
    // The blocked client is registered once CLIENT LIST shows its flag.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(con).unwrap();
        if list.contains("flags=b") {
            break;
        }
        assert!(Instant::now() < deadline, "BLPOP never blocked: {list}");
        std::thread::sleep(Duration::from_millis(2));
    }
    // Last: BLPOP above is a write, which the pause would hold.
    ok(con, &["CLIENT", "PAUSE", "100000", "WRITE"]);
    others
}

/// `INFO <section>` as field → value, without the fields that differ between any two
/// servers (identity, time, memory, bytes on the wire) and, for the reset server, without
/// the reset's own traces (it is counted after it ran, as every command is).
fn info(con: &mut Connection, section: &str, after_reset: bool) -> BTreeMap<String, String> {
    const VOLATILE: &[&str] = &[
        "total_net_input_bytes",
        "total_net_output_bytes",
        "instantaneous_input_kbps",
        "instantaneous_output_kbps",
        "instantaneous_ops_per_sec",
        "total_reads_processed",
        "total_writes_processed",
        "rdb_last_save_time",
        "client_recent_max_input_buffer",
        "client_recent_max_output_buffer",
    ];
    let text: String = redis::cmd("INFO").arg(section).query(con).unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        if VOLATILE.contains(&k) || k.ends_with("testmode|reset") {
            continue;
        }
        let mut v = v.to_string();
        if k.starts_with("cmdstat_") || k.starts_with("latency_percentiles_usec_") {
            // µs differ from run to run; the calls and errors must not.
            v = v
                .split(',')
                .filter(|f| f.starts_with("calls=") || f.contains("failed_calls="))
                .collect::<Vec<_>>()
                .join(",");
            if k.starts_with("latency_percentiles_usec_") {
                v = String::new();
            }
        }
        if after_reset && k == "total_commands_processed" {
            v = (v.parse::<u64>().unwrap() - 1).to_string();
        }
        out.insert(k.to_string(), v);
    }
    out
}

/// What the comparison asks both servers, in the same order.
fn observe(con: &mut Connection, after_reset: bool) -> Vec<(String, String)> {
    let mut seen: Vec<(String, String)> = Vec::new();
    fn ask_one(con: &mut Connection, seen: &mut Vec<(String, String)>, what: &str, args: &[&str]) {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        let v: Value = c.query(con).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        seen.push((what.to_string(), format!("{v:?}")));
    }
    macro_rules! ask {
        ($what:expr, $args:expr) => {
            ask_one(con, &mut seen, $what, $args)
        };
    }
    ask!("dbsize", &["DBSIZE"]);
    ask!(
        "script exists",
        &[
            "SCRIPT",
            "EXISTS",
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        ]
    );
    ask!("function list", &["FUNCTION", "LIST"]);
    ask!("fault list", &["FAULT", "LIST"]);
    ask!("cmdlog len", &["CMDLOG", "LEN"]);
    ask!("slowlog len", &["SLOWLOG", "LEN"]);
    ask!("latency latest", &["LATENCY", "LATEST"]);
    ask!("pubsub numsub", &["PUBSUB", "NUMSUB", "news"]);
    ask!("pubsub numpat", &["PUBSUB", "NUMPAT"]);
    ask!("publish", &["PUBLISH", "news", "hello"]);
    // Writes go through (no pause), a TTL is counted from real time (the clock went back
    // from an hour ahead), and GET is not faulted.
    ask!("set", &["SET", "fresh", "v", "PX", "60000"]);
    ask!("get", &["GET", "fresh"]);
    ask!("exists", &["EXISTS", "fresh"]);
    ask!("del", &["DEL", "fresh"]);
    // SLOWLOG is numbered from 0 again: the first entry of a log that keeps everything.
    ask!(
        "slowlog on",
        &["CONFIG", "SET", "slowlog-log-slower-than", "0"]
    );
    ask!("ping", &["PING"]);
    let first: Vec<Vec<Value>> = redis::cmd("SLOWLOG").arg("GET").query(con).unwrap();
    let ids: Vec<String> = first.iter().map(|e| format!("{:?}", e[0])).collect();
    seen.push(("slowlog ids".into(), ids.join(",")));
    ask!(
        "slowlog off",
        &["CONFIG", "SET", "slowlog-log-slower-than", "10000"]
    );
    let config: BTreeMap<String, String> =
        redis::cmd("CONFIG").arg("GET").arg("*").query(con).unwrap();
    for (k, v) in config {
        // The port and working directory are each server's own.
        if k != "port" && k != "dir" {
            seen.push((format!("config {k}"), v));
        }
    }
    for section in [
        "keyspace",
        "stats",
        "commandstats",
        "errorstats",
        "persistence",
        "clients",
    ] {
        for (k, v) in info(con, section, after_reset) {
            seen.push((format!("info {section} {k}"), v));
        }
    }
    seen
}

#[test]
fn a_reset_server_is_indistinguishable_from_a_new_one() {
    let used = TestServer::start().unwrap();
    let mut con = connect(&used);
    let mut others = dirty(&used, &mut con);
    drop(con);
    wait_for_clients(&used, others.len());
    // The connection that resets then observes: at the reset, the only one left open.
    let mut obs = quiet_connect(&used);
    let reply: String = redis::cmd("TESTMODE").arg("RESET").query(&mut obs).unwrap();
    assert_eq!(reply, "OK");
    // The closed connections are gone once their loops see it (asynchronous, bounded).
    for c in &mut others {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !c.is_closed() {
            assert!(Instant::now() < deadline, "a connection was left open");
            c.poll(Duration::from_millis(5));
        }
    }
    wait_for_clients(&used, 1);

    let new = TestServer::start().unwrap();
    let mut fresh = quiet_connect(&new);
    let after = observe(&mut obs, true);
    let expected = observe(&mut fresh, false);
    assert_eq!(expected.len(), after.len(), "{expected:?}\n{after:?}");
    let differ: Vec<String> = expected
        .iter()
        .zip(&after)
        .filter(|(e, a)| e != a)
        .map(|(e, a)| format!("{}: new server {:?}, reset server {:?}", e.0, e.1, a.1))
        .collect();
    assert!(differ.is_empty(), "{}", differ.join("\n"));

    // The clock runs on real time again.
    let now: i64 = redis::cmd("CLOCK").arg("NOW").query(&mut obs).unwrap();
    assert!(
        (now - real_ms()).abs() < 5_000,
        "CLOCK NOW {now} is not real time"
    );
    std::thread::sleep(Duration::from_millis(3));
    let later: i64 = redis::cmd("CLOCK").arg("NOW").query(&mut obs).unwrap();
    assert!(later > now, "the clock is still frozen");
    let lastsave: i64 = redis::cmd("LASTSAVE").query(&mut obs).unwrap();
    assert!(
        (lastsave - real_ms() / 1000).abs() <= 5,
        "LASTSAVE {lastsave}"
    );
}

#[test]
fn a_transaction_watching_a_key_fails_after_a_reset() {
    let server = TestServer::start().unwrap();
    let mut con = connect(&server);
    let mut watcher = connect(&server);
    ok(&mut con, &["SET", "k", "1"]);
    ok(&mut watcher, &["WATCH", "k"]);
    ok(&mut watcher, &["MULTI"]);
    ok(&mut watcher, &["SET", "k", "2"]);
    ok(&mut con, &["TESTMODE", "RESET"]);
    let exec: Value = redis::cmd("EXEC").query(&mut watcher).unwrap();
    assert_eq!(
        exec,
        Value::Nil,
        "EXEC must fail: the reset deleted a watched key"
    );
}

#[test]
fn faults_do_not_stop_a_reset_and_help_lists_what_it_resets() {
    let server = TestServer::start().unwrap();
    let mut con = connect(&server);
    ok(
        &mut con,
        &["FAULT", "ERROR", "ERR everything fails", "COUNT", "0"],
    );
    assert!(redis::cmd("PING").query::<String>(&mut con).is_err());
    ok(&mut con, &["TESTMODE", "RESET"]);
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    let help: Vec<String> = redis::cmd("TESTMODE").arg("HELP").query(&mut con).unwrap();
    let text = help.join("\n");
    for what in [
        "database",
        "clock",
        "FAULT",
        "CMDLOG",
        "script",
        "function",
        "CONFIG SET",
    ] {
        assert!(
            text.contains(what),
            "TESTMODE HELP does not mention {what}:\n{text}"
        );
    }
    let unknown = redis::cmd("TESTMODE").arg("NOPE").query::<String>(&mut con);
    assert!(unknown.is_err());
}

#[test]
fn testmode_does_not_exist_without_test_mode() {
    let server = TestServer::start_with(sluice::Config::default()).unwrap();
    let mut con = connect(&server);
    let err = redis::cmd("TESTMODE")
        .arg("RESET")
        .query::<String>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("unknown command"), "{err}");
}

/// The variable that tells the copy of this test binary started below that it is the probe.
const CWD_PROBE: &str = "SLUICE_TEST_CWD_PROBE";

#[test]
fn a_dump_rdb_in_the_working_directory_changes_nothing() {
    if let Ok(dir) = std::env::var(CWD_PROBE) {
        // The probe: this process runs in `dir`, which holds a dump.rdb with 35 keys.
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(cwd, std::path::Path::new(&dir).canonicalize().unwrap());
        assert!(cwd.join("dump.rdb").is_file());
        let server = TestServer::start().unwrap();
        assert_ne!(server.dir().canonicalize().unwrap(), cwd);
        let mut con = connect(&server);
        let keys: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
        assert_eq!(
            keys, 0,
            "TestServer loaded the working directory's dump.rdb"
        );
        let save: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("save")
            .query(&mut con)
            .unwrap();
        assert_eq!(save, ["save", ""]);
        ok(&mut con, &["SET", "k", "v"]);
        ok(&mut con, &["SAVE"]);
        assert!(server.dir().join("dump.rdb").is_file());
        let pooled = TestServer::pooled().unwrap();
        let mut con = connect(&pooled);
        let keys: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
        assert_eq!(
            keys, 0,
            "a pooled TestServer loaded the working directory's dump.rdb"
        );
        println!("probe passed");
        return;
    }
    // A dump.rdb with 35 keys, as a server started by hand with `save` points leaves behind.
    let dir = tempfile::tempdir().unwrap();
    {
        let saver = TestServer::start_with(sluice::Config {
            test_mode: true,
            dir: Some(dir.path().display().to_string()),
            ..sluice::Config::default()
        })
        .unwrap();
        let mut con = connect(&saver);
        for i in 0..35 {
            ok(&mut con, &["SET", &format!("k{i}"), "v"]);
        }
        ok(&mut con, &["SAVE"]);
    }
    let before = std::fs::read(dir.path().join("dump.rdb")).unwrap();
    // This test again, in a process of its own whose working directory holds the file
    // (the working directory is the process's: no other test may see it changed).
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "testmode_reset::a_dump_rdb_in_the_working_directory_changes_nothing",
            "--exact",
            "--nocapture",
        ])
        .current_dir(dir.path())
        .env(CWD_PROBE, dir.path())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("probe passed"),
        "{text}"
    );
    assert_eq!(
        std::fs::read(dir.path().join("dump.rdb")).unwrap(),
        before,
        "the working directory's dump.rdb was written"
    );
}

#[test]
fn a_pooled_server_comes_back_reset() {
    let first_addr;
    {
        let server = TestServer::pooled().unwrap();
        first_addr = server.addr();
        let mut con = connect(&server);
        ok(&mut con, &["SET", "left", "behind"]);
        ok(&mut con, &["CLOCK", "FREEZE"]);
        ok(&mut con, &["CONFIG", "SET", "maxmemory", "1mb"]);
    }
    // Tests run in parallel: take servers until this one comes back (bounded by the pool).
    let mut taken = Vec::new();
    loop {
        let server = TestServer::pooled().unwrap();
        if server.addr() == first_addr {
            let mut con = connect(&server);
            let keys: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
            assert_eq!(keys, 0);
            let maxmemory: Vec<String> = redis::cmd("CONFIG")
                .arg("GET")
                .arg("maxmemory")
                .query(&mut con)
                .unwrap();
            assert_eq!(maxmemory, ["maxmemory", "0"]);
            assert!(!server.clock().is_frozen());
            // The reset's own connection left no trace: this is the one connection seen.
            let stats: String = redis::cmd("INFO").arg("stats").query(&mut con).unwrap();
            assert!(
                stats.contains("total_connections_received:1\r\n"),
                "{stats}"
            );
            break;
        }
        // A new server means the first one is still in another test's hands, or was
        // taken: either way this one was never used, and the pool gets it back.
        taken.push(server);
        assert!(taken.len() < 64, "the pooled server never came back");
    }
}
