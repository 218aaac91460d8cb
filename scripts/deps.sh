#!/usr/bin/env bash
# Installs the Debian packages that building and testing tessera need, and only
# those that are missing. Does nothing (and needs no network) when all are there.
# Usage: scripts/deps.sh [--check]   (--check: list what is missing, install nothing)
set -euo pipefail

packages=(
  build-essential   # gcc, make, libc headers
  cmake
  pkg-config
  libcriterion-dev  # unit and integration test framework
  libjansson-dev    # tests only: the reference the JSON scanner is compared against (unit.base_json)
  libinih-dev       # INI syntax of tesserad's configuration (src/daemon/config.c)
  libmicrohttpd-dev # tesserad's Prometheus endpoint (src/daemon/metrics.c)
  curl              # its integration test scrapes it
  libslurm-dev      # the Slurm plugin (contrib/slurm)
  slurm-wlm         # its integration test runs a real Slurm
  munge
  clang             # fuzz targets (libFuzzer)
  clang-format      # lint.format: the tree as .clang-format writes it
  clang-tidy        # make analyze: the static analyser (scripts/analyze.sh)
  gcovr             # make coverage: the gcov counts as a table
  libclang-rt-14-dev
  util-linux        # runuser, setpriv (integration tests run the CLI as other users)
  passwd            # useradd, groupadd (integration tests)
  tmux              # drives `tessera top`'s live view in its integration test
  python3-torch     # the PyTorch front's tests (tessera.torch over CPU tensors)
  libtorch-dev      # PyTorch's C++ headers: the front's native engine (python/csrc)
  python3-pip       # `pip install ./python` in its test (offline: no build isolation)
  python3-setuptools
  python3-wheel
  help2man          # the man pages, from the programs' --help (make install, make deb)
  dpkg-dev          # make deb: dpkg-shlibdeps computes the package's dependencies
  opencl-c-headers  # libtessera-opencl.so builds against the Khronos headers
  ocl-icd-opencl-dev # its tests link the ICD loader
  pocl-opencl-icd   # and run on PoCL, a real OpenCL implementation on the CPU
  clinfo            # which they also check under the shim
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  printf '%s\n' "${missing[@]}"
  exit 1
fi

echo "deps.sh: installing missing Debian packages: ${missing[*]}" >&2
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "deps.sh: not root and no sudo; install as root: apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
