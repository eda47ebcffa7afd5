"""The sluice-server pytest plugin (python/sluice_server) as a user's suite meets it, run in a
pytest of its own: one shared server reset before each test, `sluice_fresh` servers of a
test's own, and a dump.rdb in the working directory that changes nothing."""

import os
import subprocess
import sys
from pathlib import Path

from sluice_server import SluiceServer

ROOT = Path(__file__).resolve().parents[2]

INNER = '''
import pytest

ports = set()


def test_first_leaves_everything_behind(sluice):
    ports.add(sluice.port)
    assert sluice.client.dbsize() == 0
    sluice.client.set("left", "behind")
    sluice.freeze()
    sluice.advance(3_600_000)
    sluice.client.config_set("maxmemory", "1mb")
    sluice.client.execute_command("FAULT", "ERROR", "LOADING left behind", "COUNT", "0", "COMMAND", "get")
    sluice.client.execute_command("SCRIPT", "LOAD", "return 1")


def test_second_sees_a_server_as_started(sluice):
    ports.add(sluice.port)
    assert len(ports) == 1, "the session shares one server"
    assert sluice.client.dbsize() == 0
    assert sluice.client.config_get("maxmemory") == {"maxmemory": "0"}
    import time
    assert abs(sluice.now() - time.time() * 1000) < 5000
    assert not sluice.client.execute_command("FAULT", "LIST")
    assert sluice.client.get("left") is None  # no fault answers it
    assert sluice.client.execute_command("SCRIPT", "EXISTS", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db") == [0]


def test_the_client_is_on_the_unix_socket_and_the_url_reaches_the_same_server(sluice):
    import redis
    assert sluice.unix_socket and sluice.unix_socket.startswith(sluice.dir)
    assert sluice.client.connection_pool.connection_kwargs["path"] == sluice.unix_socket
    sluice.client.set("seen", "1")
    with redis.Redis.from_url(sluice.url, decode_responses=True) as tcp:
        assert tcp.get("seen") == "1"


def test_fresh_is_a_server_of_its_own(sluice_fresh):
    assert sluice_fresh.port not in ports
    assert sluice_fresh.client.dbsize() == 0
    sluice_fresh._proc.kill()  # the fixture's stop() copes with a server already gone
    sluice_fresh._proc.wait()


@pytest.mark.sluice_fresh
def test_the_marker_gives_sluice_a_server_of_its_own(sluice):
    assert sluice.port not in ports
    assert sluice.client.dbsize() == 0


def test_a_stopped_shared_server_is_started_again(sluice):
    assert sluice.client.dbsize() == 0
    sluice.stop()


def test_after_it(sluice):
    assert sluice.client.dbsize() == 0
'''


def run_inner(tmp_path, cwd):
    (tmp_path / "test_inner.py").write_text(INNER)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "sluice_server.pytest_plugin",
         str(tmp_path / "test_inner.py")],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "7 passed" in proc.stdout, proc.stdout


def test_shared_reset_and_fresh_servers(tmp_path):
    run_inner(tmp_path, tmp_path)


def test_a_dump_rdb_in_the_working_directory_changes_nothing(tmp_path):
    # 35 keys saved, as a server started by hand with save points leaves them behind.
    with SluiceServer() as saver:
        for i in range(35):
            saver.client.set(f"k{i}", "v")
        saver.client.save()
        dump = Path(saver.dir, "dump.rdb").read_bytes()
    work = tmp_path / "work"
    work.mkdir()
    (work / "dump.rdb").write_bytes(dump)
    run_inner(tmp_path, work)
    assert (work / "dump.rdb").read_bytes() == dump
    assert sorted(p.name for p in work.iterdir()) == ["dump.rdb"], "nothing written to the working directory"
