//! The slow log `engine::call` feeds (SLOWLOG's commands are in `commands::slowlog`).
//!
//! Every command that ran for at least `slowlog-log-slower-than` microseconds (0: every
//! command, -1: none) is kept, newest first, up to `slowlog-max-len` entries, as Redis 7.0
//! keeps them: id, Unix time, duration, the arguments as the client sent them (secrets
//! redacted as MONITOR shows them; at most 32 arguments, each at most 128 bytes, with
//! Redis's `... (N more arguments)` / `... (N more bytes)` notes), the client's address and
//! name. Commands a script calls show as Redis's script client (`?:0`, no name).
//!
//! The log is behind one mutex, taken only by commands slow enough to be kept (and SLOWLOG
//! itself): the threshold is read from an atomic first.

use std::collections::VecDeque;
use std::sync::Mutex;

use bytes::Bytes;

use crate::client::ClientState;
use crate::config::LiveSettings;

/// The most arguments an entry keeps (the last kept one notes how many were left out).
const MAX_ARGC: usize = 32;
/// The most bytes an argument keeps.
const MAX_STRING: usize = 128;

/// One kept command.
#[derive(Debug, Clone)]
pub(crate) struct SlowEntry {
    pub(crate) id: u64,
    pub(crate) time: u64,
    pub(crate) usec: u64,
    pub(crate) args: Vec<Bytes>,
    pub(crate) addr: String,
    pub(crate) name: Bytes,
}

#[derive(Debug, Default)]
struct Log {
    entries: VecDeque<SlowEntry>,
    next_id: u64,
}

/// The slow log.
#[derive(Debug, Default)]
pub struct SlowLog {
    log: Mutex<Log>,
}

impl SlowLog {
    /// True if a command that ran `usec` µs is to be kept (`slowlog-log-slower-than`).
    #[inline]
    pub fn is_slow(&self, live: &LiveSettings, usec: u64) -> bool {
        let (slower_than, _) = live.slowlog();
        slower_than >= 0 && usec >= slower_than as u64
    }

    /// Keeps a command that ran `usec` µs (the caller checked [`is_slow`](Self::is_slow)).
    /// `args` are already redacted; `time` is Unix seconds.
    pub fn push(
        &self,
        live: &LiveSettings,
        time: u64,
        usec: u64,
        args: &[&[u8]],
        client: &ClientState,
        from_script: bool,
    ) {
        let (_, max_len) = live.slowlog();
        let (addr, name) = if from_script {
            ("?:0".to_string(), Bytes::new())
        } else {
            (
                client.info.addr.clone(),
                client.info.name().unwrap_or_default(),
            )
        };
        let Ok(mut log) = self.log.lock() else {
            return;
        };
        let id = log.next_id;
        log.next_id += 1;
        log.entries.push_front(SlowEntry {
            id,
            time,
            usec,
            args: trimmed(args),
            addr,
            name,
        });
        let max_len = usize::try_from(max_len).unwrap_or(usize::MAX);
        log.entries.truncate(max_len);
    }

    /// Empties the log and numbers the next entry 0, as in a new server (`TESTMODE RESET`;
    /// SLOWLOG RESET keeps the numbering, as Redis's does).
    pub fn clear(&self) {
        if let Ok(mut log) = self.log.lock() {
            *log = Log::default();
        }
    }

    /// How many entries are kept.
    pub(crate) fn len(&self) -> usize {
        self.log.lock().map(|l| l.entries.len()).unwrap_or(0)
    }

    /// Forgets every entry.
    pub(crate) fn reset(&self) {
        if let Ok(mut log) = self.log.lock() {
            log.entries.clear();
        }
    }

    /// The newest `count` entries, newest first.
    pub(crate) fn newest(&self, count: usize) -> Vec<SlowEntry> {
        self.log
            .lock()
            .map(|l| l.entries.iter().take(count).cloned().collect())
            .unwrap_or_default()
    }
}

/// The arguments as an entry keeps them.
fn trimmed(args: &[&[u8]]) -> Vec<Bytes> {
    let kept = if args.len() > MAX_ARGC {
        MAX_ARGC - 1
    } else {
        args.len()
    };
    let mut out: Vec<Bytes> = args[..kept]
        .iter()
        .map(|a| {
            if a.len() > MAX_STRING {
                let mut b = a[..MAX_STRING].to_vec();
                b.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - MAX_STRING).as_bytes(),
                );
                Bytes::from(b)
            } else {
                // Copied: the request's buffer must not stay alive with the entry.
                Bytes::copy_from_slice(a)
            }
        })
        .collect();
    if kept < args.len() {
        out.push(Bytes::from(format!(
            "... ({} more arguments)",
            args.len() - kept
        )));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_commands_are_trimmed_as_redis_does() {
        let args: Vec<Bytes> = (0..42).map(|i| Bytes::from(i.to_string())).collect();
        let t = trimmed(&crate::protocol::request::borrowed_args(&args));
        assert_eq!(t.len(), 32);
        assert_eq!(&t[31][..], b"... (11 more arguments)");
        assert_eq!(&t[30][..], b"30");
        let t = trimmed(&[&[b'x'; 200][..]]);
        assert_eq!(t[0].len(), 128 + "... (72 more bytes)".len());
        assert!(t[0].ends_with(b"... (72 more bytes)"));
        let exact: Vec<Bytes> = (0..32).map(|i| Bytes::from(i.to_string())).collect();
        assert_eq!(
            trimmed(&crate::protocol::request::borrowed_args(&exact)).len(),
            32
        );
    }
}
