//! What a key's value is made of: OBJECT (ENCODING, IDLETIME, REFCOUNT, FREQ, HELP) and
//! MEMORY USAGE.

use bytes::Bytes;

use crate::engine::{
    ArgCursor, Command, CommandSpec as C, Ctx, FindKeys, InfoDoc, KeySpecDoc, VariantCommand,
    run_sub, run_sub_as,
};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::store::Value;

/// What COMMAND INFO reports for OBJECT's key subcommands.
static OBJECT_KEY_INFO: InfoDoc = InfoDoc {
    tips: &["nondeterministic_output"],
    key_specs: &[KeySpecDoc {
        notes: None,
        flags: &["RO"],
        begin: Some(2),
        keyword: None,
        find: FindKeys::Range(0, 1, 0),
    }],
};

pub(super) static OBJECT: &[C] = &[
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

/// COMMAND INFO's tips of MEMORY's reports, as Redis 7.0.15 gives them.
const MEMORY_REPORT_TIPS: &[&str] = &[
    "nondeterministic_output",
    "request_policy:all_shards",
    "response_policy:special",
];

pub(super) static MEMORY: &[C] = &[
    C::new(
        "memory|usage",
        -3,
        &["readonly"],
        C::keys(2, 2, 1),
        run_sub::<MemoryUsage>,
    )
    .with_acl(&["@read", "@slow"])
    .with_key_flags(&["RO"]),
    C::new(
        "memory|stats",
        2,
        &[],
        C::keys(0, 0, 0),
        run_sub::<crate::commands::memory::MemoryStats>,
    )
    .whole_keyspace()
    .with_acl(&["@slow"])
    .with_tips(MEMORY_REPORT_TIPS),
    C::new(
        "memory|doctor",
        2,
        &[],
        C::keys(0, 0, 0),
        run_sub::<crate::commands::memory::MemoryDoctor>,
    )
    .whole_keyspace()
    .with_acl(&["@slow"])
    .with_tips(MEMORY_REPORT_TIPS),
    C::new(
        "memory|malloc-stats",
        2,
        &[],
        C::keys(0, 0, 0),
        run_sub::<crate::commands::memory::MemoryMallocStats>,
    )
    .with_acl(&["@slow"])
    .with_tips(MEMORY_REPORT_TIPS),
    C::new(
        "memory|purge",
        2,
        &[],
        C::keys(0, 0, 0),
        run_sub::<crate::commands::memory::MemoryPurge>,
    )
    .with_acl(&["@slow"])
    .with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    C::new(
        "memory|help",
        2,
        &["loading", "stale"],
        C::keys(0, 0, 0),
        run_sub::<crate::commands::memory::MemoryHelp>,
    )
    .with_acl(&["@slow"]),
];

/// OBJECT ENCODING key
#[derive(Debug)]
pub(super) struct ObjectEncoding {
    key: Bytes,
}

impl Command<'_> for ObjectEncoding {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ObjectEncoding {
            key: a.next_owned()?,
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
pub(super) struct ObjectNumber {
    field: ObjectField,
    key: Bytes,
}

/// Which number OBJECT reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ObjectField {
    /// OBJECT IDLETIME: seconds since the last access.
    IdleTime,
    /// OBJECT REFCOUNT: Redis's shared-integer answer, else 1.
    RefCount,
    /// OBJECT FREQ: needs an LFU policy, which sluice does not have.
    Freq,
}

impl VariantCommand<'_> for ObjectNumber {
    type Variant = ObjectField;

    fn parse(a: &mut ArgCursor<'_>, field: ObjectField) -> CmdResult<Self> {
        Ok(ObjectNumber {
            field,
            key: a.next_owned()?,
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
pub(super) struct MemoryUsage {
    key: Bytes,
}

impl Command<'_> for MemoryUsage {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next_owned()?;
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

/// OBJECT HELP: Redis 7.0's text.
#[derive(Debug)]
pub(super) struct ObjectHelp;

impl Command<'_> for ObjectHelp {
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
