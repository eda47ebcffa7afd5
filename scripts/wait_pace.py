#!/usr/bin/env python3
"""WAIT's round trip: a master and one replica of the same server, and clients that each run
`INCR c:<i>` then `WAIT 1 0` in a loop, a bounded number of rounds. Prints rounds per second
(all clients) and the round trip's median and 99th percentile, with the load average, so
that two servers measured back to back at the same load compare.

    scripts/wait_pace.py --server target/release/sluice --rounds 2000 --clients 4
    scripts/wait_pace.py --server redis-server --rounds 2000 --clients 4
    scripts/wait_pace.py --server ... --fsync always   # both nodes with the AOF on

A figure here is a measurement of the moment's machine, never asserted anywhere.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import redis

from local_nodes import free_port, until


def start(binary, tmp, name, fsync, replicaof=None, extra=()):
    port = free_port()
    d = os.path.join(tmp, name)
    os.makedirs(d)
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--save", ""]
    if fsync:
        args += ["--appendonly", "yes", "--appendfsync", fsync]
    args += list(extra)
    if replicaof:
        args += ["--replicaof", "127.0.0.1", str(replicaof)]
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    until(f"{name} answers", lambda: redis.Redis(port=port).ping())
    return p, port


def syscalls_per_round(summary, rounds):
    """`strace -c`'s table: calls per round of the system calls that cost a WAIT."""
    out = {}
    for line in summary.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[-1] in ("fdatasync", "fsync", "write", "writev",
                                              "sendto", "sendmsg", "read", "recvfrom",
                                              "epoll_wait", "futex"):
            try:
                out[parts[-1]] = round(int(parts[3]) / rounds, 2)
            except ValueError:
                pass
    return out


def run(binary, rounds, clients, fsync, wait=True, extra=(), strace=False):
    tmp = tempfile.mkdtemp(prefix="sluice-wait-pace-")
    procs = []
    try:
        mp, mport = start(binary, tmp, "m", fsync, extra=extra)
        procs.append(mp)
        rp, _ = start(binary, tmp, "r", fsync, replicaof=mport, extra=extra)
        procs.append(rp)
        m = redis.Redis(port=mport)
        until("the replica is online",
              lambda: m.info("replication").get("slave0", {}).get("state") == "online")
        tracers = []
        if strace:
            for name, p in (("master", mp), ("replica", rp)):
                log = os.path.join(tmp, f"strace.{name}")
                tracers.append((name, log, subprocess.Popen(
                    ["strace", "-c", "-f", "-o", log, "-p", str(p.pid)],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL)))
            time.sleep(0.5)  # attached to every thread
        times = [[] for _ in range(clients)]
        zeros = [0] * clients
        per_client = max(1, rounds // clients)

        def client(i):
            r = redis.Redis(port=mport, socket_timeout=10)
            for _ in range(per_client):
                t0 = time.perf_counter()
                r.incr(f"c:{i}")
                if wait and r.execute_command("WAIT", 1, 0) < 1:
                    zeros[i] += 1
                times[i].append(time.perf_counter() - t0)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
        all_t = sorted(x for ts in times for x in ts)
        calls = {}
        for name, log, t in tracers:
            t.send_signal(signal.SIGINT)  # detaches and writes the table
            t.wait(10)
            with open(log) as f:
                calls[name] = syscalls_per_round(f.read(), len(all_t))
        return {"syscalls_per_round": calls} | {"server": os.path.basename(binary), "fsync": fsync or "off",
                "wait": wait, "clients": clients, "rounds": len(all_t),
                "rounds_per_s": round(len(all_t) / elapsed, 1),
                "median_ms": round(1000 * all_t[len(all_t) // 2], 3),
                "p99_ms": round(1000 * all_t[min(len(all_t) - 1, len(all_t) * 99 // 100)], 3),
                "wait_zero": sum(zeros), "load": round(os.getloadavg()[0], 2)}
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default="target/release/sluice")
    ap.add_argument("--rounds", type=int, default=2000, help="in all, at most 100000")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--fsync", choices=["always", "everysec"], default=None,
                    help="both nodes' appendfsync (the AOF is off without it)")
    ap.add_argument("--no-wait", action="store_true",
                    help="INCR alone: what the round trip costs without WAIT")
    ap.add_argument("--arg", action="append", default=[],
                    help="one more argument for both servers (repeat: --arg=--io-backend "
                    "--arg=epoll)")
    ap.add_argument("--strace", action="store_true",
                    help="count both nodes' system calls per round (strace -c; slows them)")
    a = ap.parse_args()
    if not 1 <= a.rounds <= 100000 or not 1 <= a.clients <= 64:
        ap.error("--rounds in 1..100000, --clients in 1..64")
    print(json.dumps(run(a.server, a.rounds, a.clients, a.fsync, not a.no_wait, a.arg, a.strace)))


if __name__ == "__main__":
    sys.exit(main())
