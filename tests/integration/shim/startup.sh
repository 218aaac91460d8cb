# 64 tenants released together by one barrier, each doing cuInit, a context
# and one allocation: natively first (the baseline), then under the shim.
# Under the shim every one must finish within 20 s, in its own slot, with
# the region counting all 64 at once. The spread of attach times is printed;
# nothing is asserted of it (CI machines are shared).
source "$(dirname "$0")/env.sh"
start_daemon
lease_create --device 0 --mem 40GiB  # 64 contexts of 524 MiB
"$CHECK" start "$TENANT" - - 64 && pass || fail "64 tenants without the shim"
export TESSERA_LEASE=$ID
"$CHECK" start "$TENANT" "$SHIM" "$REGIONS/lease-$ID.region" 64 && pass || fail "64 tenants under the shim"
stop_daemon
finish
