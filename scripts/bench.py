#!/usr/bin/env python3
"""Side-by-side benchmark of sluice and redis-server on this machine; writes BENCHMARKS.md.

Run through scripts/bench.sh, which builds the release binaries first. Everything talks to
127.0.0.1 only, every load loop is bounded in time and count, and both servers run with
persistence off. Standard library only (the chart is a hand-written SVG).

Steps, all in one run:
  1. throughput and latency: loadgen's workloads at (connections, pipeline) = (1,1), (50,1),
     (50,16) against both servers, interleaved, each cell `--reps` times (median reported);
  2. redis-benchmark -t set,get,incr -c 50 at -P 16 and -P 1 (a fifth of the requests) against both;
  2b. unix: redis-benchmark -t set,get -c 50 at -P 1 and -P 16 against each server over TCP
     127.0.0.1 and over its Unix socket (fresh servers started with --unixsocket under /tmp);
  3. memory: RSS and INFO used_memory growth for 1,000,000 counters with a TTL,
     1,000,000 CL.THROTTLE keys, 100,000 sliding-window sets of 10 entries (fresh servers);
  4. reaper: 1,000,000 keys expiring in the same millisecond while GETs run (time until memory
     is back, GET p99 during vs at rest), and 10,000,000 keys without TTL next to 10,000 with
     one (server CPU while the 10,000 expire, against the 10,000 alone).
  5. bgsave: with 1,000,000 keys loaded, loadgen getset and fixed at (50,1), once as is and
     once with a BGSAVE started in the middle of the measured window: the other clients'
     p50/p99/p99.9 and decisions/s, and how long the BGSAVE took (fresh servers writing
     their RDB file under a temporary directory).
  6. testdouble: the 300-test limiter suite of benchmarks/testdouble/ (a sliding window in
     MULTI/EXEC and a fixed-window counter, about 30 commands per test), run by pytest with
     fakeredis, with the sluice plugin's default fixture (one server, TESTMODE RESET per test)
     and with its fresh-server fixture, and by node:test with ioredis-mock, the npm helper's
     shared server and a server per test; wall time of the whole run and the time per test
     spent in fixtures / hooks. fakeredis and ioredis-mock are installed into
     target/bench-testdouble only (a venv and an npm directory of the step's own).
  7. aof: loadgen's workloads at (50,1) and (50,16) against both servers with the
     append-only file on, `appendfsync everysec` and then `always` (fresh servers per
     setting, the AOF under a temporary directory, rewritten after every run so it stays
     small), interleaved, each cell `--reps` times.

`--only STEP[,STEP]` runs only those steps and keeps the other steps' figures from the last
saved run (benchmarks/last-run.json), e.g. `scripts/bench.sh --only testdouble`.
"""

import argparse
import datetime
import json
import os
import platform
import resource
import shlex
import socket
import statistics
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST = "127.0.0.1"


# ---------------------------------------------------------------- small RESP client


def resp_cmd(port, *args, timeout=30.0):
    """Sends one command, returns the decoded reply (bytes, int, list, None, or Exception)."""
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        s.sendall(out)
        f = s.makefile("rb")
        return _read_reply(f)


def _read_reply(f):
    line = f.readline()
    if not line:
        raise ConnectionError("connection closed")
    kind, body = line[:1], line[1:-2]
    if kind == b"+":
        return body
    if kind == b"-":
        return RuntimeError(body.decode(errors="replace"))
    if kind == b":":
        return int(body)
    if kind == b"$":
        n = int(body)
        if n < 0:
            return None
        data = f.read(n + 2)
        return data[:-2]
    if kind == b"*":
        n = int(body)
        return None if n < 0 else [_read_reply(f) for _ in range(n)]
    if kind == b"_":
        return None
    raise ValueError("unexpected reply %r" % line)


def info(port, section="all"):
    text = resp_cmd(port, "INFO", section)
    d = {}
    for ln in text.decode(errors="replace").splitlines():
        if ":" in ln and not ln.startswith("#"):
            k, v = ln.split(":", 1)
            d[k] = v
    return d


def used_memory(port):
    return int(info(port, "memory")["used_memory"])


def dbsize(port):
    return resp_cmd(port, "DBSIZE")


# ---------------------------------------------------------------- processes


def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1]) * 1024
    return 0


def cpu_seconds(pid):
    """CPU time of all the process's threads, in seconds, from schedstat (ns resolution;
    /proc/PID/stat counts 10 ms ticks)."""
    total = 0
    task_dir = "/proc/%d/task" % pid
    for tid in os.listdir(task_dir):
        try:
            with open("%s/%s/schedstat" % (task_dir, tid)) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e9


def cpu_seconds_stat(pid):
    """utime + stime of the whole process (every thread, exited ones included) from
    /proc/PID/stat, in seconds (clock-tick resolution)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # After the command name: state is field 3, so utime (14) and stime (15) are at 11, 12.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuWindow(threading.Thread):
    """Samples a server's CPU time once the loadgen warm-up is over; `stop` samples again,
    giving the server's CPU seconds and the wall seconds of the measured window."""

    def __init__(self, pid, delay):
        super().__init__(daemon=True)
        self.pid, self.delay = pid, delay
        self.start_cpu = self.start_wall = None

    def run(self):
        time.sleep(self.delay)
        self.start_cpu, self.start_wall = cpu_seconds_stat(self.pid), time.time()

    def stop(self):
        end_cpu, end_wall = cpu_seconds_stat(self.pid), time.time()
        self.join()
        if self.start_cpu is None:
            return None
        return end_cpu - self.start_cpu, end_wall - self.start_wall


class Server:
    def __init__(self, kind, cmd, port):
        self.kind, self.cmd, self.port = kind, cmd, port
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT
        )
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                if resp_cmd(self.port, "PING", timeout=1) == b"PONG":
                    return self
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited at start: %s" % (self.kind, self.cmd))
            time.sleep(0.05)
        raise RuntimeError("%s did not answer PING" % self.kind)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    @property
    def pid(self):
        return self.proc.pid


# ---------------------------------------------------------------- loadgen


def loadgen(args, port, workload, **kw):
    cmd = [args.loadgen, "--port", str(port), "--workload", workload, "--json"]
    for k, v in kw.items():
        cmd += ["--" + k.replace("_", "-"), str(v)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "{}"
    try:
        d = json.loads(line)
    except json.JSONDecodeError:
        d = {}
    if p.returncode not in (0, 3) or not d:
        raise RuntimeError("loadgen failed: %s\n%s\n%s" % (cmd, p.stdout, p.stderr))
    return d


def load_avg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def median(xs):
    return statistics.median(xs) if xs else None


# ---------------------------------------------------------------- the steps

# Each step and the key of last-run.json its figures are saved under.
STEPS = {
    "throughput": "throughput",
    "threads": "throughput",
    "rb": "redis_benchmark",
    "unix": "unix_socket",
    "memory": "memory",
    "expiry": "expiry",
    "reaper": "reaper",
    "bgsave": "bgsave",
    "testdouble": "testdouble",
    "aof": "aof",
}

WORKLOADS = ["sliding", "fixed", "throttle", "getset", "script"]
SETTINGS = [(1, 1), (50, 1), (50, 16)]
# The --threads comparison: sluice with one event loop, then two.
THREAD_WORKLOADS = ["getset", "fixed"]
THREAD_SETTINGS = [(50, 1), (50, 16)]


def measured_run(args, srv, w, c, p):
    """One loadgen run, with the server's CPU time over the measured window: the decisions
    per server CPU-second are decisions/s divided by the cores the server used meanwhile."""
    resp_cmd(srv.port, "FLUSHALL")
    window = CpuWindow(srv.pid, args.warmup)
    window.start()
    d = loadgen(
        args,
        srv.port,
        w,
        connections=c,
        pipeline=p,
        duration=args.duration,
        warmup=args.warmup,
        keys=args.keys,
        max_decisions=50_000_000,
    )
    cpu = window.stop()
    if cpu and cpu[0] > 0 and cpu[1] > 0 and "decisions_per_sec" in d:
        d["server_cores"] = cpu[0] / cpu[1]
        d["decisions_per_cpu_s"] = d["decisions_per_sec"] / d["server_cores"]
    return d


def step_threads(args, mk_threads, log):
    results = {}
    for c, p in THREAD_SETTINGS:
        for w in THREAD_WORKLOADS:
            for rep in range(args.reps):
                for n in (1, 2):
                    srv = mk_threads(n).start()
                    try:
                        d = measured_run(args, srv, w, c, p)
                    finally:
                        srv.stop()
                    results.setdefault((w, c, p, "sluice-t%d" % n), []).append(d)
                    log("%-8s c=%-2d P=%-2d --threads %d rep %d: %.0f/s, %.2f cores"
                        % (w, c, p, n, rep, d.get("decisions_per_sec", 0), d.get("server_cores", 0)))
    return results


def step_throughput(args, servers, log):
    results = {}  # (workload, c, p, kind) -> list of runs
    for c, p in SETTINGS:
        for w in WORKLOADS:
            for rep in range(args.reps):
                for srv in servers:
                    d = measured_run(args, srv, w, c, p)
                    results.setdefault((w, c, p, srv.kind), []).append(d)
                    log(
                        "%-8s c=%-2d P=%-2d %-6s rep %d: %s"
                        % (
                            w,
                            c,
                            p,
                            srv.kind,
                            rep,
                            "not measured (%s)" % d["unavailable"]
                            if "unavailable" in d
                            else "%.0f/s p99 %dus errors %d"
                            % (d["decisions_per_sec"], d["p99_us"], d["errors"]),
                        )
                    )
    return results


def summarize(runs):
    """Median of each metric over the runs that measured something without errors."""
    ok = [r for r in runs if "decisions_per_sec" in r and r.get("errors", 0) == 0]
    if not ok:
        why = next((r.get("unavailable") or r.get("first_error") for r in runs), "no run")
        return {"unavailable": why}
    rates = [r["decisions_per_sec"] for r in ok]
    effs = [r["decisions_per_cpu_s"] for r in ok if "decisions_per_cpu_s" in r]
    cores = [r["server_cores"] for r in ok if "server_cores" in r]
    return {
        "rate": median(rates),
        "eff": median(effs),
        "cores": median(cores),
        "spread": (max(rates) / min(rates) - 1.0) if min(rates) > 0 else 0.0,
        "p50": median([r["p50_us"] for r in ok]),
        "p99": median([r["p99_us"] for r in ok]),
        "p999": median([r["p999_us"] for r in ok]),
        "runs": len(ok),
    }


# redis-benchmark's pipelines, and the share of `--rb-requests` each runs (pipeline 1 is
# about 15 times slower, so it runs a fifth of the requests).
RB_PIPELINES = [(16, 1), (1, 5)]


def rb_requests(args, pipeline):
    return max(1, args.rb_requests // dict(RB_PIPELINES)[pipeline])


def step_redis_benchmark(args, servers, log):
    """(test, pipeline, kind) -> list of {rps, p99_ms}."""
    res = {}
    for rep in range(args.reps):
        for pipeline, _ in RB_PIPELINES:
            # Each server goes first in every other repeat: a redis-benchmark run has no
            # warm-up and starts with SET, so a fixed order would give one server's SET the
            # same neighbour in every repeat.
            for srv in (servers if rep % 2 == 0 else servers[::-1]):
                resp_cmd(srv.port, "FLUSHALL")
                cmd = [
                    "redis-benchmark", "-h", HOST, "-p", str(srv.port), "-t", "set,get,incr",
                    "-P", str(pipeline), "-c", "50", "-n", str(rb_requests(args, pipeline)), "--csv",
                ]
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
                for ln in p.stdout.splitlines():
                    cols = [c.strip('"') for c in ln.split(",")]
                    if len(cols) >= 2 and cols[0] in ("SET", "GET", "INCR"):
                        res.setdefault((cols[0], pipeline, srv.kind), []).append(
                            {"rps": float(cols[1]), "p99_ms": float(cols[6]) if len(cols) > 6 else None}
                        )
                log("redis-benchmark %s P=%d rep %d: %s" % (srv.kind, pipeline, rep, p.stdout.replace("\n", " | ")))
    return res


UNIX_PIPELINES = [1, 16]


def step_unix(args, mk, log):
    """redis-benchmark over TCP and over the Unix socket of the same server, interleaved:
    (test, P, kind, transport) -> list of requests/s."""
    res = {}
    for kind in ("sluice", "redis"):
        path = "/tmp/sluice-bench-%d-%s.sock" % (os.getpid(), kind)
        srv = mk(kind, unixsocket=path).start()
        try:
            for rep in range(args.reps):
                for p in UNIX_PIPELINES:
                    for transport, target in (("tcp", ["-h", HOST, "-p", str(srv.port)]), ("unix", ["-s", path])):
                        resp_cmd(srv.port, "FLUSHALL")
                        cmd = ["redis-benchmark"] + target + [
                            "-t", "set,get", "-P", str(p), "-c", "50", "-n", str(args.unix_requests), "--csv",
                        ]
                        run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
                        out = run.stdout if run.returncode == 0 else run.stdout + run.stderr
                        for ln in out.splitlines():
                            cols = [c.strip('"') for c in ln.split(",")]
                            if len(cols) >= 2 and cols[0] in ("SET", "GET"):
                                res.setdefault((cols[0], p, kind, transport), []).append(float(cols[1]))
                        log("redis-benchmark %s %s P=%d rep %d: %s" % (kind, transport, p, rep, out.replace("\n", " | ")))
        finally:
            srv.stop()
            if os.path.exists(path):
                os.unlink(path)
    return res


def measure_fill(args, srv, workload, n, log, extra=None):
    """Fresh server: RSS and used_memory before and after writing n keys."""
    srv.start()
    try:
        time.sleep(0.5)
        rss0, used0 = rss_bytes(srv.pid), used_memory(srv.port)
        kw = {"keys": n, "connections": 4, "pipeline": 256}
        kw.update(extra or {})
        d = loadgen(args, srv.port, workload, **kw)
        if d.get("errors"):
            raise RuntimeError("fill %s on %s: %s" % (workload, srv.kind, d))
        time.sleep(1.0)
        rss1, used1 = rss_bytes(srv.pid), used_memory(srv.port)
        keys = dbsize(srv.port)
        log("memory %s %s: %d keys, RSS +%d, used_memory +%d" % (srv.kind, workload, keys, rss1 - rss0, used1 - used0))
        return {"keys": keys, "rss": rss1 - rss0, "used": used1 - used0, "fill_s": d.get("seconds")}
    finally:
        srv.stop()


def step_memory(args, mk, log):
    n, nz = args.mem_keys, args.zset_keys
    out = {}
    for kind in ("sluice", "redis"):
        srv = mk(kind)
        out[("counter", kind)] = measure_fill(args, srv, "fill-counter", n, log)
        # Redis has no CL.THROTTLE here (redis-cell is not packaged): it gets what redis-cell
        # stores for a key, a string holding the TAT in ns with a TTL, written with SET PX.
        w = "fill-throttle" if kind == "sluice" else "fill-throttle-state"
        out[("throttle", kind)] = measure_fill(args, srv, w, n, log, {"prefix": "lg:throttle"})
        out[("zset", kind)] = measure_fill(args, srv, "fill-zset", nz, log)
        # 11 commands of up to 100 pairs per key: a smaller pipeline keeps batches near 1 MB.
        out[("zset1000", kind)] = measure_fill(args, srv, "fill-zset1000", args.zset1000_keys, log, {"pipeline": 32})
        out[("hash", kind)] = measure_fill(args, srv, "fill-hash", args.hash_keys, log)
    return out


class Poller(threading.Thread):
    """Samples used_memory, RSS and DBSIZE every `every` s until stopped."""

    def __init__(self, srv, every=0.02):
        super().__init__(daemon=True)
        self.srv, self.every, self.samples, self.stop_flag = srv, every, [], False

    def run(self):
        while not self.stop_flag:
            t = time.time()
            try:
                self.samples.append((t, used_memory(self.srv.port), rss_bytes(self.srv.pid), dbsize(self.srv.port)))
            except Exception:  # noqa: BLE001 - a sample lost under load is not fatal
                pass
            time.sleep(max(0.0, self.every - (time.time() - t)))


def step_mass_expiry(args, mk, log):
    """1,000,000 keys expiring in the same millisecond while 10 clients run GETs."""
    out = {}
    n = args.expiry_keys
    for kind in ("sluice", "redis"):
        srv = mk(kind).start()
        try:
            loadgen(args, srv.port, "fill-plain", keys=100_000, connections=2, pipeline=256, prefix="rest")
            get_kw = dict(connections=10, pipeline=1, keys=100_000, prefix="rest", warmup=0)
            rest = loadgen(args, srv.port, "get", duration=3, **get_kw)
            used0, keys0 = used_memory(srv.port), dbsize(srv.port)
            deadline_ms = int(time.time() * 1000) + 4000 + n // 200  # after the fill
            d = loadgen(args, srv.port, "fill-expire-at", keys=n, connections=4, pipeline=256, at_ms=deadline_ms, prefix="exp")
            if d.get("errors"):
                raise RuntimeError("fill-expire-at: %s" % d)
            used_full = used_memory(srv.port)
            poller = Poller(srv)
            wait = deadline_ms / 1000 - time.time() - 1.0
            if wait > 0:
                time.sleep(wait)
            poller.start()
            # GETs from 1 s before the deadline to 2 s after it.
            during = loadgen(args, srv.port, "get", duration=3, **get_kw)
            # keep sampling until the keys are gone and memory is back, at most 30 s
            limit = time.time() + 30
            grown = used_full - used0
            while time.time() < limit:
                s = poller.samples[-1] if poller.samples else None
                if s and s[3] <= keys0 and s[1] <= used0 + 0.1 * grown:
                    break
                time.sleep(0.05)
            time.sleep(0.2)
            poller.stop_flag = True
            poller.join()
            t0 = deadline_ms / 1000
            keys_gone = next((t - t0 for (t, u, r, k) in poller.samples if t >= t0 and k <= keys0), None)
            mem_back = next(
                (t - t0 for (t, u, r, k) in poller.samples if t >= t0 and u <= used0 + 0.1 * grown), None
            )
            out[kind] = {
                "keys": n,
                "grown": grown,
                "keys_gone_s": keys_gone,
                "mem_back_s": mem_back,
                "p99_rest": rest["p99_us"],
                "p99_during": during["p99_us"],
                "p999_rest": rest["p999_us"],
                "p999_during": during["p999_us"],
                "rate_rest": rest["decisions_per_sec"],
                "rate_during": during["decisions_per_sec"],
            }
            log("mass expiry %s: %s" % (kind, out[kind]))
        finally:
            srv.stop()
    return out


def step_reaper_cpu(args, mk, log):
    """Server CPU while 10,000 keys expire, with and without 10,000,000 keys without TTL."""
    out = {}
    for label, static in (("alone", 0), ("with_static", args.static_keys)):
        srv = mk("sluice").start()
        try:
            if static:
                d = loadgen(args, srv.port, "fill-plain", keys=static, connections=4, pipeline=1024, prefix="static")
                if d.get("errors"):
                    raise RuntimeError("fill-plain: %s" % d)
            deadline_ms = int(time.time() * 1000) + 3000
            loadgen(args, srv.port, "fill-expire-at", keys=10_000, connections=1, pipeline=256, at_ms=deadline_ms, prefix="ttl")
            time.sleep(0.5)
            c0, t0 = cpu_seconds(srv.pid), time.time()
            time.sleep(max(0.0, deadline_ms / 1000 - time.time()) + 3.0)
            c1, t1 = cpu_seconds(srv.pid), time.time()
            keys = dbsize(srv.port)
            out[label] = {"cpu_s": c1 - c0, "window_s": t1 - t0, "keys_left": keys, "static": static}
            log("reaper cpu %s: %s" % (label, out[label]))
        finally:
            srv.stop()
    return out


BGSAVE_WORKLOADS = ["getset", "fixed"]


class BgsaveAt(threading.Thread):
    """Sends BGSAVE `delay` seconds after it starts, then polls INFO persistence (one
    connection, every 10 ms, at most `limit` s) until the save is over: how long it took as
    seen from a client, and the server's own rdb_last_bgsave_time_sec / status."""

    def __init__(self, port, delay, limit=300.0):
        super().__init__(daemon=True)
        self.port, self.delay, self.limit = port, delay, limit
        self.result = {}

    def run(self):
        time.sleep(self.delay)
        try:
            with socket.create_connection((HOST, self.port), timeout=30) as s:
                f = s.makefile("rb")

                def call(*args):
                    out = b"*%d\r\n" % len(args)
                    for a in args:
                        out += b"$%d\r\n%s\r\n" % (len(a), a)
                    s.sendall(out)
                    return _read_reply(f)

                t0 = time.time()
                r = call(b"BGSAVE")
                if isinstance(r, Exception):
                    self.result = {"error": str(r)}
                    return
                while time.time() - t0 < self.limit:
                    text = call(b"INFO", b"persistence").decode(errors="replace")
                    fields = dict(ln.split(":", 1) for ln in text.splitlines() if ":" in ln)
                    if fields.get("rdb_bgsave_in_progress") == "0":
                        self.result = {
                            "seconds": time.time() - t0,
                            "status": fields.get("rdb_last_bgsave_status"),
                            "time_sec": int(fields.get("rdb_last_bgsave_time_sec", "-1")),
                        }
                        return
                    time.sleep(0.01)
                self.result = {"error": "still saving after %d s" % self.limit}
        except OSError as e:
            self.result = {"error": str(e)}


def step_bgsave(args, mk, log):
    """(workload, kind, mode) -> list of loadgen runs, mode `quiet` or `bgsave` (the run's
    `bgsave` entry then says how long the save took)."""
    out = {}
    half = args.bgsave_duration / 2
    for kind in ("sluice", "redis"):
        tmp = tempfile.mkdtemp(prefix="sluice-bench-bgsave-")
        srv = mk(kind, extra=["--dir", tmp, "--dbfilename", "bench-%s.rdb" % kind]).start()
        try:
            d = loadgen(args, srv.port, "fill-plain", keys=args.bgsave_keys, connections=4, pipeline=1024, prefix="bg")
            if d.get("errors"):
                raise RuntimeError("fill-plain: %s" % d)
            log("bgsave %s: %d keys loaded" % (kind, dbsize(srv.port)))
            for w in BGSAVE_WORKLOADS:
                for rep in range(args.reps):
                    for mode in ("quiet", "bgsave"):
                        saver = None
                        if mode == "bgsave":
                            # loadgen's measured window starts after its warm-up.
                            saver = BgsaveAt(srv.port, args.warmup + half)
                            saver.start()
                        r = loadgen(
                            args, srv.port, w, connections=50, pipeline=1, duration=args.bgsave_duration,
                            warmup=args.warmup, keys=args.keys, max_decisions=50_000_000,
                        )
                        if saver is not None:
                            saver.join(330)
                            r["bgsave"] = saver.result
                            r["bgsave"]["inside_window"] = saver.result.get("seconds", 1e9) <= half
                        out.setdefault((w, kind, mode), []).append(r)
                        log("bgsave %-6s %-6s %-6s rep %d: %.0f/s p99 %sus p99.9 %sus errors %s %s" % (
                            w, kind, mode, rep, r.get("decisions_per_sec", 0), r.get("p99_us"), r.get("p999_us"),
                            r.get("errors"), r.get("bgsave", "")))
        finally:
            srv.stop()
            shutil.rmtree(tmp, ignore_errors=True)
    return out


AOF_SETTINGS = [(50, 1), (50, 16)]
AOF_FSYNC = ["everysec", "always"]


def aof_rewritten(port, timeout=60.0):
    """Empties the server and rewrites its AOF (so the next run starts from a small file);
    returns when the rewrite is done."""
    resp_cmd(port, "FLUSHALL")
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not isinstance(resp_cmd(port, "BGREWRITEAOF"), Exception):
            break
        time.sleep(0.05)  # a rewrite already running (the automatic one)
    while time.time() < deadline:
        i = info(port, "persistence")
        if i.get("aof_rewrite_in_progress") == "0" and i.get("aof_rewrite_scheduled") == "0":
            return
        time.sleep(0.05)
    raise RuntimeError("BGREWRITEAOF did not finish on port %d" % port)


def step_aof(args, log):
    """(workload, c, p, fsync, kind) -> list of loadgen runs, with the AOF on."""
    out = {}
    for fsync in AOF_FSYNC:
        tmp = tempfile.mkdtemp(prefix="sluice-bench-aof-")
        aof = ["--appendonly", "yes", "--appendfsync", fsync, "--save", "", "--loglevel", "warning"]
        servers = []
        for kind in ("sluice", "redis"):
            d = os.path.join(tmp, kind)
            os.makedirs(d)
            if kind == "sluice":
                cmd = [args.sluice, "--port", str(args.sluice_port), "--dir", d] + aof
                servers.append(Server("sluice", cmd, args.sluice_port))
            else:
                cmd = ["redis-server", "--port", str(args.redis_port), "--bind", HOST, "--dir", d, "--daemonize", "no"] + aof
                servers.append(Server("redis", cmd, args.redis_port))
        try:
            for srv in servers:
                srv.start()
            for c, p in AOF_SETTINGS:
                for w in WORKLOADS:
                    for rep in range(args.reps):
                        for srv in servers:
                            d = measured_run(args, srv, w, c, p)
                            aof_rewritten(srv.port)
                            out.setdefault((w, c, p, fsync, srv.kind), []).append(d)
                            log("aof %-8s c=%-2d P=%-2d %-8s %-6s rep %d: %s" % (
                                w, c, p, fsync, srv.kind, rep,
                                "not measured (%s)" % d["unavailable"] if "unavailable" in d
                                else "%.0f/s p99 %dus errors %d" % (d["decisions_per_sec"], d["p99_us"], d["errors"])))
        finally:
            for srv in servers:
                srv.stop()
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def aof_section(args, aof):
    """The report's rows for the aof step."""
    L = ["## With the append-only file\n"]
    L.append(
        "Both servers fresh per setting with `--appendonly yes --appendfsync <setting>` (Redis 7.0's multi-part AOF, "
        "an RDB preamble in the base; the files under a temporary directory), otherwise "
        "as the table above: loadgen, `--keys %d`, %gs measured after %gs warm-up, %s, interleaving the two servers; "
        "after every run the server is emptied and BGREWRITEAOF'd, so each run starts from a small file. With `always`, "
        "a reply leaves only after its write is synced (`fdatasync`; both servers sync once per event-loop pass for "
        "every client the pass ran, Redis before it sleeps, sluice before each loop writes its replies); with "
        "`everysec` a background thread syncs once a second.\n"
        % (args.keys, args.duration, args.warmup, "medians of %d runs" % args.reps if args.reps != 1 else "one run"))
    L.append("| workload | c | P | appendfsync | sluice/s | Redis/s | ratio | sluice per CPU-s | Redis per CPU-s | ratio | sluice p99 µs | Redis p99 µs | p99 ratio |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for fsync in AOF_FSYNC:
        for c, p in AOF_SETTINGS:
            for w in WORKLOADS:
                s = summarize(aof.get((w, c, p, fsync, "sluice"), []))
                r = summarize(aof.get((w, c, p, fsync, "redis"), []))
                L.append("| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    w, c, p, fsync,
                    fmt_rate(s.get("rate")) if "rate" in s else "not measured",
                    fmt_rate(r.get("rate")) if "rate" in r else "not measured",
                    fmt_ratio(ratio(s.get("rate"), r.get("rate"))),
                    fmt_rate(s.get("eff")), fmt_rate(r.get("eff")), fmt_ratio(ratio(s.get("eff"), r.get("eff"))),
                    s.get("p99", "—"), r.get("p99", "—"), fmt_ratio(ratio(s.get("p99"), r.get("p99")))))
    L.append("")
    return L


# ---------------------------------------------------------------- report


def fmt_rate(x):
    return "—" if x is None else "{:,.0f}".format(x)


def ratio(a, b):
    if a is None or b in (None, 0):
        return None
    return a / b


def fmt_ratio(r):
    # Truncated, not rounded, so that a ratio shown as 1.00× really is at least 1.
    return "—" if r is None else "%.2f×" % (int(r * 100) / 100)


def met(ok):
    return "met" if ok else "**missed**"


def svg_chart(rows, path):
    """Horizontal bars: throughput ratio and p99 ratio (sluice/Redis) per workload and setting."""
    bar_h, gap, left, width = 14, 10, 190, 420
    scale_max = max([2.0] + [r for row in rows for r in row[1:] if r]) * 1.05
    height = 60 + len(rows) * (2 * bar_h + gap) + 40
    x = lambda v: left + width * v / scale_max  # noqa: E731
    parts = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">'
        % (left + width + 90, height),
        '<rect width="100%" height="100%" fill="white"/>',
        '<text x="10" y="20" font-size="14" font-weight="bold">sluice / Redis 7.0 on the same machine</text>',
        '<rect x="10" y="30" width="12" height="10" fill="#2a7ab0"/><text x="26" y="39">decisions/s ratio (higher is better)</text>',
        '<rect x="260" y="30" width="12" height="10" fill="#e08a2c"/><text x="276" y="39">p99 latency ratio (lower is better)</text>',
    ]
    y = 55
    for label, thr, lat in rows:
        parts.append('<text x="%d" y="%d" text-anchor="end">%s</text>' % (left - 6, y + bar_h + 4, label))
        for i, (v, color) in enumerate(((thr, "#2a7ab0"), (lat, "#e08a2c"))):
            yy = y + i * bar_h
            if v is None:
                parts.append('<text x="%d" y="%d" fill="#888">not measured</text>' % (left + 4, yy + bar_h - 3))
                continue
            parts.append('<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>' % (left, yy, x(v) - left, bar_h - 2, color))
            parts.append('<text x="%.1f" y="%d">%.2f</text>' % (x(v) + 4, yy + bar_h - 3, v))
        y += 2 * bar_h + gap
    for v in (1.0, 1.5, 2.0):
        if v <= scale_max:
            parts.append(
                '<line x1="%.1f" y1="50" x2="%.1f" y2="%d" stroke="%s" stroke-dasharray="4 3"/>'
                % (x(v), x(v), y, "#333" if v == 1.0 else "#aaa")
            )
            parts.append('<text x="%.1f" y="%d" text-anchor="middle">%.1f×</text>' % (x(v), y + 14, v))
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


TD_DIR = os.path.join(ROOT, "benchmarks", "testdouble")
TD_TESTS = 300
# (suite, backend, what the row says), in the order each repetition runs them.
TD_CASES = [
    ("python", "fakeredis", "fakeredis: `FakeRedis()` with a server of its own per test (in-process)"),
    ("python", "sluice", "sluice plugin, `sluice` fixture (default): one server, `TESTMODE RESET` per test"),
    ("python", "sluice_fresh", "sluice plugin, `sluice_fresh`: a server per test, killed after it"),
    ("node", "ioredis-mock", "ioredis-mock: a `new RedisMock()` per test, flushed (in-process)"),
    ("node", "sluice", "npm helper, `sharedSluice()`: one server, `reset(redis)` per test (sent with the test's first command)"),
    ("node", "sluice-fresh", "npm helper, `startSluice()` / `stop()` per test"),
]


def step_testdouble(args, log):
    """The 300-test limiter suite with each test double (see the module doc, step 6)."""
    work = os.path.join(ROOT, "target", "bench-testdouble")
    venv = os.path.join(work, "venv")
    py = os.path.join(venv, "bin", "python")
    node_dir = os.path.join(work, "node")
    os.makedirs(node_dir, exist_ok=True)
    if not os.path.exists(py):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r",
                    os.path.join(TD_DIR, "requirements.txt")], check=True)
    have_node = shutil.which("node") and shutil.which("npm")
    if have_node:
        shutil.copy(os.path.join(TD_DIR, "package.json"), node_dir)
        shutil.copy(os.path.join(TD_DIR, "limiter.test.mjs"), node_dir)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent"], cwd=node_dir, check=True)
    out = {}
    stats_file = os.path.join(work, "stats.json")
    for rep in range(args.td_reps):
        for suite, backend, _ in TD_CASES:
            if suite == "node" and not have_node:
                out.setdefault("%s|%s" % (suite, backend), {})["unavailable"] = "node/npm not installed"
                continue
            env = dict(os.environ, TD_BACKEND=backend, TD_STATS=stats_file, SLUICE_BIN=os.path.abspath(args.sluice))
            if suite == "python":
                env["PYTHONPATH"] = os.path.join(ROOT, "python")
                cmd = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "sluice_server.pytest_plugin",
                       "--rootdir", TD_DIR, os.path.join(TD_DIR, "test_limiter.py")]
                cwd = work
            else:
                env["SLUICE_HELPER"] = os.path.join(ROOT, "npm", "index.mjs")
                cmd = ["node", "--test", "limiter.test.mjs"]
                cwd = node_dir
            if os.path.exists(stats_file):
                os.remove(stats_file)
            load = load_avg()
            ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
            wall = time.perf_counter() - t0
            ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            # CPU time of the runner and of every server it waited for; the Node suite adds
            # its shared server's (killed at exit, never waited for) from its own stats.
            cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
            if p.returncode != 0 or not os.path.exists(stats_file):
                raise RuntimeError("the %s suite with %s failed:\n%s\n%s" % (suite, backend, p.stdout[-3000:], p.stderr[-3000:]))
            with open(stats_file) as f:
                st = json.load(f)
            if suite == "python":
                fixture_s, tests_s, n = st["setup"] + st["teardown"], st["call"], st["tests"]
            else:
                fixture_s, tests_s, n = st["hooks"] / 1000, st["tests"] / 1000, st["count"]
                cpu += st.get("serverCpuMs", 0) / 1000
            if n != TD_TESTS:
                raise RuntimeError("the %s suite with %s ran %d tests, not %d" % (suite, backend, n, TD_TESTS))
            cell = out.setdefault("%s|%s" % (suite, backend), {"wall": [], "fixture_s": [], "tests_s": [], "load": []})
            cell["wall"].append(wall)
            cell.setdefault("cpu", []).append(cpu)
            cell["fixture_s"].append(fixture_s)
            cell["tests_s"].append(tests_s)
            cell["load"].append(load)
            log("testdouble %s %s: %.2f s wall, %.2f s CPU, %.2f ms per test in fixtures (load %.2f)" % (suite, backend, wall, cpu, 1000 * fixture_s / n, load))
    return out


def testdouble_section(args, td, targets):
    """The report's section for step 6 (and its targets)."""
    L = ["## Test doubles: a 300-test limiter suite\n"]
    L.append(
        "`benchmarks/testdouble/`: 150 sliding windows in MULTI/EXEC and 150 fixed-window counters, about 30 commands "
        "per test, each test on keys of its own; the same file under pytest with each fixture, and its Node twin under "
        "`node --test`. *Wall* is the whole run (interpreter start, collection, every test), the %s "
        "interleaving the rows; *per test* is wall / 300; *fixtures per test* is the time pytest spent in the fixtures' "
        "setup and teardown (node: in the beforeEach/afterEach hooks) over 300, the part each way of getting a server "
        "adds. *CPU* is the user + system time of every process the run used (the test runner and the servers "
        "it started), which depends far less on the machine's load than wall time does: an in-process double "
        "spends it all on the runner's one thread, a server splits it between two processes that take turns; "
        "at a high load average the wall times mostly measure the share of the CPU each run got, and the targets "
        "below, which compare wall times, hold for that load only. "
        "The release build of sluice. The load average is the one when each run started (median).\n"
        % ("median of %d runs" % args.td_reps if args.td_reps != 1 else "figure of one run"))
    L.append("| suite | how each test gets its server | wall | per test | fixtures per test | wall vs the in-process double | CPU | CPU vs the in-process double | load |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    walls, cpus = {}, {}
    for suite, backend, what in TD_CASES:
        c = td.get("%s|%s" % (suite, backend), {})
        if not c.get("wall"):
            L.append("| %s | %s | not measured%s | | | | | | |" % (suite, what, ": " + c["unavailable"] if "unavailable" in c else ""))
            continue
        wall = median(c["wall"])
        walls[(suite, backend)] = wall
        base_name = "fakeredis" if suite == "python" else "ioredis-mock"
        base = walls.get((suite, base_name))
        cpu = median(c["cpu"]) if c.get("cpu") else None
        if cpu is not None:
            cpus[(suite, backend)] = cpu
        L.append("| %s | %s | %.2f s | %.2f ms | %.2f ms | %s | %s | %s | %.1f |" % (
            "pytest" if suite == "python" else "node:test", what, wall, 1000 * wall / TD_TESTS,
            1000 * median(c["fixture_s"]) / TD_TESTS, fmt_ratio(ratio(wall, base)),
            "%.2f s" % cpu if cpu is not None else "—", fmt_ratio(ratio(cpu, cpus.get((suite, base_name)))),
            median(c["load"])))
    L.append("")
    fr, sl, fresh = walls.get(("python", "fakeredis")), walls.get(("python", "sluice")), walls.get(("python", "sluice_fresh"))
    im, ns = walls.get(("node", "ioredis-mock")), walls.get(("node", "sluice"))
    def tgt(name, a, b, limit):
        q = ratio(a, b)
        targets.append((name, "%s (%s s vs %s s)" % (fmt_ratio(q), "%.2f" % a if a else "—", "%.2f" % b if b else "—"), None if q is None else q <= limit))
    tgt("test doubles: the default pytest fixture's suite wall time ≤ fakeredis's", sl, fr, 1.0)
    tgt("test doubles: the fresh-server pytest fixture's ≤ 2× fakeredis's", fresh, fr, 2.0)
    tgt("test doubles: the npm helper's default ≤ ioredis-mock's", ns, im, 1.0)
    return L


def times(n):
    """How many times a cell was measured, in words."""
    return "once" if n == 1 else "%d times" % n


def n_runs(n):
    return "1 run" if n == 1 else "%d runs" % n


def write_report(args, meta, thr, rb, mem, expiry, reaper, unix, path, bgsave=None, testdouble=None, aof=None):
    def at(step):
        """The settings `step` was measured with (runs saved before step_args: the run's)."""
        saved = (meta.get("step_args") or {}).get(step)
        if not saved:
            return args
        merged = argparse.Namespace(**vars(args))
        for k, v in saved.items():
            setattr(merged, k, v)
        return merged

    L = []
    L.append("# sluice vs Redis: benchmarks\n")
    L.append("Generated by `%s` on %s. Do not edit by hand: rerun the command (the analysis below comes from `benchmarks/notes.md`).\n" % (meta["command"], meta["date"]))
    L.append("| | |\n|---|---|")
    for k in ("machine", "cpus", "kernel", "redis", "sluice", "load"):
        L.append("| %s | %s |" % (k, meta[k]))
    L.append("")
    if meta.get("earlier"):
        e = meta["earlier"]
        L.append("This run measured only: %s. The other figures are from the run of %s (`%s`, sluice %s, load: %s).\n" % (
            ", ".join(meta.get("steps", [])), e.get("date"), e.get("command"), e.get("sluice"), e.get("load")))
    L.append(
        "Both servers run on 127.0.0.1 with persistence off (Redis: `--save '' --appendonly no`). "
        "The load generator (`loadgen/`, one thread, closed loop, requests prebuilt) and redis-benchmark run on the "
        "same 2 cores as the server, so every figure includes the client's cost; anything else running on the machine shows in "
        "the load average above. Each cell was measured %s, interleaving the two servers; the table shows the median and, "
        "as *spread*, how far the best run of each server was above its worst (max/min − 1)." % times(at("throughput").reps)
    )
    L.append("")
    L.append("![throughput and p99 ratios](benchmarks/ratios.svg)\n")

    # throughput table
    L.append("## Decisions per second and latency (loadgen)\n")
    L.append("`--keys %d`, %gs measured after %gs warm-up per run. A decision is one W1 MULTI block (6 commands), one `SET NX EX`+`INCR` pair, one `CL.THROTTLE`, one GET or SET, one EVALSHA. Latencies in µs (round trip of the batch).\n" % (at("throughput").keys, at("throughput").duration, at("throughput").warmup))
    L.append("*Per CPU-s*: decisions per second of server CPU time (user + system, all threads, from `/proc/PID/stat` over the measured window), the figure that carries over to machines with more cores.\n")
    L.append("| workload | c | P | sluice/s | Redis/s | ratio | sluice per CPU-s | Redis per CPU-s | ratio | sluice p50/p99/p99.9 | Redis p50/p99/p99.9 | p99 ratio | spread s/R |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    chart_rows, targets = [], []
    for c, p in SETTINGS:
        for w in WORKLOADS:
            s = summarize(thr.get((w, c, p, "sluice"), []))
            r = summarize(thr.get((w, c, p, "redis"), []))
            rr = ratio(s.get("rate"), r.get("rate"))
            lr = ratio(s.get("p99"), r.get("p99"))
            lat = lambda d: "—" if "p50" not in d else "%d / %d / %d" % (d["p50"], d["p99"], d["p999"])  # noqa: E731
            spread = lambda d: "—" if "spread" not in d else "%.0f%%" % (100 * d["spread"])  # noqa: E731
            er = ratio(s.get("eff"), r.get("eff"))
            L.append(
                "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s |"
                % (
                    w, c, p,
                    fmt_rate(s.get("rate")) if "rate" in s else "not measured",
                    fmt_rate(r.get("rate")) if "rate" in r else "not measured",
                    fmt_ratio(rr),
                    fmt_rate(s.get("eff")), fmt_rate(r.get("eff")), fmt_ratio(er),
                    lat(s), lat(r), fmt_ratio(lr), spread(s), spread(r),
                )
            )
            # Issue 32's targets: at (50,1) decisions/s >= 1.1x, p99 <= Redis's, per CPU-second
            # >= 1.2x; at (50,16) decisions/s and per CPU-second >= 1.5x; at (1,1) >= 1.0x.
            if w != "throttle" and (c, p) != (1, 1):
                need_cpu = 1.2 if p == 1 else 1.5
                targets.append(("`%s` decisions per server CPU-second ≥ %.1f× Redis's at (%d,%d)" % (w, need_cpu, c, p), fmt_ratio(er), None if er is None else er >= need_cpu))
            if w != "throttle":
                chart_rows.append(("%s (%d,%d)" % (w, c, p), rr, lr))
            if w != "throttle" and (w in ("sliding", "fixed") or (c, p) != (1, 1)):
                need = 1.0 if (c, p) == (1, 1) else (1.1 if p == 1 else 1.5)
                targets.append(("`%s` decisions/s ≥ %.1f× Redis at (%d,%d)" % (w, need, c, p), fmt_ratio(rr), rr is not None and rr >= need))
            if w == "script":
                if "rate" not in s:
                    targets.append(("`script` (EVALSHA) at (%d,%d)" % (c, p), "not measured: %s" % s.get("unavailable"), None))
            if w != "throttle" and (c, p) == (50, 1):
                targets.append(("`%s` p99 ≤ Redis's at (50,1)" % w, "%s vs %s µs" % (s.get("p99"), r.get("p99")), lr is not None and lr <= 1.0))
    L.append("")
    L.append("Redis has no `CL.THROTTLE` here (redis-cell is not packaged for Debian), so its throttle cells are empty; the target for it is relative to sluice's own `getset`:\n")
    L.append("| setting | sluice throttle/s | sluice getset/s | throttle ÷ getset | target ≥ 0.95 |")
    L.append("|---|---|---|---|---|")
    for c, p in ((50, 1), (50, 16), (1, 1)):
        t = summarize(thr.get(("throttle", c, p, "sluice"), []))
        g = summarize(thr.get(("getset", c, p, "sluice"), []))
        q = ratio(t.get("rate"), g.get("rate"))
        L.append("| (%d,%d) | %s | %s | %s | %s |" % (c, p, fmt_rate(t.get("rate")), fmt_rate(g.get("rate")), fmt_ratio(q), met(q is not None and q >= 0.95)))
        if (c, p) != (1, 1):
            targets.append(("`throttle` ≥ 0.95× sluice `getset` at (%d,%d)" % (c, p), fmt_ratio(q), q is not None and q >= 0.95))
    L.append("")

    # --threads 1 vs 2
    if any(k[3].startswith("sluice-t") for k in thr):
        L.append("## sluice --threads 1 and 2\n")
        L.append("A fresh sluice per run, with one event loop, then two (the machine has 2 cores, shared with the load generator). *cores*: server CPU seconds per second over the measured window.\n")
        L.append("| workload | c | P | 1 thread /s | 2 threads /s | 2 ÷ 1 | 1 thread per CPU-s | 2 threads per CPU-s | cores 1 / 2 |")
        L.append("|---|---|---|---|---|---|---|---|---|")
        for c, p in THREAD_SETTINGS:
            for w in THREAD_WORKLOADS:
                one = summarize(thr.get((w, c, p, "sluice-t1"), []))
                two = summarize(thr.get((w, c, p, "sluice-t2"), []))
                fc = lambda d: "—" if d.get("cores") is None else "%.2f" % d["cores"]  # noqa: E731
                L.append("| %s | %d | %d | %s | %s | %s | %s | %s | %s / %s |" % (
                    w, c, p, fmt_rate(one.get("rate")), fmt_rate(two.get("rate")),
                    fmt_ratio(ratio(two.get("rate"), one.get("rate"))),
                    fmt_rate(one.get("eff")), fmt_rate(two.get("eff")), fc(one), fc(two)))
        L.append("")

    # redis-benchmark
    L.append("## redis-benchmark\n")
    at_p1 = ", and the same at `-P 1` with `-n %d`" % rb_requests(at("rb"), 1) if any(k[1] == 1 for k in rb) else ""
    L.append("`redis-benchmark -t set,get,incr -P 16 -c 50 -n %d --csv`%s, %s per server, median requests/s.\n" % (at("rb").rb_requests, at_p1, n_runs(at("rb").reps)))
    L.append("| test | P | sluice rps | Redis rps | ratio | target ≥ 1.0 |")
    L.append("|---|---|---|---|---|---|")
    for pipeline, _ in RB_PIPELINES:
        if not any(k[1] == pipeline for k in rb):
            continue  # a saved run from before pipeline 1 was measured here
        for t in ("SET", "GET", "INCR"):
            s = median([x["rps"] for x in rb.get((t, pipeline, "sluice"), [])])
            r = median([x["rps"] for x in rb.get((t, pipeline, "redis"), [])])
            q = ratio(s, r)
            L.append("| %s | %d | %s | %s | %s | %s |" % (t, pipeline, fmt_rate(s), fmt_rate(r), fmt_ratio(q), met(q is not None and q >= 1.0)))
            targets.append(("redis-benchmark %s ≥ 1.0× Redis (P%d, c50)" % (t, pipeline), fmt_ratio(q), q is not None and q >= 1.0))
    L.append("")

    if unix:
        L.append("## Unix socket vs TCP\n")
        L.append("`redis-benchmark -t set,get -c 50 -n %d --csv` at `-P 1` and `-P 16`, against each server over TCP (`-h 127.0.0.1`) and over its Unix socket (`-s`, the server started with `--unixsocket`), the two transports interleaved; %s each, median requests/s.\n" % (at("unix").unix_requests, n_runs(at("unix").reps)))
        L.append("| server | test | P | TCP rps | Unix rps | unix ÷ tcp |")
        L.append("|---|---|---|---|---|---|")
        for kind in ("sluice", "redis"):
            for p in UNIX_PIPELINES:
                for t in ("SET", "GET"):
                    tcp = median(unix.get((t, p, kind, "tcp"), []))
                    uds = median(unix.get((t, p, kind, "unix"), []))
                    L.append("| %s | %s | %d | %s | %s | %s |" % (kind, t, p, fmt_rate(tcp), fmt_rate(uds), fmt_ratio(ratio(uds, tcp))))
        L.append("")

    # memory
    if mem:
        L.append("## Memory\n")
        L.append("Fresh server per row; growth of the process's RSS and of INFO `used_memory` after writing the keys (4 connections, pipeline 256), divided by keys (or by entries for sorted sets). Counters: `SET k 1 EX 3600`. Throttle: `CL.THROTTLE k 15 1 3600 1` on sluice (one token per hour, so no key expires during the run); on Redis, what redis-cell would store for it (`SET k <19-digit TAT> PX 3600000`), since the module is not available here. Sorted sets: `ZADD k` with 10 entries (13-digit scores and members, each member the text of its score, as the sliding-window log adds them) + `EXPIRE k 3600`; zset1000: the same with 1,000 entries per key (pipeline 32). Hash: the W5 funnel, `HSET k capacity 15 leaking_rate 0.5 left_quota 14 leaking_ts <13 digits>` + `EXPIRE k 3600`. Keys look like `lg:counter:123456`, `lg:throttle:123456`, `lg:zset:12345`, `lg:zset1000:123`, `lg:hash:123456`.\n")
        L.append("| data | sluice RSS B | sluice used_memory B | Redis RSS B | Redis used_memory B | target (RSS) |")
        L.append("|---|---|---|---|---|---|")
        rows = (
            ("counter", at("memory").mem_keys, "key", 100),
            ("throttle", at("memory").mem_keys, "key", 115),
            ("zset", at("memory").zset_keys * 10, "entry", 24),
            ("zset1000", at("memory").zset1000_keys * 1000, "entry", 64),
            ("hash", at("memory").hash_keys, "key", None),
        )
        for name, per, unit, tgt in rows:
            s, r = mem.get((name, "sluice")), mem.get((name, "redis"))
            if s is None or r is None:
                continue  # a saved run from before the row existed
            sr, su = s["rss"] / per, s["used"] / per
            goal = "—" if tgt is None else "≤ %d: %s" % (tgt, met(sr <= tgt))
            L.append("| %s (per %s) | %.0f | %.0f | %.0f | %.0f | %s |" % (name, unit, sr, su, r["rss"] / per, r["used"] / per, goal))
            if tgt is not None:
                targets.append(("memory: %s ≤ %d B RSS per %s" % (name, tgt, unit), "%.0f B" % sr, sr <= tgt))
        L.append("")

    if expiry:
        L.append("## Mass expiry\n")
        L.append("%s keys written with `SET k 1 PXAT <deadline>` (all the same millisecond), next to 100,000 keys without TTL that 10 clients GET in a closed loop (pipeline 1). *At rest*: 3 s of GETs before the fill; *during*: 3 s of GETs from 1 s before the deadline. *Memory back*: first sample (every 20 ms) after the deadline with `used_memory` within 10%% of the fill's growth above the level before the fill.\n" % "{:,}".format(at("expiry").expiry_keys))
        L.append("| server | keys gone after | memory back after | GET p99 at rest | GET p99 during | ratio | GET p99.9 rest / during |")
        L.append("|---|---|---|---|---|---|---|")
        for kind in ("sluice", "redis"):
            e = expiry.get(kind)
            if not e:
                continue
            fs = lambda v: "not within 30 s" if v is None else "%.2f s" % v  # noqa: E731
            q = ratio(e["p99_during"], e["p99_rest"])
            L.append("| %s | %s | %s | %d µs | %d µs | %s | %d / %d µs |" % (kind, fs(e["keys_gone_s"]), fs(e["mem_back_s"]), e["p99_rest"], e["p99_during"], fmt_ratio(q), e["p999_rest"], e["p999_during"]))
            if kind == "sluice":
                targets.append(("mass expiry: memory back within 1 s", fs(e["mem_back_s"]), e["mem_back_s"] is not None and e["mem_back_s"] <= 1.0))
                targets.append(("mass expiry: GET p99 during ≤ 2× at rest", fmt_ratio(q), q is not None and q <= 2.0))
        L.append("")
    if reaper:
        L.append("## Reaper cost follows the keys that expire\n")
        L.append("10,000 keys expiring at the same millisecond; sluice's CPU time (all threads, from /proc/PID/task/*/schedstat) over the idle window around the deadline, once alone and once next to %s keys without TTL. Visiting each of those keys once would cost at least ~100 ns apiece (%.1f s); the target counts as met when they add less than a tenth of that.\n" % ("{:,}".format(at("reaper").static_keys), at("reaper").static_keys * 100e-9))
        L.append("| keys without TTL | CPU over window | window | keys left after |")
        L.append("|---|---|---|---|")
        for label in ("alone", "with_static"):
            e = reaper.get(label)
            if e:
                L.append("| %s | %.1f ms | %.1f s | %s |" % ("{:,}".format(e["static"]), 1000 * e["cpu_s"], e["window_s"], "{:,}".format(e["keys_left"])))
        a, b = reaper.get("alone"), reaper.get("with_static")
        if a and b:
            # Touching every static key once costs at least ~100 ns each (a cache miss): the
            # reaper follows the 10,000 if the static keys add well under a tenth of that.
            okr = b["cpu_s"] - a["cpu_s"] < 0.1 * b["static"] * 100e-9 and b["keys_left"] == b["static"]
            targets.append(("reaper CPU follows the 10,000 keys, not the %s" % "{:,}".format(b["static"]), "%.1f ms vs %.1f ms alone" % (1000 * b["cpu_s"], 1000 * a["cpu_s"]), okr))
        L.append("")

    if bgsave:
        L.append("## BGSAVE during load\n")
        L.append(
            "A fresh server per kind with %s keys loaded (`SET bg:<n> <value>`, the RDB file written under a temporary "
            "directory); loadgen at (50,1) on its own %s keys, %gs measured after %gs warm-up, once as is and once with a "
            "BGSAVE sent %gs into the measured window (mid-window). *BGSAVE took*: from its reply until INFO persistence "
            "showed `rdb_bgsave_in_progress:0`, polled every 10 ms (the server's `rdb_last_bgsave_time_sec` beside it); "
            "when that is longer than the rest of the window, part of the save fell after it. %s.\n"
            % ("{:,}".format(at("bgsave").bgsave_keys), "{:,}".format(at("bgsave").keys), at("bgsave").bgsave_duration,
               at("bgsave").warmup, at("bgsave").bgsave_duration / 2, "Medians of %d runs" % at("bgsave").reps if at("bgsave").reps != 1 else "One run")
        )
        L.append("| workload | server | BGSAVE | decisions/s | p50 / p99 / p99.9 µs | p99 with ÷ without | BGSAVE took (rdb_last_bgsave_time_sec) |")
        L.append("|---|---|---|---|---|---|---|")
        for w in BGSAVE_WORKLOADS:
            for kind in ("sluice", "redis"):
                quiet = summarize(bgsave.get((w, kind, "quiet"), []))
                for mode in ("quiet", "bgsave"):
                    runs = bgsave.get((w, kind, mode), [])
                    if not runs:
                        continue
                    m = summarize(runs)
                    lat = "—" if "p50" not in m else "%d / %d / %d" % (m["p50"], m["p99"], m["p999"])
                    took = "—"
                    if mode == "bgsave":
                        secs = [r["bgsave"]["seconds"] for r in runs if "seconds" in r.get("bgsave", {})]
                        own = [r["bgsave"]["time_sec"] for r in runs if "time_sec" in r.get("bgsave", {})]
                        errs = [r["bgsave"]["error"] for r in runs if "error" in r.get("bgsave", {})]
                        took = "%.2f s (%s s)" % (median(secs), median(own)) if secs else "failed: %s" % (errs[:1] or ["?"])[0]
                    q = ratio(m.get("p99"), quiet.get("p99")) if mode == "bgsave" else None
                    L.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                        w, kind, "during" if mode == "bgsave" else "none",
                        fmt_rate(m.get("rate")) if "rate" in m else "not measured: %s" % m.get("unavailable"),
                        lat, "—" if q is None else fmt_ratio(q), took))
        L.append("")

    if aof:
        L.extend(aof_section(at("aof"), aof))

    if testdouble:
        L.extend(testdouble_section(at("testdouble"), testdouble, targets))

    L.append("## Targets\n")
    L.append("| target | measured | |")
    L.append("|---|---|---|")
    for name, val, ok in targets:
        L.append("| %s | %s | %s |" % (name, val, "not measured" if ok is None else met(ok)))
    L.append("")
    notes = os.path.join(ROOT, "benchmarks", "notes.md")
    if os.path.exists(notes):
        with open(notes) as f:
            L.append(f.read())
    with open(path, "w") as f:
        f.write("\n".join(L) + "\n")
    # Next to the report, where its link points (benchmarks/ratios.svg beside BENCHMARKS.md).
    svg_dir = os.path.join(os.path.dirname(os.path.abspath(path)), "benchmarks")
    os.makedirs(svg_dir, exist_ok=True)
    svg_chart(chart_rows, os.path.join(svg_dir, "ratios.svg"))


def rewrite_report(args):
    """Regenerates BENCHMARKS.md from a saved run (after editing benchmarks/notes.md)."""
    with open(args.from_json) as f:
        d = json.load(f)
    saved = d["meta"].get("args", {})
    for k, v in saved.items():
        setattr(args, k, v)
    report_from_run(args, d, args.out)


def report_from_run(args, d, path):
    """Writes the report from a run as saved in JSON (string keys)."""

    def keyed(m, conv):
        return {conv(k.split("|")): v for k, v in m.items()}

    thr = keyed(d["throughput"], lambda k: (k[0], int(k[1]), int(k[2]), k[3]))
    # (test, kind) in runs saved before pipeline 1 was measured: pipeline 16.
    rb = keyed(d["redis_benchmark"], lambda k: (k[0], int(k[1]), k[2]) if len(k) == 3 else (k[0], 16, k[1]))
    mem = keyed(d["memory"], tuple)
    unix = keyed(d.get("unix_socket", {}), lambda k: (k[0], int(k[1]), k[2], k[3]))
    bgsave = keyed(d.get("bgsave", {}), tuple)
    aof = keyed(d.get("aof", {}), lambda k: (k[0], int(k[1]), int(k[2]), k[3], k[4]))
    write_report(args, d["meta"], thr, rb, mem, d["expiry"], d["reaper"], unix, path, bgsave, d.get("testdouble"), aof)


def machine_meta(args):
    model = ""
    try:
        for ln in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if ln.startswith("Model name"):
                model = ln.split(":", 1)[1].strip()
    except OSError:
        pass
    redis_v = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.strip()
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": model or platform.processor(),
        "cpus": "%s (`nproc`)" % os.cpu_count(),
        "kernel": platform.release(),
        "redis": redis_v,
        "sluice": "commit %s%s, release build" % (git, " + uncommitted changes" if dirty else ""),
        "command": args.command,
    }


def merged_step_args(saved_meta, measured):
    """Each step's settings after an --only run: the steps measured now (`measured`) with
    this run's, the others with the saved run's (a run saved before step_args existed ran
    every step with its own args)."""
    step_args = dict(saved_meta.get("step_args") or {name: dict(saved_meta.get("args", {})) for name in STEPS})
    step_args.update(measured)
    return step_args


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sluice", default=os.path.join(ROOT, "target/release/sluice"))
    ap.add_argument("--loadgen", default=os.path.join(ROOT, "target/release/loadgen"))
    ap.add_argument("--sluice-port", type=int, default=7379)
    ap.add_argument("--redis-port", type=int, default=7380)
    ap.add_argument("--duration", type=float, default=4.0, help="measured seconds per loadgen run")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--rb-requests", type=int, default=1_000_000)
    ap.add_argument("--unix-requests", type=int, default=100_000, help="requests per redis-benchmark test in the unix step")
    ap.add_argument("--mem-keys", type=int, default=1_000_000)
    ap.add_argument("--zset-keys", type=int, default=100_000)
    ap.add_argument("--zset1000-keys", type=int, default=1_000, help="keys of 1,000 entries for the zset1000 memory row")
    ap.add_argument("--hash-keys", type=int, default=1_000_000, help="W5 funnel hashes for the hash memory row")
    ap.add_argument("--expiry-keys", type=int, default=1_000_000)
    ap.add_argument("--static-keys", type=int, default=10_000_000)
    ap.add_argument("--bgsave-keys", type=int, default=1_000_000, help="keys loaded before the bgsave step's runs")
    ap.add_argument("--bgsave-duration", type=float, default=8.0, help="measured seconds per run of the bgsave step")
    ap.add_argument("--skip", default="", help="comma-separated steps to skip: %s" % ",".join(STEPS))
    ap.add_argument("--only", default="", help="comma-separated steps to run, keeping the others' figures from the saved run")
    ap.add_argument("--td-reps", type=int, default=3, help="runs of each test-double suite")
    ap.add_argument("--out", default=os.path.join(ROOT, "BENCHMARKS.md"))
    ap.add_argument("--json-out", default=os.path.join(ROOT, "benchmarks", "last-run.json"))
    ap.add_argument("--command", default="scripts/bench.sh")
    ap.add_argument("--from-json", help="only rewrite the report from a saved run (benchmarks/last-run.json)")
    args = ap.parse_args()
    if args.from_json:
        return rewrite_report(args)
    skip = set(filter(None, args.skip.split(",")))
    only = set(filter(None, args.only.split(",")))
    for name in skip | only:
        if name not in STEPS:
            ap.error("no step %r (steps: %s)" % (name, ", ".join(STEPS)))
    if only:
        skip = set(STEPS) - only
    os.makedirs(os.path.join(ROOT, "benchmarks"), exist_ok=True)

    def log(msg):
        print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)

    def mk_threads(n):
        return Server("sluice", [args.sluice, "--port", str(args.sluice_port), "--threads", str(n), "--save", "", "--appendonly", "no", "--loglevel", "warning"], args.sluice_port)

    def mk(kind, unixsocket=None, extra=()):
        extra = list(extra) + ([] if unixsocket is None else ["--unixsocket", unixsocket, "--unixsocketperm", "700"])
        if kind == "sluice":
            return Server("sluice", [args.sluice, "--port", str(args.sluice_port), "--save", "", "--appendonly", "no", "--loglevel", "warning"] + extra, args.sluice_port)
        return Server("redis", ["redis-server", "--port", str(args.redis_port), "--bind", HOST, "--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"] + extra, args.redis_port)

    meta = machine_meta(args)
    load_before = load_avg()
    log("machine: %s, %s; load %.2f" % (meta["machine"], meta["cpus"], load_before))
    thr, rb, unix, mem, expiry, reaper, bgsave, testdouble, aof = {}, {}, {}, {}, {}, {}, {}, {}, {}
    servers = [mk("sluice"), mk("redis")]
    try:
        if not {"throughput", "rb"} <= skip:
            for s in servers:
                s.start()
            if "throughput" not in skip:
                thr = step_throughput(args, servers, log)
            if "rb" not in skip:
                rb = step_redis_benchmark(args, servers, log)
    finally:
        for s in servers:
            s.stop()
    if "unix" not in skip:
        unix = step_unix(args, mk, log)
    if "threads" not in skip:
        thr.update(step_threads(args, mk_threads, log))
    if "memory" not in skip:
        mem = step_memory(args, mk, log)
    if "expiry" not in skip:
        expiry = step_mass_expiry(args, mk, log)
    if "reaper" not in skip:
        reaper = step_reaper_cpu(args, mk, log)
    if "bgsave" not in skip:
        bgsave = step_bgsave(args, mk, log)
    if "testdouble" not in skip:
        testdouble = step_testdouble(args, log)
    if "aof" not in skip:
        aof = step_aof(args, log)
    meta["load"] = "1-minute load average %.2f before, %.2f after" % (load_before, load_avg())
    meta["args"] = {
        k: getattr(args, k)
        for k in ("duration", "warmup", "reps", "keys", "rb_requests", "unix_requests", "mem_keys", "zset_keys", "zset1000_keys", "hash_keys", "expiry_keys", "static_keys", "bgsave_keys", "bgsave_duration", "td_reps", "command")
    }
    # Each step's text says how it was measured: with --only, the steps kept from the saved
    # run keep that run's settings (its --reps, --duration …), the others get this run's.
    meta["step_args"] = {name: dict(meta["args"]) for name in STEPS if name not in skip}
    run = {
        "meta": meta,
        "throughput": {"|".join(map(str, k)): v for k, v in thr.items()},
        "redis_benchmark": {"|".join(map(str, k)): v for k, v in rb.items()},
        "unix_socket": {"|".join(map(str, k)): v for k, v in unix.items()},
        "memory": {"|".join(k): v for k, v in mem.items()},
        "expiry": expiry,
        "reaper": reaper,
        "bgsave": {"|".join(k): v for k, v in bgsave.items()},
        "testdouble": testdouble,
        "aof": {"|".join(map(str, k)): v for k, v in aof.items()},
    }
    if only and os.path.exists(args.json_out):
        # The steps not run keep their saved figures; the report says which run each is from.
        with open(args.json_out) as f:
            saved = json.load(f)
        for name, key in STEPS.items():
            if name not in only and key in saved:
                if isinstance(run[key], dict) and isinstance(saved[key], dict):
                    merged = dict(saved[key])
                    merged.update(run[key])
                    run[key] = merged
                else:
                    run[key] = saved[key]
        earlier = saved["meta"].get("earlier") or {k: saved["meta"].get(k) for k in ("date", "sluice", "load", "command")}
        meta["earlier"] = earlier
        meta["steps"] = sorted(only)
        saved_args = saved["meta"].get("args", {})
        meta["step_args"] = merged_step_args(saved["meta"], meta["step_args"])
        meta["args"] = saved_args
    with open(args.json_out, "w") as f:
        json.dump(run, f, indent=1)
    report_from_run(args, run, args.out)
    log("wrote %s" % args.out)


if __name__ == "__main__":
    sys.exit(main())
