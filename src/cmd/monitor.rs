//! MONITOR: every command any client runs, streamed to the clients that asked, in Redis's
//! line format (`+<unix>.<micros> [<db> <addr>] "arg" …`), so `redis-cli --monitor` works.
//!
//! Publishing costs one atomic load per command while nobody monitors.

use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use tokio::sync::broadcast;

use super::{ArgCursor, Command, Ctx};
use crate::client::ClientState;
use crate::error::CmdResult;
use crate::protocol::Reply;

/// The monitor feed.
#[derive(Debug)]
pub struct Monitors {
    active: AtomicUsize,
    tx: broadcast::Sender<Bytes>,
}

impl Default for Monitors {
    fn default() -> Self {
        Monitors {
            active: AtomicUsize::new(0),
            tx: broadcast::channel(4096).0,
        }
    }
}

impl Monitors {
    /// True while at least one client monitors.
    #[inline]
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed) > 0
    }

    /// Subscribes a monitoring connection; call `leave` when it ends.
    pub fn join(&self) -> broadcast::Receiver<Bytes> {
        self.active.fetch_add(1, Ordering::Relaxed);
        self.tx.subscribe()
    }

    /// Unsubscribes.
    pub fn leave(&self) {
        self.active.fetch_sub(1, Ordering::Relaxed);
    }

    /// Sends one command to every monitor.
    pub fn publish(&self, now_us: u64, client: &ClientState, args: &[Bytes]) {
        let mut line = format!(
            "+{}.{:06} [{} {}]",
            now_us / 1_000_000,
            now_us % 1_000_000,
            client.db,
            client.info.addr
        );
        for a in args {
            line.push(' ');
            repr(a, &mut line);
        }
        line.push_str("\r\n");
        let _ = self.tx.send(Bytes::from(line));
    }
}

/// Quotes bytes as Redis's `sdscatrepr` does.
pub fn repr(b: &[u8], out: &mut String) {
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

/// MONITOR: the connection switches to streaming mode after `+OK`.
#[derive(Debug)]
pub struct Monitor;

impl Command for Monitor {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Monitor)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if ctx.in_exec {
            // Redis: EXEC runs its queue as a client that must get one reply per command.
            return Err(crate::error::CmdError::msg(
                "ERR MONITOR isn't allowed for DENY BLOCKING client",
            ));
        }
        ctx.client.monitor = true;
        Ok(Reply::ok())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn repr_matches_redis() {
        let mut s = String::new();
        super::repr(b"a \"b\"\r\n\x00\xff", &mut s);
        assert_eq!(s, r#""a \"b\"\r\n\x00\xff""#);
    }
}
