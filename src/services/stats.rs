//! The operators' counters `engine::call` keeps: per command (INFO commandstats and
//! latencystats), per error prefix (INFO errorstats), and the text of those INFO sections.
//!
//! Counting is on the hot path, so a command's counters are in its own table entry (its
//! calls, time and failures as `services::counter` counters, which an event loop bumps
//! without an atomic read-modify-write): no lock is shared by the threads running different commands, and the latency histogram
//! is allocated on a command's first call. Error prefixes are rare by comparison and sit
//! under one mutex, taken only when an error is replied.
//!
//! The histogram reproduces the buckets of the HDR histogram Redis 7.0 uses (values in ns,
//! 1 ns to 1 s, two significant digits), so `latency_percentiles_usec_*` reads as Redis's:
//! a command that took 1 µs shows `p50=1.003`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::engine::table::CommandTable;
use crate::services::counter::Counter;

/// The most distinct error prefixes INFO errorstats keeps; further new prefixes are counted
/// in `total_error_replies` only (a script can invent any prefix, and each would stay).
pub(crate) const ERRORSTATS_LIMIT: usize = 128;

/// Calls, time and failures of one command, and its latency histogram.
#[derive(Debug, Default)]
pub struct CmdStat {
    /// Calls that ran.
    pub calls: Counter,
    /// Microseconds spent in those calls.
    pub usec: Counter,
    /// Calls refused before they ran (arity, NOAUTH, OOM, queued-command errors…).
    pub rejected: AtomicU64,
    /// Calls that ran and replied an error.
    pub failed: Counter,
    histogram: OnceLock<Histogram>,
}

impl CmdStat {
    /// Counts one call that ran for `usec` microseconds; `track` records it in the
    /// latency histogram too (`latency-tracking yes`).
    #[inline]
    pub fn ran(&self, usec: u64, failed: bool, track: bool) {
        self.calls.add(1);
        self.usec.add(usec);
        if failed {
            self.failed.add(1);
        }
        if track {
            self.histogram
                .get_or_init(Histogram::new)
                .record(usec.saturating_mul(1000));
        }
    }

    /// A blocked call ended (served, or by CLIENT UNBLOCK): its `usec` and, if it failed,
    /// the failure; its latency sample now (Redis's `updateStatsOnUnblock`; the call itself
    /// was counted when it blocked).
    pub fn unblocked(&self, usec: u64, failed: bool, track: bool) {
        self.usec.add(usec);
        if failed {
            self.failed.add(1);
        }
        if track {
            self.histogram
                .get_or_init(Histogram::new)
                .record(usec.saturating_mul(1000));
        }
    }

    /// Counts one refused call.
    pub fn rejected(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// LATENCY HISTOGRAM's view of the histogram (see [`Histogram::cdf`]); None before
    /// the command's first tracked call.
    pub(crate) fn latency_cdf(&self) -> Option<(u64, Vec<(u64, u64)>)> {
        // Emptied by CONFIG RESETSTAT: Redis frees the histogram, so it is not listed.
        let (total, cdf) = self.histogram.get()?.cdf();
        (total > 0).then_some((total, cdf))
    }

    pub(crate) fn reset(&self) {
        self.calls.reset();
        self.usec.reset();
        self.rejected.store(0, Ordering::Relaxed);
        self.failed.reset();
        if let Some(h) = self.histogram.get() {
            h.reset();
        }
    }
}

impl crate::engine::table::CommandEntry {
    /// True once the command was called or refused (what INFO commandstats lists).
    fn seen(&self) -> bool {
        self.stats.calls.get() > 0 || self.stats.rejected.load(Ordering::Relaxed) > 0
    }
}

// The HDR layout for lowest value 1, highest 1e9 and 2 significant digits: 256 sub-buckets
// per bucket (the lower half of each shared with the bucket below), 23 buckets.
const SUB_HALF_MAG: u32 = 7;
const SUB_HALF: u64 = 1 << SUB_HALF_MAG;
const SUB_MASK: u64 = (2 * SUB_HALF) - 1;
const BUCKETS: usize = 23;
const COUNTS: usize = (BUCKETS + 1) * SUB_HALF as usize;
const MIN_NS: u64 = 1;
const MAX_NS: u64 = 1_000_000_000;

/// A latency histogram with HDR's buckets and atomic counts.
#[derive(Debug)]
pub(crate) struct Histogram {
    counts: Box<[AtomicU64]>,
}

impl Histogram {
    fn new() -> Self {
        Histogram {
            counts: (0..COUNTS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn index(v: u64) -> usize {
        let bucket = (63 - (v | SUB_MASK).leading_zeros()) - SUB_HALF_MAG;
        let sub = v >> bucket;
        (((bucket as u64 + 1) << SUB_HALF_MAG) + sub - SUB_HALF) as usize
    }

    fn value_at(index: usize) -> u64 {
        let index = index as u64;
        let mut bucket = (index >> SUB_HALF_MAG) as i64 - 1;
        let mut sub = (index & (SUB_HALF - 1)) + SUB_HALF;
        if bucket < 0 {
            sub -= SUB_HALF;
            bucket = 0;
        }
        sub << bucket
    }

    /// The highest value counted in the same bucket as `v` (what HDR reports).
    fn highest_equivalent(v: u64) -> u64 {
        let bucket = (63 - (v | SUB_MASK).leading_zeros()) - SUB_HALF_MAG;
        let sub = v >> bucket;
        let range_bucket = if sub >= 2 * SUB_HALF {
            bucket + 1
        } else {
            bucket
        };
        (sub << bucket) + (1u64 << range_bucket) - 1
    }

    /// Records one value in ns (clamped to 1 ns ..= 1 s, as Redis does).
    pub(crate) fn record(&self, ns: u64) {
        let v = ns.clamp(MIN_NS, MAX_NS);
        if let Some(c) = self.counts.get(Self::index(v)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn reset(&self) {
        for c in self.counts.iter() {
            c.store(0, Ordering::Relaxed);
        }
    }

    /// The total count and the cumulative distribution LATENCY HISTOGRAM reports: as HDR's
    /// logarithmic iterator from 1024 ns doubling, each reporting level's highest equivalent
    /// value in µs with the count of values up to it, a level listed only when it adds to
    /// the count.
    pub(crate) fn cdf(&self) -> (u64, Vec<(u64, u64)>) {
        let counts: Vec<u64> = self
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        let mut out = Vec::new();
        let (mut level, mut i, mut cumulative, mut previous) = (1024u64, 0usize, 0u64, 0u64);
        while cumulative < total && level <= MAX_NS.saturating_mul(4) {
            let top = Self::highest_equivalent(level);
            while i < counts.len() && Self::value_at(i) <= top {
                cumulative += counts[i];
                i += 1;
            }
            if cumulative > previous {
                out.push((top / 1000, cumulative));
            }
            previous = cumulative;
            level *= 2;
        }
        (total, out)
    }

    /// The value (ns) at `percentile` (0–100), as `hdr_value_at_percentile`; None when empty.
    pub(crate) fn percentile(&self, percentile: f64) -> Option<u64> {
        let counts: Vec<u64> = self
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let p = percentile.min(100.0);
        let wanted = (((p / 100.0) * total as f64) + 0.5) as u64;
        let wanted = wanted.max(1);
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= wanted {
                return Some(Self::highest_equivalent(Self::value_at(i)));
            }
        }
        None
    }
}

/// Error replies counted by prefix (INFO errorstats).
#[derive(Debug, Default)]
pub struct ErrorStats {
    counts: Mutex<BTreeMap<Box<str>, u64>>,
}

impl ErrorStats {
    /// Counts one error reply by its prefix: the text up to the first space within the first
    /// 32 bytes, or `ERR` when there is none (Redis's `afterErrorReply`).
    pub fn count(&self, text: &str) {
        let head = &text.as_bytes()[..text.len().min(32)];
        let prefix = match head.iter().position(|&b| b == b' ') {
            Some(end) => &text[..end],
            None => "ERR",
        };
        if let Ok(mut counts) = self.counts.lock() {
            if let Some(n) = counts.get_mut(prefix) {
                *n += 1;
            } else if counts.len() < ERRORSTATS_LIMIT {
                counts.insert(prefix.into(), 1);
            }
        }
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        if let Ok(mut counts) = self.counts.lock() {
            counts.clear();
        }
    }

    /// Every prefix counted, in Redis's (byte) order, with its count.
    pub fn counts(&self) -> Vec<(Box<str>, u64)> {
        self.counts
            .lock()
            .map(|c| c.iter().map(|(k, v)| (k.clone(), *v)).collect())
            .unwrap_or_default()
    }
}

/// One line of INFO commandstats.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CommandLine {
    /// The command's table name (`get`, `config|set`).
    pub name: &'static str,
    /// Calls that ran.
    pub calls: u64,
    /// Microseconds they took.
    pub usec: u64,
    /// Calls refused.
    pub rejected: u64,
    /// Calls that failed.
    pub failed: u64,
}

impl CommandLine {
    /// `usec_per_call`.
    pub(crate) fn usec_per_call(&self) -> f64 {
        if self.calls > 0 {
            self.usec as f64 / self.calls as f64
        } else {
            0.0
        }
    }
}

/// INFO commandstats: every command called or refused since the last reset.
pub(crate) fn commandstats(table: &CommandTable) -> Vec<CommandLine> {
    table
        .entries()
        .iter()
        .filter(|e| e.seen())
        .map(|e| CommandLine {
            name: e.spec.name,
            calls: e.stats.calls.get(),
            usec: e.stats.usec.get(),
            rejected: e.stats.rejected.load(Ordering::Relaxed),
            failed: e.stats.failed.get(),
        })
        .collect()
}

/// INFO latencystats: for every command with samples, its name and each percentile as
/// Redis names it (`p50`, `p99.9`) with its value in µs.
pub(crate) fn latencystats(
    table: &CommandTable,
    percentiles: &[f64],
) -> Vec<(&'static str, Vec<(String, f64)>)> {
    let mut out = Vec::new();
    for e in table.entries() {
        let Some(h) = e.stats.histogram.get() else {
            continue;
        };
        if h.percentile(100.0).is_none() {
            continue;
        }
        let values = percentiles
            .iter()
            .map(|&p| {
                let us = h.percentile(p).unwrap_or(0) as f64 / 1000.0;
                (format!("p{}", percentile_name(p)), us)
            })
            .collect();
        out.push((e.spec.name, values));
    }
    out
}

/// A percentile as Redis names it in INFO (`50`, `99`, `99.9`): `%f` with the trailing
/// zeros (and point) removed.
fn percentile_name(p: f64) -> String {
    let s = format!("{p:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_read_as_redis_reports_them() {
        let h = Histogram::new();
        h.record(1000);
        assert_eq!(h.percentile(50.0), Some(1003));
        let h = Histogram::new();
        for us in [5u64, 5, 7] {
            h.record(us * 1000);
        }
        // Redis 7.0.15 showed p50=5.023,p99=7.007 for these.
        assert_eq!(h.percentile(50.0), Some(5023));
        assert_eq!(h.percentile(99.0), Some(7007));
        for (us, shown) in [(13u64, 13055u64), (52, 52223), (676, 679935), (0, 1)] {
            let h = Histogram::new();
            h.record(us * 1000);
            assert_eq!(h.percentile(99.9), Some(shown), "{us} µs");
        }
        let h = Histogram::new();
        h.record(u64::MAX);
        assert!(h.percentile(50.0).is_some_and(|v| v >= MAX_NS));
        assert_eq!(Histogram::new().percentile(50.0), None);
    }

    #[test]
    fn error_prefixes_are_counted_as_redis_does() {
        let e = ErrorStats::default();
        e.count("ERR syntax error");
        e.count("WRONGTYPE Operation");
        e.count("x");
        e.count("AVERYLONGPREFIXTHATHASNOSPACEWITHIN32BYTES at all");
        assert_eq!(e.counts(), vec![("ERR".into(), 3), ("WRONGTYPE".into(), 1)]);
        for i in 0..300 {
            e.count(&format!("E{i} x"));
        }
        assert_eq!(e.counts().len(), ERRORSTATS_LIMIT);
    }

    #[test]
    fn percentile_names() {
        assert_eq!(percentile_name(50.0), "50");
        assert_eq!(percentile_name(99.9), "99.9");
    }
}
