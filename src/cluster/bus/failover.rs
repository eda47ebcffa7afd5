//! Automatic and manual failover, as Redis 7.0 runs it over the bus:
//!
//! - a replica whose master is FAIL (or asked by CLUSTER FAILOVER FORCE) waits 500 ms plus
//!   up to 500 ms at random plus one second per rank, bumps the current epoch and broadcasts
//!   FAILOVER_AUTH_REQUEST (Redis's `clusterHandleSlaveFailover`);
//! - a master with slots grants one vote per epoch (FAILOVER_AUTH_ACK) when the replica's
//!   master is FAIL (or the request forces it), it has not voted for a replica of that
//!   master within twice the node timeout, and no slot the replica claims has an owner with a
//!   newer config epoch (`clusterSendFailoverAuthIfNeeded`);
//! - with votes from a majority of the masters with slots before the election times out, the
//!   replica becomes a master, takes its old master's slots with the election's epoch as its
//!   config epoch, and tells everyone with a PONG (`clusterFailoverReplaceYourMaster`). The
//!   others follow the newer epoch; the old master, when back, finds its slots taken and
//!   becomes a replica of the winner.
//!
//! CLUSTER FAILOVER TAKEOVER skips the election: the replica bumps its epoch and takes over.
//! CLUSTER FAILOVER FORCE starts the election at once, with the master up. Plain CLUSTER
//! FAILOVER is Redis's coordinated manual failover: the replica sends MFSTART to its master,
//! which holds its clients' writes and pings the replica (every cron turn) with the PAUSED
//! flag and its replication offset; once the replica has processed the stream up to that
//! offset it runs the election (votes forced, as FORCE's), so no acknowledged write is lost.
//! Either side gives up after five seconds (`CLUSTER_MF_TIMEOUT`), and the master's writes
//! resume then, or as soon as it follows the winner.
//!
//! The rank orders the master's replicas by replication offset, as Redis's: the one that
//! has processed most of the stream asks first, a second earlier per replica ahead of it.
//!
//! A replica whose data is too old does not stand (`cluster-replica-validity-factor`, as
//! Redis's): its data age, how long its replication link has been without news from the
//! master less the node timeout, must not exceed `node-timeout * factor +
//! repl-ping-replica-period` seconds; 0 turns the check off, and a manual failover skips it.
//! It says so in the log once the master has been failing for the node timeout plus five
//! seconds, then every five minutes (Redis's `clusterLogCantFailover`).

use rand::RngExt;

use super::super::slot::SLOTS;
use super::msg::{Body, Header, Message, flag, kind, mflag};
use super::state::{LinkId, State};

/// A replica's election (Redis's `failover_auth_*` and manual-failover fields).
#[derive(Debug, Default, Clone)]
pub struct Election {
    /// When the election starts (or started).
    pub auth_time: u64,
    /// Votes received.
    pub auth_count: usize,
    /// The request was broadcast.
    pub auth_sent: bool,
    /// This replica's rank among its master's (0 goes first).
    pub auth_rank: u64,
    /// The epoch the election runs in.
    pub auth_epoch: u64,
    /// A manual failover (`CLUSTER FAILOVER [FORCE]`) runs until then: on a replica, its
    /// own; on a master, the one a replica asked for with MFSTART (0: none).
    pub mf_end: u64,
    /// The replica may start the manual failover's election (at once with FORCE; once it
    /// has caught up with the paused master without).
    pub mf_can_start: bool,
    /// The paused master's replication offset, from its PAUSED pings (replica side).
    pub mf_master_offset: Option<u64>,
    /// The replica a paused master is failing over to (master side).
    pub mf_replica: Option<String>,
}

/// Why a replica whose master failed does not stand for election, for its log line
/// (Redis's `cant_failover_reason`, for the data-age reason sluice logs).
#[derive(Debug, Default, Clone)]
pub struct CantFailover {
    /// The last reason was the data age.
    pub data_age: bool,
    /// When the reason was last logged (Unix ms).
    pub logged_at: Option<u64>,
}

/// How often the same reason not to fail over is logged again (Redis's
/// `CLUSTER_CANT_FAILOVER_RELOG_PERIOD`).
const CANT_FAILOVER_RELOG_MS: u64 = 300_000;

/// How long a manual failover may take (Redis's `CLUSTER_MF_TIMEOUT`).
pub(crate) const MF_TIMEOUT_MS: u64 = 5000;

/// What the server does when a manual failover holds (true) or releases (false) this
/// master's writes.
pub struct PauseWrites(pub Box<dyn Fn(bool) + Send + Sync>);

impl std::fmt::Debug for PauseWrites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PauseWrites")
    }
}

impl State {
    /// This replica's place in its master's election order (Redis's
    /// `clusterGetSlaveRank`): how many of the master's other replicas that may fail over
    /// have processed more of its stream (their offsets, from their messages' headers).
    /// Replicas level with each other share a rank; the random part of the delay parts them.
    fn rank(&self) -> u64 {
        let me = self.me();
        let Some(master) = &me.slaveof else { return 0 };
        self.nodes
            .values()
            .filter(|n| {
                n.slaveof.as_ref() == Some(master)
                    && !n.is(flag::MYSELF | flag::NOFAILOVER)
                    && n.repl_offset > me.repl_offset
            })
            .count() as u64
    }

    /// Ends a manual failover, whatever its outcome; a master lets its writes go again
    /// (Redis's `resetManualFailover`).
    pub fn reset_manual_failover(&mut self) {
        if self.election.mf_replica.take().is_some() {
            // Released by the next view, once installed: a write held by the pause must
            // meet the routing that follows the failover (-MOVED), not the one before it.
            self.resume_writes = true;
            self.view_changed = true;
        }
        self.election.mf_end = 0;
        self.election.mf_can_start = false;
        self.election.mf_master_offset = None;
    }

    /// Run every cron turn before the election: a manual failover that timed out ends
    /// (`manualFailoverCheckTimeout`), a paused master pings its replica, and a replica that
    /// has caught up with its paused master may start (`clusterHandleManualFailover`).
    pub fn manual_failover_cron(&mut self, now: u64) {
        let e = &self.election;
        if e.mf_end == 0 {
            return;
        }
        if e.mf_end < now {
            tracing::warn!("Manual failover timed out.");
            self.reset_manual_failover();
            return;
        }
        if let Some(r) = &e.mf_replica {
            if let Some(link) = self.nodes.get(r).and_then(|n| n.link) {
                self.send_ping(link, kind::PING, now);
            }
            return;
        }
        if !e.mf_can_start && e.mf_master_offset == Some(self.me().repl_offset) {
            tracing::warn!("All master replication stream processed, manual failover can start.");
            self.election.mf_can_start = true;
        }
    }

    /// CLUSTER FAILOVER without an option: ask the master to pause (MFSTART).
    pub fn start_manual_failover(&mut self, now: u64) {
        self.reset_manual_failover();
        self.election.mf_end = now + MF_TIMEOUT_MS;
        let Some(link) = self
            .me()
            .slaveof
            .as_ref()
            .and_then(|m| self.nodes.get(m))
            .and_then(|m| m.link)
        else {
            return;
        };
        let bytes = Message {
            kind: kind::MFSTART,
            header: self.header(self.me().repl_offset),
            body: Body::Empty,
        }
        .encode();
        self.send(link, kind::MFSTART, bytes);
        tracing::warn!("Manual failover user request accepted.");
    }

    /// A replica asks this master for a manual failover (MFSTART): hold the writes and
    /// tell the replica the offset to reach.
    pub fn on_mfstart(&mut self, sender: &str, now: u64) {
        let ours = self
            .nodes
            .get(sender)
            .is_some_and(|n| n.slaveof.as_deref() == Some(self.myself.as_str()));
        if !ours || !self.me().is_master() {
            return;
        }
        self.reset_manual_failover();
        self.resume_writes = false;
        self.election.mf_end = now + MF_TIMEOUT_MS;
        self.election.mf_replica = Some(sender.to_string());
        if let Some(p) = &self.pause_writes {
            (p.0)(true);
        }
        // The offset this node has was read before the pause: the PAUSED pings start with the
        // next turn's (`Bus::lock_fresh`), read with the writes held.
        self.offset_after_pause = false;
        tracing::warn!("Manual failover requested by replica {sender}.");
    }

    /// A paused master's ping: the offset its replica must reach (the latest one, as writes
    /// already past the pause when it began may still have moved it).
    pub fn on_master_paused(&mut self, sender: &str, h: &Header) {
        let from_master = self.me().slaveof.as_deref() == Some(sender) && !self.me().is_master();
        if from_master && self.election.mf_end != 0 && h.mflags[0] & mflag::PAUSED != 0 {
            self.election.mf_master_offset = Some(h.offset);
        }
    }

    /// Run every cron turn (Redis's `clusterHandleSlaveFailover`).
    pub fn handle_replica_failover(&mut self, now: u64) {
        let timeout = self.settings.node_timeout;
        let needed = self.size() / 2 + 1;
        let manual = self.election.mf_end != 0 && self.election.mf_can_start;
        let auth_timeout = (timeout * 2).max(2000);
        let retry = auth_timeout * 2;
        let me = self.me();
        let Some(master) = me.slaveof.clone() else {
            return;
        };
        let Some(m) = self.nodes.get(&master) else {
            return;
        };
        if me.is_master()
            || (!m.is(flag::FAIL) && !manual)
            || (me.is(flag::NOFAILOVER) && !manual)
            || m.slots.is_empty()
        {
            self.cant_failover.data_age = false;
            return;
        }
        // The data age: how long the link has been without news, less the node timeout (it
        // is fine to have been cut off for as long as it took to flag the master FAIL).
        let mut data_age = self.master_data_age;
        if data_age > timeout {
            data_age -= timeout;
        }
        let factor = self.settings.replica_validity_factor;
        let allowed = (self.settings.repl_ping_period.saturating_mul(1000))
            .saturating_add(timeout.saturating_mul(factor));
        if factor != 0 && data_age > allowed && !manual {
            let fail_time = m.fail_time;
            self.log_data_age(fail_time, now);
            return;
        }
        let e = &mut self.election;
        if now.saturating_sub(e.auth_time) > retry {
            e.auth_time = now + 500 + rand::rng().random_range(0..500);
            e.auth_count = 0;
            e.auth_sent = false;
            e.auth_rank = 0;
            let rank = self.rank();
            let e = &mut self.election;
            e.auth_rank = rank;
            e.auth_time += rank * 1000;
            if manual {
                e.auth_time = now;
                e.auth_rank = 0;
            }
            return;
        }
        // Before the request goes out, a replica that others have overtaken waits a second
        // longer for each (Redis: "Slave rank updated", not for a manual failover).
        if !e.auth_sent && !manual {
            let rank = self.rank();
            let e = &mut self.election;
            if rank > e.auth_rank {
                e.auth_time += (rank - e.auth_rank) * 1000;
                e.auth_rank = rank;
            }
        }
        let e = &mut self.election;
        if now < e.auth_time || now - e.auth_time > auth_timeout {
            return;
        }
        if !e.auth_sent {
            self.current_epoch += 1;
            self.election.auth_epoch = self.current_epoch;
            self.election.auth_sent = true;
            let mut header = self.header(self.me().repl_offset);
            if manual {
                header.mflags[0] |= mflag::FORCEACK;
            }
            let bytes = Message {
                kind: kind::FAILOVER_AUTH_REQUEST,
                header,
                body: Body::Empty,
            }
            .encode();
            self.broadcast(kind::FAILOVER_AUTH_REQUEST, &bytes);
            self.dirty = true;
            tracing::info!(
                "cluster: starting a failover election for epoch {}",
                self.current_epoch
            );
            return;
        }
        if self.election.auth_count >= needed {
            tracing::info!("cluster: failover election won; this node is now a master");
            self.replace_my_master(now);
        }
    }

    /// Logs, as Redis's `clusterLogCantFailover` does, that this replica's data is too old
    /// to stand: not while its master failed less than the node timeout plus 5 s ago, and
    /// then once every five minutes.
    fn log_data_age(&mut self, master_fail_time: u64, now: u64) {
        let c = &mut self.cant_failover;
        if c.data_age
            && c.logged_at
                .is_some_and(|at| now.saturating_sub(at) < CANT_FAILOVER_RELOG_MS)
        {
            return;
        }
        c.data_age = true;
        let quiet_for = self.settings.node_timeout.saturating_add(5000);
        if now.saturating_sub(master_fail_time) < quiet_for {
            return;
        }
        c.logged_at = Some(now);
        tracing::warn!(
            "Currently unable to failover: Disconnected from master for longer than allowed. \
             Please check the 'cluster-replica-validity-factor' configuration option."
        );
    }

    /// Takes over the master's slots as a master (Redis's `clusterFailoverReplaceYourMaster`).
    pub fn replace_my_master(&mut self, now: u64) {
        let Some(old) = self.me().slaveof.clone() else {
            return;
        };
        let epoch = self.election.auth_epoch;
        let myself = self.myself.clone();
        let me = self.me_mut();
        me.flags = (me.flags & !flag::SLAVE) | flag::MASTER;
        me.slaveof = None;
        if me.config_epoch < epoch {
            me.config_epoch = epoch;
        }
        for s in 0..SLOTS as u16 {
            if self.owners[usize::from(s)].as_deref() == Some(old.as_str()) {
                self.set_owner(s, Some(&myself));
            }
        }
        self.election = Election::default();
        self.dirty = true;
        self.view_changed = true;
        self.update_ok();
        let bytes = self.ping_message(kind::PONG, now);
        self.broadcast(kind::PONG, &bytes);
    }

    /// CLUSTER FAILOVER TAKEOVER: a new epoch without asking anyone, then take over.
    pub fn takeover(&mut self, now: u64) {
        self.current_epoch += 1;
        self.election.auth_epoch = self.current_epoch;
        self.replace_my_master(now);
    }

    /// CLUSTER FAILOVER FORCE: an election now, even with the master up.
    pub fn force_failover(&mut self, now: u64) {
        self.reset_manual_failover();
        self.election = Election {
            mf_end: now + MF_TIMEOUT_MS,
            mf_can_start: true,
            ..Election::default()
        };
    }

    /// A replica asks for this master's vote.
    pub fn on_auth_request(&mut self, sender: &str, h: &Header, now: u64) {
        let force = h.mflags[0] & mflag::FORCEACK != 0;
        let me = self.me();
        if !me.is_master() || me.slots.is_empty() {
            return;
        }
        if h.current_epoch < self.current_epoch || self.last_vote_epoch == self.current_epoch {
            return;
        }
        let Some(node) = self.nodes.get(sender) else {
            return;
        };
        if node.is_master() {
            return;
        }
        let Some(master) = node.slaveof.clone() else {
            return;
        };
        let Some(m) = self.nodes.get(&master) else {
            return;
        };
        if !m.is(flag::FAIL) && !force {
            return;
        }
        if now.saturating_sub(m.voted_time) < self.settings.node_timeout * 2 {
            return;
        }
        let stale = (0..SLOTS as u16).any(|s| {
            h.myslots.get(s)
                && !self.owner_not_claiming.get(s)
                && self.owners[usize::from(s)]
                    .as_ref()
                    .and_then(|o| self.nodes.get(o))
                    .is_some_and(|o| o.config_epoch > h.config_epoch)
        });
        if stale {
            return;
        }
        self.last_vote_epoch = self.current_epoch;
        if let Some(m) = self.nodes.get_mut(&master) {
            m.voted_time = now;
        }
        self.dirty = true;
        let link: Option<LinkId> = self.nodes.get(sender).and_then(|n| n.link);
        if let Some(l) = link {
            let bytes = Message {
                kind: kind::FAILOVER_AUTH_ACK,
                header: self.header(self.me().repl_offset),
                body: Body::Empty,
            }
            .encode();
            self.send(l, kind::FAILOVER_AUTH_ACK, bytes);
        }
    }

    /// A master's vote.
    pub fn on_auth_ack(&mut self, sender: &str, h: &Header) {
        if self
            .nodes
            .get(sender)
            .is_some_and(|n| n.is_master() && !n.slots.is_empty())
            && h.current_epoch >= self.election.auth_epoch
        {
            self.election.auth_count += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::nodes_conf::parse;
    use super::super::state::Settings;
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    const C: &str = "cccccccccccccccccccccccccccccccccccccccc";
    const R: &str = "dddddddddddddddddddddddddddddddddddddddd";

    /// Three masters splitting the slots and a replica of A, as `me` sees them.
    fn cluster(me: &str) -> State {
        let line = |name: &str, port: u16, role: &str, master: &str, slots: &str| {
            let myself = if name == me { "myself," } else { "" };
            format!(
                "{name} 127.0.0.1:{port}@{} {myself}{role} {master} 0 0 1 connected {slots}\n",
                port + 10000
            )
        };
        let text = [
            line(A, 7001, "master", "-", "0-5460"),
            line(B, 7002, "master", "-", "5461-10922"),
            line(C, 7003, "master", "-", "10923-16383"),
            line(R, 7004, "slave", A, ""),
        ]
        .concat()
            + "vars currentEpoch 3 lastVoteEpoch 0\n";
        let settings = Settings::for_tests(7001, 1000);
        parse(&text, settings, 1).unwrap()
    }

    /// Redis's `clusterGetSlaveRank`: the replicas ahead of this one in the stream, among
    /// its master's that may fail over; a level one does not count.
    #[test]
    fn the_rank_counts_the_replicas_with_more_of_the_stream() {
        let mut st = cluster(R);
        let mut add = |name: &str, offset: u64, flags: u16| {
            let mut n = st.nodes[R].clone();
            n.name = name.to_string();
            n.flags = (n.flags & !flag::MYSELF) | flags;
            n.repl_offset = offset;
            st.nodes.insert(name.to_string(), n);
        };
        add("e".repeat(40).as_str(), 900, 0);
        add("f".repeat(40).as_str(), 500, 0);
        add("0".repeat(40).as_str(), 2000, flag::NOFAILOVER);
        st.me_mut().repl_offset = 500;
        assert_eq!(
            st.rank(),
            1,
            "one ahead; the level one and the no-failover one are not"
        );
        st.me_mut().repl_offset = 1000;
        assert_eq!(st.rank(), 0, "the name does not matter");
        st.me_mut().repl_offset = 100;
        assert_eq!(st.rank(), 2);
    }

    /// A replica overtaken while it waits for its election delays it a second per replica
    /// now ahead of it.
    #[test]
    fn an_overtaken_replica_waits_longer() {
        let mut st = cluster(R);
        st.nodes.get_mut(A).unwrap().flags |= flag::FAIL;
        st.me_mut().repl_offset = 500;
        st.handle_replica_failover(100_000);
        let (start, rank) = (st.election.auth_time, st.election.auth_rank);
        assert_eq!(rank, 0);
        let mut other = st.nodes[R].clone();
        other.name = "e".repeat(40);
        other.flags &= !flag::MYSELF;
        other.repl_offset = 600;
        st.nodes.insert(other.name.clone(), other);
        st.handle_replica_failover(100_001);
        assert_eq!(st.election.auth_rank, 1);
        assert_eq!(st.election.auth_time, start + 1000);
        assert!(!st.election.auth_sent);
    }

    #[test]
    fn a_replica_starts_once_it_has_the_paused_masters_offset() {
        let mut st = cluster(R);
        st.start_manual_failover(1000);
        assert_eq!(st.election.mf_end, 1000 + MF_TIMEOUT_MS);
        st.manual_failover_cron(1100);
        assert!(!st.election.mf_can_start, "no offset announced yet");
        // A message from the master without PAUSED says nothing; with it, the offset.
        let mut h = st.header(0);
        h.offset = 500;
        st.on_master_paused(A, &h);
        assert_eq!(st.election.mf_master_offset, None);
        h.mflags[0] = mflag::PAUSED;
        st.on_master_paused(B, &h);
        assert_eq!(st.election.mf_master_offset, None, "not my master");
        st.on_master_paused(A, &h);
        assert_eq!(st.election.mf_master_offset, Some(500));
        st.me_mut().repl_offset = 499;
        st.manual_failover_cron(1200);
        assert!(!st.election.mf_can_start);
        st.me_mut().repl_offset = 500;
        st.manual_failover_cron(1300);
        assert!(st.election.mf_can_start);
        // It times out like Redis's: everything reset.
        st.manual_failover_cron(1000 + MF_TIMEOUT_MS + 1);
        assert_eq!(st.election.mf_end, 0);
        assert!(!st.election.mf_can_start);
        assert_eq!(st.election.mf_master_offset, None);
    }

    #[test]
    fn a_master_holds_its_writes_until_the_next_view() {
        let mut st = cluster(A);
        let held = Arc::new(AtomicBool::new(false));
        let h = held.clone();
        st.pause_writes = Some(PauseWrites(Box::new(move |on| {
            h.store(on, Ordering::Relaxed)
        })));
        // Only its own replica may ask.
        st.on_mfstart(B, 1000);
        assert!(!held.load(Ordering::Relaxed));
        st.on_mfstart(R, 1000);
        assert!(held.load(Ordering::Relaxed));
        assert_eq!(st.election.mf_replica.as_deref(), Some(R));
        // The offset read before the pause is not announced as the paused one.
        assert_eq!(st.header(7).mflags[0] & mflag::PAUSED, 0);
        st.offset_after_pause = true;
        assert_eq!(st.header(7).mflags[0] & mflag::PAUSED, mflag::PAUSED);
        // Ending it (here: following the winner) leaves the release to the next view.
        st.view_changed = false;
        st.set_my_master(R);
        assert!(st.resume_writes && st.view_changed);
        assert_eq!(st.election.mf_end, 0);
    }

    #[test]
    fn a_node_cut_off_from_the_majority_declares_the_cluster_down() {
        let mut st = cluster(A);
        st.update_ok();
        assert!(st.ok);
        for n in [B, C] {
            st.nodes.get_mut(n).unwrap().flags |= flag::PFAIL;
        }
        st.update_ok();
        assert!(!st.ok, "one of three masters is a minority");
        // Back in the majority, a master waits the rejoin delay (the node timeout here).
        for n in [B, C] {
            st.nodes.get_mut(n).unwrap().flags &= !flag::PFAIL;
        }
        st.update_ok();
        assert!(!st.ok);
        st.among_minority_time -= 1000;
        st.update_ok();
        assert!(st.ok);
        // One suspected master of three leaves a majority.
        st.nodes.get_mut(B).unwrap().flags |= flag::PFAIL;
        st.update_ok();
        assert!(st.ok);
    }

    /// `cluster-replica-validity-factor`: a replica whose link has been without news for
    /// longer than the node timeout plus `node-timeout * factor + repl-ping-replica-period`
    /// does not schedule an election; 0 turns the check off, and a manual failover skips it.
    #[test]
    fn a_replica_with_old_data_does_not_stand() {
        let mut st = cluster(R);
        st.nodes.get_mut(A).unwrap().flags |= flag::FAIL;
        st.nodes.get_mut(A).unwrap().fail_time = 100_000;
        st.settings.replica_validity_factor = 2;
        st.settings.repl_ping_period = 1;
        // The node timeout (1000) + 2 * 1000 + 1 s: 4000 ms of age is still fine.
        st.master_data_age = 4000;
        st.handle_replica_failover(100_000);
        assert_ne!(st.election.auth_time, 0, "an election is scheduled");
        st.election = Election::default();
        st.master_data_age = 4001;
        st.handle_replica_failover(100_000);
        assert_eq!(st.election.auth_time, 0, "too old: no election");
        assert!(st.cant_failover.data_age);
        assert_eq!(
            st.cant_failover.logged_at, None,
            "not logged this soon after FAIL"
        );
        st.handle_replica_failover(106_001);
        assert_eq!(st.cant_failover.logged_at, Some(106_001));
        // Never connected: as old as can be.
        st.master_data_age = u64::MAX;
        st.handle_replica_failover(106_100);
        assert_eq!(st.election.auth_time, 0);
        // A manual failover skips the check.
        st.force_failover(106_200);
        st.handle_replica_failover(106_200);
        assert_eq!(st.election.auth_time, 106_200);
        // Factor 0: always eligible.
        st.election = Election::default();
        st.settings.replica_validity_factor = 0;
        st.handle_replica_failover(106_300);
        assert_ne!(st.election.auth_time, 0);
    }

    /// `cluster-require-full-coverage no`: a slot whose owner failed (or that has none)
    /// leaves the cluster ok; the majority rule still holds.
    #[test]
    fn without_full_coverage_a_failed_master_leaves_the_cluster_ok() {
        let mut st = cluster(A);
        st.among_minority_time = 0;
        st.nodes.get_mut(C).unwrap().flags |= flag::FAIL;
        st.update_ok();
        assert!(!st.ok, "full coverage required by default");
        st.settings.require_full_coverage = false;
        st.update_ok();
        assert!(st.ok);
        st.set_owner(0, None);
        st.update_ok();
        assert!(st.ok, "an unowned slot neither");
        for n in [B, C] {
            st.nodes.get_mut(n).unwrap().flags |= flag::PFAIL;
        }
        st.update_ok();
        assert!(!st.ok, "a minority is down whatever the coverage");
    }
}
