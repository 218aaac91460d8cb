# NVML's memory queries under the shim show the lease: total = the limit,
# free = what the lease has left, used = total - free (v1, v2 with reserved
# 0, and through dlsym), against the fake NVML reading the driver double's
# state; without the shim, the device's own numbers.
source "$(dirname "$0")/env.sh"
: "${NVML_VIEW:?}" "${FAKE_NVML:?}"
# the declared device is the driver double's device 0, by its UUID
write_config
sed -i 's/^\[device.0\]$/[device.0]\nuuid = GPU-facec0da-0000-0000-0000-000000000000/' "$T_CONF"
start_daemon
lease_create --device 0 --mem 4GiB
view() { "$NVML_VIEW" "$FAKE_NVML" 2>&1 || echo "nvml_view failed: $?"; }
shim_view() { LD_PRELOAD=$SHIM TESSERA_LEASE=$ID "$NVML_VIEW" "$FAKE_NVML" 2>&1 || echo "nvml_view failed: $?"; }
# a tenant of the lease holds 1 GiB (and its context); it also makes the
# driver double's state file, which the fake NVML reads
touch "$T_DIR/go"
LD_PRELOAD=$SHIM TESSERA_LEASE=$ID "$TENANT" hold "$T_DIR/go" "$T_DIR/done" $((1 << 30)) "$REGIONS/lease-$ID.region" \
  >"$T_DIR/hold.out" 2>&1 &
HP=$!
for i in $(seq 1 200); do grep -q "^alloc=" "$T_DIR/hold.out" 2>/dev/null && break; sleep 0.02; done
ok 'grep -q "^alloc=CUDA_SUCCESS" "$T_DIR/hold.out"' "the holding tenant: $(cat "$T_DIR/hold.out")"
export FAKE_NVML_CUDA_STATE=$FAKE_CUDA_STATE
t lease show "$ID" --json
used=$(json_field used_bytes)
native=$(view)
echo "native: $native"
ok '! grep -q "total=$LIMIT " <<<"$native" && grep -q "^linked total=[0-9]* free=[0-9]* used=[1-9]" <<<"$native"' \
  "without the shim NVML shows the device: $native"
out=$(shim_view)
echo "shim, $used bytes of the lease in use: $out"
free=$((LIMIT - used))
for way in linked dlsym; do
  ok '[ "$used" -gt $((1 << 30)) ] && grep -q "^$way total=$LIMIT free=$free used=$used$" <<<"$out"' "$way: $out"
done
ok 'grep -q "^v2 total=$LIMIT free=$free used=$used reserved=0$" <<<"$out"' "v2: $out"
# the tenant frees and exits: the whole lease is free again
touch "$T_DIR/done"; wait $HP 2>/dev/null || true
out=$(shim_view)
echo "shim, nothing in use: $out"
ok 'grep -q "^linked total=$LIMIT free=$LIMIT used=0$" <<<"$out"' "after the tenant left: $out"
stop_daemon
finish
