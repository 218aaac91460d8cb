# Crash recovery: SIGKILL the daemon, restart it, leases intact, due ones
# expired; SIGKILL at random instants during a stream of writes never loses an
# acknowledged lease nor leaves a file that breaks the next start.
source "$(dirname "$0")/lib.sh"
start_daemon

t lease create --device 0 --mem 50% --for 2h --json; expect_rc 0; LONG=$(json_field id)
t lease create --device 1 --mem 25% --for 1s --json;  expect_rc 0; SHORT=$(json_field id)
kill9_daemon
sleep 1.3   # the short lease falls due while no daemon runs
start_daemon
t lease show "$LONG" --json;  expect_rc 0 "long lease survives SIGKILL"
[ "$(json_field state)" = active ] && [ "$(json_field owner)" = "$(id -un)" ] && pass || fail "long lease state/owner: $OUT"
[ "$(json_field bytes)" = 42949672960 ] && pass || fail "long lease bytes"
t lease list --all --json
grep -q "\"id\": $SHORT," <<<"$OUT" && fail "the due lease is still active after restart" || pass
grep -q "\"event\":\"expire\".*\"lease\":$SHORT," "$T_STATE/audit.log" && pass || fail "due lease expired at restart (audit)"
ls "$T_STATE"/gpu_1_*.lock >/dev/null 2>&1 && fail "lock file of the due lease remains" || pass
t devices --json; expect_out '"available_bytes": 42949672960' "device 1 whole again"

# kill -9 at random instants during a stream of creates and releases
for round in 1 2 3 4 5; do
  (
    for i in $(seq 1 400); do
      "$TESSERA" --socket "$T_SOCK" lease create --device 0 --mem 0.1% --for 1h --json 2>/dev/null \
        | grep -Eo '"id": [0-9]+' | grep -Eo '[0-9]+' >>"$T_DIR/acked" || true
    done
  ) &
  writer=$!
  sleep "0.$((RANDOM % 9 + 1))"
  kill9_daemon
  wait "$writer" 2>/dev/null || true
  start_daemon
  grep -q quarantined "$T_LOG" && grep -Eq 'quarantined .*: ' "$T_LOG" && fail "round $round: a file was quarantined after SIGKILL"
  # every acknowledged create is still there (none was released)
  t lease list --all --json
  missing=0
  while read -r id; do
    grep -q "\"id\": $id," <<<"$OUT" || missing=$((missing + 1))
  done <"$T_DIR/acked"
  [ "$missing" -eq 0 ] && pass || fail "round $round: $missing acknowledged lease(s) lost"
  # lock files and active leases agree one to one
  nfiles=$(ls "$T_STATE"/*.lock | wc -l)
  nleases=$(grep -c '"id"' <<<"$OUT" || true)
  [ "$nfiles" -eq "$nleases" ] && pass || fail "round $round: $nfiles lock files, $nleases leases"
  ls "$T_STATE"/.tmp-* >/dev/null 2>&1 && fail "round $round: temporary files left after restart" || pass
  # release them all to make room for the next round
  while read -r id; do "$TESSERA" --socket "$T_SOCK" lease release "$id" >/dev/null 2>&1 || true; done <"$T_DIR/acked"
  : >"$T_DIR/acked"
done
# ids never repeat: the next id is above every id the audit log has seen so far
max=$(grep -Eo '"lease":[0-9]+' "$T_STATE/audit.log" | grep -Eo '[0-9]+' | sort -n | tail -n1)
t lease create --device 0 --mem 1% --for 1h --json
[ "$(json_field id)" -gt "$max" ] && pass || fail "id $(json_field id) not above $max"

# an unreadable lock file is quarantined with a warning; the daemon starts
stop_daemon
printf 'pid: 1\nuser: x\n' >"$T_STATE/gpu_0_0500_999999.lock"
printf 'garbage' >"$T_STATE/gpu_0_0100_999998.lock"
start_daemon
grep -q "warn: quarantined .*gpu_0_0500_999999.lock" "$T_LOG" && pass || fail "quarantine warning"
[ "$(ls "$T_STATE/quarantine" | wc -l)" -eq 2 ] && pass || fail "two files quarantined"
t devices; expect_rc 0 "daemon serves after quarantine"

# a corrupt id counter stops the start with a clear message, changing nothing
stop_daemon
cp "$T_STATE/next_id" "$T_DIR/next_id.bak"
echo "next_id: banana" >"$T_STATE/next_id"
before=$(ls "$T_STATE" | sort)
set +e
"$TESSERAD" --config "$T_CONF" --state-dir "$T_STATE" --socket "$T_SOCK" 2>"$T_DIR/err2"; RC=$?
set -e
ERR=$(cat "$T_DIR/err2")
expect_rc 1 "corrupt counter"; expect_err "next_id is corrupt"
[ "$before" = "$(ls "$T_STATE" | sort)" ] && pass || fail "files changed by a refused start"
cp "$T_DIR/next_id.bak" "$T_STATE/next_id"
start_daemon
t devices; expect_rc 0
finish
