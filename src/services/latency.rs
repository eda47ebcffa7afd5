//! LATENCY LATEST | HISTORY event | RESET [event …] | HELP, and the monitor `engine::call`
//! feeds.
//!
//! With `latency-monitor-threshold` above 0, every command that ran at least that many
//! milliseconds adds a sample to the `command` event (`fast-command` for commands flagged
//! `fast`), as Redis 7.0 records them: per event, the last 160 samples (Unix second,
//! latency in ms; samples in the same second keep the highest) and the highest ever seen.
//! Time is sluice's clock, so a test-mode server moved by CLOCK records what it shows.
//!
//! LATENCY DOCTOR, GRAPH and HISTOGRAM are not implemented (they answer Redis's
//! unknown-subcommand error), and no event other than these two is recorded.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use bytes::Bytes;

use crate::engine::{ArgCursor, Command, CommandSpec as C, Ctx, KeySpec, run_sub};
use crate::error::CmdResult;
use crate::protocol::Reply;

/// Samples kept per event (Redis's LATENCY_TS_LEN).
const SAMPLES: usize = 160;

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

#[derive(Debug, Default)]
struct Series {
    samples: VecDeque<(u64, u64)>,
    max: u64,
}

/// Latency samples per event.
#[derive(Debug, Default)]
pub struct LatencyMonitor {
    events: Mutex<BTreeMap<&'static str, Series>>,
}

impl LatencyMonitor {
    /// Forgets every event (`TESTMODE RESET`).
    pub fn clear(&self) {
        if let Ok(mut events) = self.events.lock() {
            events.clear();
        }
    }

    /// Adds a sample of `ms` milliseconds at Unix second `time` to `event` (the caller
    /// checked the threshold).
    pub fn add(&self, event: &'static str, time: u64, ms: u64) {
        let Ok(mut events) = self.events.lock() else {
            return;
        };
        let series = events.entry(event).or_default();
        series.max = series.max.max(ms);
        if let Some(last) = series.samples.back_mut()
            && last.0 == time
        {
            last.1 = last.1.max(ms);
            return;
        }
        if series.samples.len() == SAMPLES {
            series.samples.pop_front();
        }
        series.samples.push_back((time, ms));
    }
}

/// LATENCY LATEST
#[derive(Debug)]
pub(crate) struct LatencyLatest;

impl Command for LatencyLatest {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(LatencyLatest)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let Ok(events) = ctx.shared.latency.events.lock() else {
            return Ok(Reply::Array(Vec::new()));
        };
        Ok(Reply::Array(
            events
                .iter()
                .map(|(name, s)| {
                    let (time, ms) = s.samples.back().copied().unwrap_or_default();
                    Reply::Array(vec![
                        Reply::Bulk(Bytes::from_static(name.as_bytes())),
                        Reply::Int(time as i64),
                        Reply::Int(ms as i64),
                        Reply::Int(s.max as i64),
                    ])
                })
                .collect(),
        ))
    }
}

/// LATENCY HISTORY event
#[derive(Debug)]
pub(crate) struct LatencyHistory {
    event: Bytes,
}

impl Command for LatencyHistory {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(LatencyHistory {
            event: a.next()?.clone(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let Ok(events) = ctx.shared.latency.events.lock() else {
            return Ok(Reply::Array(Vec::new()));
        };
        let samples = events
            .iter()
            .find(|(name, _)| name.as_bytes() == &self.event[..])
            .map(|(_, s)| {
                s.samples
                    .iter()
                    .map(|&(t, ms)| Reply::Array(vec![Reply::Int(t as i64), Reply::Int(ms as i64)]))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Reply::Array(samples))
    }
}

/// LATENCY RESET [event …]
#[derive(Debug)]
pub(crate) struct LatencyReset {
    events: Vec<Bytes>,
}

impl Command for LatencyReset {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(LatencyReset {
            events: a.rest().to_vec(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let Ok(mut events) = ctx.shared.latency.events.lock() else {
            return Ok(Reply::Int(0));
        };
        if self.events.is_empty() {
            let n = events.len();
            events.clear();
            return Ok(Reply::Int(n as i64));
        }
        let mut n = 0;
        for e in &self.events {
            let name = events.keys().find(|k| k.as_bytes() == &e[..]).copied();
            if let Some(name) = name {
                events.remove(name);
                n += 1;
            }
        }
        Ok(Reply::Int(n))
    }
}

/// LATENCY HELP
#[derive(Debug)]
pub(crate) struct LatencyHelp;

impl Command for LatencyHelp {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(LatencyHelp)
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(crate::services::slowlog::help(&[
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_in_one_second_keep_the_highest_and_the_ring_is_bounded() {
        let m = LatencyMonitor::default();
        m.add("command", 10, 5);
        m.add("command", 10, 3);
        m.add("command", 10, 8);
        m.add("command", 11, 2);
        {
            let events = m.events.lock().unwrap();
            let s = &events["command"];
            assert_eq!(s.samples, VecDeque::from(vec![(10, 8), (11, 2)]));
            assert_eq!(s.max, 8);
        }
        for t in 0..500 {
            m.add("fast-command", 100 + t, 1);
        }
        assert_eq!(
            m.events.lock().unwrap()["fast-command"].samples.len(),
            SAMPLES
        );
    }
}
