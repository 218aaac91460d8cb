#!/usr/bin/env bash
# A benchmark's smoke test, records included: runs COMMAND with
# TSR_BENCH_JSON set to a fresh file, then checks what it recorded (every
# line a record that scripts/bench_table.py accepts, at least MIN records
# of each BENCH named, each dated in RFC 3339 UTC and with a figure) and
# prints the records' tables. COMMAND's output passes through untouched;
# its exit status is kept when it fails or skips (77).
#   with_records.sh BENCH=MIN... -- COMMAND [ARGS...]
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
want=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do want+=("$1"); shift; done
[ ${#want[@]} -gt 0 ] && [ $# -ge 2 ] || { echo "usage: with_records.sh BENCH=MIN... -- COMMAND [ARGS...]" >&2; exit 2; }
shift
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
TSR_BENCH_JSON=$D/records.jsonl "$@"
rc=$?
[ $rc -eq 0 ] || exit $rc
echo
echo "== records ($(wc -l <"$D/records.jsonl" 2>/dev/null || echo 0) lines)"
python3 - "$HERE/../../scripts" "$D/records.jsonl" "${want[@]}" <<'PY'
import re, sys
sys.path.insert(0, sys.argv[1])
import bench_table
path, want = sys.argv[2], sys.argv[3:]
try:
    recs = bench_table.read(path)
except bench_table.BadInput as e:
    sys.exit(f"with_records: FAIL: {e}")
bad = 0
for n, r in enumerate(recs, 1):
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["date"]) or not r["figures"]:
        print(f"with_records: FAIL: record {n} ({r['bench']}, {r['case']}): no RFC 3339 date or no figure")
        bad += 1
for w in want:
    bench, _, least = w.partition("=")
    got = sum(r["bench"] == bench for r in recs)
    if got < int(least or 1):
        print(f"with_records: FAIL: {got} records of bench '{bench}', want at least {least or 1}")
        bad += 1
if bad:
    sys.exit(1)
sys.exit(bench_table.main([path]))
PY
