#!/usr/bin/env bash
# integration.install: what `make install DESTDIR=... PREFIX=/usr/local` and
# `make deb` put down, used from there as an admin would: the daemon and the
# CLI run and serve a lease, the shim is where `tessera run` finds it, the
# libraries link through their pkg-config files, the man pages render, the
# service names the installed daemon; the .deb lists the same tree, keeps
# the configuration as a conffile and enables nothing.
#   install.sh BUILD_DIR
set -euo pipefail
BUILD=${1:?usage: install.sh BUILD_DIR}
ROOT=$(mktemp -d "${TMPDIR:-/tmp}/tsr-install-XXXXXX")
chmod 755 "$ROOT"
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
trap 'rm -rf "$ROOT"' EXIT

# ---- make install into a temporary root --------------------------------------
DESTDIR=$ROOT/dest cmake --install "$BUILD" --prefix /usr/local >"$ROOT/install.log"
P=$ROOT/dest/usr/local
for f in bin/tessera bin/tesserad lib/tessera/libtessera-cuda.so lib/tessera/libtessera-opencl.so lib/tessera/libtessera-preload.so lib/libtessera-rt.so lib/libtessera-frontier.so \
         include/tessera/rt.h include/tessera/frontier.h include/tessera/status.h \
         lib/pkgconfig/tessera-rt.pc lib/pkgconfig/tessera-frontier.pc lib/systemd/system/tesserad.service \
         share/man/man1/tessera.1 share/man/man8/tesserad.8 share/doc/tessera/leases.md \
         share/doc/tessera/operations.md share/doc/tessera/tessera.conf.example share/doc/tessera/copyright; do
  [ -f "$P/$f" ] || fail "make install left out $f"
done
[ -f "$ROOT/dest/etc/tessera/tessera.conf" ] || fail "no /etc/tessera/tessera.conf"
if [ -f "$BUILD/lib/spank_tessera.so" ]; then  # built where Slurm's headers are
  [ -f "$P/lib/tessera/spank_tessera.so" ] || fail "make install left out the Slurm plugin"
fi
grep -q '^ExecStart=/usr/local/bin/tesserad --config /etc/tessera/tessera.conf$' "$P/lib/systemd/system/tesserad.service" \
  || fail "the unit does not start the installed daemon: $(grep ExecStart "$P/lib/systemd/system/tesserad.service")"
# an edited configuration survives a second install
echo "# edited by the admin" >>"$ROOT/dest/etc/tessera/tessera.conf"
DESTDIR=$ROOT/dest cmake --install "$BUILD" --prefix /usr/local >"$ROOT/install2.log"
grep -q "edited by the admin" "$ROOT/dest/etc/tessera/tessera.conf" || fail "a second install overwrote the configuration"

# the installed programs, from the installed tree only
"$P/bin/tessera" --version | grep -q "^tessera " || fail "installed tessera --version"
"$P/bin/tesserad" --version | grep -q "^tesserad " || fail "installed tesserad --version"
export TESSERA_BIN_DIR=$P/bin
TESSERA_SOURCE_DIR=${TESSERA_SOURCE_DIR:-$(cd "$(dirname "$0")/../../.." && pwd)}
( # a private daemon from the installed binaries, one lease through the installed CLI
  # shellcheck source=../lease/lib.sh
  source "$TESSERA_SOURCE_DIR/tests/integration/lease/lib.sh"
  start_daemon
  id=$("$TESSERA" --socket "$T_SOCK" lease create --device 0 --mem 4GiB --for 1h | sed -n 's/^lease \([0-9]*\):.*/\1/p')
  [ -n "$id" ] || { echo "FAIL: no lease id"; exit 1; }
  "$TESSERA" --socket "$T_SOCK" lease list | grep -qw "$id" || { echo "FAIL: the lease is not listed"; exit 1; }
  # the shims where `tessera run` looks for them: ../lib/tessera beside bin
  # (a CUDA device: both, the CUDA one first)
  pre=$(env -u TESSERA_SHIM -u TESSERA_OPENCL_SHIM "$TESSERA" --socket "$T_SOCK" run --lease "$id" -- sh -c 'echo "$LD_PRELOAD"')
  lib=$(realpath "$TESSERA_BIN_DIR/../lib/tessera")
  [ "$pre" = "$lib/libtessera-cuda.so:$lib/libtessera-opencl.so" ] \
    || { echo "FAIL: tessera run preloaded '$pre'"; exit 1; }
  "$TESSERA" --socket "$T_SOCK" lease release "$id" >/dev/null
  stop_daemon
) || fail "the installed daemon and CLI did not serve a lease"

# the shim where `tessera run` looks for it (../lib/tessera beside bin)
# the libraries, through their pkg-config files
cat >"$ROOT/use.c" <<'C'
#include <stdio.h>
#include <tessera/frontier.h>
#include <tessera/rt.h>
int main(void) {
  printf("%zu %s\n", tsr_rt_descriptor_bytes(), tsr_rt_op_name(TSR_RT_OP_ADD));
  return 0;
}
C
export PKG_CONFIG_PATH=$P/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$ROOT/dest
flags=$(pkg-config --cflags --libs tessera-rt tessera-frontier)
# shellcheck disable=SC2086
cc -std=c11 -o "$ROOT/use" "$ROOT/use.c" $flags || fail "a program does not build against the installed libraries"
if [ -x "$ROOT/use" ]; then
  got=$(LD_LIBRARY_PATH=$P/lib "$ROOT/use")
  [ "$got" = "128 add" ] || fail "the installed libtessera-rt answered '$got'"
fi

# the man pages render and carry the --help text
if command -v man >/dev/null; then
  MANWIDTH=100 man -l "$P/share/man/man1/tessera.1" 2>/dev/null | grep -q "create, release, list and show GPU leases" \
    || fail "tessera(1) does not carry the commands"
  MANWIDTH=100 man -l "$P/share/man/man8/tesserad.8" 2>/dev/null | grep -q -- "--state-dir" \
    || fail "tesserad(8) does not carry the options"
fi

# ---- the Debian package -----------------------------------------------------------
if ! command -v cpack >/dev/null || ! command -v dpkg-deb >/dev/null; then
  echo "SKIP (deb part): cpack or dpkg-deb missing"
else
  (cd "$BUILD" && cpack -G DEB -B "$ROOT/deb" >"$ROOT/cpack.log" 2>&1) || { cat "$ROOT/cpack.log"; fail "make deb failed"; }
  deb=$(ls "$ROOT"/deb/tessera_*.deb 2>/dev/null | head -1)
  if [ -n "$deb" ]; then
    listing=$(dpkg-deb -c "$deb" | awk '{print $6}')
    for f in ./usr/bin/tessera ./usr/bin/tesserad ./usr/lib/tessera/libtessera-cuda.so ./usr/lib/tessera/libtessera-opencl.so ./usr/lib/tessera/libtessera-preload.so ./usr/lib/libtessera-rt.so \
             ./usr/lib/libtessera-frontier.so ./usr/include/tessera/rt.h ./usr/lib/pkgconfig/tessera-rt.pc \
             ./usr/lib/systemd/system/tesserad.service ./usr/share/man/man1/tessera.1 ./usr/share/man/man8/tesserad.8 \
             ./etc/tessera/tessera.conf; do
      grep -qx -- "$f" <<<"$listing" || fail "the .deb lacks $f"
    done
    if [ -f "$BUILD/lib/spank_tessera.so" ]; then
      grep -qx -- ./usr/lib/tessera/spank_tessera.so <<<"$listing" || fail "the .deb lacks the Slurm plugin"
    fi
    dpkg-deb -e "$deb" "$ROOT/control"
    grep -qx /etc/tessera/tessera.conf "$ROOT/control/conffiles" || fail "the configuration is not a conffile"
    grep -q "mkdir -p /var/lib/tessera" "$ROOT/control/postinst" || fail "postinst does not make the state directory"
    if grep -v '^[[:space:]]*#' "$ROOT/control/postinst" | grep -Eq "systemctl|deb-systemd-helper|invoke-rc.d"; then
      fail "postinst enables or starts something"
    fi
    dpkg-deb -x "$deb" "$ROOT/debroot"
    "$ROOT/debroot/usr/bin/tessera" --version | grep -q "^tessera " || fail "the packaged tessera does not run"
    grep -q '^ExecStart=/usr/bin/tesserad --config /etc/tessera/tessera.conf$' \
      "$ROOT/debroot/usr/lib/systemd/system/tesserad.service" || fail "the packaged unit does not name /usr/bin/tesserad"
  else
    fail "no .deb was made"
  fi
fi

if [ "$FAILS" -ne 0 ]; then
  echo "$FAILS failures"
  exit 1
fi
echo "ok: make install and the .deb"
