#!/usr/bin/env bash
# Builds libtessera-torch.so (capture.cpp) against the PyTorch of a python3:
#
#   python/csrc/build.sh LIBDIR [PYTHON]     builds LIBDIR/libtessera-torch.so
#   python/csrc/build.sh --check [PYTHON]    exit 0 if it can be built here, else
#                                            1 and the reason on stdout
#
# LIBDIR holds libtessera-rt.so; the engine is written beside it (so that
# tessera.torch finds it there). CMake builds through this script
# (python/csrc/CMakeLists.txt), and so does a machine with PyTorch but not
# tessera's build dependencies (a GPU machine the build tree was carried to).
# Needs PyTorch's C++ headers (Debian: libtorch-dev; a pip wheel has them);
# built with PyTorch's CUDA support when its CUDA headers are there too.
# TSR_TORCH_CXXFLAGS adds flags (-DTSR_TORCH_SECTIONS: where a taken
# operation's time goes, printed when a scheduler exits).
set -euo pipefail
usage() { echo "usage: $0 LIBDIR [PYTHON] | --check [PYTHON]" >&2; exit 2; }
[ $# -ge 1 ] || usage
mode=build
if [ "$1" = --check ]; then mode=check; else libdir=$1; fi
py=${2:-python3}
here=$(cd "$(dirname "$0")" && pwd)
# one line each: include flags, library folder, C++ ABI, CUDA (0/1), CUDA's
# include folder; or "missing: <why>"
info_text=$("$py" - <<'PY' 2>/dev/null || echo "missing: $py does not import torch"
import os
try:
    import torch, torch.utils.cpp_extension as c
except Exception as e:
    print("missing: torch does not import (%s)" % e)
    raise SystemExit(0)
inc = c.include_paths()
if not any(os.path.exists(os.path.join(p, "torch", "library.h")) for p in inc):
    print("missing: PyTorch's C++ headers (Debian: libtorch-dev)")
    raise SystemExit(0)
print(" ".join("-isystem " + p for p in inc))
print(c.library_paths()[0])
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
cuda = torch.version.cuda is not None and any(os.path.exists(os.path.join(p, "c10", "cuda", "CUDAStream.h")) for p in inc)
print(int(cuda))
print(os.path.join(c.CUDA_HOME or "/usr/local/cuda", "include"))
PY
)
mapfile -t info <<<"$info_text"
if [[ ${info[0]} == missing:* ]]; then
  [ $mode = check ] && { echo "${info[0]#missing: }"; exit 1; }
  echo "$0: ${info[0]#missing: }" >&2
  exit 1
fi
[ $mode = check ] && exit 0
libdir=$(cd "$libdir" && pwd)
[ -f "$libdir/libtessera-rt.so" ] || { echo "$0: no libtessera-rt.so in $libdir" >&2; exit 2; }
flags=(${info[0]} -D_GLIBCXX_USE_CXX11_ABI="${info[2]}")
libs=(-ltorch -ltorch_cpu -lc10)
if [ "${info[3]}" = 1 ]; then
  flags+=(-DTSR_TORCH_CUDA=1 -isystem "${info[4]}")
  libs+=(-ltorch_cuda -lc10_cuda)
fi
g++ -O2 -std=c++17 -shared -fPIC -fvisibility=hidden -Wall -Wextra -Werror ${TSR_TORCH_CXXFLAGS:-} "${flags[@]}" -I"$here/../../include" \
  "$here/capture.cpp" -o "$libdir/libtessera-torch.so" -L"$libdir" -ltessera-rt -L"${info[1]}" "${libs[@]}" \
  -Wl,-rpath,'$ORIGIN' -Wl,-rpath,"${info[1]}"
echo "built $libdir/libtessera-torch.so (CUDA: ${info[3]})"
