# `tessera run`: a command under a lease, as a user runs it. Without a GPU
# this checks what run sets up (the preload, TESSERA_LEASE, the region dir),
# the lease it creates and releases, exit statuses, signals, and refusals;
# tests/gpu/shim holds the same program to a lease on a real GPU. --wait:
# CMD starts only once the lease it waits for is granted.
source "$(dirname "$0")/lib.sh"
write_config "region_dir = $T_DIR/regions"
start_daemon

# a lease made for the command and released after it
t run --device 0 --mem 10% --for 1m -- env
expect_rc 0 "run env"
ID=$(sed -n 's/^TESSERA_LEASE=//p' <<<"$OUT")
[[ "$ID" =~ ^[0-9]+$ ]] && pass || fail "TESSERA_LEASE not set: $OUT"
grep -q "^LD_PRELOAD=.*/libtessera-cuda.so" <<<"$OUT" && pass || fail "LD_PRELOAD: $(grep LD_PRELOAD <<<"$OUT")"
grep -q "^TESSERA_REGION_DIR=$T_DIR/regions$" <<<"$OUT" && pass || fail "TESSERA_REGION_DIR: $(grep REGION <<<"$OUT")"
t lease show "$ID"; expect_out "state +released" "the lease run created is released after the command"

# a command that outlives --for: run renews the lease it made while the
# command runs (to 1 s from now, every half second), so it never expires;
# released, not expired, when the command ends
t run --device 0 --mem 10% --for 1s -- sh -c 'sleep 2.5; echo "$TESSERA_LEASE"'
expect_rc 0 "run past --for"; LONG=$(tail -n1 <<<"$OUT")
t lease show "$LONG"; expect_out "state +released" "a lease kept alive by run, released after the command (not expired)"
[ "$(grep '"event":"renew"' "$T_STATE/audit.log" | grep -c "\"lease\":$LONG,")" -ge 3 ] && pass ||
  fail "run renewed lease $LONG fewer than 3 times in 2.5 s"
# the command starts with no signal blocked (run holds SIGCHLD for its wait)
t run --device 0 --mem 10% --for 1m -- grep SigBlk /proc/self/status
expect_rc 0; expect_out "^SigBlk:[[:space:]]+0+$" "the command's blocked signals"

# the shims: both for a CUDA device, CUDA's first; or as --api says
if [ -f "$BIN/../lib/libtessera-opencl.so" ]; then
  t run --device 0 --mem 10% --for 1m -- env
  grep -q "^LD_PRELOAD=.*/libtessera-cuda.so:.*/libtessera-opencl.so$" <<<"$OUT" && pass ||
    fail "LD_PRELOAD for a CUDA device: $(grep LD_PRELOAD <<<"$OUT")"
  t run --device 0 --mem 10% --for 1m --api opencl -- sh -c 'echo "$LD_PRELOAD"'
  expect_rc 0; grep -q "^[^:]*/libtessera-opencl.so$" <<<"$OUT" && pass || fail "--api opencl preloaded '$OUT'"
fi
t run --device 0 --mem 10% --for 1m --api cuda -- sh -c 'echo "$LD_PRELOAD"'
expect_rc 0; grep -q "^[^:]*/libtessera-cuda.so$" <<<"$OUT" && pass || fail "--api cuda preloaded '$OUT'"
t run --device 0 --mem 10% --for 1m --api metal -- true
expect_rc 2 "--api with an unknown name"; expect_err "none of auto, cuda, opencl, both"

# the shim really is loaded into the command (it needs no GPU to load)
t run --device 0 --mem 10% --for 1m -- cat /proc/self/maps
expect_rc 0; expect_out "libtessera-cuda.so" "the command maps the shim"

# an existing lease is used and kept
t lease create --device 1 --mem 20% --for 10m --json; expect_rc 0; KEEP=$(json_field id)
t run --lease "$KEEP" --policy deny -- sh -c 'echo "$TESSERA_LEASE $TESSERA_POLICY"'
expect_rc 0; expect_out "^$KEEP deny$" "run --lease passes the lease and the policy"
t lease show "$KEEP"; expect_out "state +active" "a lease given with --lease is left active"

# several leases, one a GPU (torchrun, MPI): TESSERA_LEASE lists them
t lease create --device 0 --mem 10% --for 10m --json; expect_rc 0; ZERO=$(json_field id)
t run --lease "$ZERO,$KEEP" -- sh -c 'echo "$TESSERA_LEASE $TESSERA_REGION_DIR"'
expect_rc 0; expect_out "^$ZERO,$KEEP $T_DIR/regions$" "run --lease A,B lists both leases"
t lease show "$ZERO"; expect_out "state +active" "leases given with --lease are left active"
for bad in "$ZERO," ",$ZERO" "$ZERO,,$KEEP" "$ZERO,$ZERO" "$ZERO,x" ","; do
  t run --lease "$bad" -- true; expect_rc 2 "--lease '$bad'"; expect_one_line_err "--lease"
done
t lease create --device 0 --mem 5% --for 10m --json; expect_rc 0; ZERO2=$(json_field id)
t run --lease "$ZERO,$ZERO2" -- true; expect_rc 2 "two leases on one device"; expect_err "both on device 0"
t lease release "$ZERO2"; expect_rc 0
t run --lease "$ZERO,$ZERO2" -- true; expect_rc 1 "a list with an ended lease"; expect_err "not active"
t lease release "$ZERO"; expect_rc 0

# the command's exit status, and a signal's
t run --lease "$KEEP" -- sh -c 'exit 7'; expect_rc 7 "the command's exit status"
t run --lease "$KEEP" -- sh -c 'kill -TERM $$'; expect_rc 143 "killed by SIGTERM: 128+15"
t run --lease "$KEEP" -- /no/such/program; expect_rc 127 "a command that cannot start"
expect_err "cannot run /no/such/program"

# signals sent to `tessera run` reach the command; a created lease still goes
"$TESSERA" --socket "$T_SOCK" run --device 0 --mem 5% --for 1m -- sh -c 'trap "exit 42" TERM; echo $TESSERA_LEASE; while :; do sleep 0.05; done' >"$T_DIR/sig.out" &
RP=$!
for i in $(seq 1 100); do [ -s "$T_DIR/sig.out" ] && break; sleep 0.05; done
sleep 0.2
kill -TERM "$RP"
set +e; wait "$RP"; rc=$?; set -e
[ "$rc" -eq 42 ] && pass || fail "SIGTERM forwarded: run exited $rc, wanted the command's 42"
SID=$(head -n1 "$T_DIR/sig.out")
t lease show "$SID"; expect_out "state +released" "a signalled run still releases its lease"

# refusals: one clear line, the right status
t run -- true;                                   expect_rc 2 "no lease options"; expect_one_line_err "no lease options"
t run --device 0 --mem 10% --for 1m;             expect_rc 2 "no command"
t run --lease "$KEEP" --device 0 -- true;        expect_rc 2 "--lease with --device"
t run --lease 424242 -- true;                    expect_rc 1 "an unknown lease"; expect_err "424242"
t run --lease abc -- true;                       expect_rc 2 "a bad lease id"
t run --device 0 --mem 10 --for 1m -- true;      expect_rc 2 "a bare --mem number"
t run --lease "$KEEP" --policy maybe -- true;    expect_rc 2 "a bad policy"
TESSERA_SHIM=/no/shim.so t run --lease "$KEEP" -- true
expect_rc 4 "no shim"; expect_err "libtessera-cuda.so not found"
t run --device 0 --mem 5% --for 1m --on-expiry kill -- true; expect_rc 2 "a bad --on-expiry"
expect_one_line_err "a bad --on-expiry"
t lease create --device 0 --mem 5% --for 1m --on-expiry later; expect_rc 2 "lease create with a bad --on-expiry"
t lease release "$KEEP"; expect_rc 0

# expiry actions, on a lease given with --lease (one run creates lasts as
# long as its command). signal: the command (a descendant of the `run` that
# attached itself to the lease, and no CUDA process) gets SIGTERM at expiry.
# Signals never reach root, the daemon's user or an admin: as root, the
# commands that must be ended run as an ordinary user (tsr-erin); the
# daemon's own user's command lives on.
SIG_AS=()
if [ "$(id -u)" -eq 0 ] && command -v useradd >/dev/null && command -v setpriv >/dev/null; then
  real_users -- tsr-erin
  for so in libtessera-cuda.so libtessera-opencl.so; do
    [ -f "$BIN/../lib/$so" ] && cp "$BIN/../lib/$so" "$T_DIR/bin/"
  done
  chmod 755 "$T_DIR/bin/"*
  SIG_AS=(--as tsr-erin)
  t "${SIG_AS[@]}" lease create --device 0 --mem 5% --for 1s --on-expiry signal --json; expect_rc 0; E=$(json_field id)
  t "${SIG_AS[@]}" run --lease "$E" -- sleep 20
  expect_rc 143 "a command under a signal lease is ended at expiry"
  [ -z "$ERR" ] && pass || fail "run says more than nothing when its lease expired under it: $ERR"
else
  echo "NOTE: not root: no ordinary user to end; only the daemon's user's command is checked"
fi
t lease create --device 0 --mem 5% --for 1s --on-expiry signal --json; expect_rc 0; E=$(json_field id)
t run --lease "$E" -- sh -c 'sleep 1.8; echo lived'
expect_rc 0 "the daemon's own user's command was signalled at expiry"; expect_out "^lived$"
# revoke (the node's default): the command lives on, its region is ended at once
t lease create --device 0 --mem 5% --for 1s --json; expect_rc 0; E=$(json_field id)
t run --lease "$E" -- sh -c \
  'r="$TESSERA_REGION_DIR/lease-$TESSERA_LEASE.region"; [ -e "$r" ] || exit 9; sleep 1.5; [ -e "$r" ] && exit 8; echo lived'
expect_rc 0 "a command under a revoke lease lives on past expiry"; expect_out "^lived$"
# shown and kept: lease show, --json, and a restart
t lease create --device 1 --mem 5% --for 10m --on-expiry signal --json; expect_rc 0; S=$(json_field id)
[ "$(json_field on_expiry)" = signal ] && pass || fail "--json on_expiry: $OUT"
t lease create --device 1 --mem 6% --for 10m --json; expect_rc 0; R=$(json_field id)
[ "$(json_field on_expiry)" = revoke ] && pass || fail "the node's default action is not shown: $OUT"
t lease create --device 1 --mem 7% --for 10m --json; expect_rc 0; O=$(json_field id)
stop_daemon
grep -q "^on_expiry: signal$" "$T_STATE"/gpu_1_*_"$S".lock && pass || fail "on_expiry is not in the lock file: $(cat "$T_STATE"/gpu_1_*_"$S".lock)"
sed -i '/^on_expiry: /d' "$T_STATE"/gpu_1_*_"$O".lock # as written before actions existed
write_config "region_dir = $T_DIR/regions" "on_expiry = signal"
start_daemon
t lease show "$S"; expect_out "^on expiry +signal" "lease show after a restart"
t lease show "$R" --json; [ "$(json_field on_expiry)" = revoke ] && pass || fail "a lease keeps the action it was made with: $OUT"
t lease show "$O" --json; [ "$(json_field on_expiry)" = signal ] && pass || fail "an old lock file takes the node's default: $OUT"
t lease release "$O"; expect_rc 0
# release runs the action too: `run --lease` attached itself, so its command is the lease's
t lease release "$S"; expect_rc 0
if [ ${#SIG_AS[@]} -gt 0 ]; then
  t "${SIG_AS[@]}" lease create --device 1 --mem 5% --for 10m --on-expiry signal --json; expect_rc 0
  E=$(json_field id)
  runuser -u tsr-erin -- "$TESSERA" --socket "$T_SOCK" run --lease "$E" -- sleep 20 >/dev/null 2>&1 &
  RP=$!
  sleep 0.3
  t "${SIG_AS[@]}" lease release "$E"; expect_rc 0
  set +e; wait "$RP"; rc=$?; set -e
  [ "$rc" -eq 143 ] && pass || fail "a command under a released signal lease: run exited $rc, not 143"
fi
t lease release "$R"; expect_rc 0

# --wait: the device is full; run waits for its lease, and CMD starts only
# once it is granted, under it
t lease create --device 1 --mem 100% --for 1h --json; expect_rc 0; FULL=$(json_field id)
( set +e; "$TESSERA" --socket "$T_SOCK" run --device 1 --mem 50% --for 1m --wait 30s -- \
    sh -c 'echo "ran under $TESSERA_LEASE"' >"$T_DIR/rw.out" 2>"$T_DIR/rw.err"; echo $? >"$T_DIR/rw.rc" ) &
for _ in $(seq 1 100); do grep -q "waits, number 1" "$T_DIR/rw.err" 2>/dev/null && break; sleep 0.05; done
W=$(sed -n 's/.*request \([0-9]*\) waits.*/\1/p' "$T_DIR/rw.err")
[ -n "$W" ] && [ ! -s "$T_DIR/rw.out" ] && pass || fail "run waits, CMD not started: $(cat "$T_DIR/rw.err" "$T_DIR/rw.out")"
t lease release "$FULL"; expect_rc 0
for _ in $(seq 1 200); do [ -s "$T_DIR/rw.rc" ] && break; sleep 0.05; done
[ "$(cat "$T_DIR/rw.rc" 2>/dev/null)" = 0 ] && grep -q "^ran under $W$" "$T_DIR/rw.out" && pass ||
  fail "CMD ran under the granted lease $W: rc $(cat "$T_DIR/rw.rc" 2>/dev/null), $(cat "$T_DIR/rw.out" "$T_DIR/rw.err")"
t lease show "$W"; expect_out "state +released" "and the lease is released after it"
finish
