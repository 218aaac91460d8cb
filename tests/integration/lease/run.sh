# `tessera run`: a command under a lease, as a user runs it. Without a GPU
# this checks what run sets up (the preload, TESSERA_LEASE, the region dir),
# the lease it creates and releases, exit statuses, signals, and refusals;
# tests/gpu/shim holds the same program to a lease on a real GPU.
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

# the shim really is loaded into the command (it needs no GPU to load)
t run --device 0 --mem 10% --for 1m -- cat /proc/self/maps
expect_rc 0; expect_out "libtessera-cuda.so" "the command maps the shim"

# an existing lease is used and kept
t lease create --device 1 --mem 20% --for 10m --json; expect_rc 0; KEEP=$(json_field id)
t run --lease "$KEEP" --policy deny -- sh -c 'echo "$TESSERA_LEASE $TESSERA_POLICY"'
expect_rc 0; expect_out "^$KEEP deny$" "run --lease passes the lease and the policy"
t lease show "$KEEP"; expect_out "state +active" "a lease given with --lease is left active"

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
t lease release "$KEEP"; expect_rc 0
finish
