# tesserad's /metrics as Prometheus scrapes it: the text passes the
# exposition format's rules (check_exposition.py), the counters move when
# leases are created, expire and are refused, the per-lease series come and
# go with the lease, label values are escaped, other paths and methods are
# refused; a test daemon (--state-dir) serves nothing unless asked; a bad
# or busy address is a clear error at start.
source "$(dirname "$0")/../lease/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
command -v curl >/dev/null || skip "curl is missing (Debian: curl)"
command -v python3 >/dev/null || skip "python3 is missing"

# a free port: the kernel's choice, released just before the daemon binds it
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$port/metrics
scrape() { curl -sf --max-time 5 "$URL"; }
# value SERIES: the value of one series (name and labels as written)
value() { scrape | awk -v s="$1" '$1 == s {print $2}'; }
# wait_for SERIES VALUE: the snapshot is rewritten at most every 250 ms
wait_for() {
  local i got=
  for i in $(seq 1 60); do
    got=$(value "$1")
    [ "$got" = "$2" ] && return 0
    sleep 0.1
  done
  fail "$1 is '$got', not $2"
  return 1
}

# a device name that needs escaping in a label value
{
  echo "[daemon]"; echo "devices = config"; echo "sync = none"
  printf '\n[device.0]\nname = GPU "A" \\ one\nmemory = 80GiB\nsms = 132\n'
} >"$T_CONF"

# ---- off by default in a --state-dir daemon -----------------------------------------
start_daemon
grep -q "metrics at" "$T_LOG" && fail "a --state-dir daemon serves /metrics unasked"
stop_daemon
pass

# ---- on when asked ----------------------------------------------------------------------
start_daemon --metrics "127.0.0.1:$port"
grep -q "metrics at http://127.0.0.1:$port/metrics" "$T_LOG" || fail "no 'metrics at' line in the log"
scrape >"$T_DIR/m0" || fail "no scrape"
python3 "$HERE/check_exposition.py" <"$T_DIR/m0" || fail "the exposition is not valid (empty node)"
grep -q '^tessera_device_memory_bytes{device="0",name="GPU \\"A\\" \\\\ one"} 85899345920$' "$T_DIR/m0" \
  || fail "the device's name is not escaped: $(grep device_memory "$T_DIR/m0")"
[ "$(value tessera_leases_created_total)" = 0 ] || fail "created_total is not 0 at start"
pass

# counters move: a grant, a refusal (over-commit), an expiry
"$TESSERA" --socket "$T_SOCK" lease create --device 0 --mem 50% --for 1h --sm 25% >/dev/null
"$TESSERA" --socket "$T_SOCK" lease create --device 0 --mem 60% --for 1h >/dev/null 2>&1 && fail "over-commit granted"
short=$("$TESSERA" --socket "$T_SOCK" lease create --device 0 --mem 10% --for 2s | sed -n 's/^lease \([0-9]*\):.*/\1/p')
wait_for tessera_leases_created_total 2
wait_for 'tessera_leases{state="active"}' 2
wait_for 'tessera_device_leased_bytes{device="0"}' 51539607552
[ "$(value tessera_requests_refused_total)" -ge 1 ] 2>/dev/null || fail "the refusal is not counted"
wait_for 'tessera_lease_sm_share{device="0",lease="1",user="'"$(id -un)"'"}' 0.250000
wait_for 'tessera_lease_memory_bytes{device="0",lease="1",user="'"$(id -un)"'"}' 42949672960
wait_for 'tessera_leases_ended_total{reason="expired"}' 1
wait_for 'tessera_leases{state="active"}' 1
[ -n "$short" ] || fail "no id for the short lease"
scrape | grep "lease=\"$short\"" >/dev/null && fail "an expired lease's series is still there"
"$TESSERA" --socket "$T_SOCK" lease release 1 >/dev/null
wait_for 'tessera_leases_ended_total{reason="released"}' 1
scrape >"$T_DIR/m1"
python3 "$HERE/check_exposition.py" <"$T_DIR/m1" || fail "the exposition is not valid (after leases)"
count=$(awk '$1 == "tessera_request_duration_seconds_count" {print $2}' "$T_DIR/m1")
[ "${count:-0}" -ge 4 ] || fail "requests are not counted in the histogram ($count)"
pass

# other paths and methods
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/")" = 404 ] || fail "/ is not 404"
[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL")" = 405 ] || fail "POST is not 405"
ct=$(curl -s -o /dev/null -w '%{content_type}' "$URL")
[ "$ct" = "text/plain; version=0.0.4; charset=utf-8" ] || fail "content type '$ct'"
pass

# ---- a busy or bad address is a clear error at start ----------------------------------
set +e
out=$("$TESSERAD" --config "$T_CONF" --state-dir "$T_DIR/state2" --socket "$T_DIR/s2" --metrics "127.0.0.1:$port" 2>&1)
rc=$?
[ $rc -ne 0 ] && grep -q "metrics: cannot listen on 127.0.0.1:$port" <<<"$out" \
  || fail "a busy metrics port: rc=$rc, '$out'"
for bad in nonsense 127.0.0.1:0 127.0.0.1:65536 300.1.1.1:9464 '[::1:9464' 'host:80'; do
  out=$("$TESSERAD" --config "$T_CONF" --state-dir "$T_DIR/state3" --socket "$T_DIR/s3" --metrics "$bad" --check 2>&1)
  rc=$?
  [ $rc -ne 0 ] && grep -qF "metrics '$bad'" <<<"$out" || fail "--metrics $bad: rc=$rc, '$out'"
done
printf '[daemon]\nmetrics = 127.0.0.1:x\n' >"$T_DIR/bad.conf"
out=$("$TESSERAD" --config "$T_DIR/bad.conf" --check 2>&1)
rc=$?
[ $rc -ne 0 ] && grep -q "metrics" <<<"$out" || fail "a bad metrics key in the file: rc=$rc, '$out'"
set -e
pass
stop_daemon

finish
