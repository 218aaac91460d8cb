# A lease resized under a running tenant (the shim over the driver double):
# one process, started once, is refused an allocation at the old limit and
# granted it after a grow; granted before a shrink and refused after it;
# sees the new size in cuMemGetInfo and the new SM share in its region; a
# shrink below what it holds is refused with the usage in the message, and
# --force applies it (nothing more is granted until the process is under
# it); the daemon never takes any of it for tampering.
source "$(dirname "$0")/env.sh"
MIB=1048576
write_config
start_daemon
lease_create --device 0 --mem 2GiB --sm 30%
REGION=$REGIONS/lease-$ID.region
mkfifo "$T_DIR/in"
LD_PRELOAD=$SHIM TESSERA_LEASE=$ID "$TENANT" steps "$REGION" <"$T_DIR/in" >"$T_DIR/out" 2>"$T_DIR/err" &
TP=$!
exec 3>"$T_DIR/in"
LINES=0
# step CMD: sends CMD, waits (at most 5 s) for its one answer, sets ANS
step() {
  echo "$1" >&3
  LINES=$((LINES + 1))
  for _ in $(seq 1 250); do [ "$(wc -l <"$T_DIR/out")" -gt "$LINES" ] && break; sleep 0.02; done
  ANS=$(sed -n "$((LINES + 1))p" "$T_DIR/out")
}
for _ in $(seq 1 250); do [ -s "$T_DIR/out" ] && break; sleep 0.02; done
ok 'grep -q "^ready=1" "$T_DIR/out"' "the tenant starts: $(cat "$T_DIR/out" "$T_DIR/err")"
resize() { t lease resize "$ID" "$@" --json; }
used() { t lease show "$ID" --json; json_field used_bytes; }

step info; ok '[ "$ANS" = "total=$((2048 * MIB)) free=$((2048 * MIB - $(used)))" ]' "the view at 2 GiB: $ANS"
step "alloc $((1024 * MIB))"; ok '[ "$ANS" = alloc=CUDA_SUCCESS ]' "1 GiB of 2: $ANS"
step "alloc $((1024 * MIB))"; ok '[ "$ANS" = alloc=CUDA_ERROR_OUT_OF_MEMORY ]' "a second 1 GiB does not fit 2 GiB: $ANS"
# a grow: the same process, the same allocation, granted
resize --mem 4GiB; expect_rc 0 "grow to 4 GiB"
step "alloc $((1024 * MIB))"; ok '[ "$ANS" = alloc=CUDA_SUCCESS ]' "the refused 1 GiB granted after the grow: $ANS"
step info; ok '[ "$ANS" = "total=$((4096 * MIB)) free=$((4096 * MIB - $(used)))" ]' "the view at 4 GiB: $ANS"
# the SM share, through the tenant's own mapping made before the resize
step share; ok '[ "$ANS" = share=300000 ]' "share 30%: $ANS"
resize --sm 60%; expect_rc 0 "share to 60%"
step share; ok '[ "$ANS" = share=600000 ]' "share 60% seen by the running tenant: $ANS"
# a shrink below what it holds (its context and 2 GiB): refused, with the usage
HELD=$(used)
resize --mem 2GiB; expect_rc 1 "a shrink below the usage"
expect_err "processes hold .* \\($HELD bytes\\), more than the new limit 2 GiB"
t lease show "$ID" --json; ok '[ "$(json_field bytes)" = $((4096 * MIB)) ]' "a refused shrink changed nothing: $OUT"
step free; ok '[ "$ANS" = free=CUDA_SUCCESS ]' "one 1 GiB freed: $ANS"
# allowed before the shrink, refused after it
resize --mem 2GiB; expect_rc 0 "shrink to 2 GiB, now above the usage"
step "alloc $((1024 * MIB))"; ok '[ "$ANS" = alloc=CUDA_ERROR_OUT_OF_MEMORY ]' "1 GiB refused after the shrink: $ANS"
step info; ok '[ "$ANS" = "total=$((2048 * MIB)) free=$((2048 * MIB - $(used)))" ]' "the view at 2 GiB again: $ANS"
# --force below the usage: applied; nothing is granted until under it
resize --mem 1GiB --force; expect_rc 0 "a forced shrink"
t lease show "$ID" --json; ok '[ "$(json_field bytes)" = $((1024 * MIB)) ] && [ "$(json_field tampered)" = false ]' \
  "1 GiB, and not taken for tampering: $OUT"
step "alloc $MIB"; ok '[ "$ANS" = alloc=CUDA_ERROR_OUT_OF_MEMORY ]' "over the new limit: nothing granted: $ANS"
step info; ok '[ "$ANS" = "total=$((1024 * MIB)) free=0" ]' "the view over the limit: $ANS"
step free; ok '[ "$ANS" = free=CUDA_SUCCESS ]' "the tenant frees: $ANS"
step "alloc $((256 * MIB))"; ok '[ "$ANS" = alloc=CUDA_SUCCESS ]' "under the limit again, 256 MiB granted: $ANS"
# and across a restart of the daemon: the counters a shrink left are no tampering
stop_daemon
start_daemon
t lease show "$ID" --json; ok '[ "$(json_field tampered)" = false ] && [ "$(json_field bytes)" = $((1024 * MIB)) ]' \
  "after a restart: $OUT"
step "alloc $((1024 * MIB))"; ok '[ "$ANS" = alloc=CUDA_ERROR_OUT_OF_MEMORY ]' "the limit holds after the restart: $ANS"
step quit
wait "$TP"; ok '[ $? -eq 0 ]' "the tenant exits cleanly: $(cat "$T_DIR/err")"
stop_daemon
finish
