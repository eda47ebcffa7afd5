#!/usr/bin/env python3
"""Interleaved runs of the Node suite of this directory (limiter.test.mjs under `node --test`,
as scripts/bench.py runs it) with chosen npm helpers and binaries, for A/B comparisons.

    benchmarks/testdouble/ab_node.py REPS LABEL:BACKEND:SLUICE_BIN:HELPER[:VAR=VALUE...] ...

BACKEND is ioredis-mock, sluice or sluice-fresh; HELPER the npm helper's index.mjs (or the
directory holding it); VAR=VALUE extra environment for that case. RT=1 runs node (and the
servers it starts) at SCHED_FIFO 10, which needs root: on a loaded machine the processes then
sleep and wake as on an idle one. Prints, per run and as medians: the wall time; the test
process's CPU and voluntary context switches (its sleeps) and the shared server's (from the
suite's TD_STATS); the hooks and test bodies per test. Uses target/bench-testdouble/node
(made by scripts/bench.py)."""
import json
import os
import statistics
import subprocess
import sys
import time

TD = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(TD))
NODE_DIR = os.path.join(ROOT, "target", "bench-testdouble", "node")

reps = int(sys.argv[1])
cases = [a.split(":") for a in sys.argv[2:]]
res = {c[0]: [] for c in cases}
stats = os.path.join(ROOT, "target", "bench-testdouble", "ab-node-stats-%d.json" % os.getpid())
# The suite file as this checkout has it (scripts/bench.py copies it the same way).
with open(os.path.join(TD, "limiter.test.mjs")) as f:
    suite = f.read()
with open(os.path.join(NODE_DIR, "limiter.test.mjs"), "w") as f:
    f.write(suite)
FMT = ("%-10s wall %.2f s | node cpu %4.0f ms vcs %5d | server cpu %3.0f ms vcs %5d | "
       "hooks %.3f ms bodies %.3f ms per test | load %.2f")


def show(label, r):
    print(FMT % (label, r["wall"], r["ncpu"], r["nvcs"], r["scpu"], r["svcs"], r["hooks"], r["bodies"], r["load"]),
          flush=True)


for rep in range(reps):
    for label, backend, binary, helper, *extra in cases:
        if not helper.endswith(".mjs"):
            helper = os.path.join(helper, "index.mjs")
        env = dict(os.environ, TD_BACKEND=backend, TD_STATS=stats, SLUICE_BIN=os.path.abspath(binary),
                   SLUICE_HELPER=os.path.abspath(helper))
        env.update(kv.split("=", 1) for kv in extra)
        cmd = (["chrt", "-f", "10"] if os.environ.get("RT") else []) + ["node", "--test", "limiter.test.mjs"]
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=NODE_DIR, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if p.returncode:
            sys.exit(p.stdout[-2000:] + p.stderr[-2000:])
        with open(stats) as f:
            st = json.load(f)
        row = dict(wall=wall, ncpu=st["nodeCpuMs"], nvcs=st["nodeVcs"], scpu=st.get("serverCpuMs", 0),
                   svcs=st.get("serverVcs", 0), hooks=st["hooks"] / st["count"], bodies=st["tests"] / st["count"],
                   load=load)
        res[label].append(row)
        show(label, row)
os.remove(stats)
print("medians:")
for label, rows in res.items():
    show(label, {k: statistics.median(r[k] for r in rows) for k in rows[0]})
