//! SLOWLOG GET \[count\] | LEN | RESET | HELP, over the slow log (`services::slowlog`),
//! and the HELP reply every `… HELP` subcommand shares.

use bytes::Bytes;

use crate::engine::{ArgCursor, Command, CommandSpec as C, Ctx, KeySpec, run_sub};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;

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

/// The table handler of SLOWLOG GET: more than one count gets Redis's generic subcommand
/// error, which names the subcommand as the client typed it.
fn slowlog_get(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    if args.len() > 3 {
        return Reply::Error(
            format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try SLOWLOG HELP.",
                crate::engine::printable(args[1], 128)
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

impl Command<'_> for SlowlogGet {
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

impl Command<'_> for SlowlogLen {
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

impl Command<'_> for SlowlogReset {
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

impl Command<'_> for SlowlogHelp {
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
