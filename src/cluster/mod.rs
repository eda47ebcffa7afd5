//! Cluster mode: sluice as a node of a Redis 7.0 cluster, each node owning a share of the
//! 16384 hash slots, spoken to with the Redis Cluster client protocol.
//!
//! There is one model of the cluster: the cluster bus ([`bus`]), which speaks Redis 7.0's
//! binary bus with the other nodes (sluice or redis-server), keeps `nodes.conf`, fails over
//! and moves slots as Redis does. A cluster is built the way operators build a Redis cluster
//! (`redis-cli --cluster create`, CLUSTER MEET / ADDSLOTS / REPLICATE), or seeded from a slot
//! map file (`seed`, `cluster-seed-map`): a new node's first `nodes.conf` is then the state
//! those commands would have left.
//!
//! This module holds the pure parts: the slot function, the map type the bus's view of
//! routing is expressed in ([`map`], also the seed file's format), and [`Cluster`], the view
//! in force with the lock-free ownership test the dispatcher uses. A cluster-aware client
//! reads the slots with `CLUSTER SLOTS` or `SHARDS`, computes each key's [slot] and sends
//! the command to the owner; a node answers a key it does not own with `-MOVED`, keys in
//! several slots with `-CROSSSLOT`, a slot being migrated with `-ASK` / `-TRYAGAIN`. The
//! command side (the routing hook `engine::execute` calls, CLUSTER's subcommands, the key
//! sweep after slots are taken away) lives in `commands::cluster` and `commands::cluster_bus`.
//!
//! # Changing the view while running
//!
//! The bus installs each new view with [`Cluster::install_view`], which takes the routing
//! gate (an `RwLock`) for writing: it waits for the keyed commands in flight (each holds the
//! gate for reading from its routing check to its reply) and holds new ones back while the
//! ownership bitmaps are rewritten. So once it returns, no command routed with the old view
//! is still running, and the keys of slots taken from this node can be dropped without
//! racing a late write into them.

pub mod bus;
pub mod map;
pub(crate) mod seed;
pub mod slot;

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};

pub use map::{MapError, Node, SlotMap};

use crate::config::Config;
pub use slot::{SLOTS, key_slot};

/// The view of the cluster a node routes by (installed from the bus), with its epoch and
/// which node of it is this one.
#[derive(Debug)]
pub struct Installed {
    /// The map.
    pub map: SlotMap,
    /// The cluster's current epoch when the view was taken.
    pub epoch: u64,
    /// This node's index in `map.nodes`.
    pub me: usize,
    /// Set while the bus sees the cluster down: keyed commands get this error.
    pub down: Option<&'static str>,
    /// Slots being migrated away, with the target's address.
    pub migrating: Vec<(u16, String)>,
    /// Slots being imported.
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

/// A node's cluster state.
#[derive(Debug)]
pub struct Cluster {
    /// Held for reading by every keyed command from its routing check to its reply, and for
    /// writing while a new view is installed.
    gate: RwLock<()>,
    /// The map in force. Read briefly (never held across a command), so a reader of the map
    /// never waits behind a writer of the gate.
    current: RwLock<Arc<Installed>>,
    /// One bit per slot: set when this node owns the slot.
    owned: Box<[AtomicU64]>,
    /// One bit per slot: set while the slot is migrating or importing, so routing
    /// takes the slow path that answers -ASK / -TRYAGAIN.
    moving: Box<[AtomicU64]>,
    /// One bit per slot: set when this node is a replica and its master owns the slot (it
    /// holds the slot's keys, and serves reads of them to READONLY connections).
    mirrored: Box<[AtomicU64]>,
    /// This node's id (CLUSTER RESET HARD renames the bus's node; routing keeps this one).
    my_id: String,
    /// The cluster bus, whose view is the map in force (installed by `install_view`).
    bus: Arc<bus::Bus>,
    /// The sequence number of the last view installed.
    view_seq: std::sync::Mutex<u64>,
    /// `cluster-allow-reads-when-down`: while the cluster is down, reads of the slots this
    /// node serves still run (Redis's getNodeByQuery).
    reads_when_down: std::sync::atomic::AtomicBool,
    /// `cluster-allow-pubsubshard-when-down`: the same for the sharded pub/sub commands.
    pubsubshard_when_down: std::sync::atomic::AtomicBool,
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
/// Redis's error for a write while the cluster is down and `cluster-allow-reads-when-down`
/// lets reads through.
pub const DOWN_RO_STATE: &str = "CLUSTERDOWN The cluster is down and only accepts read commands";

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

/// True when the file at `path` is a slot map (sluice's format: its first entry is `node`,
/// `replica` or `epoch`) rather than a Redis nodes.conf (or absent).
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

/// Which node of a seed `map` this server is: the one named by `node_id`, or else the one
/// whose address is `port` on one of the `bind` addresses.
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
    /// cluster mode is off. The node's state is loaded from its `nodes.conf`
    /// (`cluster-config-file`, in `dir` when relative), or seeded from `cluster-seed-map`
    /// when there is no `nodes.conf` yet, or else starts as a new node; its bus port
    /// (`cluster-port`, or the client port plus 10000) is bound. The bus thread starts with
    /// [`Cluster::start_bus`] once the server is built.
    pub fn from_config(config: &Config, port: u16) -> Result<Option<Cluster>, MapError> {
        if !config.cluster_enabled {
            return Ok(None);
        }
        let path = config
            .cluster_config_file
            .clone()
            .unwrap_or_else(|| "nodes.conf".to_string());
        let mut file = std::path::PathBuf::from(&path);
        if let Some(dir) = &config.dir
            && file.is_relative()
            && std::path::Path::new(dir).is_absolute()
        {
            file = std::path::Path::new(dir).join(file);
        }
        let file_text = file.to_string_lossy().into_owned();
        if is_static_map(&file_text) {
            return Err(MapError(format!(
                "cluster-config-file '{path}' is a slot map, not a nodes.conf: give the map as cluster-seed-map, and cluster-config-file the path of the node's own nodes.conf (see docs/cluster.md)"
            )));
        }
        let cport = match config.cluster_port {
            0 => port.checked_add(10000).ok_or_else(|| {
                MapError(format!(
                    "port {port} plus 10000 is not a port: set cluster-port"
                ))
            })?,
            p => p,
        };
        let seed = match &config.cluster_seed_map {
            Some(seed_path) if !file.exists() => {
                let map = SlotMap::load(seed_path)?;
                let me = find_self(&map, config.cluster_node_id.as_deref(), &config.bind, port)
                    .map_err(|e| MapError(format!("cluster map '{seed_path}': {e}")))?;
                Some(
                    seed::nodes_conf(&map, me, cport)
                        .map_err(|e| MapError(format!("cluster map '{seed_path}': {e}")))?,
                )
            }
            _ => None,
        };
        let settings = bus::Settings {
            port,
            cport,
            node_timeout: config.cluster_node_timeout,
            announce_ip: config.cluster_announce_ip.clone(),
            announce_hostname: config.cluster_announce_hostname.clone(),
            migration_barrier: config.cluster_migration_barrier,
            allow_replica_migration: config.cluster_allow_replica_migration,
            require_full_coverage: config.cluster_require_full_coverage,
            replica_validity_factor: config.cluster_replica_validity_factor,
            repl_ping_period: config.repl.ping_period,
        };
        let bind = config
            .bind
            .first()
            .map(|b| b.trim_start_matches('-'))
            .filter(|b| !matches!(*b, "*" | "::*"))
            .unwrap_or("0.0.0.0")
            .to_string();
        let bus = bus::Bus::open(file, settings, &bind, seed).map_err(MapError)?;
        let cluster = Cluster::with_bus(Arc::new(bus));
        cluster.set_when_down(
            config.cluster_allow_reads_when_down,
            config.cluster_allow_pubsubshard_when_down,
        );
        Ok(Some(cluster))
    }

    /// The routing state of `bus`, with its current view installed.
    fn with_bus(bus: Arc<bus::Bus>) -> Cluster {
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
            bus,
            view_seq: std::sync::Mutex::new(view.seq),
            reads_when_down: Default::default(),
            pubsubshard_when_down: std::sync::atomic::AtomicBool::new(true),
        };
        cluster.publish_owned(&cluster.current());
        cluster
    }

    /// The cluster bus.
    pub fn bus(&self) -> &Arc<bus::Bus> {
        &self.bus
    }

    /// Starts the bus thread (once).
    pub fn start_bus(&self, hook: bus::Hook) -> std::io::Result<()> {
        self.bus.set_hook(hook);
        bus::gossip::start(self.bus.clone())?;
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

    /// This node's id.
    pub fn my_id(&self) -> &str {
        &self.my_id
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

    /// Routes a command whose keys (or shard channels, `shard_pubsub`) are all in `slot`:
    /// the gate guard to hold while it runs, or where to send it. `writes` says whether the
    /// command writes; `replica_ok` (asked only for a command that does not write, of a slot
    /// this node does not own) whether it comes from a READONLY connection or is a sharded
    /// pub/sub command, which a replica serves for its master's slots (Redis's
    /// getNodeByQuery).
    #[inline]
    pub fn route(
        &self,
        slot: u16,
        shard_pubsub: bool,
        writes: impl Fn() -> bool,
        replica_ok: impl Fn() -> bool,
    ) -> Result<RwLockReadGuard<'_, ()>, Redirect> {
        let gate = self.gate.read().unwrap_or_else(|p| p.into_inner());
        if self.owns(slot) || (self.mirrors(slot) && !writes() && replica_ok()) {
            return Ok(gate);
        }
        self.not_served(slot, shard_pubsub, writes, replica_ok)
            .map(|()| gate)
    }

    /// The answer for a slot the ownership bits do not let this node serve (routing's slow
    /// path, and a script's call), in Redis's getNodeByQuery order: a slot without an owner
    /// is not served; while the cluster is down every keyed command is refused, unless
    /// `cluster-allow-reads-when-down` lets a read (or `cluster-allow-pubsubshard-when-down`
    /// a sharded pub/sub command) of a slot this node owns (or, for `replica_ok`, its master
    /// owns) run (Ok); otherwise the owner's address.
    pub fn not_served(
        &self,
        slot: u16,
        shard_pubsub: bool,
        writes: impl Fn() -> bool,
        replica_ok: impl Fn() -> bool,
    ) -> Result<(), Redirect> {
        let current = self.current();
        let Some(owner) = current.map.owner_of(slot) else {
            return Err(Redirect::Down(DOWN_UNBOUND));
        };
        if let Some(down) = current.down {
            if shard_pubsub {
                if !self.pubsubshard_when_down.load(Ordering::Relaxed) {
                    return Err(Redirect::Down(down));
                }
            } else if !self.reads_when_down.load(Ordering::Relaxed) {
                return Err(Redirect::Down(down));
            } else if writes() {
                return Err(Redirect::Down(DOWN_RO_STATE));
            }
            let mine = owner.id == current.myself().id;
            let mirrored = || current.my_master().is_some_and(|m| m.id == owner.id) && replica_ok();
            if mine || mirrored() {
                return Ok(());
            }
        }
        Err(Redirect::Moved(slot, owner.addr()))
    }

    /// `cluster-allow-reads-when-down`.
    pub fn reads_when_down(&self) -> bool {
        self.reads_when_down.load(Ordering::Relaxed)
    }

    /// `cluster-allow-reads-when-down` and `cluster-allow-pubsubshard-when-down` (CONFIG SET
    /// reaches them at once).
    pub fn set_when_down(&self, reads: bool, pubsubshard: bool) {
        self.reads_when_down.store(reads, Ordering::Relaxed);
        self.pubsubshard_when_down
            .store(pubsubshard, Ordering::Relaxed);
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
        // While the cluster is down nothing is served on the fast path: `not_served` decides
        // (refused, or a read let through by `cluster-allow-reads-when-down`).
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
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";
    const C: &str = "3333333333333333333333333333333333333333";

    fn map(text: &str) -> SlotMap {
        SlotMap::parse(text).unwrap()
    }

    fn two(split: u16) -> SlotMap {
        map(&format!(
            "node {A} 127.0.0.1:7001 0-{}\nnode {B} 127.0.0.1:7002 {split}-16383",
            split - 1
        ))
    }

    /// A node with a real bus (its nodes.conf in a temporary directory, its bus port picked
    /// by the system), for routing to be tested on the views the bus would install.
    fn node(dir: &tempfile::TempDir) -> Cluster {
        let settings = bus::Settings {
            cport: 0,
            ..bus::Settings::for_tests(7001, 1000)
        };
        let b = bus::Bus::open(dir.path().join("nodes.conf"), settings, "127.0.0.1", None).unwrap();
        Cluster::with_bus(Arc::new(b))
    }

    fn install(c: &Cluster, seq: u64, map: SlotMap, me: usize) {
        let mut view = bus::View {
            seq,
            map,
            me,
            down: None,
            lost_slots: Vec::new(),
            migrating: Vec::new(),
            importing: Vec::new(),
            resume_writes: false,
        };
        assert!(c.install_view(&mut view, true));
    }

    #[test]
    fn finds_itself_by_id_or_address() {
        let m = two(100);
        assert_eq!(find_self(&m, Some(B), &[], 0), Ok(1));
        assert!(find_self(&m, Some(C), &[], 0).is_err());
        assert!(find_self(&m, Some("zz"), &[], 0).is_err());
        assert_eq!(find_self(&m, None, &["127.0.0.1".into()], 7002), Ok(1));
        assert_eq!(find_self(&m, None, &["0.0.0.0".into()], 7001), Ok(0));
        let e = find_self(&m, None, &["127.0.0.1".into()], 7009).unwrap_err();
        assert!(e.0.contains("--cluster-node-id"), "{e}");
    }

    #[test]
    fn routes_by_the_view_installed() {
        let dir = tempfile::tempdir().unwrap();
        let c = node(&dir);
        install(&c, 1_000_000, two(100), 0);
        assert!(c.owns(0) && c.owns(99) && !c.owns(100));
        assert!(c.route(5, false, || false, || false).is_ok());
        assert_eq!(
            c.route(100, false, || false, || true).unwrap_err(),
            Redirect::Moved(100, "127.0.0.1:7002".into())
        );
        install(&c, 1_000_001, two(50), 0);
        assert!(!c.owns(60));
        assert_eq!(
            c.route(60, false, || false, || false)
                .unwrap_err()
                .error_text(),
            "MOVED 60 127.0.0.1:7002"
        );
        // An older view never replaces a newer one.
        let mut old = bus::View {
            seq: 1_000_000,
            map: two(100),
            me: 0,
            down: None,
            lost_slots: Vec::new(),
            migrating: Vec::new(),
            importing: Vec::new(),
            resume_writes: false,
        };
        assert!(!c.install_view(&mut old, true));
        assert!(!c.owns(60));
    }

    #[test]
    fn a_replica_serves_reads_of_its_masters_slots() {
        let dir = tempfile::tempdir().unwrap();
        let c = node(&dir);
        let m = map(&format!(
            "node {A} 127.0.0.1:7001 0-99\nnode {B} 127.0.0.1:7002 100-16383\nreplica {C} 127.0.0.1:7003 {A}"
        ));
        install(&c, 1_000_000, m, 2);
        assert_eq!(c.current().my_master().map(|n| n.port), Some(7001));
        assert!(!c.owns(5) && c.mirrors(5) && c.holds(5) && !c.holds(200));
        assert!(c.route(5, false, || false, || true).is_ok());
        assert_eq!(
            c.route(5, false, || false, || false).unwrap_err(),
            Redirect::Moved(5, "127.0.0.1:7001".into())
        );
        assert_eq!(
            c.route(200, false, || false, || true).unwrap_err(),
            Redirect::Moved(200, "127.0.0.1:7002".into())
        );
        // Promoted: it owns the slots, and its old master replicates it.
        let promoted = map(&format!(
            "replica {A} 127.0.0.1:7001 {C}\nnode {B} 127.0.0.1:7002 100-16383\nnode {C} 127.0.0.1:7003 0-99"
        ));
        install(&c, 1_000_001, promoted, 2);
        assert!(c.owns(5) && !c.mirrors(5) && c.route(5, false, || false, || false).is_ok());
        assert!(c.current().my_master().is_none());
    }

    /// While the cluster is down every keyed command gets -CLUSTERDOWN, except, with
    /// `cluster-allow-reads-when-down`, the reads of a slot this node serves (and with
    /// `cluster-allow-pubsubshard-when-down` the sharded pub/sub commands); writes get
    /// Redis's read-only variant, other nodes' slots -MOVED; an unowned slot is "not served"
    /// whatever the state (Redis's getNodeByQuery order).
    #[test]
    fn a_down_cluster_serves_only_reads_when_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let c = node(&dir);
        let m = map(&format!(
            "node {A} 127.0.0.1:7001 0-99\nnode {B} 127.0.0.1:7002 100-16383\nreplica {C} 127.0.0.1:7003 {A}"
        ));
        // Slot 50 has no owner.
        let owners: Vec<Option<usize>> = (0..SLOTS as u16)
            .map(|s| (s != 50).then(|| m.owner_index(s)))
            .collect();
        let down = SlotMap::from_view(1, m.nodes.clone(), &owners);
        for (seq, me) in [(1_000_000, 0), (1_000_001, 2)] {
            let mut view = bus::View {
                seq,
                map: down.clone(),
                me,
                down: Some(DOWN_STATE),
                lost_slots: Vec::new(),
                migrating: Vec::new(),
                importing: Vec::new(),
                resume_writes: false,
            };
            assert!(c.install_view(&mut view, true));
            assert!(
                !c.owns(5) && !c.mirrors(5),
                "nothing is served on the fast path"
            );
            c.set_when_down(false, false);
            let reading = |slot| c.route(slot, false, || false, || true).map(drop);
            let writing = |slot| c.route(slot, false, || true, || true).map(drop);
            let shard_pubsub = |slot| c.route(slot, true, || false, || true).map(drop);
            assert_eq!(reading(5), Err(Redirect::Down(DOWN_STATE)));
            assert_eq!(reading(50), Err(Redirect::Down(DOWN_UNBOUND)));
            assert_eq!(shard_pubsub(5), Err(Redirect::Down(DOWN_STATE)));
            c.set_when_down(false, true);
            assert_eq!(shard_pubsub(5), Ok(()));
            assert_eq!(reading(5), Err(Redirect::Down(DOWN_STATE)));
            c.set_when_down(true, false);
            // The master (me 0) serves its slot's reads; its replica (me 2) to READONLY ones.
            assert_eq!(reading(5), Ok(()));
            assert_eq!(writing(5), Err(Redirect::Down(DOWN_RO_STATE)));
            assert_eq!(
                reading(200),
                Err(Redirect::Moved(200, "127.0.0.1:7002".into()))
            );
            assert_eq!(reading(50), Err(Redirect::Down(DOWN_UNBOUND)));
            if me == 2 {
                assert_eq!(
                    c.route(5, false, || false, || false).map(drop),
                    Err(Redirect::Moved(5, "127.0.0.1:7001".into()))
                );
            }
        }
    }
}
