# Thin wrapper: `make demo` and `make test` do all set-up on a fresh Debian 12 machine.
# `make demo` builds only what the demo needs (library, backends, the kiln command); `make test`
# builds everything and runs the tests with sampled sweeps; `make test-long` runs the sweeps in
# full and the long tests. The checks CI runs beyond the tests (docs/development.md): test-long,
# sanitize, tsan, fuzz, format-check, layer-check.
BUILD ?= build
JOBS ?= $(shell nproc)
# The Python package is built against the venv tools/install-deps.sh makes (nanobind is on PyPI).
VENV ?= $(CURDIR)/.venv
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_PYTHON=ON -DPython_EXECUTABLE=$(VENV)/bin/python

# Sanitizer builds: clang-15 (its runtimes come with the clang-15 package), -O1 with line
# tables for readable reports, no benchmarks.
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
SAN_CMAKE_FLAGS = -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-15 -DCMAKE_CXX_COMPILER=clang++-15 \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DKILN_BUILD_BENCHMARKS=OFF -DKILN_WITH_MPI=OFF
# Sanitizer builds leave MPI out (their groups have one rank; tests/test_distributed_local.cpp
# runs, the mpiexec tests of tests/dist/ are not built): Open MPI's libraries are not
# instrumented, keep allocations at exit that LeakSanitizer would report as Kiln's leaks, and
# synchronise the progress thread's requests where TSan cannot see it.
# The ASan build has every backend, the opencl and vulkan ones with their drivers (PoCL,
# lavapipe) loaded uninstrumented (named ON so that a build tree configured without them gets
# them back). What the drivers keep allocated at exit is suppressed in tools/lsan.supp.
# use_sigaltstack=0: the LLVM inside PoCL replaces the alternate signal stack ASan gives a thread
# with a larger one of its own, from malloc (llvm::sys::RemoveFileOnSignal on the first thread
# that enumerates OpenCL devices), and ASan's thread teardown then fails to munmap it and
# aborts the process. intercept_tls_get_addr=0: LeakSanitizer's tracer read a stale dynamic-TLS
# range (a driver module's, "DTLS ... at 0x11d4") at exit and crashed (signal 11) after the
# transposed-matmul sweep ran on opencl; without tracking __tls_get_addr it has nothing stale
# to read. The device sweeps run their sample (KILN_TEST_DEVICE_SWEEP=sample, see
# tests/test_util.h); the cpu and reference sweeps and the misuse probe run in full.
ASAN_CMAKE_FLAGS = $(SAN_CMAKE_FLAGS) -DKILN_WITH_OPENCL=ON -DKILN_WITH_VULKAN=ON
ASAN_ENV = KILN_TEST_LONG=1 KILN_TEST_DEVICE_SWEEP=sample \
  ASAN_OPTIONS=detect_leaks=1:check_initialization_order=1:strict_init_order=1:use_sigaltstack=0:intercept_tls_get_addr=0 \
  LSAN_OPTIONS=suppressions=$(CURDIR)/tools/lsan.supp:print_suppressions=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# TSan leaves out the opencl and vulkan backends: their drivers are not instrumented, so TSan
# would see neither their threads' synchronisation nor that of their completion callbacks.
TSAN_CMAKE_FLAGS = $(SAN_CMAKE_FLAGS) -DKILN_WITH_OPENCL=OFF -DKILN_WITH_VULKAN=OFF
# Tests that run work on several threads or streams at once: std::thread, Meeting, ManyThreads,
# streams, TBB-parallel cpu launches and matmul tiles, concurrent JIT compiles, the disk cache's
# background writer; the no-hang matrix, pending_work and giving up waits (cpu and reference
# here). `make tsan TSAN_TESTS=.` runs every test.
TSAN_TESTS ?= ^(Async|Jobs|Streams|Executor|Placement|Profile|KernelCache|CompiledMemory|DiskCache|BufferPool|CpuMatmul|NoHang|PendingWork|GiveUp)\.|Thread|Concurren|Parallel|^Compile\.(StreamChange|ExplicitStreams|PlacementAround)|^CpuBackend\.(LargeLaunches|LargeReductions|FullReductionsSplit)|^NativeOps\.CpuScanSplits
TSAN_ENV = TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tools/tsan.supp
FUZZ_SECONDS ?= 60

.PHONY: deps deps-test configure configure-test build cli demo test test-long bench bench-report install clean sanitize \
  tsan fuzz format format-check layer-check slurm-check
PREFIX ?= $(BUILD)/install

# What the library, backends and kiln command need; deps-test adds the tests' and checks' tools.
deps:
	KILN_VENV=$(VENV) bash tools/install-deps.sh

deps-test:
	KILN_VENV=$(VENV) bash tools/install-deps.sh --test

# A first configure for the demo leaves tests and benchmarks out (their packages may be
# missing); `make test` turns them on in the same build folder, which rebuilds nothing of the
# library, and later configures keep what the folder has.
configure: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) $(if $(wildcard $(BUILD)/CMakeCache.txt),,\
	  -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_BENCHMARKS=OFF)

configure-test: deps-test
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) -DKILN_BUILD_TESTS=ON -DKILN_BUILD_BENCHMARKS=ON

build: configure-test
	cmake --build $(BUILD) -j $(JOBS)

# The library, its backends and the `kiln` command: what `make demo` and `make bench` need.
cli: configure
	cmake --build $(BUILD) -j $(JOBS) --target kiln_cli kiln_python

# The demo, then a few cases of the bench on every device (the full quick suite: make bench).
demo: cli
	$(BUILD)/tools/kiln demo
	PYTHONPATH=$(BUILD)/python $(VENV)/bin/python examples/demo.py
	mkdir -p $(BUILD)/bench
	$(BUILD)/tools/kiln bench --suite demo --json $(BUILD)/bench/demo.json \
	  --html $(BUILD)/bench/demo.html
	@echo "make bench runs the full quick suite; make test builds and runs the tests"

# The quick suite's report rendered by headless Chromium into $(BUILD)/bench/report.png, to look
# at (Chromium comes from `tools/install-deps.sh --report`; nothing else needs it).
bench-report: cli
	bash tools/install-deps.sh --report
	mkdir -p $(BUILD)/bench
	$(BUILD)/tools/kiln bench --suite quick --json $(BUILD)/bench/quick.json \
	  --html $(BUILD)/bench/report.html $(BENCH_FLAGS)
	python3 tools/bench/check_report.py $(BUILD)/bench/quick.json $(BUILD)/bench/report.html
	chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1100,3200 \
	  --screenshot=$(abspath $(BUILD))/bench/report.png file://$(abspath $(BUILD))/bench/report.html
	@echo "report: $(BUILD)/bench/report.html, screenshot: $(BUILD)/bench/report.png"

# Every test, with a random sample of each long sweep (new seeds each run, printed on failure);
# the ten slowest tests at the end.
test: build
	python3 tools/run-tests.py $(BUILD) --jobs $(JOBS)

# The long sweeps in full (500 random graphs per device, 600 random kernels, every misuse case)
# and the tests labelled long (the quick bench): what `make test` samples or leaves out.
test-long: build
	python3 tools/run-tests.py $(BUILD) --long --jobs $(JOBS)

# A single-node Slurm on this machine runs an artifact as a job array with an afterok step that
# checks every output (tools/slurm/check.sh; it says why and counts as skipped where Slurm cannot
# start, as without root). .ci/run runs it after the tests.
slurm-check: build
	KILN_VENV=$(VENV) bash tools/install-deps.sh --slurm || echo "slurm-check: could not install slurm-wlm and munge"
	bash tools/slurm/check.sh $(BUILD)

# The quick suite on every device, with its JSON and HTML report.
bench: cli
	mkdir -p $(BUILD)/bench
	$(BUILD)/tools/kiln bench --suite quick --json $(BUILD)/bench/quick.json \
	  --html $(BUILD)/bench/report.html $(BENCH_FLAGS)

# Headers, the library, the kiln command and the CMake package (find_package(Kiln)) under PREFIX.
install: cli
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)

# ASan + UBSan build of every test (and the fuzzer, whose seeds run as a test). The tests
# labelled long are left out: the quick bench, whose timings mean nothing under ASan and which
# took 4 minutes there on four devices; `make test-long` runs it.
ASAN_CONFIGURE = cmake -S . -B $(ASAN_BUILD) $(ASAN_CMAKE_FLAGS) -DKILN_SANITIZE=address,undefined \
  -DKILN_BUILD_FUZZERS=ON

sanitize: deps-test
	$(ASAN_CONFIGURE)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && $(ASAN_ENV) ctest --output-on-failure -j $(JOBS) --timeout 1800 -LE long

# The concurrency tests under TSan, against oneTBB built with TSan from Debian's source package
# (tools/build-tsan-tbb.sh; cached in ~/.cache/kiln-tsan-tbb).
tsan: deps-test
	tbb=$$(bash tools/build-tsan-tbb.sh) && \
	  cmake -S . -B $(TSAN_BUILD) $(TSAN_CMAKE_FLAGS) -DKILN_SANITIZE=thread \
	    -DTBB_DIR=$$tbb/lib/cmake/TBB
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	cd $(TSAN_BUILD) && $(TSAN_ENV) ctest --output-on-failure -j $(JOBS) --timeout 1800 \
	  -R '$(TSAN_TESTS)'

# libFuzzer on load_npy and on the AOT artifact reader, FUZZ_SECONDS each; npy inputs up to
# 12 kB (past the 10000-byte header bound). New inputs go to $(ASAN_BUILD)/fuzz-corpus*, a crash
# to $(ASAN_BUILD)/fuzz-artifacts (add it to the seeds with the fix).
fuzz: deps-test
	$(ASAN_CONFIGURE)
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target fuzz_npy fuzz_artifact
	mkdir -p $(ASAN_BUILD)/fuzz-corpus $(ASAN_BUILD)/fuzz-corpus-artifact $(ASAN_BUILD)/fuzz-artifacts
	$(ASAN_ENV) $(ASAN_BUILD)/tests/fuzz/fuzz_npy -max_total_time=$(FUZZ_SECONDS) \
	  -dict=tests/fuzz/npy.dict -artifact_prefix=$(ASAN_BUILD)/fuzz-artifacts/ \
	  -max_len=12288 -print_final_stats=1 $(ASAN_BUILD)/fuzz-corpus tests/fuzz/npy_seeds
	$(ASAN_ENV) $(ASAN_BUILD)/tests/fuzz/fuzz_artifact -max_total_time=$(FUZZ_SECONDS) \
	  -artifact_prefix=$(ASAN_BUILD)/fuzz-artifacts/ -max_len=16384 -print_final_stats=1 \
	  $(ASAN_BUILD)/fuzz-corpus-artifact tests/fuzz/artifact_seeds

CXX_SOURCES = git ls-files '*.cpp' '*.h'

format: deps-test
	$(CXX_SOURCES) | xargs clang-format -i

format-check: deps-test
	$(CXX_SOURCES) | xargs clang-format --dry-run -Werror

layer-check:
	python3 tools/check-layers.py --self-test
	python3 tools/check-layers.py
