//! LATENCY LATEST | HISTORY event | RESET [event …] | HELP, over the latency monitor
//! (`services::latency`).
//!
//! LATENCY HISTOGRAM reports the per-command histograms of INFO latencystats
//! (`services::stats`); LATENCY DOCTOR and GRAPH render the monitor's series
//! (`services::latency`) as Redis's verbatim text replies.

use bytes::Bytes;

use crate::engine::{ArgCursor, Command, CommandSpec as C, Ctx, KeySpec, run_sub};
use crate::error::CmdResult;
use crate::protocol::Reply;

/// LATENCY and its subcommands.
pub(crate) static COMMANDS: &[C] = &[C::new(
    "latency",
    -2,
    &[],
    KeySpec::None,
    crate::engine::run::<crate::commands::server::Help>,
)
.with_subcommands(LATENCY)
.with_acl(&["@slow"])];

const ADMIN: &[&str] = &["admin", "noscript", "loading", "stale"];
const ADMIN_ACL: &[&str] = &["@admin", "@slow", "@dangerous"];

static LATENCY: &[C] = &[
    C::new(
        "latency|history",
        3,
        ADMIN,
        KeySpec::None,
        run_sub::<LatencyHistory>,
    )
    .with_acl(ADMIN_ACL)
    .with_tips(&[
        "nondeterministic_output",
        "request_policy:all_nodes",
        "response_policy:special",
    ]),
    C::new(
        "latency|help",
        2,
        &["loading", "stale"],
        KeySpec::None,
        run_sub::<LatencyHelp>,
    )
    .with_acl(&["@slow"]),
    C::new(
        "latency|reset",
        -2,
        ADMIN,
        KeySpec::None,
        run_sub::<LatencyReset>,
    )
    .with_acl(ADMIN_ACL)
    .with_tips(&["request_policy:all_nodes", "response_policy:all_succeeded"]),
    C::new(
        "latency|histogram",
        -2,
        ADMIN,
        KeySpec::None,
        run_sub::<LatencyHistogram>,
    )
    .with_acl(ADMIN_ACL)
    .with_tips(&[
        "nondeterministic_output",
        "request_policy:all_nodes",
        "response_policy:special",
    ]),
    C::new(
        "latency|doctor",
        2,
        ADMIN,
        KeySpec::None,
        run_sub::<LatencyDoctor>,
    )
    .with_acl(ADMIN_ACL)
    .with_tips(&[
        "nondeterministic_output",
        "request_policy:all_nodes",
        "response_policy:special",
    ]),
    C::new(
        "latency|graph",
        3,
        ADMIN,
        KeySpec::None,
        run_sub::<LatencyGraph>,
    )
    .with_acl(ADMIN_ACL)
    .with_tips(&[
        "nondeterministic_output",
        "request_policy:all_nodes",
        "response_policy:special",
    ]),
    C::new(
        "latency|latest",
        2,
        ADMIN,
        KeySpec::None,
        run_sub::<LatencyLatest>,
    )
    .with_acl(ADMIN_ACL)
    .with_tips(&[
        "nondeterministic_output",
        "request_policy:all_nodes",
        "response_policy:special",
    ]),
];

/// LATENCY LATEST
#[derive(Debug)]
pub(crate) struct LatencyLatest;

impl Command<'_> for LatencyLatest {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(LatencyLatest)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Array(
            ctx.shared
                .latency
                .latest()
                .into_iter()
                .map(|(name, time, ms, max)| {
                    Reply::Array(vec![
                        Reply::Bulk(Bytes::from_static(name.as_bytes())),
                        Reply::Int(time as i64),
                        Reply::Int(ms as i64),
                        Reply::Int(max as i64),
                    ])
                })
                .collect(),
        ))
    }
}

/// LATENCY HISTOGRAM [command …]: each command's calls and cumulative latency
/// distribution; every command with samples when none is named. A name may be a
/// subcommand (`config|get`); a command named stands for its subcommands too, and unknown
/// names are skipped, as in Redis.
#[derive(Debug)]
pub(crate) struct LatencyHistogram {
    names: Vec<Bytes>,
}

impl Command<'_> for LatencyHistogram {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(LatencyHistogram {
            names: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let table = &ctx.shared.table;
        let mut entries = Vec::new();
        if self.names.is_empty() {
            entries.extend(table.entries().iter());
        }
        for name in &self.names {
            let found = match name.iter().position(|&c| c == b'|') {
                None => table.get_entry(name),
                Some(bar) => table
                    .get_entry(&name[..bar])
                    .and_then(|e| table.sub_entry(e, &name[bar + 1..])),
            };
            let Some(entry) = found else {
                continue;
            };
            entries.push(entry);
            if !name.contains(&b'|') {
                entries.extend(table.sub_entries(entry));
            }
        }
        let bulk = |s: &str| Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()));
        let mut out = Vec::new();
        for e in entries {
            let Some((calls, cdf)) = e.stats.latency_cdf() else {
                continue;
            };
            let histogram = cdf
                .into_iter()
                .map(|(us, n)| (Reply::Int(us as i64), Reply::Int(n as i64)))
                .collect();
            out.push((
                bulk(e.spec.name),
                Reply::Map(vec![
                    (bulk("calls"), Reply::Int(calls as i64)),
                    (bulk("histogram_usec"), Reply::Map(histogram)),
                ]),
            ));
        }
        Ok(Reply::Map(out))
    }
}

/// LATENCY DOCTOR
#[derive(Debug)]
pub(crate) struct LatencyDoctor;

impl Command<'_> for LatencyDoctor {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(LatencyDoctor)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let live = &ctx.shared.live;
        let report = ctx.shared.latency.doctor(
            live.latency_threshold_ms(),
            live.slowlog().0,
            ctx.now_ms / 1000,
        );
        Ok(Reply::Verbatim(Bytes::from(report)))
    }
}

/// LATENCY GRAPH event
#[derive(Debug)]
pub(crate) struct LatencyGraph {
    event: Bytes,
}

impl Command<'_> for LatencyGraph {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(LatencyGraph {
            event: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        match ctx.shared.latency.graph(&self.event, ctx.now_ms / 1000) {
            Some(graph) => Ok(Reply::Verbatim(Bytes::from(graph))),
            None => Err(crate::error::CmdError::owned(format!(
                "ERR No samples available for event '{}'",
                String::from_utf8_lossy(&self.event)
            ))),
        }
    }
}

/// LATENCY HISTORY event
#[derive(Debug)]
pub(crate) struct LatencyHistory {
    event: Bytes,
}

impl Command<'_> for LatencyHistory {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(LatencyHistory {
            event: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let samples = ctx.shared.latency.history(&self.event);
        Ok(Reply::Array(
            samples
                .into_iter()
                .map(|(t, ms)| Reply::Array(vec![Reply::Int(t as i64), Reply::Int(ms as i64)]))
                .collect(),
        ))
    }
}

/// LATENCY RESET [event …]
#[derive(Debug)]
pub(crate) struct LatencyReset {
    events: Vec<Bytes>,
}

impl Command<'_> for LatencyReset {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(LatencyReset {
            events: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Int(ctx.shared.latency.reset(&self.events) as i64))
    }
}

/// LATENCY HELP
#[derive(Debug)]
pub(crate) struct LatencyHelp;

impl Command<'_> for LatencyHelp {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(LatencyHelp)
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(crate::commands::slowlog::help(&[
            "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
            "HELP",
            "    Prints this help.",
        ]))
    }
}
