//! Lua scripting over the wire: atomicity with many clients, BUSY and SCRIPT KILL, TIME and
//! TTLs following the test clock, WATCH invalidated by a script's write, scripts in MULTI.
//! (Exact replies, conversions and error texts are compared with Redis in
//! `tests/diff/scripting.txt`.)

use std::time::{Duration, Instant};

use redis::Connection;
use sluice::TestServer;

use crate::support::{Conn, Read1};

fn connect(server: &TestServer) -> Connection {
    redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

fn eval<T: redis::FromRedisValue>(
    con: &mut Connection,
    script: &str,
    keys: &[&str],
    args: &[&str],
) -> T {
    redis::cmd("EVAL")
        .arg(script)
        .arg(keys.len())
        .arg(keys)
        .arg(args)
        .query(con)
        .unwrap()
}

/// Each script increments a counter, reads it back and compares: any command of another
/// client between the INCR and the GET would make the script see a different value.
#[test]
fn scripts_are_atomic_across_clients() {
    let server = TestServer::start().unwrap();
    let script = r#"
        local v = redis.call('incr', KEYS[1])
        redis.call('rpush', KEYS[2], v)
        for i = 1, 200 do
            if tonumber(redis.call('get', KEYS[1])) ~= v then return 0 end
        end
        -- A key the script did not declare.
        redis.call('incr', 'undeclared:' .. (v % 7))
        return 1
    "#;
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let url = server.url();
            std::thread::spawn(move || {
                let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
                for _ in 0..50 {
                    let ok: i64 = eval(&mut con, script, &["counter", "log"], &[]);
                    assert_eq!(ok, 1, "another command interleaved with the script");
                    // Plain commands from the same clients run between scripts.
                    let _: i64 = redis::cmd("INCR").arg("plain").query(&mut con).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut con = connect(&server);
    let total: i64 = redis::cmd("GET").arg("counter").query(&mut con).unwrap();
    assert_eq!(total, 800);
    let log: Vec<i64> = redis::cmd("LRANGE")
        .arg("log")
        .arg(0)
        .arg(-1)
        .query(&mut con)
        .unwrap();
    assert_eq!(
        log,
        (1..=800).collect::<Vec<_>>(),
        "scripts ran one at a time, in order"
    );
    let undeclared: i64 = (0..7)
        .map(|i| {
            redis::cmd("GET")
                .arg(format!("undeclared:{i}"))
                .query::<i64>(&mut con)
                .unwrap()
        })
        .sum();
    assert_eq!(undeclared, 800);
}

/// A server with `threads` event loops. With one, every connection shares the script's
/// thread: they must still be answered (-BUSY, SCRIPT KILL) once the script runs long.
fn busy_server(threshold_ms: u64, threads: usize) -> (TestServer, Connection) {
    let server = TestServer::start_with(sluice::Config {
        test_mode: true,
        threads,
        ..sluice::Config::default()
    })
    .unwrap();
    let mut con = connect(&server);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("busy-reply-threshold")
        .arg(threshold_ms)
        .query(&mut con)
        .unwrap();
    (server, con)
}

/// Waits (bounded) until the script sent on another connection is running past the busy
/// threshold, seen as a PING answered -BUSY: on a loaded machine a fixed sleep is not enough
/// for the script to have started.
fn wait_until_busy(addr: std::net::SocketAddr) {
    let mut probe = Conn::connect(addr);
    let deadline = Instant::now() + Duration::from_secs(20);
    while probe.cmd(&[b"PING"]) != BUSY {
        assert!(Instant::now() < deadline, "the script never became busy");
        std::thread::sleep(Duration::from_millis(10));
    }
}

const BUSY: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";

#[test]
fn busy_script_gets_busy_replies_and_script_kill_stops_it() {
    busy_replies_and_script_kill(2);
}

#[test]
fn busy_script_on_the_only_event_loop_still_lets_others_in() {
    busy_replies_and_script_kill(1);
}

fn busy_replies_and_script_kill(threads: usize) {
    let (server, mut admin) = busy_server(100, threads);
    let lua_time_limit: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("lua-time-limit")
        .query(&mut admin)
        .unwrap();
    assert_eq!(lua_time_limit, ["lua-time-limit", "100"]);
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut admin)
        .unwrap();

    let mut runner = Conn::connect(server.addr());
    runner.send(&[b"EVAL", b"local i = 0 while true do i = i + 1 end", b"0"]);

    // Until the script starts, GET answers; once it runs, GET waits for it (no reply while
    // the script is young) and, past the threshold, gets BUSY — never the value, never a hang.
    let mut other = Conn::connect(server.addr());
    let deadline = Instant::now() + Duration::from_secs(20);
    let reply = loop {
        let reply = other.cmd(&[b"GET", b"k"]);
        if reply != b"$1\r\nv\r\n" {
            break reply;
        }
        assert!(Instant::now() < deadline, "the script never started");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(reply, BUSY);
    assert_eq!(other.cmd(&[b"PING"]), BUSY);
    // MULTI is allowed; a command queued while busy dooms the transaction.
    assert_eq!(other.cmd(&[b"MULTI"]), b"+OK\r\n");
    assert_eq!(other.cmd(&[b"GET", b"k"]), BUSY);
    assert_eq!(
        other.cmd(&[b"EXEC"]),
        b"-EXECABORT Transaction discarded because of: BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    );

    assert_eq!(other.cmd(&[b"SCRIPT", b"KILL"]), b"+OK\r\n");
    let reply = runner.read_reply();
    let text = String::from_utf8_lossy(&reply);
    assert!(
        text.starts_with("-ERR Script killed by user with SCRIPT KILL... script: ")
            && text.ends_with(", on @user_script:1.\r\n"),
        "{text}"
    );
    // Everything runs again.
    assert_eq!(other.cmd(&[b"GET", b"k"]), b"$1\r\nv\r\n");
    assert_eq!(
        other.cmd(&[b"SCRIPT", b"KILL"]),
        b"-NOTBUSY No scripts in execution right now.\r\n"
    );
}

#[test]
fn a_script_that_wrote_is_unkillable() {
    let (server, mut admin) = busy_server(50, 1);
    let mut runner = Conn::connect(server.addr());
    // Writes, then loops for a while (seconds: long enough to be seen busy on a loaded machine).
    runner.send(&[
        b"EVAL",
        b"redis.call('set', 'w', 1) local i = 0 while i < 300000000 do i = i + 1 end return i",
        b"0",
    ]);
    wait_until_busy(server.addr());
    let mut other = Conn::connect(server.addr());
    assert_eq!(
        other.cmd(&[b"SCRIPT", b"KILL"]),
        b"-UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.\r\n"
    );
    assert_eq!(other.cmd(&[b"GET", b"w"]), BUSY);
    // The script finishes by itself; then the world goes on.
    match runner.read_one(Duration::from_secs(120)) {
        Read1::Reply(r) => assert_eq!(r, b":300000000\r\n"),
        other => panic!("no reply from the script: {other:?}"),
    }
    let w: i64 = redis::cmd("GET").arg("w").query(&mut admin).unwrap();
    assert_eq!(w, 1);
}

#[test]
fn time_and_ttls_in_scripts_follow_the_test_clock() {
    let server = TestServer::start().unwrap();
    let mut con = connect(&server);
    let t0: i64 = redis::cmd("CLOCK").arg("FREEZE").query(&mut con).unwrap();
    let (secs, micros): (i64, i64) = eval(
        &mut con,
        "local t = redis.call('TIME') return {tonumber(t[1]), tonumber(t[2])}",
        &[],
        &[],
    );
    assert_eq!(secs * 1000 + micros / 1000, t0);
    let _: i64 = redis::cmd("CLOCK")
        .arg("ADVANCE")
        .arg(3_600_000)
        .query(&mut con)
        .unwrap();
    let secs: i64 = eval(&mut con, "return tonumber(redis.call('TIME')[1])", &[], &[]);
    assert_eq!(secs, (t0 + 3_600_000) / 1000);

    // A go-redis redis_rate-style GCRA script reading TIME: the window is moved by the clock.
    let fixed = "local c = redis.call('incr', KEYS[1]) if c == 1 then redis.call('pexpire', KEYS[1], ARGV[1]) end return {c, redis.call('pttl', KEYS[1])}";
    let (c, ttl): (i64, i64) = eval(&mut con, fixed, &["w"], &["1000"]);
    assert_eq!((c, ttl), (1, 1000));
    let (c, ttl): (i64, i64) = eval(&mut con, fixed, &["w"], &["1000"]);
    assert_eq!(
        (c, ttl),
        (2, 1000),
        "frozen time: the TTL does not run down"
    );
    let _: i64 = redis::cmd("CLOCK")
        .arg("ADVANCE")
        .arg(1001)
        .query(&mut con)
        .unwrap();
    let (c, _): (i64, i64) = eval(&mut con, fixed, &["w"], &["1000"]);
    assert_eq!(c, 1, "a new window after advancing past the TTL");
}

#[test]
fn one_now_for_the_whole_script() {
    let server = TestServer::start().unwrap();
    let mut con = connect(&server);
    // With real time running, every TIME inside one script reads the same instant.
    let same: i64 = eval(
        &mut con,
        "local a = redis.call('TIME') for i = 1, 200000 do end local b = redis.call('TIME') if a[1] == b[1] and a[2] == b[2] then return 1 end return 0",
        &[],
        &[],
    );
    assert_eq!(same, 1);
}

#[test]
fn a_script_write_invalidates_watch() {
    let server = TestServer::start().unwrap();
    let mut watcher = connect(&server);
    let mut writer = connect(&server);
    let _: () = redis::cmd("WATCH").arg("w").query(&mut watcher).unwrap();
    let _: i64 = eval(&mut writer, "return redis.call('incr', 'w')", &[], &[]);
    let result: Option<(String,)> = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("w")
        .arg("mine")
        .query(&mut watcher)
        .unwrap();
    assert_eq!(result, None, "EXEC fails: the script changed a watched key");
    // A read-only script does not.
    let _: () = redis::cmd("WATCH").arg("w").query(&mut watcher).unwrap();
    let _: i64 = eval(&mut writer, "return redis.call('get', 'w')", &[], &[]);
    let result: Option<(String,)> = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("w")
        .arg("mine")
        .query(&mut watcher)
        .unwrap();
    assert_eq!(result, Some(("OK".into(),)));
}

#[test]
fn scripts_inside_multi_exec() {
    let server = TestServer::start().unwrap();
    let mut con = connect(&server);
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg("return redis.call('incrby', KEYS[1], ARGV[1])")
        .query(&mut con)
        .unwrap();
    let (a, b, c): (i64, i64, i64) = redis::pipe()
        .atomic()
        .cmd("EVALSHA")
        .arg(&sha)
        .arg(1)
        .arg("m")
        .arg(5)
        .cmd("INCR")
        .arg("m")
        .cmd("EVAL")
        .arg("return redis.call('get', KEYS[1]) + 0")
        .arg(1)
        .arg("m")
        .query(&mut con)
        .unwrap();
    assert_eq!((a, b, c), (5, 6, 6));
}

#[test]
fn noscript_then_load_then_evalsha() {
    let server = TestServer::start().unwrap();
    let mut con = connect(&server);
    // redis-rs's Script does EVALSHA, then SCRIPT LOAD + EVALSHA on NOSCRIPT.
    let script = redis::Script::new("return redis.call('incrby', KEYS[1], ARGV[1])");
    let v: i64 = script.key("s").arg(2).invoke(&mut con).unwrap();
    assert_eq!(v, 2);
    let v: i64 = script.key("s").arg(2).invoke(&mut con).unwrap();
    assert_eq!(v, 4);
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut con).unwrap();
    let v: i64 = script.key("s").arg(2).invoke(&mut con).unwrap();
    assert_eq!(v, 6);
}

#[test]
fn commandstats_count_calls_made_by_scripts() {
    let server = TestServer::start().unwrap();
    let mut con = connect(&server);
    let _: i64 = eval(
        &mut con,
        "redis.call('set', 'a', 1) return redis.call('incr', 'a')",
        &[],
        &[],
    );
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut con)
        .unwrap();
    assert!(info.contains("cmdstat_incr:calls=1"), "{info}");
    assert!(info.contains("cmdstat_eval:calls=1"), "{info}");
}

#[test]
fn shutdown_nosave_stops_a_busy_server() {
    let (server, _admin) = busy_server(50, 1);
    let mut runner = Conn::connect(server.addr());
    runner.send(&[
        b"EVAL",
        b"redis.call('set', 'w', 1) while true do end",
        b"0",
    ]);
    wait_until_busy(server.addr());
    let mut other = Conn::connect(server.addr());
    other.send(&[b"SHUTDOWN", b"NOSAVE"]);
    // The server goes away (the script is stopped so its thread can exit).
    let started = Instant::now();
    match other.read_one(Duration::from_secs(10)) {
        Read1::Eof(_) => {}
        Read1::Reply(r) => panic!("unexpected reply {}", String::from_utf8_lossy(&r)),
        other => panic!("server still up: {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    drop(server);
}

/// A script that loops until killed (bounded: about a minute on a slow machine), holding the
/// shard of the key it declares.
const LOOP_ON_KEY: &[u8] = b"local i = 0 while i < 3000000000 do i = i + 1 end return i";

/// Starts a looping script on `key` on its own connection and waits (bounded) until it is
/// running past the busy threshold, seen as `GET key` answered -BUSY.
fn start_loop_on(addr: std::net::SocketAddr, key: &str) -> Conn {
    let mut runner = Conn::connect(addr);
    runner.send(&[b"EVAL", LOOP_ON_KEY, b"1", key.as_bytes()]);
    let mut probe = Conn::connect(addr);
    let deadline = Instant::now() + Duration::from_secs(20);
    while probe.cmd(&[b"GET", key.as_bytes()]) != BUSY {
        assert!(Instant::now() < deadline, "the script never became busy");
        std::thread::sleep(Duration::from_millis(10));
    }
    runner
}

/// A key whose shard no running script holds: the first candidate GET answers at once.
fn key_on_a_free_shard(con: &mut Conn, prefix: &str) -> String {
    (0..256)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| con.cmd(&[b"GET", k.as_bytes()]) != BUSY)
        .expect("every candidate key shares the busy script's shard")
}

fn assert_killed(runner: &mut Conn) {
    let reply = text_of(runner.read_reply());
    assert!(
        reply.starts_with("-ERR Script killed by user with SCRIPT KILL..."),
        "{reply}"
    );
}

fn text_of(reply: Vec<u8>) -> String {
    String::from_utf8_lossy(&reply).into_owned()
}

/// Scripts lock only the shards of the keys they declare: while a long script holds key
/// A's shard, EVALSHA on a key of another shard, plain commands there and PING go on, and
/// a second long script runs at the same time; SCRIPT KILL stops both.
#[test]
fn scripts_on_different_shards_run_at_once() {
    let (server, _admin) = busy_server(50, 2);
    let addr = server.addr();
    let mut runner_a = start_loop_on(addr, "a");
    let mut other = Conn::connect(addr);
    assert_eq!(other.cmd(&[b"PING"]), b"+PONG\r\n");
    let b = key_on_a_free_shard(&mut other, "b");
    let sha = text_of(other.cmd(&[b"SCRIPT", b"LOAD", b"return redis.call('incr', KEYS[1])"]));
    let sha = sha.lines().nth(1).unwrap_or_default().to_string();
    for n in 1..=3 {
        assert_eq!(
            text_of(other.cmd(&[b"EVALSHA", sha.as_bytes(), b"1", b.as_bytes()])),
            format!(":{n}\r\n")
        );
    }
    assert_eq!(other.cmd(&[b"GET", b"a"]), BUSY, "a's shard is still held");

    // A second long script, on b's shard, runs while the first one still does.
    let mut runner_b = start_loop_on(addr, &b);
    assert_eq!(other.cmd(&[b"GET", b"a"]), BUSY);
    assert_eq!(other.cmd(&[b"SCRIPT", b"KILL"]), b"+OK\r\n");
    assert_killed(&mut runner_a);
    assert_killed(&mut runner_b);
    assert_eq!(other.cmd(&[b"GET", b.as_bytes()]), b"$1\r\n3\r\n");
    assert_eq!(
        other.cmd(&[b"SCRIPT", b"KILL"]),
        b"-NOTBUSY No scripts in execution right now.\r\n"
    );
}

/// A script that touches a key it did not declare before writing anything is run again
/// from the start holding every shard: its effects happen once.
#[test]
fn an_undeclared_key_before_any_write_reruns_the_script_once() {
    let server = TestServer::start().unwrap();
    let mut con = connect(&server);
    let script = "redis.call('incr', KEYS[1]) return redis.call('incr', 'not-declared')";
    for n in 1..=3i64 {
        // It wrote first: the undeclared key's shard is taken on the way (nobody holds it).
        let got: i64 = eval(&mut con, script, &["declared"], &[]);
        assert_eq!(got, n);
    }
    let reads_first = "local v = redis.call('get', 'other') redis.call('incr', KEYS[1]) return v";
    let _: () = redis::cmd("SET")
        .arg("other")
        .arg("o")
        .query(&mut con)
        .unwrap();
    for _ in 0..3 {
        let got: String = eval(&mut con, reads_first, &["counted"], &[]);
        assert_eq!(got, "o");
    }
    let counted: i64 = redis::cmd("GET").arg("counted").query(&mut con).unwrap();
    assert_eq!(counted, 3, "each script's write happened once");
    let declared: i64 = redis::cmd("GET").arg("declared").query(&mut con).unwrap();
    assert_eq!(declared, 3);
    // Whole-keyspace commands from a script that declared a key.
    let got: i64 = eval(&mut con, "return redis.call('dbsize')", &["x"], &[]);
    assert_eq!(got, 4);
}

/// After a write, a script that touches an undeclared key whose shard another client holds
/// either waits for it (a shard above every one it holds: no deadlock possible) or gets a
/// clear error; it never deadlocks and never sees a half-done state.
#[test]
fn an_undeclared_key_after_a_write_waits_or_fails_clearly() {
    let (server, _admin) = busy_server(50, 2);
    let addr = server.addr();
    let mut runner = start_loop_on(addr, "held");
    let mut other = Conn::connect(addr);
    let mine = key_on_a_free_shard(&mut other, "mine");
    let mut script_con = Conn::connect(addr);
    script_con.send(&[
        b"EVAL",
        b"redis.call('set', KEYS[1], 'w') return redis.pcall('get', 'held')",
        b"1",
        mine.as_bytes(),
    ]);
    match script_con.read_one(Duration::from_millis(300)) {
        Read1::Reply(r) => {
            // The held shard is below this script's: only tried, and refused.
            assert_eq!(
                text_of(r),
                "-ERR Script attempted to access key 'held' it did not declare while another client held it; declare it in KEYS or use lua-script-locking global\r\n"
            );
            assert_eq!(other.cmd(&[b"SCRIPT", b"KILL"]), b"+OK\r\n");
            assert_killed(&mut runner);
        }
        Read1::Timeout(_) => {
            // Above: the script waits for the shard, and goes on once the loop is killed
            // (the waiting script wrote, so only the loop is stopped).
            assert_eq!(other.cmd(&[b"SCRIPT", b"KILL"]), b"+OK\r\n");
            assert_killed(&mut runner);
            assert_eq!(script_con.read_reply(), b"$-1\r\n");
        }
        r => panic!("unexpected: {r:?}"),
    }
    assert_eq!(other.cmd(&[b"GET", mine.as_bytes()]), b"$1\r\nw\r\n");
}

/// `lua-script-locking global` makes every script lock the whole keyspace again.
#[test]
fn lua_script_locking_global_restores_the_global_lock() {
    let (server, mut admin) = busy_server(50, 2);
    let addr = server.addr();
    let get: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("lua-script-locking")
        .query(&mut admin)
        .unwrap();
    assert_eq!(get, ["lua-script-locking", "declared"]);
    let bad = redis::cmd("CONFIG")
        .arg("SET")
        .arg("lua-script-locking")
        .arg("some")
        .query::<()>(&mut admin)
        .unwrap_err();
    assert!(
        bad.to_string()
            .contains("argument(s) must be one of the following: declared, global"),
        "{bad}"
    );
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("lua-script-locking")
        .arg("GLOBAL")
        .query(&mut admin)
        .unwrap();
    let mut runner = start_loop_on(addr, "a");
    let mut other = Conn::connect(addr);
    for i in 0..16 {
        assert_eq!(other.cmd(&[b"GET", format!("k{i}").as_bytes()]), BUSY);
    }
    assert_eq!(other.cmd(&[b"PING"]), BUSY);
    assert_eq!(other.cmd(&[b"SCRIPT", b"KILL"]), b"+OK\r\n");
    assert_killed(&mut runner);
}
