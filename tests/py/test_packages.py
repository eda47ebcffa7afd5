"""The release artifacts scripts/package.sh builds, each installed as its users would.

`scripts/package.sh` builds them and runs this file on them (SLUICE_PACKAGES names the
directory). Run on its own, as scripts/test.sh does, the module first runs
`scripts/package.sh --dev --no-test`: the same artifacts from the dev profile, whose build
scripts/test.sh has already made (an optimised build would add minutes). Each artifact is
installed into a fresh environment — a new venv, a new npm project, an extracted Debian
package — and starts a server there. Publishing is in CONTRIBUTING.md.
"""

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parents[2]
VERSION = re.search(r'^version = "(.*)"$', (ROOT / "Cargo.toml").read_text(), re.M).group(1)
READY = re.compile(r"sluice listening on ([\d.]+):(\d+)")
NODE_PLATFORM = {"x86_64": "x64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def run(cmd, cwd, timeout=900, env=None, check=True):
    proc = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )
    if check:
        assert proc.returncode == 0, f"{cmd} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


def env_without_sluice_bin(**extra):
    env = {k: v for k, v in os.environ.items() if k != "SLUICE_BIN"}
    env.update(extra)
    return env


def need(*tools):
    for tool in tools:
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not on PATH (.ci/run installs it; see scripts/test.sh's list)")


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    """The directory holding the wheel, the npm tarballs and the .deb."""
    given = os.environ.get("SLUICE_PACKAGES")
    if given:
        return Path(given)
    need("node", "npm", "dpkg-deb")
    out = tmp_path_factory.mktemp("packages")
    run([ROOT / "scripts" / "package.sh", "--dev", "--no-test", "--out", out], cwd=ROOT,
        env={**os.environ, "PYTHON": sys.executable})
    return out


def only(directory, pattern):
    found = list(Path(directory).glob(pattern))
    assert len(found) == 1, (pattern, found)
    return found[0]


def start_and_ping(cmd, cwd, env=None):
    """Starts a server with `cmd`, reads its address, PINGs it, stops it."""
    proc = subprocess.Popen([str(c) for c in cmd], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        match = READY.search(line)
        assert match, f"no address in {line!r}; stderr: {proc.stderr.read() if proc.poll() is not None else ''}"
        client = redis.Redis(host=match.group(1), port=int(match.group(2)), socket_timeout=10)
        assert client.ping() is True
        client.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def elf_is_stripped(path):
    sections = run(["readelf", "-S", "-W", path], cwd=path.parent).stdout
    return ".symtab" not in sections and ".debug_info" not in sections


# The wheel.


def test_wheel_has_a_manylinux_tag_and_a_stripped_binary(artifacts, tmp_path):
    need("readelf")
    wheel = only(artifacts, "sluice_server-*.whl")
    # PyPI takes manylinux_2_N (PEP 600) tags; it refuses `linux_*`.
    assert re.fullmatch(
        rf"sluice_server-{re.escape(VERSION)}-py3-none-manylinux_2_\d+_{platform.machine()}\.whl", wheel.name
    ), wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        assert f"sluice_server-{VERSION}.data/scripts/sluice" in names, names
        assert "sluice_server/pytest_plugin.py" in names
        binary = tmp_path / "sluice"
        binary.write_bytes(z.read(f"sluice_server-{VERSION}.data/scripts/sluice"))
    assert elf_is_stripped(binary)


def test_wheel_installs_into_a_fresh_venv_and_its_fixture_works(artifacts, tmp_path):
    wheel = only(artifacts, "sluice_server-*.whl")
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv], cwd=tmp_path)
    py = venv / "bin" / "python"
    run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel, "pytest"], cwd=tmp_path)
    # The binary is on the venv's PATH, as ruff's is, and binary_path() finds it.
    assert run([venv / "bin" / "sluice", "--version"], cwd=tmp_path).stdout.startswith("sluice v=")
    env = env_without_sluice_bin()
    found = run([py, "-c", "import sluice_server; print(sluice_server.binary_path())"], cwd=tmp_path, env=env)
    assert found.stdout.strip() == str(venv / "bin" / "sluice")
    start_and_ping([venv / "bin" / "sluice", "--port", "0", "--save", ""], cwd=tmp_path, env=env)
    example = tmp_path / "example"
    shutil.copytree(ROOT / "python" / "example", example)
    out = run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", example], cwd=example, env=env).stdout
    assert "2 passed" in out, out


def test_pip_install_from_a_checkout_builds_the_binary(tmp_path):
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv], cwd=tmp_path)
    py = venv / "bin" / "python"
    # pip runs maturin (fetched into an isolated build environment), which runs cargo. A user's
    # install builds the release profile; here the dev one, which scripts/test.sh has built.
    env = env_without_sluice_bin(MATURIN_PEP517_ARGS="--profile dev --strip")
    run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", ROOT / "python"], cwd=tmp_path, env=env)
    start_and_ping([venv / "bin" / "sluice", "--port", "0", "--save", ""], cwd=tmp_path, env=env)


# The npm packages.


def npm_project(tmp_path, name="project"):
    need("node", "npm")
    project = tmp_path / name
    project.mkdir()
    run(["npm", "init", "-y"], cwd=project)
    return project


def npm_install(project, *what, extra=()):
    # --offline: the packages come from the tarballs; the other platforms' optional
    # packages (not in the cache) are skipped as npm skips them on any other platform.
    run(["npm", "install", "--offline", "--no-audit", "--no-fund", *extra, *what], cwd=project,
        env=env_without_sluice_bin())


def test_npm_packages_agree_on_names_versions_and_platforms():
    main = json.loads((ROOT / "npm" / "package.json").read_text())
    assert main["version"] == VERSION
    assert "os" not in main and "cpu" not in main, "the main package installs everywhere"
    platforms = {}
    for manifest in (ROOT / "npm" / "platforms").glob("*/package.json"):
        pkg = json.loads(manifest.read_text())
        assert pkg["name"] == f"@sluice-server/{manifest.parent.name}"
        assert pkg["version"] == VERSION
        assert [pkg["os"][0], pkg["cpu"][0]] == manifest.parent.name.split("-")
        assert pkg["files"] == ["bin/sluice"]
        platforms[pkg["name"]] = pkg["version"]
    assert main["optionalDependencies"] == platforms
    # The lookup table in binary.mjs names the same packages.
    table = run(["node", "-p", "JSON.stringify(Object.values((await import('./binary.mjs')).PLATFORM_PACKAGES))"],
                cwd=ROOT / "npm", check=False)
    if table.returncode != 0:  # -p has no top-level await before Node 20
        table = run(["node", "--input-type=module", "-e",
                     "const m = await import('./binary.mjs'); console.log(JSON.stringify(Object.values(m.PLATFORM_PACKAGES)))"],
                    cwd=ROOT / "npm")
    assert sorted(json.loads(table.stdout)) == sorted(platforms)


def test_npm_tarballs_install_into_a_fresh_project_and_the_helper_works(artifacts, tmp_path):
    main = only(artifacts, f"sluice-server-{VERSION}.tgz")
    plat = only(artifacts, f"sluice-server-linux-{NODE_PLATFORM}-{VERSION}.tgz")
    project = npm_project(tmp_path)
    npm_install(project, main, plat)
    assert (project / "node_modules" / "@sluice-server" / f"linux-{NODE_PLATFORM}" / "bin" / "sluice").is_file()
    # `npx sluice` runs the platform's binary through the package's command.
    out = run(["npx", "--offline", "sluice", "--version"], cwd=project, env=env_without_sluice_bin()).stdout
    assert out.startswith("sluice v="), out
    start_and_ping([project / "node_modules" / ".bin" / "sluice", "--port", "0", "--save", ""], cwd=project,
                   env=env_without_sluice_bin())
    shutil.copy(ROOT / "npm" / "example" / "limiter.test.mjs", project)
    out = run(["node", "--test"], cwd=project, env=env_without_sluice_bin()).stdout
    assert "# pass 2" in out and "# fail 0" in out, out


def test_npm_without_a_binary_for_the_platform_says_to_set_sluice_bin(artifacts, tmp_path):
    project = npm_project(tmp_path)
    npm_install(project, only(artifacts, f"sluice-server-{VERSION}.tgz"), extra=["--omit=optional"])
    failed = run(["node", "--input-type=module", "-e", "import { startSluice } from 'sluice-server'; await startSluice();"],
                 cwd=project, env=env_without_sluice_bin(), check=False)
    assert failed.returncode != 0
    assert "SLUICE_BIN" in failed.stderr and f"@sluice-server/linux-{NODE_PLATFORM}" in failed.stderr, failed.stderr
    command = run([project / "node_modules" / ".bin" / "sluice", "--version"], cwd=project,
                  env=env_without_sluice_bin(), check=False)
    assert command.returncode == 1 and "Set SLUICE_BIN" in command.stderr, command.stderr
    # With SLUICE_BIN set it runs that binary.
    with zipfile.ZipFile(only(artifacts, "sluice_server-*.whl")) as z:
        binary = tmp_path / "sluice"
        binary.write_bytes(z.read(f"sluice_server-{VERSION}.data/scripts/sluice"))
    binary.chmod(0o755)
    out = run([project / "node_modules" / ".bin" / "sluice", "--version"], cwd=project,
              env={**os.environ, "SLUICE_BIN": str(binary)}).stdout
    assert out.startswith("sluice v="), out


def test_npm_install_from_a_checkout_finds_the_built_binary(tmp_path):
    project = npm_project(tmp_path)
    npm_install(project, ROOT / "npm")
    found = run(["node", "--input-type=module", "-e", "import { binaryPath } from 'sluice-server'; console.log(binaryPath());"],
                cwd=project, env=env_without_sluice_bin()).stdout.strip()
    assert Path(found).parent.parent == ROOT / "target", found
    shutil.copy(ROOT / "npm" / "example" / "limiter.test.mjs", project)
    out = run(["node", "--test"], cwd=project, env=env_without_sluice_bin()).stdout
    assert "# pass 2" in out and "# fail 0" in out, out


# The Debian package.


@pytest.fixture(scope="module")
def extracted_deb(artifacts, tmp_path_factory):
    need("dpkg-deb")
    deb = only(artifacts, "sluice_*.deb")
    root = tmp_path_factory.mktemp("deb")
    run(["dpkg-deb", "--extract", deb, root], cwd=root)
    run(["dpkg-deb", "--control", deb, root / "DEBIAN"], cwd=root)
    return deb, root


def test_deb_holds_the_binary_the_unit_the_config_and_the_state_directory(extracted_deb):
    deb, root = extracted_deb
    contents = run(["dpkg-deb", "--contents", deb], cwd=root).stdout
    # Everything in the archive belongs to root; postinst hands /var/lib/sluice to sluice.
    owners = {line.split()[1] for line in contents.splitlines()}
    assert owners == {"root/root"}, owners
    assert os.access(root / "usr/bin/sluice", os.X_OK)
    need("readelf")
    assert elf_is_stripped(root / "usr/bin/sluice")
    assert (root / "etc/sluice/sluice.conf").read_text() == (ROOT / "deploy/sluice.conf").read_text()
    assert (root / "var/lib/sluice").is_dir()
    unit = (root / "lib/systemd/system/sluice.service").read_text()
    assert "\nExecStart=/usr/bin/sluice /etc/sluice/sluice.conf " in unit
    assert "\nUser=sluice\n" in unit and "\nStateDirectory=sluice\n" in unit
    control = (root / "DEBIAN/control").read_text()
    fields = dict(re.findall(r"^([A-Za-z-]+): (.*)$", control, re.M))
    assert fields["Package"] == "sluice" and fields["Version"] == f"{VERSION}-1"
    assert "adduser" in fields["Depends"]
    assert (root / "DEBIAN/conffiles").read_text().split() == ["/etc/sluice/sluice.conf"]
    postinst = (root / "DEBIAN/postinst").read_text()
    assert re.search(r"adduser .*--system --group --home /var/lib/sluice", postinst), postinst
    assert "chown sluice:sluice /var/lib/sluice" in postinst
    assert "chown root:sluice /etc/sluice/sluice.conf" in postinst and "chmod 640 /etc/sluice/sluice.conf" in postinst
    for script in ("postinst", "prerm", "postrm"):
        assert os.access(root / "DEBIAN" / script, os.X_OK)
        run(["sh", "-n", root / "DEBIAN" / script], cwd=root)


def test_deb_maintainer_scripts_make_the_user_and_enable_the_service(extracted_deb, tmp_path):
    # Run with every command they call replaced by a stub that records its arguments, so
    # nothing on this machine changes; `getent` finds no user yet.
    _, root = extracted_deb
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    calls = tmp_path / "calls"
    for name in ("adduser", "chown", "chmod", "deb-systemd-helper", "systemctl", "rm", "getent"):
        status = 2 if name == "getent" else 0
        (stubs / name).write_text(f'#!/bin/sh\necho "{name} $*" >>"{calls}"\nexit {status}\n')
        (stubs / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}"}

    def script(name, *args):
        calls.write_text("")
        run(["sh", root / "DEBIAN" / name, *args], cwd=tmp_path, env=env)
        return calls.read_text().splitlines()

    made = script("postinst", "configure")
    assert made[:6] == [
        "getent passwd sluice",
        "adduser --quiet --system --group --home /var/lib/sluice --no-create-home --shell /usr/sbin/nologin "
        "--gecos sluice rate limiter sluice",
        "chown sluice:sluice /var/lib/sluice",
        "chmod 750 /var/lib/sluice",
        "chown root:sluice /etc/sluice/sluice.conf",
        "chmod 640 /etc/sluice/sluice.conf",
    ], made
    assert "deb-systemd-helper enable sluice.service" in made
    assert not [c for c in script("postrm", "remove") if c.startswith("rm ")]
    assert "rm -rf /var/lib/sluice" in script("postrm", "purge")
    assert not [c for c in script("postinst", "abort-upgrade") if c.startswith("adduser")]


def test_deb_unit_passes_systemd_analyze_verify(extracted_deb, tmp_path):
    need("systemd-analyze")
    _, extracted = extracted_deb
    # A root holding the package's files and the system's own units (the targets the unit's
    # default dependencies name), so verify also checks ExecStart's binary inside the package.
    root = tmp_path / "root"
    shutil.copytree(extracted, root, symlinks=True, ignore=shutil.ignore_patterns("DEBIAN"))
    for units in ("/usr/lib/systemd/system", "/lib/systemd/system"):
        if Path(units).is_dir():
            shutil.copytree(units, root / "usr/lib/systemd/system", symlinks=True, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("sluice.service"))
            break
    result = run(["systemd-analyze", "verify", f"--root={root}", "/lib/systemd/system/sluice.service"],
                 cwd=tmp_path, check=False)
    # Unknown keys and similar mistakes are only warnings to verify: fail on any output.
    assert result.returncode == 0 and result.stdout + result.stderr == "", result.stdout + result.stderr


def test_deb_binary_starts_with_the_units_command_line_and_the_packaged_config(extracted_deb, tmp_path):
    _, root = extracted_deb
    unit = (root / "lib/systemd/system/sluice.service").read_text()
    argv = re.search(r"^ExecStart=(.*)$", unit, re.M).group(1).split()
    # The packaged conf with systemd's directories (/run/sluice, /var/lib/sluice) in scratch
    # space and a free port.
    conf = ((root / "etc/sluice/sluice.conf").read_text()
            .replace("/run/sluice", str(tmp_path)).replace("/var/lib/sluice", str(tmp_path))
            .replace("port 6379", "port 0"))
    (tmp_path / "sluice.conf").write_text(conf)
    assert argv[0] == "/usr/bin/sluice" and argv[1] == "/etc/sluice/sluice.conf"
    start_and_ping([root / "usr/bin/sluice", tmp_path / "sluice.conf", *argv[2:]], cwd=tmp_path,
                   env=env_without_sluice_bin())
