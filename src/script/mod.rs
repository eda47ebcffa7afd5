//! Lua scripting: the engine behind EVAL, EVALSHA and SCRIPT.
//!
//! Scripts run on Lua 5.1 (the `mlua` crate, Lua built from source), as in Redis, with the
//! environment Redis 7.0 gives them: the `redis` table, `cjson`, `bit`, `struct`, `cmsgpack`,
//! the base, string, math and table libraries, no `os`/`io`/`loadfile`/`dofile`, and globals and library tables
//! that a script cannot change (`Attempt to modify a readonly table`, `Script attempted to
//! access nonexistent global variable`). `prelude.lua` builds that environment.
//!
//! # Design
//!
//! - **One VM per worker thread** (`thread_local!`), compiling each script lazily by SHA1 the
//!   first time that thread runs it. Scripts never share a VM across threads, so there is no
//!   VM lock; the script *cache* (SHA1 → source) is one `DashMap` shared by all threads.
//!   SCRIPT FLUSH bumps a generation number and every VM rebuilds itself on its next use.
//! - **The host runs the commands.** This module knows Lua and the reply conversions, not the
//!   command table: `redis.call` hands its arguments to a [`Host`] (implemented by
//!   `commands::scripting` over the script's locked keyspace and frozen `now`), and converts the
//!   reply it gets back. Atomicity is the host's business.
//! - **Per VM, not per run.** `redis.call`/`pcall` are raw Lua C functions made once per
//!   VM (`rawcall`: arguments read straight off the Lua stack, the reply pushed straight
//!   onto it, no Lua error raised across a Rust frame that owns anything); they reach the
//!   running script's host through a slot (`HostSlot`) filled only for the run's duration
//!   (outside a run they raise Redis's `redis.call/pcall can only be called inside a script
//!   invocation`). A run is one raw `lua_pcall` of the compiled script with the error
//!   handler as its message handler (`invoke`, as Redis's `luaCallFunction`; no mlua
//!   `Function::call`, no Lua runner), its value read straight off the stack. KEYS and ARGV
//!   are two fresh tables made just before that call, as in Redis, so nothing a run writes
//!   into them reaches another's; they stay the globals `KEYS` and `ARGV` from one EVAL script to
//!   the next, and are set back to nil before a function or a library's load runs.
//!   EVALSHA finds a script this thread ran before in its VM's own map (no lock of the
//!   shared cache), and the one it ran last (with its compiled function) without a lookup.
//!   sluice's other moves of values in and out of the VM through mlua run
//!   with the memory cap lifted (`HostOps`): with a cap set, mlua wraps every operation in
//!   a protected call through a fresh C closure. The collector's settings are reset after a script only if it changed
//!   them (in Lua 5.1 a restart costs a collection step at the next allocation).
//! - **Busy scripts** are tracked in [`Busy`], one slot per thread (scripts on different
//!   shards run at once): connections read it to answer `-BUSY` past the threshold when a
//!   command needs a shard a long script holds, SCRIPT KILL sets kill flags, and an
//!   instruction-count hook in every VM checks its thread's flag and stops the script with
//!   Redis's error.

mod bitop;
mod busy;
mod cjson;
pub(crate) mod convert;
pub(crate) mod functions;
#[doc(hidden)]
pub mod fuzzing;
mod invoke;
mod lstring;
mod msgpack;
mod rawcall;
mod run;
mod structlib;

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bytes::Bytes;
use dashmap::DashMap;
use mlua::{
    Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState, ffi,
};

use crate::protocol::Reply;
use run::{HostOps, HostSlot};

pub use busy::{Announced, Blocker, Busy, BusyGuard, Held, KillOutcome, set_while_busy};

/// Redis's reply when EVALSHA names a script that is not cached. Clients key their fallback
/// to EVAL or SCRIPT LOAD on this exact text.
pub const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// Instructions between two checks of the kill flag.
const HOOK_EVERY: u32 = 100_000;

/// Most memory one worker's Lua state may hold (scripts, their values, garbage not yet
/// collected). Redis sets no limit; a script that builds more gets `not enough memory`.
pub const LUA_MEMORY_LIMIT: usize = 1 << 30;

/// Stack size of the threads that run scripts (the runtime's workers). Lua 5.1 nests C calls
/// up to 225 deep (an error handler that fails re-enters itself until `error in error
/// handling`), and some of its C functions keep an 8 KiB buffer on the stack while they
/// raise, so tokio's default 2 MiB is not enough; Redis runs scripts on its 8 MiB main thread.
pub const WORKER_STACK: usize = 16 << 20;

/// Most scripts one VM remembers for EVALSHA's lookup (past that, the shared cache).
const SHAS_PER_VM: usize = 4096;

/// After a script, a state holding more than this is collected at once, so one script's
/// garbage does not count against the next one's memory.
const COLLECT_ABOVE: usize = 64 << 20;

/// The source name scripts are compiled under (errors read `user_script:1: …`).
const CHUNK_NAME: &str = "@user_script";

/// The source name function libraries are compiled under.
const CHUNK_FN: &str = "@user_function";

/// Flags a script declares in a `#!lua flags=…` first line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScriptFlags {
    /// The script started with a shebang line.
    pub shebang: bool,
    /// `no-writes`: the script may only read (as with EVAL_RO).
    pub no_writes: bool,
    /// `allow-cross-slot-keys`: in cluster mode, its calls may touch keys of several slots.
    pub allow_cross_slot: bool,
    /// `allow-oom`: it runs, and its calls write, past maxmemory.
    pub allow_oom: bool,
}

/// A cached script.
#[derive(Debug)]
pub struct Script {
    /// Lowercase hex SHA1 of the full body.
    pub sha: String,
    /// What is compiled: the body with its shebang line blanked (line numbers are kept).
    code: Bytes,
    /// Declared flags.
    pub flags: ScriptFlags,
}

/// The script cache and the state of the running script, shared by all connections.
#[derive(Debug)]
pub struct Scripts {
    id: u64,
    /// Hashed with foldhash (hashbrown's default), not SipHash: EVALSHA looks up every time.
    cache: DashMap<String, Arc<Script>, hashbrown::DefaultHashBuilder>,
    generation: AtomicU64,
    /// The running script, if any.
    pub busy: Arc<Busy>,
    version: String,
    /// Redis 7 function libraries.
    functions: std::sync::Mutex<functions::Libraries>,
    /// Bumped when a library goes away or is replaced (VMs drop their loaded ones).
    fn_generation: AtomicU64,
    /// Scripts (by SHA1) and functions (`f:` and the name) that touched a key they did not
    /// declare: they take every shard from the start (see `commands::scripting`).
    needs_all: std::sync::Mutex<std::collections::HashSet<String>>,
    /// `needs_all`'s size, read without its lock on every script's start.
    needs_all_len: AtomicU64,
}

/// Most scripts and functions remembered as needing every shard; later ones are re-run
/// each time they touch an undeclared key, which stays correct.
pub const NEEDS_ALL_MAX: usize = 4096;

/// What runs the commands a script calls.
pub trait Host {
    /// Runs one command (name first) for `redis.call` / `redis.pcall` and returns its reply;
    /// refusals are error replies. `resp` is the script's protocol.
    fn call(&mut self, args: &[&[u8]], resp: u8) -> Reply;
    /// `redis.acl_check_cmd`: None if `args` names no command, else whether the script's
    /// user may run it with these arguments.
    fn command_allowed(&mut self, args: &[&[u8]]) -> Option<bool>;
}

/// The lowercase hex SHA1 of `bytes`.
pub fn sha1_hex(bytes: &[u8]) -> String {
    sha1_smol::Sha1::from(bytes).digest().to_string()
}

/// Splits off a `#!lua …` first line: the flags, and the code to compile.
pub fn parse_shebang(body: &[u8]) -> Result<(ScriptFlags, Bytes), String> {
    if !body.starts_with(b"#!") {
        return Ok((ScriptFlags::default(), Bytes::copy_from_slice(body)));
    }
    let end = body.iter().position(|&c| c == b'\n').unwrap_or(body.len());
    let line = String::from_utf8_lossy(&body[..end]);
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or("");
    if engine != "#!lua" {
        return Err(format!("ERR Unexpected engine in script shebang: {engine}"));
    }
    let mut flags = ScriptFlags {
        shebang: true,
        ..ScriptFlags::default()
    };
    for part in parts {
        let Some(list) = part.strip_prefix("flags=") else {
            return Err(format!("ERR Unknown lua shebang option: {part}"));
        };
        for flag in list.split(',').filter(|f| !f.is_empty()) {
            match flag {
                "no-writes" => flags.no_writes = true,
                "allow-cross-slot-keys" => flags.allow_cross_slot = true,
                "allow-oom" => flags.allow_oom = true,
                "allow-stale" | "no-cluster" => {}
                other => return Err(format!("ERR Unexpected flag in script shebang: {other}")),
            }
        }
    }
    // Keep the line count so errors name the same lines as Redis does.
    let mut code = Vec::with_capacity(body.len() - end + 1);
    code.push(b'\n');
    code.extend_from_slice(body.get(end + 1..).unwrap_or(&[]));
    Ok((flags, Bytes::from(code)))
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Scripts {
    /// An empty cache; `version` is what `redis.REDIS_VERSION` reports.
    pub fn new(version: &str) -> Self {
        Scripts {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            cache: DashMap::with_hasher(hashbrown::DefaultHashBuilder::default()),
            generation: AtomicU64::new(0),
            busy: Arc::new(Busy::default()),
            version: version.to_string(),
            functions: std::sync::Mutex::new(functions::Libraries::default()),
            fn_generation: AtomicU64::new(0),
            needs_all: std::sync::Mutex::new(std::collections::HashSet::new()),
            needs_all_len: AtomicU64::new(0),
        }
    }

    /// True if the script (its SHA1) or function (`f:` and its name) touched a key it did
    /// not declare in an earlier run.
    pub fn needs_all(&self, name: &str) -> bool {
        self.needs_all_len.load(Ordering::Acquire) != 0
            && self
                .needs_all
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(name)
    }

    /// Remembers that the script or function touched a key it did not declare (bounded by
    /// [`NEEDS_ALL_MAX`]).
    pub fn remember_needs_all(&self, name: &str) {
        let mut set = self.needs_all.lock().unwrap_or_else(|e| e.into_inner());
        if set.len() < NEEDS_ALL_MAX && !set.contains(name) {
            set.insert(name.to_string());
            self.needs_all_len
                .store(set.len() as u64, Ordering::Release);
        }
    }

    /// How many scripts and functions are remembered as needing every shard.
    pub fn needs_all_count(&self) -> usize {
        self.needs_all_len.load(Ordering::Acquire) as usize
    }

    /// The cached script with this SHA1 (any case), if any.
    pub fn get(&self, sha: &[u8]) -> Option<Arc<Script>> {
        if sha.len() != 40 {
            return None;
        }
        // This thread's VM remembers the scripts it was asked for (a lowercase SHA1, as
        // clients send it): no lock of the shared cache, no UTF-8 check.
        if let Some(script) = self.with_current_vm(|vm| vm.known(sha)).flatten() {
            return Some(script);
        }
        let key = std::str::from_utf8(sha).ok()?;
        let script = if key.bytes().any(|b| b.is_ascii_uppercase()) {
            return self
                .cache
                .get(&key.to_ascii_lowercase())
                .map(|e| e.value().clone());
        } else {
            self.cache.get(key).map(|e| e.value().clone())?
        };
        self.with_current_vm(|vm| {
            if vm.shas.len() < SHAS_PER_VM {
                vm.shas.insert(sha.into(), script.clone());
            }
        });
        Some(script)
    }

    /// Runs `f` with this thread's VM if it is built for the current script cache (same
    /// owner, no SCRIPT FLUSH since) and not in use; `None` otherwise.
    fn with_current_vm<R>(&self, f: impl FnOnce(&mut Vm) -> R) -> Option<R> {
        VM.with(|cell| {
            let mut slot = cell.try_borrow_mut().ok()?;
            let vm = slot.as_mut()?;
            let current =
                vm.owner == self.id && vm.generation == self.generation.load(Ordering::Acquire);
            current.then(|| f(vm))
        })
    }

    /// True if the SHA1 is cached.
    pub fn exists(&self, sha: &[u8]) -> bool {
        self.get(sha).is_some()
    }

    /// Number of cached scripts.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// True when no script is cached.
    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }

    /// Caches `body` after checking that it compiles (SCRIPT LOAD, EVAL). The error is the
    /// reply line Redis gives.
    pub fn load(&self, body: &[u8]) -> Result<Arc<Script>, String> {
        let sha = sha1_hex(body);
        if let Some(s) = self.cache.get(&sha) {
            return Ok(s.value().clone());
        }
        let (flags, code) = parse_shebang(body)?;
        let script = Arc::new(Script { sha, code, flags });
        self.with_vm(|vm| vm.function(&script).map(|_| ()))??;
        self.cache.insert(script.sha.clone(), script.clone());
        Ok(script)
    }

    /// SCRIPT FLUSH: forgets every script; each thread's VM is rebuilt on its next use.
    pub fn flush(&self) {
        self.cache.clear();
        self.needs_all
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|name| name.starts_with("f:"));
        let left = self
            .needs_all
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len();
        self.needs_all_len.store(left as u64, Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    fn with_vm<R>(&self, f: impl FnOnce(&mut Vm) -> R) -> Result<R, String> {
        VM.with(|cell| {
            let mut slot = cell
                .try_borrow_mut()
                .map_err(|_| "ERR scripts cannot be nested".to_string())?;
            let generation = self.generation.load(Ordering::Acquire);
            let stale =
                !matches!(&*slot, Some(vm) if vm.owner == self.id && vm.generation == generation);
            if stale {
                *slot = None;
                let vm = Vm::new(self, generation)
                    .map_err(|e| format!("ERR cannot start the Lua engine: {e}"))?;
                *slot = Some(vm);
            }
            match slot.as_mut() {
                Some(vm) => Ok(f(vm)),
                None => Err("ERR cannot start the Lua engine".to_string()),
            }
        })
    }

    /// Runs a cached script with its KEYS and ARGV; the host runs the commands it calls.
    /// The caller marks the script busy (see [`Busy::begin`]) and holds whatever makes it
    /// atomic.
    pub fn run(
        &self,
        script: &Arc<Script>,
        keys: &[&[u8]],
        argv: &[&[u8]],
        host: &mut dyn Host,
    ) -> Reply {
        match self.with_vm(|vm| vm.run(script, keys, argv, host)) {
            Ok(reply) => reply,
            Err(e) => Reply::Error(Cow::Owned(e)),
        }
    }
}

thread_local! {
    static VM: RefCell<Option<Vm>> = const { RefCell::new(None) };
}

/// An EVAL script's keys and arguments, bound as KEYS and ARGV for its run.
type EvalLists<'a> = (&'a [&'a [u8]], &'a [&'a [u8]]);

/// Marks the error a killed script stops with.
#[derive(Debug)]
struct Killed;

impl std::fmt::Display for Killed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ERR Script killed by user with SCRIPT KILL...")
    }
}

impl std::error::Error for Killed {}

/// One thread's Lua state with the script environment built.
struct Vm {
    lua: Lua,
    owner: u64,
    generation: u64,
    /// Compiled scripts by SHA1.
    functions: hashbrown::HashMap<String, Function>,
    /// The cached scripts EVALSHA found on this thread, by their lowercase SHA1 (see
    /// [`Scripts::get`]); forgotten with the VM at SCRIPT FLUSH.
    shas: hashbrown::HashMap<Box<[u8]>, Arc<Script>>,
    /// The script this VM ran last and its compiled function: a client that runs one script
    /// again and again finds it by comparing 40 bytes, without hashing its SHA1 into `shas`
    /// and `functions`. The `Arc` keeps the script alive, so its address names it (see
    /// [`Vm::run`]); gone with the VM at SCRIPT FLUSH, like the maps.
    last: Option<(Arc<Script>, Function)>,
    /// The scripts' globals (a read-only proxy).
    env: Table,
    /// `function(f, h) return xpcall(f, h) end`, for a function library's body while it loads.
    runner: Function,
    /// How KEYS and ARGV are set for an EVAL run and cleared before other code (see `invoke`).
    lists: invoke::Lists,
    /// The error handler (adds the script position to errors).
    handler: Function,
    /// The protocol chosen with redis.setresp for the running script.
    resp: Rc<Cell<u8>>,
    /// The host of the script running now (empty between runs), which `redis.call` uses.
    slot: Rc<HostSlot>,
    /// Set when a script changed the collector's settings (`collectgarbage('stop')` …).
    gc_touched: Rc<Cell<bool>>,
    /// The running script's state (the kill flag).
    busy: Arc<Busy>,
    /// The function libraries' environment (see `functions`), its metatable, and the
    /// load-time globals it points to while a library loads.
    fn_env: Table,
    fn_meta: Table,
    fn_load_globals: Table,
    /// What `redis.register_function` records while a library loads.
    fn_pending: functions::Pending,
    /// When the library load running now must stop.
    fn_deadline: Rc<Cell<Option<Instant>>>,
    /// The libraries loaded in this VM.
    fns: functions::VmFunctions,
    /// What `redis.call`/`pcall` share (also in the Lua state's app data, which keeps it
    /// alive for as long as the functions that point at it).
    calls: Rc<rawcall::CallState>,
}

/// True for the text of an error raised by a Rust function that does not raise a table.
fn error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => error_text(cause),
        // An error that crossed a Lua call made from Rust (a `gsub` callback) carries mlua's
        // traceback; Lua's own message ends before it.
        mlua::Error::RuntimeError(m) => match m.split_once("\nstack traceback:") {
            Some((msg, _)) => msg.to_string(),
            None => m.clone(),
        },
        mlua::Error::ExternalError(inner) => inner.to_string(),
        mlua::Error::WithContext { cause, .. } => error_text(cause),
        other => other.to_string(),
    }
}

fn err_reply_text(e: &mlua::Error) -> Option<String> {
    match e {
        mlua::Error::CallbackError { cause, .. } | mlua::Error::WithContext { cause, .. } => {
            err_reply_text(cause)
        }
        mlua::Error::ExternalError(inner) => inner.downcast_ref::<ErrReply>().map(|r| r.0.clone()),
        _ => None,
    }
}

fn is_killed(e: &mlua::Error) -> bool {
    match e {
        mlua::Error::CallbackError { cause, .. } | mlua::Error::WithContext { cause, .. } => {
            is_killed(cause)
        }
        mlua::Error::ExternalError(inner) => inner.downcast_ref::<Killed>().is_some(),
        _ => false,
    }
}

impl Vm {
    fn new(scripts: &Scripts, generation: u64) -> mlua::Result<Vm> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::new(),
        )?;
        let resp = Rc::new(Cell::new(2u8));
        let slot = Rc::new(HostSlot::default());
        let private = lua.create_table()?;

        // One function each for the VM's lifetime, raw C functions (see `rawcall`); the
        // running script's host is found through `slot`, filled only while a script runs.
        let calls = Rc::new(rawcall::CallState::new(slot.clone(), resp.clone()));
        // The functions point at `calls`: it lives as long as the Lua state.
        lua.set_app_data(calls.clone());
        let [call, pcall, acl_check] = rawcall::functions(&lua, &calls)?;
        private.raw_set("call", call)?;
        private.raw_set("pcall", pcall)?;
        private.raw_set("acl_check_cmd", acl_check)?;
        let lists = invoke::Lists::new(&lua)?;
        let gc_touched = Rc::new(Cell::new(false));
        let touched = gc_touched.clone();
        let raw_cg: Function = lua.globals().raw_get("collectgarbage")?;
        private.raw_set(
            "collectgarbage",
            lua.create_function(move |lua, args: MultiValue| {
                collectgarbage(lua, &raw_cg, &touched, args)
            })?,
        )?;
        private.raw_set(
            "sha1hex",
            lua.create_function(|lua, args: MultiValue| {
                if args.len() != 1 {
                    return Err(err_reply("ERR wrong number of arguments"));
                }
                let text = match &args[0] {
                    Value::String(s) => s.as_bytes().to_vec(),
                    Value::Integer(i) => i.to_string().into_bytes(),
                    Value::Number(n) => crate::num::fmt_g(*n, 14).into_bytes(),
                    _ => Vec::new(),
                };
                lua.create_string(sha1_hex(&text))
            })?,
        )?;
        private.raw_set("log", lua.create_function(redis_log)?)?;
        let r = resp.clone();
        private.raw_set(
            "setresp",
            lua.create_function(move |_, args: MultiValue| {
                if args.len() != 1 {
                    return Err(err_reply("ERR redis.setresp() requires one argument."));
                }
                match convert::to_number(&args[0]).map(|n| n.trunc()) {
                    Some(v) if v == 2.0 || v == 3.0 => {
                        r.set(v as u8);
                        Ok(())
                    }
                    _ => Err(err_reply("ERR RESP version must be 2 or 3.")),
                }
            })?,
        )?;
        private.raw_set(
            "set_repl",
            lua.create_function(|_, args: MultiValue| {
                if args.len() != 1 {
                    return Err(err_reply("ERR redis.set_repl() requires two arguments."));
                }
                let v = convert::to_number(&args[0]).unwrap_or(0.0).trunc();
                if !(0.0..=3.0).contains(&v) {
                    return Err(err_reply(
                        "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                    ));
                }
                Ok(())
            })?,
        )?;
        let busy = scripts.busy.clone();
        private.raw_set(
            "killed",
            lua.create_function(move |_, ()| Ok(busy.killed()))?,
        )?;
        private.raw_set(
            "errmsg",
            lua.create_function(|lua, v: Value| match v {
                Value::Error(e) => Ok(Value::String(lua.create_string(error_message(&e))?)),
                _ => Ok(Value::Nil),
            })?,
        )?;
        private.raw_set(
            "cjson_encode",
            lua.create_function(|lua, args| raising(lua, cjson::encode(lua, args)?))?,
        )?;
        private.raw_set(
            "cjson_decode",
            lua.create_function(|lua, args| raising(lua, cjson::decode(lua, args)?))?,
        )?;
        private.raw_set(
            "cjson_encode_max_depth",
            lua.create_function(|lua, args| raising(lua, cjson::max_depth(lua, args, false)?))?,
        )?;
        private.raw_set(
            "cjson_decode_max_depth",
            lua.create_function(|lua, args| raising(lua, cjson::max_depth(lua, args, true)?))?,
        )?;
        private.raw_set(
            "cjson_encode_invalid_numbers",
            lua.create_function(|lua, args| {
                raising(lua, cjson::encode_invalid_numbers(lua, args)?)
            })?,
        )?;
        private.raw_set("null", cjson::null())?;
        let bit = lua.create_table()?;
        for &name in bitop::FUNCTIONS {
            bit.raw_set(
                name,
                lua.create_function(move |lua, args| raising(lua, bitop::call(lua, name, args)?))?,
            )?;
        }
        private.raw_set("bit", bit)?;
        let library = |f: fn(&Lua, MultiValue) -> Result<MultiValue, String>| {
            lua.create_function(move |lua, args| f(lua, args).map_err(|m| raise_here(lua, &m)))
        };
        let st = lua.create_table()?;
        st.raw_set("pack", library(structlib::pack)?)?;
        st.raw_set("unpack", library(structlib::unpack)?)?;
        st.raw_set("size", library(structlib::size)?)?;
        private.raw_set("struct", st)?;
        let mp = lua.create_table()?;
        mp.raw_set("pack", library(msgpack::pack)?)?;
        mp.raw_set("unpack", library(|l, a| msgpack::unpack(l, a, 0))?)?;
        mp.raw_set("unpack_one", library(|l, a| msgpack::unpack(l, a, 1))?)?;
        mp.raw_set("unpack_limit", library(|l, a| msgpack::unpack(l, a, 2))?)?;
        private.raw_set("cmsgpack", mp)?;
        let handler = lua.create_function(error_handler)?;
        private.raw_set("error_handler", handler.clone())?;
        let stop = scripts.busy.clone();
        let env = lstring::Env {
            stop: Rc::new(move || stop.poll()),
            killed: Rc::new(|| mlua::Error::external(Killed)),
            raise: raise_here,
            max_len: LUA_MEMORY_LIMIT,
        };
        let e = env.clone();
        private.raw_set(
            "str_find",
            lua.create_function(move |lua, args| lstring::find(&e, lua, args, true))?,
        )?;
        let e = env.clone();
        private.raw_set(
            "str_match",
            lua.create_function(move |lua, args| lstring::find(&e, lua, args, false))?,
        )?;
        let e = env.clone();
        private.raw_set(
            "str_gmatch",
            lua.create_function(move |lua, args| lstring::gmatch(&e, lua, args))?,
        )?;
        let e = env.clone();
        private.raw_set(
            "str_gsub",
            lua.create_function(move |lua, args| lstring::gsub(&e, lua, args))?,
        )?;
        let e = env;
        private.raw_set(
            "str_rep",
            lua.create_function(move |lua, args| lstring::rep(&e, lua, args))?,
        )?;

        let (major, minor, patch) = version_parts(&scripts.version);
        let env: Table = lua
            .load(include_str!("prelude.lua"))
            .set_name("=sluice")
            .call((
                private.clone(),
                scripts.version.clone(),
                (major << 16) | (minor << 8) | patch,
            ))?;
        let runner: Function = private.raw_get("runner")?;
        let fn_pending: functions::Pending = Rc::new(RefCell::new(None));
        let (fn_env, fn_meta, fn_load_globals) = functions::build_env(
            &lua,
            &fn_pending,
            &scripts.version,
            (major << 16) | (minor << 8) | patch,
        )?;
        fn_meta.raw_set("__index", env.clone())?;
        fn_meta.raw_set("__newindex", env.clone())?;
        let fn_deadline: Rc<Cell<Option<Instant>>> = Rc::new(Cell::new(None));
        let deadline = fn_deadline.clone();

        // A global hook, not `set_hook`: mlua keeps a per-thread hook only for the thread it
        // was set on and removes it from any other, so a loop inside a coroutine the script
        // created would never be checked. Lua 5.1 copies the hook into every new coroutine.
        let busy = scripts.busy.clone();
        lua.set_global_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            move |_, _| {
                if deadline.get().is_some_and(|d| Instant::now() >= d) {
                    return Err(functions::load_timeout());
                }
                if busy.poll() {
                    return Err(mlua::Error::external(Killed));
                }
                Ok(VmState::Continue)
            },
        )?;

        lua.set_memory_limit(LUA_MEMORY_LIMIT)?;

        Ok(Vm {
            lua,
            owner: scripts.id,
            generation,
            functions: hashbrown::HashMap::new(),
            shas: hashbrown::HashMap::new(),
            last: None,
            env,
            runner,
            lists,
            handler,
            resp,
            slot,
            gc_touched,
            busy: scripts.busy.clone(),
            fn_env,
            fn_meta,
            fn_load_globals,
            fn_pending,
            fn_deadline,
            fns: functions::VmFunctions::default(),
            calls,
        })
    }

    /// The compiled function of `script`, compiling it on first use in this VM.
    fn function(&mut self, script: &Script) -> Result<Function, String> {
        if let Some(f) = self.functions.get(&script.sha) {
            return Ok(f.clone());
        }
        // Redis's Lua has no undumper: a precompiled chunk goes to the text parser, which
        // stops at its first byte. A leading space gives the same parse (and message) while
        // the chunk never reaches Lua's loader as binary.
        let code: Cow<'_, [u8]> = if script.code.first() == Some(&27) {
            let mut c = Vec::with_capacity(script.code.len() + 1);
            c.push(b' ');
            c.extend_from_slice(&script.code);
            Cow::Owned(c)
        } else {
            Cow::Borrowed(&script.code[..])
        };
        let f = self
            .lua
            .load(&code[..])
            .set_name(CHUNK_NAME)
            .set_mode(mlua::ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| {
                let msg = match &e {
                    mlua::Error::SyntaxError { message, .. } => message.clone(),
                    other => error_text(other),
                };
                format!(
                    "ERR Error compiling script (new function): {}",
                    msg.replace(['\r', '\n'], " ")
                )
            })?;
        self.functions.insert(script.sha.clone(), f.clone());
        Ok(f)
    }

    /// The cached script with this lowercase SHA1 that EVALSHA found on this thread before:
    /// the last one run, else from `shas`.
    fn known(&self, sha: &[u8]) -> Option<Arc<Script>> {
        match &self.last {
            Some((script, _)) if script.sha.as_bytes() == sha => Some(script.clone()),
            _ => self.shas.get(sha).cloned(),
        }
    }

    fn run(
        &mut self,
        script: &Arc<Script>,
        keys: &[&[u8]],
        argv: &[&[u8]],
        host: &mut dyn Host,
    ) -> Reply {
        // The same script as the last run (`last` holds an `Arc` of it, so no other script
        // can have its address): its function is at hand, no clone of its reference.
        let again = matches!(&self.last, Some((last, _)) if Arc::ptr_eq(last, script));
        if !again {
            match self.function(script) {
                Ok(f) => self.last = Some((script.clone(), f)),
                Err(e) => return Reply::Error(Cow::Owned(e)),
            }
        }
        let reply = match &self.last {
            Some((_, f)) => self.finish(f, &script.sha, host, Some((keys, argv))),
            None => Reply::Error(Cow::Borrowed("ERR cannot start the Lua engine")),
        };
        self.collect_if_large();
        reply
    }

    /// Sets `KEYS` and `ARGV` back to nil before Lua code that is neither an EVAL script nor
    /// a function runs (a library's load).
    fn unbind_lists(&self) {
        let _host = HostOps::new(&self.lua);
        self.lua.exec_raw_lua(|raw| {
            // SAFETY: the VM's main state outside any Lua call, the cap lifted (see `invoke`).
            unsafe { self.lists.unbind(raw.state()) }
        });
    }

    /// After a script, a state holding more than [`COLLECT_ABOVE`] is collected at once,
    /// so one script's garbage does not count against the next one's memory.
    fn collect_if_large(&self) {
        if self.lua.used_memory() > COLLECT_ABOVE {
            let _ = self.lua.gc_collect();
        }
    }

    /// Calls `f` (a script or a bound function) as the running script called `name`
    /// (its SHA1 or function name, for error replies), then restores the collector.
    /// `lists`: an EVAL script's keys and arguments, bound as KEYS and ARGV for the call.
    fn finish(
        &self,
        f: &Function,
        name: &str,
        host: &mut dyn Host,
        lists: Option<EvalLists<'_>>,
    ) -> Reply {
        let reply = self.call(f, name, host, lists);
        // `collectgarbage` is open to scripts, as in Redis; what one script sets (a stopped
        // collector, an endless pause) must not stay for the next one. Only scripts that
        // changed a setting pay for the reset: in Lua 5.1 a restart makes the next
        // allocation run a collection step.
        if self.gc_touched.replace(false) {
            self.lua.gc_restart();
            self.lua.gc_set_pause(200);
            self.lua.gc_set_step_multiplier(200);
        }
        reply
    }

    /// One protected call of `f` with the error handler, in raw Lua API calls (see
    /// `invoke`): the handler and `f` pushed, KEYS and ARGV bound (for a function: unbound),
    /// `lua_pcall`, the result read off the stack.
    fn call(
        &self,
        f: &Function,
        name: &str,
        host: &mut dyn Host,
        lists: Option<EvalLists<'_>>,
    ) -> Reply {
        self.resp.set(2);
        self.lua.exec_raw_lua(|raw| {
            let l = raw.state();
            // SAFETY: `l` is this VM's main state, not inside any Lua call (the VM is not
            // re-entrant: its `RefCell` is borrowed for this run). Until `lua_pcall` and after
            // it, everything runs with the memory cap lifted, so nothing below raises (see
            // `invoke`); the stack is put back to `top` before this returns or unwinds.
            unsafe {
                let top = ffi::lua_gettop(l);
                {
                    let _host = HostOps::new(&self.lua);
                    if ffi::lua_checkstack(l, 8) == 0
                        || raw.push(&self.handler).is_err()
                        || raw.push(f).is_err()
                    {
                        ffi::lua_settop(l, top);
                        return Reply::Error(Cow::Owned(format!(
                            "ERR Error running script {name}, stack overflow"
                        )));
                    }
                    match lists {
                        Some((keys, argv)) => self.lists.bind(l, keys, argv),
                        None => self.lists.unbind(l),
                    }
                }
                let status = {
                    let _running = self.slot.enter(host);
                    ffi::lua_pcall(l, 0, 1, top + 1)
                };
                let _host = HostOps::new(&self.lua);
                // A command that panicked under `redis.call` panics here, as mlua resumes a
                // panic in its callbacks once Lua has returned.
                if let Some(payload) = self.calls.take_panic() {
                    ffi::lua_settop(l, top);
                    std::panic::resume_unwind(payload);
                }
                let resp = self.resp.get();
                let reply = if status != ffi::LUA_OK {
                    raised_error(&raw.pop_value(), name)
                } else if let Some(reply) = invoke::scalar_reply(l, resp) {
                    reply
                } else {
                    let value = raw.pop_value();
                    let busy = &self.busy;
                    convert::lua_to_reply_stoppable(&value, resp, &|| busy.poll()).unwrap_or_else(
                        || {
                            Reply::Error(Cow::Owned(format!(
                                "{Killed} script: {name}, while converting its reply."
                            )))
                        },
                    )
                };
                ffi::lua_settop(l, top);
                reply
            }
        })
    }
}

fn version_parts(v: &str) -> (i64, i64, i64) {
    let mut it = v.split('.').map(|p| p.parse::<i64>().unwrap_or(0));
    (
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
    )
}

fn strings(lua: &Lua, items: &[&[u8]]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, b) in items.iter().enumerate() {
        t.raw_set(i + 1, lua.create_string(b)?)?;
    }
    Ok(t)
}

/// An error Redis raises as a `{err=…}` table (redis.call failures and redis.* argument
/// errors): the message has no position; the handler adds where it happened.
#[derive(Debug)]
struct ErrReply(String);

impl std::fmt::Display for ErrReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ErrReply {}

fn err_reply(msg: &str) -> mlua::Error {
    mlua::Error::external(ErrReply(msg.to_string()))
}

/// The message of an error raised from Rust, as a script's `pcall` returns it.
fn error_message(e: &mlua::Error) -> String {
    if is_killed(e) {
        return Killed.to_string();
    }
    error_text(e)
}

/// Like `luaL_error`: the message prefixed with the calling Lua code's position.
fn raise_here(lua: &Lua, msg: &str) -> mlua::Error {
    let prefix = lua
        .inspect_stack(1, |d| {
            let src = d.source();
            match (src.what, d.current_line()) {
                ("C", _) | (_, None) => String::new(),
                (_, Some(line)) => format!("{}:{line}: ", src.short_src.as_deref().unwrap_or("?")),
            }
        })
        .unwrap_or_default();
    mlua::Error::RuntimeError(format!("{prefix}{msg}"))
}

/// Turns a library function's `(true, value)` / `(false, message)` into a value or a raised
/// error.
fn raising(lua: &Lua, out: MultiValue) -> mlua::Result<Value> {
    let mut it = out.into_iter();
    match (it.next(), it.next()) {
        (Some(Value::Boolean(true)), Some(v)) => Ok(v),
        (Some(Value::Boolean(false)), Some(Value::String(m))) => {
            Err(raise_here(lua, &m.to_string_lossy()))
        }
        _ => Ok(Value::Nil),
    }
}

/// Lua 5.1's `collectgarbage`, which also notes (in `touched`) a script that changed the
/// collector's settings, so that only such a script pays for their reset (`Vm::finish`).
/// A Rust function, like the other library functions that raise: its errors carry the
/// calling line even from a tail call. The arguments are checked here with Lua's texts, so
/// the real function, called after, never raises.
fn collectgarbage(
    lua: &Lua,
    raw: &Function,
    touched: &Cell<bool>,
    args: MultiValue,
) -> mlua::Result<MultiValue> {
    const OPTIONS: [&str; 7] = [
        "stop",
        "restart",
        "collect",
        "count",
        "step",
        "setpause",
        "setstepmul",
    ];
    let bad = |n: u8, msg: String| {
        raise_here(
            lua,
            &format!("bad argument #{n} to 'collectgarbage' ({msg})"),
        )
    };
    let opt: Cow<'_, str> = match args.front() {
        None | Some(Value::Nil) => Cow::Borrowed("collect"),
        Some(Value::String(s)) => Cow::Owned(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
        Some(Value::Integer(i)) => Cow::Owned(crate::num::fmt_g(*i as f64, 14)),
        Some(Value::Number(n)) => Cow::Owned(crate::num::fmt_g(*n, 14)),
        Some(other) => {
            return Err(bad(
                1,
                format!("string expected, got {}", cjson::lua_type_name(other)),
            ));
        }
    };
    let Some(&opt) = OPTIONS.iter().find(|o| **o == opt) else {
        return Err(bad(1, format!("invalid option '{opt}'")));
    };
    let n = args.get(1).cloned().unwrap_or(Value::Nil);
    if !n.is_nil() && convert::to_number(&n).is_none() {
        return Err(bad(
            2,
            format!("number expected, got {}", cjson::lua_type_name(&n)),
        ));
    }
    if !matches!(opt, "collect" | "count" | "step") {
        touched.set(true);
    }
    raw.call((opt, n))
}

/// `redis.log(level, message …)`.
fn redis_log(_: &Lua, args: MultiValue) -> mlua::Result<()> {
    if args.len() < 2 {
        return Err(err_reply("ERR redis.log() requires two arguments or more."));
    }
    let Some(level) = convert::to_number(&args[0]) else {
        return Err(err_reply(
            "ERR First argument must be a number (log level).",
        ));
    };
    let level = level.trunc();
    if !(0.0..=3.0).contains(&level) {
        return Err(err_reply("ERR Invalid debug level."));
    }
    let mut line = String::new();
    for (i, a) in args.iter().enumerate().skip(1) {
        let text = match a {
            Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
            Value::Integer(n) => n.to_string(),
            Value::Number(n) => crate::num::fmt_g(*n, 14),
            _ => continue,
        };
        if i > 1 {
            line.push(' ');
        }
        line.push_str(&text);
    }
    match level as u8 {
        0 => tracing::debug!(target: "sluice::script", "{line}"),
        1 | 2 => tracing::info!(target: "sluice::script", "{line}"),
        _ => tracing::warn!(target: "sluice::script", "{line}"),
    }
    Ok(())
}

/// The message handler of every script call: turns the error into Redis's
/// `{err=…, source=…, line=…}` table, with the position of the script code that failed.
fn error_handler(lua: &Lua, err: Value) -> mlua::Result<Value> {
    let table = match err {
        Value::Table(t) => t,
        other => {
            let text = match &other {
                Value::Error(e) if is_killed(e) => Killed.to_string(),
                Value::Error(e) => match err_reply_text(e) {
                    Some(msg) => msg,
                    None => format!("ERR {}", error_text(e)),
                },
                Value::String(s) => format!("ERR {}", s.to_string_lossy()),
                Value::Integer(i) => format!("ERR {i}"),
                Value::Number(n) => format!("ERR {}", crate::num::fmt_g(*n, 14)),
                Value::Nil => "ERR nil".to_string(),
                Value::Boolean(b) => format!("ERR {b}"),
                _ => "ERR unknown error".to_string(),
            };
            let t = lua.create_table_with_capacity(0, 3)?;
            t.raw_set("err", text)?;
            t
        }
    };
    // Level 0 is this handler; find the first Lua frame above it that is script code (not a
    // C function, not sluice's own wrappers).
    for level in 1..64 {
        let found = lua.inspect_stack(level, |d| {
            let src = d.source();
            // Skip C functions, sluice's own wrappers, and the "(tail call)" placeholders Lua
            // 5.1 leaves where a tail call replaced a frame.
            if src.what == "C" || src.what == "tail" || src.source.as_deref() == Some("=sluice") {
                None
            } else {
                Some((
                    src.source.as_deref().unwrap_or("?").to_string(),
                    d.current_line(),
                ))
            }
        });
        match found {
            None => break,
            Some(None) => continue,
            Some(Some((source, line))) => {
                table.raw_set("source", source)?;
                if let Some(line) = line {
                    table.raw_set("line", line)?;
                }
                break;
            }
        }
    }
    Ok(Value::Table(table))
}

/// The reply for an error a script raised: its message, plus where it happened.
fn raised_error(v: &Value, sha: &str) -> Reply {
    if let Value::String(s) = v {
        // What Lua itself reports without calling the handler: running out of memory.
        return Reply::Error(Cow::Owned(format!(
            "ERR Error running script {sha}, {}",
            convert::one_line(&s.as_bytes())
        )));
    }
    let Value::Table(t) = v else {
        return Reply::Error(Cow::Owned(format!(
            "ERR Error running script {sha}, execution failure"
        )));
    };
    let msg = match t.raw_get::<Value>("err") {
        Ok(Value::String(s)) => convert::one_line(&s.as_bytes()),
        Ok(Value::Integer(i)) => i.to_string(),
        Ok(Value::Number(n)) => crate::num::fmt_g(n, 14),
        _ => "ERR unknown error".to_string(),
    };
    let source = match t.raw_get::<Value>("source") {
        Ok(Value::String(s)) => Some(convert::one_line(&s.as_bytes())),
        _ => None,
    };
    let line = match t.raw_get::<Value>("line") {
        Ok(Value::Integer(i)) => Some(i),
        Ok(Value::Number(n)) => Some(n as i64),
        _ => None,
    };
    match (source, line) {
        (Some(source), Some(line)) => Reply::Error(Cow::Owned(format!(
            "{msg} script: {sha}, on {source}:{line}."
        ))),
        _ => Reply::Error(Cow::Owned(msg)),
    }
}

#[cfg(test)]
mod tests;
