# A CUDA driver-API program (paths.c) and, on a GPU, PyTorch under
# libtessera-cuda.so with a 4 GiB lease, beside the same program without it.
# Prints key=value lines; checks the limit holds.
#   shim.sh BIN_DIR             on an NVIDIA GPU (skips without one)
#   shim.sh BIN_DIR FAKE_LIBCUDA against the CI's driver double: an 80 GiB
#                               declared device, no PyTorch part
# BIN_DIR holds tesserad and tessera; SHIM and PATHS name libtessera-cuda.so
# and the built paths.c (default: in BIN_DIR).
set -u
BIN=${1:?usage: shim.sh BIN_DIR [FAKE_LIBCUDA]}
SHIM=${SHIM:-$BIN/libtessera-cuda.so}
PATHS=${PATHS:-$BIN/paths}
FAKE=${2:-}
D=$(mktemp -d); chmod 755 "$D"
trap 'rm -rf "$D"' EXIT
if [ -n "$FAKE" ]; then
  export TESSERA_REAL_LIBCUDA=$FAKE LD_LIBRARY_PATH="$(dirname "$FAKE")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  printf '[daemon]\ndevices = config\nsync = none\n[device.0]\nmemory = 80GiB\n' >"$D/c.conf"
else
  command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "SKIP: no GPU"; exit 77; }
  printf '[daemon]\ndevices = nvml\nsync = none\n' >"$D/c.conf"
fi
"$BIN/tesserad" --config "$D/c.conf" --state-dir "$D/state" --socket "$D/s.sock" 2>"$D/daemon.log" &
DP=$!
for i in $(seq 1 200); do [ -S "$D/s.sock" ] && break; sleep 0.05; done
T="$BIN/tessera --socket $D/s.sock"
ID=$($T lease create --device 0 --mem 4GiB --for 10m --json | grep -Eo '"id": [0-9]+' | grep -Eo '[0-9]+')
LIMIT=$($T lease show "$ID" --json | grep -Eo '"bytes": [0-9]+' | grep -Eo '[0-9]+')
echo "lease=$ID limit=$LIMIT"
fails=0
echo "== native"; "$PATHS" | tee "$D/native.out"
native=$(sed -n 's/.*plain_chunks=\([0-9]*\).*/\1/p' "$D/native.out")
[ "${native:-0}" -gt 16 ] || { echo "FAIL: without the shim only ${native:-0} chunks: the check proves nothing"; fails=$((fails+1)); }
echo "== under the shim"
LD_PRELOAD="$SHIM" TESSERA_LEASE=$ID TESSERA_REGION_DIR="$D/state/regions" "$PATHS" | tee "$D/shim.out"
chunks=$(sed -n 's/.*plain_chunks=\([0-9]*\).*/\1/p' "$D/shim.out")
# 4 GiB: at most 16 chunks of 256 MiB; at least 15 (the shim charges in 2 MiB granules)
[ "${chunks:-0}" -le 16 ] && [ "${chunks:-0}" -ge 15 ] || { echo "FAIL: $chunks plain chunks under a 4 GiB lease"; fails=$((fails+1)); }
again=$(sed -n 's/.*async_chunks_after_20_rounds=\([0-9]*\).*/\1/p' "$D/shim.out")
[ "${again:-0}" -ge 15 ] || { echo "FAIL: after 20 rounds of mixed frees only $again chunks"; fails=$((fails+1)); }
vmm=$(sed -n 's/.*vmm_chunks=\([0-9]*\).*/\1/p' "$D/shim.out")
[ "${vmm:-99}" -le 16 ] && [ "${vmm:-0}" -ge 15 ] || { echo "FAIL: $vmm cuMemCreate chunks under a 4 GiB lease"; fails=$((fails+1)); }
grep -q "^done=1" "$D/shim.out" || { echo "FAIL: the program did not finish under the shim"; fails=$((fails+1)); }
$T lease show "$ID"
used=$($T lease show "$ID" --json | grep -Eo '"used_bytes": [0-9]+' | grep -Eo '[0-9]+')
[ "${used:-1}" -eq 0 ] || { echo "FAIL: ${used:-?} bytes still charged after the program freed everything and exited"; fails=$((fails+1)); }
if [ -z "$FAKE" ]; then
echo "== PyTorch under the shim"
LD_PRELOAD="$SHIM" TESSERA_LEASE=$ID TESSERA_REGION_DIR="$D/state/regions" python3 "$(dirname "$0")/torch_check.py" | tee "$D/torch.out"
tc=$(sed -n 's/.*torch_chunks=\([0-9]*\).*/\1/p' "$D/torch.out")
[ "${tc:-99}" -le 16 ] || { echo "FAIL: torch took $tc chunks of 256 MiB under 4 GiB"; fails=$((fails+1)); }
$T lease show "$ID"
fi
kill "$DP"; wait "$DP" 2>/dev/null
cat "$D/daemon.log" | tail -3
echo "shim.sh: $fails failed"
[ "$fails" -eq 0 ]
