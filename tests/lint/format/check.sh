#!/usr/bin/env bash
# Fails when any tracked C source or header is not as clang-format (with the
# tree's .clang-format) would write it, naming the files and the first lines
# that differ; `make format` rewrites them. Skips (77) without clang-format
# or outside a git checkout (a release tarball has no list of tracked files).
#   check.sh SOURCE_DIR
set -u
SRC=${1:?usage: check.sh SOURCE_DIR}
command -v clang-format >/dev/null || { echo "skipped: clang-format not installed (scripts/deps.sh installs it)"; exit 77; }
cd "$SRC" || exit 2
files=$(git ls-files '*.c' '*.h' 2>/dev/null) || { echo "skipped: not a git checkout"; exit 77; }
[ -n "$files" ] || { echo "skipped: no tracked C files"; exit 77; }
bad=0
for f in $files; do
  if ! out=$(clang-format --style=file "$f" | diff -u "$f" - 2>&1); then
    echo "not formatted: $f"
    sed -n '3,12p' <<<"$out"
    bad=$((bad + 1))
  fi
done
echo "format: $(wc -w <<<"$files") files, $bad not formatted"
[ "$bad" -eq 0 ]
