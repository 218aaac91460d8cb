#!/usr/bin/env bash
# torchrun with two processes, one GPU each, NCCL all-reduce and DDP steps:
# natively, then under a 16 GiB lease per GPU (the shim
# preloaded, TESSERA_LEASE naming both leases: each process charges the one
# of its GPU). Under the leases every rank sees its lease as its GPU's
# memory, the all-reduce sums right, the losses equal the native run's, and
# a step takes no more than 10% longer than natively.
#   ddp.sh BIN_DIR    skips (77) with fewer than two GPUs, or without torch
set -u
BIN=${1:?usage: ddp.sh BIN_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
[ "${n:-0}" -ge 2 ] || { echo "SKIP: $n GPU(s); this needs two"; exit 77; }
python3 -c 'import torch, torch.distributed' 2>/dev/null || { echo "SKIP: no torch"; exit 77; }
TORCHRUN=$(dirname "$(command -v python3)")/torchrun
[ -x "$TORCHRUN" ] || TORCHRUN="python3 -m torch.distributed.run"
D=$(mktemp -d); chmod 755 "$D"
DP=
trap '[ -n "$DP" ] && kill "$DP" 2>/dev/null; rm -rf "$D"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
export CUDA_VISIBLE_DEVICES=0,1
DDP_OUT=$D/native $TORCHRUN --standalone --nproc_per_node 2 "$HERE/ddp.py" >"$D/native.out" 2>"$D/native.err"
echo "== native (status $?)"; cat "$D"/native.rank* 2>/dev/null; grep -v '^\s*$' "$D/native.err" | tail -3
printf '[daemon]\ndevices = nvml\nsync = none\n' >"$D/c.conf"
"$BIN/tesserad" --config "$D/c.conf" --state-dir "$D/state" --socket "$D/s.sock" 2>"$D/daemon.log" &
DP=$!
for _ in $(seq 1 200); do [ -S "$D/s.sock" ] && break; sleep 0.05; done
T() { "$BIN/tessera" --socket "$D/s.sock" "$@"; }
ids=() limits=()
for dev in 0 1; do
  id=$(T lease create --device "$dev" --mem 16GiB --for 30m --json | grep -Eo '"id": [0-9]+' | grep -Eo '[0-9]+')
  [ -n "$id" ] || { fail "no lease on device $dev"; continue; }
  ids+=("$id"); limits+=("$(T lease show "$id" --json | grep -Eo '"bytes": [0-9]+' | grep -Eo '[0-9]+')")
done
LEASES=$(IFS=,; echo "${ids[*]}")
DDP_OUT=$D/leased LD_PRELOAD="$BIN/libtessera-cuda.so" TESSERA_LEASE="$LEASES" TESSERA_REGION_DIR="$D/state/regions" \
  $TORCHRUN --standalone --nproc_per_node 2 "$HERE/ddp.py" >"$D/leased.out" 2>"$D/leased.err"
echo "== under leases $LEASES (status $?)"; cat "$D"/leased.rank* 2>/dev/null; grep -v '^\s*$' "$D/leased.err" | tail -3
val() { sed -n "s/.*\b$3=\([^ ]*\).*/\1/p" "$D/$1.rank$2" 2>/dev/null | head -1; }
for r in 0 1; do
  [ "$(val leased $r allreduce_ok)" = 1 ] && echo "ok: rank $r all-reduce" || fail "rank $r: all-reduce under the lease: $(val leased $r allreduce_ok)"
  [ "$(val leased $r meminfo_total)" = "${limits[$r]:-x}" ] && echo "ok: rank $r sees its lease (${limits[$r]} bytes)" ||
    fail "rank $r: mem_get_info total $(val leased $r meminfo_total), lease ${limits[$r]:-?}"
  a=$(val native $r loss_last) b=$(val leased $r loss_last)
  [ -n "$a" ] && [ "$a" = "$b" ] && echo "ok: rank $r loss $b as natively" || fail "rank $r: loss ${b:-none} under the lease, ${a:-none} natively"
  a=$(val native $r step_ms) b=$(val leased $r step_ms)
  if [ -n "$a" ] && [ -n "$b" ] && awk -v a="$a" -v b="$b" 'BEGIN { exit !(b <= a * 1.10) }'; then
    echo "ok: rank $r step $b ms (native $a ms)"
  else
    fail "rank $r: step ${b:-?} ms under the lease, ${a:-?} ms natively (more than 10% slower)"
  fi
done
for id in "${ids[@]}"; do
  u=$(T lease show "$id" --json | grep -Eo '"peak_bytes": [0-9]+' | grep -Eo '[0-9]+')
  [ "${u:-0}" -gt 0 ] && echo "ok: lease $id charged (peak $u bytes)" || fail "lease $id: nothing was charged: the shim did not hold the rank"
done
grep -q "backstop: lease" "$D/daemon.log" && fail "the backstop acted: $(grep 'backstop: lease' "$D/daemon.log" | head -2)"
echo "ddp.sh: $fails failed"
[ "$fails" -eq 0 ]
