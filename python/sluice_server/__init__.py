"""sluice from Python: the binary shipped in this wheel, and a server handle for tests.

`binary_path()` finds the `sluice` executable the wheel installed (in the environment's
scripts directory). `SluiceServer` starts it on a free loopback port in test mode, in a
private temporary directory with persistence off, also listening on a Unix socket there (its
`.client` uses that: a round trip costs both processes less kernel time than over TCP), with
`--busy-poll` (after a reply it looks for the next command for 100 µs before it sleeps, while
the machine has idle CPU; `.client`'s connections poll for each reply the same way, see
`_connection`), and offers `reset()` (TESTMODE RESET) and the clock helpers (CLOCK FREEZE /
ADVANCE / SET / RESUME / NOW) so tests move time instead of sleeping. The pytest fixtures
are in `sluice_server.pytest_plugin`."""

from __future__ import annotations

import os
import re
import select
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time

__all__ = ["SluiceServer", "binary_path"]

_READY = re.compile(r"sluice listening on ([\d.]+):(\d+)")
_READY_UNIX = re.compile(r"sluice listening on unix:(.+)")
# sun_path holds 108 bytes on Linux (104 on the BSDs): a longer temporary directory means
# TCP only.
_MAX_UNIX_PATH = 100
# How long (µs) the server polls for a test's next command before it sleeps (`--busy-poll`):
# a test sends one command at a time and waits for each reply, and on a virtual machine with
# an idle CPU waking the server's sleeping thread costs more than the command. The server
# polls only while the machine has idle CPU to spare (see docs/configuration.md).
_BUSY_POLL_US = 100


def binary_path() -> str:
    """The path of the `sluice` binary: $SLUICE_BIN, else the one this wheel installed."""
    explicit = os.environ.get("SLUICE_BIN")
    if explicit:
        return explicit
    name = "sluice.exe" if sys.platform == "win32" else "sluice"
    candidates = [
        os.path.join(sysconfig.get_path("scripts"), name),
        os.path.join(sysconfig.get_path("scripts", f"{os.name}_user"), name),
        os.path.join(os.path.dirname(sys.executable), name),
    ]
    for path in candidates:
        if os.path.isfile(path):
            return path
    found = shutil.which("sluice")
    if found:
        return found
    raise FileNotFoundError(
        "the sluice binary is not installed with this package (looked in "
        + ", ".join(candidates)
        + "): set SLUICE_BIN to the path of a sluice binary"
    )


class SluiceServer:
    """A sluice process on 127.0.0.1 and a free port, in test mode, until `stop()`.

    It runs in a private temporary directory (its working directory and `dir`, removed by
    `stop()`) with persistence off, so a `dump.rdb` wherever the caller runs is never
    loaded and nothing is written there. `reset()` returns it to the state it started in
    (`TESTMODE RESET`), which is how the `sluice` pytest fixture shares one server between
    the tests of a session.

    `host`/`port`/`url` are its TCP address; `unix_socket` is the path of its Unix socket
    (None where the temporary directory's path is too long for one, or the caller's
    arguments name their own `--unixsocket`), which `.client` connects to when there is one.
    """

    def __init__(self, *args: str, start_timeout: float = 10.0, _wait: bool = True):
        # Absolute: the server runs in its own directory, and SLUICE_BIN may be relative to
        # the caller's.
        self.binary = os.path.abspath(binary_path())
        self.dir = tempfile.mkdtemp(prefix="sluice-")
        # Extra arguments may turn persistence back on; then stop() lets it save (SIGTERM).
        self._disposable = not args
        sock = os.path.join(self.dir, "sluice.sock")
        unix = []
        if hasattr(socket, "AF_UNIX") and len(os.fsencode(sock)) <= _MAX_UNIX_PATH and "--unixsocket" not in args:
            unix = ["--unixsocket", sock, "--unixsocketperm", "700"]
        self._wants_unix = bool(unix)
        try:
            self._proc = subprocess.Popen(
                # One event loop, as redis-server has: a test's few connections need no more,
                # and it starts and stops a thread fewer.
                [
                    self.binary, "--port", "0", "--test-mode", "--save", "", "--dir", self.dir,
                    "--threads", "1", "--busy-poll", str(_BUSY_POLL_US), *unix, *args,
                ],
                cwd=self.dir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self._client = None
        self._start_timeout = start_timeout
        self.host = self.port = self.url = self.unix_socket = None
        if _wait:
            self._wait_ready()

    def _wait_ready(self) -> "SluiceServer":
        """Reads the address the server prints once it listens (a spare started earlier by
        the plugin is waited for only when a test takes it)."""
        if self.port is not None:
            return self
        wanted = _READY_UNIX if self._wants_unix else _READY
        out = self._read_until(wanted, self._start_timeout)
        match = _READY.search(out)
        if match is None or wanted.search(out) is None:
            self.stop()
            raise RuntimeError(f"sluice did not start within {self._start_timeout}s (printed {out!r})")
        self.host = match.group(1)
        self.port = int(match.group(2))
        self.url = f"redis://{self.host}:{self.port}"
        if self._wants_unix:
            self.unix_socket = _READY_UNIX.search(out).group(1).strip()
        return self

    def _read_until(self, pattern: "re.Pattern[str]", timeout: float) -> str:
        """What the server prints until a line matches `pattern` (it prints its TCP address,
        then its Unix socket's, once both listen), read as it arrives (no fixed sleep)."""
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        out = b""
        while not (b"\n" in out and pattern.search(out.decode(errors="replace").rsplit("\n", 1)[0])):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            out += chunk
        return out.decode(errors="replace")

    @property
    def client(self):
        """A redis-py client for this server (decode_responses=True), made on first use: over
        the Unix socket when there is one, else TCP, with connections that poll briefly for
        each reply before they sleep (`_connection`)."""
        if self._client is None:
            from sluice_server import _connection

            self._client = _connection.client(unix_socket=self.unix_socket, host=self.host, port=self.port)
        return self._client

    @property
    def alive(self) -> bool:
        """True while the server process runs."""
        return self._proc.poll() is None

    def reset(self) -> None:
        """Returns the server to the state it started in: every database empty, the clock on
        real time, no fault, scripts, functions or CONFIG SET changes (`TESTMODE RESET`)."""
        self.client.execute_command("TESTMODE", "RESET")

    def _clock(self, *args) -> int:
        return int(self.client.execute_command("CLOCK", *args))

    def freeze(self) -> int:
        """Stops the server's clock; returns its time in Unix milliseconds."""
        return self._clock("FREEZE")

    def advance(self, ms: int) -> int:
        """Moves the frozen clock forward by `ms` (expired keys are reaped before it returns)."""
        return self._clock("ADVANCE", int(ms))

    def set(self, unix_ms: int) -> int:
        """Sets the frozen clock (never backwards)."""
        return self._clock("SET", int(unix_ms))

    def resume(self) -> int:
        """Lets the clock run again from where it stands."""
        return self._clock("RESUME")

    def now(self) -> int:
        """The server's time in Unix milliseconds."""
        return self._clock("NOW")

    def stop(self, wait: bool = True) -> None:
        """Closes the client, stops the server and removes its directory.

        A server started without extra arguments has nothing to save (persistence off, its
        directory about to go), so it is killed outright; one started with arguments gets
        SIGTERM, and its own exit (a few milliseconds; SIGKILL after 5 s). With
        `wait=False` a killed server is not waited for: `finish_stop()` reaps it and removes
        its directory later (the plugin does, so that a test does not wait for the kernel
        to tear a process down)."""
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._proc.poll() is None:
            if self._disposable:
                self._proc.kill()
                if not wait:
                    return
            else:
                self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self.finish_stop()

    def finish_stop(self) -> None:
        """Waits for a killed server and removes its directory."""
        self._proc.wait()
        if self._proc.stdout:
            self._proc.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "SluiceServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
