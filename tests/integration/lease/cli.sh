# The CLI as a user drives it: create, list, show, release, devices, --json,
# --help everywhere, exit codes and one-line errors; what --user, --mem, --sm
# and lease ids accept; lease list across pages; every error code's exit
# status (against a stand-in daemon); `tessera daemon` and `tessera demo`
# through the tesserad beside tessera.
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

# --user: a name that cannot be sent is a usage error, never a lease for the caller
count_leases() { t lease list --all --json; grep -c '"id"' <<<"$OUT" || true; }
before=$(count_leases)
for bad in $'\xff\xfe' $'al\xc3' '' 'a b' $'a\tb' $'a\x7f' $'a\xc2\x85b' "$(printf 'u%.0s' {1..64})"; do
  t lease create --device 0 --mem 1% --for 1h --user "$bad"
  expect_rc 2 "--user $(printf %q "$bad")"; expect_one_line_err "--user $(printf %q "$bad")"
done
t lease create --device 0 --mem 1% --for 1h --user $'\xff'; expect_err "not valid UTF-8"
t lease create --device 0 --mem 1% --for 1h --user 'a b';   expect_err "no spaces or control characters"
t lease create --device 0 --mem 1% --for 1h --user "$(printf 'u%.0s' {1..64})"; expect_err "1 to 63 bytes"
[ "$(count_leases)" = "$before" ] && pass || fail "a refused --user created a lease"
t lease create --device 0 --mem 1% --for 1h --user "nosuchuser-$$-xyz"; expect_rc 1 "unknown user is the daemon's refusal"

# --mem and --sm: a share with % or a point, or a size with a unit; exact, never rounded
for bad in 1 2 0 30 1024; do
  t lease create --device 0 --mem "$bad" --for 1h; expect_rc 2 "--mem $bad"; expect_one_line_err "--mem $bad"
  expect_err "bare number: write a share with '%' or a decimal point" "--mem $bad"
  expect_err "or a size with a unit" "--mem $bad"
done
t lease create --device 0 --mem 1% --sm 30 --for 1h;           expect_rc 2 "--sm 30"; expect_err "bare number"
t lease create --device 0 --mem 100.0000001% --for 1h;         expect_rc 2; expect_err "more than 100%"
t lease create --device 0 --mem 1.0000001 --for 1h;            expect_rc 2; expect_err "more than 100%"
t lease create --device 0 --mem 1% --sm 100.0000001% --for 1h; expect_rc 2; expect_err "more than 100%"
t lease create --device 0 --mem 12.34567891% --for 1h;         expect_rc 2; expect_err "resolution of 0.0001% \(one millionth\)"
t lease create --device 0 --mem 0.1234567 --for 1h;            expect_rc 2; expect_err "resolution of 0.0001%"
t lease create --device 0 --mem 1% --sm 0.1234567 --for 1h;    expect_rc 2; expect_err "resolution of 0.0001%"
# (device 0 is free again: lease 1 was released above)
t lease create --device 0 --mem 1.0 --for 1h --json;           expect_rc 0 "--mem 1.0"
[ "$(json_field fraction_ppm)" = 1000000 ] && pass || fail "1.0 is 100%: $(json_field fraction_ppm) ppm"
t lease release "$(json_field id)";                            expect_rc 0
made=()
t lease create --device 0 --mem 0.034925 --sm 0.5 --for 1h --json; expect_rc 0 "--mem 0.034925"; made+=("$(json_field id)")
[ "$(json_field fraction_ppm)" = 34925 ] && pass || fail "0.034925: $(json_field fraction_ppm) ppm"
[ "$(json_field fraction)" = 0.034925 ] && pass || fail "fraction printed as written: $(json_field fraction)"
[ "$(json_field sm_ppm)" = 500000 ] && pass || fail "--sm 0.5: $(json_field sm_ppm)"
t lease create --device 0 --mem 12.5% --for 1h --json;         expect_rc 0 "--mem 12.5%"; made+=("$(json_field id)")
[ "$(json_field fraction_ppm)" = 125000 ] && pass || fail "12.5%: $(json_field fraction_ppm) ppm"
t lease create --device 0 --mem 512MiB --for 1h --json;        expect_rc 0 "--mem 512MiB"; made+=("$(json_field id)")
[ "$(json_field bytes)" -ge 536870912 ] && pass || fail "512MiB lease holds $(json_field bytes) bytes"
t lease list --json;               expect_rc 0; expect_out '"fraction": 0.034925,' "list --json prints shares as written"
for id in "${made[@]}"; do t lease release "$id"; expect_rc 0 "release $id"; done

# numbers are read whole; lease ids run from 1 to 2^63-1 and are sent exactly
t lease show 9223372036854775807;    expect_rc 1 "largest id"; expect_err "no lease 9223372036854775807"
t lease release 9223372036854775807; expect_rc 1 "release largest id"; expect_one_line_err
for bad in 9223372036854775808 18446744073709551615 18446744073709551616 99999999999999999999999; do
  t lease show "$bad"; expect_rc 2 "id $bad"; expect_one_line_err "id $bad"
  expect_err "the largest is 9223372036854775807" "id $bad"
done
for bad in 0 -1 +1 1x 0x10 '' ' 1' 1.0; do
  t lease show "$bad"; expect_rc 2 "id '$bad'"; expect_one_line_err "id '$bad'"
done
for bad in 4294967296 -1 1x '' 0.5 ' 0'; do
  t lease create --device "$bad" --mem 1% --for 1h; expect_rc 2 "--device '$bad'"; expect_one_line_err "--device '$bad'"
done
for bad in 1h30 1x 1.5 '' 9999999d; do
  t lease create --device 0 --mem 1% --for "$bad"; expect_rc 2 "--for '$bad'"; expect_one_line_err "--for '$bad'"
done
t lease create --device 0 --mem 1% --for;  expect_rc 2 "--for without a value"; expect_one_line_err; expect_err "needs a value"
t lease list --bogus;                      expect_one_line_err "unknown option"; expect_err "unknown option '--bogus'"

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

# ---- every error code's exit status, and paging, against a stand-in daemon ----
# It answers lease.show N with the refusal numbered N below, and lease.list
# in pages of 2 over leases 1..5, refusing "after" on a first page (as a
# daemon from before pages would) and any other field; it logs each request.
if command -v python3 >/dev/null; then
  cat >"$T_DIR/fake.py" <<'PY'
import json, os, socket, sys
path, log = sys.argv[1], open(sys.argv[2], "a", buffering=1)
codes = ["io_error", "data_loss", "internal", "out_of_memory", "unimplemented", "no_such_code_yet",
         "permission_denied", "not_found", "conflict", "resource_exhausted", "unknown_user",
         "failed_precondition", "busy", "already_exists", "invalid_argument", "bad_request",
         "unknown_op", "unknown_field", "line_too_long", "unavailable"]
lease = ('{"id":%d,"device":0,"fraction":0.034925,"fraction_ppm":34925,"bytes":3000034656,'
         '"sm_share":null,"sm_ppm":0,"owner":"o","owner_uid":0,"creator":"o","creator_uid":0,'
         '"host":"h","pid":1,"state":"active","start":"2026-01-01T00:00:00.000Z",'
         '"start_ns":1767225600000000000,"deadline":"2099-01-01T00:00:00.000Z",'
         '"deadline_ns":4070908800000000000,"remaining_ns":1}')
def refuse(code): return '{"ok":false,"error":{"code":"%s","message":"refused: %s"}}' % (code, code)
def answer(req):
    if req["op"] == "lease.show":
        i = req["id"]
        if i <= len(codes): return refuse(codes[i - 1])
        if i == 100: return '{"ok":false}'
        if i == 101: return '{"ok":true,"lease":{"id":'
        if i == 102: return None
        return '{"ok":true,"lease":%s}' % (lease % i)
    if req["op"] == "lease.list":
        if set(req) - {"op", "all", "after"} or req.get("after", 1) == 0: return refuse("unknown_field")
        after = req.get("after", 0)
        if req.get("all") and after: return '{"ok":true,"leases":[%s],"next":%d}' % (lease % 9, after)
        ids = [i for i in range(1, 6) if i > after][:2]
        more = ',"next":%d' % ids[-1] if ids and ids[-1] < 5 else ""
        return '{"ok":true,"leases":[%s]%s}' % (",".join(lease % i for i in ids), more)
    return refuse("unknown_op")
srv = socket.socket(socket.AF_UNIX)
srv.bind(path)
srv.listen(8)
srv.settimeout(30)  # gone by itself if the script stops before it kills it
while True:
    try:
        conn, _ = srv.accept()
    except socket.timeout:
        sys.exit(0)
    f = conn.makefile("rwb")
    for line in f:
        log.write(line.decode())
        out = answer(json.loads(line))
        if out is None: break
        f.write(out.encode() + b"\n")
        f.flush()
    f.close()
    conn.close()
PY
  FAKE=$T_DIR/fake.sock
  python3 "$T_DIR/fake.py" "$FAKE" "$T_DIR/fake.log" &
  FAKE_PID=$!
  for i in $(seq 1 300); do [ -S "$FAKE" ] && break; sleep 0.01; done
  want=(4 4 4 4 4 4 1 1 1 1 1 1 1 1 2 2 2 2 2 3)
  codes=(io_error data_loss internal out_of_memory unimplemented no_such_code_yet permission_denied
         not_found conflict resource_exhausted unknown_user failed_precondition busy already_exists
         invalid_argument bad_request unknown_op unknown_field line_too_long unavailable)
  for i in "${!codes[@]}"; do
    t --socket "$FAKE" lease show $((i + 1))
    expect_rc "${want[$i]}" "daemon replies ${codes[$i]}"; expect_one_line_err "${codes[$i]}"
    expect_err "^tessera: refused: ${codes[$i]}$" "${codes[$i]}"
  done
  t --socket "$FAKE" lease show 100; expect_rc 4 "refusal without a code"; expect_one_line_err
  t --socket "$FAKE" lease show 101; expect_rc 4 "malformed reply"; expect_err "malformed reply"
  t --socket "$FAKE" lease show 102; expect_rc 3 "daemon hangs up"; expect_one_line_err
  : >"$T_DIR/fake.log"
  t --socket "$FAKE" lease list --json; expect_rc 0 "paged list"
  [ "$(grep -c '"id"' <<<"$OUT")" = 5 ] && pass || fail "three pages make one array of 5: $OUT"
  [ "$(head -c1 <<<"$OUT")" = "[" ] && [ "$(tail -n1 <<<"$OUT")" = "]" ] && pass || fail "one JSON array: $OUT"
  [ "$(grep -c '"fraction": 0.034925,' <<<"$OUT")" = 5 ] && pass || fail "shares as the daemon wrote them"
  printf '%s\n' '{"op":"lease.list","all":false}' '{"op":"lease.list","all":false,"after":2}' \
    '{"op":"lease.list","all":false,"after":4}' | cmp -s - "$T_DIR/fake.log" && pass ||
    fail "pages asked for: $(cat "$T_DIR/fake.log")"
  t --socket "$FAKE" lease list; expect_rc 0
  [ "$(grep -Ec '^[1-5] +0 +2.7 GiB +3.4925%' <<<"$OUT")" = 5 ] && [ "$(grep -c '^ID' <<<"$OUT")" = 1 ] &&
    pass || fail "one table of 5 rows: $OUT"
  t --socket "$FAKE" lease list --all --json; expect_rc 4 "a page that does not move on"
  expect_err "bad 'next'"; [ -z "$OUT" ] && pass || fail "a list cut short printed: $OUT"
  kill "$FAKE_PID"; wait "$FAKE_PID" 2>/dev/null || true
else
  echo "SKIP (stand-in daemon): no python3"
fi

# ---- lease list --all across pages of the real daemon ----
PAGE=$(sed -n 's/^#define TSR_PROTO_LIST_PAGE_MAX \([0-9]*\).*/\1/p' "$TESSERA_SOURCE_DIR/src/proto/proto.h")
stop_daemon
rm -rf "$T_STATE"
write_config "max_leases_per_user = 0" "min_lease = 0"
if ! "$TESSERAD" --config "$T_CONF" --state-dir "$T_STATE" --socket "$T_SOCK" --check >/dev/null 2>&1; then
  echo "SKIP (paging): this tesserad does not take max_leases_per_user = 0 and min_lease = 0"
else
  start_daemon
  paged=yes
  if command -v python3 >/dev/null; then
    probe=$(python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"{\"op\":\"lease.list\",\"after\":1}\n"); print(s.makefile().readline())' "$T_SOCK")
    grep -q unknown_field <<<"$probe" && paged=no
  fi
  if [ "$paged" = no ]; then
    echo "SKIP (paging): the daemon refuses \"after\" (unknown_field): lease.list is not paged yet"
  else
    n=$((2 * PAGE + 3))
    for i in $(seq 1 "$n"); do
      "$TESSERA" --socket "$T_SOCK" lease create --device $((i % 2)) --mem 0.0001% --for 1h >/dev/null ||
        { fail "create lease $i of $n"; break; }
    done
    t lease list --all --json; expect_rc 0 "list --all over $n leases"
    ids=$(grep -Eo '"id": [0-9]+' <<<"$OUT" | grep -Eo '[0-9]+')
    [ "$(wc -l <<<"$ids")" = "$n" ] && pass || fail "list --all --json has $(wc -l <<<"$ids") of $n leases"
    [ "$(sort -n -u <<<"$ids")" = "$ids" ] && pass || fail "ids in order, none twice"
    [ "$(head -c1 <<<"$OUT")" = "[" ] && [ "$(grep -c '^\[' <<<"$OUT")" = 1 ] && pass || fail "one array"
    t lease list --all; expect_rc 0
    [ "$(grep -Ec '^[0-9]+ ' <<<"$OUT")" = "$n" ] && [ "$(grep -c '^ID' <<<"$OUT")" = 1 ] && pass ||
      fail "one table of $n rows"
  fi
fi

# ---- tessera daemon / tessera demo: the tesserad beside tessera ----
if command -v nm >/dev/null; then
  # grep without -q reads all of nm's output: under pipefail nm's SIGPIPE would make the pipeline fail, a false pass
  nm "$TESSERA" | grep ' T tsr_daemon_main$' >/dev/null && fail "tessera links the daemon's code" || pass
fi
t daemon --help;                   expect_rc 0 "daemon --help"; expect_out "^usage: tesserad"
set +e
"$TESSERAD" --bogus >/dev/null 2>"$T_DIR/err.d"; want=$?
set -e
t daemon --bogus;                  expect_rc "$want" "tesserad's own status passes through"
expect_err "^tesserad: unrecognized option '--bogus'" "tesserad's own message passes through"
mkdir -p "$T_DIR/lonely"
cp "$TESSERA" "$T_DIR/lonely/tessera"
ln -s "$TESSERA" "$T_DIR/lonely/linked"
set +e
OUT=$(PATH=/nonexistent "$T_DIR/lonely/tessera" daemon --help 2>"$T_DIR/err"); RC=$?; ERR=$(cat "$T_DIR/err")
expect_rc 4 "no tesserad anywhere"; expect_one_line_err "no tesserad"; expect_err "cannot find tesserad"
OUT=$(PATH=/nonexistent "$T_DIR/lonely/tessera" demo 2>"$T_DIR/err"); RC=$?; ERR=$(cat "$T_DIR/err")
expect_rc 4 "demo without tesserad"; expect_err "cannot find tesserad"
OUT=$(PATH="/nonexistent:$BIN" "$T_DIR/lonely/tessera" daemon --help 2>"$T_DIR/err"); RC=$?; ERR=$(cat "$T_DIR/err")
expect_rc 0 "tesserad on PATH"; expect_out "^usage: tesserad"
OUT=$(PATH=/nonexistent "$T_DIR/lonely/linked" daemon --help 2>"$T_DIR/err"); RC=$?; ERR=$(cat "$T_DIR/err")
expect_rc 0 "a link to tessera finds the tesserad beside the real one"
set -e
stop_daemon
"$TESSERA" daemon --config "$T_CONF" --state-dir "$T_DIR/state2" --socket "$T_DIR/d2.sock" >>"$T_LOG" 2>&1 &
D2=$!
for i in $(seq 1 500); do "$TESSERA" --socket "$T_DIR/d2.sock" devices >/dev/null 2>&1 && break; sleep 0.01; done
t --socket "$T_DIR/d2.sock" lease create --device 0 --mem 10% --for 1h; expect_rc 0 "a daemon started by tessera daemon"
[ "$(basename "$(readlink "/proc/$D2/exe")")" = tesserad ] && pass || fail "tessera daemon is tesserad (exec, no child)"
kill -TERM "$D2"; rc=0; wait "$D2" || rc=$?
[ "$rc" = 0 ] && pass || fail "tessera daemon stopped with status $rc"
set +e
OUT=$(TMPDIR=$T_DIR "$TESSERA" demo 2>"$T_DIR/err"); RC=$?; ERR=$(cat "$T_DIR/err")
set -e
expect_rc 0 "demo"; expect_out "tesserad is up" demo; expect_out "Demo done" demo
ls -d "$T_DIR"/tessera-demo-* >/dev/null 2>&1 && fail "the demo left its directory" || pass
finish
