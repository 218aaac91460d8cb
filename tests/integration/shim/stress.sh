# 16 tenants under one 12 GiB lease (16 contexts take 8.2 GiB of it) allocating and freeing at random through
# every hooked path (and freeing through the other path where the API
# allows), for 3 s, with a checker sampling the region and the driver: the
# limit is never passed at any instant, every refusal is out-of-memory, every
# success is memory the driver holds, and every byte comes back.
source "$(dirname "$0")/env.sh"
start_daemon
lease_create --device 0 --mem 12GiB
export TESSERA_LEASE=$ID
"$CHECK" stress "$TENANT" "$SHIM" "$REGIONS/lease-$ID.region" 16 0 3000 "$EXTRA" \
  "$TESSERA --socket $T_SOCK lease show $ID --json" && pass || fail "the stress run (above)"
t lease show "$ID"; echo "$OUT"
stop_daemon
finish
