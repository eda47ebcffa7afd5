//! The MONITOR feed (the command is `commands::server`'s): every command any client runs,
//! streamed to the clients that asked, in Redis's line format (`+<unix>.<micros> [<db>
//! <addr>] "arg" …`), so `redis-cli --monitor` works.
//!
//! Publishing costs one atomic load per command while nobody monitors. Secrets never reach
//! the feed: AUTH, HELLO … AUTH and CONFIG SET of a password show `(redacted)` as in Redis
//! ([`redact`]; the test-mode command log uses it too).
//!
//! Each monitor has its own queue, counted in bytes. A monitor that stops reading is closed
//! once its queue passes the hard `client-output-buffer-limit normal` (or [`MONITOR_CAP`]
//! when no hard limit is set, where Redis would let it grow without end), or stays above the
//! soft limit for the soft time: it cannot push the server's memory up for everyone else.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::Notify;

/// The most a monitor may have queued when `client-output-buffer-limit normal` sets no hard
/// limit (Redis's default `0 0 0` sets none).
pub(crate) const MONITOR_CAP: usize = 64 * 1024 * 1024;

/// One monitoring connection's queue of lines not yet written.
#[derive(Debug, Default)]
pub struct MonitorQueue {
    lines: Mutex<VecDeque<Bytes>>,
    /// Bytes queued plus bytes taken but not yet written.
    bytes: AtomicUsize,
    /// Set when the queue passed the cap: the connection is closed and nothing more queued.
    overflowed: AtomicBool,
    /// Woken when a line is queued or the queue overflows.
    pub ready: Notify,
}

impl MonitorQueue {
    /// Takes every queued line; the caller calls `written` with their size once sent.
    pub fn take(&self) -> Vec<Bytes> {
        self.lines
            .lock()
            .map(|mut l| l.drain(..).collect())
            .unwrap_or_default()
    }

    /// Accounts for lines written to the socket.
    pub fn written(&self, n: usize) {
        self.bytes.fetch_sub(n, Ordering::AcqRel);
    }

    /// Bytes queued and unwritten.
    pub fn pending(&self) -> usize {
        self.bytes.load(Ordering::Acquire)
    }

    /// True once the queue went over the cap.
    pub fn overflowed(&self) -> bool {
        self.overflowed.load(Ordering::Acquire)
    }

    fn push(&self, line: Bytes, cap: usize) {
        if self.overflowed() {
            return;
        }
        let total = self.bytes.fetch_add(line.len(), Ordering::AcqRel) + line.len();
        if total > cap {
            self.overflowed.store(true, Ordering::Release);
            if let Ok(mut l) = self.lines.lock() {
                // Free the backlog now rather than when the connection task gets to it.
                let dropped: usize = l.drain(..).map(|b| b.len()).sum();
                self.bytes.fetch_sub(dropped, Ordering::AcqRel);
            }
            self.bytes.fetch_sub(line.len(), Ordering::AcqRel);
        } else if let Ok(mut l) = self.lines.lock() {
            l.push_back(line);
        }
        self.ready.notify_one();
    }
}

/// The monitor feed.
#[derive(Debug, Default)]
pub struct Monitors {
    active: AtomicUsize,
    queues: Mutex<Vec<Arc<MonitorQueue>>>,
}

/// A connection's place in the feed; leaving it (dropping it, however the connection ends)
/// unsubscribes.
#[derive(Debug)]
pub struct MonitorSlot<'a> {
    monitors: &'a Monitors,
    /// This monitor's queue.
    pub queue: Arc<MonitorQueue>,
}

impl Drop for MonitorSlot<'_> {
    fn drop(&mut self) {
        if let Ok(mut q) = self.monitors.queues.lock() {
            q.retain(|x| !Arc::ptr_eq(x, &self.queue));
        }
        self.monitors.active.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Monitors {
    /// True while at least one client monitors.
    #[inline]
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed) > 0
    }

    /// How many clients monitor.
    pub fn count(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// Closes every monitoring connection (`TESTMODE RESET`): each queue is marked as over
    /// its limit, which its connection treats as the end.
    pub fn close_all(&self) {
        if let Ok(queues) = self.queues.lock() {
            for q in queues.iter() {
                q.overflowed.store(true, Ordering::Release);
                q.ready.notify_one();
            }
        }
    }

    /// Subscribes a monitoring connection until the slot is dropped.
    pub fn join(&self) -> MonitorSlot<'_> {
        let queue = Arc::new(MonitorQueue::default());
        if let Ok(mut q) = self.queues.lock() {
            q.push(queue.clone());
        }
        self.active.fetch_add(1, Ordering::Relaxed);
        MonitorSlot {
            monitors: self,
            queue,
        }
    }

    /// Sends one command (its arguments already redacted), run in database `db` by the
    /// client at `addr` (`lua` for a script's calls), to every monitor; `cap` is the most
    /// a monitor may have queued.
    pub fn publish(&self, now_us: u64, db: usize, addr: &str, args: &[&[u8]], cap: usize) {
        let mut line = format!(
            "+{}.{:06} [{} {}]",
            now_us / 1_000_000,
            now_us % 1_000_000,
            db,
            addr
        );
        for a in args {
            line.push(' ');
            repr(a, &mut line);
        }
        line.push_str("\r\n");
        let line = Bytes::from(line);
        if let Ok(queues) = self.queues.lock() {
            for q in queues.iter() {
                q.push(line.clone(), cap);
            }
        }
    }
}

const REDACTED: &[u8] = b"(redacted)";

/// Which arguments of a command MONITOR, SLOWLOG and the command log hide, declared with
/// its table row (Redis 7.0's redactions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Redaction {
    /// Shown as sent.
    #[default]
    None,
    /// Every argument (AUTH).
    AllArguments,
    /// HELLO's `AUTH <user> <pass>`.
    HelloAuth,
    /// The value of a password parameter (`requirepass`, `masterauth`) in CONFIG SET.
    ConfigSecrets,
    /// Every argument after the subcommand (ACL SETUSER: the user and its rules).
    AfterSubcommand,
}

/// The arguments as MONITOR and the command log may show them: Redis 7.0 replaces AUTH's
/// arguments, HELLO's `AUTH <user> <pass>` and the value of a password in CONFIG SET
/// (`requirepass`, `masterauth`) with `(redacted)`, as the command's row declares.
pub(crate) fn redact<'a>(redaction: Redaction, args: &'a [&'a [u8]]) -> Cow<'a, [&'a [u8]]> {
    let mut hide: Vec<usize> = Vec::new();
    match redaction {
        Redaction::None => {}
        Redaction::AllArguments => hide.extend(1..args.len()),
        Redaction::AfterSubcommand => hide.extend(2..args.len()),
        Redaction::HelloAuth => {
            // Redis's option loop: AUTH takes two arguments, SETNAME one; anything else ends it.
            let mut j = 2;
            while j < args.len() {
                let more = args.len() - 1 - j;
                if args[j].eq_ignore_ascii_case(b"auth") && more >= 2 {
                    hide.extend([j + 1, j + 2]);
                    j += 3;
                } else if args[j].eq_ignore_ascii_case(b"setname") && more >= 1 {
                    j += 2;
                } else {
                    break;
                }
            }
        }
        Redaction::ConfigSecrets => {
            for (i, pair) in args.get(2..).unwrap_or(&[]).chunks(2).enumerate() {
                let secret = pair[0].eq_ignore_ascii_case(b"requirepass")
                    || pair[0].eq_ignore_ascii_case(b"masterauth");
                if secret && pair.len() == 2 {
                    hide.push(3 + 2 * i);
                }
            }
        }
    }
    if hide.is_empty() {
        return Cow::Borrowed(args);
    }
    let mut out = args.to_vec();
    for i in hide {
        out[i] = REDACTED;
    }
    Cow::Owned(out)
}

/// Quotes bytes as Redis's `sdscatrepr` does.
pub(crate) fn repr(b: &[u8], out: &mut String) {
    out.push('"');
    for &c in b {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            7 => out.push_str("\\a"),
            8 => out.push_str("\\b"),
            c if c.is_ascii_graphic() || c == b' ' => out.push(c as char),
            c => out.push_str(&format!("\\x{c:02x}")),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::Redaction;

    #[test]
    fn secrets_are_redacted_as_redis_does() {
        let v = |xs: &[&str]| -> Vec<bytes::Bytes> {
            xs.iter()
                .map(|x| bytes::Bytes::copy_from_slice(x.as_bytes()))
                .collect()
        };
        assert_eq!(
            &*crate::services::monitor::redact(
                Redaction::AllArguments,
                &crate::protocol::request::borrowed_args(&v(&["AUTH", "user", "pw"]))
            ),
            &v(&["AUTH", "(redacted)", "(redacted)"])[..]
        );
        assert_eq!(
            &*crate::services::monitor::redact(
                Redaction::HelloAuth,
                &crate::protocol::request::borrowed_args(&v(&[
                    "hello", "3", "setname", "x", "AUTH", "u", "p"
                ]))
            ),
            &v(&[
                "hello",
                "3",
                "setname",
                "x",
                "AUTH",
                "(redacted)",
                "(redacted)"
            ])[..]
        );
        assert_eq!(
            &*crate::services::monitor::redact(
                Redaction::HelloAuth,
                &crate::protocol::request::borrowed_args(&v(&["hello", "3", "auth", "u"]))
            ),
            &v(&["hello", "3", "auth", "u"])[..]
        );
        assert_eq!(
            &*crate::services::monitor::redact(
                Redaction::ConfigSecrets,
                &crate::protocol::request::borrowed_args(&v(&[
                    "config",
                    "set",
                    "timeout",
                    "1",
                    "REQUIREPASS",
                    "s"
                ]))
            ),
            &v(&["config", "set", "timeout", "1", "REQUIREPASS", "(redacted)"])[..]
        );
        assert_eq!(
            &*crate::services::monitor::redact(
                Redaction::None,
                &crate::protocol::request::borrowed_args(&v(&["set", "a", "b"]))
            ),
            &v(&["set", "a", "b"])[..]
        );
    }

    #[test]
    fn a_monitor_queue_stops_at_its_cap_and_frees_its_backlog() {
        let q = crate::services::monitor::MonitorQueue::default();
        for _ in 0..10 {
            q.push(bytes::Bytes::from_static(&[b'x'; 100]), 550);
        }
        assert!(q.overflowed());
        assert_eq!(q.pending(), 0);
        assert!(q.take().is_empty());
    }

    #[test]
    fn repr_matches_redis() {
        let mut s = String::new();
        crate::services::monitor::repr(b"a \"b\"\r\n\x00\xff", &mut s);
        assert_eq!(s, r#""a \"b\"\r\n\x00\xff""#);
    }
}
