//! The latency monitor `engine::call` feeds (LATENCY's commands are in
//! `commands::latency`).
//!
//! With `latency-monitor-threshold` above 0, every command that ran at least that many
//! milliseconds adds a sample to the `command` event (`fast-command` for commands flagged
//! `fast`), as Redis 7.0 records them: per event, the last 160 samples (Unix second,
//! latency in ms; samples in the same second keep the highest) and the highest ever seen.
//! Time is sluice's clock, so a test-mode server moved by CLOCK records what it shows.

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
