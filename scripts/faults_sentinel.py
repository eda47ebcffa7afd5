#!/usr/bin/env python3
"""Fault harness, Sentinel variant: what a failover loses. A master with two replicas (sluice
or redis-server, each with the AOF on, `appendfsync always` or --fsync everysec) under three
sentinels (redis-server in sentinel mode); several clients INCR their own counter through redis-py's
Sentinel client (which follows the master across failovers, retrying a failed request);
the harness kills the current master with kill -9 (or pauses it with SIGSTOP until the
sentinels fail over, then SIGCONT: --fault stop), waits for the new master, restarts (or
resumes) the old one, which rejoins as a replica, and repeats. At the end every counter is
read from the master and compared with what its client saw acknowledged.

Network partitions (--fault partition, partition-replicas): every node sits behind a loopback
proxy the harness controls (scripts/partition_proxy.py; the nodes announce the proxies'
ports, the sentinels and clients use them). `partition` cuts the master off from the
sentinels and the replicas while its clients still reach it, and keeps writing to it:
the sentinels promote a replica, the harness heals the partition --hold seconds later, and
the sentinels turn the old master into a replica of the new one, which throws away what it
acknowledged meanwhile unless WAIT or min-replicas-to-write kept it from acknowledging.
`partition-replicas` cuts the master off from its replicas only (no failover: the sentinels
still see it) for --hold seconds, then heals.

Settings (--mode): plain (a write is acknowledged when the master answers), wait1 (then
WAIT 1 1000 must count a replica before the write counts as acknowledged), minrep1 (nodes run
with min-replicas-to-write 1 and min-replicas-max-lag --max-lag, 10 by default).

  scripts/faults_sentinel.py --server target/release/sluice --mode wait1 --faults 5
  scripts/faults_sentinel.py --server redis-server --mode wait1 --faults 5
  scripts/faults_sentinel.py --server target/release/sluice --fault partition --mode plain --faults 3

Prints one line per fault and a summary: faults survived, operations acknowledged, lost,
counted twice, and refused (WAIT saw no replica, or -NOREPLICAS: not acknowledged).
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import redis
from redis.sentinel import Sentinel

from partition_proxy import Proxy


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def until(what, f, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if f():
                return
        except (redis.RedisError, OSError):
            pass
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for: {what}")


class Node:
    def __init__(self, binary, tmp, name, mode, max_lag=10, proxied=False, fsync="always"):
        self.binary, self.tmp, self.name, self.mode = binary, tmp, name, mode
        self.max_lag, self.fsync = max_lag, fsync
        self.port = free_port()
        # With a proxy, every peer reaches the node through it (see partition_proxy).
        self.proxy = Proxy(self.port) if proxied else None
        self.addr = self.proxy.port if proxied else self.port
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir)
        self.proc = None

    def start(self, replicaof=None):
        conf = os.path.join(self.dir, "node.conf")
        if not os.path.exists(conf):
            lines = [f"port {self.port}", "bind 127.0.0.1", "appendonly yes",
                     f"appendfsync {self.fsync}", 'save ""', "repl-diskless-sync-delay 0"]
            if self.proxy:
                lines += ["replica-announce-ip 127.0.0.1", f"replica-announce-port {self.addr}"]
            if replicaof:
                lines.append(f"replicaof 127.0.0.1 {replicaof}")
            if self.mode == "minrep1":
                lines += ["min-replicas-to-write 1", f"min-replicas-max-lag {self.max_lag}"]
            with open(conf, "w") as f:
                f.write("\n".join(lines) + "\n")
        self.proc = subprocess.Popen([self.binary, conf, "--dir", self.dir],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        until(f"{self.name} answers", lambda: redis.Redis(port=self.port, socket_timeout=1).ping())

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


def run(binary, mode, faults, clients, fault_kind, seed, hold=1.0, max_lag=10, quiet=False,
        fsync="always"):
    rng = random.Random(seed)
    tmp = tempfile.mkdtemp(prefix="sluice-faults-sentinel-")
    proxied = fault_kind.startswith("partition")
    nodes = [Node(binary, tmp, f"n{i}", mode, max_lag, proxied, fsync) for i in range(3)]
    sentinels = []
    stop = threading.Event()
    acked = [0] * clients
    attempts = [0] * clients
    refused = [0] * clients
    survived = 0
    try:
        nodes[0].start()
        for n in nodes[1:]:
            n.start(replicaof=nodes[0].addr)
        m = redis.Redis(port=nodes[0].port)
        until("replicas attach", lambda: m.info("replication")["connected_slaves"] == 2)
        sports = []
        for i in range(3):
            port = free_port()
            conf = os.path.join(tmp, f"sentinel{i}.conf")
            with open(conf, "w") as f:
                f.write(f"port {port}\nbind 127.0.0.1\ndir {tmp}\n"
                        f"sentinel monitor m 127.0.0.1 {nodes[0].addr} 2\n"
                        "sentinel down-after-milliseconds m 2000\n"
                        "sentinel failover-timeout m 3000\n"
                        "sentinel parallel-syncs m 1\n")
            sentinels.append(subprocess.Popen(["redis-server", conf, "--sentinel"],
                                              stdin=subprocess.DEVNULL,
                                              stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL))
            sports.append(port)

        def sentinels_ready():
            return all(len(redis.Redis(port=p, socket_timeout=1).sentinel_slaves("m")) == 2
                       for p in sports)

        until("sentinels see both replicas", sentinels_ready)
        sentinel = Sentinel([("127.0.0.1", p) for p in sports], socket_timeout=1)

        def client(i):
            # Longer than WAIT's 1000 ms, so a WAIT that saw no replica answers 0.
            r = sentinel.master_for("m", socket_timeout=2)
            while not stop.is_set():
                try:
                    attempts[i] += 1
                    r.incr(f"c:{i}")
                    if mode == "wait1" and r.execute_command("WAIT", 1, 1000) < 1:
                        refused[i] += 1
                        continue
                    acked[i] += 1
                except redis.ResponseError as e:
                    if str(e).startswith("NOREPLICAS"):
                        refused[i] += 1
                    time.sleep(0.05)
                except (redis.RedisError, OSError):
                    time.sleep(0.05)

        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
        for t in threads:
            t.start()

        def master_port():
            host, port = sentinel.discover_master("m")
            return port

        def current_master():
            found = []
            until("the sentinels name a master", lambda: found.append(master_port()) or True)
            return found[-1]

        for k in range(faults):
            time.sleep(rng.uniform(1.0, 2.0))
            old = current_master()
            victim = next(n for n in nodes if n.addr == old)
            vr = redis.Redis(port=victim.port, socket_timeout=1)
            if fault_kind == "partition-replicas":
                # No failover: the sentinels still see the master; its replicas do not.
                victim.proxy.block({"replica"})
                time.sleep(hold)
                victim.proxy.heal()
                until(f"{victim.name}'s replicas are back",
                      lambda: vr.info("replication")["connected_slaves"] == 2, 60)
                survived += 1
                if not quiet:
                    print(f"fault {k + 1}: master {old} cut off from its replicas for "
                          f"{hold:.1f} s", flush=True)
                continue
            if fault_kind == "kill":
                victim.kill9()
            elif fault_kind == "stop":
                victim.proc.send_signal(signal.SIGSTOP)
            else:
                # Its clients still reach it: only the sentinels and replicas do not.
                victim.proxy.block({"replica", "sentinel"})
            until("a new master", lambda: master_port() != old, 60)
            if fault_kind == "kill":
                victim.start()
            elif fault_kind == "stop":
                victim.proc.send_signal(signal.SIGCONT)
            else:
                time.sleep(hold)
                victim.proxy.heal()
            until(f"{victim.name} rejoins as a replica",
                  lambda: vr.info("replication")["role"] == "slave"
                  and vr.info("replication")["master_link_status"] == "up", 90)
            survived += 1
            if not quiet:
                print(f"fault {k + 1}: master {old} -> {master_port()}", flush=True)
        time.sleep(1.0)
        stop.set()
        for t in threads:
            t.join(5)
        r = sentinel.master_for("m", socket_timeout=2)
        stored = []

        def read_counters():
            stored[:] = [int(r.get(f"c:{i}") or 0) for i in range(clients)]
            return True

        until("the counters read back", read_counters)
        lost = sum(max(0, a - s) for a, s in zip(acked, stored))
        twice = sum(max(0, s - a) for a, s in zip(attempts, stored))
        return {"server": os.path.basename(binary), "mode": mode, "fault": fault_kind,
                "faults": survived, "acked": sum(acked), "lost": lost, "twice": twice,
                "refused": sum(refused), "hold": hold, "max_lag": max_lag, "fsync": fsync}
    finally:
        stop.set()
        for p in sentinels:
            p.kill()
            p.wait()
        for n in nodes:
            if n.proc and n.proc.poll() is None:
                n.proc.send_signal(signal.SIGCONT)
            n.kill9()
            if n.proxy:
                n.proxy.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default="target/release/sluice")
    ap.add_argument("--mode", default="plain", choices=["plain", "wait1", "minrep1"])
    ap.add_argument("--fault", default="kill",
                    choices=["kill", "stop", "partition", "partition-replicas"])
    ap.add_argument("--hold", type=float, default=1.0,
                    help="partitions: seconds kept after the failover (partition) or in all "
                    "(partition-replicas)")
    ap.add_argument("--max-lag", type=int, default=10,
                    help="min-replicas-max-lag for --mode minrep1")
    ap.add_argument("--fsync", default="always", choices=["always", "everysec"],
                    help="every node's appendfsync")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--faults", type=int, default=5)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    t = run(a.server, a.mode, a.faults, a.clients, a.fault, a.seed, a.hold, a.max_lag,
            quiet=a.json, fsync=a.fsync)
    t["load"] = round(os.getloadavg()[0], 2)
    print(json.dumps(t) if a.json else
          f"{t['server']} {t['mode']} ({t['fault']}): {t['faults']} faults survived, "
          f"{t['acked']} acknowledged, {t['lost']} lost, {t['twice']} counted twice, "
          f"{t['refused']} refused (load average {t['load']:.2f})")


if __name__ == "__main__":
    main()
