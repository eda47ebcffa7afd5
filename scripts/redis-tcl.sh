#!/usr/bin/env bash
# Runs units of Redis's own Tcl test suite against a sluice, in the suite's external-server
# mode, and summarises the results per unit.
#
#   scripts/redis-tcl.sh PATH_TO_REDIS_TESTS [UNIT …]
#
# PATH_TO_REDIS_TESTS is a directory holding Redis 7.0.15's `runtest` and `tests/` (for
# example `git archive 7.0.15 runtest tests | tar -x -C DIR` from a Redis checkout; nothing of
# Redis lives in this repository). UNIT defaults to every unit (see UNITS below).
#
# For each unit it starts a fresh target/debug/sluice (or $SLUICE_BIN; build it first) on a
# free loopback port, since some units leave config behind, and stops it after the unit. It
# runs the unit with `runtest --host 127.0.0.1 --port N --single UNIT`, skipping the tests
# tagged as needing replication, DEBUG, or PFDEBUG (sluice has none of them), not checking
# OBJECT ENCODING or DEBUG DIGEST, and with `--durable` so that an unknown command fails one
# test rather than ending the unit. Each unit's log goes to $OUT (default
# target/redis-tcl/UNIT.log); the last lines printed are the per-unit counts and the names of
# the failing tests. Needs tclsh 8.5+ (Debian: `apt-get install tcl`).
#
# Each unit is bounded by $UNIT_TIMEOUT seconds (default 600), each test by the suite's
# --timeout (120 s). The sluice it started is stopped on exit. $RUNTEST_ARGS is passed on to
# runtest (e.g. RUNTEST_ARGS=--verbose; two runs at once need different `--baseport`s, as
# runtest's own helper port is fixed); $SKIP_TESTS is a newline-separated list of test names
# (or /regexps) to skip (default: none). See docs/redis-tcl-suite.md.
set -euo pipefail

if [ $# -lt 1 ]; then
    echo "usage: $0 PATH_TO_REDIS_TESTS [UNIT …]" >&2
    exit 2
fi
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TESTS="$(cd "$1" && pwd)"
shift
[ -x "$TESTS/runtest" ] || { echo "$TESTS/runtest not found" >&2; exit 2; }
command -v tclsh >/dev/null || { echo "tclsh not found (apt-get install tcl)" >&2; exit 2; }

UNITS=("$@")
if [ ${#UNITS[@]} -eq 0 ]; then
    # Every unit of Redis 7.0.15's tests/unit but moduleapi (it needs Redis's test modules);
    # the ones whose servers Redis tags external:skip report their tests as ignored.
    UNITS=(type/string type/incr type/list type/list-2 type/list-3 type/set type/zset
        type/hash type/stream type/stream-cgroups keyspace sort dump bitops bitfield
        hyperloglog multi geo acl acl-v2 auth tracking functions scripting latency-monitor
        pause introspection introspection-2 lazyfree pubsub pubsubshard slowlog querybuf
        expire other scan protocol info-command info quit violations pendingquerybuf
        replybufsize limits wait client-eviction oom-score-adj shutdown aofrw networking
        obuf-limits maxmemory memefficiency cluster-scripting cluster cluster/misc
        cluster/links cluster/announced-endpoints printver tls)
fi
BIN="${SLUICE_BIN:-$ROOT/target/debug/sluice}"
[ -x "$BIN" ] || { echo "$BIN not found: cargo build first" >&2; exit 2; }
OUT="${OUT:-$ROOT/target/redis-tcl}"
UNIT_TIMEOUT="${UNIT_TIMEOUT:-600}"
mkdir -p "$OUT"
SKIP_TESTS="${SKIP_TESTS-}"
SKIP_ARGS=()
while IFS= read -r t; do
    [ -n "$t" ] && SKIP_ARGS+=(--skiptest "$t")
done <<<"$SKIP_TESTS"
# shellcheck disable=SC2206 # word splitting of RUNTEST_ARGS is intended
EXTRA=(${RUNTEST_ARGS:-})

# Each unit gets a fresh sluice on a free port (some units leave config behind, e.g. set.tcl
# raises proto-max-bulk-len); its first stdout line names the address.
SLUICE_PID=""
PORT=""
start_sluice() {
    local portfile="$OUT/sluice.stdout"
    # Removed first: the new server's redirection may happen after the first read below,
    # which would otherwise find the previous server's port.
    rm -f "$portfile"
    "$BIN" --port 0 --bind 127.0.0.1 --save '' --loglevel warning --enable-debug-command local >"$portfile" 2>"$OUT/sluice.stderr" &
    SLUICE_PID=$!
    PORT=""
    for _ in $(seq 1 100); do
        PORT="$(sed -n 's/^sluice listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$portfile" 2>/dev/null | head -n1 || true)"
        [ -n "$PORT" ] && return 0
        kill -0 "$SLUICE_PID" 2>/dev/null || { echo "sluice exited:" >&2; cat "$OUT/sluice.stderr" >&2; exit 1; }
        sleep 0.1
    done
    echo "sluice did not report its port" >&2
    exit 1
}
# A wedged server may not finish its graceful shutdown: give it 5 s, then KILL.
stop_sluice() {
    [ -n "$SLUICE_PID" ] || return 0
    local pid="$SLUICE_PID"
    SLUICE_PID=""
    kill "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
trap stop_sluice EXIT
echo "logs in $OUT"

SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
for unit in "${UNITS[@]}"; do
    log="$OUT/$(echo "$unit" | tr / _).log"
    start_sluice
    echo "== $unit (sluice pid $SLUICE_PID on 127.0.0.1:$PORT)"
    (
        cd "$TESTS"
        timeout --kill-after=10 "$UNIT_TIMEOUT" ./runtest --host 127.0.0.1 --port "$PORT" \
            --single "unit/$unit" --durable --timeout 120 \
            --tags -needs:repl --tags -needs:debug --tags -needs:pfdebug \
            --ignore-encoding --ignore-digest --clients 1 "${SKIP_ARGS[@]}" "${EXTRA[@]}"
    ) >"$log" 2>&1 || true
    # Drop the colour codes; count the result lines the suite prints before "The End".
    sed -i 's/\x1b\[[0-9;]*m//g' "$log"
    body="$(sed '/The End/,$d' "$log")"
    ok=$(grep -c '^\[ok\]' <<<"$body" || true)
    err=$(grep -c '^\[err\]' <<<"$body" || true)
    ignored=$(grep -c '^\[ignore\]\|^\[skip\]' <<<"$body" || true)
    ended=yes
    grep -q 'The End' "$log" || ended="no (timed out or aborted)"
    {
        echo "$unit: ok=$ok err=$err ignored=$ignored finished=$ended"
        # Each failure with the first line of its message.
        grep -A1 '^\[err\]' <<<"$body" | grep -v '^--$' | cut -c1-200 | sed 's/^/    /' || true
    } | tee -a "$SUMMARY"
    if ! kill -0 "$SLUICE_PID" 2>/dev/null; then
        echo "sluice died during $unit" | tee -a "$SUMMARY"
        SLUICE_PID=""
        exit 1
    fi
    stop_sluice
done
echo "summary: $SUMMARY"
