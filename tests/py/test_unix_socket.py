"""redis-py over sluice's Unix socket (`--unixsocket`), as services on one host connect."""

import os
import re
import subprocess
import tempfile

import redis

from conftest import SLUICE_BIN, START_TIMEOUT


def test_redis_py_over_unix_socket():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "sluice.sock")
        proc = subprocess.Popen(
            [str(SLUICE_BIN), "--port", "0", "--unixsocket", path, "--unixsocketperm", "700"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        try:
            # The binary prints its TCP address, then the Unix socket's.
            lines = [proc.stdout.readline() for _ in range(2)]
            assert re.match(r"sluice listening on unix:", lines[1]), lines
            r = redis.Redis(unix_socket_path=path, decode_responses=True, socket_timeout=START_TIMEOUT)
            assert r.ping()
            pipe = r.pipeline()  # MULTI/EXEC over the socket
            pipe.incr("rate:u1")
            pipe.expire("rate:u1", 60, nx=True)
            assert pipe.execute() == [1, True]
            assert r.execute_command("CL.THROTTLE", "u1", 15, 30, 60) == [0, 16, 15, -1, 2]
            me = [c for c in r.client_list() if c["id"] == str(r.client_id())][0]
            # As redis-server shows a Unix socket client: the path as both addresses, flag U.
            assert me["addr"] == f"{path}:0"
            assert me["laddr"] == f"{path}:0"
            assert me["flags"] == "U"
            # maxclients counts the socket's clients as it counts TCP's.
            assert r.config_set("maxclients", 1)
            extra = redis.Redis(unix_socket_path=path, socket_timeout=START_TIMEOUT)
            try:
                extra.ping()
                raise AssertionError("a second client was admitted over maxclients 1")
            except redis.exceptions.ConnectionError as e:
                assert "max number of clients reached" in str(e)
            finally:
                extra.close()
            assert r.config_set("maxclients", 10000)
            r.close()
        finally:
            proc.terminate()
            assert proc.wait(timeout=5) == 0
            proc.stdout.close()
        assert not os.path.exists(path)
