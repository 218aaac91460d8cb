#!/usr/bin/env python3
"""Markdown tables from benchmark records (JSON lines, bench/README.md):
one table per bench, in the order the benches first appear, a row per case
and a column per figure, under a line naming the commit, device, driver and
date of its rows.

    bench_table.py FILE... [--bench NAME] [--figures a,b,c]

--bench keeps one bench; --figures picks the columns and their order (a
row without one shows "-"). A case recorded again (a later run appended to
the same file) replaces the earlier row in its place. Target and verdict
columns appear where a row of the table has one. "-" as FILE reads stdin.

Errors (a file that cannot be read, a line that is not a JSON object, a
missing or mistyped key, no record to show): one line on stderr naming the
file and line, exit 2, and nothing on stdout."""
import argparse
import json
import sys

# key: (types it may hold, what the message calls them)
KEYS = {
    "bench": (str, "a string"),
    "commit": (str, "a string"),
    "date": (str, "a string"),
    "host": (str, "a string"),
    "device": (str, "a string"),
    "driver": ((str, type(None)), "a string or null"),
    "case": (str, "a string"),
    "figures": (dict, "an object"),
}
OPTIONAL = {"target": str, "verdict": str}


class BadInput(Exception):
    pass


def no_constant(name):
    raise ValueError(f"{name} is not JSON")


def check(rec, where):
    if not isinstance(rec, dict):
        raise BadInput(f"{where}: not a JSON object")
    for key, (types, what) in KEYS.items():
        if key not in rec:
            raise BadInput(f"{where}: no '{key}'")
        if not isinstance(rec[key], types):
            raise BadInput(f"{where}: '{key}' is not {what}")
    for key, types in OPTIONAL.items():
        if key in rec and not isinstance(rec[key], types):
            raise BadInput(f"{where}: '{key}' is not a string")
    for name, v in rec["figures"].items():
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise BadInput(f"{where}: figure '{name}' is not a number")


def read(path):
    try:
        f = sys.stdin if path == "-" else open(path, encoding="utf-8")
        with f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: {e}")
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{'<stdin>' if path == '-' else path}:{n}"
        try:
            rec = json.loads(line, parse_constant=no_constant)
        except ValueError as e:
            raise BadInput(f"{where}: not a JSON object ({e})")
        check(rec, where)
        out.append(rec)
    return out


def cell(v):
    if v is None:
        return "-"
    if isinstance(v, str):
        return v.replace("|", "\\|")
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        v = int(v)
    if isinstance(v, int):
        return str(v)
    return f"{v:.6g}" if abs(v) < 1e6 else f"{v:.0f}"


def distinct(rows, key):
    seen = []
    for r in rows:
        v = "none" if r[key] is None else r[key]
        if v not in seen:
            seen.append(v)
    return ", ".join(seen)


def table(bench, rows, figures):
    dates = sorted(r["date"] for r in rows)
    date = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
    if not figures:
        figures = []
        for r in rows:
            figures += [k for k in r["figures"] if k not in figures]
    extra = [k for k in OPTIONAL if any(k in r for r in rows)]
    out = [f"## {bench}", "",
           f"commit {distinct(rows, 'commit')}; device {distinct(rows, 'device')}; "
           f"driver {distinct(rows, 'driver')}; date {date}", "",
           "| " + " | ".join(["case"] + figures + extra) + " |",
           "|---|" + "---:|" * len(figures) + "---|" * len(extra)]
    for r in rows:
        cells = [cell(r["case"])] + [cell(r["figures"].get(k)) for k in figures] + [cell(r.get(k)) for k in extra]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv):
    ap = argparse.ArgumentParser(prog="bench_table.py", description="Markdown tables from benchmark records.")
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--bench")
    ap.add_argument("--figures", help="comma-separated figure names: the columns, in order")
    a = ap.parse_args(argv)
    figures = [f for f in (a.figures or "").split(",") if f]
    if a.figures is not None and not figures:
        print("bench_table: --figures names no figure", file=sys.stderr)
        return 2
    try:
        recs = [r for path in a.files for r in read(path)]
    except BadInput as e:
        print(f"bench_table: {e}", file=sys.stderr)
        return 2
    by = {}  # bench -> {case: record}, both in first-seen order
    for r in recs:
        if a.bench is None or r["bench"] == a.bench:
            by.setdefault(r["bench"], {})[r["case"]] = r
    if not by:
        what = f"of bench '{a.bench}' " if a.bench is not None else ""
        print(f"bench_table: no records {what}in {', '.join(a.files)}", file=sys.stderr)
        return 2
    print("\n\n".join(table(b, list(cases.values()), figures) for b, cases in by.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
