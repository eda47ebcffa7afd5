//! The append-only file against Redis 7.0.15's: sluice's folder passes `redis-check-aof` and
//! loads into redis-server, redis-server's folder (after a rewrite, so with an RDB base and
//! incremental files) loads into sluice, `kill -9` with `appendfsync always` keeps every
//! acknowledged write, a cut last file loads with `aof-load-truncated yes` and stops the
//! start with `no`, a corrupt one stops it, and CONFIG SET appendonly works at run time.
//! Every server is a real process (sluice's binary, redis-server) in a temporary `dir`.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Conn, free_port};

/// A server process killed (SIGKILL) when dropped.
struct Proc {
    child: Option<Child>,
    port: u16,
}

impl Proc {
    /// Starts `bin` with `args` plus `--port`; waits until it answers PING. Err if it exits.
    fn try_start(bin: &str, dir: &Path, args: &[&str]) -> Result<Proc, String> {
        let port = free_port();
        let mut child = Command::new(bin)
            .args(args)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run {bin}: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("{bin} exited at start: {status}"));
            }
            if let Ok(mut s) = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port))) {
                use std::io::{Read, Write};
                let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                let mut b = [0u8; 7];
                if s.write_all(b"*1\r\n$4\r\nPING\r\n").is_ok()
                    && s.read_exact(&mut b).is_ok()
                    && &b == b"+PONG\r\n"
                {
                    return Ok(Proc {
                        child: Some(child),
                        port,
                    });
                }
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return Err(format!("{bin} did not answer PING"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn start(bin: &str, dir: &Path, args: &[&str]) -> Proc {
        let mut last = String::new();
        for _ in 0..3 {
            match Self::try_start(bin, dir, args) {
                Ok(p) => return p,
                Err(e) => last = e,
            }
        }
        panic!("{last}");
    }

    fn sluice(dir: &Path, args: &[&str]) -> Proc {
        Self::start(env!("CARGO_BIN_EXE_sluice"), dir, args)
    }

    fn redis(dir: &Path, args: &[&str]) -> Proc {
        Self::start("redis-server", dir, args)
    }

    fn conn(&self) -> Conn {
        Conn::connect(SocketAddr::from(([127, 0, 0, 1], self.port)))
    }

    /// SIGKILL, as a crash.
    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// The AOF on and synced before every reply: a write a client saw acknowledged is in the file.
const AOF_ALWAYS: &[&str] = &["--appendonly", "yes", "--appendfsync", "always"];

/// [`AOF_ALWAYS`] for redis-server, with its RDB snapshots off (`save ""`): only the AOF
/// is written.
const REDIS_AOF_ALWAYS: &[&str] = &[
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
    "--save",
    "",
];

/// Runs sluice's binary to completion (a start that must fail): its exit status and output.
fn sluice_fails(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .args(["--port", &free_port().to_string(), "--bind", "127.0.0.1"])
        .arg("--dir")
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sluice");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "sluice should have refused to start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn text(c: &mut Conn, args: &[&str]) -> String {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    String::from_utf8_lossy(&c.cmd(&a)).into_owned()
}

fn info_field(c: &mut Conn, field: &str) -> String {
    let info = text(c, &["INFO", "persistence"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Waits (bounded) until INFO shows no rewrite running and at least `n` done.
fn wait_rewrites(c: &mut Conn, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let done: u64 = info_field(c, "aof_rewrites").parse().unwrap_or(0);
        if done >= n && info_field(c, "aof_rewrite_in_progress") == "0" {
            return;
        }
        assert!(Instant::now() < deadline, "rewrite did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A data set of every type, over two databases, with expiries, a transaction and the
/// limiter's state (`throttle`: CL.THROTTLE, which only sluice has; else a plain SET).
fn write_data(c: &mut Conn, throttle: bool) {
    let lim: &[&str] = if throttle {
        &["CL.THROTTLE", "lim", "5", "10", "60", "3"]
    } else {
        &["SET", "lim", "x"]
    };
    for cmd in [
        &["SET", "s", "hello"][..],
        &["INCR", "n"],
        &["INCRBY", "n", "41"],
        &["SET", "e", "v", "EX", "1000"],
        &["RPUSH", "l", "a", "b", "c"],
        &["HSET", "h", "f1", "v1", "f2", "v2"],
        &["SADD", "st", "x", "y"],
        &["ZADD", "z", "1.5", "m1", "2", "m2"],
        &["EXPIRE", "l", "5000"],
        &["SELECT", "3"],
        &["SET", "in3", "three"],
        &["SELECT", "0"],
        &["MULTI"],
        &["INCR", "tx"],
        &["LPUSH", "l", "z"],
        &["EXEC"],
        lim,
        &["DEL", "st"],
        &["SADD", "st", "only"],
    ] {
        let r = text(c, cmd);
        assert!(!r.starts_with('-'), "{cmd:?}: {r}");
    }
}

/// What `write_data` left, read back (CL.THROTTLE's key read as a string, on both servers).
fn read_data(c: &mut Conn) -> Vec<String> {
    let mut out = Vec::new();
    for cmd in [
        &["GET", "s"][..],
        &["GET", "n"],
        &["GET", "e"],
        &["LRANGE", "l", "0", "-1"],
        &["HGET", "h", "f2"],
        &["SMEMBERS", "st"],
        &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
        &["GET", "tx"],
        &["EXISTS", "lim"],
        &["SELECT", "3"],
        &["GET", "in3"],
        &["SELECT", "0"],
    ] {
        out.push(text(c, cmd));
    }
    let ttl: i64 = text(c, &["TTL", "e"])
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap_or(-9);
    assert!((900..=1000).contains(&ttl), "TTL of e: {ttl}");
    let ttl: i64 = text(c, &["TTL", "l"])
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap_or(-9);
    assert!((4900..=5000).contains(&ttl), "TTL of l: {ttl}");
    out
}

fn check_aof(dir: &Path) {
    let manifest = dir.join("appendonlydir").join("appendonly.aof.manifest");
    let out = Command::new("redis-check-aof")
        .arg(&manifest)
        .output()
        .expect("redis-check-aof is installed with redis-server");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "redis-check-aof: {stdout}");
    assert!(
        stdout.contains("All AOF files and manifest are valid"),
        "{stdout}"
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// sluice's folder (an RDB base from a rewrite, then incremental commands) passes
/// redis-check-aof and loads into redis-server with the same data; with
/// `aof-use-rdb-preamble no` too.
#[test]
fn sluice_aof_loads_into_redis_and_passes_check_aof() {
    for preamble in ["yes", "no"] {
        let s_dir = tempfile::tempdir().unwrap();
        let mut s = Proc::sluice(
            s_dir.path(),
            &[AOF_ALWAYS, &["--aof-use-rdb-preamble", preamble]].concat(),
        );
        let mut c = s.conn();
        text(&mut c, &["SET", "before", "rewrite"]);
        text(&mut c, &["RPUSH", "l", "old"]);
        assert!(text(&mut c, &["BGREWRITEAOF"]).contains("rewriting started"));
        wait_rewrites(&mut c, 1);
        text(&mut c, &["DEL", "l"]);
        write_data(&mut c, true);
        let expected = read_data(&mut c);
        s.kill9();
        check_aof(s_dir.path());
        let base =
            std::fs::read_to_string(s_dir.path().join("appendonlydir/appendonly.aof.manifest"))
                .unwrap();
        let ext = if preamble == "yes" { "rdb" } else { "aof" };
        assert!(
            base.starts_with(&format!("file appendonly.aof.2.base.{ext} seq 2 type b\n")),
            "{base}"
        );

        let r_dir = tempfile::tempdir().unwrap();
        copy_dir(
            &s_dir.path().join("appendonlydir"),
            &r_dir.path().join("appendonlydir"),
        );
        let r = Proc::redis(r_dir.path(), &["--appendonly", "yes", "--save", ""]);
        let mut rc = r.conn();
        assert_eq!(read_data(&mut rc), expected, "preamble {preamble}");
        assert_eq!(text(&mut rc, &["GET", "before"]), "$7\r\nrewrite\r\n");
    }
}

/// redis-server's folder, after a rewrite and more writes, loads into sluice; sluice goes
/// on appending to it, and redis-check-aof still accepts it.
#[test]
fn redis_aof_loads_into_sluice() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = Proc::redis(dir.path(), REDIS_AOF_ALWAYS);
    let mut rc = r.conn();
    text(&mut rc, &["SET", "before", "rewrite"]);
    assert!(text(&mut rc, &["BGREWRITEAOF"]).contains("rewriting started"));
    wait_rewrites(&mut rc, 1);
    write_data(&mut rc, false);
    let expected = read_data(&mut rc);
    r.kill9();

    let mut s = Proc::sluice(dir.path(), &["--appendonly", "yes"]);
    let mut c = s.conn();
    assert_eq!(read_data(&mut c), expected);
    assert_eq!(text(&mut c, &["GET", "before"]), "$7\r\nrewrite\r\n");
    text(&mut c, &["SET", "from", "sluice"]);
    s.kill9();
    check_aof(dir.path());
    let r = Proc::redis(dir.path(), &["--appendonly", "yes", "--save", ""]);
    assert_eq!(text(&mut r.conn(), &["GET", "from"]), "$6\r\nsluice\r\n");
}

/// With `appendfsync always`, every write a client saw acknowledged is there after
/// `kill -9` (and at most the one in flight more).
#[test]
fn kill_9_keeps_every_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut acked_total = 0u64;
    for round in 0..3 {
        let mut s = Proc::sluice(dir.path(), AOF_ALWAYS);
        let port = s.port;
        let writer = std::thread::spawn(move || {
            let mut acked = 0u64;
            let Ok(mut stream) = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port)))
            else {
                return acked;
            };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            use std::io::{Read, Write};
            let mut buf = [0u8; 64];
            for _ in 0..100_000 {
                if stream
                    .write_all(b"*2\r\n$4\r\nINCR\r\n$1\r\nc\r\n")
                    .is_err()
                {
                    break;
                }
                match stream.read(&mut buf) {
                    Ok(n) if n > 0 && buf[0] == b':' => acked += 1,
                    _ => break,
                }
            }
            acked
        });
        std::thread::sleep(Duration::from_millis(150 + 50 * round));
        s.kill9();
        let acked = writer.join().unwrap();
        assert!(acked > 0, "round {round}: nothing acknowledged");
        acked_total += acked;
        let s = Proc::sluice(dir.path(), AOF_ALWAYS);
        let got: u64 = text(&mut s.conn(), &["GET", "c"])
            .lines()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        assert!(
            got >= acked_total && got <= acked_total + 1,
            "round {round}: {got} in the file, {acked_total} acknowledged"
        );
        acked_total = got;
    }
}

/// A last file cut inside a command: loaded up to the last whole command and truncated
/// there with `aof-load-truncated yes`; the start refused with `no`; a corrupt file (not
/// the format) refused either way, as Redis refuses them.
#[test]
fn truncated_and_corrupt_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Proc::sluice(dir.path(), AOF_ALWAYS);
    text(&mut s.conn(), &["SET", "k", "v"]);
    s.kill9();
    let incr = dir.path().join("appendonlydir/appendonly.aof.1.incr.aof");
    let whole = std::fs::read(&incr).unwrap();
    let mut cut = whole.clone();
    cut.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$5\r\nab");
    std::fs::write(&incr, &cut).unwrap();

    let (code, out) = sluice_fails(
        dir.path(),
        &["--appendonly", "yes", "--aof-load-truncated", "no"],
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("Unexpected end of file reading the append only file"),
        "{out}"
    );

    let s = Proc::sluice(dir.path(), &["--appendonly", "yes"]);
    let mut c = s.conn();
    assert_eq!(text(&mut c, &["GET", "k"]), "$1\r\nv\r\n");
    assert_eq!(text(&mut c, &["EXISTS", "x"]), ":0\r\n");
    drop(s);
    assert_eq!(
        std::fs::read(&incr).unwrap(),
        whole,
        "truncated to the last whole command"
    );

    let mut bad = whole.clone();
    bad.extend_from_slice(b"garbage\r\n");
    std::fs::write(&incr, &bad).unwrap();
    let (code, out) = sluice_fails(dir.path(), &["--appendonly", "yes"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("Bad file format reading the append only file"),
        "{out}"
    );
    // redis-server refuses the same file.
    let r = Proc::try_start(
        "redis-server",
        dir.path(),
        &["--appendonly", "yes", "--save", ""],
    );
    assert!(r.is_err(), "redis-server loaded a corrupt AOF");
}

/// CONFIG SET appendonly yes at run time writes a base from what is in memory (without
/// stopping clients) and logs from then on; a restart with the AOF loads it all. INFO's
/// AOF fields have Redis's names, in its order.
#[test]
fn config_set_appendonly_at_run_time_and_info_fields() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Proc::sluice(dir.path(), &[]);
    let mut c = s.conn();
    text(&mut c, &["SET", "early", "1"]);
    assert_eq!(info_field(&mut c, "aof_enabled"), "0");
    assert_eq!(
        text(&mut c, &["CONFIG", "SET", "appendonly", "yes"]),
        "+OK\r\n"
    );
    wait_rewrites(&mut c, 1);
    assert_eq!(info_field(&mut c, "aof_enabled"), "1");
    text(&mut c, &["SET", "late", "2"]);
    assert_eq!(
        text(&mut c, &["CONFIG", "GET", "appendonly"]),
        "*2\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n"
    );
    let names = |c: &mut Conn| -> Vec<String> {
        text(c, &["INFO", "persistence"])
            .lines()
            .filter_map(|l| l.split_once(':').map(|(k, _)| k.to_string()))
            .filter(|k| k.starts_with("aof_") || k.starts_with("module_fork"))
            .collect()
    };
    let ours = names(&mut c);
    let rdir = tempfile::tempdir().unwrap();
    let r = Proc::redis(rdir.path(), &["--appendonly", "yes", "--save", ""]);
    assert_eq!(ours, names(&mut r.conn()));
    s.kill9();
    check_aof(dir.path());
    let mut s = Proc::sluice(dir.path(), &["--appendonly", "yes"]);
    let mut c = s.conn();
    assert_eq!(
        text(&mut c, &["MGET", "early", "late"]),
        "*2\r\n$1\r\n1\r\n$1\r\n2\r\n"
    );
    assert_eq!(
        text(&mut c, &["CONFIG", "SET", "appendonly", "no"]),
        "+OK\r\n"
    );
    assert_eq!(info_field(&mut c, "aof_enabled"), "0");
    text(&mut c, &["SET", "unlogged", "3"]);
    s.kill9();
    let s = Proc::sluice(dir.path(), &["--appendonly", "yes"]);
    assert_eq!(
        text(&mut s.conn(), &["EXISTS", "unlogged", "late"]),
        ":1\r\n"
    );
}

/// A replica with the AOF logs what it applies from its master: killed with `kill -9` and
/// started alone on its folder, it has the master's writes.
#[test]
fn a_replica_logs_its_masters_writes() {
    let master = crate::support::sluice();
    let mut m = Conn::connect(master.addr());
    text(&mut m, &["SET", "before", "sync"]);
    let dir = tempfile::tempdir().unwrap();
    let port = master.addr().port().to_string();
    let mut r = Proc::sluice(
        dir.path(),
        &[AOF_ALWAYS, &["--replicaof", "127.0.0.1", &port]].concat(),
    );
    let mut rc = r.conn();
    let deadline = Instant::now() + Duration::from_secs(10);
    while text(&mut rc, &["GET", "before"]) != "$4\r\nsync\r\n" {
        assert!(Instant::now() < deadline, "the replica did not sync");
        std::thread::sleep(Duration::from_millis(20));
    }
    text(&mut m, &["INCR", "n"]);
    text(&mut m, &["SELECT", "2"]);
    text(&mut m, &["RPUSH", "l", "a", "b"]);
    assert_eq!(text(&mut m, &["WAIT", "1", "5000"]), ":1\r\n");
    // The replica's rewrite after its full sync ran (its base holds `before`).
    wait_rewrites(&mut rc, 1);
    // Past the replica's flush (it writes what it applied before reading more).
    std::thread::sleep(Duration::from_millis(100));
    r.kill9();
    let s = Proc::sluice(dir.path(), &["--appendonly", "yes"]);
    let mut c = s.conn();
    assert_eq!(
        text(&mut c, &["MGET", "before", "n"]),
        "*2\r\n$4\r\nsync\r\n$1\r\n1\r\n"
    );
    text(&mut c, &["SELECT", "2"]);
    assert_eq!(
        text(&mut c, &["LRANGE", "l", "0", "-1"]),
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
}

/// The commands of the last incremental file in `dir`, each as its arguments.
fn logged_commands(dir: &Path) -> Vec<Vec<String>> {
    let folder = dir.join("appendonlydir");
    let mut incr: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".incr.aof"))
        .collect();
    incr.sort();
    let bytes = std::fs::read(folder.join(incr.last().expect("an incremental file"))).unwrap();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let mut lines = text.split("\r\n");
    let mut out = Vec::new();
    while let Some(head) = lines.next() {
        let Some(n) = head.strip_prefix('*') else {
            assert!(head.is_empty(), "not a command: {head:?}");
            continue;
        };
        let n: usize = n.parse().unwrap();
        let argv = (0..n)
            .map(|_| {
                lines.next().unwrap();
                lines.next().unwrap().to_string()
            })
            .collect();
        out.push(argv);
    }
    out
}

/// EXPIRE and its forms are logged as Redis 7.0 logs them, `PEXPIREAT key <deadline>` (DEL
/// when the time is already past), whatever the key holds: a sliding-window log's EXPIRE
/// after each ZADD is one short command, not the whole sorted set (sluice once logged the
/// key's state, a RESTORE of its payload). Both servers run the W1 transaction and the
/// expiries; the logged forms match, each with the deadline its server keeps.
#[test]
fn expire_is_logged_as_pexpireat_as_redis_does() {
    let s_dir = tempfile::tempdir().unwrap();
    let r_dir = tempfile::tempdir().unwrap();
    // `always`: both servers write (and sync) before they reply. With everysec Redis may
    // postpone the write while a background sync runs, and the file would lag the replies.
    let s = Proc::sluice(s_dir.path(), AOF_ALWAYS);
    let r = Proc::redis(r_dir.path(), REDIS_AOF_ALWAYS);
    let mut forms = Vec::new();
    for (p, dir) in [(&s, s_dir.path()), (&r, r_dir.path())] {
        let mut c = p.conn();
        for cmd in [
            &["MULTI"][..],
            &["ZADD", "w", "1000", "a"],
            &["ZADD", "w", "2000", "b"],
            &["EXPIRE", "w", "60"],
            &["EXEC"],
            &["SET", "s", "v"],
            &["PEXPIRE", "s", "90000"],
            &["EXPIREAT", "s", "4102444800"],
            &["RPUSH", "gone", "x"],
            &["PEXPIREAT", "gone", "1"],
            &["EXPIRE", "missing", "10"],
        ] {
            let reply = text(&mut c, cmd);
            assert!(!reply.starts_with('-'), "{cmd:?}: {reply}");
        }
        let deadline = |c: &mut Conn, k: &str| {
            text(c, &["PEXPIRETIME", k])
                .trim_start_matches(':')
                .trim()
                .to_string()
        };
        let (w, s) = (deadline(&mut c, "w"), deadline(&mut c, "s"));
        assert_eq!(s, "4102444800000");
        // The AOF is written before the replies go out: the file is read after the last.
        let logged: Vec<Vec<String>> = logged_commands(dir)
            .into_iter()
            .filter(|argv| argv[0] != "SELECT")
            .collect();
        assert!(logged.iter().all(|argv| argv[0] != "RESTORE"), "{logged:?}");
        let expiries: Vec<String> = logged
            .iter()
            .filter(|argv| argv[0].contains("EXPIRE") || argv[0] == "DEL")
            .map(|argv| argv.join(" "))
            .collect();
        assert_eq!(expiries.len(), 4, "{logged:?}");
        assert_eq!(expiries[0], format!("PEXPIREAT w {w}"));
        assert!(
            expiries[1]
                .strip_prefix("PEXPIREAT s ")
                .is_some_and(|t| t.parse::<u64>().is_ok()),
            "{expiries:?}"
        );
        assert_eq!(expiries[2], "PEXPIREAT s 4102444800000");
        assert_eq!(expiries[3], "DEL gone");
        forms.push(
            logged
                .iter()
                .map(|argv| argv[0].clone())
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(forms[0], forms[1], "sluice's log, then redis-server's");
}
