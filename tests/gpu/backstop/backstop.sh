# The backstop on a real GPU (skips without one): a tenant that never loads
# the shim and holds 8 GiB under its user's 4 GiB lease is SIGTERMed by the
# default over-limit action within 1 s of holding it (the
# backstop's period is 500 ms) and the audit log says why; one that
# holds 2 GiB is left alone. The tenants run as an ordinary user
# (tsr-gpu-tenant, made here): the daemon never signals root's processes.
#   backstop.sh BIN_DIR      (TENANT names the tenant built against -lcuda)
# Needs root (the user, a root daemon); skips otherwise.
set -u
BIN=${1:?usage: backstop.sh BIN_DIR}
TENANT=${TENANT:-$BIN/tsr_gpu_tenant_real}
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "SKIP: no GPU"; exit 77; }
[ "$(id -u)" -eq 0 ] && command -v useradd >/dev/null && command -v setpriv >/dev/null ||
  { echo "SKIP: needs root, useradd and setpriv (the tenants run as an ordinary user)"; exit 77; }
unset CUDA_VISIBLE_DEVICES LD_PRELOAD TESSERA_LEASE
U=tsr-gpu-tenant
id "$U" >/dev/null 2>&1 || useradd --no-create-home --shell /usr/sbin/nologin "$U"
D=$(mktemp -d); chmod 755 "$D"
cp "$TENANT" "$D/tenant" && chmod 755 "$D/tenant"
# (always in the background: exec keeps its pid the tenant's)
tenant() { exec setpriv --reuid "$U" --regid "$U" --clear-groups -- "$D/tenant" "$@"; }
trap 'kill $DP 2>/dev/null; rm -rf "$D"' EXIT
printf '[daemon]\ndevices = nvml\nsync = none\nbackstop_period = 500ms\nexpiry_grace = 2s\n' >"$D/c.conf"
"$BIN/tesserad" --config "$D/c.conf" --state-dir "$D/state" --socket "$D/s.sock" 2>"$D/daemon.log" &
DP=$!
for i in $(seq 1 200); do [ -S "$D/s.sock" ] && break; sleep 0.05; done
T="$BIN/tessera --socket $D/s.sock"
ID=$($T lease create --device 0 --mem 4GiB --for 10m --user "$U" --json | grep -Eo '"id": [0-9]+' | grep -Eo '[0-9]+')
fails=0
# under the limit: left alone for 3 backstop periods
tenant 2048 >"$D/small.out" 2>&1 &
SP=$!
for i in $(seq 1 100); do grep -q ready "$D/small.out" && break; sleep 0.1; done
sleep 2
if kill -0 $SP 2>/dev/null; then echo "ok: a tenant with 2 GiB under a 4 GiB lease lives"; else echo "FAIL: the 2 GiB tenant was stopped"; fails=$((fails+1)); fi
kill $SP; wait $SP 2>/dev/null
sleep 1 # its memory leaves NVML's list
# over the limit, without the shim
tenant 8192 >"$D/big.out" 2>&1 &
BP=$!
for i in $(seq 1 100); do grep -q ready "$D/big.out" && break; sleep 0.1; done
t0=$(date +%s%N)
grep -q ready "$D/big.out" || { echo "FAIL: the tenant did not start: $(cat "$D/big.out")"; fails=$((fails+1)); }
for i in $(seq 1 100); do kill -0 $BP 2>/dev/null || break; sleep 0.05; done
t1=$(date +%s%N)
kill -0 $BP 2>/dev/null && kill -KILL $BP # not stopped within 5 s: a failure, not a hang
wait $BP; rc=$?
ms=$(( (t1 - t0) / 1000000 ))
if [ $rc -eq 143 ] && [ $ms -le 1000 ]; then echo "ok: the 8 GiB tenant was stopped by SIGTERM ${ms} ms after it held the memory"
else echo "FAIL: the 8 GiB tenant ended with status $rc after ${ms} ms (want 143, SIGTERM, within 1000 ms)"; fails=$((fails+1)); fi
line=$(grep '"event":"backstop"' "$D/state/audit.log" | head -1)
echo "audit: $line"
grep -q "\"lease\":$ID," <<<"$line" && grep -q '"action":"signal"' <<<"$line" ||
  { echo "FAIL: no backstop audit line naming lease $ID"; fails=$((fails+1)); }
grep -i backstop "$D/daemon.log" | head -3
echo "backstop.sh: $fails failed"
[ $fails -eq 0 ]
