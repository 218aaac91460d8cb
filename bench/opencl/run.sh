#!/usr/bin/env bash
# bench/opencl/run.sh: what libtessera-opencl.so adds to clCreateBuffer and
# clReleaseMemObject, beside the ICD loader measured in the same process
# (target: added p50 <= 0.5 us).
#
#   run.sh BIN_DIR
#
# BIN_DIR holds tesserad and tessera; BENCH and OCL_SHIM name ocl_bench and
# libtessera-opencl.so (default: in BIN_DIR). It starts a private tesserad
# whose devices are NVML's GPUs (where there are) and the PoCL device,
# declared as an OpenCL device; takes a lease on each; then, for each
# platform found (PoCL, NVIDIA), RUNS times (default 3) runs ocl_bench
# (ROUNDS rounds, default 20000) under the shim and the lease. ocl_bench
# times every call through the hooks and through the loader's own entries
# in the same process (see ocl_bench.c); the table gives the medians over
# the runs. Writes the table to OUT (a file) when set, and each row as a
# record to TSR_BENCH_JSON when set (bench/README.md).
set -euo pipefail
BIN=${1:?usage: run.sh BIN_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
BENCH=${BENCH:-$BIN/ocl_bench}
OCL_SHIM=${OCL_SHIM:-$BIN/libtessera-opencl.so}
RUNS=${RUNS:-3}
ROUNDS=${ROUNDS:-20000}
D=$(mktemp -d "${TMPDIR:-/tmp}/tsr-oclbench-XXXXXX")
DPID=
trap '[ -n "$DPID" ] && kill "$DPID" 2>/dev/null; wait 2>/dev/null; rm -rf "$D"' EXIT
unset TESSERA_LEASE TESSERA_POLICY LD_PRELOAD

pocl=$(OCL_PLATFORM=Portable "$BENCH" 100 2>/dev/null | sed -n 's/^platform=.* device=\(.*\) rounds=.*/\1/p' || true)
nvidia=$(OCL_PLATFORM=NVIDIA "$BENCH" 100 2>/dev/null | grep -c '^platform=' || true)
[ -n "$pocl" ] || [ "$nvidia" = 1 ] || { echo "SKIP: neither PoCL nor NVIDIA's OpenCL platform here"; exit 77; }
{
  printf '[daemon]\ndevices = auto\nsync = none\nregion_dir = %s/regions\n' "$D"
  [ -z "$pocl" ] || printf '\n[device.0]\nname = PoCL\nkind = opencl\nopencl = %s*\nmemory = 8GiB\n' "${pocl:0:20}"
} >"$D/conf"
"$BIN/tesserad" --config "$D/conf" --state-dir "$D/state" --socket "$D/sock" >"$D/log" 2>&1 &
DPID=$!
for _ in $(seq 1 500); do "$BIN/tessera" --socket "$D/sock" devices >/dev/null 2>&1 && break; sleep 0.01; done
lease_on() { # lease_on KIND: a lease on the first device of that kind
  local idx
  idx=$("$BIN/tessera" --socket "$D/sock" devices --json | tr -d '\n ' | grep -o '"index":[0-9]*,[^}]*"kind":"'"$1"'"' |
    head -n1 | sed 's/"index":\([0-9]*\).*/\1/')
  [ -n "$idx" ] || return 1
  "$BIN/tessera" --socket "$D/sock" lease create --device "$idx" --mem 4GiB --for 1h --json |
    tr -d '\n ' | sed 's/.*"id":\([0-9]*\).*/\1/'
}
export TESSERA_REGION_DIR=$D/regions
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
field() { sed -n "s/^$1 .*$2=\([0-9]*\).*/\1/p"; }
# record CASE DEVICE DRIVER VERDICT FIGURE=NUMBER...: a record to $TSR_BENCH_JSON, if set
# (a record that fails is said on stderr; the run goes on, as without set -e)
record() {
  [ -n "${TSR_BENCH_JSON:-}" ] || return 0
  python3 "$HERE/../../scripts/bench_record.py" --bench opencl --case "$1" --device "$2" ${3:+--driver "$3"} \
    --target "added p50 <= 0.5 us" --verdict "$4" "${@:5}" || true
}
rows=()
for plat in PoCL NVIDIA; do
  case $plat in
    PoCL) [ -n "$pocl" ] || continue; sel=Portable; id=$(lease_on opencl) || { echo "no lease for PoCL"; continue; } ;;
    NVIDIA) [ "$nvidia" = 1 ] || continue; sel=NVIDIA; id=$(lease_on cuda) || { echo "no lease for NVIDIA"; continue; } ;;
  esac
  driver=$([ $plat = NVIDIA ] && nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0 2>/dev/null || true)
  : >"$D/$plat.raw"
  for r in $(seq 1 "$RUNS"); do
    OCL_PLATFORM=$sel TESSERA_LEASE=$id LD_PRELOAD=$OCL_SHIM "$BENCH" "$ROUNDS" >"$D/run" 2>&1 ||
      { cat "$D/run"; exit 1; }
    grep -q '^baseline_is_hooked=0$' "$D/run" || { echo "FAIL: the baseline went through the shim: $(head -n1 "$D/run")"; exit 1; }
    cat "$D/run" >>"$D/$plat.raw"
  done
  dev=$(sed -n 's/^platform=.* device=\(.*\) rounds=.*/\1/p' "$D/$plat.raw" | head -n1)
  for call in create release; do
    h50=$(field "${call}_hooked" p50 <"$D/$plat.raw" | median)
    l50=$(field "${call}_loader" p50 <"$D/$plat.raw" | median)
    h99=$(field "${call}_hooked" p99 <"$D/$plat.raw" | median)
    l99=$(field "${call}_loader" p99 <"$D/$plat.raw" | median)
    added=$((h50 - l50))
    verdict=$([ "$added" -le 500 ] && echo PASS || echo MISS)
    name=$([ $call = create ] && echo clCreateBuffer || echo clReleaseMemObject)
    record "$plat ($dev), $name 4 KiB" "$dev" "$driver" "$verdict" loader_p50_ns="$l50" shim_p50_ns="$h50" \
      added_p50_ns="$added" loader_p99_ns="$l99" shim_p99_ns="$h99"
    rows+=("| $plat ($dev) | $name 4 KiB | $(awk -v x="$l50" 'BEGIN{printf "%.3f", x/1000}') | $(awk -v x="$h50" 'BEGIN{printf "%.3f", x/1000}') | $(awk -v x="$added" 'BEGIN{printf "%.3f", x/1000}') | $(awk -v x="$l99" 'BEGIN{printf "%.3f", x/1000}') | $(awk -v x="$h99" 'BEGIN{printf "%.3f", x/1000}') | <= 0.5 | $verdict |")
  done
done
{
  echo "libtessera-opencl.so, $(date -u +%Y-%m-%dT%H:%MZ), $RUNS runs of $ROUNDS rounds, medians; us"
  echo
  echo "| platform | call | loader p50 | via the shim p50 | added p50 | loader p99 | via the shim p99 | target (added p50) | |"
  echo "|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} | tee "${OUT:-/dev/null}"
