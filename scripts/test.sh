#!/usr/bin/env bash
# Runs every test: the Rust unit and integration tests (among them the differential test
# against a real redis-server), then the client tests: redis-py and redis-cli (tests/py, with
# the release artifacts built by scripts/package.sh --dev and installed in fresh environments),
# ioredis (tests/node) and the JUnit 5 extension with Jedis (java/build.sh --test). Before the
# long build it checks every tool and package the tests use and says exactly what is missing
# and how to install it; nothing is skipped. `.ci/run` installs all of it on a fresh Debian
# machine.
set -euo pipefail
cd "$(dirname "$0")/.."

# The Python with the test packages: $PYTHON, else the project's .venv, else python3.
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi

missing=()
need() { # need <command> <how to install>
    command -v "$1" >/dev/null 2>&1 || missing+=("$1: $2")
}
need cargo "install Rust: curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh (then open a new shell)"
need cc "apt-get install build-essential (the Lua interpreter is compiled from C)"
need redis-server "apt-get install redis-server (Debian then starts a service on port 6379: 'service redis-server stop'; the tests use their own ports)"
need redis-cli "apt-get install redis-tools"
need redis-check-rdb "apt-get install redis-tools"
need node "apt-get install nodejs (Node 18 or newer)"
need npm "apt-get install npm"
# The release artifacts' tests (tests/py/test_packages.py runs scripts/package.sh --dev).
need dpkg-deb "apt-get install dpkg"
need readelf "apt-get install binutils"
need systemd-analyze "apt-get install systemd"
# The JUnit 5 extension's tests (java/build.sh --test): it lists what it needs.
if ! out=$(java/build.sh --check 2>&1); then
    while IFS= read -r line; do missing+=("$line"); done <<<"$out"
fi
if command -v redis-server >/dev/null 2>&1; then
    v=$(redis-server --version | sed -n 's/.* v=\([0-9]*\)\..*/\1/p')
    [ "${v:-0}" -ge 7 ] || missing+=("redis-server 7.x (found: $(redis-server --version)): the differential tests compare with Redis 7.0")
fi
[ -f /etc/redis/redis.conf ] || missing+=("/etc/redis/redis.conf: apt-get install redis-server (the tests start sluice with Debian's stock file)")
if command -v node >/dev/null 2>&1; then
    v=$(node -p 'process.versions.node.split(".")[0]')
    [ "$v" -ge 18 ] || missing+=("Node 18 or newer (found $(node --version)): the tests use node --test")
fi
if ! command -v "$PYTHON" >/dev/null 2>&1; then
    missing+=("$PYTHON: apt-get install python3 python3-venv")
elif ! out=$("$PYTHON" - <<'PY' 2>&1
import sys
from importlib.metadata import PackageNotFoundError, version
bad = []
for dist, want in (("redis", 8), ("pytest", 8), ("limits", 5), ("maturin", 1)):
    try:
        found = version(dist)
        if int(found.split(".")[0]) < want:
            bad.append(f"{dist}>={want} (found {found})")
    except PackageNotFoundError:
        bad.append(f"{dist}>={want}")
print(", ".join(bad))
sys.exit(1 if bad else 0)
PY
); then
    missing+=("Python packages for $PYTHON: $out. Install them into a virtual environment (Debian refuses system-wide pip, PEP 668): python3 -m venv .venv && .venv/bin/pip install -r requirements.txt (Debian: apt-get install python3-venv first)")
fi
if [ "${#missing[@]}" -gt 0 ]; then
    echo "scripts/test.sh: missing prerequisites, nothing was run:" >&2
    for m in "${missing[@]}"; do echo "  - $m" >&2; done
    exit 2
fi

# The client tests start target/debug/sluice, so build it first.
cargo build
cargo test
"$PYTHON" -m pytest -q -p no:cacheprovider tests/py
(
    cd tests/node
    # install, not `ci`: a node_modules left from an older package.json gets what is new.
    npm install --no-audit --no-fund
    node --test
)
# The JUnit 5 extension, with Jedis.
java/build.sh --test
