# libtessera-opencl.so in the node-wide mode, as an admin sets it up: the
# shim preloaded for every process (here LD_PRELOAD without TESSERA_LEASE
# stands in for /etc/ld.so.preload), users who run OpenCL programs without
# `tessera run`, on PoCL:
#   - a user with an active lease on the OpenCL device is held to it, found
#     through the daemon's per-user index;
#   - a user without one is not governed under the policy `pass`, and is
#     refused under `deny`.
# Needs root (users are made); skipped otherwise.
source "$(dirname "$0")/../lease/lib.sh"
: "${OCL_SHIM:?OCL_SHIM must name libtessera-opencl.so}"
[ -x "$BIN/../tests/tsr_ocl_tenant" ] || skip "tsr_ocl_tenant is not built"
NAME=$("$BIN/../tests/tsr_ocl_tenant" name) || skip "no OpenCL device"
real_users tsr_ocl_tenant -- tsr-erin tsr-frank
cp "$OCL_SHIM" "$T_DIR/bin/libtessera-opencl.so"
chmod 755 "$T_DIR/bin/"*
unset TESSERA_LEASE TESSERA_POLICY
REGIONS=$T_DIR/regions
MIB=1048576
conf() {
  {
    printf '[daemon]\ndevices = config\nsync = none\nregion_dir = %s\n' "$REGIONS"
    for line in "$@"; do echo "$line"; done
    printf '\n[device.0]\nkind = opencl\nopencl = %s*\nmemory = 4GiB\n' "${NAME:0:20}"
  } >"$T_CONF"
}
# hold_as USER BYTES [REGION]: one buffer under the preloaded shim, no TESSERA_LEASE
hold_as() {
  local u=$1 bytes=$2 region=${3:--}
  mkdir -p "$T_DIR/cache-$u" && chown "$u" "$T_DIR/cache-$u"
  as "$u" env -u TESSERA_LEASE LD_PRELOAD="$T_DIR/bin/libtessera-opencl.so" TESSERA_REGION_DIR="$REGIONS" \
    POCL_CACHE_DIR="$T_DIR/cache-$u" HOME="$T_DIR/cache-$u" \
    "$T_DIR/bin/tsr_ocl_tenant" hold "$region" "$bytes" </dev/null 2>"$T_DIR/err" || true
}

conf
start_daemon
t --as tsr-erin lease create --device 0 --mem 256MiB --for 1h --json; expect_rc 0; ID=$(json_field id)
R=$REGIONS/lease-$ID.region
# within the lease, then past it: the lease is found without TESSERA_LEASE
out=$(hold_as tsr-erin $((64 * MIB)) "$R")
ok '[ "$out" = ready ]' "a user's program within the lease found through the index: $out"
out=$(hold_as tsr-erin $((512 * MIB)) "$R")
ok '[ "$out" = "refused -4" ]' "a user's program past the lease, no TESSERA_LEASE: $out"
t lease show "$ID" --json
ok '[ "$(json_field used_bytes)" = 0 ] && [ "$(json_field denied)" -ge 1 ]' "the lease counted the refusal and holds nothing after: $OUT"
# a user without a lease: not governed under pass ...
out=$(hold_as tsr-frank $((512 * MIB)))
ok '[ "$out" = ready ]' "a user without a lease under pass is not governed: $out"
stop_daemon
# ... refused under deny
conf "policy = deny"
start_daemon
out=$(hold_as tsr-frank $((64 * MIB)))
ok '[ "$out" = "refused -4" ]' "a user without a lease under deny is refused: $out"
ok 'grep -q "no active lease of this user and the node.s policy is deny" "$T_DIR/err"' "the refusal says why: $(cat "$T_DIR/err")"
out=$(hold_as tsr-erin $((64 * MIB)) "$R")
ok '[ "$out" = ready ]' "a user with a lease under deny keeps it: $out"
finish
