"""Real clients against sluice: redis-py 8 with its default settings (it opens with HELLO 3,
so every reply here is RESP3), and redis-cli.

The rate-limiter workloads W3 and W4 come from /work/shared/specs/seed-workloads.md. They run
on sluice's test clock (`CLOCK FREEZE` / `CLOCK ADVANCE`, the server is started with
--test-mode): every call happens at a timestamp the test chose, window expiry included, and
nothing sleeps through a window. One test checks real-time expiry with an 80 ms PX and a
200 ms sleep.
"""

import subprocess
import time

import pytest
import redis

# ---------------------------------------------------------------------------------------------
# helpers


def client(port, **kwargs):
    """A redis-py client with default settings (plus kwargs)."""
    return redis.Redis(host="127.0.0.1", port=port, **kwargs)


def freeze(r):
    """Freezes sluice's clock; returns the frozen Unix time in ms."""
    return int(r.execute_command("CLOCK", "FREEZE"))


def advance(r, ms):
    r.execute_command("CLOCK", "ADVANCE", ms)


# ---------------------------------------------------------------------------------------------
# redis-py basics


def test_default_client_speaks_resp3(sluice_port):
    r = client(sluice_port)
    hello = r.execute_command("HELLO")
    assert hello[b"proto"] == 3
    assert hello[b"server"] == b"redis"
    assert hello[b"version"] == b"7.0.15"


def test_ping_set_get_incr(sluice_port):
    r = client(sluice_port)
    assert r.ping() is True
    assert r.set("k", "v") is True
    assert r.get("k") == b"v"
    assert r.get("missing") is None
    assert r.set("k", "w", nx=True) is None
    assert r.set("bin", b"\x00\xff\r\n") is True
    assert r.get("bin") == b"\x00\xff\r\n"
    assert r.incr("n") == 1
    assert r.incr("n") == 2
    assert r.incrby("n", 10) == 12
    assert r.decr("n") == 11
    assert r.get("n") == b"11"
    assert r.incrbyfloat("f", 0.1) == 0.1
    assert r.mget("k", "missing", "n") == [b"v", None, b"11"]
    assert r.exists("k", "n", "missing") == 2
    assert r.delete("k", "missing") == 1
    r.set("s", "x")
    try:
        r.incr("s")
    except redis.ResponseError as e:
        assert str(e) == "value is not an integer or out of range"
    else:
        raise AssertionError("INCR of a non-integer succeeded")


def test_ttl_replies(sluice_port):
    r = client(sluice_port)
    r.set("t", "v", ex=100)
    assert r.ttl("t") == 100
    assert r.ttl("missing") == -2
    r.set("p", "v")
    assert r.ttl("p") == -1
    assert r.persist("t") is True
    assert r.ttl("t") == -1


def test_pipeline_and_transaction(sluice_port):
    r = client(sluice_port)
    pipe = r.pipeline(transaction=False)
    pipe.set("a", 1).incr("a").incrby("a", 5).get("a").get("missing")
    assert pipe.execute() == [True, 2, 7, b"7", None]

    pipe = r.pipeline()  # transaction=True: MULTI … EXEC
    pipe.set("b", 1).incr("b").expire("b", 60).ttl("b")
    assert pipe.execute() == [True, 2, True, 60]

    # An error inside EXEC is one element of the reply; raise_on_error=False returns it.
    pipe = r.pipeline()
    pipe.set("s", "x").incr("s").get("s")
    results = pipe.execute(raise_on_error=False)
    assert results[0] is True
    assert isinstance(results[1], redis.ResponseError)
    assert results[2] == b"x"


def test_watch_detects_a_concurrent_write(sluice_port):
    r = client(sluice_port)
    other = client(sluice_port)
    r.set("w", 1)
    with r.pipeline() as pipe:
        pipe.watch("w")
        other.incr("w")  # another client touches the watched key
        pipe.multi()
        pipe.incr("w")
        try:
            pipe.execute()
        except redis.WatchError:
            pass
        else:
            raise AssertionError("EXEC succeeded although the watched key changed")
    assert r.get("w") == b"2"


def test_real_time_expiry(sluice_port):
    # The one real-clock test: an 80 ms PX, then a 200 ms sleep.
    r = client(sluice_port)
    r.set("brief", "v", px=80)
    assert r.exists("brief") == 1
    time.sleep(0.2)
    assert r.get("brief") is None
    assert r.exists("brief") == 0


# ---------------------------------------------------------------------------------------------
# W3 — fixed window with GET / SET EX / INCR


def w3_call(r, user, action, period, limit):
    """One W3 call: GET; on nil SET key 1 EX period+1 (allowed); else INCR, allowed while <= limit."""
    key = f"rate:{action}:{user}"
    if r.get(key) is None:
        r.set(key, 1, ex=period + 1)
        return True
    return r.incr(key) <= limit


def test_w3_fixed_window(sluice_port):
    r = client(sluice_port)
    freeze(r)
    period, limit = 60, 5
    allowed = []
    for _ in range(20):
        allowed.append(w3_call(r, "Harry", "reply", period, limit))
        advance(r, 100)  # 20 calls over 2 s, all inside one window
    assert allowed == [True] * 5 + [False] * 15
    key = "rate:reply:Harry"
    assert r.get(key) == b"20"
    assert r.ttl(key) == period + 1 - 2  # set at t=0 with EX 61, now t=2 s
    # Just before the window's end the key is still there: still refused.
    advance(r, (period + 1) * 1000 - 2000)
    assert r.pttl(key) == 0
    assert w3_call(r, "Harry", "reply", period, limit) is False
    # One millisecond later it has expired: a new window.
    advance(r, 1)
    assert r.exists(key) == 0
    assert w3_call(r, "Harry", "reply", period, limit) is True
    assert r.get(key) == b"1"
    assert r.ttl(key) == period + 1
    # Another user is counted separately.
    assert w3_call(r, "Sally", "reply", period, limit) is True


def test_w3_fixed_window_pipelined(sluice_port):
    r = client(sluice_port)
    freeze(r)
    period, limit = 60, 5
    key = "rate:reply:Harry"
    # The first call opens the window, through a (non-transactional) pipeline.
    pipe = r.pipeline(transaction=False)
    pipe.get(key)
    assert pipe.execute() == [None]
    pipe.set(key, 1, ex=period + 1)
    assert pipe.execute() == [True]
    # The 19 other calls in one round trip: each is GET then INCR; replies arrive in order.
    for _ in range(19):
        pipe.get(key).incr(key)
    replies = pipe.execute()
    gets, counts = replies[0::2], replies[1::2]
    assert gets == [str(n).encode() for n in range(1, 20)]
    assert counts == list(range(2, 21))
    allowed = [True] + [n <= limit for n in counts]
    assert allowed == [True] * 5 + [False] * 15
    # The same workload in a MULTI/EXEC pipeline after the window has passed.
    advance(r, (period + 1) * 1000 + 1)
    tx = r.pipeline()
    tx.get(key).set(key, 1, ex=period + 1).ttl(key)
    assert tx.execute() == [None, True, period + 1]


# ---------------------------------------------------------------------------------------------
# W4 — fixed window counting down with EXISTS / GET / INCRBY -1 / SETEX


def w4_call(r, user, action, period, limit):
    """One W4 call, on a decode_responses=True client (replies are str)."""
    key = f"{user}{action}"
    if r.exists(key) == 0:
        r.setex(key, period, limit - 1)
        return True
    value = r.get(key)
    assert isinstance(value, str)
    if int(value) > 0:
        r.incrby(key, -1)
        return True
    return False


# The seed calls SETEX, which redis-py marks deprecated; the wire command is the point here.
setex_is_fine = pytest.mark.filterwarnings("ignore:Call to deprecated setex")


@setex_is_fine
def test_w4_countdown_within_a_window(sluice_port):
    r = client(sluice_port, decode_responses=True)
    freeze(r)
    allowed = []
    for _ in range(8):
        allowed.append(w4_call(r, "u1", "reply", 20, 5))
        advance(r, 10)
    assert allowed == [True] * 5 + [False] * 3
    assert r.get("u1reply") == "0"
    assert r.ttl("u1reply") == 20


@setex_is_fine
def test_w4_sixty_calls_one_per_second(sluice_port):
    # The seed's loop: 60 calls, one per second, P=20, N=5. A key set at t expires after
    # t+20 s (Redis's rule: expired when now > expire time), so t+20 is still refused and the
    # next window opens at t+21.
    r = client(sluice_port, decode_responses=True)
    freeze(r)
    allowed_at = []
    for second in range(60):
        if w4_call(r, "u1", "reply", 20, 5):
            allowed_at.append(second)
        advance(r, 1000)
    assert allowed_at == [0, 1, 2, 3, 4, 21, 22, 23, 24, 25, 42, 43, 44, 45, 46]


# ---------------------------------------------------------------------------------------------
# redis-cli


def cli(redis_cli, port, *args, stdin=None):
    done = subprocess.run(
        [redis_cli, "-p", str(port), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_redis_cli_one_shot(sluice_port, redis_cli):
    assert cli(redis_cli, sluice_port, "set", "k", "v") == "OK\n"
    assert cli(redis_cli, sluice_port, "get", "k") == "v\n"
    assert cli(redis_cli, sluice_port, "get", "missing") == "\n"
    assert cli(redis_cli, sluice_port, "incr", "c") == "1\n"
    assert cli(redis_cli, sluice_port, "incr", "c") == "2\n"
    # redis-cli prints an error reply followed by an empty line.
    assert cli(redis_cli, sluice_port, "incr", "k").strip() == "ERR value is not an integer or out of range"
    info = cli(redis_cli, sluice_port, "info", "server")
    assert "# Server" in info
    assert "redis_version:" in info
    assert cli(redis_cli, sluice_port, "exists", "k", "c") == "2\n"


def test_redis_cli_batch_from_stdin(sluice_port, redis_cli, tmp_path):
    batch = tmp_path / "commands.txt"
    batch.write_text('SET a 1\nINCR a\nINCRBY a 10\nGET a\nSET "two words" "x y"\nGET "two words"\nGET missing\n')
    with batch.open() as f:
        done = subprocess.run(
            [redis_cli, "-p", str(sluice_port)], stdin=f, capture_output=True, text=True, timeout=30
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "OK\n2\n12\n12\nOK\nx y\n\n"


def test_redis_cli_resp3_hello(sluice_port, redis_cli):
    out = cli(redis_cli, sluice_port, "-3", "hello", "3")
    lines = out.split("\n")
    assert "server redis" in lines
    assert "proto 3" in lines
    assert "mode standalone" in lines
    # RESP3 replies as redis-cli prints them.
    assert cli(redis_cli, sluice_port, "-3", "get", "missing") == "\n"
    assert cli(redis_cli, sluice_port, "-3", "set", "k", "v") == "OK\n"


def test_redis_cli_interactive(sluice_port, redis_cli):
    """redis-cli on a terminal: it asks COMMAND DOCS for its hints, then prompts."""
    import os
    import pty
    import select
    import time

    pid, fd = pty.fork()
    if pid == 0:
        # A dumb terminal: linenoise prompts without cursor-position queries.
        os.environ["TERM"] = "dumb"
        os.execvp(redis_cli, [redis_cli, "-p", str(sluice_port)])

    def read_until(marker, timeout=10.0):
        seen = b""
        deadline = time.monotonic() + timeout
        while marker not in seen:
            assert time.monotonic() < deadline, f"no {marker!r} in {seen!r}"
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    seen += os.read(fd, 4096)
                except OSError:
                    break
        return seen

    try:
        prompt = f"127.0.0.1:{sluice_port}>".encode()
        read_until(prompt)
        os.write(fd, b"set greeting hello\r")
        assert b"OK" in read_until(prompt)
        os.write(fd, b"get greeting\r")
        assert b'"hello"' in read_until(prompt)
        os.write(fd, b"incr greeting\r")
        assert b"(error) ERR value is not an integer or out of range" in read_until(prompt)
        # `help` is answered by redis-cli itself, from the COMMAND DOCS it read at start-up.
        os.write(fd, b"help zadd\r")
        assert b"key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]" in read_until(
            prompt
        )
        os.write(fd, b"quit\r")
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        os.close(fd)
