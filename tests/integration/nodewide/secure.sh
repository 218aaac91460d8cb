# The node-wide mode reaches set-user-ID programs: /etc/ld.so.preload is
# read for them too (LD_PRELOAD is not). What a user puts in the
# environment of such a program must not steer the shim inside it:
#   - no library she names (TESSERA_REAL_LIBCUDA) is loaded into a program
#     running as root: its constructor would run with euid 0;
#   - no lease she names (TESSERA_LEASE: another user's) is charged, and no
#     region directory she names is used;
#   - the program is governed by the node-wide index of its real user, the
#     daemon's own file, in the default region directory.
# Each is checked beside the same program without the set-user-ID bit, where
# the user's environment does steer the shim (her own process), so that
# each check can fail. /etc/ld.so.preload is simulated in a private mount
# namespace (an overlay on /etc, a tmpfs on /run with the test's region
# directory at /run/tessera/regions): the host's files are never touched.
# Needs root; skipped where the namespace or the overlay cannot be made, or
# the test's folder is mounted nosuid.
source "$TESSERA_SOURCE_DIR/tests/integration/lease/lib.sh"
: "${PROBE:?}" "${EVIL:?}" "${PRELOAD_SHIM:?}" "${FAKE:?}"
real_users -- tsr-mallory tsr-alice
case ",$(findmnt -no OPTIONS -T "$T_DIR")," in *,nosuid,*) skip "$T_DIR is mounted nosuid" ;; esac
cp "$PROBE" "$T_DIR/bin/probe"
cp "$PROBE" "$T_DIR/bin/probe_suid"
cp "$EVIL" "$PRELOAD_SHIM" "$FAKE" "$T_DIR/bin/"
chmod 755 "$T_DIR/bin/"*
chown root:root "$T_DIR/bin/probe_suid"
chmod 4755 "$T_DIR/bin/probe_suid"
SHIM=$T_DIR/bin/$(basename "$PRELOAD_SHIM")
EVIL_SO=$T_DIR/bin/$(basename "$EVIL")
FAKE_SO=$T_DIR/bin/$(basename "$FAKE")
REGIONS=$T_DIR/regions
mkdir -p "$T_DIR/marks" "$T_DIR/up" "$T_DIR/work"
chmod 777 "$T_DIR/marks"
echo "$SHIM" >"$T_DIR/up/ld.so.preload"

# in_ns USER CMD...: CMD as USER where /etc/ld.so.preload lists the shim
in_ns() {
  local u=$1
  shift
  unshare -m --propagation private sh -c '
    mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1,workdir=$2" /etc || exit 70
    mount -t tmpfs tmpfs /run && mkdir -p /run/tessera/regions || exit 70
    mount --bind "$3" /run/tessera/regions || exit 70
    u=$4
    shift 4
    exec setpriv --reuid "$u" --regid "$u" --clear-groups -- env -u LD_PRELOAD "$@"' \
    sh "$T_DIR/up" "$T_DIR/work" "$REGIONS" "$u" "$@"
}
write_config "region_dir = $REGIONS"
start_daemon
set +e
in_ns tsr-mallory true
rc=$?
set -e
[ "$rc" -eq 0 ] || skip "no private mount namespace with an overlay on /etc here (status $rc)"

# ---- a library the user names ------------------------------------------------------
out=$(in_ns tsr-mallory TESSERA_REAL_LIBCUDA="$EVIL_SO" TSR_EVIL_MARKER="$T_DIR/marks/plain" \
  "$T_DIR/bin/probe" lookup cuMemAlloc_v2 2>&1 || true)
ok '[ -f "$T_DIR/marks/plain" ] && grep -q "euid=$(id -u tsr-mallory)" "$T_DIR/marks/plain"' \
  "the control: her own program did not load the library she named: $out"
out=$(in_ns tsr-mallory TESSERA_REAL_LIBCUDA="$EVIL_SO" TSR_EVIL_MARKER="$T_DIR/marks/suid" \
  "$T_DIR/bin/probe_suid" lookup cuMemAlloc_v2 2>&1 || true)
ok 'grep -q "euid=0" <<<"$out"' "the set-user-ID probe did not run as root: $out"
ok '[ ! -e "$T_DIR/marks/suid" ]' "a library mallory named ran in a set-user-ID program: $(cat "$T_DIR/marks/suid" 2>&1)"
ok 'grep -q " evil=0" <<<"$out"' "a library mallory named is mapped in a set-user-ID program: $out"
out=$(in_ns tsr-mallory TESSERA_REAL_LIBCUDA="$EVIL_SO" TSR_EVIL_MARKER="$T_DIR/marks/cuserid" \
  "$T_DIR/bin/probe_suid" lookup cuserid 2>&1 || true)
ok 'grep -q "^found=1 euid=0 cuda=0 evil=0" <<<"$out" && [ ! -e "$T_DIR/marks/cuserid" ]' \
  "dlsym(cuserid) in a set-user-ID program: $out"

# ---- a lease the user names ----------------------------------------------------------
t --as tsr-alice lease create --device 0 --mem 10% --for 10m --json; expect_rc 0; A=$(json_field id)
procs() { t lease show "$1" --json; json_field processes; }
# the control: alice's own program, naming her own lease, holds a slot in it
in_ns tsr-alice TESSERA_LEASE="$A" TESSERA_REGION_DIR=/run/tessera/regions TESSERA_REAL_LIBCUDA="$FAKE_SO" \
  "$T_DIR/bin/probe" cuda 2 >"$T_DIR/alice.out" 2>&1 &
P=$!
for i in $(seq 1 100); do grep -q "^rc=" "$T_DIR/alice.out" && break; sleep 0.02; done
ok '[ "$(procs "$A")" = 1 ]' "the control: alice's program holds no slot in her lease: $(cat "$T_DIR/alice.out")"
wait "$P" || true
for i in $(seq 1 40); do [ "$(procs "$A")" = 0 ] && break; sleep 0.1; done
# mallory's set-user-ID program named alice's lease: nothing of it
in_ns tsr-mallory TESSERA_LEASE="$A" TESSERA_REGION_DIR="$REGIONS" TESSERA_REAL_LIBCUDA="$FAKE_SO" \
  "$T_DIR/bin/probe_suid" cuda 2 >"$T_DIR/mallory.out" 2>&1 &
P=$!
for i in $(seq 1 100); do grep -q "^rc=" "$T_DIR/mallory.out" && break; sleep 0.02; done
ok 'grep -q "^rc=" "$T_DIR/mallory.out"' "the set-user-ID probe did not run: $(cat "$T_DIR/mallory.out")"
ok '[ "$(procs "$A")" = 0 ]' "a set-user-ID program run by mallory attached to alice's lease $A"
wait "$P" || true
# ... but her own lease governs it, found through the node-wide index
t --as tsr-mallory lease create --device 0 --mem 11% --for 10m --json; expect_rc 0; M=$(json_field id)
in_ns tsr-mallory TESSERA_LEASE="$A" "$T_DIR/bin/probe_suid" cuda 2 >"$T_DIR/own.out" 2>&1 &
P=$!
for i in $(seq 1 100); do grep -q "^rc=" "$T_DIR/own.out" && break; sleep 0.02; done
ok '[ "$(procs "$M")" = 1 ] && [ "$(procs "$A")" = 0 ]' \
  "the set-user-ID program is not held to its real user's own lease: $(procs "$M") in $M, $(procs "$A") in $A"
wait "$P" || true
stop_daemon
finish
