#!/usr/bin/env bash
# The GPU gate on a machine with a GPU that cannot build tessera: each gpu.*
# test's script run straight from one flat folder of built files (what
# tests/gpu/stage.sh copies), as ctest runs them where they were built.
#   tests/gpu/gate.sh BIN [TEST...]
# TEST: nvml shim torch ddp backstop opencl throttle rt rt_torch harmless
# secure startup startup64 (default: all of them). Each test's output goes to
# $OUT/gate-TEST.log when OUT is set, else to BIN; a line per test and a
# summary are printed last, and written with the commit (BIN/COMMIT, which
# stage.sh writes), the GPU, the driver and the date to RESULT (default
# $OUT/gate-result.md, else BIN/gate-result.md), with every failed test's
# whole log: the file to commit under bench/results/. Exit status: 0 when none failed (a skip is not a failure).
set -uo pipefail
BIN=$(cd "${1:?usage: gate.sh BIN [TEST...]}" && pwd)
shift
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
LOGS=${OUT:-$BIN}
export TESSERA_SOURCE_DIR=$SRC TESSERA_BIN_DIR=$BIN
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" # the libraries the machine lacks
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(nvml shim torch ddp backstop opencl throttle rt rt_torch harmless secure startup startup64)
libcuda=$(ldconfig -p 2>/dev/null | awk '$1 == "libcuda.so.1" {print $NF; exit}')
summary=()
failed=0 failed_logs=()
for t in "${tests[@]}"; do
  log=$LOGS/gate-$t.log
  start=$(date +%s)
  case $t in
    nvml) bash "$SRC/tests/gpu/lease/nvml.sh" ;;
    shim) SHIM=$BIN/libtessera-cuda.so PATHS=$BIN/paths RECLAIM=$BIN/reclaim bash "$SRC/tests/gpu/shim/shim.sh" "$BIN" ;;
    torch) bash "$SRC/tests/gpu/torch/torch.sh" "$BIN" ;;
    ddp) bash "$SRC/tests/gpu/torch/ddp.sh" "$BIN" ;;
    backstop) TENANT=$BIN/tsr_gpu_tenant_real bash "$SRC/tests/gpu/backstop/backstop.sh" "$BIN" ;;
    opencl) bash "$SRC/tests/gpu/opencl/opencl.sh" "$BIN" ;;
    throttle) SHIM=$BIN/libtessera-cuda.so LOOP=$BIN/throttle_loop bash "$SRC/tests/gpu/throttle/throttle.sh" "$BIN" ;;
    rt) "$BIN/rt_gpu" ;;
    rt_torch) bash "$SRC/tests/gpu/rt/torch_front.sh" "$BIN/libtessera-rt.so" ;;
    harmless)
      PROBE=$BIN/tsr_node_probe WRAP=$BIN/libtsr_getenv_wrap.so CUDA_SHIM=$BIN/libtessera-cuda.so \
        OCL_SHIM=$BIN/libtessera-opencl.so PRELOAD_SHIM=$BIN/libtessera-preload.so FAKE=${libcuda:-/nonexistent} \
        bash "$SRC/tests/integration/nodewide/harmless.sh" ;;
    secure)
      PROBE=$BIN/tsr_node_probe EVIL=$BIN/libtsr_evil.so PRELOAD_SHIM=$BIN/libtessera-preload.so \
        FAKE=${libcuda:-/nonexistent} bash "$SRC/tests/integration/nodewide/secure.sh" ;;
    startup)
      "$BIN/bench_startup" --runs "${STARTUP_RUNS:-3000}" --cuda "$BIN/libtessera-cuda.so" \
        --opencl "$BIN/libtessera-opencl.so" --preload "$BIN/libtessera-preload.so" \
        ${STARTUP_EMPTY:+--empty "$STARTUP_EMPTY"} ;;
    startup64) bash "$SRC/bench/shim/startup64.sh" "$BIN" ;;
    *) echo "gate: no test '$t'"; false ;;
  esac >"$log" 2>&1
  rc=$?
  case $rc in
    0) word=passed ;;
    77) word=skipped ;;
    *) word="FAILED ($rc)"; failed=$((failed + 1)); failed_logs+=("$log") ;;
  esac
  summary+=("$(printf '%-10s %-12s %4ss  %s' "$t" "$word" "$(( $(date +%s) - start ))" "$(tail -n 1 "$log")")")
done
printf '%s\n' "${summary[@]}"
echo "gate: ${#tests[@]} test(s), $failed failed"
RESULT=${RESULT:-$LOGS/gate-result.md}
{
  echo "# GPU gate, $(date -u +%Y-%m-%d)"
  echo
  echo "- commit: $(cat "$BIN/COMMIT" 2>/dev/null || echo unknown)"
  echo "- GPU: $(nvidia-smi --query-gpu=index,name --format=csv,noheader 2>/dev/null | paste -sd ';' - || echo none)"
  echo "- driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1 || echo none)"
  echo "- python3: $(command -v python3) ($(python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)' 2>/dev/null || echo no torch))"
  echo "- ran: tests/gpu/gate.sh ${tests[*]}; finished $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo '```'
  printf '%s\n' "${summary[@]}"
  echo "gate: ${#tests[@]} test(s), $failed failed"
  echo '```'
  # a failed test's whole log: the one file that must come back says why
  for f in "${failed_logs[@]}"; do
    echo
    echo "## $(basename "$f")"
    echo
    echo '```'
    cat "$f"
    echo '```'
  done
} >"$RESULT"
[ "$failed" -eq 0 ]
