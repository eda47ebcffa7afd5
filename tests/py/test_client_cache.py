"""redis-py 8's client-side cache (`cache_config`, RESP3, CLIENT TRACKING underneath) against
sluice and against a real redis-server 7.0.15 side by side: client A caches what it reads,
client B writes, and A's next read sees B's value, because the server's invalidation push
emptied A's cache entry. Each step's result (values and cache sizes) must be the same on
both servers.

redis-py enables its cache only for a server that reports version 7.4 or later (a check on
the version string: everything it uses, RESP3 and CLIENT TRACKING's invalidation pushes, is
in Redis 7.0). The side-by-side test lowers that gate for both servers; the last test runs
redis-py unchanged against sluice started with `--redis-version 7.4.0`, as a user would.
"""

import subprocess
import tempfile
import time

import pytest
import redis
from redis.cache import CacheConfig
from redis.connection import CacheProxyConnection

from conftest import SLUICE_BIN, free_port, wait_for_ping


def wait_for(predicate, what):
    """Polls `predicate` for up to 2 s (the push is asynchronous to A)."""
    deadline = time.monotonic() + 2
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def cache_workflow(port):
    """What a cached reader sees around another client's writes."""
    a = redis.Redis(port=port, protocol=3, cache_config=CacheConfig(), decode_responses=True)
    b = redis.Redis(port=port, decode_responses=True)
    cache = a.get_cache()
    seen = []
    b.set("user:1", "alice")
    b.hset("h", mapping={"f": "1"})
    seen.append(a.get("user:1"))
    seen.append(a.hget("h", "f"))
    seen.append(("cached after reads", cache.size))
    # A second read is answered from the cache.
    seen.append(a.get("user:1"))
    seen.append(("cached after a repeated read", cache.size))
    # Another client's write reaches A as a push on A's own connection, asynchronously to
    # B's reply (on Redis as on sluice): A may still answer from its cache for a moment.
    b.set("user:1", "bob")
    wait_for(lambda: a.get("user:1") == "bob", "B's SET to reach A's cache")
    seen.append(a.get("user:1"))
    b.hset("h", "f", "2")
    wait_for(lambda: a.hget("h", "f") == "2", "B's HSET to reach A's cache")
    seen.append(a.hget("h", "f"))
    # A's own write invalidates its own entry too.
    a.set("user:1", "carol")
    seen.append(a.get("user:1"))
    # Expiry is a change: the entry goes when the key expires.
    b.set("tmp", "x", px=50)
    seen.append(a.get("tmp"))
    time.sleep(0.2)
    wait_for(lambda: a.get("tmp") is None, "the expiry to reach A's cache")
    seen.append(a.get("tmp"))
    # FLUSHALL invalidates everything A holds.
    seen.append(a.get("user:1"))
    b.flushall()
    wait_for(lambda: a.get("user:1") is None, "the flush to reach A's cache")
    seen.append(a.get("user:1"))
    info = b.info("stats")
    seen.append(("tracking_clients", b.info("clients")["tracking_clients"]))
    seen.append(("tracking_total_prefixes", info["tracking_total_prefixes"]))
    a.close()
    b.close()
    return seen


def test_client_side_cache_is_invalidated_by_another_clients_write(
    sluice_port, redis_port, monkeypatch
):
    monkeypatch.setattr(CacheProxyConnection, "MIN_ALLOWED_VERSION", "7.0.0")
    got = cache_workflow(sluice_port)
    want = cache_workflow(redis_port)
    assert got == want
    # What the workflow proves, spelled out: A cached, and saw each new value.
    assert got[:9] == [
        "alice",
        "1",
        ("cached after reads", 2),
        "alice",
        ("cached after a repeated read", 2),
        "bob",
        "2",
        "carol",
        "x",
    ]
    assert got[9] is None and got[11] is None


def test_tracking_info_fields_follow_the_table(sluice_port, monkeypatch):
    monkeypatch.setattr(CacheProxyConnection, "MIN_ALLOWED_VERSION", "7.0.0")
    a = redis.Redis(port=sluice_port, protocol=3, cache_config=CacheConfig())
    b = redis.Redis(port=sluice_port)
    for i in range(5):
        b.set(f"k{i}", i)
        a.get(f"k{i}")
    stats = b.info("stats")
    assert stats["tracking_total_keys"] == 5
    assert stats["tracking_total_items"] == 5
    assert b.info("clients")["tracking_clients"] == 1
    # The table's bound: past it, keys are invalidated until it holds.
    b.config_set("tracking-table-max-keys", 2)
    b.ping()
    assert b.info("stats")["tracking_total_keys"] <= 2
    a.close()
    wait_for(lambda: b.info("clients")["tracking_clients"] == 0, "A's tracking to end")
    b.close()


def test_unchanged_redis_py_caches_against_sluice_reporting_7_4():
    port = free_port()
    workdir = tempfile.TemporaryDirectory(prefix="sluice-")
    proc = subprocess.Popen(
        [str(SLUICE_BIN), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--dir", workdir.name, "--redis-version", "7.4.0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_ping(port, "sluice")
        seen = cache_workflow(port)
        assert seen[:9] == [
            "alice",
            "1",
            ("cached after reads", 2),
            "alice",
            ("cached after a repeated read", 2),
            "bob",
            "2",
            "carol",
            "x",
        ]
    finally:
        proc.terminate()
        proc.wait(timeout=5)
        workdir.cleanup()
