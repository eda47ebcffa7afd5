//! How one run calls into the VM's Lua state: in raw Lua API calls, not through mlua's
//! `Function::call` (which pushes its own traceback handler, converts every result into a
//! `Value` holding a registry reference, and here called a Lua runner that called `xpcall`).
//!
//! A run pushes the error handler and the compiled script (or bound function), fills KEYS and
//! ARGV ([`Lists::bind`]) and calls `lua_pcall` with the handler as the message handler, as
//! Redis's `luaCallFunction` does, then reads the result off the stack ([`scalar_reply`]; a
//! table goes through `convert`). The globals `KEYS` and `ARGV` stay set from one EVAL script
//! to the next (each run sets them to fresh tables first); only Lua code of another kind, a
//! function (FCALL) or a library's load, sets them back to nil first ([`Lists::unbind`]).
//! Nothing else runs Lua code in a VM.
//!
//! # What may raise
//!
//! Outside the protected call nothing may raise a Lua error: there is no frame to catch it
//! but Lua's panic. Everything done there runs with the memory cap lifted (`HostOps`): mlua's
//! allocator then aborts on a failed allocation instead of returning null, so the API calls
//! used (pushing strings, making and filling tables, raw sets, `lua_checkstack`) cannot
//! raise. What goes in there is
//! bounded by what the client sent (KEYS and ARGV); the script itself runs under the cap.

use std::cell::Cell;
use std::ffi::c_int;

use mlua::{Lua, ffi};

use super::rawcall::push_bytes;
use crate::num::c_cast_i64;
use crate::protocol::Reply;

/// The global names `KEYS` and `ARGV`, interned once, and whether the globals are set. Each
/// EVAL run gets two fresh tables, as in Redis: a table kept from run to run would carry what
/// a script wrote into it (fields, a metatable, a large emptied array) to the next run, which
/// may be another client's, and proving it clean costs a walk as long as the table's array.
pub(super) struct Lists {
    /// Registry references to the strings "KEYS" and "ARGV".
    keys_name: c_int,
    argv_name: c_int,
    /// The globals `KEYS` and `ARGV` are set (to the last EVAL run's tables).
    bound: Cell<bool>,
}

impl Lists {
    /// Interns the two names, once per VM.
    pub(super) fn new(lua: &Lua) -> mlua::Result<Lists> {
        let refs = Cell::new([0 as c_int; 2]);
        // SAFETY: `exec_raw` runs the closure in a protected call with room for 3 values;
        // the closure owns nothing (an out-of-memory error abandons no destructor). Each
        // value is pushed and at once moved into the registry.
        unsafe {
            lua.exec_raw::<()>((), |l| {
                let mut out = [0; 2];
                for (slot, name) in out.iter_mut().zip([&b"KEYS"[..], b"ARGV"]) {
                    push_bytes(l, name);
                    *slot = ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX);
                }
                refs.set(out);
            })?;
        }
        let [keys_name, argv_name] = refs.get();
        Ok(Lists {
            keys_name,
            argv_name,
            bound: Cell::new(false),
        })
    }

    /// Sets the globals `KEYS` and `ARGV` to fresh tables holding `keys` and `argv` (raw
    /// sets: no metamethod runs).
    ///
    /// # Safety
    /// `l` is the VM's main state outside any Lua call, with the memory cap lifted (see the
    /// module's doc) and room for 4 more values; the stack is left as it was.
    pub(super) unsafe fn bind(&self, l: *mut ffi::lua_State, keys: &[&[u8]], argv: &[&[u8]]) {
        self.bound.set(true);
        for (name, items) in [(self.keys_name, keys), (self.argv_name, argv)] {
            // SAFETY: the caller's contract; the registry holds the name at `name`.
            unsafe {
                ffi::lua_rawgeti_(l, ffi::LUA_REGISTRYINDEX, name);
                ffi::lua_createtable(l, c_len(items.len()), 0);
                for (i, b) in items.iter().enumerate() {
                    push_bytes(l, b);
                    ffi::lua_rawseti_(l, -2, c_len(i + 1));
                }
                ffi::lua_rawset(l, ffi::LUA_GLOBALSINDEX);
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

/// A length as Lua's `int` sizes (a hint: a list never has 2^31 elements).
fn c_len(n: usize) -> c_int {
    c_int::try_from(n).unwrap_or(c_int::MAX)
}
