//! Replication: sluice replicas of sluice masters and of a real redis-server 7.0 master.
//! What reaches the replica is the master's effects with absolute times (TTLs, CL.THROTTLE,
//! scripts, transactions, expiries, blocked pops served later); a read-only replica refuses
//! client writes with Redis's text; WAIT counts acknowledgements; a broken link
//! reconnects and catches up.
//!
//! Waits are polls bounded by a few seconds (the replica's link is a real TCP connection);
//! the keys' times are driven by the test clock, so nothing depends on how long a poll took.

use std::time::{Duration, Instant};

use redis::{Connection, Value};
use sluice::TestServer;

use crate::support::{RedisServer, sluice};

fn connect(url: &str) -> Connection {
    redis::Client::open(url)
        .expect("client")
        .get_connection()
        .expect("connection")
}

fn con(server: &TestServer) -> Connection {
    connect(&server.url())
}

/// Polls `f` until it returns true, for at most 5 s.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("timed out waiting for: {what}");
}

fn role(c: &mut Connection) -> Vec<Value> {
    redis::cmd("ROLE").query(c).expect("ROLE")
}

fn link_state(c: &mut Connection) -> String {
    match role(c).get(3) {
        Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        _ => String::new(),
    }
}

/// Makes `replica` follow the server at `port` and waits until the link is up.
fn follow(replica: &mut Connection, port: u16) {
    let ok: String = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(port)
        .query(replica)
        .expect("REPLICAOF");
    assert_eq!(ok, "OK");
    eventually("the replica's link is connected", || {
        link_state(replica) == "connected"
    });
}

fn wait_one(master: &mut Connection) {
    let n: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query(master)
        .expect("WAIT");
    assert_eq!(n, 1, "the replica acknowledged the writes");
}

fn freeze_at_whole_second(c: &mut Connection) -> i64 {
    let now: i64 = redis::cmd("CLOCK").arg("FREEZE").query(c).expect("freeze");
    let t = (now / 1000 + 1) * 1000;
    let _: i64 = redis::cmd("CLOCK").arg("SET").arg(t).query(c).expect("set");
    t
}

fn info_field(c: &mut Connection, section: &str, field: &str) -> String {
    let info: String = redis::cmd("INFO").arg(section).query(c).expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn effects_reach_the_replica_with_absolute_times() {
    let master = sluice();
    let replica = sluice();
    let (mut m, mut r) = (con(&master), con(&replica));
    let t = freeze_at_whole_second(&mut m);
    // Data written before the replica attaches arrives in the full resync's payload.
    let _: () = redis::cmd("SET")
        .arg("before")
        .arg("1")
        .arg("PX")
        .arg(90_000)
        .query(&mut m)
        .unwrap();
    let _: () = redis::cmd("SELECT").arg(3).query(&mut m).unwrap();
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg("f")
        .arg("v")
        .query(&mut m)
        .unwrap();
    let _: () = redis::cmd("SELECT").arg(0).query(&mut m).unwrap();
    follow(&mut r, master.addr().port());

    // Relative TTLs become the master's absolute deadlines.
    let _: () = redis::cmd("SET")
        .arg("s")
        .arg("v")
        .arg("EX")
        .arg(100)
        .query(&mut m)
        .unwrap();
    let _: () = redis::cmd("SETEX")
        .arg("sx")
        .arg(50)
        .arg("v")
        .query(&mut m)
        .unwrap();
    let _: () = redis::cmd("SET").arg("e").arg("1").query(&mut m).unwrap();
    let _: i64 = redis::cmd("EXPIRE").arg("e").arg(30).query(&mut m).unwrap();
    let _: i64 = redis::cmd("INCR").arg("e").query(&mut m).unwrap();
    // CL.THROTTLE: what it stored, with its absolute expiry.
    let _: Vec<i64> = redis::cmd("CL.THROTTLE")
        .arg("th")
        .arg(5)
        .arg(10)
        .arg(60)
        .arg(1)
        .query(&mut m)
        .unwrap();
    // A script's writes, and a transaction's, arrive as effects.
    let _: i64 = redis::cmd("EVAL")
        .arg("redis.call('SET', KEYS[1], 'x', 'EX', 20); return redis.call('INCR', KEYS[2])")
        .arg(2)
        .arg("lua1")
        .arg("lua2")
        .query(&mut m)
        .unwrap();
    let _: Value = redis::pipe()
        .atomic()
        .cmd("ZADD")
        .arg("z")
        .arg(1)
        .arg("a")
        .cmd("PEXPIRE")
        .arg("z")
        .arg(7000)
        .query(&mut m)
        .unwrap();
    wait_one(&mut m);

    let get = |r: &mut Connection, k: &str| -> Option<String> {
        redis::cmd("GET").arg(k).query(r).unwrap()
    };
    let pexpiretime =
        |r: &mut Connection, k: &str| -> i64 { redis::cmd("PEXPIRETIME").arg(k).query(r).unwrap() };
    assert_eq!(get(&mut r, "before").as_deref(), Some("1"));
    assert_eq!(pexpiretime(&mut r, "before"), t + 90_000);
    assert_eq!(pexpiretime(&mut r, "s"), t + 100_000);
    assert_eq!(pexpiretime(&mut r, "sx"), t + 50_000);
    assert_eq!(pexpiretime(&mut r, "e"), t + 30_000);
    assert_eq!(get(&mut r, "e").as_deref(), Some("2"));
    assert_eq!(pexpiretime(&mut r, "lua1"), t + 20_000);
    assert_eq!(get(&mut r, "lua2").as_deref(), Some("1"));
    assert_eq!(pexpiretime(&mut r, "z"), t + 7_000);
    let th_m: Option<String> = get(&mut m, "th");
    assert_eq!(get(&mut r, "th"), th_m);
    assert_eq!(pexpiretime(&mut r, "th"), pexpiretime(&mut m, "th"));
    let _: () = redis::cmd("SELECT").arg(3).query(&mut r).unwrap();
    let hv: Option<String> = redis::cmd("HGET").arg("h").arg("f").query(&mut r).unwrap();
    assert_eq!(hv.as_deref(), Some("v"));
    let _: () = redis::cmd("SELECT").arg(0).query(&mut r).unwrap();
    // The two servers' data are the same, key for key.
    let mut mk: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut m).unwrap();
    let mut rk: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut r).unwrap();
    mk.sort();
    rk.sort();
    assert_eq!(mk, rk);
}

#[test]
fn expiry_on_the_master_reaches_the_replica_as_del() {
    let master = sluice();
    let replica = sluice();
    let (mut m, mut r) = (con(&master), con(&replica));
    let t = freeze_at_whole_second(&mut m);
    follow(&mut r, master.addr().port());
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .arg("PX")
        .arg(100)
        .query(&mut m)
        .unwrap();
    wait_one(&mut m);
    // The replica's own clock says the key is long dead: it reads as missing, but stays
    // until the master says DEL (Redis's rule for replicas).
    let _: i64 = redis::cmd("CLOCK").arg("FREEZE").query(&mut r).unwrap();
    let _: i64 = redis::cmd("CLOCK")
        .arg("SET")
        .arg(t + 1_000_000)
        .query(&mut r)
        .unwrap();
    let v: Option<String> = redis::cmd("GET").arg("k").query(&mut r).unwrap();
    assert_eq!(v, None);
    let n: i64 = redis::cmd("DBSIZE").query(&mut r).unwrap();
    assert_eq!(n, 1, "a replica does not delete expired keys itself");
    // The master's reaper deletes it: the replica follows.
    let _: i64 = redis::cmd("CLOCK")
        .arg("ADVANCE")
        .arg(200)
        .query(&mut m)
        .unwrap();
    wait_one(&mut m);
    let n: i64 = redis::cmd("DBSIZE").query(&mut r).unwrap();
    assert_eq!(n, 0);
}

#[test]
fn a_read_only_replica_refuses_client_writes() {
    let master = sluice();
    let replica = sluice();
    let (mut m, mut r) = (con(&master), con(&replica));
    follow(&mut r, master.addr().port());
    let err = redis::cmd("SET")
        .arg("x")
        .arg("1")
        .query::<()>(&mut r)
        .unwrap_err();
    assert_eq!(err.code(), Some("READONLY"));
    assert_eq!(
        err.detail(),
        Some("You can't write against a read only replica.")
    );
    let err = redis::cmd("EVAL")
        .arg("return redis.call('SET', 'x', '1')")
        .arg(0)
        .query::<()>(&mut r)
        .unwrap_err();
    assert_eq!(err.code(), Some("READONLY"), "{err}");
    // Reads work; WAIT is refused on a replica, as in Redis.
    let v: Option<String> = redis::cmd("GET").arg("x").query(&mut r).unwrap();
    assert_eq!(v, None);
    let err = redis::cmd("WAIT")
        .arg(0)
        .arg(0)
        .query::<i64>(&mut r)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("WAIT cannot be used with replica instances"),
        "{err}"
    );
    // replica-read-only no lets writes in (local only); REPLICAOF NO ONE makes a master.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("replica-read-only")
        .arg("no")
        .query(&mut r)
        .unwrap();
    let _: () = redis::cmd("SET").arg("x").arg("1").query(&mut r).unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("replica-read-only")
        .arg("yes")
        .query(&mut r)
        .unwrap();
    let _: String = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut r)
        .unwrap();
    let _: () = redis::cmd("SET").arg("y").arg("1").query(&mut r).unwrap();
    assert_eq!(info_field(&mut r, "replication", "role"), "master");
    let _: () = redis::cmd("SET").arg("z").arg("1").query(&mut m).unwrap();
}

#[test]
fn a_broken_link_reconnects_and_catches_up() {
    let master = sluice();
    let replica = sluice();
    let (mut m, mut r) = (con(&master), con(&replica));
    follow(&mut r, master.addr().port());
    // In database 2: a partial resynchronization continues in the database the stream had
    // selected, with no SELECT of its own.
    let _: () = redis::cmd("SELECT").arg(2).query(&mut m).unwrap();
    let _: () = redis::cmd("SELECT").arg(2).query(&mut r).unwrap();
    let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut m).unwrap();
    wait_one(&mut m);
    // Kill the replica's feed connection on the master.
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut m).unwrap();
    let id = list
        .lines()
        .find(|l| l.contains("cmd=psync"))
        .and_then(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")))
        .expect("the replica's connection")
        .to_string();
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(&id)
        .query(&mut m)
        .unwrap();
    // Written while the link is down (or coming back): it arrives once it is back.
    let _: () = redis::cmd("SET").arg("b").arg("2").query(&mut m).unwrap();
    eventually(
        "the write made during the break reaches the replica",
        || {
            let v: Option<String> = redis::cmd("GET").arg("b").query(&mut r).unwrap();
            v.as_deref() == Some("2")
        },
    );
    eventually("the link is up again", || link_state(&mut r) == "connected");
    let _: () = redis::cmd("SET").arg("c").arg("3").query(&mut m).unwrap();
    wait_one(&mut m);
    let v: Vec<Option<String>> = redis::cmd("MGET")
        .arg("a")
        .arg("b")
        .arg("c")
        .query(&mut r)
        .unwrap();
    assert_eq!(
        v,
        vec![Some("1".into()), Some("2".into()), Some("3".into())]
    );
    assert_eq!(
        info_field(&mut m, "replication", "master_repl_offset"),
        info_field(&mut r, "replication", "master_repl_offset")
    );
}

#[test]
fn wait_counts_acknowledgements() {
    let master = sluice();
    let mut m = con(&master);
    // No replica: WAIT 0 answers at once, WAIT 1 after its timeout.
    let n: i64 = redis::cmd("WAIT").arg(0).arg(0).query(&mut m).unwrap();
    assert_eq!(n, 0);
    let started = Instant::now();
    let n: i64 = redis::cmd("WAIT").arg(1).arg(100).query(&mut m).unwrap();
    assert_eq!(n, 0);
    assert!(started.elapsed() >= Duration::from_millis(100));
    let replica = sluice();
    let mut r = con(&replica);
    follow(&mut r, master.addr().port());
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut m).unwrap();
    let n: i64 = redis::cmd("WAIT").arg(1).arg(0).query(&mut m).unwrap();
    assert_eq!(n, 1);
    let n: i64 = redis::cmd("WAIT").arg(2).arg(100).query(&mut m).unwrap();
    assert_eq!(n, 1);
    // ROLE and INFO list the replica.
    let role = role(&mut m);
    assert_eq!(role[0], Value::BulkString(b"master".to_vec()));
    assert_eq!(info_field(&mut m, "replication", "connected_slaves"), "1");
    let line = info_field(&mut m, "replication", "slave0");
    assert!(
        line.starts_with(&format!(
            "ip=127.0.0.1,port={},state=online,offset=",
            replica.addr().port()
        )),
        "{line}"
    );
}

#[test]
fn a_blocked_pop_served_later_is_replicated() {
    let master = sluice();
    let replica = sluice();
    let (mut m, mut r) = (con(&master), con(&replica));
    follow(&mut r, master.addr().port());
    let url = master.url();
    let waiter = std::thread::spawn(move || {
        let mut c = connect(&url);
        let v: Vec<String> = redis::cmd("BLPOP").arg("q").arg(5).query(&mut c).unwrap();
        v
    });
    eventually("the client is blocked", || {
        info_field(&mut m, "clients", "blocked_clients") == "1"
    });
    let _: i64 = redis::cmd("RPUSH")
        .arg("q")
        .arg("a")
        .arg("b")
        .query(&mut m)
        .unwrap();
    assert_eq!(waiter.join().unwrap(), vec!["q".to_string(), "a".into()]);
    wait_one(&mut m);
    let v: Vec<String> = redis::cmd("LRANGE")
        .arg("q")
        .arg(0)
        .arg(-1)
        .query(&mut r)
        .unwrap();
    assert_eq!(v, vec!["b".to_string()]);
}

#[test]
fn sluice_replicates_a_real_redis_master() {
    let redis = RedisServer::start();
    let mut m = connect(&format!("redis://127.0.0.1:{}", redis.port()));
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("repl-diskless-sync-delay")
        .arg(0)
        .query(&mut m)
        .unwrap();
    // Every type sluice has, a TTL, a function library, a second database.
    let _: () = redis::cmd("SET")
        .arg("s")
        .arg("v")
        .arg("PX")
        .arg(60_000)
        .query(&mut m)
        .unwrap();
    let _: () = redis::cmd("SET").arg("n").arg(42).query(&mut m).unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg("l")
        .arg("a")
        .arg("b")
        .query(&mut m)
        .unwrap();
    let _: () = redis::cmd("SADD")
        .arg("set")
        .arg(1)
        .arg(2)
        .arg("x")
        .query(&mut m)
        .unwrap();
    let _: () = redis::cmd("ZADD")
        .arg("z")
        .arg(1.5)
        .arg("m")
        .query(&mut m)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg("f")
        .arg("v")
        .query(&mut m)
        .unwrap();
    let big: String = "y".repeat(20_000);
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query(&mut m)
        .unwrap();
    let _: () = redis::cmd("SELECT").arg(2).query(&mut m).unwrap();
    let _: () = redis::cmd("SET").arg("db2").arg("x").query(&mut m).unwrap();
    let _: () = redis::cmd("SELECT").arg(0).query(&mut m).unwrap();
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("#!lua name=lib\nredis.register_function('f', function() return 7 end)")
        .query(&mut m)
        .unwrap();
    let deadline: i64 = redis::cmd("PEXPIRETIME").arg("s").query(&mut m).unwrap();

    let replica = sluice();
    let mut r = con(&replica);
    follow(&mut r, redis.port());
    // The stream after the payload: a script's effects, an EXPIRE.
    let _: i64 = redis::cmd("EVAL")
        .arg("redis.call('SET', 'lua', 'x', 'EX', 30); return redis.call('INCR', 'n')")
        .arg(0)
        .query(&mut m)
        .unwrap();
    let _: i64 = redis::cmd("EXPIRE")
        .arg("l")
        .arg(100)
        .query(&mut m)
        .unwrap();
    wait_one(&mut m);

    let get = |c: &mut Connection, k: &str| -> Option<String> {
        redis::cmd("GET").arg(k).query(c).unwrap()
    };
    assert_eq!(get(&mut r, "s").as_deref(), Some("v"));
    let d: i64 = redis::cmd("PEXPIRETIME").arg("s").query(&mut r).unwrap();
    assert_eq!(d, deadline);
    assert_eq!(get(&mut r, "n").as_deref(), Some("43"));
    assert_eq!(get(&mut r, "big").as_deref(), Some(big.as_str()));
    let l: Vec<String> = redis::cmd("LRANGE")
        .arg("l")
        .arg(0)
        .arg(-1)
        .query(&mut r)
        .unwrap();
    assert_eq!(l, vec!["a".to_string(), "b".into()]);
    let lm: i64 = redis::cmd("PEXPIRETIME").arg("l").query(&mut m).unwrap();
    let lr: i64 = redis::cmd("PEXPIRETIME").arg("l").query(&mut r).unwrap();
    assert_eq!(lm, lr);
    let n: i64 = redis::cmd("SCARD").arg("set").query(&mut r).unwrap();
    assert_eq!(n, 3);
    let sc: f64 = redis::cmd("ZSCORE")
        .arg("z")
        .arg("m")
        .query(&mut r)
        .unwrap();
    assert_eq!(sc, 1.5);
    let hv: Option<String> = redis::cmd("HGET").arg("h").arg("f").query(&mut r).unwrap();
    assert_eq!(hv.as_deref(), Some("v"));
    let mt: i64 = redis::cmd("PEXPIRETIME").arg("lua").query(&mut m).unwrap();
    let rt: i64 = redis::cmd("PEXPIRETIME").arg("lua").query(&mut r).unwrap();
    assert_eq!(mt, rt);
    let f: i64 = redis::cmd("FCALL_RO")
        .arg("f")
        .arg(0)
        .query(&mut r)
        .unwrap_or(0);
    let f2: i64 = redis::cmd("FCALL").arg("f").arg(0).query(&mut r).unwrap();
    assert!(f == 7 || f2 == 7);
    let _: () = redis::cmd("SELECT").arg(2).query(&mut r).unwrap();
    assert_eq!(get(&mut r, "db2").as_deref(), Some("x"));
}

#[test]
fn a_real_redis_replicates_a_sluice_master() {
    let master = sluice();
    let mut m = con(&master);
    let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut m).unwrap();
    let _: () = redis::cmd("ZADD")
        .arg("z")
        .arg(1)
        .arg("m")
        .query(&mut m)
        .unwrap();
    let _: Vec<i64> = redis::cmd("CL.THROTTLE")
        .arg("th")
        .arg(5)
        .arg(10)
        .arg(60)
        .arg(1)
        .query(&mut m)
        .unwrap();
    let redis = RedisServer::start();
    let mut r = connect(&format!("redis://127.0.0.1:{}", redis.port()));
    follow(&mut r, master.addr().port());
    let _: () = redis::cmd("SET")
        .arg("b")
        .arg("2")
        .arg("EX")
        .arg(100)
        .query(&mut m)
        .unwrap();
    wait_one(&mut m);
    let v: Vec<Option<String>> = redis::cmd("MGET")
        .arg("a")
        .arg("b")
        .arg("th")
        .query(&mut r)
        .unwrap();
    let th: Option<String> = redis::cmd("GET").arg("th").query(&mut m).unwrap();
    assert_eq!(v, vec![Some("1".into()), Some("2".into()), th]);
    let bm: i64 = redis::cmd("PEXPIRETIME").arg("b").query(&mut m).unwrap();
    let br: i64 = redis::cmd("PEXPIRETIME").arg("b").query(&mut r).unwrap();
    assert_eq!(bm, br);
    let z: Vec<String> = redis::cmd("ZRANGE")
        .arg("z")
        .arg(0)
        .arg(-1)
        .query(&mut r)
        .unwrap();
    assert_eq!(z, vec!["m".to_string()]);
}

/// A raw replica: PSYNC to `master`, skip the full resync's payload, and return the socket
/// positioned at the start of the write stream.
fn raw_replica(master: &TestServer) -> std::net::TcpStream {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(master.addr()).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"*3\r\n$8\r\nREPLCONF\r\n$4\r\ncapa\r\n$6\r\npsync2\r\n*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n")
        .unwrap();
    // "+OK\r\n", "+FULLRESYNC <id> <offset>\r\n", "$<len>\r\n" then <len> bytes (no CRLF).
    let mut line = Vec::new();
    let mut lines = 0;
    let mut byte = [0u8; 1];
    let len = loop {
        s.read_exact(&mut byte).unwrap();
        line.push(byte[0]);
        if line.ends_with(b"\r\n") {
            lines += 1;
            if line.starts_with(b"$") {
                break std::str::from_utf8(&line[1..line.len() - 2])
                    .unwrap()
                    .parse::<usize>()
                    .unwrap();
            }
            assert!(lines <= 2, "unexpected handshake line {line:?}");
            line.clear();
        }
    };
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).unwrap();
    s
}

/// Reads the stream until it holds `want` (or fails after the socket's timeout).
fn stream_until(s: &mut std::net::TcpStream, got: &mut Vec<u8>, want: &[u8]) {
    use std::io::Read;
    let mut buf = [0u8; 4096];
    while !got.windows(want.len()).any(|w| w == want) {
        let n = s.read(&mut buf).expect("the stream goes on");
        assert!(
            n > 0,
            "stream closed; got {:?}",
            String::from_utf8_lossy(got)
        );
        got.extend_from_slice(&buf[..n]);
    }
}

/// Commands Redis propagates as a cheaper exact equivalent go out in that form, not as the
/// whole value of their key: SPOP as SREM, INCRBYFLOAT as SET … KEEPTTL, HINCRBYFLOAT as
/// HSET, and blocking pops (served at once or later) as their non-blocking form.
#[test]
fn cheap_equivalents_are_propagated_instead_of_whole_values() {
    let master = sluice();
    let mut m = con(&master);
    let mut s = raw_replica(&master);
    let mut got = Vec::new();
    let _: i64 = redis::cmd("SADD")
        .arg("s")
        .arg("only")
        .query(&mut m)
        .unwrap();
    let _: String = redis::cmd("SPOP").arg("s").query(&mut m).unwrap();
    stream_until(&mut s, &mut got, b"$4\r\nSREM\r\n$1\r\ns\r\n$4\r\nonly\r\n");
    let _: String = redis::cmd("INCRBYFLOAT")
        .arg("f")
        .arg("1.5")
        .query(&mut m)
        .unwrap();
    stream_until(
        &mut s,
        &mut got,
        b"$3\r\nSET\r\n$1\r\nf\r\n$3\r\n1.5\r\n$7\r\nKEEPTTL\r\n",
    );
    let _: String = redis::cmd("HINCRBYFLOAT")
        .arg("h")
        .arg("x")
        .arg("2.5")
        .query(&mut m)
        .unwrap();
    stream_until(
        &mut s,
        &mut got,
        b"$4\r\nHSET\r\n$1\r\nh\r\n$1\r\nx\r\n$3\r\n2.5\r\n",
    );
    let _: i64 = redis::cmd("RPUSH")
        .arg("q")
        .arg("a")
        .arg("b")
        .query(&mut m)
        .unwrap();
    let _: Vec<String> = redis::cmd("BRPOP").arg("q").arg(1).query(&mut m).unwrap();
    stream_until(&mut s, &mut got, b"$4\r\nRPOP\r\n$1\r\nq\r\n");
    let _: i64 = redis::cmd("ZADD")
        .arg("z")
        .arg(1)
        .arg("m")
        .query(&mut m)
        .unwrap();
    let _: redis::Value = redis::cmd("BZMPOP")
        .arg(1)
        .arg(1)
        .arg("z")
        .arg("MAX")
        .query(&mut m)
        .unwrap();
    stream_until(&mut s, &mut got, b"$7\r\nZPOPMAX\r\n$1\r\nz\r\n$1\r\n1\r\n");
    // Served later: the waiter's pop goes out as LMOVE.
    let url = master.url();
    let waiter = std::thread::spawn(move || {
        let mut c = connect(&url);
        let v: String = redis::cmd("BLMOVE")
            .arg("src")
            .arg("dst")
            .arg("LEFT")
            .arg("RIGHT")
            .arg(5)
            .query(&mut c)
            .unwrap();
        v
    });
    eventually("the client is blocked", || {
        info_field(&mut m, "clients", "blocked_clients") == "1"
    });
    let _: i64 = redis::cmd("RPUSH")
        .arg("src")
        .arg("e")
        .query(&mut m)
        .unwrap();
    assert_eq!(waiter.join().unwrap(), "e");
    stream_until(
        &mut s,
        &mut got,
        b"$5\r\nLMOVE\r\n$3\r\nsrc\r\n$3\r\ndst\r\n$4\r\nLEFT\r\n$5\r\nRIGHT\r\n",
    );
    let text = String::from_utf8_lossy(&got);
    assert!(!text.contains("RESTORE"), "no whole value was sent: {text}");
}

fn failover_state(c: &mut Connection) -> String {
    info_field(c, "replication", "master_failover_state")
}

fn role_is_replica_of(c: &mut Connection, port: u16) -> bool {
    let r = role(c);
    matches!(
        (r.first(), r.get(2)),
        (Some(Value::BulkString(kind)), Some(Value::Int(p)))
            if kind == b"slave" && *p == i64::from(port)
    ) && link_state(c) == "connected"
}

fn role_kind(c: &mut Connection) -> String {
    match role(c).first() {
        Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        other => format!("{other:?}"),
    }
}

/// FAILOVER between two sluice nodes: the replica takes over on the old master's PSYNC …
/// FAILOVER, the old master follows it with a partial resynchronization (the history goes
/// on: its `master_replid2` is the id it had), and nothing written before is lost.
#[test]
fn failover_hands_the_master_role_to_a_caught_up_replica() {
    let (a, b) = (sluice(), sluice());
    let (mut m, mut r) = (con(&a), con(&b));
    let _: () = redis::cmd("SET").arg("k1").arg("1").query(&mut m).unwrap();
    follow(&mut r, a.addr().port());
    let _: () = redis::cmd("SET").arg("k2").arg("2").query(&mut m).unwrap();
    wait_one(&mut m);
    let old_id = info_field(&mut m, "replication", "master_replid");
    // A target that is not one of its replicas is refused.
    let e = redis::cmd("FAILOVER")
        .arg("TO")
        .arg("127.0.0.1")
        .arg(1)
        .query::<String>(&mut m)
        .unwrap_err();
    assert_eq!(
        e.detail(),
        Some("FAILOVER target HOST and PORT is not a replica.")
    );
    let ok: String = redis::cmd("FAILOVER")
        .arg("TO")
        .arg("127.0.0.1")
        .arg(b.addr().port())
        .arg("TIMEOUT")
        .arg(5000)
        .query(&mut m)
        .unwrap();
    assert_eq!(ok, "OK");
    eventually("the old master follows its replica", || {
        role_is_replica_of(&mut m, b.addr().port())
    });
    assert_eq!(role_kind(&mut r), "master");
    eventually("the failover is over", || {
        failover_state(&mut m) == "no-failover"
    });
    assert_eq!(failover_state(&mut r), "no-failover");
    // Continued, not reloaded: the old master's previous id is the history it had.
    assert_eq!(info_field(&mut m, "replication", "master_replid2"), old_id);
    assert_eq!(info_field(&mut r, "replication", "master_replid2"), old_id);
    let got: Vec<Option<String>> = redis::cmd("MGET")
        .arg("k1")
        .arg("k2")
        .query(&mut r)
        .unwrap();
    assert_eq!(got, vec![Some("1".into()), Some("2".into())]);
    // Writes now go to the new master and reach the old one; the old one refuses them.
    let _: () = redis::cmd("SET").arg("k3").arg("3").query(&mut r).unwrap();
    wait_one(&mut r);
    let k3: Option<String> = redis::cmd("GET").arg("k3").query(&mut m).unwrap();
    assert_eq!(k3.as_deref(), Some("3"));
    let e = redis::cmd("SET")
        .arg("k4")
        .arg("4")
        .query::<()>(&mut m)
        .unwrap_err();
    assert_eq!(e.code(), Some("READONLY"));
}

/// While a FAILOVER waits for a replica, writes are held (reads are not) and REPLICAOF and
/// a second FAILOVER are refused; TIMEOUT (on the server clock) ends the wait, the node
/// stays a master and the held write goes through. With FORCE it fails over anyway, and
/// FAILOVER ABORT makes it a master again.
#[test]
fn a_failover_waits_with_writes_held_until_its_timeout_or_abort() {
    use crate::support::{Conn, Read1};
    let master = sluice();
    let mut m = con(&master);
    // A replica that never acknowledges anything, so it never catches up.
    let _raw = raw_replica(&master);
    eventually("the raw replica is attached", || {
        info_field(&mut m, "replication", "connected_slaves") == "1"
    });
    let _: () = redis::cmd("SET").arg("x").arg("1").query(&mut m).unwrap();
    let _: i64 = redis::cmd("CLOCK").arg("FREEZE").query(&mut m).unwrap();
    let ok: String = redis::cmd("FAILOVER")
        .arg("TIMEOUT")
        .arg(1000)
        .query(&mut m)
        .unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(failover_state(&mut m), "waiting-for-sync");
    let e = redis::cmd("FAILOVER").query::<String>(&mut m).unwrap_err();
    assert_eq!(e.detail(), Some("FAILOVER already in progress."));
    let e = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(1)
        .query::<String>(&mut m)
        .unwrap_err();
    assert_eq!(
        e.detail(),
        Some("REPLICAOF not allowed while failing over.")
    );
    let mut writer = Conn::connect(master.addr());
    writer.send(&[b"SET", b"held", b"1"]);
    assert!(matches!(
        writer.read_one(Duration::from_millis(200)),
        Read1::Timeout(_)
    ));
    let x: Option<String> = redis::cmd("GET").arg("x").query(&mut m).unwrap();
    assert_eq!(x.as_deref(), Some("1"), "reads are not held");
    let _: i64 = redis::cmd("CLOCK")
        .arg("ADVANCE")
        .arg(1001)
        .query(&mut m)
        .unwrap();
    eventually("the wait times out", || {
        failover_state(&mut m) == "no-failover"
    });
    assert_eq!(
        writer.read_one(Duration::from_secs(5)),
        Read1::Reply(b"+OK\r\n".to_vec())
    );
    assert_eq!(role_kind(&mut m), "master");

    // FORCE: at the timeout it follows the named replica even though it is behind. The raw
    // replica announced no port, so it is 127.0.0.1:0, where nothing answers: the failover
    // stays in progress until FAILOVER ABORT.
    let e = redis::cmd("FAILOVER")
        .arg("FORCE")
        .arg("TIMEOUT")
        .arg(10)
        .query::<String>(&mut m)
        .unwrap_err();
    assert_eq!(
        e.detail(),
        Some("FAILOVER with force option requires both a timeout and target HOST and IP.")
    );
    let ok: String = redis::cmd("FAILOVER")
        .arg("TO")
        .arg("127.0.0.1")
        .arg(0)
        .arg("FORCE")
        .arg("TIMEOUT")
        .arg(1000)
        .query(&mut m)
        .unwrap();
    assert_eq!(ok, "OK");
    let _: i64 = redis::cmd("CLOCK")
        .arg("ADVANCE")
        .arg(1001)
        .query(&mut m)
        .unwrap();
    eventually("the forced failover is in progress", || {
        failover_state(&mut m) == "failover-in-progress"
    });
    assert_eq!(role_kind(&mut m), "slave");
    let ok: String = redis::cmd("FAILOVER").arg("ABORT").query(&mut m).unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(failover_state(&mut m), "no-failover");
    assert_eq!(role_kind(&mut m), "master");
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("1")
        .query(&mut m)
        .unwrap();
}

/// FAILOVER across implementations, both ways: a sluice master hands over to a redis-server
/// replica (which takes Redis's own PSYNC … FAILOVER from sluice), and a redis-server master
/// hands over to a sluice replica.
#[test]
fn failover_works_between_sluice_and_redis_both_ways() {
    // sluice master -> redis replica
    let master = sluice();
    let redis = RedisServer::start();
    let mut m = con(&master);
    let mut r = connect(&format!("redis://127.0.0.1:{}", redis.port()));
    let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut m).unwrap();
    follow(&mut r, master.addr().port());
    wait_one(&mut m);
    let ok: String = redis::cmd("FAILOVER").query(&mut m).unwrap();
    assert_eq!(ok, "OK");
    eventually("sluice follows the redis replica it handed over to", || {
        role_is_replica_of(&mut m, redis.port())
    });
    assert_eq!(role_kind(&mut r), "master");
    let _: () = redis::cmd("SET").arg("b").arg("2").query(&mut r).unwrap();
    wait_one(&mut r);
    let got: Vec<Option<String>> = redis::cmd("MGET").arg("a").arg("b").query(&mut m).unwrap();
    assert_eq!(got, vec![Some("1".into()), Some("2".into())]);
    eventually("sluice's failover is over", || {
        failover_state(&mut m) == "no-failover"
    });

    // redis master -> sluice replica
    let redis = RedisServer::start();
    let replica = sluice();
    let mut m = connect(&format!("redis://127.0.0.1:{}", redis.port()));
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("repl-diskless-sync-delay")
        .arg(0)
        .query(&mut m)
        .unwrap();
    let mut r = con(&replica);
    let _: () = redis::cmd("SET").arg("c").arg("3").query(&mut m).unwrap();
    follow(&mut r, redis.port());
    wait_one(&mut m);
    let ok: String = redis::cmd("FAILOVER").query(&mut m).unwrap();
    assert_eq!(ok, "OK");
    eventually("redis follows the sluice replica it handed over to", || {
        role_is_replica_of(&mut m, replica.addr().port())
    });
    assert_eq!(role_kind(&mut r), "master");
    let _: () = redis::cmd("SET").arg("d").arg("4").query(&mut r).unwrap();
    wait_one(&mut r);
    let got: Vec<Option<String>> = redis::cmd("MGET").arg("c").arg("d").query(&mut m).unwrap();
    assert_eq!(got, vec![Some("3".into()), Some("4".into())]);
}
