#!/usr/bin/env python3
"""Fault harness, Sentinel variant: what a failover loses. A master with two replicas (sluice
or redis-server, each with the AOF on, `appendfsync always`) under three sentinels
(redis-server in sentinel mode); several clients INCR their own counter through redis-py's
Sentinel client (which follows the master across failovers, retrying a failed request);
the harness kills the current master with kill -9 (or pauses it with SIGSTOP until the
sentinels fail over, then SIGCONT: --fault stop), waits for the new master, restarts (or
resumes) the old one, which rejoins as a replica, and repeats. At the end every counter is
read from the master and compared with what its client saw acknowledged.

Settings (--mode): plain (a write is acknowledged when the master answers), wait1 (then
WAIT 1 1000 must count a replica before the write counts as acknowledged), minrep1 (nodes run
with min-replicas-to-write 1, min-replicas-max-lag 10).

  scripts/faults_sentinel.py --server target/release/sluice --mode wait1 --faults 5
  scripts/faults_sentinel.py --server redis-server --mode wait1 --faults 5

Not covered: network partitions (the harness has no proxy between the nodes yet).
"""

import argparse
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
    def __init__(self, binary, tmp, name, mode):
        self.binary, self.tmp, self.name, self.mode = binary, tmp, name, mode
        self.port = free_port()
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir)
        self.proc = None

    def start(self, replicaof=None):
        conf = os.path.join(self.dir, "node.conf")
        if not os.path.exists(conf):
            lines = [f"port {self.port}", "bind 127.0.0.1", "appendonly yes",
                     "appendfsync always", 'save ""', "repl-diskless-sync-delay 0"]
            if replicaof:
                lines.append(f"replicaof 127.0.0.1 {replicaof}")
            if self.mode == "minrep1":
                lines += ["min-replicas-to-write 1", "min-replicas-max-lag 10"]
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


def run(binary, mode, faults, clients, fault_kind, seed):
    rng = random.Random(seed)
    tmp = tempfile.mkdtemp(prefix="sluice-faults-sentinel-")
    nodes = [Node(binary, tmp, f"n{i}", mode) for i in range(3)]
    sentinels = []
    stop = threading.Event()
    acked = [0] * clients
    attempts = [0] * clients
    try:
        nodes[0].start()
        for n in nodes[1:]:
            n.start(replicaof=nodes[0].port)
        m = redis.Redis(port=nodes[0].port)
        until("replicas attach", lambda: m.info("replication")["connected_slaves"] == 2)
        sports = []
        for i in range(3):
            port = free_port()
            conf = os.path.join(tmp, f"sentinel{i}.conf")
            with open(conf, "w") as f:
                f.write(f"port {port}\nbind 127.0.0.1\ndir {tmp}\n"
                        f"sentinel monitor m 127.0.0.1 {nodes[0].port} 2\n"
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
            r = sentinel.master_for("m", socket_timeout=1)
            while not stop.is_set():
                try:
                    attempts[i] += 1
                    r.incr(f"c:{i}")
                    if mode == "wait1" and r.execute_command("WAIT", 1, 1000) < 1:
                        continue
                    acked[i] += 1
                except (redis.RedisError, OSError):
                    time.sleep(0.05)

        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
        for t in threads:
            t.start()

        def master_port():
            host, port = sentinel.discover_master("m")
            return port

        for k in range(faults):
            time.sleep(rng.uniform(1.0, 2.0))
            old = master_port()
            victim = next(n for n in nodes if n.port == old)
            if fault_kind == "kill":
                victim.kill9()
            else:
                victim.proc.send_signal(signal.SIGSTOP)
            until("a new master", lambda: master_port() != old, 60)
            if fault_kind == "kill":
                victim.start()
            else:
                victim.proc.send_signal(signal.SIGCONT)
            vr = redis.Redis(port=victim.port, socket_timeout=1)
            until(f"{victim.name} rejoins as a replica",
                  lambda: vr.info("replication")["role"] == "slave"
                  and vr.info("replication")["master_link_status"] == "up", 60)
            print(f"fault {k + 1}: master {old} -> {master_port()}", flush=True)
        time.sleep(1.0)
        stop.set()
        for t in threads:
            t.join(5)
        r = sentinel.master_for("m", socket_timeout=2)
        stored = [int(r.get(f"c:{i}") or 0) for i in range(clients)]
        lost = sum(max(0, a - s) for a, s in zip(acked, stored))
        twice = sum(max(0, s - a) for a, s in zip(attempts, stored))
        return {"server": os.path.basename(binary), "mode": mode, "fault": fault_kind,
                "faults": faults, "acked": sum(acked), "lost": lost, "twice": twice}
    finally:
        stop.set()
        for p in sentinels:
            p.kill()
            p.wait()
        for n in nodes:
            if n.proc and n.proc.poll() is None:
                n.proc.send_signal(signal.SIGCONT)
            n.kill9()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default="target/release/sluice")
    ap.add_argument("--mode", default="plain", choices=["plain", "wait1", "minrep1"])
    ap.add_argument("--fault", default="kill", choices=["kill", "stop"])
    ap.add_argument("--faults", type=int, default=5)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    t = run(a.server, a.mode, a.faults, a.clients, a.fault, a.seed)
    print(f"{t['server']} {t['mode']} ({t['fault']}): {t['faults']} failovers, {t['acked']} "
          f"acknowledged, {t['lost']} lost, {t['twice']} counted twice "
          f"(load average {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
