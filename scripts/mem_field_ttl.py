#!/usr/bin/env python3
"""Memory of hashes with field TTLs (Redis 7.4's HEXPIRE family): sluice beside Redis 7.4.

Redis 7.0 (what CI has) has no field TTLs, so the reference is a redis-server 7.4 or newer
built from the redis/redis repository (`make` in its tree; pass its path). For each shape it
starts a fresh server of each kind, writes N keys over one pipelined connection, waits a
second and reports the growth of INFO `used_memory` and of the process's RSS per key:

- funnel: the W5 funnel hash (`HSET k capacity 15 leaking_rate 0.5 left_quota 14 leaking_ts
  <13 digits>`) with a TTL on the two fields that change (`HEXPIRE k 3600 FIELDS 2
  left_quota leaking_ts`), what a funnel with per-field expiry keeps;
- buckets: one hash per tenant holding 20 token buckets, a field each with its own TTL
  (`HSET k b0 <n> … b19 <n>` then `HEXPIRE k <60+i> FIELDS 1 bi` per field);
- plain: the funnel without field TTLs, so the cost of the TTLs themselves shows.

Usage: scripts/mem_field_ttl.py --redis /path/to/redis-7.4/src/redis-server
       [--sluice target/release/sluice] [--keys 100000]
Prints a Markdown table; the figures in benchmarks/notes.md come from it.
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.f = self.s.makefile("rb")

    def reply(self):
        line = self.f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        if kind == b"-":
            raise RuntimeError(rest.decode())
        return rest

    def pipeline(self, cmds):
        self.s.sendall(b"".join(encode(*c) for c in cmds))
        for _ in cmds:
            self.reply()

    def used_memory(self):
        self.s.sendall(encode("INFO", "memory"))
        text = self.reply().decode()
        return int(text.split("used_memory:")[1].split("\r\n")[0])


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def start(kind, binary, port, workdir):
    if kind == "sluice":
        cmd = [binary, "--port", str(port), "--save", "", "--dir", workdir]
    else:
        cmd = [binary, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", workdir]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            c = Conn(port)
            c.s.sendall(encode("PING"))
            c.reply()
            return p, c
        except OSError:
            time.sleep(0.05)
    p.kill()
    raise RuntimeError("%s did not start" % kind)


def commands(shape, i):
    k = "lg:hash:%07d" % i
    if shape in ("funnel", "plain"):
        cmds = [("HSET", k, "capacity", 15, "leaking_rate", "0.5", "left_quota", 14,
                 "leaking_ts", 1764000000000 + i)]
        if shape == "funnel":
            cmds.append(("HEXPIRE", k, 3600, "FIELDS", 2, "left_quota", "leaking_ts"))
        return cmds
    fields = []
    for b in range(20):
        fields += ["b%d" % b, 1000 + b]
    cmds = [("HSET", k, *fields)]
    cmds += [("HEXPIRE", k, 60 + b, "FIELDS", 1, "b%d" % b) for b in range(20)]
    return cmds


def measure(kind, binary, shape, n):
    port = free_port()
    with tempfile.TemporaryDirectory() as d:
        p, c = start(kind, binary, port, d)
        try:
            time.sleep(0.3)
            used0, rss0 = c.used_memory(), rss(p.pid)
            batch = []
            for i in range(n):
                batch += commands(shape, i)
                if len(batch) >= 512:
                    c.pipeline(batch)
                    batch = []
            if batch:
                c.pipeline(batch)
            time.sleep(1.0)
            used1, rss1 = c.used_memory(), rss(p.pid)
            c.s.sendall(encode("OBJECT", "ENCODING", "lg:hash:0000000"))
            enc = c.reply().decode()
            return {"used": (used1 - used0) / n, "rss": (rss1 - rss0) / n, "encoding": enc}
        finally:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--redis", required=True, help="redis-server 7.4 or newer")
    ap.add_argument("--sluice", default=os.path.join(ROOT, "target", "release", "sluice"))
    ap.add_argument("--keys", type=int, default=100000)
    args = ap.parse_args()
    version = subprocess.run([args.redis, "--version"], capture_output=True, text=True).stdout.strip()
    print("redis: %s; sluice: %s; %d keys per shape; load average %s" % (
        version, args.sluice, args.keys, open("/proc/loadavg").read().split()[0]))
    print()
    print("| shape | sluice used_memory / key | Redis used_memory / key | ratio (Redis ÷ sluice) "
          "| sluice RSS / key | Redis RSS / key | encodings (sluice, Redis) |")
    print("|---|---|---|---|---|---|---|")
    for shape, n in (("funnel", args.keys), ("plain", args.keys), ("buckets", max(args.keys // 10, 1))):
        s = measure("sluice", args.sluice, shape, n)
        r = measure("redis", args.redis, shape, n)
        print("| %s | %.0f B | %.0f B | %.2f× | %.0f B | %.0f B | %s, %s |" % (
            shape, s["used"], r["used"], r["used"] / s["used"] if s["used"] else 0,
            s["rss"], r["rss"], s["encoding"], r["encoding"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
