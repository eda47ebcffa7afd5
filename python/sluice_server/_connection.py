"""The connection class of `SluiceServer.client`: redis-py's own (Unix socket or TCP), except
that it waits for a reply by polling its socket for a bounded time before it sleeps.

Why: a test sends one command and waits for its reply, thousands of times per suite. The
server answers in about 10 µs, but a client that blocks in the kernel at once lets its CPU
go idle, and on a virtual machine an idle CPU halts: the reply then has to wake it through
the host, which costs more than the command (about 20 µs on the machine of
benchmarks/notes.md, "Test doubles, third pass"). A client that polls for those
microseconds instead finds the reply without being woken.

Bounds: at most `SPIN_NS` of polling per reply, yielding the CPU between two polls (a server
on the same CPU runs at once); only when the reply is not already read (a pipeline's or a
transaction's later replies are in redis-py's buffer) and no read timeout of its own was
asked for (pub/sub's `get_message(timeout=...)`). Past the budget it reads as redis-py does,
so what a test sees (replies, errors, timeouts, a closed connection) is redis-py's. With
hiredis's parser installed (whose buffer it cannot see), or without poll(2) (Windows), it
reads exactly as redis-py does.

`can_read()` with no timeout (which redis-py's pool calls on every checkout to see that a
connection holds no stale data) polls the socket once instead of a non-blocking `recv` that
switches the socket's mode twice and raises when nothing is there: the same answer, one
system call instead of three.
"""

from __future__ import annotations

import os
import select
import time

import redis
from redis.connection import Connection, UnixDomainSocketConnection

# Longer than the server's answer to a test's command (about 10 µs; a MULTI/EXEC of four
# commands about 30) plus the server's own wake-up when it slept, short enough that a
# client whose reply is slow (a blocking command, a loaded machine) gives up little CPU.
SPIN_NS = 100_000

# The clock the budget is measured with (a test replaces it).
_now = time.monotonic_ns

# Where there is no poll(2) or sched_yield (Windows), the connections are redis-py's.
_CAN_POLL = hasattr(select, "poll") and hasattr(os, "sched_yield")


class _PollsForReplies:
    """The mixin: `read_response` and `can_read` as described in the module's doc."""

    _poller = None
    _polled_sock = None

    def _poll_now(self) -> bool | None:
        """Whether the socket is readable now; None when that cannot be told cheaply (no
        socket, or a parser whose buffer is not redis-py's `SocketBuffer`)."""
        if not _CAN_POLL:
            return None
        sock = self._sock
        buffer = getattr(self._parser, "_buffer", None)
        if sock is None or buffer is None or not hasattr(buffer, "unread_bytes"):
            return None
        if buffer.unread_bytes():
            return True
        if self._polled_sock is not sock:
            self._poller = select.poll()
            self._poller.register(sock.fileno(), select.POLLIN)
            self._polled_sock = sock
        return bool(self._poller.poll(0))

    def can_read(self, timeout: float = 0) -> bool:
        if timeout == 0:
            ready = self._poll_now()
            if ready is not None:
                return ready
        return super().can_read(timeout)

    def read_response(self, *args, **kwargs):
        if "timeout" not in kwargs and self._poll_now() is False:
            deadline = _now() + SPIN_NS
            while not self._poller.poll(0) and _now() < deadline:
                os.sched_yield()
        return super().read_response(*args, **kwargs)


class PollingUnixConnection(_PollsForReplies, UnixDomainSocketConnection):
    """redis-py's Unix-socket connection, polling for its replies before it sleeps."""


class PollingConnection(_PollsForReplies, Connection):
    """redis-py's TCP connection, polling for its replies before it sleeps."""


def client(*, unix_socket: str | None, host: str | None, port: int | None) -> "redis.Redis":
    """A `redis.Redis` (decode_responses=True) over `unix_socket` when given, else TCP: made
    as redis-py makes one from that address, with the polling class for its connections."""
    extra = _driver_info()
    if unix_socket is not None:
        made = redis.Redis(unix_socket_path=unix_socket, decode_responses=True, **extra)
        polling = PollingUnixConnection
    else:
        made = redis.Redis(host=host, port=port, decode_responses=True, **extra)
        polling = PollingConnection
    # Before its first connection, so that every one it makes is of this class (the pool's
    # arguments stay redis-py's).
    made.connection_pool.connection_class = polling
    return made


_lib_version = None


def _driver_info() -> dict:
    """redis-py's own driver information (what its connections send with CLIENT SETINFO),
    with the library's version looked up once per process: redis-py 8 reads and parses its
    package metadata for every client made without one (about a millisecond, once per test
    for `sluice_fresh`). Nothing for a redis-py without `DriverInfo`, which looks it up once."""
    global _lib_version
    try:
        from redis.driver_info import DriverInfo
    except ImportError:
        return {}
    if _lib_version is None:
        _lib_version = DriverInfo().lib_version
    return {"driver_info": DriverInfo(lib_version=_lib_version)}
