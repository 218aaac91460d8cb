#!/usr/bin/env bash
# Fails when any tracked C source or header is not as clang-format (with the
# tree's .clang-format) would write it; clang-format names each file and
# line. `make format` rewrites them. Skips (77) without clang-format or
# outside a git checkout (a release tarball has no list of tracked files).
#   check.sh SOURCE_DIR
set -u
SRC=${1:?usage: check.sh SOURCE_DIR}
command -v clang-format >/dev/null || { echo "skipped: clang-format not installed (scripts/deps.sh installs it)"; exit 77; }
cd "$SRC" || exit 2
files=$(git ls-files '*.c' '*.h' 2>/dev/null) || { echo "skipped: not a git checkout"; exit 77; }
[ -n "$files" ] || { echo "skipped: no tracked C files"; exit 77; }
if xargs clang-format --dry-run --Werror --style=file <<<"$files"; then
  echo "format: $(wc -w <<<"$files") files, all formatted"
else
  echo "format: files above are not formatted (make format rewrites them)"
  exit 1
fi
