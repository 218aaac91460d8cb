# What ends with a context or a pool is given back to the lease, once
#: one tenant under a 4 GiB lease holds memory through
# every context-bound path (pitch, managed, stream-ordered, an array, a
# module's statics, plain chunks up to the limit) and then
#   - resets the primary context: the lease is empty again, and the tenant
#     allocates up to the limit again;
#   - destroys a created context: the same;
#   - destroys a pool with live blocks: the blocks stay charged (plain
#     allocations past the lease are refused) until they are freed, and then
#     come back;
#   - releases the primary's last reference with memory held: nothing stays
#     charged.
# After each, frees of what the ended context held change nothing.
source "$(dirname "$0")/env.sh"
start_daemon
lease_create --device 0 --mem 4GiB
MIB=1048576; CTX=$((524 * MIB)); CHUNK=$((256 * MIB))
FULL=$(( (LIMIT - CTX) / CHUNK ))
# run CASE: one tenant process for CASE; sets OUT and TRC
run() {
  set +e
  OUT=$(env LD_PRELOAD="$SHIM" TESSERA_LEASE="$ID" "$TENANT" lifetimes "$1" "$REGIONS/lease-$ID.region" \
        2>"$T_DIR/tenant.err")
  TRC=$?
  set -e
  echo "== $1"; echo "$OUT"; cat "$T_DIR/tenant.err"
  ok '[ "$TRC" -eq 0 ] && [ "$(val done)" = 1 ]' "$1: the tenant ended with status $TRC"
  is context_used $CTX "the primary context alone"
  is full_chunks $FULL
}
val() { sed -n "s/^$1=\(.*\)$/\1/p" <<<"$OUT" | head -1; }
# is NAME EXPECTED [WHY]: the tenant's NAME= line says EXPECTED
is() {
  local got; got=$(val "$1")
  if [ "$got" = "$2" ]; then pass; else fail "$1=$got, expected $2${3:+ ($3)}"; fi
}
# at_most NAME MAX [WHY]
at_most() {
  local got; got=$(val "$1")
  if [ -n "$got" ] && [ "$got" -le "$2" ]; then pass; else fail "$1=$got, expected at most $2${3:+ ($3)}"; fi
}

for c in reset destroy; do
  run $c
  for p in pitch managed async array module; do is ${c}_$p CUDA_SUCCESS; done
  got=$(val ${c}_full_used)
  ok '[ -n "$got" ] && [ "$got" -gt $((LIMIT - CHUNK)) ]' "$c: held ${got:-nothing} of $LIMIT: not near the limit"
  is $c CUDA_SUCCESS
  is ${c}_stale_free_delta 0 "frees of what the ended context held must not be credited again"
  is ${c}_after_chunks $FULL "the lease must be whole again"
  if [ $c = reset ]; then is reset_used 0 "a reset gives back everything its context held"
  else is destroy_used $CTX "only the primary context left"; fi
done
run pool
is pool_destroy CUDA_SUCCESS
at_most pool_blocks $FULL
ok '[ "$(val pool_blocks)" -ge $((FULL - 1)) ]' "pool_blocks=$(val pool_blocks), expected about $FULL"
is pool_destroy_delta 0 "live blocks keep their charge"
at_most pool_plain_while_blocks $((FULL - $(val pool_blocks))) "plain allocations beside live blocks of a destroyed pool passed the lease"
is pool_freed_used $CTX "the freed blocks' bytes come back"
is pool_stale_free_delta 0
is pool_after_chunks $FULL
run release
is release_alloc CUDA_SUCCESS
is release CUDA_SUCCESS
is release_used 0 "the last release ends the primary context and what it held"
t lease show "$ID" --json
ok '[ "$(json_field used_bytes)" = 0 ]' "the lease still shows $(json_field used_bytes) bytes used after the tenants exited"
stop_daemon
finish
