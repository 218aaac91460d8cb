# The CLI as a user drives it: create, list, show, release, devices, --json,
# --help everywhere, exit codes and one-line errors.
source "$(dirname "$0")/lib.sh"
start_daemon

t devices;                         expect_rc 0 devices; expect_out "Test GPU A" devices
t devices --json;                  expect_rc 0; expect_out '"memory_bytes": 85899345920' "devices --json"
t lease create --device 0 --mem 50% --for 2h
expect_rc 0 create; expect_out "^lease 1: device 0, 40 GiB \(50%\)" create
t lease create --device 1 --mem 0.25 --for 90s --sm 30% --json
expect_rc 0 "create --json"
for f in id device fraction bytes owner state deadline; do
  [ -n "$(json_field $f)" ] && pass || fail "lease JSON lacks $f: $OUT"
done
[ "$(json_field id)" = 2 ] && pass || fail "second lease id is not 2"
[ "$(json_field fraction)" = 0.25 ] && pass || fail "fraction: $(json_field fraction)"
[ "$(json_field bytes)" = 10737418240 ] && pass || fail "bytes: $(json_field bytes)"
[ "$(json_field state)" = active ] && pass || fail "state"
[ "$(json_field sm_ppm)" = 300000 ] && pass || fail "sm_ppm: $(json_field sm_ppm)"

t lease list;                      expect_rc 0 list; expect_out "^1 +0 +40 GiB +50%" list
t lease list --json;               expect_rc 0; expect_out '^\[' "list --json is an array"
[ "$(grep -c '"id"' <<<"$OUT")" = 2 ] && pass || fail "list --json has 2 leases"
t lease show 2;                    expect_rc 0; expect_out "state +active"; expect_out "sm share +30%"
t lease show 2 --json;             expect_rc 0; [ "$(json_field id)" = 2 ] && pass || fail "show --json"

# refusals: exit 1, one line on stderr, nothing changed
t lease create --device 0 --mem 60% --for 1h; expect_rc 1 over-commit; expect_one_line_err over-commit
expect_err "has 40 GiB free"
t lease create --device 7 --mem 10% --for 1h; expect_rc 1 "no such device"; expect_err "no device 7"
t lease show 99;                   expect_rc 1 "show missing"; expect_one_line_err
t lease release 99;                expect_rc 1 "release missing"

# usage errors: exit 2, before anything is sent
t lease create --device 0 --mem 150% --for 1h; expect_rc 2 "mem > 100%"; expect_one_line_err
t lease create --device 0 --mem 0 --for 1h;    expect_rc 2 "mem 0"
t lease create --device 0 --mem 50% --for 10;  expect_rc 2 "duration without unit"; expect_err "needs a unit"
t lease create --device 0 --mem 50% --for 0s;  expect_rc 2 "duration 0"
t lease create --device x --mem 50% --for 1h;  expect_rc 2 "device x"
t lease create --mem 50% --for 1h;             expect_rc 2 "missing --device"
t lease release abc;                           expect_rc 2 "bad id"
t lease release;                               expect_rc 2 "no id"
t lease frobnicate;                            expect_rc 2 "unknown subcommand"
t frobnicate;                                  expect_rc 2 "unknown command"
t lease list --bogus;                          expect_rc 2 "unknown option"

# --help on every command, exit 0, on stdout
for cmd in "" "lease" "lease create" "lease release" "lease list" "lease show" "devices" "demo" "daemon"; do
  # shellcheck disable=SC2086
  t $cmd --help
  expect_rc 0 "$cmd --help"; expect_out "usage" "$cmd --help"
done

# release, then the lease is shown as released
t lease release 1;                 expect_rc 0 release; expect_out "lease 1 released"
t lease show 1;                    expect_rc 0; expect_out "state +released"
t lease release 1;                 expect_rc 1 "double release"; expect_err "already released"

# --mem as an amount: rounded up to whole millionths, so at least that much
# (device 1 has 40 GiB, 10 GiB of it held by lease 2)
t lease create --device 1 --mem 3GB --for 1h --json; expect_rc 0 "--mem 3GB"
[ "$(json_field fraction_ppm)" = 69850 ] && pass || fail "3 GB of 40 GiB: $(json_field fraction_ppm) ppm"
[ "$(json_field bytes)" -ge 3000000000 ] && pass || fail "3 GB lease holds $(json_field bytes) bytes"
[ "$(json_field fraction)" = 0.06985 ] && pass || fail "fraction printed exactly: $(json_field fraction)"
t lease create --device 1 --mem 10GiB --for 1h; expect_rc 0 "--mem 10GiB"; expect_out "10 GiB \(25%\)"
t lease create --device 1 --mem 41GiB --for 1h; expect_rc 2 "--mem over the device"; expect_err "more than device 1 has \\(40 GiB\\)"
t lease create --device 1 --mem 20GiB --for 1h; expect_rc 1 "--mem over what is free"; expect_one_line_err
t lease create --device 9 --mem 1GiB --for 1h;  expect_rc 1 "--mem size on a missing device"; expect_err "no device 9"
t lease create --device 1 --mem lots --for 1h;  expect_rc 2 "--mem lots"; expect_one_line_err; expect_err "neither a share"

# finding the daemon: --socket beats TESSERA_SOCKET beats the default
set +e
OUT=$(TESSERA_SOCKET=$T_SOCK "$TESSERA" lease list --all 2>&1); RC=$?
set -e
expect_rc 0 "TESSERA_SOCKET"
set +e
OUT=$(TESSERA_SOCKET=$T_SOCK "$TESSERA" --socket "$T_DIR/nope.sock" lease list 2>&1); RC=$?
set -e
expect_rc 3 "--socket wins over TESSERA_SOCKET"
t --socket "$T_DIR/nope.sock" devices
expect_rc 3 "unreachable"; expect_err "no tessera daemon at"

# ids never repeat after a restart
stop_daemon
start_daemon
t lease create --device 0 --mem 10% --for 1h --json
expect_rc 0; [ "$(json_field id)" -gt 2 ] && pass || fail "id after restart: $(json_field id)"
finish
