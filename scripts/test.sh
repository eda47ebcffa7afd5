#!/usr/bin/env bash
# Runs every check and test. First the gates CONTRIBUTING asks of every change, which fail
# fast: formatting (rustfmt), lints (clippy, every warning an error, `[lints]` in Cargo.toml)
# and the documentation build (rustdoc, every warning an error). Then the Rust unit and
# integration tests (among them the differential test
# against a real redis-server), then the client tests: redis-py and redis-cli (tests/py),
# ioredis (tests/node), with the release artifacts built by scripts/package.sh --dev and
# installed in fresh environments (tests/py), and the JUnit 5 extension with Jedis
# (java/build.sh --test). Before the long build it checks every tool and package the tests use
# and says exactly what is missing and how to install it; nothing is skipped. `.ci/run`
# installs all of it on a fresh Debian machine.
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
if command -v cargo >/dev/null 2>&1; then
    cargo fmt --version >/dev/null 2>&1 || missing+=("rustfmt: rustup component add rustfmt")
    cargo clippy --version >/dev/null 2>&1 || missing+=("clippy: rustup component add clippy")
fi
need cc "apt-get install build-essential (the Lua interpreter is compiled from C)"
need redis-server "apt-get install redis-server (the tests start their own on free ports)"
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

# A full run writes about 4 GB (the debug build, the Dockerfile check's own build, the release
# packages, temporary data directories); a disk that fills up mid-run fails tests in ways that
# look like bugs, so say how much room there is first.
free_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
echo "scripts/test.sh: $((free_kb / 1024 / 1024)) GiB free on the disk holding $(pwd)"
if [ "${free_kb:-0}" -lt $((5 * 1024 * 1024)) ]; then
    echo "scripts/test.sh: warning: under 5 GiB free; the run may fail with 'No space left on device'" >&2
fi

# The gates, before the long build: fail fast on a formatting, lint or doc problem.
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

# Every suite runs even when an earlier one failed; each one's output is kept to count its
# tests, and the last line says `N passed, M failed` for the whole run (a suite that fails
# without reporting a failed test, e.g. a build error, counts as one failure). The exit
# status is non-zero if anything failed.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
passed=0
failed=0
count() { # count <log> <exit status> <perl program printing "passed failed">
    local p f
    read -r p f < <(perl -ne "$3" "$1")
    if [ "$2" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then f=1; fi
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0}))
}
status=0

# The client tests start target/debug/sluice, so build it first.
rc=0
# --workspace: the server and the crates of its bottom layers (crates/) and the load generator.
{ cargo build && cargo test --workspace; } 2>&1 | tee "$logs/cargo" || rc=$?
count "$logs/cargo" "$rc" \
    '$p += $1, $f += $2 if /^test result: \w+\. (\d+) passed; (\d+) failed/; END { print $p+0, " ", $f+0, "\n" }'
[ "$rc" -eq 0 ] || status=1

# tests/py/test_cluster_reshard.py drives ioredis too (tests/node/workers): install it first.
(cd tests/node && npm install --no-audit --no-fund) || status=1

rc=0
"$PYTHON" -m pytest -q -p no:cacheprovider tests/py 2>&1 | tee "$logs/pytest" || rc=$?
# The summary line: "3 failed, 97 passed, 1 error in 12.3s" (any order).
count "$logs/pytest" "$rc" \
    'if (/^=*\s*(\d+ (passed|failed|errors?)\b.*) in [\d.]+s/) { $s = $1 } END { $p = $s =~ /(\d+) passed/ ? $1 : 0; $f += $1 while $s =~ /(\d+) (?:failed|errors?)\b/g; print $p+0, " ", $f+0, "\n" }'
[ "$rc" -eq 0 ] || status=1

rc=0
(
    cd tests/node
    # install, not `ci`: a node_modules left from an older package.json gets what is new.
    npm install --no-audit --no-fund
    node --test
) 2>&1 | tee "$logs/node" || rc=$?
count "$logs/node" "$rc" \
    '$p = $1 if /^# pass (\d+)/; $f += $1 if /^# (?:fail|cancelled) (\d+)/; END { print $p+0, " ", $f+0, "\n" }'
[ "$rc" -eq 0 ] || status=1

# The JUnit 5 extension, with Jedis; its last line is "java: N passed, M failed".
rc=0
java/build.sh --test 2>&1 | tee "$logs/java" || rc=$?
count "$logs/java" "$rc" \
    '($p, $f) = ($1, $2) if /^java: (\d+) passed, (\d+) failed/; END { print $p+0, " ", $f+0, "\n" }'
[ "$rc" -eq 0 ] || status=1

echo "$passed passed, $failed failed"
exit "$status"
