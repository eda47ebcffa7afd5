//! Cluster mode, command side: the routing hook `engine::call` calls, the CLUSTER subcommands,
//! READONLY / READWRITE / ASKING, the sweep that drops keys after a map change, and the
//! role a map gives this node ([`sync_role`]: replicate the map's master, or stop).
//!
//! # Routing, as Redis 7.0 does it
//!
//! [`route`] runs after the lookup and the NOAUTH check and before the OOM check, as Redis's
//! `processCommand` orders them. It takes the command's keys from the table's key positions
//! (so scripts' `numkeys` keys and CL.THROTTLE's key too), and:
//!
//! - no keys: the command runs here (PING, INFO, KEYS, DBSIZE, an EVAL with no keys, …);
//! - keys in two slots: `-CROSSSLOT Keys in request don't hash to the same slot`, even when
//!   this node owns both slots;
//! - one slot owned by another node: `-MOVED <slot> <host>:<port>`, except on a replica
//!   for a slot of its own master: a read (no `write` flag; for EXEC, no queued write) from
//!   a connection that sent READONLY, or a sharded pub/sub command, runs here on the
//!   replica's copy;
//! - the commands a replica applies from its master's stream are never redirected;
//! - inside MULTI, each command is checked as it is queued; a refused one makes EXEC abort
//!   with `-EXECABORT`. EXEC then checks the queued commands together: slots that differ
//!   give `-CROSSSLOT` and a slot that moved meanwhile gives `-MOVED`; both discard the
//!   transaction;
//! - inside a script, a call whose key is not in a slot of this node fails with
//!   `ERR Script attempted to access a non local key in a cluster node` ([`script_check`]).
//!   Like Redis 7.0, a script may touch several local slots.
//!
//! When cluster mode is off the hook is one test of `Shared::cluster`, a `None`.

use std::borrow::Cow;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::cluster::{Cluster, Installed, Outcome, SLOTS, SlotMap, key_slot};
use crate::engine::{
    ArgCursor, Command, CommandSpec as C, Ctx, KeySpec, VariantCommand, run_sub, run_sub_as,
};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::server::Shared;

const ADMIN: &[&str] = &["admin", "stale", "no_async_loading"];
const ADMIN_ACL: &[&str] = &["@admin", "@slow", "@dangerous"];

const fn sub(name: &'static str, arity: i32, handler: crate::engine::Handler) -> C {
    C::new(name, arity, &["stale"], KeySpec::None, handler).with_acl(&["@slow"])
}

const fn unsupported(name: &'static str, arity: i32) -> C {
    unsupported_flagged(name, arity, ADMIN)
}

/// `unsupported` with Redis's flags where they differ from `ADMIN` (they decide, e.g., that
/// CLUSTER RESET is refused from scripts).
const fn unsupported_flagged(name: &'static str, arity: i32, flags: &'static [&'static str]) -> C {
    C::new(name, arity, flags, KeySpec::None, |c, a| {
        super::cluster_bus::dispatch(c, a, refuse_unsupported)
    })
    .with_acl(ADMIN_ACL)
}

/// CLUSTER and the cluster connection commands.
pub(crate) static COMMANDS: &[C] = &[
    C::new(
        "cluster",
        -2,
        &[],
        KeySpec::None,
        run_sub::<crate::commands::server::Help>,
    )
    .with_subcommands(CLUSTER)
    .with_acl(&["@slow"]),
    C::new(
        "readonly",
        1,
        &["loading", "stale", "fast"],
        KeySpec::None,
        |c, a| set_readonly(c, a, true),
    )
    .with_acl(&["@fast", "@connection"]),
    C::new(
        "readwrite",
        1,
        &["loading", "stale", "fast"],
        KeySpec::None,
        |c, a| set_readonly(c, a, false),
    )
    .with_acl(&["@fast", "@connection"]),
    C::new(
        "asking",
        1,
        &["fast"],
        KeySpec::None,
        crate::engine::run::<Accept>,
    )
    .with_acl(&["@fast", "@connection"]),
];

static CLUSTER: &[C] = &[
    C::new(
        "cluster|help",
        2,
        &["loading", "stale"],
        KeySpec::None,
        run_sub::<Help>,
    )
    .with_acl(&["@slow"]),
    sub("cluster|info", 2, run_sub::<Info>).with_tips(&["nondeterministic_output"]),
    sub("cluster|myid", 2, run_sub::<MyId>),
    sub("cluster|nodes", 2, run_sub::<Nodes>).with_tips(&["nondeterministic_output"]),
    sub("cluster|slots", 2, run_sub::<Slots>).with_tips(&["nondeterministic_output"]),
    sub("cluster|shards", 2, run_sub::<Shards>).with_tips(&["nondeterministic_output"]),
    sub("cluster|keyslot", 3, run_sub::<KeySlot>),
    sub("cluster|countkeysinslot", 3, |c, a| {
        run_sub_as::<KeysInSlot>(c, a, SlotQuery::Count)
    })
    .whole_keyspace(),
    sub("cluster|getkeysinslot", 4, |c, a| {
        run_sub_as::<KeysInSlot>(c, a, SlotQuery::Keys)
    })
    .whole_keyspace()
    .with_tips(&["nondeterministic_output"]),
    sub("cluster|links", 2, run_sub::<Links>).with_tips(&["nondeterministic_output"]),
    C::new(
        "cluster|replicas",
        3,
        &["admin", "stale"],
        KeySpec::None,
        run_sub::<Replicas>,
    )
    .with_acl(ADMIN_ACL)
    .with_tips(&["nondeterministic_output"]),
    C::new(
        "cluster|slaves",
        3,
        &["admin", "stale"],
        KeySpec::None,
        run_sub::<Replicas>,
    )
    .with_acl(ADMIN_ACL)
    .with_tips(&["nondeterministic_output"]),
    // sluice's own: install a new slot map (inline text, or the map file read again).
    C::new(
        "cluster|setmap",
        3,
        &["admin", "noscript", "stale"],
        KeySpec::None,
        |c, a| run_sub_as::<SetMap>(c, a, MapSource::Inline),
    )
    .with_acl(ADMIN_ACL),
    C::new(
        "cluster|loadmap",
        2,
        &["admin", "noscript", "stale"],
        KeySpec::None,
        |c, a| run_sub_as::<SetMap>(c, a, MapSource::File),
    )
    .with_acl(ADMIN_ACL),
    // Redis's topology-changing subcommands: nodes here never talk to each other.
    unsupported("cluster|addslots", -3),
    unsupported("cluster|addslotsrange", -4),
    unsupported("cluster|bumpepoch", 2).with_tips(&["nondeterministic_output"]),
    unsupported_flagged("cluster|count-failure-reports", 3, &["admin", "stale"])
        .with_tips(&["nondeterministic_output"]),
    unsupported("cluster|delslots", -3),
    unsupported("cluster|delslotsrange", -4),
    C::new(
        "cluster|failover",
        -2,
        &["admin", "stale", "no_async_loading"],
        KeySpec::None,
        failover,
    )
    .with_acl(ADMIN_ACL),
    // sluice's own: the map in force, in the map file's format.
    sub("cluster|getmap", 2, run_sub::<GetMap>),
    unsupported("cluster|flushslots", 2).whole_keyspace(),
    unsupported("cluster|forget", 3),
    unsupported("cluster|meet", -4),
    C::new(
        "cluster|replicate",
        3,
        &["admin", "stale", "no_async_loading"],
        KeySpec::None,
        replicate,
    )
    .with_acl(ADMIN_ACL)
    .whole_keyspace(),
    unsupported_flagged("cluster|reset", -2, &["admin", "noscript", "stale"]).whole_keyspace(),
    unsupported("cluster|saveconfig", 2),
    unsupported("cluster|set-config-epoch", 3),
    unsupported("cluster|setslot", -4).whole_keyspace(),
];

/// Redis's reply to cluster commands on a server without cluster mode.
const DISABLED: &str = "ERR This instance has cluster support disabled";

/// Redis's error for a script call whose key lives on another node.
pub(crate) const SCRIPT_NON_LOCAL: &str =
    "ERR Script attempted to access a non local key in a cluster node";

fn cluster<'a>(ctx: &Ctx<'a>) -> CmdResult<&'a Cluster> {
    ctx.shared.cluster.as_ref().ok_or(CmdError::msg(DISABLED))
}

mod routing;
pub(crate) use routing::*;

/// Makes this node's replication follow the map in force: a replica follows its master
/// (re-pointed when the map names another one; a full or partial resynchronization follows),
/// and a master that was a replica stops following, keeps its data and starts a new history
/// (REPLICAOF NO ONE). Called at start and after every map change.
pub(crate) fn sync_role(shared: &Shared) {
    let Some(cluster) = &shared.cluster else {
        return;
    };
    let state = cluster.current();
    match state.my_master() {
        Some(m) => {
            let following = shared
                .repl
                .link()
                .is_some_and(|l| l.host.eq_ignore_ascii_case(&m.host) && l.port == m.port);
            if !following {
                crate::repl::replica::follow(shared, m.host.clone(), m.port);
                tracing::info!("cluster map: this node replicates {} at {}", m.id, m.addr());
            }
        }
        None if shared.repl.is_replica() => {
            crate::repl::replica::promote(shared);
            tracing::info!("cluster map: this node is a master; replication stopped");
        }
        None => {}
    }
}

/// What follows an installed map: the role it gives this node, then the sweep of the keys
/// of slots this node no longer holds.
fn after_install(shared: &Shared, cluster: &Cluster, epoch: u64) {
    sync_role(shared);
    // Every command routed by the old map has replied (install waited for them).
    let dropped = drop_foreign_keys(shared, cluster);
    tracing::info!(
        "installed cluster map epoch {epoch}; dropped {dropped} keys of slots this node no longer holds"
    );
}

/// Drops every key (all databases) in a slot this node does not hold: it neither owns it
/// nor, as a replica, replicates its owner. Locks one shard at a time, so other shards keep
/// serving meanwhile. Returns how many keys were dropped.
pub(crate) fn drop_foreign_keys(shared: &Shared, cluster: &Cluster) -> usize {
    let keyspace = &shared.keyspace;
    let mut dropped = 0;
    for i in 0..keyspace.shard_count() {
        let mut locked = keyspace.lock_indexes(&[i]);
        for shard in locked.shards_mut() {
            for db in 0..shard.databases() {
                let foreign: Vec<(u64, Box<[u8]>)> = shard
                    .db(db)
                    .iter()
                    .filter(|e| !cluster.holds(key_slot(&e.key)))
                    .map(|e| (crate::store::shard::Db::entry_hash(e), e.key.to_boxed()))
                    .collect();
                for (hash, key) in foreign {
                    dropped += usize::from(shard.remove(db, hash, &key).is_some());
                }
            }
        }
    }
    dropped
}

// ---------------------------------------------------------------------------------------
// Commands

/// READONLY / READWRITE: whether a replica serves this connection's reads of its master's
/// slots (the flag is kept on a master too, as Redis keeps it, for when it becomes a replica).
fn set_readonly(ctx: &mut Ctx<'_>, _: &[&[u8]], on: bool) -> Reply {
    if let Err(e) = cluster(ctx) {
        return e.into();
    }
    ctx.client.info.readonly.store(on, Ordering::Relaxed);
    Reply::ok()
}

/// ASKING: the next command may run on a slot this node is importing (Redis's ASKING flag).
#[derive(Debug)]
pub(crate) struct Accept;

impl Command<'_> for Accept {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Accept)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        cluster(ctx)?;
        ctx.client.asking = true;
        Ok(Reply::ok())
    }
}

fn refuse_unsupported(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    if let Err(e) = cluster(ctx) {
        return e.into();
    }
    let name = args
        .get(1)
        .map(|a| crate::engine::printable(a, 64).to_ascii_uppercase())
        .unwrap_or_default();
    Reply::Error(Cow::Owned(format!(
        "ERR CLUSTER {name} is not supported: sluice nodes do not talk to each other; change the slot map with CLUSTER SETMAP or CLUSTER LOADMAP"
    )))
}

/// CLUSTER HELP
#[derive(Debug)]
pub(crate) struct Help;

impl Command<'_> for Help {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Help)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        cluster(ctx)?;
        Ok(Reply::Array(
            [
                "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "COUNTKEYSINSLOT <slot>",
                "    Return the number of keys in <slot>.",
                "FAILOVER [FORCE|TAKEOVER]",
                "    Promote current replica node to being a master (in this node's map; push the map to the others).",
                "GETMAP",
                "    Return the slot map in force, in the cluster-config-file format.",
                "GETKEYSINSLOT <slot> <count>",
                "    Return key names stored by current node in a slot.",
                "INFO",
                "    Return information about the cluster.",
                "KEYSLOT <key>",
                "    Return the hash slot for <key>.",
                "LINKS",
                "    Return an empty array: sluice nodes have no links to each other.",
                "LOADMAP",
                "    Read the cluster-config-file again and install the map it holds.",
                "MYID",
                "    Return the node id.",
                "NODES",
                "    Return cluster configuration seen by node. Output format:",
                "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
                "REPLICATE <node-id>",
                "    Configure current node as replica to <node-id> (in this node's map; push the map to the others).",
                "REPLICAS <node-id>",
                "    Return <node-id> replicas.",
                "SETMAP <map>",
                "    Install a new slot map (the cluster-config-file format; lines or ';'-separated entries).",
                "SHARDS",
                "    Return information about slot range mappings and the nodes associated with them.",
                "SLOTS",
                "    Return information about slots range mappings. Each range is made of:",
                "    start, end, master and replicas IP addresses, ports and ids",
                "HELP",
                "    Prints this help.",
            ]
            .into_iter()
            .map(Reply::status)
            .collect(),
        ))
    }
}

/// CLUSTER INFO
#[derive(Debug)]
pub(crate) struct Info;

impl Command<'_> for Info {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Info)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if let Some(b) = cluster(ctx)?.bus() {
            return Ok(super::cluster_bus::info(b));
        }
        let state = cluster(ctx)?.current();
        let size = state
            .map
            .nodes
            .iter()
            .filter(|n| !n.ranges.is_empty())
            .count();
        let text = format!(
            "cluster_state:ok\r\ncluster_slots_assigned:{SLOTS}\r\ncluster_slots_ok:{SLOTS}\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:{}\r\ncluster_size:{size}\r\ncluster_current_epoch:{e}\r\ncluster_my_epoch:{e}\r\ncluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n",
            state.map.nodes.len(),
            e = state.epoch,
        );
        Ok(Reply::Verbatim(Bytes::from(text)))
    }
}

/// CLUSTER MYID
#[derive(Debug)]
pub(crate) struct MyId;

impl Command<'_> for MyId {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(MyId)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::bulk(cluster(ctx)?.my_id().as_bytes()))
    }
}

/// CLUSTER NODES: Redis's line format; every node connected, no cluster bus (the bus port
/// shown is the client port).
#[derive(Debug)]
pub(crate) struct Nodes;

impl Command<'_> for Nodes {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Nodes)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if let Some(b) = cluster(ctx)?.bus() {
            return Ok(super::cluster_bus::nodes(b));
        }
        let state = cluster(ctx)?.current();
        Ok(Reply::Verbatim(Bytes::from(nodes_text(&state, ctx.now_ms))))
    }
}

/// The CLUSTER NODES text of `state`.
pub(crate) fn nodes_text(state: &Installed, now_ms: u64) -> String {
    let mut out = String::new();
    for i in 0..state.map.nodes.len() {
        out.push_str(&node_line(state, i, now_ms));
        out.push('\n');
    }
    out
}

/// One CLUSTER NODES line (no newline): `<id> <ip:port@cport> <flags> <master> <ping-sent>
/// <pong-recv> <config-epoch> <link-state> <slot> …`, a replica's flags `slave` and its
/// master column its master's id, as Redis 7.0 prints them.
fn node_line(state: &Installed, i: usize, now_ms: u64) -> String {
    let n = &state.map.nodes[i];
    let role = if n.is_replica() { "slave" } else { "master" };
    let myself = if i == state.me { "myself," } else { "" };
    let master = n.master.map_or("-", |m| state.map.nodes[m].id.as_str());
    let mut line = format!(
        "{} {}:{}@{} {myself}{role} {master} 0 {now_ms} {} connected",
        n.id, n.host, n.port, n.port, state.epoch
    );
    for &(a, b) in &n.ranges {
        line.push(' ');
        line.push_str(&crate::cluster::map::range_text(a, b));
    }
    line
}

/// What this node knows of a node's replication offset: its own; as a master, what an
/// attached replica (by its listening port and address) last acknowledged; as a replica,
/// its master's stream as far as it has applied it. Other nodes' offsets are unknown (no
/// cluster bus carries them): 0.
fn known_offset(shared: &Shared, state: &Installed, i: usize) -> Option<u64> {
    let n = &state.map.nodes[i];
    let me = state.myself();
    if i == state.me {
        return Some(shared.repl.offset());
    }
    if n.master == Some(state.me) {
        // By its listening port, and its address when two replicas share a port.
        let replicas = shared.repl.replicas();
        let online = || {
            replicas
                .iter()
                .filter(|r| r.port == n.port && r.state == "online")
        };
        return online()
            .find(|r| r.ip == n.host)
            .or_else(|| online().next())
            .map(|r| r.ack.load(Ordering::Relaxed));
    }
    if me.master == Some(i) {
        return shared
            .repl
            .link()
            .filter(|l| l.state == "connected")
            .map(|_| shared.repl.offset());
    }
    None
}

/// CLUSTER SLOTS: contiguous runs of slots, in slot order, each with its master and then
/// its replicas (all of them: no bus tells this node which replicas are in sync, where
/// Redis leaves out those it knows at offset 0).
#[derive(Debug)]
pub(crate) struct Slots;

impl Command<'_> for Slots {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Slots)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let state = cluster(ctx)?.current();
        let runs = state.map.runs();
        let entry = |n: &crate::cluster::Node| {
            Reply::Array(vec![
                Reply::bulk(n.host.as_bytes()),
                Reply::Int(i64::from(n.port)),
                Reply::bulk(n.id.as_bytes()),
                Reply::Map(vec![]),
            ])
        };
        Ok(Reply::Array(
            runs.into_iter()
                .map(|(a, b, owner)| {
                    let mut run = vec![
                        Reply::Int(i64::from(a)),
                        Reply::Int(i64::from(b)),
                        entry(&state.map.nodes[owner]),
                    ];
                    run.extend(state.map.replicas_of(owner).map(|(_, r)| entry(r)));
                    Reply::Array(run)
                })
                .collect(),
        ))
    }
}

/// CLUSTER SHARDS: one shard per master, in the map's order: its slots, then the master and
/// its replicas (`role replica`). Offsets are what this node knows (see `known_offset`);
/// health is `online`, or `loading` for a replica known to be at offset 0.
#[derive(Debug)]
pub(crate) struct Shards;

impl Command<'_> for Shards {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Shards)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let state = cluster(ctx)?.current();
        let field = |name: &'static str| Reply::bulk(name.as_bytes());
        let details = |i: usize| {
            let n = &state.map.nodes[i];
            let mut node = vec![
                (field("id"), Reply::bulk(n.id.as_bytes())),
                (field("port"), Reply::Int(i64::from(n.port))),
                (field("ip"), Reply::bulk(n.host.as_bytes())),
                (field("endpoint"), Reply::bulk(n.host.as_bytes())),
            ];
            if n.host.parse::<std::net::IpAddr>().is_err() {
                node.push((field("hostname"), Reply::bulk(n.host.as_bytes())));
            }
            let offset = known_offset(ctx.shared, &state, i);
            let health: &[u8] = if n.is_replica() && offset == Some(0) {
                b"loading"
            } else {
                b"online"
            };
            let role: &[u8] = if n.is_replica() {
                b"replica"
            } else {
                b"master"
            };
            node.extend([
                (field("role"), Reply::bulk(role)),
                (
                    field("replication-offset"),
                    Reply::Int(i64::try_from(offset.unwrap_or(0)).unwrap_or(i64::MAX)),
                ),
                (field("health"), Reply::bulk(health)),
            ]);
            Reply::Map(node)
        };
        Ok(Reply::Array(
            state
                .map
                .nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| !n.is_replica())
                .map(|(i, n)| {
                    let slots = n
                        .ranges
                        .iter()
                        .flat_map(|&(a, b)| [Reply::Int(i64::from(a)), Reply::Int(i64::from(b))])
                        .collect();
                    let mut nodes = vec![details(i)];
                    nodes.extend(state.map.replicas_of(i).map(|(r, _)| details(r)));
                    Reply::Map(vec![
                        (field("slots"), Reply::Array(slots)),
                        (field("nodes"), Reply::Array(nodes)),
                    ])
                })
                .collect(),
        ))
    }
}

/// CLUSTER KEYSLOT key
#[derive(Debug)]
pub(crate) struct KeySlot {
    key: Bytes,
}

impl Command<'_> for KeySlot {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(KeySlot {
            key: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        cluster(ctx)?;
        Ok(Reply::Int(i64::from(key_slot(&self.key))))
    }
}

/// CLUSTER COUNTKEYSINSLOT slot (COUNT) / CLUSTER GETKEYSINSLOT slot count. sluice keeps no
/// per-slot index (a keyspace shard is not a slot), so both scan the keyspace; they are
/// for operators and tests, not hot paths.
#[derive(Debug)]
pub(crate) struct KeysInSlot {
    query: SlotQuery,
    slot: Bytes,
    count: Option<Bytes>,
}

/// What a slot query answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotQuery {
    /// CLUSTER COUNTKEYSINSLOT: how many keys.
    Count,
    /// CLUSTER GETKEYSINSLOT: the keys, at most `count`.
    Keys,
}

impl VariantCommand<'_> for KeysInSlot {
    type Variant = SlotQuery;

    fn parse(a: &mut ArgCursor<'_>, query: SlotQuery) -> CmdResult<Self> {
        let slot = a.next_owned()?;
        let count = match query {
            SlotQuery::Count => None,
            SlotQuery::Keys => Some(a.next_owned()?),
        };
        Ok(KeysInSlot { query, slot, count })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        cluster(ctx)?;
        let slot = crate::num::parse_i64(&self.slot).ok_or(CmdError::NotInteger)?;
        let limit = match &self.count {
            None => {
                if !(0..SLOTS as i64).contains(&slot) {
                    return Err(CmdError::msg("ERR Invalid slot"));
                }
                usize::MAX
            }
            Some(c) => {
                let c = crate::num::parse_i64(c).ok_or(CmdError::NotInteger)?;
                if !(0..SLOTS as i64).contains(&slot) || c < 0 {
                    return Err(CmdError::msg("ERR Invalid slot or number of keys"));
                }
                usize::try_from(c).unwrap_or(usize::MAX)
            }
        };
        let slot = slot as u16;
        let now = ctx.now_ms;
        let mut count = 0i64;
        let mut keys = Vec::new();
        'shards: for shard in ctx.store.shards_mut() {
            for e in shard.db(0).iter() {
                if keys.len() >= limit {
                    break 'shards;
                }
                if e.is_expired(now) || key_slot(&e.key) != slot {
                    continue;
                }
                count += 1;
                if self.query == SlotQuery::Keys {
                    keys.push(Reply::bulk(&e.key));
                }
            }
        }
        Ok(match self.query {
            SlotQuery::Count => Reply::Int(count),
            SlotQuery::Keys => Reply::Array(keys),
        })
    }
}

/// CLUSTER LINKS: sluice nodes have none.
#[derive(Debug)]
pub(crate) struct Links;

impl Command<'_> for Links {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Links)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if let Some(b) = cluster(ctx)?.bus() {
            return Ok(super::cluster_bus::links(b));
        }
        Ok(Reply::Array(vec![]))
    }
}

/// CLUSTER REPLICAS / SLAVES node-id: the CLUSTER NODES lines of the node's replicas.
#[derive(Debug)]
pub(crate) struct Replicas {
    id: Bytes,
}

impl Command<'_> for Replicas {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Replicas {
            id: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let state = cluster(ctx)?.current();
        let id = String::from_utf8_lossy(&self.id);
        let Some(i) = state
            .map
            .nodes
            .iter()
            .position(|n| n.id.eq_ignore_ascii_case(&id))
        else {
            return Err(unknown_node(&self.id));
        };
        if state.map.nodes[i].is_replica() {
            return Err(CmdError::msg("ERR The specified node is not a master"));
        }
        Ok(Reply::Array(
            state
                .map
                .replicas_of(i)
                .map(|(r, _)| Reply::bulk(node_line(&state, r, ctx.now_ms).as_bytes()))
                .collect(),
        ))
    }
}

fn unknown_node(id: &[u8]) -> CmdError {
    CmdError::owned(format!(
        "ERR Unknown node {}",
        crate::engine::printable(id, 128)
    ))
}

/// CLUSTER GETMAP: the map in force, with its epoch, in the map file's format (what to give
/// the other nodes after CLUSTER FAILOVER or REPLICATE changed this node's map).
#[derive(Debug)]
pub(crate) struct GetMap;

impl Command<'_> for GetMap {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(GetMap)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let state = cluster(ctx)?.current();
        let mut map = state.map.clone();
        map.epoch = Some(state.epoch);
        Ok(Reply::Verbatim(Bytes::from(map.to_string())))
    }
}

/// Installs a map this node derived from its own (a role change it makes itself), then
/// follows it.
fn install_own(
    ctx: &Ctx<'_>,
    cluster: &Cluster,
    state: &Installed,
    nodes: Vec<crate::cluster::Node>,
) -> Reply {
    let Some(epoch) = state.epoch.checked_add(1) else {
        return Reply::Error(Cow::Borrowed(
            "ERR Cluster map refused: this node's epoch is the highest there is",
        ));
    };
    let map = match SlotMap::from_nodes(Some(epoch), nodes) {
        Ok(m) => m,
        Err(e) => return Reply::Error(Cow::Owned(format!("ERR Cluster map refused: {e}"))),
    };
    match cluster.install_own(map) {
        Ok(Outcome::Installed(epoch)) => {
            sync_role(ctx.shared);
            tracing::info!("installed cluster map epoch {epoch} (a role change made on this node)");
            Reply::ok()
        }
        Ok(Outcome::Unchanged(_)) => Reply::ok(),
        Err(e) => Reply::Error(Cow::Owned(format!("ERR Cluster map refused: {e}"))),
    }
}

/// CLUSTER FAILOVER [FORCE|TAKEOVER], on a replica: it becomes the master of its master's
/// slots at once, in its own map (epoch + 1), its old master and that master's other
/// replicas becoming its replicas. Nodes do not talk, so the other nodes learn it only from
/// that map (CLUSTER GETMAP here, CLUSTER SETMAP there). Without FORCE or TAKEOVER the link
/// to the master must be up, as Redis requires; but no node is paused, so writes the old
/// master takes before it is given the new map are lost (Redis's FORCE, not its
/// coordinated default).
fn failover(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    if ctx
        .shared
        .cluster
        .as_ref()
        .is_some_and(|c| c.bus().is_some())
    {
        return super::cluster_bus::dispatch(ctx, args, failover_map);
    }
    failover_map(ctx, args)
}

fn failover_map(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let cluster = match cluster(ctx) {
        Ok(c) => c,
        Err(e) => return e.into(),
    };
    let force = match args.get(2) {
        None => false,
        Some(_) if args.len() > 3 => {
            // Redis names the subcommand as it was sent.
            return Reply::Error(Cow::Owned(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLUSTER HELP.",
                crate::engine::printable(args[1], 128)
            )));
        }
        Some(a) if a.eq_ignore_ascii_case(b"force") || a.eq_ignore_ascii_case(b"takeover") => true,
        Some(_) => return Reply::Error(Cow::Borrowed("ERR syntax error")),
    };
    let state = cluster.current();
    let Some(old) = state.myself().master else {
        return Reply::Error(Cow::Borrowed(
            "ERR You should send CLUSTER FAILOVER to a replica",
        ));
    };
    if !force && !matches!(ctx.shared.repl.link(), Some(l) if l.state == "connected") {
        return Reply::Error(Cow::Borrowed(
            "ERR Master is down or failed, please use CLUSTER FAILOVER FORCE",
        ));
    }
    let me = state.me;
    let mut nodes = state.map.nodes.clone();
    nodes[me].ranges = std::mem::take(&mut nodes[old].ranges);
    for n in nodes.iter_mut() {
        if n.master == Some(old) {
            n.master = Some(me);
        }
    }
    nodes[me].master = None;
    nodes[old].master = Some(me);
    install_own(ctx, cluster, &state, nodes)
}

/// CLUSTER REPLICATE node-id: this node becomes a replica of that master, in its own map
/// (epoch + 1), with Redis's checks (a master must be empty and own no slots).
fn replicate(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    if ctx
        .shared
        .cluster
        .as_ref()
        .is_some_and(|c| c.bus().is_some())
    {
        return super::cluster_bus::dispatch(ctx, args, replicate_map);
    }
    replicate_map(ctx, args)
}

fn replicate_map(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let cluster = match cluster(ctx) {
        Ok(c) => c,
        Err(e) => return e.into(),
    };
    let state = cluster.current();
    let id = String::from_utf8_lossy(args[2]);
    let Some(target) = state
        .map
        .nodes
        .iter()
        .position(|n| n.id.eq_ignore_ascii_case(&id))
    else {
        return unknown_node(args[2]).into();
    };
    if target == state.me {
        return Reply::Error(Cow::Borrowed("ERR Can't replicate myself"));
    }
    if state.map.nodes[target].is_replica() {
        return Reply::Error(Cow::Borrowed(
            "ERR I can only replicate a master, not a replica.",
        ));
    }
    let myself = state.myself();
    if !myself.is_replica() {
        // The command locks every shard (whole keyspace), so this count is exact.
        let keys: usize = ctx.store.shards_mut().map(|s| s.db(0).len()).sum();
        if !myself.ranges.is_empty() || keys != 0 {
            return Reply::Error(Cow::Borrowed(
                "ERR To set a master the node must be empty and without assigned slots.",
            ));
        }
    }
    if myself.master == Some(target) {
        return Reply::ok();
    }
    let mut nodes = state.map.nodes.clone();
    nodes[state.me].master = Some(target);
    install_own(ctx, cluster, &state, nodes)
}

/// CLUSTER SETMAP map / CLUSTER LOADMAP: validates the map, installs it, and drops the keys
/// of slots this node no longer owns.
#[derive(Debug)]
pub(crate) struct SetMap {
    /// The map's text (SETMAP), or `None` to read the map file again (LOADMAP).
    text: Option<Bytes>,
}

/// Where a new slot map comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MapSource {
    /// CLUSTER SETMAP: the argument.
    Inline,
    /// CLUSTER LOADMAP: the cluster-config-file, read again.
    File,
}

impl VariantCommand<'_> for SetMap {
    type Variant = MapSource;

    fn parse(a: &mut ArgCursor<'_>, source: MapSource) -> CmdResult<Self> {
        Ok(SetMap {
            text: match source {
                MapSource::Inline => Some(a.next_owned()?),
                MapSource::File => None,
            },
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let cluster = cluster(ctx)?;
        if ctx.in_exec {
            // EXEC may hold the routing gate that installing waits for.
            return Err(CmdError::msg(
                "ERR CLUSTER SETMAP and LOADMAP are not allowed inside MULTI",
            ));
        }
        let map = match &self.text {
            Some(text) => SlotMap::parse(&String::from_utf8_lossy(text)),
            None => match cluster.map_file() {
                Some(path) => SlotMap::load(path),
                None => {
                    return Err(CmdError::msg("ERR no cluster-config-file was given"));
                }
            },
        }
        .map_err(|e| CmdError::owned(format!("ERR Invalid cluster map: {e}")))?;
        let outcome = cluster
            .install(map)
            .map_err(|e| CmdError::owned(format!("ERR Cluster map refused: {e}")))?;
        if let Outcome::Installed(epoch) = outcome {
            after_install(ctx.shared, cluster, epoch);
        }
        Ok(Reply::ok())
    }
}
