//! The server-wide pause CLIENT PAUSE sets (the commands are `commands::server::pause`), and
//! the one gate a connection passes before running a command while a pause is in force.
//!
//! As Redis 7.0 does, a pause is a mode (ALL, or WRITE) and an end time on the server clock
//! (so CLOCK ADVANCE in test mode ends it too). A second PAUSE keeps the stricter mode and the
//! later end; UNPAUSE ends it. While paused, a command that the mode covers waits before it
//! runs, without holding a worker thread: ALL covers every command that gets past lookup and
//! arity (errors are answered at once), WRITE covers commands flagged `write` plus the ones
//! Redis flags `may-replicate` (EVAL, EVALSHA, FCALL, PFCOUNT, PUBLISH, SPUBLISH; a script's
//! `#!lua flags=` line decides for EVAL and EVALSHA), and EXEC of a transaction holding any
//! of those. The check happens before MULTI queueing, as in Redis, so inside a MULTI a covered
//! command waits too. Waiting clients count in INFO's `blocked_clients`.
//!
//! The gate is one call from the connection loop (`gate`), taken only when a pause is set
//! (one relaxed load otherwise). It may use `client`, `script` (for a script's flags) and
//! the table; nothing here locks the keyspace. Each change of the pause also tells the
//! keyspace until when to hold expiry (`hold_expiry`): no key is expired during a pause.
//!
//! A command that read no pause may still be running when one begins, on another thread
//! (Redis, with one thread, has none). So the pause is read inside a turn
//! (`services::quiesce`): CLIENT PAUSE answers only once every turn in progress when it
//! began has ended, and a FAILOVER's pause (Sentinel's FAILOVER, CLUSTER FAILOVER's MFSTART)
//! takes the offset its replica must reach only once `failover_settled` says so.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::time::Duration;

use crate::client::ClientState;
use crate::engine::Roles;
use crate::engine::table::CommandEntry;
use crate::engine::{CmdId, Lookup, lookup};
use crate::server::Shared;
use crate::services::quiesce;

/// No pause.
const OFF: u8 = 0;
/// Write commands wait.
pub(crate) const WRITE: u8 = 1;
/// Every command waits.
pub(crate) const ALL: u8 = 2;

/// How often a waiting client looks at the clock again (Redis checks the end of a pause from
/// its 10 Hz cron and before each event loop sleep). UNPAUSE wakes waiters at once.
const RECHECK: Duration = Duration::from_millis(20);

/// The server-wide pause.
#[derive(Debug, Default)]
pub struct Pause {
    /// OFF, WRITE or ALL; read without the lock on every command.
    mode: AtomicU8,
    /// (mode, end in Unix ms): changed under the lock.
    state: Mutex<(u8, u64)>,
    changed: tokio::sync::Notify,
    /// Clients waiting at the gate (INFO blocked_clients).
    waiting: AtomicUsize,
    /// FAILOVER holds writes until it ends (Redis's `PAUSE_DURING_FAILOVER`, a pause of its
    /// own beside CLIENT PAUSE's: CLIENT UNPAUSE does not end it).
    failover: AtomicBool,
    /// The turns in progress when the FAILOVER pause began, while it is in force.
    failover_turns: Mutex<Option<quiesce::Snapshot>>,
}

impl Pause {
    /// True when a pause may be in force (cheap; the gate decides).
    #[inline]
    pub fn is_set(&self) -> bool {
        // Sequentially consistent, as the stores that set a pause and a turn's beginning
        // (see services::quiesce): a plain load on x86.
        self.mode.load(Ordering::SeqCst) != OFF || self.failover.load(Ordering::SeqCst)
    }

    /// Holds (or releases) write commands for a FAILOVER, whatever CLIENT PAUSE does.
    pub fn set_failover(&self, on: bool) {
        self.failover.store(on, Ordering::SeqCst);
        let turns = on.then(quiesce::Snapshot::take);
        if let Ok(mut t) = self.failover_turns.lock() {
            *t = turns;
        }
        self.changed.notify_waiters();
    }

    /// True while the FAILOVER pause is in force and no command that read no pause is still
    /// running: the replication offset read now is the last one until the pause ends.
    pub fn failover_settled(&self) -> bool {
        match self.failover_turns.lock() {
            Ok(mut t) => t.as_mut().is_some_and(quiesce::Snapshot::settled),
            Err(_) => false,
        }
    }

    /// Clients waiting for the pause to end.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// The mode in force at `now_ms`, ending an expired pause (Redis: the end has passed when
    /// it is strictly before now).
    fn current(&self, now_ms: u64) -> u8 {
        let failover = if self.failover.load(Ordering::Relaxed) {
            WRITE
        } else {
            OFF
        };
        let Ok(mut s) = self.state.lock() else {
            return failover;
        };
        if s.0 != OFF && s.1 < now_ms {
            *s = (OFF, 0);
            self.mode.store(OFF, Ordering::Relaxed);
            self.changed.notify_waiters();
        }
        s.0.max(failover)
    }

    /// CLIENT PAUSE: the stricter mode and the later end win.
    pub(crate) fn pause(&self, mode: u8, end_ms: u64, now_ms: u64) {
        if let Ok(mut s) = self.state.lock() {
            if s.0 == OFF || s.1 < now_ms {
                *s = (mode, end_ms);
            } else {
                *s = (s.0.max(mode), s.1.max(end_ms));
            }
            if s.1 < now_ms {
                *s = (OFF, 0);
            }
            self.mode.store(s.0, Ordering::SeqCst);
        }
        self.changed.notify_waiters();
    }

    /// Until when (Unix ms) the store holds expiry for this pause: the end of a CLIENT PAUSE
    /// in force, `u64::MAX` during a FAILOVER, 0 when nothing is paused.
    fn expiry_hold(&self) -> u64 {
        if self.failover.load(Ordering::Relaxed) {
            return u64::MAX;
        }
        match self.state.lock() {
            Ok(s) if s.0 != OFF => s.1,
            _ => 0,
        }
    }

    /// CLIENT UNPAUSE.
    pub fn unpause(&self) {
        if let Ok(mut s) = self.state.lock() {
            *s = (OFF, 0);
            self.mode.store(OFF, Ordering::Relaxed);
        }
        self.changed.notify_waiters();
    }
}

/// Tells the keyspace how long the pause now in force holds expiry (call after every change
/// of the pause): Redis neither expires nor evicts keys on its own while clients are paused,
/// so that a paused primary's dataset stays what its replicas have.
pub(crate) fn hold_expiry(shared: &Shared) {
    shared
        .keyspace
        .deletions()
        .hold_expiry_until(shared.pause.expiry_hold());
}

/// Counts a client as waiting while it lives.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// True when no pause in force covers this command (the check `gate` waits on, once).
pub(crate) fn passes(shared: &Shared, client: &ClientState, args: &[&[u8]]) -> bool {
    let mode = shared.pause.current(shared.clock.now_ms());
    mode == OFF || !covers(shared, client, args, mode)
}

/// Waits while a pause covers this command. Returns false if the connection should close
/// instead (CLIENT KILL or shutdown while waiting).
pub(crate) async fn gate(shared: &Shared, client: &ClientState, args: &[&[u8]]) -> bool {
    let pause = &shared.pause;
    let mut counted: Option<Waiting<'_>> = None;
    loop {
        let changed = pause.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let mode = pause.current(shared.clock.now_ms());
        if mode == OFF || !covers(shared, client, args, mode) {
            return true;
        }
        if counted.is_none() {
            pause.waiting.fetch_add(1, Ordering::Relaxed);
            counted = Some(Waiting(&pause.waiting));
        }
        tokio::select! {
            _ = changed => {}
            _ = tokio::time::sleep(RECHECK) => {}
            _ = client.info.kill.cancelled() => return false,
            _ = shared.shutdown.cancelled() => return false,
        }
    }
}

/// Does a pause in `mode` hold this command back?
fn covers(shared: &Shared, client: &ClientState, args: &[&[u8]], mode: u8) -> bool {
    let entry = match lookup(&shared.table, args) {
        Lookup::Found(entry) => entry,
        Lookup::Error(..) => return false, // rejected before the pause check, as in Redis
    };
    if mode == ALL {
        return true;
    }
    if entry.spec.roles.contains(Roles::EXEC) {
        return client.multi.as_ref().is_some_and(|queue| {
            queue.lend().iter().any(|(cmd, args)| {
                shared
                    .table
                    .entry(CmdId(cmd))
                    .is_some_and(|e| may_replicate(shared, e, args))
            })
        });
    }
    may_replicate(shared, entry, args)
}

/// Redis's `CMD_WRITE | CMD_MAY_REPLICATE` for one request, scripts' flags included.
fn may_replicate(shared: &Shared, entry: &CommandEntry, args: &[&[u8]]) -> bool {
    let spec = entry.spec;
    let by_sha = entry.spec.roles.contains(Roles::EVALSHA);
    let function = entry
        .spec
        .roles
        .contains(Roles::FCALL)
        .then(|| {
            args.get(1)
                .and_then(|name| shared.scripts.function_get(name))
        })
        .flatten();
    if let Some((lib, index)) = function {
        // A function's flags replace the command's (Redis's `fcallGetCommandFlags`): one
        // declared `no-writes` neither writes nor replicates, FCALL or FCALL_RO alike.
        lib.functions.get(index).is_none_or(|f| !f.flags.no_writes)
    } else if entry.spec.roles.contains(Roles::MAY_REPLICATE) {
        true
    } else if by_sha || entry.spec.roles.contains(Roles::EVAL) {
        // EVAL writes unless its script says otherwise; EVAL_RO does not.
        script_writes(shared, by_sha, args).unwrap_or(!spec.has(crate::engine::CmdFlags::READONLY))
    } else {
        spec.has(crate::engine::CmdFlags::WRITE)
    }
}

/// Whether a script's declared flags make it a write (Redis's `evalGetCommandFlags`); None
/// when the script declares none (or is unknown), so the command's own flags decide.
fn script_writes(shared: &Shared, by_sha: bool, args: &[&[u8]]) -> Option<bool> {
    let body = args.get(1)?;
    let flags = if by_sha {
        if body.len() != 40 {
            return None;
        }
        shared.scripts.get(body)?.flags
    } else {
        // EVAL finds a cached body by its SHA first, as Redis does.
        match shared.scripts.get(crate::script::sha1_hex(body).as_bytes()) {
            Some(s) => s.flags,
            None => crate::script::parse_shebang(body).ok()?.0,
        }
    };
    declared(flags)
}

fn declared(flags: crate::script::ScriptFlags) -> Option<bool> {
    flags.shebang.then_some(!flags.no_writes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stricter_mode_and_later_end_win() {
        let p = Pause::default();
        p.pause(WRITE, 1000, 10);
        assert_eq!(p.current(10), WRITE);
        p.pause(ALL, 500, 10);
        assert_eq!(p.current(10), ALL);
        assert_eq!(p.current(1000), ALL, "the later end is kept");
        assert_eq!(p.current(1001), OFF);
        assert!(!p.is_set());
    }

    #[test]
    fn zero_timeout_and_unpause_end_it() {
        let p = Pause::default();
        p.pause(ALL, 0, 10);
        assert!(!p.is_set());
        p.pause(WRITE, 100, 10);
        assert!(p.is_set());
        p.unpause();
        assert_eq!(p.current(10), OFF);
    }

    #[test]
    fn an_expired_pause_is_replaced_not_merged() {
        let p = Pause::default();
        p.pause(ALL, 100, 10);
        p.pause(WRITE, 500, 200);
        assert_eq!(p.current(200), WRITE);
    }
}
