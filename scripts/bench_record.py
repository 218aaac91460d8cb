#!/usr/bin/env python3
"""Appends one benchmark record to the file named by TSR_BENCH_JSON: a JSON
object on a line of its own (the format of bench/README.md; the C programs
write the same through bench/common/bench_record.h). Without TSR_BENCH_JSON
it does nothing, so a benchmark can call it on every row.

    bench_record.py --bench NAME --case CASE [--device D] [--driver V] [--gpu]
                    [--target T] [--verdict V] FIGURE=NUMBER...

FIGURE names carry their unit (p50_ns, added_ms, ratio); NUMBER is an
integer or a decimal. --device defaults to "cpu", --driver to none (null);
--gpu takes both from nvidia-smi (GPU 0).
From Python: sys.path gets scripts/, then bench_record.record(...).

Errors (a figure that is not NAME=NUMBER, a file that cannot be written):
one line on stderr, exit 2; record() says it on stderr and returns False."""
import argparse
import datetime
import json
import math
import os
import re
import socket
import subprocess
import sys

_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_commit = None


def commit():
    """TSR_BENCH_COMMIT when set, else `git describe --always --dirty` of
    this source tree, else "unknown"; computed once a process."""
    global _commit
    if _commit is None:
        _commit = os.environ.get("TSR_BENCH_COMMIT") or ""
        if not _commit:
            root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
            try:
                _commit = subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"],
                                         capture_output=True, text=True, timeout=30).stdout.strip()
            except (OSError, subprocess.SubprocessError):
                _commit = ""
        _commit = _commit or "unknown"
    return _commit


def gpu():
    """(name, driver version) of GPU 0 from nvidia-smi, or (None, None)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader", "-i", "0"],
                             capture_output=True, text=True, timeout=60).stdout.strip().splitlines()
        name, driver = out[0].rsplit(", ", 1)
        return name, driver
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        return None, None


def number(text):
    """An int or float from NAME=NUMBER's NUMBER; ValueError otherwise."""
    if not _NUMBER.fullmatch(text):
        raise ValueError(f"'{text}' is not a number")
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"'{text}' is out of range")
    return int(text) if re.fullmatch(r"-?[0-9]+", text) else v


def record(bench, case, figures, device="cpu", driver=None, target=None, verdict=None):
    """Appends the record to $TSR_BENCH_JSON (nothing when it is unset).
    figures: {name: int or float}; None or a value that is not finite is null.
    False, after one line on stderr, when the file cannot be written."""
    path = os.environ.get("TSR_BENCH_JSON")
    if not path:
        return True
    rec = {
        "bench": bench,
        "commit": commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": socket.gethostname(),
        "device": device or "unknown",
        "driver": driver or None,
        "case": case,
        "figures": {k: None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v
                    for k, v in figures.items()},
    }
    if target is not None:
        rec["target"] = target
    if verdict is not None:
        rec["verdict"] = verdict
    line = json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n"
    # one write of the whole line: appends of processes at once do not interleave
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except OSError as e:
        print(f"bench_record: TSR_BENCH_JSON={path}: {e.strerror or e}", file=sys.stderr)
        return False
    return True


def main(argv):
    ap = argparse.ArgumentParser(prog="bench_record.py", description="Append one record to $TSR_BENCH_JSON.")
    ap.add_argument("--bench", required=True)
    ap.add_argument("--case", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--driver")
    ap.add_argument("--gpu", action="store_true", help="device and driver of GPU 0, from nvidia-smi")
    ap.add_argument("--target")
    ap.add_argument("--verdict")
    ap.add_argument("figures", nargs="*", metavar="FIGURE=NUMBER")
    a = ap.parse_args(argv)
    figures = {}
    for f in a.figures:
        name, eq, text = f.partition("=")
        try:
            if not eq or not name:
                raise ValueError("not FIGURE=NUMBER")
            figures[name] = number(text)
        except ValueError as e:
            print(f"bench_record: {a.bench}, {a.case}: '{f}': {e}", file=sys.stderr)
            return 2
    if a.gpu:
        name, driver = gpu()
        a.device, a.driver = name or "unknown GPU", driver
    return 0 if record(a.bench, a.case, figures, a.device, a.driver, a.target, a.verdict) else 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
