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
//!
//! Differences from Redis: the rank orders the master's replicas by name, not by replication
//! offset (the bus does not see the offset), and the replica's data age is not checked
//! (`cluster-replica-validity-factor`): a replica that lost its master long ago may still win.

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
    /// A forced manual failover (CLUSTER FAILOVER FORCE) runs until then.
    pub mf_end: u64,
}

impl State {
    fn rank(&self) -> u64 {
        let me = self.me();
        let Some(master) = &me.slaveof else { return 0 };
        self.nodes
            .values()
            .filter(|n| {
                n.slaveof.as_ref() == Some(master)
                    && !n.is(flag::MYSELF | flag::NOFAILOVER)
                    && n.name < me.name
            })
            .count() as u64
    }

    /// Run every cron turn (Redis's `clusterHandleSlaveFailover`).
    pub fn handle_replica_failover(&mut self, now: u64) {
        let timeout = self.settings.node_timeout;
        let needed = self.size() / 2 + 1;
        let manual = self.election.mf_end != 0;
        if manual && now > self.election.mf_end {
            self.election.mf_end = 0;
            return;
        }
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
        if now < e.auth_time || now - e.auth_time > auth_timeout {
            return;
        }
        if !e.auth_sent {
            self.current_epoch += 1;
            self.election.auth_epoch = self.current_epoch;
            self.election.auth_sent = true;
            let mut header = self.header(0);
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
        self.election = Election {
            mf_end: now + 5000,
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
                header: self.header(0),
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
