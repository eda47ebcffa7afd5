//! How one run calls into the VM's Lua state: in raw Lua API calls, not through mlua's
//! `Function::call` (which pushes its own traceback handler, converts every result into a
//! `Value` holding a registry reference, and here called a Lua runner that called `xpcall`).
//!
//! A run pushes the error handler and the compiled script (or bound function), fills KEYS and
//! ARGV ([`Lists::bind`]) and calls `lua_pcall` with the handler as the message handler, as
//! Redis's `luaCallFunction` does, then reads the result off the stack ([`scalar_reply`]; a
//! table goes through `convert`). The globals `KEYS` and `ARGV` stay set from one EVAL script
//! to the next (each run refills the tables first); only Lua code of another kind, a
//! function (FCALL) or a library's load, sets them back to nil first ([`Lists::unbind`]).
//! Nothing else runs Lua code in a VM.
//!
//! # What may raise
//!
//! Outside the protected call nothing may raise a Lua error: there is no frame to catch it
//! but Lua's panic. Everything done there runs with the memory cap lifted (`HostOps`): mlua's
//! allocator then aborts on a failed allocation instead of returning null, so the API calls
//! used (pushing strings, making and filling tables, raw sets of existing keys, `lua_next`
//! from a key that is in the table, `lua_checkstack`) cannot raise. What goes in there is
//! bounded by what the client sent (KEYS and ARGV); the script itself runs under the cap.

use std::cell::Cell;
use std::ffi::{c_char, c_int};

use mlua::{Lua, ffi};

use crate::num::c_cast_i64;
use crate::protocol::Reply;

/// Most values a kept KEYS or ARGV table may have held to be reused.
pub(super) const KEEP_LISTED: usize = 64;

/// The two tables KEYS and ARGV kept from run to run, and their global names, in the
/// registry (Redis makes fresh tables: nothing a run does to them may show in the next, so
/// each is emptied as it is filled, and replaced by a fresh one if the script gave it a
/// metatable or other keys, if it held more than [`KEEP_LISTED`] values, or if the state
/// holds more than `COLLECT_ABOVE` bytes, so that an emptied table keeps no large capacity).
pub(super) struct Lists {
    /// Registry references: the KEYS table, the ARGV table, and the strings "KEYS", "ARGV".
    keys: c_int,
    argv: c_int,
    keys_name: c_int,
    argv_name: c_int,
    /// How many values the two tables were last filled with.
    filled: Cell<(usize, usize)>,
    /// The globals `KEYS` and `ARGV` are set to the two tables.
    bound: Cell<bool>,
}

impl Lists {
    /// Makes the two tables and interns the two names, once per VM.
    pub(super) fn new(lua: &Lua) -> mlua::Result<Lists> {
        let refs = Cell::new([0 as c_int; 4]);
        // SAFETY: `exec_raw` runs the closure in a protected call with room for 3 values;
        // the closure owns nothing (an out-of-memory error abandons no destructor). Each
        // value is pushed and at once moved into the registry.
        unsafe {
            lua.exec_raw::<()>((), |l| {
                let mut out = [0; 4];
                for (i, slot) in out.iter_mut().enumerate() {
                    match i {
                        0 | 1 => ffi::lua_createtable(l, 0, 0),
                        2 => push_bytes(l, b"KEYS"),
                        _ => push_bytes(l, b"ARGV"),
                    }
                    *slot = ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX);
                }
                refs.set(out);
            })?;
        }
        let [keys, argv, keys_name, argv_name] = refs.get();
        Ok(Lists {
            keys,
            argv,
            keys_name,
            argv_name,
            filled: Cell::new((0, 0)),
            bound: Cell::new(false),
        })
    }

    /// Fills the kept tables with `keys` and `argv` and sets them as the globals `KEYS` and
    /// `ARGV` unless they are already (raw sets: no metamethod runs). An argument equal to
    /// the string the table holds at its place (the same window or limit, run after run) is
    /// left there, not interned again. `large`: the state holds more than `COLLECT_ABOVE`
    /// bytes (fresh tables).
    ///
    /// # Safety
    /// `l` is the VM's main state outside any Lua call, with the memory cap lifted (see the
    /// module's doc) and room for 4 more values; the stack is left as it was.
    pub(super) unsafe fn bind(
        &self,
        l: *mut ffi::lua_State,
        keys: &[&[u8]],
        argv: &[&[u8]],
        large: bool,
    ) {
        let (had_keys, had_argv) = self.filled.get();
        // Counted before filling, as what the tables may hold from now on.
        self.filled.set((keys.len(), argv.len()));
        let bound = self.bound.replace(true);
        for (table, name, had, items) in [
            (self.keys, self.keys_name, had_keys, keys),
            (self.argv, self.argv_name, had_argv, argv),
        ] {
            // SAFETY: the caller's contract; the registry holds the table at `table`.
            unsafe {
                ffi::lua_rawgeti_(l, ffi::LUA_REGISTRYINDEX, table);
                let t = ffi::lua_gettop(l);
                let fresh = large || had > KEEP_LISTED || !refill(l, t, had, items);
                if fresh {
                    ffi::lua_pop(l, 1);
                    ffi::lua_createtable(l, c_len(items.len()), 0);
                    ffi::lua_pushvalue(l, -1);
                    ffi::lua_rawseti_(l, ffi::LUA_REGISTRYINDEX, table);
                    for (i, b) in items.iter().enumerate() {
                        push_bytes(l, b);
                        ffi::lua_rawseti_(l, t, c_len(i + 1));
                    }
                }
                if fresh || !bound {
                    ffi::lua_rawgeti_(l, ffi::LUA_REGISTRYINDEX, name);
                    ffi::lua_pushvalue(l, t);
                    ffi::lua_rawset(l, ffi::LUA_GLOBALSINDEX);
                }
                ffi::lua_pop(l, 1);
            }
        }
    }

    /// Sets the globals `KEYS` and `ARGV` back to nil if they are set, before Lua code that
    /// is not an EVAL script runs (a function has no KEYS or ARGV). Raw sets of existing
    /// keys: nothing is allocated, nothing can raise.
    ///
    /// # Safety
    /// As [`Lists::bind`].
    pub(super) unsafe fn unbind(&self, l: *mut ffi::lua_State) {
        if !self.bound.replace(false) {
            return;
        }
        for name in [self.keys_name, self.argv_name] {
            // SAFETY: the caller's contract; the registry holds the name at `name`.
            unsafe {
                ffi::lua_rawgeti_(l, ffi::LUA_REGISTRYINDEX, name);
                ffi::lua_pushnil(l);
                ffi::lua_rawset(l, ffi::LUA_GLOBALSINDEX);
            }
        }
    }
}

/// Makes the kept table at `t`, last filled with `had` values, hold exactly `items` at
/// `1..=items.len()`, leaving in place a string equal to the item; false if the table must
/// be replaced instead: it has a metatable or keeps other keys (then it may be half filled).
///
/// # Safety
/// As [`Lists::bind`]; `t` is a valid index of a table.
unsafe fn refill(l: *mut ffi::lua_State, t: c_int, had: usize, items: &[&[u8]]) -> bool {
    // SAFETY: the caller's contract; raw gets and sets and `lua_next` run no metamethods,
    // and `lua_tolstring` of a string neither converts nor allocates.
    unsafe {
        if ffi::lua_getmetatable(l, t) != 0 {
            ffi::lua_pop(l, 1);
            return false;
        }
        for (i, b) in items.iter().enumerate() {
            let n = c_len(i + 1);
            if i < had {
                ffi::lua_rawgeti_(l, t, n);
                let same = ffi::lua_type(l, -1) == ffi::LUA_TSTRING && {
                    let mut len = 0usize;
                    let p = ffi::lua_tolstring(l, -1, &mut len);
                    !p.is_null()
                        && len == b.len()
                        && std::slice::from_raw_parts(p.cast::<u8>(), len) == *b
                };
                ffi::lua_pop(l, 1);
                if same {
                    continue;
                }
            }
            push_bytes(l, b);
            ffi::lua_rawseti_(l, t, n);
        }
        for i in items.len()..had {
            ffi::lua_pushnil(l);
            ffi::lua_rawseti_(l, t, c_len(i + 1));
        }
        // Nothing after the last item: `1..=n` are the items, so the table holds no other
        // key (the walk starts at a key that is in the table, or at the start if n is 0).
        if items.is_empty() {
            ffi::lua_pushnil(l);
        } else {
            ffi::lua_pushinteger(l, items.len() as ffi::lua_Integer);
        }
        if ffi::lua_next(l, t) != 0 {
            ffi::lua_pop(l, 2);
            return false;
        }
        true
    }
}

/// The reply for the value a script returned, at the top of the stack, if it is not a table
/// (tables go through `convert`, which walks them with their element budget and the kill
/// check): as `convert::lua_to_reply` turns the same value.
///
/// # Safety
/// `l` is a state with a value at the top.
pub(super) unsafe fn scalar_reply(l: *mut ffi::lua_State, resp: u8) -> Option<Reply> {
    // SAFETY: the caller's contract; none of these allocates or raises (`lua_tolstring` of a
    // string returns its bytes).
    unsafe {
        Some(match ffi::lua_type(l, -1) {
            ffi::LUA_TTABLE => return None,
            ffi::LUA_TBOOLEAN => match (ffi::lua_toboolean(l, -1) != 0, resp >= 3) {
                (b, true) => Reply::Bool(b),
                (true, false) => Reply::Int(1),
                (false, false) => Reply::Null,
            },
            // mlua's `Value::Integer` (exact integers) and `Value::Number` both end as this.
            ffi::LUA_TNUMBER => Reply::Int(c_cast_i64(ffi::lua_tonumber(l, -1))),
            ffi::LUA_TSTRING => {
                let mut len = 0usize;
                let p = ffi::lua_tolstring(l, -1, &mut len);
                if p.is_null() {
                    Reply::Null
                } else {
                    Reply::Bulk(bytes::Bytes::copy_from_slice(std::slice::from_raw_parts(
                        p.cast::<u8>(),
                        len,
                    )))
                }
            }
            // nil, functions, userdata, threads.
            _ => Reply::Null,
        })
    }
}

/// # Safety
/// `l` is a state with room for one value; this may allocate (see the module's doc).
unsafe fn push_bytes(l: *mut ffi::lua_State, b: &[u8]) {
    // SAFETY: the caller's contract; Lua copies the bytes.
    unsafe {
        if b.is_empty() {
            ffi::lua_pushlstring_(l, c"".as_ptr(), 0);
        } else {
            ffi::lua_pushlstring_(l, b.as_ptr().cast::<c_char>(), b.len());
        }
    }
}

/// A length as Lua's `int` sizes (a hint: a list never has 2^31 elements).
fn c_len(n: usize) -> c_int {
    c_int::try_from(n).unwrap_or(c_int::MAX)
}
