# libtessera-rt's memory under a lease: a runtime started under
# `tessera run --lease` allocates through the driver the shim governs, so
# what it allocates is charged to the lease (lease show counts it while it
# is held), and an allocation past the lease is refused with the driver's
# out-of-memory, which the runtime reports; without the shim the same
# allocation goes through.
source "$(dirname "$0")/../lease/lib.sh"
: "${PROBE:?PROBE must name rt_probe}"
use_shim_over_fake
start_daemon
t lease create --device 0 --mem 2GiB --for 10m --json
[ "$RC" -eq 0 ] || { echo "FAIL: lease create: $ERR"; exit 1; }
ID=$(json_field id)

# within the lease: allocated, and counted while held
"$TESSERA" --socket "$T_SOCK" run --lease "$ID" -- "$PROBE" 1024 "$T_DIR/release" >"$T_DIR/p1.out" 2>&1 &
P1=$!
for _ in $(seq 1 500); do grep -q '^holding' "$T_DIR/p1.out" && break; sleep 0.01; done
grep -q '^allocated 1024 MiB' "$T_DIR/p1.out" && pass || fail "1024 MiB under a 2 GiB lease: $(cat "$T_DIR/p1.out")"
t lease show "$ID" --json
used=$(json_field used_bytes)
[ "${used:-0}" -ge $((1024 << 20)) ] && pass || fail "the lease counts ${used:-nothing} bytes while the runtime holds 1024 MiB: $OUT"
touch "$T_DIR/release"
wait "$P1" && pass || fail "the probe under the lease failed: $(cat "$T_DIR/p1.out")"
t lease show "$ID" --json
[ "$(json_field used_bytes)" = 0 ] && pass || fail "the lease still counts $(json_field used_bytes) bytes after the runtime stopped"

# past the lease: refused, reported, nothing left charged
set +e
"$TESSERA" --socket "$T_SOCK" run --lease "$ID" -- "$PROBE" 4096 >"$T_DIR/p2.out" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q '^refused: cuMemAlloc of 4294967296 bytes: out of memory' "$T_DIR/p2.out" && pass ||
  fail "4096 MiB under a 2 GiB lease: status $rc: $(cat "$T_DIR/p2.out")"
t lease show "$ID" --json
[ "$(json_field used_bytes)" = 0 ] && pass || fail "a refused runtime left $(json_field used_bytes) bytes charged"

# no shim, no lease: the same 4096 MiB goes through
"$PROBE" 4096 >"$T_DIR/p3.out" 2>&1 && grep -q '^allocated 4096 MiB' "$T_DIR/p3.out" && pass ||
  fail "4096 MiB without the shim: $(cat "$T_DIR/p3.out")"
stop_daemon
finish
