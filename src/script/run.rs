//! What one script run borrows from the VM and gives back: the host `redis.call` reaches
//! ([`HostSlot`], filled for exactly the run), the KEYS and ARGV tables kept from run to run
//! ([`Lists`]), and the lifted memory cap while sluice itself moves values in or out
//! ([`HostOps`]).

use std::cell::Cell;
use std::ptr::NonNull;

use bytes::Bytes;
use mlua::{Lua, Table, Value};

use super::{COLLECT_ABOVE, Host, LUA_MEMORY_LIMIT};

/// Lifts the VM's memory cap while sluice itself (not script code) moves values in or out
/// of the VM: KEYS and ARGV, a command's reply, the script's result. With a cap set, mlua
/// runs every table and string operation through a protected call of a newly made C
/// closure (garbage for the collector too), about ten per short script; with none it calls
/// Lua directly. What goes in here is bounded by what the client sent or the reply already
/// built; scripts' own allocations always run under the cap, restored when this is dropped.
pub(super) struct HostOps<'l> {
    lua: &'l Lua,
    cap: usize,
}

impl<'l> HostOps<'l> {
    pub(super) fn new(lua: &'l Lua) -> HostOps<'l> {
        let cap = lua.set_memory_limit(0).unwrap_or(LUA_MEMORY_LIMIT);
        HostOps { lua, cap }
    }
}

impl Drop for HostOps<'_> {
    fn drop(&mut self) {
        let _ = self.lua.set_memory_limit(self.cap);
    }
}

/// The host of the script a VM is running, reachable by `redis.call` for exactly the run's
/// duration: [`HostSlot::enter`] fills it and its guard empties it when the run returns
/// (or unwinds), so a Lua value that outlives the run can never reach a host that is gone,
/// and no run ever sees another's. The VM is thread-local and not re-entrant, so one slot
/// serves one run at a time.
#[derive(Default)]
pub(super) struct HostSlot {
    host: Cell<Option<NonNull<dyn Host + 'static>>>,
}

/// Empties the [`HostSlot`] when the run it was filled for ends. It holds the borrow of the
/// host (`'h`), so the caller cannot touch the host while the slot may hand it out.
pub(super) struct Entered<'s, 'h>(&'s HostSlot, std::marker::PhantomData<&'h mut ()>);

impl Drop for Entered<'_, '_> {
    fn drop(&mut self) {
        self.0.host.set(None);
    }
}

impl HostSlot {
    /// Makes `host` the one `redis.call` uses until the guard is dropped.
    pub(super) fn enter<'s, 'h>(&'s self, host: &'h mut dyn Host) -> Entered<'s, 'h> {
        let ptr: NonNull<dyn Host + '_> = NonNull::from(host);
        // SAFETY: only the lifetime bound of the trait object changes. The pointer is used
        // only while the guard lives, and the guard keeps `host` mutably borrowed (`'h`) for
        // that whole time, so no other reference to it is used meanwhile; the guard is never
        // leaked (it is a local of `Vm::call`, dropped before it returns or on unwind).
        let ptr: NonNull<dyn Host + 'static> = unsafe { std::mem::transmute(ptr) };
        self.host.set(Some(ptr));
        Entered(self, std::marker::PhantomData)
    }

    /// True while a run has filled the slot.
    pub(super) fn is_filled(&self) -> bool {
        self.host.get().is_some()
    }

    /// Runs `f` with the running script's host, or returns `None` outside a run. The slot
    /// is empty while `f` runs, so a re-entrant `redis.call` (which the host's commands
    /// never make: scripts cannot run scripts) finds no host instead of a second `&mut`.
    pub(super) fn with<R>(&self, f: impl FnOnce(&mut dyn Host) -> R) -> Option<R> {
        let mut ptr = self.host.take()?;
        // SAFETY: the slot holds a pointer only between `enter` and the guard's drop, while
        // the `&mut dyn Host` it came from is borrowed by that guard's run and not otherwise
        // used; taking it out of the slot makes this the only live reference.
        let out = f(unsafe { ptr.as_mut() });
        self.host.set(Some(ptr));
        Some(out)
    }
}

/// The KEYS and ARGV tables of EVAL scripts, kept from run to run instead of made for each
/// (Redis makes fresh ones: nothing a run does to them may show in the next). They are in
/// the globals only while a script runs, and emptied when it ends; a table the script
/// gave a metatable or filled past [`Lists::KEEP`] entries is dropped for a fresh one.
pub(super) struct Lists {
    pub(super) keys: Table,
    pub(super) argv: Table,
    keys_name: mlua::String,
    argv_name: mlua::String,
    globals: Table,
    /// How many keys and arguments the running script got.
    filled: (usize, usize),
}

impl Lists {
    /// Most entries a kept table may have held; a larger one is replaced, so that no
    /// request's arguments keep their capacity in the VM.
    const KEEP: usize = 64;

    pub(super) fn new(lua: &Lua) -> mlua::Result<Lists> {
        Ok(Lists {
            keys: lua.create_table()?,
            argv: lua.create_table()?,
            keys_name: lua.create_string("KEYS")?,
            argv_name: lua.create_string("ARGV")?,
            globals: lua.globals(),
            filled: (0, 0),
        })
    }

    /// Fills the tables with a run's keys and arguments and puts them in the globals.
    pub(super) fn bind(&mut self, lua: &Lua, keys: &[Bytes], argv: &[Bytes]) -> mlua::Result<()> {
        self.filled = (keys.len(), argv.len());
        fill(lua, &self.keys, keys)?;
        fill(lua, &self.argv, argv)?;
        self.globals.raw_set(&self.keys_name, &self.keys)?;
        self.globals.raw_set(&self.argv_name, &self.argv)?;
        Ok(())
    }

    /// Takes the tables out of the globals and empties them, or replaces one the script
    /// changed beyond its entries (a metatable, other keys), one that held many values, or
    /// any after a run that left a large state (an emptied table keeps its capacity).
    pub(super) fn unbind(&mut self, lua: &Lua) {
        let _ = self.globals.raw_set(&self.keys_name, Value::Nil);
        let _ = self.globals.raw_set(&self.argv_name, Value::Nil);
        let large = lua.used_memory() > COLLECT_ABOVE;
        let (nk, na) = std::mem::take(&mut self.filled);
        for (t, n) in [(&mut self.keys, nk), (&mut self.argv, na)] {
            let keep = !large
                && n <= Self::KEEP
                && (1..=n).all(|i| t.raw_set(i, Value::Nil).is_ok())
                && t.is_empty()
                && t.metatable().is_none();
            if !keep {
                match lua.create_table() {
                    Ok(fresh) => *t = fresh,
                    // Out of memory: keep the old table, emptied, rather than fail.
                    Err(_) => {
                        let _ = t.clear();
                        let _ = t.set_metatable(None);
                    }
                }
            }
        }
    }
}

fn fill(lua: &Lua, t: &Table, items: &[Bytes]) -> mlua::Result<()> {
    for (i, b) in items.iter().enumerate() {
        t.raw_set(i + 1, lua.create_string(b)?)?;
    }
    Ok(())
}
