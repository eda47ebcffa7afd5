#!/usr/bin/env bash
# Server CPU per decision of the prototype's epoll and io_uring backends, beside sluice
# (`--threads 1`, its default event loop) and Redis, at loadgen `getset` (50,1) and (50,16):
# server pinned to CPU 1, loadgen to CPU 0, the server's CPU time (the sum of its threads'
# /proc/PID/task/*/schedstat, in ns: what `perf stat -e task-clock` counts, without its
# `<not counted>` when stopped by a signal from a script) over a fixed number of decisions
# (after a warm-up of 20,000), each server started fresh, the servers' order rotating from
# one repetition to the next. Prints one line per run and then, per
# cell and server, the median ns of server CPU per decision (min-max), the median decisions
# per server CPU-second, and its decisions per CPU-second against the prototype's epoll
# backend's in the same repetition (the median of those ratios: on a shared machine the
# load drifts between repetitions more than between neighbouring runs).
#
#   benchmarks/uring_proto/run.sh                 # 3 repetitions, every server (~8 min)
#   REPS=5 SERVERS="proto-epoll proto-uring sluice redis" benchmarks/uring_proto/run.sh
#   SYSCALLS=1 benchmarks/uring_proto/run.sh      # one run per cell and server, counting
#                                                  # system calls and context switches instead
#   PROFILE=proto-uring benchmarks/uring_proto/run.sh   # perf record -e cpu-clock -g of one
#                        # server per cell, into PROFILE_DIR (default: the current directory)
#                        # as perf.<server>.<c>x<P>.data
#
# Environment: REPS (3), CELLS ("50:1 50:16"), DECISIONS_P1 (200000), DECISIONS_P16
# (800000), PORT (7740), SERVERS (all of the list below), SERVER_CPU (1), CLIENT_CPU (0).
# Needs perf, redis-server, redis-cli, taskset and release builds of sluice and loadgen
# (`cargo build --release --bin sluice && cargo build --release -p sluice-loadgen --bin loadgen`);
# builds the prototype itself. Loopback only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
profile_dir=${PROFILE_DIR:-$(pwd)}
cd "$here/../.."
reps=${REPS:-3}
cells=${CELLS:-"50:1 50:16"}
port=${PORT:-7740}
server_cpu=${SERVER_CPU:-1}
client_cpu=${CLIENT_CPU:-0}
loadgen=target/release/loadgen
proto=$here/target/release/uring-proto
cargo build --release --quiet --manifest-path "$here/Cargo.toml"
[ -x "$loadgen" ] && [ -x target/release/sluice ] || {
  echo "needs target/release/sluice and target/release/loadgen" >&2
  exit 2
}

# name → server command line (the port is appended).
declare -A cmd=(
  [proto-epoll]="$proto --backend epoll"
  [proto-uring]="$proto --backend uring"
  [proto-uring-nofixed]="$proto --backend uring --fixed-files off"
  [proto-uring-oneshot]="$proto --backend uring --recv oneshot"
  [proto-uring-coop]="$proto --backend uring --taskrun coop"
  [proto-uring-plain]="$proto --backend uring --taskrun none"
  [proto-uring-ringfd]="$proto --backend uring --ring-fd on"
  [proto-uring-wait1]="$proto --backend uring --wait one"
  [proto-uring-bufs64]="$proto --backend uring --bufs 64"
  [proto-uring-coop64]="$proto --backend uring --taskrun coop --bufs 64"
  [sluice]="target/release/sluice --threads 1 --save '' --port"
  [redis]="redis-server --save '' --appendonly no --port"
)
order="proto-epoll proto-uring proto-uring-nofixed proto-uring-oneshot proto-uring-coop proto-uring-plain proto-uring-ringfd proto-uring-wait1 proto-uring-bufs64 proto-uring-coop64 sluice redis"
servers=${SERVERS:-$order}
for s in $servers; do
  [ -n "${cmd[$s]:-}" ] || { echo "unknown server $s (known: $order)" >&2; exit 2; }
done

pid=
stop_server() {
  [ -n "$pid" ] || return 0
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
  # A ring's requests are torn down after its process exits: wait for the port to be free.
  for _ in $(seq 1 100); do
    ss -Hltn "sport = :$port" | grep -q . || return 0
    sleep 0.05
  done
}
trap stop_server EXIT

start_server() {
  local s=$1
  case $s in
    proto-*) eval "exec taskset -c $server_cpu ${cmd[$s]} --port $port" >/dev/null 2>&1 & ;;
    *) eval "exec taskset -c $server_cpu ${cmd[$s]} $port" >/dev/null 2>&1 & ;;
  esac
  pid=$!
  for _ in $(seq 1 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "$s did not start" >&2
  exit 1
}

# CPU time (ns) the process's threads have run: the first field of each thread's schedstat.
cpu_ns() {
  cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {print s}'
}

drive() { # c P decisions [extra loadgen args]
  taskset -c "$client_cpu" "$loadgen" --port "$port" --workload getset --connections "$1" \
    --pipeline "$2" --max-decisions "$3" --duration 120 --warmup 0 "${@:4}"
}

rotate() { # the list rotated left by $2
  local -a a=($1)
  local n=${#a[@]} k=$(($2 % ${#a[@]})) i
  for ((i = 0; i < n; i++)); do printf '%s ' "${a[$(((i + k) % n))]}"; done
}

results=$(mktemp)
echo "# $(date -u '+%F %T') UTC, load average $(cut -d' ' -f1-3 /proc/loadavg), $(git rev-parse --short HEAD)"
nreps=$reps
[ -n "${SYSCALLS:-}${PROFILE:-}" ] && nreps=1
for ((rep = 0; rep < nreps; rep++)); do
  for cell in $cells; do
    c=${cell%%:*} p=${cell##*:}
    n=${DECISIONS_P16:-800000}
    [ "$p" = 1 ] && n=${DECISIONS_P1:-200000}
    for s in $(rotate "$servers" "$rep"); do
      if [ -n "${PROFILE:-}" ] && [ "$s" != "$PROFILE" ]; then continue; fi
      start_server "$s"
      drive "$c" "$p" 20000 >/dev/null
      out=$(mktemp)
      perf_pid=
      if [ -n "${PROFILE:-}" ]; then
        perf record -q -e cpu-clock -g -p "$pid" -o "$profile_dir/perf.$s.${c}x$p.data" 2>/dev/null &
        perf_pid=$!
      elif [ -n "${SYSCALLS:-}" ]; then
        perf stat -x, -o "$out" -e task-clock,context-switches,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendto,syscalls:sys_enter_read,syscalls:sys_enter_write -p "$pid" &
        perf_pid=$!
      fi
      sleep 0.3
      cpu0=$(cpu_ns "$pid")
      json=$(drive "$c" "$p" "$n" --json)
      cpu1=$(cpu_ns "$pid")
      if [ -n "$perf_pid" ]; then
        kill -INT "$perf_pid"
        wait "$perf_pid" 2>/dev/null || true
      fi
      stop_server
      decisions=$(sed 's/.*"decisions":\([0-9]*\).*/\1/' <<<"$json")
      rate=$(sed 's/.*"decisions_per_sec":\([0-9.]*\).*/\1/' <<<"$json")
      p99=$(sed 's/.*"p99_us":\([0-9]*\).*/\1/' <<<"$json")
      if [ -n "${PROFILE:-}" ]; then
        echo "profiled $s (${c},${p}): $decisions decisions into $profile_dir/perf.$s.${c}x$p.data"
      elif [ -n "${SYSCALLS:-}" ]; then
        echo "$s (${c},${p}) per decision over $decisions decisions:"
        awk -F, -v n="$decisions" '$1 ~ /^[0-9.]+$/ {
          name = $3; sub(/^syscalls:sys_enter_/, "", name);
          if (name == "task-clock") printf "  %-16s %8.0f ns\n", name, $1 * 1e6 / n;
          else if ($1 > 0) printf "  %-16s %8.3f\n", name, $1 / n }' "$out"
      else
        ns=$(awk -v a="$cpu0" -v b="$cpu1" -v n="$decisions" 'BEGIN {printf "%.0f", (b - a) / n}')
        echo "rep $rep (${c},${p}) $s: $ns ns server CPU per decision, $rate decisions/s, p99 $p99 µs"
        echo "$c,$p,$s,$ns,$rep" >>"$results"
      fi
      rm -f "$out"
    done
  done
done
echo "# end $(date -u '+%F %T') UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -z "${SYSCALLS:-}${PROFILE:-}" ]; then
  python3 - "$results" "$servers" <<'EOF'
import statistics, sys
rows = [l.strip().split(",") for l in open(sys.argv[1]) if l.strip()]
servers = sys.argv[2].split()
cells = []
for r in rows:
    if (r[0], r[1]) not in cells:
        cells.append((r[0], r[1]))
print("| (c,P) | server | ns server CPU per decision, median (min-max) | decisions per CPU-s | per CPU-s ÷ proto-epoll's, paired by repetition: median (min-max) |")
print("|---|---|---|---|---|")
for c, p in cells:
    ns = {(r[2], r[4]): int(r[3]) for r in rows if (r[0], r[1]) == (c, p)}
    for s in servers:
        v = [n for (srv, _), n in ns.items() if srv == s]
        if not v:
            continue
        m = statistics.median(v)
        pairs = [ns[("proto-epoll", rep)] / n for (srv, rep), n in ns.items()
                 if srv == s and ("proto-epoll", rep) in ns]
        ratio = (f"{statistics.median(pairs):.3f}× ({min(pairs):.3f}-{max(pairs):.3f})"
                 if pairs else "—")
        print(f"| ({c},{p}) | {s} | {m:,.0f} ({min(v):,}-{max(v):,}) | {1e9 / m:,.0f} | {ratio} |")
EOF
fi
rm -f "$results"
