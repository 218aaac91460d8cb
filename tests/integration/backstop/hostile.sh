# A hostile tenant against the NVML backstop, as a real second user
# (tsr-mallory), with tsr-alice beside her: a root daemon whose GPU comes
# from the fake NVML standing for the driver double (lib.sh).
#   1. a slot of her own lease naming alice's GPU process: the backstop does
#      not take it for hers (it would be over mallory's 1% lease and be
#      signalled); alice's process, under alice's own lease, lives;
#   2. a slot holder over her `--over-limit log` lease is left running (one
#      audit line, action log); she then sets her region's state word and
#      raises its limit in a loop: the daemon puts both back and audits the
#      region, and the over-limit action stays the lease's, not the region's
#      (before over_limit, the same attack made a `revoke` lease's slot
#      holder signalled: the region's state was the backstop's word);
#   3. a slot holder over a `--on-expiry revoke` lease is SIGTERMed at once
#      (the over-limit action, signal by default, is not the expiry action:
#      before over_limit the region was revoked and the process spared for a
#      grace period), and the region is left as it was;
#   4. launch counters she writes do not scale alice's SM share down: which
#      leases run is NVML's per-process samples' word (the fake's
#      FAKE_NVML_UTIL); when both really run, both are scaled (the check
#      can fail).
# Needs root and the driver double; skipped otherwise.
BACKSTOP_TOOLS=tsr_region_attack BACKSTOP_USERS="tsr-mallory tsr-alice"
source "$(dirname "$0")/lib.sh"
ATTACK=$T_DIR/bin/tsr_region_attack
export FAKE_NVML_UTIL=$T_DIR/util
: >"$FAKE_NVML_UTIL"
start_backstop_daemon
acted_on() { grep '"event":"backstop"' "$AUDIT" | grep "\"lease\":$1," | tail -n 1 || true; }

# ---- 1. a slot naming another user's process -----------------------------------------
t --as tsr-alice lease create --device 0 --mem 50% --for 10m --on-expiry signal --json; expect_rc 0; A=$(json_field id)
t --as tsr-mallory lease create --device 0 --mem 1% --for 10m --on-expiry signal --json; expect_rc 0; M=$(json_field id)
tenant alice_gpu tsr-alice 1024
out=$(as tsr-mallory "$ATTACK" slot "$REGIONS/lease-$M.region" "$alice_gpu" 2>&1 || true)
ok 'grep -q "^done" <<<"$out"' "mallory could not name alice's process in her slot: $out"
sleep 1
ok 'alive "$alice_gpu"' "alice's process was signalled as mallory's: $(acted_on "$M")"
ok '[ -z "$(acted_on "$M")" ]' "the backstop acted on mallory's lease for alice's process: $(acted_on "$M")"
t lease show "$M" --json
ok '[ "$(json_field gpu_bytes)" = 0 ]' "alice's process counts as mallory's on the GPU: $OUT"
kill -TERM "$alice_gpu"; wait "$alice_gpu" 2>/dev/null || true
t --as tsr-mallory lease release "$M"; expect_rc 0

# ---- 2. --over-limit log: the region's words changed, the lease's action kept ----------
t --as tsr-mallory lease create --device 0 --mem 8% --for 10m --over-limit log --json; expect_rc 0
R=$(json_field id)
f=$REGIONS/lease-$R.region
tenant held tsr-mallory 1024 --region "$REGIONS" "$R"
for i in $(seq 1 300); do [ -n "$(acted_on "$R")" ] && break; sleep 0.01; done
line=$(acted_on "$R")
ok 'grep -q "\"pids\":\[$held\]" <<<"$line" && grep -q "\"action\":\"log\"" <<<"$line"' "the log lease's audit line: $line"
t lease show "$R" --json
ok '[ "$(json_field revoked)" = false ]' "the backstop revoked a log lease's region: $OUT"
as tsr-mallory "$ATTACK" hold "$f" state 3 4 >/dev/null 2>&1 &
H1=$!
as tsr-mallory "$ATTACK" hold "$f" limit $((64 << 30)) 4 >/dev/null 2>&1 &
H2=$!
for i in $(seq 1 300); do grep -q "\"event\":\"region\",.*\"lease\":$R,.*\"header\"" "$AUDIT" && break; sleep 0.01; done
ok 'grep -q "\"event\":\"region\",.*\"lease\":$R,.*\"header\"" "$AUDIT"' "no audit line for the raised limit"
wait "$H1" "$H2" 2>/dev/null || true
state_word() { od -An -t u4 -j 56 -N 4 "$f" | tr -d ' '; }
limit_word() { od -An -t u8 -j 40 -N 8 "$f" | tr -d ' '; }
sleep 0.6
t lease show "$R" --json
ok '[ "$(state_word)" = 1 ] && [ "$(limit_word)" = "$(json_field bytes)" ]' \
  "the region's words were left as she wrote them: state $(state_word), limit $(limit_word)"
ok '[ "$(json_field tampered)" = true ] && [ "$(json_field over_limit)" = log ]' "lease show: $OUT"
ok 'alive "$held"' "a log lease's process was signalled after its region was tampered with"
ok '[ "$(acted_on "$R" | grep -c "")" = 1 ]' "one episode, several lines: $(acted_on "$R")"
kill -TERM "$held"; wait "$held" 2>/dev/null || true
t --as tsr-mallory lease release "$R"; expect_rc 0

# ---- 3. a revoke lease's slot holder over it: signalled at once, region left -----------------
t --as tsr-mallory lease create --device 0 --mem 8% --for 10m --on-expiry revoke --json; expect_rc 0
R2=$(json_field id)
tenant held2 tsr-mallory 1024 --region "$REGIONS" "$R2"
gone_within "$held2" 3
ok '[ "$STATUS" = 143 ] && [ "$GONE_MS" -le 1500 ]' \
  "a slot holder over a revoke lease was not SIGTERMed at once (status ${STATUS:-alive}, ${GONE_MS:-?} ms)"
line=$(acted_on "$R2")
ok 'grep -q "\"pids\":\[$held2\]" <<<"$line" && grep -q "\"action\":\"signal\"" <<<"$line"' "the audit line: $line"
t lease show "$R2" --json
ok '[ "$(json_field revoked)" = false ] && [ "$(json_field tampered)" = false ]' "lease show: $OUT"
t --as tsr-mallory lease release "$R2"; expect_rc 0

# ---- 4. forged launch counters and the switching reserve -------------------------------
t --as tsr-alice lease create --device 0 --mem 10% --sm 70% --for 10m --json; expect_rc 0; S=$(json_field id)
t --as tsr-mallory lease create --device 0 --mem 11% --sm 30% --for 10m --json; expect_rc 0; F=$(json_field id)
tenant alice_run tsr-alice 100 --region "$REGIONS" "$S"
tenant mallory_idle tsr-mallory 100 --region "$REGIONS" "$F"
echo "$alice_run 50" >"$FAKE_NVML_UTIL" # alice's kernels run; mallory's do not
# both regions' counters move: alice's as her shim would count, mallory's forged
for i in $(seq 1 20); do
  as tsr-alice "$ATTACK" set "$REGIONS/lease-$S.region" launches "$i" >/dev/null
  as tsr-mallory "$ATTACK" set "$REGIONS/lease-$F.region" launches "$((i * 1000))" >/dev/null
  sleep 0.1
done
t lease show "$S" --json
ok '[ "$(json_field sm_now_ppm)" = 700000 ]' "mallory's forged counters scaled alice's share: $(json_field sm_now_ppm)"
printf '%s 50\n%s 40\n' "$alice_run" "$mallory_idle" >"$FAKE_NVML_UTIL" # both run now
for i in $(seq 1 30); do t lease show "$S" --json; [ "$(json_field sm_now_ppm)" = 658000 ] && break; sleep 0.1; done
ok '[ "$(json_field sm_now_ppm)" = 658000 ]' "two leases that really run were not scaled: $(json_field sm_now_ppm)"
kill -TERM "$alice_run" "$mallory_idle"; wait "$alice_run" "$mallory_idle" 2>/dev/null || true
stop_daemon
finish
