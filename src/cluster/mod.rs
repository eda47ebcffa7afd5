//! Cluster mode: sluice nodes that each own a share of the 16384 hash slots, spoken to with
//! the Redis Cluster client protocol.
//!
//! Every node is given the same [slot map](map) (which node id, at which host:port, owns
//! which slots, which nodes are replicas of which) and knows which node of the map it is.
//! Nodes never talk to each other except a replica to its master, over Redis's replication
//! protocol: there is no cluster bus, no gossip, no automatic failover and no slot
//! migration. A replica holds its master's keys (the `mirrored` slots) and serves reads of
//! them to connections that sent READONLY; `commands::cluster` starts, re-points and stops its
//! replication when a map (or CLUSTER FAILOVER / REPLICATE) changes its role. A client that is cluster
//! aware (redis-py `RedisCluster`, ioredis `Cluster`, the `redis` crate's cluster client, …)
//! reads the map with `CLUSTER SLOTS` or `CLUSTER SHARDS`, computes each key's [slot] and
//! sends the command to the owner. A node answers a command whose key it does not own with
//! `-MOVED <slot> <host>:<port>`, and a command whose keys span slots with `-CROSSSLOT`, as
//! Redis does. Rate-limiter state shards perfectly by key, so every CL.THROTTLE call, W1
//! block or script runs whole on one node and stays exact.
//!
//! This module holds the pure parts: the slot function, the map and its validation, and
//! [`Cluster`], the installed map with the lock-free ownership test the dispatcher uses.
//! The command side (the routing hook `engine::execute` calls, CLUSTER's subcommands, the key
//! sweep after a map change) lives in `commands::cluster`.
//!
//! # Changing the map while running
//!
//! `CLUSTER SETMAP` (or `CLUSTER LOADMAP`, which re-reads the map file) installs a new map.
//! [`Cluster::install`] takes the routing gate (an `RwLock`) for writing, which waits for the
//! keyed commands in flight (each holds the gate for reading from its routing check to its
//! reply) and holds new ones back while the ownership bitmap is rewritten. So once it
//! returns, no command routed with the old map is still running, and the caller can drop
//! the keys of slots this node no longer owns without racing a late write into them.

pub mod bus;
pub mod map;
pub mod slot;

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};

pub use map::{MapError, Node, SlotMap};

use crate::config::Config;
pub use slot::{SLOTS, key_slot};

/// The map a node serves, with its epoch and which node of it is this one.
#[derive(Debug)]
pub struct Installed {
    /// The map.
    pub map: SlotMap,
    /// Its configuration epoch (the stated one, or the previous epoch plus one).
    pub epoch: u64,
    /// This node's index in `map.nodes`.
    pub me: usize,
    /// Set while the cluster bus sees the cluster down: keyed commands get this error.
    pub down: Option<&'static str>,
    /// Slots being migrated away, with the target's address (bus mode).
    pub migrating: Vec<(u16, String)>,
    /// Slots being imported (bus mode).
    pub importing: Vec<u16>,
}

impl Installed {
    /// The address `slot` is being migrated to, if it is.
    pub fn migrating_to(&self, slot: u16) -> Option<&str> {
        self.migrating
            .iter()
            .find(|(s, _)| *s == slot)
            .map(|(_, a)| a.as_str())
    }

    /// True if `slot` is being imported.
    pub fn importing(&self, slot: u16) -> bool {
        self.importing.contains(&slot)
    }
}

impl Installed {
    /// This node.
    pub fn myself(&self) -> &Node {
        &self.map.nodes[self.me]
    }

    /// This node's master, when the map makes it a replica.
    pub fn my_master(&self) -> Option<&Node> {
        self.myself().master.map(|m| &self.map.nodes[m])
    }
}

/// What `install` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The map was installed with this epoch.
    Installed(u64),
    /// The same map with the same epoch was already in force: nothing changed.
    Unchanged(u64),
}

/// A node's cluster state.
#[derive(Debug)]
pub struct Cluster {
    /// Held for reading by every keyed command from its routing check to its reply, and for
    /// writing while a new map is installed.
    gate: RwLock<()>,
    /// The map in force. Read briefly (never held across a command), so a reader of the map
    /// never waits behind a writer of the gate.
    current: RwLock<Arc<Installed>>,
    /// One bit per slot: set when this node owns the slot.
    owned: Box<[AtomicU64]>,
    /// One bit per slot: set while the slot is migrating or importing (bus mode), so routing
    /// takes the slow path that answers -ASK / -TRYAGAIN.
    moving: Box<[AtomicU64]>,
    /// One bit per slot: set when this node is a replica and its master owns the slot (it
    /// holds the slot's keys, and serves reads of them to READONLY connections).
    mirrored: Box<[AtomicU64]>,
    /// This node's id (it stays the same across map changes).
    my_id: String,
    /// The map file given at start-up, which `CLUSTER LOADMAP` reads again.
    map_file: Option<String>,
    /// The cluster bus, when this node is a member of a Redis cluster (the map in force is
    /// then the bus's view, installed by `install_view`).
    bus: Option<Arc<bus::Bus>>,
    /// The sequence number of the last view installed.
    view_seq: std::sync::Mutex<u64>,
}

/// Why a command cannot run on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redirect {
    /// The slot is owned by the node at this address.
    Moved(u16, String),
    /// The keys are in different slots.
    CrossSlot,
    /// The slot is not served (`-CLUSTERDOWN …`, the text without the leading `-`).
    Down(&'static str),
}

/// Redis's error for a slot no node serves.
pub const DOWN_UNBOUND: &str = "CLUSTERDOWN Hash slot not served";
/// Redis's error while the cluster is down.
pub const DOWN_STATE: &str = "CLUSTERDOWN The cluster is down";

/// Redis's error for keys in different slots.
pub const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";

impl Redirect {
    /// The error line (without the leading `-`).
    pub fn error_text(&self) -> String {
        match self {
            Redirect::Moved(slot, addr) => format!("MOVED {slot} {addr}"),
            Redirect::CrossSlot => CROSSSLOT.to_string(),
            Redirect::Down(text) => text.to_string(),
        }
    }
}

/// True when the file at `path` is a static slot map (sluice's format: its first entry is
/// `node`, `replica` or `epoch`) rather than a Redis nodes.conf (or absent).
fn is_static_map(path: &str) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .find(|l| !l.is_empty())
        .and_then(|l| l.split_whitespace().next())
        .is_some_and(|w| matches!(w, "node" | "replica" | "epoch"))
}

/// Which node of `map` this server is: the one named by `node_id`, or else the one whose
/// address is `port` on one of the `bind` addresses.
pub fn find_self(
    map: &SlotMap,
    node_id: Option<&str>,
    bind: &[String],
    port: u16,
) -> Result<usize, MapError> {
    if let Some(id) = node_id {
        if !map::valid_id(id) {
            return Err(MapError(format!(
                "cluster-node-id '{id}' must be 40 hexadecimal characters"
            )));
        }
        return map
            .nodes
            .iter()
            .position(|n| n.id.eq_ignore_ascii_case(id))
            .ok_or_else(|| MapError(format!("cluster-node-id {id} is not in the cluster map")));
    }
    let binds: Vec<&str> = bind.iter().map(|b| b.trim_start_matches('-')).collect();
    let wildcard = binds.iter().any(|b| matches!(*b, "0.0.0.0" | "::" | "*"));
    let same_host = |host: &str| {
        binds.iter().any(|b| {
            *b == host
                || matches!((b.parse::<IpAddr>(), host.parse::<IpAddr>()), (Ok(x), Ok(y)) if x == y)
        })
    };
    let found: Vec<usize> = map
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.port == port && (wildcard || same_host(&n.host)))
        .map(|(i, _)| i)
        .collect();
    match found.as_slice() {
        [i] => Ok(*i),
        [] => Err(MapError(format!(
            "no node of the cluster map has this server's address (port {port} on {}); name this node with --cluster-node-id",
            binds.join(" ")
        ))),
        _ => Err(MapError(format!(
            "several nodes of the cluster map have port {port}; name this node with --cluster-node-id"
        ))),
    }
}

impl Cluster {
    /// The cluster state `config` asks for, once the server listens on `port`: None when
    /// cluster mode is off; an error when the map file is unreadable or invalid, or this
    /// node is not in it.
    pub fn from_config(config: &Config, port: u16) -> Result<Option<Cluster>, MapError> {
        if !config.cluster_enabled {
            return Ok(None);
        }
        let path = config
            .cluster_config_file
            .clone()
            .unwrap_or_else(|| "nodes.conf".to_string());
        if !is_static_map(&path) {
            return Cluster::with_bus(config, port, &path).map(Some);
        }
        let path = &path;
        let map = SlotMap::load(path)?;
        let me = find_self(&map, config.cluster_node_id.as_deref(), &config.bind, port)
            .map_err(|e| MapError(format!("cluster map '{path}': {e}")))?;
        Ok(Some(Cluster::new(map, me, Some(path.clone()))))
    }

    /// A member of a Redis cluster: its state loaded from (or started in) the nodes.conf at
    /// `path`, its bus port bound (`cluster-port`, or the client port plus 10000). The bus
    /// thread starts with [`Cluster::start_bus`] once the server is built.
    fn with_bus(config: &Config, port: u16, path: &str) -> Result<Cluster, MapError> {
        let mut file = std::path::PathBuf::from(path);
        if let Some(dir) = &config.dir
            && file.is_relative()
            && std::path::Path::new(dir).is_absolute()
        {
            file = std::path::Path::new(dir).join(file);
        }
        let cport = match config.cluster_port {
            0 => port.checked_add(10000).ok_or_else(|| {
                MapError(format!(
                    "port {port} plus 10000 is not a port: set cluster-port"
                ))
            })?,
            p => p,
        };
        let settings = bus::Settings {
            port,
            cport,
            node_timeout: config.cluster_node_timeout,
            announce_ip: config.cluster_announce_ip.clone(),
            announce_hostname: config.cluster_announce_hostname.clone(),
            migration_barrier: config.cluster_migration_barrier,
            allow_replica_migration: config.cluster_allow_replica_migration,
        };
        let bind = config
            .bind
            .first()
            .map(|b| b.trim_start_matches('-'))
            .filter(|b| !matches!(*b, "*" | "::*"))
            .unwrap_or("0.0.0.0")
            .to_string();
        let bus = bus::Bus::open(file, settings, &bind).map_err(MapError)?;
        let view = bus.current_view();
        let cluster = Cluster {
            gate: RwLock::new(()),
            my_id: view.map.nodes[view.me].id.clone(),
            current: RwLock::new(Arc::new(Installed {
                epoch: view.map.epoch.unwrap_or(0),
                map: view.map,
                me: view.me,
                down: view.down,
                migrating: view.migrating,
                importing: view.importing,
            })),
            owned: (0..SLOTS / 64).map(|_| AtomicU64::new(0)).collect(),
            moving: (0..SLOTS / 64).map(|_| AtomicU64::new(0)).collect(),
            mirrored: (0..SLOTS / 64).map(|_| AtomicU64::new(0)).collect(),
            map_file: None,
            bus: Some(Arc::new(bus)),
            view_seq: std::sync::Mutex::new(view.seq),
        };
        cluster.publish_owned(&cluster.current());
        Ok(cluster)
    }

    /// The cluster bus, in bus mode.
    pub fn bus(&self) -> Option<&Arc<bus::Bus>> {
        self.bus.as_ref()
    }

    /// Starts the bus thread (bus mode only; once).
    pub fn start_bus(&self, hook: bus::Hook) -> std::io::Result<()> {
        if let Some(b) = &self.bus {
            b.set_hook(hook);
            bus::gossip::start(b.clone())?;
        }
        Ok(())
    }

    /// Installs a view of the bus. `wait`: wait for the keyed commands in flight first (the
    /// bus thread does; a CLUSTER command, which may run inside EXEC holding the gate, does
    /// not). A view older than the one in force is ignored. Returns false if ignored.
    pub fn install_view(&self, view: &mut bus::View, wait: bool) -> bool {
        let _gate = wait.then(|| self.gate.write().unwrap_or_else(|p| p.into_inner()));
        let mut seq = self.view_seq.lock().unwrap_or_else(|p| p.into_inner());
        if view.seq <= *seq {
            return false;
        }
        *seq = view.seq;
        let installed = Installed {
            epoch: view.map.epoch.unwrap_or(0),
            map: std::mem::replace(&mut view.map, SlotMap::from_view(0, Vec::new(), &[])),
            me: view.me,
            down: view.down,
            migrating: std::mem::take(&mut view.migrating),
            importing: std::mem::take(&mut view.importing),
        };
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        self.publish_owned(&installed);
        *current = Arc::new(installed);
        true
    }

    /// A node serving `map` as the node at index `me`. `map_file` is where the map came from.
    pub fn new(map: SlotMap, me: usize, map_file: Option<String>) -> Cluster {
        let epoch = map.epoch.unwrap_or(1);
        let cluster = Cluster {
            gate: RwLock::new(()),
            my_id: map.nodes[me].id.clone(),
            current: RwLock::new(Arc::new(Installed {
                map,
                epoch,
                me,
                down: None,
                migrating: Vec::new(),
                importing: Vec::new(),
            })),
            owned: (0..SLOTS / 64).map(|_| AtomicU64::new(0)).collect(),
            moving: (0..SLOTS / 64).map(|_| AtomicU64::new(0)).collect(),
            mirrored: (0..SLOTS / 64).map(|_| AtomicU64::new(0)).collect(),
            map_file,
            bus: None,
            view_seq: std::sync::Mutex::new(0),
        };
        cluster.publish_owned(&cluster.current());
        cluster
    }

    /// This node's id.
    pub fn my_id(&self) -> &str {
        &self.my_id
    }

    /// The map file given at start-up.
    pub fn map_file(&self) -> Option<&str> {
        self.map_file.as_deref()
    }

    /// The map in force (a snapshot: a later install does not change it).
    pub fn current(&self) -> Arc<Installed> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// True if this node owns `slot` (lock-free; for checks inside a command that already
    /// holds the gate, such as a script's calls).
    #[inline]
    pub fn owns(&self, slot: u16) -> bool {
        let s = usize::from(slot);
        self.owned[s / 64].load(Ordering::Acquire) & (1 << (s % 64)) != 0
    }

    /// True if this node is a replica whose master owns `slot` (lock-free).
    #[inline]
    pub fn mirrors(&self, slot: u16) -> bool {
        let s = usize::from(slot);
        self.mirrored[s / 64].load(Ordering::Acquire) & (1 << (s % 64)) != 0
    }

    /// True while `slot` is migrating or importing (lock-free).
    #[inline]
    pub fn moving(&self, slot: u16) -> bool {
        let s = usize::from(slot);
        self.moving[s / 64].load(Ordering::Acquire) & (1 << (s % 64)) != 0
    }

    /// True if this node keeps the keys of `slot`: it owns it, or replicates its owner.
    #[inline]
    pub fn holds(&self, slot: u16) -> bool {
        self.owns(slot) || self.mirrors(slot)
    }

    /// Routes a command whose keys are all in `slot`: the gate guard to hold while it runs,
    /// or where to send it. `replica_read` (asked only for a slot this node does not own)
    /// says whether the command is a read from a READONLY connection, which a replica
    /// serves for its master's slots (Redis's getNodeByQuery).
    #[inline]
    pub fn route(
        &self,
        slot: u16,
        replica_read: impl FnOnce() -> bool,
    ) -> Result<RwLockReadGuard<'_, ()>, Redirect> {
        let gate = self.gate.read().unwrap_or_else(|p| p.into_inner());
        if self.owns(slot) || (self.mirrors(slot) && replica_read()) {
            return Ok(gate);
        }
        drop(gate);
        let current = self.current();
        match current.map.owner_of(slot) {
            Some(owner) if current.down.is_none() => Err(Redirect::Moved(slot, owner.addr())),
            Some(_) => Err(Redirect::Down(current.down.unwrap_or(DOWN_STATE))),
            None => Err(Redirect::Down(DOWN_UNBOUND)),
        }
    }

    /// The gate guard alone, for the commands a replica applies from its master's stream:
    /// they are not routed (the master decided), but a map change still waits for them.
    pub fn hold(&self) -> RwLockReadGuard<'_, ()> {
        self.gate.read().unwrap_or_else(|p| p.into_inner())
    }

    fn publish_owned(&self, installed: &Installed) {
        let bits = |ranges: &[(u16, u16)]| {
            let mut words = vec![0u64; SLOTS / 64];
            for &(a, b) in ranges {
                for s in usize::from(a)..=usize::from(b) {
                    words[s / 64] |= 1 << (s % 64);
                }
            }
            words
        };
        // While the cluster is down nothing is served: every keyed command is refused.
        let down = installed.down.is_some();
        let mirrored = installed
            .my_master()
            .filter(|_| !down)
            .map(|m| bits(&m.ranges))
            .unwrap_or_else(|| bits(&[]));
        let mine: &[(u16, u16)] = if down {
            &[]
        } else {
            &installed.myself().ranges
        };
        for (word, w) in self.owned.iter().zip(bits(mine)) {
            word.store(w, Ordering::Release);
        }
        let mut moving = vec![0u64; SLOTS / 64];
        for s in installed
            .migrating
            .iter()
            .map(|(s, _)| *s)
            .chain(installed.importing.iter().copied())
        {
            moving[usize::from(s) / 64] |= 1 << (s % 64);
        }
        for (word, w) in self.moving.iter().zip(moving) {
            word.store(w, Ordering::Release);
        }
        for (word, w) in self.mirrored.iter().zip(mirrored) {
            word.store(w, Ordering::Release);
        }
    }

    /// Installs `map` (which must list this node's id). Its stated epoch must not be older
    /// than the current one; the same epoch is accepted only for the same map (a repeated
    /// push), which changes nothing. A map without an epoch gets the current one plus one.
    ///
    /// Waits for the keyed commands in flight to finish; when it returns, every command
    /// routed by the old map has replied.
    pub fn install(&self, map: SlotMap) -> Result<Outcome, MapError> {
        let _gate = self.gate.write().unwrap_or_else(|p| p.into_inner());
        self.install_now(map)
    }

    /// `install` without waiting for the commands in flight: for the role changes this node
    /// makes itself (CLUSTER FAILOVER, CLUSTER REPLICATE), which never take a slot away
    /// from this node's keys, so no command in flight can be caught on the wrong side, and
    /// which may run inside MULTI or a script, whose gate guard `install` would wait for.
    pub fn install_own(&self, map: SlotMap) -> Result<Outcome, MapError> {
        self.install_now(map)
    }

    fn install_now(&self, map: SlotMap) -> Result<Outcome, MapError> {
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        let me = map
            .nodes
            .iter()
            .position(|n| n.id == self.my_id)
            .ok_or_else(|| {
                MapError(format!(
                    "this node ({}) is not in the new map; a node can only be given a map that lists it",
                    self.my_id
                ))
            })?;
        let epoch = match map.epoch {
            None => current.epoch.checked_add(1).ok_or_else(|| {
                MapError(format!(
                    "this node's epoch is {}, the highest there is; give the map a stated epoch",
                    current.epoch
                ))
            })?,
            Some(e) if e > current.epoch => e,
            Some(e) if e == current.epoch && map.same_layout(&current.map) => {
                return Ok(Outcome::Unchanged(e));
            }
            Some(e) if e == current.epoch => {
                return Err(MapError(format!(
                    "the map states epoch {e}, which is this node's epoch, but differs from the map in force; give it a higher epoch"
                )));
            }
            Some(e) => {
                return Err(MapError(format!(
                    "the map states epoch {e}, older than this node's epoch {}",
                    current.epoch
                )));
            }
        };
        let installed = Installed {
            map,
            epoch,
            me,
            down: None,
            migrating: Vec::new(),
            importing: Vec::new(),
        };
        self.publish_owned(&installed);
        *current = Arc::new(installed);
        Ok(Outcome::Installed(epoch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";

    fn map(text: &str) -> SlotMap {
        SlotMap::parse(text).unwrap()
    }

    fn two(epoch: &str, split: u16) -> SlotMap {
        map(&format!(
            "{epoch}\nnode {A} 127.0.0.1:7001 0-{}\nnode {B} 127.0.0.1:7002 {split}-16383",
            split - 1
        ))
    }

    #[test]
    fn finds_itself_by_id_or_address() {
        let m = two("", 100);
        assert_eq!(find_self(&m, Some(B), &[], 0), Ok(1));
        assert!(find_self(&m, Some("3333333333333333333333333333333333333333"), &[], 0).is_err());
        assert!(find_self(&m, Some("zz"), &[], 0).is_err());
        assert_eq!(find_self(&m, None, &["127.0.0.1".into()], 7002), Ok(1));
        assert_eq!(find_self(&m, None, &["0.0.0.0".into()], 7001), Ok(0));
        let e = find_self(&m, None, &["127.0.0.1".into()], 7009).unwrap_err();
        assert!(e.0.contains("--cluster-node-id"), "{e}");
    }

    #[test]
    fn routes_and_installs() {
        let c = Cluster::new(two("epoch 3", 100), 0, None);
        assert!(c.owns(0) && c.owns(99) && !c.owns(100));
        assert!(c.route(5, || false).is_ok());
        assert_eq!(
            c.route(100, || true).unwrap_err(),
            Redirect::Moved(100, "127.0.0.1:7002".into())
        );
        assert_eq!(c.current().epoch, 3);
        // Older or conflicting epochs are refused; the same map again changes nothing.
        assert!(c.install(two("epoch 2", 200)).is_err());
        assert!(c.install(two("epoch 3", 200)).is_err());
        assert_eq!(c.install(two("epoch 3", 100)), Ok(Outcome::Unchanged(3)));
        // No epoch: the current one plus one.
        assert_eq!(c.install(two("", 200)), Ok(Outcome::Installed(4)));
        assert!(c.owns(150) && !c.owns(200));
        assert_eq!(c.install(two("epoch 10", 50)), Ok(Outcome::Installed(10)));
        assert!(!c.owns(60));
        assert_eq!(
            c.route(60, || false).unwrap_err().error_text(),
            "MOVED 60 127.0.0.1:7002"
        );
        // A map without this node is refused.
        let other = map(&format!("node {B} 127.0.0.1:7002 0-16383"));
        assert!(
            c.install(other)
                .unwrap_err()
                .0
                .contains("not in the new map")
        );
    }

    #[test]
    fn a_replica_serves_reads_of_its_masters_slots() {
        const C: &str = "3333333333333333333333333333333333333333";
        let m = map(&format!(
            "node {A} 127.0.0.1:7001 0-99\nnode {B} 127.0.0.1:7002 100-16383\nreplica {C} 127.0.0.1:7003 {A}"
        ));
        let c = Cluster::new(m, 2, None);
        assert_eq!(c.current().my_master().map(|n| n.port), Some(7001));
        assert!(!c.owns(5) && c.mirrors(5) && c.holds(5) && !c.holds(200));
        assert!(c.route(5, || true).is_ok());
        assert_eq!(
            c.route(5, || false).unwrap_err(),
            Redirect::Moved(5, "127.0.0.1:7001".into())
        );
        assert_eq!(
            c.route(200, || true).unwrap_err(),
            Redirect::Moved(200, "127.0.0.1:7002".into())
        );
        // Promoted by a new map: it owns the slots, and its old master replicates it.
        let promoted = map(&format!(
            "replica {A} 127.0.0.1:7001 {C}\nnode {B} 127.0.0.1:7002 100-16383\nnode {C} 127.0.0.1:7003 0-99"
        ));
        assert_eq!(c.install(promoted), Ok(Outcome::Installed(2)));
        assert!(c.owns(5) && !c.mirrors(5) && c.route(5, || false).is_ok());
        assert!(c.current().my_master().is_none());
    }

    #[test]
    fn the_highest_epoch_does_not_overflow() {
        let c = Cluster::new(two(&format!("epoch {}", u64::MAX), 100), 0, None);
        let e = c.install(two("", 200)).unwrap_err();
        assert!(e.0.contains("the highest there is"), "{e}");
        assert_eq!(
            c.install(two(&format!("epoch {}", u64::MAX), 100)),
            Ok(Outcome::Unchanged(u64::MAX))
        );
    }
}
