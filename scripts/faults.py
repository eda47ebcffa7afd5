#!/usr/bin/env python3
"""Fault harness: what a crash loses. Several clients run a real limiter workload against one
server with the append-only file on; the server is killed with SIGKILL (kill -9) at a random
moment and restarted, N times; after each restart a checker reads back every key and compares
it with every operation the clients saw acknowledged.

Workload, one key per client per kind (so the checker knows exactly what each key must hold;
each client has at most one request in flight, the one a crash may cut):
  - counter: INCR c:<client>                          -> the value must be >= the acks
  - window:  W1 sliding window, MULTI; ZADD w:<client> <op> <op>; ZREMRANGEBYSCORE w 0 -1;
             ZCARD; EXPIRE w 86400; EXEC              -> every acknowledged <op> present
  - throttle: CL.THROTTLE t:<client> 100000 1 86400 1 (sluice; one token a day, so tokens
             used = acks); on redis-server, which has no CL.THROTTLE, a Lua fixed-window
             counter (INCRBY + EXPIRE in EVAL) stands in
Lost: an acknowledged operation missing after the restart. Counted twice: more applied than
acknowledged plus the one in flight.

  scripts/faults.py --server target/release/sluice --fsync always --crashes 20
  scripts/faults.py --server redis-server --fsync always --crashes 20

Prints one line per crash and a summary (also as JSON with --json). Exit status 1 if any
acknowledged operation was lost with --fsync always (the promise), or any was counted twice.
Only loopback, only temporary directories (removed at the end).
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import redis


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    """One server process (sluice or redis-server) in `workdir`, restarted on the same port."""

    def __init__(self, binary, workdir, fsync, appendonly="yes"):
        self.binary = binary
        self.workdir = workdir
        self.fsync = fsync
        self.appendonly = appendonly
        self.port = free_port()
        self.proc = None

    def start(self):
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", self.workdir, "--appendonly", self.appendonly, "--appendfsync", self.fsync,
                "--save", ""]
        deadline = time.time() + 30
        while True:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while time.time() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    if redis.Redis(port=self.port, socket_timeout=1).ping():
                        return
                except redis.RedisError:
                    time.sleep(0.02)
            if time.time() >= deadline:
                raise SystemExit(f"{self.binary} did not start (exit {self.proc.poll()})")
            time.sleep(0.1)  # exited at start (port still held): retry

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc:
            self.proc.wait()


class Client(threading.Thread):
    """One client: runs the three kinds in turn until the connection breaks or `stop`."""

    def __init__(self, idx, port, sluice, state, stop):
        super().__init__(daemon=True)
        self.idx, self.port, self.sluice, self.state, self.stop = idx, port, sluice, state, stop

    def run(self):
        st = self.state
        try:
            r = redis.Redis(port=self.port, socket_timeout=5)
            while not self.stop.is_set():
                # counter
                st["counter_inflight"] = 1
                r.incr(f"c:{self.idx}")
                st["counter_acked"] += 1
                st["counter_inflight"] = 0
                st["acks"] += 1
                # W1 window: the member is the op's number
                op = st["window_next"]
                st["window_inflight"] = op
                p = r.pipeline(transaction=True)
                key = f"w:{self.idx}"
                p.zadd(key, {str(op): op})
                p.zremrangebyscore(key, 0, -1)
                p.zcard(key)
                p.expire(key, 86400)
                p.execute()
                st["window_acked"].add(op)
                st["window_next"] = op + 1
                st["window_inflight"] = None
                st["acks"] += 1
                # throttle (or its stand-in)
                st["throttle_inflight"] = 1
                if self.sluice:
                    res = r.execute_command("CL.THROTTLE", f"t:{self.idx}", 100000, 1, 86400, 1)
                    assert res[0] == 0, res
                else:
                    r.eval("local v = redis.call('INCRBY', KEYS[1], 1) "
                           "redis.call('EXPIRE', KEYS[1], 86400) return v", 1, f"t:{self.idx}")
                st["throttle_acked"] += 1
                st["throttle_inflight"] = 0
                st["acks"] += 1
        except (redis.RedisError, OSError):
            return  # the crash


def new_state():
    return {"counter_acked": 0, "counter_inflight": 0, "window_acked": set(), "window_next": 1,
            "window_inflight": None, "throttle_acked": 0, "throttle_inflight": 0, "acks": 0}


def check(port, idx, st, sluice):
    """Reads client idx's keys; returns (lost, twice) and resets the state to what is stored
    (so a loss is counted once, and later rounds continue from the truth)."""
    r = redis.Redis(port=port, socket_timeout=10)
    lost = twice = 0
    stored = int(r.get(f"c:{idx}") or 0)
    lo, hi = st["counter_acked"], st["counter_acked"] + st["counter_inflight"]
    lost += max(0, lo - stored)
    twice += max(0, stored - hi)
    st["counter_acked"], st["counter_inflight"] = stored, 0
    members = {int(m) for m in r.zrange(f"w:{idx}", 0, -1)}
    missing = st["window_acked"] - members
    lost += len(missing)
    extra = members - st["window_acked"] - ({st["window_inflight"]} if st["window_inflight"] else set())
    twice += len(extra)
    st["window_acked"] = set(members)
    st["window_next"] = max(members | {st["window_next"] - 1}) + 1
    st["window_inflight"] = None
    if sluice:
        # Quantity 0 reads without taking: the burst is 100001 tokens, one used per ack.
        res = r.execute_command("CL.THROTTLE", f"t:{idx}", 100000, 1, 86400, 0)
        used = 100001 - res[2]
    else:
        used = int(r.get(f"t:{idx}") or 0)
    lo, hi = st["throttle_acked"], st["throttle_acked"] + st["throttle_inflight"]
    lost += max(0, lo - used)
    twice += max(0, used - hi)
    st["throttle_acked"], st["throttle_inflight"] = used, 0
    return lost, twice


def run(binary, fsync, crashes, clients, seed, quiet=False, appendonly="yes"):
    rng = random.Random(seed)
    workdir = tempfile.mkdtemp(prefix="sluice-faults-")
    sluice = "redis-server" not in os.path.basename(binary)
    server = Server(binary, workdir, fsync, appendonly)
    states = [new_state() for _ in range(clients)]
    totals = {"server": os.path.basename(binary), "fsync": fsync, "appendonly": appendonly,
              "crashes": 0, "acked": 0,
              "lost": 0, "twice": 0, "clients": clients}
    try:
        server.start()
        for crash in range(crashes):
            stop = threading.Event()
            for st in states:
                st["acks"] = 0
            threads = [Client(i, server.port, sluice, states[i], stop) for i in range(clients)]
            for t in threads:
                t.start()
            time.sleep(rng.uniform(0.3, 1.2))
            server.kill9()
            stop.set()
            for t in threads:
                t.join(10)
            acked = sum(st["acks"] for st in states)
            server.start()
            lost = twice = 0
            for i, st in enumerate(states):
                l, t2 = check(server.port, i, st, sluice)
                lost += l
                twice += t2
            totals["crashes"] += 1
            totals["acked"] += acked
            totals["lost"] += lost
            totals["twice"] += twice
            if not quiet:
                print(f"crash {crash + 1}: {acked} acknowledged, {lost} lost, {twice} counted twice",
                      flush=True)
    finally:
        server.kill9()
        shutil.rmtree(workdir, ignore_errors=True)
    return totals


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default="target/release/sluice",
                    help="the binary: sluice's, or redis-server")
    ap.add_argument("--fsync", default="always", choices=["always", "everysec", "no"])
    ap.add_argument("--crashes", type=int, default=20)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--appendonly", default="yes", choices=["yes", "no"],
                    help="no: the checker's own check (every crash must lose what was acked)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    t = run(a.server, a.fsync, a.crashes, a.clients, a.seed, quiet=a.json, appendonly=a.appendonly)
    print(json.dumps(t) if a.json else
          f"{t['server']} appendfsync {t['fsync']}: {t['crashes']} crashes, {t['acked']} "
          f"acknowledged operations, {t['lost']} lost, {t['twice']} counted twice "
          f"(load average {os.getloadavg()[0]:.2f})")
    bad = t["twice"] > 0 or (a.fsync == "always" and a.appendonly == "yes" and t["lost"] > 0)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
