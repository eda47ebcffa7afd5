//! Walking the keyspace: KEYS, SCAN (and the MATCH/COUNT/TYPE options the other SCANs
//! share), RANDOMKEY.

use bytes::Bytes;

use crate::engine::args::glob_match;
use crate::engine::{ArgCursor, Command, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;

/// Calls `f` with the hash, key and type name of every live key of the current database in
/// the held shards (whole-keyspace commands hold them all). Borrowed, so callers copy only
/// the keys they reply with.
fn for_each_live(ctx: &mut Ctx<'_>, mut f: impl FnMut(u64, &[u8], &'static str)) {
    let db = ctx.db();
    let now = ctx.now_ms;
    for shard in ctx.store.shards_mut() {
        for e in shard.db(db).iter() {
            if !e.is_expired(now) {
                f(
                    crate::store::shard::Db::entry_hash(e),
                    &e.key,
                    e.value.type_name(),
                );
            }
        }
    }
}

/// KEYS pattern
#[derive(Debug)]
pub(super) struct Keys {
    pattern: Bytes,
}

impl Command<'_> for Keys {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Keys {
            pattern: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let all = &self.pattern[..] == b"*";
        let mut keys = Vec::new();
        for_each_live(ctx, |_, k, _| {
            if all || glob_match(&self.pattern, k, false) {
                keys.push(Reply::bulk(k));
            }
        });
        Ok(Reply::Array(keys))
    }
}

/// SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]
///
/// The cursor is a position per shard: which shard, which bucket of its table, and the
/// shard's layout generation when the position was handed out (see `ScanCursor`). A call
/// walks buckets from there, one shard locked at a time, until it has seen COUNT keys (or
/// 10 × COUNT buckets, as Redis bounds a call over a sparse table), so it costs O(COUNT)
/// whatever the keyspace holds. Keys present for the whole scan are returned at least once,
/// as Redis guarantees: entries move between buckets only when a table grows, shrinks or
/// rehashes, which changes the shard's generation, and a cursor of an older generation
/// restarts that shard from its first bucket (so a key may be returned twice, never missed).
#[derive(Debug)]
pub(super) struct Scan {
    cursor: u64,
    pattern: Option<Bytes>,
    count: usize,
    type_name: Option<String>,
}

/// A SCAN cursor: generation (9 bits), shard (12 bits), bucket (32 bits), 53 bits in all, so
/// a script's `tonumber(cursor)` gives it back exactly. 0 is the start (shard 0, bucket 0)
/// and, returned, the end; a cursor handed out never is 0 otherwise, since every call moves
/// at least one bucket on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ScanCursor {
    /// The shard.
    pub shard: usize,
    /// The next bucket to visit in it.
    pub bucket: usize,
    /// The shard's layout generation (low bits) when `bucket` was computed.
    pub generation: u32,
}

const CURSOR_BUCKET_BITS: u32 = 32;
const CURSOR_SHARD_BITS: u32 = 12;
const CURSOR_GEN_BITS: u32 = 9;

impl ScanCursor {
    /// Encodes the cursor (below 2^53).
    pub(super) fn encode(self) -> u64 {
        let gen_mask = (1u64 << CURSOR_GEN_BITS) - 1;
        let shard_mask = (1u64 << CURSOR_SHARD_BITS) - 1;
        let bucket_mask = (1u64 << CURSOR_BUCKET_BITS) - 1;
        ((u64::from(self.generation) & gen_mask) << (CURSOR_SHARD_BITS + CURSOR_BUCKET_BITS))
            | ((self.shard as u64 & shard_mask) << CURSOR_BUCKET_BITS)
            | (self.bucket as u64 & bucket_mask)
    }

    /// Decodes any number a client sends (unknown ones land somewhere harmless).
    pub(super) fn decode(c: u64) -> ScanCursor {
        ScanCursor {
            shard: ((c >> CURSOR_BUCKET_BITS) & ((1 << CURSOR_SHARD_BITS) - 1)) as usize,
            bucket: (c & ((1 << CURSOR_BUCKET_BITS) - 1)) as usize,
            generation: ((c >> (CURSOR_SHARD_BITS + CURSOR_BUCKET_BITS))
                & ((1 << CURSOR_GEN_BITS) - 1)) as u32,
        }
    }

    fn same_generation(&self, layout: u32) -> bool {
        self.generation == layout & ((1 << CURSOR_GEN_BITS) - 1)
    }
}

/// What one SCAN call may still visit.
struct ScanBudget {
    keys: usize,
    buckets: usize,
}

impl ScanBudget {
    fn spent(&self) -> bool {
        self.keys == 0 || self.buckets == 0
    }
}

impl Scan {
    /// Walks one shard's table from `start`; Some(next bucket) if the budget ran out inside
    /// it, None once the shard is done.
    fn walk(
        &self,
        shard: &crate::store::Shard,
        db: usize,
        now_ms: u64,
        start: usize,
        budget: &mut ScanBudget,
        out: &mut Vec<Reply>,
    ) -> Option<usize> {
        let table = shard.db(db);
        let buckets = table.num_buckets().min(1 << CURSOR_BUCKET_BITS);
        let mut i = start;
        while i < buckets {
            if budget.spent() {
                return Some(i);
            }
            budget.buckets -= 1;
            if let Some(e) = table.bucket(i) {
                budget.keys -= 1;
                if !e.is_expired(now_ms)
                    && self
                        .pattern
                        .as_ref()
                        .is_none_or(|p| glob_match(p, &e.key, false))
                    && self
                        .type_name
                        .as_ref()
                        .is_none_or(|want| want == e.value.type_name())
                {
                    out.push(Reply::bulk(&e.key));
                }
            }
            i += 1;
        }
        None
    }
}

/// Parses the options shared by SCAN and the per-type scans (HSCAN, SSCAN, ZSCAN).
pub(crate) fn parse_scan_options(
    a: &mut ArgCursor<'_>,
    allow_type: bool,
) -> CmdResult<(Option<Bytes>, usize, Option<String>)> {
    let (mut pattern, mut count, mut type_name) = (None, 10usize, None);
    while a.remaining() > 0 {
        if a.eat("MATCH") && a.remaining() > 0 {
            pattern = Some(a.next_owned()?);
        } else if a.eat("COUNT") && a.remaining() > 0 {
            let n = a.next_i64()?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            count = n as usize;
        } else if allow_type && a.eat("TYPE") && a.remaining() > 0 {
            type_name = Some(String::from_utf8_lossy(a.next()?).to_ascii_lowercase());
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok((pattern, count, type_name))
}

impl Command<'_> for Scan {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let cursor = crate::engine::args::parse_scan_cursor(a.next()?)?;
        let (pattern, count, type_name) = parse_scan_options(a, true)?;
        Ok(Scan {
            cursor,
            pattern,
            count,
            type_name,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let shared = ctx.shared;
        let keyspace = &*shared.keyspace;
        let shards = keyspace.shard_count();
        let db = ctx.db();
        let now = ctx.now_ms;
        let from = ScanCursor::decode(self.cursor);
        // Inside EXEC or a script every shard is already held; called by a client, nothing
        // is, and one shard is locked at a time.
        let held = ctx.store.holds_all();
        let mut budget = ScanBudget {
            keys: self.count,
            buckets: self.count.saturating_mul(10),
        };
        let mut found = Vec::new();
        let mut shard = from.shard;
        let mut start = from.bucket;
        let mut first = true;
        let mut next = None;
        while shard < shards {
            let mut own = None;
            let guard = if held {
                ctx.store.held_shard(shard)
            } else {
                own = Some(match keyspace.try_lock_indexes(&[shard]) {
                    Some(locked) => locked,
                    // A script took this shard since SCAN passed the busy gate: SCAN has
                    // changed nothing, so it goes back to the gate and starts again rather
                    // than wait on the lock for the whole script.
                    None if crate::engine::call::back_to_gate(ctx, &[shard]) => {
                        return Ok(Reply::Null);
                    }
                    None => keyspace.lock_indexes(&[shard]),
                });
                own.as_ref().and_then(|l| l.held_shard(shard))
            };
            let Some(guard) = guard else { break };
            if first && start != 0 && !from.same_generation(guard.layout()) {
                // Entries may have moved since this position was handed out.
                start = 0;
            }
            first = false;
            let stopped = self.walk(guard, db, now, start, &mut budget, &mut found);
            let layout = guard.layout();
            drop(own);
            if let Some(bucket) = stopped {
                next = Some(ScanCursor {
                    shard,
                    bucket,
                    generation: layout,
                });
                break;
            }
            shard += 1;
            start = 0;
            if budget.spent() {
                if shard < shards {
                    next = Some(ScanCursor {
                        shard,
                        bucket: 0,
                        generation: 0,
                    });
                }
                break;
            }
        }
        let next = next.map_or(0, |c| {
            ScanCursor {
                generation: c.generation & ((1 << CURSOR_GEN_BITS) - 1),
                ..c
            }
            .encode()
        });
        Ok(Reply::Array(vec![
            Reply::Bulk(Bytes::from(next.to_string())),
            Reply::Array(found),
        ]))
    }
}

/// RANDOMKEY
#[derive(Debug)]
pub(super) struct RandomKey;

impl Command<'_> for RandomKey {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(RandomKey)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        // A shard picked in proportion to its keys, then the first live key at or after a
        // random bucket of its table, as Redis picks from its dict: O(shards) plus a short
        // walk, never a pass over the keyspace (a key after a run of empty buckets is a
        // little likelier, as in Redis). Keys whose TTL passed but are not reaped yet are
        // skipped; only if a few tries find nothing but those is the keyspace walked.
        let db = ctx.db();
        let now = ctx.now_ms;
        let sizes: Vec<usize> = ctx.store.shards_mut().map(|s| s.db(db).len()).collect();
        let total: usize = sizes.iter().sum();
        if total == 0 {
            return Ok(Reply::Null);
        }
        for _ in 0..16 {
            let mut pick = rand::random_range(0..total);
            let Some(index) = sizes.iter().position(|&n| {
                if pick < n {
                    true
                } else {
                    pick -= n;
                    false
                }
            }) else {
                break;
            };
            let Some(shard) = ctx.store.shards_mut().nth(index) else {
                break;
            };
            let table = shard.db(db);
            let buckets = table.num_buckets();
            if buckets == 0 {
                continue;
            }
            let start = rand::random_range(0..buckets);
            let live = (0..buckets)
                .map(|i| (start + i) % buckets)
                .find_map(|i| table.bucket(i))
                .filter(|e| !e.is_expired(now));
            if let Some(e) = live {
                return Ok(Reply::bulk(&e.key));
            }
        }
        let mut chosen = Reply::Null;
        for_each_live(ctx, |_, k, _| {
            if chosen == Reply::Null {
                chosen = Reply::bulk(k);
            }
        });
        Ok(chosen)
    }
}
