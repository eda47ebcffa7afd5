"""Fixtures for the client tests: a fresh sluice binary per test (`sluice_port`), a
redis-server 7.0.15 beside it (`redis_port`), and the
sluice-server package's pytest plugin (`sluice`, `sluice_fresh`) from python/, as a user
gets it from the wheel.

The binary is `target/debug/sluice` (override with SLUICE_BIN); `scripts/test.sh` builds it
first. A missing binary or tool fails the test: nothing is skipped. Every server runs in a
private temporary directory with persistence off, so a `dump.rdb` in the working directory
changes nothing.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parents[2]
SLUICE_BIN = Path(os.environ.get("SLUICE_BIN", ROOT / "target" / "debug" / "sluice"))
# The plugin's server reads SLUICE_BIN too.
os.environ["SLUICE_BIN"] = str(SLUICE_BIN)
sys.path.insert(0, str(ROOT / "python"))
pytest_plugins = ["sluice_server.pytest_plugin"]
READY = re.compile(r"sluice listening on 127\.0\.0\.1:(\d+)")
START_TIMEOUT = 10.0


def _read_first_line(stream, out):
    out.append(stream.readline())


@pytest.fixture
def sluice_port():
    """Starts `sluice --port 0 --test-mode` and yields the port it printed.

    Test mode adds the CLOCK commands, so the rate-limiter tests move time instead of
    sleeping through their windows.
    """
    if not SLUICE_BIN.is_file():
        pytest.fail(f"{SLUICE_BIN} does not exist: run `cargo build` first (scripts/test.sh does)")
    log = tempfile.TemporaryFile()
    workdir = tempfile.TemporaryDirectory(prefix="sluice-")
    proc = subprocess.Popen(
        [str(SLUICE_BIN), "--port", "0", "--test-mode", "--save", "", "--dir", workdir.name],
        cwd=workdir.name,
        stdout=subprocess.PIPE,
        stderr=log,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = []
        reader = threading.Thread(target=_read_first_line, args=(proc.stdout, line), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT)
        match = READY.search(line[0]) if line else None
        if match is None:
            proc.kill()
            proc.wait()
            log.seek(0)
            pytest.fail(
                f"sluice did not print its address within {START_TIMEOUT}s "
                f"(stdout: {line!r}; stderr: {log.read().decode(errors='replace')!r})"
            )
        yield int(match.group(1))
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stdout.close()
        log.close()
        workdir.cleanup()


@pytest.fixture
def redis_cli():
    """The path of redis-cli (the test fails when it is missing)."""
    path = shutil.which("redis-cli")
    if path is None:
        pytest.fail("redis-cli is not on PATH (Debian: apt-get install redis-tools)")
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def redis_port():
    """A redis-server 7.0.15 on a free loopback port, persistence off."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not on PATH")
    port = free_port()
    workdir = tempfile.TemporaryDirectory(prefix="redis-")
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", workdir.name],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_ping(port, "redis-server")
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=5)
        workdir.cleanup()


def wait_for_ping(port, name):
    """Waits (up to 10 s) until the server on `port` answers PING."""
    deadline = time.monotonic() + 10
    while True:
        try:
            redis.Redis(port=port).ping()
            return
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                pytest.fail(f"{name} did not start")
            time.sleep(0.05)
