#!/usr/bin/env bash
# Builds one libFuzzer target with clang (-fsanitize=fuzzer,address,undefined)
# and runs it for a bounded time on its seed corpus (tests/fuzz/TARGET/corpus).
# Registered with ctest as fuzz.frontier_wire and fuzz.json (see
# tests/unit/frontier/CMakeLists.txt and tests/unit/base/CMakeLists.txt);
# exit 77 = skipped (clang or libFuzzer missing), with the reason on one line.
#
#   run.sh TARGET OUT_DIR [SECONDS]   TARGET: frontier | json
#                                     (default 20 s; FUZZ_SECONDS overrides)
#
# Inputs that libFuzzer finds interesting are kept in OUT_DIR/corpus between
# runs; a crash leaves OUT_DIR/crash-* and fails the test.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${1:?usage: run.sh frontier|json OUT_DIR [SECONDS]}"
out="${2:?usage: run.sh frontier|json OUT_DIR [SECONDS]}"
secs="${FUZZ_SECONDS:-${3:-20}}"

case "$target" in
  frontier) # the frontier wire decoder
    srcs=("$here/frontier/fuzz_wire.c" "$root"/src/frontier/*.c "$root/src/base/status.c")
    headers=("$root/include/tessera/frontier.h" "$root/src/frontier/internal.h") ;;
  json) # the protocol's JSON scanner and writer
    srcs=("$here/json/fuzz_json.c" "$root/src/base/json.c")
    headers=("$root/src/base/json.h") ;;
  *) echo "run.sh: unknown target '$target' (frontier or json)" >&2; exit 2 ;;
esac

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
# Rebuild when a source is newer than the binary.
rebuild=0
[ -x "$bin" ] || rebuild=1
for s in "${srcs[@]}" "${headers[@]}"; do
  [ "$s" -nt "$bin" ] && rebuild=1
done
if [ "$rebuild" = 1 ]; then
  clang -std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -I "$root/include" -I "$root/src" "${srcs[@]}" -pthread -o "$bin"
fi
cd "$out"
exec "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  "$out/corpus" "$here/$target/corpus"
