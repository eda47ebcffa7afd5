"""`SluiceServer.client`'s connection class (python/sluice_server/_connection.py): a real
`redis.Redis` whose connections poll for a reply for a bounded time before they sleep. What a
test sees must be redis-py's: replies, errors, transactions, pub/sub, a dropped connection;
and the polling must stay within its budget."""

import time

import pytest
import redis

from sluice_server import SluiceServer, _connection


def _checkout(pool):
    """A connection from `pool` (redis-py before 5.3 needs a command name, 5.3 and later
    deprecate it)."""
    try:
        return pool.get_connection()
    except TypeError:
        return pool.get_connection("PING")


@pytest.fixture(scope="module")
def server():
    with SluiceServer() as s:
        yield s


def test_replies_and_errors_are_redis_pys(server):
    r = server.client
    assert type(r) is redis.Redis
    conn = _checkout(r.connection_pool)
    assert isinstance(conn, _connection.PollingUnixConnection)
    r.connection_pool.release(conn)
    # The pool's arguments are those of a client made from the same address, the driver
    # information its connections send (CLIENT SETINFO) included.
    plain = redis.Redis(unix_socket_path=server.unix_socket, decode_responses=True)
    mine = dict(r.connection_pool.connection_kwargs)
    theirs = dict(plain.connection_pool.connection_kwargs)
    for kwargs in (mine, theirs):
        info = kwargs.pop("driver_info", None)
        kwargs["driver"] = (info.formatted_name, info.lib_version) if info else None
        # Objects every client gets a new one of.
        for key in ("retry", "maint_notifications_config", "himport_registry"):
            kwargs[key] = type(kwargs.get(key))
    assert mine == theirs
    plain.close()
    assert r.set("k", "v") is True
    assert r.get("k") == "v"
    with pytest.raises(redis.ResponseError, match="^unknown command 'NOPE'"):
        r.execute_command("NOPE")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.lpush("k", "x")
    pipe = r.pipeline()
    pipe.incr("n").incr("n").get("n")
    assert pipe.execute() == [1, 2, "2"]
    assert r.delete("k", "n") == 2


def test_pub_sub_with_a_timeout_reads_as_redis_py_does(server):
    r = server.client
    p = r.pubsub()
    p.subscribe("ch")
    assert p.get_message(timeout=1)["type"] == "subscribe"
    assert p.get_message(timeout=0.05) is None
    r.publish("ch", "hi")
    assert p.get_message(timeout=1)["data"] == "hi"
    p.close()


class _Yields:
    """Counts the polling loop's yields between two polls."""

    def __init__(self):
        self.count = 0

    def __call__(self):
        self.count += 1


def test_a_slow_reply_is_polled_for_only_the_budget(server, monkeypatch):
    r = server.client
    conn = _checkout(r.connection_pool)  # connected, its handshake read
    try:
        conn.send_command("BLPOP", "nothing", "0.3")
        # A clock that moves 1 µs per reading: the budget is then 100 readings, whatever
        # the machine's load.
        ticks = iter(range(0, 10**12, 1000))
        monkeypatch.setattr(_connection, "_now", lambda: next(ticks))
        yields = _Yields()
        monkeypatch.setattr(_connection.os, "sched_yield", yields)
        started = time.monotonic()
        assert conn.read_response() is None
        assert time.monotonic() - started >= 0.25
    finally:
        r.connection_pool.release(conn)
    # One yield per poll that found nothing, within the budget; without the bound the
    # loop would poll for the whole 0.3 s.
    assert 0 < yields.count <= _connection.SPIN_NS // 1000


def test_replies_already_read_are_not_polled_for(server, monkeypatch):
    r = server.client
    pipe = r.pipeline(transaction=False)
    for _ in range(2000):
        pipe.ping()
    yields = _Yields()
    monkeypatch.setattr(_connection.os, "sched_yield", yields)
    assert pipe.execute() == [True] * 2000
    # The first reply may be polled for; each later one is in redis-py's buffer already,
    # and polling the socket for it would spend the budget 2,000 times.
    assert yields.count < 1000


def test_can_read_sees_pending_data_and_a_dropped_connection(server):
    r = server.client
    conn = _checkout(r.connection_pool)
    try:
        assert conn.can_read() is False
        conn.send_command("PING")
        deadline = time.monotonic() + 5
        while not conn.can_read() and time.monotonic() < deadline:
            pass
        assert conn.can_read() is True
        assert conn.read_response() in ("PONG", b"PONG")
        assert conn.can_read() is False
    finally:
        r.connection_pool.release(conn)
    me = r.client_id()
    with redis.Redis.from_url(server.url) as other:
        assert other.client_kill_filter(_id=me) == 1
    # The pool sees the closed connection on checkout and connects again.
    assert r.ping() is True
    assert r.client_id() != me


def test_over_tcp_too(server):
    r = _connection.client(unix_socket=None, host=server.host, port=server.port)
    try:
        conn = _checkout(r.connection_pool)
        assert isinstance(conn, _connection.PollingConnection)
        r.connection_pool.release(conn)
        assert r.set("tcp", "1") is True
        assert server.client.get("tcp") == "1"
        assert r.delete("tcp") == 1
    finally:
        r.close()
