//! Generic key commands: existence, deletion, expiry, type, iteration, renaming, copying and
//! moving (COPY, MOVE), databases, OBJECT, TOUCH and WAIT.

use bytes::Bytes;

use super::strings::Precision;
use super::{
    ArgCursor, Command, CommandSpec as C, Ctx, FindKeys, InfoDoc, KeySpecDoc, VariantCommand, run,
    run_as, run_sub, run_sub_as,
};
use crate::cmd::args::{glob_match, parse_i64};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::store::Value;

/// The key commands.
pub static COMMANDS: &[C] = &[
    C::new("del", -2, &["write"], C::keys(1, -1, 1), run::<Del>).with_acl(&[
        "@keyspace",
        "@write",
        "@slow",
    ]),
    C::new(
        "unlink",
        -2,
        &["write", "fast"],
        C::keys(1, -1, 1),
        run::<Del>,
    )
    .with_acl(&["@keyspace", "@write", "@fast"]),
    C::new(
        "exists",
        -2,
        &["readonly", "fast"],
        C::keys(1, -1, 1),
        run::<Exists>,
    )
    .with_acl(&["@keyspace", "@read", "@fast"]),
    C::new(
        "expire",
        -3,
        &["write", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<Expire>(c, a, (Precision::Seconds, Time::Relative)),
    )
    .with_acl(&["@keyspace", "@write", "@fast"]),
    C::new(
        "pexpire",
        -3,
        &["write", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<Expire>(c, a, (Precision::Millis, Time::Relative)),
    )
    .with_acl(&["@keyspace", "@write", "@fast"]),
    C::new(
        "expireat",
        -3,
        &["write", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<Expire>(c, a, (Precision::Seconds, Time::Absolute)),
    )
    .with_acl(&["@keyspace", "@write", "@fast"]),
    C::new(
        "pexpireat",
        -3,
        &["write", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<Expire>(c, a, (Precision::Millis, Time::Absolute)),
    )
    .with_acl(&["@keyspace", "@write", "@fast"]),
    C::new("ttl", 2, &["readonly", "fast"], C::keys(1, 1, 1), |c, a| {
        run_as::<Ttl>(c, a, (Precision::Seconds, Time::Relative))
    })
    .with_acl(&["@keyspace", "@read", "@fast"]),
    C::new(
        "pttl",
        2,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<Ttl>(c, a, (Precision::Millis, Time::Relative)),
    )
    .with_acl(&["@keyspace", "@read", "@fast"]),
    C::new(
        "expiretime",
        2,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<Ttl>(c, a, (Precision::Seconds, Time::Absolute)),
    )
    .with_acl(&["@keyspace", "@read", "@fast"]),
    C::new(
        "pexpiretime",
        2,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<Ttl>(c, a, (Precision::Millis, Time::Absolute)),
    )
    .with_acl(&["@keyspace", "@read", "@fast"]),
    C::new(
        "persist",
        2,
        &["write", "fast"],
        C::keys(1, 1, 1),
        run::<Persist>,
    )
    .with_acl(&["@keyspace", "@write", "@fast"]),
    C::new(
        "type",
        2,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        run::<Type>,
    )
    .with_acl(&["@keyspace", "@read", "@fast"]),
    C::new("keys", 2, &["readonly"], C::keys(0, 0, 0), run::<Keys>)
        .whole_keyspace()
        .with_acl(&["@keyspace", "@read", "@slow", "@dangerous"]),
    C::new("scan", -2, &["readonly"], C::keys(0, 0, 0), run::<Scan>)
        .stepwise()
        .with_acl(&["@keyspace", "@read", "@slow"]),
    C::new("rename", 3, &["write"], C::keys(1, 2, 1), |c, a| {
        run_as::<Rename>(c, a, RenameMode::Overwrite)
    })
    .with_acl(&["@keyspace", "@write", "@slow"]),
    C::new(
        "renamenx",
        3,
        &["write", "fast"],
        C::keys(1, 2, 1),
        |c, a| run_as::<Rename>(c, a, RenameMode::IfTargetMissing),
    )
    .with_acl(&["@keyspace", "@write", "@fast"]),
    C::new(
        "randomkey",
        1,
        &["readonly"],
        C::keys(0, 0, 0),
        run::<RandomKey>,
    )
    .whole_keyspace()
    .with_acl(&["@keyspace", "@read", "@slow"]),
    C::new(
        "dbsize",
        1,
        &["readonly", "fast"],
        C::keys(0, 0, 0),
        run::<DbSize>,
    )
    .whole_keyspace()
    .with_acl(&["@keyspace", "@read", "@fast"]),
    C::new("flushdb", -1, &["write"], C::keys(0, 0, 0), |c, a| {
        run_as::<Flush>(c, a, FlushScope::Db)
    })
    .whole_keyspace()
    .with_acl(&["@keyspace", "@write", "@slow", "@dangerous"]),
    C::new("flushall", -1, &["write"], C::keys(0, 0, 0), |c, a| {
        run_as::<Flush>(c, a, FlushScope::All)
    })
    .whole_keyspace()
    .with_acl(&["@keyspace", "@write", "@slow", "@dangerous"]),
    C::new(
        "select",
        2,
        &["loading", "stale", "fast"],
        C::keys(0, 0, 0),
        run::<Select>,
    )
    .with_acl(&["@keyspace", "@fast"]),
    C::new(
        "swapdb",
        3,
        &["write", "fast"],
        C::keys(0, 0, 0),
        run::<SwapDb>,
    )
    .whole_keyspace()
    .with_acl(&["@keyspace", "@write", "@fast", "@dangerous"]),
    C::new(
        "touch",
        -2,
        &["readonly", "fast"],
        C::keys(1, -1, 1),
        // TOUCH counts the keys that exist, each read marking its key accessed: EXISTS.
        run::<Exists>,
    )
    .with_acl(&["@keyspace", "@read", "@fast"])
    .with_info(&InfoDoc {
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        key_specs: &[KeySpecDoc {
            notes: None,
            flags: &["RO"],
            begin: Some(1),
            find: FindKeys::Range(-1, 1, 0),
        }],
    }),
    C::new(
        "copy",
        -3,
        &["write", "denyoom"],
        C::keys(1, 2, 1),
        run::<Copy>,
    )
    .with_acl(&["@keyspace", "@write", "@slow"])
    .with_info(&InfoDoc {
        tips: &[],
        key_specs: &[
            KeySpecDoc {
                notes: None,
                flags: &["RO", "access"],
                begin: Some(1),
                find: FindKeys::Range(0, 1, 0),
            },
            KeySpecDoc {
                notes: None,
                flags: &["OW", "update"],
                begin: Some(2),
                find: FindKeys::Range(0, 1, 0),
            },
        ],
    }),
    C::new("move", 3, &["write", "fast"], C::keys(1, 1, 1), run::<Move>)
        .with_acl(&["@keyspace", "@write", "@fast"])
        .with_info(&InfoDoc {
            tips: &[],
            key_specs: &[KeySpecDoc {
                notes: None,
                flags: &["RW", "access", "update"],
                begin: Some(1),
                find: FindKeys::Range(0, 1, 0),
            }],
        }),
    C::new("wait", 3, &["noscript"], C::keys(0, 0, 0), run::<Wait>)
        .with_acl(&["@slow", "@connection"])
        .with_info(&InfoDoc {
            tips: &["request_policy:all_shards", "response_policy:agg_min"],
            key_specs: &[],
        }),
    C::new(
        "object",
        -2,
        &[],
        C::keys(0, 0, 0),
        run::<super::server::Help>,
    )
    .with_acl(&["@slow"])
    .with_subcommands(OBJECT),
    C::new(
        "memory",
        -2,
        &[],
        C::keys(0, 0, 0),
        run::<super::server::Help>,
    )
    .with_subcommands(MEMORY),
];

/// What COMMAND INFO reports for OBJECT's key subcommands.
static OBJECT_KEY_INFO: InfoDoc = InfoDoc {
    tips: &["nondeterministic_output"],
    key_specs: &[KeySpecDoc {
        notes: None,
        flags: &["RO"],
        begin: Some(2),
        find: FindKeys::Range(0, 1, 0),
    }],
};

static OBJECT: &[C] = &[
    C::new("object|freq", 3, &["readonly"], C::keys(2, 2, 1), |c, a| {
        run_sub_as::<ObjectNumber>(c, a, ObjectField::Freq)
    })
    .with_acl(&["@keyspace", "@read", "@slow"])
    .with_info(&OBJECT_KEY_INFO),
    C::new(
        "object|help",
        2,
        &["loading", "stale"],
        C::keys(0, 0, 0),
        run_sub::<ObjectHelp>,
    )
    .with_acl(&["@keyspace", "@slow"]),
    C::new(
        "object|refcount",
        3,
        &["readonly"],
        C::keys(2, 2, 1),
        |c, a| run_sub_as::<ObjectNumber>(c, a, ObjectField::RefCount),
    )
    .with_acl(&["@keyspace", "@read", "@slow"])
    .with_info(&OBJECT_KEY_INFO),
    C::new(
        "object|encoding",
        3,
        &["readonly"],
        C::keys(2, 2, 1),
        run_sub::<ObjectEncoding>,
    )
    .with_acl(&["@keyspace", "@read", "@slow"])
    .with_info(&OBJECT_KEY_INFO),
    C::new(
        "object|idletime",
        3,
        &["readonly"],
        C::keys(2, 2, 1),
        |c, a| run_sub_as::<ObjectNumber>(c, a, ObjectField::IdleTime),
    )
    .with_acl(&["@keyspace", "@read", "@slow"])
    .with_info(&OBJECT_KEY_INFO),
];

static MEMORY: &[C] = &[
    C::new(
        "memory|usage",
        -3,
        &["readonly"],
        C::keys(2, 2, 1),
        run_sub::<MemoryUsage>,
    ),
    C::new(
        "memory|help",
        2,
        &["loading", "stale"],
        C::keys(0, 0, 0),
        run_sub::<super::server::Help>,
    ),
];

/// DEL / UNLINK key [key …]
#[derive(Debug)]
pub struct Del {
    keys: Vec<Bytes>,
}

impl Command for Del {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Del {
            keys: a.rest().to_vec(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let n = self
            .keys
            .iter()
            .filter(|k| ctx.store.remove(db, k, ctx.now_ms).is_some())
            .count();
        Ok(Reply::Int(n as i64))
    }
}

/// `EXISTS key [key …]` (duplicates count each time); TOUCH too, whose reads mark the keys
/// accessed.
#[derive(Debug)]
pub struct Exists {
    keys: Vec<Bytes>,
}

impl Command for Exists {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Exists {
            keys: a.rest().to_vec(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let n = self
            .keys
            .iter()
            .filter(|k| ctx.store.read(db, k, ctx.now_ms).is_some())
            .count();
        Ok(Reply::Int(n as i64))
    }
}

/// EXPIRE (0), PEXPIRE (1), EXPIREAT (2), PEXPIREAT (3) key time [NX|XX|GT|LT]
#[derive(Debug)]
pub struct Expire {
    unit: (Precision, Time),
    key: Bytes,
    when: i64,
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

/// Whether a time argument or reply is relative to now (EXPIRE, TTL) or a Unix time
/// (EXPIREAT, EXPIRETIME).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Time {
    /// A duration from now.
    Relative,
    /// A Unix timestamp.
    Absolute,
}

impl Expire {
    fn name(&self) -> &'static str {
        match self.unit {
            (Precision::Seconds, Time::Relative) => "expire",
            (Precision::Millis, Time::Relative) => "pexpire",
            (Precision::Seconds, Time::Absolute) => "expireat",
            (Precision::Millis, Time::Absolute) => "pexpireat",
        }
    }
}

impl VariantCommand for Expire {
    type Variant = (Precision, Time);

    fn parse(a: &mut ArgCursor<'_>, unit: (Precision, Time)) -> CmdResult<Self> {
        let key = a.next()?.clone();
        let when = a.next()?.clone();
        let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
        for opt in a.rest() {
            match &opt.to_ascii_uppercase()[..] {
                b"NX" => nx = true,
                b"XX" => xx = true,
                b"GT" => gt = true,
                b"LT" => lt = true,
                _ => {
                    return Err(CmdError::owned(format!(
                        "ERR Unsupported option {}",
                        super::printable(opt, usize::MAX)
                    )));
                }
            }
        }
        if nx && (xx || gt || lt) {
            return Err(CmdError::msg(
                "ERR NX and XX, GT or LT options at the same time are not compatible",
            ));
        }
        if gt && lt {
            return Err(CmdError::msg(
                "ERR GT and LT options at the same time are not compatible",
            ));
        }
        let when = parse_i64(&when).ok_or(CmdError::NotInteger)?;
        Ok(Expire {
            unit,
            key,
            when,
            nx,
            xx,
            gt,
            lt,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let invalid = CmdError::InvalidExpire(self.name());
        let mut when = self.when;
        if self.unit.0 == Precision::Seconds {
            when = when.checked_mul(1000).ok_or(invalid.clone())?;
        }
        if self.unit.1 == Time::Relative {
            when = when.checked_add(ctx.now_ms as i64).ok_or(invalid)?;
        }
        let db = ctx.db();
        let Some(entry) = ctx.store.lookup(db, &self.key, ctx.now_ms) else {
            return Ok(Reply::Int(0));
        };
        let current = entry.expire_at().map(|t| t as i64);
        let refused = (self.nx && current.is_some())
            || (self.xx && current.is_none())
            || (self.gt && current.is_none_or(|c| when <= c))
            || (self.lt && current.is_some_and(|c| when >= c));
        if refused {
            return Ok(Reply::Int(0));
        }
        if when <= ctx.now_ms as i64 {
            ctx.store.remove(db, &self.key, ctx.now_ms);
        } else {
            ctx.store
                .set_expire(db, &self.key, Some(when as u64), ctx.now_ms);
        }
        Ok(Reply::Int(1))
    }
}

/// TTL, PTTL, EXPIRETIME, PEXPIRETIME key
#[derive(Debug)]
pub struct Ttl {
    unit: (Precision, Time),
    key: Bytes,
}

impl VariantCommand for Ttl {
    type Variant = (Precision, Time);

    fn parse(a: &mut ArgCursor<'_>, unit: (Precision, Time)) -> CmdResult<Self> {
        Ok(Ttl {
            unit,
            key: a.next()?.clone(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let Some(entry) = ctx.store.read(db, &self.key, ctx.now_ms) else {
            return Ok(Reply::Int(-2));
        };
        let Some(at) = entry.expire_at() else {
            return Ok(Reply::Int(-1));
        };
        let absolute = self.unit.1 == Time::Absolute;
        let ms = if absolute {
            at
        } else {
            at.saturating_sub(ctx.now_ms)
        } as i64;
        let millis = self.unit.0 == Precision::Millis;
        // Rounded in i128: a deadline near i64::MAX ms must not overflow (Redis answers the
        // rounded value there too).
        Ok(Reply::Int(if millis {
            ms
        } else {
            ((i128::from(ms) + 500) / 1000) as i64
        }))
    }
}

/// PERSIST key
#[derive(Debug)]
pub struct Persist {
    key: Bytes,
}

impl Command for Persist {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Persist {
            key: a.next()?.clone(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let has_ttl = ctx
            .store
            .lookup(db, &self.key, ctx.now_ms)
            .is_some_and(|e| e.expire_at().is_some());
        if has_ttl {
            ctx.store.set_expire(db, &self.key, None, ctx.now_ms);
        }
        Ok(Reply::Int(has_ttl as i64))
    }
}

/// TYPE key
#[derive(Debug)]
pub struct Type {
    key: Bytes,
}

impl Command for Type {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Type {
            key: a.next()?.clone(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let name = ctx
            .store
            .lookup(db, &self.key, ctx.now_ms)
            .map_or("none", |e| e.value.type_name());
        Ok(Reply::status(name))
    }
}

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
pub struct Keys {
    pattern: Bytes,
}

impl Command for Keys {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Keys {
            pattern: a.next()?.clone(),
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
pub struct Scan {
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
pub struct ScanCursor {
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
    pub fn encode(self) -> u64 {
        let gen_mask = (1u64 << CURSOR_GEN_BITS) - 1;
        let shard_mask = (1u64 << CURSOR_SHARD_BITS) - 1;
        let bucket_mask = (1u64 << CURSOR_BUCKET_BITS) - 1;
        ((u64::from(self.generation) & gen_mask) << (CURSOR_SHARD_BITS + CURSOR_BUCKET_BITS))
            | ((self.shard as u64 & shard_mask) << CURSOR_BUCKET_BITS)
            | (self.bucket as u64 & bucket_mask)
    }

    /// Decodes any number a client sends (unknown ones land somewhere harmless).
    pub fn decode(c: u64) -> ScanCursor {
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
pub fn parse_scan_options(
    a: &mut ArgCursor<'_>,
    allow_type: bool,
) -> CmdResult<(Option<Bytes>, usize, Option<String>)> {
    let (mut pattern, mut count, mut type_name) = (None, 10usize, None);
    while a.remaining() > 0 {
        if a.eat("MATCH") && a.remaining() > 0 {
            pattern = Some(a.next()?.clone());
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

impl Command for Scan {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let cursor = crate::cmd::args::parse_scan_cursor(a.next()?)?;
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
                own = Some(keyspace.lock_indexes(&[shard]));
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

/// Whether RENAME replaces an existing target (RENAME) or gives up (RENAMENX).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenameMode {
    /// RENAME.
    Overwrite,
    /// RENAMENX.
    IfTargetMissing,
}

/// RENAME / RENAMENX key newkey
#[derive(Debug)]
pub struct Rename {
    mode: RenameMode,
    from: Bytes,
    to: Bytes,
}

impl VariantCommand for Rename {
    type Variant = RenameMode;

    fn parse(a: &mut ArgCursor<'_>, mode: RenameMode) -> CmdResult<Self> {
        Ok(Rename {
            mode,
            from: a.next()?.clone(),
            to: a.next()?.clone(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let now = ctx.now_ms;
        let nx = self.mode == RenameMode::IfTargetMissing;
        if !ctx.store.exists(db, &self.from, now) {
            return Err(CmdError::NoSuchKey);
        }
        if self.from == self.to {
            return Ok(if nx { Reply::Int(0) } else { Reply::ok() });
        }
        if nx && ctx.store.exists(db, &self.to, now) {
            return Ok(Reply::Int(0));
        }
        let Some(entry) = ctx.store.remove(db, &self.from, now) else {
            return Err(CmdError::NoSuchKey);
        };
        let expire = entry.expire_at();
        ctx.store.set(db, &self.to, entry.value, expire);
        Ok(if nx { Reply::Int(1) } else { Reply::ok() })
    }
}

/// RANDOMKEY
#[derive(Debug)]
pub struct RandomKey;

impl Command for RandomKey {
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

/// DBSIZE
#[derive(Debug)]
pub struct DbSize;

impl Command for DbSize {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(DbSize)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        // Redis counts keys not yet reaped too; so do we (the reaper keeps that small).
        let db = ctx.db();
        let n: usize = ctx.store.shards_mut().map(|s| s.db(db).len()).sum();
        Ok(Reply::Int(n as i64))
    }
}

/// FLUSHDB / FLUSHALL [ASYNC|SYNC]
#[derive(Debug)]
pub struct Flush {
    scope: FlushScope,
}

/// What a flush empties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushScope {
    /// FLUSHDB: the client's database.
    Db,
    /// FLUSHALL: every database.
    All,
}

impl VariantCommand for Flush {
    type Variant = FlushScope;

    fn parse(a: &mut ArgCursor<'_>, scope: FlushScope) -> CmdResult<Self> {
        if a.remaining() > 1 || (a.remaining() == 1 && !a.eat("ASYNC") && !a.eat("SYNC")) {
            return Err(CmdError::Syntax);
        }
        Ok(Flush { scope })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        for shard in ctx.store.shards_mut() {
            if self.scope == FlushScope::All {
                for d in 0..shard.databases() {
                    shard.flush_db(d);
                }
            } else {
                shard.flush_db(db);
            }
        }
        Ok(Reply::ok())
    }
}

/// Redis reads database indexes as a C `int`: an integer outside its range fails with `msg`
/// (Redis's generic range error when there is none).
fn int_arg(b: &[u8], msg: Option<&'static str>) -> CmdResult<i64> {
    let n = parse_i64(b).ok_or(msg.map_or(CmdError::NotInteger, CmdError::msg))?;
    if i32::try_from(n).is_err() {
        return Err(msg.map_or(
            CmdError::msg(
                "ERR value is out of range, value must between -2147483648 and 2147483647",
            ),
            CmdError::msg,
        ));
    }
    Ok(n)
}

/// Parses a database index for SELECT ("not an integer", then "out of range").
fn db_index(ctx: &Ctx<'_>, n: i64) -> CmdResult<usize> {
    let dbs = ctx.shared.keyspace.databases();
    if n < 0 || n as usize >= dbs {
        return Err(CmdError::DbIndexOutOfRange);
    }
    Ok(n as usize)
}

/// SELECT index
#[derive(Debug)]
pub struct Select {
    index: i64,
}

impl Command for Select {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Select {
            index: int_arg(a.next()?, None)?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if ctx.shared.cluster.is_some() && self.index != 0 {
            return Err(CmdError::msg("ERR SELECT is not allowed in cluster mode"));
        }
        let db = db_index(ctx, self.index)?;
        ctx.client.set_db(db);
        Ok(Reply::ok())
    }
}

/// SWAPDB index index
#[derive(Debug)]
pub struct SwapDb {
    a: i64,
    b: i64,
}

impl Command for SwapDb {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let first = int_arg(a.next()?, Some("ERR invalid first DB index"))?;
        let second = int_arg(a.next()?, Some("ERR invalid second DB index"))?;
        Ok(SwapDb {
            a: first,
            b: second,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if ctx.shared.cluster.is_some() {
            return Err(CmdError::msg("ERR SWAPDB is not allowed in cluster mode"));
        }
        let a = db_index(ctx, self.a)?;
        let b = db_index(ctx, self.b)?;
        if a != b {
            for shard in ctx.store.shards_mut() {
                shard.swap_dbs(a, b);
            }
        }
        Ok(Reply::ok())
    }
}

/// OBJECT ENCODING key
#[derive(Debug)]
pub struct ObjectEncoding {
    key: Bytes,
}

impl Command for ObjectEncoding {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ObjectEncoding {
            key: a.next()?.clone(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        Ok(match ctx.store.lookup(db, &self.key, ctx.now_ms) {
            None => Reply::Null,
            Some(e) => Reply::bulk(e.value.encoding().as_bytes()),
        })
    }
}

/// OBJECT IDLETIME / REFCOUNT / FREQ key
#[derive(Debug)]
pub struct ObjectNumber {
    field: ObjectField,
    key: Bytes,
}

/// Which number OBJECT reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectField {
    /// OBJECT IDLETIME: seconds since the last access.
    IdleTime,
    /// OBJECT REFCOUNT: Redis's shared-integer answer, else 1.
    RefCount,
    /// OBJECT FREQ: needs an LFU policy, which sluice does not have.
    Freq,
}

impl VariantCommand for ObjectNumber {
    type Variant = ObjectField;

    fn parse(a: &mut ArgCursor<'_>, field: ObjectField) -> CmdResult<Self> {
        Ok(ObjectNumber {
            field,
            key: a.next()?.clone(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let Some(e) = ctx.store.lookup_untouched(db, &self.key, ctx.now_ms) else {
            return Ok(Reply::Null);
        };
        Ok(match self.field {
            ObjectField::IdleTime => Reply::Int((e.idle_ms(ctx.now_ms) / 1000) as i64),
            ObjectField::RefCount => Reply::Int(match e.value {
                Value::Int(n) if (0..10000).contains(&n) => i32::MAX as i64,
                _ => 1,
            }),
            ObjectField::Freq => {
                return Err(CmdError::msg(
                    "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
                ));
            }
        })
    }
}

/// MEMORY USAGE key [SAMPLES n]
#[derive(Debug)]
pub struct MemoryUsage {
    key: Bytes,
}

impl Command for MemoryUsage {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next()?.clone();
        // As Redis: SAMPLES may repeat; a negative count is a syntax error.
        while a.remaining() > 0 {
            if a.remaining() >= 2 && a.eat("SAMPLES") {
                if a.next_i64()? < 0 {
                    return Err(CmdError::Syntax);
                }
            } else {
                return Err(CmdError::Syntax);
            }
        }
        Ok(MemoryUsage { key })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        Ok(match ctx.store.lookup(db, &self.key, ctx.now_ms) {
            None => Reply::Null,
            Some(e) => Reply::Int(e.memory_usage() as i64),
        })
    }
}

/// `COPY source destination [DB destination-db] [REPLACE]`
///
/// The destination is the same key bytes' shard whatever its database, so the table's two
/// key positions cover it.
#[derive(Debug)]
pub struct Copy {
    src: Bytes,
    dst: Bytes,
    options: Vec<Bytes>,
}

impl Command for Copy {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Copy {
            src: a.next()?.clone(),
            dst: a.next()?.clone(),
            options: a.rest().to_vec(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let src_db = ctx.db();
        let (mut dst_db, mut replace) = (src_db, false);
        // Redis's order: each option in turn, a DB index checked (range included) where it
        // stands, so it fails before a later syntax error.
        let mut a = ArgCursor::new(&self.options);
        while a.remaining() > 0 {
            if a.eat("REPLACE") {
                replace = true;
            } else if a.remaining() >= 2 && a.eat("DB") {
                dst_db = db_index(ctx, int_arg(a.next()?, None)?)?;
            } else {
                return Err(CmdError::Syntax);
            }
        }
        if ctx.shared.cluster.is_some() && (src_db != 0 || dst_db != 0) {
            return Err(CmdError::msg(
                "ERR Copying to another database is not allowed in cluster mode",
            ));
        }
        if src_db == dst_db && self.src == self.dst {
            return Err(same_object());
        }
        let now = ctx.now_ms;
        let Some(entry) = ctx.store.lookup(src_db, &self.src, now) else {
            return Ok(Reply::Int(0));
        };
        let (value, expire) = (entry.value.clone(), entry.expire_at());
        if ctx.store.exists(dst_db, &self.dst, now) {
            if !replace {
                return Ok(Reply::Int(0));
            }
            ctx.store.remove(dst_db, &self.dst, now);
        }
        ctx.store.set(dst_db, &self.dst, value, expire);
        Ok(Reply::Int(1))
    }
}

fn same_object() -> CmdError {
    CmdError::msg("ERR source and destination objects are the same")
}

/// `MOVE key db`
#[derive(Debug)]
pub struct Move {
    key: Bytes,
    db: Bytes,
}

impl Command for Move {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Move {
            key: a.next()?.clone(),
            db: a.next()?.clone(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if ctx.shared.cluster.is_some() {
            return Err(CmdError::msg("ERR MOVE is not allowed in cluster mode"));
        }
        let src_db = ctx.db();
        let dst_db = db_index(ctx, int_arg(&self.db, None)?)?;
        if src_db == dst_db {
            return Err(same_object());
        }
        let now = ctx.now_ms;
        if !ctx.store.exists(src_db, &self.key, now) || ctx.store.exists(dst_db, &self.key, now) {
            return Ok(Reply::Int(0));
        }
        let Some(entry) = ctx.store.remove(src_db, &self.key, now) else {
            return Ok(Reply::Int(0));
        };
        let expire = entry.expire_at();
        ctx.store.set(dst_db, &self.key, entry.value, expire);
        Ok(Reply::Int(1))
    }
}

/// `WAIT numreplicas timeout`: sluice has no replicas, so it answers 0 at once (Redis, with
/// none, answers 0 once the timeout passes, or blocks forever for timeout 0).
#[derive(Debug)]
pub struct Wait;

impl Command for Wait {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        parse_i64(a.next()?).ok_or(CmdError::NotInteger)?;
        let t = parse_i64(a.next()?).ok_or(CmdError::msg(
            "ERR timeout is not an integer or out of range",
        ))?;
        if t < 0 {
            return Err(CmdError::msg("ERR timeout is negative"));
        }
        Ok(Wait)
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Int(0))
    }
}

/// OBJECT HELP: Redis 7.0's text.
#[derive(Debug)]
pub struct ObjectHelp;

impl Command for ObjectHelp {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ObjectHelp)
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        const LINES: &[&str] = &[
            "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
            "HELP",
            "    Prints this help.",
        ];
        Ok(Reply::Array(
            LINES.iter().map(|l| Reply::status(l)).collect(),
        ))
    }
}
