"""A tenant user through redis-py 8 (RESP3 and RESP2), against sluice and a real redis-server
7.0.15 side by side: a user that may only touch `tenant1:*` with the rate limiter's commands
runs them on its keys and gets the same NOPERM errors as from Redis everywhere else. Then
CL.THROTTLE (sluice's own) under the same rules.
"""


import pytest
import redis

LIMITER = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return n
"""

TENANT_RULES = [
    "on", ">tenant-pw", "resetkeys", "~tenant1:*", "resetchannels", "&tenant1:*", "-@all",
    "+incr", "+expire", "+get", "+zadd", "+zrange", "+zremrangebyscore", "+evalsha",
    "+script|load", "+cl.throttle", "+ping", "+publish",
]


def outcome(f):
    """The result, or the error's text (the exception class differs by nothing we test)."""
    try:
        return ("ok", f())
    except redis.ResponseError as e:
        return ("err", str(e))


def tenant_session(port, protocol):
    admin = redis.Redis(port=port, protocol=protocol, decode_responses=True)
    if "cl.throttle" not in [c.lower() for c in admin.command_list()]:
        # Redis has no CL.THROTTLE: the rule would be refused, so leave it out there.
        rules = [r for r in TENANT_RULES if r != "+cl.throttle"]
    else:
        rules = TENANT_RULES
    admin.acl_deluser("tenant1")
    assert admin.execute_command("ACL", "SETUSER", "tenant1", *rules) in ("OK", b"OK", True)
    sha = admin.script_load(LIMITER)
    t = redis.Redis(
        port=port, protocol=protocol, username="tenant1", password="tenant-pw",
        decode_responses=True, driver_info=None,
    )
    out = [
        outcome(lambda: t.acl_whoami()),
        outcome(lambda: t.evalsha(sha, 1, "tenant1:rate", 60)),
        outcome(lambda: t.evalsha(sha, 1, "tenant1:rate", 60)),
        outcome(lambda: t.ttl("tenant1:rate")),
        outcome(lambda: t.incr("tenant1:count")),
        outcome(lambda: t.expire("tenant1:count", 30)),
        outcome(lambda: t.zadd("tenant1:window", {"r1": 1, "r2": 2})),
        outcome(lambda: t.zremrangebyscore("tenant1:window", 0, 1)),
        outcome(lambda: t.zrange("tenant1:window", 0, -1)),
        outcome(lambda: t.publish("tenant1:events", "hi")),
        # Everything else is refused, each with Redis's text.
        outcome(lambda: t.evalsha(sha, 1, "tenant2:rate", 60)),
        outcome(lambda: t.incr("tenant2:count")),
        outcome(lambda: t.get("other")),
        outcome(lambda: t.set("tenant1:x", 1)),
        outcome(lambda: t.flushall()),
        outcome(lambda: t.config_get("maxmemory")),
        outcome(lambda: t.publish("tenant2:events", "hi")),
        outcome(lambda: t.zadd("tenant2:window", {"r": 1})),
        outcome(lambda: t.acl_list()),
    ]
    bad = redis.Redis(
        port=port, protocol=protocol, username="tenant1", password="wrong",
        driver_info=None,
    )
    try:
        bad.ping()
        out.append(("ok", "ping"))
    except redis.AuthenticationError as e:
        out.append(("autherr", str(e)))
    log = admin.acl_log()
    out.append(sorted((e["reason"], e["context"], e["object"], e["username"], e["count"]) for e in log))
    return out, t, admin


@pytest.mark.parametrize("protocol", [3, 2])
def test_a_tenant_user_gets_what_redis_gives(sluice_port, redis_port, protocol):
    ours, t, admin = tenant_session(sluice_port, protocol)
    theirs, _, _ = tenant_session(redis_port, protocol)
    assert ours == theirs
    # Its own rate limit on sluice's CL.THROTTLE: allowed on its keys only.
    assert t.execute_command("CL.THROTTLE", "tenant1:api", 5, 10, 60)[0] == 0
    with pytest.raises(redis.exceptions.NoPermissionError):
        t.execute_command("CL.THROTTLE", "tenant2:api", 5, 10, 60)
    # Deleting the user closes its connections.
    assert admin.acl_deluser("tenant1") == 1
    with pytest.raises((redis.ConnectionError, redis.AuthenticationError)):
        t.ping()
