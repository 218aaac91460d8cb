# A tenant in its own PID namespace (a container) claims its region slot
# with the pid it sees and the inode of its namespace; the daemon resolves
# the slot to the host process through /proc/PID/status NSpid, so the
# reaper never frees the slot while the tenant lives, and gives its memory
# back within 2 s when it is killed. Needs root (a root daemon, a real
# user, unshare); skipped otherwise.
source "$(dirname "$0")/../lease/lib.sh"
real_users tsr_tenant -- tsr-alice
unshare --pid --fork --mount-proc true 2>/dev/null || skip "unshare --pid --fork --mount-proc is refused here"
TENANT=$T_DIR/bin/tsr_tenant
REGIONS=$T_DIR/regions
U=
trap 'rc=$?; [ -n "$U" ] && { kill -KILL "$U" 2>/dev/null || true; }; (exit $rc); cleanup' EXIT

# ns_host_pid EXE: the host pid of the process that runs EXE in a PID
# namespace of its own (NSpid has two entries), or nothing
ns_host_pid() {
  local p
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/exe" 2>/dev/null)" = "$1" ] || continue
    if grep -Eq '^NSpid:\s+[0-9]+\s+[0-9]+$' "$p/status" 2>/dev/null; then echo "${p#/proc/}"; return; fi
  done
}

write_config "region_dir = $REGIONS"
start_daemon
t --as tsr-alice lease create --device 0 --mem 10% --for 10m --json; expect_rc 0; A=$(json_field id)
GiB=1073741824
unshare --pid --fork --mount-proc setpriv --reuid tsr-alice --regid tsr-alice --clear-groups -- \
  sh -c '"$0" "$@"; exit $?' "$TENANT" charge "$REGIONS" "$A" "$GiB" 30 >"$T_DIR/ns.out" 2>&1 &
U=$!
for i in $(seq 1 300); do grep -q charged "$T_DIR/ns.out" 2>/dev/null && break; sleep 0.01; done
ok 'grep -q "^charged" "$T_DIR/ns.out"' "the namespaced tenant did not charge: $(cat "$T_DIR/ns.out")"
host=$(ns_host_pid "$TENANT")
ok '[ -n "$host" ] && grep -Eq "^NSpid:\s+$host\s+[0-9]+$" /proc/$host/status' \
  "the tenant is not in a PID namespace of its own: $(grep NSpid /proc/${host:-self}/status)"

# usage: what the daemon reports of lease A's processes
usage() {
  OUT=$("$TESSERA" --socket "$T_SOCK" lease show "$A" --json 2>/dev/null) || true
  echo "used=$(json_field used_bytes) processes=$(json_field processes)"
}

# alive: two reaper rounds (one a second) leave its slot alone
sleep 2.2
out=$(usage)
ok 'grep -q "used=$GiB processes=1" <<<"$out"' "a live namespaced tenant was reaped: $out"

# killed: its memory is back within 2 s
kill -KILL "$host"
back=
for i in $(seq 1 25); do
  out=$(usage)
  grep -q "used=0 processes=0" <<<"$out" && { back=$((i * 100)); break; }
  sleep 0.1
done
ok '[ -n "$back" ] && [ "$back" -le 2000 ]' "a killed namespaced tenant's memory did not come back within 2 s: $out"
[ -n "$back" ] && echo "note: reaped within ${back} ms"
# and alice's next tenant can have the whole lease: its charge takes the slot back
out=$(as tsr-alice "$TENANT" charge "$REGIONS" "$A" "$(t lease show "$A" --json; json_field bytes)" 0)
ok 'grep -q "^charged" <<<"$out"' "the dead namespaced tenant's slot was not given back: $out"
wait "$U" 2>/dev/null || true
U=
stop_daemon
finish
