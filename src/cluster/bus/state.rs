//! The cluster as this node sees it through the bus (Redis 7.0's `clusterState`): the known
//! nodes with their flags, addresses, epochs and slots, the slot owners, the epochs, and what
//! each received message does to them (`clusterProcessPacket`, `clusterProcessGossipSection`,
//! `clusterUpdateSlotsConfigWith`, `clusterHandleConfigEpochCollision`). No I/O: messages to
//! send go to the links' queues, which the bus thread (`gossip.rs`) drains.
//!
//! Times are Unix milliseconds from the wall clock, as Redis's `mstime()`: the bus keeps time
//! with its peers, not with the test clock.

#![allow(missing_docs)] // Fields and constants are Redis's (`clusterMsg`, `clusterNode`), named as there; the module doc says where.

use std::collections::{BTreeMap, HashMap};

use rand::RngExt;
use tokio::sync::mpsc;

use super::super::slot::SLOTS;
use super::msg::{
    self, Bitmap, Body, Ext, Gossip, Header, Message, NULL_NAME, flag, kind, mflag, name_of,
    name_text,
};

/// A link's id.
pub type LinkId = u64;

/// Frames queued to one link; a full queue closes the link (Redis's
/// `cluster-link-sendbuf-limit`, here counted in messages).
pub const LINK_QUEUE: usize = 1024;

/// One TCP connection of the bus.
#[derive(Debug)]
pub struct Link {
    /// The node it belongs to: always set for an outbound link; for an inbound one, once the
    /// peer has named itself.
    pub node: Option<String>,
    pub inbound: bool,
    pub ctime: u64,
    /// The peer's address and this side's, as the socket gives them.
    pub peer_ip: String,
    pub local_ip: String,
    pub tx: mpsc::Sender<Vec<u8>>,
}

/// One known node.
#[derive(Debug, Clone)]
pub struct BusNode {
    pub name: String,
    pub flags: u16,
    pub config_epoch: u64,
    pub ip: String,
    pub hostname: String,
    pub port: u16,
    pub pport: u16,
    pub cport: u16,
    /// A replica's master (a name, which may not be known yet).
    pub slaveof: Option<String>,
    pub slots: Bitmap,
    pub ctime: u64,
    pub ping_sent: u64,
    pub pong_received: u64,
    pub data_received: u64,
    pub fail_time: u64,
    pub voted_time: u64,
    pub repl_offset: u64,
    /// Outbound link (to its bus port) and the inbound one it opened to us.
    pub link: Option<LinkId>,
    pub inbound_link: Option<LinkId>,
    /// An outbound connection is being made.
    pub connecting: bool,
    /// Masters that reported it failing, with when.
    pub fail_reports: Vec<(String, u64)>,
    /// Replica migration's bookkeeping (`replica_migration`): the replicas counted for this
    /// master at the last check, whether it had slots then, and since when it has been
    /// orphaned (0: it is not).
    pub replicas_seen: usize,
    pub had_slots: bool,
    pub orphaned_time: u64,
}

impl BusNode {
    pub fn new(name: String, flags: u16, now: u64) -> BusNode {
        BusNode {
            name,
            flags,
            config_epoch: 0,
            ip: String::new(),
            hostname: String::new(),
            port: 0,
            pport: 0,
            cport: 0,
            slaveof: None,
            slots: Bitmap::default(),
            ctime: now,
            ping_sent: 0,
            pong_received: 0,
            data_received: 0,
            fail_time: 0,
            voted_time: 0,
            repl_offset: 0,
            link: None,
            inbound_link: None,
            connecting: false,
            fail_reports: Vec::new(),
            replicas_seen: 0,
            had_slots: false,
            orphaned_time: 0,
        }
    }
    pub fn is(&self, f: u16) -> bool {
        self.flags & f != 0
    }
    pub fn is_master(&self) -> bool {
        self.is(flag::MASTER)
    }
}

/// A random node name: 40 lowercase hexadecimal characters (Redis's `getRandomHexChars`).
pub fn random_name() -> String {
    const HEX: &[u8] = b"0123456789abcdef";
    let mut rng = rand::rng();
    (0..msg::NAMELEN)
        .map(|_| char::from(HEX[rng.random_range(0..16)]))
        .collect()
}

/// This node's settings the bus needs.
#[derive(Debug, Clone)]
pub struct Settings {
    pub port: u16,
    pub cport: u16,
    pub node_timeout: u64,
    /// `cluster-announce-ip` (empty: learned from the first MEET).
    pub announce_ip: String,
    pub announce_hostname: String,
    /// `cluster-migration-barrier`: the working replicas a master keeps when one of its
    /// replicas migrates to an orphaned master.
    pub migration_barrier: u64,
    /// `cluster-allow-replica-migration`.
    pub allow_replica_migration: bool,
    /// `cluster-require-full-coverage`: a slot without a working owner takes the whole
    /// cluster down (Redis's `clusterUpdateState`); without it the others are served.
    pub require_full_coverage: bool,
    /// `cluster-replica-validity-factor` (0: a replica may always stand for election).
    pub replica_validity_factor: u64,
    /// `repl-ping-replica-period` in seconds (part of the data age a replica may have).
    pub repl_ping_period: u64,
}

#[cfg(test)]
impl Settings {
    /// A node at `port` (its bus at port + 10000) with Redis's defaults, for unit tests.
    pub(crate) fn for_tests(port: u16, node_timeout: u64) -> Settings {
        Settings {
            port,
            cport: port + 10000,
            node_timeout,
            announce_ip: String::new(),
            announce_hostname: String::new(),
            migration_barrier: 1,
            allow_replica_migration: true,
            require_full_coverage: true,
            replica_validity_factor: 10,
            repl_ping_period: 10,
        }
    }
}

/// The cluster state.
#[derive(Debug)]
pub struct State {
    pub myself: String,
    pub current_epoch: u64,
    pub last_vote_epoch: u64,
    pub nodes: BTreeMap<String, BusNode>,
    /// Each slot's owner.
    pub owners: Vec<Option<String>>,
    /// Slots whose owner's own messages no longer claim them (Redis 7.0.15's
    /// `owner_not_claiming_slot`): the owner stays, so clients are still redirected, but any
    /// node claiming such a slot takes it whatever its epoch, and UPDATE messages leave it out.
    /// A slot's mark goes whenever its owner is set (as `clusterDelSlot` does from Redis 7.4,
    /// redis/redis#12564: 7.0.15 keeps it, and a node that takes back a slot it once gave
    /// away can then lose it to a late claim).
    pub owner_not_claiming: Bitmap,
    pub migrating: BTreeMap<u16, String>,
    pub importing: BTreeMap<u16, String>,
    pub links: HashMap<LinkId, Link>,
    /// Names CLUSTER FORGET keeps out for a minute, with until when.
    pub blacklist: HashMap<String, u64>,
    pub settings: Settings,
    pub ok: bool,
    /// When this node last counted fewer reachable masters than a majority (Unix ms).
    pub among_minority_time: u64,
    pub stats_sent: [u64; kind::COUNT],
    pub stats_received: [u64; kind::COUNT],
    /// The configuration changed: nodes.conf is to be written.
    pub dirty: bool,
    /// The slot owners or roles changed: routing is to be refreshed.
    pub view_changed: bool,
    /// Slots that were taken from this node while it had keys in them: their keys go.
    pub lost_slots: Vec<u16>,
    /// This node's failover election, when it is a replica.
    pub election: super::failover::Election,
    /// How long (ms) this replica has been without news from its master's replication link
    /// (refreshed from the server every cron turn; `u64::MAX`: it never had a link): an
    /// election waits for nothing older than `cluster-replica-validity-factor` allows.
    pub master_data_age: u64,
    /// Why this replica last could not fail over, and when that was logged.
    pub cant_failover: super::failover::CantFailover,
    /// The epochs (current, last vote, own config) nodes.conf was last synced with: a change
    /// of any of them is synced to disk before it is acted on, as Redis fsyncs for votes.
    pub synced_epochs: (u64, u64, u64),
    /// PUBLISH and PUBLISHSHARD messages received from peers (shard, channel, message), to
    /// deliver to this node's subscribers once the state is released.
    pub inbox: Vec<(bool, Vec<u8>, Vec<u8>)>,
    /// Holds this node's writes for a manual failover (set by the server).
    pub pause_writes: Option<super::failover::PauseWrites>,
    /// A manual failover ended on this master: the next view releases its writes.
    pub resume_writes: bool,
    /// This master's `repl_offset` was read with its writes held for a manual failover, so
    /// it may be announced with the PAUSED flag.
    pub offset_after_pause: bool,
    next_link: LinkId,
}

impl State {
    /// A fresh node named `myself` (a master with no slots).
    pub fn new(myself: String, settings: Settings, now: u64) -> State {
        let mut me = BusNode::new(myself.clone(), flag::MYSELF | flag::MASTER, now);
        me.ip = settings.announce_ip.clone();
        me.port = settings.port;
        me.cport = settings.cport;
        me.hostname = settings.announce_hostname.clone();
        let mut nodes = BTreeMap::new();
        nodes.insert(myself.clone(), me);
        State {
            myself,
            current_epoch: 0,
            last_vote_epoch: 0,
            nodes,
            owners: vec![None; SLOTS],
            owner_not_claiming: Bitmap::default(),
            migrating: BTreeMap::new(),
            importing: BTreeMap::new(),
            links: HashMap::new(),
            blacklist: HashMap::new(),
            settings,
            ok: false,
            among_minority_time: 0,
            stats_sent: [0; kind::COUNT],
            stats_received: [0; kind::COUNT],
            dirty: true,
            view_changed: true,
            lost_slots: Vec::new(),
            election: Default::default(),
            master_data_age: 0,
            cant_failover: Default::default(),
            synced_epochs: (u64::MAX, 0, 0),
            inbox: Vec::new(),
            pause_writes: None,
            resume_writes: false,
            offset_after_pause: false,
            next_link: 1,
        }
    }

    pub fn me(&self) -> &BusNode {
        &self.nodes[&self.myself]
    }
    pub(super) fn me_mut(&mut self) -> &mut BusNode {
        self.nodes
            .get_mut(&self.myself)
            .expect("myself is always known")
    }

    /// The master whose slots this node serves or replicates.
    pub fn my_master(&self) -> Option<&BusNode> {
        let me = self.me();
        if me.is_master() {
            Some(me)
        } else {
            me.slaveof.as_ref().and_then(|m| self.nodes.get(m))
        }
    }

    pub fn new_link_id(&mut self) -> LinkId {
        self.next_link += 1;
        self.next_link
    }

    /// Sets the owner of `slot` (keeping the nodes' bitmaps in step).
    pub fn set_owner(&mut self, slot: u16, owner: Option<&str>) {
        let s = usize::from(slot);
        if let Some(old) = self.owners[s].take()
            && let Some(n) = self.nodes.get_mut(&old)
        {
            n.slots.set(slot, false);
        }
        if let Some(o) = owner
            && let Some(n) = self.nodes.get_mut(o)
        {
            n.slots.set(slot, true);
            self.owners[s] = Some(o.to_string());
        }
        self.owner_not_claiming.set(slot, false);
        self.view_changed = true;
        self.dirty = true;
    }

    /// Redis's `isSlotUnclaimed`: no owner, or an owner that no longer claims it.
    pub fn slot_unclaimed(&self, slot: u16) -> bool {
        self.owners[usize::from(slot)].is_none() || self.owner_not_claiming.get(slot)
    }

    /// Redis's `clusterBumpConfigEpochWithoutConsensus`: unless this node's config epoch is
    /// already the greatest it knows of (every node's config epoch and the current epoch
    /// count, as in `clusterGetMaxEpoch`) and not 0, it takes the next current epoch as its
    /// config epoch, unilaterally. True when it did.
    pub fn bump_epoch_without_consensus(&mut self) -> bool {
        let max = self
            .nodes
            .values()
            .map(|n| n.config_epoch)
            .max()
            .unwrap_or(0)
            .max(self.current_epoch);
        let mine = self.me().config_epoch;
        if mine != 0 && mine == max {
            return false;
        }
        self.current_epoch += 1;
        let e = self.current_epoch;
        self.me_mut().config_epoch = e;
        self.dirty = true;
        tracing::warn!("New configEpoch set to {e}");
        true
    }

    /// Redis's `clusterBroadcastPong(CLUSTER_BROADCAST_ALL)`: a PONG to every connected node,
    /// so a change of this node's slots or epoch reaches them now, not at their next PING.
    pub fn broadcast_pong(&mut self, now: u64) {
        let bytes = self.ping_message(kind::PONG, now);
        self.broadcast(kind::PONG, &bytes);
    }

    /// Number of masters serving at least one slot (Redis's `size`).
    pub fn size(&self) -> usize {
        self.nodes
            .values()
            .filter(|n| n.is_master() && !n.slots.is_empty())
            .count()
    }

    // ---- sending ----

    /// Queues `bytes` on a link; a full queue closes it.
    pub fn send(&mut self, link: LinkId, kind_sent: u16, bytes: Vec<u8>) {
        let full = match self.links.get(&link) {
            Some(l) => l.tx.try_send(bytes).is_err(),
            None => return,
        };
        if full {
            self.free_link(link);
        } else if let Some(c) = self.stats_sent.get_mut(usize::from(kind_sent)) {
            *c += 1;
        }
    }

    /// Sends to every node with an outbound link that is not in handshake.
    pub fn broadcast(&mut self, kind_sent: u16, bytes: &[u8]) {
        let targets: Vec<LinkId> = self
            .nodes
            .values()
            .filter(|n| !n.is(flag::MYSELF | flag::HANDSHAKE))
            .filter_map(|n| n.link)
            .collect();
        for l in targets {
            self.send(l, kind_sent, bytes.to_vec());
        }
    }

    /// Forgets a link (the bus thread's task for it ends when its queue closes).
    pub fn free_link(&mut self, link: LinkId) {
        if let Some(l) = self.links.remove(&link)
            && let Some(name) = l.node
            && let Some(n) = self.nodes.get_mut(&name)
        {
            if n.link == Some(link) {
                n.link = None;
            }
            if n.inbound_link == Some(link) {
                n.inbound_link = None;
            }
        }
    }

    /// The header this node sends (Redis's `clusterBuildMessageHdr`).
    pub fn header(&self, offset: u64) -> Header {
        let me = self.me();
        let master = if me.is_master() {
            Some(me)
        } else {
            self.my_master()
        };
        Header {
            port: self.settings.port,
            current_epoch: self.current_epoch,
            config_epoch: master.map_or(0, |m| m.config_epoch),
            offset,
            sender: name_of(&self.myself).unwrap_or(NULL_NAME),
            myslots: master.map(|m| m.slots.clone()).unwrap_or_default(),
            slaveof: me
                .slaveof
                .as_deref()
                .filter(|_| !me.is_master())
                .and_then(name_of)
                .unwrap_or(NULL_NAME),
            myip: self.settings.announce_ip.clone(),
            pport: 0,
            cport: self.settings.cport,
            flags: me.flags,
            state: u8::from(!self.ok),
            // A master paused for a manual failover says so in every message.
            mflags: [
                if me.is_master() && self.election.mf_end != 0 && self.offset_after_pause {
                    mflag::PAUSED
                } else {
                    0
                },
                0,
                0,
            ],
        }
    }

    /// A PING, PONG or MEET with gossip (Redis's `clusterSendPing`).
    pub fn ping_message(&mut self, k: u16, now: u64) -> Vec<u8> {
        let fresh = self.nodes.len().saturating_sub(2);
        let wanted = (self.nodes.len() / 10).max(3).min(fresh);
        let mut candidates: Vec<&BusNode> = self
            .nodes
            .values()
            .filter(|n| {
                let skipped = n.is(flag::MYSELF | flag::PFAIL | flag::HANDSHAKE | flag::NOADDR);
                // A node with neither a link nor slots says little worth gossiping.
                let idle = n.link.is_none() && n.slots.is_empty();
                !(skipped || idle)
            })
            .collect();
        let mut rng = rand::rng();
        let mut gossip = Vec::new();
        while gossip.len() < wanted && !candidates.is_empty() {
            let i = rng.random_range(0..candidates.len());
            gossip.push(gossip_entry(candidates.swap_remove(i)));
        }
        gossip.extend(
            self.nodes
                .values()
                .filter(|n| n.is(flag::PFAIL) && !n.is(flag::HANDSHAKE | flag::NOADDR))
                .map(gossip_entry),
        );
        let _ = now;
        let mut exts = Vec::new();
        if !self.settings.announce_hostname.is_empty() {
            exts.push(Ext::Hostname(self.settings.announce_hostname.clone()));
        }
        Message {
            kind: k,
            header: self.header(self.me().repl_offset),
            body: Body::Ping { gossip, exts },
        }
        .encode()
    }

    /// Sends a PING (or MEET) on an outbound link, noting when.
    pub fn send_ping(&mut self, link: LinkId, k: u16, now: u64) {
        let bytes = self.ping_message(k, now);
        if k == kind::PING
            && let Some(name) = self.links.get(&link).and_then(|l| l.node.clone())
            && let Some(n) = self.nodes.get_mut(&name)
            && n.ping_sent == 0
        {
            n.ping_sent = now;
        }
        self.send(link, k, bytes);
    }

    // ---- receiving ----

    /// What a received message does (Redis's `clusterProcessPacket`).
    pub fn process(&mut self, link: LinkId, m: Message, now: u64) {
        let Some(info) = self.links.get(&link) else {
            return;
        };
        let (inbound, link_node, peer_ip, local_ip) = (
            info.inbound,
            info.node.clone(),
            info.peer_ip.clone(),
            info.local_ip.clone(),
        );
        if let Some(c) = self.stats_received.get_mut(usize::from(m.kind)) {
            *c += 1;
        }
        let h = &m.header;
        let sender_name = name_text(&h.sender);
        let known = self
            .nodes
            .get(&sender_name)
            .is_some_and(|n| !n.is(flag::HANDSHAKE));
        let sender = known.then(|| sender_name.clone());
        if let Some(s) = &sender {
            let Some(n) = self.nodes.get_mut(s) else {
                return;
            };
            n.data_received = now;
            if inbound && n.inbound_link.is_none() {
                n.inbound_link = Some(link);
                if let Some(l) = self.links.get_mut(&link) {
                    l.node = Some(s.clone());
                }
            }
            // Every node's header carries its replication offset (Redis records it from
            // any sender): a replica's is what its siblings rank themselves against.
            n.repl_offset = h.offset;
            self.on_master_paused(s, h);
            if h.current_epoch > self.current_epoch {
                self.current_epoch = h.current_epoch;
                self.dirty = true;
            }
            let Some(n) = self.nodes.get_mut(s) else {
                return;
            };
            if h.config_epoch > n.config_epoch && h.slaveof == NULL_NAME {
                n.config_epoch = h.config_epoch;
                self.dirty = true;
            }
        }

        match m.kind {
            kind::PING | kind::MEET => {
                if (m.kind == kind::MEET || self.me().ip.is_empty())
                    && self.settings.announce_ip.is_empty()
                    && !local_ip.is_empty()
                    && self.me().ip != local_ip
                {
                    self.me_mut().ip = local_ip.clone();
                    self.dirty = true;
                }
                if sender.is_none() && m.kind == kind::MEET {
                    let mut n = BusNode::new(random_name(), flag::HANDSHAKE, now);
                    n.ip = if h.myip.is_empty() {
                        peer_ip.clone()
                    } else {
                        h.myip.clone()
                    };
                    n.port = h.port;
                    n.pport = h.pport;
                    n.cport = h.cport;
                    self.nodes.insert(n.name.clone(), n);
                    self.dirty = true;
                }
                if sender.is_none()
                    && m.kind == kind::MEET
                    && let Body::Ping { gossip, .. } = &m.body
                {
                    self.process_gossip(None, gossip, now);
                }
                self.send_ping(link, kind::PONG, now);
            }
            _ => {}
        }

        match m.kind {
            kind::PING | kind::PONG | kind::MEET => {
                self.process_ping(link, inbound, link_node, sender, &peer_ip, &m, now)
            }
            kind::FAIL => {
                if sender.is_none() {
                    return;
                }
                let Body::Fail { about } = &m.body else {
                    return;
                };
                let about = name_text(about);
                if let Some(n) = self.nodes.get_mut(&about)
                    && !n.is(flag::MYSELF | flag::FAIL)
                {
                    n.flags = (n.flags | flag::FAIL) & !flag::PFAIL;
                    n.fail_time = now;
                    self.dirty = true;
                    self.view_changed = true;
                }
            }
            kind::PUBLISH | kind::PUBLISHSHARD => {
                if sender.is_some()
                    && let Body::Publish { channel, message } = m.body
                    && self.inbox.len() < 100_000
                {
                    self.inbox
                        .push((m.kind == kind::PUBLISHSHARD, channel, message));
                }
            }
            kind::MFSTART => {
                if let Some(s) = &sender {
                    self.on_mfstart(s, now);
                }
            }
            kind::FAILOVER_AUTH_REQUEST => {
                if let Some(s) = &sender {
                    self.on_auth_request(s, &m.header, now);
                }
            }
            kind::FAILOVER_AUTH_ACK => {
                if let Some(s) = &sender {
                    self.on_auth_ack(s, &m.header);
                }
            }
            kind::UPDATE => {
                if sender.is_none() {
                    return;
                }
                let Body::Update {
                    config_epoch,
                    node,
                    slots,
                } = &m.body
                else {
                    return;
                };
                let name = name_text(node);
                let Some(n) = self.nodes.get(&name) else {
                    return;
                };
                if n.config_epoch >= *config_epoch {
                    return;
                }
                if !n.is_master() {
                    self.set_node_as_master(&name);
                }
                if let Some(n) = self.nodes.get_mut(&name) {
                    n.config_epoch = *config_epoch;
                }
                self.update_slots_with(&name, *config_epoch, slots);
                self.dirty = true;
            }
            _ => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn process_ping(
        &mut self,
        link: LinkId,
        inbound: bool,
        mut link_node: Option<String>,
        sender: Option<String>,
        peer_ip: &str,
        m: &Message,
        now: u64,
    ) {
        let h = &m.header;
        let sender_name = name_text(&h.sender);
        if !inbound && let Some(ln) = link_node.clone() {
            let ln = &ln;
            let in_handshake = self.nodes.get(ln).is_some_and(|n| n.is(flag::HANDSHAKE));
            if in_handshake {
                if let Some(s) = &sender {
                    // Already known under its real name: keep that entry, drop this one.
                    if m.kind == kind::PONG {
                        self.update_address(s, link, peer_ip, h.port, h.cport, h.pport);
                    }
                    self.del_node(ln);
                    return;
                }
                if msg::name_of(&sender_name).is_none()
                    || !sender_name.bytes().all(|b| b.is_ascii_hexdigit())
                {
                    return;
                }
                self.rename_node(ln, &sender_name);
                if let Some(n) = self.nodes.get_mut(&sender_name) {
                    n.flags &= !flag::HANDSHAKE;
                    n.flags |= h.flags & (flag::MASTER | flag::SLAVE);
                }
                link_node = Some(sender_name.clone());
                self.dirty = true;
                self.view_changed = true;
            } else if *ln != sender_name {
                // The node at this address has another id now.
                if let Some(n) = self.nodes.get_mut(ln) {
                    n.flags |= flag::NOADDR;
                    n.ip.clear();
                    n.port = 0;
                    n.cport = 0;
                }
                self.free_link(link);
                self.dirty = true;
                return;
            }
        }
        let sender = sender.or_else(|| {
            self.nodes
                .get(&sender_name)
                .filter(|n| !n.is(flag::HANDSHAKE))
                .map(|_| sender_name.clone())
        });
        if let Some(s) = &sender {
            let nofailover = h.flags & flag::NOFAILOVER;
            if let Some(n) = self.nodes.get_mut(s) {
                n.flags = (n.flags & !flag::NOFAILOVER) | nofailover;
            }
            if m.kind == kind::PING {
                let ip = if h.myip.is_empty() {
                    peer_ip.to_string()
                } else {
                    h.myip.clone()
                };
                self.update_address(s, link, &ip, h.port, h.cport, h.pport);
            }
        }
        if !inbound
            && m.kind == kind::PONG
            && let Some(ln) = &link_node
            && let Some(n) = self.nodes.get_mut(ln)
        {
            n.pong_received = now;
            n.ping_sent = 0;
            if n.is(flag::PFAIL) {
                n.flags &= !flag::PFAIL;
                self.dirty = true;
            } else if n.is(flag::FAIL) {
                let undo = n.is_master() && !n.slots.is_empty();
                let timeout = self.settings.node_timeout * 2;
                if !n.is_master()
                    || n.slots.is_empty()
                    || (undo && now.saturating_sub(n.fail_time) > timeout)
                {
                    n.flags &= !flag::FAIL;
                    self.dirty = true;
                    self.view_changed = true;
                }
            }
        }
        // The sender may have been forgotten or renamed by what came before.
        let Some(s) = sender.filter(|s| self.nodes.contains_key(s)) else {
            return;
        };
        // Role.
        if h.slaveof == NULL_NAME {
            if !self.nodes[&s].is_master() {
                self.set_node_as_master(&s);
            }
        } else {
            let master = name_text(&h.slaveof);
            let Some(n) = self.nodes.get_mut(&s) else {
                return;
            };
            if n.is_master() {
                n.flags = (n.flags & !(flag::MASTER | flag::MIGRATE_TO)) | flag::SLAVE;
                let owned: Vec<u16> = (0..SLOTS as u16).filter(|&x| n.slots.get(x)).collect();
                for slot in owned {
                    self.set_owner(slot, None);
                }
                self.dirty = true;
                self.view_changed = true;
            }
            let Some(n) = self.nodes.get_mut(&s) else {
                return;
            };
            if n.slaveof.as_deref() != Some(master.as_str()) {
                n.slaveof = Some(master);
                self.dirty = true;
                self.view_changed = true;
            }
        }
        // Slots.
        let sender_is_master = self.nodes[&s].is_master();
        let sender_master = if sender_is_master {
            Some(s.clone())
        } else {
            self.nodes[&s].slaveof.clone()
        };
        let dirty_slots = sender_master
            .as_ref()
            .and_then(|sm| self.nodes.get(sm))
            .is_some_and(|n| n.slots != h.myslots);
        if sender_is_master && dirty_slots {
            self.update_slots_with(&s, h.config_epoch, &h.myslots);
        }
        if dirty_slots {
            // The sender claims slots whose owner has a newer config: tell it (UPDATE).
            let stale = (0..SLOTS as u16).find_map(|slot| {
                if !h.myslots.get(slot) {
                    return None;
                }
                let owner = self.owners[usize::from(slot)].as_ref()?;
                if Some(owner) == sender_master.as_ref() || self.owner_not_claiming.get(slot) {
                    return None;
                }
                let o = &self.nodes[owner];
                (o.config_epoch > h.config_epoch).then(|| owner.clone())
            });
            if let Some(owner) = stale {
                let o = &self.nodes[&owner];
                // Slots their owner no longer claims are not vouched for.
                let mut slots = o.slots.clone();
                for (b, gone) in slots.0.iter_mut().zip(self.owner_not_claiming.0.iter()) {
                    *b &= !gone;
                }
                let bytes = Message {
                    kind: kind::UPDATE,
                    header: self.header(self.me().repl_offset),
                    body: Body::Update {
                        config_epoch: o.config_epoch,
                        node: name_of(&owner).unwrap_or(NULL_NAME),
                        slots,
                    },
                }
                .encode();
                self.send(link, kind::UPDATE, bytes);
            }
        }
        // Epoch collision between two masters.
        if self.me().is_master()
            && sender_is_master
            && h.config_epoch == self.me().config_epoch
            && s.as_str() > self.myself.as_str()
        {
            self.current_epoch += 1;
            let e = self.current_epoch;
            self.me_mut().config_epoch = e;
            self.dirty = true;
        }
        if let Body::Ping { gossip, exts } = &m.body {
            self.process_gossip(Some(&s), gossip, now);
            for x in exts {
                if let Ext::Hostname(hn) = x
                    && let Some(n) = self.nodes.get_mut(&s)
                    && n.hostname != *hn
                {
                    n.hostname = hn.clone();
                    self.dirty = true;
                }
            }
            if !exts.iter().any(|x| matches!(x, Ext::Hostname(_)))
                && let Some(n) = self.nodes.get_mut(&s)
                && !n.hostname.is_empty()
            {
                n.hostname.clear();
                self.dirty = true;
            }
        }
    }

    fn update_address(
        &mut self,
        name: &str,
        link: LinkId,
        ip: &str,
        port: u16,
        cport: u16,
        pport: u16,
    ) {
        let Some(n) = self.nodes.get_mut(name) else {
            return;
        };
        if n.link == Some(link) || ip.is_empty() {
            return;
        }
        if n.ip == ip && n.port == port && n.cport == cport && n.pport == pport {
            return;
        }
        n.ip = ip.to_string();
        n.port = port;
        n.cport = cport;
        n.pport = pport;
        n.flags &= !flag::NOADDR;
        if let Some(l) = n.link {
            self.free_link(l);
        }
        self.dirty = true;
        self.view_changed = true;
    }

    /// Redis's `clusterUpdateSlotsConfigWith`: the sender claims `slots` with `epoch`.
    pub fn update_slots_with(&mut self, sender: &str, epoch: u64, slots: &Bitmap) {
        if sender == self.myself {
            return;
        }
        let my_master = self.my_master().map(|m| m.name.clone());
        let mut moved_from_us = 0;
        for slot in 0..SLOTS as u16 {
            let by_sender = self.owners[usize::from(slot)].as_deref() == Some(sender);
            if !slots.get(slot) {
                // The sender no longer claims a slot it owns: note it, keep the owner.
                if by_sender {
                    self.owner_not_claiming.set(slot, true);
                }
                continue;
            }
            if by_sender {
                self.owner_not_claiming.set(slot, false);
                continue;
            }
            if self.importing.contains_key(&slot) {
                continue;
            }
            let owner = self.owners[usize::from(slot)].clone();
            let older = self.slot_unclaimed(slot)
                || owner
                    .as_ref()
                    .and_then(|o| self.nodes.get(o))
                    .is_none_or(|n| n.config_epoch < epoch);
            if !older {
                continue;
            }
            if owner.as_deref() == Some(self.myself.as_str()) {
                self.lost_slots.push(slot);
            }
            if owner.is_some() && owner == my_master {
                moved_from_us += 1;
            }
            self.set_owner(slot, Some(sender));
        }
        // All of our (or our master's) slots went to the sender: follow it as a replica,
        // unless replica migration is off and the sender took only part of what it claims
        // from us (Redis 7.0: then this master stays, empty).
        let sender_slots = (0..SLOTS as u16).filter(|&s| slots.get(s)).count();
        let sub_replica_of = self
            .me()
            .slaveof
            .as_ref()
            .and_then(|m| self.nodes.get(m))
            .and_then(|m| m.slaveof.clone())
            .filter(|grand| *grand != self.myself);
        if moved_from_us > 0
            && let Some(m) = &my_master
            && self.nodes.get(m).is_some_and(|n| n.slots.is_empty())
            && (self.settings.allow_replica_migration || sender_slots == moved_from_us)
        {
            self.set_my_master(sender);
            self.lost_slots.clear();
        } else if let Some(grand) = sub_replica_of {
            // A replica whose master became a replica follows the grandmaster.
            tracing::warn!(
                "I'm a sub-replica! Reconfiguring myself as a replica of grandmaster {grand}"
            );
            self.set_my_master(&grand);
        }
    }

    fn process_gossip(&mut self, sender: Option<&str>, gossip: &[Gossip], now: u64) {
        let sender_is_master = sender
            .and_then(|s| self.nodes.get(s))
            .is_some_and(|n| n.is_master());
        for g in gossip {
            let name = name_text(&g.name);
            if let Some(n) = self.nodes.get_mut(&name) {
                if n.is(flag::MYSELF) {
                    continue;
                }
                if sender_is_master && let Some(s) = sender {
                    if g.flags & (flag::FAIL | flag::PFAIL) != 0 {
                        match n.fail_reports.iter_mut().find(|(r, _)| r == s) {
                            Some(r) => r.1 = now,
                            None => n.fail_reports.push((s.to_string(), now)),
                        }
                    } else {
                        n.fail_reports.retain(|(r, _)| r != s);
                    }
                }
                if g.flags & (flag::FAIL | flag::PFAIL) == 0
                    && n.ping_sent == 0
                    && n.fail_reports.is_empty()
                {
                    let pong = u64::from(g.pong_received) * 1000;
                    if pong <= now + 500 && pong > n.pong_received {
                        n.pong_received = pong;
                    }
                }
                if n.is(flag::FAIL | flag::PFAIL)
                    && g.flags & flag::NOADDR == 0
                    && g.flags & (flag::FAIL | flag::PFAIL) == 0
                    && (n.ip != g.ip || n.port != g.port || n.cport != g.cport)
                {
                    n.ip = g.ip.clone();
                    n.port = g.port;
                    n.cport = g.cport;
                    n.pport = g.pport;
                    n.flags &= !flag::NOADDR;
                    if let Some(l) = n.link {
                        self.free_link(l);
                    }
                }
                if sender_is_master {
                    self.mark_failing_if_needed(&name, now);
                }
            } else if sender.is_some()
                && g.flags & flag::NOADDR == 0
                && self.blacklist.get(&name).is_none_or(|&t| t <= now / 1000)
                && name.len() == msg::NAMELEN
                && name.bytes().all(|b| b.is_ascii_hexdigit())
            {
                let mut n = BusNode::new(
                    name.clone(),
                    g.flags & !(flag::MYSELF | flag::PFAIL | flag::FAIL),
                    now,
                );
                n.ip = g.ip.clone();
                n.port = g.port;
                n.cport = g.cport;
                n.pport = g.pport;
                self.nodes.insert(name, n);
                self.dirty = true;
                self.view_changed = true;
            }
        }
    }

    /// Redis's `markNodeAsFailingIfNeeded`: PFAIL becomes FAIL when a majority of masters
    /// agree (this node counts itself if it is a master), and the FAIL is broadcast.
    pub fn mark_failing_if_needed(&mut self, name: &str, now: u64) {
        let validity = self.settings.node_timeout * 2;
        let needed = self.size() / 2 + 1;
        let me_master = self.me().is_master();
        let Some(n) = self.nodes.get_mut(name) else {
            return;
        };
        n.fail_reports
            .retain(|(_, t)| now.saturating_sub(*t) <= validity);
        if !n.is(flag::PFAIL) || n.is(flag::FAIL) {
            return;
        }
        let reports = n.fail_reports.len() + usize::from(me_master);
        if reports < needed {
            return;
        }
        n.flags = (n.flags | flag::FAIL) & !flag::PFAIL;
        n.fail_time = now;
        self.dirty = true;
        self.view_changed = true;
        tracing::warn!("Marking node {name} as failing (quorum reached).");
        let bytes = Message {
            kind: kind::FAIL,
            header: self.header(self.me().repl_offset),
            body: Body::Fail {
                about: name_of(name).unwrap_or(NULL_NAME),
            },
        }
        .encode();
        self.broadcast(kind::FAIL, &bytes);
    }

    fn rename_node(&mut self, old: &str, new: &str) {
        let Some(mut n) = self.nodes.remove(old) else {
            return;
        };
        n.name = new.to_string();
        for l in [n.link, n.inbound_link].into_iter().flatten() {
            if let Some(link) = self.links.get_mut(&l) {
                link.node = Some(new.to_string());
            }
        }
        self.nodes.insert(new.to_string(), n);
    }

    /// Removes a node with its links, its slots and the failure reports it made.
    pub fn del_node(&mut self, name: &str) {
        let Some(n) = self.nodes.get(name) else {
            return;
        };
        let links: Vec<LinkId> = [n.link, n.inbound_link].into_iter().flatten().collect();
        for l in links {
            self.free_link(l);
        }
        // An inbound link not yet attached may still name it.
        for slot in 0..SLOTS as u16 {
            if self.owners[usize::from(slot)].as_deref() == Some(name) {
                self.set_owner(slot, None);
            }
        }
        self.migrating.retain(|_, v| v != name);
        self.importing.retain(|_, v| v != name);
        for other in self.nodes.values_mut() {
            other.fail_reports.retain(|(r, _)| r != name);
        }
        self.nodes.remove(name);
        self.dirty = true;
        self.view_changed = true;
    }

    fn set_node_as_master(&mut self, name: &str) {
        if let Some(n) = self.nodes.get_mut(name) {
            if n.is_master() {
                return;
            }
            // A replica that took over its master's slots is a replica-migration target
            // (Redis's clusterSetNodeAsMaster).
            if n.slaveof.is_some() && !n.is(flag::MYSELF) {
                n.flags |= flag::MIGRATE_TO;
            }
            n.flags = (n.flags & !flag::SLAVE) | flag::MASTER;
            n.slaveof = None;
            self.dirty = true;
            self.view_changed = true;
        }
    }

    /// Makes this node a replica of `master` (CLUSTER REPLICATE, or a master that lost all
    /// its slots to another).
    pub fn set_my_master(&mut self, master: &str) {
        self.reset_manual_failover();
        let owned: Vec<u16> = (0..SLOTS as u16)
            .filter(|&s| self.me().slots.get(s))
            .collect();
        for s in owned {
            self.set_owner(s, None);
        }
        self.migrating.clear();
        self.importing.clear();
        let me = self.me_mut();
        me.flags = (me.flags & !(flag::MASTER | flag::MIGRATE_TO)) | flag::SLAVE;
        me.slaveof = Some(master.to_string());
        self.dirty = true;
        self.view_changed = true;
    }

    /// Redis's `clusterUpdateState`: ok when every slot has an owner that is not failing
    /// (unless `cluster-require-full-coverage` is off) and this node reaches a majority of
    /// the masters with slots (a master cut off in a minority stops taking writes once it
    /// has timed the others out). A master back in the majority waits the rejoin delay (the
    /// node timeout, within 0.5 to 5 s) before it serves again, so the majority's failover,
    /// if any, reaches it first.
    pub fn update_ok(&mut self) {
        let now = super::now_ms();
        let (mut size, mut reachable) = (0, 0);
        for n in self.nodes.values() {
            if n.is_master() && !n.slots.is_empty() {
                size += 1;
                reachable += usize::from(!n.is(flag::FAIL | flag::PFAIL));
            }
        }
        let minority = reachable < size / 2 + 1;
        if minority {
            self.among_minority_time = now;
        }
        // Neighbouring slots mostly share their owner: each run of them is looked up once.
        // Without `cluster-require-full-coverage` an uncovered slot downs only itself
        // (routing answers its keys as Redis's getNodeByQuery does).
        let mut last_ok: Option<&str> = None;
        let covered = !self.settings.require_full_coverage
            || self.owners.iter().all(|o| match o.as_deref() {
                None => false,
                Some(o) if last_ok == Some(o) => true,
                Some(o) => {
                    let up = self.nodes.get(o).is_some_and(|n| !n.is(flag::FAIL));
                    if up {
                        last_ok = Some(o);
                    }
                    up
                }
            });
        let ok = covered && !minority;
        let rejoin_delay = self.settings.node_timeout.clamp(500, 5000);
        if ok
            && !self.ok
            && self.me().is_master()
            && now.saturating_sub(self.among_minority_time) < rejoin_delay
        {
            return;
        }
        if ok != self.ok {
            tracing::warn!("Cluster state changed: {}", if ok { "ok" } else { "fail" });
            self.ok = ok;
            self.view_changed = true;
        }
    }

    /// CLUSTER RESET: forget every other node and every slot; a replica becomes a master;
    /// `hard` also takes a new name and sets the epochs to 0.
    pub fn reset(&mut self, hard: bool) {
        for s in 0..SLOTS as u16 {
            if self.owners[usize::from(s)].is_some() {
                self.set_owner(s, None);
            }
        }
        self.migrating.clear();
        self.importing.clear();
        let others: Vec<String> = self
            .nodes
            .keys()
            .filter(|n| **n != self.myself)
            .cloned()
            .collect();
        for n in others {
            self.del_node(&n);
        }
        let me = self.me_mut();
        me.flags = (me.flags & !flag::SLAVE) | flag::MASTER;
        me.slaveof = None;
        if hard {
            me.config_epoch = 0;
            self.current_epoch = 0;
            self.last_vote_epoch = 0;
            let old = self.myself.clone();
            let new = random_name();
            self.rename_node(&old, &new);
            self.myself = new;
        }
        self.dirty = true;
        self.view_changed = true;
    }

    /// CLUSTER MEET: a node in handshake at this address (false if the address is already
    /// in handshake).
    pub fn start_handshake(&mut self, ip: &str, port: u16, cport: u16, now: u64) -> bool {
        if self
            .nodes
            .values()
            .any(|n| n.is(flag::HANDSHAKE) && n.ip == ip && n.port == port && n.cport == cport)
        {
            return false;
        }
        let mut n = BusNode::new(random_name(), flag::HANDSHAKE | flag::MEET, now);
        n.ip = ip.to_string();
        n.port = port;
        n.cport = cport;
        self.nodes.insert(n.name.clone(), n);
        true
    }
}

fn gossip_entry(n: &BusNode) -> Gossip {
    Gossip {
        name: name_of(&n.name).unwrap_or(NULL_NAME),
        ping_sent: (n.ping_sent / 1000) as u32,
        pong_received: (n.pong_received / 1000) as u32,
        ip: n.ip.clone(),
        port: n.port,
        cport: n.cport,
        flags: n.flags,
        pport: n.pport,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings::for_tests(23461, 15000)
    }

    fn with_peer(my_epoch: u64, peer_epoch: u64, current: u64) -> State {
        let mut st = State::new("a".repeat(40), settings(), 0);
        st.me_mut().config_epoch = my_epoch;
        let mut peer = BusNode::new("b".repeat(40), flag::MASTER, 0);
        peer.config_epoch = peer_epoch;
        st.nodes.insert(peer.name.clone(), peer);
        st.current_epoch = current;
        st
    }

    /// A node importing a slot takes a new epoch unless its own is already the greatest
    /// one known, the current epoch included: a current epoch above every config epoch
    /// (an election that took no config epoch) makes a node at the top config epoch bump.
    #[test]
    fn bumping_without_consensus_counts_the_current_epoch() {
        let mut st = with_peer(5, 3, 5);
        assert!(!st.bump_epoch_without_consensus());
        assert_eq!((st.me().config_epoch, st.current_epoch), (5, 5));

        let mut st = with_peer(5, 3, 7);
        assert!(st.bump_epoch_without_consensus());
        assert_eq!((st.me().config_epoch, st.current_epoch), (8, 8));

        let mut st = with_peer(2, 4, 4);
        assert!(st.bump_epoch_without_consensus());
        assert_eq!((st.me().config_epoch, st.current_epoch), (5, 5));

        // Epoch 0 is never kept, even alone at the top.
        let mut st = with_peer(0, 0, 0);
        assert!(st.bump_epoch_without_consensus());
        assert_eq!((st.me().config_epoch, st.current_epoch), (1, 1));
    }

    /// Redis 7.0.15's owner-not-claiming rule (redis/redis#12344): an owner whose own claim
    /// leaves a slot out keeps it, but the next node to claim it takes it even with an older
    /// epoch; setting the owner again clears the mark (redis/redis#12564), so a slot this
    /// node took back is not lost to a late claim from the node it once gave it to.
    #[test]
    fn a_slot_its_owner_stopped_claiming_goes_to_the_next_claimant() {
        let (me, b, c) = ("a".repeat(40), "b".repeat(40), "c".repeat(40));
        let mut st = with_peer(1, 5, 6);
        let mut peer = BusNode::new(c.clone(), flag::MASTER, 0);
        peer.config_epoch = 3;
        st.nodes.insert(c.clone(), peer);
        st.set_owner(100, Some(&b));
        st.set_owner(101, Some(&b));
        // B's claim leaves 100 out: B keeps it, marked.
        let mut claim = Bitmap::default();
        claim.set(101, true);
        st.update_slots_with(&b, 5, &claim);
        assert_eq!(st.owners[100].as_deref(), Some(b.as_str()));
        assert!(st.slot_unclaimed(100) && !st.slot_unclaimed(101));
        // C, older than B, takes 100 but not 101.
        let mut claim = Bitmap::default();
        claim.set(100, true);
        claim.set(101, true);
        st.update_slots_with(&c, 3, &claim);
        assert_eq!(st.owners[100].as_deref(), Some(c.as_str()));
        assert_eq!(st.owners[101].as_deref(), Some(b.as_str()));
        assert!(!st.slot_unclaimed(100));

        // B stops claiming 101 as well, and SETSLOT NODE gives it to this node, now at the
        // top epoch: the mark goes, so a late, older claim from B does not take it back.
        st.update_slots_with(&b, 5, &Bitmap::default());
        assert!(st.slot_unclaimed(101));
        st.set_owner(101, Some(&me));
        st.me_mut().config_epoch = 7;
        assert!(!st.slot_unclaimed(101));
        let mut claim = Bitmap::default();
        claim.set(101, true);
        st.update_slots_with(&b, 5, &claim);
        assert_eq!(st.owners[101].as_deref(), Some(me.as_str()));
    }
}
