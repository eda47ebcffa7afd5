//! Redis 7 functions: the library registry, the `#!lua name=…` metadata, the load-time run
//! (`redis.register_function`) and FCALL's call of a registered function.
//!
//! A library is checked once on the loading connection's VM: its code runs there in Redis's
//! load-time environment, whose only globals are a `redis` table with `register_function`,
//! `log`, the `LOG_*` levels and the version fields (anything else is a nonexistent global,
//! and the tables are read-only). The registry keeps the code and what was registered; every
//! other worker's VM runs the same code again the first time it calls one of the library's
//! functions, so no Lua value is shared between threads.
//!
//! The library's chunk gets an environment of its own whose lookups go to the load-time
//! globals while it loads and to the scripts' globals afterwards (as Redis switches its
//! globals' `__index`), so the registered callbacks run in the same sandbox as EVAL scripts.
//! A load that runs past [`LOAD_TIMEOUT`] stops with Redis's `FUNCTION LOAD timeout`.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mlua::{Function, Lua, MultiValue, Table, Value};

use super::{CHUNK_FN, ErrReply, Host, Scripts, Vm, err_reply, raise_here};
use crate::protocol::Reply;

/// How long a library's load code may run (Redis's `LOAD_TIMEOUT_MS`).
pub(crate) const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

/// The flags a function declares with `redis.register_function{…, flags={…}}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FunctionFlags {
    /// `no-writes`: may only read; FCALL_RO may call it.
    pub no_writes: bool,
    /// `allow-oom`: runs (and writes) past maxmemory.
    pub allow_oom: bool,
    /// `allow-stale`: accepted (sluice has no replicas).
    pub allow_stale: bool,
    /// `no-cluster`: refused in cluster mode.
    pub no_cluster: bool,
    /// `allow-cross-slot-keys`: accepted.
    pub allow_cross_slot_keys: bool,
}

impl FunctionFlags {
    /// The flag names, in Redis's order (FUNCTION LIST).
    pub fn names(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        for (on, name) in [
            (self.no_writes, "no-writes"),
            (self.allow_oom, "allow-oom"),
            (self.allow_stale, "allow-stale"),
            (self.no_cluster, "no-cluster"),
            (self.allow_cross_slot_keys, "allow-cross-slot-keys"),
        ] {
            if on {
                out.push(name);
            }
        }
        out
    }
}

/// One registered function.
#[derive(Debug, Clone)]
pub struct FunctionInfo {
    /// Its name (unique across libraries).
    pub name: String,
    /// `description=`, if given.
    pub description: Option<Bytes>,
    /// Its flags.
    pub flags: FunctionFlags,
}

/// A loaded library.
#[derive(Debug)]
pub struct Library {
    /// Unique per load, so VMs notice a replaced library.
    id: u64,
    /// The library name from its metadata.
    pub name: String,
    /// The payload as loaded (FUNCTION LIST WITHCODE, FUNCTION DUMP).
    pub code: Bytes,
    /// What is compiled: the payload from the end of its first line on.
    body: Bytes,
    /// Its functions, in registration order.
    pub functions: Vec<FunctionInfo>,
}

/// The libraries and the function name index.
#[derive(Debug, Default)]
pub(crate) struct Libraries {
    libraries: BTreeMap<String, Arc<Library>>,
    /// By name in lower case: function names are case-insensitive, as in Redis (its
    /// functions' dictionary hashes and compares them ignoring case).
    functions: HashMap<String, (Arc<Library>, usize)>,
}

impl Libraries {
    fn add(&mut self, lib: Arc<Library>) {
        for (i, f) in lib.functions.iter().enumerate() {
            // The first of two names equal but for case keeps the slot, as Redis's dictAdd.
            self.functions
                .entry(f.name.to_ascii_lowercase())
                .or_insert_with(|| (lib.clone(), i));
        }
        self.libraries.insert(lib.name.clone(), lib);
    }

    fn remove(&mut self, name: &str) -> Option<Arc<Library>> {
        let lib = self.libraries.remove(name)?;
        for f in &lib.functions {
            self.functions.remove(&f.name.to_ascii_lowercase());
        }
        Some(lib)
    }

    /// The first function of `lib` that another library already registered.
    fn collision(&self, lib: &Library) -> Option<String> {
        lib.functions
            .iter()
            .find(|f| {
                self.functions
                    .get(&f.name.to_ascii_lowercase())
                    .is_some_and(|(other, _)| other.name != lib.name)
            })
            .map(|f| format!("ERR Function {} already exists", f.name))
    }
}

/// What FUNCTION RESTORE does with libraries that exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestorePolicy {
    /// Drop every library first.
    Flush,
    /// Refuse a library that exists.
    Append,
    /// Replace a library that exists.
    Replace,
}

/// True for a valid library or function name.
fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_')
}

const BAD_NAME: &str = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// Splits a payload into its library name and the code to compile (from the end of the
/// shebang line, so line numbers match Redis's).
fn parse_metadata(payload: &[u8]) -> Result<(String, Bytes), String> {
    if !payload.starts_with(b"#!") {
        return Err("ERR Missing library metadata".into());
    }
    let Some(end) = payload.iter().position(|&c| c == b'\n') else {
        return Err("ERR Invalid library metadata".into());
    };
    let parts = match crate::protocol::request::split_args(&payload[..end]) {
        Some(p) if !p.is_empty() => p,
        _ => return Err("ERR Invalid library metadata".into()),
    };
    let engine = parts[0].get(2..).unwrap_or(&[]);
    let mut name: Option<&[u8]> = None;
    for part in &parts[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    "ERR Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(&part[5..]);
            continue;
        }
        return Err(format!(
            "ERR Invalid metadata value given: {}",
            String::from_utf8_lossy(part)
        ));
    }
    let Some(name) = name else {
        return Err("ERR Library name was not given".into());
    };
    if !valid_name(name) {
        return Err(format!("ERR {BAD_NAME}"));
    }
    if !engine.eq_ignore_ascii_case(b"lua") {
        return Err(format!(
            "ERR Engine '{}' not found",
            String::from_utf8_lossy(engine)
        ));
    }
    let name = String::from_utf8_lossy(name).into_owned();
    Ok((name, Bytes::copy_from_slice(&payload[end..])))
}

/// A function `redis.register_function` recorded during a load run.
pub(super) struct Registered {
    info: FunctionInfo,
    callback: Function,
}

/// Where `redis.register_function` records, while a load runs.
pub(super) type Pending = Rc<RefCell<Option<Vec<Registered>>>>;

/// The per-VM state of functions.
#[derive(Default)]
pub(super) struct VmFunctions {
    /// Library name → (library id, its callbacks by function name).
    libs: HashMap<String, (u64, HashMap<String, Function>)>,
    /// The registry generation these were loaded under.
    generation: u64,
}

fn lua_text(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(i) => Some(i.to_string().into_bytes()),
        Value::Number(n) => Some(crate::num::fmt_g(*n, 14).into_bytes()),
        _ => None,
    }
}

fn parse_flags(v: &Value) -> mlua::Result<FunctionFlags> {
    let Value::Table(t) = v else {
        return Err(err_reply(
            "ERR flags argument to redis.register_function must be a table representing function flags",
        ));
    };
    let mut flags = FunctionFlags::default();
    for pair in t.clone().pairs::<Value, Value>() {
        let (_, flag) = pair?;
        let name = match &flag {
            Value::String(s) => s.as_bytes().to_vec(),
            _ => return Err(err_reply("ERR unknown flag given")),
        };
        match &name[..] {
            b"no-writes" => flags.no_writes = true,
            b"allow-oom" => flags.allow_oom = true,
            b"allow-stale" => flags.allow_stale = true,
            b"no-cluster" => flags.no_cluster = true,
            b"allow-cross-slot-keys" => flags.allow_cross_slot_keys = true,
            _ => return Err(err_reply("ERR unknown flag given")),
        }
    }
    Ok(flags)
}

/// `redis.register_function(name, callback)` or `redis.register_function{function_name=…,
/// callback=…, flags=…, description=…}`.
fn register_function(pending: &Pending, args: MultiValue) -> mlua::Result<()> {
    let (name, callback, flags, description) = match args.len() {
        1 => {
            let Value::Table(t) = &args[0] else {
                return Err(err_reply(
                    "ERR calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).",
                ));
            };
            let (mut name, mut callback, mut flags, mut description) =
                (None, None, FunctionFlags::default(), None);
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, v) = pair?;
                let key = match &k {
                    Value::String(s) => s.as_bytes().to_vec(),
                    _ => {
                        return Err(err_reply(
                            "ERR unknown argument given to redis.register_function",
                        ));
                    }
                };
                match &key[..] {
                    b"function_name" => {
                        name = Some(lua_text(&v).ok_or_else(|| {
                            err_reply("ERR function_name argument given to redis.register_function must be a string")
                        })?);
                    }
                    b"description" => {
                        description = Some(lua_text(&v).ok_or_else(|| {
                            err_reply("ERR description argument given to redis.register_function must be a string")
                        })?);
                    }
                    b"callback" => match v {
                        Value::Function(f) => callback = Some(f),
                        _ => {
                            return Err(err_reply(
                                "ERR callback argument given to redis.register_function must be a function",
                            ));
                        }
                    },
                    b"flags" => flags = parse_flags(&v)?,
                    _ => {
                        return Err(err_reply(
                            "ERR unknown argument given to redis.register_function",
                        ));
                    }
                }
            }
            let Some(name) = name else {
                return Err(err_reply(
                    "ERR redis.register_function must get a function name argument",
                ));
            };
            let Some(callback) = callback else {
                return Err(err_reply(
                    "ERR redis.register_function must get a callback argument",
                ));
            };
            (name, callback, flags, description)
        }
        2 => {
            let name = lua_text(&args[0]).ok_or_else(|| {
                err_reply("ERR first argument to redis.register_function must be a string")
            })?;
            let Value::Function(callback) = args[1].clone() else {
                return Err(err_reply(
                    "ERR second argument to redis.register_function must be a function",
                ));
            };
            (name, callback, FunctionFlags::default(), None)
        }
        _ => {
            return Err(err_reply(
                "ERR wrong number of arguments to redis.register_function",
            ));
        }
    };
    if !valid_name(&name) {
        return Err(err_reply(&format!("ERR {BAD_NAME}")));
    }
    let name = String::from_utf8_lossy(&name).into_owned();
    let mut slot = pending.borrow_mut();
    let Some(list) = slot.as_mut() else {
        return Err(err_reply(
            "ERR redis.register_function can only be called on FUNCTION LOAD command",
        ));
    };
    // Case-sensitive within a library (Redis's library dictionary), unlike FCALL's lookup.
    if list.iter().any(|r| r.info.name == name) {
        return Err(err_reply("ERR Function already exists in the library"));
    }
    list.push(Registered {
        info: FunctionInfo {
            name,
            description: description.map(Bytes::from),
            flags,
        },
        callback,
    });
    Ok(())
}

/// A read-only proxy of `real` whose missing keys raise Redis's nonexistent-global error.
fn strict_proxy(lua: &Lua, real: Table) -> mlua::Result<Table> {
    let proxy = lua.create_table()?;
    let mt = lua.create_table()?;
    mt.raw_set(
        "__index",
        lua.create_function(move |lua, (_, k): (Value, Value)| {
            let v: Value = real.raw_get(k.clone())?;
            if v.is_nil() {
                let name = lua_text(&k)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_else(|| "?".into());
                return Err(raise_here(
                    lua,
                    &format!("Script attempted to access nonexistent global variable '{name}'"),
                ));
            }
            Ok(v)
        })?,
    )?;
    mt.raw_set(
        "__newindex",
        lua.create_function(|lua, _: MultiValue| -> mlua::Result<()> {
            Err(raise_here(lua, "Attempt to modify a readonly table"))
        })?,
    )?;
    mt.raw_set("__metatable", false)?;
    proxy.set_metatable(Some(mt))?;
    Ok(proxy)
}

/// Builds a VM's function environment: returns the libraries' switchable environment, its
/// metatable, and the load-time globals.
pub(super) fn build_env(
    lua: &Lua,
    pending: &Pending,
    version: &str,
    version_num: i64,
) -> mlua::Result<(Table, Table, Table)> {
    let redis = lua.create_table()?;
    let p = pending.clone();
    redis.raw_set(
        "register_function",
        lua.create_function(move |_, args: MultiValue| register_function(&p, args))?,
    )?;
    redis.raw_set("log", lua.create_function(super::redis_log)?)?;
    for (name, level) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
    ] {
        redis.raw_set(name, level)?;
    }
    redis.raw_set("REDIS_VERSION", version)?;
    redis.raw_set("REDIS_VERSION_NUM", version_num)?;
    let globals = lua.create_table()?;
    globals.raw_set("redis", strict_proxy(lua, redis)?)?;
    let load_globals = strict_proxy(lua, globals)?;
    let env = lua.create_table()?;
    let meta = lua.create_table()?;
    meta.raw_set("__metatable", false)?;
    env.set_metatable(Some(meta.clone()))?;
    Ok((env, meta, load_globals))
}

impl Vm {
    /// Points the libraries' environment at the load-time globals (`true`) or at the scripts'.
    fn load_mode(&self, on: bool) -> mlua::Result<()> {
        let target = if on {
            self.fn_load_globals.clone()
        } else {
            self.env.clone()
        };
        self.fn_meta.raw_set("__index", target.clone())?;
        self.fn_meta.raw_set("__newindex", target)?;
        Ok(())
    }

    /// Compiles and runs a library's load code; returns what it registered.
    fn load_library(&mut self, body: &[u8]) -> Result<Vec<Registered>, String> {
        let f = self
            .lua
            .load(body)
            .set_name(CHUNK_FN)
            .set_mode(mlua::ChunkMode::Text)
            .set_environment(self.fn_env.clone())
            .into_function()
            .map_err(|e| {
                let msg = match &e {
                    mlua::Error::SyntaxError { message, .. } => message.clone(),
                    other => super::error_text(other),
                };
                format!(
                    "ERR Error compiling function: {}",
                    msg.replace(['\r', '\n'], " ")
                )
            })?;
        self.unbind_lists();
        *self.fn_pending.borrow_mut() = Some(Vec::new());
        self.fn_deadline.set(Some(Instant::now() + LOAD_TIMEOUT));
        let result = self
            .load_mode(true)
            .and_then(|()| self.runner.call::<MultiValue>((f, self.handler.clone())));
        self.fn_deadline.set(None);
        let _ = self.load_mode(false);
        let registered = self.fn_pending.borrow_mut().take().unwrap_or_default();
        let out = result.map_err(|e| {
            format!(
                "ERR Error registering functions: {}",
                super::error_text(&e).replace(['\r', '\n'], " ")
            )
        })?;
        let mut values = out.into_iter();
        if !matches!(values.next(), Some(Value::Boolean(true))) {
            let msg = match values.next() {
                Some(Value::Table(t)) => match t.raw_get::<Value>("err") {
                    Ok(Value::String(s)) => super::convert::one_line(&s.as_bytes()),
                    _ => "ERR unknown error".to_string(),
                },
                Some(Value::String(s)) => super::convert::one_line(&s.as_bytes()),
                _ => "ERR unknown error".to_string(),
            };
            return Err(format!("ERR Error registering functions: {msg}"));
        }
        if registered.is_empty() {
            return Err("ERR No functions registered".into());
        }
        Ok(registered)
    }

    fn sync_functions(&mut self, generation: u64) {
        if self.fns.generation != generation {
            self.fns.libs.clear();
            self.fns.generation = generation;
        }
    }

    /// Runs function `index` of `lib` with its keys and arguments.
    fn run_function(
        &mut self,
        generation: u64,
        lib: &Library,
        index: usize,
        keys: &[&[u8]],
        argv: &[&[u8]],
        host: &mut dyn Host,
    ) -> Reply {
        self.sync_functions(generation);
        let Some(info) = lib.functions.get(index) else {
            return Reply::Error(Cow::Borrowed("ERR Function not found"));
        };
        let fresh = !matches!(self.fns.libs.get(&lib.name), Some((id, _)) if *id == lib.id);
        if fresh {
            let registered = match self.load_library(&lib.body) {
                Ok(r) => r,
                Err(e) => return Reply::Error(Cow::Owned(e)),
            };
            let map = registered
                .into_iter()
                .map(|r| (r.info.name, r.callback))
                .collect();
            self.fns.libs.insert(lib.name.clone(), (lib.id, map));
        }
        let Some(callback) = self
            .fns
            .libs
            .get(&lib.name)
            .and_then(|(_, m)| m.get(&info.name))
            .cloned()
        else {
            return Reply::Error(Cow::Borrowed("ERR Function not found"));
        };
        let lua = &self.lua;
        let bound = super::strings(lua, keys)
            .and_then(|k| Ok((k, super::strings(lua, argv)?)))
            .and_then(|args| callback.bind(args));
        // KEYS and ARGV are not globals here: they are only while an EVAL script runs.
        match bound {
            Ok(f) => {
                let reply = self.finish(&f, &info.name, host, None);
                self.collect_if_large();
                reply
            }
            Err(e) => Reply::Error(Cow::Owned(format!(
                "ERR Error running script {}, {}",
                info.name,
                super::error_text(&e)
            ))),
        }
    }
}

impl Scripts {
    fn check_library(&self, payload: &[u8]) -> Result<(String, Bytes, Vec<FunctionInfo>), String> {
        let (name, body) = parse_metadata(payload)?;
        let registered = self.with_vm(|vm| vm.load_library(&body))??;
        Ok((name, body, registered.into_iter().map(|r| r.info).collect()))
    }

    fn new_library(
        &self,
        payload: &[u8],
        name: String,
        body: Bytes,
        functions: Vec<FunctionInfo>,
    ) -> Arc<Library> {
        Arc::new(Library {
            id: super::NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name,
            code: Bytes::copy_from_slice(payload),
            body,
            functions,
        })
    }

    fn bump(&self) {
        self.fn_generation.fetch_add(1, Ordering::AcqRel);
    }

    fn registry(&self) -> std::sync::MutexGuard<'_, Libraries> {
        self.functions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `FUNCTION LOAD [REPLACE]`: returns the library name, or Redis's error line.
    pub fn function_load(&self, payload: &[u8], replace: bool) -> Result<String, String> {
        let (name, _) = parse_metadata(payload)?;
        if !replace && self.registry().libraries.contains_key(&name) {
            return Err(format!("ERR Library '{name}' already exists"));
        }
        let (name, body, functions) = self.check_library(payload)?;
        let lib = self.new_library(payload, name.clone(), body, functions);
        let mut reg = self.registry();
        if !replace && reg.libraries.contains_key(&name) {
            return Err(format!("ERR Library '{name}' already exists"));
        }
        if let Some(e) = reg.collision(&lib) {
            return Err(e);
        }
        reg.remove(&name);
        reg.add(lib);
        drop(reg);
        self.bump();
        Ok(name)
    }

    /// The library and index of the function called `name`.
    pub fn function_get(&self, name: &[u8]) -> Option<(Arc<Library>, usize)> {
        let name = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
        self.registry().functions.get(&name).cloned()
    }

    /// FUNCTION DELETE: false if there is no such library.
    pub fn function_delete(&self, name: &[u8]) -> bool {
        let Ok(name) = std::str::from_utf8(name) else {
            return false;
        };
        let found = self.registry().remove(name).is_some();
        if found {
            self.bump();
        }
        found
    }

    /// FUNCTION FLUSH.
    pub fn function_flush(&self) {
        *self.registry() = Libraries::default();
        self.bump();
    }

    /// Every library, by name.
    pub fn function_libraries(&self) -> Vec<Arc<Library>> {
        self.registry().libraries.values().cloned().collect()
    }

    /// (libraries, functions) counts.
    pub fn function_counts(&self) -> (usize, usize) {
        let reg = self.registry();
        (reg.libraries.len(), reg.functions.len())
    }

    /// FUNCTION DUMP.
    pub fn function_dump(&self) -> Vec<u8> {
        let libs = self.function_libraries();
        crate::rdb::dump_functions(libs.iter().map(|l| &l.code[..]))
    }

    /// FUNCTION RESTORE: all of the payload's libraries or none.
    pub fn function_restore(&self, payload: &[u8], policy: RestorePolicy) -> Result<(), String> {
        use crate::rdb::FunctionsError;
        let codes = crate::rdb::restore_functions(payload).map_err(|e| match e {
            FunctionsError::VersionOrChecksum => {
                "ERR DUMP payload version or checksum are wrong".to_string()
            }
            FunctionsError::NotAFunction => "ERR given type is not a function".to_string(),
            FunctionsError::BadFormat => "ERR Bad data format".to_string(),
        })?;
        let mut fresh = Libraries::default();
        for code in &codes {
            let (name, body, functions) = self.check_library(code)?;
            if fresh.libraries.contains_key(&name) {
                return Err(format!("ERR Library {name} already exists"));
            }
            let lib = self.new_library(code, name, body, functions);
            if let Some(e) = fresh.collision(&lib) {
                return Err(e);
            }
            fresh.add(lib);
        }
        let mut reg = self.registry();
        let mut next = match policy {
            RestorePolicy::Flush => Libraries::default(),
            _ => Libraries {
                libraries: reg.libraries.clone(),
                functions: reg.functions.clone(),
            },
        };
        for lib in fresh.libraries.into_values() {
            if next.libraries.contains_key(&lib.name) {
                if policy == RestorePolicy::Append {
                    return Err(format!("ERR Library {} already exists", lib.name));
                }
                next.remove(&lib.name);
            }
            if let Some(e) = next.collision(&lib) {
                return Err(e);
            }
            next.add(lib);
        }
        *reg = next;
        drop(reg);
        self.bump();
        Ok(())
    }

    /// Runs function `index` of `lib` (FCALL); the caller marks the script busy and holds
    /// the keyspace.
    pub fn run_function(
        &self,
        lib: &Library,
        index: usize,
        keys: &[&[u8]],
        argv: &[&[u8]],
        host: &mut dyn Host,
    ) -> Reply {
        let generation = self.fn_generation.load(Ordering::Acquire);
        match self.with_vm(|vm| vm.run_function(generation, lib, index, keys, argv, host)) {
            Ok(reply) => reply,
            Err(e) => Reply::Error(Cow::Owned(e)),
        }
    }
}

/// The error the load hook raises.
pub(super) fn load_timeout() -> mlua::Error {
    mlua::Error::external(ErrReply("ERR FUNCTION LOAD timeout".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata() {
        assert_eq!(
            parse_metadata(b"return 1").unwrap_err(),
            "ERR Missing library metadata"
        );
        assert_eq!(
            parse_metadata(b"#!lua name=a").unwrap_err(),
            "ERR Invalid library metadata"
        );
        assert_eq!(
            parse_metadata(b"#!lua x name=a\n").unwrap_err(),
            "ERR Invalid metadata value given: x"
        );
        assert_eq!(
            parse_metadata(b"#!js name=a\n").unwrap_err(),
            "ERR Engine 'js' not found"
        );
        let (name, body) = parse_metadata(b"#!LUA NAME=\"ab\"\nreturn").unwrap();
        assert_eq!((name.as_str(), &body[..]), ("ab", &b"\nreturn"[..]));
    }

    #[test]
    fn load_call_dump_restore() {
        let s = Scripts::new("7.0.15");
        let code = b"#!lua name=l\nredis.register_function{function_name='f', callback=function(k, a) return {k[1], a[1]} end, flags={'no-writes'}}";
        assert_eq!(s.function_load(code, false).unwrap(), "l");
        assert_eq!(
            s.function_load(code, false).unwrap_err(),
            "ERR Library 'l' already exists"
        );
        let (lib, i) = s.function_get(b"f").unwrap();
        assert!(lib.functions[i].flags.no_writes);
        let dump = s.function_dump();
        s.function_flush();
        assert!(s.function_get(b"f").is_none());
        s.function_restore(&dump, RestorePolicy::Append).unwrap();
        assert_eq!(
            s.function_restore(&dump, RestorePolicy::Append)
                .unwrap_err(),
            "ERR Library l already exists"
        );
        assert!(s.function_get(b"f").is_some());
        let loop_lib = b"#!lua name=x\nwhile true do end";
        assert_eq!(
            s.function_load(loop_lib, false).unwrap_err(),
            "ERR Error registering functions: ERR FUNCTION LOAD timeout"
        );
    }
}
