#!/usr/bin/env bash
# Fails when a function that returns a status (tsr_status_t) is declared
# without TSR_MUST_USE: in a header (its declaration) or in a .c file (a
# file-static function's). A status holds an allocated message, so one that
# is dropped is both a lost error and a leak; with the attribute the
# compiler refuses the call that drops it (-Werror). Prints each offending
# line. Skips (77) outside a git checkout.
#   check.sh SOURCE_DIR
set -u
SRC=${1:?usage: check.sh SOURCE_DIR}
cd "$SRC" || exit 2
files=$(git ls-files '*.c' '*.h' 2>/dev/null) || { echo "skipped: not a git checkout"; exit 77; }
[ -n "$files" ] || { echo "skipped: no tracked C files"; exit 77; }
# declarations that begin a line: "tsr_status_t f(" in headers, "static
# [inline] tsr_status_t f(" anywhere; TSR_MUST_USE before either passes
bad=$( (grep -nE '^(static (inline )?)?tsr_status_t [A-Za-z_][A-Za-z_0-9]*\(' $(grep '\.h$' <<<"$files") /dev/null
  grep -nE '^static (inline )?tsr_status_t [A-Za-z_][A-Za-z_0-9]*\(' $(grep '\.c$' <<<"$files") /dev/null) | sort -u)
if [ -n "$bad" ]; then
  echo "$bad"
  echo "must_use: $(wc -l <<<"$bad") status-returning declaration(s) above lack TSR_MUST_USE"
  exit 1
fi
echo "must_use: every status-returning declaration in $(wc -w <<<"$files") files carries TSR_MUST_USE"
