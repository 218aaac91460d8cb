# tessera: the two set-up commands are `make demo` and `make test`.
# Every target installs missing Debian build dependencies first (scripts/deps.sh,
# a no-op when they are present) and builds what it needs.

BUILD    ?= build/main
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all deps configure build demo test test-asan test-tsan analyze coverage bench install deb clean help format

all: build

help:
	@echo "make demo       build and run the tessera demo (private daemon, leases, expiry)"
	@echo "make test       build and run every test (ctest)"
	@echo "make test-asan  the tests under address+undefined sanitizers"
	@echo "make test-tsan  the tests under the thread sanitizer (plain programs and scripts;"
	@echo "                Criterion cannot start under it)"
	@echo "make analyze    the static analyser (clang-tidy's clang-analyzer checks, .clang-tidy)"
	@echo "                over src/ and contrib/; fails on any finding"
	@echo "make coverage   the tests on a gcov build; line and branch coverage of src/ per module"
	@echo "                (build/coverage/coverage.md)"
	@echo "make bench      build and run the benchmarks; their records are appended to"
	@echo "                TSR_BENCH_JSON (default $(BUILD)/bench/results.jsonl), this run's"
	@echo "                printed as tables at the end (bench/README.md)"
	@echo "make install    install under PREFIX (default /usr/local; DESTDIR honoured):"
	@echo "                docs/operations.md lists what goes where"
	@echo "make deb        the Debian package, in $(BUILD)/deb/ (installs under /usr)"
	@echo "make format     rewrite every tracked C file as .clang-format says (lint.format checks it)"
	@echo "make clean      remove build/"

deps:
	@scripts/deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/bin/tessera demo

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-asan: deps
	cmake --preset asan >/dev/null
	cmake --build build/asan -j $(JOBS)
	ctest --test-dir build/asan --output-on-failure -j $(JOBS) -LE nosan

# Criterion cannot start under TSan, so this run's coverage is the plain test
# programs and the integration scripts driving the TSan-built tesserad and
# tessera. halt_on_error: a daemon that reports a race dies, so a script that
# never checks the daemon's exit status (it ends in a kill) still fails.
# Kernels with more ASLR entropy than TSan's memory layout allows (it stops
# with "unexpected memory mapping") get the tests run under setarch -R.
TSAN_RUN = TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 $$TSAN_OPTIONS" \
	$$([ "$$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 28)" -le 28 ] || echo setarch $$(uname -m) -R)

test-tsan: deps
	cmake --preset tsan >/dev/null
	cmake --build build/tsan -j $(JOBS)
	$(TSAN_RUN) ctest --test-dir build/tsan --output-on-failure -j $(JOBS) -LE nosan

# The static analyser over the configured build's compile_commands.json
# (scripts/analyze.sh); the build itself is not needed, but its generated
# sources are, so it builds first.
analyze: build
	scripts/analyze.sh $(BUILD)

# The tests (not the fuzz runs, which build their own programs with clang,
# nor the GPU tests, which skip here) on an instrumented build, then what
# they ran of src/ and contrib/, per module. Exits with ctest's status after
# printing the figures, so a failing test is not hidden by the report.
# The tests run programs as other users: the build's folders are opened to
# all and the counts written world-writable (umask 000), or those processes
# could not add their counts and would print gcov's complaints on stderr,
# which the tests read.
coverage: deps
	cmake --preset coverage >/dev/null
	cmake --build build/coverage -j $(JOBS)
	find build/coverage -name '*.gcda' -delete
	find build/coverage -type d -exec chmod a+rwx {} +
	umask 000; ctest --test-dir build/coverage -j $(JOBS) -LE 'fuzz|gpu' --output-on-failure; rc=$$?; \
	  gcovr -r . build/coverage --filter 'src/' --filter 'contrib/' --gcov-ignore-parse-errors \
	    --json-summary build/coverage/coverage.json --print-summary && \
	  python3 scripts/coverage_table.py build/coverage/coverage.json | tee build/coverage/coverage.md; \
	  exit $$rc

# Every benchmark appends its records to TSR_BENCH_JSON (kept across runs);
# the lines this run added are printed as tables at the end.
TSR_BENCH_JSON ?= $(BUILD)/bench/results.jsonl

bench: build
	@set -e; export TSR_BENCH_JSON="$(abspath $(TSR_BENCH_JSON))"; \
	  before=$$(cat "$$TSR_BENCH_JSON" 2>/dev/null | wc -l); \
	  for b in $(BUILD)/bench/bench_*; do echo "== $$b"; "$$b"; done; \
	  echo "== records: $$TSR_BENCH_JSON"; \
	  tail -n +$$((before + 1)) "$$TSR_BENCH_JSON" >"$(BUILD)/bench/last-run.jsonl"; \
	  python3 scripts/bench_table.py "$(BUILD)/bench/last-run.jsonl"

PREFIX ?= /usr/local

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

deb: build
	cd $(BUILD) && cpack -G DEB -B $(CURDIR)/$(BUILD)/deb
	@ls $(BUILD)/deb/*.deb

format: deps
	git ls-files '*.c' '*.h' | xargs clang-format -i --style=file

clean:
	rm -rf build
