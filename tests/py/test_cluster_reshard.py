"""Live resharding of a sluice cluster on the cluster bus, with two cluster clients deciding.

Three sluice nodes (each in a directory of its own with its nodes.conf, a bus port of its
own, `cluster-node-timeout` 1000 ms) are made a cluster by `redis-cli --cluster create`.
While `redis-cli --cluster reshard` moves 1,500 slots with their keys from the first master
to the second, redis-py's RedisCluster (two threads) and ioredis's Cluster (a node process,
tests/node/workers/cluster-load.mjs) keep INCRementing counters and asking CL.THROTTLE of
limiters that live in those slots, following -MOVED, -ASK and -TRYAGAIN. Afterwards every
counter equals the increments the clients had acknowledged (nothing lost, nothing counted
twice), every limiter allowed exactly its burst across all clients (its state moved once,
never copied or reset), the source holds no key, and `redis-cli --cluster check` is clean.
"""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot

ROOT = Path(__file__).resolve().parents[2]
SLUICE_BIN = Path(os.environ.get("SLUICE_BIN", ROOT / "target" / "debug" / "sluice"))
NODE_DIR = ROOT / "tests" / "node"
WORKER = NODE_DIR / "workers" / "cluster-load.mjs"
MOVED_SLOTS = 1500
NODE_TIMEOUT_MS = 1000
BURST = 10  # CL.THROTTLE key 9 1 3600: a burst of 9 + 1, then one an hour


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    """One sluice cluster node on a port and a bus port of its own, in its own directory."""

    def __init__(self):
        self.dir = tempfile.TemporaryDirectory(prefix="sluice-cluster-")
        self.port = free_port()
        self.bus_port = free_port()
        self.log = open(Path(self.dir.name) / "log", "w+")
        self.proc = subprocess.Popen(
            [str(SLUICE_BIN), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--loglevel", "notice", "--cluster-enabled", "yes",
             "--cluster-port", str(self.bus_port),
             "--cluster-node-timeout", str(NODE_TIMEOUT_MS)],
            cwd=self.dir.name, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self.log,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                if redis.Redis(port=self.port, socket_timeout=1).ping():
                    break
            except redis.ConnectionError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                pytest.fail(f"sluice cluster node did not start:\n{self.log_text()}")
            time.sleep(0.05)
        self.client = redis.Redis(port=self.port, decode_responses=True)

    def log_text(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        self.dir.cleanup()


def redis_cli(*args, timeout=120):
    out = subprocess.run(["redis-cli", *args], capture_output=True, text=True, timeout=timeout)
    return out.returncode, out.stdout + out.stderr


def wait_for(what, seconds, check):
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def views_agree(nodes):
    def view(n):
        lines = []
        for line in n.client.execute_command("CLUSTER", "NODES").splitlines():
            w = line.split()
            lines.append(" ".join([w[0], w[2].replace("myself,", ""), w[3], w[7], *w[8:]]))
        return sorted(lines)

    first = view(nodes[0])
    return (
        len(first) == len(nodes)
        and all(" connected" in line for line in first)
        and all(view(n) == first for n in nodes[1:])
        and all("cluster_state:ok" in n.client.execute_command("CLUSTER", "INFO") for n in nodes)
    )


@pytest.fixture
def trio():
    if not SLUICE_BIN.is_file():
        pytest.fail(f"{SLUICE_BIN} does not exist: run `cargo build` first (scripts/test.sh does)")
    if shutil.which("redis-cli") is None:
        pytest.fail("redis-cli is not installed (apt-get install redis-tools)")
    nodes = [Node() for _ in range(3)]
    try:
        yield nodes
    finally:
        for n in nodes:
            n.stop()


def keys_in_moving_slots(prefix, count):
    keys = (f"{prefix}{i}" for i in range(100_000))
    return [k for k in keys if key_slot(k.encode()) < MOVED_SLOTS][:count]


def test_reshard_1500_slots_while_redis_py_and_ioredis_decide(trio):
    if shutil.which("node") is None or not (NODE_DIR / "node_modules" / "ioredis").is_dir():
        pytest.fail("node and tests/node/node_modules (npm install in tests/node) are needed")
    nodes = trio
    code, out = redis_cli("--cluster", "create", *(f"127.0.0.1:{n.port}" for n in nodes),
                          "--cluster-yes")
    assert code == 0, out
    wait_for("the nodes to agree", 20, lambda: views_agree(nodes))
    # The first node given to create owns 0-5460; reshard takes a source's lowest slots.
    assert nodes[0].client.execute_command("CLUSTER", "COUNTKEYSINSLOT", 0) == 0
    counters = keys_in_moving_slots("counter:", 60)
    limiters = keys_in_moving_slots("limiter:", 30)
    assert len(counters) == 60 and len(limiters) == 30

    stop = threading.Event()
    lock = threading.Lock()
    acked = {}
    allowed = {}
    failures = []
    done = [0]

    def py_worker(w):
        rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", nodes[w + 1].port)],
                          decode_responses=True)
        i = w
        try:
            while not stop.is_set():
                c = counters[i % len(counters)]
                try:
                    rc.incr(c)
                    with lock:
                        acked[c] = acked.get(c, 0) + 1
                except redis.RedisError as e:
                    with lock:
                        failures.append(f"redis-py INCR {c}: {e!r}")
                t = limiters[i % len(limiters)]
                try:
                    r = rc.execute_command("CL.THROTTLE", t, 9, 1, 3600)
                    if r[0] == 0:
                        with lock:
                            allowed[t] = allowed.get(t, 0) + 1
                except redis.RedisError as e:
                    with lock:
                        failures.append(f"redis-py CL.THROTTLE {t}: {e!r}")
                i += 2
                with lock:
                    done[0] += 2
                # Paced, so the clients leave the nodes and redis-cli some of the machine.
                time.sleep(0.001)
        finally:
            rc.close()

    worker = subprocess.Popen(
        ["node", str(WORKER), str(nodes[2].port), ",".join(counters), ",".join(limiters)],
        cwd=NODE_DIR, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )
    threads = []
    try:
        assert worker.stdout.readline().strip() == "ready", worker.stderr.read()
        threads = [threading.Thread(target=py_worker, args=(w,)) for w in range(2)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        started = time.monotonic()
        code, out = redis_cli(
            "--cluster", "reshard", f"127.0.0.1:{nodes[0].port}",
            "--cluster-from", nodes[0].client.execute_command("CLUSTER", "MYID"),
            "--cluster-to", nodes[1].client.execute_command("CLUSTER", "MYID"),
            "--cluster-slots", str(MOVED_SLOTS), "--cluster-yes",
        )
        took = time.monotonic() - started
        time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        try:
            # communicate() closes the worker's stdin: its signal to stop and report.
            node_out, node_err = worker.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            node_out, node_err = worker.communicate()
    assert code == 0, out + "".join(n.log_text() for n in nodes)
    assert worker.returncode == 0, node_err
    node = json.loads(node_out.strip().splitlines()[-1])
    print(f"reshard of {MOVED_SLOTS} slots took {took:.1f} s; redis-py made {done[0]} "
          f"requests, ioredis {node['requests']}")
    assert failures == [], failures[:20]
    assert node["errors"] == [], node["errors"]
    # Both kinds of client decided during the move.
    assert done[0] > 0 and node["requests"] > 0

    # Every counter is on the new owner with exactly what both clients were told.
    for c in counters:
        want = acked.get(c, 0) + node["acked"].get(c, 0)
        assert nodes[1].client.get(c) == (str(want) if want else None), c
    for t in limiters:
        assert allowed.get(t, 0) + node["allowed"].get(t, 0) == BURST, t
        assert nodes[1].client.exists(t) == 1, t
    assert nodes[0].client.dbsize() == 0
    wait_for("the nodes to agree", 20, lambda: views_agree(nodes))
    code, out = redis_cli("--cluster", "check", f"127.0.0.1:{nodes[2].port}")
    assert code == 0, out
    assert "[OK] All nodes agree about slots configuration." in out, out
    assert "[OK] All 16384 slots covered." in out, out
    assert "[ERR]" not in out and "[WARNING]" not in out, out
    owners = {tuple(r[:2]): r[2][1] for r in nodes[0].client.execute_command("CLUSTER", "SLOTS")}
    assert owners[(0, MOVED_SLOTS - 1)] == nodes[1].port, owners
