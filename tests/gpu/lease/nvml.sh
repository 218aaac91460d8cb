# On a machine with an NVIDIA GPU: the inventory tesserad reads through NVML
# matches nvidia-smi (and PyTorch's SM count when it is there), and leases are
# sized from the real memory. Skips with one line when no GPU is found.
source "$TESSERA_SOURCE_DIR/tests/integration/lease/lib.sh"

set +e
CHECK=$("$TESSERAD" --check --devices nvml 2>&1)
rc=$?
set -e
[ $rc -eq 0 ] || skip "no GPU through NVML ($(tail -n1 <<<"$CHECK" | sed 's/^tesserad: //'))"
echo "$CHECK"

if command -v nvidia-smi >/dev/null; then
  n_smi=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
  n_us=$(grep -c '^device ' <<<"$CHECK")
  [ "$n_smi" -eq "$n_us" ] && pass || fail "nvidia-smi sees $n_smi GPUs, tesserad $n_us"
  while IFS=, read -r idx name uuid mib; do
    name=$(sed 's/^ *//' <<<"$name"); uuid=$(sed 's/^ *//' <<<"$uuid"); mib=$(sed 's/^ *//' <<<"$mib")
    line=$(grep "^device $idx: " <<<"$CHECK")
    grep -qF "$name" <<<"$line" && pass || fail "GPU $idx name: nvidia-smi '$name', tesserad '$line'"
    grep -Eq "uuid $uuid[ ,]" <<<"$line" && pass || fail "GPU $idx uuid: nvidia-smi '$uuid', tesserad '$line'"
    bytes=$(grep -Eo '\(([0-9]+) bytes\)' <<<"$line" | grep -Eo '[0-9]+')
    [ $((bytes / 1048576)) -eq "$mib" ] && pass || fail "GPU $idx memory: nvidia-smi $mib MiB, tesserad $bytes bytes"
  done < <(nvidia-smi --query-gpu=index,name,uuid,memory.total --format=csv,noheader,nounits)
fi
sms=$(grep -Eo '[0-9]+ SMs' <<<"$(grep '^device 0: ' <<<"$CHECK")" | grep -Eo '[0-9]+')
[ "$sms" -gt 0 ] && pass || fail "no SM count"
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  want=$(python3 -c 'import torch; print(torch.cuda.get_device_properties(0).multi_processor_count)')
  [ "$sms" -eq "$want" ] && pass || fail "SMs: PyTorch $want, tesserad $sms"
fi

# the daemon on NVML's inventory: devices and a lease sized from real memory
cat >"$T_CONF" <<CONF
[daemon]
devices = nvml
sync = none
CONF
start_daemon
t devices --json; expect_rc 0; expect_out '"source": "nvml"' "devices come from NVML"
total=$(json_field memory_bytes)
t lease create --device 0 --mem 50% --for 1m --json; expect_rc 0 "lease on the GPU"
[ "$(json_field bytes)" -eq $((total / 2)) ] && pass || fail "50% of $total is not $(json_field bytes)"
t lease release "$(json_field id)"; expect_rc 0
stop_daemon   # NVML may start threads: SIGTERM must still stop the daemon cleanly
finish
