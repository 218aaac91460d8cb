# The node-wide mode, as an admin sets it up: the shim preloaded for every
# process (here LD_PRELOAD without TESSERA_LEASE stands in for
# /etc/ld.so.preload), users who log in again without `tessera run`.
#   - a user with an active lease is held to it, found through the daemon's
#     per-user index <region_dir>/user-<uid>.leases;
#   - a user without one is not governed under the policy `pass`, and gets
#     out-of-memory under `deny`; root is never governed this way;
#   - the index is the daemon's, readable by its user alone: another user
#     cannot read it, its user cannot change it (chmod, rewrite), and a user
#     cannot take another's lease by naming it.
source "$(dirname "$0")/../lease/lib.sh"
real_users tsr_paths_fake -- tsr-carol tsr-dave
unset CUDA_VISIBLE_DEVICES TESSERA_LEASE TESSERA_POLICY  # the fake honours CUDA_VISIBLE_DEVICES
cp "$BIN/../lib/libtessera-cuda.so" "$BIN/../tests/fakes/libcuda.so.1" "$T_DIR/bin/"
chmod 755 "$T_DIR/bin/"*
REGIONS=$T_DIR/regions
PATHS=$T_DIR/bin/tsr_paths_fake
CHUNK=$((256 << 20)); CTX=$((524 << 20))

# run_as USER: the tenant program under the preloaded shim, no TESSERA_LEASE
run_as() {
  local u=$1; shift
  as "$u" env -u TESSERA_LEASE LD_PRELOAD="$T_DIR/bin/libtessera-cuda.so" \
    TESSERA_REAL_LIBCUDA="$T_DIR/bin/libcuda.so.1" LD_LIBRARY_PATH="$T_DIR/bin" \
    TESSERA_REGION_DIR="$REGIONS" "$@" "$PATHS" 2>&1 || true # a refusal ends the program: that is checked
}
chunks() { sed -n 's/.*plain_chunks=\([0-9]*\).*/\1/p' <<<"$1"; }

write_config "region_dir = $REGIONS"
start_daemon
t --as tsr-carol lease create --device 0 --mem 4GiB --for 1h --json; expect_rc 0
C=$(json_field id); LIMIT=$(json_field bytes)
MAX=$(( (LIMIT - CTX) / CHUNK )); MIN=$(( (LIMIT - CTX - (64 << 20)) / CHUNK ))
carol=$(id -u tsr-carol)
idx="$REGIONS/user-$carol.leases"
ok '[ -f "$idx" ] && [ "$(stat -c %U:%a "$idx")" = root:440 ]' "carol's index: $(ls -la "$REGIONS")"
ok 'head -1 "$idx" | grep -qx "tessera-leases 1" && grep -q "^$C 0 " "$idx"' "index content: $(cat "$idx" 2>&1)"
ok 'as tsr-carol cat "$idx" >/dev/null' "carol cannot read her own index"
ok '! as tsr-dave cat "$idx" >/dev/null 2>&1' "dave read carol's index"
ok '! as tsr-carol chmod 600 "$idx" 2>/dev/null' "carol changed her index's mode"
ok '! as tsr-carol sh -c "printf \"tessera-leases 1\n\" >$idx" 2>/dev/null' "carol rewrote her index"
ok 'grep -q "^$C 0 " "$idx"' "carol's index changed: $(cat "$idx" 2>&1)"

# carol, logged in again: held to her lease without naming it
out=$(run_as tsr-carol)
n=$(chunks "$out")
ok '[ -n "$n" ] && [ "$n" -ge $MIN ] && [ "$n" -le $MAX ]' "carol without TESSERA_LEASE got $n chunks (want $MIN..$MAX): $out"
# two leases on the device: the newer one governs (as the backstop attributes)
t --as tsr-carol lease create --device 0 --mem 2GiB --for 1h --json; expect_rc 0
C2=$(json_field id); LIMIT2=$(json_field bytes)
out=$(run_as tsr-carol)
n=$(chunks "$out"); max2=$(( (LIMIT2 - CTX) / CHUNK ))
ok '[ -n "$n" ] && [ "$n" -ge $((max2 - 1)) ] && [ "$n" -le $max2 ]' "with a 4 GiB and a newer 2 GiB lease carol got $n chunks (want the 2 GiB one's $max2): $out"
t --as tsr-carol lease release "$C2"; expect_rc 0
# dave has no lease: under pass he is not governed
out=$(run_as tsr-dave)
n=$(chunks "$out")
ok '[ -n "$n" ] && [ "$n" -gt 300 ]' "dave (no lease, policy pass) got $n chunks: $out"
# dave cannot take carol's lease by naming it: one clear line, his policy
out=$(run_as tsr-dave TESSERA_LEASE=$C TESSERA_POLICY=deny)
ok 'grep -q "tessera: lease $C is not enforced here" <<<"$out" && grep -q "error=CUDA_ERROR_OUT_OF_MEMORY" <<<"$out"' \
  "dave naming carol's lease under deny: $out"
# root is never governed by the index
out=$(env -u TESSERA_LEASE LD_PRELOAD="$T_DIR/bin/libtessera-cuda.so" TESSERA_REAL_LIBCUDA="$T_DIR/bin/libcuda.so.1" \
  LD_LIBRARY_PATH="$T_DIR/bin" TESSERA_REGION_DIR="$REGIONS" "$PATHS" 2>&1 || true)
n=$(chunks "$out")
ok '[ -n "$n" ] && [ "$n" -gt 300 ]' "root got $n chunks: $out"

# the release removes the index: carol is ungoverned again (policy pass)
t --as tsr-carol lease release "$C"; expect_rc 0
ok '[ ! -e "$idx" ]' "carol's index outlived her last lease"

# under the node policy deny a user without a lease gets out-of-memory
stop_daemon
write_config "region_dir = $REGIONS" "policy = deny"
start_daemon
ok '[ "$(cat "$REGIONS/node.policy" 2>/dev/null)" = deny ]' "node.policy: $(cat "$REGIONS/node.policy" 2>&1)"
out=$(run_as tsr-dave)
ok 'grep -q "error=CUDA_ERROR_OUT_OF_MEMORY" <<<"$out" && grep -q "policy is deny" <<<"$out"' "dave under deny: $out"
t --as tsr-carol lease create --device 0 --mem 4GiB --for 1h --json; expect_rc 0
out=$(run_as tsr-carol)
n=$(chunks "$out")
ok '[ -n "$n" ] && [ "$n" -ge $MIN ] && [ "$n" -le $MAX ]' "carol under deny with a lease got $n chunks: $out"
finish
