"""The fixture the 300-test limiter suite runs with, chosen by TD_BACKEND (scripts/bench.py
sets it): `fakeredis` (a FakeRedis with a server of its own per test, in-process), `sluice`
(the pytest plugin's default: one server per session, TESTMODE RESET before each test) or
`sluice_fresh` (a server per test). TD_STATS names a JSON file that gets the time pytest
spent in fixtures (setup + teardown) and in the tests themselves."""

import json
import os

import pytest

BACKEND = os.environ.get("TD_BACKEND", "fakeredis")

if BACKEND == "fakeredis":

    @pytest.fixture
    def r():
        import fakeredis

        client = fakeredis.FakeRedis(server=fakeredis.FakeServer(), decode_responses=True)
        yield client
        client.close()

elif BACKEND == "sluice":

    @pytest.fixture
    def r(sluice):
        return sluice.client

elif BACKEND == "sluice_fresh":

    @pytest.fixture
    def r(sluice_fresh):
        return sluice_fresh.client

else:
    raise RuntimeError(f"TD_BACKEND={BACKEND!r}: fakeredis, sluice or sluice_fresh")

_spent = {"setup": 0.0, "call": 0.0, "teardown": 0.0, "tests": 0}


def pytest_runtest_logreport(report):
    _spent[report.when] += report.duration
    if report.when == "call":
        _spent["tests"] += 1


def pytest_sessionfinish(session):
    path = os.environ.get("TD_STATS")
    if path:
        with open(path, "w") as f:
            json.dump(_spent, f)
