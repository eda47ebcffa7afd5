"""Redis Sentinel manages sluice: three sentinels (Debian's redis-server in sentinel mode)
monitor a sluice master with two sluice replicas, each node started from its own config
file. The master is killed (SIGKILL); the sentinels promote a replica and repoint the other,
and a redis-py client that asks the sentinels for the master keeps counting (INCR) across the
failover without losing a count. Sentinel's CONFIG REWRITE leaves each node's file naming its
new master, so a replica restarted from it comes back following the right node. Then the
killed master is started again on its port, empty and a master by its own account: the
sentinels turn it into a replica of the new master, which gives it every count, while the
client keeps counting.

Timing. `down-after-milliseconds` is 2000, not less: after a switch of master a sentinel
closes its links and may wait up to its 1 s reconnection period before it sends the new
master its first PING, while the clock of `down-after` starts at the switch. With 500 ms the
sentinels regularly marked the master they had just promoted as down and failed over a
second time, redis-server nodes as much as sluice ones; a count written to the first
promoted node in between was then lost. Set
SENTINEL_TEST_SERVER=redis to run the same scenario on redis-server nodes.
"""

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
import redis
from redis.sentinel import Sentinel

ROOT = Path(__file__).resolve().parents[2]
SLUICE_BIN = Path(os.environ.get("SLUICE_BIN", ROOT / "target" / "debug" / "sluice"))
KIND = os.environ.get("SENTINEL_TEST_SERVER", "sluice")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def until(what, f, timeout=20.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            if f():
                return
        except (redis.RedisError, OSError) as e:
            last = e
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for: {what} (last error: {last})")


class Nodes:
    """The data nodes (sluice, or redis-server with SENTINEL_TEST_SERVER=redis), each with
    a config file and a log in tmp_path."""

    def __init__(self, tmp_path, procs):
        self.tmp = tmp_path
        self.procs = procs

    def start(self, name, port, replicaof=None):
        conf = self.tmp / f"{name}.conf"
        if not conf.exists():
            lines = [f"port {port}", "bind 127.0.0.1", f"logfile {self.tmp / (name + '.log')}"]
            if replicaof is not None:
                lines.append(f"replicaof 127.0.0.1 {replicaof}")
            if KIND == "redis":
                lines += ['save ""', "appendonly no", f"dbfilename {name}.rdb",
                          "repl-diskless-sync-delay 0"]
            conf.write_text("\n".join(lines) + "\n")
        if KIND == "redis":
            argv = [shutil.which("redis-server"), str(conf), "--dir", str(self.tmp)]
        else:
            argv = [str(SLUICE_BIN), str(conf), "--dir", str(self.tmp)]
        with open(self.tmp / f"{name}.stderr", "ab") as err:
            proc = subprocess.Popen(
                argv, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL
            )
        self.procs.append(proc)
        until(f"{name} answers PING", lambda: redis.Redis(port=port, socket_timeout=1).ping(), 10)
        return proc


def test_sentinels_fail_over_a_sluice_master_that_rejoins_as_a_replica(tmp_path):
    if KIND != "redis" and not SLUICE_BIN.is_file():
        pytest.fail(f"{SLUICE_BIN} does not exist: run `cargo build` first")
    server = shutil.which("redis-server")
    if server is None:
        pytest.fail("redis-server is not on PATH (Debian: apt-get install redis-server)")
    procs = []
    try:
        nodes = Nodes(tmp_path, procs)
        mport, r1, r2 = free_port(), free_port(), free_port()
        master = nodes.start("master", mport)
        replicas = {
            r1: nodes.start("replica1", r1, replicaof=mport),
            r2: nodes.start("replica2", r2, replicaof=mport),
        }
        m = redis.Redis(port=mport, protocol=2)
        until("both replicas attach", lambda: m.info("replication")["connected_slaves"] == 2)

        sports = []
        for i in range(3):
            port = free_port()
            conf = tmp_path / f"sentinel{i}.conf"
            conf.write_text(
                f"port {port}\n"
                "bind 127.0.0.1\n"
                "daemonize no\n"
                f"dir {tmp_path}\n"
                f"logfile {tmp_path / f'sentinel{i}.log'}\n"
                f"sentinel monitor m 127.0.0.1 {mport} 2\n"
                "sentinel down-after-milliseconds m 2000\n"
                "sentinel failover-timeout m 3000\n"
                "sentinel parallel-syncs m 1\n"
            )
            procs.append(
                subprocess.Popen(
                    [server, str(conf), "--sentinel"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    stdin=subprocess.DEVNULL,
                )
            )
            sports.append(port)

        def sentinels_see_everything():
            for p in sports:
                s = redis.Redis(port=p, protocol=2, socket_timeout=1)
                if len(s.sentinel_slaves("m")) != 2 or len(s.sentinel_sentinels("m")) != 2:
                    return False
            return True

        until("each sentinel knows both replicas and the other sentinels", sentinels_see_everything)

        sentinel = Sentinel([("127.0.0.1", p) for p in sports], socket_timeout=0.5, protocol=2)
        client = sentinel.master_for("m", socket_timeout=0.5, protocol=2)
        # Every INCR answered is a count the master holds: the answers must keep growing
        # (a lost count would show as a repeated or smaller value), and the last one is the
        # value every node ends with. An INCR whose answer was lost (a timeout) may have been
        # applied, so answers may skip values, never go back.
        answers = []

        def count(n, timeout=60):
            done = errors = 0
            deadline = time.monotonic() + timeout
            while done < n and time.monotonic() < deadline:
                try:
                    value = client.incr("decisions")
                except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError,
                        redis.sentinel.MasterNotFoundError):
                    errors += 1
                    time.sleep(0.1)
                    continue
                assert not answers or value > answers[-1], f"count went back: {answers[-1]} -> {value}"
                answers.append(value)
                done += 1
            assert done == n, f"only {done} of {n} increments ({errors} errors)"

        count(50)
        # Let the replicas take the last increments (asynchronous replication).
        assert m.wait(2, 2000) == 2

        master.send_signal(signal.SIGKILL)
        master.wait()
        count(50)

        host, port = sentinel.discover_master("m")
        assert (host, port) in {("127.0.0.1", r1), ("127.0.0.1", r2)}
        new = redis.Redis(port=port, protocol=2)
        other = r2 if port == r1 else r1
        assert new.role()[0] == b"master"
        assert int(new.get("decisions")) == answers[-1]
        o = redis.Redis(port=other, protocol=2)

        def follows(r):
            role = r.role()
            return role[0] == b"slave" and role[2] == port and role[3] == b"connected"

        until("the other replica follows the new master", lambda: follows(o))
        until(
            "the other replica has every decision",
            lambda: o.get("decisions") == str(answers[-1]).encode(),
        )

        # Sentinel wrote the roles into the files (REPLICAOF + CONFIG REWRITE): the other
        # replica's names the new master, the new master's names none.
        other_name = "replica1" if other == r1 else "replica2"
        new_name = "replica1" if port == r1 else "replica2"

        def directives(name):
            lines = (tmp_path / f"{name}.conf").read_text().splitlines()
            return [line for line in lines if line.startswith(("replicaof", "slaveof"))]

        until(
            "the other replica's file names the new master",
            lambda: directives(other_name) == [f"replicaof 127.0.0.1 {port}"],
        )
        until("the new master's file names no master", lambda: directives(new_name) == [])
        # Restarted from its file, the other replica follows the new master at once (before
        # any sentinel could repoint it).
        replicas[other].send_signal(signal.SIGKILL)
        replicas[other].wait()
        nodes.start(other_name, other)
        role = o.role()
        assert role[0] == b"slave" and role[2] == port, role
        until("the restarted replica is connected", lambda: follows(o))
        until(
            "the restarted replica has every decision",
            lambda: o.get("decisions") == str(answers[-1]).encode(),
        )

        # The old master comes back on its port, empty and a master by its own account
        # (its file names no master): the sentinels turn it into a replica of the new one.
        nodes.start("master", mport)
        old = redis.Redis(port=mport, protocol=2)
        rejoined = threading.Event()

        def watch():
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline:
                try:
                    if follows(old):
                        rejoined.set()
                        return
                except (redis.RedisError, OSError):
                    pass
                time.sleep(0.1)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        # Decisions go on while it rejoins; none of them may be lost.
        while watcher.is_alive():
            count(1)
            time.sleep(0.02)
        assert rejoined.is_set(), "the old master never followed the new one"
        count(20)
        assert sentinel.discover_master("m") == ("127.0.0.1", port), "the master moved again"
        assert int(new.get("decisions")) == answers[-1]
        until(
            "the old master has every decision",
            lambda: old.get("decisions") == str(answers[-1]).encode(),
        )
        until(
            "the old master's file names the new master",
            lambda: directives("master") == [f"replicaof 127.0.0.1 {port}"],
        )
        # The sentinels agree: the same master, and both other nodes as its replicas.
        for p in sports:
            s = redis.Redis(port=p, protocol=2, socket_timeout=1, decode_responses=True)
            assert s.sentinel_get_master_addr_by_name("m") == ("127.0.0.1", port)
        until(
            "the new master has both replicas",
            lambda: new.info("replication")["connected_slaves"] == 2,
        )
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
