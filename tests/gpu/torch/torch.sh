#!/usr/bin/env bash
# PyTorch from the machine's own python3 and pip wheels, held to a 4 GiB
# lease through `tessera run`: mem_get_info shows the lease; one
# tensor over it and chunks past it are refused with torch.OutOfMemoryError
# (also with expandable segments, and with the cudaMallocAsync backend); a CUDA graph captured with PyTorch's
# private pool runs, and one whose pool would pass the lease is refused;
# torch.compile(mode="reduce-overhead") runs and is right; the lease resized
# while PyTorch runs (grown, then shrunk) is seen by the same process at its
# next allocation and memory query. The backstop runs
# at its default period and must find nothing to do (the shim holds every
# process). The chunks are first counted without the shim: the check can
# fail.
#   torch.sh BIN_DIR   BIN_DIR holds tesserad, tessera and the shims
# Skips (77) without a GPU or without torch seeing one.
set -u
BIN=${1:?usage: torch.sh BIN_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "SKIP: no GPU"; exit 77; }
why=$(python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "torch sees no CUDA device")' 2>&1) ||
  { echo "SKIP: $(tail -1 <<<"$why")"; exit 77; }
echo "python3: $(command -v python3); $(python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)')"
D=$(mktemp -d); chmod 755 "$D"
# without the shim the same chunks go far past any lease: the check can
# fail (run before there is a lease: the backstop would count this process,
# root's, against root's lease)
python3 "$HERE/checks.py" chunks $((4 << 30)) >"$D/native.out" 2>&1
DP=
trap '[ -n "$DP" ] && kill "$DP" 2>/dev/null; rm -rf "$D"' EXIT
printf '[daemon]\ndevices = nvml\nsync = none\n' >"$D/c.conf"
"$BIN/tesserad" --config "$D/c.conf" --state-dir "$D/state" --socket "$D/s.sock" 2>"$D/daemon.log" &
DP=$!
for _ in $(seq 1 200); do [ -S "$D/s.sock" ] && break; sleep 0.05; done
T() { "$BIN/tessera" --socket "$D/s.sock" "$@"; }
export TESSERA_SHIM=${TESSERA_SHIM:-$BIN/libtessera-cuda.so} TESSERA_OPENCL_SHIM=${TESSERA_OPENCL_SHIM:-$BIN/libtessera-opencl.so}
ID=$(T lease create --device 0 --mem 4GiB --for 30m --json | grep -Eo '"id": [0-9]+' | grep -Eo '[0-9]+')
LIMIT=$(T lease show "$ID" --json | grep -Eo '"bytes": [0-9]+' | grep -Eo '[0-9]+')
[ -n "$ID" ] && [ -n "$LIMIT" ] || { echo "FAIL: no lease"; cat "$D/daemon.log"; exit 1; }
echo "lease=$ID limit=$LIMIT"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# run NAME CHECK [ENV...]: checks.py CHECK under the lease; output in $D/NAME.out
run() {
  local name=$1 check=$2
  shift 2
  env "$@" "$BIN/tessera" --socket "$D/s.sock" run --lease "$ID" -- python3 "$HERE/checks.py" "$check" "$LIMIT" \
    >"$D/$name.out" 2>"$D/$name.err"
  local rc=$?
  echo "== $name (status $rc)"; cat "$D/$name.out"; grep -v '^\s*$' "$D/$name.err" | tail -5
  grep -q '^done=1' "$D/$name.out" || fail "$name: did not run to its end (status $rc)"
}
val() { sed -n "s/.*\b$2=\([^ ]*\).*/\1/p" "$D/$1.out" | head -1; }
is() { # is NAME KEY WANT
  local got; got=$(val "$1" "$2")
  [ "$got" = "$3" ] && echo "ok: $1 $2=$got" || fail "$1: $2=${got:-nothing}, want $3"
}
CTX=$((524 << 20)); CHUNK=$((256 << 20))
MAX=$(( (LIMIT - CTX) / CHUNK )); MIN=$(( (LIMIT - CTX - (64 << 20)) / CHUNK - 1 ))
within() { # within NAME KEY LOW HIGH
  local got; got=$(val "$1" "$2")
  if [ -n "$got" ] && [ "$got" -ge "$3" ] && [ "$got" -le "$4" ]; then echo "ok: $1 $2=$got ($3..$4)"; else fail "$1: $2=${got:-nothing}, want $3..$4"; fi
}


echo "== native"; cat "$D/native.out"
nat=$(val native chunks)
[ "${nat:-0}" -gt $((MAX + 4)) ] && echo "ok: natively $nat chunks" || fail "natively only ${nat:-0} chunks: the check proves nothing"
run meminfo meminfo
is meminfo meminfo_total "$LIMIT"
f=$(val meminfo meminfo_free); [ -n "$f" ] && [ "$f" -le "$LIMIT" ] && echo "ok: free $f <= limit" || fail "meminfo: free ${f:-?} > limit"
run over over
is over over OutOfMemoryError
is over after_over 1
run chunks chunks
within chunks chunks "$MIN" "$MAX"
is chunks chunks_stopped_by OutOfMemoryError
is chunks chunks_matmul_ok 1
run expandable chunks PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
within expandable chunks "$MIN" "$MAX"
is expandable chunks_stopped_by OutOfMemoryError
# PyTorch's other allocator: cudaMallocAsync (the driver's stream-ordered
# pool, cuMemAllocAsync), held the same way
run async chunks PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
within async chunks "$MIN" "$MAX"
is async chunks_stopped_by OutOfMemoryError
run async_over over PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
is async_over over OutOfMemoryError
is async_over after_over 1
run graph graph
is graph graph_replay_ok 1
is graph graph_over OutOfMemoryError
is graph graph_after_ok 1
run compile compile
is compile compile_ok 1
is compile compile_total "$LIMIT"

# the lease resized while PyTorch runs under it: refused at 4 GiB, granted
# after the grow to 8 GiB, which mem_get_info shows; with 2 GiB held, 2 GiB
# more allowed at 8 GiB and refused after the shrink back to 4 GiB, which
# mem_get_info shows too
mkdir -p "$D/rz"
TSR_RESIZE_DIR="$D/rz" "$BIN/tessera" --socket "$D/s.sock" run --lease "$ID" -- python3 "$HERE/checks.py" resize "$LIMIT" \
  >"$D/resize.out" 2>"$D/resize.err" &
RZ=$!
waitfile() { for _ in $(seq 1 1200); do [ -e "$1" ] && return 0; sleep 0.05; done; return 1; }
if waitfile "$D/rz/grow"; then
  GROWN=$(T lease resize "$ID" --mem $((2 * LIMIT))B --json | grep -Eo '"bytes": [0-9]+' | grep -Eo '[0-9]+')
  [ -n "$GROWN" ] || fail "resize: the grow was refused"
  touch "$D/rz/grown"
fi
if waitfile "$D/rz/shrink"; then
  SHRUNK=$(T lease resize "$ID" --mem "${LIMIT}B" --json 2>"$D/shrink.err" | grep -Eo '"bytes": [0-9]+' | grep -Eo '[0-9]+')
  [ -n "$SHRUNK" ] || fail "resize: the shrink was refused: $(cat "$D/shrink.err")"
  touch "$D/rz/shrunk"
fi
wait "$RZ"
echo "== resize"; cat "$D/resize.out"; grep -v '^\s*$' "$D/resize.err" | tail -5
grep -q '^done=1' "$D/resize.out" || fail "resize: did not run to its end"
is resize before_grow OutOfMemoryError
is resize after_grow ok
is resize total_grown "${GROWN:-none}"
is resize before_shrink ok
is resize after_shrink OutOfMemoryError
is resize total_shrunk "${SHRUNK:-none}"
# the lease is the size it had: the checks after this one expect it
[ "${SHRUNK:-0}" = "$LIMIT" ] || fail "resize: the lease is ${SHRUNK:-?} bytes after the shrink, not $LIMIT"

used=$(T lease show "$ID" --json | grep -Eo '"used_bytes": [0-9]+' | grep -Eo '[0-9]+')
[ "${used:-1}" -eq 0 ] && echo "ok: nothing charged after the runs" || fail "${used:-?} bytes still charged after every run ended"
if grep -q "backstop: lease" "$D/daemon.log"; then
  fail "the backstop acted on a process the shim holds: $(grep 'backstop: lease' "$D/daemon.log" | head -2)"
else
  echo "ok: the backstop found nothing over the lease"
fi
# Start-up, shown, not checked (a number for bench/results; every fatbin
# the runtime registers passes the shim's image reader): a process that
# imports torch and runs one matmul, three times each way, the median.
startup() { # startup [tessera run args...]: seconds
  local t0 t1 times=() i
  for i in 1 2 3; do
    t0=$(date +%s%N)
    "$@" python3 -c 'import torch; a = torch.ones(1024, 1024, device="cuda"); torch.mm(a, a); torch.cuda.synchronize()' \
      >/dev/null 2>&1 || { echo "failed"; return; }
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n 2p
}
echo "startup_ms native=$(startup env) shim=$(startup "$BIN/tessera" --socket "$D/s.sock" run --lease "$ID" --)"
T lease release "$ID" >/dev/null
echo "torch.sh: $fails failed"
[ "$fails" -eq 0 ]
