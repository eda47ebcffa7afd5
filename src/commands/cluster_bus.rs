//! CLUSTER's subcommands on the cluster bus's state (`cluster::bus`): MEET, ADDSLOTS[RANGE],
//! DELSLOTS[RANGE], FLUSHSLOTS, SETSLOT, FORGET, RESET, REPLICATE, FAILOVER, SAVECONFIG,
//! BUMPEPOCH, SET-CONFIG-EPOCH, COUNT-FAILURE-REPORTS, and the live INFO, NODES, REPLICAS
//! and LINKS, with Redis 7.0's arguments, replies and error texts (`clusterCommand`).
//! Each one changes the bus's state under its mutex, then installs the new view of routing
//! without waiting for the commands in flight (it may itself run inside EXEC).

use std::borrow::Cow;

use bytes::Bytes;

use crate::cluster::bus::msg::{flag, kind};
use crate::cluster::bus::{Bus, State, nodes_conf};
use crate::cluster::{SLOTS, key_slot};
use crate::engine::Ctx;
use crate::protocol::Reply;
use crate::server::Shared;

/// Installs a view of the cluster bus (`wait`: wait for the keyed commands in flight; the
/// bus thread does, a CLUSTER command does not), then follows the role it gives this node and
/// deletes the keys of the slots it took away.
pub(crate) fn apply_view(shared: &Shared, mut view: crate::cluster::bus::View, wait: bool) {
    let Some(cluster) = &shared.cluster else {
        return;
    };
    let lost = std::mem::take(&mut view.lost_slots);
    let resume_writes = view.resume_writes;
    let installed = cluster.install_view(&mut view, wait);
    if resume_writes {
        // A manual failover's hold ends with the routing that follows it in force (or a
        // newer one: a view that lost the race still ends the hold).
        shared.pause.set_failover(false);
    }
    if !installed {
        return;
    }
    super::cluster::sync_role(shared);
    if !lost.is_empty() {
        let dropped = drop_slot_keys(shared, &lost);
        tracing::info!(
            "cluster: {} slots went to another node; dropped {dropped} keys",
            lost.len()
        );
    }
}

/// CONFIG SET: the bus's settings that may change while it runs (Redis reads them from its
/// server struct on every use).
pub(crate) fn configured(shared: &Shared, config: &crate::config::Config) {
    if let Some(cluster) = &shared.cluster {
        cluster.set_when_down(
            config.cluster_allow_reads_when_down,
            config.cluster_allow_pubsubshard_when_down,
        );
        let mut st = cluster.bus().lock();
        let s = &mut st.settings;
        s.node_timeout = config.cluster_node_timeout;
        s.migration_barrier = config.cluster_migration_barrier;
        s.allow_replica_migration = config.cluster_allow_replica_migration;
        // The bus's next cron turn (within 100 ms) updates the cluster's state with it.
        s.require_full_coverage = config.cluster_require_full_coverage;
        s.replica_validity_factor = config.cluster_replica_validity_factor;
        s.repl_ping_period = config.repl.ping_period;
    }
}

/// Deletes every key (all databases) in `slots`, one shard at a time.
pub(crate) fn drop_slot_keys(shared: &Shared, slots: &[u16]) -> usize {
    let mut set = vec![false; SLOTS];
    for &s in slots {
        set[usize::from(s)] = true;
    }
    let keyspace = &shared.keyspace;
    let mut dropped = 0;
    for i in 0..keyspace.shard_count() {
        let mut locked = keyspace.lock_indexes(&[i]);
        for shard in locked.shards_mut() {
            for db in 0..shard.databases() {
                let gone: Vec<(u64, Box<[u8]>)> = shard
                    .db(db)
                    .iter()
                    .filter(|e| set[usize::from(key_slot(&e.key))])
                    .map(|e| (crate::store::shard::Db::entry_hash(e), e.key.to_boxed()))
                    .collect();
                for (hash, key) in gone {
                    dropped += usize::from(shard.remove(db, hash, &key).is_some());
                }
            }
        }
    }
    dropped
}

fn err(text: impl Into<String>) -> Reply {
    Reply::Error(Cow::Owned(text.into()))
}

fn text(a: &[u8]) -> String {
    String::from_utf8_lossy(a).into_owned()
}

/// The bus, or None (cluster mode off).
fn bus<'a>(ctx: &Ctx<'a>) -> Option<&'a std::sync::Arc<Bus>> {
    ctx.shared.cluster.as_ref().map(|c| c.bus())
}

/// Runs `f` on the locked state, then saves/publishes what changed.
fn with_state<R>(ctx: &Ctx<'_>, b: &Bus, f: impl FnOnce(&mut State) -> R) -> R {
    let (r, view) = {
        let mut st = b.lock();
        let r = f(&mut st);
        (r, b.after(&mut st))
    };
    if let Some(v) = view {
        apply_view(ctx.shared, v, false);
    }
    r
}

/// The handler of the topology subcommands (MEET, ADDSLOTS, SETSLOT, FAILOVER, …).
pub(crate) fn dispatch(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let Some(b) = bus(ctx).cloned() else {
        return err("ERR This instance has cluster support disabled");
    };
    let sub = args
        .get(1)
        .map(|s| text(s).to_ascii_lowercase())
        .unwrap_or_default();
    let rest = &args[2.min(args.len())..];
    match sub.as_str() {
        "meet" => meet(ctx, &b, rest),
        "addslots" | "delslots" => slots_cmd(ctx, &b, rest, sub == "delslots", false),
        "addslotsrange" | "delslotsrange" => slots_cmd(ctx, &b, rest, sub == "delslotsrange", true),
        "flushslots" => flushslots(ctx, &b),
        "setslot" => setslot(ctx, &b, rest),
        "forget" => forget(ctx, &b, rest),
        "reset" => reset(ctx, &b, rest),
        "replicate" => replicate(ctx, &b, rest),
        "saveconfig" => {
            let mut st = b.lock();
            match b.save(&mut st) {
                Ok(()) => Reply::ok(),
                Err(e) => err(format!("ERR error saving the cluster node config: {e}")),
            }
        }
        "bumpepoch" => with_state(ctx, &b, |st| {
            let bumped = st.bump_epoch_without_consensus();
            let e = st.me().config_epoch;
            Reply::Status(Cow::Owned(if bumped {
                format!("BUMPED {e}")
            } else {
                format!("STILL {e}")
            }))
        }),
        "set-config-epoch" => {
            let Some(e) = rest.first().and_then(|a| crate::num::parse_i64(a)) else {
                return err("ERR value is not an integer or out of range");
            };
            if e < 0 {
                return err(format!("ERR Invalid config epoch specified: {e}"));
            }
            with_state(ctx, &b, |st| {
                if st.nodes.len() > 1 {
                    return err(
                        "ERR The user can assign a config epoch only when the node does not know any other node.",
                    );
                }
                if st.me().config_epoch != 0 {
                    return err("ERR Node config epoch is already non-zero");
                }
                let me = st.myself.clone();
                if let Some(n) = st.nodes.get_mut(&me) {
                    n.config_epoch = e as u64;
                }
                st.current_epoch = st.current_epoch.max(e as u64);
                st.dirty = true;
                Reply::ok()
            })
        }
        "failover" => failover(ctx, &b, args[1], rest),
        "count-failure-reports" => {
            let id = rest.first().map(|a| text(a)).unwrap_or_default();
            let st = b.lock();
            match st.nodes.get(&id) {
                Some(n) => Reply::Int(n.fail_reports.len() as i64),
                None => err(format!("ERR Unknown node {id}")),
            }
        }
        _ => err(format!(
            "ERR unknown subcommand '{}'. Try CLUSTER HELP.",
            crate::engine::printable(args[1.min(args.len().saturating_sub(1))], 128)
        )),
    }
}

/// CLUSTER REPLICAS node-id: the CLUSTER NODES lines of a master's replicas; None for a
/// node this one does not know.
pub(crate) fn replicas(b: &Bus, id: &str) -> Option<crate::error::CmdResult<Reply>> {
    let st = b.lock();
    let n = st.nodes.get(id)?;
    if n.is(flag::SLAVE) {
        return Some(Err(crate::error::CmdError::msg(
            "ERR The specified node is not a master",
        )));
    }
    Some(Ok(Reply::Array(
        st.nodes
            .values()
            .filter(|r| r.is(flag::SLAVE) && r.slaveof.as_deref() == Some(id))
            .map(|r| Reply::bulk(nodes_conf::node_line(&st, r).as_bytes()))
            .collect(),
    )))
}

/// CLUSTER INFO from the bus.
pub(crate) fn info(b: &Bus) -> Reply {
    let st = b.lock();
    let (mut assigned, mut pfail, mut fail) = (0, 0, 0);
    for o in st.owners.iter().flatten() {
        assigned += 1;
        match st.nodes.get(o) {
            Some(n) if n.is(flag::FAIL) => fail += 1,
            Some(n) if n.is(flag::PFAIL) => pfail += 1,
            _ => {}
        }
    }
    let my_epoch = st.my_master().map_or(0, |m| m.config_epoch);
    let mut out = format!(
        "cluster_state:{}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{}\r\ncluster_slots_pfail:{pfail}\r\ncluster_slots_fail:{fail}\r\ncluster_known_nodes:{}\r\ncluster_size:{}\r\ncluster_current_epoch:{}\r\ncluster_my_epoch:{my_epoch}\r\n",
        if st.ok { "ok" } else { "fail" },
        assigned - pfail - fail,
        st.nodes.len(),
        st.size(),
        st.current_epoch,
    );
    let mut total = 0;
    for (t, &c) in st.stats_sent.iter().enumerate() {
        if c > 0 {
            out.push_str(&format!(
                "cluster_stats_messages_{}_sent:{c}\r\n",
                kind::name(t as u16)
            ));
            total += c;
        }
    }
    out.push_str(&format!("cluster_stats_messages_sent:{total}\r\n"));
    let mut total = 0;
    for (t, &c) in st.stats_received.iter().enumerate() {
        if c > 0 {
            out.push_str(&format!(
                "cluster_stats_messages_{}_received:{c}\r\n",
                kind::name(t as u16)
            ));
            total += c;
        }
    }
    out.push_str(&format!("cluster_stats_messages_received:{total}\r\n"));
    out.push_str("total_cluster_links_buffer_limit_exceeded:0\r\n");
    Reply::Verbatim(Bytes::from(out))
}

/// CLUSTER NODES from the bus.
pub(crate) fn nodes(b: &Bus) -> Reply {
    Reply::Verbatim(Bytes::from(nodes_conf::nodes_text(&b.lock())))
}

/// CLUSTER LINKS from the bus.
pub(crate) fn links(b: &Bus) -> Reply {
    let st = b.lock();
    let field = |s: &'static str| Reply::bulk(s.as_bytes());
    let mut out = Vec::new();
    for l in st.links.values() {
        let Some(node) = &l.node else { continue };
        out.push(Reply::Map(vec![
            (
                field("direction"),
                field(if l.inbound { "from" } else { "to" }),
            ),
            (field("node"), Reply::bulk(node.as_bytes())),
            (field("create-time"), Reply::Int(l.ctime as i64)),
            (field("events"), field("r")),
            (field("send-buffer-allocated"), Reply::Int(0)),
            (field("send-buffer-used"), Reply::Int(0)),
        ]));
    }
    Reply::Array(out)
}

fn parse_port(a: &[u8]) -> Option<i64> {
    crate::num::parse_i64(a)
}

fn meet(ctx: &mut Ctx<'_>, b: &Bus, rest: &[&[u8]]) -> Reply {
    if rest.len() < 2 || rest.len() > 3 {
        return err("ERR wrong number of arguments for 'cluster|meet' command");
    }
    let Some(port) = parse_port(rest[1]) else {
        return err(format!(
            "ERR Invalid TCP base port specified: {}",
            text(rest[1])
        ));
    };
    let cport = match rest.get(2) {
        Some(c) => match parse_port(c) {
            Some(c) => c,
            None => return err(format!("ERR Invalid TCP bus port specified: {}", text(c))),
        },
        None => port + 10000,
    };
    let ip_text = text(rest[0]);
    let ip = match ip_text.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.to_canonical().to_string(),
        Err(_) => String::new(),
    };
    if ip.is_empty() || !(1..=65535).contains(&port) || !(1..=65535).contains(&cport) {
        return err(format!(
            "ERR Invalid node address specified: {ip_text}:{}",
            text(rest[1])
        ));
    }
    let now = crate::cluster::bus::now_ms();
    with_state(ctx, b, |st| {
        st.start_handshake(&ip, port as u16, cport as u16, now);
    });
    Reply::ok()
}

/// Parses the slot arguments of ADDSLOTS/DELSLOTS (single slots) or the RANGE forms (pairs).
fn parse_slots(rest: &[&[u8]], ranges: bool, name: &str) -> Result<Vec<u16>, Reply> {
    let slot = |a: &[u8]| -> Result<u16, Reply> {
        match crate::num::parse_i64(a) {
            Some(s) if (0..SLOTS as i64).contains(&s) => Ok(s as u16),
            _ => Err(err("ERR Invalid or out of range slot")),
        }
    };
    if rest.is_empty() || (ranges && !rest.len().is_multiple_of(2)) {
        return Err(err(format!(
            "ERR wrong number of arguments for 'cluster|{name}' command"
        )));
    }
    let mut out = Vec::new();
    if ranges {
        for pair in rest.chunks(2) {
            let (a, z) = (slot(pair[0])?, slot(pair[1])?);
            if a > z {
                return Err(err(format!(
                    "ERR start slot number {a} is greater than end slot number {z}"
                )));
            }
            out.extend(a..=z);
        }
    } else {
        for a in rest {
            out.push(slot(a)?);
        }
    }
    Ok(out)
}

fn slots_cmd(ctx: &mut Ctx<'_>, b: &Bus, rest: &[&[u8]], del: bool, ranges: bool) -> Reply {
    let name = match (del, ranges) {
        (false, false) => "addslots",
        (true, false) => "delslots",
        (false, true) => "addslotsrange",
        (true, true) => "delslotsrange",
    };
    let slots = match parse_slots(rest, ranges, name) {
        Ok(s) => s,
        Err(e) => return e,
    };
    with_state(ctx, b, |st| {
        let mut seen = vec![false; SLOTS];
        for &s in &slots {
            let owner = &st.owners[usize::from(s)];
            if del && owner.is_none() {
                return err(format!("ERR Slot {s} is already unassigned"));
            }
            if !del && owner.is_some() {
                return err(format!("ERR Slot {s} is already busy"));
            }
            if seen[usize::from(s)] {
                return err(format!("ERR Slot {s} specified multiple times"));
            }
            seen[usize::from(s)] = true;
        }
        let me = st.myself.clone();
        for &s in &slots {
            if del {
                st.set_owner(s, None);
            } else {
                st.importing.remove(&s);
                st.set_owner(s, Some(&me));
            }
        }
        Reply::ok()
    })
}

fn keys_in_slot(ctx: &mut Ctx<'_>, slot: u16) -> usize {
    let mut n = 0;
    for shard in ctx.store.shards_mut() {
        n += shard
            .db(0)
            .iter()
            .filter(|e| key_slot(&e.key) == slot)
            .count();
    }
    n
}

fn db_empty(ctx: &mut Ctx<'_>) -> bool {
    ctx.store
        .shards_mut()
        .all(|s| (0..s.databases()).all(|db| s.db(db).is_empty()))
}

fn flushslots(ctx: &mut Ctx<'_>, b: &Bus) -> Reply {
    if !db_empty(ctx) {
        return err("ERR DB must be empty to perform CLUSTER FLUSHSLOTS.");
    }
    with_state(ctx, b, |st| {
        let me = st.myself.clone();
        for s in 0..SLOTS as u16 {
            if st.owners[usize::from(s)].as_deref() == Some(me.as_str()) {
                st.set_owner(s, None);
            }
        }
        Reply::ok()
    })
}

fn setslot(ctx: &mut Ctx<'_>, b: &Bus, rest: &[&[u8]]) -> Reply {
    if b.lock().me().is(flag::SLAVE) {
        return err("ERR Please use SETSLOT only with masters.");
    }
    let slot = match crate::num::parse_i64(rest[0]) {
        Some(s) if (0..SLOTS as i64).contains(&s) => s as u16,
        _ => return err("ERR Invalid or out of range slot"),
    };
    let action = rest
        .get(1)
        .map(|a| text(a).to_ascii_lowercase())
        .unwrap_or_default();
    let node = rest.get(2).map(|a| text(a));
    let keys = if action == "node" {
        keys_in_slot(ctx, slot)
    } else {
        0
    };
    with_state(ctx, b, |st| {
        let me = st.myself.clone();
        let owner = st.owners[usize::from(slot)].clone();
        match (action.as_str(), rest.len()) {
            ("migrating", 3) => {
                let id = node.unwrap_or_default();
                if owner.as_deref() != Some(me.as_str()) {
                    return err(format!("ERR I'm not the owner of hash slot {slot}"));
                }
                match st.nodes.get(&id) {
                    None => err(format!("ERR I don't know about node {id}")),
                    Some(n) if !n.is_master() => err("ERR Target node is not a master"),
                    Some(_) => {
                        st.migrating.insert(slot, id);
                        st.dirty = true;
                        st.view_changed = true;
                        Reply::ok()
                    }
                }
            }
            ("importing", 3) => {
                let id = node.unwrap_or_default();
                if owner.as_deref() == Some(me.as_str()) {
                    return err(format!("ERR I'm already the owner of hash slot {slot}"));
                }
                match st.nodes.get(&id) {
                    None => err(format!("ERR I don't know about node {id}")),
                    Some(n) if !n.is_master() => err("ERR Target node is not a master"),
                    Some(_) => {
                        st.importing.insert(slot, id);
                        st.dirty = true;
                        st.view_changed = true;
                        Reply::ok()
                    }
                }
            }
            ("stable", 2) => {
                st.migrating.remove(&slot);
                st.importing.remove(&slot);
                st.dirty = true;
                st.view_changed = true;
                Reply::ok()
            }
            ("node", 3) => {
                let id = node.unwrap_or_default();
                let Some(n) = st.nodes.get(&id) else {
                    return err(format!("ERR Unknown node {id}"));
                };
                if n.is(flag::SLAVE) {
                    return err("ERR Target node is not a master");
                }
                if owner.as_deref() == Some(me.as_str()) && id != me && keys > 0 {
                    return err(format!(
                        "ERR Can't assign hashslot {slot} to a different node while I still hold keys for this hash slot."
                    ));
                }
                if keys == 0 && st.migrating.contains_key(&slot) {
                    st.migrating.remove(&slot);
                }
                let imported = id == me && st.importing.remove(&slot).is_some();
                if imported {
                    // The import is done: claim the slot with a new epoch, so every node
                    // prefers this owner (Redis's clusterBumpConfigEpochWithoutConsensus).
                    st.bump_epoch_without_consensus();
                }
                let was_mine = owner.as_deref() == Some(me.as_str());
                st.set_owner(slot, Some(&id));
                if imported {
                    // Tell every node now (as Redis does), before the other nodes are told by
                    // SETSLOT and meet this node's older, slot-less messages.
                    st.broadcast_pong(crate::cluster::bus::now_ms());
                }
                // A master left without slots follows the node that took the last one
                // (Redis 7.0's SETSLOT NODE), when replica migration is allowed.
                if was_mine
                    && id != me
                    && st.me().slots.is_empty()
                    && st.settings.allow_replica_migration
                {
                    tracing::warn!(
                        "Configuration change detected. Reconfiguring myself as a replica of {id}"
                    );
                    st.set_my_master(&id);
                }
                Reply::ok()
            }
            _ => err("ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP"),
        }
    })
}

fn forget(ctx: &mut Ctx<'_>, b: &Bus, rest: &[&[u8]]) -> Reply {
    let id = rest.first().map(|a| text(a)).unwrap_or_default();
    with_state(ctx, b, |st| {
        if !st.nodes.contains_key(&id) {
            return err(format!("ERR Unknown node {id}"));
        }
        if id == st.myself {
            return err("ERR I tried hard but I can't forget myself...");
        }
        if st.me().is(flag::SLAVE) && st.me().slaveof.as_deref() == Some(id.as_str()) {
            return err("ERR Can't forget my master!");
        }
        let until = crate::cluster::bus::now_ms() / 1000 + 60;
        st.blacklist.insert(id.clone(), until);
        st.del_node(&id);
        Reply::ok()
    })
}

fn reset(ctx: &mut Ctx<'_>, b: &Bus, rest: &[&[u8]]) -> Reply {
    let hard = match rest.first().map(|a| text(a).to_ascii_lowercase()) {
        None => false,
        Some(m) if m == "soft" => false,
        Some(m) if m == "hard" => true,
        Some(_) if rest.len() > 1 => {
            return err("ERR wrong number of arguments for 'cluster|reset' command");
        }
        Some(_) => return err("ERR syntax error"),
    };
    let master = b.lock().me().is_master();
    if master && !db_empty(ctx) {
        return err("ERR CLUSTER RESET can't be called with master nodes containing keys");
    }
    if !master {
        // A replica becomes an empty master.
        for shard in ctx.store.shards_mut() {
            for db in 0..shard.databases() {
                shard.flush_db(db);
            }
        }
    }
    with_state(ctx, b, |st| {
        st.reset(hard);
        Reply::ok()
    })
}

fn replicate(ctx: &mut Ctx<'_>, b: &Bus, rest: &[&[u8]]) -> Reply {
    let id = rest.first().map(|a| text(a)).unwrap_or_default();
    let empty = db_empty(ctx);
    with_state(ctx, b, |st| {
        let Some(n) = st.nodes.get(&id) else {
            return err(format!("ERR Unknown node {id}"));
        };
        if id == st.myself {
            return err("ERR Can't replicate myself");
        }
        if n.is(flag::SLAVE) {
            return err("ERR I can only replicate a master, not a replica.");
        }
        if st.me().is_master() && (!st.me().slots.is_empty() || !empty) {
            return err("ERR To set a master the node must be empty and without assigned slots.");
        }
        st.set_my_master(&id);
        Reply::ok()
    })
}

/// CLUSTER FAILOVER [FORCE|TAKEOVER]. Without an option, Redis's coordinated manual failover
/// (`cluster::bus::failover`): the master holds its writes until this replica has its
/// offset, then the election runs. FORCE runs the election at once, TAKEOVER skips it.
fn failover(ctx: &mut Ctx<'_>, b: &Bus, name: &[u8], rest: &[&[u8]]) -> Reply {
    let mode = match rest {
        [] => "",
        [m] => match text(m).to_ascii_lowercase().as_str() {
            "force" => "force",
            "takeover" => "takeover",
            _ => return err("ERR syntax error"),
        },
        // Redis's clusterCommand takes FAILOVER with at most one option; more falls through
        // to its subcommand error, which names the subcommand as it was sent.
        _ => {
            return err(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLUSTER HELP.",
                crate::engine::printable(name, 128)
            ));
        }
    };
    let now = crate::cluster::bus::now_ms();
    with_state(ctx, b, |st| {
        let me = st.me();
        if me.is_master() {
            return err("ERR You should send CLUSTER FAILOVER to a replica");
        }
        let Some(master) = me.slaveof.clone().and_then(|m| st.nodes.get(&m).cloned()) else {
            return err("ERR I'm a replica but my master is unknown to me");
        };
        if mode.is_empty() && master.is(flag::FAIL) {
            return err("ERR Master is down or failed, please use CLUSTER FAILOVER FORCE");
        }
        match mode {
            "takeover" => st.takeover(now),
            "force" => st.force_failover(now),
            _ => st.start_manual_failover(now),
        }
        Reply::ok()
    })
}
