#!/usr/bin/env bash
# scripts/bench_table.py on the committed sample (testdata/sample.jsonl: two
# runs' records, a case recorded twice, nulls, a '|' in a case) against the
# expected tables, then its errors: each bad input exits 2 naming file and
# line, with nothing on stdout. Then scripts/bench_record.py: nothing without
# TSR_BENCH_JSON, a record that the table reads with it, exit 2 on a figure
# that is not a number.
#   test_table.sh SOURCE_DIR
set -u
SRC=${1:?usage: test_table.sh SOURCE_DIR}
TABLE="python3 $SRC/scripts/bench_table.py" RECORD="python3 $SRC/scripts/bench_record.py"
DATA=$SRC/bench/common/testdata
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

$TABLE "$DATA/sample.jsonl" >"$D/out" 2>"$D/err" || fail "sample: exit $?: $(cat "$D/err")"
diff -u "$DATA/sample.md" "$D/out" || fail "sample: the tables differ from testdata/sample.md"
$TABLE "$DATA/sample.jsonl" --bench shim --figures tessera_ns,added_ns,tessera_n >"$D/out" 2>"$D/err" ||
  fail "--bench --figures: exit $?: $(cat "$D/err")"
diff -u "$DATA/sample-shim.md" "$D/out" || fail "--bench shim --figures: the table differs from testdata/sample-shim.md"

# bad NAME LINE WHAT ARGS...: ARGS given to bench_table.py with a file NAME
# whose line 2 is LINE (line 1 a good record): exit 2, stderr names NAME:2
# and says WHAT, stdout is empty
bad() {
  local name=$1 line=$2 what=$3 rc
  shift 3
  { head -n 1 "$DATA/sample.jsonl"; printf '%s\n' "$line"; } >"$D/$name"
  $TABLE "$DATA/sample.jsonl" "$D/$name" "$@" >"$D/out" 2>"$D/err"
  rc=$?
  [ $rc -eq 2 ] || fail "$name: exit $rc, want 2"
  [ ! -s "$D/out" ] || fail "$name: printed on stdout: $(head -n 2 "$D/out")"
  grep -qF "$D/$name:2: $what" "$D/err" || fail "$name: stderr does not say '$name:2: $what': $(cat "$D/err")"
}
good='"bench":"x","commit":"c","date":"2026-11-28T00:00:00Z","host":"h","device":"cpu","driver":null,"case":"k"'
bad not-json.jsonl '{"bench": "x",' "not a JSON object"
bad array.jsonl '[1, 2]' "not a JSON object"
bad text.jsonl 'region 1 thread 22.5 ns' "not a JSON object"
bad nan.jsonl "{$good,\"figures\":{\"p50_ns\":NaN}}" "not a JSON object"
bad no-case.jsonl '{"bench":"x","commit":"c","date":"d","host":"h","device":"cpu","driver":null,"figures":{}}' "no 'case'"
bad no-figures.jsonl "{$good}" "no 'figures'"
bad figures-list.jsonl "{$good,\"figures\":[1]}" "'figures' is not an object"
bad figure-text.jsonl "{$good,\"figures\":{\"p50_ns\":\"12 us\"}}" "figure 'p50_ns' is not a number"
bad figure-bool.jsonl "{$good,\"figures\":{\"ok\":true}}" "figure 'ok' is not a number"
bad driver-number.jsonl "{${good/null/550},\"figures\":{}}" "'driver' is not a string or null"
bad verdict-number.jsonl "{$good,\"figures\":{},\"verdict\":1}" "'verdict' is not a string"

$TABLE "$D/missing.jsonl" >"$D/out" 2>"$D/err"
rc=$?
{ [ $rc -eq 2 ] && [ ! -s "$D/out" ] && grep -qF "$D/missing.jsonl" "$D/err"; } ||
  fail "a missing file: exit $rc, stderr '$(cat "$D/err")'"
$TABLE "$DATA/sample.jsonl" --bench nosuch >"$D/out" 2>"$D/err"
rc=$?
{ [ $rc -eq 2 ] && [ ! -s "$D/out" ] && grep -q "no records of bench 'nosuch'" "$D/err"; } ||
  fail "--bench nosuch: exit $rc, stderr '$(cat "$D/err")'"

# bench_record.py
out=$(unset TSR_BENCH_JSON; $RECORD --bench b --case c x_ns=1 2>&1) || fail "bench_record without TSR_BENCH_JSON: exit $?"
[ -z "$out" ] || fail "bench_record without TSR_BENCH_JSON said: $out"
TSR_BENCH_JSON=$D/rec.jsonl $RECORD --bench b --case 'a "case"' --gpu --target t --verdict PASS p50_ns=812 ratio=1.25 \
  added_ns=-3 big=1e20 || fail "bench_record: exit $?"
TSR_BENCH_JSON=$D/rec.jsonl $RECORD --bench b --case c2 x_ns=1 || fail "bench_record, a second record: exit $?"
$TABLE "$D/rec.jsonl" >"$D/out" 2>"$D/err" || fail "the table of bench_record's records: $(cat "$D/err")"
grep -qF '| a "case" | 812 | 1.25 | -3 | 100000000000000000000 | - | t | PASS |' "$D/out" ||
  fail "bench_record's record, as a table row: $(cat "$D/out")"
for f in p50_ns=12us p50_ns= =3 p50_ns=inf p50_ns=0x10 p50_ns; do
  TSR_BENCH_JSON=$D/rec2.jsonl $RECORD --bench b --case c "$f" 2>"$D/err"
  rc=$?
  { [ $rc -eq 2 ] && [ ! -e "$D/rec2.jsonl" ] && grep -q "bench_record: b, c: '$f'" "$D/err"; } ||
    fail "bench_record $f: exit $rc, stderr '$(cat "$D/err")'"
done
TSR_BENCH_JSON=$D/no/such/dir/r.jsonl $RECORD --bench b --case c x=1 2>"$D/err"
rc=$?
{ [ $rc -eq 2 ] && grep -q "bench_record: TSR_BENCH_JSON=$D/no/such/dir/r.jsonl" "$D/err"; } ||
  fail "bench_record into a missing folder: exit $rc, stderr '$(cat "$D/err")'"

[ $fails -eq 0 ] && echo "bench_table, bench_record: all checks passed"
[ $fails -eq 0 ]
