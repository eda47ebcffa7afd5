#!/usr/bin/env python3
"""Interleaved runs of the pytest suite of this directory with chosen python/ packages and
binaries, for A/B comparisons of the plugin (scripts/bench.py's step runs the same command).

    benchmarks/testdouble/ab.py REPS LABEL:BACKEND:SLUICE_BIN:PYTHONPATH ...

BACKEND is fakeredis, sluice or sluice_fresh; PYTHONPATH the python/ directory whose
sluice_server to use. RT=1 runs pytest (and the servers it starts) at SCHED_FIFO 10, which
needs root: on a loaded machine the two processes then sleep and wake as on an idle one.
Prints, per run and as medians: wall, CPU and voluntary/involuntary context switches of
pytest and the servers it waited for (getrusage), and the suite's fixtures and test bodies
per test (its TD_STATS). Uses target/bench-testdouble/venv (made by scripts/bench.py)."""
import json
import os
import resource
import statistics
import subprocess
import sys
import time

TD = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(TD))
PY = os.path.join(ROOT, "target", "bench-testdouble", "venv", "bin", "python")

reps = int(sys.argv[1])
cases = [a.split(":") for a in sys.argv[2:]]
res = {c[0]: [] for c in cases}
stats = os.path.join(ROOT, "target", "bench-testdouble", "ab-stats-%d.json" % os.getpid())
for rep in range(reps):
    for label, backend, binary, pypath in cases:
        env = dict(os.environ, TD_BACKEND=backend, TD_STATS=stats, SLUICE_BIN=os.path.abspath(binary),
                   PYTHONPATH=os.path.abspath(pypath))
        cmd = (["chrt", "-f", "10"] if os.environ.get("RT") else []) + [
            PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "sluice_server.pytest_plugin",
            "--rootdir", TD, os.path.join(TD, "test_limiter.py")]
        load = os.getloadavg()[0]
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=os.path.join(ROOT, "target", "bench-testdouble"), env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if p.returncode:
            sys.exit(p.stdout[-2000:] + p.stderr[-2000:])
        with open(stats) as f:
            st = json.load(f)
        row = dict(wall=wall, cpu=(r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
                   vcs=r1.ru_nvcsw - r0.ru_nvcsw, ivcs=r1.ru_nivcsw - r0.ru_nivcsw,
                   fix=1000 * (st["setup"] + st["teardown"]) / st["tests"], call=1000 * st["call"] / st["tests"], load=load)
        res[label].append(row)
        print("%-12s wall %.2f cpu %.2f vcs %6d ivcs %5d fixtures %.2f ms bodies %.2f ms load %.2f"
              % (label, wall, row["cpu"], row["vcs"], row["ivcs"], row["fix"], row["call"], load), flush=True)
os.remove(stats)
print("medians:")
for label, rows in res.items():
    m = lambda k: statistics.median(r[k] for r in rows)  # noqa: E731
    print("%-12s wall %.2f cpu %.2f vcs %6d ivcs %5d fixtures %.2f ms bodies %.2f ms load %.2f"
          % (label, m("wall"), m("cpu"), m("vcs"), m("ivcs"), m("fix"), m("call"), m("load")))
