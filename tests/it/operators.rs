//! The binary as operators run it: Debian's stock redis.conf, command-line overrides, the
//! warnings and refusals for Redis directives, pidfile, logfile, Unix sockets, systemd's
//! readiness protocol, `-v`, and signals whatever happened to stdout/stderr.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::proc::SluiceProcess;
use crate::support::Conn;

/// A scratch directory removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "sluice-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    pub fn dir(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs sluice to completion (it must exit within `limit`): (status code, stdout, stderr).
fn run_to_exit(args: &[&str], limit: Duration) -> (Option<i32>, String, String) {
    let cwd = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .current_dir(cwd.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut out = String::new();
            let mut err = String::new();
            child
                .stdout
                .take()
                .unwrap()
                .read_to_string(&mut out)
                .unwrap();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status.code(), out, err);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sluice {args:?} did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Debian's stock redis.conf (installed by the redis-server package), copied into `scratch`.
fn stock_conf(scratch: &Scratch) -> (PathBuf, String) {
    let text = std::fs::read_to_string("/etc/redis/redis.conf").expect(
        "/etc/redis/redis.conf is missing: install Debian's redis-server package (apt-get install redis-server)",
    );
    let copy = scratch.path("redis.conf");
    std::fs::write(&copy, &text).unwrap();
    (copy, text)
}

/// The 1-based line of `text` whose directive is `name`.
fn line_of(text: &str, name: &str) -> usize {
    text.lines()
        .position(|l| l.split_whitespace().next() == Some(name))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("no '{name}' line"))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn debian_stock_conf_serves_with_command_line_overrides() {
    let scratch = Scratch::new("stock");
    let (conf, text) = stock_conf(&scratch);
    // As Debian's own unit starts redis-server, with the directory, log and pidfile moved
    // into the scratch directory and a free port.
    let mut server = SluiceProcess::start_exactly(
        &[
            s(&conf),
            "--port",
            "0",
            "--supervised",
            "systemd",
            "--daemonize",
            "no",
            "--dir",
            s(scratch.dir()),
            "--logfile",
            "sluice.log",
            "--pidfile",
            "sluice.pid",
        ],
        &[],
    );
    let mut c = Conn::connect(server.addr());
    assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
    assert_eq!(c.cmd(&[b"SET", b"k", b"v"]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&[b"CONFIG", b"GET", b"daemonize"]),
        b"*2\r\n$9\r\ndaemonize\r\n$2\r\nno\r\n"
    );
    assert_eq!(
        std::fs::read_to_string(scratch.path("sluice.pid")).unwrap(),
        format!("{}\n", server.pid())
    );
    server.signal(libc::SIGTERM);
    assert_eq!(
        server
            .wait_exit(Duration::from_secs(10))
            .and_then(|s| s.code()),
        Some(0)
    );
    assert!(
        !scratch.path("sluice.pid").exists(),
        "the pidfile is removed at exit"
    );
    // The log went to the logfile (relative to --dir), one warning per inert directive,
    // each naming it and its line.
    let log = std::fs::read_to_string(scratch.path("sluice.log")).unwrap();
    let conf_name = s(&conf);
    for name in [
        "tcp-backlog",
        "hz",
        "no-appendfsync-on-rewrite",
        "lazyfree-lazy-eviction",
        "rdbcompression",
    ] {
        let want = format!("{conf_name}:{}: '{name} ", line_of(&text, name));
        assert_eq!(
            log.lines().filter(|l| l.contains(&want)).count(),
            1,
            "expected one warning containing {want:?} in:\n{log}"
        );
    }
    let warnings = log
        .lines()
        .filter(|l| l.contains("accepted without effect"))
        .count();
    // (The AOF and min-replicas directives are acted on since the AOF came.)
    assert!(warnings > 30, "{warnings} warnings:\n{log}");
    assert!(log.contains("Ready to accept connections"), "{log}");
    assert!(!log.contains('\u{1b}'), "no colour codes in a logfile");
    // Implemented directives are not warned about.
    for name in [
        "port",
        "bind",
        "databases",
        "loglevel",
        "protected-mode",
        "timeout",
        "slowlog-max-len",
        "latency-monitor-threshold",
    ] {
        let want = format!("{conf_name}:{}: '{name} ", line_of(&text, name));
        assert!(
            !log.contains(&want),
            "{name} is implemented, not warned about:\n{log}"
        );
    }
}

#[test]
fn debian_stock_conf_alone_is_refused_for_daemonize_yes() {
    let scratch = Scratch::new("stockdaemon");
    let (conf, text) = stock_conf(&scratch);
    let (code, _, err) = run_to_exit(&[s(&conf), "--port", "0"], Duration::from_secs(10));
    assert_eq!(code, Some(1), "{err}");
    let want = format!(
        "{}:{}: 'daemonize yes': sluice does not fork",
        s(&conf),
        line_of(&text, "daemonize")
    );
    assert!(err.contains(&want), "{err}");
}

#[test]
fn every_problem_is_reported_in_one_run() {
    let scratch = Scratch::new("problems");
    let conf = scratch.path("bad.conf");
    std::fs::write(
        &conf,
        "# a comment\nport 7000\nhz 10\nreplicaof 127.0.0.1 notaport\nrename-command CONFIG \"\"\nmaxclients lots\nnot-a-directive 1\nsyslog-enabled yes\n",
    )
    .unwrap();
    let (code, _, err) = run_to_exit(
        &[s(&conf), "--loadmodule", "/x.so"],
        Duration::from_secs(10),
    );
    assert_eq!(code, Some(1), "{err}");
    let c = s(&conf);
    for want in [
        "6 configuration problems".to_string(),
        format!("{c}:4: 'replicaof 127.0.0.1 notaport': bad value for 'replicaof'"),
        format!("{c}:5: 'rename-command CONFIG \"\"': sluice cannot rename"),
        format!("{c}:6: 'maxclients lots': bad value for 'maxclients'"),
        format!("{c}:7: 'not-a-directive 1': unknown directive"),
        format!("{c}:8: 'syslog-enabled yes': sluice logs to standard error or logfile"),
        "command line: 'loadmodule /x.so': sluice cannot load Redis modules".to_string(),
    ] {
        assert!(err.contains(&want), "missing {want:?} in:\n{err}");
    }
}

#[test]
fn command_line_overrides_the_file() {
    let scratch = Scratch::new("override");
    let conf = scratch.path("my.conf");
    std::fs::write(&conf, "port 1\nmaxclients 5\ndaemonize yes\ntimeout 9\n").unwrap();
    let server = SluiceProcess::start_exactly(
        &[
            s(&conf),
            "--port",
            "0",
            "--maxclients",
            "7",
            "--daemonize",
            "no",
        ],
        &[],
    );
    let mut c = Conn::connect(server.addr());
    assert_eq!(
        c.cmd(&[b"CONFIG", b"GET", b"maxclients"]),
        b"*2\r\n$10\r\nmaxclients\r\n$1\r\n7\r\n"
    );
    assert_eq!(
        c.cmd(&[b"CONFIG", b"GET", b"timeout"]),
        b"*2\r\n$7\r\ntimeout\r\n$1\r\n9\r\n"
    );
}

#[test]
fn version_and_help() {
    for flag in ["-v", "--version"] {
        let (code, out, _) = run_to_exit(&[flag], Duration::from_secs(10));
        assert_eq!(code, Some(0));
        assert!(
            out.starts_with(&format!(
                "sluice v={} redis_version=7.0.15",
                env!("CARGO_PKG_VERSION")
            )),
            "{out}"
        );
    }
    let (code, out, _) = run_to_exit(&["--help"], Duration::from_secs(10));
    assert_eq!(code, Some(0));
    assert!(out.contains("--unixsocket PATH"), "{out}");
}

#[test]
fn unix_socket_serves_clients_and_goes_away_at_exit() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new("unix");
    let sock = scratch.path("sluice.sock");
    let mut server = SluiceProcess::start(&["--unixsocket", s(&sock), "--unixsocketperm", "770"]);
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o770);
    let mut stream = UnixStream::connect(&sock).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
        .write_all(b"*1\r\n$4\r\nPING\r\n*2\r\n$6\r\nCLIENT\r\n$4\r\nLIST\r\n")
        .unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert_eq!(line, "+PONG\r\n");
    line.clear();
    reader.read_line(&mut line).unwrap(); // bulk header
    line.clear();
    reader.read_line(&mut line).unwrap();
    assert!(
        line.contains(&format!("addr={}:0 laddr={}:0", s(&sock), s(&sock))),
        "{line}"
    );
    // redis-cli -s, as operators use it.
    let out = Command::new("redis-cli")
        .args(["-s", s(&sock), "ping"])
        .output()
        .expect("redis-cli is needed (apt-get install redis-tools)");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "PONG\n");
    server.signal(libc::SIGTERM);
    assert_eq!(
        server
            .wait_exit(Duration::from_secs(10))
            .and_then(|s| s.code()),
        Some(0)
    );
    assert!(!sock.exists(), "the socket file is removed at exit");
}

#[test]
fn a_stale_socket_file_is_replaced_but_a_regular_file_is_not() {
    let scratch = Scratch::new("stale");
    let sock = scratch.path("s.sock");
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    assert!(sock.exists());
    let server = SluiceProcess::start(&["--unixsocket", s(&sock)]);
    assert!(UnixStream::connect(&sock).is_ok());
    drop(server);
    let plain = scratch.path("plain");
    std::fs::write(&plain, "keep me").unwrap();
    let (code, _, err) = run_to_exit(
        &["--port", "0", "--unixsocket", s(&plain)],
        Duration::from_secs(10),
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("could not listen on unix socket"), "{err}");
    assert_eq!(std::fs::read_to_string(&plain).unwrap(), "keep me");
}

#[test]
fn supervised_systemd_notifies_ready_and_stopping() {
    let scratch = Scratch::new("notify");
    let path = scratch.path("notify.sock");
    let notify = UnixDatagram::bind(&path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut server = SluiceProcess::start_exactly(
        &["--port", "0", "--supervised", "systemd"],
        &[("NOTIFY_SOCKET", s(&path))],
    );
    let mut buf = [0u8; 256];
    let n = notify.recv(&mut buf).expect("READY=1 within 10 s");
    let ready = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");
    // Ready means serving.
    assert_eq!(Conn::connect(server.addr()).cmd(&[b"PING"]), b"+PONG\r\n");
    server.signal(libc::SIGTERM);
    let n = notify.recv(&mut buf).expect("STOPPING=1 within 10 s");
    assert!(
        String::from_utf8_lossy(&buf[..n])
            .lines()
            .any(|l| l == "STOPPING=1")
    );
    assert_eq!(
        server
            .wait_exit(Duration::from_secs(10))
            .and_then(|s| s.code()),
        Some(0)
    );
}

#[test]
fn supervised_auto_without_notify_socket_just_serves() {
    let server = SluiceProcess::start_exactly(&["--port", "0", "--supervised", "auto"], &[]);
    assert_eq!(Conn::connect(server.addr()).cmd(&[b"PING"]), b"+PONG\r\n");
}

/// Spawns sluice with stdout and stderr on pipes, reads the address, then closes both read
/// ends (as when the process that started it has gone) and checks SIGTERM/SIGINT still stop
/// it with status 0, promptly.
fn stops_with_closed_pipes(sig: i32) {
    let cwd = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["--port", "0", "--loglevel", "debug"])
        .current_dir(cwd.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr: std::net::SocketAddr = first
        .trim()
        .strip_prefix("sluice listening on ")
        .unwrap()
        .parse()
        .unwrap();
    // The readers go away: every later write to stdout/stderr fails with EPIPE.
    drop(child.stderr.take());
    // Log lines (debug level) while the pipes are closed.
    for _ in 0..3 {
        let mut c = Conn::connect(addr);
        assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
    }
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sluice ignored signal {sig} once its stderr reader had gone");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(0));
}

#[test]
fn sigterm_with_closed_stderr_exits_zero() {
    stops_with_closed_pipes(libc::SIGTERM);
}

#[test]
fn sigint_with_closed_stderr_exits_zero() {
    stops_with_closed_pipes(libc::SIGINT);
}

#[test]
fn no_colour_codes_when_stderr_is_not_a_terminal() {
    let server =
        SluiceProcess::start_exactly(&["--port", "0", "--loglevel", "verbose", "--hz", "10"], &[]);
    let mut c = Conn::connect(server.addr());
    assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !server.log().contains("accepted without effect") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let log = server.log();
    assert!(
        log.contains("command line: 'hz 10' accepted without effect"),
        "{log}"
    );
    assert!(!log.contains('\u{1b}'), "colour codes on a pipe: {log:?}");
}

#[test]
fn systemd_unit_command_line_starts_and_notifies() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let unit = std::fs::read_to_string(root.join("deploy/sluice.service")).unwrap();
    let field = |key: &str| {
        unit.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("deploy/sluice.service has no {key}="))
            .to_string()
    };
    assert_eq!(field("Type"), "notify");
    assert_ne!(field("User"), "root");
    let exec = field("ExecStart");
    let argv: Vec<&str> = exec.split_whitespace().collect();
    assert_eq!(argv[0], "/usr/local/bin/sluice");
    assert_eq!(argv[1], "/etc/sluice/sluice.conf");
    // deploy/sluice.conf, with its /run/sluice paths (systemd's RuntimeDirectory) and its dir
    // (StateDirectory) moved into a scratch directory, and a free port.
    let scratch = Scratch::new("unit");
    let conf = std::fs::read_to_string(root.join("deploy/sluice.conf"))
        .unwrap()
        .replace("/run/sluice", s(scratch.dir()))
        .replace("/var/lib/sluice", s(scratch.dir()))
        .replace("port 6379", "port 0");
    let conf_path = scratch.path("sluice.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let notify_path = scratch.path("notify");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut args = vec![s(&conf_path)];
    args.extend_from_slice(&argv[2..]);
    let mut server = SluiceProcess::start_exactly(&args, &[("NOTIFY_SOCKET", s(&notify_path))]);
    let mut buf = [0u8; 256];
    let n = notify.recv(&mut buf).expect("READY=1 within 10 s");
    assert!(
        String::from_utf8_lossy(&buf[..n])
            .lines()
            .any(|l| l == "READY=1")
    );
    assert_eq!(Conn::connect(server.addr()).cmd(&[b"PING"]), b"+PONG\r\n");
    let mut unix = UnixStream::connect(scratch.path("sluice.sock")).unwrap();
    unix.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    unix.write_all(b"PING\r\n").unwrap();
    let mut reply = [0u8; 7];
    unix.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"+PONG\r\n");
    assert_eq!(
        std::fs::read_to_string(scratch.path("sluice.pid"))
            .unwrap()
            .trim(),
        server.pid().to_string()
    );
    // The shipped conf starts without warnings: everything in it is acted on.
    assert!(
        !server.log().contains("accepted without effect"),
        "{}",
        server.log()
    );
    server.signal(libc::SIGTERM);
    let n = notify.recv(&mut buf).expect("STOPPING=1");
    assert!(String::from_utf8_lossy(&buf[..n]).contains("STOPPING=1"));
    assert_eq!(
        server
            .wait_exit(Duration::from_secs(10))
            .and_then(|s| s.code()),
        Some(0)
    );
}

#[test]
fn an_optional_bind_address_the_machine_lacks_is_skipped() {
    // 192.0.2.1 (TEST-NET-1) is on no interface here.
    let server = SluiceProcess::start(&["--bind", "127.0.0.1", "-192.0.2.1"]);
    assert_eq!(Conn::connect(server.addr()).cmd(&[b"PING"]), b"+PONG\r\n");
    let (code, _, err) = run_to_exit(
        &["--port", "0", "--bind", "127.0.0.1", "192.0.2.1"],
        Duration::from_secs(10),
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("192.0.2.1"), "{err}");
    let (code, _, err) = run_to_exit(
        &["--port", "0", "--bind", "-192.0.2.1"],
        Duration::from_secs(10),
    );
    assert_eq!(code, Some(1), "{err}");
}
