# The pytest fixture from README.md ("Using sluice from pytest"), exercised as written.
import os
import re
import subprocess

import pytest
import redis

SLUICE = os.environ.get("SLUICE_BIN", "target/debug/sluice")


@pytest.fixture
def sluice():
    """A fresh sluice on a free port, in test mode; yields a redis-py client."""
    proc = subprocess.Popen([SLUICE, "--port", "0", "--test-mode"], stdout=subprocess.PIPE, text=True)
    port = int(re.search(r"listening on [\d.]+:(\d+)", proc.stdout.readline()).group(1))
    client = redis.Redis(port=port, decode_responses=True)
    yield client
    client.close()
    proc.terminate()
    proc.wait(timeout=5)


def test_window_resets_without_sleeping(sluice):
    sluice.execute_command("CLOCK", "FREEZE")
    for _ in range(5):
        assert sluice.incr("rate:u1") <= 5
        sluice.expire("rate:u1", 60, nx=True)
    assert sluice.incr("rate:u1") == 6  # over the limit
    sluice.execute_command("CLOCK", "ADVANCE", 60_001)  # instead of time.sleep(60)
    assert sluice.get("rate:u1") is None  # a new window


def test_throttle_refills_after_advance(sluice):
    sluice.execute_command("CLOCK", "FREEZE")
    replies = [sluice.execute_command("CL.THROTTLE", "laoqian:reply", 15, 30, 60, 1) for _ in range(20)]
    assert sum(1 for r in replies if r[0] == 0) == 16
    sluice.execute_command("CLOCK", "ADVANCE", 2000)
    assert sluice.execute_command("CL.THROTTLE", "laoqian:reply", 15, 30, 60, 1)[0] == 0
