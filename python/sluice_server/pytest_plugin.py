"""The pytest plugin (registered through the `pytest11` entry point): a `sluice` fixture.

Each test gets a fresh sluice on a free port in test mode; `sluice.client` is a redis-py
client and `sluice.freeze()` / `advance(ms)` / `set(ms)` / `resume()` / `now()` move its
clock.
"""

import pytest

from sluice_server import SluiceServer


@pytest.fixture
def sluice():
    """A fresh sluice server for this test, stopped afterwards."""
    server = SluiceServer()
    try:
        yield server
    finally:
        server.stop()
