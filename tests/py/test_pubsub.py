"""redis-py's pub/sub against sluice: `pubsub()` in RESP3 (redis-py 8's default) and RESP2,
pattern subscriptions, and PUBSUB introspection from a second client."""

import time

import redis


def _next_message(p, timeout=2.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = p.get_message(timeout=0.1)
        if m is not None:
            return m
    raise AssertionError("no message within the timeout")


def _check_pubsub(port, protocol):
    r = redis.Redis(host="127.0.0.1", port=port, protocol=protocol)
    p = r.pubsub()
    p.subscribe("news")
    assert _next_message(p) == {"type": "subscribe", "pattern": None, "channel": b"news", "data": 1}
    p.psubscribe("n*")
    assert _next_message(p)["type"] == "psubscribe"
    assert r.publish("news", "hello") == 2
    m1, m2 = _next_message(p), _next_message(p)
    assert m1 == {"type": "message", "pattern": None, "channel": b"news", "data": b"hello"}
    assert m2 == {"type": "pmessage", "pattern": b"n*", "channel": b"news", "data": b"hello"}
    assert r.pubsub_numsub("news") == [(b"news", 1)]
    assert r.pubsub_numpat() == 1
    assert r.pubsub_channels() == [b"news"]
    p.unsubscribe("news")
    assert _next_message(p)["type"] == "unsubscribe"
    p.punsubscribe()
    assert _next_message(p)["type"] == "punsubscribe"
    assert r.publish("news", "x") == 0
    p.close()


def test_pubsub_resp3(sluice_port):
    _check_pubsub(sluice_port, 3)


def test_pubsub_resp2(sluice_port):
    _check_pubsub(sluice_port, 2)


def test_pubsub_listen_in_a_thread(sluice_port):
    r = redis.Redis(host="127.0.0.1", port=sluice_port)
    got = []
    p = r.pubsub()
    p.subscribe(**{"events": lambda m: got.append(m["data"])})
    t = p.run_in_thread(sleep_time=0.01)
    try:
        deadline = time.monotonic() + 2
        while r.pubsub_numsub("events") != [(b"events", 1)] and time.monotonic() < deadline:
            time.sleep(0.01)
        for i in range(5):
            r.publish("events", str(i))
        deadline = time.monotonic() + 2
        while len(got) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        t.stop()
        t.join(2)
    assert got == [b"0", b"1", b"2", b"3", b"4"]
