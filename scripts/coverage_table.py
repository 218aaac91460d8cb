#!/usr/bin/env python3
"""Turns gcovr's --json-summary into a markdown table: lines and branches
covered per module (src/<module>, contrib/<name>), and the total; files
the build generated are left out.

    coverage_table.py build/coverage/coverage.json

Errors: one line on stderr, exit 1."""
import json
import sys


def main():
    if len(sys.argv) != 2:
        print("usage: coverage_table.py COVERAGE_JSON", file=sys.stderr)
        return 2
    try:
        with open(sys.argv[1]) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        print(f"coverage_table: {sys.argv[1]}: {e}", file=sys.stderr)
        return 1
    mods = {}
    for f in data.get("files", []):
        if f["filename"].startswith("build/"):
            continue  # generated sources (the runtime's embedded texts)
        parts = f["filename"].split("/")
        key = "/".join(parts[:2]) if len(parts) > 2 else parts[0]
        m = mods.setdefault(key, [0, 0, 0, 0])
        m[0] += f.get("line_covered", 0)
        m[1] += f.get("line_total", 0)
        m[2] += f.get("branch_covered", 0)
        m[3] += f.get("branch_total", 0)

    def pct(a, b):
        return f"{100.0 * a / b:.1f}%" if b else "-"

    print("| module | lines | covered | branches | covered |")
    print("|---|---|---|---|---|")
    tot = [0, 0, 0, 0]
    for k in sorted(mods):
        m = mods[k]
        tot = [x + y for x, y in zip(tot, m)]
        print(f"| {k} | {m[1]} | {pct(m[0], m[1])} | {m[3]} | {pct(m[2], m[3])} |")
    print(f"| **all** | {tot[1]} | **{pct(tot[0], tot[1])}** | {tot[3]} | **{pct(tot[2], tot[3])}** |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
