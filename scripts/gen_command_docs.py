#!/usr/bin/env python3
"""Regenerates the structure part of sluice's COMMAND DOCS data (src/engine/docs/*.txt).

Usage: scripts/gen_command_docs.py REDIS_PORT SLUICE_PORT

Both servers must be running on 127.0.0.1: a redis-server 7.0.15 (the source of the
interface facts: argument names, types, tokens, flags, nesting, since versions, groups)
and a sluice (the list of commands and subcommands to document). Only structure is taken
from Redis. The prose (summary, complexity, history texts, replaced-by) is ours: it is kept
from the existing data files, and a command that has none yet gets `TODO` lines, which the
unit test `every_entry_has_our_text` refuses, so they must be written by hand before landing.
Commands Redis 7.0 lacks (CL.THROTTLE, CLIENT SETINFO, ...) are kept as they are in the files.
"""
import os
import re
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DOCS_DIR = os.path.join(HERE, "..", "src", "engine", "docs")
WORD = re.compile(r"^[A-Za-z0-9_\-./|]+$")


def resp_call(port, *args):
    """One RESP2 request; returns the decoded reply (bytes, ints, lists)."""
    s = socket.create_connection(("127.0.0.1", port))
    req = b"*%d\r\n" % len(args) + b"".join(
        b"$%d\r\n%s\r\n" % (len(a), a) for a in (x.encode() for x in args))
    s.sendall(req)
    f = s.makefile("rb")

    def read():
        line = f.readline()[:-2]
        t, rest = line[:1], line[1:]
        if t in (b"+", b"-"):
            return rest.decode()
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = f.read(n + 2)[:-2]
            return data.decode()
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [read() for _ in range(n)]
        raise ValueError(line)

    out = read()
    s.close()
    return out


def pairs(flat):
    return dict(zip(flat[0::2], flat[1::2]))


def q(word):
    return word if WORD.match(word) else '"%s"' % word


def fmt_arg(a):
    a = pairs(a)
    typ = a["type"]
    token = a.get("token")
    name = a["name"]
    if typ == "pure-token" and token and name == token.lower() and WORD.match(token):
        out = "=" + token
    elif typ == "pure-token":
        out = q(name) + "=" + q(token or "")
    else:
        out = q(name) + ":" + typ
        if token is not None:
            out += "=" + q(token)
    if typ in ("oneof", "block"):
        out += "(" + " ".join(fmt_arg(x) for x in a["arguments"]) + ")"
    if "key_spec_index" in a:
        out += "#%d" % a["key_spec_index"]
    if "since" in a:
        out += "@" + a["since"]
    if "deprecated_since" in a:
        out += "!" + a["deprecated_since"]
    for flag in a.get("flags", []):
        out += {"optional": "?", "multiple": "*", "multiple_token": "+"}[flag]
    return out


def read_existing():
    """name -> (group, header line, list of prose lines) from the current data files."""
    entries = {}
    for fname in sorted(os.listdir(DOCS_DIR)):
        if not fname.endswith(".txt"):
            continue
        name = None
        with open(os.path.join(DOCS_DIR, fname)) as fh:
            for line in fh:
                line = line.rstrip("\n")
                if not line or line.startswith("#"):
                    continue
                if not line.startswith(" "):
                    name = line.split()[0]
                    entries[name] = {"file": fname[:-4], "head": line, "lines": []}
                elif name:
                    entries[name]["lines"].append(line)
    return entries


def main():
    redis_port, sluice_port = int(sys.argv[1]), int(sys.argv[2])
    names = []
    for entry in resp_call(sluice_port, "COMMAND"):
        names.append(entry[0])
        for sub in entry[9] if len(entry) > 9 else []:
            names.append(sub[0])
    existing = read_existing()
    files = {}
    for name in sorted(names):
        reply = resp_call(redis_port, "COMMAND", "DOCS", name)
        old = existing.get(name)
        if not reply:
            if old is None:
                print(f"{name}: Redis 7.0 has no docs for it; write its entry by hand",
                      file=sys.stderr)
                continue
            files.setdefault(old["file"], []).append([old["head"]] + old["lines"])
            continue
        doc = pairs(reply[1])
        head = f"{name} {doc['group']} {doc['since']}"
        for flag in doc.get("doc_flags", []):
            head += " " + flag
        if "deprecated_since" in doc:
            head += " deprecated_since=" + doc["deprecated_since"]
        prose = {}
        history_text = []
        for line in (old or {}).get("lines", []):
            key = line.split()[0]
            if key == "history":
                history_text.append(line.split(None, 2)[2] if len(line.split()) > 2 else "TODO")
            elif key in ("summary", "complexity", "replaced_by"):
                prose[key] = line
        lines = [prose.get("summary", "  summary TODO")]
        if "complexity" in doc:
            lines.append(prose.get("complexity", "  complexity TODO"))
        if "replaced_by" in doc:
            lines.append(prose.get("replaced_by", "  replaced_by TODO"))
        for i, (version, _) in enumerate(doc.get("history", [])):
            text = history_text[i] if i < len(history_text) else "TODO"
            lines.append(f"  history {version} {text}")
        args = [fmt_arg(a) for a in doc.get("arguments", [])]
        # Wrapped at about 100 columns; the parser joins `args` lines.
        line = "  args"
        for a in args:
            if len(line) + 1 + len(a) > 100 and line != "  args":
                lines.append(line)
                line = "  args"
            line += " " + a
        if args:
            lines.append(line)
        group_file = old["file"] if old else doc["group"]
        files.setdefault(group_file, []).append([head] + lines)
    for fname, records in files.items():
        path = os.path.join(DOCS_DIR, fname + ".txt")
        header = []
        if os.path.exists(path):
            with open(path) as fh:
                for line in fh:
                    if line.startswith("#"):
                        header.append(line.rstrip("\n"))
                    else:
                        break
        with open(path, "w") as fh:
            for line in header:
                fh.write(line + "\n")
            if header:
                fh.write("\n")
            for rec in records:
                fh.write("\n".join(rec) + "\n\n")


if __name__ == "__main__":
    main()
