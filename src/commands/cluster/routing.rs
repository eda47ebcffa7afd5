//! Routing, as the module above describes it: the check `engine::call` makes before a
//! command runs or is queued ([`route`]), the key check on a slot that is moving, EXEC's
//! check of its queue, and the check a script makes before each `redis.call`.

use std::borrow::Cow;
use std::sync::RwLockReadGuard;
use std::sync::atomic::Ordering;

use crate::client::ClientState;
use crate::client::multi::MultiQueue;
use crate::cluster::{Cluster, Redirect, key_slot};
use crate::engine::table::{CmdFlags, CommandEntry};
use crate::engine::{CommandSpec as C, Ctx, KeySpec};
use crate::protocol::Reply;
use crate::server::Shared;

use super::SCRIPT_NON_LOCAL;

/// The guard a routed command holds while it runs (see [`Cluster::route`]).
pub(crate) type Routed<'s> = Option<RwLockReadGuard<'s, ()>>;

/// The routing check `engine::call` makes before a command runs or is queued: `Ok` with the guard
/// to hold until the reply (None when there is nothing to hold: cluster mode off, or no
/// keys), or `Err` with the redirect to reply instead. MULTI state is updated as Redis does.
#[inline]
pub(crate) fn route<'s>(
    shared: &'s Shared,
    client: &mut ClientState,
    entry: &CommandEntry,
    args: &[&[u8]],
) -> Result<Routed<'s>, Reply> {
    match &shared.cluster {
        None => Ok(None),
        Some(cluster) => route_in_cluster(shared, cluster, client, entry, args),
    }
}

#[inline(never)]
fn route_in_cluster<'s>(
    shared: &'s Shared,
    cluster: &'s Cluster,
    client: &mut ClientState,
    entry: &CommandEntry,
    args: &[&[u8]],
) -> Result<Routed<'s>, Reply> {
    if client.master_link {
        // A replica applies its master's stream whatever the slots (Redis's CLIENT_MASTER
        // is never redirected); a map change still waits for the command.
        return Ok(Some(cluster.hold()));
    }
    // ASKING lasts one command (Redis clears it after every command but ASKING itself,
    // whose handler sets it again after this).
    let asking = std::mem::take(&mut client.asking);
    let spec = entry.spec;
    let exec = entry.spec.roles.contains(crate::engine::Roles::EXEC);
    let slot = if exec {
        // EXEC without MULTI (or with extra arguments) only gets its own error.
        let Some(queue) = client.multi.as_ref().filter(|_| args.len() == 1) else {
            return Ok(None);
        };
        queue_slot(shared, queue)
    } else if spec.immediate && client.multi.is_some() {
        // WATCH, MULTI, DISCARD… inside MULTI answer with their own errors.
        return Ok(None);
    } else {
        keys_slot(&spec.keys, args)
    };
    // Asked only for a slot this node does not own: a replica serves its master's slots to
    // reads from READONLY connections, and to the sharded pub/sub commands from anyone
    // (Redis's getNodeByQuery). EXEC writes when a queued command does.
    let writes = || match client.multi.as_ref() {
        Some(queue) if exec => queue_writes(shared, queue),
        _ => spec.has(CmdFlags::WRITE),
    };
    let shard_pubsub = spec.roles.contains(crate::engine::Roles::SHARDED_PUBSUB);
    let replica_ok = || client.info.readonly.load(Ordering::Relaxed) || shard_pubsub;
    let redirect = match slot {
        Ok(None) => return Ok(None),
        Ok(Some(slot)) => {
            if cluster.moving(slot) {
                let in_multi = client.multi.is_some();
                let read_when_down = !shard_pubsub && !writes();
                if let Some((routed, check)) =
                    route_moving(cluster, spec, slot, asking, read_when_down)
                {
                    // A queued command is checked when EXEC runs it (EXEC is served whole).
                    if !in_multi && !exec {
                        client.cluster_check = Some((slot, check));
                    }
                    return Ok(routed);
                }
            }
            match cluster.route(slot, shard_pubsub, writes, replica_ok) {
                Ok(guard) => return Ok(Some(guard)),
                Err(redirect) => redirect,
            }
        }
        Err(redirect) => redirect,
    };
    // (The caller counts the error, as it counts every refusal.)
    if exec {
        client.end_multi();
        crate::engine::txn::unwatch_client(shared, client);
    } else if client.multi.is_some() {
        client.multi_failed = true;
    }
    Err(Reply::Error(Cow::Owned(redirect.error_text())))
}

/// Routing for a slot being migrated or imported (Redis's getNodeByQuery): a slot this node
/// owns and migrates runs here, its keys checked once locked ([`check_moving_keys`]); a slot
/// it imports runs here for a command after ASKING (or RESTORE-ASKING). None: route as usual.
/// While the cluster is down only a read that `cluster-allow-reads-when-down` lets through
/// (`read`: the command is one) gets here, as in Redis.
fn route_moving<'s>(
    cluster: &'s Cluster,
    spec: &crate::engine::CommandSpec,
    slot: u16,
    asking: bool,
    read: bool,
) -> Option<(Routed<'s>, bool)> {
    let installed = cluster.current();
    let owns = if installed.down.is_some() {
        if !read || !cluster.reads_when_down() {
            return None;
        }
        // The ownership bits are clear while the cluster is down: the map says.
        installed
            .map
            .owner_of(slot)
            .is_some_and(|o| o.id == installed.myself().id)
    } else {
        cluster.owns(slot)
    };
    let check = if owns && installed.migrating_to(slot).is_some() {
        true
    } else if !owns && installed.importing(slot) && (asking || spec.has(CmdFlags::ASKING)) {
        false
    } else {
        return None;
    };
    Some((Some(cluster.hold()), check))
}

/// The key check of a command on a moving slot, made with its shards locked (so no MIGRATE
/// can take a key between the check and the command): on a migrating slot, keys that are
/// gone were moved, so `-ASK` the target (`-TRYAGAIN` when only some are gone); on an
/// importing slot, several keys of which some have not arrived yet get `-TRYAGAIN`.
pub(crate) fn check_moving_keys(
    ctx: &mut Ctx<'_>,
    spec: &crate::engine::CommandSpec,
    args: &[&[u8]],
    slot: u16,
    migrating: bool,
) -> Option<Reply> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    let positions: Vec<usize> = spec.keys.positions(args).collect();
    let mut missing = 0;
    for &i in &positions {
        if !ctx.store.exists(db, args[i], now) {
            missing += 1;
        }
    }
    const TRYAGAIN: &str = "TRYAGAIN Multiple keys request during rehashing of slot";
    if missing == 0 {
        return None;
    }
    if migrating {
        if missing < positions.len() {
            return Some(Reply::Error(Cow::Borrowed(TRYAGAIN)));
        }
        let target = ctx.shared.cluster.as_ref()?.current();
        let addr = target.migrating_to(slot)?;
        return Some(Reply::Error(Cow::Owned(format!("ASK {slot} {addr}"))));
    }
    (positions.len() > 1).then_some(Reply::Error(Cow::Borrowed(TRYAGAIN)))
}

/// The one slot of the keys of every queued command, as EXEC checks them.
fn queue_slot(shared: &Shared, queue: &MultiQueue) -> Result<Option<u16>, Redirect> {
    let mut slot = None;
    for (cmd, args) in queue.lend().iter() {
        if let Some(entry) = shared.table.entry(crate::engine::CmdId(cmd)) {
            merge_slot(&mut slot, keys_slot(&entry.spec.keys, args)?)?;
        }
    }
    Ok(slot)
}

/// True if a queued command writes (EXEC then counts as a write, as Redis's
/// `mstate.cmd_flags` makes it).
fn queue_writes(shared: &Shared, queue: &MultiQueue) -> bool {
    queue.ids().any(|cmd| {
        shared
            .table
            .entry(crate::engine::CmdId(cmd))
            .is_some_and(|e| e.spec.has(CmdFlags::WRITE))
    })
}

fn merge_slot(slot: &mut Option<u16>, next: Option<u16>) -> Result<(), Redirect> {
    match (*slot, next) {
        (_, None) => Ok(()),
        (None, s) => {
            *slot = s;
            Ok(())
        }
        (Some(a), Some(b)) if a == b => Ok(()),
        _ => Err(Redirect::CrossSlot),
    }
}

/// The slot of a command's keys (None without keys), or CROSSSLOT. The keys are the ones
/// locking takes ([`KeySpec::positions`]): in particular a `numkeys` that does not fit the
/// arguments means "no keys", so the command itself reports the error.
pub(crate) fn keys_slot(keys: &KeySpec, args: &[&[u8]]) -> Result<Option<u16>, Redirect> {
    let mut slot = None;
    for i in keys.positions(args) {
        merge_slot(&mut slot, Some(key_slot(args[i])))?;
    }
    Ok(slot)
}

/// Redis's error for a `#!lua` script (without `allow-cross-slot-keys`) whose calls touch
/// keys of two slots.
pub(crate) const SCRIPT_CROSS_SLOT: &str =
    "ERR Script attempted to access keys that do not hash to the same slot";

/// The slot a script starts bound to: that of the keys EVAL declared (routing already made
/// sure they share one), or none (always none outside cluster mode).
pub(crate) fn script_slot(shared: &Shared, keys: &[&[u8]]) -> Option<u16> {
    // Only `script_check` reads it, in cluster mode: no CRC16 per script run otherwise.
    shared.cluster.as_ref()?;
    keys.first().map(|k| key_slot(k))
}

/// The check a script makes before each `redis.call`: None to go ahead, or the error to
/// return (the call's key lives on another node, or its keys span slots). A replica lets
/// the reads of a READONLY client's script touch its master's slots. Unless
/// `cross_slot_ok` (scripts without a shebang, or with `allow-cross-slot-keys`), every call
/// must stay in the script's slot, `slot`, which the first call with keys sets if EVAL
/// declared none (Redis 7.0's scriptVerifyClusterState).
pub(crate) fn script_check(
    shared: &Shared,
    client: &ClientState,
    spec: &C,
    args: &[&[u8]],
    slot: &mut Option<u16>,
    cross_slot_ok: bool,
) -> Option<Reply> {
    let cluster = shared.cluster.as_ref()?;
    if client.master_link {
        return None;
    }
    let writes = || spec.has(CmdFlags::WRITE);
    let readonly = || client.info.readonly.load(Ordering::Relaxed);
    let local = |s: u16| {
        if cluster.owns(s) || (cluster.mirrors(s) && !writes() && readonly()) {
            return Ok(());
        }
        let shard_pubsub = spec.roles.contains(crate::engine::Roles::SHARDED_PUBSUB);
        cluster.not_served(s, shard_pubsub, writes, readonly)
    };
    let error = |text: &'static str| Some(Reply::Error(Cow::Borrowed(text)));
    match keys_slot(&spec.keys, args).and_then(|s| s.map(|s| local(s).map(|()| s)).transpose()) {
        Ok(None) => None,
        Ok(Some(s)) => {
            if !cross_slot_ok && *slot.get_or_insert(s) != s {
                return error(SCRIPT_CROSS_SLOT);
            }
            None
        }
        Err(Redirect::Down(crate::cluster::DOWN_STATE)) => error(SCRIPT_DOWN),
        Err(Redirect::Down(crate::cluster::DOWN_RO_STATE)) => error(SCRIPT_DOWN_RO),
        Err(_) => error(SCRIPT_NON_LOCAL),
    }
}

/// Redis's error for a script's call while the cluster is down.
pub(crate) const SCRIPT_DOWN: &str =
    "ERR Script attempted to execute a command while the cluster is down";
/// Redis's error for a script's write while the cluster is down and only reads are served
/// (`cluster-allow-reads-when-down`).
pub(crate) const SCRIPT_DOWN_RO: &str =
    "ERR Script attempted to execute a write command while the cluster is down and readonly";
