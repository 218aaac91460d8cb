#!/usr/bin/env bash
# Builds the libFuzzer target for the JSON scanner (base/json) with clang
# (-fsanitize=fuzzer,address,undefined) and runs it for a bounded time on the
# seed corpus in corpus/. Registered with ctest as fuzz.json (see
# tests/unit/base/CMakeLists.txt); exit 77 = skipped (clang or libFuzzer
# missing), with the reason on one line.
#
#   run.sh OUT_DIR [SECONDS]      (default 20 s; FUZZ_SECONDS overrides)
#
# Inputs that libFuzzer finds interesting are kept in OUT_DIR/corpus between
# runs; a crash leaves OUT_DIR/crash-* and fails the test.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="${1:?usage: run.sh OUT_DIR [SECONDS]}"
secs="${FUZZ_SECONDS:-${2:-20}}"

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
bin="$out/fuzz_json"
srcs=("$here/fuzz_json.c" "$root/src/base/json.c")
# Rebuild when a source is newer than the binary.
rebuild=0
[ -x "$bin" ] || rebuild=1
for s in "${srcs[@]}" "$root/src/base/json.h"; do
  [ "$s" -nt "$bin" ] && rebuild=1
done
if [ "$rebuild" = 1 ]; then
  clang -std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -I "$root/include" -I "$root/src" "${srcs[@]}" -pthread -o "$bin"
fi
cd "$out"
exec "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  "$out/corpus" "$here/corpus"
