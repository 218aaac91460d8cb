# The daemon's shared regions, as tenants meet them: one file per lease,
# owned by the lease's owner with mode 0600 in a directory only the daemon
# writes; another user cannot open it; the memory of a process that dies
# without cleaning up comes back within 2 s (the daemon marks its slot, and
# a tenant's charge that needs the room takes it back); a region survives a
# daemon restart with its counters; release and expiry end it at once.
# Needs root (a root daemon, leases of real users); skipped otherwise.
source "$(dirname "$0")/../lease/lib.sh"
real_users tsr_tenant -- tsr-alice tsr-bob
TENANT=$T_DIR/bin/tsr_tenant
REGIONS=$T_DIR/regions
# usage ID: what the daemon reports of lease ID's processes
usage() {
  local o
  o=$("$TESSERA" --socket "$T_SOCK" lease show "$1" --json 2>/dev/null) || true
  OUT=$o
  echo "used=$(json_field used_bytes) processes=$(json_field processes)"
}

write_config "region_dir = $REGIONS"
start_daemon
t --as tsr-alice lease create --device 0 --mem 10% --for 1h --json; expect_rc 0
A=$(json_field id); LIMIT=$(json_field bytes)
f="$REGIONS/lease-$A.region"
ok '[ -f "$f" ] && [ ! -L "$f" ]' "no region file for lease $A: $(ls -la "$REGIONS")"
ok '[ "$(stat -c %U:%a "$f")" = tsr-alice:600 ]' "region owner/mode: $(stat -c %U:%a "$f")"
ok '[ "$(stat -c %U:%a "$REGIONS")" = root:711 ]' "region directory: $(stat -c %U:%a "$REGIONS")"

# another user cannot open it
out=$(as tsr-bob "$TENANT" stats "$REGIONS" "$A" 2>/dev/null || true)
ok 'grep -q "open-failed permission_denied" <<<"$out"' "bob opened alice's region: $out"

# the owner charges within the limit, not past it
out=$(as tsr-alice "$TENANT" charge "$REGIONS" "$A" $((LIMIT + 1)) 0)
ok 'grep -q "^refused" <<<"$out"' "a charge past the limit: $out"
# (it then took one byte and exited without detaching: the reaper frees it)
for i in $(seq 1 25); do
  out=$(usage "$A"); grep -q "used=0 processes=0" <<<"$out" && break; sleep 0.1
done
ok 'grep -q "used=0 processes=0" <<<"$out"' "an exited tenant's slot was not reaped: $out"
setpriv --reuid tsr-alice --regid tsr-alice --clear-groups -- \
  "$TENANT" charge "$REGIONS" "$A" 1073741824 30 >"$T_DIR/t1.out" &
T1=$!
for i in $(seq 1 100); do grep -q charged "$T_DIR/t1.out" 2>/dev/null && break; sleep 0.02; done
out=$(usage "$A")
ok 'grep -q "used=1073741824 processes=1$" <<<"$out"' "after a 1 GiB charge: $out"
t --as tsr-alice lease show "$A"; expect_rc 0
expect_out "in use +1 GiB \(1073741824 bytes\), peak 1 GiB, 1 process, 1 allocation denied" "lease show gives the usage"
expect_out "region +$f" "lease show names the region"
t --as tsr-alice lease show "$A" --json; expect_rc 0
[ "$(json_field used_bytes)" = 1073741824 ] && [ "$(json_field processes)" = 1 ] && pass || fail "--json usage: $OUT"
[ "$(json_field usage)" = reported ] && pass || fail "--json does not say the usage is the tenants' report: $OUT"
t --as tsr-bob lease show "$A" --json; expect_rc 1 "bob sees alice's lease"; expect_err "another user's"

# the daemon restarts while the tenant holds memory: the region and its counters stay
stop_daemon
start_daemon
out=$(usage "$A")
ok 'grep -q "used=1073741824 processes=1$" <<<"$out"' "the region was not kept across a restart: $out"

# the tenant is killed without cleaning up: the reaper gives the memory back within 2 s
kill -KILL "$T1"; wait "$T1" 2>/dev/null || true
back=""
for i in $(seq 1 25); do
  out=$(usage "$A")
  grep -q "used=0 processes=0" <<<"$out" && { back=$((i * 100)); break; }
  sleep 0.1
done
ok '[ -n "$back" ]' "a killed tenant's memory did not come back within 2.5 s: $out"
[ -n "$back" ] && echo "note: reaped within ${back} ms"
# and a tenant can take all of it again: its charge gives the dead slots back first
out=$(as tsr-alice "$TENANT" charge "$REGIONS" "$A" "$LIMIT" 0)
ok 'grep -q "^charged" <<<"$out"' "the whole limit after the dead ones were marked: $out"
for i in $(seq 1 25); do grep -q "used=0 processes=0" <<<"$(usage "$A")" && break; sleep 0.1; done

# release: the running tenant's next charge fails, the file goes
setpriv --reuid tsr-alice --regid tsr-alice --clear-groups -- \
  "$TENANT" charge "$REGIONS" "$A" 4096 1 >"$T_DIR/t2.out" &
T2=$!
for i in $(seq 1 100); do grep -q charged "$T_DIR/t2.out" 2>/dev/null && break; sleep 0.02; done
t --as tsr-alice lease release "$A"; expect_rc 0
wait "$T2" || true
ok 'grep -q "then:refused" "$T_DIR/t2.out"' "a charge after release was admitted: $(cat "$T_DIR/t2.out")"
ok '[ ! -e "$f" ]' "the region of a released lease stays"

# expiry ends the region too
t --as tsr-alice lease create --device 0 --mem 5% --for 1s --json; expect_rc 0; B=$(json_field id)
ok '[ -f "$REGIONS/lease-$B.region" ]' "no region for lease $B"
sleep 1.3
ok '[ ! -e "$REGIONS/lease-$B.region" ]' "the region of an expired lease stays"

# files of leases that are not active are removed at start; a damaged region is made anew
t --as tsr-alice lease create --device 0 --mem 6% --for 1h --json; expect_rc 0; C=$(json_field id)
stop_daemon
printf 'junk' >"$REGIONS/lease-$C.region"
: >"$REGIONS/lease-999999.region"
start_daemon
ok '[ ! -e "$REGIONS/lease-999999.region" ]' "a region of no lease was kept"
out=$("$TENANT" stats "$REGIONS" "$C")
ok 'grep -q "used=0 processes=0 state=1" <<<"$out"' "a damaged region was not made anew: $out"
ok '[ "$(stat -c %U:%a "$REGIONS/lease-$C.region")" = tsr-alice:600 ]' "remade region owner/mode"
stop_daemon
finish
