//! Cluster mode, command side: the routing hook `engine::call` calls, the CLUSTER subcommands
//! that read the view (INFO, NODES, SLOTS, SHARDS, …; the topology ones are in
//! `commands::cluster_bus`), READONLY / READWRITE / ASKING, and the role the bus's view gives
//! this node ([`sync_role`]: replicate its master, or stop).
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

use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::cluster::{Cluster, Installed, SLOTS, key_slot};
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

/// A topology subcommand, run on the cluster bus's state (`commands::cluster_bus`).
const fn topology(name: &'static str, arity: i32) -> C {
    topology_flagged(name, arity, ADMIN)
}

/// `topology` with Redis's flags where they differ from `ADMIN` (they decide, e.g., that
/// CLUSTER RESET is refused from scripts).
const fn topology_flagged(name: &'static str, arity: i32, flags: &'static [&'static str]) -> C {
    C::new(
        name,
        arity,
        flags,
        KeySpec::None,
        super::cluster_bus::dispatch,
    )
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
    // The topology subcommands, on the bus's state.
    topology("cluster|addslots", -3),
    topology("cluster|addslotsrange", -4),
    topology("cluster|bumpepoch", 2).with_tips(&["nondeterministic_output"]),
    topology_flagged("cluster|count-failure-reports", 3, &["admin", "stale"])
        .with_tips(&["nondeterministic_output"]),
    topology("cluster|delslots", -3),
    topology("cluster|delslotsrange", -4),
    topology("cluster|failover", -2),
    topology("cluster|flushslots", 2).whole_keyspace(),
    topology("cluster|forget", 3),
    topology("cluster|meet", -4),
    topology("cluster|replicate", 3).whole_keyspace(),
    topology_flagged("cluster|reset", -2, &["admin", "noscript", "stale"]).whole_keyspace(),
    topology("cluster|saveconfig", 2),
    topology("cluster|set-config-epoch", 3),
    topology("cluster|setslot", -4).whole_keyspace(),
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
                "ADDSLOTS <slot> [<slot> ...]",
                "    Assign slots to current node.",
                "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
                "    Assign slots which are between <start-slot> and <end-slot> to current node.",
                "BUMPEPOCH",
                "    Advance the cluster config epoch.",
                "COUNT-FAILURE-REPORTS <node-id>",
                "    Return number of failure reports for <node-id>.",
                "COUNTKEYSINSLOT <slot>",
                "    Return the number of keys in <slot>.",
                "DELSLOTS <slot> [<slot> ...]",
                "    Delete slots information from current node.",
                "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
                "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
                "FAILOVER [FORCE|TAKEOVER]",
                "    Promote current replica node to being a master.",
                "FORGET <node-id>",
                "    Remove a node from the cluster.",
                "GETKEYSINSLOT <slot> <count>",
                "    Return key names stored by current node in a slot.",
                "FLUSHSLOTS",
                "    Delete current node own slots information.",
                "INFO",
                "    Return information about the cluster.",
                "KEYSLOT <key>",
                "    Return the hash slot for <key>.",
                "MEET <ip> <port> [<bus-port>]",
                "    Connect nodes into a working cluster.",
                "MYID",
                "    Return the node id.",
                "NODES",
                "    Return cluster configuration seen by node. Output format:",
                "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
                "REPLICATE <node-id>",
                "    Configure current node as replica to <node-id>.",
                "RESET [HARD|SOFT]",
                "    Reset current node (default: soft).",
                "SET-CONFIG-EPOCH <epoch>",
                "    Set config epoch of current node.",
                "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
                "    Set slot state.",
                "REPLICAS <node-id>",
                "    Return <node-id> replicas.",
                "SAVECONFIG",
                "    Force saving cluster configuration on disk.",
                "SLOTS",
                "    Return information about slots range mappings. Each range is made of:",
                "    start, end, master and replicas IP addresses, ports and ids",
                "SHARDS",
                "    Return information about slot range mappings and the nodes associated with them.",
                "LINKS",
                "    Return information about all network links between this node and its peers.",
                "    Output format is an array where each array element is a map containing attributes of a link",
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
        Ok(super::cluster_bus::info(cluster(ctx)?.bus()))
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

/// CLUSTER NODES: the bus's view, in Redis's line format.
#[derive(Debug)]
pub(crate) struct Nodes;

impl Command<'_> for Nodes {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Nodes)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(super::cluster_bus::nodes(cluster(ctx)?.bus()))
    }
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

/// CLUSTER LINKS: the bus's links to the other nodes.
#[derive(Debug)]
pub(crate) struct Links;

impl Command<'_> for Links {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Links)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(super::cluster_bus::links(cluster(ctx)?.bus()))
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
        let id = String::from_utf8_lossy(&self.id);
        super::cluster_bus::replicas(cluster(ctx)?.bus(), &id)
            .ok_or_else(|| unknown_node(&self.id))?
    }
}

fn unknown_node(id: &[u8]) -> CmdError {
    CmdError::owned(format!(
        "ERR Unknown node {}",
        crate::engine::printable(id, 128)
    ))
}
