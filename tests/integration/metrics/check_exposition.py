#!/usr/bin/env python3
"""Checks a Prometheus text exposition (format 0.0.4) line by line, read
from stdin: HELP and TYPE once a family and before its samples, names and
label names as the format allows, label values escaped, numbers as the
format writes them, counters named _total, histograms with increasing
buckets ending at +Inf equal to _count, no series twice, every name with
the tessera_ prefix. Prints each problem; exit 1 if any."""
import math
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def number(text):
    if text in ("+Inf", "-Inf", "NaN"):
        return float(text.replace("Inf", "inf").replace("NaN", "nan"))
    if not re.fullmatch(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?", text):
        raise ValueError(text)
    return float(text)


def main():
    problems, types, helps, seen = [], {}, set(), set()
    buckets = {}
    counts = {}
    for no, line in enumerate(sys.stdin.read().split("\n"), 1):
        if not line:
            continue
        if line.startswith("# HELP "):
            parts = line.split(" ", 3)
            if len(parts) < 4 or not NAME.match(parts[2]):
                problems.append("%d: bad HELP" % no)
            elif parts[2] in helps:
                problems.append("%d: second HELP for %s" % (no, parts[2]))
            else:
                helps.add(parts[2])
            continue
        if line.startswith("# TYPE "):
            parts = line.split(" ")
            if len(parts) != 4 or not NAME.match(parts[2]) or parts[3] not in TYPES:
                problems.append("%d: bad TYPE line" % no)
            elif parts[2] in types:
                problems.append("%d: second TYPE for %s" % (no, parts[2]))
            else:
                types[parts[2]] = parts[3]
            continue
        if line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
        if not m:
            problems.append("%d: not a sample: %r" % (no, line))
            continue
        name, labels, value = m.group(1), m.group(3) or "", m.group(4)
        rest = labels
        pairs = []
        while rest:
            lm = LABEL.match(rest)
            if not lm:
                problems.append("%d: bad labels %r" % (no, labels))
                break
            pairs.append((lm.group(1), lm.group(2)))
            rest = rest[lm.end():]
            if rest.startswith(","):
                rest = rest[1:]
            elif rest:
                problems.append("%d: bad labels %r" % (no, labels))
                break
        try:
            v = number(value)
        except ValueError:
            problems.append("%d: bad value %r" % (no, value))
            continue
        family = re.sub(r"_(bucket|sum|count)$", "", name) if re.sub(r"_(bucket|sum|count)$", "", name) in types \
            else name
        if not name.startswith("tessera_"):
            problems.append("%d: %s lacks the tessera_ prefix" % (no, name))
        if family not in types:
            problems.append("%d: %s has no TYPE before it" % (no, name))
            continue
        key = (name, tuple(sorted(pairs)))
        if key in seen:
            problems.append("%d: series twice: %s" % (no, line))
        seen.add(key)
        t = types[family]
        if t == "counter" and not name.endswith("_total"):
            problems.append("%d: counter %s is not named _total" % (no, name))
        if t in ("counter",) and (v < 0 or math.isnan(v)):
            problems.append("%d: counter %s is %s" % (no, name, value))
        if t == "histogram":
            other = tuple(sorted((k, x) for k, x in pairs if k != "le"))
            if name.endswith("_bucket"):
                le = dict(pairs).get("le")
                if le is None:
                    problems.append("%d: bucket without le" % no)
                    continue
                b = buckets.setdefault((family, other), [])
                if b and (number(le) <= b[-1][0] or v < b[-1][1]):
                    problems.append("%d: buckets of %s do not increase" % (no, family))
                b.append((number(le), v))
            elif name.endswith("_count"):
                counts[(family, other)] = v
    for key, b in buckets.items():
        if not b or b[-1][0] != math.inf:
            problems.append("%s: no +Inf bucket" % key[0])
        elif counts.get(key) != b[-1][1]:
            problems.append("%s: +Inf bucket %s != _count %s" % (key[0], b[-1][1], counts.get(key)))
    for p in problems:
        print("exposition: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
