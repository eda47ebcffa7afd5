"""The pytest plugin (registered through the `pytest11` entry point): the `sluice` fixtures.

- `sluice`: one server per test session (per pytest-xdist worker, since each worker is a
  session of its own), returned to the state it started in before each test with
  `TESTMODE RESET`, so every test sees an empty server with the clock on real time, at the
  cost of one round trip.
- `sluice_fresh`, or `sluice` in a test marked `@pytest.mark.sluice_fresh`: a server of the
  test's own, started for it and killed after it (a few milliseconds), for tests that stop
  the server, restart it or otherwise need its process.

Each is a `SluiceServer`: `.client` (redis-py), `.port`, `.url`, `.reset()`, and the clock
helpers `freeze()` / `advance(ms)` / `set(ms)` / `resume()` / `now()`.
"""

import pytest

from sluice_server import SluiceServer


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "sluice_fresh: the sluice fixture starts a server of this test's own"
    )


@pytest.fixture(scope="session")
def sluice_session():
    """The session's shared server (started on first use, stopped at the end)."""
    holder = _Shared()
    yield holder
    holder.stop()


class _Shared:
    """Starts the shared server lazily, and again if a test stopped it."""

    def __init__(self):
        self.server = None

    def get(self) -> SluiceServer:
        if self.server is None or not self.server.alive:
            if self.server is not None:
                self.server.stop()
            self.server = SluiceServer()
        return self.server

    def stop(self):
        if self.server is not None:
            self.server.stop()
            self.server = None


@pytest.fixture
def sluice_fresh():
    """A server of this test's own, stopped afterwards."""
    server = SluiceServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def sluice(request, sluice_session):
    """The session's server, reset before this test (a fresh one under `sluice_fresh`)."""
    if request.node.get_closest_marker("sluice_fresh") is not None:
        yield request.getfixturevalue("sluice_fresh")
        return
    server = sluice_session.get()
    server.reset()
    yield server
