//! The latency monitor `engine::call` feeds (LATENCY's commands are in
//! `commands::latency`).
//!
//! With `latency-monitor-threshold` above 0, every command that ran at least that many
//! milliseconds adds a sample to the `command` event (`fast-command` for commands flagged
//! `fast`), as Redis 7.0 records them: per event, the last 160 samples (Unix second,
//! latency in ms; samples in the same second keep the highest) and the highest ever seen.
//! Time is sluice's clock, so a test-mode server moved by CLOCK records what it shows.
//!
//! Events recorded: `command` and `fast-command` (by `engine::call`), and `expire-cycle`
//! (a reaper pass, `store::reaper`, that took at least the threshold: usually the deletion
//! of a large value whose TTL passed). LATENCY DOCTOR's report and LATENCY GRAPH's ASCII
//! sparkline are made here from the same series, in the shapes Redis 7.0 gives them.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

/// Samples kept per event (Redis's LATENCY_TS_LEN).
const SAMPLES: usize = 160;

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

    /// Every event with its latest sample (Unix second, ms) and its highest ever (ms).
    pub(crate) fn latest(&self) -> Vec<(&'static str, u64, u64, u64)> {
        let Ok(events) = self.events.lock() else {
            return Vec::new();
        };
        events
            .iter()
            .map(|(name, s)| {
                let (time, ms) = s.samples.back().copied().unwrap_or_default();
                (*name, time, ms, s.max)
            })
            .collect()
    }

    /// The samples (Unix second, ms) of the event named `event`, oldest first.
    pub(crate) fn history(&self, event: &[u8]) -> Vec<(u64, u64)> {
        let Ok(events) = self.events.lock() else {
            return Vec::new();
        };
        events
            .iter()
            .find(|(name, _)| name.as_bytes() == event)
            .map(|(_, s)| s.samples.iter().copied().collect())
            .unwrap_or_default()
    }

    /// LATENCY GRAPH's text for `event`: a title line with the series' high and low, a rule
    /// of 80 dashes, then Redis's filled 4-row sparkline of the samples (oldest first), each
    /// column labelled vertically with how long ago it was (`12s`, `5m`, `3h`, `2d`), 80
    /// columns per band. None if the event has no series.
    pub(crate) fn graph(&self, event: &[u8], now_s: u64) -> Option<String> {
        let events = self.events.lock().ok()?;
        let (name, series) = events.iter().find(|(name, _)| name.as_bytes() == event)?;
        let samples: Vec<(u64, String)> = series
            .samples
            .iter()
            .map(|&(time, ms)| (ms, ago_label(now_s.saturating_sub(time))))
            .collect();
        let high = samples.iter().map(|s| s.0).max().unwrap_or(0);
        let low = samples.iter().map(|s| s.0).min().unwrap_or(0);
        let mut out = format!(
            "{name} - high {high} ms, low {low} ms (all time high {} ms)\n",
            series.max
        );
        out.push_str(&"-".repeat(GRAPH_COLUMNS));
        out.push('\n');
        sparkline(&mut out, &samples, low, high);
        Some(out)
    }

    /// LATENCY DOCTOR's report: one line per event with its statistics (samples, average,
    /// mean deviation, period, worst), then advice for the events seen. `threshold_ms` is
    /// `latency-monitor-threshold`, `slowlog_us` `slowlog-log-slower-than`.
    pub(crate) fn doctor(&self, threshold_ms: u64, slowlog_us: i64, now_s: u64) -> String {
        let Ok(events) = self.events.lock() else {
            return String::new();
        };
        if events.is_empty() && threshold_ms == 0 {
            return "Latency monitoring is disabled on this server, and nothing was recorded \
                    while it was on. Enable it with \"CONFIG SET latency-monitor-threshold \
                    <milliseconds>\" (see https://redis.io/topics/latency-monitor).\n"
                .to_string();
        }
        let mut out = String::new();
        let mut advice: Vec<String> = Vec::new();
        let mut advise = |text: String| {
            if !advice.contains(&text) {
                advice.push(text);
            }
        };
        for (n, (name, series)) in events.iter().enumerate() {
            if n == 0 {
                out.push_str("Latency spikes were observed on this server:\n\n");
            }
            let count = series.samples.len() as u64;
            let sum: u64 = series.samples.iter().map(|s| s.1).sum();
            let avg = sum.checked_div(count).unwrap_or(0);
            let mad = series
                .samples
                .iter()
                .map(|s| s.1.abs_diff(avg))
                .sum::<u64>()
                .checked_div(count)
                .unwrap_or(0);
            let oldest = series.samples.iter().map(|s| s.0).min().unwrap_or(now_s);
            let period = now_s.saturating_sub(oldest).max(1);
            out.push_str(&format!(
                "{}. {name}: {count} latency spikes (average {avg}ms, mean deviation {mad}ms, \
                 period {:.2} sec). Worst all time event {}ms.\n",
                n + 1,
                period as f64 / count.max(1) as f64,
                series.max
            ));
            match *name {
                "command" => {
                    if slowlog_us < 0 {
                        advise(format!(
                            "- Slow commands caused latency, and the slow log is off: \
                             'CONFIG SET slowlog-log-slower-than {}' records them.",
                            threshold_ms * 1000
                        ));
                    } else if slowlog_us as u64 / 1000 > threshold_ms {
                        advise(format!(
                            "- The slow log only records commands slower than the latency \
                             threshold: 'CONFIG SET slowlog-log-slower-than {}' records \
                             these too.",
                            threshold_ms * 1000
                        ));
                    }
                    advise(
                        "- SLOWLOG GET shows which commands were slow (see \
                         https://redis.io/commands/slowlog)."
                            .into(),
                    );
                    advise(LARGE_VALUES.into());
                }
                "fast-command" => advise(
                    "- Commands that should take constant time were slow: the server got \
                     too little CPU time (a loaded or shared machine, a noisy neighbour). \
                     Lower the load or give the server a machine of its own."
                        .into(),
                ),
                "expire-cycle" => advise(LARGE_VALUES.into()),
                _ => {}
            }
        }
        if events.is_empty() {
            out.push_str("No latency spike was observed during the lifetime of this server.\n");
        } else if !advice.is_empty() {
            out.push_str("\nSome advice:\n\n");
            for a in advice {
                out.push_str(&a);
                out.push('\n');
            }
        }
        out
    }

    /// Forgets the named events (every event when `names` is empty); returns how many
    /// were forgotten.
    pub(crate) fn reset(&self, names: &[impl AsRef<[u8]>]) -> usize {
        let Ok(mut events) = self.events.lock() else {
            return 0;
        };
        if names.is_empty() {
            let n = events.len();
            events.clear();
            return n;
        }
        let mut n = 0;
        for e in names {
            let name = events.keys().find(|k| k.as_bytes() == e.as_ref()).copied();
            if let Some(name) = name {
                events.remove(name);
                n += 1;
            }
        }
        n
    }
}

/// Advice for events that come from deleting large values.
const LARGE_VALUES: &str = "- Deleting, expiring or evicting a large value blocks its shard \
    while it is freed. Values that are often deleted or expire are better split into several \
    smaller keys.";

/// LATENCY GRAPH's width, in columns per band.
const GRAPH_COLUMNS: usize = 80;
/// LATENCY GRAPH's height, in rows of characters.
const GRAPH_ROWS: usize = 3 + 1;
/// The sparkline's fill characters, from the lowest third of a row to the highest; a column
/// whose value reaches above a row has `|` in it.
const FILL: [u8; 3] = [b'_', b'o', b'#'];

/// How long ago, as LATENCY GRAPH labels a sample: seconds, minutes, hours or days.
fn ago_label(elapsed: u64) -> String {
    match elapsed {
        e if e < 60 => format!("{e}s"),
        e if e < 3600 => format!("{}m", e / 60),
        e if e < 86_400 => format!("{}h", e / 3600),
        e => format!("{}d", e / 86_400),
    }
}

/// Renders `samples` (value, label) as Redis's filled sparkline: `GRAPH_ROWS` rows of
/// characters, each row split in three steps, the values scaled between `low` and `high`;
/// then, after a blank line, each sample's label written downwards under its column. Bands
/// of `GRAPH_COLUMNS` samples, separated by a blank line.
fn sparkline(out: &mut String, samples: &[(u64, String)], low: u64, high: u64) {
    let steps = (FILL.len() * GRAPH_ROWS) as f64;
    let range = if high == low {
        1.0
    } else {
        (high - low) as f64
    };
    for (band, chunk) in samples.chunks(GRAPH_COLUMNS).enumerate() {
        if band > 0 {
            out.push('\n');
        }
        let step_of = |v: u64| -> usize {
            let step = ((v - low) as f64 * steps / range) as usize;
            step.min(FILL.len() * GRAPH_ROWS - 1)
        };
        for row in 0..GRAPH_ROWS {
            let floor = (GRAPH_ROWS - row - 1) * FILL.len();
            let line: String = chunk
                .iter()
                .map(|(v, _)| {
                    let step = step_of(*v);
                    if step < floor {
                        ' '
                    } else if step - floor < FILL.len() {
                        FILL[step - floor] as char
                    } else {
                        '|'
                    }
                })
                .collect();
            out.push_str(&line);
            out.push('\n');
        }
        // One blank row, then the labels, one character per row.
        out.push_str(&" ".repeat(chunk.len()));
        out.push('\n');
        let longest = chunk.iter().map(|(_, l)| l.len()).max().unwrap_or(0);
        for i in 0..longest {
            let line: String = chunk
                .iter()
                .map(|(_, l)| l.as_bytes().get(i).map_or(' ', |&c| c as char))
                .collect();
            out.push_str(&line);
            out.push('\n');
        }
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

    #[test]
    fn graph_draws_redis_sparkline_with_labels() {
        let m = LatencyMonitor::default();
        m.add("command", 100, 10);
        m.add("command", 130, 40);
        m.add("command", 190, 25);
        let g = m.graph(b"command", 200).unwrap();
        let expected = concat!(
            "command - high 40 ms, low 10 ms (all time high 40 ms)\n",
            "--------------------------------------------------------------------------------\n",
            " # \n",
            " |_\n",
            " ||\n",
            "_||\n",
            "   \n",
            "111\n",
            "mm0\n",
            "  s\n",
        );
        assert_eq!(g, expected);
        assert!(m.graph(b"nope", 200).is_none());
    }

    #[test]
    fn doctor_reports_each_event_and_advice() {
        let m = LatencyMonitor::default();
        assert!(m.doctor(0, 10_000, 50).contains("disabled"));
        assert!(m.doctor(5, 10_000, 50).contains("No latency spike"));
        m.add("expire-cycle", 10, 30);
        m.add("expire-cycle", 20, 50);
        let r = m.doctor(5, 10_000, 30);
        assert!(
            r.contains(
                "1. expire-cycle: 2 latency spikes (average 40ms, mean deviation 10ms, \
                 period 10.00 sec). Worst all time event 50ms."
            ),
            "{r}"
        );
        assert!(r.contains("large value"), "{r}");
    }
}
