//! Hostile clients against the configuration: CONFIG SET values that would add lines to
//! the config file CONFIG REWRITE writes (and so change `dir`, `dbfilename` or clear
//! `requirepass` at the next start), protected configs, and DEBUG behind
//! `enable-debug-command`; and the start-up messages for a bad command line, which must
//! name the real problem once.
//!
//! Where Redis 7.0.15 is the reference (error texts, the rewritten file's quoting) each case
//! runs against a real `redis-server` started from a config file of its own, side by side.
//! Every test ends by checking that a fresh client is served promptly.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sluice::{Config, TestServer};

use crate::proc::SluiceProcess;
use crate::support::{Conn, Read1, RedisServer, escape, free_port};

/// A fresh empty directory under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!(
            "sluice-it-hostile-config-{tag}-{}-{n}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A `redis-server` started from a config file (CONFIG REWRITE needs one), killed when
/// dropped.
struct RedisFromFile {
    child: Child,
    port: u16,
}

impl RedisFromFile {
    /// Writes `dir/redis.conf` (port, loopback, no persistence, `dir`, then `extra`) and
    /// starts redis-server from it.
    fn start(dir: &Path, extra: &str) -> RedisFromFile {
        for _ in 0..5 {
            let port = free_port();
            let conf = dir.join("redis.conf");
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\nsave \"\"\nappendonly no\ndir \"{}\"\n{extra}",
                    dir.display()
                ),
            )
            .expect("write redis.conf");
            let mut child = Command::new("redis-server")
                .arg(&conf)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server must be on PATH (Redis 7.0.15)");
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return RedisFromFile { child, port };
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("redis-server did not start from its config file");
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }
}

impl Drop for RedisFromFile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text(reply: &[u8]) -> String {
    escape(reply)
}

/// A new connection gets PONG within a second: the server was not stopped or hung.
fn served_promptly(addr: SocketAddr, auth: Option<&[u8]>) {
    let started = Instant::now();
    let mut c = Conn::connect(addr);
    if let Some(pw) = auth {
        assert_eq!(c.cmd(&[b"AUTH", pw]), b"+OK\r\n");
    }
    c.send(&[b"PING"]);
    match c.read_one(Duration::from_secs(1)) {
        Read1::Reply(r) => assert_eq!(r, b"+PONG\r\n"),
        other => panic!("a fresh client was not served: {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(1));
}

/// Values that are not of their parameter's type are refused with Redis's texts, a
/// newline included: nothing unchecked reaches the configuration.
#[test]
fn config_set_values_are_typed_like_redis() {
    let redis = RedisServer::start();
    let sluice = support_sluice();
    let cases: &[(&[u8], &[u8])] = &[
        (b"maxmemory-clients", b"0\ndir /tmp"),
        (b"maxmemory-clients", b"101%"),
        (b"maxmemory-clients", b"-5"),
        (b"hll-sparse-max-bytes", b"3000\nrequirepass \"\""),
        (b"hll-sparse-max-bytes", b"abc"),
        (b"hz", b"10\ndbfilename x"),
        (b"tcp-keepalive", b"-1"),
        (b"list-max-listpack-size", b"abc"),
        (b"activerehashing", b"yes\n"),
        (b"appendfsync", b"no\nx"),
        (b"maxmemory", b"1gb\r\ndir /"),
        (b"notify-keyspace-events", b"KEA\n"),
        (b"save", b"1 1\ndir /"),
        (b"set-max-intset-entries", b"1 2"),
        (b"SLAVE-read-only", b"maybe"),
        (b"dir", b"/tmp"),
        (b"dbfilename", b"evil.rdb"),
        (b"enable-debug-command", b"yes"),
        (b"enable-protected-configs", b"yes"),
    ];
    let mut r = Conn::connect(redis.addr());
    let mut s = Conn::connect(sluice.addr());
    for (name, value) in cases {
        let want = r.cmd(&[b"CONFIG", b"SET", name, value]);
        let got = s.cmd(&[b"CONFIG", b"SET", name, value]);
        assert!(want.starts_with(b"-ERR"), "redis took {}", text(value));
        assert_eq!(
            text(&got),
            text(&want),
            "CONFIG SET {} {}",
            text(name),
            text(value)
        );
    }
    // What was refused left the values as they were.
    for name in [&b"maxmemory-clients"[..], b"hll-sparse-max-bytes", b"hz"] {
        let want = r.cmd(&[b"CONFIG", b"GET", name]);
        let got = s.cmd(&[b"CONFIG", b"GET", name]);
        assert_eq!(text(&got), text(&want), "CONFIG GET {}", text(name));
    }
    // Good values are taken and shown as Redis shows them.
    for (name, value) in [
        (&b"maxmemory-clients"[..], &b"0"[..]),
        (b"hll-sparse-max-bytes", b"4kb"),
        (b"hz", b"1000"),
    ] {
        assert_eq!(
            text(&s.cmd(&[b"CONFIG", b"SET", name, value])),
            text(&r.cmd(&[b"CONFIG", b"SET", name, value]))
        );
        assert_eq!(
            text(&s.cmd(&[b"CONFIG", b"GET", name])),
            text(&r.cmd(&[b"CONFIG", b"GET", name]))
        );
    }
    served_promptly(sluice.addr(), None);
}

fn support_sluice() -> TestServer {
    crate::support::sluice()
}

/// The attack end to end: CONFIG SET with a newline is refused, CONFIG REWRITE writes no
/// line a client chose, and a restart from the file keeps `dir`, `dbfilename` and
/// `requirepass`. Strings Redis accepts with control characters (passwords) are written
/// quoted exactly as Redis quotes them.
#[test]
fn config_rewrite_cannot_inject_lines() {
    let sdir = TempDir::new("sluice");
    let rdir = TempDir::new("redis");
    let dir = sdir.path().display().to_string();
    let conf = sdir.path().join("sluice.conf");
    std::fs::write(
        &conf,
        format!("port 0\ndir \"{dir}\"\ndbfilename safe.rdb\nrequirepass secret\n"),
    )
    .unwrap();
    let conf_arg = conf.display().to_string();
    let sluice = SluiceProcess::start_exactly(&[&conf_arg, "--loglevel", "warning"], &[]);
    let redis = RedisFromFile::start(rdir.path(), "dbfilename safe.rdb\nrequirepass secret\n");
    let mut s = Conn::connect(sluice.addr());
    let mut r = Conn::connect(redis.addr());
    for c in [&mut s, &mut r] {
        assert_eq!(c.cmd(&[b"AUTH", b"secret"]), b"+OK\r\n");
    }
    // Refused by both, with the same text.
    let injections: &[(&[u8], &[u8])] = &[
        (b"maxmemory-clients", b"0\nrequirepass \"\""),
        (
            b"hll-sparse-max-bytes",
            b"3000\ndir /tmp\ndbfilename evil.rdb",
        ),
        (b"maxmemory", b"0\nrequirepass \"\""),
        (b"dir", b"/tmp"),
    ];
    for (name, value) in injections {
        let want = r.cmd(&[b"CONFIG", b"SET", name, value]);
        let got = s.cmd(&[b"CONFIG", b"SET", name, value]);
        assert!(want.starts_with(b"-ERR"));
        assert_eq!(text(&got), text(&want), "CONFIG SET {}", text(name));
    }
    // Text that names a host or a user has no control characters in sluice (Redis takes
    // them and quotes them).
    let refused = s.cmd(&[
        b"CONFIG",
        b"SET",
        b"replica-announce-ip",
        b"1.2.3.4\nrequirepass x",
    ]);
    assert!(
        text(&refused).contains("must not contain control characters"),
        "{}",
        text(&refused)
    );
    // Passwords may hold anything, as in Redis; the rewrite quotes them as Redis does.
    let odd: &[u8] = b"pw\nrequirepass \"\"\ndir /tmp\t\x01\\";
    for c in [&mut s, &mut r] {
        assert_eq!(c.cmd(&[b"CONFIG", b"SET", b"masterauth", odd]), b"+OK\r\n");
        assert_eq!(
            c.cmd(&[b"CONFIG", b"SET", b"hll-sparse-max-bytes", b"4096"]),
            b"+OK\r\n"
        );
        assert_eq!(c.cmd(&[b"CONFIG", b"REWRITE"]), b"+OK\r\n");
    }
    let sluice_file = std::fs::read_to_string(&conf).unwrap();
    let redis_file = std::fs::read_to_string(rdir.path().join("redis.conf")).unwrap();
    let line = |file: &str, name: &str| -> Vec<String> {
        file.lines()
            .filter(|l| l.split(' ').next() == Some(name))
            .map(str::to_string)
            .collect()
    };
    for name in [
        "masterauth",
        "hll-sparse-max-bytes",
        "requirepass",
        "dbfilename",
    ] {
        assert_eq!(
            line(&sluice_file, name),
            line(&redis_file, name),
            "the {name} line\n--- sluice:\n{sluice_file}\n--- redis:\n{redis_file}"
        );
    }
    assert_eq!(line(&sluice_file, "dir"), vec![format!("dir \"{dir}\"")]);
    assert_eq!(
        line(&sluice_file, "requirepass"),
        vec!["requirepass \"secret\""]
    );
    assert_eq!(
        line(&sluice_file, "dbfilename"),
        vec!["dbfilename \"safe.rdb\""]
    );
    drop(s);
    drop(sluice);

    // Restarted from the rewritten file: the protected settings and the password hold.
    let sluice = SluiceProcess::start_exactly(&[&conf_arg, "--loglevel", "warning"], &[]);
    let mut s = Conn::connect(sluice.addr());
    assert!(s.cmd(&[b"CONFIG", b"GET", b"dir"]).starts_with(b"-NOAUTH"));
    assert_eq!(s.cmd(&[b"AUTH", b"secret"]), b"+OK\r\n");
    let get = |c: &mut Conn, name: &[u8]| c.cmd(&[b"CONFIG", b"GET", name]);
    let bulk = |v: &[u8]| {
        let mut out = format!("${}\r\n", v.len()).into_bytes();
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
        out
    };
    for (name, value) in [
        (&b"dir"[..], dir.as_bytes()),
        (b"dbfilename", b"safe.rdb"),
        (b"requirepass", b"secret"),
        (b"masterauth", odd),
        (b"hll-sparse-max-bytes", b"4096"),
    ] {
        let mut want = b"*2\r\n".to_vec();
        want.extend(bulk(name));
        want.extend(bulk(value));
        assert_eq!(text(&get(&mut s, name)), text(&want));
    }
    served_promptly(sluice.addr(), Some(b"secret"));
}

/// `enable-protected-configs` decides who may change `dir` and `dbfilename`, as in Redis.
#[test]
fn protected_configs_follow_enable_protected_configs() {
    let rdir = TempDir::new("protected-r");
    let target = TempDir::new("protected-target");
    let sluice = SluiceProcess::start(&["--enable-protected-configs", "local"]);
    let redis = RedisFromFile::start(rdir.path(), "enable-protected-configs local\n");
    let mut s = Conn::connect(sluice.addr());
    let mut r = Conn::connect(redis.addr());
    let missing = target.path().join("missing");
    let missing = missing.display().to_string();
    let target_dir = target.path().display().to_string();
    for (name, value) in [
        ("dir", missing.as_str()),
        ("dbfilename", "a/b.rdb"),
        ("dir", target_dir.as_str()),
        ("dbfilename", "other.rdb"),
        ("enable-protected-configs", "no"),
    ] {
        let want = r.cmd(&[b"CONFIG", b"SET", name.as_bytes(), value.as_bytes()]);
        let got = s.cmd(&[b"CONFIG", b"SET", name.as_bytes(), value.as_bytes()]);
        assert_eq!(text(&got), text(&want), "CONFIG SET {name} {value}");
    }
    for name in [&b"dir"[..], b"dbfilename", b"enable-protected-configs"] {
        assert_eq!(
            text(&s.cmd(&[b"CONFIG", b"GET", name])),
            text(&r.cmd(&[b"CONFIG", b"GET", name]))
        );
    }
    // SAVE writes where the client pointed it, inside the directory it chose.
    assert_eq!(s.cmd(&[b"SAVE"]), b"+OK\r\n");
    assert!(target.path().join("other.rdb").exists());
    served_promptly(sluice.addr(), None);
}

/// DEBUG answers only as `enable-debug-command` allows, with Redis's text, before
/// authentication and at MULTI's queue time as Redis does; test mode defaults it to `local`.
#[test]
fn debug_follows_enable_debug_command() {
    let rdir = TempDir::new("debug-r");
    let redis = RedisFromFile::start(rdir.path(), "requirepass pw\n");
    let plain = SluiceProcess::start(&["--requirepass", "pw"]);
    let mut r = Conn::connect(redis.addr());
    let mut s = Conn::connect(plain.addr());
    // Not authenticated yet: the DEBUG refusal comes first, as in Redis.
    for args in [&[&b"DEBUG"[..], b"SLEEP", b"0"][..], &[b"DEBUG", b"RELOAD"]] {
        assert_eq!(text(&s.cmd(args)), text(&r.cmd(args)));
    }
    for c in [&mut s, &mut r] {
        assert_eq!(c.cmd(&[b"AUTH", b"pw"]), b"+OK\r\n");
    }
    let script: &[&[&[u8]]] = &[
        &[b"DEBUG", b"SLEEP", b"0"],
        &[b"DEBUG", b"HELP"],
        &[b"DEBUG"],
        &[b"MULTI"],
        &[b"DEBUG", b"SLEEP", b"0"],
        &[b"EXEC"],
        &[b"CONFIG", b"GET", b"enable-debug-command"],
    ];
    for args in script {
        let want = r.cmd(args);
        let got = s.cmd(args);
        assert_eq!(text(&got), text(&want), "{:?}", args);
    }
    assert!(text(&s.cmd(&[b"DEBUG", b"SLEEP", b"0"])).contains("DEBUG command not allowed"));
    served_promptly(plain.addr(), Some(b"pw"));

    // Test mode: `local` by default, so a loopback client may; `no` still refuses.
    let test_mode = SluiceProcess::start(&["--test-mode"]);
    let mut t = Conn::connect(test_mode.addr());
    assert_eq!(t.cmd(&[b"DEBUG", b"SLEEP", b"0"]), b"+OK\r\n");
    assert_eq!(
        text(&t.cmd(&[b"CONFIG", b"GET", b"enable-debug-command"])),
        text(b"*2\r\n$20\r\nenable-debug-command\r\n$5\r\nlocal\r\n")
    );
    let refused = SluiceProcess::start(&["--test-mode", "--enable-debug-command", "no"]);
    let mut n = Conn::connect(refused.addr());
    assert!(text(&n.cmd(&[b"DEBUG", b"SLEEP", b"0"])).contains("DEBUG command not allowed"));
    served_promptly(test_mode.addr(), None);
    served_promptly(refused.addr(), None);
}

/// DEBUG RELOAD holds every shard while it loads: past its bound it is refused, and the
/// server goes on serving with its data untouched.
#[test]
fn debug_reload_is_bounded() {
    let dir = TempDir::new("reload-bound");
    let server = TestServer::start_with(Config {
        test_mode: true,
        dir: Some(dir.path().display().to_string()),
        ..Config::default()
    })
    .expect("sluice starts");
    let mut c = Conn::connect(server.addr());
    let big = vec![b'x'; 1 << 20];
    for i in 0..6u8 {
        assert_eq!(c.cmd(&[b"SET", &[b'k', b'0' + i], &big]), b"+OK\r\n");
    }
    let started = Instant::now();
    let reply = text(&c.cmd(&[b"DEBUG", b"RELOAD"]));
    assert!(reply.starts_with("-ERR DEBUG RELOAD refused"), "{reply}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(c.cmd(&[b"DBSIZE"]), b":6\r\n");
    // A small dataset still reloads.
    assert_eq!(c.cmd(&[b"FLUSHALL"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"SET", b"a", b"1"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"DEBUG", b"RELOAD"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"GET", b"a"]), b"$1\r\n1\r\n");
    served_promptly(server.addr(), None);
}

/// Runs the sluice binary with `args` to its end (it must not start serving) and returns
/// its exit code and standard error.
fn refused_start(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("cannot run the sluice binary");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Start-up messages say what is wrong, once: a port out of range with redis-server's
/// words, a one-dash option blamed itself, a port in use reported once.
#[test]
fn start_up_messages_name_the_real_problem() {
    // redis-server's words for a port out of range are the last line of its complaint.
    let redis = Command::new("redis-server")
        .args(["--port", "70000"])
        .output()
        .expect("redis-server must be on PATH");
    let redis_says = String::from_utf8_lossy(&redis.stdout).into_owned()
        + &String::from_utf8_lossy(&redis.stderr);
    let redis_reason = redis_says
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or_default()
        .to_string();
    assert!(redis_reason.contains("between 0 and 65535"), "{redis_says}");
    let (code, err) = refused_start(&["--port", "70000"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "'port 70000': bad value for 'port': {redis_reason}"
        )),
        "{err}"
    );

    let (code, err) = refused_start(&["-p", "7385"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("'-p' is not an option"), "{err}");
    assert!(!err.contains("'7385'"), "{err}");
    assert_eq!(err.matches("command line:").count(), 1, "{err}");

    let running = SluiceProcess::start(&[]);
    let port = running.addr().port().to_string();
    let (code, err) = refused_start(&["--port", &port]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.matches("Address already in use").count(), 1, "{err}");
    served_promptly(running.addr(), None);
}

/// `hll-sparse-max-bytes` is a setting sluice acts on (PFADD has HyperLogLogs), from the
/// command line as from CONFIG SET; `--help` lists as refused only what is refused.
#[test]
fn hll_sparse_max_bytes_and_help_tell_the_truth() {
    let s = SluiceProcess::start(&["--hll-sparse-max-bytes", "4kb"]);
    let mut c = Conn::connect(s.addr());
    assert_eq!(
        text(&c.cmd(&[b"CONFIG", b"GET", b"hll-sparse-max-bytes"])),
        text(b"*2\r\n$20\r\nhll-sparse-max-bytes\r\n$4\r\n4096\r\n")
    );
    assert_eq!(c.cmd(&[b"PFADD", b"h", b"a", b"b"]), b":1\r\n");
    assert_eq!(c.cmd(&[b"PFCOUNT", b"h"]), b":2\r\n");
    assert!(!s.log().contains("HyperLogLog"), "{}", s.log());
    served_promptly(s.addr(), None);

    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("--help")
        .output()
        .expect("cannot run the sluice binary");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--replicaof HOST PORT"), "{help}");
    let refused = help.split("refused when they").nth(1).unwrap_or_default();
    assert!(refused.contains("rename-command"), "{help}");
    assert!(!refused.contains("replicaof"), "{help}");
}

/// CONFIG SET port / bind while serving, side by side with redis-server: a taken port and
/// an impossible address get Redis's errors and change nothing (the other settings of the
/// same CONFIG SET included); a free port is listened on at once and the old one closed.
#[test]
fn config_set_port_and_bind_relisten_as_redis_does() {
    let redis = RedisServer::start();
    let sluice = SluiceProcess::start(&["--bind", "127.0.0.1"]);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port().to_string();
    for addr in [redis.addr(), sluice.addr()] {
        let mut c = Conn::connect(addr);
        let port = addr.port().to_string();
        assert_eq!(
            escape(&c.cmd(&[
                b"CONFIG",
                b"SET",
                b"maxmemory",
                b"10000001",
                b"port",
                taken_port.as_bytes(),
            ])),
            "-ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs.\\r\\n"
        );
        assert_eq!(
            escape(&c.cmd(&[b"CONFIG", b"GET", b"maxmemory"])),
            "*2\\r\\n$9\\r\\nmaxmemory\\r\\n$1\\r\\n0\\r\\n"
        );
        assert_eq!(
            escape(&c.cmd(&[b"CONFIG", b"SET", b"bind", b"999.999.999.999"])),
            "-ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses.\\r\\n"
        );
        // The same value again changes nothing.
        assert_eq!(
            c.cmd(&[b"CONFIG", b"SET", b"port", port.as_bytes()]),
            b"+OK\r\n"
        );
        assert_eq!(Conn::connect(addr).cmd(&[b"PING"]), b"+PONG\r\n");
        let new_port = free_port();
        assert_eq!(
            c.cmd(&[b"CONFIG", b"SET", b"port", new_port.to_string().as_bytes()]),
            b"+OK\r\n"
        );
        let moved = SocketAddr::from(([127, 0, 0, 1], new_port));
        let mut m = Conn::connect(moved);
        assert_eq!(m.cmd(&[b"PING"]), b"+PONG\r\n");
        // The connection that asked stays; the old port is closed.
        assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
        assert!(
            std::net::TcpStream::connect(addr).is_err(),
            "{addr} still listens"
        );
        assert_eq!(
            m.cmd(&[b"CONFIG", b"SET", b"bind", b"127.0.0.1 -::1"]),
            b"+OK\r\n"
        );
        assert_eq!(Conn::connect(moved).cmd(&[b"PING"]), b"+PONG\r\n");
        // Back where it was, so the server is stopped as it was started.
        assert_eq!(
            m.cmd(&[b"CONFIG", b"SET", b"port", port.as_bytes()]),
            b"+OK\r\n"
        );
        assert_eq!(Conn::connect(addr).cmd(&[b"PING"]), b"+PONG\r\n");
    }
}
