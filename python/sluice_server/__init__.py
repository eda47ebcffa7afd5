"""sluice from Python: the binary shipped in this wheel, and a server handle for tests.

`binary_path()` finds the `sluice` executable the wheel installed (in the environment's
scripts directory). `SluiceServer` starts it on a free loopback port in test mode and offers
the clock helpers (CLOCK FREEZE / ADVANCE / SET / RESUME / NOW) so tests move time instead of
sleeping. The pytest fixture is in `sluice_server.pytest_plugin`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import threading

__all__ = ["SluiceServer", "binary_path"]

_READY = re.compile(r"sluice listening on ([\d.]+):(\d+)")


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
    """A sluice process on 127.0.0.1 and a free port, in test mode, until `stop()`."""

    def __init__(self, *args: str, start_timeout: float = 10.0):
        self.binary = binary_path()
        self._proc = subprocess.Popen(
            [self.binary, "--port", "0", "--test-mode", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self._proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(start_timeout)
        match = _READY.search(line[0]) if line else None
        if match is None:
            self.stop()
            raise RuntimeError(f"sluice did not start within {start_timeout}s (printed {line!r})")
        self.host = match.group(1)
        self.port = int(match.group(2))
        self.url = f"redis://{self.host}:{self.port}"
        self._client = None

    @property
    def client(self):
        """A redis-py client for this server (decode_responses=True), made on first use."""
        if self._client is None:
            import redis

            self._client = redis.Redis(host=self.host, port=self.port, decode_responses=True)
        return self._client

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

    def stop(self) -> None:
        """Closes the client and stops the server (SIGTERM, then SIGKILL after 5 s)."""
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc.stdout:
            self._proc.stdout.close()

    def __enter__(self) -> "SluiceServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
