"""redis-py's blpop/brpop against sluice: a push from another client wakes a blocked pop,
the first client blocked is served first, and CLOCK ADVANCE ends a timeout (no sleeping
through it). Threads are joined with a bound, so a hang fails instead of stalling."""

import threading
import time

import redis

JOIN_TIMEOUT = 5.0


def _client(port):
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=JOIN_TIMEOUT)


def _wait_blocked(r, n):
    deadline = time.monotonic() + JOIN_TIMEOUT
    while r.info("clients")["blocked_clients"] != n:
        assert time.monotonic() < deadline, f"never {n} blocked clients"
        time.sleep(0.005)


def _in_thread(fn):
    out = {}

    def run():
        try:
            out["value"] = fn()
        except Exception as e:  # reported by the caller
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def _result(t, out):
    t.join(JOIN_TIMEOUT)
    assert not t.is_alive(), "the blocked call never returned"
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_blpop_is_woken_by_a_push_first_blocked_first_served(sluice_port):
    pusher = _client(sluice_port)
    first = _in_thread(lambda: _client(sluice_port).blpop(["jobs", "other"], timeout=0))
    _wait_blocked(pusher, 1)
    second = _in_thread(lambda: _client(sluice_port).brpop("jobs", timeout=0))
    _wait_blocked(pusher, 2)
    assert pusher.rpush("jobs", "a", "b", "c") == 3
    assert pusher.llen("jobs") == 1
    assert _result(*first) == (b"jobs", b"a")
    assert _result(*second) == (b"jobs", b"c")
    assert pusher.blpop("jobs", timeout=0) == (b"jobs", b"b")


def test_blpop_timeout_ends_with_clock_advance(sluice_port):
    admin = _client(sluice_port)
    admin.execute_command("CLOCK", "FREEZE")
    waiting = _in_thread(lambda: _client(sluice_port).blpop("empty", timeout=30))
    _wait_blocked(admin, 1)
    admin.execute_command("CLOCK", "ADVANCE", 29_000)
    time.sleep(0.05)
    assert waiting[0].is_alive(), "29 s of 30 ended the wait"
    admin.execute_command("CLOCK", "ADVANCE", 1_000)
    assert _result(*waiting) is None


def test_transaction_and_script_wake_blocked_clients(sluice_port):
    r = _client(sluice_port)
    waiting = _in_thread(lambda: _client(sluice_port).blmove("src", "dst", 0, "LEFT", "RIGHT"))
    _wait_blocked(r, 1)
    pipe = r.pipeline(transaction=True)
    pipe.rpush("src", "x", "y")
    pipe.llen("src")
    assert pipe.execute() == [2, 2]
    assert _result(*waiting) == b"x"
    assert r.lrange("dst", 0, -1) == [b"x"]

    waiting = _in_thread(lambda: _client(sluice_port).bzpopmin("z", timeout=0))
    _wait_blocked(r, 1)
    assert r.eval("redis.call('zadd', KEYS[1], 2, 'b', 1, 'a'); return 1", 1, "z") == 1
    assert _result(*waiting) == (b"z", b"a", 1.0)
