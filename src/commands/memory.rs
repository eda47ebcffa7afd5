//! MEMORY STATS, MEMORY DOCTOR, MEMORY MALLOC-STATS and MEMORY PURGE (MEMORY USAGE is with
//! OBJECT in `keys::object`), in the shapes Redis 7.0.15 gives them.
//!
//! sluice counts its heap itself (`alloc_stats`: the live bytes of the global allocator,
//! the process's RSS, the peak), not through jemalloc, so the fields that describe
//! jemalloc's own bookkeeping are reported as sluice knows them: `allocator.active` is the
//! live heap (no page-level view), `startup.allocated` is 0 (the heap is not sampled at
//! start), the caches of scripts and functions, the AOF buffer and the cluster links are 0
//! (not counted apart from the heap). MALLOC-STATS says that the allocator is the system's;
//! PURGE has nothing to purge and answers OK, as Redis does without jemalloc.

use bytes::Bytes;

use crate::engine::{ArgCursor, Command, Ctx};
use crate::error::CmdResult;
use crate::protocol::Reply;

/// Below this much used memory DOCTOR has nothing to say (Redis's 5 MB).
const DOCTOR_MIN_MEMORY: usize = 5 * 1024 * 1024;

/// The numbers MEMORY STATS and MEMORY DOCTOR share.
struct Overview {
    peak: usize,
    used: usize,
    rss: usize,
    clients_normal: usize,
    clients_replicas: usize,
    /// Per database with keys: (db, bytes of its table structures).
    dbs: Vec<(usize, usize)>,
    overhead: usize,
    keys: usize,
}

impl Overview {
    fn take(ctx: &mut Ctx<'_>) -> Overview {
        let shared = ctx.shared;
        let databases = shared.config().databases;
        let mut per_db = vec![(0usize, 0usize); databases];
        let keys = ctx.store.fold(0usize, |acc, shard| {
            let mut n = acc;
            for (db, sum) in per_db.iter_mut().enumerate() {
                let d = shard.db(db);
                sum.0 += d.len();
                n += d.len();
            }
            n
        });
        let structure = ctx.store.fold(0usize, |acc, s| acc + s.structure_memory());
        // The table structures are not split per database: each database with keys gets
        // its share by key count.
        let dbs: Vec<(usize, usize)> = per_db
            .iter()
            .enumerate()
            .filter(|(_, s)| s.0 > 0)
            .map(|(db, s)| (db, structure * s.0 / keys.max(1)))
            .collect();
        let clients_normal = shared.clients.memory_of_kind(crate::client::KIND_NORMAL);
        let clients_replicas = shared.clients.memory_of_kind(crate::client::KIND_REPLICA);
        Overview {
            peak: crate::alloc_stats::peak(),
            used: crate::alloc_stats::allocated(),
            rss: crate::alloc_stats::rss(),
            clients_normal,
            clients_replicas,
            dbs,
            overhead: structure + clients_normal + clients_replicas,
            keys,
        }
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// MEMORY STATS
#[derive(Debug)]
pub(crate) struct MemoryStats;

impl Command<'_> for MemoryStats {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(MemoryStats)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let o = Overview::take(ctx);
        let key = |s: &str| Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()));
        let int = |n: usize| Reply::Int(n as i64);
        let dataset = o.used.saturating_sub(o.overhead);
        let mut m = vec![
            (key("peak.allocated"), int(o.peak)),
            (key("total.allocated"), int(o.used)),
            (key("startup.allocated"), int(0)),
            (key("replication.backlog"), int(0)),
            (key("clients.slaves"), int(o.clients_replicas)),
            (key("clients.normal"), int(o.clients_normal)),
            (key("cluster.links"), int(0)),
            (key("aof.buffer"), int(0)),
            (key("lua.caches"), int(0)),
            (key("functions.caches"), int(0)),
        ];
        for (db, bytes) in &o.dbs {
            m.push((
                key(&format!("db.{db}")),
                Reply::Map(vec![
                    (key("overhead.hashtable.main"), int(*bytes)),
                    (key("overhead.hashtable.expires"), int(0)),
                    (key("overhead.hashtable.slot-to-keys"), int(0)),
                ]),
            ));
        }
        let per_key = dataset.checked_div(o.keys).unwrap_or(0);
        m.extend([
            (key("overhead.total"), int(o.overhead)),
            (key("keys.count"), int(o.keys)),
            (key("keys.bytes-per-key"), int(per_key)),
            (key("dataset.bytes"), int(dataset)),
            (
                key("dataset.percentage"),
                Reply::Double(ratio(dataset, o.used) * 100.0),
            ),
            (
                key("peak.percentage"),
                Reply::Double(ratio(o.used, o.peak) * 100.0),
            ),
            (key("allocator.allocated"), int(o.used)),
            (key("allocator.active"), int(o.used)),
            (key("allocator.resident"), int(o.rss)),
            (key("allocator-fragmentation.ratio"), Reply::Double(1.0)),
            (key("allocator-fragmentation.bytes"), int(0)),
            (
                key("allocator-rss.ratio"),
                Reply::Double(ratio(o.rss, o.used)),
            ),
            (
                key("allocator-rss.bytes"),
                Reply::Int(o.rss as i64 - o.used as i64),
            ),
            (key("rss-overhead.ratio"), Reply::Double(1.0)),
            (key("rss-overhead.bytes"), int(0)),
            (key("fragmentation"), Reply::Double(ratio(o.rss, o.used))),
            (
                key("fragmentation.bytes"),
                Reply::Int(o.rss as i64 - o.used as i64),
            ),
        ]);
        Ok(Reply::Map(m))
    }
}

/// MEMORY DOCTOR: a report of what looks wrong in the numbers of MEMORY STATS.
#[derive(Debug)]
pub(crate) struct MemoryDoctor;

impl Command<'_> for MemoryDoctor {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(MemoryDoctor)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let o = Overview::take(ctx);
        Ok(Reply::Verbatim(Bytes::from(doctor_report(&o))))
    }
}

fn doctor_report(o: &Overview) -> String {
    if o.used < DOCTOR_MIN_MEMORY {
        return "This instance is empty or uses very little memory: there is nothing to \
                diagnose yet. Ask again once it holds some data.\n"
            .to_string();
    }
    if o.keys == 0 {
        return "This instance holds no keys: there is nothing to diagnose.\n".to_string();
    }
    let mut issues = Vec::new();
    if o.peak / 2 > o.used {
        issues.push(format!(
            "Peak memory: at some point the heap was {} bytes, more than twice what it is \
             now ({} bytes). The resident memory may stay high after such a peak.",
            o.peak, o.used
        ));
    }
    let frag = ratio(o.rss, o.used);
    if frag > 1.4 {
        issues.push(format!(
            "High fragmentation: the process holds {frag:.2} times the memory its heap \
             uses. This happens after many deletions of values of mixed sizes."
        ));
    }
    let clients = o.clients_normal / 1024;
    if o.clients_normal > 200 * 1024 {
        issues.push(format!(
            "Big client buffers: normal clients hold {clients} KB of buffers. Slow readers \
             of large replies or of pub/sub messages make them grow; \
             client-output-buffer-limit bounds them."
        ));
    }
    if o.clients_replicas > 10 * 1024 * 1024 {
        issues.push(
            "Big replica buffers: replicas hold more than 10 MB of buffers. A replica that \
             reads slowly, or a slow network, makes them grow."
                .to_string(),
        );
    }
    if issues.is_empty() {
        return "No memory issue was found in this instance.\n".to_string();
    }
    let mut out = String::from("Some memory issues were found in this instance:\n\n");
    for issue in issues {
        out.push_str(" * ");
        out.push_str(&issue);
        out.push_str("\n\n");
    }
    out
}

/// MEMORY MALLOC-STATS
#[derive(Debug)]
pub(crate) struct MemoryMallocStats;

impl Command<'_> for MemoryMallocStats {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(MemoryMallocStats)
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        // Redis's text when it is not built with jemalloc, as the verbatim reply that
        // jemalloc's report comes in (what clients of a stock Redis see).
        Ok(Reply::Verbatim(Bytes::from_static(
            b"Stats not supported for the current allocator",
        )))
    }
}

/// MEMORY HELP: Redis 7.0's text.
#[derive(Debug)]
pub(crate) struct MemoryHelp;

impl Command<'_> for MemoryHelp {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(MemoryHelp)
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(crate::commands::slowlog::help(&[
            "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
            "HELP",
            "    Prints this help.",
        ]))
    }
}

/// MEMORY PURGE
#[derive(Debug)]
pub(crate) struct MemoryPurge;

impl Command<'_> for MemoryPurge {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(MemoryPurge)
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        // The system allocator keeps no dirty pages sluice could ask it to give back.
        Ok(Reply::ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overview(used: usize) -> Overview {
        Overview {
            peak: used,
            used,
            rss: used,
            clients_normal: 0,
            clients_replicas: 0,
            dbs: vec![],
            overhead: 0,
            keys: 10,
        }
    }

    #[test]
    fn doctor_speaks_of_what_it_sees() {
        assert!(doctor_report(&overview(1024)).contains("very little memory"));
        assert!(doctor_report(&overview(64 << 20)).contains("No memory issue"));
        let mut o = overview(64 << 20);
        o.peak = 200 << 20;
        o.rss = 128 << 20;
        let r = doctor_report(&o);
        assert!(
            r.contains("Peak memory") && r.contains("High fragmentation"),
            "{r}"
        );
    }
}
