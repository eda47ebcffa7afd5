//! The built `sluice` binary as a child process, for the tests that need a process of its own:
//! signals and exit codes, and memory numbers (the heap counter is per process, so an
//! in-process server would share it with every other test running at the same time).

#![allow(dead_code)] // Not every test module uses every helper.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running `sluice` child, killed when dropped.
pub struct SluiceProcess {
    child: Child,
    addr: SocketAddr,
    tls_addr: Option<SocketAddr>,
    stderr: Arc<Mutex<String>>,
    /// Its working directory, of its own: a `dump.rdb` in the suite's does not reach it.
    _cwd: Option<tempfile::TempDir>,
}

impl SluiceProcess {
    /// Starts `target/debug/sluice --port 0 <args>` and waits for its "listening" line.
    pub fn start(args: &[&str]) -> SluiceProcess {
        let mut all = vec!["--port", "0", "--loglevel", "warning"];
        all.extend_from_slice(args);
        Self::start_exactly(&all, &[])
    }

    /// Starts `target/debug/sluice <args>` (nothing added) with extra environment variables,
    /// and waits for its "listening" line.
    pub fn start_exactly(args: &[&str], env: &[(&str, &str)]) -> SluiceProcess {
        let cwd = tempfile::tempdir().expect("a temporary working directory");
        let mut p = Self::spawn_in(cwd.path(), args, env);
        p._cwd = Some(cwd);
        p
    }

    /// `target/debug/sluice <args>` (nothing added) working in `dir`, which the caller keeps
    /// (a restarted node finds its files there again).
    pub fn start_in(dir: &std::path::Path, args: &[&str]) -> SluiceProcess {
        Self::spawn_in(dir, args, &[])
    }

    fn spawn_in(dir: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> SluiceProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(args)
            .current_dir(dir)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot run the sluice binary");
        // The log is kept (tests look for panics in it) and passed on to the test's output.
        let stderr = Arc::new(Mutex::new(String::new()));
        let err_pipe = child.stderr.take().expect("piped stderr");
        let log = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(err_pipe).lines().map_while(Result::ok) {
                eprintln!("[sluice] {line}");
                if let Ok(mut log) = log.lock() {
                    log.push_str(&line);
                    log.push('\n');
                }
            }
        });
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut addr = None;
        let mut tls_addr = None;
        let want_tls = args.contains(&"--tls-port");
        // The binary prints its addresses right after binding.
        while let Some(Ok(line)) = lines.next() {
            if let Some(a) = line.strip_prefix("sluice listening for TLS on ") {
                tls_addr = a.trim().parse().ok();
            } else if let Some(a) = line.strip_prefix("sluice listening on ") {
                addr = a.trim().parse().ok();
            }
            if addr.is_some() && (!want_tls || tls_addr.is_some()) {
                break;
            }
        }
        // Keep draining stdout so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let Some(addr) = addr else {
            let _ = child.kill();
            panic!(
                "sluice {args:?} did not report its address (exit: {:?})",
                child.wait()
            );
        };
        SluiceProcess {
            child,
            addr,
            tls_addr,
            stderr,
            _cwd: None,
        }
    }

    /// The plain TCP address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The TLS address, if `--tls-port` was given.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
    }

    /// What the process logged so far.
    pub fn log(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal to the process.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
        assert_eq!(rc, 0, "kill({sig}) failed");
    }

    /// Waits up to `limit` for the process to exit; None if it is still running.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for SluiceProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One `field:value` line of an INFO reply, parsed.
pub fn info_field(info: &[u8], field: &str) -> Option<i64> {
    let text = String::from_utf8_lossy(info);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
}
