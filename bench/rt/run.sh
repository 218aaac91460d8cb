#!/usr/bin/env bash
# bench/rt/run.sh: libtessera-rt beside eager PyTorch, a CUDA graph and
# torch.compile, in the same run on the same GPU.
#
#   run.sh RT_BENCH [OUT]    RT_BENCH: the built bench/rt_bench
#
# Runs rt_bench and, where PyTorch sees a GPU, torch_baselines.py (beside
# this script), then prints one markdown table: per workload the total
# time of each implementation (median of REPS, default 5) and tessera's
# speed-up over eager and over the graph. OUT (a folder) gets the table
# (bench-rt.md) and both programs' raw lines. With TSR_BENCH_JSON set,
# each row is also a record there (bench/README.md). Exit 0 when both ran;
# 77 without a GPU; 1 when a program failed (its check of the results too).
set -u
BENCH=${1:?usage: run.sh RT_BENCH [OUT]}
OUT=${2:-}
HERE=$(cd "$(dirname "$0")" && pwd)
REPS=${REPS:-5}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
"$BENCH" --reps "$REPS" --only adds,chain,mixed,fused,reduce >"$D/rt.txt" 2>"$D/rt.err"
rc=$?
# JIT compile times in a process of their own with the driver's compute
# cache off: NVRTC on a machine with a driver reuses the driver's cache of
# earlier compiles (seen on the H100: 3.7 s, then 58 ms for the same
# kernel in another process), which would make "cold" a cache hit
if [ $rc -eq 0 ]; then
  CUDA_CACHE_DISABLE=1 "$BENCH" --reps 1 --only jit >>"$D/rt.txt" 2>>"$D/rt.err"
  rc=$?
fi
if [ $rc -eq 77 ]; then cat "$D/rt.txt"; exit 77; fi
[ $rc -eq 0 ] || { echo "run.sh: rt_bench failed ($rc): $(tail -2 "$D/rt.err")"; cat "$D/rt.txt"; exit 1; }
python3 "$HERE/torch_baselines.py" --reps "$REPS" >"$D/torch.txt" 2>"$D/torch.err"
trc=$?
[ $trc -eq 0 ] || echo "note: torch_baselines.py exited $trc: $(tail -2 "$D/torch.err") $(head -1 "$D/torch.txt")"
GPU=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader -i 0 2>/dev/null)
DEVICE=$(sed 's/, / driver /' <<<"$GPU")
python3 - "$D/rt.txt" "$D/torch.txt" "$DEVICE" "$REPS" "$GPU" "$HERE/../../scripts" >"$D/table.md" <<'PY'
import sys, datetime
sys.path.insert(0, sys.argv[6])
import bench_record
gpu_name, _, gpu_driver = sys.argv[5].rpartition(", ")
def rec(bench, case, **figures):
    """The row as a record to $TSR_BENCH_JSON, when set: its figures that are numbers."""
    nums = {}
    for k, v in figures.items():
        try:
            nums[k] = float(v)
        except (TypeError, ValueError):
            pass
    bench_record.record(bench, case, nums, device=gpu_name or "unknown GPU", driver=gpu_driver or None)
def read(path):
    rows = []
    try:
        for line in open(path):
            kv = dict(p.split("=", 1) for p in line.split() if "=" in p)
            if "workload" in kv and "impl" in kv:
                rows.append(kv)
    except OSError:
        pass
    return rows
rows = [r for r in read(sys.argv[1]) + read(sys.argv[2]) if not r["workload"].startswith("jit")]
def key(r):
    return (r["workload"], r.get("size", r.get("shape", "")))
order, by = [], {}
for r in rows:
    k = key(r)
    if k not in by:
        order.append(k)
        by[k] = {}
    by[k][r["impl"]] = r
# the fused mixed workload is compared with the same PyTorch baselines as mixed
for k in list(order):
    if k[0] == "mixed_fused" and ("mixed", k[1]) in by:
        for impl, r in by[("mixed", k[1])].items():
            if impl != "tessera":
                by[k].setdefault(impl, r)
jit = [r for r in read(sys.argv[1]) if r.get("workload") == "jit"]
gens = [r for r in read(sys.argv[1]) if r.get("workload") == "jit_generation"]
def ms(r):
    try:
        return float(r["total_ms_median"])
    except (KeyError, ValueError, TypeError):
        return None
print(f"{sys.argv[3]}; {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%dT%H:%MZ}; median of {sys.argv[4]} runs; total ms of the whole workload")
print()
print("| workload | ops | eager ms | torch.compile ms | CUDA graph ms | tessera ms | tessera us/op | submit us/op | vs eager | vs graph |")
print("|---|---|---|---|---|---|---|---|---|---|")
for k in order:
    impl = by[k]
    t = impl.get("tessera", {})
    def cell(name):
        v = ms(impl.get(name, {}))
        return f"{v:.3f}" if v is not None else "-"
    tv = ms(t)
    def ratio(name):
        v = ms(impl.get(name, {}))
        return f"{v / tv:.2f}x" if v and tv else "-"
    print(f"| {k[0]} {k[1]} | {t.get('ops', '-')} | {cell('eager')} | {cell('compile')} | {cell('graph')} | {cell('tessera')} "
          f"| {t.get('per_op_us', '-')} | {t.get('submit_us_per_op', '-')} | {ratio('eager')} | {ratio('graph')} |")
    rec("rt", f"{k[0]} {k[1]}", ops=t.get("ops"), eager_ms=ms(impl.get("eager", {})), compile_ms=ms(impl.get("compile", {})),
        graph_ms=ms(impl.get("graph", {})), tessera_ms=tv, tessera_us_per_op=t.get("per_op_us"),
        submit_us_per_op=t.get("submit_us_per_op"), vs_eager_ratio=ratio("eager").rstrip("x"),
        vs_graph_ratio=ratio("graph").rstrip("x"))
if any(k[0] == "adds_group" for k in order):
    print()
    print("adds_group: tessera's tsr_rt_submit_group of the 10,000 adds; its eager and graph columns are "
          "torch._foreach_add over the same rows (PyTorch's batched form), eager and as a CUDA graph.")
if gens:
    print()
    print("| JIT operator's first use (register, a task, its result) | empty cache ms | same operator, from the cache ms | a new operator ms |")
    print("|---|---|---|---|")
    for r in gens:
        print(f"| {r.get('mode')} | {r.get('first_use_cold_ms')} | {r.get('first_use_cached_ms')} | {r.get('first_use_new_operator_ms')} |")
        rec("rt.jit", f"first use {r.get('mode')}", first_use_cold_ms=r.get("first_use_cold_ms"),
            first_use_cached_ms=r.get("first_use_cached_ms"), first_use_new_operator_ms=r.get("first_use_new_operator_ms"))
for r in jit:
    print()
    print("Replace under load (500 tasks in flight, host time of the call): %s ms median, %s ms at most"
          % (r.get("replace_under_load_ms_median"), r.get("replace_under_load_ms_max")))
    rec("rt.jit", "replace under load", replace_under_load_ms_median=r.get("replace_under_load_ms_median"),
        replace_under_load_ms_max=r.get("replace_under_load_ms_max"))
PY
cat "$D/table.md"
if [ -n "$OUT" ]; then
  mkdir -p "$OUT" && cp "$D/table.md" "$OUT/bench-rt.md" && cp "$D/rt.txt" "$OUT/rt.raw" && cp "$D/torch.txt" "$OUT/torch.raw" &&
    cp "$D/torch.err" "$OUT/torch.err"
fi
[ $trc -eq 0 ] || [ $trc -eq 77 ] || exit 1
exit 0
