"""The rate limiters Redis's newer primitives make short, run end to end from redis-py with
the test clock moved over the wire (docs/newer-commands.md shows each next to the
pattern it replaces):

- a fixed window on INCREX (Redis 8.8): one command counts, caps and starts the window;
- a sliding log on per-field TTLs (Redis 7.4 / 8.0): one hash per client, a field per
  request that expires on its own, so the count is the hash's length;
- a lock-free token bucket on SET IFEQ (Redis 8.4): read, compute, compare-and-set.

Also: RESP3 connections made by redis-py (which sends CLIENT MAINT_NOTIFICATIONS where it
is set up to) work, and the commands answer in both protocols.
"""

import redis
from redis.commands.core import HashDataPersistOptions

WINDOW_MS = 60_000


def client(port, protocol=2):
    return redis.Redis(port=port, protocol=protocol, decode_responses=True)


def clock(r, *args):
    return r.execute_command("CLOCK", *args)


def fixed_window_allow(r, user, limit, window_s):
    """One INCREX: +1 capped at `limit`, the window's TTL set only when it starts (ENX)."""
    _, applied = r.increx(f"rl:{user}", byint=1, ubound=limit, ex=window_s, enx=True)
    return applied == 1


def test_fixed_window_on_increx(sluice_port):
    r = client(sluice_port)
    clock(r, "FREEZE")
    allowed = [fixed_window_allow(r, "ann", 3, 60) for _ in range(5)]
    assert allowed == [True, True, True, False, False]
    assert r.ttl("rl:ann") == 60
    # A refused request did not push the window forward (ENX), nor the count past the cap.
    assert r.get("rl:ann") == "3"
    clock(r, "ADVANCE", 30_000)
    assert not fixed_window_allow(r, "ann", 3, 60)
    assert r.ttl("rl:ann") == 30
    clock(r, "ADVANCE", 30_001)
    assert r.exists("rl:ann") == 0
    assert fixed_window_allow(r, "ann", 3, 60)
    assert r.ttl("rl:ann") == 60
    # Another user has their own window.
    assert fixed_window_allow(r, "bob", 3, 60)


def sliding_log_allow(r, user, request_id, limit, window_ms):
    """A hash per user, one field per request, each expiring `window_ms` after it was made."""
    key = f"log:{user}"
    if r.hlen(key) >= limit:
        return False
    # FNX: a replayed request id is not counted twice.
    return r.hsetex(key, request_id, 1, px=window_ms, data_persist_option=HashDataPersistOptions.FNX) == 1


def test_sliding_log_on_field_ttls(sluice_port):
    r = client(sluice_port)
    clock(r, "FREEZE")
    assert sliding_log_allow(r, "ann", "r1", 2, WINDOW_MS)
    clock(r, "ADVANCE", 20_000)
    assert sliding_log_allow(r, "ann", "r2", 2, WINDOW_MS)
    assert not sliding_log_allow(r, "ann", "r3", 2, WINDOW_MS)
    assert r.hpttl("log:ann", "r1", "r2") == [40_000, 60_000]
    # r1 expires 60 s after it was made: the reaper deletes the field, HLEN drops, and one
    # more request fits, all in one key.
    clock(r, "ADVANCE", 40_001)
    assert r.hlen("log:ann") == 1
    assert sliding_log_allow(r, "ann", "r3", 2, WINDOW_MS)
    assert sorted(r.hkeys("log:ann")) == ["r2", "r3"]
    # When the last field expires the key goes with it.
    clock(r, "ADVANCE", WINDOW_MS + 1)
    assert r.exists("log:ann") == 0


def test_field_ttl_commands_from_redis_py(sluice_port):
    for protocol in (2, 3):
        r = client(sluice_port, protocol)
        r.delete("h")
        clock(r, "FREEZE")
        r.hset("h", mapping={"tokens": 10, "ts": 1})
        assert r.hexpire("h", 100, "tokens", "nofield") == [1, -2]
        assert r.httl("h", "tokens", "ts") == [100, -1]
        assert r.hpersist("h", "tokens") == [1]
        assert r.hgetex("h", "tokens", "ts", px=5_000) == ["10", "1"]
        assert r.hpexpiretime("h", "ts")[0] == r.hpexpiretime("h", "tokens")[0]
        assert r.hgetdel("h", "ts") == ["1"]
        clock(r, "ADVANCE", 5_001)
        assert r.exists("h") == 0


def token_bucket_take(r, key, capacity, per_ms, now_ms, tries=8):
    """A token bucket stored as "tokens:timestamp", updated with compare-and-set: no Lua,
    no WATCH; a concurrent update makes SET IFEQ fail and the loop read again."""
    for _ in range(tries):
        old = r.get(key)
        tokens, ts = (capacity, now_ms) if old is None else map(int, old.split(":"))
        tokens = min(capacity, tokens + (now_ms - ts) // per_ms)
        if tokens == 0:
            return False
        new = f"{tokens - 1}:{now_ms}"
        done = r.set(key, new, nx=True) if old is None else r.set(key, new, ifeq=old)
        if done:
            return True
    return False


def test_lock_free_token_bucket_on_set_ifeq(sluice_port):
    r = client(sluice_port)
    now = int(clock(r, "FREEZE"))
    assert [token_bucket_take(r, "tb", 2, 1_000, now) for _ in range(3)] == [True, True, False]
    # A writer that read the old value loses its compare-and-set.
    seen = r.get("tb")
    r.set("tb", f"1:{now}")
    assert r.set("tb", "9:0", ifeq=seen) is None
    assert r.get("tb") == f"1:{now}"
    # DIGEST / IFDEQ: the same check with 16 hex digits instead of the value.
    digest = r.digest("tb")
    assert len(digest) == 16
    assert r.delex("tb", ifdeq=digest) == 1
    assert token_bucket_take(r, "tb", 2, 1_000, now + 5_000)


def test_increx_and_msetex_replies_in_both_protocols(sluice_port):
    for protocol in (2, 3):
        r = client(sluice_port, protocol)
        r.set("f", "1.5")
        new, applied = r.increx("f", byfloat="0.25")
        assert (float(new), float(applied)) == (1.75, 0.25)
        assert r.msetex({"a": 1, "b": 2}, ex=100) == 1
        assert r.ttl("b") == 100


def test_resp3_connect_handshake_is_accepted(sluice_port):
    r = client(sluice_port, 3)
    assert r.execute_command("CLIENT", "MAINT_NOTIFICATIONS", "ON") in ("OK", True)
    assert r.execute_command(
        "CLIENT", "MAINT_NOTIFICATIONS", "ON", "moving-endpoint-type", "none"
    ) in ("OK", True)
    assert r.ping()


def test_valkey_delifeq_and_increx_nx_xx(sluice_port):
    """Valkey 9.0's DELIFEQ releases a lock only for its owner; Valkey 9.2's INCREX NX/XX
    count only a new or only an existing key (tests/diff/valkey_9.txt has the replies)."""
    for protocol in (2, 3):
        r = client(sluice_port, protocol)
        r.delete("lock:py", "once:py")
        assert r.set("lock:py", "owner-a", nx=True, px=5000)
        assert r.execute_command("DELIFEQ", "lock:py", "owner-b") == 0
        assert r.execute_command("DELIFEQ", "lock:py", "owner-a") == 1
        assert r.exists("lock:py") == 0
        assert r.execute_command("INCREX", "once:py", "XX") == [0, 0]
        assert r.execute_command("INCREX", "once:py", "NX", "EX", 60) == [1, 1]
        assert r.execute_command("INCREX", "once:py", "NX") == [1, 0]
        assert r.ttl("once:py") == 60
