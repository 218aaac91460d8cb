# The shims preloaded into every process (the node-wide mode) must leave a
# program that never uses a GPU as it was:
#   - a library that finds libc's getenv with dlsym(RTLD_NEXT, ...) gets
#     libc's, not its own (glibc answers RTLD_NEXT relative to the caller:
#     the shims' dlsym passes the caller on), under either shim, both, and
#     libtessera-preload.so;
#   - a lookup of a name that is no hooked entry point (cuserid) loads no
#     driver, and still finds libc's;
#   - ordinary programs run as before, and say nothing.
# Any user; no daemon.
set -euo pipefail
: "${PROBE:?}" "${WRAP:?}" "${CUDA_SHIM:?}" "${OCL_SHIM:?}" "${PRELOAD_SHIM:?}" "${FAKE:?}"
FAILS=0
CHECKS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { CHECKS=$((CHECKS + 1)); if ! eval "$1"; then fail "$2"; fi; }
unset TESSERA_LEASE TESSERA_POLICY TESSERA_REGION_DIR
export TESSERA_REAL_LIBCUDA=$FAKE # what a hooked lookup would load

for shims in "$CUDA_SHIM" "$OCL_SHIM" "$CUDA_SHIM:$OCL_SHIM" "$OCL_SHIM:$CUDA_SHIM" "$PRELOAD_SHIM"; do
  name=$(basename "${shims%%:*}")${shims//[^:]/}
  # the wrapper after the shims: the order in which RTLD_NEXT from it must
  # not be answered as from a shim
  set +e
  out=$(LD_PRELOAD="$shims:$WRAP" TSR_PROBE_VALUE=libc "$PROBE" getenv TSR_PROBE_VALUE 2>&1)
  rc=$?
  set -e
  ok '[ "$rc" = 0 ] && [ "$out" = "TSR_PROBE_VALUE=libc" ]' "getenv through dlsym(RTLD_NEXT) under $name: rc $rc: $out"
  out=$(LD_PRELOAD="$shims:$WRAP" "$PROBE" getenv TSR_WRAPPED 2>&1 || true)
  ok '[ "$out" = "TSR_WRAPPED=yes" ]' "the wrapper did not answer under $name: $out"
  # and before them
  out=$(LD_PRELOAD="$WRAP:$shims" TSR_PROBE_VALUE=libc "$PROBE" getenv TSR_PROBE_VALUE 2>&1 || true)
  ok '[ "$out" = "TSR_PROBE_VALUE=libc" ]' "the wrapper first, then $name: $out"
  # a name that only begins as the driver's do
  out=$(LD_PRELOAD="$shims" "$PROBE" lookup cuserid 2>&1)
  ok 'grep -q "^found=1 .* cuda=0 " <<<"$out"' "dlsym of cuserid under $name loaded a driver or missed libc's: $out"
  out=$(LD_PRELOAD="$shims" "$PROBE" lookup clock_gettime 2>&1)
  ok 'grep -q "^found=1 .* cuda=0 " <<<"$out"' "dlsym of clock_gettime under $name: $out"
  # ordinary programs: the same output, nothing on stderr
  for cmd in "true" "ls /" "sh -c 'echo hi'"; do
    want=$(sh -c "$cmd" 2>&1)
    got=$(LD_PRELOAD="$shims" sh -c "$cmd" 2>&1)
    ok '[ "$got" = "$want" ]' "'$cmd' under $name said: $got"
  done
done
# the check can fail: a lookup of a hooked entry does load the library
# named (the driver, or the ICD loader), under each object that hooks it
export TESSERA_REAL_LIBOPENCL=$FAKE # any file with "libcuda" in its name shows in the maps
for shims in "$CUDA_SHIM" "$PRELOAD_SHIM"; do
  out=$(LD_PRELOAD="$shims" "$PROBE" lookup cuMemAlloc_v2 2>&1)
  ok 'grep -q " cuda=1 " <<<"$out"' "a hooked entry's lookup under $(basename "$shims") did not load the driver: $out"
done
for shims in "$OCL_SHIM" "$PRELOAD_SHIM"; do
  out=$(LD_PRELOAD="$shims" "$PROBE" lookup clCreateBuffer 2>&1)
  ok 'grep -q " cuda=1 " <<<"$out"' "an OpenCL entry's lookup under $(basename "$shims") did not load the loader: $out"
done
if command -v python3 >/dev/null; then
  out=$(LD_PRELOAD="$PRELOAD_SHIM" python3 -c 'import os; print(os.environ.get("HOME") is not None)' 2>&1)
  ok '[ "$out" = True ]' "python3 under libtessera-preload.so: $out"
fi
echo "$CHECKS checks, $FAILS failed"
[ "$FAILS" -eq 0 ]
