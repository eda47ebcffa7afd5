"""An example test using the installed sluice-server wheel's `sluice` fixture."""


def test_fixed_window_without_sleeping(sluice):
    r = sluice.client
    sluice.freeze()
    for _ in range(5):
        assert r.incr("rate:u1") <= 5
        r.expire("rate:u1", 60, nx=True)
    assert r.incr("rate:u1") == 6
    sluice.advance(60_001)
    assert r.get("rate:u1") is None


def test_throttle_refills(sluice):
    r = sluice.client
    start = sluice.freeze()
    replies = [r.execute_command("CL.THROTTLE", "k", 15, 30, 60) for _ in range(20)]
    assert sum(1 for x in replies if x[0] == 0) == 16
    assert sluice.advance(2000) == start + 2000
    assert r.execute_command("CL.THROTTLE", "k", 15, 30, 60)[0] == 0
