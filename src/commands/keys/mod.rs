//! Generic key commands: the table of every one of them, and the small ones (DEL, UNLINK,
//! EXISTS, TOUCH, TYPE, WAIT) here; the rest by concern: `expire` (a key's lifetime), `scan`
//! (KEYS, SCAN, RANDOMKEY), `rename` (RENAME, COPY, MOVE), `db` (DBSIZE, FLUSH*, SELECT,
//! SWAPDB), `object` (OBJECT, MEMORY USAGE).

mod db;
pub(crate) mod expire;
mod object;
mod rename;
mod scan;

use crate::services::notify::class;
use db::{DbSize, Flush, FlushScope, Select, SwapDb};
use expire::{Expire, Persist, Time, Ttl};
use object::{MEMORY, OBJECT};
use rename::{Copy, Move, Rename, RenameMode};
pub(crate) use scan::parse_scan_options;
use scan::{Keys, RandomKey, Scan};

use bytes::Bytes;

use crate::commands::strings::Precision;
use crate::engine::{
    ArgCursor, Command, CommandSpec as C, Ctx, FindKeys, InfoDoc, KeySpecDoc, run, run_as,
};
use crate::error::{CmdError, CmdResult};
use crate::num::parse_i64;
use crate::protocol::Reply;

/// The key commands.
pub(crate) static COMMANDS: &[C] = &[
    C::new("del", -2, &["write"], C::keys(1, -1, 1), run::<Del>)
        .with_acl(&["@keyspace", "@write", "@slow"])
        .with_tips(&["request_policy:multi_shard", "response_policy:agg_sum"])
        .with_key_flags(&["RM", "delete"]),
    C::new(
        "unlink",
        -2,
        &["write", "fast"],
        C::keys(1, -1, 1),
        run::<Unlink>,
    )
    .with_acl(&["@keyspace", "@write", "@fast"])
    .with_tips(&["request_policy:multi_shard", "response_policy:agg_sum"])
    .with_key_flags(&["RM", "delete"]),
    C::new(
        "exists",
        -2,
        &["readonly", "fast"],
        C::keys(1, -1, 1),
        run::<Exists>,
    )
    .with_acl(&["@keyspace", "@read", "@fast"])
    .with_tips(&["request_policy:multi_shard", "response_policy:agg_sum"])
    .with_key_flags(&["RO"]),
    C::new(
        "expire",
        -3,
        &["write", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<Expire>(c, a, (Precision::Seconds, Time::Relative)),
    )
    .with_effect(crate::repl::effects::Effect::ExpireIfSet)
    .with_acl(&["@keyspace", "@write", "@fast"]),
    C::new(
        "pexpire",
        -3,
        &["write", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<Expire>(c, a, (Precision::Millis, Time::Relative)),
    )
    .with_effect(crate::repl::effects::Effect::ExpireIfSet)
    .with_acl(&["@keyspace", "@write", "@fast"]),
    C::new(
        "expireat",
        -3,
        &["write", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<Expire>(c, a, (Precision::Seconds, Time::Absolute)),
    )
    .with_effect(crate::repl::effects::Effect::ExpireIfSet)
    .with_acl(&["@keyspace", "@write", "@fast"]),
    C::new(
        "pexpireat",
        -3,
        &["write", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<Expire>(c, a, (Precision::Millis, Time::Absolute)),
    )
    .with_effect(crate::repl::effects::Effect::ExpireIfSet)
    .with_acl(&["@keyspace", "@write", "@fast"]),
    C::new("ttl", 2, &["readonly", "fast"], C::keys(1, 1, 1), |c, a| {
        run_as::<Ttl>(c, a, (Precision::Seconds, Time::Relative))
    })
    .with_acl(&["@keyspace", "@read", "@fast"])
    .with_tips(&["nondeterministic_output"]),
    C::new(
        "pttl",
        2,
        &["readonly", "fast"],
        C::keys(1, 1, 1),
        |c, a| run_as::<Ttl>(c, a, (Precision::Millis, Time::Relative)),
    )
    .with_acl(&["@keyspace", "@read", "@fast"])
    .with_tips(&["nondeterministic_output"]),
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
    .with_acl(&["@keyspace", "@read", "@fast"])
    .with_key_flags(&["RO"]),
    C::new("keys", 2, &["readonly"], C::keys(0, 0, 0), run::<Keys>)
        .whole_keyspace()
        .with_acl(&["@keyspace", "@read", "@slow", "@dangerous"])
        .with_tips(&["request_policy:all_shards", "nondeterministic_output_order"]),
    C::new("scan", -2, &["readonly"], C::keys(0, 0, 0), run::<Scan>)
        .stepwise()
        .with_acl(&["@keyspace", "@read", "@slow"])
        .with_tips(&["nondeterministic_output", "request_policy:special"]),
    C::new("rename", 3, &["write"], C::keys(1, 2, 1), |c, a| {
        run_as::<Rename>(c, a, RenameMode::Overwrite)
    })
    .with_acl(&["@keyspace", "@write", "@slow"])
    .with_key_specs(&[
        KeySpecDoc::range(&["RW", "access", "delete"], 1, 0),
        KeySpecDoc::range(&["OW", "update"], 2, 0),
    ]),
    C::new(
        "renamenx",
        3,
        &["write", "fast"],
        C::keys(1, 2, 1),
        |c, a| run_as::<Rename>(c, a, RenameMode::IfTargetMissing),
    )
    .with_acl(&["@keyspace", "@write", "@fast"])
    .with_key_specs(&[
        KeySpecDoc::range(&["RW", "access", "delete"], 1, 0),
        KeySpecDoc::range(&["OW", "insert"], 2, 0),
    ]),
    C::new(
        "randomkey",
        1,
        &["readonly"],
        C::keys(0, 0, 0),
        run::<RandomKey>,
    )
    .whole_keyspace()
    .with_acl(&["@keyspace", "@read", "@slow"])
    .with_tips(&["request_policy:all_shards", "nondeterministic_output"]),
    C::new(
        "dbsize",
        1,
        &["readonly", "fast"],
        C::keys(0, 0, 0),
        run::<DbSize>,
    )
    .whole_keyspace()
    .with_acl(&["@keyspace", "@read", "@fast"])
    .with_tips(&["request_policy:all_shards", "response_policy:agg_sum"]),
    C::new("flushdb", -1, &["write"], C::keys(0, 0, 0), |c, a| {
        run_as::<Flush>(c, a, FlushScope::Db)
    })
    .whole_keyspace()
    .with_acl(&["@keyspace", "@write", "@slow", "@dangerous"])
    .with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    C::new("flushall", -1, &["write"], C::keys(0, 0, 0), |c, a| {
        run_as::<Flush>(c, a, FlushScope::All)
    })
    .whole_keyspace()
    .with_acl(&["@keyspace", "@write", "@slow", "@dangerous"])
    .with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    C::new(
        "select",
        2,
        &["loading", "stale", "fast"],
        C::keys(0, 0, 0),
        run::<Select>,
    )
    .with_roles(crate::engine::Roles::SELECTS_DB)
    .with_acl(&["@fast", "@connection"]),
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
        // TOUCH counts the keys that exist, each read marking its key accessed.
        run::<Touch>,
    )
    .with_acl(&["@keyspace", "@read", "@fast"])
    .with_info(&InfoDoc {
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        key_specs: &[KeySpecDoc {
            notes: None,
            flags: &["RO"],
            begin: Some(1),
            keyword: None,
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
                keyword: None,
                find: FindKeys::Range(0, 1, 0),
            },
            KeySpecDoc {
                notes: None,
                flags: &["OW", "update"],
                begin: Some(2),
                keyword: None,
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
                keyword: None,
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
        run::<crate::commands::server::Help>,
    )
    .with_acl(&["@slow"])
    .with_subcommands(OBJECT),
    C::new(
        "memory",
        -2,
        &[],
        C::keys(0, 0, 0),
        run::<crate::commands::server::Help>,
    )
    .with_subcommands(MEMORY)
    .with_acl(&["@slow"]),
];

/// DEL / UNLINK key [key …]
#[derive(Debug)]
pub(crate) struct Del {
    keys: Vec<Bytes>,
}

impl Command<'_> for Del {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Del {
            keys: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let mut n = 0;
        for k in &self.keys {
            if ctx.store.remove(db, k, ctx.now_ms).is_some() {
                ctx.notify(class::GENERIC, "del", k);
                n += 1;
            }
        }
        Ok(Reply::Int(n))
    }
}

/// UNLINK key [key …]: DEL whose large values are freed on the lazyfree thread
/// (`services::lazyfree`).
#[derive(Debug)]
pub(crate) struct Unlink {
    keys: Vec<Bytes>,
}

impl Command<'_> for Unlink {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Unlink {
            keys: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let mut n = 0;
        for k in &self.keys {
            if let Some(entry) = ctx.store.remove(db, k, ctx.now_ms) {
                ctx.shared.lazyfree.free(entry.value);
                ctx.notify(class::GENERIC, "del", k);
                n += 1;
            }
        }
        Ok(Reply::Int(n))
    }
}

/// `EXISTS key [key …]` (duplicates count each time): the keys' access times are left
/// alone, as Redis's LOOKUP_NOTOUCH does.
#[derive(Debug)]
pub(crate) struct Exists {
    keys: Vec<Bytes>,
}

impl Command<'_> for Exists {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Exists {
            keys: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        let n = self
            .keys
            .iter()
            .filter(|k| ctx.store.read_untouched(db, k, ctx.now_ms).is_some())
            .count();
        Ok(Reply::Int(n as i64))
    }
}

/// `TOUCH key [key …]`: EXISTS whose reads mark the keys accessed.
#[derive(Debug)]
pub(crate) struct Touch {
    keys: Vec<Bytes>,
}

impl Command<'_> for Touch {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Touch {
            keys: crate::engine::args::owned(a.rest()),
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

/// TYPE key
#[derive(Debug)]
pub(crate) struct Type {
    key: Bytes,
}

impl Command<'_> for Type {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Type {
            key: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let db = ctx.db();
        // A read lookup that leaves the access time alone, as Redis's (LOOKUP_NOTOUCH): it
        // counts a keyspace hit or miss, and a missing key is a `keymiss`.
        let name = ctx
            .store
            .read_untouched(db, &self.key, ctx.now_ms)
            .map_or("none", |e| e.value.type_name());
        Ok(Reply::status(name))
    }
}

/// `WAIT numreplicas timeout`: the number of replicas that acknowledged every write made
/// so far. If fewer than asked, the connection waits (see `repl::master::wait`) until
/// enough do or the timeout (ms, 0 = none) passes; inside MULTI or a script it answers at
/// once. Replicas are asked to acknowledge at once (REPLCONF GETACK in the stream).
#[derive(Debug)]
pub(crate) struct Wait {
    replicas: i64,
    timeout: i64,
}

impl Command<'_> for Wait {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let replicas = parse_i64(a.next()?).ok_or(CmdError::NotInteger)?;
        let timeout = parse_i64(a.next()?).ok_or(CmdError::msg(
            "ERR timeout is not an integer or out of range",
        ))?;
        if timeout < 0 {
            return Err(CmdError::msg("ERR timeout is negative"));
        }
        Ok(Wait { replicas, timeout })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let repl = &ctx.shared.repl;
        if repl.is_replica() {
            return Err(CmdError::msg(
                "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.",
            ));
        }
        let offset = repl.written_offset();
        let acked = repl.acked_at_least(offset) as i64;
        if acked >= self.replicas || !ctx.may_block {
            return Ok(Reply::Int(acked));
        }
        repl.request_acks();
        ctx.next = crate::engine::Next::WaitAcks {
            replicas: self.replicas.max(0) as u64,
            timeout_ms: self.timeout as u64,
            offset,
        };
        Ok(Reply::Int(acked))
    }
}
