"""The fault harness (scripts/faults.py), short: sluice with the append-only file and
`appendfsync always`, killed with SIGKILL under a limiter workload (INCR counters, the W1
sliding window, CL.THROTTLE) and restarted, loses no acknowledged operation and counts none
twice; the same harness with the AOF off loses what was acknowledged, which shows the checker
sees a loss when there is one. Then the Sentinel harness (scripts/faults_sentinel.py) with
one network partition: without WAIT, with WAIT 1, and with min-replicas-to-write 1 (whose
cut-off master stops acknowledging before the heal; that one with the clients paced, --rate). The long runs (20+ crashes, several faults
per setting, redis-server side by side) are by hand: see docs/persistence.md, "Durability"."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import faults  # noqa: E402
import faults_sentinel  # noqa: E402

from conftest import SLUICE_BIN  # noqa: E402


def test_always_loses_nothing_acknowledged_over_kill_9():
    t = faults.run(str(SLUICE_BIN), "always", crashes=4, clients=3, seed=7, quiet=True)
    assert t["crashes"] == 4
    assert t["acked"] > 0
    assert (t["lost"], t["twice"]) == (0, 0), t


def test_the_checker_sees_losses_without_the_aof():
    t = faults.run(str(SLUICE_BIN), "always", crashes=2, clients=2, seed=3, quiet=True,
                   appendonly="no")
    assert t["acked"] > 0
    assert t["lost"] > 0, t
    assert t["twice"] == 0, t


# The Sentinel harness with a network partition (scripts/faults_sentinel.py --fault
# partition): the master is cut off from the sentinels and its replicas while its clients
# still reach it; the sentinels promote a replica; once healed, the old master becomes a
# replica and drops what it acknowledged alone. One fault each, about 20 s.

def test_a_partitioned_master_loses_what_it_acknowledged_alone():
    t = faults_sentinel.run(str(SLUICE_BIN), "plain", faults=1, clients=3,
                            fault_kind="partition", seed=5, quiet=True)
    assert t["faults"] == 1, t
    assert t["acked"] > 0, t
    # The checker sees what a partition costs without WAIT: writes the old master
    # acknowledged while cut off are gone after it rejoins.
    assert t["lost"] > 0, t
    assert t["twice"] == 0, t


def test_wait_1_loses_nothing_across_a_partition():
    t = faults_sentinel.run(str(SLUICE_BIN), "wait1", faults=1, clients=3,
                            fault_kind="partition", seed=5, quiet=True)
    assert t["faults"] == 1, t
    assert t["acked"] > 0, t
    # The partition was felt (WAIT saw no replica while it lasted) and nothing that WAIT
    # confirmed was lost.
    assert t["refused"] > 0, t
    assert (t["lost"], t["twice"]) == (0, 0), t


def test_min_replicas_stops_a_cut_off_master_before_the_heal():
    # Paced (--rate): each client sends at most 100 requests a second, the offered load the
    # long runs give both servers alike.
    t = faults_sentinel.run(str(SLUICE_BIN), "minrep1", faults=1, clients=3,
                            fault_kind="partition", seed=5, quiet=True, max_lag=1, rate=100)
    assert t["faults"] == 1, t
    assert 0 < t["sent_per_s"] <= 3 * 100 * 1.05, t
    w = t["windows"][0]
    # min-replicas-to-write 1 with max-lag 1: the cut-off master acknowledges until its
    # replicas' last acknowledgement is over a second old (whole seconds, counted once a
    # second, as Redis), then answers -NOREPLICAS until the heal (after it, it may count its
    # replicas good again for a moment before the sentinels demote it, as Redis may). What
    # it acknowledged is lost (the harness's timeline, by the port that answered, counts it).
    assert w["refuse_s"] is not None and w["refuse_s"] < w["heal_s"], t
    assert w["before_heal_s"] < w["refuse_s"] + 0.5, t
    assert t["lost"] > 0 and t["acked_cut_off"] > 0, t
    assert t["twice"] == 0, t
