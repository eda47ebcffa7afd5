"""A fixed-window limiter written as a Redis 7 function, loaded and called through redis-py.

The window lives in the key's TTL, so the test moves sluice's clock (`CLOCK ADVANCE`)
instead of sleeping.
"""

import pytest
import redis

LIBRARY = """#!lua name=ratelimit
local function hit(keys, args)
  local limit = tonumber(args[1])
  local window_ms = tonumber(args[2])
  local count = redis.call('INCR', keys[1])
  if count == 1 then redis.call('PEXPIRE', keys[1], window_ms) end
  if count > limit then return {0, redis.call('PTTL', keys[1])} end
  return {1, limit - count}
end
local function peek(keys, args)
  return tonumber(redis.call('GET', keys[1]) or '0')
end
redis.register_function('fixed_window_hit', hit)
redis.register_function{function_name='fixed_window_peek', callback=peek, flags={'no-writes'}}
"""


@pytest.fixture
def client(sluice_port):
    c = redis.Redis(port=sluice_port)
    c.execute_command("CLOCK", "FREEZE")
    yield c
    c.close()


def test_fixed_window_function(client):
    assert client.function_load(LIBRARY) == b"ratelimit"
    for left in (2, 1, 0):
        assert client.fcall("fixed_window_hit", 1, "rl:user", 3, 1000) == [1, left]
    allowed, retry_ms = client.fcall("fixed_window_hit", 1, "rl:user", 3, 1000)
    assert (allowed, retry_ms) == (0, 1000)
    assert client.fcall_ro("fixed_window_peek", 1, "rl:user") == 4
    with pytest.raises(redis.ResponseError, match="write flag"):
        client.fcall_ro("fixed_window_hit", 1, "rl:user", 3, 1000)
    client.execute_command("CLOCK", "ADVANCE", 1001)  # the window (the key's TTL) is over
    assert client.fcall("fixed_window_hit", 1, "rl:user", 3, 1000) == [1, 2]


def test_function_admin_through_redis_py(client):
    client.function_load(LIBRARY)
    with pytest.raises(redis.ResponseError, match="already exists"):
        client.function_load(LIBRARY)
    assert client.function_load(LIBRARY, replace=True) == b"ratelimit"
    listed = client.function_list(library="rate*")
    assert len(listed) == 1
    payload = client.function_dump()
    assert client.function_flush() is True
    assert client.function_list() == []
    assert client.function_restore(payload) is True
    assert client.fcall("fixed_window_hit", 1, "rl:other", 1, 500) == [1, 0]
    assert client.function_delete("ratelimit") is True
    with pytest.raises(redis.ResponseError, match="Function not found"):
        client.fcall("fixed_window_hit", 1, "rl:other", 1, 500)
