# The shim given bad input: regions that are damaged, of another version,
# truncated, links, another user's or missing; slots left by a process whose
# pid was reused; absurd sizes, NULL out-pointers, bad and double frees on
# every hooked path. The tenant prints one clear "tessera:" line, follows
# TESSERA_POLICY (pass: ungoverned; deny: out-of-memory), never crashes, and
# the lease's counters change only by what was really allocated.
source "$(dirname "$0")/env.sh"
OTHER_USER=""
if [ "$(id -u)" -eq 0 ] && command -v useradd >/dev/null && command -v setpriv >/dev/null; then
  real_users tsr_shim_tenant -- tsr-alice tsr-bob
  cp "$SHIM" "$FAKE" "$T_DIR/bin/"
  chmod 755 "$T_DIR/bin/"*
  OTHER_USER=tsr-bob
fi
start_daemon
MIB=1048576
lease_create --device 0 --mem 1GiB
L=$ID; LIMIT_L=$LIMIT
GOOD=$REGIONS/lease-$L.region

# tenant DIR LEASE POLICY BYTES [USER]: one allocation under the shim; sets
# OUT (stdout), ERR (stderr) and TRC (exit status)
tenant() {
  local pre=()
  [ -n "${5:-}" ] && pre=(setpriv --reuid "$5" --regid "$5" --clear-groups --)
  set +e
  OUT=$("${pre[@]}" env LD_PRELOAD="${TSHIM:-$SHIM}" TESSERA_REAL_LIBCUDA="${TFAKE:-$FAKE}" \
        TESSERA_LEASE="$2" TESSERA_REGION_DIR="$1" \
        TESSERA_POLICY="$3" FAKE_CUDA_STATE= "${TTENANT:-$TENANT}" alloc "$4" 2>"$T_DIR/tenant.err")
  TRC=$?
  set -e
  ERR=$(cat "$T_DIR/tenant.err")
}

# policy_case NAME DIR LEASE [USER]: under pass an allocation past the limit
# goes through ungoverned; under deny it is out-of-memory; one tessera: line
policy_case() {
  local name=$1 dir=$2 lease=$3 user=${4:-} pol
  for pol in pass deny; do
    tenant "$dir" "$lease" "$pol" $((2 * LIMIT_L)) "$user"
    ok '[ "$TRC" -eq 0 ]' "$name ($pol): the tenant ended with status $TRC: $OUT $ERR"
    ok '[ "$(printf "%s\n" "$ERR" | grep -c .)" -eq 1 ] && grep -q "^tessera: ." <<<"$ERR"' \
      "$name ($pol): stderr is not one 'tessera:' line: $ERR"
    if [ "$pol" = pass ]; then
      ok 'grep -q "^alloc=CUDA_SUCCESS" <<<"$OUT"' "$name (pass): 2 GiB was not let through ungoverned: $OUT"
    else
      ok 'grep -Eq "^(context|alloc)=CUDA_ERROR_OUT_OF_MEMORY" <<<"$OUT" && ! grep -q "=CUDA_SUCCESS$" <<<"$OUT" ||
          { grep -q "^context=CUDA_SUCCESS" <<<"$OUT" && grep -q "^alloc=CUDA_ERROR_OUT_OF_MEMORY" <<<"$OUT"; }' \
        "$name (deny): not refused with out-of-memory: $OUT"
    fi
    echo "$name ($pol): $(tr '\n' ' ' <<<"$OUT")| $ERR"
  done
}

# the good region first: governed, silent (the cases below can fail)
tenant "$REGIONS" "$L" pass $((2 * LIMIT_L))
ok 'grep -q "^alloc=CUDA_ERROR_OUT_OF_MEMORY" <<<"$OUT" && [ -z "$ERR" ]' "the good region: $OUT $ERR"
tenant "$REGIONS" "$L" deny $((64 * MIB))
ok 'grep -q "^alloc=CUDA_SUCCESS" <<<"$OUT" && [ -z "$ERR" ]' "the good region under deny: $OUT $ERR"

# bad DIR: a copy of the good region, damaged by `poke OFFSET HEXBYTES`
bad() { B=$T_DIR/bad-$1; rm -rf "$B"; mkdir -p "$B"; cp "$GOOD" "$B/lease-$L.region"; }
poke() { printf "$(sed 's/../\\x&/g' <<<"$2")" | dd of="$B/lease-$L.region" bs=1 seek="$1" conv=notrunc status=none; }
bad magic;    poke 0 5858585858585858;  policy_case "wrong magic" "$B" "$L"
bad version;  poke 8 02000000;          policy_case "wrong version" "$B" "$L"
bad sizes;    poke 36 07000000;         policy_case "corrupted header (slot count)" "$B" "$L"
bad hdr;      poke 12 00000000;         policy_case "corrupted header (header size)" "$B" "$L"
bad state;    poke 56 63000000;         policy_case "corrupted header (state 99)" "$B" "$L"
bad lease;    poke 24 ffff000000000000; policy_case "a region of another lease" "$B" "$L"
bad ended;    poke 56 03000000;         policy_case "a released region" "$B" "$L"
bad trunc;    truncate -s 4096 "$B/lease-$L.region"; policy_case "truncated to 4 KiB" "$B" "$L"
bad empty;    : >"$B/lease-$L.region"; policy_case "truncated to 0 bytes" "$B" "$L"
bad link;     mv "$B/lease-$L.region" "$B/real"; ln -s real "$B/lease-$L.region"
policy_case "a symlink in place of the region" "$B" "$L"
bad dir;      rm "$B/lease-$L.region"; mkdir "$B/lease-$L.region"; policy_case "a directory in place of the region" "$B" "$L"
policy_case "a lease with no region" "$REGIONS" 999999
policy_case "TESSERA_LEASE not a list of ids" "$REGIONS" "${L}x"

# another user's region: bob names alice's lease
if [ -n "$OTHER_USER" ]; then
  t lease create --device 0 --mem 1536MiB --for 10m --user tsr-alice --json; expect_rc 0 "lease for tsr-alice"
  A=$(json_field id)
  TSHIM=$T_DIR/bin/$(basename "$SHIM") TTENANT=$T_DIR/bin/tsr_shim_tenant TFAKE=$T_DIR/bin/$(basename "$FAKE") \
    LD_LIBRARY_PATH=$T_DIR/bin policy_case "another user's region" "$REGIONS" "$A" "$OTHER_USER"
else
  echo "SKIP (one case): another user's region needs root, useradd and setpriv to run a second real user"
fi

# a slot left by a process whose pid is now the tenant's (a reused pid): the
# tenant attaches beside it and the daemon reaps it, crediting what it held
lease_create --device 0 --mem 2GiB
R=$ID; RR=$REGIONS/lease-$R.region
env LD_PRELOAD="$SHIM" TESSERA_LEASE=$R "$TENANT" hold "$T_DIR/go" "$T_DIR/done" $((64 * MIB)) "$RR" \
  >"$T_DIR/hold.out" 2>&1 &
HP=$!
stale=$("$CHECK" stale "$RR" "$HP" $((256 * MIB)))
echo "stale slot for pid $HP (the tenant's own pid, another start time): $stale"
touch "$T_DIR/go"
for i in $(seq 1 200); do grep -q "^alloc=" "$T_DIR/hold.out" && break; sleep 0.01; done
slot=$(sed -n 's/.*slot=\([-0-9]*\).*/\1/p' "$T_DIR/hold.out")
# (the reaper, every 500 ms, may free the stale slot before the tenant
# attaches; then the tenant may take that very slot: both are right)
ok 'grep -q "^alloc=CUDA_SUCCESS" "$T_DIR/hold.out" && [ "${slot:--1}" -ge 0 ]' \
  "a tenant whose pid a stale slot names did not attach: $(cat "$T_DIR/hold.out") ($stale)"
# what the live tenant holds: its context (524 MiB) and its 64 MiB; the
# reaper may already have run (every 500 ms), so the stale 256 MiB is not
# read back first
u1=$(( (524 + 64) * MIB))
back=""
for i in $(seq 1 40); do
  t lease show "$R" --json
  [ "$(json_field used_bytes)" = "$u1" ] && [ "$(json_field processes)" = 1 ] && { back=$((i * 50)); break; }
  sleep 0.05
done
ok '[ -n "$back" ] && [ "$(json_field processes)" = 1 ]' \
  "the stale slot was not reaped within 2 s, or the live tenant's was: used $u1 then $(json_field used_bytes), $(json_field processes) processes"
[ -n "$back" ] && echo "the stale slot was reaped within ${back} ms; the live tenant keeps its own"
touch "$T_DIR/done"; wait "$HP" || fail "the holding tenant failed: $(cat "$T_DIR/hold.out")"
t lease show "$R" --json
ok '[ "$(json_field used_bytes)" = 0 ]' "after the holding tenant exited: $OUT"

# every slot held by stale entries (a reused pid, here this shell's): attach
# must not be blocked by them. The daemon is stopped meanwhile, so that only
# the tenant itself can make room.
kill -STOP "$DAEMON_PID"
filled=$("$CHECK" fill "$RR" $$ || true)
tenant "$REGIONS" "$R" pass $((4 * LIMIT_L))
kill -CONT "$DAEMON_PID"
echo "all slots stale ($filled): $(tr '\n' ' ' <<<"$OUT")| $ERR"
ok 'grep -q "^alloc=CUDA_ERROR_OUT_OF_MEMORY" <<<"$OUT" && [ -z "$ERR" ]' \
  "a tenant could not attach while every slot was held by a reused pid's stale entry: $OUT $ERR"
back=""
for i in $(seq 1 40); do
  out=$("$CHECK" stats "$RR"); grep -q "^used=0 processes=0 " <<<"$out" && { back=$((i * 50)); break; }
  sleep 0.05
done
ok '[ -n "$back" ]' "256 stale slots were not reaped within 2 s: $out"

# absurd sizes, NULL out-pointers, bad and double frees: the driver's own
# answer (the same program without the shim) or out-of-memory, and the
# lease's used unchanged once each call returned
lease_create --device 0 --mem 4GiB
Z=$ID
set +e
FAKE_CUDA_STATE= "$TENANT" absurd >"$T_DIR/native.txt" 2>"$T_DIR/native.err"; nrc=$?
FAKE_CUDA_STATE= LD_PRELOAD="$SHIM" TESSERA_LEASE=$Z "$TENANT" absurd "$REGIONS/lease-$Z.region" \
  >"$T_DIR/shim.txt" 2>"$T_DIR/shim.err"; src=$?
set -e
ok '[ $nrc -eq 0 ] && grep -q "^done=1" "$T_DIR/native.txt"' "without the shim the program did not finish ($nrc): $(tail -3 "$T_DIR/native.txt") $(cat "$T_DIR/native.err")"
ok '[ $src -eq 0 ] && grep -q "^done=1" "$T_DIR/shim.txt"' "under the shim the program did not finish ($src): $(tail -3 "$T_DIR/shim.txt") $(cat "$T_DIR/shim.err")"
ok '[ ! -s "$T_DIR/shim.err" ]' "under the shim: stderr $(cat "$T_DIR/shim.err")"
bad_lines=$(paste -d'|' "$T_DIR/native.txt" "$T_DIR/shim.txt" | awk -F'|' '
  { n = $1; s = $2; split(n, a, " rc="); split(s, b, " rc=");
    if (a[1] != b[1]) { print "order: " n " vs " s; next }
    if (s !~ / rc=/) next
    split(a[2], nr, " "); split(b[2], sr, " ");
    size1 = (a[1] ~ / size=1$/)
    if (sr[1] != nr[1] && (size1 || sr[1] != "CUDA_ERROR_OUT_OF_MEMORY")) print "rc: " s "  (without the shim: " nr[1] ")"
    if (s ~ / delta=/ && s !~ / delta=0$/) print "counted: " s
  }')
ok '[ -z "$bad_lines" ]' "calls answered other than the driver or out-of-memory, or that moved the lease's used:
$bad_lines"
ok 'grep -q "^live-free rc=CUDA_SUCCESS credited=8388608$" "$T_DIR/shim.txt"' \
  "a live 8 MiB allocation beside the bad frees was not credited exactly once: $(grep live- "$T_DIR/shim.txt")"
echo "absurd/NULL/bad/double: $(grep -c ' rc=' "$T_DIR/shim.txt") calls compared with the driver alone"
grep -E "size=(1|0) |double|first|bad-free#3" "$T_DIR/shim.txt" | head -60
t lease show "$Z" --json
ok '[ "$(json_field used_bytes)" = 0 ]' "after the absurd-size program exited: $OUT"
stop_daemon
finish
