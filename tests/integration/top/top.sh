# `tessera top` as someone watching a node meets it: a private daemon whose
# two GPUs come from NVML (the fake NVML standing for the driver double,
# FAKE_NVML_CUDA_STATE), two leases on GPU 0, a tenant under the shim
# (`tessera run`) holding memory on one of them, and a GPU process of no
# lease on GPU 1 (without the shim). NVML's per-process SM utilisation comes
# from FAKE_NVML_UTIL, a file the fake reads at each call.
#   (i)   --once and --json: the leases, their bytes and SM share against
#         what NVML measured, their processes, the unleased process;
#   (ii)  the live view in a tmux pane: the lease lines; a release and a new
#         tenant show within a few refreshes; q ends it within 2 s with the
#         terminal's mode put back, and so does SIGTERM;
#   (iii) errors: no daemon, not a terminal, bad options; a daemon without
#         NVML (declared devices) still answers, with "-" where NVML would.
# Needs tmux (skipped without it) and the driver double (not registered
# without cuda.h). Runs as any user.
source "$(dirname "$0")/../lease/lib.sh"
command -v tmux >/dev/null || skip "tmux is missing (scripts/deps.sh installs it)"
command -v python3 >/dev/null || { echo "FAIL: python3 is needed to read the JSON"; exit 1; }
GPU=$BIN/../tests/tsr_gpu_tenant
[ -x "$GPU" ] || { echo "FAIL: $GPU is not built"; exit 1; }
export TESSERA_REAL_LIBCUDA=$BIN/../tests/fakes/libcuda.so.1
export FAKE_CUDA_STATE=$T_DIR/cuda.state FAKE_CUDA_DEVICES=2 FAKE_CUDA_TOTAL_MEM=8GiB \
  FAKE_CUDA_CTX_BYTES=64MiB FAKE_NVML_CUDA_STATE=$T_DIR/cuda.state FAKE_NVML_UTIL=$T_DIR/util
unset CUDA_VISIBLE_DEVICES TESSERA_LEASE TESSERA_POLICY FAKE_NVML_MODE
ME=$(id -un)
SCREEN=
OWNER=$ME # as a frame shows a name: 8 columns, cut ones end in ~
[ ${#ME} -le 8 ] || OWNER="${ME:0:7}~"
TM=(tmux -L "tsr-top-$$-$RANDOM" -f /dev/null)
PIDS=()
trap 'rc=$?; set +e # (exit $rc) must not end the trap before cleanup
      "${TM[@]}" kill-server 2>/dev/null || true
      for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; (exit $rc); cleanup' EXIT

# tenant NAME CMD...: CMD in the background, once it printed "ready PID";
# that pid in $NAME (the GPU process itself, under `tessera run` or not)
tenant() {
  local name=$1 i
  shift
  "$@" >"$T_DIR/$name.out" 2>&1 &
  PIDS+=("$!")
  for i in $(seq 1 500); do
    if grep -q '^ready [0-9]' "$T_DIR/$name.out" 2>/dev/null; then
      printf -v "$name" '%s' "$(sed -n 's/^ready //p' "$T_DIR/$name.out")"
      return 0
    fi
    sleep 0.01
  done
  echo "FAIL: tenant $name did not start: $(cat "$T_DIR/$name.out")"
  exit 1
}
# jcheck 'PYTHON EXPRESSION' MESSAGE: a check on the last --json output, as `top`
jcheck() {
  if python3 -c 'import json,sys
top = json.loads(sys.stdin.read())
dev = {d["index"]: d for d in top["devices"]}
lease = {l["id"]: l for d in top["devices"] for l in d["leases"]}
procs = lambda l: {p["pid"]: p for p in l["processes"]}
sys.exit(0 if eval("(" + sys.argv[1] + ")") else 1)' "$1" <<<"$OUT"; then pass; else fail "$2: $OUT"; fi
}
# lines_after REGEX: the text lines after the first one matching REGEX
lines_after() { awk -v re="$1" 'found { print } $0 ~ re { found = 1 }' <<<"$OUT"; }

"$GPU" 0 --exit >/dev/null # the driver double's state file, made once
cat >"$T_CONF" <<EOF
[daemon]
devices = nvml
sync = none
region_dir = $T_DIR/regions
backstop_period = 100ms
EOF
start_daemon --nvml-library "$BIN/../tests/libfake_nvml.so"
t lease create --device 0 --mem 25% --for 10m --sm 30% --json; expect_rc 0
A=$(json_field id); LIMIT_A=$(json_field bytes)
t lease create --device 0 --mem 10% --for 5m --json; expect_rc 0
B=$(json_field id); LIMIT_B=$(json_field bytes)
tenant T1 "$TESSERA" --socket "$T_SOCK" run --lease "$A" -- "$GPU" 300
tenant U env CUDA_VISIBLE_DEVICES=1 "$GPU" 200
printf '%s 28\n%s 40\nnot a sample\n-3 5\n%s 99999999999999999999999\n' "$T1" "$U" "$T1" >"$T_DIR/util"

# ---- (i) one snapshot ----------------------------------------------------------
t top --json; expect_rc 0 "top --json"
jcheck 'len(top["devices"]) == 2 and dev[0]["nvml"] and dev[0]["sm_util_known"]' "two watched devices"
jcheck "sorted(lease) == [$A, $B] and all(l[\"owner\"] == \"$ME\" for l in lease.values())" "the two leases"
jcheck "lease[$A][\"limit_bytes\"] == $LIMIT_A and lease[$B][\"limit_bytes\"] == $LIMIT_B" "limits"
# the shim charged the tenant's allocation and its context to its slot
jcheck "list(procs(lease[$A])) == [$T1] and lease[$A][\"used_bytes\"] >= 300 << 20 and
  procs(lease[$A])[$T1][\"used_bytes\"] == lease[$A][\"used_bytes\"]" "lease $A's tenant and bytes"
jcheck "procs(lease[$A])[$T1][\"slot\"] and procs(lease[$A])[$T1][\"gpu_bytes\"] == (300 + 64) << 20" \
  "NVML's bytes of the tenant (its allocation and the double's 64 MiB context)"
jcheck "procs(lease[$A])[$T1][\"command\"] == \"tsr_gpu_tenant\" and procs(lease[$A])[$T1][\"user\"] == \"$ME\"" "command, user"
jcheck "lease[$A][\"sm_share\"] == 0.3 and lease[$A][\"sm_measured\"] == 28 and procs(lease[$A])[$T1][\"sm_util\"] == 28" \
  "SM share and NVML's measure"
jcheck "lease[$B][\"processes\"] == [] and lease[$B][\"used_bytes\"] == 0 and lease[$B][\"sm_share\"] is None and lease[$B][\"sm_measured\"] == 0" \
  "the idle lease"
jcheck "all(k in lease[$A] for k in (\"throttled_ns\", \"gpu_ns\", \"launches\", \"bypassed\", \"remaining_ns\", \"revoked\")) and
  not lease[$A][\"revoked\"] and 0 < lease[$A][\"remaining_ns\"] <= 600e9" "counters, time left"
jcheck "dev[0][\"unleased\"] == [] and [p[\"pid\"] for p in dev[1][\"unleased\"]] == [$U] and
  dev[1][\"unleased\"][0][\"sm_util\"] == 40 and dev[1][\"unleased\"][0][\"gpu_bytes\"] == (200 + 64) << 20 and
  dev[1][\"unleased\"][0][\"used_bytes\"] is None and dev[1][\"leases\"] == []" "the process of no lease"

t top --once; expect_rc 0 "top --once"
ok '! grep -q $'"'"'\033'"'"' <<<"$OUT"' "--once printed escape codes"
ok '[ "$(awk "{ if (length(\$0) > m) m = length(\$0) } END { print m }" <<<"$OUT")" -le 79 ]' "--once is wider than 79 columns: $OUT"
expect_out "^GPU 0  NVIDIA H100 80GB HBM3  8 GiB  2 leases  SM committed 30%$" "device 0's header"
expect_out "^$A +$OWNER +\[#+\.+\] [0-9.]+/2\.0 GiB +sm 30% / 28% +-/s 0s +[0-9]+m" "lease $A's line"
expect_out "^$B +$OWNER +\[\.{10}\] 0\.0/819\.1 MiB +sm - / 0% +-/s 0s +[0-9]+m" "lease $B's line"
ok 'lines_after "^$A " | head -n 1 | grep -Eq "^ +$T1 +${ME:0:7}.* tsr_gpu_tenant +[0-9.]+ [MG]iB sm 28%$"' "lease $A's process line: $OUT"
ok 'lines_after "^no lease:" | head -n 1 | grep -Eq "^ +$U +${ME:0:7}.* tsr_gpu_tenant +264 MiB sm 40%$"' "the unleased process's line: $OUT"
ok '[ "$(grep -c "^no lease:" <<<"$OUT")" = 1 ] && lines_after "^GPU 1" | grep -q "^no lease:"' "no lease: under GPU 1 only: $OUT"

# NVML that cannot tell SM utilisation: "-", not 0
stop_daemon
FAKE_NVML_MODE=util_unsupported start_daemon --nvml-library "$BIN/../tests/libfake_nvml.so"
t top --json; expect_rc 0
jcheck "not dev[0][\"sm_util_known\"] and lease[$A][\"sm_measured\"] is None and procs(lease[$A])[$T1][\"sm_util\"] is None" "unsupported utilisation"
t top --once; expect_rc 0
expect_out "^$A .* sm 30% / - " "lease $A's line without NVML's utilisation"
stop_daemon
start_daemon --nvml-library "$BIN/../tests/libfake_nvml.so"

# ---- (ii) the live view, in a tmux pane ----------------------------------------
# The command runs under sh -c, which leaves the terminal as top left it
# (an interactive shell would put it back itself after a signal); sh then
# records top's status, when it ended, and the terminal's mode.
"${TM[@]}" new-session -d -x 100 -y 40 "env -i PATH=/usr/bin:/bin TERM=xterm bash --norc --noprofile"
# live NAME ARGS: starts `tessera top ARGS` in the pane; NAME.rc, NAME.ended, NAME.stty follow its end
live() {
  local name=$1
  shift
  rm -f "$T_DIR/$name".*
  "${TM[@]}" send-keys -l "sh -c '\"\$0\" --socket \"\$1\" top $*; echo \$? >$T_DIR/$name.rc; date +%s%N >$T_DIR/$name.ended; stty -a >$T_DIR/$name.stty' $TESSERA $T_SOCK"
  "${TM[@]}" send-keys Enter
}
# screen_shows REGEX SECONDS: the pane shows a line matching REGEX within SECONDS
screen_shows() {
  local i
  for i in $(seq 1 $(($2 * 20))); do
    SCREEN=$("${TM[@]}" capture-pane -p 2>/dev/null || true)
    grep -Eq -- "$1" <<<"$SCREEN" && return 0
    sleep 0.05
  done
  return 1
}
# ended_within NAME SECONDS (from now): top's sh wrote its status in time; sets ENDED_MS
ended_within() {
  local t0 i
  t0=$(date +%s%N)
  ENDED_MS=
  for i in $(seq 1 $(($2 * 100))); do
    if [ -s "$T_DIR/$1.stty" ]; then ENDED_MS=$((($(cat "$T_DIR/$1.ended") - t0) / 1000000)); return 0; fi
    sleep 0.01
  done
  return 1
}
# top_of_pane: the pid of the tessera under the pane's shell (through sh -c)
top_of_pane() {
  local shell c g i
  shell=$("${TM[@]}" display -p "#{pane_pid}")
  for i in $(seq 1 100); do
    for c in $(cat "/proc/$shell/task/$shell/children" 2>/dev/null); do
      for g in $(cat "/proc/$c/task/$c/children" 2>/dev/null); do
        [ "$(cat "/proc/$g/comm" 2>/dev/null)" = tessera ] && { echo "$g"; return; }
      done
    done
    sleep 0.02
  done
}
# the terminal's mode after top: canonical, with echo, as the shell had it
mode_restored() { grep -Eq '(^|[ ;])icanon( |;|$)' "$T_DIR/$1.stty" && grep -Eq '(^|[ ;])echo( |;|$)' "$T_DIR/$1.stty"; }

live first --interval 0.2
ok 'screen_shows "^tessera top .* every 200ms  q quits" 5' "the live view did not come up: $SCREEN"
ok 'screen_shows "^$A +.*sm 30% / 28%" 2 && grep -Eq "^$B +.*0\.0/819\.1 MiB" <<<"$SCREEN"' "the lease lines: $SCREEN"
ok 'grep -Eq "^ +$T1 .*tsr_gpu_tenant" <<<"$SCREEN" && grep -Eq "^ +$U .*sm 40%" <<<"$SCREEN"' "the process lines: $SCREEN"
ok '! grep -q "\[?1049h" <<<"$SCREEN"' "escape codes shown as text: $SCREEN"
# meanwhile the terminal is in non-canonical mode without echo, on the alternate screen
PTY=$("${TM[@]}" display -p "#{pane_tty}")
ok 'stty -F "$PTY" -a | grep -Eq "(^|[ ;])-icanon( |;|$)" && stty -F "$PTY" -a | grep -Eq "(^|[ ;])-echo( |;|$)"' \
  "the terminal's mode under the live view: $(stty -F "$PTY" -a 2>&1)"
ok '[ "$("${TM[@]}" display -p "#{alternate_on}")" = 1 ]' "the live view is not on the alternate screen"
# a change shows up: lease B released, a second tenant on lease A
t lease release "$B"; expect_rc 0
ok 'screen_shows "^GPU 0 .* 1 lease " 2 && ! grep -Eq "^$B +" <<<"$SCREEN"' "the released lease stays on screen: $SCREEN"
tenant T2 "$TESSERA" --socket "$T_SOCK" run --lease "$A" -- "$GPU" 100
ok 'screen_shows "^ +$T2 .*tsr_gpu_tenant" 3' "a new tenant of lease $A does not show: $SCREEN"
# q: ends within 2 s, off the alternate screen, the terminal's mode back
"${TM[@]}" send-keys q
ok 'ended_within first 2' "top lives on 2 s after q"
ok '[ "$(cat "$T_DIR/first.rc")" = 0 ]' "top ended with status $(cat "$T_DIR/first.rc" 2>/dev/null) after q, not 0"
echo "note: top ended ${ENDED_MS:-?} ms after q"
ok 'mode_restored first' "the terminal's mode after q: $(cat "$T_DIR/first.stty" 2>/dev/null)"
ok '[ "$("${TM[@]}" display -p "#{alternate_on}")" = 0 ]' "the alternate screen stays on after q"
ok '[ "$("${TM[@]}" display -p "#{cursor_flag}")" = 1 ]' "the cursor stays hidden after q"
# SIGTERM: the same, and it ends as SIGTERM ends a process
live second --interval 0.2
ok 'screen_shows "^$A +" 5' "the second live view did not come up: $SCREEN"
top_pid=$(top_of_pane)
ok '[ -n "$top_pid" ]' "top's process is not found under the pane's shell"
[ -n "$top_pid" ] && kill -TERM "$top_pid"
ok 'ended_within second 2' "top lives on 2 s after SIGTERM"
ok '[ "$(cat "$T_DIR/second.rc")" = 143 ]' "top ended with status $(cat "$T_DIR/second.rc" 2>/dev/null) after SIGTERM, not 143"
ok 'mode_restored second' "the terminal's mode after SIGTERM: $(cat "$T_DIR/second.stty" 2>/dev/null)"
# SIGINT while a request hangs (a daemon that answered once, then no more):
# the terminal is put back all the same
python3 - "$T_DIR/hang.sock" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4)
c, _ = s.accept(); f = c.makefile("rb")
f.readline()
c.sendall(b'{"ok":true,"top":{"now":"2026-11-23T15:40:01.000Z","now_ns":1,"devices":[]}}\n')
f.readline()
time.sleep(60)
PY
PIDS+=("$!")
for i in $(seq 1 100); do [ -S "$T_DIR/hang.sock" ] && break; sleep 0.01; done
T_SOCK_KEEP=$T_SOCK; T_SOCK=$T_DIR/hang.sock
live hung --interval 0.2
T_SOCK=$T_SOCK_KEEP
ok 'screen_shows "^no devices" 5' "the view of the hanging daemon did not come up: $SCREEN"
sleep 0.4 # its second request hangs
top_pid=$(top_of_pane)
ok '[ -n "$top_pid" ] && grep -q poll "/proc/$top_pid/wchan"' "top does not wait on the hanging daemon: $(cat "/proc/$top_pid/wchan" 2>&1)"
[ -n "$top_pid" ] && kill -INT "$top_pid"
ok 'ended_within hung 2' "top lives on 2 s after SIGINT in a hanging request"
ok '[ "$(cat "$T_DIR/hung.rc")" = 130 ] && mode_restored hung' \
  "top after SIGINT in a hanging request: status $(cat "$T_DIR/hung.rc" 2>/dev/null), mode $(cat "$T_DIR/hung.stty" 2>/dev/null)"
ok '[ "$("${TM[@]}" display -p "#{alternate_on}")" = 0 ]' "the alternate screen stays on after SIGINT"
# the daemon goes away under the live view: the screen back, one line, 3
live third --interval 0.2
ok 'screen_shows "^$A +" 5' "the third live view did not come up: $SCREEN"
stop_daemon
ok 'ended_within third 3' "top lives on 3 s after its daemon went away"
ok '[ "$(cat "$T_DIR/third.rc")" = 3 ] && mode_restored third' "top after its daemon went away: status $(cat "$T_DIR/third.rc" 2>/dev/null)"
ok 'screen_shows "^tessera: " 2' "no error line after the daemon went away: $SCREEN"
# no daemon at all: one line in the terminal as it was, 3
live fourth
ok 'ended_within fourth 2 && [ "$(cat "$T_DIR/fourth.rc")" = 3 ] && mode_restored fourth' \
  "top without a daemon: status $(cat "$T_DIR/fourth.rc" 2>/dev/null)"
"${TM[@]}" kill-server

# ---- (iii) errors -------------------------------------------------------------
t top --once; expect_rc 3 "top --once without a daemon"; expect_one_line_err "top --once without a daemon"
t top --json; expect_rc 3 "top --json without a daemon"; expect_one_line_err "top --json without a daemon"
start_daemon --nvml-library "$BIN/../tests/libfake_nvml.so"
t top; expect_rc 2 "top with stdout not a terminal"; expect_err "not a terminal"
for bad in 0 0.01 abc 2h -1 ""; do
  t top --interval "$bad" --once; expect_rc 2 "--interval '$bad'"; expect_one_line_err "--interval '$bad'"
done
t top --interval 200ms --once; expect_rc 0 "--interval 200ms"
t top --bogus; expect_rc 2 "an unknown option"
t top extra; expect_rc 2 "an argument"
t top --help; expect_rc 0; expect_out "^usage: tessera top"
stop_daemon
# declared devices: no NVML; the regions still speak (a state of their own)
T_STATE=$T_DIR/state2
write_config "region_dir = $T_DIR/regions2"
start_daemon
t lease create --device 1 --mem 1GiB --for 10m --sm 50% --json; expect_rc 0; C=$(json_field id)
t top --json; expect_rc 0
jcheck "not dev[0][\"nvml\"] and not dev[1][\"sm_util_known\"] and lease[$C][\"sm_measured\"] is None and lease[$C][\"used_bytes\"] == 0" \
  "declared devices"
t top --once; expect_rc 0
expect_out "^$C +.*0\.0/1\.0 GiB +sm 50% / - " "a lease on a declared device"
stop_daemon
finish
