//! SLOWLOG GET \[count\] | LEN | RESET | HELP, and the log `engine::call` feeds.
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
use crate::engine::{ArgCursor, Command, CommandSpec as C, Ctx, KeySpec, run_sub};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;

/// The most arguments an entry keeps (the last kept one notes how many were left out).
const MAX_ARGC: usize = 32;
/// The most bytes an argument keeps.
const MAX_STRING: usize = 128;

/// SLOWLOG and its subcommands.
pub(crate) static COMMANDS: &[C] = &[C::new(
    "slowlog",
    -2,
    &[],
    KeySpec::None,
    crate::engine::run::<crate::commands::server::Help>,
)
.with_subcommands(SLOWLOG)
.with_acl(&["@slow"])];

static SLOWLOG: &[C] = &[
    C::new(
        "slowlog|get",
        -2,
        &["admin", "loading", "stale"],
        KeySpec::None,
        slowlog_get,
    )
    .with_acl(&["@admin", "@slow", "@dangerous"])
    .with_tips(&["request_policy:all_nodes", "nondeterministic_output"]),
    C::new(
        "slowlog|len",
        2,
        &["admin", "loading", "stale"],
        KeySpec::None,
        run_sub::<SlowlogLen>,
    )
    .with_acl(&["@admin", "@slow", "@dangerous"])
    .with_tips(&[
        "request_policy:all_nodes",
        "response_policy:agg_sum",
        "nondeterministic_output",
    ]),
    C::new(
        "slowlog|reset",
        2,
        &["admin", "loading", "stale"],
        KeySpec::None,
        run_sub::<SlowlogReset>,
    )
    .with_acl(&["@admin", "@slow", "@dangerous"])
    .with_tips(&["request_policy:all_nodes", "response_policy:all_succeeded"]),
    C::new(
        "slowlog|help",
        2,
        &["loading", "stale"],
        KeySpec::None,
        run_sub::<SlowlogHelp>,
    )
    .with_acl(&["@slow"]),
];

/// One kept command.
#[derive(Debug, Clone)]
struct SlowEntry {
    id: u64,
    time: u64,
    usec: u64,
    args: Vec<Bytes>,
    addr: String,
    name: Bytes,
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
        args: &[Bytes],
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

    fn len(&self) -> usize {
        self.log.lock().map(|l| l.entries.len()).unwrap_or(0)
    }

    fn reset(&self) {
        if let Ok(mut log) = self.log.lock() {
            log.entries.clear();
        }
    }

    fn newest(&self, count: usize) -> Vec<SlowEntry> {
        self.log
            .lock()
            .map(|l| l.entries.iter().take(count).cloned().collect())
            .unwrap_or_default()
    }
}

/// The arguments as an entry keeps them.
fn trimmed(args: &[Bytes]) -> Vec<Bytes> {
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

/// The table handler of SLOWLOG GET: more than one count gets Redis's generic subcommand
/// error, which names the subcommand as the client typed it.
fn slowlog_get(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() > 3 {
        return Reply::Error(
            format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try SLOWLOG HELP.",
                crate::engine::printable(&args[1], 128)
            )
            .into(),
        );
    }
    run_sub::<SlowlogGet>(ctx, args)
}

/// SLOWLOG GET \[count\]
#[derive(Debug)]
pub(crate) struct SlowlogGet {
    count: usize,
}

impl Command for SlowlogGet {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        const BAD: CmdError = CmdError::msg("ERR count should be greater than or equal to -1");
        if a.remaining() == 0 {
            return Ok(SlowlogGet { count: 10 });
        }
        let count = match a.next_i64() {
            Ok(-1) => usize::MAX,
            Ok(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
            _ => return Err(BAD),
        };
        Ok(SlowlogGet { count })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let entries = ctx.shared.slowlog.newest(self.count);
        Ok(Reply::Array(
            entries
                .into_iter()
                .map(|e| {
                    Reply::Array(vec![
                        Reply::Int(e.id as i64),
                        Reply::Int(e.time as i64),
                        Reply::Int(e.usec.min(i64::MAX as u64) as i64),
                        Reply::Array(e.args.into_iter().map(Reply::Bulk).collect()),
                        Reply::Bulk(Bytes::from(e.addr)),
                        Reply::Bulk(e.name),
                    ])
                })
                .collect(),
        ))
    }
}

/// SLOWLOG LEN
#[derive(Debug)]
pub(crate) struct SlowlogLen;

impl Command for SlowlogLen {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(SlowlogLen)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Int(ctx.shared.slowlog.len() as i64))
    }
}

/// SLOWLOG RESET
#[derive(Debug)]
pub(crate) struct SlowlogReset;

impl Command for SlowlogReset {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(SlowlogReset)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        ctx.shared.slowlog.reset();
        Ok(Reply::ok())
    }
}

/// SLOWLOG HELP
#[derive(Debug)]
pub(crate) struct SlowlogHelp;

impl Command for SlowlogHelp {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(SlowlogHelp)
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(help(&[
            "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
            "HELP",
            "    Prints this help.",
        ]))
    }
}

/// A HELP reply: one status line each.
pub(crate) fn help(lines: &[&'static str]) -> Reply {
    Reply::Array(lines.iter().map(|l| Reply::status(l)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_commands_are_trimmed_as_redis_does() {
        let args: Vec<Bytes> = (0..42).map(|i| Bytes::from(i.to_string())).collect();
        let t = trimmed(&args);
        assert_eq!(t.len(), 32);
        assert_eq!(&t[31][..], b"... (11 more arguments)");
        assert_eq!(&t[30][..], b"30");
        let t = trimmed(&[Bytes::from(vec![b'x'; 200])]);
        assert_eq!(t[0].len(), 128 + "... (72 more bytes)".len());
        assert!(t[0].ends_with(b"... (72 more bytes)"));
        let exact: Vec<Bytes> = (0..32).map(|i| Bytes::from(i.to_string())).collect();
        assert_eq!(trimmed(&exact).len(), 32);
    }
}
