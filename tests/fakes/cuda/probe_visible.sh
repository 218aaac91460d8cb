#!/usr/bin/env bash
# probe_visible.sh PROBE: asks a driver (the real one on a GPU machine, or
# the fake) how it reads CUDA_VISIBLE_DEVICES (probe_visible.c), with values
# made from its first device's UUID; prints one numbered line per value,
# that UUID written #0. real_h100_visible.txt is the H100's answer;
# unit.fakecuda_visible_conformance compares the fake's with it.
set -u
probe=$1
U0=$("$probe" '(unset)' | sed -n 's/.*devs=\([^,]*\).*/\1/p')
[ -n "$U0" ] || { echo "probe_visible.sh: no device" >&2; exit 1; }
UP0=$(tr 'a-f' 'A-F' <<<"$U0")
D0=$(tr -d - <<<"${U0:4}")
values=('(unset)' '' ' ' 0 '0,0' -1 '0,-1' 0gpu ' 0 ' '0,,0' '0,' ',0' +0 -0 00 '000,0' 0x0 '0, 0'
  '0,+0' '0,-1,0' '0,5,0' '1,0' '0,1'
  "$U0" "$UP0" "GPU-${D0:0:1}" "${U0:0:8}" "${U0:0:4}" GPU "${U0:0:13}" "${U0:0:9}-" "GPU-${D0:0:16}"
  "gpu-${U0:4}" " ${U0:0:8}" "${U0:0:8} " "${U0:0:20}x" "${U0}x" "${U0}0"
  "0,$U0" "$U0,0" "$U0,$U0" "$U0,${U0:0:8}" "${U0:0:8},$U0" "$U0,1" "$U0,-1,$U0" "$U0,,$U0"
  "${U0}x,0" '0,GPU-ffffffff' MIG-ffffffff "MIG-$U0" "0,MIG-$U0" "MIG-${U0:4}/0/0")
"$probe" "${values[@]}" | sed "s/$U0/#0/g; s/$UP0/#0u/g" | nl -w1 -s': '
