//! What one script run borrows from the VM and gives back: the host `redis.call` reaches
//! ([`HostSlot`], filled for exactly the run) and the lifted memory cap while sluice itself
//! moves values in or out through mlua ([`HostOps`]). The KEYS and ARGV tables kept from run
//! to run are `rawcall`'s.

use std::cell::Cell;
use std::ptr::NonNull;

use mlua::Lua;

use super::{Host, LUA_MEMORY_LIMIT};

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
