"""Cluster mode with redis-py's RedisCluster (default settings: RESP3, HELLO 3, COMMAND).

Three `target/debug/sluice` nodes on loopback ports form a Redis cluster over the bus, seeded
from one slot map (`--cluster-seed-map`: each node's first nodes.conf). The client bootstraps
from any node, runs the limiter workloads W1 (MULTI block on a `{user}` hash-tagged key), W3
(fixed window) and CL.THROTTLE on keys spread over all nodes with exact results (each node's
clock is frozen with CLOCK FREEZE), follows MOVED after `redis-cli --cluster reshard` moves
slots with their keys, gets CROSSSLOT where Redis gives it, and survives the loss of a node
for the keys it did not own. With a replica in the seed, `read_from_replicas=True` spreads
reads over master and replica, and the client follows the slots to the replica once CLUSTER
FAILOVER promotes it.
"""

import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

ROOT = Path(__file__).resolve().parents[2]
SLUICE_BIN = Path(os.environ.get("SLUICE_BIN", ROOT / "target" / "debug" / "sluice"))
IDS = [str(i) * 40 for i in (1, 2, 3)]
SPLIT = [[(0, 5460)], [(5461, 10922)], [(10923, 16383)]]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def map_text(ports, bus_ports, ranges):
    lines = ["# sluice seed map (tests/py/test_cluster.py)"]
    for node_id, port, bus, rs in zip(IDS, ports, bus_ports, ranges):
        lines.append(f"node {node_id} 127.0.0.1:{port}@{bus} " + " ".join(f"{a}-{b}" for a, b in rs))
    return "\n".join(lines) + "\n"


def owner(ranges, slot):
    return next(i for i, rs in enumerate(ranges) if any(a <= slot <= b for a, b in rs))


class Trio:
    """Three sluice nodes; `kill(i)` and `start(i)` stop and restart one."""

    def __init__(self, map_file, make_map=None):
        self.map_file = map_file
        self.ports = [free_port() for _ in range(3)]
        self.bus_ports = [free_port() for _ in range(3)]
        make_map = make_map or (lambda ports, bus_ports: map_text(ports, bus_ports, SPLIT))
        map_file.write_text(make_map(self.ports, self.bus_ports))
        self.procs = [None, None, None]
        for i in range(3):
            self.start(i)
        self.wait_ok()

    def wait_ok(self, timeout=15.0):
        """Until every node has a bus link to every other and says the cluster is ok."""
        deadline = time.monotonic() + timeout
        for i in range(3):
            while True:
                nodes = self.direct(i).execute_command("CLUSTER", "NODES")
                nodes = nodes.decode() if isinstance(nodes, bytes) else str(nodes)
                info = self.direct(i).execute_command("CLUSTER", "INFO")
                info = info.decode() if isinstance(info, bytes) else str(info)
                if nodes.count(" connected") == 3 and "cluster_state:ok" in info:
                    break
                assert time.monotonic() < deadline, nodes
                time.sleep(0.05)

    def start(self, i, timeout=10.0):
        if not SLUICE_BIN.is_file():
            pytest.fail(f"{SLUICE_BIN} does not exist: run `cargo build` first (scripts/test.sh does)")
        deadline = time.monotonic() + timeout
        while True:
            proc = subprocess.Popen(
                [str(SLUICE_BIN), "--port", str(self.ports[i]), "--test-mode", "--loglevel", "warning",
                 "--cluster-enabled", "yes", "--cluster-port", str(self.bus_ports[i]),
                 "--cluster-seed-map", str(self.map_file), "--cluster-config-file", f"nodes-{i}.conf",
                 "--cluster-node-id", IDS[i], "--dir", str(self.map_file.parent)],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
            )
            line = []
            reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
            reader.start()
            reader.join(timeout)
            if line and "listening on" in line[0]:
                self.procs[i] = proc
                return
            proc.kill()
            proc.wait()
            proc.stdout.close()
            if time.monotonic() > deadline:
                pytest.fail(f"sluice node {i} did not start")
            time.sleep(0.1)  # the port may still be held by the node just killed

    def kill(self, i):
        proc, self.procs[i] = self.procs[i], None
        if proc is not None:
            proc.kill()
            proc.wait()
            proc.stdout.close()

    def direct(self, i):
        return redis.Redis(host="127.0.0.1", port=self.ports[i])

    def stop(self):
        for i in range(3):
            self.kill(i)


@pytest.fixture
def trio(tmp_path):
    t = Trio(tmp_path / "cluster.map")
    try:
        yield t
    finally:
        t.stop()


def freeze_all(trio):
    """Every node's clock frozen at the same instant (a limiter that moves keeps its time)."""
    t0 = max(int(trio.direct(i).execute_command("CLOCK", "FREEZE")) for i in range(3))
    for i in range(3):
        trio.direct(i).execute_command("CLOCK", "SET", t0)
    return t0


def w1_call(rc, key, now_ms):
    pipe = rc.pipeline(transaction=True)  # MULTI … EXEC on the key's node
    pipe.zadd(key, {str(now_ms): now_ms})
    pipe.zremrangebyscore(key, 0, now_ms - 60_000)
    pipe.zcard(key)
    pipe.expire(key, 61)
    added, _, count, expire_set = pipe.execute()
    assert added == 1 and expire_set in (1, True)
    return count


def w3_call(rc, key, limit=5):
    if rc.get(key) is None:
        rc.set(key, 1, ex=61)
        return True
    return rc.incr(key) <= limit


def throttle(rc, key):
    return rc.execute_command("CL.THROTTLE", key, 15, 30, 60, 1)


USERS = [f"user{i}" for i in range(12)]


def test_redis_py_cluster_workloads_are_exact_on_every_node(trio):
    t0 = freeze_all(trio)
    assert {owner(SPLIT, key_slot(u.encode())) for u in USERS} == {0, 1, 2}
    for seed in range(3):  # any node bootstraps the client
        rc = RedisCluster(host="127.0.0.1", port=trio.ports[seed])
        assert sorted(n.port for n in rc.get_nodes()) == sorted(trio.ports)
        rc.close()
    rc = RedisCluster(host="127.0.0.1", port=trio.ports[2])
    for u in USERS:
        key = f"hist:{{{u}}}:reply"
        assert [w1_call(rc, key, t0 + i) for i in range(20)] == list(range(1, 21))
        assert rc.ttl(key) == 61
        assert [w3_call(rc, f"rate:{{{u}}}:reply") for _ in range(20)] == [True] * 5 + [False] * 15
        replies = [throttle(rc, f"throttle:{{{u}}}") for _ in range(20)]
        assert replies[0] == [0, 16, 15, -1, 2]
        assert [r[0] for r in replies] == [0] * 16 + [1] * 4
    # Each node holds exactly its users' three keys.
    for i in range(3):
        mine = sum(owner(SPLIT, key_slot(u.encode())) == i for u in USERS)
        assert trio.direct(i).dbsize() == 3 * mine
    # CROSSSLOT: redis-py refuses cross-slot transactions itself; sent anyway, the node does.
    with pytest.raises(redis.exceptions.RedisClusterException):
        rc.execute_command("EVAL", "return 1", 2, "a", "b")
    node_a = rc.get_node_from_key("a")
    with pytest.raises(redis.exceptions.ClusterCrossSlotError):
        rc.execute_command("MSET", "a", "1", "b", "2", target_nodes=node_a)
    rc.close()


def test_redis_py_follows_moved_and_survives_a_node_loss(trio):
    freeze_all(trio)
    rc = RedisCluster(host="127.0.0.1", port=trio.ports[0])
    for u in USERS:
        assert throttle(rc, f"throttle:{{{u}}}")[0] == 0
    # Move slots 10923-13000 from node 3 to node 1 with their keys, as operators do.
    new = [[(0, 5460), (10923, 13000)], [(5461, 10922)], [(13001, 16383)]]
    subprocess.run(
        ["redis-cli", "--cluster", "reshard", f"127.0.0.1:{trio.ports[0]}",
         "--cluster-from", IDS[2], "--cluster-to", IDS[0], "--cluster-slots", "2078", "--cluster-yes"],
        check=True, capture_output=True,
    )
    moved = [u for u in USERS if 10923 <= key_slot(u.encode()) <= 13000]
    assert moved
    # The node that lost the slots answers MOVED; the client follows it.
    first = moved[0]
    slot = key_slot(f"throttle:{{{first}}}".encode())
    with pytest.raises(redis.exceptions.MovedError, match=f"^{slot} 127.0.0.1:{trio.ports[0]}$"):
        trio.direct(2).get(f"throttle:{{{first}}}")
    for u in USERS:
        r = throttle(rc, f"throttle:{{{u}}}")
        # Every limiter remembers: the moved ones moved with their state.
        assert r[2] == 14, (u, r)
    # Kill node 3: its keys fail fast, the other nodes keep answering for theirs.
    trio.kill(2)
    started = time.monotonic()
    for u in USERS:
        on_dead = owner(new, key_slot(u.encode())) == 2
        try:
            rc.incr(f"rate:{{{u}}}:reply")
            assert not on_dead, u
        except (redis.exceptions.ConnectionError, redis.exceptions.ClusterDownError,
                redis.exceptions.TimeoutError):
            assert on_dead, u
    assert time.monotonic() - started < 20
    # It restarts (from its nodes.conf, which has the reshard) and the same client is served
    # again.
    trio.start(2)
    assert "cluster_slots_assigned:16384" in trio.direct(2).execute_command("CLUSTER", "INFO").decode()
    trio.direct(2).execute_command("CLOCK", "FREEZE")
    deadline = time.monotonic() + 10
    for u in USERS:
        while True:
            try:
                assert throttle(rc, f"throttle:{{{u}}}")[0] == 0
                break
            except (redis.exceptions.ConnectionError, redis.exceptions.ClusterDownError):
                assert time.monotonic() < deadline
                time.sleep(0.05)
    rc.close()


def eventually(fn, want, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got == want:
            return
        assert time.monotonic() < deadline, f"still {got!r}, waiting for {want!r}"
        time.sleep(0.02)


# redis-py 5.3+ deprecates `read_from_replicas` for `load_balancing_strategy`; it is the
# setting users have, so it is the one tested.
@pytest.mark.filterwarnings("ignore:Call to '__init__' function with deprecated usage")
def test_redis_py_reads_from_replicas_and_follows_a_failover(tmp_path):
    def with_replica(ports, bus):
        return (
            f"node {IDS[0]} 127.0.0.1:{ports[0]}@{bus[0]} 0-8191\n"
            f"node {IDS[1]} 127.0.0.1:{ports[1]}@{bus[1]} 8192-16383\n"
            f"replica {IDS[2]} 127.0.0.1:{ports[2]}@{bus[2]} {IDS[0]}\n"
        )

    t = Trio(tmp_path / "cluster.map", with_replica)
    try:
        p0, _, p2 = t.ports
        rc = RedisCluster(host="127.0.0.1", port=t.ports[1], read_from_replicas=True)
        replicas = [n.port for n in rc.get_nodes() if n.server_type == "replica"]
        assert replicas == [p2]
        keys = [k for k in (f"k{i}" for i in range(200)) if key_slot(k.encode()) <= 8191][:20]
        for i, k in enumerate(keys):
            assert rc.set(k, i)
        replica = redis.Redis(host="127.0.0.1", port=p2, decode_responses=True)
        replica.execute_command("READONLY")
        eventually(lambda: replica.get(keys[-1]), str(len(keys) - 1))
        for _ in range(3):
            for i, k in enumerate(keys):
                assert rc.get(k) == str(i).encode()
        # The replica served some of those reads (its SETs are the master's stream).
        stats = t.direct(2).info("commandstats")
        assert stats["cmdstat_get"]["calls"] > 0
        assert stats["cmdstat_set"]["calls"] == len(keys)
        assert t.direct(0).info("commandstats")["cmdstat_set"]["calls"] == len(keys)
        assert rc.incr(keys[0]) == 1

        # The replica takes over (Redis's manual failover, over the bus); the others follow;
        # the client follows MOVED.
        assert t.direct(2).execute_command("CLUSTER", "FAILOVER") in (b"OK", "OK", True)

        def moved_to_replica(i):
            try:
                t.direct(i).get(keys[1])
                return False
            except redis.exceptions.MovedError as e:
                return str(e).endswith(f"127.0.0.1:{p2}")

        eventually(lambda: all(moved_to_replica(i) for i in (0, 1)), True)
        assert rc.set(keys[1], "promoted")
        assert t.direct(2).get(keys[1]) == b"promoted"
        old = redis.Redis(host="127.0.0.1", port=p0, decode_responses=True)
        old.execute_command("READONLY")
        eventually(lambda: old.get(keys[1]), "promoted")
        for _ in range(4):
            assert rc.get(keys[1]) == b"promoted"
        rc.close()
    finally:
        t.stop()
