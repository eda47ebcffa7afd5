"""A geo workflow through redis-py 8 (RESP3 by default, and RESP2), against sluice and against
a real redis-server 7.0.15 side by side: every parsed result must be equal, so a store-finder
written against Redis gets the same members, distances, hashes and coordinates from sluice.
"""


import pytest
import redis


def workflow(r):
    """Every geo call a client library wraps, with the options it parses."""
    out = []
    out.append(r.geoadd("stores", [13.361389, 38.115556, "Palermo", 15.087269, 37.502669, "Catania"]))
    out.append(r.geoadd("stores", [13.583333, 37.316667, "Agrigento"], nx=True))
    out.append(r.geoadd("stores", [13.583333, 37.316668, "Agrigento"], xx=True, ch=True))
    out.append(r.geopos("stores", "Palermo", "Catania", "nowhere"))
    out.append(r.geodist("stores", "Palermo", "Catania"))
    out.append(r.geodist("stores", "Palermo", "Catania", unit="km"))
    out.append(r.geohash("stores", "Palermo", "Agrigento", "nowhere"))
    out.append(
        r.geosearch(
            "stores", longitude=15, latitude=37, radius=200, unit="km",
            withcoord=True, withdist=True, withhash=True, sort="ASC",
        )
    )
    out.append(
        r.geosearch("stores", member="Palermo", width=400, height=300, unit="km", sort="DESC", count=2)
    )
    out.append(r.geosearch("stores", longitude=15, latitude=37, radius=200, unit="km", count=1, any=True))
    out.append(r.geosearchstore("near", "stores", longitude=15, latitude=37, radius=200, unit="km", storedist=True))
    out.append(r.zrange("near", 0, -1, withscores=True))
    out.append(r.georadius("stores", 15, 37, 150, unit="km", withdist=True, sort="ASC"))
    out.append(r.georadiusbymember("stores", "Agrigento", 100, unit="km", withcoord=True))
    out.append(r.georadius("stores", 15, 37, 200, unit="km", store="copy"))
    out.append(r.zrange("copy", 0, -1, withscores=True))
    for bad in (
        lambda: r.geoadd("stores", [200, 10, "far"]),
        lambda: r.geosearch("stores", member="nowhere", radius=1, unit="km"),
        lambda: r.execute_command("GEOSEARCH", "stores", "FROMLONLAT", 15, 37, "BYRADIUS", 1, "parsec"),
    ):
        with pytest.raises(redis.ResponseError) as err:
            bad()
        out.append(str(err.value))
    return out


@pytest.mark.parametrize("protocol", [3, 2])
def test_geo_workflow_matches_redis(sluice_port, redis_port, protocol):
    got = workflow(redis.Redis(port=sluice_port, protocol=protocol))
    want = workflow(redis.Redis(port=redis_port, protocol=protocol))
    assert got == want
    # Not vacuous: the search found members with parsed distances and coordinates.
    assert got[7][0][0] == b"Catania" and got[7][0][1] == 56.4413
