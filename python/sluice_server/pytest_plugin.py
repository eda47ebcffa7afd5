"""The pytest plugin (registered through the `pytest11` entry point): the `sluice` fixtures.

- `sluice`: one server per test session (per pytest-xdist worker, since each worker is a
  session of its own), returned to the state it started in before each test with
  `TESTMODE RESET`, so every test sees an empty server with the clock on real time, at the
  cost of one round trip (over the server's Unix socket, which `.client` uses too).
- `sluice_fresh`, or `sluice` in a test marked `@pytest.mark.sluice_fresh`: a server of the
  test's own, killed after it, for tests that stop the server, restart it or otherwise need
  its process. The plugin keeps one such server started ahead, so a test takes one that is
  already listening while the next starts beside it, and does not wait for the killed one
  to be torn down: a few milliseconds per test, mostly the new connection.

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


class _Spares:
    """Servers for `sluice_fresh`: one started ahead of the test that will take it, and the
    killed ones, reaped (and their directories removed) once they are gone."""

    def __init__(self):
        self.spare = None
        self.dying = []

    def take(self) -> SluiceServer:
        server = self.spare if self.spare is not None else SluiceServer(_wait=False)
        self.spare = None
        try:
            server._wait_ready()
        finally:
            # The next one starts while this test runs.
            self.spare = SluiceServer(_wait=False)
        return server

    def give_back(self, server: SluiceServer):
        server.stop(wait=False)
        self.dying.append(server)
        still = []
        for s in self.dying:
            if s._proc.poll() is None:
                still.append(s)
            else:
                s.finish_stop()
        self.dying = still

    def close(self):
        if self.spare is not None:
            self.spare.stop()
            self.spare = None
        for s in self.dying:
            s.finish_stop()
        self.dying = []


@pytest.fixture(scope="session")
def sluice_spares():
    """Where `sluice_fresh` gets its servers (one started ahead)."""
    spares = _Spares()
    yield spares
    spares.close()


@pytest.fixture
def sluice_fresh(sluice_spares):
    """A server of this test's own, killed afterwards."""
    server = sluice_spares.take()
    try:
        yield server
    finally:
        sluice_spares.give_back(server)


@pytest.fixture
def sluice(request, sluice_session):
    """The session's server, reset before this test (a fresh one under `sluice_fresh`)."""
    # A plain function, not a generator: there is nothing to undo after the test (the next
    # one resets), so pytest registers no teardown for it.
    if request.node.get_closest_marker("sluice_fresh") is not None:
        return request.getfixturevalue("sluice_fresh")
    server = sluice_session.get()
    server.reset()
    return server
