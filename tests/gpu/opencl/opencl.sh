# libtessera-opencl.so on NVIDIA's OpenCL platform (and PoCL beside it) on
# a GPU machine:
#   the daemon's devices: NVML's GPU (kind cuda, with its PCI bus id) and
#   PoCL declared as an OpenCL device after it;
#   ocl_tenant on NVIDIA's platform through `tessera run` (which preloads
#   both shims for a CUDA device): every allocation path until refused
#   (clCreateBufferNV among them), references, a context released live, a
#   kernel, the lease's view, bad arguments answered as without the shim;
#   the shim's count beside NVML's for a tenant holding 1 GiB, and the
#   backstop leaving it alone;
#   then tests/integration/opencl/opencl.sh on the machine's PoCL (whose
#   Intel USM entries Debian 12's PoCL lacks).
#   opencl.sh BIN_DIR      skips (77) without a GPU or NVIDIA's platform
# BIN_DIR holds tesserad, tessera, libtessera-opencl.so and tsr_ocl_tenant
# (OCL_SHIM, OCL_TENANT override).
set -u
BIN=${1:?usage: opencl.sh BIN_DIR}
OCL_SHIM=${OCL_SHIM:-$BIN/libtessera-opencl.so}
OCL_TENANT=${OCL_TENANT:-$BIN/tsr_ocl_tenant}
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "SKIP: no GPU"; exit 77; }
NV=$(OCL_PLATFORM=NVIDIA "$OCL_TENANT" name 2>&1) || { echo "SKIP: NVIDIA's OpenCL platform is not listed ($NV)"; exit 77; }
POCL=$(OCL_PLATFORM=Portable "$OCL_TENANT" name 2>/dev/null || true)
D=$(mktemp -d); chmod 755 "$D"
DP=
trap '[ -n "$DP" ] && kill "$DP" 2>/dev/null; wait 2>/dev/null; rm -rf "$D"' EXIT
fails=0
check() { if eval "$1"; then echo "ok: $2"; else echo "FAIL: $2"; fails=$((fails + 1)); fi; }
{
  printf '[daemon]\ndevices = auto\nsync = none\nbackstop_period = 1s\nregion_dir = %s/regions\n' "$D"
  [ -z "$POCL" ] || printf '\n[device.0]\nname = PoCL\nkind = opencl\nopencl = %s*\nmemory = 8GiB\n' "${POCL:0:20}"
} >"$D/c.conf"
"$BIN/tesserad" --config "$D/c.conf" --state-dir "$D/state" --socket "$D/s.sock" 2>"$D/daemon.log" &
DP=$!
for _ in $(seq 1 200); do [ -S "$D/s.sock" ] && break; sleep 0.05; done
T="$BIN/tessera --socket $D/s.sock"
export TESSERA_OPENCL_SHIM=$OCL_SHIM TESSERA_REGION_DIR=$D/regions
devs=$($T devices --json | tr -d '\n ')
echo "devices: $devs"
check 'grep -q "\"index\":0,[^}]*\"kind\":\"cuda\",\"pci\":\"[0-9a-f]\{4\}:" <<<"$devs"' "NVML's GPU is a CUDA device with its PCI bus id"
# declared devices follow NVML's GPUs: PoCL's index is their count
NGPU=$(nvidia-smi -L | grep -c '^GPU ')
[ -z "$POCL" ] || check 'grep -q "\"index\":$NGPU,[^}]*\"kind\":\"opencl\"" <<<"$devs"' "PoCL, declared, follows NVML's $NGPU GPU(s) as an OpenCL device"
ID=$($T lease create --device 0 --mem 4GiB --for 10m --json | tr -d '\n ' | sed 's/.*"id":\([0-9]*\).*/\1/')
R=$D/regions/lease-$ID.region
run() { OCL_PLATFORM=NVIDIA $T run --lease "$ID" -- "$OCL_TENANT" "$@"; }
echo "== NVIDIA: $NV, lease $ID of 4 GiB"
pre=$($T run --lease "$ID" -- sh -c 'echo "$LD_PRELOAD"')
check '[[ "$pre" == *libtessera-cuda.so:*libtessera-opencl.so ]]' "tessera run preloads both shims for a CUDA device ($pre)"
out=$(run paths "$R" 2>&1); echo "$out"
check '! grep -q FAIL <<<"$out" && grep -q "clCreateBuffer: [4-8] made, then refused with -4" <<<"$out"' "every allocation path held to the lease on NVIDIA's platform"
check 'grep -q "clCreateBufferNV: [4-8] made" <<<"$out"' "clCreateBufferNV, reached through clGetExtensionFunctionAddressForPlatform, is charged"
for mode in refs context kernel; do
  out=$(run $mode "$R" 2>&1)
  check '[ $? -eq 0 ] && ! grep -q FAIL <<<"$out"' "$mode on NVIDIA's platform: $(tr '\n' ' ' <<<"$out")"
done
LIMIT=$($T lease show "$ID" --json | tr -d '\n ' | sed 's/.*"bytes":\([0-9]*\).*/\1/')
out=$(run view 2>&1)
check '[ "$out" = "global=$LIMIT max_alloc=$LIMIT" ]' "the lease's view ($LIMIT bytes: 4 GiB as a share of the GPU): $out"
plain=$(OCL_PLATFORM=NVIDIA "$OCL_TENANT" bad 2>&1); shimmed=$(run bad 2>&1)
check '[ "$plain" = "$shimmed" ]' "bad arguments answered as without the shim"
echo "$shimmed"
# the shim's count beside NVML's: a tenant holding 1 GiB, written, under
# tessera run (both shims: NVIDIA's OpenCL must not reach the CUDA shim)
mkfifo "$D/in"
OCL_PLATFORM=NVIDIA $T run --lease "$ID" -- "$OCL_TENANT" hold "$R" $((1 << 30)) <"$D/in" >"$D/hold" 2>&1 &
HP=$!
exec 9>"$D/in"
for _ in $(seq 1 300); do grep -q . "$D/hold" && break; sleep 0.05; done
sleep 1.5
shim_b=$($T lease show "$ID" --json | tr -d '\n ' | sed 's/.*"used_bytes":\([0-9]*\).*/\1/')
nvml_mib=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | awk -F', ' '{s += $2} END {if (NR) print s}')
echo "hold: $(cat "$D/hold"); the shim's count $((shim_b >> 20)) MiB, NVML's ${nvml_mib:-?} MiB"
check '[ -n "$nvml_mib" ] && [ $(( (shim_b >> 20) - nvml_mib )) -le 16 ] && [ $(( nvml_mib - (shim_b >> 20) )) -le 16 ]' "the shim and NVML agree within 16 MiB"
sleep 2
check 'kill -0 $HP 2>/dev/null && ! grep -qi "backstop.*lease $ID\b.*\(signal\|revok\)" "$D/daemon.log"' "the backstop leaves a tenant within its lease alone"
grep -i backstop "$D/daemon.log" | tail -3
exec 9>&-
wait $HP
$T lease release "$ID" >/dev/null
kill "$DP"; wait "$DP" 2>/dev/null; DP=
echo "== PoCL on this machine"
if [ -n "$POCL" ] && [ -n "${TESSERA_SOURCE_DIR:-}" ]; then
  OCL_PLATFORM=Portable TESSERA_BIN_DIR=$BIN OCL_SHIM=$OCL_SHIM OCL_TENANT=$OCL_TENANT \
    bash "$TESSERA_SOURCE_DIR/tests/integration/opencl/opencl.sh"
  rc=$?
  check '[ $rc -eq 0 ]' "the integration test on this machine's PoCL"
fi
echo "$fails failed"
[ "$fails" -eq 0 ]
