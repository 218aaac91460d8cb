# lib.sh: what the backstop's integration tests share: a root daemon whose
# GPUs come from NVML (the fake NVML standing for the driver double:
# FAKE_NVML_CUDA_STATE), real users, and GPU tenants that use the double
# without the shim. Source it (BACKSTOP_TOOLS: more test programs to copy
# where the users can run them, BACKSTOP_USERS: the users, by default
# tsr-alice and tsr-bob); it sources tests/integration/lease/lib.sh, skips
# without root or the double, and defines:
#   GPU, REGIONS, AUDIT, PIDS (tenants killed at exit)
#   tenant NAME USER ARGS...   a GPU tenant as USER ("-": root), its pid in NAME
#   alive PID, gone_within PID SECONDS (GONE_MS, STATUS), ns_host_pid EXE [ANCESTOR],
#   backstop_lines
source "$(dirname "${BASH_SOURCE[0]}")/../lease/lib.sh"
[ -x "$BIN/../tests/tsr_gpu_tenant" ] || skip "the driver double is not built (no cuda.h): no GPU tenant"
[ -f "$BIN/../tests/libfake_nvml.so" ] || skip "the fake NVML is not built"
# shellcheck disable=SC2086 # word lists
real_users tsr_gpu_tenant ${BACKSTOP_TOOLS:-} -- ${BACKSTOP_USERS:-tsr-alice tsr-bob}
GPU=$T_DIR/bin/tsr_gpu_tenant
REGIONS=$T_DIR/regions
AUDIT=$T_STATE/audit.log
export TESSERA_SHIM=$BIN/../lib/libtessera-cuda.so # `run` from the copies in $T_DIR/bin
export FAKE_CUDA_STATE=$T_DIR/cuda.state FAKE_CUDA_DEVICES=1 FAKE_CUDA_TOTAL_MEM=8GiB \
  FAKE_CUDA_CTX_BYTES=64MiB FAKE_NVML_CUDA_STATE=$T_DIR/cuda.state

PIDS=()
trap 'rc=$?; for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; (exit $rc); cleanup' EXIT

# tenant NAME USER ARGS...: a GPU tenant as USER ("-": root) in the
# background, once it is ready; its pid in $NAME
tenant() {
  local name=$1 user=$2 i
  shift 2
  if [ "$user" = - ]; then "$GPU" "$@" >"$T_DIR/$name.out" 2>&1 &
  else setpriv --reuid "$user" --regid "$user" --clear-groups -- "$GPU" "$@" >"$T_DIR/$name.out" 2>&1 &
  fi
  local pid=$!
  PIDS+=("$pid")
  printf -v "$name" '%s' "$pid"
  for i in $(seq 1 300); do
    grep -q '^ready' "$T_DIR/$name.out" 2>/dev/null && return 0
    grep -q '^failed' "$T_DIR/$name.out" 2>/dev/null && break
    sleep 0.01
  done
  echo "FAIL: tenant $name did not start: $(cat "$T_DIR/$name.out")"
  exit 1
}
# alive PID: the process exists and is not a zombie
alive() {
  local s
  s=$(sed -E 's/.*\) (.).*/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$s" ] && [ "$s" != Z ]
}
# gone_within PID SECONDS: waits for it to end; GONE_MS and STATUS (its exit status)
gone_within() {
  local pid=$1 n=$(($2 * 100)) i
  GONE_MS=
  for i in $(seq 1 "$n"); do
    if ! alive "$pid"; then GONE_MS=$((i * 10)); break; fi
    sleep 0.01
  done
  STATUS=
  if [ -n "$GONE_MS" ]; then set +e; wait "$pid"; STATUS=$?; set -e; fi
}
# ns_host_pid EXE: the host pid of the process that runs EXE in a PID
# namespace of its own (NSpid has two entries), or nothing
ns_host_pid() { # ns_host_pid EXE [ANCESTOR]: first through ANCESTOR's descendants (fast: the
  # tenant may be SIGKILLed a grace period after it is caught, and a scan of
  # every /proc entry on a busy machine can take longer than that)
  local p c q
  if [ -n "${2:-}" ]; then
    q=$2
    for _ in 1 2 3 4; do
      for c in $(cat "/proc/$q/task/$q/children" 2>/dev/null); do
        if [ "$(readlink "/proc/$c/exe" 2>/dev/null)" = "$1" ] &&
          grep -Eq '^NSpid:\s+[0-9]+\s+[0-9]+$' "/proc/$c/status" 2>/dev/null; then echo "$c"; return; fi
        q=$c
      done
    done
  fi
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/exe" 2>/dev/null)" = "$1" ] || continue
    if grep -Eq '^NSpid:\s+[0-9]+\s+[0-9]+$' "$p/status" 2>/dev/null; then echo "${p#/proc/}"; return; fi
  done
}
backstop_lines() { grep -c '"event":"backstop"' "$AUDIT" 2>/dev/null || true; }

# the driver double's state file, made by a first tenant, is every tenant's
"$GPU" 0 --exit >/dev/null
chmod 666 "$FAKE_CUDA_STATE"

# start_backstop_daemon [extra daemon lines...]: tesserad on the fake NVML's
# one device, the backstop every 100 ms, a 1 s grace
start_backstop_daemon() {
  {
    printf '[daemon]\ndevices = nvml\nsync = none\nregion_dir = %s\nbackstop_period = 100ms\nexpiry_grace = 1s\n' "$REGIONS"
    local line
    for line in "$@"; do printf '%s\n' "$line"; done
  } >"$T_CONF"
  start_daemon --nvml-library "$BIN/../tests/libfake_nvml.so"
}
