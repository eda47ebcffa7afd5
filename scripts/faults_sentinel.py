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

Load: by default every client sends its next request as soon as the last is answered, so a
faster server is offered more writes (and a cut-off master acknowledges, then loses, more).
--rate N paces every client at N requests per second instead (at most 5000; a client that
falls behind catches up by at most 100 ms of requests), so two servers that keep up are
offered the same load and the writes lost per partition compare directly.

Settings (--mode): plain (a write is acknowledged when the master answers), wait1 (then
WAIT 1 1000 must count a replica before the write counts as acknowledged), minrep1 (nodes run
with min-replicas-to-write 1 and min-replicas-max-lag --max-lag, 10 by default).

  scripts/faults_sentinel.py --server target/release/sluice --mode wait1 --faults 5
  scripts/faults_sentinel.py --server redis-server --mode wait1 --faults 5
  scripts/faults_sentinel.py --server target/release/sluice --fault partition --mode plain --faults 3
  scripts/faults_sentinel.py --server redis-server --fault partition --mode minrep1 --max-lag 1 \
      --rate 200 --faults 9

Prints one line per fault and a summary: faults survived, operations acknowledged, lost,
counted twice, and refused (WAIT saw no replica, or -NOREPLICAS: not acknowledged); for
partitions, what the cut-off master acknowledged (all lost) per partition and until when.
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import redis
from redis.sentinel import Sentinel

from local_nodes import free_port, until
from partition_proxy import Proxy


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


def partition_windows(timeline, ack_times, refused_times):
    """How long the cut-off master kept acknowledging, per partition: what compares two
    servers fairly whatever their speed (the counts lost scale with writes per second too).
    For SIGSTOP faults the same from the SIGCONT on (cut = heal = the resume): what the
    resumed old master acknowledged before the sentinels demoted it.

    Every acknowledgement is recorded with the port of the node that answered it (through
    its proxy). Per fault: `acked`, the acknowledgements the cut-off master gave after the
    cut (all lost: it rejoins as a replica of the new master); `ack_s`, the last one's time
    after the cut (0 when none came), `before_heal_s` the last one's before the heal (the
    window a partition opens: after the heal a master that counts its replicas good again
    may take a few more, as Redis's may, until the sentinels demote it); `refuse_s`, the first -NOREPLICAS's after the cut (None
    when none came); `after_heal`, those of `acked` that came after the heal (a master that
    counts its replicas good again). Sums: `acked_cut_off` and `ack_seconds`."""
    acks = sorted((t, p, i) for i, ts in enumerate(ack_times) for t, p in ts)
    refusals = sorted(t for ts in refused_times for t in ts)
    per_fault = []
    for k, (cut, healed, rejoined, port, demoted) in enumerate(timeline):
        # Until it rejoined as a replica (it acknowledges nothing as one): a later fault
        # may promote the same node, and what it acknowledges then is not this fault's.
        end = min(rejoined, timeline[k + 1][0]) if k + 1 < len(timeline) else rejoined
        by_old = [t for t, p, _ in acks if cut <= t < end and p == port]
        writers = sorted({i for t, p, i in acks if cut <= t < end and p == port})
        span = (by_old[-1] - by_old[0]) if len(by_old) > 1 else 0.0
        refused = [t for t in refusals if cut <= t <= rejoined]
        before_heal = [t for t in by_old if t < healed]
        per_fault.append({
            "acked": len(by_old),
            "ack_s": round(by_old[-1] - cut, 3) if by_old else 0.0,
            "before_heal_s": round(before_heal[-1] - cut, 3) if before_heal else 0.0,
            "refuse_s": round(refused[0] - cut, 3) if refused else None,
            "after_heal": sum(1 for t in by_old if t >= healed),
            "heal_s": round(healed - cut, 3),
            "rejoin_s": round(rejoined - cut, 3),
            # The sentinels' SLAVEOF reaching it (role:slave first seen), after the cut.
            "demoted_s": round(demoted - cut, 3) if demoted is not None else None,
            # Which clients it acknowledged after the cut, the first of those
            # acknowledgements' time (a request in flight at the SIGCONT answers at once)
            # and their rate while it lasted.
            "writers": writers,
            "first_ack_s": round(by_old[0] - cut, 3) if by_old else None,
            "ack_rate": round((len(by_old) - 1) / span, 1) if span > 0 else None,
        })
    n = max(1, len(per_fault))
    return {"windows": per_fault,
            "acked_cut_off": sum(w["acked"] for w in per_fault),
            "ack_seconds": round(sum(w["ack_s"] for w in per_fault), 3),
            # Per partition, on average: writes the cut-off master acknowledged (lost) and
            # the time after the cut of its last acknowledgement.
            "cut_off_per_partition": round(sum(w["acked"] for w in per_fault) / n, 1),
            "window_mean_s": round(sum(w["ack_s"] for w in per_fault) / n, 3)}


MAX_RATE = 5000
# How far behind its schedule a paced client may fall and still catch up (in seconds).
CATCH_UP = 0.1


def run(binary, mode, faults, clients, fault_kind, seed, hold=1.0, max_lag=10, quiet=False,
        fsync="always", rate=None):
    if rate is not None and not 0 < rate <= MAX_RATE:
        raise ValueError(f"rate must be in 1..{MAX_RATE} requests per second per client")
    rng = random.Random(seed)
    tmp = tempfile.mkdtemp(prefix="sluice-faults-sentinel-")
    proxied = fault_kind.startswith("partition")
    nodes = [Node(binary, tmp, f"n{i}", mode, max_lag, proxied, fsync) for i in range(3)]
    sentinels = []
    stop = threading.Event()
    acked = [0] * clients
    attempts = [0] * clients
    refused = [0] * clients
    # When each acknowledgement and each refusal came (time.monotonic()), per client: what
    # the timeline of a partition is measured against.
    ack_times = [[] for _ in range(clients)]
    refused_times = [[] for _ in range(clients)]
    timeline = []  # per partition fault: (cut, healed, rejoined)
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
            period = 1.0 / rate if rate else 0.0
            due = time.monotonic()
            while not stop.is_set():
                if period:
                    now = time.monotonic()
                    if due > now:
                        time.sleep(due - now)
                    due = max(due + period, now - CATCH_UP)
                try:
                    attempts[i] += 1
                    r.incr(f"c:{i}")
                    if mode == "wait1" and r.execute_command("WAIT", 1, 1000) < 1:
                        refused[i] += 1
                        refused_times[i].append(time.monotonic())
                        continue
                    acked[i] += 1
                    # The connection just used is the last one back in the client's own
                    # pool (redis-py's pool is a stack): the port of the node that answered.
                    used = r.connection_pool._available_connections
                    ack_times[i].append((time.monotonic(), getattr(used[-1], "port", None)
                                         if used else None))
                except redis.ResponseError as e:
                    if str(e).startswith("NOREPLICAS"):
                        refused[i] += 1
                        refused_times[i].append(time.monotonic())
                        if period:
                            continue  # the pace already spaces the next request
                    time.sleep(0.05)
                except (redis.RedisError, OSError):
                    time.sleep(0.05)

        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
        started = time.monotonic()
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
                cut = time.monotonic()
            until("a new master", lambda: master_port() != old, 60)
            if fault_kind == "kill":
                victim.start()
            elif fault_kind == "stop":
                victim.proc.send_signal(signal.SIGCONT)
                # Measured from here: what the resumed master takes until it is demoted.
                cut = healed = time.monotonic()
            else:
                time.sleep(hold)
                victim.proxy.heal()
                healed = time.monotonic()
            # The demotion: the first moment the old master reports role:slave (the
            # sentinels' SLAVEOF has reached it), polled more finely than `until`.
            demoted = None
            deadline = time.monotonic() + 90
            while demoted is None and time.monotonic() < deadline:
                try:
                    if vr.info("replication")["role"] == "slave":
                        demoted = time.monotonic()
                        break
                except (redis.RedisError, OSError):
                    pass
                time.sleep(0.02)
            until(f"{victim.name} rejoins as a replica",
                  lambda: vr.info("replication")["role"] == "slave"
                  and vr.info("replication")["master_link_status"] == "up", 90)
            if fault_kind in ("partition", "stop"):
                timeline.append((cut, healed, time.monotonic(), old, demoted))
            survived += 1
            if not quiet:
                print(f"fault {k + 1}: master {old} -> {master_port()}", flush=True)
        time.sleep(1.0)
        stop.set()
        for t in threads:
            t.join(5)
        elapsed = time.monotonic() - started
        r = sentinel.master_for("m", socket_timeout=2)
        stored = []

        def read_counters():
            stored[:] = [int(r.get(f"c:{i}") or 0) for i in range(clients)]
            return True

        until("the counters read back", read_counters)
        lost = sum(max(0, a - s) for a, s in zip(acked, stored))
        twice = sum(max(0, s - a) for a, s in zip(attempts, stored))
        result = {"server": os.path.basename(binary), "mode": mode, "fault": fault_kind,
                  "faults": survived, "acked": sum(acked), "lost": lost, "twice": twice,
                  "refused": sum(refused), "hold": hold, "max_lag": max_lag, "fsync": fsync,
                  "rate": rate, "seconds": round(elapsed, 1),
                  # Requests sent per second, all clients (with --rate: what they managed
                  # of clients * rate).
                  "sent_per_s": round(sum(attempts) / elapsed, 1)}
        if timeline:
            result.update(partition_windows(timeline, ack_times, refused_times))
        return result
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
    ap.add_argument("--rate", type=float, default=None,
                    help=f"requests per second per client (at most {MAX_RATE}); "
                    "by default as fast as each answer comes")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--faults", type=int, default=5)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.rate is not None and not 0 < a.rate <= MAX_RATE:
        ap.error(f"--rate must be in (0, {MAX_RATE}]")
    t = run(a.server, a.mode, a.faults, a.clients, a.fault, a.seed, a.hold, a.max_lag,
            quiet=a.json, fsync=a.fsync, rate=a.rate)
    t["load"] = round(os.getloadavg()[0], 2)
    print(json.dumps(t) if a.json else
          f"{t['server']} {t['mode']} ({t['fault']}): {t['faults']} faults survived, "
          f"{t['acked']} acknowledged, {t['lost']} lost, {t['twice']} counted twice, "
          f"{t['refused']} refused, {t['sent_per_s']:.0f} requests/s sent "
          f"(load average {t['load']:.2f})"
          + ("" if "windows" not in t else
             f"; the cut-off master acknowledged {t['acked_cut_off']} writes over "
             f"{t['ack_seconds']:.2f} s in all, {t['cut_off_per_partition']:.0f} per "
             f"partition until {t['window_mean_s']:.2f} s on average ("
             + "; ".join(f"{w['acked']} until {w['ack_s']:.2f} s"
                         + (f", first -NOREPLICAS at {w['refuse_s']:.2f} s"
                            if w["refuse_s"] is not None else "")
                         + (f", {w['after_heal']} after the heal at {w['heal_s']:.2f} s"
                            if w["after_heal"] else "")
                         + (f", demoted at {w['demoted_s']:.2f} s"
                            if w["demoted_s"] is not None else "")
                         + (f", {len(w['writers'])} client(s) from {w['first_ack_s']:.2f} s"
                            + (f" at {w['ack_rate']:.0f}/s" if w["ack_rate"] else "")
                            if w["writers"] else "")
                         for w in t["windows"]) + ")"))


if __name__ == "__main__":
    main()
