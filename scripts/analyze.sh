#!/usr/bin/env bash
# The static analyser: clang-tidy's clang-analyzer-* checks (the checks are
# in .clang-tidy) over every C file of src/ and contrib/ that the build
# compiles, one clang-tidy process per file. Exits 1 when it finds anything,
# printing each finding with its path through the code.
#
#   scripts/analyze.sh BUILD_DIR [FILE...]
#
# BUILD_DIR must hold compile_commands.json (every build of ours writes one).
# With FILEs, only those are analysed.
#
# One process per file, not many files per process: clang-tidy 14 run over
# several files in one process carries a checker's state from one file into
# the next (it reported src/base/log.c's va_list as uninitialised when run
# after src/base/fs.c; alone, the file is clean).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/analyze.sh BUILD_DIR [FILE...]}
shift
db="$build/compile_commands.json"
[ -f "$db" ] || { echo "analyze: $db not found (configure the build first)" >&2; exit 2; }
tidy=$(command -v clang-tidy || command -v clang-tidy-14 || true)
[ -n "$tidy" ] || { echo "analyze: clang-tidy not found (scripts/deps.sh installs it)" >&2; exit 2; }

if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(python3 - "$db" "$PWD" <<'EOF'
import json, os, sys
db, root = sys.argv[1], sys.argv[2]
seen = set()
for e in json.load(open(db)):
    f = os.path.normpath(os.path.join(e["directory"], e["file"]))
    rel = os.path.relpath(f, root)
    if rel.endswith(".c") and rel.split(os.sep)[0] in ("src", "contrib") and rel not in seen:
        seen.add(rel)
        print(rel)
EOF
  )
fi
[ ${#files[@]} -gt 0 ] || { echo "analyze: no C files of src/ or contrib/ in $db" >&2; exit 2; }

out=$(mktemp)
trap 'rm -f "$out"' EXIT
printf '%s\n' "${files[@]}" |
  xargs -P "$(nproc 2>/dev/null || echo 2)" -n 1 "$tidy" -p "$build" --quiet >"$out" 2>/dev/null || true
findings=$(grep -c ': warning: ' "$out" || true)
if [ "$findings" -ne 0 ] || grep -q ': error: ' "$out"; then
  cat "$out"
  echo "analyze: $findings finding(s) in ${#files[@]} files" >&2
  exit 1
fi
echo "analyze: no findings in ${#files[@]} files"
