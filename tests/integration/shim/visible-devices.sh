# CUDA_VISIBLE_DEVICES on a two-device fake: one lease per device, and a
# tenant allocating 64 MiB on CUDA device 0 and 128 MiB on CUDA device 1
# with the variable unset, as ordinals in both orders and as GPU UUIDs in
# both orders. Each allocation must be charged to the lease of the physical
# device that holds it: the device the variable names, and the one the
# driver charged (the fake's per-process bytes).
source "$(dirname "$0")/env.sh"
U0=GPU-facec0da-0000-0000-0000-000000000000
U1=GPU-facec0da-0000-0000-0000-000000000001
export FAKE_CUDA_DEVICES=2
{
  printf '[daemon]\ndevices = config\nsync = none\n'
  printf '\n[device.0]\nname = NVIDIA H100 80GB HBM3\nmemory = 80GiB\nsms = 132\nuuid = %s\n' "$U0"
  printf '\n[device.1]\nname = NVIDIA H100 80GB HBM3\nmemory = 80GiB\nsms = 132\nuuid = %s\n' "$U1"
} >"$T_CONF"
start_daemon
lease_create --device 0 --mem 4GiB; A=$ID
lease_create --device 1 --mem 4GiB; B=$ID
RA=$REGIONS/lease-$A.region RB=$REGIONS/lease-$B.region
MIB=1048576
CTX="" # what the shim charges a context: taken from the first run
IGNORED=0
for cvd in unset 0,1 1,0 "$U0,$U1" "$U1,$U0"; do
  # the physical device of CUDA device 0 and 1 under this value
  case $cvd in
    unset | 0,1 | "$U0,$U1") want0=0 want1=1 ;;
    *) want0=1 want1=0 ;;
  esac
  if [ "$cvd" = unset ]; then
    out=$(TESSERA_LEASE=$A,$B LD_PRELOAD=$SHIM "$TENANT" devices "$RA" "$RB" 2>&1) || true
  else
    out=$(CUDA_VISIBLE_DEVICES=$cvd TESSERA_LEASE=$A,$B LD_PRELOAD=$SHIM "$TENANT" devices "$RA" "$RB" 2>&1) || true
  fi
  echo "CUDA_VISIBLE_DEVICES=$cvd: $(tr '\n' ' ' <<<"$out")"
  field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$out" | head -n1; }
  ok '[ "$(field cuda0_alloc)" = CUDA_SUCCESS ] && [ "$(field cuda1_alloc)" = CUDA_SUCCESS ]' \
    "CUDA_VISIBLE_DEVICES=$cvd: the allocations failed: $out"
  # where the driver put them (the fake's bytes per physical device) ...
  p0=$(field phys0_bytes) p1=$(field phys1_bytes)
  if [ "$(field cuda0_uuid)" = "GPU-facec0da-0000-0000-0000-00000000000$want0" ]; then
    ok '[ "${p0:-0}" -ge $(((want0 == 0 ? 1 : 2) * 64 * MIB)) ] && [ "${p1:-0}" -ge $(((want1 == 0 ? 1 : 2) * 64 * MIB)) ]' \
      "CUDA_VISIBLE_DEVICES=$cvd: the driver holds $p0 and $p1 bytes on devices 0 and 1"
  else
    echo "NOTE: the fake driver ignores CUDA_VISIBLE_DEVICES=$cvd (CUDA device 0 is $(field cuda0_uuid)): the mapping below is checked against the device it used"
    IGNORED=$((IGNORED + 1))
    want0=$(field cuda0_uuid); want0=${want0: -1}; want1=$(field cuda1_uuid); want1=${want1: -1}
  fi
  # ... and which lease paid: the one of that physical device, context and all
  au=$(field a_used) bu=$(field b_used)
  [ -n "$CTX" ] || CTX=$((au - 64 * MIB))
  wa=0 wb=0
  if [ "$want0" = 0 ]; then wa=$((wa + CTX + 64 * MIB)); else wb=$((wb + CTX + 64 * MIB)); fi
  if [ "$want1" = 0 ]; then wa=$((wa + CTX + 128 * MIB)); else wb=$((wb + CTX + 128 * MIB)); fi
  ok '[ "$au" = "$wa" ] && [ "$bu" = "$wb" ]' \
    "CUDA_VISIBLE_DEVICES=$cvd: lease $A (device 0) holds ${au:-?} and lease $B (device 1) ${bu:-?}; wanted $wa and $wb"
  ok '[ "$(field after_a_used)" = $((wa - (want0 == 0 ? 64 : 0) * MIB - (want1 == 0 ? 128 : 0) * MIB)) ] &&
      [ "$(field after_b_used)" = $((wb - (want0 == 1 ? 64 : 0) * MIB - (want1 == 1 ? 128 : 0) * MIB)) ]' \
    "CUDA_VISIBLE_DEVICES=$cvd: the frees were credited elsewhere: $out"
  sa=$("$CHECK" stats "$RA") sb=$("$CHECK" stats "$RB")
  ok 'grep -q "^used=0 processes=0 " <<<"$sa" && grep -q "^used=0 processes=0 " <<<"$sb"' \
    "CUDA_VISIBLE_DEVICES=$cvd: after the tenant exited: $sa / $sb"
done
[ "$IGNORED" -eq 0 ] || echo "NOTE: the fake driver ignored CUDA_VISIBLE_DEVICES in $IGNORED of 4 runs: the permutations were not exercised"
stop_daemon
finish
