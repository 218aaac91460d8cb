#!/usr/bin/env bash
# `pip install ./python` as a user would (Debian's pip, no network): the
# installed package carries the libtessera-rt.so it was given and finds it
# from anywhere, with no TESSERA_RT_LIBRARY at run time.
#   install_check.sh PYTHON LIBTESSERA_RT_SO SOURCE_DIR
set -eu
PY=$1 LIB=$2 SRC=$3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
if ! command -v "$PY" >/dev/null; then
  echo "SKIP: no $PY"
  exit 77
fi
if ! "$PY" -m pip --version >/dev/null 2>&1; then
  echo "SKIP: $PY has no pip (Debian: python3-pip)"
  exit 77
fi
cp -r "$SRC/python" "$T/src"   # pip builds in the source folder: not in the checkout
TESSERA_RT_LIBRARY=$LIB "$PY" -m pip install --no-build-isolation --no-deps --target "$T/site" "$T/src" -q \
  2>&1 | grep -v "Running pip as the 'root' user" || true
test -f "$T/site/tessera/_lib/libtessera-rt.so" || { echo "FAIL: the library was not bundled"; exit 1; }
cd /
env -u TESSERA_RT_LIBRARY PYTHONPATH="$T/site" "$PY" - "$T/site" <<'PY'
import sys
from tessera import rt
site = sys.argv[1]
path = rt.library_path()
assert path.startswith(site), "found %s, not the bundled library" % path
with rt.Runtime(backend="cpu", lanes=2) as r:
    assert r.stats()["lanes"] == 2
print("ok: installed package runs its bundled", path[len(site):])
PY
