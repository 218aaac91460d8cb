#!/usr/bin/env bash
# Compute shares on a real GPU: a compute-bound kernel loop
# (throttle_loop, loop.cu) and a PyTorch matmul loop (torch_matmul.py) run
# under leases with an SM share, each measured as throughput against the
# same loop without the shim, in the same script.
#
#   throttle.sh BIN_DIR     on an NVIDIA GPU (skips, exit 77, without one)
#
# BIN_DIR holds tesserad and tessera (and any shared library they need that
# the machine lacks: it is put on their LD_LIBRARY_PATH only). SHIM and LOOP
# name libtessera-cuda.so and throttle_loop (default: in BIN_DIR). SECS
# (10) is each case's length, SECS_CV (30) that of the 30% small plain case
# and of the 30/70 pair; SHARES ("10 30 50 70 90") the shares of the single
# cases, GRAPH_SHARES (the same) those of the graph case, COOP_SHARES ("50")
# those of the cooperative case (GRAPH_SHARES= or COOP_SHARES= leaves the
# case out). OUT_MD, if set, gets the table in markdown and
# ${OUT_MD%.md}.raw every program's output. TORCH=0 leaves PyTorch out;
# PAIR_B (70) is the second lease of the pairs; TORCH_SHARES ("30 50 70")
# those of PyTorch fp32 alone. Past HARD_S (500) seconds no
# case starts, so that the whole stays inside ctest's 600.
#
# The grids: small = one block of 256 threads per SM (one wave), large = 64
# times as many blocks; each calibrated once to kernels of about 1 ms. The
# graph case captures 8 launches of the small grid at 1/8 of its work, so a
# graph, which is one launch call, is about 1 ms of GPU time like one plain
# kernel. With one graph in flight, a share P holds each graph's launch
# call back by about its cost x (1/P - 1) however the share is kept: an 8 ms
# graph at 30% would wait 18.7 ms a call, too near the 20 ms limit below
# for that limit to say anything about the shim.
#
# PyTorch: fp32 4096 x 4096 (PyTorch's default dtype) is checked by its
# throughput; bf16 8192 x 8192, which holds the GPU at its power cap when
# run alone, by the time its process held the GPU (NVML's utilisation of the
# GPU, where it runs alone), its throughput shown beside it: at 50% of the
# time the clocks rise and the kernels run faster (docs/enforcement.md).
# The pair runs under the daemon's switching reserve (share_switch_cost 6%):
# the shares in force while both run are printed, 28.2% and 65.8%.
#
# Every row: case, target share, measured (rate / native rate, %), cv (the
# per-second rate's coefficient of variation, first second dropped), and the
# longest single launch call. Checks: |measured - target| <= 5 points, cv <=
# 5%, and at 30% no launch call longer than 20 ms. Prints FAIL: lines and
# exits 1 if any check fails; 0 otherwise. About 5.5 minutes on an H100
# with the defaults (the elapsed time is printed at the end).
set -u
BIN=${1:?usage: throttle.sh BIN_DIR}
SHIM=${SHIM:-$BIN/libtessera-cuda.so}
LOOP=${LOOP:-$BIN/throttle_loop}
SECS=${SECS:-10} SECS_CV=${SECS_CV:-30}
SHARES=${SHARES:-10 30 50 70 90}
GRAPH_SHARES=${GRAPH_SHARES-$SHARES}
COOP_SHARES=${COOP_SHARES-50}
TOL=5 CV_MAX=5 BLOCK_MAX_MS=20 BUDGET_S=420
# past this many seconds no case starts (one that hangs is killed 30 s
# after its length): the whole run stays inside ctest's 600 s
HARD_S=${HARD_S:-500}
HERE=$(cd "$(dirname "$0")" && pwd)
for v in SECS SECS_CV HARD_S; do
  case ${!v} in '' | *[!0-9]*) echo "throttle.sh: $v must be a whole number, not '${!v}'" >&2; exit 2 ;; esac
done
[ "$SECS" -ge 3 ] && [ "$SECS_CV" -ge 3 ] || { echo "throttle.sh: SECS and SECS_CV must be at least 3 (the first second is dropped)" >&2; exit 2; }
for p in $SHARES $GRAPH_SHARES $COOP_SHARES; do
  case $p in '' | *[!0-9]*) echo "throttle.sh: a share is a whole percentage, not '$p'" >&2; exit 2 ;; esac
  [ "$p" -ge 1 ] && [ "$p" -le 100 ] || { echo "throttle.sh: a share is 1 to 100, not $p" >&2; exit 2; }
done
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "SKIP: no GPU"; exit 77; }
for f in "$BIN/tesserad" "$BIN/tessera" "$SHIM" "$LOOP"; do
  [ -e "$f" ] || { echo "throttle.sh: $f not found" >&2; exit 2; }
done
SHIM=$(realpath "$SHIM") LOOP=$(realpath "$LOOP") BIN=$(realpath "$BIN")
# device 0 is the daemon's (NVML) and the programs' (CUDA) both
unset CUDA_VISIBLE_DEVICES LD_PRELOAD TESSERA_LEASE
T_START=$(date +%s)

D=$(mktemp -d); chmod 755 "$D"
DP='' BGP=''
trap 'for p in $BGP $DP; do kill "$p" 2>/dev/null; done; rm -rf "$D"' EXIT
# the backstop off: the native runs hold the GPU beside the leases
printf '[daemon]\ndevices = nvml\nsync = none\nbackstop_period = 0\n' >"$D/c.conf"
TOOLS_ENV="LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
env "$TOOLS_ENV" "$BIN/tesserad" --config "$D/c.conf" --state-dir "$D/state" --socket "$D/s.sock" 2>"$D/daemon.log" &
DP=$!
for _ in $(seq 1 200); do [ -S "$D/s.sock" ] && break; sleep 0.05; done
[ -S "$D/s.sock" ] || { echo "throttle.sh: tesserad did not start:" >&2; tail -3 "$D/daemon.log" >&2; exit 1; }
T() { env "$TOOLS_ENV" "$BIN/tessera" --socket "$D/s.sock" "$@"; }
DEVICE=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader -i 0 | sed 's/, / driver /')
echo "device: $DEVICE"

fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
: >"$D/rows" # name|target|measured|cv|max_block_ms|verdict|rate|native
: >"$D/raw"

# lease SM_PERCENT MEM: a new lease's id on stdout (empty on failure)
lease() {
  local out
  out=$(T lease create --device 0 --mem "$2" --for 10m --sm "$1%" --json 2>&1)
  grep -Eo '"id": [0-9]+' <<<"$out" | grep -Eo '[0-9]+' ||
    { echo "throttle.sh: lease of $1% refused: $out" >&2; return 1; }
}
release() { T lease show "$1" --json >>"$D/raw" 2>&1; T lease release "$1" >/dev/null 2>&1 || echo "throttle.sh: could not release lease $1" >&2; }

# start NAME SECONDS LEASE CMD...: runs CMD (natively when LEASE is "-")
# in the background, its output in $D/NAME.out; its pid in $!
start() {
  local name=$1 secs=$2 id=$3
  shift 3
  if [ "$id" = - ]; then
    timeout $((secs + 30)) "$@" >"$D/$name.out" 2>"$D/$name.err" &
  else
    # through env: the shim goes into the measured program only, not timeout
    timeout $((secs + 30)) env LD_PRELOAD="$SHIM" TESSERA_LEASE="$id" TESSERA_REGION_DIR="$D/state/regions" \
      "$@" >"$D/$name.out" 2>"$D/$name.err" &
  fi
}

# finish NAME PID: waits; the result line's values in R_RATE R_CV R_MAXUS;
# false (after a FAIL line) if the program failed or said nothing
finish() {
  local name=$1 rc line
  wait "$2"; rc=$?
  { echo "== $name (status $rc)"; cat "$D/$name.out" "$D/$name.err"; } >>"$D/raw"
  line=$(grep '^rate=' "$D/$name.out" | tail -1)
  if [ $rc -ne 0 ] || [ -z "$line" ]; then
    fail "$name: the program failed (status $rc): $(tail -1 "$D/$name.err")"
    return 1
  fi
  # a shim that says anything (a lease not enforced) measured the wrong thing
  if grep -q '^tessera:' "$D/$name.err"; then
    fail "$name: the shim said: $(grep '^tessera:' "$D/$name.err" | head -1)"
    return 1
  fi
  R_RATE=$(sed -n 's/.*\brate=\([0-9.]*\).*/\1/p' <<<"$line")
  R_CV=$(sed -n 's/.*\bcv=\([0-9.]*\).*/\1/p' <<<"$line")
  R_MAXUS=$(sed -n 's/.*\bmax_launch_us=\([0-9.]*\).*/\1/p' <<<"$line")
  local late
  late=$(sed -n 's/.*\blate_ms=\([0-9]*\).*/\1/p' <<<"$line")
  [ "${late:-0}" -le 100 ] || echo "note: $name started ${late} ms after the common start"
  [ -n "$R_RATE" ] && [ -n "$R_CV" ] && [ -n "$R_MAXUS" ] || { fail "$name: unreadable result: $line"; return 1; }
}

# in_time NAME: false (after a FAIL line) once HARD_S have passed
in_time() {
  [ $(($(date +%s) - T_START)) -le "$HARD_S" ] && return 0
  fail "$1: not run, ${HARD_S} s have passed (the cases before took too long)"
  return 1
}

# measure NAME SECONDS LEASE CMD...: one program, to the end
measure() {
  local name=$1
  in_time "$name" || return 1
  start "$@"
  finish "$name" $!
}

# row NAME TARGET NATIVE_RATE: checks and prints the result just read.
# ROW_BY=time measures the share as the fraction of the time the program's
# kernels held the GPU (R_GPU, from NVML's utilisation of the GPU the
# program runs on alone) instead of its rate against NATIVE_RATE; ROW_BY=info prints
# the row without a check (a documented limit).
row() {
  local name=$1 target=$2 native=$3 verdict
  verdict=$(awk -v r="$R_RATE" -v n="$native" -v t="$target" -v cv="$R_CV" -v us="$R_MAXUS" \
    -v tol=$TOL -v cvmax=$CV_MAX -v bmax=$BLOCK_MAX_MS -v by="${ROW_BY:-rate}" -v g="${R_GPU:-0}" 'BEGIN {
      m = n > 0 ? 100 * r / n : 0; c = 100 * cv; b = us / 1000; v = ""
      if (by == "time") m = 100 * g
      if (t == "native") { printf "%.1f|%.2f|%.2f|reference", m, c, b; exit }
      if (by == "info") { printf "%.1f|%.2f|%.2f|limit, not checked (docs/enforcement.md)", m, c, b; exit }
      if (m - t > tol || t - m > tol) v = v sprintf("; measured %.1f%%, target %d%% +- %d", m, t, tol)
      if (c > cvmax) v = v sprintf("; cv %.2f%% > %d%%", c, cvmax)
      if (t == 30 && b > bmax) v = v sprintf("; a launch call blocked %.1f ms > %d ms", b, bmax)
      printf "%.1f|%.2f|%.2f|%s", m, c, b, v == "" ? "ok" : substr(v, 3) }')
  IFS='|' read -r m c b v <<<"$verdict"
  printf 'case=%s target=%s measured=%s cv=%s max_block_ms=%s rate=%s native=%s %s\n' \
    "$name" "$target" "$m" "$c" "$b" "$R_RATE" "$native" "$(case $v in ok | reference) echo "$v" ;; limit*) echo limit ;; *) echo FAIL ;; esac)"
  case $v in ok | reference | limit*) ;; *) fail "$name at $target%: $v" ;; esac
  echo "$name|$target|$m|$c|$b|$v|$R_RATE|$native" >>"$D/rows"
}

# share NAME PERCENT SECONDS MEM NATIVE_RATE CMD...: one program under its
# own lease of PERCENT, then its row
share() {
  local name=$1 p=$2 secs=$3 mem=$4 native=$5 id
  shift 5
  id=$(lease "$p" "$mem") || { fail "$name at $p%: no lease"; return; }
  if measure "$name.$p" "$secs" "$id" "$@"; then row "$name" "$p" "$native"; fi
  release "$id"
}

# ---- calibration and the native rates ---------------------------------------
info=$("$LOOP" --info 2>&1) || { echo "throttle.sh: $LOOP --info: $info" >&2; exit 1; }
echo "loop: $info"
SMS=$(sed -n 's/.*sms=\([0-9]*\).*/\1/p' <<<"$info") COOP=$(sed -n 's/.*coop=\([0-9]*\).*/\1/p' <<<"$info")
SMALL=$SMS LARGE=$((SMS * 64))
calibrate() { # calibrate BLOCKS: the work that makes a kernel ~1 ms
  local out
  out=$("$LOOP" --blocks "$1" --threads 256 --calibrate-ms 1 2>&1) || { echo "throttle.sh: calibration of $1 blocks: $out" >&2; exit 1; }
  echo "calibrated: $out" >&2
  sed -n 's/.*work=\([0-9]*\).*/\1/p' <<<"$out"
}
W_SMALL=$(calibrate "$SMALL") W_LARGE=$(calibrate "$LARGE")
[ -n "$W_SMALL" ] && [ -n "$W_LARGE" ] || { echo "throttle.sh: calibration failed"; exit 1; }
W_GRAPH=$(( W_SMALL / 8 > 0 ? W_SMALL / 8 : 1 ))
SMALL_ARGS="--blocks $SMALL --threads 256 --work $W_SMALL"
LARGE_ARGS="--blocks $LARGE --threads 256 --work $W_LARGE"
GRAPH_ARGS="--blocks $SMALL --threads 256 --work $W_GRAPH --mode graph"
COOP_ARGS="--blocks $SMALL --threads 256 --work $W_SMALL --mode coop"
echo "small grid: $SMALL blocks x 256, work $W_SMALL; large grid: $LARGE blocks x 256, work $W_LARGE; graph: 8 x work $W_GRAPH"

echo "== native"
# shellcheck disable=SC2086 # the ARGS are words
measure native.small_plain "$SECS" - "$LOOP" $SMALL_ARGS --seconds "$SECS" && { N_SMALL=$R_RATE; row small_plain native "$R_RATE"; }
# shellcheck disable=SC2086
measure native.large_plain "$SECS" - "$LOOP" $LARGE_ARGS --seconds "$SECS" && { N_LARGE=$R_RATE; row large_plain native "$R_RATE"; }
# shellcheck disable=SC2086
measure native.small_graph "$SECS" - "$LOOP" $GRAPH_ARGS --seconds "$SECS" && { N_GRAPH=$R_RATE; row small_graph native "$R_RATE"; }
if [ "${COOP:-0}" = 1 ] && [ -n "$COOP_SHARES" ]; then
  # shellcheck disable=SC2086
  measure native.small_coop "$SECS" - "$LOOP" $COOP_ARGS --seconds "$SECS" && { N_COOP=$R_RATE; row small_coop native "$R_RATE"; }
elif [ -n "$COOP_SHARES" ]; then
  echo "note: device 0 cannot launch cooperative kernels: the coop case is left out"
fi
[ -n "${N_SMALL:-}" ] && [ -n "${N_LARGE:-}" ] && [ -n "${N_GRAPH:-}" ] ||
  { echo "throttle.sh: no native rate to compare with" >&2; echo "throttle.sh: $fails failed"; exit 1; }

# ---- one lease at a time -------------------------------------------------------
for p in $SHARES; do
  echo "== $p%"
  secs=$SECS; [ "$p" = 30 ] && secs=$SECS_CV
  # shellcheck disable=SC2086
  share small_plain "$p" "$secs" 2GiB "$N_SMALL" "$LOOP" $SMALL_ARGS --seconds "$secs"
  # shellcheck disable=SC2086
  share large_plain "$p" "$SECS" 2GiB "$N_LARGE" "$LOOP" $LARGE_ARGS --seconds "$SECS"
  if [[ " $GRAPH_SHARES " == *" $p "* ]]; then
    # shellcheck disable=SC2086
    share small_graph "$p" "$SECS" 2GiB "$N_GRAPH" "$LOOP" $GRAPH_ARGS --seconds "$SECS"
  fi
done
for p in $GRAPH_SHARES; do
  [[ " $SHARES " == *" $p "* ]] && continue
  # shellcheck disable=SC2086
  share small_graph "$p" "$SECS" 2GiB "$N_GRAPH" "$LOOP" $GRAPH_ARGS --seconds "$SECS"
done
if [ -n "${N_COOP:-}" ]; then
  for p in $COOP_SHARES; do
    echo "== cooperative, $p%"
    # shellcheck disable=SC2086
    share small_coop "$p" "$SECS" 2GiB "$N_COOP" "$LOOP" $COOP_ARGS --seconds "$SECS"
  done
fi

# ---- a share resized while its program runs ---------------------------------------
# 30% for the first half, `tessera lease resize --sm 70%` at the half, 70%
# after: seconds 2..H-1 and H+2..T of the loop's own per-second counts
# (the second around the resize and the one after it left out) are checked
# against the same 5 points.
echo "== resized 30% -> 70% while running"
if [ -n "${N_SMALL:-}" ] && in_time resized; then
  rs=$(( SECS < 8 ? 8 : SECS )); half=$(( rs / 2 ))
  idr=$(lease 30 2GiB) || fail "resized: no lease of 30%"
  if [ -n "$idr" ]; then
    # shellcheck disable=SC2086
    start resized "$rs" "$idr" "$LOOP" $SMALL_ARGS --seconds "$rs"
    rp=$!
    for _ in $(seq 1 $(( (half + 10) * 20 ))); do grep -q "^sec=$half " "$D/resized.out" 2>/dev/null && break; sleep 0.05; done
    T lease resize "$idr" --sm 70% >/dev/null 2>"$D/resize.err" || fail "resized: lease resize refused: $(cat "$D/resize.err")"
    if finish resized "$rp"; then
      for part in "30 2 $((half - 1))" "70 $((half + 2)) $rs"; do
        read -r want from to <<<"$part"
        m=$(awk -v f="$from" -v t="$to" -v n="$N_SMALL" '/^sec=/ { split($1, a, "="); split($2, b, "=");
              if (a[2] + 0 >= f && a[2] + 0 <= t) { s += b[2]; c++ } }
            END { if (c && n > 0) printf "%.1f", 100 * s / c / n; else print "none" }' "$D/resized.out")
        echo "case=resized_$want target=$want measured=$m seconds=$from..$to"
        awk -v m="$m" -v t="$want" -v tol=$TOL 'BEGIN { exit !(m != "none" && m - t <= tol && t - m <= tol) }' ||
          fail "resized: seconds $from..$to measured $m%, target $want% +- $TOL"
        echo "resized_$want|$want|$m|-|-|$( [ "$m" != none ] && awk -v m="$m" -v t="$want" -v tol=$TOL 'BEGIN { exit !(m - t <= tol && t - m <= tol) }' && echo ok || echo FAIL)|-|$N_SMALL" >>"$D/rows"
      done
    fi
    release "$idr"
  fi
fi

# ---- a kernel named like NCCL's under a 10% share: let through ------------------------
echo "== NCCL-named kernel at 10%"
if [ -n "${N_SMALL:-}" ] && in_time nccl; then
  idn=$(lease 10 2GiB) || fail "nccl: no lease of 10%"
  # shellcheck disable=SC2086
  if [ -n "$idn" ] && measure nccl_named.10 "$SECS" "$idn" "$LOOP" $SMALL_ARGS --kernel nccl --seconds "$SECS"; then
    row nccl_named_at_10 100 "$N_SMALL" # its rate is the native one: not throttled
    bypassed=$(T lease show "$idn" --json | grep -Eo '"bypassed": [0-9]+' | grep -Eo '[0-9]+')
    [ "${bypassed:-0}" -gt 0 ] || fail "nccl: the lease counted no bypassed launch"
    echo "nccl: the lease let ${bypassed:-0} launches through uncharged"
  fi
  [ -n "$idn" ] && release "$idn"
fi

# ---- two leases at once: 30% and 70% ------------------------------------------------
# pair NAME NATIVE_RATE CMD...: CMD under a 30% and a PAIR_B% lease at once,
# both beginning at one instant after their set-up (CMD takes --seconds and
# --start-at), rows NAME_30 and NAME_PAIR_B
PAIR_B=${PAIR_B:-70} # the second lease of the pair (PAIR_B=60: a pair that leaves the GPU room to switch)
pair() {
  local name=$1 native=$2 mem=$3 id30 id70 at p30 p70 wait_s id
  shift 3
  id30=$(lease 30 "$mem") id70=$(lease "$PAIR_B" "$mem")
  if [ -n "$id30" ] && [ -n "$id70" ] && in_time "$name"; then
    at=$(($(date +%s) + ${PAIR_SETUP_S:-5}))
    start "$name.30" "$SECS_CV" "$id30" "$@" --seconds "$SECS_CV" --start-at "$at"
    p30=$!
    start "$name.$PAIR_B" "$SECS_CV" "$id70" "$@" --seconds "$SECS_CV" --start-at "$at"
    p70=$!
    BGP="$p30 $p70"
    # the shares in force once both run (the daemon's switching reserve)
    wait_s=$((at + 3 - $(date +%s)))
    [ "$wait_s" -gt 0 ] && sleep "$wait_s"
    for id in $id30 $id70; do
      echo "$name: lease $id, share in force $(T lease show "$id" --json | grep -Eo '"sm_now_ppm": [0-9]+' | grep -Eo '[0-9]+$') ppm"
    done
    finish "$name.30" $p30 && row "${name}_30" 30 "$native"
    finish "$name.$PAIR_B" $p70 && row "${name}_$PAIR_B" "$PAIR_B" "$native"
    BGP=
  elif [ -z "$id30" ] || [ -z "$id70" ]; then
    fail "$name: no leases of 30% and $PAIR_B% (ids '$id30' and '$id70')"
  fi
  [ -n "$id30" ] && release "$id30"
  [ -n "$id70" ] && release "$id70"
}
echo "== 30% and $PAIR_B% together"
# shellcheck disable=SC2086
pair pair "$N_SMALL" 2GiB "$LOOP" $SMALL_ARGS

# ---- PyTorch (cuBLAS): bf16 at 50%, fp32 at TORCH_SHARES and as a pair --------------------------------------------------------------
echo "== PyTorch"
if [ "${TORCH:-1}" = 0 ]; then
  echo "torch: left out (TORCH=0)"
elif why=$(python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "torch sees no CUDA device")' 2>&1); then
  if measure native.torch "$SECS" - python3 "$HERE/torch_matmul.py" --seconds "$SECS"; then
    N_TORCH=$R_RATE
    echo "torch: $(grep '^matmul_ms=' "$D/native.torch.out")"
    row torch_bf16 native "$R_RATE"
    # bf16 at 8192 holds the GPU at its power cap natively; at 50% of the time
    # the clocks rise, and throughput with them: the time is checked, the
    # throughput shown (docs/enforcement.md, "What a share means")
    id=$(lease 50 8GiB) || fail "torch_bf16 at 50%: no lease"
    if [ -n "$id" ] && in_time torch_bf16; then
      # at least 8 s: three samples kept after the set-up and the first
      bf16_s=$((SECS < 8 ? 8 : SECS))
      start torch_bf16.50 "$bf16_s" "$id" python3 "$HERE/torch_matmul.py" --seconds "$bf16_s"
      P=$!
      BGP=$P
      # NVML's utilisation of the leased GPU (the fraction of the time a
      # kernel ran on it; the process is alone there), a sample a second
      # from the end of the loop's first second (its set-up, seconds of
      # import and cuBLAS, left out) to its end. Not pmon's per-process
      # figure: on the two-GPU machines (H100 and H200, 2026-11-27 and -28)
      # pmon gave no process row at all.
      for _ in $(seq 1 600); do
        grep -q '^sec=1 ' "$D/torch_bf16.50.out" 2>/dev/null && break
        kill -0 "$P" 2>/dev/null || break
        sleep 0.1
      done
      # one query a second (not -lms: killed, it may leave its output
      # unwritten), kept only while the loop still ran after it: its last
      # second not yet ended. (The gate of 2026-11-28 06:33Z, which also
      # kept samples taken after the loop's end, read 42% where a probe had
      # read 47-51% inside the loop.)
      for _ in $(seq 1 "$bf16_s"); do
        u=$(nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -i 0 2>&1)
        kill -0 "$P" 2>/dev/null || break
        grep -q "^sec=$bf16_s " "$D/torch_bf16.50.out" 2>/dev/null && break
        echo "$u"
        sleep 1
      done >"$D/util.out"
      BGP=
      if finish torch_bf16.50 "$P"; then
        sed 's/^/utilization.gpu: /' "$D/util.out" >>"$D/raw"
        # every sample but the first (NVML's first answer covers a window
        # that began before the query: the set-up may be in it)
        R_GPU=$(awk '$1 ~ /^[0-9]+$/ && seen++ { s += $1; n++ } END { if (n) printf "%.4f", s / n / 100 }' "$D/util.out")
        echo "torch bf16 at 50%: NVML's utilisation of GPU 0, mean of a sample a second: ${R_GPU:-none}" \
          "(every sample; the mean leaves out the first: $(tr '\n' ' ' <"$D/util.out"))"
        if [ -n "$R_GPU" ]; then
          ROW_BY=time row "torch_bf16 GPU time" 50 "$N_TORCH"
        else
          fail "torch_bf16: nvidia-smi gave no utilisation sample: $(head -3 "$D/util.out")"
        fi
        ROW_BY=info row "torch_bf16 throughput" 50 "$N_TORCH"
      fi
    fi
    [ -n "$id" ] && release "$id"
  fi
  # PyTorch's default dtype: fp32 (no TF32), 4096 x 4096
  if measure native.torch_fp32 "$SECS" - python3 "$HERE/torch_matmul.py" --seconds "$SECS" --dtype fp32 --n 4096; then
    N_TORCH32=$R_RATE
    echo "torch fp32: $(grep '^matmul_ms=' "$D/native.torch_fp32.out")"
    row torch_fp32 native "$R_RATE"
    for p in ${TORCH_SHARES-30 50 70}; do
      share torch_fp32 "$p" "$SECS" 8GiB "$N_TORCH32" python3 "$HERE/torch_matmul.py" --seconds "$SECS" --dtype fp32 --n 4096
    done
    echo "== PyTorch fp32, 30% and $PAIR_B% together"
    # python, torch and cuBLAS take longer to set up than the loop
    PAIR_SETUP_S=15 pair torch_fp32_pair "$N_TORCH32" 8GiB python3 "$HERE/torch_matmul.py" --dtype fp32 --n 4096
  fi
else
  echo "torch: skipped: $(tail -1 <<<"$why")"
fi

# ---- the native rate again: how far the GPU drifted over the run -------------------
# shellcheck disable=SC2086
if measure native.small_plain.end "$SECS" - "$LOOP" $SMALL_ARGS --seconds "$SECS"; then
  drift=$(awk -v a="$N_SMALL" -v b="$R_RATE" 'BEGIN { printf "%.1f", 100 * (b - a) / a }')
  echo "native drift: small plain $N_SMALL/s at the start, $R_RATE/s at the end ($drift%)"
  awk -v d="$drift" 'BEGIN { exit !(d > 3 || d < -3) }' &&
    echo "note: the native rate moved by more than 3% over the run: the measured shares carry that error"
fi

kill "$DP"; wait "$DP" 2>/dev/null; DP=
elapsed=$(($(date +%s) - T_START))

# ---- the table ---------------------------------------------------------------------------
hami() { # HAMi-core's figure for the same case, from ANCHORS.md (2026-11-22, same H100)
  case "$1 $2" in
    "small_plain 30") echo "94 (528-block kernels)" ;;
    "large_plain 30") echo "47 (16,896-block kernels)" ;;
    "large_plain 50") echo "75 (16,896-block kernels)" ;;
    "pair_30 30" | "pair_70 70") echo "50 (the pair split 50/50)" ;;
    "small_graph "*) echo "not charged" ;;
    *) echo "-" ;;
  esac
}
{
  echo "## Compute shares on $DEVICE"
  echo
  echo "$(date -u +%Y-%m-%dT%H:%MZ); tests/gpu/throttle/throttle.sh; $SECS s a case ($SECS_CV s for small plain at 30% and the pair),"
  echo "the first second dropped. Small grid: $SMALL blocks of 256 threads (one per SM), large: $LARGE; kernels of about"
  echo "1 ms (work $W_SMALL and $W_LARGE); graph: 8 kernels of 1/8 of that per graph. measured = rate under the share /"
  echo "native rate of the same loop in this run; cv = stddev / mean of the per-second rates; the longest launch call is"
  echo "the host time of one cudaLaunchKernel / cudaGraphLaunch / torch.matmul. Checks: within $TOL points, cv <= $CV_MAX%,"
  echo "at 30% no call over $BLOCK_MAX_MS ms."
  echo
  echo "| case | target % | measured % | cv % | longest launch call, ms | rate /s | native /s | HAMi-core, % of native | verdict |"
  echo "|---|---|---|---|---|---|---|---|---|"
  while IFS='|' read -r name target m c b v rate native; do
    [ "$target" = native ] && h=- || h=$(hami "$name" "$target")
    echo "| $name | $target | $m | $c | $b | $rate | $native | $h | $v |"
  done <"$D/rows"
  echo
  echo "HAMi-core at 30% (ANCHORS.md): the per-second rate swung between 91 and 234 kernels/s and single launch calls"
  echo "blocked for up to 968 ms; graph launches are not charged."
  echo
  echo "$fails checks failed; elapsed ${elapsed} s."
} >"$D/table.md"
echo
cat "$D/table.md"
if [ -n "${OUT_MD:-}" ]; then
  cp "$D/table.md" "$OUT_MD" && cp "$D/raw" "${OUT_MD%.md}.raw" || echo "throttle.sh: could not write $OUT_MD" >&2
fi
echo "elapsed=${elapsed}s (budget ${BUDGET_S}s)"
[ "$elapsed" -le "$BUDGET_S" ] || echo "note: over the ${BUDGET_S} s budget"
echo "throttle.sh: $fails failed"
[ "$fails" -eq 0 ]
