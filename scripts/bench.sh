#!/usr/bin/env bash
# Reproduces BENCHMARKS.md: builds the release binaries (sluice and loadgen), then runs
# scripts/bench.py, which starts sluice and redis-server on loopback (ports 7379 and 7380 by
# default), runs every workload against both, and writes BENCHMARKS.md and
# benchmarks/ratios.svg. Needs redis-server and redis-benchmark (Debian: redis-server,
# redis-tools) and python3. Takes about 25 minutes on 2 cores (the aof step about 10 of them:
# `--only aof` runs it alone); extra arguments go to
# bench.py (e.g. --reps 1 --skip reaper; see scripts/bench.py --help).
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in redis-server redis-benchmark python3; do
  command -v "$tool" >/dev/null || { echo "bench.sh: $tool is needed" >&2; exit 1; }
done
cargo build --release --bin sluice
cargo build --release -p sluice-loadgen --bin loadgen
exec python3 scripts/bench.py --command "scripts/bench.sh${*:+ $*}" "$@"
