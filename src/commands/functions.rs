//! Redis 7 functions: FUNCTION LOAD | LIST | DELETE | FLUSH | DUMP | RESTORE | STATS | KILL |
//! HELP, and FCALL / FCALL_RO.
//!
//! The registry and the Lua side live in `crate::script::functions`; this module parses the
//! commands, shapes the replies, and runs a function the way `scripting` runs an EVAL script
//! (every shard held, one frozen `now`, the same host and `-BUSY` gate), with the function's
//! flags: `no-writes` makes it read-only, `allow-oom` lets it run and write past maxmemory,
//! `no-cluster` refuses it in cluster mode.

use bytes::Bytes;

use crate::commands::scripting::{RunAs, run_locked};
use crate::engine::{Access, ArgCursor, CommandSpec as C, Ctx, KeySpec, VariantCommand, run_sub};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::script::KillOutcome;
use crate::script::functions::RestorePolicy;

const FCALL_FLAGS: &[&str] = &[
    "noscript",
    "skip_monitor",
    "no_mandatory_keys",
    "stale",
    "movablekeys",
];
const FCALL_RO_FLAGS: &[&str] = &[
    "noscript",
    "skip_monitor",
    "no_mandatory_keys",
    "stale",
    "readonly",
    "movablekeys",
];

/// FCALL's key spec; the notes are EVAL's, as in Redis.
const fn keynum(flags: &'static [&'static str], notes: Option<&'static str>) -> KeySpec {
    KeySpec::Keynum {
        begin: 2,
        keynumidx: 0,
        firstkey: 1,
        step: 1,
        flags,
        notes,
    }
}

/// FCALL and FCALL_RO.
pub(crate) static COMMANDS: &[C] = &[
    C::new(
        "fcall",
        -3,
        FCALL_FLAGS,
        keynum(
            &["RW", "access", "update"],
            crate::commands::scripting::RW_NOTES,
        ),
        |c, a| fcall(c, a, Access::ReadWrite),
    )
    .with_roles(crate::engine::Roles::MAY_REPLICATE.union(crate::engine::Roles::FCALL))
    .with_effect(crate::repl::effects::Effect::Inner)
    .with_acl(&["@slow", "@scripting"]),
    C::new(
        "fcall_ro",
        -3,
        FCALL_RO_FLAGS,
        keynum(&["RO", "access"], crate::commands::scripting::RO_NOTES),
        |c, a| fcall(c, a, Access::ReadOnly),
    )
    .with_roles(crate::engine::Roles::FCALL)
    .with_effect(crate::repl::effects::Effect::Inner)
    .with_acl(&["@slow", "@scripting"]),
];

/// FUNCTION's subcommands.
pub(crate) static FUNCTION: &[C] = &[
    C::new(
        "function|load",
        -3,
        &["write", "denyoom", "noscript"],
        KeySpec::None,
        run_sub::<FunctionLoad>,
    )
    .with_acl(&["@write", "@slow", "@scripting"])
    .with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    C::new(
        "function|delete",
        3,
        &["write", "noscript"],
        KeySpec::None,
        run_sub::<FunctionDelete>,
    )
    .with_acl(&["@write", "@slow", "@scripting"])
    .with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    C::new(
        "function|flush",
        -2,
        &["write", "noscript"],
        KeySpec::None,
        function_flush,
    )
    .with_acl(&["@write", "@slow", "@scripting"])
    .with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    C::new(
        "function|list",
        -2,
        &["noscript"],
        KeySpec::None,
        run_sub::<FunctionList>,
    )
    .with_acl(&["@slow", "@scripting"])
    .with_tips(&["nondeterministic_output_order"]),
    C::new(
        "function|dump",
        2,
        &["noscript"],
        KeySpec::None,
        run_sub::<FunctionDump>,
    )
    .with_acl(&["@slow", "@scripting"]),
    C::new(
        "function|restore",
        -3,
        &["write", "denyoom", "noscript"],
        KeySpec::None,
        function_restore,
    )
    .with_acl(&["@write", "@slow", "@scripting"])
    .with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    C::new(
        "function|stats",
        2,
        &["noscript", "allow_busy"],
        KeySpec::None,
        run_sub::<FunctionStats>,
    )
    .with_acl(&["@slow", "@scripting"])
    .with_tips(&[
        "nondeterministic_output",
        "request_policy:all_shards",
        "response_policy:special",
    ]),
    C::new(
        "function|kill",
        2,
        &["noscript", "allow_busy"],
        KeySpec::None,
        run_sub::<FunctionKill>,
    )
    .with_acl(&["@slow", "@scripting"])
    .with_tips(&["request_policy:all_shards", "response_policy:one_succeeded"]),
    C::new(
        "function|help",
        2,
        &["loading", "stale"],
        KeySpec::None,
        run_sub::<FunctionHelp>,
    )
    .with_acl(&["@slow", "@scripting"]),
];

/// FCALL / FCALL_RO's rows: `run_as`, keeping the command's name as the client sent it for
/// FUNCTION STATS (a test matches it to decide when to send FUNCTION KILL).
fn fcall(ctx: &mut Ctx<'_>, args: &[&[u8]], access: Access) -> Reply {
    let mut a = ArgCursor::new(args.get(1..).unwrap_or(&[]));
    let parsed = Fcall::parse(&mut a, access).and_then(|f| a.finish().map(|()| f));
    match parsed.and_then(|mut f| {
        f.sent = Bytes::copy_from_slice(args[0]);
        f.apply(ctx)
    }) {
        Ok(r) => r,
        Err(e) => e.into(),
    }
}

/// FCALL / FCALL_RO function numkeys [key …] [arg …]
#[derive(Debug)]
pub(crate) struct Fcall {
    /// The command's name as sent.
    sent: Bytes,
    access: Access,
    name: Bytes,
    numkeys: Bytes,
    rest: Vec<Bytes>,
}

impl VariantCommand<'_> for Fcall {
    type Variant = Access;
    fn parse(a: &mut ArgCursor<'_>, access: Access) -> CmdResult<Self> {
        let name = a.next_owned()?;
        let numkeys = a.next_owned()?;
        Ok(Fcall {
            sent: Bytes::from_static(b"FCALL"),
            access,
            name,
            numkeys,
            rest: crate::engine::args::owned(a.rest()),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let scripts = &ctx.shared.scripts;
        // Redis looks the function up before it reads numkeys.
        let (lib, index) = scripts
            .function_get(&self.name)
            .ok_or(CmdError::msg("ERR Function not found"))?;
        let numkeys = std::str::from_utf8(&self.numkeys)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .ok_or(CmdError::msg("ERR Bad number of keys provided"))?;
        if numkeys < 0 {
            return Err(CmdError::msg("ERR Number of keys can't be negative"));
        }
        if numkeys as u64 > self.rest.len() as u64 {
            return Err(CmdError::msg(
                "ERR Number of keys can't be greater than number of args",
            ));
        }
        let Some(info) = lib.functions.get(index) else {
            return Err(CmdError::msg("ERR Function not found"));
        };
        let flags = info.flags;
        let read_only = self.access == Access::ReadOnly;
        if read_only && !flags.no_writes {
            return Err(CmdError::msg(
                "ERR Can not execute a script with write flag using *_ro command.",
            ));
        }
        if flags.no_cluster && ctx.shared.cluster.is_some() {
            return Err(CmdError::msg(
                "ERR Can not run script on cluster, 'no-cluster' flag is set.",
            ));
        }
        crate::commands::scripting::refuse_declared_writer(ctx, !flags.no_writes, flags.allow_oom)?;
        let (keys, argv) = self.rest.split_at(numkeys as usize);
        let mut command = Vec::with_capacity(self.rest.len() + 3);
        command.push(self.sent.clone());
        command.push(self.name.clone());
        command.push(self.numkeys.clone());
        command.extend(self.rest.iter().cloned());
        let how = RunAs {
            read_only: read_only || flags.no_writes,
            allow_oom: flags.allow_oom,
            function: Some((info.name.clone(), command)),
            slot: crate::commands::cluster::script_slot(
                ctx.shared,
                &crate::engine::args::borrowed(keys),
            ),
            cross_slot_ok: flags.allow_cross_slot_keys,
        };
        let memo = format!("f:{}", info.name);
        Ok(run_locked(ctx, how, &memo, |scripts, host| {
            scripts.run_function(
                &lib,
                index,
                &crate::engine::args::borrowed(keys),
                &crate::engine::args::borrowed(argv),
                host,
            )
        }))
    }
}

/// `FUNCTION LOAD [REPLACE] code`
#[derive(Debug)]
pub(crate) struct FunctionLoad {
    replace: bool,
    code: Bytes,
}

impl crate::engine::Command<'_> for FunctionLoad {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let mut replace = false;
        while a.remaining() > 1 {
            let opt = a.next()?;
            if opt.eq_ignore_ascii_case(b"replace") {
                replace = true;
            } else {
                return Err(CmdError::owned(format!(
                    "ERR Unknown option given: {}",
                    String::from_utf8_lossy(opt)
                )));
            }
        }
        Ok(FunctionLoad {
            replace,
            code: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let name = ctx
            .shared
            .scripts
            .function_load(&self.code, self.replace)
            .map_err(CmdError::owned)?;
        Ok(Reply::Bulk(Bytes::from(name)))
    }
}

/// FUNCTION DELETE library
#[derive(Debug)]
pub(crate) struct FunctionDelete {
    name: Bytes,
}

impl crate::engine::Command<'_> for FunctionDelete {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(FunctionDelete {
            name: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if ctx.shared.scripts.function_delete(&self.name) {
            Ok(Reply::ok())
        } else {
            Err(CmdError::msg("ERR Library not found"))
        }
    }
}

/// `FUNCTION FLUSH [ASYNC|SYNC]`
#[derive(Debug)]
pub(crate) struct FunctionFlush;

impl crate::engine::Command<'_> for FunctionFlush {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        match a.rest() {
            [] => Ok(FunctionFlush),
            [mode] if mode.eq_ignore_ascii_case(b"async") || mode.eq_ignore_ascii_case(b"sync") => {
                Ok(FunctionFlush)
            }
            [_] => Err(CmdError::msg(
                "ERR FUNCTION FLUSH only supports SYNC|ASYNC option",
            )),
            // Too many arguments: `function_flush` answered before parsing.
            _ => Err(CmdError::Syntax),
        }
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        ctx.shared.scripts.function_flush();
        Ok(Reply::ok())
    }
}

/// `FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]`
#[derive(Debug)]
pub(crate) struct FunctionList {
    pattern: Option<Bytes>,
    with_code: bool,
}

impl crate::engine::Command<'_> for FunctionList {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let mut out = FunctionList {
            pattern: None,
            with_code: false,
        };
        while a.remaining() > 0 {
            let opt = a.next()?;
            if opt.eq_ignore_ascii_case(b"withcode") && !out.with_code {
                out.with_code = true;
            } else if opt.eq_ignore_ascii_case(b"libraryname") && out.pattern.is_none() {
                if a.remaining() == 0 {
                    return Err(CmdError::msg("ERR library name argument was not given"));
                }
                out.pattern = Some(a.next_owned()?);
            } else {
                return Err(CmdError::owned(format!(
                    "ERR Unknown argument {}",
                    String::from_utf8_lossy(opt)
                )));
            }
        }
        Ok(out)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let bulk = |s: &str| Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()));
        let mut out = Vec::new();
        for lib in ctx.shared.scripts.function_libraries() {
            if let Some(p) = &self.pattern
                && !crate::engine::args::glob_match(p, lib.name.as_bytes(), false)
            {
                continue;
            }
            let functions = lib
                .functions
                .iter()
                .map(|f| {
                    Reply::Map(vec![
                        (bulk("name"), bulk(&f.name)),
                        (
                            bulk("description"),
                            f.description.clone().map_or(Reply::Null, Reply::Bulk),
                        ),
                        (
                            bulk("flags"),
                            Reply::Set(f.flags.names().into_iter().map(Reply::status).collect()),
                        ),
                    ])
                })
                .collect();
            let mut entry = vec![
                (bulk("library_name"), bulk(&lib.name)),
                (bulk("engine"), bulk("LUA")),
                (bulk("functions"), Reply::Array(functions)),
            ];
            if self.with_code {
                entry.push((bulk("library_code"), Reply::Bulk(lib.code.clone())));
            }
            out.push(Reply::Map(entry));
        }
        Ok(Reply::Array(out))
    }
}

/// FUNCTION DUMP
#[derive(Debug)]
pub(crate) struct FunctionDump;

impl crate::engine::Command<'_> for FunctionDump {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(FunctionDump)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Bulk(Bytes::from(ctx.shared.scripts.function_dump())))
    }
}

/// Redis's error for a FUNCTION subcommand given more than `max` arguments (name
/// included): it names the subcommand as the client sent it.
fn too_many_arguments(args: &[&[u8]], max: usize) -> Option<Reply> {
    (args.len() > max).then(|| {
        Reply::Error(
            format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
                crate::engine::printable(args[1], 128)
            )
            .into(),
        )
    })
}

/// FUNCTION RESTORE's row (at most a payload and a policy).
fn function_restore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    too_many_arguments(args, 4).unwrap_or_else(|| run_sub::<FunctionRestore>(ctx, args))
}

/// FUNCTION FLUSH's row (at most a mode).
fn function_flush(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    too_many_arguments(args, 3).unwrap_or_else(|| run_sub::<FunctionFlush>(ctx, args))
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE]
#[derive(Debug)]
pub(crate) struct FunctionRestore {
    payload: Bytes,
    policy: RestorePolicy,
}

impl crate::engine::Command<'_> for FunctionRestore {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let payload = a.next_owned()?;
        let policy = match a.rest() {
            [] => RestorePolicy::Append,
            [p] if p.eq_ignore_ascii_case(b"flush") => RestorePolicy::Flush,
            [p] if p.eq_ignore_ascii_case(b"append") => RestorePolicy::Append,
            [p] if p.eq_ignore_ascii_case(b"replace") => RestorePolicy::Replace,
            [_] => {
                return Err(CmdError::msg(
                    "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
                ));
            }
            // Too many arguments: `function_restore` answered before parsing.
            _ => return Err(CmdError::Syntax),
        };
        Ok(FunctionRestore { payload, policy })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        ctx.shared
            .scripts
            .function_restore(&self.payload, self.policy)
            .map_err(CmdError::owned)?;
        Ok(Reply::ok())
    }
}

/// FUNCTION STATS
#[derive(Debug)]
pub(crate) struct FunctionStats;

impl crate::engine::Command<'_> for FunctionStats {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(FunctionStats)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let bulk = |s: &str| Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()));
        let scripts = &ctx.shared.scripts;
        let running = match scripts.busy.running_function() {
            Some((name, command)) => Reply::Map(vec![
                (bulk("name"), bulk(&name)),
                (
                    bulk("command"),
                    Reply::Array(command.into_iter().map(Reply::Bulk).collect()),
                ),
                (
                    bulk("duration_ms"),
                    Reply::Int(
                        scripts
                            .busy
                            .running_for()
                            .map_or(0, |d| d.as_millis() as i64),
                    ),
                ),
            ]),
            None => Reply::Null,
        };
        let (libs, funcs) = scripts.function_counts();
        Ok(Reply::Map(vec![
            (bulk("running_script"), running),
            (
                bulk("engines"),
                Reply::Map(vec![(
                    bulk("LUA"),
                    Reply::Map(vec![
                        (bulk("libraries_count"), Reply::Int(libs as i64)),
                        (bulk("functions_count"), Reply::Int(funcs as i64)),
                    ]),
                )]),
            ),
        ]))
    }
}

/// FUNCTION KILL
#[derive(Debug)]
pub(crate) struct FunctionKill;

impl crate::engine::Command<'_> for FunctionKill {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(FunctionKill)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let threshold = crate::commands::scripting::busy_threshold(ctx.shared);
        match ctx.shared.scripts.busy.request_kill_as(true, threshold) {
            KillOutcome::NotBusy => {
                Err(CmdError::msg("NOTBUSY No scripts in execution right now."))
            }
            KillOutcome::Unkillable => Err(CmdError::msg(crate::commands::scripting::UNKILLABLE)),
            KillOutcome::WrongKind => Err(CmdError::msg(crate::commands::scripting::BUSY)),
            KillOutcome::Killed => Ok(Reply::ok()),
        }
    }
}

/// FUNCTION HELP
#[derive(Debug)]
pub(crate) struct FunctionHelp;

impl crate::engine::Command<'_> for FunctionHelp {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(FunctionHelp)
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Array(
            [
                "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "LOAD [REPLACE] <FUNCTION CODE>",
                "    Create a new library with the given library name and code.",
                "DELETE <LIBRARY NAME>",
                "    Delete the given library.",
                "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
                "    Return general information on all the libraries:",
                "    * Library name",
                "    * The engine used to run the Library",
                "    * Library description",
                "    * Functions list",
                "    * Library code (if WITHCODE is given)",
                "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
                "STATS",
                "    Return information about the current function running:",
                "    * Function name",
                "    * Command used to run the function",
                "    * Duration in MS that the function is running",
                "    If no function is running, return nil",
                "    In addition, returns a list of available engines.",
                "KILL",
                "    Kill the current running function.",
                "FLUSH [ASYNC|SYNC]",
                "    Delete all the libraries.",
                "    When called without the optional mode argument, the behavior is determined by the",
                "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
                "    * ASYNC: Asynchronously flush the libraries.",
                "    * SYNC: Synchronously flush the libraries.",
                "DUMP",
                "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
                "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
                "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
                "    control how to handle existing libraries (default APPEND):",
                "    * FLUSH: delete all existing libraries.",
                "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
                "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
                "      libraries with the new libraries (notice that even on this option there is a chance of failure",
                "      in case of functions name collision with another library).",
                "HELP",
                "    Prints this help.",
            ]
            .into_iter()
            .map(Reply::status)
            .collect(),
        ))
    }
}
