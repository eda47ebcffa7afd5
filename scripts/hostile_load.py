#!/usr/bin/env python3
"""Larger versions of the hostile tests in tests/it/hostile_repl.rs and hostile_blocking.rs,
run by hand against a server that is already running (sluice or redis-server, for
comparison):

    target/release/sluice --port 7000 &
    scripts/hostile_load.py --port 7000 fullsync --mb 80 --silent 8
    scripts/hostile_load.py --port 7000 blocked --keys 100000 --clients 3

While the attack runs, a fresh connection sends PING every 50 ms; the script prints the
slowest PING, the highest used_memory seen and the load average (the machine's load
changes every figure). Nothing here is asserted: the tests assert behaviour, never speed.
"""

import argparse
import os
import socket
import time


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def call(port, *args):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(encode(*args))
        s.settimeout(30)
        data = b""
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                return data
            data += chunk
            head, sep, _ = data.partition(b"\r\n")
            if not sep:
                continue
            if head[:1] != b"$" or head == b"$-1":
                return data
            if len(data) >= len(head) + 2 + int(head[1:]) + 2:
                return data


def info_field(port, section, field):
    for line in call(port, "INFO", section).decode(errors="replace").splitlines():
        if line.startswith(field + ":"):
            return int(line.split(":", 1)[1])
    return -1


def watch(port, seconds, done=lambda: False):
    """PINGs from fresh connections for `seconds` (or until `done()`); returns the slowest
    PING and the highest used_memory seen."""
    slowest, peak = 0.0, 0
    end = time.time() + seconds
    while time.time() < end and not done():
        t = time.time()
        call(port, "PING")
        slowest = max(slowest, time.time() - t)
        peak = max(peak, info_field(port, "memory", "used_memory"))
        time.sleep(0.05)
    return slowest, peak


def report(name, before, slowest, peak):
    print(
        f"{name}: slowest PING {slowest * 1000:.1f} ms, used_memory {before >> 20} MB -> "
        f"peak {peak >> 20} MB (load average {os.getloadavg()[0]:.2f})"
    )


def fullsync(port, mb, silent):
    call(port, "CONFIG", "SET", "repl-timeout", "5")
    value = b"v" * (100 * 1024)
    with socket.create_connection(("127.0.0.1", port)) as s:
        for batch in range(mb * 10 // 40):
            args = ["MSET"]
            for i in range(40):
                args += [f"load:{batch * 40 + i}", value]
            s.sendall(encode(*args))
            s.recv(64)
    before = info_field(port, "memory", "used_memory")
    peers = []
    for _ in range(silent):
        p = socket.create_connection(("127.0.0.1", port))
        p.sendall(encode("PSYNC", "?", "-1"))
        peers.append(p)
    slowest, peak = watch(port, 15)
    report(f"{silent} silent PSYNCs on {mb} MB", before, slowest, peak)
    for p in peers:
        p.close()


def blocked(port, keys, clients):
    names = [f"bk:{i}" for i in range(keys)]
    before = info_field(port, "memory", "used_memory")
    conns = []
    for _ in range(clients):
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(encode("BLPOP", *names, 0))
        conns.append(c)
    slowest, peak = watch(
        port, 60, lambda: info_field(port, "clients", "blocked_clients") >= clients
    )
    report(f"{clients} BLPOPs on {keys} keys", before, slowest, peak)
    call(port, "RPUSH", "bk:1", "x")
    for c in conns:
        c.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    sub = ap.add_subparsers(dest="case", required=True)
    f = sub.add_parser("fullsync")
    f.add_argument("--mb", type=int, default=80)
    f.add_argument("--silent", type=int, default=8)
    b = sub.add_parser("blocked")
    b.add_argument("--keys", type=int, default=100_000)
    b.add_argument("--clients", type=int, default=3)
    a = ap.parse_args()
    if a.case == "fullsync":
        fullsync(a.port, a.mb, a.silent)
    else:
        blocked(a.port, a.keys, a.clients)


if __name__ == "__main__":
    main()
