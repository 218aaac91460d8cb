#!/usr/bin/env bash
# The PyTorch front (tessera.torch) on a real GPU: python/tests/test_torch_front.py
# (the python engine) and test_torch_native.py (the native engine, when
# libtessera-torch.so is beside LIBTESSERA_RT_SO or in TESSERA_TORCH_LIBRARY;
# python/csrc/build.sh builds it) over CUDA tensors and the runtime's CUDA
# backend (the seed's examples, every dependency kind, the fallbacks, and
# TESSERA_TORCH_PROGRAMS random programs, default 1000, against eager). Exit
# 77 (skipped) with the reason when no Python imports torch with a CUDA device.
#   torch_front.sh LIBTESSERA_RT_SO
set -u
LIB=${1:?usage: torch_front.sh LIBTESSERA_RT_SO}
HERE=$(cd "$(dirname "$0")" && pwd)
TESTS=$HERE/../../../python/tests
PY=
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then PY=$p; break; fi
done
if [ -z "$PY" ]; then
  echo "SKIP: no python3 imports torch with a CUDA device"
  exit 77
fi
cd "$TESTS" || exit 1
TESSERA_RT_LIBRARY=$LIB TESSERA_RT_REQUIRED=1 TESSERA_TORCH_REQUIRED=1 TESSERA_TORCH_BACKEND=cuda \
  TESSERA_TORCH_PROGRAMS=${TESSERA_TORCH_PROGRAMS:-1000} "$PY" -m unittest -v test_torch_front test_torch_native
