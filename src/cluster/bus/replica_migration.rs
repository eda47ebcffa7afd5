//! Replica migration, as Redis 7.0 runs it (`clusterHandleSlaveMigration` and its part of
//! `clusterCron`): a master that serves slots but has no working replica left (*orphaned*)
//! gets one from the master with the most working replicas, so a second failure there does
//! not leave its slots without a copy.
//!
//! - A master is a migration target only if it is flagged `MIGRATE_TO`: it has had a
//!   replica, or it won a failover (a replica promoted), or it got its first slot while some
//!   master had replicas (`clusterNodeSetSlotBit`). The flag goes when its last replica
//!   leaves it (forgotten, moved to another master, promoted), not when a replica fails.
//! - Every cron turn, a replica counts the orphaned masters, the most working (not `fail`)
//!   replicas any master has, and its own master's. It considers moving only if some master
//!   is orphaned, its own master has that maximum, the maximum is at least two, and
//!   `cluster-allow-replica-migration` is on.
//! - It moves only if the cluster is ok, its master keeps more than `cluster-migration-barrier`
//!   working replicas without it (failing or suspected ones not counted), it is the replica
//!   with the smallest name among the masters with the most replicas, and the target has
//!   been orphaned for `MIGRATION_DELAY_MS` (so the natural replicas of a master that just
//!   failed over have time to announce their new master). It then replicates the target,
//!   exactly as after `CLUSTER REPLICATE`.
//!
//! `cluster-allow-replica-migration no` also keeps a master that loses its last slot from
//! following the node that took it, unless that node took all of them at once (a failover);
//! see `State::update_slots_with` and CLUSTER SETSLOT NODE.

use std::collections::HashMap;

use super::msg::flag;
use super::state::State;

/// How long a master must stay orphaned before a replica migrates to it (Redis's
/// `CLUSTER_SLAVE_MIGRATION_DELAY`).
pub(crate) const MIGRATION_DELAY_MS: u64 = 5000;

/// A master's replicas: all of them, and those not flagged `fail`.
#[derive(Debug, Default, Clone, Copy)]
struct Replicas {
    all: usize,
    working: usize,
}

impl State {
    /// Every master's replicas, counted in one pass over the nodes.
    fn replica_counts(&self) -> HashMap<&str, Replicas> {
        let mut counts: HashMap<&str, Replicas> = HashMap::new();
        for n in self.nodes.values() {
            if n.is(flag::SLAVE)
                && let Some(m) = n.slaveof.as_deref()
            {
                let c = counts.entry(m).or_default();
                c.all += 1;
                c.working += usize::from(!n.is(flag::FAIL));
            }
        }
        counts
    }

    /// Keeps the masters' `MIGRATE_TO` flags as Redis's `clusterNodeAddSlave`,
    /// `clusterNodeRemoveSlave` and `clusterNodeSetSlotBit` do: set when a master gains a
    /// replica, or its first slot while any master has replicas; cleared when its last
    /// replica leaves it. Run every cron turn and whenever roles change.
    pub fn track_migrate_to(&mut self) {
        let counts: Vec<(String, usize)> = {
            let by_master = self.replica_counts();
            self.nodes
                .values()
                .filter(|n| n.is_master())
                .map(|n| {
                    let all = by_master.get(n.name.as_str()).map_or(0, |c| c.all);
                    (n.name.clone(), all)
                })
                .collect()
        };
        let any_replicas = counts.iter().any(|(_, c)| *c > 0);
        for (name, replicas) in counts {
            let Some(n) = self.nodes.get_mut(&name) else {
                continue;
            };
            let has_slots = !n.slots.is_empty();
            if replicas > 0 {
                n.flags |= flag::MIGRATE_TO;
            } else if n.replicas_seen > 0 {
                n.flags &= !flag::MIGRATE_TO;
            }
            if has_slots && !n.had_slots && any_replicas {
                n.flags |= flag::MIGRATE_TO;
            }
            n.replicas_seen = replicas;
            n.had_slots = has_slots;
        }
    }

    /// The replica-migration step of the cron (run on every node; acts only on a replica).
    pub fn replica_migration_cron(&mut self, now: u64) {
        self.track_migrate_to();
        if !self.me().is(flag::SLAVE) {
            return;
        }
        let my_master = self.me().slaveof.clone();
        let (orphaned, max_replicas, mine) = {
            let counts = self.replica_counts();
            let (mut orphaned, mut max_replicas, mut mine) = (0usize, 0usize, 0usize);
            for n in self.nodes.values() {
                if n.is(flag::MYSELF | flag::NOADDR | flag::HANDSHAKE)
                    || !n.is_master()
                    || n.is(flag::FAIL)
                {
                    continue;
                }
                let ok = counts.get(n.name.as_str()).map_or(0, |c| c.working);
                if ok == 0 && !n.slots.is_empty() && n.is(flag::MIGRATE_TO) {
                    orphaned += 1;
                }
                max_replicas = max_replicas.max(ok);
                if my_master.as_deref() == Some(n.name.as_str()) {
                    mine = ok;
                }
            }
            (orphaned, max_replicas, mine)
        };
        if orphaned > 0
            && max_replicas >= 2
            && mine == max_replicas
            && self.settings.allow_replica_migration
        {
            self.handle_replica_migration(max_replicas, now);
        }
    }

    /// Redis's `clusterHandleSlaveMigration`: moves this replica to an orphaned master if it
    /// is the one to go and the target has been orphaned long enough.
    fn handle_replica_migration(&mut self, max_replicas: usize, now: u64) {
        if !self.ok {
            return;
        }
        let Some(my_master) = self.me().slaveof.clone() else {
            return;
        };
        // My master keeps more than the barrier's count of working replicas without me.
        let keeps = self
            .nodes
            .values()
            .filter(|n| {
                n.is(flag::SLAVE)
                    && n.slaveof.as_deref() == Some(my_master.as_str())
                    && !n.is(flag::FAIL | flag::PFAIL)
            })
            .count();
        if keeps as u64 <= self.settings.migration_barrier {
            return;
        }
        let (target, candidate, orphans) = {
            let counts = self.replica_counts();
            let mut candidate = self.myself.as_str();
            let mut target: Option<&str> = None;
            let mut orphans: Vec<(String, bool)> = Vec::new();
            for n in self.nodes.values() {
                let ok = if n.is_master() {
                    counts.get(n.name.as_str()).map_or(0, |c| c.working)
                } else {
                    0
                };
                let orphaned =
                    n.is_master() && !n.is(flag::FAIL) && n.is(flag::MIGRATE_TO) && ok == 0;
                if orphaned && target.is_none() && !n.slots.is_empty() {
                    target = Some(n.name.as_str());
                }
                orphans.push((n.name.clone(), orphaned));
                if ok == max_replicas {
                    // Among the replicas of the masters with the most working replicas
                    // (all of their replicas, as Redis walks `node->slaves`), the smallest
                    // name goes.
                    for r in self.nodes.values() {
                        if r.is(flag::SLAVE)
                            && r.slaveof.as_deref() == Some(n.name.as_str())
                            && r.name.as_str() < candidate
                        {
                            candidate = r.name.as_str();
                        }
                    }
                }
            }
            (
                target.map(str::to_string),
                candidate == self.myself,
                orphans,
            )
        };
        for (name, orphaned) in orphans {
            if let Some(n) = self.nodes.get_mut(&name) {
                if !orphaned {
                    n.orphaned_time = 0;
                } else if n.orphaned_time == 0 {
                    n.orphaned_time = now;
                }
            }
        }
        let Some(target) = target else {
            return;
        };
        let since = self.nodes.get(&target).map_or(now, |n| n.orphaned_time);
        if candidate && now.saturating_sub(since) > MIGRATION_DELAY_MS {
            tracing::warn!("Migrating to orphaned master {target}");
            self.set_my_master(&target);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::msg::flag;
    use super::super::state::{BusNode, Settings, State};
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    const R1: &str = "1111111111111111111111111111111111111111";
    const R2: &str = "2222222222222222222222222222222222222222";
    const R3: &str = "3333333333333333333333333333333333333333";

    fn settings() -> Settings {
        Settings {
            announce_ip: "127.0.0.1".into(),
            ..Settings::for_tests(7000, 1000)
        }
    }

    /// Masters A (slots 0-8191, replicas R1 and R2) and B (8192-16383, replica R3), as
    /// `me` sees them.
    fn cluster(me: &str) -> State {
        let mut st = State::new(me.to_string(), settings(), 0);
        for name in [A, B, R1, R2, R3] {
            if name != me {
                st.nodes
                    .insert(name.to_string(), BusNode::new(name.to_string(), 0, 0));
            }
        }
        for (name, master) in [
            (A, None),
            (B, None),
            (R1, Some(A)),
            (R2, Some(A)),
            (R3, Some(B)),
        ] {
            let n = st.nodes.get_mut(name).unwrap();
            n.flags &= flag::MYSELF;
            n.flags |= if master.is_some() {
                flag::SLAVE
            } else {
                flag::MASTER
            };
            n.slaveof = master.map(str::to_string);
        }
        for s in 0..8192 {
            st.set_owner(s, Some(A));
        }
        for s in 8192..16384 {
            st.set_owner(s, Some(B));
        }
        st.ok = true;
        st.track_migrate_to();
        st
    }

    #[test]
    fn the_smallest_replica_of_the_biggest_master_moves_after_the_delay() {
        let mut st = cluster(R1);
        assert!(st.nodes[B].is(flag::MIGRATE_TO));
        st.nodes.get_mut(R3).unwrap().flags |= flag::FAIL;
        st.replica_migration_cron(10_000);
        assert_eq!(st.me().slaveof.as_deref(), Some(A), "not before the delay");
        st.replica_migration_cron(10_000 + MIGRATION_DELAY_MS);
        assert_eq!(st.me().slaveof.as_deref(), Some(A), "not at the delay");
        st.replica_migration_cron(10_001 + MIGRATION_DELAY_MS);
        assert_eq!(st.me().slaveof.as_deref(), Some(B));
        // The failed replica is still B's: B keeps its MIGRATE_TO flag.
        assert!(st.nodes[B].is(flag::MIGRATE_TO));
    }

    #[test]
    fn only_the_candidate_moves_and_only_above_the_barrier() {
        // R2 is not the smallest replica of A: it stays.
        let mut st = cluster(R2);
        st.nodes.get_mut(R3).unwrap().flags |= flag::FAIL;
        st.replica_migration_cron(1);
        st.replica_migration_cron(2 + MIGRATION_DELAY_MS);
        assert_eq!(st.me().slaveof.as_deref(), Some(A));
        // A barrier of 2: A would be left with one replica.
        let mut st = cluster(R1);
        st.settings.migration_barrier = 2;
        st.nodes.get_mut(R3).unwrap().flags |= flag::FAIL;
        st.replica_migration_cron(1);
        st.replica_migration_cron(2 + MIGRATION_DELAY_MS);
        assert_eq!(st.me().slaveof.as_deref(), Some(A));
        // A suspected sibling does not count toward the barrier either.
        let mut st = cluster(R1);
        st.nodes.get_mut(R2).unwrap().flags |= flag::PFAIL;
        st.nodes.get_mut(R3).unwrap().flags |= flag::FAIL;
        st.replica_migration_cron(1);
        st.replica_migration_cron(2 + MIGRATION_DELAY_MS);
        assert_eq!(st.me().slaveof.as_deref(), Some(A));
        // Switched off.
        let mut st = cluster(R1);
        st.settings.allow_replica_migration = false;
        st.nodes.get_mut(R3).unwrap().flags |= flag::FAIL;
        st.replica_migration_cron(1);
        st.replica_migration_cron(2 + MIGRATION_DELAY_MS);
        assert_eq!(st.me().slaveof.as_deref(), Some(A));
    }

    #[test]
    fn an_emptied_master_follows_the_taker_unless_migration_is_off() {
        let claim = |st: &mut State, sender: &str, epoch: u64, range: std::ops::Range<u16>| {
            let mut slots = super::super::msg::Bitmap::default();
            for s in range {
                slots.set(s, true);
            }
            st.update_slots_with(sender, epoch, &slots);
        };
        // B takes all of A's slots and keeps its own (a reshard): A follows B only while
        // replica migration is allowed.
        for allowed in [true, false] {
            let mut st = cluster(A);
            st.settings.allow_replica_migration = allowed;
            claim(&mut st, B, 10, 0..16384);
            assert!(st.me().slots.is_empty());
            let follows = st.me().slaveof.as_deref() == Some(B);
            assert_eq!(follows, allowed, "allowed: {allowed}");
        }
        // R takes exactly A's slots (a failover): A follows it either way.
        let mut st = cluster(A);
        st.settings.allow_replica_migration = false;
        st.nodes.get_mut(R1).unwrap().flags = flag::MASTER;
        st.nodes.get_mut(R1).unwrap().slaveof = None;
        claim(&mut st, R1, 10, 0..8192);
        assert_eq!(st.me().slaveof.as_deref(), Some(R1));
    }

    #[test]
    fn a_master_that_never_had_replicas_is_no_target() {
        let mut st = cluster(R1);
        // R3 leaves B for A (B's last replica gone): B is no longer flagged.
        st.nodes.get_mut(R3).unwrap().slaveof = Some(A.to_string());
        st.track_migrate_to();
        assert!(!st.nodes[B].is(flag::MIGRATE_TO));
        st.replica_migration_cron(1);
        st.replica_migration_cron(2 + MIGRATION_DELAY_MS);
        assert_eq!(st.me().slaveof.as_deref(), Some(A));
    }
}
