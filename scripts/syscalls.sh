#!/usr/bin/env bash
# System calls and context switches a server makes per decision: the kernel's share of a
# request, which callgrind (scripts/instructions.sh) does not see. The server runs normally;
# `perf stat` counts syscall tracepoints and scheduler events on its process (all threads)
# while loadgen drives a fixed number of decisions. Counts depend on how requests batch, so
# compare the two servers in one run on the same machine.
#
#   scripts/syscalls.sh sluice target/release/sluice getset 50 1 [extra server args…]
#   scripts/syscalls.sh redis redis-server getset 50 1
#
# Needs perf (Debian's linux-perf; tracepoints work where hardware counters do not), redis-cli
# and a release build of loadgen. Loopback only; port 7556 (SYSCALLS_PORT overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
kind=$1 bin=$2 workload=$3 conns=$4 pipeline=$5
shift 5
port=${SYSCALLS_PORT:-7556}
decisions=${SYSCALLS_DECISIONS:-200000}
loadgen=target/release/loadgen
events=syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_read,syscalls:sys_enter_recvfrom,syscalls:sys_enter_write,syscalls:sys_enter_sendto,syscalls:sys_enter_writev,syscalls:sys_enter_futex,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_epoll_ctl,context-switches,cpu-migrations

if [ "$kind" = redis ]; then
  "$bin" --port "$port" --save '' --appendonly no "$@" >/dev/null 2>&1 &
else
  "$bin" --port "$port" --save '' "$@" >/dev/null 2>&1 &
fi
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
# Warm up (keys created, buffers grown) before counting.
"$loadgen" --port "$port" --workload "$workload" --connections "$conns" --pipeline "$pipeline" \
  --max-decisions 20000 --duration 30 --warmup 0 >/dev/null
out=$(mktemp)
perf stat -x, -o "$out" -e "$events" -p "$pid" &
perf_pid=$!
sleep 0.3
"$loadgen" --port "$port" --workload "$workload" --connections "$conns" --pipeline "$pipeline" \
  --max-decisions "$decisions" --duration 60 --warmup 0 >/dev/null
kill -INT "$perf_pid"
wait "$perf_pid" 2>/dev/null || true
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait "$pid" 2>/dev/null || true
trap - EXIT
echo "$kind $workload (c=$conns, P=$pipeline), per decision over $decisions decisions:"
awk -F, -v n="$decisions" '$1 ~ /^[0-9]+$/ && $1 > 0 {
  name = $3; sub(/^syscalls:sys_enter_/, "", name);
  printf "  %-16s %8.3f\n", name, $1 / n }' "$out"
rm -f "$out"
