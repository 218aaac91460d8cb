# tesserad's command line: values too long for any buffer, a relative path
# when the current directory is gone, and options that override the file.
# Each is refused with one clear line (or works), never a crash.
source "$(dirname "$0")/../lease/lib.sh"
write_config

long=$(head -c 5000 /dev/zero | tr '\0' x)
for opt in --sync --devices --log-level --state-dir --socket both; do
  set +e
  if [ "$opt" = both ]; then # two long values: the old code wrote past its buffer here
    "$TESSERAD" --config "$T_CONF" --state-dir "/$long" --sync "$long" --devices "$long" --check >"$T_DIR/out" 2>&1
  else
    "$TESSERAD" --config "$T_CONF" "$opt" "$long" --check >"$T_DIR/out" 2>&1
  fi
  rc=$?
  set -e
  if [ "$rc" -ge 1 ] && [ "$rc" -le 2 ] && [ "$(wc -l <"$T_DIR/out")" -le 2 ] && grep -q '^tesserad: ' "$T_DIR/out"; then
    pass
  else
    fail "$opt with a 5000-byte value: exit $rc, $(head -c 300 "$T_DIR/out")"
  fi
done

# a relative --state-dir when the current directory no longer exists
mkdir "$T_DIR/gone"
set +e
(cd "$T_DIR/gone" && rmdir "$T_DIR/gone" && "$TESSERAD" --config "$T_CONF" --state-dir rel --socket "$T_SOCK") >"$T_DIR/out" 2>&1
rc=$?
set -e
if [ "$rc" -eq 1 ] && grep -q "current directory" "$T_DIR/out" && [ ! -e /rel ]; then pass; else
  fail "relative --state-dir with no current directory: exit $rc, $(cat "$T_DIR/out")"; fi

# relative paths are taken from the current directory, and options override the file
write_config
sed -i "s/^sync = none$/sync = full/" "$T_CONF"
(cd "$T_DIR" && "$TESSERAD" --config "$T_CONF" --state-dir relstate --socket rel.sock --sync none >>"$T_LOG" 2>&1 &)
for i in $(seq 1 200); do [ -S "$T_DIR/rel.sock" ] && break; sleep 0.02; done
if [ -S "$T_DIR/rel.sock" ] && [ -d "$T_DIR/relstate" ]; then pass; else fail "relative --state-dir/--socket: $(ls "$T_DIR")"; fi
# the socket is bound before the "serving" line is written: wait for the line
for i in $(seq 1 200); do grep -q "sync=none" "$T_LOG" && break; sleep 0.02; done
grep -q "sync=none" "$T_LOG" && pass || fail "--sync did not override the file: $(cat "$T_LOG")"
pkill -TERM -f "state-dir relstate" || true
for i in $(seq 1 100); do pgrep -f "state-dir relstate" >/dev/null || break; sleep 0.02; done
finish
