//! The memory cap at dispatch: before a command runs, evict if memory is over `maxmemory`,
//! and refuse the commands Redis refuses when it cannot get back under it.
//!
//! Redis's rules, followed here: commands flagged `denyoom` (SET, INCR, CL.THROTTLE, ...) get
//! `-OOM command not allowed when used memory > 'maxmemory'.`; reads, DEL and the like still
//! run, since they do not grow memory (or free it). Inside MULTI every command but EXEC,
//! DISCARD, QUIT and RESET is refused, because queueing itself costs memory, and the refusal
//! makes EXEC abort. An EXEC whose queue holds a `denyoom` command is refused with
//! `-EXECABORT Transaction discarded because of: OOM ...` and the transaction is discarded.

use crate::client::ClientState;
use crate::engine::Roles;
use crate::engine::table::{CmdFlags, CmdId, CommandEntry};
use crate::protocol::Reply;
use crate::server::Shared;
use crate::store::evict::{OOM_ERROR, Outcome, perform_evictions};

/// Evicts until memory is under `maxmemory` or the policy finds nothing more (CONFIG SET
/// maxmemory), publishing the `evicted` events. Call with no shard held.
pub(crate) fn evict_now(shared: &Shared) {
    if shared.live.maxmemory() == 0 {
        return;
    }
    let mut events = Vec::new();
    perform_evictions(
        &shared.keyspace,
        &shared.live,
        &shared.stats.evicted_keys,
        shared.clock.now_ms(),
        &mut events,
    );
    if !events.is_empty() {
        crate::services::notify::publish_key_events(shared, events);
    }
}

/// Evicts as the policy allows; returns the error reply if `entry` must be refused.
pub(crate) fn check(
    shared: &Shared,
    client: &mut ClientState,
    entry: &CommandEntry,
) -> Option<Reply> {
    if shared.live.maxmemory() == 0 {
        return None;
    }
    let mut events = Vec::new();
    let outcome = perform_evictions(
        &shared.keyspace,
        &shared.live,
        &shared.stats.evicted_keys,
        shared.clock.now_ms(),
        &mut events,
    );
    if !events.is_empty() {
        crate::services::notify::publish_key_events(shared, events);
    }
    if outcome != Outcome::Fail {
        return None;
    }
    let in_multi = client.multi.is_some();
    let is_exec = entry.spec.roles.contains(Roles::EXEC);
    let refuse = entry.spec.has(CmdFlags::DENYOOM)
        || (in_multi && !entry.spec.roles.contains(Roles::ENDS_MULTI))
        || (is_exec && queue_grows_memory(shared, client));
    if !refuse {
        return None;
    }
    if is_exec && in_multi {
        client.end_multi();
        crate::engine::txn::unwatch_client(shared, client);
        return Some(Reply::Error(
            format!("EXECABORT Transaction discarded because of: {OOM_ERROR}").into(),
        ));
    }
    if in_multi {
        client.multi_failed = true;
    }
    Some(Reply::Error(OOM_ERROR.into()))
}

/// True if a command queued in the client's MULTI is flagged `denyoom`.
fn queue_grows_memory(shared: &Shared, client: &ClientState) -> bool {
    client.multi.as_ref().is_some_and(|queue| {
        queue.ids().any(|cmd| {
            shared
                .table
                .entry(CmdId(cmd))
                .is_some_and(|e| e.spec.has(CmdFlags::DENYOOM))
        })
    })
}
