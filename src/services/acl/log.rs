//! ACL LOG: the refused commands, keys, channels and failed AUTHs, newest first, at most
//! `acllog-max-len` entries. As in Redis 7.0, an event like one of the 10 newest entries
//! (same reason, context, object and user, within 60 s) bumps that entry's count and moves
//! it to the front instead of adding one, so a client retrying in a loop costs one entry.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;

/// Entries within this many ms of each other may be grouped.
const GROUPING_MAX_MS: u64 = 60_000;
/// How many of the newest entries a new event is compared with.
const GROUPING_SCAN: usize = 10;

/// What was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A command.
    Command,
    /// A key.
    Key,
    /// A channel.
    Channel,
    /// AUTH / HELLO AUTH with bad credentials.
    Auth,
}

impl Reason {
    /// ACL LOG's `reason`.
    pub fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

/// Where it was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// A command sent by the client.
    Toplevel,
    /// Inside MULTI, or when EXEC ran the queue.
    Multi,
    /// A script's `redis.call`.
    Lua,
}

impl Context {
    /// ACL LOG's `context`.
    pub fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// One entry.
#[derive(Debug, Clone)]
pub struct AclLogEntry {
    /// How many times it happened.
    pub count: u64,
    /// What was refused.
    pub reason: Reason,
    /// Where.
    pub context: Context,
    /// The command's full name, the key, the channel, or AUTH's command name.
    pub object: Bytes,
    /// The user.
    pub username: Bytes,
    /// When it last happened (ms).
    pub ctime_ms: u64,
    /// The client's CLIENT INFO line, from the last time.
    pub client_info: String,
}

/// The log.
#[derive(Debug)]
pub struct AclLog {
    entries: Mutex<VecDeque<AclLogEntry>>,
    max_len: AtomicUsize,
}

impl Default for AclLog {
    fn default() -> Self {
        AclLog {
            entries: Mutex::new(VecDeque::new()),
            max_len: AtomicUsize::new(128),
        }
    }
}

impl AclLog {
    /// `acllog-max-len`: also trims the log at once.
    pub fn set_max_len(&self, n: usize) {
        self.max_len.store(n, Ordering::Relaxed);
        if let Ok(mut e) = self.entries.lock() {
            e.truncate(n);
        }
    }

    /// Records an event (Redis's `addACLLogEntry`).
    pub fn add(&self, entry: AclLogEntry) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        let found = entries.iter().take(GROUPING_SCAN).position(|e| {
            e.reason == entry.reason
                && e.context == entry.context
                && e.ctime_ms.abs_diff(entry.ctime_ms) <= GROUPING_MAX_MS
                && e.object == entry.object
                && e.username == entry.username
        });
        match found.and_then(|i| entries.remove(i)) {
            Some(mut e) => {
                e.count += 1;
                e.ctime_ms = entry.ctime_ms;
                e.client_info = entry.client_info;
                entries.push_front(e);
            }
            None => {
                entries.push_front(entry);
                entries.truncate(self.max_len.load(Ordering::Relaxed));
            }
        }
    }

    /// The newest `count` entries.
    pub fn newest(&self, count: usize) -> Vec<AclLogEntry> {
        self.entries
            .lock()
            .map(|e| e.iter().take(count).cloned().collect())
            .unwrap_or_default()
    }

    /// ACL LOG RESET.
    pub fn reset(&self) {
        if let Ok(mut e) = self.entries.lock() {
            e.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(object: &'static str, at: u64) -> AclLogEntry {
        AclLogEntry {
            count: 1,
            reason: Reason::Command,
            context: Context::Toplevel,
            object: Bytes::from_static(object.as_bytes()),
            username: Bytes::from_static(b"u"),
            ctime_ms: at,
            client_info: String::new(),
        }
    }

    #[test]
    fn like_events_group_and_the_log_is_bounded() {
        let log = AclLog::default();
        log.set_max_len(3);
        log.add(entry("get", 0));
        log.add(entry("set", 0));
        log.add(entry("get", 1000));
        let e = log.newest(10);
        assert_eq!(e.len(), 2);
        assert_eq!((&e[0].object[..], e[0].count), (&b"get"[..], 2));
        log.add(entry("get", 1000 + GROUPING_MAX_MS + 1));
        assert_eq!(log.newest(10).len(), 3);
        log.add(entry("del", 0));
        log.add(entry("incr", 0));
        assert_eq!(log.newest(10).len(), 3);
        log.reset();
        assert!(log.newest(10).is_empty());
    }
}
