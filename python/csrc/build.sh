#!/usr/bin/env bash
# Builds libtessera-torch.so without CMake, against the PyTorch of a python3
# (a machine with PyTorch but not tessera's build dependencies, e.g. a GPU
# machine the build tree was carried to):
#
#   python/csrc/build.sh LIBDIR [PYTHON]
#
# LIBDIR holds libtessera-rt.so; the engine is written beside it (so that
# tessera.torch finds it there). CMake builds the same (python/csrc/CMakeLists.txt).
# TSR_TORCH_CXXFLAGS adds flags (-DTSR_TORCH_SECTIONS: where a taken
# operation's time goes, printed when a scheduler exits).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 LIBDIR [PYTHON]" >&2; exit 2; }
libdir=$(cd "$1" && pwd)
py=${2:-python3}
here=$(cd "$(dirname "$0")" && pwd)
[ -f "$libdir/libtessera-rt.so" ] || { echo "$0: no libtessera-rt.so in $libdir" >&2; exit 2; }
mapfile -t info < <("$py" - <<'PY'
import os, torch, torch.utils.cpp_extension as c
print(" ".join("-isystem " + p for p in c.include_paths()))
print(c.library_paths()[0])
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
cuda = torch.version.cuda is not None and any(os.path.exists(os.path.join(p, "c10", "cuda", "CUDAStream.h")) for p in c.include_paths())
print(int(cuda))
print(os.path.join(c.CUDA_HOME or "/usr/local/cuda", "include"))
PY
)
flags=(${info[0]} -D_GLIBCXX_USE_CXX11_ABI="${info[2]}")
libs=(-ltorch -ltorch_cpu -lc10)
if [ "${info[3]}" = 1 ]; then
  flags+=(-DTSR_TORCH_CUDA=1 -isystem "${info[4]}")
  libs+=(-lc10_cuda)
fi
g++ -O2 -std=c++17 -shared -fPIC -fvisibility=hidden -Wall -Wextra -Werror ${TSR_TORCH_CXXFLAGS:-} "${flags[@]}" -I"$here/../../include" \
  "$here/capture.cpp" -o "$libdir/libtessera-torch.so" -L"$libdir" -ltessera-rt -L"${info[1]}" "${libs[@]}" \
  -Wl,-rpath,'$ORIGIN' -Wl,-rpath,"${info[1]}"
echo "built $libdir/libtessera-torch.so (CUDA: ${info[3]})"
