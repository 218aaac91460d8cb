#!/usr/bin/env bash
# visible_conformance.sh PROBE REAL: runs probe_visible.sh against the fake
# (PROBE is linked with it), one device as on the H100 that answered REAL
# (real_h100_visible.txt), and checks that every answer is the H100's, but
# for the lines listed below (each with why the fake differs on purpose).
set -u
here=$(dirname "$0")
declare -A differs=(
  # "MIG-<the GPU's UUID digits>/0/0": the H100, MIG off, took it as the GPU
  # itself; the fake has no MIG and takes no MIG- entry.
  [52]=1
)
got=$(FAKE_CUDA_DEVICES=1 FAKE_CUDA_CTX_BYTES=0 bash "$here/probe_visible.sh" "$1") || exit 1
fail=0 checked=0
while IFS= read -r line; do
  [[ $line =~ ^[0-9]+:\  ]] || continue
  n=${line%%: *}
  [[ -n ${differs[$n]:-} ]] && continue
  want=${line##* -> }
  have=$(grep -m1 "^$n: " <<<"$got")
  checked=$((checked + 1))
  if [[ ${have##* -> } != "$want" ]]; then
    echo "differs: real '$line', fake '${have:-(no answer)}'"
    fail=1
  fi
done <"$2"
echo "$checked answers compared with the real driver's"
exit $fail
