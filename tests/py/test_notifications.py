"""Keyspace notifications through redis-py: a `pubsub()` listener on `__keyspace@0__:*` sees
SET, EXPIRE, DEL and an expiry (driven by the test clock), in RESP3 (redis-py 8's default)
and RESP2."""

import time

import pytest
import redis


def _next_message(p, timeout=2.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = p.get_message(timeout=0.1)
        if m is not None:
            return m
    raise AssertionError("no message within the timeout")


@pytest.mark.parametrize("protocol", [3, 2])
def test_keyspace_listener_sees_writes_and_expiry(sluice_port, protocol):
    r = redis.Redis(host="127.0.0.1", port=sluice_port, protocol=protocol)
    assert r.config_set("notify-keyspace-events", "KEA")
    assert r.config_get("notify-keyspace-events") == {"notify-keyspace-events": "AKE"}
    p = r.pubsub()
    p.psubscribe("__keyspace@0__:*")
    assert _next_message(p)["type"] == "psubscribe"

    def event():
        m = _next_message(p)
        assert m["type"] == "pmessage" and m["pattern"] == b"__keyspace@0__:*", m
        return m["channel"], m["data"]

    r.execute_command("CLOCK", "FREEZE")
    r.set("rate:u1", 1)
    assert event() == (b"__keyspace@0__:rate:u1", b"set")
    r.expire("rate:u1", 60)
    assert event() == (b"__keyspace@0__:rate:u1", b"expire")
    r.delete("rate:u1")
    assert event() == (b"__keyspace@0__:rate:u1", b"del")

    # An expiry: the clock moves past the deadline and the key is reaped.
    r.set("rate:u2", 1, px=500)
    assert event() == (b"__keyspace@0__:rate:u2", b"set")
    assert event() == (b"__keyspace@0__:rate:u2", b"expire")
    r.execute_command("CLOCK", "ADVANCE", 501)
    assert event() == (b"__keyspace@0__:rate:u2", b"expired")
    assert r.exists("rate:u2") == 0
    assert p.get_message(timeout=0.1) is None
    p.close()
