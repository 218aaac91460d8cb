#!/usr/bin/env bash
# PyTorch fp32 matmul loops under a 30% lease alone and beside a 70% lease,
# for each shim library named (builds of libtessera-cuda.so that differ, to
# compare them on one machine in one run), beside the loop without a shim
# measured first. Per row: the loop's rate as % of native, and what the
# lease charged per launch (its region's gpu_ns / launches, from `tessera
# lease show --json`) against the native matmul's duration.
#
#   torch_pair.sh BIN_DIR SHIM...   BIN_DIR holds tesserad and tessera;
#                                   skips (77) without a GPU
# SECS (8): each run's length; SETUP_S (12): the common start's lead.
# With TSR_BENCH_JSON set, each row is also a record there (bench/README.md).
set -u
BIN=${1:?usage: torch_pair.sh BIN_DIR SHIM...}
shift
[ $# -ge 1 ] || { echo "usage: torch_pair.sh BIN_DIR SHIM..." >&2; exit 2; }
SECS=${SECS:-8} SETUP_S=${SETUP_S:-12}
HERE=$(cd "$(dirname "$0")" && pwd)
MM="$HERE/../../tests/gpu/throttle/torch_matmul.py"
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "SKIP: no GPU"; exit 77; }
unset CUDA_VISIBLE_DEVICES LD_PRELOAD TESSERA_LEASE
D=$(mktemp -d); chmod 755 "$D"
DP=
trap '[ -n "$DP" ] && kill "$DP" 2>/dev/null; rm -rf "$D"' EXIT
printf '[daemon]\ndevices = nvml\nsync = none\nbackstop_period = 0\n' >"$D/c.conf"
"$BIN/tesserad" --config "$D/c.conf" --state-dir "$D/state" --socket "$D/s.sock" 2>"$D/daemon.log" &
DP=$!
for _ in $(seq 1 200); do [ -S "$D/s.sock" ] && break; sleep 0.05; done
T() { "$BIN/tessera" --socket "$D/s.sock" "$@"; }
lease() { T lease create --device 0 --mem 8GiB --for 10m --sm "$1%" --json | grep -Eo '"id": [0-9]+' | grep -Eo '[0-9]+'; }
num() { sed -n "s/.*\"$1\": \([0-9]*\).*/\1/p" | head -1; }
rate() { sed -n 's/.*\brate=\([0-9.]*\).*/\1/p' "$1" | tail -1; }
# record CASE FIGURE=NUMBER...: a record to $TSR_BENCH_JSON, if set
record() {
  [ -n "${TSR_BENCH_JSON:-}" ] || return 0
  python3 "$HERE/../../scripts/bench_record.py" --bench torch_pair --gpu --case "$1" "${@:2}"
}
# run NAME SHIM ID: in the background, starting at $AT
run() {
  if [ "$3" = - ]; then
    timeout $((SECS + 60)) python3 "$MM" --dtype fp32 --n 4096 --seconds "$SECS" --start-at "$AT" >"$D/$1.out" 2>&1 &
  else
    timeout $((SECS + 60)) env LD_PRELOAD="$2" TESSERA_LEASE="$3" TESSERA_REGION_DIR="$D/state/regions" \
      python3 "$MM" --dtype fp32 --n 4096 --seconds "$SECS" --start-at "$AT" >"$D/$1.out" 2>&1 &
  fi
}
row() { # row RUN LABEL LEASE: rate %, charge per launch
  local js r g l
  r=$(rate "$D/$1.out")
  shift
  js=$(T lease show "$2" --json)
  g=$(num gpu_ns <<<"$js") l=$(num launches <<<"$js")
  # the row, and its record's figures to $D/rec
  awk -v n="$1" -v r="$r" -v nat="$NATIVE" -v g="$g" -v l="$l" -v mm="$MM_MS" -v s="$(num sm_now_ppm <<<"$js")" \
    -v rec="$D/rec" 'BEGIN { printf "| %s | %.1f | %.3f | %.3f | %.2f | %d |\n", n, 100 * r / nat, g / l / 1e6, mm, g / l / 1e6 / mm, s
      printf "pct_of_native=%.4f charged_per_launch_ms=%.6f native_matmul_ms=%s charged_over_native_ratio=%.6f " \
        "share_after_ppm=%d\n", 100 * r / nat, g / l / 1e6, mm, g / l / 1e6 / mm, s >rec }'
  # shellcheck disable=SC2046 # figures are words
  record "$1" $(cat "$D/rec")
  T lease release "$2" >/dev/null
}
AT=$(($(date +%s) + 3))
run native - -
wait $!
NATIVE=$(rate "$D/native.out") MM_MS=$(sed -n 's/.*matmul_ms=\([0-9.]*\).*/\1/p' "$D/native.out")
[ -n "$NATIVE" ] || { echo "torch_pair: the native run failed: $(tail -2 "$D/native.out")"; exit 1; }
echo "native: rate=$NATIVE matmul/s, matmul_ms=$MM_MS ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader -i 0))"
record native rate_per_s="$NATIVE" native_matmul_ms="$MM_MS"
echo
echo "| run | % of native | charged per launch, ms | native matmul, ms | charged / native | share in force after, ppm |"
echo "|---|---|---|---|---|---|"
for shim in "$@"; do
  tag=$(basename "$(dirname "$shim")")/$(basename "$shim")
  id=$(lease 30)
  AT=$(($(date +%s) + SETUP_S / 2))
  run alone "$shim" "$id"
  wait $!
  row alone "$tag 30% alone" "$id"
  a=$(lease 30) b=$(lease 70)
  AT=$(($(date +%s) + SETUP_S))
  run p30 "$shim" "$a"
  p=$!
  run p70 "$shim" "$b"
  q=$!
  sleep $((SETUP_S + 3))
  s30=$(T lease show "$a" --json | num sm_now_ppm) s70=$(T lease show "$b" --json | num sm_now_ppm)
  wait $p $q
  row p30 "$tag pair 30% (in force $s30)" "$a"
  row p70 "$tag pair 70% (in force $s70)" "$b"
done
