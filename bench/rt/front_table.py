#!/usr/bin/env python3
"""The PyTorch front's table from one run of torch_baselines.py
(eager, torch.compile, the CUDA graph: CUDA events) and torch_front.py
(eager again and the front's engines in one process: host wall time to the
end of the work), both outputs given as files:

    front_table.py BASELINES.txt FRONT.txt

Prints one markdown table: per workload each column's total in ms (median
of the runs' repetitions) and the front's speed-up over eager measured in
its own process ("2.51x" faster, "0.40x" slower). Rows that a program did
not run show "-". With TSR_BENCH_JSON set, each row is also a record there
(bench/README.md; the device is FRONT.txt's). Exit 1 when FRONT.txt has no
front rows."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import bench_record  # noqa: E402


def read(path):
    rows = []
    try:
        with open(path) as f:
            for line in f:
                kv = dict(p.split("=", 1) for p in line.split() if "=" in p)
                if "workload" in kv and "impl" in kv:
                    rows.append(kv)
    except OSError as e:
        print("front_table.py: %s" % e, file=sys.stderr)
        sys.exit(1)
    return rows


def device(path):
    """The device named on the program's header line (device=NAME), or None."""
    with open(path) as f:
        for line in f:
            kv = dict(p.split("=", 1) for p in line.split() if "=" in p)
            if "device" in kv and "workload" not in kv:
                return kv["device"].replace("_", " ")
    return None


def number(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def key(r):
    return (r["workload"], r.get("size", r.get("shape", "")))


def main(argv):
    if len(argv) != 2:
        print("usage: front_table.py BASELINES.txt FRONT.txt", file=sys.stderr)
        return 2
    base, front = read(argv[0]), read(argv[1])
    order, by = [], {}
    for src, rows in (("b", base), ("f", front)):
        for r in rows:
            k = key(r)
            if k not in by:
                order.append(k)
                by[k] = {}
            by[k][(src, r["impl"])] = r
    engines = []
    for r in front:
        if r["impl"].startswith("front-") and r["impl"] not in engines:
            engines.append(r["impl"])
    if not engines:
        print("front_table.py: %s has no front rows" % argv[1], file=sys.stderr)
        return 1

    def ms(r):
        v = r.get("total_ms_median", "-") if r else "-"
        return v if v not in ("", None) else "-"

    head = ["workload", "ops", "eager ms", "torch.compile ms", "CUDA graph ms", "eager ms (front's process)"]
    for e in engines:
        head += ["%s ms" % e, "%s us/op" % e, "%s vs eager" % e]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    gpu = device(argv[1])
    for k in order:
        cells = by[k]
        if not any(src == "f" for src, _ in cells):
            continue  # a baseline the front has no workload for (adds_group: the runtime's group API)
        any_row = fe if (fe := cells.get(("f", "eager"))) else next(iter(cells.values()))
        name = k[0] + (" " + k[1] if k[1] else "")
        row = [name, any_row.get("ops", "-"), ms(cells.get(("b", "eager"))), ms(cells.get(("b", "compile"))),
               ms(cells.get(("b", "graph"))), ms(fe)]
        for e in engines:
            r = cells.get(("f", e))
            row += [ms(r), r.get("per_op_us", "-") if r else "-"]
            try:
                row.append("%.2fx" % (float(fe["total_ms_median"]) / float(r["total_ms_median"])))
            except (TypeError, KeyError, ValueError, ZeroDivisionError):
                row.append("-")
        print("| " + " | ".join(row) + " |")
        # the record: the row's cells that are numbers, under the columns' names
        names = ["ops", "eager_ms", "compile_ms", "graph_ms", "eager_front_process_ms"]
        for e in engines:
            e = e.replace("-", "_")
            names += [f"{e}_ms", f"{e}_us_per_op", f"{e}_vs_eager_ratio"]
        figures = {n: number(c.rstrip("x")) for n, c in zip(names, row[1:])}
        bench_record.record("rt_front", name, {n: v for n, v in figures.items() if v is not None},
                            device=gpu or "unknown GPU")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
