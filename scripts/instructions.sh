#!/usr/bin/env bash
# Instructions a server executes in user space per decision, measured with valgrind's
# callgrind (deterministic, unlike timings on a shared 2-core machine): the server runs under
# callgrind, loadgen drives N decisions over one connection, and the difference between a run
# of SMALL+20,000 and one of SMALL decisions, divided by 20,000, removes start-up and shutdown.
#
#   scripts/instructions.sh sluice target/release/sluice getset 16
#   scripts/instructions.sh redis redis-server fixed 1
#   scripts/instructions.sh table target/release/sluice [redis-server]
#
# The `table` form measures every seed workload (getset, fixed window, sliding window in
# MULTI/EXEC, EVALSHA script, CL.THROTTLE) at pipeline 1 and 16 and prints a Markdown table,
# with Redis beside sluice when its binary is given (CL.THROTTLE is sluice's own: no Redis
# figure). WORKLOADS and PIPELINES narrow it, e.g. WORKLOADS="getset script" PIPELINES=1.
#
# Needs valgrind, redis-cli and a release build of loadgen. Loopback only; port 7555, or
# INSTRUCTIONS_PORT (two measurements at once on one machine need two ports). LOADGEN_ARGS
# adds loadgen options; by default `--window-ms 3600000`: with a 1 s window the share of
# first-in-window decisions (and so the count) would grow as the machine gets slower.
set -euo pipefail
cd "$(dirname "$0")/.."
port=${INSTRUCTIONS_PORT:-7555}
loadgen=target/release/loadgen
loadgen_args=${LOADGEN_ARGS:---window-ms 3600000}

run() {
  local kind=$1 bin=$2 workload=$3 pipeline=$4 n=$5 out
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
  # shellcheck disable=SC2086 # loadgen_args is a list of options
  "$loadgen" --port $port --workload "$workload" --connections 1 --pipeline "$pipeline" \
    --max-decisions "$n" --duration 300 --warmup 0 $loadgen_args >/dev/null
  redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" || true
  grep -E '^(summary|totals):' "$out" | head -1 | awk '{print $2}'
  rm -f "$out"
}

# Instructions per decision of one server, workload and pipeline depth.
per_decision() {
  local small=2000
  local a b
  a=$(run "$1" "$2" "$3" "$4" $small)
  b=$(run "$1" "$2" "$3" "$4" $((small + 20000)))
  echo $(((b - a) / 20000))
}

thousands() {
  echo "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'
}

if [ "${1:-}" = table ]; then
  sluice=$2 redis=${3:-}
  echo "| workload | P | sluice | Redis 7.0.15 | sluice ÷ Redis |"
  echo "|---|---|---|---|---|"
  for workload in ${WORKLOADS:-getset fixed sliding script throttle}; do
    for pipeline in ${PIPELINES:-1 16}; do
      s=$(per_decision sluice "$sluice" "$workload" "$pipeline")
      r="—" ratio="—"
      if [ -n "$redis" ] && [ "$workload" != throttle ]; then
        r=$(per_decision redis "$redis" "$workload" "$pipeline")
        ratio=$(awk -v s="$s" -v r="$r" 'BEGIN { printf "%.2f×", s / r }')
        r=$(thousands "$r")
      fi
      echo "| $workload | $pipeline | $(thousands "$s") | $r | $ratio |"
    done
  done
  exit 0
fi

kind=$1 bin=$2 workload=$3 pipeline=$4
echo "$kind $workload P=$pipeline: $(per_decision "$kind" "$bin" "$workload" "$pipeline") instructions per decision"
