# A hostile tenant against a root tesserad, through the one thing the daemon
# shares with her: her own lease's region, a file she owns and may write,
# shrink and chmod at will. Every attack runs as a real second user
# (tsr-mallory); the victims are root's and another user's (tsr-alice).
#   1. slots naming other users' processes (and root's), then a release and
#      an expiry of her `signal` lease: the victims live; her own process,
#      named the same way, is ended (so the check can fail);
#   2. her region shrunk to nothing, once and then every 10 ms for 3 s: the
#      daemon lives and serves alice meanwhile, puts the size back, audits;
#   3. the limit word raised, peak and used raised: the limit is put back
#      within a tick, and `lease show`, `top` and /metrics show at most the
#      lease's limit, say the numbers are the tenants' report and that the
#      region was tampered with;
#   4. what one user sees of another's: alice's `lease list --all`, `lease
#      show` and `top` give her own leases and only counts of mallory's.
# Needs root (a root daemon, real users); skipped otherwise.
source "$(dirname "$0")/../lease/lib.sh"
real_users tsr_region_attack -- tsr-mallory tsr-alice
ATTACK=$T_DIR/bin/tsr_region_attack
REGIONS=$T_DIR/regions
AUDIT=$T_STATE/audit.log
command -v curl >/dev/null || skip "curl is missing (Debian: curl)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
write_config "region_dir = $REGIONS" "expiry_grace = 1s" "metrics = 127.0.0.1:$port"
start_daemon

VICTIMS=()
trap 'for p in "${VICTIMS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; cleanup' EXIT
# victim NAME USER: a `sleep` of USER ("-": root) in the background, its pid in NAME
victim() {
  if [ "$2" = - ]; then sleep 60 &
  else setpriv --reuid "$2" --regid "$2" --clear-groups -- sleep 60 &
  fi
  local pid=$!
  VICTIMS+=("$pid")
  printf -v "$1" '%s' "$pid"
  for _ in $(seq 1 100); do [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(command -v sleep)" ] && break; sleep 0.01; done
}
alive() { local s; s=$(sed -E 's/.*\) (.).*/\1/' "/proc/$1/stat" 2>/dev/null) && [ -n "$s" ] && [ "$s" != Z ]; }
# ended PID: waits up to 3 s for it to end; its exit status in STATUS
ended() {
  for _ in $(seq 1 300); do alive "$1" || break; sleep 0.01; done
  STATUS=
  if ! alive "$1"; then set +e; wait "$1" 2>/dev/null; STATUS=$?; set -e; return 0; fi
  return 1
}
as_mallory() { as tsr-mallory "$@"; }

# ---- 1. slots naming others' processes: the signal action spares them --------
victim root_v -
victim alice_v tsr-alice
victim own_v tsr-mallory
t --as tsr-mallory lease create --device 0 --mem 10% --for 10m --on-expiry signal --json; expect_rc 0
M=$(json_field id)
for v in "$root_v" "$alice_v" "$own_v"; do
  out=$(as_mallory "$ATTACK" slot "$REGIONS/lease-$M.region" "$v" 2>&1 || true)
  ok 'grep -q "^done" <<<"$out"' "mallory could not write a slot naming pid $v: $out"
done
t --as tsr-mallory lease release "$M"; expect_rc 0
ok 'ended "$own_v" && [ "$STATUS" = 143 ]' "mallory's own process, named in her slot, was not ended at release (${STATUS:-alive})"
sleep 1.3 # past the grace: a SIGKILL would have followed
ok 'alive "$root_v"' "root's process was signalled through mallory's region"
ok 'alive "$alice_v"' "alice's process was signalled through mallory's region"
ok 'grep -q "lease $M of tsr-mallory: 2 process(es) .* not its owner" "$T_LOG"' "the daemon does not say it refused: $(grep "lease $M" "$T_LOG" | tail -3)"
# the same at expiry
victim own2_v tsr-mallory
t --as tsr-mallory lease create --device 0 --mem 10% --for 2s --on-expiry signal --json; expect_rc 0
E=$(json_field id)
for v in "$root_v" "$alice_v" "$own2_v"; do as_mallory "$ATTACK" slot "$REGIONS/lease-$E.region" "$v" >/dev/null; done
ok 'sleep 1.5; ended "$own2_v" && [ "$STATUS" = 143 ]' "mallory's own process was not ended at expiry (${STATUS:-alive})"
sleep 1.3
ok 'alive "$root_v" && alive "$alice_v"' "an expiry signalled root's or alice's process through mallory's region"

# ---- 2. the region shrunk under the daemon -------------------------------------
t --as tsr-mallory lease create --device 0 --mem 10% --for 10m --json; expect_rc 0; T=$(json_field id)
f=$REGIONS/lease-$T.region
out=$(as_mallory "$ATTACK" truncate "$f" 0 2>&1 || true)
ok 'grep -q "^done" <<<"$out"' "mallory could not truncate her region: $out"
sleep 1
ok 'kill -0 "$DAEMON_PID"' "the daemon died of a truncated region"
ok '[ "$(stat -c %s "$f")" = 20480 ]' "the region's size was not put back: $(stat -c %s "$f")"
ok 'grep -q "\"event\":\"region\",.*\"lease\":$T,.*\"found\":\[\"size\"" "$AUDIT"' \
  "no audit line for the shrunk region: $(grep '"region"' "$AUDIT" | tail -1)"
as_mallory "$ATTACK" shrink "$f" 3 >"$T_DIR/shrink.out" 2>&1 &
S=$!
served=0
for i in $(seq 1 10); do
  t --as tsr-alice lease create --device 1 --mem 5% --for 1m --json && [ "$RC" = 0 ] || break
  id=$(json_field id)
  t --as tsr-alice lease show "$id" --json; [ "$RC" = 0 ] || break
  t --as tsr-alice lease release "$id"; [ "$RC" = 0 ] || break
  served=$((served + 1))
  sleep 0.2
done
wait "$S" || true
ok '[ "$served" = 10 ]' "alice was served $served of 10 times while mallory shrank her region: $ERR"
ok 'grep -q "^done [1-9]" "$T_DIR/shrink.out"' "the shrinking loop did not run: $(cat "$T_DIR/shrink.out")"
ok 'kill -0 "$DAEMON_PID"' "the daemon died while the region was shrunk again and again"
t --as tsr-mallory lease show "$T" --json; expect_rc 0 "lease show of the shrunk region's lease"
sleep 1
ok '[ "$(stat -c %s "$f")" = 20480 ]' "the region's size is not back after the loop: $(stat -c %s "$f")"
t --as tsr-mallory lease release "$T"; expect_rc 0

# ---- 3. her numbers: the limit raised, the report inflated ----------------------
t --as tsr-mallory lease create --device 0 --mem 2GiB --for 10m --json; expect_rc 0
R=$(json_field id); LIMIT=$(json_field bytes)
f=$REGIONS/lease-$R.region
big=$((64 << 30))
as_mallory "$ATTACK" set "$f" limit "$big" >/dev/null
as_mallory "$ATTACK" set "$f" peak $((50 << 30)) >/dev/null
as_mallory "$ATTACK" set "$f" used $((40 << 30)) >/dev/null
limit_word() { od -An -t u8 -j 40 -N 8 "$f" | tr -d ' '; }
for i in $(seq 1 30); do [ "$(limit_word)" = "$LIMIT" ] && break; sleep 0.1; done
ok '[ "$(limit_word)" = "$LIMIT" ]' "the raised limit word was not put back: $(limit_word), the lease's $LIMIT"
t --as tsr-mallory lease show "$R" --json; expect_rc 0
ok '[ "$(json_field used_bytes)" -le "$LIMIT" ] && [ "$(json_field peak_bytes)" -le "$LIMIT" ]' \
  "lease show passes the limit: used $(json_field used_bytes), peak $(json_field peak_bytes), limit $LIMIT"
ok '[ "$(json_field usage)" = reported ] && [ "$(json_field tampered)" = true ]' "lease show does not say: $OUT"
t --as tsr-mallory lease show "$R"; expect_out "as its processes report it; its region was tampered with" "lease show (text)"
t top --json; expect_rc 0
line=$(tr -d '\n ' <<<"$OUT" | grep -o "{\"id\":$R,[^]]*")
peak=$(grep -o '"peak_bytes":[0-9]*' <<<"$line" | cut -d: -f2)
ok '[ -n "$peak" ] && [ "$peak" -le "$LIMIT" ] && grep -q "\"tampered\":true" <<<"$line" && grep -q "\"usage\":\"reported\"" <<<"$line"' \
  "top passes the limit or does not say: $line"
sleep 0.4 # the metrics snapshot is rewritten every 250 ms
m=$(curl -sf --max-time 5 "http://127.0.0.1:$port/metrics" | grep "^tessera_lease_peak_bytes{.*lease=\"$R\"")
ok '[ -n "$m" ] && [ "${m##* }" -le "$LIMIT" ] && grep -q "source=\"reported\"" <<<"$m"' "/metrics: $m"
ok 'grep -q "\"event\":\"region\",.*\"lease\":$R,.*\"header\".*\"counters\"" "$AUDIT"' \
  "no audit line for the raised limit: $(grep '"region"' "$AUDIT" | tail -1)"

# ---- 4. what alice sees of mallory's lease ----------------------------------------
t --as tsr-alice lease create --device 0 --mem 3% --for 10m --json; expect_rc 0; AL=$(json_field id)
t --as tsr-alice lease list --all --json; expect_rc 0
ok 'grep -q "\"id\": $AL," <<<"$OUT" && ! grep -q "\"id\": $R," <<<"$OUT" && ! grep -q tsr-mallory <<<"$OUT"' \
  "alice's list --all shows mallory's lease: $OUT"
t --as tsr-alice lease show "$R"; expect_rc 1 "alice shows mallory's lease"
t --as tsr-alice top --json; expect_rc 0
ok 'grep -q "\"id\": $AL," <<<"$OUT" && ! grep -q "\"id\": $R," <<<"$OUT" && ! grep -q tsr-mallory <<<"$OUT"' \
  "alice's top shows mallory's lease: $OUT"
ok 'tr -d "\n " <<<"$OUT" | grep -q "\"others\":{\"leases\":1,"' "alice's top does not count mallory's lease: $OUT"
t --as tsr-alice top --once; expect_rc 0; expect_out "^others: 1 lease" "alice's top (text)"
t top --json; expect_rc 0
ok 'grep -q "\"id\": $R," <<<"$OUT" && grep -q "\"id\": $AL," <<<"$OUT"' "root's top lacks a lease: $OUT"
finish
