# A hostile local user against a root tesserad (issue: "harden the daemon").
# Every attack runs as a real second user (useradd, then setpriv), through
# the real socket, against the real daemon; each check shows it refused or
# contained, and that another user (and root) is still served meanwhile.
# Needs root (CI runs as root): skipped with the reason otherwise.
source "$(dirname "$0")/../lease/lib.sh"
real_users tsr_attack -- tsr-mallory tsr-alice
MALLORY_UID=$(id -u tsr-mallory)
ATTACK=$T_DIR/bin/tsr_attack
AUDIT=$T_STATE/audit.log

as_mallory() { as tsr-mallory "$@"; }

restart() { # restart [config lines...]: a fresh config, same state
  [ -z "$DAEMON_PID" ] || stop_daemon
  write_config "$@"
  start_daemon
}

# ---- 1. refusals in a loop: coalesced per user and second -----------------
restart "audit_deny_rate = 5"
as_mallory "$ATTACK" deny "$T_SOCK" 2 >"$T_DIR/deny.out" &
FLOOD=$!
sleep 0.5
t --as tsr-alice lease create --device 0 --mem 10% --for 1h --json
expect_rc 0 "alice is served during mallory's flood"; GRANT=$(json_field id)
wait $FLOOD || fail "the flooding attacker failed"
sleep 2.2 # the last window closes and its summary is written
replies=$(sed -E 's/.*replies=([0-9]+).*/\1/' "$T_DIR/deny.out")
sent=$(sed -E 's/.*sent=([0-9]+).*/\1/' "$T_DIR/deny.out")
ok '[ "$sent" -eq "$replies" ]' "every refused request got its reply: $(cat "$T_DIR/deny.out")"
full=$(grep -c "\"event\":\"deny\",.*\"actor_uid\":$MALLORY_UID," "$AUDIT" || true)
suppressed=$(grep "\"event\":\"deny_summary\".*\"actor_uid\":$MALLORY_UID," "$AUDIT" |
  sed -E 's/.*"suppressed":([0-9]+).*/\1/' | awk '{s+=$1} END {print s+0}')
ok '[ "$replies" -gt 1000 ]' "the flood was too small to mean anything ($replies refusals)"
ok '[ "$full" -le 20 ]' "$full refusal lines in full for a 2 s flood (rate 5/s)"
ok '[ $((full + suppressed)) -eq "$replies" ]' \
  "refusals written ($full) + counted ($suppressed) != refusals made ($replies)"
ok 'grep -q "\"event\":\"create\".*\"lease\":$GRANT," "$AUDIT"' "alice's grant is in the log"
size=$(stat -c %s "$AUDIT")
ok '[ "$size" -lt 65536 ]' "the flood wrote $size bytes of audit log"

# ---- 2. the log is rotated by size; grants are never dropped ---------------
restart "audit_max_size = 64KiB" "audit_keep = 0" "max_leases_per_user = 0" "min_lease = 0"
as_mallory "$ATTACK" leases "$T_SOCK" 1 1200 >"$T_DIR/leases.out"
ok 'grep -q "made=1200 " "$T_DIR/leases.out"' "1200 small leases with no limits: $(cat "$T_DIR/leases.out")"
files=$(ls "$T_STATE"/audit.log* | wc -l)
ok '[ "$files" -ge 4 ]' "the audit log was not rotated ($files files)"
big=$(find "$T_STATE" -name 'audit.log*' -size +66k | wc -l)
ok '[ "$big" -eq 0 ]' "$big audit files over the size limit"
creates=$(cat "$T_STATE"/audit.log* | grep -c "\"event\":\"create\".*\"actor_uid\":$MALLORY_UID," || true)
ok '[ "$creates" -eq 1200 ]' "$creates of 1200 grants in the rotated logs"
bad=$(cat "$T_STATE"/audit.log* | grep -cv '^{"event":"[a-z_]*","time":"[^"]*","time_ns":[0-9]*.*}$' || true)
ok '[ "$bad" -eq 0 ]' "$bad malformed audit lines"

# ---- 3. listing pages: no reply outgrows the cap, whatever the table holds -
t lease list --all --json
expect_rc 0 "list --all over 1200 leases"
n=$(grep -c '"id":' <<<"$OUT" || true)
ok '[ "$n" -ge 1201 ]' "list --all gave $n leases of 1201"
t --as tsr-alice lease list --all
expect_rc 0 "alice's list --all over 1200 leases of mallory's"
expect_out "^and 1200 leases of other users" "alice's count of the others'"

# keep-N rotation: only N old files stay
restart "audit_max_size = 64KiB" "audit_keep = 2" "max_leases_per_user = 0" "min_lease = 0"
as_mallory "$ATTACK" leases "$T_SOCK" 1 600 >/dev/null
ok '[ -f "$AUDIT.1" ] && [ -f "$AUDIT.2" ] && [ ! -e "$AUDIT.3" ]' \
  "audit_keep = 2 keeps .1 and .2 only: $(ls "$T_STATE" | grep audit | tr '\n' ' ')"
stop_daemon
# start afresh without those 1800 leases for what follows
rm -f "$T_STATE"/gpu_*.lock

# ---- 4. leases: a minimum size and a per-user count -------------------------
restart
as_mallory "$ATTACK" leases "$T_SOCK" 1 10 >"$T_DIR/l.out" 2>"$T_DIR/l.err"
ok 'grep -q "made=0 code=invalid_argument" "$T_DIR/l.out"' "a 1 ppm lease: $(cat "$T_DIR/l.out" "$T_DIR/l.err")"
ok 'grep -q "smaller than this node allows" "$T_DIR/l.err"' "the refusal names the minimum: $(cat "$T_DIR/l.err")"
as_mallory "$ATTACK" leases "$T_SOCK" 1000 1000 >"$T_DIR/l.out" 2>"$T_DIR/l.err"
ok 'grep -q "made=64 code=resource_exhausted" "$T_DIR/l.out"' "max_leases_per_user: $(cat "$T_DIR/l.out")"
t --as tsr-alice lease create --device 0 --mem 1% --for 1h
expect_rc 0 "alice still gets a lease"
t --as tsr-alice lease list --all --json; expect_rc 0 "alice lists everyone's"

# ---- 5. connections: per user, and slots kept for admins -------------------
# The attacker prints its count once all 200 connections have had their
# hello answered (under a sanitizer and a loaded machine that took more
# than 5 s once), then holds what it opened for 8 s: the checks below run
# inside that hold.
# The attacker's output is emptied here, before it starts: the redirect of a
# background command truncates in the child, which a loaded machine may run
# after wait_opened has already found the previous attacker's line there.
wait_opened() { for i in $(seq 1 1200); do [ -s "$T_DIR/c.out" ] && break; sleep 0.05; done; }
restart "max_clients = 100" "admin_reserved_clients = 10" "max_clients_per_user = 20" "client_timeout = 60s"
: >"$T_DIR/c.out"
as_mallory "$ATTACK" conns "$T_SOCK" 200 8 >"$T_DIR/c.out" 2>/dev/null &
HOG=$!
wait_opened
ok 'grep -q "open=20 refused=180" "$T_DIR/c.out"' "per-user limit: $(cat "$T_DIR/c.out")"
t --as tsr-alice lease list; expect_rc 0 "alice connects while mallory holds his 20"
t lease list --all; expect_rc 0 "root connects"
wait $HOG || fail "the connection-hogging attacker failed"
restart "max_clients = 100" "admin_reserved_clients = 10" "max_clients_per_user = 0" "client_timeout = 60s"
: >"$T_DIR/c.out"
as_mallory "$ATTACK" conns "$T_SOCK" 200 8 >"$T_DIR/c.out" 2>/dev/null &
HOG=$!
wait_opened
ok 'grep -q "open=90 refused=110" "$T_DIR/c.out"' "no per-user limit: $(cat "$T_DIR/c.out")"
t --as tsr-alice lease list; expect_rc 1 "an ordinary user finds the ordinary slots full"; expect_err "too many clients"
t lease list --all; expect_rc 0 "root still connects (reserved slots)"
wait $HOG || fail "the connection-hogging attacker failed"

# ---- 6. replies nobody reads: bounded, and the reader that stalls goes -----
restart "max_queued_bytes = 8MiB" "max_queued_bytes_per_user = 2MiB" "client_timeout = 3s" \
  "max_leases_per_user = 0" "min_lease = 0"
as_mallory "$ATTACK" leases "$T_SOCK" 1 1500 >/dev/null # big list replies
rss_before=$(awk '/VmRSS/ {print $2}' /proc/"$DAEMON_PID"/status)
as_mallory "$ATTACK" noread "$T_SOCK" 100 5 >"$T_DIR/n.out" &
NR=$!
sleep 2
rss_peak=0
for i in $(seq 1 20); do
  r=$(awk '/VmRSS/ {print $2}' /proc/"$DAEMON_PID"/status)
  [ "$r" -gt "$rss_peak" ] && rss_peak=$r
  sleep 0.1
done
t --as tsr-alice lease list --all --json; expect_rc 0 "alice is served during the no-read attack"
wait $NR || fail "the non-reading attacker failed"
# (grep reads all of ldd's output: with -q it may exit first, and under
# pipefail ldd's SIGPIPE then made the test miss a sanitizer build)
if ldd "$TESSERAD" | grep -E 'lib(a|t)san' >/dev/null || grep -qa '__[at]san_init' "$TESSERAD"; then
  # a sanitizer keeps freed memory in quarantine: RSS says nothing there
  echo "note: sanitizer build; the daemon's memory growth is not checked"
else
  ok '[ $((rss_peak - rss_before)) -lt 65536 ]' \
    "the daemon grew by $(((rss_peak - rss_before) / 1024)) MiB holding unread replies (before: $((rss_before / 1024)) MiB)"
fi
connected=$(sed -E 's/.*connected=([0-9]+).*/\1/' "$T_DIR/n.out")
still=$(sed -E 's/.*still_open=([0-9]+).*/\1/' "$T_DIR/n.out")
ok '[ "$connected" -ge 50 ] && [ "$still" -lt "$connected" ]' "non-readers were not disconnected: $(cat "$T_DIR/n.out")"
ok 'grep -q "disconnecting client.*tsr-mallory" "$T_LOG"' "the log names the disconnected user"
stop_daemon
rm -f "$T_STATE"/gpu_*.lock

# ---- 7. the state directory must be the daemon's alone ----------------------
bad_start() { # bad_start WHAT REGEX STATE_DIR: the daemon refuses at once
  set +e
  timeout 5 "$TESSERAD" --config "$T_CONF" --state-dir "$3" --socket "$T_DIR/bad.sock" >"$T_DIR/bad.log" 2>&1
  local rc=$?
  set -e
  if [ "$rc" -eq 1 ] && grep -Eq -- "$2" "$T_DIR/bad.log"; then pass; else fail "$1: exit $rc, $(cat "$T_DIR/bad.log")"; fi
}
mkdir -m 0777 "$T_DIR/open"
echo "root's own" >"$T_DIR/rootfile"
# mallory plants links where the daemon would write, as he could in a 0777 dir
as_mallory ln -s "$T_DIR/rootfile" "$T_DIR/open/audit.log"
as_mallory ln -s "$T_DIR/rootfile" "$T_DIR/open/tesserad.pid"
bad_start "state dir mode 0777" "is writable by group or others" "$T_DIR/open"
ok '[ "$(cat "$T_DIR/rootfile")" = "root'"'"'s own" ]' "a link planted by mallory made the daemon write a root file"
rm -f "$T_DIR/open/audit.log" "$T_DIR/open/tesserad.pid"
bad_start "state dir to be made in a 0777 parent" "parent .* writable by group or others" "$T_DIR/open/state0"
ok '[ -z "$(ls -A "$T_DIR/open")" ]' "something was written into a refused directory: $(ls -A "$T_DIR/open")"
mkdir -m 0755 "$T_DIR/theirs" && chown tsr-mallory "$T_DIR/theirs"
as_mallory ln -s "$T_DIR/rootfile" "$T_DIR/theirs/next_id"
bad_start "state dir of another user" "owned by another user" "$T_DIR/theirs"
ok '[ "$(cat "$T_DIR/rootfile")" = "root'"'"'s own" ]' "mallory's next_id link was written through"
mkdir -m 0755 "$T_DIR/open/inner"
bad_start "a parent writable by others" "parent .* writable by group or others" "$T_DIR/open/inner"
chmod 1777 "$T_DIR/open"
SAVED_STATE=$T_STATE
T_STATE=$T_DIR/open/ok # made by the daemon under a sticky world-writable parent, as in /tmp
start_daemon
stop_daemon
T_STATE=$SAVED_STATE

# links planted where the daemon opens files: refused, the target untouched
echo "precious" >"$T_DIR/victim"
mkdir -m 0755 "$T_DIR/s1" && ln -s "$T_DIR/victim" "$T_DIR/s1/tesserad.pid"
bad_start "tesserad.pid as a symlink" "symbolic link" "$T_DIR/s1"
mkdir -m 0755 "$T_DIR/s2" && ln -s "$T_DIR/victim" "$T_DIR/s2/audit.log"
bad_start "audit.log as a symlink" "symbolic link" "$T_DIR/s2"
ok '[ "$(cat "$T_DIR/victim")" = precious ]' "the link target was written: $(cat "$T_DIR/victim")"
# FIFOs hang nothing
mkdir -m 0755 "$T_DIR/s3" && mkfifo "$T_DIR/s3/tesserad.pid"
bad_start "tesserad.pid as a FIFO" "not a regular file" "$T_DIR/s3"
mkdir -m 0755 "$T_DIR/s4" && mkfifo "$T_DIR/s4/audit.log"
bad_start "audit.log as a FIFO" "not a regular file" "$T_DIR/s4"
mkfifo "$T_STATE/gpu_0_0500_7.lock"
start_daemon
ok '[ -p "$(ls "$T_STATE"/quarantine/gpu_0_0500_7.lock.* 2>/dev/null | head -n1)" ]' \
  "a FIFO named as a lock file is quarantined: $(ls -la "$T_STATE" "$T_STATE/quarantine" 2>&1 | tr '\n' ' ')"
stop_daemon
mkfifo "$T_DIR/fifo.conf"
set +e; timeout 5 "$TESSERAD" --config "$T_DIR/fifo.conf" --state-dir "$T_STATE" --socket "$T_DIR/bad.sock" >"$T_DIR/bad.log" 2>&1; rc=$?; set -e
ok '[ "$rc" -eq 1 ]' "a FIFO as the configuration: exit $rc (124 = hung), $(cat "$T_DIR/bad.log")"

# SIGTERM always ends the daemon, whenever it comes during start-up. A
# daemon that lost the signal would run on for good; 10 s tells that apart
# from a start-up slowed by a loaded machine (an ASan daemon took over 2 s
# once in CI, 2026-11-27). Each one's time to end is in the message.
slow=0 seen=""
# The delay counts from the exec: between bash's fork and its exec the child
# still has the script's SIGTERM handler (an EXIT trap makes bash catch
# SIGTERM), and a signal that lands there is swallowed by bash, not by us
# (seen in CI on 2026-11-27: the daemon at 0.001 s ran on, SIGTERM neither
# pending nor ignored).
daemon_exe=$(readlink -f "$TESSERAD")
for delay in 0 0.001 0.003 0.01 0.02 0.05 0.1; do
  "$TESSERAD" --config "$T_CONF" --state-dir "$T_STATE" --socket "$T_SOCK" >>"$T_LOG" 2>&1 &
  p=$!
  for i in $(seq 1 2000); do
    [ "$(readlink "/proc/$p/exe" 2>/dev/null)" != "$daemon_exe" ] && kill -0 "$p" 2>/dev/null || break
  done
  sleep "$delay"
  kill -TERM "$p" 2>/dev/null || true
  t0=$(date +%s%N)
  for i in $(seq 1 500); do kill -0 "$p" 2>/dev/null || break; sleep 0.02; done
  if kill -0 "$p" 2>/dev/null; then
    slow=$((slow + 1))
    seen="$seen [after $delay s: state $(awk '{print $3}' /proc/$p/stat 2>/dev/null), wchan $(cat /proc/$p/wchan 2>/dev/null), $(grep -E '^(SigBlk|SigPnd|ShdPnd|SigIgn|SigCgt)' /proc/$p/status 2>/dev/null | tr '\n\t' '  ')]"
    kill -KILL "$p"
  fi
  wait "$p" 2>/dev/null || true
  seen="$seen $delay:$(( ($(date +%s%N) - t0) / 1000000 ))ms"
done
ok '[ "$slow" -eq 0 ]' "$slow daemons outlived SIGTERM by 10 s:$seen"

# ---- 8. hand-edited lock files: validated like a create -----------------------
write_config "max_lease = 1d"
start_daemon
t lease create --device 0 --mem 50% --for 1h --json; expect_rc 0; GOOD=$(json_field id)
stop_daemon
f=$(ls "$T_STATE"/gpu_0_0500_"$GOOD".lock)
edit() { # edit NEWID SED-EXPR: a copy of the good lock file, changed
  local key
  key=$(sed -n 's/^fraction: //p' "$f")
  sed -E "s/^partition: .*/partition: $1/; $2" "$f" >"$T_STATE/gpu_0_0500_$1.lock.new"
  mv "$T_STATE/gpu_0_0500_$1.lock.new" "$T_STATE/gpu_0_0500_$1.lock"
}
edit 900 's/^bytes: .*/bytes: 85899345920/'                       # 100% of the device, fraction 0.5
edit 901 's/^deadline: ([0-9]{4})/deadline: 2999/'                # beyond max_lease
edit 902 's/^time: ([0-9]{4})/time: 2998/; s/^deadline: ([0-9]{4})/deadline: 2999/'  # starts in the future
edit 18446744073709551615 ''                                     # wraps the id counter
edit 9223372036854775808 ''                                      # past the largest id
start_daemon
t lease list --all --json; expect_rc 0
n=$(grep -c '"id":' <<<"$OUT" || true)
ok '[ "$n" -eq 1 ]' "only the untouched lease is restored: $OUT"
q=$(ls "$T_STATE/quarantine" | grep -Ec '^gpu_0_0500_(90[012]|18446744073709551615|9223372036854775808)\.lock' || true)
ok '[ "$q" -eq 5 ]' "5 edited files quarantined: $(ls "$T_STATE/quarantine")"
ok 'grep -q "bytes" "$T_LOG"' "the log says why (bytes)"
t lease create --device 1 --mem 10% --for 1h --json; expect_rc 0
NEXT=$(json_field id)
ok '[ "$NEXT" -gt "$GOOD" ] && [ "$NEXT" -lt 1000000 ]' "the id counter was not moved by edited files: $NEXT"
t lease show 9223372036854775807; expect_rc 1 "the largest id is asked for, and not found"
expect_err "9223372036854775807"

# ---- 9. a lease that ended while no daemon ran says so ---------------------
t lease create --device 1 --mem 5% --for 1s --json; expect_rc 0; SHORT=$(json_field id)
stop_daemon
sleep 2
start_daemon
line=$(grep "\"event\":\"expire\".*\"lease\":$SHORT," "$AUDIT" || true)
ok 'grep -q "\"during_downtime\":true" <<<"$line"' "expiry during downtime is marked: $line"
late=$(sed -E 's/.*"late_ns":([0-9]+).*/\1/' <<<"$line")
ok '[ "${late:-0}" -ge 900000000 ]' "the lateness is the real one (${late:-none} ns, >= 0.9 s)"
stop_daemon

# ---- 10. a full disk: the request fails with an I/O error and changes nothing
if mkdir -p "$T_DIR/small" && mount -t tmpfs -o size=256k,mode=0755 tmpfs "$T_DIR/small" 2>/dev/null; then
  trap 'r=$?; umount "$T_DIR/small" 2>/dev/null || true; (exit $r); cleanup' EXIT
  write_config "audit_log = $T_DIR/small/audit.log"
  start_daemon
  t lease create --device 0 --mem 10% --for 1h; expect_rc 0 "before the disk fills"
  dd if=/dev/zero of="$T_DIR/small/fill" bs=4k 2>/dev/null || true
  # the log's last page may still hold a line or two: create until one fails
  for i in $(seq 1 40); do
    before=$(ls "$T_STATE"/gpu_*.lock | wc -l)
    t lease create --device 0 --mem 1% --for 1h
    [ "$RC" -eq 0 ] || break
  done
  expect_rc 4 "a create whose audit line cannot be written"
  expect_err "audit"
  after=$(ls "$T_STATE"/gpu_*.lock | wc -l)
  ok '[ "$before" -eq "$after" ]' "the failed create left a lock file ($before -> $after)"
  t lease list --all --json
  n_after=$(grep -c '"id":' <<<"$OUT" || true)
  ok '[ "$n_after" -eq "$before" ]' "the failed create is in the table ($n_after leases, $before lock files)"
  id=$(grep -Eo '"id": [0-9]+' <<<"$OUT" | head -n1 | grep -Eo '[0-9]+')
  t lease release "$id"; expect_rc 4 "a release whose audit line cannot be written"
  t lease show "$id"; expect_out "state +active" "the refused release changed nothing"
  tail -c 1 "$T_DIR/small/audit.log" | od -c | grep -q '\\n' && pass || fail "the audit log ends in a torn line"
  rm -f "$T_DIR/small/fill"
  t lease release "$id"; expect_rc 0 "released once there is room"
  stop_daemon
  # the state directory itself full
  write_config
  mkdir -m 0755 "$T_DIR/small/state"
  "$TESSERAD" --config "$T_CONF" --state-dir "$T_DIR/small/state" --socket "$T_SOCK" >>"$T_LOG" 2>&1 &
  DAEMON_PID=$!
  for i in $(seq 1 200); do "$TESSERA" --socket "$T_SOCK" devices >/dev/null 2>&1 && break; sleep 0.02; done
  dd if=/dev/zero of="$T_DIR/small/fill" bs=1k 2>/dev/null || true
  t lease create --device 0 --mem 12% --for 1h
  expect_rc 4 "a create on a full state directory is an I/O error"
  rm -f "$T_DIR/small/fill"
  stop_daemon
else
  echo "note: cannot mount a small tmpfs here; full-disk checks skipped"
fi
finish
