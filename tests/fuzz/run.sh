#!/usr/bin/env bash
# Builds one libFuzzer target with clang (-fsanitize=fuzzer,address,undefined)
# and runs it for a bounded time on its seed corpus. Registered with ctest as
# fuzz.<name> by the tests/unit/*/CMakeLists.txt that call it (label nosan);
# exit 77 = skipped (clang or libFuzzer missing), with the reason on one line.
#
#   run.sh TARGET OUT_DIR [SECONDS]   (default 20 s; FUZZ_SECONDS overrides)
#
# A target is a folder tests/fuzz/TARGET/ holding:
#   fuzz_*.c   the LLVMFuzzerTestOneInput (exactly one file)
#   SOURCES    what it links: one repository-relative path or glob per line
#              (src/base/*.c); blank lines and '#' comments are ignored
#   LIBS       optional: extra link flags (-linih), same comment rules
#   corpus/    seed inputs
# Adding a target touches no shared file but its ctest registration.
#
# Inputs that libFuzzer finds interesting are kept in OUT_DIR/corpus between
# runs (so give each target its own OUT_DIR); a crash leaves OUT_DIR/crash-*
# and fails the test.
set -euo pipefail
usage="usage: run.sh TARGET OUT_DIR [SECONDS]"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${1:?$usage}"
out="${2:?$usage}"
secs="${FUZZ_SECONDS:-${3:-20}}"
dir="$here/$target"

# The target's name is a folder name, never a path out of tests/fuzz.
if [[ ! "$target" =~ ^[a-z0-9_]+$ ]] || [ ! -f "$dir/SOURCES" ]; then
  echo "run.sh: unknown target '$target' (no tests/fuzz/$target/SOURCES)" >&2
  exit 2
fi
if [[ ! "$secs" =~ ^[0-9]+$ ]]; then
  echo "run.sh: SECONDS must be a whole number, not '$secs'" >&2
  exit 2
fi

# Prints the entries of a SOURCES or LIBS file, one a line, without comments
# or blank lines.
entries() { sed -e 's/#.*//' -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' -e '/^$/d' "$1"; }

shopt -s nullglob
harness=("$dir"/fuzz_*.c)
if [ ${#harness[@]} -ne 1 ]; then
  echo "run.sh: tests/fuzz/$target must hold exactly one fuzz_*.c (found ${#harness[@]})" >&2
  exit 2
fi
srcs=("${harness[0]}")
while IFS= read -r pattern; do
  # Expanded here, relative to the repository (a glob in sorted order).
  matched=("$root"/$pattern)
  if [ ${#matched[@]} -eq 0 ] || [ ! -f "${matched[0]}" ]; then
    echo "run.sh: tests/fuzz/$target/SOURCES: '$pattern' matches no file" >&2
    exit 2
  fi
  srcs+=("${matched[@]}")
done < <(entries "$dir/SOURCES")
shopt -u nullglob
libs=()
if [ -f "$dir/LIBS" ]; then
  read -r -a libs <<<"$(entries "$dir/LIBS" | tr '\n' ' ')"
fi

if ! command -v clang >/dev/null 2>&1; then
  echo "skipped: clang not installed (scripts/deps.sh installs it)"
  exit 77
fi
fuzzer_rt="$(clang -print-file-name=libclang_rt.fuzzer-x86_64.a)"
if [ ! -f "$fuzzer_rt" ]; then
  echo "skipped: libFuzzer runtime not found (install libclang-rt-14-dev)"
  exit 77
fi

mkdir -p "$out/corpus"
bin="$out/fuzz_$target"
# Rebuild when the binary is older than one of its sources, its folder's
# files, this script, or any header (cheaper to check every header than to
# track which ones a target includes).
rebuild=0
if [ ! -x "$bin" ] ||
   [ -n "$(find "${srcs[@]}" "$dir" "$here/run.sh" "$here/check.h" -newer "$bin" -print -quit)" ] ||
   [ -n "$(find "$root/include" "$root/src" -name '*.h' -newer "$bin" -print -quit)" ]; then
  rebuild=1
fi
if [ "$rebuild" = 1 ]; then
  clang -std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
    -Wno-missing-field-initializers \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -I "$root/include" -I "$root/src" "${srcs[@]}" "${libs[@]}" -pthread -o "$bin.tmp"
  mv -f "$bin.tmp" "$bin"
fi
cd "$out"
exec "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  "$out/corpus" "$dir/corpus"
