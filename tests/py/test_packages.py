"""The Python wheel and the npm package, built and used as their users would.

One build serves both: maturin builds the wheel (the `sluice` binary plus the pytest plugin)
with cargo's dev profile, reusing the target/debug build scripts/test.sh made; the npm
package is packed with the binary taken out of that wheel. Each is installed into a fresh
environment (a new venv / a new npm project) and runs its example test there. Release
builds and publishing are in CONTRIBUTING.md.
"""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(cmd, cwd, timeout=900, env=None):
    proc = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )
    assert proc.returncode == 0, f"{cmd} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    try:
        import maturin  # noqa: F401
    except ImportError:
        pytest.fail(f"maturin is not installed for {sys.executable}: pip install -r requirements.txt")
    out = tmp_path_factory.mktemp("wheel")
    run(
        [sys.executable, "-m", "maturin", "build", "--profile", "dev", "--offline", "--locked",
         "--strip", "--compatibility", "linux", "--out", out],
        cwd=ROOT / "python",
    )
    wheels = list(out.glob("sluice_server-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_installs_into_a_fresh_venv_and_its_fixture_works(wheel, tmp_path):
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith(".data/scripts/sluice") for n in names), names
    assert "sluice_server/pytest_plugin.py" in names
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv], cwd=tmp_path)
    py = venv / "bin" / "python"
    run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel, "pytest"], cwd=tmp_path)
    # The binary is on the venv's PATH, as ruff's is.
    assert run([venv / "bin" / "sluice", "--version"], cwd=tmp_path).startswith("sluice v=")
    example = tmp_path / "example"
    shutil.copytree(ROOT / "python" / "example", example)
    env = {k: v for k, v in os.environ.items() if k != "SLUICE_BIN"}
    out = run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", example], cwd=example, env=env)
    assert "2 passed" in out, out


def test_npm_package_installs_into_a_fresh_project_and_its_helper_works(wheel, tmp_path):
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not on PATH (Debian: apt-get install nodejs npm)")
    # The package directory as it is in the repository, plus the binary from the wheel.
    pkg = tmp_path / "pkg"
    shutil.copytree(ROOT / "npm", pkg, ignore=shutil.ignore_patterns("node_modules", "bin", "example"))
    (pkg / "bin").mkdir()
    with zipfile.ZipFile(wheel) as z:
        member = next(n for n in z.namelist() if n.endswith(".data/scripts/sluice"))
        (pkg / "bin" / "sluice").write_bytes(z.read(member))
    (pkg / "bin" / "sluice").chmod(0o755)
    packed = run(["npm", "pack", "--silent", "--pack-destination", tmp_path], cwd=pkg).strip().splitlines()[-1]
    tarball = tmp_path / packed
    project = tmp_path / "project"
    project.mkdir()
    run(["npm", "init", "-y"], cwd=project)
    run(["npm", "install", "--no-audit", "--no-fund", tarball], cwd=project)
    assert (project / "node_modules" / ".bin" / "sluice").exists()
    shutil.copy(ROOT / "npm" / "example" / "limiter.test.mjs", project)
    env = {k: v for k, v in os.environ.items() if k != "SLUICE_BIN"}
    out = run(["node", "--test"], cwd=project, env=env)
    assert "# pass 2" in out and "# fail 0" in out, out
