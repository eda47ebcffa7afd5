//! Scripting commands: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT LOAD | EXISTS | FLUSH |
//! KILL | HELP, plus the `-BUSY` gate connections pass through while a script runs.
//!
//! The Lua engine lives in `crate::script`; this module is its host. A script runs holding
//! every shard (the commands are `whole_keyspace`, so `cmd::call` for a client, and EXEC,
//! lock them all, in order, before the handler runs): a script may touch keys it did not
//! declare (Python `limits` resets with KEYS + DEL), and no other client's command can
//! interleave with it.
//! `now` is read once for the whole script, so every call inside it, TIME included, sees the
//! same instant of sluice's clock (the test clock in test mode).
//!
//! `redis.call` resolves the command in the same table as clients do and runs it through
//! `cmd::call` (as `Caller::Script`), which refuses what Redis refuses in scripts (commands
//! flagged `noscript`; writes from read-only scripts; OOM; cross-slot keys) and counts it.
//!
//! # Busy scripts
//!
//! Shard locks are std mutexes and the runtime has few worker threads, so a connection must
//! not block on a shard while a long script holds them all, or SCRIPT KILL could never be
//! read. Before running a command, a connection checks [`Busy`](crate::script::Busy): once
//! the running script is older than a millisecond (younger ones are about to finish: the
//! command just waits on the locks) it waits asynchronously for the script to end, and once
//! the script has run past `busy-reply-threshold` it answers `-BUSY …` instead (SCRIPT KILL,
//! SHUTDOWN and the other `allow_busy` commands that need no shard still run), as Redis does.
//! The engine hands a long script's runtime worker off to a fresh thread, so the sockets keep
//! being read meanwhile.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::call::{Roles, ScriptRules};
use super::{
    Access, ArgCursor, Caller, CmdFlags, Command, CommandSpec as C, Ctx, KeySpec, LockMode, Lookup,
    Shared, VariantCommand, call, lookup, run, run_as, run_sub,
};
use crate::client::ClientState;
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::script::{self, Host, KillOutcome};

/// Redis's reply to other clients while a script runs past the threshold.
pub const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

/// Redis's reply to other clients while a function (FCALL) runs past the threshold.
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// SCRIPT KILL / FUNCTION KILL when the running script wrote.
pub const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";

const EVAL_FLAGS: &[&str] = &[
    "noscript",
    "stale",
    "skip_monitor",
    "no_mandatory_keys",
    "movablekeys",
];
const EVAL_RO_FLAGS: &[&str] = &[
    "readonly",
    "noscript",
    "stale",
    "skip_monitor",
    "no_mandatory_keys",
    "movablekeys",
];
const RW_NOTES: Option<&str> =
    Some("We cannot tell how the keys will be used so we assume the worst, RW and UPDATE");
const RO_NOTES: Option<&str> =
    Some("We cannot tell how the keys will be used so we assume the worst, RO and ACCESS");

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

/// The scripting commands.
pub static COMMANDS: &[C] = &[
    C::new(
        "eval",
        -3,
        EVAL_FLAGS,
        keynum(&["RW", "access", "update"], RW_NOTES),
        |c, a| run_as::<Eval>(c, a, (Source::Body, Access::ReadWrite)),
    )
    .whole_keyspace()
    .with_acl(&["@slow", "@scripting"]),
    C::new(
        "evalsha",
        -3,
        EVAL_FLAGS,
        keynum(&["RW", "access", "update"], None),
        |c, a| run_as::<Eval>(c, a, (Source::Sha, Access::ReadWrite)),
    )
    .whole_keyspace()
    .with_acl(&["@slow", "@scripting"]),
    C::new(
        "eval_ro",
        -3,
        EVAL_RO_FLAGS,
        keynum(&["RO", "access"], RO_NOTES),
        |c, a| run_as::<Eval>(c, a, (Source::Body, Access::ReadOnly)),
    )
    .whole_keyspace()
    .with_acl(&["@slow", "@scripting"]),
    C::new(
        "evalsha_ro",
        -3,
        EVAL_RO_FLAGS,
        keynum(&["RO", "access"], None),
        |c, a| run_as::<Eval>(c, a, (Source::Sha, Access::ReadOnly)),
    )
    .whole_keyspace()
    .with_acl(&["@slow", "@scripting"]),
    C::new("script", -2, &[], KeySpec::None, run::<super::server::Help>)
        .with_subcommands(SCRIPT)
        .with_acl(&["@slow"]),
];

static SCRIPT: &[C] = &[
    C::new(
        "script|help",
        2,
        &["loading", "stale"],
        KeySpec::None,
        run_sub::<ScriptHelp>,
    )
    .with_acl(&["@slow", "@scripting"]),
    C::new(
        "script|flush",
        -2,
        &["noscript"],
        KeySpec::None,
        run_sub::<ScriptFlush>,
    )
    .with_acl(&["@slow", "@scripting"]),
    C::new(
        "script|debug",
        3,
        &["noscript"],
        KeySpec::None,
        run_sub::<ScriptDebug>,
    )
    .with_acl(&["@slow", "@scripting"]),
    C::new(
        "script|load",
        3,
        &["noscript", "stale"],
        KeySpec::None,
        run_sub::<ScriptLoad>,
    )
    .with_acl(&["@slow", "@scripting"]),
    C::new(
        "script|kill",
        2,
        &["noscript", "allow_busy"],
        KeySpec::None,
        run_sub::<ScriptKill>,
    )
    .with_acl(&["@slow", "@scripting"]),
    C::new(
        "script|exists",
        -3,
        &["noscript"],
        KeySpec::None,
        run_sub::<ScriptExists>,
    )
    .with_acl(&["@slow", "@scripting"]),
];

/// Where an EVAL-family command finds its script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// EVAL, EVAL_RO: the argument is the script's text.
    Body,
    /// EVALSHA, EVALSHA_RO: the argument is the SHA1 of a cached script.
    Sha,
}

/// EVAL / EVALSHA / EVAL_RO / EVALSHA_RO script|sha numkeys [key …] [arg …]
#[derive(Debug)]
pub struct Eval {
    source: Source,
    access: Access,
    script: Bytes,
    keys: Vec<Bytes>,
    argv: Vec<Bytes>,
}

impl VariantCommand for Eval {
    type Variant = (Source, Access);

    fn parse(a: &mut ArgCursor<'_>, (source, access): (Source, Access)) -> CmdResult<Self> {
        let script = a.next()?.clone();
        let numkeys = a.next_i64()?;
        if numkeys < 0 {
            return Err(CmdError::msg("ERR Number of keys can't be negative"));
        }
        if numkeys as u64 > a.remaining() as u64 {
            return Err(CmdError::msg(
                "ERR Number of keys can't be greater than number of args",
            ));
        }
        let rest = a.rest();
        let (keys, argv) = rest.split_at(numkeys as usize);
        Ok(Eval {
            source,
            access,
            script,
            keys: keys.to_vec(),
            argv: argv.to_vec(),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let scripts = &ctx.shared.scripts;
        let script = if self.source == Source::Sha {
            scripts
                .get(&self.script)
                .ok_or(CmdError::msg(script::NOSCRIPT))?
        } else {
            scripts.load(&self.script).map_err(CmdError::owned)?
        };
        let how = RunAs {
            read_only: self.access == Access::ReadOnly || script.flags.no_writes,
            allow_oom: false,
            function: None,
            slot: super::cluster::script_slot(&self.keys),
            cross_slot_ok: !script.flags.shebang || script.flags.allow_cross_slot,
        };
        let (keys, argv) = (&self.keys, &self.argv);
        Ok(run_locked(ctx, how, |scripts, host| {
            scripts.run(&script, keys, argv, host)
        }))
    }
}

/// How a script or function runs.
#[derive(Debug)]
pub struct RunAs {
    /// Writes are refused (`*_RO`, `no-writes`).
    pub read_only: bool,
    /// `allow-oom`: commands that may grow memory run past maxmemory.
    pub allow_oom: bool,
    /// The function's name and command (FCALL), for FUNCTION STATS and KILL.
    pub function: Option<(String, Vec<Bytes>)>,
    /// Cluster mode: the slot of the declared keys, if any.
    pub slot: Option<u16>,
    /// Cluster mode: calls may touch several slots (no shebang, `allow-cross-slot-keys`).
    pub cross_slot_ok: bool,
}

/// Runs a script or function in `ctx` (which holds every shard) and returns its reply.
pub fn run_locked(
    ctx: &mut Ctx<'_>,
    how: RunAs,
    body: impl FnOnce(&script::Scripts, &mut dyn Host) -> Reply,
) -> Reply {
    if !ctx.store.holds_all() {
        // The table makes every script command lock the whole keyspace; a handler called
        // any other way must take the locks itself, before anything else is held.
        ctx.store.release();
        ctx.store = ctx.shared.keyspace.lock_all();
    }
    let shared = ctx.shared;
    let busy = shared.scripts.busy.clone();
    let _running = busy.begin_as(how.function);
    let saved_db = ctx.client.db;
    let saved_resp = ctx.client.resp;
    let mut host = ScriptHost {
        ctx: &mut *ctx,
        busy: &busy,
        rules: ScriptRules {
            read_only: how.read_only,
            allow_oom: how.allow_oom,
            slot: how.slot,
            cross_slot_ok: how.cross_slot_ok,
            ..ScriptRules::default()
        },
    };
    let reply = body(&shared.scripts, &mut host);
    // An error the script raised from a failed `redis.call` (or returned from a failed
    // `redis.pcall`) starts with that call's error, which the call counted already.
    let from_call = match (&reply, &host.rules.last_error) {
        (Reply::Error(text), Some(last)) => text.starts_with(last.as_str()),
        _ => false,
    };
    ctx.error_counted = from_call;
    ctx.client.resp = saved_resp;
    if ctx.client.db != saved_db {
        ctx.client.set_db(saved_db);
    }
    reply
}

/// Runs the commands a script calls through `cmd::call`, with the script's locks, client
/// and `now`; turns lookup errors into the texts Redis gives scripts.
struct ScriptHost<'c, 'a> {
    ctx: &'c mut Ctx<'a>,
    busy: &'c script::Busy,
    rules: ScriptRules,
}

fn refuse(msg: &'static str) -> Reply {
    Reply::Error(Cow::Borrowed(msg))
}

impl Host for ScriptHost<'_, '_> {
    fn call(&mut self, args: Vec<Bytes>, resp: u8) -> Reply {
        let shared = self.ctx.shared;
        let entry = match lookup(&shared.table, &args) {
            Lookup::Found(entry) => entry,
            Lookup::Error(CmdError::WrongArity(_), _) => {
                return refuse("ERR Wrong number of args calling Redis command from script");
            }
            Lookup::Error(CmdError::UnknownCommand(_), _) => {
                return refuse("ERR Unknown Redis command called from script");
            }
            Lookup::Error(e, _) => return Reply::Error(Cow::Owned(e.to_string())),
        };
        self.rules.resp = resp;
        let reply = call(self.ctx, entry, &args, Caller::Script(&mut self.rules));
        if std::mem::take(&mut self.rules.wrote) {
            self.busy.mark_write();
        }
        reply
    }

    fn command_exists(&mut self, args: &[Bytes]) -> bool {
        matches!(
            lookup(&self.ctx.shared.table, args),
            Lookup::Found(_) | Lookup::Error(CmdError::WrongArity(_), _)
        )
    }
}

/// SCRIPT LOAD script
#[derive(Debug)]
pub struct ScriptLoad {
    body: Bytes,
}

impl Command for ScriptLoad {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ScriptLoad {
            body: a.next()?.clone(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let script = ctx
            .shared
            .scripts
            .load(&self.body)
            .map_err(CmdError::owned)?;
        Ok(Reply::Bulk(Bytes::from(script.sha.clone())))
    }
}

/// SCRIPT EXISTS sha [sha …]
#[derive(Debug)]
pub struct ScriptExists {
    shas: Vec<Bytes>,
}

impl Command for ScriptExists {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ScriptExists {
            shas: a.rest().to_vec(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let scripts = &ctx.shared.scripts;
        Ok(Reply::Array(
            self.shas
                .iter()
                .map(|s| Reply::Int(scripts.exists(s) as i64))
                .collect(),
        ))
    }
}

/// SCRIPT FLUSH [ASYNC|SYNC]
#[derive(Debug)]
pub struct ScriptFlush;

impl Command for ScriptFlush {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let ok = match a.rest() {
            [] => true,
            [mode] => mode.eq_ignore_ascii_case(b"async") || mode.eq_ignore_ascii_case(b"sync"),
            _ => false,
        };
        if !ok {
            return Err(CmdError::msg(
                "ERR SCRIPT FLUSH only support SYNC|ASYNC option",
            ));
        }
        Ok(ScriptFlush)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        ctx.shared.scripts.flush();
        Ok(Reply::ok())
    }
}

/// SCRIPT KILL
#[derive(Debug)]
pub struct ScriptKill;

impl Command for ScriptKill {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ScriptKill)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        match ctx.shared.scripts.busy.request_kill() {
            KillOutcome::NotBusy => {
                Err(CmdError::msg("NOTBUSY No scripts in execution right now."))
            }
            KillOutcome::Unkillable => Err(CmdError::msg(UNKILLABLE)),
            KillOutcome::WrongKind => Err(CmdError::msg(BUSY_FUNCTION)),
            KillOutcome::Killed => Ok(Reply::ok()),
        }
    }
}

/// SCRIPT DEBUG YES|SYNC|NO: sluice has no Lua debugger.
#[derive(Debug)]
pub struct ScriptDebug {
    mode: Bytes,
}

impl Command for ScriptDebug {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ScriptDebug {
            mode: a.next()?.clone(),
        })
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        if self.mode.eq_ignore_ascii_case(b"no") {
            return Ok(Reply::ok());
        }
        if self.mode.eq_ignore_ascii_case(b"yes") || self.mode.eq_ignore_ascii_case(b"sync") {
            return Err(CmdError::msg(
                "ERR SCRIPT DEBUG is not supported: sluice has no Lua debugger",
            ));
        }
        Err(CmdError::msg("ERR Use SCRIPT DEBUG YES/SYNC/NO"))
    }
}

/// SCRIPT HELP
#[derive(Debug)]
pub struct ScriptHelp;

impl Command for ScriptHelp {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ScriptHelp)
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Array(
            [
                "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "DEBUG (YES|SYNC|NO)",
                "    Set the debug mode for subsequent scripts executed.",
                "EXISTS <sha1> [<sha1> ...]",
                "    Return information about the existence of the scripts in the script cache.",
                "FLUSH [ASYNC|SYNC]",
                "    Flush the Lua scripts cache. Very dangerous on replicas.",
                "    When called without the optional mode argument, the behavior is determined by the",
                "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
                "    * ASYNC: Asynchronously flush the scripts cache.",
                "    * SYNC: Synchronously flush the scripts cache.",
                "KILL",
                "    Kill the currently executing Lua script.",
                "LOAD <script>",
                "    Load a script into the scripts cache without executing it.",
                "HELP",
                "    Prints this help.",
            ]
            .into_iter()
            .map(Reply::status)
            .collect(),
        ))
    }
}

/// How long a script runs before commands arriving meanwhile wait asynchronously for it
/// instead of on the shard locks.
const GRACE: Duration = Duration::from_millis(1);

/// True while a script runs (checked by connections before every command: one atomic load).
#[inline]
pub fn script_running(shared: &Shared) -> bool {
    shared.scripts.busy.is_running()
}

/// The gate a connection passes before running a command while a script runs: waits
/// (asynchronously) while the script is young, then answers `-BUSY` past the threshold.
/// `None` means: run the command now.
pub async fn busy_gate(shared: &Shared, client: &mut ClientState, args: &[Bytes]) -> Option<Reply> {
    let busy = shared.scripts.busy.clone();
    loop {
        let ran = busy.running_for()?;
        if ran < GRACE {
            // Scripts usually take microseconds, so the wait is short; but it must never be a
            // blocking wait on a shard lock, or a script that turns out long would hold this
            // command (and its worker thread) until it ends instead of answering -BUSY.
            busy.wait_end(GRACE - ran).await;
            continue;
        }
        let entry = match lookup(&shared.table, args) {
            Lookup::Found(entry) => entry,
            Lookup::Error(..) => return None, // the error reply needs no lock
        };
        let spec = entry.spec;
        let threshold = Duration::from_millis(
            shared
                .config
                .read()
                .map(|c| c.busy_reply_threshold)
                .unwrap_or(5000),
        );
        if ran < threshold {
            busy.wait_end(threshold - ran).await;
            continue;
        }
        let lock_free = spec.lock == LockMode::None
            && client.watched.is_empty()
            && !entry.roles.contains(Roles::NEEDS_SHARDS);
        if spec.has(CmdFlags::ALLOW_BUSY) {
            if lock_free {
                return None;
            }
            busy.wait_end(Duration::from_millis(100)).await;
            continue;
        }
        if client.multi.is_some() && entry.roles.contains(Roles::EXEC) {
            if !client.watched.is_empty() {
                // Discarding unwatches, which needs the shards: wait for them.
                busy.wait_end(Duration::from_millis(100)).await;
                continue;
            }
            client.end_multi();
            let text = if busy.running_function().is_some() {
                BUSY_FUNCTION
            } else {
                BUSY
            };
            let reply = Reply::Error(Cow::Owned(format!(
                "EXECABORT Transaction discarded because of: {text}"
            )));
            return Some(super::call::reject(shared, client, Some(entry), reply));
        }
        let text = if busy.running_function().is_some() {
            BUSY_FUNCTION
        } else {
            BUSY
        };
        let reply = Reply::Error(Cow::Borrowed(text));
        return Some(super::call::reject(shared, client, Some(entry), reply));
    }
}

/// Waits until no script runs (before a closing connection drops its WATCHes, which locks).
pub async fn wait_idle(shared: &Shared) {
    let busy: Arc<script::Busy> = shared.scripts.busy.clone();
    while busy.is_running() {
        busy.wait_end(Duration::from_millis(100)).await;
    }
}
