"""Redis Sentinel manages sluice: three sentinels (Debian's redis-server in sentinel mode)
monitor a sluice master with two sluice replicas; the master is killed; the sentinels
promote a replica and repoint the other, and a redis-py client that asks the sentinels for
the master keeps counting (INCR) across the failover.

Short sentinel timeouts (down-after 500 ms, failover-timeout 2000 ms) keep it to seconds;
every wait is bounded.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
import redis
from redis.sentinel import Sentinel

ROOT = Path(__file__).resolve().parents[2]
SLUICE_BIN = Path(os.environ.get("SLUICE_BIN", ROOT / "target" / "debug" / "sluice"))
READY = re.compile(r"sluice listening on 127\.0\.0\.1:(\d+)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_sluice(procs, *args):
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [str(SLUICE_BIN), "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=log,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    procs.append(proc)
    line = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(10)
    match = READY.search(line[0]) if line else None
    if match is None:
        pytest.fail(f"sluice did not start: {line!r}")
    return proc, int(match.group(1))


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


def test_sentinels_fail_over_a_sluice_master(tmp_path):
    if not SLUICE_BIN.is_file():
        pytest.fail(f"{SLUICE_BIN} does not exist: run `cargo build` first")
    server = shutil.which("redis-server")
    if server is None:
        pytest.fail("redis-server is not on PATH (Debian: apt-get install redis-server)")
    procs = []
    try:
        master, mport = start_sluice(procs)
        _, r1 = start_sluice(procs, "--replicaof", "127.0.0.1", str(mport))
        _, r2 = start_sluice(procs, "--replicaof", "127.0.0.1", str(mport))
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
                "sentinel down-after-milliseconds m 500\n"
                "sentinel failover-timeout m 2000\n"
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
        before = 0
        for _ in range(50):
            client.incr("decisions")
            before += 1
        # Let the replicas take the last increments (asynchronous replication).
        assert m.wait(2, 2000) == 2

        master.send_signal(signal.SIGKILL)
        master.wait()

        after = 0
        errors = 0
        deadline = time.monotonic() + 40
        while after < 50 and time.monotonic() < deadline:
            try:
                client.incr("decisions")
                after += 1
            except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError,
                    redis.sentinel.MasterNotFoundError):
                errors += 1
                time.sleep(0.1)
        assert after == 50, f"only {after} increments after the failover ({errors} errors)"

        host, port = sentinel.discover_master("m")
        assert (host, port) in {("127.0.0.1", r1), ("127.0.0.1", r2)}
        new = redis.Redis(port=port, protocol=2)
        other = r2 if port == r1 else r1
        assert new.role()[0] == b"master"
        assert int(new.get("decisions")) == before + after
        o = redis.Redis(port=other, protocol=2)

        def repointed():
            role = o.role()
            return role[0] == b"slave" and role[2] == port and role[3] == b"connected"

        until("the other replica follows the new master", repointed)
        until(
            "the other replica has every decision",
            lambda: o.get("decisions") == str(before + after).encode(),
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
