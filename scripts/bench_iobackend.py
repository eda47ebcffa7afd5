#!/usr/bin/env python3
"""sluice on epoll vs sluice on io_uring vs redis-server, same run, same machine.

Runs loadgen's `getset`, `fixed` and `sliding` workloads at (connections, pipeline) = (50,1)
and (50,16) against three servers started once: sluice --io-backend epoll, sluice
--io-backend uring (both with the same --threads), and redis-server. Each cell is measured
`--reps` times, the servers' order rotating from one repetition to the next so that a
change in the machine's load hits all three alike. Prints each run, then a Markdown table
of medians with the spread (min-max) of decisions/s, and writes every run to a JSON file.

Reuses scripts/bench.py's servers, CPU accounting and loadgen runner (release binaries:
`cargo build --release --bin sluice && cargo build --release -p sluice-loadgen --bin
loadgen`). Loopback only; every run is bounded by loadgen's --duration.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

WORKLOADS = ["getset", "fixed", "sliding"]
SETTINGS = [(50, 1), (50, 16)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sluice", default=os.path.join(bench.ROOT, "target/release/sluice"))
    ap.add_argument("--loadgen", default=os.path.join(bench.ROOT, "target/release/loadgen"))
    ap.add_argument("--ports", default="7391,7392,7393", help="epoll, uring and redis ports")
    ap.add_argument("--threads", type=int, default=2, help="sluice --threads")
    ap.add_argument("--duration", type=float, default=4.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--json-out", default=os.path.join(bench.ROOT, "benchmarks", "iobackend-run.json"))
    args = ap.parse_args()
    pe, pu, pr = (int(p) for p in args.ports.split(","))

    def sluice(kind, port, backend):
        return bench.Server(kind, [args.sluice, "--port", str(port), "--threads", str(args.threads), "--io-backend", backend, "--save", "", "--loglevel", "warning"], port)

    servers = [
        sluice("epoll", pe, "epoll"),
        sluice("uring", pu, "uring"),
        bench.Server("redis", ["redis-server", "--port", str(pr), "--bind", bench.HOST, "--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"], pr),
    ]
    runs = {}
    load_before = bench.load_avg()

    def log(msg):
        print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)

    try:
        for s in servers:
            s.start()
        for c, p in SETTINGS:
            for w in WORKLOADS:
                for rep in range(args.reps):
                    k = rep % len(servers)
                    for srv in servers[k:] + servers[:k]:
                        d = bench.measured_run(args, srv, w, c, p)
                        runs.setdefault("%s|%d|%d|%s" % (w, c, p, srv.kind), []).append(d)
                        log("%-8s c=%d P=%-2d %-6s rep %d: %.0f/s p99 %sus %.2f cores errors %s"
                            % (w, c, p, srv.kind, rep, d.get("decisions_per_sec", 0), d.get("p99_us"), d.get("server_cores", 0), d.get("errors")))
    finally:
        for s in servers:
            s.stop()
    load_after = bench.load_avg()
    with open(args.json_out, "w") as f:
        json.dump({"args": vars(args), "load": [load_before, load_after], "runs": runs}, f, indent=1)

    print("\n1-minute load average %.2f before, %.2f after; %d reps of %.0f s, --threads %d\n"
          % (load_before, load_after, args.reps, args.duration, args.threads))
    print("| workload | (c,P) | server | decisions/s median (min-max) | p99 µs median | decisions per server CPU-s |")
    print("|---|---|---|---|---|---|")
    for c, p in SETTINGS:
        for w in WORKLOADS:
            for srv in servers:
                ok = [r for r in runs.get("%s|%d|%d|%s" % (w, c, p, srv.kind), []) if "decisions_per_sec" in r and r.get("errors", 0) == 0]
                if not ok:
                    print("| %s | (%d,%d) | %s | no clean run | | |" % (w, c, p, srv.kind))
                    continue
                rates = [r["decisions_per_sec"] for r in ok]
                p99 = bench.median([r["p99_us"] for r in ok])
                eff = bench.median([r["decisions_per_cpu_s"] for r in ok if "decisions_per_cpu_s" in r])
                print("| %s | (%d,%d) | %s | %s (%s-%s) | %s | %s |" % (
                    w, c, p, srv.kind, "{:,.0f}".format(bench.median(rates)), "{:,.0f}".format(min(rates)),
                    "{:,.0f}".format(max(rates)), "%.0f" % p99, "{:,.0f}".format(eff) if eff else "-"))


if __name__ == "__main__":
    main()
