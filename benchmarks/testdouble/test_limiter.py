"""The 300-test limiter suite: 150 sliding windows in MULTI/EXEC and 150 fixed-window
counters, about 30 commands each, every test on keys of its own and deterministic (the
sliding window is given its times, so no backend needs a movable clock)."""

import pytest

WINDOW_MS = 60_000


def sliding_allow(r, key, now_ms, limit):
    pipe = r.pipeline()  # transaction=True: MULTI ... EXEC
    pipe.zremrangebyscore(key, 0, now_ms - WINDOW_MS)
    pipe.zadd(key, {str(now_ms): now_ms})
    pipe.zcard(key)
    pipe.pexpire(key, WINDOW_MS)
    _, _, count, _ = pipe.execute()
    return count <= limit


def fixed_allow(r, key, limit):
    count = r.incr(key)
    r.expire(key, 60, nx=True)
    return count <= limit


@pytest.mark.parametrize("i", range(150))
def test_sliding_window(r, i):
    start = 1_700_000_000_000 + i
    allowed = [sliding_allow(r, f"hist:{i}", start + 1000 * n, 3) for n in range(5)]
    assert allowed == [True, True, True, False, False]


@pytest.mark.parametrize("i", range(150))
def test_fixed_window(r, i):
    allowed = [fixed_allow(r, f"rate:{i}", 10) for _ in range(15)]
    assert allowed == [True] * 10 + [False] * 5
