#!/usr/bin/env bash
# bench/shim/run.sh: what libtessera-cuda.so adds to a CUDA process, beside
# the native driver measured in the same run (the benchmark table of docs/enforcement.md).
#
#   run.sh BIN_DIR               on an NVIDIA GPU (skips, exit 77, without one)
#   run.sh BIN_DIR FAKE_LIBCUDA  against the CI's driver double (ctest
#                                bench.shim_smoke): seconds, numbers meaningless
#
# BIN_DIR holds tesserad and tessera (and any shared library they need that
# the machine lacks: it is put on their LD_LIBRARY_PATH only). SHIM and BENCH
# name libtessera-cuda.so and shim_bench (default: in BIN_DIR). On the GPU
# machine, with tesserad, tessera, libtessera-cuda.so, shim_bench (built
# here: <build>/bench/shim_bench) and libinih.so.1
# copied to .devlibs/ (about 2.5 minutes on the H100 with the defaults, and
# some 15 s more for the launch rows):
#
#   bash bench/shim/run.sh .devlibs
#
# It starts a private tesserad, creates one lease of LEASE_MEM (40GiB: no
# measurement ever reaches it), then RUNS times (default 5) runs every
# experiment below once natively and once with LD_PRELOAD=libtessera-cuda.so
# TESSERA_LEASE=<the lease>, in turns (which side goes first alternates from
# run to run), and reports for each row the median over the runs of each
# side. Every experiment is a fresh set of processes (shim_bench forks and
# execs them; see shim_bench.c):
#
#   cuMemAlloc / cuMemFree 1 MiB, p50 and p99   one process, WARMUP rounds
#       (200) then ROUNDS (5000) rounds of cuMemAlloc 1 MiB + cuMemFree, each
#       call timed alone; target: added p50 <= 0.5 us, p99 <= 2 us
#   the same, paired in one process          one process, each round one
#       cuMemAlloc+cuMemFree through the linked symbols (the shim's hooks when
#       preloaded) and one through the driver's own entries, alternating:
#       hook minus driver at p50 and p99. The driver's times move between
#       processes by more than the shim adds (see "native spread"); call by
#       call in one process they do not, so these rows resolve the targets
#       above. Natively both are the same entry: the "native" column is the
#       floor (~0), "added" is what the shim adds; same targets. What the
#       shim does to the driver's own time (a busier process) shows only in
#       the rows before, which is why both are kept
#   8 processes allocating at once, p99         PROCS (8) processes, each
#       with its context and warm-up, released at one instant (a barrier),
#       then the rounds above; p99 over all their calls; target <= 1.1x native
#   start to first lookup                       one process: from just before
#       its fork to its first cuGetProcAddress (of cuInit, as the CUDA
#       runtime starts) returning. The shim attaches to its lease lazily, on
#       the first hooked call, which is this one: target added <= 1 ms
#   start to first context                      the same process, to
#       cuDevicePrimaryCtxRetain + cuCtxSetCurrent returning; added <= 1 ms
#   start to first allocation                   the same process, to its first
#       cuMemAlloc 1 MiB returning (the first charge): added <= 1 ms
#   8 processes starting together, slowest      PROCS processes forked at one
#       instant, the slowest one's time to its context, and to its first
#       allocation; target <= 1.05x native
#   cuLaunchKernel host call, p50               an empty kernel (PTX loaded with
#       cuModuleLoadData), ITERS (20000) launches, the host call only; the
#       lease has no SM share; target: added <= 0.1 us
#   cuLaunchKernel, 32 threads, own stream      the same kernel as one block
#       of 32 threads on a stream of the process's own, synchronized every
#       64 launches (the launch benchmark); the lease has no SM share;
#       target: added p50 <= 0.1 us
#   the same with an SM share, tokens available  the same launches GAP_US
#       (20) us apart, the tessera side under a second lease with an SM
#       share of SHARE_SM (90%); the native side paced alike. An empty
#       kernel costs a few us of GPU time, so at 90% its launches are
#       admitted again within a few us: 20 us apart the bucket never runs
#       dry, and what is measured is the share's hot path (a cost lookup, a
#       clock read, a CAS), not a wait; target: added p50 <= 0.3 us. How
#       many calls waited: the lease's own count of time its launch calls
#       waited (read from its region by shim_bench) is printed below the
#       table, with the calls over 50 us on each side
#   cuLaunchKernel, paired in one process       the launches of the own-stream
#       row, each round once through the linked cuLaunchKernel (the hook
#       under the shim) and once through the driver's own entry; the
#       difference of the two series' percentiles is the shim's own cost,
#       free of the 0.5-1 us by which a launch's cost moves from process to
#       process (which the rows above cannot see through); without and with
#       the SM share; targets: added p50 <= 0.1 us and <= 0.3 us
#
# Prints a markdown table (row, native, tessera, added, ratio, native spread
# = max - min over the native runs, target, PASS/MISS) and writes it to OUT:
# a file, or OUT/bench-shim.md with the raw lines beside it when OUT is a
# folder (as on the device machine). Exit 0 when every row has a number for
# both sides and the shim governed the tenant (the lease's peak use is above
# zero, and back to zero at the end), whatever the verdicts; 1 otherwise.
# With TSR_BENCH_JSON set, each row is also appended there as a record
# (bench/README.md): its medians in ns (or counts), target and verdict.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${1:?usage: run.sh BIN_DIR [FAKE_LIBCUDA]}
FAKE=${2:-}
SHIM=${SHIM:-$BIN/libtessera-cuda.so}
BENCH=${BENCH:-$BIN/shim_bench}
RUNS=${RUNS:-5} ROUNDS=${ROUNDS:-5000} ITERS=${ITERS:-20000} WARMUP=${WARMUP:-200} PROCS=${PROCS:-8}
LEASE_MEM=${LEASE_MEM:-40GiB} SHARE_SM=${SHARE_SM:-90%} GAP_US=${GAP_US:-20}
for v in RUNS ROUNDS ITERS WARMUP PROCS GAP_US; do
  case ${!v} in '' | *[!0-9]*) echo "run.sh: $v must be a whole number, not '${!v}'" >&2; exit 2 ;; esac
done
[ "$RUNS" -ge 1 ] || { echo "run.sh: RUNS must be at least 1" >&2; exit 2; }
for f in "$BIN/tesserad" "$BIN/tessera" "$SHIM" "$BENCH" ${FAKE:+"$FAKE"}; do
  [ -e "$f" ] || { echo "run.sh: $f not found" >&2; exit 2; }
done
SHIM=$(realpath "$SHIM") BENCH=$(realpath "$BENCH") BIN=$(realpath "$BIN")

D=$(mktemp -d); chmod 755 "$D"
DP=
trap '[ -n "$DP" ] && kill "$DP" 2>/dev/null; rm -rf "$D"' EXIT
if [ -n "$FAKE" ]; then
  FAKE=$(realpath "$FAKE")
  # both sides load the double: the program through the loader, the shim by name
  LD_LIBRARY_PATH="$(dirname "$FAKE")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export TESSERA_REAL_LIBCUDA=$FAKE LD_LIBRARY_PATH
  printf '[daemon]\ndevices = config\nsync = none\n[device.0]\nmemory = 80GiB\n' >"$D/c.conf"
  DEVICE="the CI's driver double ($FAKE): these numbers mean nothing"
  GPU="the CI's driver double" DRIVER=
else
  if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then echo "SKIP: no GPU"; exit 77; fi
  # the backstop off: the native runs are the leases' owner's own processes
  # holding the GPU beside the leases, which it would rightly act on
  printf '[daemon]\ndevices = nvml\nsync = none\nbackstop_period = 0\n' >"$D/c.conf"
  GPU=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader -i 0)
  DEVICE=$(sed 's/, / driver /' <<<"$GPU") DRIVER=${GPU##*, } GPU=${GPU%, *}
fi
# the daemon and the CLI may need libraries from BIN_DIR; the measured
# programs run in the environment this script was given, both sides alike
TOOLS_ENV="LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
env "$TOOLS_ENV" "$BIN/tesserad" --config "$D/c.conf" --state-dir "$D/state" --socket "$D/s.sock" 2>"$D/daemon.log" &
DP=$!
for _ in $(seq 1 200); do [ -S "$D/s.sock" ] && break; sleep 0.05; done
T() { env "$TOOLS_ENV" "$BIN/tessera" --socket "$D/s.sock" "$@"; }
# record CASE TARGET VERDICT FIGURE=NUMBER...: a record to $TSR_BENCH_JSON, if set
record() {
  [ -n "${TSR_BENCH_JSON:-}" ] || return 0
  python3 "$HERE/../../scripts/bench_record.py" --bench shim --device "$GPU" ${DRIVER:+--driver "$DRIVER"} \
    --case "$1" ${2:+--target "$2"} ${3:+--verdict "$3"} "${@:4}"
}
ID=$(T lease create --device 0 --mem "$LEASE_MEM" --for 30m --json | grep -Eo '"id": [0-9]+' | grep -Eo '[0-9]+')
[ -n "$ID" ] || { echo "run.sh: could not create a lease of $LEASE_MEM:" >&2; tail -3 "$D/daemon.log" >&2; exit 1; }
# the rows with an SM share run under a lease of their own (*share experiments)
ID_SHARE=$(T lease create --device 0 --mem 2GiB --for 30m --sm "$SHARE_SM" --json | grep -Eo '"id": [0-9]+' | grep -Eo '[0-9]+')
[ -n "$ID_SHARE" ] || { echo "run.sh: could not create a lease with an SM share of $SHARE_SM:" >&2; tail -3 "$D/daemon.log" >&2; exit 1; }

# experiments: name, then shim_bench's arguments
EXPS="alloc1:alloc --rounds $ROUNDS --warmup $WARMUP
paired:paired --rounds $ROUNDS --warmup $WARMUP
allocN:alloc --procs $PROCS --rounds $ROUNDS --warmup $WARMUP
start1:start
startN:start --procs $PROCS
launch:launch --iters $ITERS --warmup $WARMUP
launchs:launch --iters $ITERS --warmup $WARMUP --block 32 --stream own --sync-every 64
launchshare:launch --iters $ITERS --warmup $WARMUP --block 32 --stream own --sync-every 64 --gap-us $GAP_US
launchp:launch --iters $ITERS --warmup $WARMUP --block 32 --stream own --sync-every 64 --paired
launchpshare:launch --iters $ITERS --warmup $WARMUP --block 32 --stream own --sync-every 64 --paired"

# measure SIDE EXP ARGS...: one run of shim_bench; its key=value pairs with
# a time (_ns) or a count (_n) go to $D/samples as "EXP.KEY SIDE VALUE"
measure() {
  local side=$1 exp=$2 out id=$ID
  shift 2
  case $exp in *share) id=$ID_SHARE ;; esac
  if [ "$side" = native ]; then
    out=$("$BENCH" "$@" </dev/null 2>"$D/err")
  else
    out=$(LD_PRELOAD=$SHIM TESSERA_LEASE=$id TESSERA_REGION_DIR="$D/state/regions" "$BENCH" "$@" </dev/null 2>"$D/err")
  fi
  local rc=$?
  if [ $rc -ne 0 ] || [ -z "$out" ] || grep -q '^tessera:' "$D/err"; then
    # a shim that says anything (a lease not enforced) measured the wrong thing
    echo "run.sh: $side $exp (shim_bench $*) failed, status $rc:" >&2
    cat "$D/err" >&2
    exit 1
  fi
  case "$side $exp $out" in
    "native paired "*interposed=1* | "tessera paired "*interposed=0*)
      echo "run.sh: $side paired: the linked cuMemAlloc is$([ "$side" = native ] && echo " not" || echo " not hooked, it is") the driver's own: the pairing measures nothing" >&2
      exit 1 ;;
  esac
  echo "$side $exp $out" >>"$D/raw"
  for kv in $out; do
    case $kv in *_ns=* | *_n=*) echo "$exp.${kv%%=*} $side ${kv#*=}" >>"$D/samples" ;; esac
  done
}

: >"$D/raw"; : >"$D/samples"
for run in $(seq 1 "$RUNS"); do
  if [ $((run % 2)) -eq 1 ]; then sides="native tessera"; else sides="tessera native"; fi
  while IFS=: read -r exp args; do
    # shellcheck disable=SC2086 # args are words
    for side in $sides; do measure "$side" "$exp" $args; done
  done <<<"$EXPS"
done

used=$(T lease show "$ID" --json | grep -Eo '"used_bytes": [0-9]+' | grep -Eo '[0-9]+')
peak=$(T lease show "$ID" --json | grep -Eo '"peak_bytes": [0-9]+' | grep -Eo '[0-9]+')
fails=0
[ "${peak:-0}" -gt 0 ] || { echo "run.sh: the lease's peak use is ${peak:-?}: the shim charged nothing, so 'tessera' was not governed" >&2; fails=$((fails+1)); }
[ "${used:-1}" -eq 0 ] || { echo "run.sh: ${used:-?} bytes still charged after every program ended" >&2; fails=$((fails+1)); }

# rows: label | EXP.KEY | unit (us, ms or n: a count) | add LIMIT (ns, or calls) or ratio LIMIT | target as written
ROWS="cuMemAlloc 1 MiB, p50|alloc1.alloc_p50_ns|us|add 500|added <= 0.5 us
cuMemAlloc 1 MiB, p99|alloc1.alloc_p99_ns|us|add 2000|added <= 2 us
cuMemFree 1 MiB, p50|alloc1.free_p50_ns|us|add 500|added <= 0.5 us
cuMemFree 1 MiB, p99|alloc1.free_p99_ns|us|add 2000|added <= 2 us
cuMemAlloc 1 MiB, p50, paired in one process|paired.alloc_added_p50_ns|us|add 500|added <= 0.5 us
cuMemAlloc 1 MiB, p99, paired in one process|paired.alloc_added_p99_ns|us|add 2000|added <= 2 us
cuMemFree 1 MiB, p50, paired in one process|paired.free_added_p50_ns|us|add 500|added <= 0.5 us
cuMemFree 1 MiB, p99, paired in one process|paired.free_added_p99_ns|us|add 2000|added <= 2 us
$PROCS processes allocating at once, cuMemAlloc p99|allocN.alloc_p99_ns|us|ratio 1.1|<= 1.1x native
$PROCS processes allocating at once, cuMemFree p99|allocN.free_p99_ns|us|ratio 1.1|<= 1.1x native
process start to first lookup (shim attach)|start1.ready_max_ns|ms|add 1000000|added <= 1 ms
process start to first context|start1.ctx_max_ns|ms|add 1000000|added <= 1 ms
process start to first cuMemAlloc|start1.first_alloc_max_ns|ms|add 1000000|added <= 1 ms
$PROCS processes starting together, slowest to context|startN.ctx_max_ns|ms|ratio 1.05|<= 1.05x native
$PROCS processes starting together, slowest to first cuMemAlloc|startN.first_alloc_max_ns|ms|ratio 1.05|<= 1.05x native
cuLaunchKernel host call, p50 (no SM share)|launch.launch_p50_ns|us|add 100|added <= 0.1 us
cuLaunchKernel host call, p99 (no SM share)|launch.launch_p99_ns|us|none|(not in the issue)
cuLaunchKernel, 32 threads, own stream, p50 (no SM share)|launchs.launch_p50_ns|us|add 100|added <= 0.1 us
cuLaunchKernel, 32 threads, own stream, p99 (no SM share)|launchs.launch_p99_ns|us|none|(not in the issue)
cuLaunchKernel, 32 threads, own stream, $GAP_US us apart, p50 (SM share $SHARE_SM, tokens available)|launchshare.launch_p50_ns|us|add 300|added <= 0.3 us
cuLaunchKernel, 32 threads, own stream, $GAP_US us apart, p99 (SM share $SHARE_SM)|launchshare.launch_p99_ns|us|none|(not in the issue)
cuLaunchKernel, $GAP_US us apart, calls over 50 us (SM share $SHARE_SM)|launchshare.launch_slow_n|n|none|(calls that waited are among them)
cuLaunchKernel, p50, paired in one process (no SM share)|launchp.launch_added_p50_ns|us|add 100|added <= 0.1 us
cuLaunchKernel, p99, paired in one process (no SM share)|launchp.launch_added_p99_ns|us|none|(not in the issue)
cuLaunchKernel, p50, paired in one process (SM share $SHARE_SM, tokens available)|launchpshare.launch_added_p50_ns|us|add 300|added <= 0.3 us
cuLaunchKernel, p99, paired in one process (SM share $SHARE_SM)|launchpshare.launch_added_p99_ns|us|none|(not in the issue)"

# the share lease's own counters, growth over each tessera run of launchshare
read -r share_runs share_launches share_waited share_waited_max < <(awk '
  $2 == "tessera" && $1 == "launchshare.lease_launches_n" { n++; l += $3 }
  $2 == "tessera" && $1 == "launchshare.lease_throttled_ns" { w += $3; if ($3 > m) m = $3 }
  END { printf "%d %d %.0f %.0f\n", n, n ? l / n : 0, w, m }' "$D/samples")
share_note="SM share lease $ID_SHARE ($SHARE_SM): $share_launches launches charged a run (mean of $share_runs runs);"
share_note="$share_note launch calls waited for its bucket $(awk -v w="$share_waited" 'BEGIN { printf "%.1f", w / 1e3 }') us in all"
share_note="$share_note ($(awk -v w="$share_waited_max" 'BEGIN { printf "%.1f", w / 1e3 }') us at most in one run of $ITERS + $WARMUP calls)."
[ "$share_waited" = 0 ] && share_note="$share_note No call waited." ||
  share_note="$share_note Some calls waited: the bucket ran dry (raise GAP_US), and the p50 row measured waits too."
if [ "$share_runs" -ne "$RUNS" ] || [ "$share_launches" -lt "$ITERS" ]; then
  echo "run.sh: the share lease was charged $share_launches launches a run (over $share_runs runs), fewer than the $ITERS measured: its rows measured no share" >&2
  fails=$((fails+1))
fi

# median over the runs of each side: "EXP.KEY native MEDIAN SPREAD" lines
sort -k1,1 -k2,2 -k3,3n "$D/samples" | awk '
  function flush() { if (n) { m = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
                              print key, side, m, v[n] - v[1] } n = 0 }
  $1 != key || $2 != side { flush(); key = $1; side = $2 }
  { v[++n] = $3 }
  END { flush() }' >"$D/medians"

{
  echo "## libtessera-cuda.so beside the native driver"
  echo
  echo "$DEVICE; $(date -u +%Y-%m-%dT%H:%MZ); $RUNS runs per side, interleaved, medians;"
  echo "alloc: $ROUNDS rounds after $WARMUP warm-up, $PROCS processes for the concurrent rows; launch: $ITERS calls."
  echo "SM share rows: lease $ID_SHARE with a share of $SHARE_SM, launches $GAP_US us apart on both sides."
  echo "lease $ID of $LEASE_MEM: peak use $peak bytes, $used bytes at the end."
  echo
  echo "| row | native | tessera | added | ratio | native spread | target | verdict |"
  echo "|---|---|---|---|---|---|---|---|"
  while IFS='|' read -r label key unit rule target; do
    # the row; its record's verdict and figures (raw ns or counts) to $D/rec
    awk -v label="$label" -v key="$key" -v unit="$unit" -v rule="$rule" -v target="$target" -v rec="$D/rec" '
      function num(x) { return x == int(x) ? sprintf("%.0f", x) : sprintf("%.3f", x) }
      $1 == key { med[$2] = $3; spread[$2] = $4 }
      END {
        div = unit == "ms" ? 1e6 : unit == "n" ? 1 : 1e3
        fmt = unit == "ms" ? "%.2f ms" : unit == "n" ? "%.0f" : "%.3f us"
        afmt = unit == "n" ? "%+.0f" : "%+.3f " unit
        u = unit == "n" ? "_n" : "_ns"
        if (!("native" in med) || !("tessera" in med)) {
          printf "| %s | %s | %s | | | | %s | NO NUMBER |\n", label,
            ("native" in med) ? sprintf(fmt, med["native"] / div) : "-",
            ("tessera" in med) ? sprintf(fmt, med["tessera"] / div) : "-", target
          printf "NO NUMBER\t%s %s\n", ("native" in med) ? "native" u "=" num(med["native"]) : "",
            ("tessera" in med) ? "tessera" u "=" num(med["tessera"]) : "" >rec
          exit
        }
        n = med["native"]; t = med["tessera"]
        # a paired row is an added time already: no ratio
        ratio = key ~ /_added_/ || n <= 0 ? "-" : sprintf("%.3fx", t / n)
        split(rule, r, " ")
        verdict = r[1] == "add" ? (t - n <= r[2] ? "PASS" : "MISS") : r[1] == "ratio" ? (n > 0 && t / n <= r[2] ? "PASS" : "MISS") : "-"
        printf "| %s | " fmt " | " fmt " | " afmt " | %s | " fmt " | %s | %s |\n", label, n / div, t / div,
          (t - n) / div, ratio, spread["native"] / div, target, verdict
        printf "%s\tnative%s=%s tessera%s=%s added%s=%s native_spread%s=%s%s\n", verdict, u, num(n), u, num(t), u,
          num(t - n), u, num(spread["native"]), ratio == "-" ? "" : sprintf(" ratio=%.6f", t / n) >rec
      }' "$D/medians"
    IFS=$'\t' read -r verdict figures <"$D/rec"
    [ "$rule" != none ] || { target=; verdict=; }
    # shellcheck disable=SC2086 # figures are words
    record "$label" "$target" "$verdict" $figures
  done <<<"$ROWS"
  echo
  echo "$share_note"
} >"$D/table.md"
cat "$D/table.md"
[ -z "$FAKE" ] || echo "(the driver double: the verdicts above are not results)"

missing=$(grep -c 'NO NUMBER' "$D/table.md")
[ "$missing" -eq 0 ] || { echo "run.sh: $missing rows without a number on both sides" >&2; fails=$((fails+1)); }
if [ -n "${OUT:-}" ]; then
  if [ -d "$OUT" ]; then
    cp "$D/table.md" "$OUT/bench-shim.md"; cp "$D/raw" "$OUT/bench-shim.raw"; cp "$D/daemon.log" "$OUT/bench-shim.daemon.log"
  else
    cp "$D/table.md" "$OUT"
  fi
fi
kill "$DP"; wait "$DP" 2>/dev/null; DP=
[ "$fails" -eq 0 ]
