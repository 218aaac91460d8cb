# The stress of stress.sh with 4 of the 16 tenants SIGKILLed a third of the
# way through: the daemon's reaper frees their slots and credits what they
# held within 2 s while the others go on, and every byte comes back.
source "$(dirname "$0")/env.sh"
start_daemon
lease_create --device 0 --mem 12GiB
export TESSERA_LEASE=$ID
"$CHECK" stress "$TENANT" "$SHIM" "$REGIONS/lease-$ID.region" 16 4 4500 "$EXTRA" \
  "$TESSERA --socket $T_SOCK lease show $ID --json" && pass || fail "the stress run with kills (above)"
t lease show "$ID" --json
[ "$(json_field used_bytes)" = 0 ] && pass || fail "lease show after the run: $OUT"
stop_daemon
finish
