# README.md's pytest example ("From pytest"), run by the test suite as written. With the
# sluice-server wheel installed, the `sluice` fixture needs no conftest.py.
import pytest


def test_window_resets_without_sleeping(sluice):
    r = sluice.client  # a redis-py client
    sluice.freeze()
    for _ in range(5):
        assert r.incr("rate:u1") <= 5
        r.expire("rate:u1", 60, nx=True)
    assert r.incr("rate:u1") == 6  # over the limit
    sluice.advance(60_001)  # instead of time.sleep(60)
    assert r.get("rate:u1") is None  # a new window


def test_every_test_starts_from_an_empty_server(sluice):
    # One server for the whole session, reset before each test: nothing is left behind.
    assert sluice.client.dbsize() == 0


@pytest.mark.sluice_fresh  # a server of this test's own (a few ms), e.g. for one that stops it
def test_throttle_refills_after_advance(sluice):
    r = sluice.client
    sluice.freeze()
    replies = [r.execute_command("CL.THROTTLE", "laoqian:reply", 15, 30, 60, 1) for _ in range(20)]
    assert sum(1 for x in replies if x[0] == 0) == 16
    sluice.advance(2000)
    assert r.execute_command("CL.THROTTLE", "laoqian:reply", 15, 30, 60, 1)[0] == 0
