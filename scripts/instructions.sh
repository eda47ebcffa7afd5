#!/usr/bin/env bash
# Instructions a server executes in user space per decision, measured with valgrind's
# callgrind (deterministic, unlike timings on a shared 2-core machine): the server runs under
# callgrind, loadgen drives N decisions over one connection, and the difference between a run
# of 22,000 and one of 2,000 decisions, divided by 20,000, removes start-up and shutdown.
#
#   scripts/instructions.sh sluice target/release/sluice getset 16
#   scripts/instructions.sh redis redis-server fixed 1
#
# Needs valgrind, redis-cli and a release build of loadgen. Loopback only; port 7555, or
# INSTRUCTIONS_PORT (two measurements at once on one machine need two ports). LOADGEN_ARGS
# adds loadgen options, e.g. LOADGEN_ARGS="--window-ms 3600000": with the default 1 s window
# the share of first-in-window decisions (and so the count) grows as the machine gets slower.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=$1 bin=$2 workload=$3 pipeline=$4
port=${INSTRUCTIONS_PORT:-7555}
loadgen=target/release/loadgen

run() {
  local n=$1 out
  out=$(mktemp)
  if [ "$kind" = redis ]; then
    valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" --port $port --save '' --appendonly no >/dev/null 2>&1 &
  else
    # One event loop by default: under valgrind threads run one at a time anyway, and an
    # idle second loop would only add its polling. SLUICE_THREADS=0 passes no --threads
    # (the default, one loop per CPU; also for builds older than the option).
    local threads=()
    [ "${SLUICE_THREADS:-1}" != 0 ] && threads=(--threads "${SLUICE_THREADS:-1}")
    # SLUICE_ARGS adds server options, e.g. SLUICE_ARGS="--io-backend epoll".
    valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" --port $port "${threads[@]}" --save '' ${SLUICE_ARGS:-} >/dev/null 2>&1 &
  fi
  local pid=$!
  for _ in $(seq 1 200); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.2; done
  "$loadgen" --port $port --workload "$workload" --connections 1 --pipeline "$pipeline" \
    --max-decisions "$n" --duration 300 --warmup 0 ${LOADGEN_ARGS:-} >/dev/null
  redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" || true
  grep -E '^(summary|totals):' "$out" | head -1 | awk '{print $2}'
  rm -f "$out"
}

small=$(run 2000)
large=$(run 22000)
echo "$kind $workload P=$pipeline: $(( (large - small) / 20000 )) instructions per decision"
