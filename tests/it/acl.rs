//! ACL end to end where a transcript cannot show it (`tests/diff/acl.txt` compares the
//! replies and errors with redis-server): ACL LOG's entries (their timing fields aside)
//! side by side with a redis-server, the ACL file written by ACL SAVE read back by a
//! restarted server, `user` directives, the connections of a deleted user closed, CLIENT
//! KILL USER, and secrets kept out of SLOWLOG, MONITOR and CLIENT LIST.

use std::time::Duration;

use crate::support::{Conn, Read1, RedisServer, sluice};

/// Whether the server closes the connection (within 5 s).
fn closed(c: &mut Conn) -> bool {
    matches!(c.read_one(Duration::from_secs(5)), Read1::Eof(_))
}

/// `ACL LOG` as (count, reason, context, object, username) per entry, newest first.
fn log_fields(con: &mut redis::Connection) -> Vec<(i64, String, String, String, String)> {
    let entries: Vec<std::collections::HashMap<String, redis::Value>> =
        redis::cmd("ACL").arg("LOG").query(con).expect("ACL LOG");
    let text = |e: &std::collections::HashMap<String, redis::Value>, k: &str| match e.get(k) {
        Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("{k}: {other:?}"),
    };
    entries
        .iter()
        .map(|e| {
            let count = match e.get("count") {
                Some(redis::Value::Int(n)) => *n,
                other => panic!("count: {other:?}"),
            };
            assert!(e.contains_key("age-seconds") && e.contains_key("client-info"));
            (
                count,
                text(e, "reason"),
                text(e, "context"),
                text(e, "object"),
                text(e, "username"),
            )
        })
        .collect()
}

fn connect(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .expect("client")
        .get_connection()
        .expect("connect")
}

/// What a restricted user does, and what ACL LOG then holds: the same entries as Redis's.
#[test]
fn acl_log_entries_match_redis() {
    let redis_server = RedisServer::start();
    let server = sluice();
    let mut logs = Vec::new();
    for port in [redis_server.port(), server.addr().port()] {
        let mut admin = connect(port);
        let _: () = redis::cmd("ACL")
            .arg(&[
                "SETUSER",
                "u",
                "on",
                ">pw",
                "~k*",
                "&ch",
                "+@all",
                "-flushall",
            ])
            .query(&mut admin)
            .unwrap();
        let mut u = connect(port);
        assert!(
            redis::cmd("AUTH")
                .arg("u")
                .arg("wrong")
                .query::<()>(&mut u)
                .is_err()
        );
        let _: () = redis::cmd("AUTH").arg("u").arg("pw").query(&mut u).unwrap();
        for args in [
            &["GET", "other"][..],
            &["GET", "other"],
            &["FLUSHALL"],
            &["PUBLISH", "nope", "m"],
            &["SET", "k1", "v"],
        ] {
            let _ = redis::cmd(args[0])
                .arg(&args[1..])
                .query::<redis::Value>(&mut u);
        }
        let _ = redis::cmd("EVAL")
            .arg("return redis.call('get', 'zzz')")
            .arg(0)
            .query::<redis::Value>(&mut u);
        let _: () = redis::cmd("MULTI").query(&mut u).unwrap();
        let _ = redis::cmd("GET")
            .arg("inmulti")
            .query::<redis::Value>(&mut u);
        let _ = redis::cmd("DISCARD").query::<redis::Value>(&mut u);
        logs.push(log_fields(&mut admin));
        // Bounded by acllog-max-len.
        let _: () = redis::cmd("CONFIG")
            .arg(&["SET", "acllog-max-len", "2"])
            .query(&mut admin)
            .unwrap();
        let _ = redis::cmd("GET").arg("again").query::<redis::Value>(&mut u);
        logs.push(log_fields(&mut admin));
    }
    assert_eq!(logs[2], logs[0], "ACL LOG differs from Redis's");
    assert_eq!(logs[3], logs[1], "ACL LOG after acllog-max-len 2");
    assert_eq!(logs[1].len(), 2);
    assert!(logs[0].iter().any(|e| e.1 == "auth" && e.4 == "u"));
    assert!(logs[0].iter().any(|e| e.0 == 2 && e.3 == "other"));
}

/// ACL SAVE writes the users; a server started again on that file has them, and their
/// passwords work. A bad file stops the start with Redis's text.
#[test]
fn an_acl_file_written_by_acl_save_reloads_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users.acl");
    std::fs::write(&path, "").unwrap();
    let config = |p: &std::path::Path| sluice::Config {
        test_mode: true,
        save: Vec::new(),
        aclfile: Some(p.display().to_string()),
        ..sluice::Config::default()
    };
    let listed;
    {
        let server = sluice::TestServer::start_with(config(&path)).unwrap();
        let mut c = Conn::connect(server.addr());
        for rules in [
            &[
                "ACL", "SETUSER", "alice", "on", ">a1", ">a2", "~a:*", "+@read", "-keys",
            ][..],
            &[
                "ACL",
                "SETUSER",
                "bob",
                "on",
                "nopass",
                "(~b:* +set)",
                "&news",
            ],
            &["ACL", "SETUSER", "default", "on", ">adminpw"],
        ] {
            let words: Vec<&[u8]> = rules.iter().map(|w| w.as_bytes()).collect();
            assert_eq!(c.cmd(&words), b"+OK\r\n");
        }
        assert_eq!(c.cmd(&[b"ACL", b"SAVE"]), b"+OK\r\n");
        listed = c.cmd(&[b"ACL", b"LIST"]);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("user alice on #"), "{text}");
        assert_eq!(text.lines().count(), 3, "{text}");
    }
    let server = sluice::TestServer::start_with(config(&path)).unwrap();
    let mut c = Conn::connect(server.addr());
    assert!(c.cmd(&[b"PING"]).starts_with(b"-NOAUTH"));
    assert_eq!(c.cmd(&[b"AUTH", b"adminpw"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"ACL", b"LIST"]), listed);
    assert_eq!(c.cmd(&[b"AUTH", b"alice", b"a2"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"GET", b"a:1"]), b"$-1\r\n");
    assert!(c.cmd(&[b"SET", b"a:1", b"v"]).starts_with(b"-NOPERM"));
    // ACL LOAD reads the file again; a bad line changes nothing.
    std::fs::write(&path, b"user carol on nopass +@all ~*\nuser dave +nosuch\n").unwrap();
    let mut admin = Conn::connect(server.addr());
    assert_eq!(admin.cmd(&[b"AUTH", b"adminpw"]), b"+OK\r\n");
    let err = admin.cmd(&[b"ACL", b"LOAD"]);
    let expected = format!(
        "-ERR {}:2: Error in applying operation '+nosuch': Unknown command or category name in ACL. WARNING: ACL errors detected, no change to the previously active ACL rules was performed\r\n",
        path.display()
    );
    assert_eq!(String::from_utf8_lossy(&err), expected);
    assert_eq!(admin.cmd(&[b"ACL", b"LIST"]), listed);
    // A good file replaces every user, closing the connections of the old ones.
    std::fs::write(&path, b"user carol on nopass +@all ~*\n").unwrap();
    assert_eq!(admin.cmd(&[b"ACL", b"LOAD"]), b"+OK\r\n");
    assert!(closed(&mut c), "the connection stays open");
    assert_eq!(
        admin.cmd(&[b"ACL", b"USERS"]),
        b"*2\r\n$5\r\ncarol\r\n$7\r\ndefault\r\n"
    );
    // The default user, absent from the file, is back to nopass.
    let mut fresh = Conn::connect(server.addr());
    assert_eq!(fresh.cmd(&[b"PING"]), b"+PONG\r\n");
    drop(server);
    std::fs::write(&path, b"user eve on +nosuch\n").unwrap();
    let err =
        sluice::TestServer::start_with(config(&path)).expect_err("a bad ACL file stops the start");
    assert!(
        err.to_string()
            .contains("Error in applying operation '+nosuch'"),
        "{err}"
    );
}

/// `user` lines of the configuration define users; the default one can be redefined.
#[test]
fn user_directives_define_users() {
    let (config, _) = sluice::config::file::from_text(
        "t.conf",
        "user app on >apppw ~app:* +@all\nuser default on nopass +@all ~* &*\n",
    )
    .map(|l| (l.config, l.warnings))
    .expect("config");
    let server = sluice::TestServer::start_with(sluice::Config {
        test_mode: true,
        save: Vec::new(),
        ..config
    })
    .unwrap();
    let mut c = Conn::connect(server.addr());
    assert_eq!(c.cmd(&[b"AUTH", b"app", b"apppw"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"SET", b"app:1", b"v"]), b"+OK\r\n");
    assert!(c.cmd(&[b"SET", b"x", b"v"]).starts_with(b"-NOPERM"));
    let bad = sluice::config::file::from_text("t.conf", "user app on +nosuch\n")
        .map(|l| l.config)
        .unwrap();
    let err = sluice::TestServer::start_with(bad).expect_err("refused");
    assert!(
        err.to_string()
            .contains("Error loading ACL rule '+nosuch' for the user named 'app'"),
        "{err}"
    );
}

/// ACL DELUSER closes the user's connections (another's at once, the caller's after the
/// reply); CLIENT KILL USER closes them by name; CLIENT LIST names each connection's user.
#[test]
fn deleting_a_user_closes_its_connections() {
    let server = sluice();
    let mut admin = Conn::connect(server.addr());
    assert_eq!(
        admin.cmd(&[b"ACL", b"SETUSER", b"x", b"on", b"nopass", b"+@all", b"~*"]),
        b"+OK\r\n"
    );
    let mut a = Conn::connect(server.addr());
    let mut b = Conn::connect(server.addr());
    for c in [&mut a, &mut b] {
        assert_eq!(c.cmd(&[b"AUTH", b"x", b"any"]), b"+OK\r\n");
    }
    let list = String::from_utf8_lossy(&admin.cmd(&[b"CLIENT", b"LIST"])).into_owned();
    assert_eq!(list.matches(" user=x ").count(), 2, "{list}");
    assert_eq!(
        a.cmd(&[b"CLIENT", b"KILL", b"USER", b"x", b"SKIPME", b"yes"]),
        b":1\r\n"
    );
    assert!(closed(&mut b), "the connection stays open");
    assert_eq!(a.cmd(&[b"ACL", b"DELUSER", b"x"]), b":1\r\n");
    assert!(closed(&mut a), "the connection stays open");
    assert_eq!(
        String::from_utf8_lossy(&admin.cmd(&[b"CLIENT", b"KILL", b"USER", b"x"])),
        "-ERR No such user 'x'\r\n"
    );
}

/// Passwords never reach SLOWLOG, MONITOR or CLIENT LIST: ACL SETUSER's arguments and AUTH's
/// are `(redacted)` as in Redis.
#[test]
fn secrets_stay_out_of_slowlog_and_monitor() {
    let server = sluice();
    let mut c = Conn::connect(server.addr());
    assert_eq!(
        c.cmd(&[b"CONFIG", b"SET", b"slowlog-log-slower-than", b"0"]),
        b"+OK\r\n"
    );
    let mut mon = Conn::connect(server.addr());
    assert_eq!(mon.cmd(&[b"MONITOR"]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&[b"ACL", b"SETUSER", b"s", b"on", b">hunter2", b"+@all"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&[b"AUTH", b"s", b"hunter2"]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&[b"HELLO", b"2", b"AUTH", b"s", b"hunter2"]).first(),
        Some(&b'*')
    );
    assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
    let slowlog = c.cmd(&[b"SLOWLOG", b"GET", b"100"]);
    let monitored = {
        let mut seen = Vec::new();
        while !seen.windows(4).any(|w| w == b"PING") {
            match mon.read_one(Duration::from_secs(5)) {
                Read1::Reply(r) => seen.extend_from_slice(&r),
                other => panic!("MONITOR stopped: {other:?}"),
            }
        }
        seen
    };
    let list = c.cmd(&[b"CLIENT", b"LIST"]);
    for (what, bytes) in [
        ("SLOWLOG", &slowlog),
        ("MONITOR", &monitored),
        ("CLIENT LIST", &list),
    ] {
        assert!(
            !bytes.windows(7).any(|w| w == b"hunter2"),
            "{what} shows the password: {}",
            String::from_utf8_lossy(bytes)
        );
    }
    assert!(slowlog.windows(10).any(|w| w == b"(redacted)"));
}
