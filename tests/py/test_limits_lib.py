"""The Python `limits` library (behind Flask-Limiter and slowapi) limiting against sluice.

`limits` sends every hit as EVALSHA of its own Lua scripts (SCRIPT LOAD on NOSCRIPT) through
redis-py, unchanged; only the address is ours. Fixed windows and sliding window counters live
in server-side TTLs, so the tests move sluice's clock (`CLOCK ADVANCE`) instead of sleeping;
the moving window stamps entries with the client's `time.time()`, which the test replaces
with a clock it moves.
"""

import pytest
import redis
from limits import parse, storage, strategies
import limits.storage.redis as limits_redis


@pytest.fixture
def store(sluice_port):
    s = storage.RedisStorage(f"redis://127.0.0.1:{sluice_port}")
    yield s


@pytest.fixture
def admin(sluice_port):
    client = redis.Redis(port=sluice_port, decode_responses=True)
    client.execute_command("CLOCK", "FREEZE")
    yield client
    client.close()


def test_fixed_window(store, admin):
    limiter = strategies.FixedWindowRateLimiter(store)
    five_per_minute = parse("5/minute")
    assert [limiter.hit(five_per_minute, "user1") for _ in range(7)] == [True] * 5 + [False] * 2
    assert not limiter.test(five_per_minute, "user1")
    assert limiter.get_window_stats(five_per_minute, "user1").remaining == 0
    # Another identity has its own window.
    assert limiter.hit(five_per_minute, "user2")
    admin.execute_command("CLOCK", "ADVANCE", 30_000)
    assert not limiter.hit(five_per_minute, "user1")
    admin.execute_command("CLOCK", "ADVANCE", 30_001)  # the window (the key's TTL) is over
    assert limiter.test(five_per_minute, "user1")
    assert limiter.get_window_stats(five_per_minute, "user1").remaining == 5
    assert [limiter.hit(five_per_minute, "user1") for _ in range(6)] == [True] * 5 + [False]
    # Cost > 1 and clearing.
    limiter.clear(five_per_minute, "user1")
    assert limiter.hit(five_per_minute, "user1", cost=5)
    assert not limiter.hit(five_per_minute, "user1")


def test_moving_window(store, admin, monkeypatch):
    now = [1_000_000.0]

    class FakeTime:
        @staticmethod
        def time():
            return now[0]

    monkeypatch.setattr(limits_redis, "time", FakeTime)
    limiter = strategies.MovingWindowRateLimiter(store)
    five_per_minute = parse("5/minute")
    hits = []
    for _ in range(5):
        hits.append(limiter.hit(five_per_minute, "user1"))
        now[0] += 1  # hits at t, t+1, ..., t+4
    assert hits == [True] * 5
    assert not limiter.hit(five_per_minute, "user1")
    assert limiter.get_window_stats(five_per_minute, "user1").remaining == 0
    now[0] = 1_000_000.0 + 59.5
    assert not limiter.hit(five_per_minute, "user1"), "the first hit is still inside the window"
    now[0] = 1_000_000.0 + 60.5  # the first hit left the window, the others have not
    assert limiter.hit(five_per_minute, "user1")
    assert not limiter.hit(five_per_minute, "user1")
    now[0] = 1_000_000.0 + 200
    assert limiter.get_window_stats(five_per_minute, "user1").remaining == 5
    assert [limiter.hit(five_per_minute, "user1") for _ in range(6)] == [True] * 5 + [False]


def test_sliding_window_counter(store, admin):
    limiter = strategies.SlidingWindowCounterRateLimiter(store)
    five_per_minute = parse("5/minute")
    assert [limiter.hit(five_per_minute, "user1") for _ in range(6)] == [True] * 5 + [False]
    assert not limiter.test(five_per_minute, "user1")
    # Half-way through the next window the previous one still weighs half: floor(5 * 0.5) = 2,
    # so 3 more hits fit.
    admin.execute_command("CLOCK", "ADVANCE", 90_000)
    assert [limiter.hit(five_per_minute, "user1") for _ in range(4)] == [True] * 3 + [False]
    # Two windows later nothing is left of either.
    admin.execute_command("CLOCK", "ADVANCE", 150_000)
    assert limiter.test(five_per_minute, "user1")
    assert [limiter.hit(five_per_minute, "user1") for _ in range(6)] == [True] * 5 + [False]


def test_reset_deletes_every_limit_key(store, admin):
    fixed = strategies.FixedWindowRateLimiter(store)
    sliding = strategies.SlidingWindowCounterRateLimiter(store)
    for who in ("a", "b", "c"):
        assert fixed.hit(parse("1/hour"), who)
        assert sliding.hit(parse("1/hour"), who)
    admin.set("not-a-limit", "kept")
    assert store.reset() == 6  # KEYS LIMITS:* + DEL, inside one script
    assert admin.keys("LIMITS:*") == []
    assert admin.get("not-a-limit") == "kept"
    assert fixed.hit(parse("1/hour"), "a")


def test_scripts_are_reloaded_after_script_flush(store, admin):
    limiter = strategies.FixedWindowRateLimiter(store)
    assert limiter.hit(parse("2/minute"), "u")
    admin.script_flush()
    # redis-py gets NOSCRIPT, loads the script again and retries.
    assert limiter.hit(parse("2/minute"), "u")
    assert not limiter.hit(parse("2/minute"), "u")
    assert store.check()
