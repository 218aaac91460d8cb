# The NVML backstop, as a node meets it: a root daemon whose GPUs come from
# NVML (the fake NVML standing for the driver double: FAKE_NVML_CUDA_STATE),
# and tenants that use the double WITHOUT the shim, so only the backstop can
# see them:
#   (i)   a tenant over its lease is SIGTERMed within about a second, and the
#         audit log says why;
#   (ii)  one under the limit is left alone;
#   (iii) under policy = deny, an unleased user's process is signalled,
#         root's is not;
#   (iv)  a tenant that ignores SIGTERM is SIGKILLed after the grace, and the
#         lease is acted on once, not again while the grace runs;
#   (v)   a tenant in its own PID namespace, tied to the lease only by its
#         region slot (its user's newer lease on the device would take it
#         otherwise), is attributed through NSpid and caught;
#   (vi)  the over-limit action (over_limit, signal by default) applies, not
#         the expiry action: a `revoke` lease's process is signalled, its
#         region left as it is (over_limit.sh: the over-limit action itself).
# Also the per-user lease index beside the regions (the shim's node-wide
# mode), and lease.attach through `tessera run`. Needs root; skipped
# otherwise, and without the driver double (no cuda.h at build time).
source "$(dirname "$0")/lib.sh"

start_backstop_daemon "policy = deny"
t devices --json; expect_rc 0
expect_out '"uuid": "GPU-facec0da-0000-0000-0000-000000000000"' "the daemon's device is the double's, by UUID"
grep -q "backstop: watching 1 of 1 device" "$T_LOG" && pass || fail "the backstop does not watch the device: $(cat "$T_LOG")"

t --as tsr-alice lease create --device 0 --mem 10% --for 10m --on-expiry signal --json; expect_rc 0
A=$(json_field id); LIMIT=$(json_field bytes)
[ "$(json_field on_expiry)" = signal ] && pass || fail "lease create --on-expiry signal: $OUT"

# (ii) under the limit (100 MiB and a 64 MiB context of 819 MiB): left alone
tenant under tsr-alice 100
sleep 0.6
ok 'alive "$under"' "a tenant under its lease was signalled: $(tail -n 3 "$T_LOG")"
ok '[ "$(backstop_lines)" = 0 ]' "the backstop acted on a lease under its limit: $(cat "$AUDIT")"
kill -TERM "$under"; wait "$under" 2>/dev/null || true

# (i) over the limit: SIGTERM within about a second, and the audit log says why
tenant over tsr-alice 1024
gone_within "$over" 3
ok '[ -n "$GONE_MS" ] && [ "$GONE_MS" -le 1500 ]' "a tenant over its lease lives on (${GONE_MS:-more than 3000} ms)"
ok '[ "$STATUS" = 143 ]' "the tenant over its lease ended with status ${STATUS:-?}, not 143 (SIGTERM)"
echo "note: a tenant over its lease was stopped ${GONE_MS} ms after it was ready"
line=$(grep '"event":"backstop"' "$AUDIT" | tail -n 1)
ok 'grep -q "\"lease\":$A," <<<"$line" && grep -q "\"pids\":\[$over\]" <<<"$line"' "audit line: $line"
ok 'grep -q "\"limit_bytes\":$LIMIT," <<<"$line" && grep -q "\"action\":\"signal\"" <<<"$line"' "audit line: $line"
ok 'grep -q "over its limit" <<<"$line"' "the audit line does not say why: $line"

# (iv) SIGTERM ignored: SIGKILL after the 1 s grace, and one act, not one per round
before=$(backstop_lines)
tenant stubborn tsr-alice 1024 --ignore-term
for i in $(seq 1 100); do [ "$(backstop_lines)" -gt "$before" ] && break; sleep 0.01; done
# alive half a second after the SIGTERM (the audit line's time_ns), when the
# shell got there that soon: a loaded machine (ctest -j) can take longer
# than the grace just to poll
acted=$(grep '"event":"backstop"' "$AUDIT" | tail -n 1 | sed -nE 's/.*"time_ns":([0-9]+).*/\1/p')
while [ -n "$acted" ] && [ $(( $(date +%s%N) - acted )) -lt 500000000 ]; do sleep 0.05; done
if [ -n "$acted" ] && [ $(( $(date +%s%N) - acted )) -lt 800000000 ]; then
  ok 'alive "$stubborn"' "a tenant that ignores SIGTERM was killed before its grace"
else
  echo "note: too slow here to see the tenant inside its grace (${acted:+$(( ($(date +%s%N) - acted) / 1000000 )) ms after the act})"
fi
gone_within "$stubborn" 3
ok '[ "$STATUS" = 137 ]' "a tenant that ignores SIGTERM ended with status ${STATUS:-? (still alive)}, not 137 (SIGKILL)"
sleep 0.3
ok '[ "$(backstop_lines)" = $((before + 1)) ]' "the lease was acted on $(( $(backstop_lines) - before )) times during one grace"

# (iii) policy deny: bob holds no lease; root is never acted on
tenant rooted - 100
tenant unleased tsr-bob 100
gone_within "$unleased" 3
ok '[ "$STATUS" = 143 ]' "bob's unleased tenant ended with status ${STATUS:-? (still alive)}, not 143"
line=$(grep '"event":"backstop"' "$AUDIT" | tail -n 1)
ok 'grep -q "\"lease\":null" <<<"$line" && grep -q "\"owner\":\"tsr-bob\"" <<<"$line" && grep -q "policy deny" <<<"$line"' "audit line for bob: $line"
ok 'alive "$rooted"' "root's process was signalled under policy deny"
kill -TERM "$rooted"; wait "$rooted" 2>/dev/null || true

# (v) a tenant of alice in its own PID namespace, tied to lease A only by its
# region slot (without it, alice's newer lease A2 on the device would take
# it): found through NSpid. It ignores SIGTERM, so that it lives long enough
# (the grace) to be looked at.
if unshare --pid --fork --mount-proc true 2>/dev/null; then
  t --as tsr-alice lease create --device 0 --mem 5% --for 10m --json; expect_rc 0; A2=$(json_field id)
  before=$(backstop_lines)
  unshare --pid --fork --mount-proc sh -c '"$0" "$@"; exit $?' setpriv --reuid tsr-alice --regid tsr-alice \
    --clear-groups -- "$GPU" 1024 --ignore-term --region "$REGIONS" "$A" >"$T_DIR/ns.out" 2>&1 &
  U=$!
  PIDS+=("$U")
  for i in $(seq 1 300); do grep -q '^ready' "$T_DIR/ns.out" 2>/dev/null && break; sleep 0.01; done
  ok 'grep -q "^ready [0-9]" "$T_DIR/ns.out"' "the namespaced tenant did not start: $(cat "$T_DIR/ns.out")"
  nspid=$(sed -n 's/^ready //p' "$T_DIR/ns.out")
  host=$(ns_host_pid "$GPU" "$U")
  ok '[ -n "$host" ] && [ "$host" != "$nspid" ] && grep -Eq "^NSpid:\s+$host\s+$nspid$" /proc/$host/status' \
    "the tenant is not in a namespace of its own (host pid ${host:-?}, its own $nspid)"
  for i in $(seq 1 200); do [ "$(backstop_lines)" -gt "$before" ] && break; sleep 0.01; done
  line=$(grep '"event":"backstop"' "$AUDIT" | tail -n 1)
  ok 'grep -q "\"lease\":$A," <<<"$line" && grep -q "\"pids\":\[$host\]" <<<"$line"' \
    "the namespaced tenant (host pid $host) was not caught: $line"
  gone_within "$U" 4
  ok '[ -n "$GONE_MS" ] && ! alive "$host"' "the namespaced tenant lives on"
  echo "note: the namespaced tenant's sandbox ended with status ${STATUS:-?}"
  t --as tsr-alice lease release "$A2"; expect_rc 0
else
  echo "SKIP (v): unshare --pid --fork --mount-proc is refused here"
fi

# (vi) the expiry action is not the over-limit action: a `--on-expiry revoke`
# lease over its limit has its process (no slot, no shim) SIGTERMed, as the
# node's over_limit (signal) says, and its region is not revoked (before
# over_limit, revoke applied here: the region was ended and only processes
# without a slot were signalled; over_limit.sh has the slot holders)
t --as tsr-bob lease create --device 0 --mem 9% --for 10m --on-expiry revoke --json; expect_rc 0
RB=$(json_field id)
before=$(backstop_lines)
tenant rogue tsr-bob 1024
gone_within "$rogue" 3
ok '[ "$STATUS" = 143 ]' "a tenant without the shim over a revoke lease ended with status ${STATUS:-? (alive)}, not 143"
line=$(grep '"event":"backstop"' "$AUDIT" | tail -n 1)
ok 'grep -q "\"lease\":$RB," <<<"$line" && grep -q "\"action\":\"signal\"" <<<"$line" && grep -q "over_limit signal" <<<"$line"' \
  "the revoke lease's audit line: $line"
t lease show "$RB" --json
ok '[ "$(json_field revoked)" = false ] && [ "$(json_field on_expiry)" = revoke ] && [ "$(json_field over_limit)" = signal ]' \
  "lease show after the over-limit action: $OUT"
t lease show "$RB"; expect_out "^over limit +signal" "lease show (text)"
t --as tsr-bob lease release "$RB"; expect_rc 0

# the per-user lease index: alice's, hers alone, oldest first, gone with her leases
uid_a=$(id -u tsr-alice)
idx=$REGIONS/user-$uid_a.leases
t --as tsr-alice lease create --device 0 --mem 5% --for 10m --json; expect_rc 0; B=$(json_field id)
ok '[ "$(stat -c %U:%a "$idx")" = root:440 ]' "index owner/mode: $(stat -c %U:%a "$idx" 2>&1)"
ok 'as tsr-alice cat "$idx" >/dev/null' "alice cannot read her own lease index"
ok '! as tsr-alice chmod 600 "$idx" 2>/dev/null && ! as tsr-alice sh -c "echo 1 0 - >>$idx" 2>/dev/null' \
  "alice can change her lease index"
want=$(printf 'tessera-leases 1\n%s 0 GPU-facec0da-0000-0000-0000-000000000000\n%s 0 GPU-facec0da-0000-0000-0000-000000000000\n' "$A" "$B")
ok '[ "$(cat "$idx")" = "$want" ] && [ "$(tail -c 1 "$idx" | od -An -c | tr -d " ")" = "\n" ]' "index: $(cat "$idx")"
ok '! as tsr-bob cat "$idx" >/dev/null 2>&1' "bob can read alice's lease index"
ok '[ ! -e "$REGIONS/user-$(id -u tsr-bob).leases" ]' "bob, who holds no lease, has an index"
t --as tsr-alice lease release "$B"; expect_rc 0
ok '[ "$(cat "$idx")" = "$(printf "tessera-leases 1\n%s 0 GPU-facec0da-0000-0000-0000-000000000000" "$A")" ]' "index after a release: $(cat "$idx")"

# lease.attach: `tessera run --lease` registers itself; its command, which
# never maps the region, is the lease's and is signalled when it is released
as tsr-alice "$TESSERA" --socket "$T_SOCK" run --lease "$A" -- sleep 30 >"$T_DIR/run.out" 2>&1 &
RUN=$!
PIDS+=("$RUN")
sleep 0.3
t lease release "$A"; expect_rc 0
gone_within "$RUN" 3
ok '[ "$STATUS" = 143 ]' "a command under a released signal lease ended with status ${STATUS:-? (still alive)}, not 143"
ok '[ ! -e "$idx" ]' "alice's index stays after her last lease ended"
t --as tsr-bob lease create --device 0 --mem 5% --for 10m --json; expect_rc 0; C=$(json_field id)
t --as tsr-alice run --lease "$C" -- true; expect_rc 1 "run on another user's lease"
expect_err "not yours|another user's"

# a restart rebuilds the indexes
stop_daemon
printf 'stale\n' >"$REGIONS/user-4242.leases"
start_daemon --nvml-library "$BIN/../tests/libfake_nvml.so"
ok '[ ! -e "$REGIONS/user-4242.leases" ] && [ -f "$REGIONS/user-$(id -u tsr-bob).leases" ]' "indexes after a restart: $(ls "$REGIONS")"
stop_daemon
finish
