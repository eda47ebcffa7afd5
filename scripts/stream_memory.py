#!/usr/bin/env python3
"""Memory per stream entry, sluice against redis-server: INFO used_memory before and after N
XADDs (explicit IDs, so both hold the same entries), and MEMORY USAGE of the stream.

Usage: scripts/stream_memory.py NAME=PORT [NAME=PORT ...]   (each a fresh, empty server on
127.0.0.1, e.g. redis=7802 sluice=7801)
"""
import sys

import redis

SHAPES = {
    # name: fields of each entry (i is the entry's number)
    "1 field, small int": lambda i: {"v": i},
    "3 fields, sensor reading": lambda i: {"sensor": "s%d" % (i % 50), "temp": "21.%d" % (i % 10), "hum": 40 + i % 7},
    "2 fields, 100-byte payload": lambda i: {"job": i, "payload": "x" * 100},
}
N = 100_000


def used(r):
    return int(r.info("memory")["used_memory"])


def measure(port):
    r = redis.Redis(port=port)
    out = []
    for n, (name, shape) in enumerate(SHAPES.items()):
        key = "mem:%d" % n
        r.delete(key)
        before = used(r)
        p = r.pipeline(transaction=False)
        for i in range(1, N + 1):
            p.xadd(key, shape(i), id="%d-0" % i)
            if i % 5000 == 0:
                p.execute()
        p.execute()
        after = used(r)
        usage = r.memory_usage(key, samples=0)
        out.append((name, (after - before) / N, usage / N))
        r.delete(key)
    return out


for arg in sys.argv[1:]:
    who, port = arg.split("=")
    for name, per_entry, usage in measure(int(port)):
        print("%-7s %-28s used_memory %6.1f B/entry  MEMORY USAGE %6.1f B/entry" % (who, name, per_entry, usage))
