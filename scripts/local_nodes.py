"""What the harnesses in scripts/ share to run server processes on loopback: a free port to
start one on, and waiting until a node reaches a state.

    from local_nodes import free_port, until

(The scripts run from scripts/, or put it on sys.path as tests/py/test_faults.py does.)
"""
import socket
import time

import redis


def free_port():
    """A loopback port nothing listens on now (the caller starts a server on it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def until(what, f, timeout=30.0):
    """Polls `f` every 100 ms until it is true; a connection or Redis error counts as not yet.
    Exits the script naming `what` if `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if f():
                return
        except (redis.RedisError, OSError):
            pass
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for: {what}")
