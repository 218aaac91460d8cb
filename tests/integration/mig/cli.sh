#!/usr/bin/env bash
# Drives the real `tessera mig` binary: every subcommand, its errors and outputs.
set -u
T="${TESSERA_BIN_DIR:?}/tessera"
SRC="${TESSERA_SOURCE_DIR:?}"
DATA="$SRC/data/far"
[ -x "$T" ] || { echo "skip: no tessera binary at $T"; exit 77; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for c in "" plan compare simulate generate run; do
  "$T" mig $c --help >"$W/help" || fail "mig $c --help"
  grep -q usage "$W/help" || fail "mig $c --help prints no usage"
done

# plan: text, JSON and SVG; rho within the authors' 1.2166
"$T" mig plan --gpu A100 "$DATA/rodinia_times_mean.csv" >"$W/plan.txt" || fail "plan text"
grep -q "rho 1.21" "$W/plan.txt" || fail "Rodinia A100 rho: $(tail -2 "$W/plan.txt")"
"$T" mig plan --gpu A100 --json --svg "$W/plan.svg" -o "$W/plan.json" "$DATA/rodinia_times_mean.csv" \
  || fail "plan json"
python3 - "$W/plan.json" <<'PY' || fail "plan JSON content"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["gpu"] == "A100" and len(p["tasks"]) == 16, p.keys()
assert p["rho"] <= 1.2166, p["rho"]
for t in p["tasks"]:
    i = p["instances"][t["instance"]]
    assert t["start_s"] >= i["create_end_s"] - 1e-9
    assert i["size"] == t["size"]
PY
grep -q "<svg" "$W/plan.svg" || fail "no SVG written"
grep -q "instance creation" "$W/plan.svg" || fail "SVG lacks its legend"
for a in miso fixpartbest fixpart:4,2,1 "fixpart:1,1,1,1,1,1,1"; do
  "$T" mig plan --algorithm "$a" "$DATA/rodinia_times_mean.csv" >/dev/null || fail "plan --algorithm $a"
done
"$T" mig plan --gpu A30 --effort 5ms "$DATA/rodinia_times_mean.csv" >/dev/null || fail "plan --effort"
"$T" mig plan --gpu A30 --effort 10ms --seed 7 --max-iterations 50 "$DATA/rodinia_times_mean.csv" \
  >/dev/null || fail "plan --effort 10ms --seed 7"
# --effort is a budget of steps: the same tasks, seed and budget, the same plan
"$T" mig generate -n 30 --scaling poor --seed 4 -o "$W/g30.csv" || fail "generate 30"
"$T" mig plan --effort-steps 400 --seed 3 --json "$W/g30.csv" >"$W/e1.json" || fail "plan --effort-steps"
"$T" mig plan --effort-steps 400 --seed 3 --json "$W/g30.csv" >"$W/e2.json" || fail "plan --effort-steps again"
cmp -s "$W/e1.json" "$W/e2.json" || fail "--effort-steps 400 --seed 3 gave two plans"
"$T" mig plan --effort-steps 400 --effort 30s --seed 3 --json "$W/g30.csv" >"$W/e3.json" || fail "plan --effort-steps with a cap"
cmp -s "$W/e1.json" "$W/e3.json" || fail "a wall-clock cap that does not bite changed the plan"
grep -q '"FAR+effort"' "$W/e1.json" || fail "the plan of --effort-steps is not named FAR+effort"
for tie in both smaller larger; do
  "$T" mig plan --tie "$tie" "$W/g30.csv" >/dev/null || fail "plan --tie $tie"
done

# compare: FAR beside every baseline
"$T" mig compare "$DATA/rodinia_times_mean.csv" >"$W/cmp" || fail compare
for a in FAR MISO-opt FixPartBest "FixPart(7)" "FixPart(1,1,1,1,1,1,1)"; do
  grep -qF "$a" "$W/cmp" || fail "compare lacks $a"
done
"$T" mig compare --gpu A30 --json "$DATA/rodinia_times_mean.csv" | python3 -c \
  'import json,sys; r=json.load(sys.stdin)["results"]; assert r[0]["algorithm"]=="FAR" and all(x["sigma"]>=0.999 for x in r), r' \
  || fail "compare --json"

# generate: seeded and reproducible; its output plans
"$T" mig generate --gpu A100 -n 12 --scaling poor --times narrow --seed 9 >"$W/g1.csv" || fail generate
"$T" mig generate --gpu A100 -n 12 --scaling poor --times narrow --seed 9 >"$W/g2.csv" || fail generate
cmp -s "$W/g1.csv" "$W/g2.csv" || fail "generate is not reproducible"
[ "$(wc -l <"$W/g1.csv")" -eq 13 ] || fail "generate wrote $(wc -l <"$W/g1.csv") lines"
"$T" mig plan "$W/g1.csv" >/dev/null || fail "plan of generated tasks"

# simulate: several batches joined
"$T" mig simulate --gpu H100 --batches 4 -n 8 >"$W/sim" || fail simulate
grep -q "multi-batch rho" "$W/sim" || fail "simulate summary"
"$T" mig simulate --concat trivial "$W/g1.csv" "$W/g2.csv" --json >"$W/sim.json" || fail "simulate files"
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert len(p["tasks"])==24 and p["batches"]==2' \
  "$W/sim.json" || fail "simulate JSON"

# run: dry-run carries out a plan with commands, real next to planned
cat >"$W/jobs.csv" <<'CSV'
name,1,2,4,command
whole,,,0.3,"echo whole >>$OUT_LOG"
left,,0.2,,"echo left $CUDA_VISIBLE_DEVICES >>$OUT_LOG"
right,,0.2,,
CSV
"$T" mig plan --gpu A30 --json -o "$W/jobs.json" "$W/jobs.csv" || fail "plan jobs"
OUT_LOG="$W/ran" "$T" mig run --time-scale 0.1 "$W/jobs.json" >"$W/run" 2>"$W/run.err" || fail "run dry-run: $(cat "$W/run.err")"
grep -q "^whole" "$W/ran" && grep -q "^left MIG-dry-run-" "$W/ran" || fail "commands did not run: $(cat "$W/ran")"
grep -q "real_start" "$W/run" || fail "run report"
OUT_LOG="$W/ran2" "$T" mig run --json --time-scale 0 "$W/jobs.json" 2>/dev/null | python3 -c \
  'import json,sys; r=json.load(sys.stdin)["tasks"]; assert all(t["exit_status"]==0 for t in r)' || fail "run --json"
# task names from the plan are escaped in run --json (a quote, a backslash)
printf 'name,1,2\n"say ""hi"" \\ there",0.2,0.1\n' >"$W/quoted.csv"
"$T" mig plan --gpu A30 --json -o "$W/quoted.json" "$W/quoted.csv" || fail "plan quoted names"
"$T" mig run --json --time-scale 0 "$W/quoted.json" 2>/dev/null | python3 -c \
  'import json,sys; r=json.load(sys.stdin)["tasks"]; assert r[0]["name"]=="say \"hi\" \\ there", r' \
  || fail "run --json escapes task names"
# --svg alone, beside other output, from compare, generate and run
"$T" mig compare --svg "$W/cmp.svg" "$DATA/rodinia_times_mean.csv" >/dev/null || fail "compare --svg"
"$T" mig generate --gpu A30 -n 5 --svg "$W/gen.svg" >/dev/null || fail "generate --svg"
OUT_LOG="$W/ran3" "$T" mig run --time-scale 0 --svg "$W/run.svg" "$W/jobs.json" >/dev/null 2>&1 || fail "run --svg"
for f in cmp gen run; do grep -q "<svg" "$W/$f.svg" || fail "$f.svg not written"; done
if [ "$(id -u)" != 0 ]; then
  "$T" mig run --backend nvml "$W/jobs.json" >/dev/null 2>"$W/nv"; rc=$?
  [ $rc -eq 1 ] || fail "nvml without root: exit $rc"
  grep -q "needs root" "$W/nv" || fail "nvml refusal says why: $(cat "$W/nv")"
fi

# JSON from every subcommand goes through one writer: task names with a
# quote, a backslash and non-ASCII letters come out as valid JSON, unchanged
printf 'name,1,2,4,command\n"say ""hi"" \\ there",0.2,0.1,,true\nnaïve ünïcødé ✓,0.3,,0.1,\n' >"$W/names.csv"
NAMES='["say \"hi\" \\ there", "naïve ünïcødé ✓"]'
"$T" mig plan --gpu A30 --json -o "$W/names.json" "$W/names.csv" || fail "plan names"
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert [t["name"] for t in p["tasks"]]==json.loads(sys.argv[2]), p["tasks"]' \
  "$W/names.json" "$NAMES" || fail "plan --json names: $(cat "$W/names.json")"
"$T" mig plan --gpu A30 --json "$W/names.csv" | python3 -c 'import json,sys; json.load(sys.stdin)' \
  || fail "plan --json to standard output"
"$T" mig run --json --time-scale 0 "$W/names.json" 2>/dev/null | python3 -c \
  'import json,sys; r=json.load(sys.stdin); assert [t["name"] for t in r["tasks"]]==json.loads(sys.argv[1]) and r["backend"]=="dry-run", r' \
  "$NAMES" || fail "run --json names"
"$T" mig simulate --gpu A30 --json "$W/names.csv" "$W/names.csv" | python3 -c \
  'import json,sys; p=json.load(sys.stdin); assert [t["name"] for t in p["tasks"]]==2*json.loads(sys.argv[1]), p["tasks"]' \
  "$NAMES" || fail "simulate --json names"
"$T" mig compare --gpu A30 --json "$W/names.csv" | python3 -c 'import json,sys; json.load(sys.stdin)' \
  || fail "compare --json"
"$T" mig generate --gpu A30 -n 4 --p-sup 25% --json | python3 -c \
  'import json,sys; g=json.load(sys.stdin); assert g["seed"]==1 and len(g["tasks"])==4 and set(g["tasks"][0]["times_s"])=={"1","2","4"}, g' \
  || fail "generate --json"

# numbers and durations are parsed whole: a bad one is a usage error (exit 2)
# of one line that names the option
usage_error() { # EXPECTED-TEXT ARGS...
  local want=$1
  shift
  "$T" mig "$@" >/dev/null 2>"$W/err"
  local rc=$?
  [ $rc -eq 2 ] || fail "mig $*: exit $rc, not 2"
  [ "$(wc -l <"$W/err")" -eq 1 ] || fail "mig $*: not one line: $(cat "$W/err")"
  grep -q "^tessera: .*$want" "$W/err" || fail "mig $*: '$(cat "$W/err")' lacks '$want'"
}
CSV="$DATA/rodinia_times_mean.csv"
usage_error "--seed: 'abc' is not a non-negative integer" plan --seed abc "$CSV"
usage_error "--seed: 'abc' is not a non-negative integer" generate --seed abc
usage_error "--seed: '-1' is not a non-negative integer" simulate --batches 2 --seed -1
usage_error "--seed: '18446744073709551616' is too large" generate --seed 18446744073709551616
usage_error "--effort: duration '10' needs a unit" plan --effort 10 "$CSV"
usage_error "--effort: duration '10' needs a unit" compare --effort 10 "$CSV"
usage_error "--effort: 'fast' is not a duration" plan --effort fast "$CSV"
usage_error "--effort-steps wants a whole number from 1 to 1000000000000, not '0'" plan --effort-steps 0 "$CSV"
usage_error "--tie" plan --tie sometimes "$CSV"
usage_error "--tasks wants a whole number from 1 to 1000000, not '0'" generate -n 0
usage_error "--tasks: '1.5' is not a non-negative integer" generate --tasks 1.5
usage_error "--tasks wants a whole number from 1 to 100000, not '100001'" simulate --batches 1 -n 100001
usage_error "--batches: '2x' is not a non-negative integer" simulate --batches 2x
usage_error "--max-iterations wants a whole number from 1 to 1000000000, not '0'" plan --max-iterations 0 "$CSV"
usage_error "--p-sup: fraction '2' is" generate --p-sup 2
usage_error "--time-scale wants a number from 0 to 1000 such as 0.01 or 2, not '1e3'" run --time-scale 1e3 "$W/jobs.json"
usage_error "--time-scale wants a number from 0 to 1000 such as 0.01 or 2, not '-1'" run --time-scale -1 "$W/jobs.json"
usage_error "--gpu-index wants a whole number from 0 to 63, not '64'" run --gpu-index 64 "$W/jobs.json"
usage_error "--concat wants trivial, reverse or moves, not 'sideways'" simulate --concat sideways --batches 1
usage_error "--backend wants dry-run or nvml, not 'cuda'" run --backend cuda "$W/jobs.json"
usage_error "missing value for '--seed'" plan "$CSV" --seed
usage_error "unknown option '--frobnicate'" plan --frobnicate "$CSV"
"$T" mig generate --seed 18446744073709551615 -n 2 >/dev/null || fail "the largest seed"

# errors: one clear line naming the line, and the exit codes of cli.h
printf 'name,1,2\na,1,-2\n' >"$W/bad.csv"
"$T" mig plan "$W/bad.csv" 2>"$W/err"; rc=$?
[ $rc -eq 2 ] || fail "bad CSV: exit $rc"
[ "$(wc -l <"$W/err")" -eq 1 ] && grep -q "^tessera: .*bad.csv:2: negative time" "$W/err" || fail "bad CSV message: $(cat "$W/err")"
"$T" mig plan --gpu V100 "$DATA/rodinia_times_mean.csv" 2>"$W/err"; rc=$?
[ $rc -eq 2 ] && grep -q "unknown GPU model 'V100'" "$W/err" || fail "unknown GPU: $rc $(cat "$W/err")"
"$T" mig plan --algorithm fixpart:2,4,1 "$DATA/rodinia_times_mean.csv" 2>"$W/err"; rc=$?
[ $rc -eq 2 ] || fail "invalid partition: exit $rc"
"$T" mig plan 2>/dev/null; [ $? -eq 2 ] || fail "plan without a file"
"$T" mig frobnicate 2>/dev/null; [ $? -eq 2 ] || fail "unknown mig command"
"$T" mig plan /nonexistent.csv 2>"$W/err"; [ $? -eq 1 ] || fail "missing file: not_found is exit 1 everywhere (one exit map)"
echo "ok: tessera mig plan/compare/generate/simulate/run"
