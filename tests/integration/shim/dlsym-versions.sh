# dlsym-versions.sh: a library bound to dlsym's and dlvsym's old version
# (CUDA's own in the PyTorch wheels are) gets the hooks as a program bound
# to the new one does: through libtessera-cuda.so,
# libtessera-opencl.so, both in either order, and libtessera-preload.so. A
# name no shim hooks is still answered for the library that asked
# (RTLD_NEXT from it finds nothing after it). A lookup of dlsym or dlvsym
# themselves, by either, at either version, is answered by the shim, and
# the dlsym so found still hands out the hooks: a program cannot fetch
# libc's dlsym by name and walk past the shim. A mutant shim that exports
# dlsym and dlvsym at GLIBC_2.34 alone (the shims before this test) must
# fail the same check on the old library's lookups, and only there.
source "$(dirname "$0")/env.sh"
: "${PROBE:?PROBE must name tsr_dlsym_probe}" "${MUTANT:?MUTANT must name the one-version shim}"

# held LABEL PRELOAD CUDA_ANSWER OCL_ANSWER DL_ANSWER: every lookup of
# dlsym_probe under LD_PRELOAD=PRELOAD answered by the objects named
# (OCL_ANSWER is checked where libOpenCL.so.1 loads; DL_ANSWER answers the
# lookups of dlsym and dlvsym themselves); prints what differs
held() {
  local label=$1 out bad=0 who n want
  out=$(LD_PRELOAD="$2" "$PROBE" 2>&1) || { echo "$label: dlsym_probe failed: $out"; return 1; }
  for who in new old; do
    for n in cuMemAlloc_v2 cuGetProcAddress_v2 via-libc-dlsym clCreateBuffer vclCreateBuffer \
             libc-dlsym libc-dlvsym vlibc-dlsym vlibc-dlvsym; do
      case $n in
        via-*) want=$3 ;;
        *clCreateBuffer) [ -n "$OCL_LOADS" ] || continue; want=$4 ;;
        *libc-dl*) want=$5 ;;
        *) want=$3 ;;
      esac
      grep -qx "$who $n $want" <<<"$out" || {
        echo "$label: $who $n: want $want, got '$(grep "^$who $n " <<<"$out" | cut -d' ' -f3)'"
        bad=1
      }
    done
  done
  grep -qx "old next-self none" <<<"$out" || {
    echo "$label: RTLD_NEXT from the old library: $(grep "^old next-self" <<<"$out")"
    bad=1
  }
  return $bad
}

OCL_LOADS=
grep -q "^new clCreateBuffer" <<<"$("$PROBE" 2>&1)" && OCL_LOADS=1
[ -n "$OCL_LOADS" ] || echo "note: no libOpenCL.so.1 here; the OpenCL lookups are left out"
CUDA=$(basename "$SHIM")

held "no shim" "" libcuda.so.1 libOpenCL.so.1 libc.so.6 && pass || fail "without a shim, the driver answers"
held "cuda shim" "$SHIM" "$CUDA" libOpenCL.so.1 "$CUDA" && pass || fail "libtessera-cuda.so, old and new dlsym"
if [ -n "${OCL_SHIM:-}" ]; then
  OCL=$(basename "$OCL_SHIM")
  held "opencl shim" "$OCL_SHIM" libcuda.so.1 "$OCL" "$OCL" && pass || fail "libtessera-opencl.so, old and new dlsym"
  held "cuda then opencl" "$SHIM:$OCL_SHIM" "$CUDA" "$OCL" "$CUDA" && pass || fail "both shims, CUDA's first"
  held "opencl then cuda" "$OCL_SHIM:$SHIM" "$CUDA" "$OCL" "$OCL" && pass || fail "both shims, OpenCL's first"
fi
if [ -n "${PRELOAD_SO:-}" ]; then
  P=$(basename "$PRELOAD_SO")
  held "preload" "$PRELOAD_SO" "$P" "$P" "$P" && pass || fail "libtessera-preload.so, old and new dlsym"
fi

# the mutant: the new lookups are hooked, the old ones reach the driver
M=$(basename "$MUTANT")
out=$(held "mutant" "$MUTANT" "$M" libOpenCL.so.1 "$M") || true
if [ -n "$out" ] && ! grep -qv "^mutant: old " <<<"$out"; then
  pass
else
  fail "the one-version mutant was not caught on the old lookups alone: ${out:-it passed}"
fi
finish
