# libtessera-opencl.so against a real OpenCL implementation (PoCL on the
# CPU: Debian's in CI; tests/gpu/opencl runs it on the GPU machine's PoCL
# too, OCL_PLATFORM=Portable): a daemon whose device is the OpenCL device
# (declared by its name), leases on it, and ocl_tenant driven through `tessera run` as a user would:
#   every allocation path until refused, reference counts, sub-buffers, a
#   context released with live buffers, a kernel's results, the lease's
#   view (ocl_tenant's and clinfo's), bad arguments answered as without
#   the shim, 8 processes against one lease, a SIGKILLed tenant reaped, the
#   deny policy, and a lease that expires.
source "$(dirname "$0")/../lease/lib.sh"
: "${OCL_SHIM:?OCL_SHIM must name libtessera-opencl.so}" "${OCL_TENANT:?OCL_TENANT must name tsr_ocl_tenant}"
export TESSERA_OPENCL_SHIM=$OCL_SHIM
unset TESSERA_LEASE TESSERA_POLICY
NAME=$("$OCL_TENANT" name) || { [ $? -eq 77 ] && skip "no OpenCL device: $NAME"; echo "FAIL: $NAME"; exit 1; }
echo "OpenCL device: $NAME"
MIB=1048576
{
  printf '[daemon]\ndevices = config\nsync = none\nexpiry_grace = 1s\nregion_dir = %s\n' "$T_DIR/regions"
  printf '\n[device.0]\nname = %s\nkind = opencl\nopencl = %s*\nmemory = 4GiB\n' "${NAME:0:40}" "${NAME:0:20}"
  printf '\n[device.1]\nname = not here\nkind = opencl\nopencl = no such device\nmemory = 4GiB\n'
} >"$T_CONF"
start_daemon
REGIONS=$T_DIR/regions
export TESSERA_REGION_DIR=$REGIONS

t devices; expect_rc 0; expect_out "^0 .* opencl " "tessera devices lists the OpenCL device with its kind"
t devices --json; expect_out '"kind": "opencl"'; expect_out '"opencl": "'

t lease create --device 0 --mem 256MiB --for 10m --json; expect_rc 0; ID=$(json_field id)
R=$REGIONS/lease-$ID.region
run_tenant() { t run --lease "$ID" -- "$OCL_TENANT" "$@"; }

# the shim is what `tessera run` preloads for an OpenCL device, and only it
t run --lease "$ID" -- sh -c 'echo "$LD_PRELOAD"'
expect_rc 0; [ "$(realpath "$OUT")" = "$(realpath "$OCL_SHIM")" ] && pass || fail "preloaded for an OpenCL device: '$OUT'"

run_tenant paths "$R"; echo "$OUT"
expect_rc 0 "every allocation path held to the lease"
expect_out "clCreateBuffer: [4-8] made, then refused with -4"
expect_out "clCreateImage: [4-8] made, then refused with -4"
expect_out "clSVMAlloc: [4-8] made, then refused"

# the same with a lease `tessera run` makes for the program and ends after it
t run --device 0 --mem 128MiB --for 10m -- "$OCL_TENANT" paths env
expect_rc 0 "every allocation path under tessera run --mem: $OUT"; expect_out "clCreateBuffer: [4-8] made, then refused with -4"

# a program that looks the loader's entries up with dlsym: alone, and with
# the CUDA shim's dlsym in front (its own preload order under tessera run)
out=$(TESSERA_LEASE=$ID LD_PRELOAD=$OCL_SHIM "$OCL_TENANT" dlsym "$R" 2>&1 || true)
grep -q "^dlsym: [4-8] made, then refused with -4$" <<<"$out" && ! grep -q FAIL <<<"$out" && pass ||
  fail "entries found with dlsym are held to the lease: $out"
if [ -n "${CUDA_SHIM:-}" ]; then
  for order in "$CUDA_SHIM:$OCL_SHIM" "$OCL_SHIM:$CUDA_SHIM"; do
    out=$(TESSERA_LEASE=$ID LD_PRELOAD=$order "$OCL_TENANT" dlsym "$R" 2>&1 || true)
    grep -q "^dlsym: [4-8] made, then refused with -4$" <<<"$out" && ! grep -q FAIL <<<"$out" && pass ||
      fail "both shims' dlsym chained, preloaded as $order: $out"
  done
fi

# a program without OpenCL that looks libc's names up: the shim (node-wide,
# in every process) must not load the ICD loader into it
if [ -n "${PLAIN_DLSYM:-}" ]; then
  out=$(TESSERA_LEASE=$ID LD_PRELOAD=$OCL_SHIM "$PLAIN_DLSYM")
  [ "$out" = "found=1 libOpenCL=0" ] && pass || fail "dlsym of close and clock_gettime under the shim: $out"
fi

run_tenant refs "$R"; expect_rc 0 "retain/release and sub-buffers: $OUT"; expect_out "^refs: ok"
run_tenant context "$R"; expect_rc 0 "a context released with live buffers: $OUT"; expect_out "^context: ok"
run_tenant kernel; expect_rc 0 "a kernel under the shim: $OUT"; expect_out "results checked"

# the lease's view, in the program and in clinfo
run_tenant view; expect_rc 0
expect_out "^global=$((256 * MIB)) max_alloc=$((256 * MIB))$" "CL_DEVICE_GLOBAL_MEM_SIZE and MAX_MEM_ALLOC_SIZE show the lease"
"$OCL_TENANT" view | grep -q "^global=$((256 * MIB)) " && fail "without the shim the device shows the lease" || pass
if command -v clinfo >/dev/null; then
  t run --lease "$ID" -- clinfo --raw
  expect_rc 0; expect_out "CL_DEVICE_GLOBAL_MEM_SIZE +$((256 * MIB))$" "clinfo under the shim shows the lease"
else
  echo "NOTE: clinfo is not installed; its view was not checked"
fi

# bad arguments: the implementation's own answers, the same with the shim
plain=$("$OCL_TENANT" bad 2>&1); shimmed=$(TESSERA_LEASE=$ID LD_PRELOAD=$OCL_SHIM "$OCL_TENANT" bad 2>&1)
[ "$plain" = "$shimmed" ] && pass || fail "bad arguments answered otherwise under the shim: $(diff <(echo "$plain") <(echo "$shimmed"))"
grep -q "^buffer without context: -34$" <<<"$plain" && pass || fail "the bad calls were not made: $plain"
t lease show "$ID" --json; [ "$(json_field used_bytes)" = 0 ] && pass || fail "after the runs the lease holds $(json_field used_bytes)"

# 8 processes against one lease: each holds 24 MiB (8 x 24 < 256), and a
# ninth of 96 MiB does not fit
DIRS=()
for i in $(seq 1 8); do
  mkfifo "$T_DIR/in$i"
  (TESSERA_LEASE=$ID LD_PRELOAD=$OCL_SHIM "$OCL_TENANT" hold "$R" $((24 * MIB)) <"$T_DIR/in$i" >"$T_DIR/out$i" 2>&1 &)
  exec {fd}>"$T_DIR/in$i"; DIRS+=("$fd")
done
for i in $(seq 1 8); do
  for _ in $(seq 1 500); do grep -q . "$T_DIR/out$i" 2>/dev/null && break; sleep 0.02; done
done
ready=$(cat "$T_DIR"/out* | grep -c '^ready$' || true)
[ "$ready" = 8 ] && pass || fail "8 tenants: $ready got their 24 MiB: $(cat "$T_DIR"/out*)"
t lease show "$ID" --json
[ "$(json_field used_bytes)" = $((8 * 24 * MIB)) ] && pass || fail "8 tenants of 24 MiB: the lease holds $(json_field used_bytes)"
[ "$(json_field processes)" = 8 ] && pass || fail "8 tenants: the lease counts $(json_field processes) processes"
out=$(TESSERA_LEASE=$ID LD_PRELOAD=$OCL_SHIM "$OCL_TENANT" hold "$R" $((96 * MIB)) </dev/null)
[ "$out" = "refused -4" ] && pass || fail "a ninth tenant past the limit: $out"
for fd in "${DIRS[@]}"; do exec {fd}>&-; done
for _ in $(seq 1 500); do
  t lease show "$ID" --json; [ "$(json_field used_bytes)" = 0 ] && break; sleep 0.02
done
[ "$(json_field used_bytes)" = 0 ] && pass || fail "after the 8 tenants exited the lease holds $(json_field used_bytes)"

# a SIGKILLed tenant: the daemon's reaper gives its memory back
mkfifo "$T_DIR/kin"
TESSERA_LEASE=$ID LD_PRELOAD=$OCL_SHIM "$OCL_TENANT" hold "$R" $((64 * MIB)) <"$T_DIR/kin" >"$T_DIR/kout" 2>&1 &
VICTIM=$!
exec {kfd}>"$T_DIR/kin"
for _ in $(seq 1 500); do grep -q ready "$T_DIR/kout" && break; sleep 0.02; done
t lease show "$ID" --json; [ "$(json_field used_bytes)" = $((64 * MIB)) ] && pass || fail "the victim holds $(json_field used_bytes)"
kill -KILL "$VICTIM"; wait "$VICTIM" 2>/dev/null || true
exec {kfd}>&-
for _ in $(seq 1 300); do
  t lease show "$ID" --json; [ "$(json_field used_bytes)" = 0 ] && break; sleep 0.05
done
[ "$(json_field used_bytes)" = 0 ] && pass || fail "a SIGKILLed tenant's 64 MiB were not reaped: $(json_field used_bytes)"

# no lease for the device: the policy. A lease on another device is no lease here.
t lease create --device 1 --mem 1GiB --for 10m --json; OTHER=$(json_field id)
out=$(TESSERA_LEASE=$OTHER LD_PRELOAD=$OCL_SHIM TESSERA_POLICY=deny "$OCL_TENANT" hold "$R" $((1 * MIB)) </dev/null)
[ "$out" = "refused -4" ] && pass || fail "deny, and no lease for this device: $out"
out=$(TESSERA_LEASE=$OTHER LD_PRELOAD=$OCL_SHIM "$OCL_TENANT" hold "$R" $((1 * MIB)) </dev/null)
[ "$out" = "ready" ] && pass || fail "pass, and no lease for this device: $out"

# expiry with the signal action: the program `tessera run` started under a
# lease given with --lease is ended (signals never reach root or the
# daemon's user: as root, an ordinary user runs it; a lease run creates
# lasts as long as its command)
if [ "$(id -u)" -eq 0 ] && command -v useradd >/dev/null && command -v setpriv >/dev/null; then
  id tsr-olive >/dev/null 2>&1 || useradd --no-create-home --shell /usr/sbin/nologin tsr-olive
  t --as tsr-olive lease create --device 0 --mem 64MiB --for 2s --on-expiry signal --json; OLIVE=$(json_field id)
  t --as tsr-olive run --lease "$OLIVE" -- \
    sh -c "sleep 30 | POCL_CACHE_DIR=/tmp \"$OCL_TENANT\" hold env $MIB"
  expect_rc 143 "an OpenCL program at its lease's signal expiry (128 + SIGTERM)"
else
  echo "NOTE: not root: no ordinary user whose program the signal action may end"
fi

# expiry: a lease that ends refuses every allocation from then on
t lease create --device 0 --mem 256MiB --for 2s --json; SHORT=$(json_field id)
sleep 3
out=$(TESSERA_LEASE=$SHORT LD_PRELOAD=$OCL_SHIM "$OCL_TENANT" hold "$REGIONS/lease-$SHORT.region" $MIB </dev/null 2>&1 || true)
grep -q "refused -4\|FAIL: region" <<<"$out" && pass || fail "an expired lease still admits: $out"

# with NVML's GPUs (the fake NVML), declared OpenCL devices follow them
FAKE_NVML=$BIN/../tests/libfake_nvml.so
if [ -f "$FAKE_NVML" ]; then
  printf '[daemon]\ndevices = auto\n[device.0]\nkind = opencl\nopencl = pthread-*\nmemory = 4GiB\n[device.1]\nmemory = 8GiB\n' >"$T_DIR/auto.conf"
  out=$("$TESSERAD" --config "$T_DIR/auto.conf" --state-dir "$T_DIR/auto" --nvml-library "$FAKE_NVML" --check 2>&1)
  grep -q "^device 0: .*, cuda, pci 0000:01:00.0, opencl - (nvml)$" <<<"$out" && pass || fail "NVML's first GPU with its PCI bus id: $out"
  grep -q "^device 2: OpenCL pthread-\*, 4 GiB .*, opencl, pci -, opencl pthread-\* (config)" <<<"$out" && pass ||
    fail "the declared OpenCL device after NVML's two GPUs: $out"
  grep -q "1 declared CUDA device(s) are not used" <<<"$out" && pass || fail "the declared CUDA device is said to be unused: $out"
else
  echo "NOTE: the fake NVML is not built; devices = auto with NVML not checked"
fi

finish
