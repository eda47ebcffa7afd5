"""Seed workloads from redis-py 8 with default settings (RESP3): W1's transactional pipeline,
W5's WATCH funnel and CL.THROTTLE, in MULTI/EXEC and from redis-cli, at chosen timestamps."""

import subprocess
import threading

import redis


def clock(r, *args):
    return r.execute_command("CLOCK", *args)


def w1_call(r, key, now_ms, period_s=60, limit=5):
    pipe = r.pipeline()  # transaction=True: MULTI … EXEC
    pipe.zadd(key, {str(now_ms): now_ms})
    pipe.zremrangebyscore(key, 0, now_ms - period_s * 1000)
    pipe.zcard(key)
    pipe.expire(key, period_s + 1)
    added, _, count, expire_set = pipe.execute()
    assert added in (0, 1) and expire_set is True
    return count <= limit, count


def test_w1_twenty_calls_five_allowed(sluice_port):
    r = redis.Redis(port=sluice_port)
    t0 = clock(r, "FREEZE")
    results = []
    for i in range(20):
        clock(r, "SET", t0 + i)
        results.append(w1_call(r, "hist:Harry:reply", t0 + i))
        assert r.ttl("hist:Harry:reply") == 61  # refreshed by every call
    assert [ok for ok, _ in results] == [True] * 5 + [False] * 15
    # Same millisecond again: ZADD adds nothing, the count stays at 20.
    assert w1_call(r, "hist:Harry:reply", t0 + 19) == (False, 20)
    clock(r, "ADVANCE", 61_001)
    assert r.exists("hist:Harry:reply") == 0
    assert w1_call(r, "hist:Harry:reply", t0 + 61_020) == (True, 1)


def test_w5_funnel_with_watch_retries(sluice_port):
    capacity = 30

    def worker(out):
        r = redis.Redis(port=sluice_port)
        allowed = 0
        for _ in range(10):
            with r.pipeline() as pipe:
                while True:
                    try:
                        pipe.watch("funnel")
                        left = pipe.hget("funnel", "left")
                        left = capacity if left is None else int(left)
                        pipe.multi()
                        pipe.hset("funnel", "left", max(left - 1, 0))
                        pipe.execute()
                        allowed += left > 0
                        break
                    except redis.WatchError:
                        continue
        out.append(allowed)

    results = []
    threads = [threading.Thread(target=worker, args=(results,)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sum(results) == capacity  # 80 attempts, exactly the capacity admitted
    assert redis.Redis(port=sluice_port).hget("funnel", "left") == b"0"


def test_cl_throttle_in_multi_exec_and_from_redis_cli(sluice_port):
    r = redis.Redis(port=sluice_port)
    clock(r, "FREEZE")
    pipe = r.pipeline()
    for _ in range(3):
        pipe.execute_command("CL.THROTTLE", b"bin\x00key", 1, 1, 60)
    assert pipe.execute() == [[0, 2, 1, -1, 60], [0, 2, 0, -1, 120], [1, 2, 0, 60, 120]]
    out = subprocess.run(
        ["redis-cli", "-p", str(sluice_port), "cl.throttle", "laoqian:reply", "15", "30", "60", "1"],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    assert out == ["0", "16", "15", "-1", "2"]
    batch = "MULTI\nCL.THROTTLE cli:key 0 1 60\nCL.THROTTLE cli:key 0 1 60\nEXEC\n"
    out = subprocess.run(["redis-cli", "-p", str(sluice_port)], input=batch, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["OK", "QUEUED", "QUEUED", "0", "1", "0", "-1", "60", "1", "1", "0", "60", "60"]
