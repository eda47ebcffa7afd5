"""A stream consumer group through redis-py 8 (RESP3 by default, and RESP2), against sluice and
against a real redis-server 7.0.15 side by side: a producer, two consumers in one group, one of
them stalling and the other taking over its pending entries with XAUTOCLAIM, acknowledgements,
and a consumer blocked in XREADGROUP woken by the producer. Every parsed result must be equal.
"""

import threading
import time

import pytest
import redis


def workflow(r):
    """What a job queue on streams does, with the calls redis-py wraps."""
    out = []
    out.append(r.xgroup_create("jobs", "workers", id="$", mkstream=True))
    for i in range(1, 7):
        out.append(r.xadd("jobs", {"job": str(i), "payload": "x" * i}, id=f"{i}-0"))
    out.append(r.xlen("jobs"))
    # Two consumers share the work.
    out.append(r.xreadgroup("workers", "alice", {"jobs": ">"}, count=3))
    out.append(r.xreadgroup("workers", "bob", {"jobs": ">"}, count=2))
    out.append(r.xack("jobs", "workers", "1-0"))
    out.append(r.xpending("jobs", "workers"))
    out.append([(p["message_id"], p["consumer"], p["times_delivered"])
                for p in r.xpending_range("jobs", "workers", "-", "+", 10)])
    # bob stalls: alice claims everything pending with XAUTOCLAIM, then bob's own XCLAIM.
    out.append(r.xautoclaim("jobs", "workers", "alice", 0, start_id="0-0", count=10, justid=True))
    out.append(r.xclaim("jobs", "workers", "bob", 0, ["2-0"]))
    out.append(r.xpending("jobs", "workers"))
    out.append(r.xack("jobs", "workers", "2-0", "3-0", "4-0", "5-0"))
    out.append(r.xreadgroup("workers", "alice", {"jobs": "0"}))
    out.append(r.xinfo_groups("jobs"))
    out.append([(c["name"], c["pending"]) for c in r.xinfo_consumers("jobs", "workers")])
    stream = r.xinfo_stream("jobs")
    out.append({k: v for k, v in stream.items() if k != "radix-tree-nodes"})
    out.append(r.xrange("jobs", "(2-0", "+", count=2))
    out.append(r.xrevrange("jobs", "+", "-", count=1))
    out.append(r.xtrim("jobs", maxlen=3, approximate=False))
    out.append(r.xdel("jobs", "6-0", "9-0"))
    # A consumer blocked on the group, woken by the producer on another connection.
    result = {}
    blocked = redis.Redis(port=r.connection_pool.connection_kwargs["port"],
                          protocol=r.connection_pool.connection_kwargs.get("protocol", 3))

    def consume():
        result["got"] = blocked.xreadgroup("workers", "carol", {"jobs": ">"}, count=5, block=5000)

    t = threading.Thread(target=consume)
    t.start()
    deadline = time.monotonic() + 5
    while r.info("clients")["blocked_clients"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    out.append(r.xadd("jobs", {"job": "late"}, id="7-0"))
    t.join(timeout=5)
    out.append(result.get("got"))
    blocked.close()
    out.append(r.type("jobs"))
    for bad in (
        lambda: r.xadd("jobs", {"f": "v"}, id="1-0"),
        lambda: r.xreadgroup("nogroup", "x", {"jobs": ">"}),
        lambda: r.xgroup_create("jobs", "workers", id="$"),
    ):
        with pytest.raises(redis.ResponseError) as err:
            bad()
        out.append(str(err.value))
    return out


@pytest.mark.parametrize("protocol", [3, 2])
def test_stream_consumer_group_matches_redis(sluice_port, redis_port, protocol):
    got = workflow(redis.Redis(port=sluice_port, protocol=protocol))
    want = workflow(redis.Redis(port=redis_port, protocol=protocol))
    assert got == want
    # Not vacuous: alice claimed every pending entry (bob's too), and carol was woken.
    assert got[13] == [b"2-0", b"3-0", b"4-0", b"5-0"]
    assert b"late" in repr(got[-5]).encode()
