"""The fault harness (scripts/faults.py), short: sluice with the append-only file and
`appendfsync always`, killed with SIGKILL under a limiter workload (INCR counters, the W1
sliding window, CL.THROTTLE) and restarted, loses no acknowledged operation and counts none
twice; the same harness with the AOF off loses what was acknowledged, which shows the checker
sees a loss when there is one. The long runs (20+ crashes, redis-server side by side) are
by hand: see docs/persistence.md, "Durability"."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import faults  # noqa: E402

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
