# lib.sh: helpers for integration tests that drive the real tesserad and
# tessera binaries. Source it; it sets `set -euo pipefail` and a cleanup trap.
set -euo pipefail

BIN=${TESSERA_BIN_DIR:?TESSERA_BIN_DIR must point at the bin folder of a build}
TESSERA=$BIN/tessera
TESSERAD=$BIN/tesserad
T_NAME=$(basename "$0" .sh)
T_DIR=$(mktemp -d "${TMPDIR:-/tmp}/tsr-it-XXXXXX")
chmod 755 "$T_DIR"
T_SOCK=$T_DIR/tessera.sock
T_STATE=$T_DIR/state
T_CONF=$T_DIR/tessera.conf
T_LOG=$T_DIR/tesserad.log
DAEMON_PID=
FAILS=0
CHECKS=0

cleanup() {
  local rc=$?
  if [ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then
    kill -TERM "$DAEMON_PID" 2>/dev/null || true
    wait "$DAEMON_PID" 2>/dev/null || true
  fi
  if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ -f "$T_LOG" ]; then
    echo "--- daemon log ($T_LOG):"
    tail -n 30 "$T_LOG" || true
  fi
  rm -rf "$T_DIR"
}
trap cleanup EXIT

skip() { echo "SKIP: $*"; exit 77; }

# Programs started from here reach the driver double through the shim
# ($SHIM, $FAKE given), under this test's region directory, with no lease
# or policy inherited from the caller's environment.
use_shim_over_fake() {
  : "${SHIM:?SHIM must name libtessera-cuda.so}" "${FAKE:?FAKE must name the fake libcuda.so.1}"
  export TESSERA_REAL_LIBCUDA=$FAKE TESSERA_SHIM=$SHIM
  export LD_LIBRARY_PATH="$(dirname "$FAKE")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export FAKE_CUDA_STATE=$T_DIR/fake-cuda.state
  export TESSERA_REGION_DIR=$T_STATE/regions
  unset TESSERA_LEASE TESSERA_POLICY CUDA_VISIBLE_DEVICES
}
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
pass() { CHECKS=$((CHECKS + 1)); }

# write_config [extra daemon lines...]: two declared devices, 80 GiB and 40 GiB
write_config() {
  {
    echo "[daemon]"
    echo "devices = config"
    echo "sync = none"
    for line in "$@"; do echo "$line"; done
    printf '\n[device.0]\nname = Test GPU A\nmemory = 80GiB\nsms = 132\n'
    printf '\n[device.1]\nname = Test GPU B\nmemory = 40GiB\nsms = 108\n'
  } >"$T_CONF"
}

# start_daemon [extra tesserad args...]: starts tesserad and waits for its socket
start_daemon() {
  [ -f "$T_CONF" ] || write_config
  "$TESSERAD" --config "$T_CONF" --state-dir "$T_STATE" --socket "$T_SOCK" "$@" >>"$T_LOG" 2>&1 &
  DAEMON_PID=$!
  local i
  for i in $(seq 1 500); do
    if "$TESSERA" --socket "$T_SOCK" devices --json >/dev/null 2>&1; then return 0; fi
    kill -0 "$DAEMON_PID" 2>/dev/null || { echo "daemon died at start:"; cat "$T_LOG"; exit 1; }
    sleep 0.01
  done
  echo "daemon did not come up"; cat "$T_LOG"; exit 1
}

# stop_daemon: SIGTERM, and the daemon must exit with status 0
stop_daemon() {
  kill -TERM "$DAEMON_PID"
  local rc=0
  wait "$DAEMON_PID" || rc=$?
  DAEMON_PID=
  [ "$rc" -eq 0 ] && pass || fail "daemon exited with status $rc on SIGTERM (128+15 = killed)"
}

kill9_daemon() {
  kill -KILL "$DAEMON_PID"
  wait "$DAEMON_PID" 2>/dev/null || true
  DAEMON_PID=
}

# t [--as USER] ARGS...: runs `tessera --socket $T_SOCK ARGS`, capturing
# OUT, ERR and RC without failing the script.
t() {
  local prefix=()
  if [ "${1:-}" = "--as" ]; then
    prefix=(runuser -u "$2" --)
    shift 2
  fi
  set +e
  OUT=$("${prefix[@]}" "$TESSERA" --socket "$T_SOCK" "$@" 2>"$T_DIR/err")
  RC=$?
  set -e
  ERR=$(cat "$T_DIR/err")
}

# expect RC: the last `t` exited with RC
expect_rc() {
  if [ "$RC" -eq "$1" ]; then pass; else fail "${2:-}: exit $RC, wanted $1 (stderr: $ERR)"; fi
}
expect_out() { # expect_out REGEX [what]
  if grep -Eq -- "$1" <<<"$OUT"; then pass; else fail "${2:-}: stdout lacks /$1/: $OUT"; fi
}
expect_err() {
  if grep -Eq -- "$1" <<<"$ERR"; then pass; else fail "${2:-}: stderr lacks /$1/: $ERR"; fi
}
expect_one_line_err() {
  local n
  n=$(printf '%s' "$ERR" | grep -c '' || true)
  if [ "$n" -eq 1 ] && grep -q '^tessera: ' <<<"$ERR"; then pass; else fail "${1:-}: stderr is not one 'tessera: ...' line: $ERR"; fi
}
# json_field FIELD: a top-level scalar of the JSON object in OUT (no jq needed)
json_field() {
  grep -Eo "\"$1\": *(\"[^\"]*\"|[-0-9.eE+]+|true|false|null)" <<<"$OUT" | head -n1 | sed -E "s/\"$1\": *//; s/^\"//; s/\"$//"
}

finish() {
  echo "$CHECKS passed, $FAILS failed"
  [ "$FAILS" -eq 0 ]
}

# real_users TOOL... -- USER...: for tests that run the CLI as other users.
# Needs root (skips otherwise); creates the users, and copies tessera,
# tesserad and each test TOOL (built in <build>/tests) where every user can
# run them, pointing TESSERA, TESSERAD and TOOL_<name> at the copies.
real_users() {
  [ "$(id -u)" -eq 0 ] || skip "needs root to create users and run a root daemon (CI runs as root)"
  command -v useradd >/dev/null && command -v setpriv >/dev/null || skip "needs useradd and setpriv"
  local tools=() u t
  while [ $# -gt 0 ] && [ "$1" != -- ]; do tools+=("$1"); shift; done
  shift
  for u in "$@"; do
    id "$u" >/dev/null 2>&1 || useradd --no-create-home --shell /usr/sbin/nologin "$u"
  done
  mkdir -p "$T_DIR/bin"
  cp "$TESSERA" "$TESSERAD" "$T_DIR/bin/"
  for t in "${tools[@]}"; do
    [ -x "$BIN/../tests/$t" ] || { echo "FAIL: $BIN/../tests/$t not built"; exit 1; }
    cp "$BIN/../tests/$t" "$T_DIR/bin/"
  done
  chmod 755 "$T_DIR/bin" "$T_DIR/bin/"*
  TESSERA=$T_DIR/bin/tessera
  TESSERAD=$T_DIR/bin/tesserad
}

# as USER CMD...: runs CMD as USER (no supplementary groups)
as() { local u=$1; shift; setpriv --reuid "$u" --regid "$u" --clear-groups -- "$@"; }
# ok 'CONDITION' MESSAGE: a check
ok() { if eval "$1"; then pass; else fail "$2"; fi; }
