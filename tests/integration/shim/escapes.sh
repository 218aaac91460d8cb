# The routes to device memory that escaped the lease,
# taken as a tenant would (escape.c) under a 2 GiB lease on the driver
# double: allocations captured from a stream, instantiated, uploaded and
# launched, never freed; the entries of the CUDA 2.0 ABI and the older
# versions of hooked entries, found by dlsym and by cuGetProcAddress at an
# old version; green contexts. What the driver holds for the tenant (the
# fake's per-process bytes) must stay within the lease, and what the lease
# was charged must come back when the driver frees it.
source "$(dirname "$0")/env.sh"
: "${ESCAPE:?ESCAPE must name tsr_shim_escape}"
start_daemon
lease_create --device 0 --mem 2GiB
REGION=$REGIONS/lease-$ID.region
MIB=1048576
CTX=$((524 * MIB)) # what the shim charges a context
run() { # run MODE ARGS...: the tenant under the shim with the lease; sets OUT
  set +e
  OUT=$(TESSERA_LEASE=$ID LD_PRELOAD=$SHIM "$ESCAPE" "$@" 2>"$T_DIR/escape.err")
  local rc=$?
  set -e
  echo "== escape $1: $(tr '\n' ' ' <<<"$OUT")| $(tr '\n' ' ' <<<"$(cat "$T_DIR/escape.err")")"
  ok '[ "$rc" -eq 0 ]' "escape $1 ended with status $rc"
}
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$OUT" | tail -n1; }
within_lease() { # within_lease WHAT: the driver holds no more than the lease
  local h c
  h=$(field held) c=$(field charged)
  ok '[ -n "$h" ] && [ "$h" -le "$LIMIT" ]' "$1: the driver holds ${h:-?} bytes for the tenant, the lease is $LIMIT"
  ok '[ -n "$c" ] && [ "$c" -le "$LIMIT" ]' "$1: the lease was charged ${c:-?} of $LIMIT"
}

# 1. stream capture: two 100 MiB allocations a round, never freed. Every
# round that fits is let through: (2 GiB - 524 MiB) / 200 MiB = 7. In the
# 8th each allocation fits what is left and the graph does not: it is
# refused where it would take its memory, which the first round's number
# picks: the upload, the launch, the instantiation that uploads.
for case in 0:upload 1:launch 2:instantiate; do
  run captured "$REGION" 100 40 "${case%%:*}"
  within_lease "captured allocations (from round ${case%%:*})"
  ok '[ "$(field rounds)" = 7 ] && [ "$(field rc)" = CUDA_ERROR_OUT_OF_MEMORY ] && [ "$(field step)" = "${case#*:}" ]' \
    "captured allocations: $(field rounds) rounds, stopped by $(field rc) at $(field step); wanted 7, out-of-memory at ${case#*:}"
done

# 2. the old entries
run v1 "$REGION"
for r in dlsym procaddr procaddr_v1; do
  # CUDA 7's primary-context entries and CUDA 2.0's cuCtxDestroy credit what
  # the retain and cuCtxCreate_v4 were charged
  ok 'grep -q "${r}_primary_release=CUDA_SUCCESS charged=$CTX credited=$CTX\b" <<<"$OUT"' \
    "$r: cuDevicePrimaryCtxRelease (CUDA 7) did not credit the context: $(grep "${r}_primary_release" <<<"$OUT")"
  ok 'grep -q "${r}_primary_reset=CUDA_SUCCESS credited=$CTX\b" <<<"$OUT"' \
    "$r: cuDevicePrimaryCtxReset (CUDA 7) did not credit the context: $(grep "${r}_primary_reset" <<<"$OUT")"
  ok 'grep -q "${r}_ctx_destroy=CUDA_SUCCESS charged=$CTX credited=$CTX\b" <<<"$OUT"' \
    "$r: cuCtxDestroy (CUDA 2.0) did not credit the context: $(grep "${r}_ctx_destroy" <<<"$OUT")"
  # the 32-bit entries are refused on a leased device, whatever the driver
  # would have done with them
  for e in ctx_create alloc pitch free array array3d; do
    ok '[ "$(field ${r}_$e)" = CUDA_ERROR_NOT_SUPPORTED ]' "$r: the CUDA 2.0 entry ($e) answered $(field ${r}_$e)"
  done
  ok 'grep -q "${r}_array=[^ ]* arrays=0 " <<<"$OUT" && grep -q "${r}_array3d=[^ ]* arrays=0 " <<<"$OUT"' \
    "$r: arrays made through the CUDA 2.0 entries: $(grep "${r}_array" <<<"$OUT" | tr '\n' ' ')"
  # the 32-bit queries answer as the driver does, the lease's numbers when they succeed
  ok '[ "$(field ${r}_meminfo)" = CUDA_ERROR_INVALID_CONTEXT ]' "$r: cuMemGetInfo (CUDA 2.0) answered $(field ${r}_meminfo), the driver's answer is INVALID_CONTEXT"
  ok 'grep -q "${r}_total=CUDA_SUCCESS total_value=$LIMIT\b" <<<"$OUT"' \
    "$r: cuDeviceTotalMem (CUDA 2.0) does not show the lease: $(grep "${r}_total" <<<"$OUT")"
done
within_lease "the old entries"

# 3. green contexts: refused on a leased device, by every route ...
run green "$REGION" 64
for r in linked dlsym procaddr; do
  ok '[ "$(field green_$r)" = CUDA_ERROR_NOT_SUPPORTED ]' "a green context ($r) under the lease: $(field green_$r)"
done
within_lease "green contexts"
ok '[ "$(field in_green)" = 0 ]' "allocations went on in a green context"
# ... and made where the process is not governed (no lease, policy pass)
set +e
OUT=$(LD_PRELOAD=$SHIM "$ESCAPE" green "$REGION" 64 2>&1)
set -e
ok '[ "$(field green_linked)" = CUDA_SUCCESS ] && [ "$(field green_dlsym)" = CUDA_SUCCESS ] && [ "$(field green_procaddr)" = CUDA_SUCCESS ]' \
  "a green context without a lease: $(tr '\n' ' ' <<<"$OUT")"

ok 'grep -q "^used=0 processes=0 " <<<"$("$CHECK" stats "$REGION")"' \
  "after the tenants exited: $("$CHECK" stats "$REGION")"
stop_daemon
finish
