//! The cluster bus: sluice as a node of a Redis 7.0 cluster. It owns the cluster's state as
//! this node sees it ([`state`]), the binary messages (`msg`), `nodes.conf`
//! (`nodes_conf`) and the bus thread (`gossip`) that listens on `cluster-port`, keeps a
//! link to every known node, pings, and applies what peers send.
//!
//! The state sits under one mutex, taken briefly by the bus thread (per message, per cron
//! turn) and by the CLUSTER admin commands; never while a shard is locked or the routing gate
//! is waited for. Whenever slot owners, roles or the cluster's health change, the holder of
//! the mutex takes a [`View`] (the routing table as a [`SlotMap`]) and, after releasing it,
//! hands it to the hook the server installed, which updates routing (`Cluster::install_view`),
//! replication (a replica follows its master) and drops the keys of slots taken away.

pub(crate) mod failover;
pub(crate) mod gossip;
pub(crate) mod msg;
pub(crate) mod nodes_conf;
pub(crate) mod replica_migration;
pub mod state;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use super::map::{Node, SlotMap};
use super::slot::SLOTS;
use msg::flag;
pub use state::{Settings, State};

/// What routing needs from the bus's state: a snapshot.
#[derive(Debug)]
pub struct View {
    /// Increases with every view, so an older one never replaces a newer one.
    pub seq: u64,
    /// The routing table: every node shown, each slot's owner (or none).
    pub map: SlotMap,
    /// This node's index in `map.nodes`.
    pub me: usize,
    /// The cluster is down (Redis's `CLUSTER_FAIL` state): keyed commands get this error.
    pub down: Option<&'static str>,
    /// Slots taken from this node while it held them: their keys are to be deleted.
    pub lost_slots: Vec<u16>,
    /// Slots this node is migrating, with the target's `ip:port` (for `-ASK`).
    pub migrating: Vec<(u16, String)>,
    /// Slots this node is importing.
    pub importing: Vec<u16>,
    /// A manual failover's hold on this master's writes ends once this view is installed.
    pub resume_writes: bool,
}

/// What the server does with a new view.
pub type Hook = Box<dyn Fn(View) + Send + Sync>;

/// What the server does with a PUBLISH (`false`) or PUBLISHSHARD (`true`) from another node
/// (shard, channel, message).
pub type PublishHook = Box<dyn Fn(bool, &[u8], &[u8]) + Send + Sync>;

/// This node's replication offset, as the server reads it: a master's stream, or what a
/// replica has processed of its master's.
pub type OffsetHook = Box<dyn Fn() -> u64 + Send + Sync>;
/// How long ago (ms) this replica last heard from its master over replication: while the
/// link is up, since its last data; while it is down, since it went down (Redis's data age);
/// None without a link.
pub type DataAgeHook = Box<dyn Fn() -> Option<u64> + Send + Sync>;
/// Whether a manual failover's pause has settled: no write that began before it is still
/// running (`services::pause::Pause::failover_settled`).
pub type SettledHook = Box<dyn Fn() -> bool + Send + Sync>;

/// The bus of one node.
pub struct Bus {
    state: Mutex<State>,
    conf_path: PathBuf,
    hook: OnceLock<Hook>,
    publish_hook: OnceLock<PublishHook>,
    offset_hook: OnceLock<OffsetHook>,
    settled_hook: OnceLock<SettledHook>,
    data_age_hook: OnceLock<DataAgeHook>,
    seq: AtomicU64,
    /// Set at shutdown: the bus thread stops.
    pub stop: AtomicBool,
    /// The bus port's listener, until the thread takes it.
    listener: Mutex<Option<std::net::TcpListener>>,
}

impl std::fmt::Debug for Bus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bus")
            .field("conf_path", &self.conf_path)
            .finish()
    }
}

/// Unix milliseconds (the bus's clock).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Bus {
    /// Loads `conf_path` (or starts a new node when it does not exist), writes it, and binds
    /// the bus port. Errors are Redis's start-up texts.
    /// `seed`: the nodes.conf text to start from when the file does not exist (see
    /// `crate::cluster::seed`).
    pub fn open(
        conf_path: PathBuf,
        settings: Settings,
        bind: &str,
        seed: Option<String>,
    ) -> Result<Bus, String> {
        let now = now_ms();
        let state = match std::fs::read_to_string(&conf_path) {
            Ok(text) if !text.trim().is_empty() => nodes_conf::parse(&text, settings.clone(), now)?,
            Ok(_) => State::new(state::random_name(), settings.clone(), now),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match seed {
                Some(text) => nodes_conf::parse(&text, settings.clone(), now)?,
                None => State::new(state::random_name(), settings.clone(), now),
            },
            Err(e) => return Err(format!("Can't open {}: {e}", conf_path.display())),
        };
        let mut state = state;
        state.settings = settings.clone();
        if let Some(me) = state.nodes.get_mut(&state.myself) {
            me.port = settings.port;
            me.cport = settings.cport;
            if !settings.announce_hostname.is_empty() {
                me.hostname = settings.announce_hostname.clone();
            }
        }
        nodes_conf::save(&conf_path, &state, true).map_err(|e| {
            format!(
                "Could not write the cluster config file {}: {e}",
                conf_path.display()
            )
        })?;
        let listener = std::net::TcpListener::bind((bind, settings.cport)).map_err(|e| {
            format!(
                "Could not create the cluster bus listening socket on port {}: {e}",
                settings.cport
            )
        })?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("cluster bus socket: {e}"))?;
        Ok(Bus {
            state: Mutex::new(state),
            conf_path,
            hook: OnceLock::new(),
            publish_hook: OnceLock::new(),
            offset_hook: OnceLock::new(),
            settled_hook: OnceLock::new(),
            data_age_hook: OnceLock::new(),
            seq: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            listener: Mutex::new(Some(listener)),
        })
    }

    /// This node's id.
    pub fn my_id(&self) -> String {
        self.lock().myself.clone()
    }

    /// The state, locked.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Installs what the server does with each view (once).
    pub fn set_hook(&self, hook: Hook) {
        let _ = self.hook.set(hook);
    }

    /// Installs what the server does with a PUBLISH from another node (once).
    pub fn set_publish_hook(&self, hook: PublishHook) {
        let _ = self.publish_hook.set(hook);
    }

    /// Installs what a manual failover needs from the server (once): the replication offset
    /// the bus sends in its headers and compares, and the hold on a master's writes.
    pub fn set_repl_hooks(
        &self,
        offset: OffsetHook,
        pause_writes: failover::PauseWrites,
        settled: SettledHook,
    ) {
        let _ = self.offset_hook.set(offset);
        let _ = self.settled_hook.set(settled);
        self.lock().pause_writes = Some(pause_writes);
    }

    /// Installs how the bus reads this replica's data age (once).
    pub fn set_data_age_hook(&self, hook: DataAgeHook) {
        let _ = self.data_age_hook.set(hook);
    }

    /// The state, locked, with this node's replication offset refreshed first (the offset
    /// is read before the lock is taken: the server's feed is never locked inside it).
    pub fn lock_fresh(&self) -> MutexGuard<'_, State> {
        // Whether the writes held by a manual failover's pause have settled (none that read
        // no pause is still running), asked before the offset is read: then the offset is
        // the paused one.
        let settled = self.settled_hook.get().is_some_and(|f| f());
        let offset = self.offset_hook.get().map(|f| f());
        let data_age = self.data_age_hook.get().map(|f| f());
        let mut st = self.lock();
        if let Some(o) = offset {
            st.me_mut().repl_offset = o;
        }
        if let Some(age) = data_age {
            st.master_data_age = age.unwrap_or(u64::MAX);
        }
        // A pause is only ever begun on the bus thread, the one caller: if one was in force
        // and settled when this hold began, it was when the offset was read.
        st.offset_after_pause = st.election.mf_replica.is_some() && settled;
        st
    }

    /// Sends a PUBLISH to every connected node (Redis's `clusterPropagatePublish`), or with
    /// `shard` a PUBLISHSHARD to the other nodes of this node's shard, its master and that
    /// master's replicas (`clusterPropagatePublishShard`).
    pub fn propagate_publish(&self, channel: &[u8], message: &[u8], shard: bool) {
        let mut st = self.lock();
        let kind = if shard {
            msg::kind::PUBLISHSHARD
        } else {
            msg::kind::PUBLISH
        };
        let bytes = msg::Message {
            kind,
            header: st.header(st.me().repl_offset),
            body: msg::Body::Publish {
                channel: channel.to_vec(),
                message: message.to_vec(),
            },
        }
        .encode();
        if !shard {
            st.broadcast(kind, &bytes);
            return;
        }
        let Some(master) = st.my_master().map(|m| m.name.clone()) else {
            return;
        };
        let links: Vec<state::LinkId> = st
            .nodes
            .values()
            .filter(|n| !n.is(flag::MYSELF | flag::HANDSHAKE))
            .filter(|n| n.name == master || n.slaveof.as_deref() == Some(master.as_str()))
            .filter_map(|n| n.link)
            .collect();
        for l in links {
            st.send(l, kind, bytes.clone());
        }
    }

    /// Delivers the PUBLISH and PUBLISHSHARD messages peers sent (the caller holds no lock).
    pub fn deliver(&self, inbox: Vec<(bool, Vec<u8>, Vec<u8>)>) {
        if let Some(hook) = self.publish_hook.get() {
            for (shard, channel, message) in inbox {
                hook(shard, &channel, &message);
            }
        }
    }

    /// Redis's `clusterBeforeSleep` for a state the caller holds: updates the health, writes
    /// nodes.conf if it changed, and takes a view if routing must change. The caller hands
    /// the view to [`Bus::publish`] once it has released the lock.
    pub fn after(&self, st: &mut State) -> Option<View> {
        st.update_ok();
        if st.dirty {
            st.dirty = false;
            let epochs = (st.current_epoch, st.last_vote_epoch, st.me().config_epoch);
            let fsync = epochs != st.synced_epochs;
            if fsync {
                st.synced_epochs = epochs;
            }
            if let Err(e) = nodes_conf::save(&self.conf_path, st, fsync) {
                tracing::warn!("cannot write {}: {e}", self.conf_path.display());
            }
        }
        if !st.view_changed {
            return None;
        }
        st.view_changed = false;
        Some(self.view(st))
    }

    /// Writes nodes.conf now (CLUSTER SAVECONFIG).
    pub fn save(&self, st: &mut State) -> std::io::Result<()> {
        st.dirty = false;
        nodes_conf::save(&self.conf_path, st, true)
    }

    /// Hands a view to the server's hook.
    pub fn publish(&self, view: Option<View>) {
        if let (Some(v), Some(hook)) = (view, self.hook.get()) {
            hook(v);
        }
    }

    fn view(&self, st: &mut State) -> View {
        let mut nodes: Vec<Node> = Vec::new();
        let mut index: std::collections::HashMap<&str, usize> = Default::default();
        let shown =
            |n: &state::BusNode| n.is(flag::MYSELF) || !n.is(flag::HANDSHAKE | flag::NOADDR);
        for n in st.nodes.values().filter(|n| shown(n)) {
            index.insert(n.name.as_str(), nodes.len());
            nodes.push(Node {
                id: n.name.clone(),
                host: n.ip.clone(),
                port: n.port,
                cport: n.cport,
                ranges: nodes_conf::ranges(n),
                master: None,
            });
        }
        for n in st.nodes.values().filter(|n| shown(n)) {
            if n.is_master() {
                continue;
            }
            let Some(m) = n.slaveof.as_deref() else {
                continue;
            };
            if let (Some(&i), Some(&mi)) = (index.get(n.name.as_str()), index.get(m))
                && st.nodes.get(m).is_some_and(|m| m.is_master())
            {
                nodes[i].master = Some(mi);
                nodes[i].ranges.clear();
            }
        }
        // Neighbouring slots mostly share their owner: each run of them is looked up once.
        let mut last: Option<(&str, Option<usize>)> = None;
        let owners: Vec<Option<usize>> = st.owners[..SLOTS]
            .iter()
            .map(|o| {
                let o = o.as_deref()?;
                match last {
                    Some((name, i)) if name == o => i,
                    _ => {
                        let i = index.get(o).copied();
                        last = Some((o, i));
                        i
                    }
                }
            })
            .collect();
        let me = index[st.myself.as_str()];
        View {
            seq: self.seq.fetch_add(1, Ordering::Relaxed) + 1,
            map: SlotMap::from_view(st.current_epoch, nodes, &owners),
            me,
            down: (!st.ok).then_some(super::DOWN_STATE),
            lost_slots: std::mem::take(&mut st.lost_slots),
            migrating: st
                .migrating
                .iter()
                .filter_map(|(&s, to)| {
                    st.nodes
                        .get(to)
                        .map(|n| (s, format!("{}:{}", n.ip, n.port)))
                })
                .collect(),
            importing: st.importing.keys().copied().collect(),
            resume_writes: std::mem::take(&mut st.resume_writes),
        }
    }

    /// A view of the current state, whatever changed (at start).
    pub fn current_view(&self) -> View {
        let mut st = self.lock();
        st.update_ok();
        st.view_changed = false;
        self.view(&mut st)
    }

    fn take_listener(&self) -> Option<std::net::TcpListener> {
        self.listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}
