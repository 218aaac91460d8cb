# What the backstop does to a lease's processes over the lease: its
# over-limit action (over_limit: the node's, or the lease's own --over-limit),
# apart from its expiry action. A root daemon on the fake NVML (lib.sh), and
# tenants that hold a slot in their lease's region, as the shim would, and
# took their memory by a route the shim does not see (the driver double
# without the shim):
#   1. by default (signal) a slot holder over its lease is SIGTERMed in the
#      round that finds it, under a `--on-expiry revoke` lease too; the audit
#      line says signal and why; the region is not revoked;
#   2. --over-limit log: it is left running, and one audit line (action log)
#      says so, one per episode, not one per round; a new episode, a new line;
#   3. a slot holder that ignores SIGTERM is SIGKILLed after the grace (1 s),
#      with one act;
#   4. a lease of root: its process is never signalled; the audit line says
#      log and why;
#   5. node over_limit = log: a lease that names none leaves its process
#      running; one that says --over-limit signal has it signalled; lease
#      show, list and the lock file say which; a lease without its own
#      follows the node's setting across a restart;
#   6. `tessera run --over-limit log` passes the setting to the lease it
#      creates; a bad value is refused before anything is sent.
# Needs root and the driver double; skipped otherwise.
source "$(dirname "$0")/lib.sh"
acted_on() { grep '"event":"backstop"' "$AUDIT" | grep "\"lease\":$1," || true; }
lines_of() { acted_on "$1" | grep -c '' || true; }

start_backstop_daemon
# ---- 1. the default: signal, slot holders included -------------------------------------
t --as tsr-alice lease create --device 0 --mem 10% --for 10m --on-expiry revoke --json; expect_rc 0
A=$(json_field id); LIMIT=$(json_field bytes)
ok '[ "$(json_field over_limit)" = signal ] && [ "$(json_field on_expiry)" = revoke ]' \
  "the node's over_limit (signal) is not shown beside the lease's on_expiry: $OUT"
ok '! grep -q "^over_limit:" "$T_STATE"/gpu_0_*_"$A".lock' \
  "a lease that names no over_limit has one in its lock file: $(cat "$T_STATE"/gpu_0_*_"$A".lock)"
tenant held tsr-alice 1024 --region "$REGIONS" "$A"
gone_within "$held" 3
ok '[ -n "$GONE_MS" ] && [ "$GONE_MS" -le 1500 ]' "a slot holder over its lease lives on (${GONE_MS:-more than 3000} ms)"
ok '[ "$STATUS" = 143 ]' "the slot holder over its lease ended with status ${STATUS:-?}, not 143 (SIGTERM)"
echo "note: a slot holder over its lease was stopped ${GONE_MS:-?} ms after it was ready"
line=$(acted_on "$A" | tail -n 1)
ok 'grep -q "\"pids\":\[$held\]" <<<"$line" && grep -q "\"action\":\"signal\"" <<<"$line"' "audit line: $line"
ok 'grep -q "\"limit_bytes\":$LIMIT," <<<"$line" && grep -q "over its limit" <<<"$line" && grep -q "SIGTERM to 1 process" <<<"$line"' \
  "the audit line does not say why: $line"
t lease show "$A" --json
ok '[ "$(json_field revoked)" = false ]' "the over-limit action revoked the region (the expiry action's): $OUT"
t --as tsr-alice lease release "$A"; expect_rc 0

# ---- 2. --over-limit log: left running, one line per episode -------------------------
t --as tsr-alice lease create --device 0 --mem 10% --for 10m --over-limit log --on-expiry signal --json; expect_rc 0
L=$(json_field id)
ok '[ "$(json_field over_limit)" = log ] && [ "$(json_field on_expiry)" = signal ]' "lease create --over-limit log: $OUT"
ok 'grep -q "^over_limit: log$" "$T_STATE"/gpu_0_*_"$L".lock' "over_limit is not in the lock file: $(cat "$T_STATE"/gpu_0_*_"$L".lock)"
tenant logged tsr-alice 1024 --region "$REGIONS" "$L"
for i in $(seq 1 200); do [ "$(lines_of "$L")" -gt 0 ] && break; sleep 0.01; done
sleep 1 # ten rounds
ok 'alive "$logged"' "a process over a --over-limit log lease was signalled: $(acted_on "$L")"
ok '[ "$(lines_of "$L")" = 1 ]' "one episode, $(lines_of "$L") audit lines: $(acted_on "$L")"
line=$(acted_on "$L" | tail -n 1)
ok 'grep -q "\"action\":\"log\"" <<<"$line" && grep -q "\"pids\":\[$logged\]" <<<"$line" && grep -q "left running" <<<"$line"' \
  "the log lease's audit line: $line"
ok 'grep -q "backstop: lease $L of tsr-alice.*: log: .*over its limit" "$T_LOG"' "no log line for the log lease"
t lease show "$L"; expect_out "^over limit +log" "lease show (text)"
t lease list --all; expect_out "OVER LIMIT" "lease list shows the column when a lease logs"
expect_out "^$L .* log( |$)" "lease list (text)"
kill -TERM "$logged"; wait "$logged" 2>/dev/null || true
# a round finds the lease within its limit (NVML's count, gpu_bytes): the episode is over
for i in $(seq 1 100); do t lease show "$L" --json; [ "$(json_field gpu_bytes)" = 0 ] && break; sleep 0.05; done
ok '[ "$(json_field gpu_bytes)" = 0 ]' "the lease's processes still hold memory after its tenant ended: $OUT"
tenant logged2 tsr-alice 1024 --region "$REGIONS" "$L"
for i in $(seq 1 200); do [ "$(lines_of "$L")" -gt 1 ] && break; sleep 0.01; done
ok '[ "$(lines_of "$L")" = 2 ] && alive "$logged2"' "a second episode: $(lines_of "$L") lines: $(acted_on "$L")"
kill -TERM "$logged2"; wait "$logged2" 2>/dev/null || true
t --as tsr-alice lease release "$L"; expect_rc 0

# ---- 3. SIGTERM ignored: SIGKILL after the grace, one act ------------------------------
t --as tsr-bob lease create --device 0 --mem 10% --for 10m --json; expect_rc 0; S=$(json_field id)
tenant stubborn tsr-bob 1024 --ignore-term --region "$REGIONS" "$S"
for i in $(seq 1 200); do [ "$(lines_of "$S")" -gt 0 ] && break; sleep 0.01; done
acted=$(acted_on "$S" | tail -n 1 | sed -nE 's/.*"time_ns":([0-9]+).*/\1/p')
while [ -n "$acted" ] && [ $(( $(date +%s%N) - acted )) -lt 400000000 ]; do sleep 0.05; done
if [ -n "$acted" ] && [ $(( $(date +%s%N) - acted )) -lt 800000000 ]; then
  ok 'alive "$stubborn"' "a slot holder that ignores SIGTERM was killed before its grace"
else
  echo "note: too slow here to see the tenant inside its grace"
fi
gone_within "$stubborn" 4
ok '[ "$STATUS" = 137 ]' "a slot holder that ignores SIGTERM ended with status ${STATUS:-? (still alive)}, not 137 (SIGKILL)"
sleep 0.3
ok '[ "$(lines_of "$S")" = 1 ]' "the lease was acted on $(lines_of "$S") times in one grace: $(acted_on "$S")"
ok 'grep -q "pid $stubborn (lease $S) outlived its 1.0 s grace: SIGKILL" "$T_LOG"' "no SIGKILL in the log"
t --as tsr-bob lease release "$S"; expect_rc 0

# ---- 4. root's lease: never signalled, logged as such ---------------------------------------
t lease create --device 0 --mem 10% --for 10m --json; expect_rc 0; RT=$(json_field id)
ok '[ "$(json_field owner_uid)" = 0 ] && [ "$(json_field over_limit)" = signal ]' "root's lease: $OUT"
tenant rooted - 1024 --region "$REGIONS" "$RT"
for i in $(seq 1 200); do [ "$(lines_of "$RT")" -gt 0 ] && break; sleep 0.01; done
sleep 0.5
ok 'alive "$rooted"' "root's process over root's lease was signalled"
ok '[ "$(lines_of "$RT")" = 1 ]' "root's lease: $(lines_of "$RT") audit lines: $(acted_on "$RT")"
line=$(acted_on "$RT" | tail -n 1)
ok 'grep -q "\"action\":\"log\"" <<<"$line" && grep -q "never signalled" <<<"$line"' "root's lease's audit line: $line"
kill -TERM "$rooted"; wait "$rooted" 2>/dev/null || true
t lease release "$RT"; expect_rc 0
stop_daemon

# ---- 5. the node's over_limit = log, and a lease's own signal over it ------------------------
start_backstop_daemon "over_limit = log"
t --as tsr-alice lease create --device 0 --mem 10% --for 10m --json; expect_rc 0; N=$(json_field id)
ok '[ "$(json_field over_limit)" = log ]' "the node's over_limit = log is not shown: $OUT"
t --as tsr-bob lease create --device 0 --mem 11% --for 10m --over-limit signal --json; expect_rc 0; P=$(json_field id)
ok '[ "$(json_field over_limit)" = signal ]' "--over-limit signal under a log node: $OUT"
tenant nodelog tsr-alice 1024 --region "$REGIONS" "$N"
tenant own tsr-bob 1024 --region "$REGIONS" "$P"
gone_within "$own" 3
ok '[ "$STATUS" = 143 ]' "a lease's own --over-limit signal did not override the node's log (status ${STATUS:-? alive})"
ok 'alive "$nodelog"' "a process of a lease that follows the node's log was signalled"
ok 'grep -q "\"action\":\"log\"" <<<"$(acted_on "$N")"' "no log line for the lease that follows the node: $(acted_on "$N")"
ok 'grep -q "\"action\":\"signal\"" <<<"$(acted_on "$P")"' "no signal line for the lease of its own: $(acted_on "$P")"
t lease list --all
expect_out "^$N .* log( |$)" "lease list: the node's log"
expect_out "^$P .* signal( |$)" "lease list: the lease's signal"
kill -TERM "$nodelog"; wait "$nodelog" 2>/dev/null || true
# a restart with the node's setting changed: a lease that named none follows it
stop_daemon
ok '! grep -q "^over_limit:" "$T_STATE"/gpu_0_*_"$N".lock && grep -q "^over_limit: signal$" "$T_STATE"/gpu_0_*_"$P".lock' \
  "lock files: $(cat "$T_STATE"/gpu_0_*.lock)"
start_backstop_daemon
t lease show "$N" --json
ok '[ "$(json_field over_limit)" = signal ]' "a lease without its own does not follow the node's new over_limit: $OUT"
t lease show "$P" --json
ok '[ "$(json_field over_limit)" = signal ]' "a lease's own over_limit was lost in a restart: $OUT"
t --as tsr-alice lease release "$N"; expect_rc 0
t --as tsr-bob lease release "$P"; expect_rc 0

# ---- 6. tessera run --over-limit --------------------------------------------------
t --as tsr-alice run --device 0 --mem 5% --for 10m --over-limit log -- sh -c 'echo "lease $TESSERA_LEASE"'
expect_rc 0 "run --over-limit log"
R=$(sed -n 's/^lease //p' <<<"$OUT")
t lease show "${R:-0}" --json
ok '[ -n "$R" ] && [ "$(json_field state)" = released ] && [ "$(json_field over_limit)" = log ]' \
  "the lease run created does not say over_limit log: $OUT"
t --as tsr-alice run --device 0 --mem 5% --for 10m --over-limit kill -- true
expect_rc 2 "run with a bad --over-limit"; expect_one_line_err "run with a bad --over-limit"
t --as tsr-alice lease create --device 0 --mem 5% --for 10m --over-limit revoke
expect_rc 2 "lease create --over-limit revoke"; expect_err "--over-limit: 'revoke' is neither signal nor log"
t --as tsr-alice run --lease 1 --over-limit log -- true
expect_rc 2 "run --lease with --over-limit"
stop_daemon
finish
