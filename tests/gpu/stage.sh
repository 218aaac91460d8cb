#!/usr/bin/env bash
# Copies what the GPU tests run from a build on this machine into one flat
# folder, for a GPU machine that lacks the build's tools and some of its
# libraries (tests/gpu/gate.sh runs them there):
#   tests/gpu/stage.sh BUILD DEST
# BUILD is a build folder (build/main); DEST is made or emptied. Besides
# the programs, the Debian libraries tesserad and tessera link that such a
# machine may lack (libinih, libmicrohttpd) go in too.
set -euo pipefail
BUILD=${1:?usage: stage.sh BUILD DEST}
DEST=${2:?usage: stage.sh BUILD DEST}
mkdir -p "$DEST"
find "$DEST" -mindepth 1 -delete
copy() { # copy SRC [NAME]: SRC into DEST (as NAME); a missing one is said, not fatal
  if [ -e "$1" ]; then cp -L "$1" "$DEST/${2:-$(basename "$1")}"; else echo "stage: no $1 (skipped)"; fi
}
copy "$BUILD/bin/tessera"
copy "$BUILD/bin/tesserad"
for so in libtessera-cuda.so libtessera-opencl.so libtessera-preload.so libtessera-rt.so libtessera-torch.so; do
  copy "$BUILD/lib/$so"
done
copy "$BUILD/tests/tsr_paths_gpu" paths
copy "$BUILD/tests/tsr_reclaim_gpu" reclaim
copy "$(dirname "$0")/shim/statics_zstd.fatbin"
for t in tsr_gpu_tenant_real throttle_loop tsr_ocl_tenant rt_gpu tsr_node_probe libtsr_getenv_wrap.so libtsr_evil.so; do
  copy "$BUILD/tests/$t"
done
copy "$BUILD/bench/bench_startup"
copy "$BUILD/bench/shim_bench"
for lib in libinih.so.1 libmicrohttpd.so.12; do
  path=$(ldd "$BUILD/bin/tesserad" "$BUILD/bin/tessera" | awk -v l="$lib" '$1 == l {print $3; exit}')
  [ -n "$path" ] && copy "$path"
done
# the commit the gate runs (gate.sh names it in its result file)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if commit=$(git -C "$SRC" rev-parse HEAD 2>/dev/null); then
  git -C "$SRC" diff --quiet HEAD 2>/dev/null || commit="$commit (with uncommitted changes)"
  echo "$commit" >"$DEST/COMMIT"
fi
echo "stage: $(ls "$DEST" | wc -l) files, $(du -sh "$DEST" | cut -f1) in $DEST"
