//! The script host's raw Lua C functions: `redis.call`, `redis.pcall` and
//! `redis.acl_check_cmd`, whose arguments are read straight off the Lua stack into one
//! reused byte buffer and whose reply is pushed straight onto the stack, with no mlua
//! `Value`, `Table` or `String` in between (each of those is a registry reference, a counter allocation and,
//! under the memory cap, a protected call).
//!
//! # Lua errors and Rust frames
//!
//! A Lua error is a `longjmp` to the innermost protected call: every frame it crosses is
//! abandoned without running destructors, which Rust allows only for frames that own
//! nothing to drop. So a call is done in two halves:
//!
//! 1. [`prepare`] (plain Rust, under `catch_unwind`) reads the arguments with Lua functions
//!    that cannot raise (`lua_type`, `lua_tolstring` of a string, `lua_tonumber`), runs the
//!    command through the host and leaves the reply in [`CallState::reply`]; what it returns
//!    is a `Copy` [`Outcome`];
//! 2. the C function then pushes the reply (which may raise: out of memory, stack overflow)
//!    from frames that only borrow it, drops it, and raises the call's error, if any, from a
//!    frame that owns nothing.
//!
//! A panic in the host is caught in the first half, kept in [`CallState::panic`], turned
//! into a Lua error, and resumed by the script's caller once Lua has returned
//! ([`CallState::take_panic`]), as mlua does with panics in its callbacks.

use std::any::Any;
use std::cell::{Cell, RefCell, UnsafeCell};
use std::ffi::{c_char, c_int, c_void};
use std::panic::AssertUnwindSafe;
use std::rc::Rc;

use mlua::{Function, Lua, ffi};

use super::run::HostSlot;
use crate::num::fmt_g;
use crate::protocol::Reply;

/// Redis's error for `redis.call` outside a script's run (raised by `pcall` too).
pub(super) const OUTSIDE_RUN: &str =
    "ERR redis.call/pcall can only be called inside a script invocation";
const NO_ARGS: &str = "ERR Please specify at least one argument for this redis lib call";
const BAD_ARG: &str = "ERR Lua redis lib command arguments must be strings or integers";
const ACL_UNKNOWN: &str = "ERR Invalid command passed to redis.acl_check_cmd()";
const PANICKED: &str = "ERR internal error while running a command from a script";

/// Which of the `redis` library's calling functions a script called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `redis.call`: a failed command raises its error.
    Call,
    /// `redis.pcall`: a failed command returns its error table.
    PCall,
    /// `redis.acl_check_cmd`: only checks the command against the script's user.
    AclCheck,
}

/// What the three functions share, one per VM: reached through their upvalue (a light
/// userdata pointing here), kept alive by the VM for as long as its Lua state.
pub(super) struct CallState {
    /// The running script's host (empty between runs).
    slot: Rc<HostSlot>,
    /// The protocol the script chose with `redis.setresp`.
    resp: Rc<Cell<u8>>,
    /// The bytes of a call's arguments, one buffer reused from call to call: the command
    /// borrows its arguments from it (taken out while the call runs).
    arena: RefCell<Vec<u8>>,
    /// The reply being pushed: here rather than in a Rust frame, so that a Lua error while
    /// pushing it abandons only frames that borrow it. Touched only by the call on top of
    /// this VM's stack (Lua runs one call at a time; pushing runs no Lua code).
    reply: UnsafeCell<Option<Reply>>,
    /// Text of a RESP2 double being pushed (same reason as `reply`).
    scratch: UnsafeCell<Vec<u8>>,
    /// A panic of the host, for the script's caller to resume.
    panic: Cell<Option<Box<dyn Any + Send>>>,
}

impl CallState {
    pub(super) fn new(slot: Rc<HostSlot>, resp: Rc<Cell<u8>>) -> CallState {
        CallState {
            slot,
            resp,
            arena: RefCell::new(Vec::with_capacity(1024)),
            reply: UnsafeCell::new(None),
            scratch: UnsafeCell::new(Vec::new()),
            panic: Cell::new(None),
        }
    }

    /// The panic a command raised during the last run, if any (the caller resumes it).
    pub(super) fn take_panic(&self) -> Option<Box<dyn Any + Send>> {
        self.panic.take()
    }
}

/// Makes `redis.call`, `redis.pcall` and `redis.acl_check_cmd` for `lua`. `state` must
/// stay alive (and in place) as long as `lua` does: the caller keeps it in the VM and in
/// `lua`'s app data.
pub(super) fn functions(lua: &Lua, state: &Rc<CallState>) -> mlua::Result<[Function; 3]> {
    let ptr = Rc::as_ptr(state) as *mut c_void;
    let make = |f: ffi::lua_CFunction| {
        // SAFETY: `exec_raw` runs the closure in a protected call with room for what it
        // pushes (3 slots checked); the closure owns nothing, so an out-of-memory error in
        // `lua_pushcclosure` abandons no destructor. The pointer is valid as long as the
        // state it is pushed into (see above), and `f` reads it back as a `CallState`.
        unsafe {
            lua.exec_raw::<Function>((), |l| {
                ffi::lua_pushlightuserdata(l, ptr);
                ffi::lua_pushcclosure(l, f, 1);
            })
        }
    };
    Ok([make(redis_call)?, make(redis_pcall)?, make(acl_check_cmd)?])
}

unsafe extern "C-unwind" fn redis_call(l: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua as a C closure made by `functions`.
    unsafe { entry(l, Mode::Call) }
}

unsafe extern "C-unwind" fn redis_pcall(l: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua as a C closure made by `functions`.
    unsafe { entry(l, Mode::PCall) }
}

unsafe extern "C-unwind" fn acl_check_cmd(l: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua as a C closure made by `functions`.
    unsafe { entry(l, Mode::AclCheck) }
}

/// What [`prepare`] leaves for the C function to push. Plain data: nothing to drop.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    /// The command's reply is in [`CallState::reply`]; `failed` if it is an error.
    Reply { failed: bool },
    /// `redis.acl_check_cmd`'s answer.
    Allowed(bool),
    /// An error table with this message: `pcall` returns it, the others raise it.
    ErrTable(&'static str),
    /// An error table raised whatever the mode.
    Raise(&'static str),
}

/// The body of the three C functions.
///
/// # Safety
/// `l` is the state Lua called a closure made by [`functions`] with.
unsafe fn entry(l: *mut ffi::lua_State, mode: Mode) -> c_int {
    // SAFETY: the closure's first upvalue is the light userdata `functions` pushed, a
    // pointer to the `CallState` the VM keeps alive as long as this Lua state.
    let state = unsafe { &*(ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const CallState) };
    // `prepare` owns nothing once it returns; from here on this frame holds only a
    // borrow of `state` and `Copy` values, so the raises below abandon no destructor.
    let outcome = match std::panic::catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `l` is the calling state (this function's contract).
        unsafe { prepare(l, state, mode) }
    })) {
        Ok(outcome) => outcome,
        Err(payload) => {
            state.panic.set(Some(payload));
            Outcome::Raise(PANICKED)
        }
    };
    // SAFETY: `l` is the calling state; every push below checks its stack room first, and
    // what may raise (allocation) runs from frames that own nothing.
    unsafe {
        match outcome {
            Outcome::Allowed(allowed) => {
                ffi::lua_pushboolean(l, c_int::from(allowed));
                1
            }
            Outcome::ErrTable(msg) => {
                push_field_table(l, b"err", msg.as_bytes());
                if mode == Mode::PCall {
                    1
                } else {
                    ffi::lua_error(l)
                }
            }
            Outcome::Raise(msg) => {
                push_field_table(l, b"err", msg.as_bytes());
                ffi::lua_error(l)
            }
            Outcome::Reply { failed } => {
                let resp = state.resp.get();
                // The reply stays owned by `state` while it is pushed.
                if let Some(reply) = (*state.reply.get()).as_ref() {
                    push_reply(l, reply, resp, state.scratch.get());
                } else {
                    ffi::lua_pushnil(l);
                }
                // Dropped here, before any raise.
                *state.reply.get() = None;
                if failed && mode != Mode::PCall {
                    ffi::lua_error(l)
                }
                1
            }
        }
    }
}

/// The Rust half of a call: reads the arguments, runs the command, leaves the reply in
/// `state.reply`. Calls no Lua function that can raise.
///
/// # Safety
/// `l` is the calling state.
unsafe fn prepare(l: *mut ffi::lua_State, state: &CallState, mode: Mode) -> Outcome {
    if !state.slot.is_filled() {
        return Outcome::Raise(OUTSIDE_RUN);
    }
    // SAFETY: `l` is the calling state; these functions do not raise.
    let nargs = unsafe { ffi::lua_gettop(l) };
    if nargs == 0 {
        return Outcome::ErrTable(NO_ARGS);
    }
    // Taken out while the command runs (it borrows its arguments from it), put back after.
    let mut arena = std::mem::take(&mut *state.arena.borrow_mut());
    // SAFETY: `l` is the calling state and `1..=nargs` are its arguments.
    let read = unsafe { read_args(l, nargs, &mut arena) };
    let outcome = match read {
        None => Outcome::ErrTable(BAD_ARG),
        Some(ends) => {
            let mut args: smallvec::SmallVec<[&[u8]; 16]> = smallvec::SmallVec::new();
            let mut start = 0;
            for &end in ends.iter().take(nargs as usize) {
                args.push(arena.get(start..end).unwrap_or_default());
                start = end;
            }
            run(state, mode, &args)
        }
    };
    *state.arena.borrow_mut() = arena;
    outcome
}

/// Copies the arguments `1..=nargs` into the arena (emptied first), and says where each ends: strings as they are, numbers as
/// `convert::arg_bytes` writes them (integers in full below 1e17, `%.17g` otherwise);
/// `None` if one is neither.
///
/// # Safety
/// `l` is the calling state with at least `nargs` values on its stack.
unsafe fn read_args(
    l: *mut ffi::lua_State,
    nargs: c_int,
    arena: &mut Vec<u8>,
) -> Option<smallvec::SmallVec<[usize; 16]>> {
    arena.clear();
    let mut ends = smallvec::SmallVec::new();
    for i in 1..=nargs {
        // SAFETY: `i` is a valid index (this function's contract); for a string,
        // `lua_tolstring` returns its bytes (no conversion, no allocation), valid while the
        // value is on the stack, which it is for the whole call; `lua_tonumber` of a number
        // neither allocates nor raises.
        unsafe {
            match ffi::lua_type(l, i) {
                ffi::LUA_TSTRING => {
                    let mut len = 0usize;
                    let p = ffi::lua_tolstring(l, i, &mut len);
                    if p.is_null() {
                        return None;
                    }
                    arena.extend_from_slice(std::slice::from_raw_parts(p.cast::<u8>(), len));
                }
                ffi::LUA_TNUMBER => number_text(ffi::lua_tonumber(l, i), arena),
                _ => return None,
            }
        }
        ends.push(arena.len());
    }
    Some(ends)
}

/// A Lua number as a command argument, as `convert::arg_bytes` writes it: one that is
/// exactly an integer (mlua's `Value::Integer`) in full below 1e17, anything else in `%.17g`.
fn number_text(n: f64, out: &mut Vec<u8>) {
    let i = n as i64;
    if n.to_bits() == (i as f64).to_bits() && i.unsigned_abs() < 100_000_000_000_000_000 {
        out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes());
    } else {
        out.extend_from_slice(fmt_g(n, 17).as_bytes());
    }
}

/// Runs the call through the running script's host.
fn run(state: &CallState, mode: Mode, args: &[&[u8]]) -> Outcome {
    if mode == Mode::AclCheck {
        return match state.slot.with(|host| host.command_allowed(args)) {
            Some(Some(allowed)) => Outcome::Allowed(allowed),
            Some(None) => Outcome::ErrTable(ACL_UNKNOWN),
            None => Outcome::Raise(OUTSIDE_RUN),
        };
    }
    let resp = state.resp.get();
    let Some(reply) = state.slot.with(|host| host.call(args, resp)) else {
        return Outcome::Raise(OUTSIDE_RUN);
    };
    let failed = reply.is_error();
    // SAFETY: no borrow of `state.reply` is live: only `entry` reads it, after this
    // returns, and this VM runs one call at a time.
    unsafe { *state.reply.get() = Some(reply) };
    Outcome::Reply { failed }
}

/// Makes sure `n` more values fit on the stack, raising Lua's error if not.
///
/// # Safety
/// `l` is a running state; the caller's frames own nothing (this may raise).
unsafe fn room(l: *mut ffi::lua_State, n: c_int) {
    // SAFETY: the caller's contract.
    unsafe {
        if ffi::lua_checkstack(l, n) == 0 {
            ffi::lua_pushstring(l, c"stack overflow (reply too deeply nested)".as_ptr());
            ffi::lua_error(l);
        }
    }
}

/// Pushes `b` as a Lua string (may allocate: outside a protected call, only with the memory
/// cap lifted, see `invoke`).
///
/// # Safety
/// As [`room`].
#[inline]
pub(super) unsafe fn push_bytes(l: *mut ffi::lua_State, b: &[u8]) {
    // SAFETY: the caller's contract; Lua copies the bytes. (Not mlua's `lua_pushlstring`,
    // which also converts the pushed string back to a pointer nobody reads here; an empty
    // string gets a real pointer, as it does there.)
    unsafe {
        if b.is_empty() {
            ffi::lua_pushlstring_(l, c"".as_ptr(), 0);
        } else {
            ffi::lua_pushlstring_(l, b.as_ptr().cast::<c_char>(), b.len());
        }
    }
}

/// Pushes `{field = text}`.
///
/// # Safety
/// As [`room`].
unsafe fn push_field_table(l: *mut ffi::lua_State, field: &[u8], text: &[u8]) {
    // SAFETY: the caller's contract; the table is new (no metamethods on `rawset`).
    unsafe {
        room(l, 3);
        ffi::lua_createtable(l, 0, 1);
        push_bytes(l, field);
        push_bytes(l, text);
        ffi::lua_rawset(l, -3);
    }
}

/// Pushes a Redis reply as the Lua value a script sees, as `convert::reply_to_lua` builds
/// it (`resp` is the script's protocol). `scratch` is the state's text buffer.
///
/// # Safety
/// As [`room`]; `scratch` is not otherwise borrowed.
unsafe fn push_reply(l: *mut ffi::lua_State, reply: &Reply, resp: u8, scratch: *mut Vec<u8>) {
    // SAFETY: the caller's contract; every table pushed here is new (no metamethods), and
    // each level checks room for what it keeps on the stack at once (table, key, value and
    // the nested table a value may be).
    unsafe {
        room(l, 4);
        match reply {
            Reply::Status(s) => push_field_table(l, b"ok", s.as_bytes()),
            Reply::Error(e) => push_field_table(l, b"err", e.as_bytes()),
            Reply::Int(n) => ffi::lua_pushnumber(l, *n as f64),
            Reply::Bulk(b) => push_bytes(l, b),
            Reply::Short(s) => push_bytes(l, s.as_bytes()),
            Reply::FlagInts(flag, ints) => {
                let items = Reply::flag_ints_items(*flag, ints);
                ffi::lua_createtable(l, c_len(items.len()), 0);
                for (i, n) in items.into_iter().enumerate() {
                    ffi::lua_pushnumber(l, n as f64);
                    ffi::lua_rawseti_(l, -2, c_len(i + 1));
                }
            }
            Reply::Verbatim(b) if resp < 3 => push_bytes(l, b),
            Reply::Verbatim(b) => {
                ffi::lua_createtable(l, 0, 1);
                push_bytes(l, b"verbatim_string");
                ffi::lua_createtable(l, 0, 2);
                push_bytes(l, b"format");
                push_bytes(l, b"txt");
                ffi::lua_rawset(l, -3);
                push_bytes(l, b"string");
                push_bytes(l, b);
                ffi::lua_rawset(l, -3);
                ffi::lua_rawset(l, -3);
            }
            Reply::Null | Reply::NullArray => {
                if resp >= 3 {
                    ffi::lua_pushnil(l);
                } else {
                    ffi::lua_pushboolean(l, 0);
                }
            }
            Reply::Array(items) | Reply::Push(items) | Reply::Multi(items) => {
                push_array(l, items, resp, scratch)
            }
            Reply::Set(items) if resp >= 3 => {
                ffi::lua_createtable(l, 0, 1);
                push_bytes(l, b"set");
                ffi::lua_createtable(l, 0, c_len(items.len()));
                for item in items {
                    push_reply(l, item, resp, scratch);
                    if ffi::lua_type(l, -1) == ffi::LUA_TNIL {
                        ffi::lua_pop(l, 1);
                    } else {
                        ffi::lua_pushboolean(l, 1);
                        ffi::lua_rawset(l, -3);
                    }
                }
                ffi::lua_rawset(l, -3);
            }
            Reply::Set(items) => push_array(l, items, resp, scratch),
            Reply::Map(pairs) if resp >= 3 => {
                ffi::lua_createtable(l, 0, 1);
                push_bytes(l, b"map");
                ffi::lua_createtable(l, 0, c_len(pairs.len()));
                for (k, v) in pairs {
                    push_reply(l, k, resp, scratch);
                    push_reply(l, v, resp, scratch);
                    if ffi::lua_type(l, -2) == ffi::LUA_TNIL {
                        ffi::lua_pop(l, 2);
                    } else {
                        ffi::lua_rawset(l, -3);
                    }
                }
                ffi::lua_rawset(l, -3);
            }
            Reply::Map(pairs) => {
                ffi::lua_createtable(l, c_len(pairs.len().saturating_mul(2)), 0);
                let mut i: c_int = 1;
                for (k, v) in pairs {
                    push_reply(l, k, resp, scratch);
                    ffi::lua_rawseti_(l, -2, i);
                    push_reply(l, v, resp, scratch);
                    ffi::lua_rawseti_(l, -2, i.saturating_add(1));
                    i = i.saturating_add(2);
                }
            }
            Reply::Double(d) if resp >= 3 => {
                ffi::lua_createtable(l, 0, 1);
                push_bytes(l, b"double");
                ffi::lua_pushnumber(l, *d);
                ffi::lua_rawset(l, -3);
            }
            Reply::Double(d) => {
                let text = &mut *scratch;
                text.clear();
                crate::num::format_double(*d, text);
                push_bytes(l, text);
            }
            // Lua reads a RESP3 double's text with strtod, as Redis's script bridge does.
            Reply::DoubleText(t) if resp >= 3 => {
                ffi::lua_createtable(l, 0, 1);
                push_bytes(l, b"double");
                ffi::lua_pushnumber(l, crate::num::parse_f64(t).unwrap_or(0.0));
                ffi::lua_rawset(l, -3);
            }
            Reply::DoubleText(t) => push_bytes(l, t),
            Reply::Bool(b) if resp >= 3 => ffi::lua_pushboolean(l, c_int::from(*b)),
            Reply::Bool(b) => ffi::lua_pushnumber(l, if *b { 1.0 } else { 0.0 }),
            Reply::BigNumber(b) if resp >= 3 => push_field_table(l, b"big_number", b),
            Reply::BigNumber(b) => push_bytes(l, b),
        }
    }
}

/// # Safety
/// As [`push_reply`].
unsafe fn push_array(l: *mut ffi::lua_State, items: &[Reply], resp: u8, scratch: *mut Vec<u8>) {
    // SAFETY: the caller's contract; the table is new.
    unsafe {
        ffi::lua_createtable(l, c_len(items.len()), 0);
        for (i, item) in items.iter().enumerate() {
            push_reply(l, item, resp, scratch);
            ffi::lua_rawseti_(l, -2, c_len(i + 1));
        }
    }
}

/// A length as Lua's `int` sizes (a hint: a reply never has 2^31 elements).
fn c_len(n: usize) -> c_int {
    c_int::try_from(n).unwrap_or(c_int::MAX)
}
