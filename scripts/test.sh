#!/usr/bin/env bash
# Runs every test: the Rust unit and integration tests (among them the differential test
# against a real redis-server), then the client tests: redis-py and redis-cli (tests/py) and
# ioredis (tests/node). Needs redis-server, redis-cli, python3 with redis>=8 and pytest, node
# and npm; a missing tool fails the run, nothing is skipped. `.ci/run` installs them.
set -euo pipefail
cd "$(dirname "$0")/.."

# The client tests start target/debug/sluice, so build it first.
cargo build
cargo test
python3 -m pytest -q -p no:cacheprovider tests/py
(
    cd tests/node
    # install, not `ci`: a node_modules left from an older package.json gets what is new.
    npm install --no-audit --no-fund
    node --test
)
