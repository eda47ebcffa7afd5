//! FAILOVER: a master hands its role to one of its replicas without losing a write, as
//! Redis 6.2+ does.
//!
//! `FAILOVER [TO host port [FORCE]] [TIMEOUT ms]` (checked by `commands::replication`) holds the
//! clients' writes (a pause of its own in `services::pause`), and waits until a replica — the
//! named one, or any — has acknowledged the whole stream. Then this node makes itself a
//! replica of it, and its link's PSYNC carries `FAILOVER`: the target, if its replication id
//! is this node's (it followed this node), promotes itself and answers `+CONTINUE`, so the
//! history goes on unbroken with the old master as its replica; the writes are released
//! then (they now get -READONLY here). If no replica catches up before TIMEOUT the failover
//! is abandoned (with FORCE it goes on to the named replica anyway); if the target refuses
//! the PSYNC this node becomes a master again. `FAILOVER ABORT` abandons it at any point.
//! INFO replication shows the state as `master_failover_state`.
//!
//! The supervisor (`replica::supervise`) calls [`tick`] every 100 ms; TIMEOUT runs on the
//! server clock, so in test mode CLOCK ADVANCE ends it.

use std::sync::atomic::Ordering;

pub(crate) use super::{Failover, FailoverState as State};
use crate::server::Shared;

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Failover> {
    shared
        .repl
        .failover
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// The current state.
pub(crate) fn state(shared: &Shared) -> State {
    lock(shared).state
}

/// Starts waiting for a replica (the command has checked everything).
pub(crate) fn start(
    shared: &Shared,
    target: Option<(String, u16)>,
    end_ms: Option<u64>,
    force: bool,
) {
    match &target {
        Some((host, port)) => tracing::info!("FAILOVER requested to {host}:{port}."),
        None => tracing::info!("FAILOVER requested to any replica."),
    }
    *lock(shared) = Failover {
        state: State::WaitForSync,
        target,
        end_ms,
        force,
    };
    shared.pause.set_failover(true);
    crate::services::pause::hold_expiry(shared);
}

/// Moves a waiting failover on: to the target once it has the whole stream, or to its end
/// when the time is up.
pub(crate) fn tick(shared: &Shared) {
    let mut f = lock(shared);
    if f.state != State::WaitForSync {
        return;
    }
    if let Some(end) = f.end_ms
        && end <= shared.clock.now_ms()
    {
        if f.force
            && let Some((host, port)) = f.target.clone()
        {
            f.state = State::InProgress;
            drop(f);
            tracing::info!("FAILOVER to {host}:{port} time out exceeded, failing over.");
            super::replica::follow(shared, host, port);
        } else {
            drop(f);
            abort(shared, "Replica never caught up before timeout");
        }
        return;
    }
    // A write that read no pause may still be running (another thread): the offset is
    // the last one once it has finished.
    if !shared.pause.failover_settled() {
        return;
    }
    let offset = shared.repl.offset();
    let replicas = shared.repl.replicas();
    let synced = |r: &&std::sync::Arc<super::Attached>| r.ack.load(Ordering::Relaxed) == offset;
    let caught = match &f.target {
        Some((host, port)) => replicas
            .iter()
            .filter(|r| r.ip == *host && r.port == *port)
            .find(synced)
            .map(|_| (host.clone(), *port)),
        None => replicas.iter().find(synced).map(|r| (r.ip.clone(), r.port)),
    };
    if let Some((host, port)) = caught {
        f.target = Some((host.clone(), port));
        f.state = State::InProgress;
        drop(f);
        tracing::info!("Failover target {host}:{port} is synced, failing over.");
        super::replica::follow(shared, host, port);
    }
}

/// The target took over (it answered the PSYNC): writes go on, here as a replica's.
pub(crate) fn done(shared: &Shared) {
    *lock(shared) = Failover::default();
    shared.pause.set_failover(false);
    crate::services::pause::hold_expiry(shared);
}

/// Abandons a failover: a node that already follows its target becomes a master again.
pub(crate) fn abort(shared: &Shared, why: &str) {
    let mut f = lock(shared);
    if f.state == State::None {
        return;
    }
    match &f.target {
        Some((host, port)) => tracing::info!("FAILOVER to {host}:{port} aborted: {why}"),
        None => tracing::info!("FAILOVER to any replica aborted: {why}"),
    }
    let was = std::mem::take(&mut *f).state;
    drop(f);
    if was == State::InProgress {
        super::replica::promote(shared);
    }
    shared.pause.set_failover(false);
    crate::services::pause::hold_expiry(shared);
}
