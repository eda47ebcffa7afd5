//! Scripting commands: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT LOAD | EXISTS | FLUSH |
//! KILL | HELP, plus the `-BUSY` gate connections pass through while a script runs.
//!
//! The Lua engine lives in `crate::script`; this module is its host. A script runs holding
//! the shards of the keys it declares (the commands lock their keys like any keyed command),
//! so scripts on different shards run at once, one per event-loop thread, and no other
//! client's command on those shards interleaves with one. A key of a shard the script does
//! not hold (an undeclared key, a whole-keyspace call) follows one policy (see
//! [`run_locked`] and `ScriptHost::take_shards`): re-run holding every shard if the script
//! had no effect yet, else take the shard without deadlock risk or fail the call clearly.
//! Scripts that declare no keys, and every script under `lua-script-locking global`, hold
//! every shard from the start, as before.
//! `now` is read once for the whole script, so every call inside it, TIME included, sees the
//! same instant of sluice's clock (the test clock in test mode).
//!
//! `redis.call` resolves the command in the same table as clients do and runs it through
//! `engine::call` (as `Caller::Script`), which refuses what Redis refuses in scripts (commands
//! flagged `noscript`; writes from read-only scripts; OOM; cross-slot keys) and counts it.
//!
//! # Busy scripts
//!
//! Shard locks are std mutexes and the runtime has few worker threads, so a connection must
//! not block on a shard while a long script holds it, or SCRIPT KILL could never be read.
//! Before running a command, a connection asks [`Busy`](crate::script::Busy) for the oldest
//! running script holding a shard the command needs: once that script is older than a
//! millisecond (younger ones are about to finish: the command just waits on the locks) it
//! waits asynchronously for a script to end, and once the script has run past
//! `busy-reply-threshold` it answers `-BUSY …` instead (SCRIPT KILL, SHUTDOWN and the other
//! `allow_busy` commands that need no shard still run), as Redis does. Commands on other
//! shards go on. The engine hands a long script's runtime worker off to a fresh thread, so
//! the sockets keep being read meanwhile.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::client::ClientState;
use crate::engine::Roles;
use crate::engine::call::ScriptRules;
use crate::engine::{
    Access, ArgCursor, Caller, CmdFlags, Command, CommandSpec as C, Ctx, KeySpec, LockMode, Lookup,
    VariantCommand, call, lookup, run, run_as, run_sub,
};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::script::{self, Host, KillOutcome};
use crate::server::Shared;

/// Redis's reply to other clients while a script runs past the threshold.
pub(crate) const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

/// Redis's reply to other clients while a function (FCALL) runs past the threshold.
pub(crate) const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// SCRIPT KILL / FUNCTION KILL when the running script wrote.
pub(crate) const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";

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
pub(crate) const RW_NOTES: Option<&str> =
    Some("We cannot tell how the keys will be used so we assume the worst, RW and UPDATE");
pub(crate) const RO_NOTES: Option<&str> =
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
pub(crate) static COMMANDS: &[C] = &[
    C::new(
        "eval",
        -3,
        EVAL_FLAGS,
        keynum(&["RW", "access", "update"], RW_NOTES),
        |c, a| run_as::<Eval>(c, a, (Source::Body, Access::ReadWrite)),
    )
    .with_roles(crate::engine::Roles::EVAL)
    .with_effect(crate::repl::effects::Effect::Inner)
    .with_acl(&["@slow", "@scripting"]),
    C::new(
        "evalsha",
        -3,
        EVAL_FLAGS,
        keynum(&["RW", "access", "update"], None),
        |c, a| run_as::<Eval>(c, a, (Source::Sha, Access::ReadWrite)),
    )
    .with_roles(crate::engine::Roles::EVALSHA)
    .with_effect(crate::repl::effects::Effect::Inner)
    .with_acl(&["@slow", "@scripting"]),
    C::new(
        "eval_ro",
        -3,
        EVAL_RO_FLAGS,
        keynum(&["RO", "access"], RO_NOTES),
        |c, a| run_as::<Eval>(c, a, (Source::Body, Access::ReadOnly)),
    )
    .with_roles(crate::engine::Roles::EVAL)
    .with_effect(crate::repl::effects::Effect::Inner)
    .with_acl(&["@slow", "@scripting"]),
    C::new(
        "evalsha_ro",
        -3,
        EVAL_RO_FLAGS,
        keynum(&["RO", "access"], None),
        |c, a| run_as::<Eval>(c, a, (Source::Sha, Access::ReadOnly)),
    )
    .with_roles(crate::engine::Roles::EVALSHA)
    .with_effect(crate::repl::effects::Effect::Inner)
    .with_acl(&["@slow", "@scripting"]),
    C::new(
        "script",
        -2,
        &[],
        KeySpec::None,
        run::<crate::commands::server::Help>,
    )
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
    .with_acl(&["@slow", "@scripting"])
    .with_tips(&["request_policy:all_nodes", "response_policy:all_succeeded"]),
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
    .with_acl(&["@slow", "@scripting"])
    .with_tips(&["request_policy:all_nodes", "response_policy:all_succeeded"]),
    C::new(
        "script|kill",
        2,
        &["noscript", "allow_busy"],
        KeySpec::None,
        run_sub::<ScriptKill>,
    )
    .with_acl(&["@slow", "@scripting"])
    .with_tips(&["request_policy:all_shards", "response_policy:one_succeeded"]),
    C::new(
        "script|exists",
        -3,
        &["noscript"],
        KeySpec::None,
        run_sub::<ScriptExists>,
    )
    .with_acl(&["@slow", "@scripting"])
    .with_tips(&[
        "request_policy:all_shards",
        "response_policy:agg_logical_and",
    ]),
];

/// Where an EVAL-family command finds its script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// EVAL, EVAL_RO: the argument is the script's text.
    Body,
    /// EVALSHA, EVALSHA_RO: the argument is the SHA1 of a cached script.
    Sha,
}

/// EVAL / EVALSHA / EVAL_RO / EVALSHA_RO script|sha numkeys [key …] [arg …]
#[derive(Debug)]
pub(crate) struct Eval<'a> {
    source: Source,
    access: Access,
    script: &'a [u8],
    /// Borrowed from the request: nothing is copied or counted for the script's lists.
    keys: &'a [&'a [u8]],
    argv: &'a [&'a [u8]],
}

impl<'a> VariantCommand<'a> for Eval<'a> {
    type Variant = (Source, Access);

    fn parse(a: &mut ArgCursor<'a>, (source, access): (Source, Access)) -> CmdResult<Self> {
        let script = a.next()?;
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
            keys,
            argv,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let scripts = &ctx.shared.scripts;
        let script = if self.source == Source::Sha {
            scripts
                .get(self.script)
                .ok_or_else(|| CmdError::msg(script::NOSCRIPT))?
        } else {
            scripts.load(self.script).map_err(CmdError::owned)?
        };
        let flags = script.flags;
        if flags.shebang {
            // Declared flags replace the command's (Redis's `evalGetCommandFlags`): a script
            // that may write is refused up front past maxmemory (unless `allow-oom`) or
            // without enough good replicas, whatever it would run.
            refuse_declared_writer(ctx, !flags.no_writes, flags.allow_oom)?;
        }
        let how = RunAs {
            read_only: self.access == Access::ReadOnly || script.flags.no_writes,
            allow_oom: flags.shebang && flags.allow_oom,
            function: None,
            slot: crate::commands::cluster::script_slot(ctx.shared, self.keys),
            cross_slot_ok: !script.flags.shebang || script.flags.allow_cross_slot,
        };
        let (keys, argv) = (self.keys, self.argv);
        Ok(run_locked(ctx, how, &script.sha, |scripts, host| {
            scripts.run(&script, keys, argv, host)
        }))
    }
}

/// What `processCommand` refuses of a script or function whose declared flags say it may
/// write (`writes`): OOM past maxmemory unless it allows it, NOREPLICAS without enough good
/// replicas (`min-replicas-to-write`).
pub(crate) fn refuse_declared_writer(
    ctx: &Ctx<'_>,
    writes: bool,
    allow_oom: bool,
) -> CmdResult<()> {
    if !writes {
        return Ok(());
    }
    let maxmemory = ctx.shared.live.maxmemory();
    if !allow_oom && maxmemory > 0 && crate::alloc_stats::allocated() > maxmemory {
        return Err(CmdError::msg(crate::store::evict::OOM_ERROR));
    }
    let (to_write, _) = ctx.shared.live.min_replicas();
    if to_write > 0 && !ctx.client.master_link && !ctx.shared.repl.enough_good_replicas(to_write) {
        return Err(CmdError::msg(
            "NOREPLICAS Not enough good replicas to write.",
        ));
    }
    Ok(())
}

/// How a script or function runs.
#[derive(Debug)]
pub(crate) struct RunAs {
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

/// Runs a script or function in `ctx` and returns its reply. `ctx` holds the shards of
/// its declared keys (or every shard); `memo` names the script (its SHA1) or function
/// (`f:` and its name) in the set of those that take every shard from the start.
///
/// Outside EXEC, a script that touches a key of a shard it does not hold before any
/// effect (see `ScriptHost::take_shards`) is stopped, and run again from the start
/// holding every shard; its `memo` is remembered so later runs start that way.
pub(crate) fn run_locked(
    ctx: &mut Ctx<'_>,
    how: RunAs,
    memo: &str,
    body: impl Fn(&script::Scripts, &mut dyn Host) -> Reply,
) -> Reply {
    let shared = ctx.shared;
    // Inside EXEC the locks are the transaction's: nothing may be released or run twice.
    let top = !ctx.in_exec;
    // A script that declares no keys takes every shard, as before scripts ran in parallel:
    // it either touches no key or only undeclared ones, and a long one keeps the server
    // busy as Redis does (`-BUSY` to every command but SCRIPT KILL and the like).
    // The shards held are the ones the command announced (`engine::call`) until they are
    // traded for every shard here.
    let mut as_announced = true;
    if top
        && !ctx.store.holds_all()
        && (ctx.store.holds_none()
            || shared.live.scripts_lock_all()
            || shared.scripts.needs_all(memo))
    {
        // Nothing ran under the declared keys' locks yet: trade them for every shard.
        ctx.store.release();
        ctx.store = shared.keyspace.lock_all();
        as_announced = false;
    }
    let busy = &*shared.scripts.busy;
    let saved_db = ctx.client.db;
    let saved_resp = ctx.client.resp;
    let RunAs {
        read_only,
        allow_oom,
        function,
        slot,
        cross_slot_ok,
    } = how;
    loop {
        let store = &ctx.store;
        let held = || {
            if store.holds_all() {
                script::Held::All
            } else {
                script::Held::Some(store.held_indexes())
            }
        };
        let running = if as_announced {
            busy.begin_announced(function.clone(), held)
        } else {
            busy.begin_as(function.clone(), held())
        };
        let mut host = ScriptHost {
            ctx: &mut *ctx,
            busy,
            rules: ScriptRules {
                read_only,
                allow_oom,
                slot,
                cross_slot_ok,
                ..ScriptRules::default()
            },
            memo,
            may_restart: top,
            effects: false,
            restart: false,
        };
        let reply = body(&shared.scripts, &mut host);
        let restart = host.restart;
        // An error the script raised from a failed `redis.call` (or returned from a failed
        // `redis.pcall`) starts with that call's error, which the call counted already.
        let from_call = match (&reply, &host.rules.last_error) {
            (Reply::Error(text), Some(last)) => text.starts_with(last.as_str()),
            _ => false,
        };
        drop(running);
        ctx.client.resp = saved_resp;
        if ctx.client.db != saved_db {
            ctx.client.set_db(saved_db);
        }
        if !restart || ctx.store.holds_all() {
            ctx.error_counted = from_call;
            return reply;
        }
        shared.scripts.remember_needs_all(memo);
        ctx.store.release();
        ctx.store = shared.keyspace.lock_all();
        as_announced = false;
    }
}

/// Runs the commands a script calls through `engine::call`, with the script's locks, client
/// and `now`; turns lookup errors into the texts Redis gives scripts.
struct ScriptHost<'c, 'a> {
    ctx: &'c mut Ctx<'a>,
    busy: &'c script::Busy,
    rules: ScriptRules,
    /// The script's SHA1 or `f:` and the function's name (see [`run_locked`]).
    memo: &'c str,
    /// The script may be stopped and run again holding every shard (not inside EXEC).
    may_restart: bool,
    /// A call had an effect others could see (a write, a publish, an admin command).
    effects: bool,
    /// The script touched a shard it does not hold before any effect: it is being stopped
    /// and every later call is refused; `run_locked` runs it again holding every shard.
    restart: bool,
}

/// What a call gets while its script is being stopped to run again holding every shard
/// (the script never sees it: its reply is dropped).
const RESTARTING: &str = "ERR script is restarting with every shard locked";

impl ScriptHost<'_, '_> {
    /// Makes sure the script holds the shards `spec` needs for `args` (all of them for a
    /// whole-keyspace command), following the policy for keys it did not declare: before
    /// any effect the script is stopped and run again holding every shard; after one, the
    /// missing shards are taken without deadlock risk (`Locked::add_shards`) or, if another
    /// client holds one, the call fails with an error that says what to do.
    fn take_shards(&mut self, spec: &C, args: &[&[u8]]) -> Option<Reply> {
        if self.restart {
            return Some(refuse(RESTARTING));
        }
        if self.ctx.store.holds_all() {
            return None;
        }
        let ks = &self.ctx.shared.keyspace;
        let mut need: smallvec::SmallVec<[usize; 8]> = match spec.lock {
            LockMode::None => return None,
            LockMode::All | LockMode::Stepwise => (0..ks.shard_count()).collect(),
            LockMode::Keys => {
                // The common case, every key's shard held (the script declared its keys):
                // nothing to list, sort or take.
                let store = &self.ctx.store;
                if spec
                    .keys
                    .positions(args)
                    .all(|i| store.held_shard(ks.shard_of(args[i])).is_some())
                {
                    return None;
                }
                spec.keys
                    .positions(args)
                    .map(|i| ks.shard_of(args[i]))
                    .collect()
            }
        };
        need.sort_unstable();
        need.dedup();
        need.retain(|i| self.ctx.store.held_shard(*i).is_none());
        if need.is_empty() {
            return None;
        }
        if self.may_restart && !self.effects {
            self.restart = true;
            self.busy.stop_here();
            return Some(refuse(RESTARTING));
        }
        let shared = self.ctx.shared;
        shared.scripts.remember_needs_all(self.memo);
        let taken = self.ctx.store.add_shards(&need);
        self.busy.set_held(if self.ctx.store.holds_all() {
            script::Held::All
        } else {
            script::Held::Some(self.ctx.store.held_indexes())
        });
        let Err(busy_shard) = taken else {
            return None;
        };
        let key = spec
            .keys
            .positions(args)
            .map(|i| &args[i])
            .find(|k| ks.shard_of(k) == busy_shard);
        let what = match key {
            Some(k) => format!("key '{}'", crate::engine::printable(k, 128)),
            None => format!("every key ({})", spec.full_name()),
        };
        Some(Reply::Error(Cow::Owned(format!(
            "ERR Script attempted to access {what} it did not declare while another client held it; declare it in KEYS or use lua-script-locking global"
        ))))
    }
}

fn refuse(msg: &'static str) -> Reply {
    Reply::Error(Cow::Borrowed(msg))
}

impl Host for ScriptHost<'_, '_> {
    fn call(&mut self, args: &[&[u8]], resp: u8) -> Reply {
        let shared = self.ctx.shared;
        let entry = match lookup(&shared.table, args) {
            Lookup::Found(entry) => entry,
            Lookup::Error(CmdError::WrongArity(_), _) => {
                return refuse("ERR Wrong number of args calling Redis command from script");
            }
            Lookup::Error(CmdError::UnknownCommand(_), _) => {
                return refuse("ERR Unknown Redis command called from script");
            }
            Lookup::Error(e, _) => return Reply::Error(Cow::Owned(e.to_string())),
        };
        if let Some(refused) = self.take_shards(entry.spec, args) {
            return refused;
        }
        let spec = entry.spec;
        if spec.has(CmdFlags::WRITE) || spec.has(CmdFlags::PUBSUB) || spec.has(CmdFlags::ADMIN) {
            self.effects = true;
        }
        self.rules.resp = resp;
        let reply = call(self.ctx, entry, args, Caller::Script(&mut self.rules));
        if std::mem::take(&mut self.rules.wrote) {
            self.busy.mark_write();
        }
        reply
    }

    fn command_allowed(&mut self, args: &[&[u8]]) -> Option<bool> {
        let entry = match lookup(&self.ctx.shared.table, args) {
            Lookup::Found(entry) | Lookup::Error(CmdError::WrongArity(_), Some(entry)) => entry,
            _ => return None,
        };
        Some(
            self.ctx
                .shared
                .acl
                .check(&self.ctx.client.user, entry, args)
                .is_ok(),
        )
    }
}

/// SCRIPT LOAD script
#[derive(Debug)]
pub(crate) struct ScriptLoad {
    body: Bytes,
}

impl Command<'_> for ScriptLoad {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ScriptLoad {
            body: a.next_owned()?,
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
pub(crate) struct ScriptExists {
    shas: Vec<Bytes>,
}

impl Command<'_> for ScriptExists {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ScriptExists {
            shas: crate::engine::args::owned(a.rest()),
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
pub(crate) struct ScriptFlush;

impl Command<'_> for ScriptFlush {
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
pub(crate) struct ScriptKill;

impl Command<'_> for ScriptKill {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ScriptKill)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        match ctx
            .shared
            .scripts
            .busy
            .request_kill_as(false, busy_threshold(ctx.shared))
        {
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
pub(crate) struct ScriptDebug {
    mode: Bytes,
}

impl Command<'_> for ScriptDebug {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ScriptDebug {
            mode: a.next_owned()?,
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
pub(crate) struct ScriptHelp;

impl Command<'_> for ScriptHelp {
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
pub(crate) fn script_running(shared: &Shared) -> bool {
    shared.scripts.busy.is_running()
}

/// `busy-reply-threshold`: how long a script runs before other clients needing its shards
/// get `-BUSY` and SCRIPT KILL may stop it.
pub(crate) fn busy_threshold(shared: &Shared) -> Duration {
    Duration::from_millis(
        shared
            .config
            .read()
            .map(|c| c.busy_reply_threshold)
            .unwrap_or(5000),
    )
}

/// The shards a command waits for at the busy gate; None: any script's (EXEC, WATCH and a
/// client with WATCHes or inside MULTI, whole-keyspace commands, scripts that will take
/// every shard, and the `allow_busy` commands, which wait for the busy state as in Redis).
fn gate_needs(
    shared: &Shared,
    client: &ClientState,
    entry: &crate::engine::table::CommandEntry,
    args: &[&[u8]],
) -> Option<smallvec::SmallVec<[usize; 8]>> {
    let spec = entry.spec;
    if spec.has(CmdFlags::ALLOW_BUSY)
        || client.multi.is_some()
        || !client.watched.is_empty()
        || entry.spec.roles.contains(Roles::NEEDS_SHARDS)
    {
        return None;
    }
    if spec.runs_script() {
        return match shards_to_hold(shared, spec, args) {
            script::Held::All => None,
            script::Held::Some(shards) => Some(shards),
        };
    }
    let ks = &shared.keyspace;
    match spec.lock {
        LockMode::None => Some(smallvec::SmallVec::new()),
        LockMode::All | LockMode::Stepwise => None,
        LockMode::Keys => Some(
            spec.keys
                .positions(args)
                .map(|i| ks.shard_of(args[i]))
                .collect(),
        ),
    }
}

/// The shards a script command will hold when it starts (see [`run_locked`]).
pub(crate) fn shards_to_hold(shared: &Shared, spec: &C, args: &[&[u8]]) -> script::Held {
    let Some(keys) = declared_keys(args) else {
        return script::Held::All;
    };
    if shared.live.scripts_lock_all() || remembered_needing_all(shared, spec, args) {
        return script::Held::All;
    }
    let ks = &shared.keyspace;
    script::Held::Some(keys.iter().map(|k| ks.shard_of(k)).collect())
}

/// The keys a script command declares (`EVAL script numkeys key …`, `FCALL`: every
/// script command has its key count third and its keys after it, the table's
/// `KeySpec::Keynum` for them), read straight from the arguments rather than by walking
/// the key spec's positions; `None` if it declares none, or a count that does not fit
/// (which finds no key, as Redis's key specs say).
fn declared_keys<'a>(args: &'a [&'a [u8]]) -> Option<&'a [&'a [u8]]> {
    let n = crate::num::parse_i64(args.get(2)?)?;
    let n = usize::try_from(n).ok().filter(|&n| n > 0)?;
    args.get(3..)?.get(..n)
}

/// True if this script (its SHA1) or function was remembered as touching a key it did not
/// declare: it takes every shard from the start (see [`run_locked`]).
fn remembered_needing_all(shared: &Shared, spec: &C, args: &[&[u8]]) -> bool {
    if shared.scripts.needs_all_count() == 0 {
        return false;
    }
    let Some(name) = args.get(1) else {
        return false;
    };
    let memo = if spec.roles.contains(Roles::EVAL) {
        script::sha1_hex(name)
    } else if spec.roles.contains(Roles::EVALSHA) {
        String::from_utf8_lossy(name).to_ascii_lowercase()
    } else {
        format!("f:{}", String::from_utf8_lossy(name))
    };
    shared.scripts.needs_all(&memo)
}

/// The gate a connection passes before running a command while a script runs: if a
/// script holds a shard the command needs, waits (asynchronously) while the script is
/// young, then answers `-BUSY` past the threshold. Commands on other shards go on.
/// `None` means: run the command now.
pub(crate) async fn busy_gate(
    shared: &Shared,
    client: &mut ClientState,
    args: &[&[u8]],
) -> Option<Reply> {
    let busy = shared.scripts.busy.clone();
    let entry = match lookup(&shared.table, args) {
        Lookup::Found(entry) => entry,
        Lookup::Error(..) => return None, // the error reply needs no lock
    };
    let spec = entry.spec;
    let needs = gate_needs(shared, client, entry, args);
    loop {
        let blocker = busy.blocking(needs.as_deref())?;
        let ran = blocker.ran;
        if ran < GRACE {
            // Scripts usually take microseconds, so the wait is short; but it must never be a
            // blocking wait on a shard lock, or a script that turns out long would hold this
            // command (and its worker thread) until it ends instead of answering -BUSY.
            busy.wait_end(GRACE - ran).await;
            continue;
        }
        let threshold = busy_threshold(shared);
        if ran < threshold {
            busy.wait_end(threshold - ran).await;
            continue;
        }
        let lock_free = spec.lock == LockMode::None
            && client.watched.is_empty()
            && !entry.spec.roles.contains(Roles::NEEDS_SHARDS);
        if spec.has(CmdFlags::ALLOW_BUSY) {
            if lock_free {
                return None;
            }
            busy.wait_end(Duration::from_millis(100)).await;
            continue;
        }
        let text = if blocker.function {
            BUSY_FUNCTION
        } else {
            BUSY
        };
        if client.multi.is_some() && entry.spec.roles.contains(Roles::EXEC) {
            if !client.watched.is_empty() {
                // Discarding unwatches, which needs the shards: wait for them.
                busy.wait_end(Duration::from_millis(100)).await;
                continue;
            }
            client.end_multi();
            let reply = Reply::Error(Cow::Owned(format!(
                "EXECABORT Transaction discarded because of: {text}"
            )));
            return Some(crate::engine::call::reject(
                shared,
                client,
                Some(entry),
                reply,
            ));
        }
        let reply = Reply::Error(Cow::Borrowed(text));
        return Some(crate::engine::call::reject(
            shared,
            client,
            Some(entry),
            reply,
        ));
    }
}

/// While scripts run: whether this command may run at once, without the busy gate (no
/// running script holds a shard it needs). A script taking one after this check is caught
/// by `call` (`ClientState::regate`). For connections that cannot wait here
/// (`server::eventloop`): false sends them to the gate on the tokio path.
pub(crate) fn gate_clear(shared: &Shared, client: &ClientState, args: &[&[u8]]) -> bool {
    let entry = match lookup(&shared.table, args) {
        Lookup::Found(entry) => entry,
        Lookup::Error(..) => return true, // the error reply needs no lock
    };
    let needs = gate_needs(shared, client, entry, args);
    shared.scripts.busy.blocking(needs.as_deref()).is_none()
}

/// Waits until no long script holds a shard of the `watched` keys (before a closing
/// connection drops its WATCHes, which locks those shards). Young scripts are about to
/// finish: the unwatch just waits on their locks. Scripts on other shards never delay it.
pub(crate) async fn wait_idle(shared: &Shared, watched: &[(usize, Bytes)]) {
    let busy: Arc<script::Busy> = shared.scripts.busy.clone();
    let shards: smallvec::SmallVec<[usize; 8]> = watched
        .iter()
        .map(|(_, k)| shared.keyspace.shard_of(k))
        .collect();
    while busy.blocking(Some(&shards)).is_some_and(|b| b.ran >= GRACE) {
        busy.wait_end(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::declared_keys;
    use crate::engine::table::CommandTable;

    /// `declared_keys` reads a script command's keys from the arguments without its key
    /// spec: for every script command of the table, and counts that fit, do not fit, are
    /// zero, negative or not numbers, it finds exactly the keys the spec finds.
    #[test]
    fn declared_keys_are_the_key_specs_keys() {
        let table = CommandTable::build();
        let mut checked = 0;
        for entry in table.entries().iter().filter(|e| e.spec.runs_script()) {
            for count in ["-1", "0", "1", "2", "3", "x", "01", ""] {
                for extra in 0..4 {
                    let mut args: Vec<&[u8]> = vec![b"evalsha", b"body", count.as_bytes()];
                    let words: [&[u8]; 3] = [b"a", b"b", b"c"];
                    args.extend(words.iter().take(extra));
                    let by_spec: Vec<&[u8]> =
                        entry.spec.keys.positions(&args).map(|i| args[i]).collect();
                    let direct = declared_keys(&args).unwrap_or_default();
                    assert_eq!(direct, &by_spec[..], "{} {count} +{extra}", entry.spec.name);
                    checked += 1;
                }
            }
        }
        assert!(
            checked >= 6 * 32,
            "EVAL, EVALSHA, their _RO forms and FCALL's"
        );
    }
}
