# Thin wrapper over CMake: fetch missing Debian packages, build asmjit (PIC), build, test.
# The real build description is CMakeLists.txt.

# Debian's interpreter is the main target: it has numpy (the pyenv python3 on PATH does not).
# CMake also builds framejit for pyenv's 3.12 and 3.13 when they are there (FRAMEJIT_PYTHONS).
PYTHON := /usr/bin/python3
BUILD  := build
# `make test-asan`: the same build with AddressSanitizer + UndefinedBehaviorSanitizer.
ASAN_BUILD := build-asan

# cmake --build runs make again; without this every level prints "Entering directory".
MAKEFLAGS += --no-print-directory

.PHONY: all build test build-asan test-asan bench clean

all: build

build:
	@tools/install_deps.sh
	@tools/build_asmjit.sh
	@# Configure once; afterwards the generated build re-runs CMake itself when needed.
	@test -f $(BUILD)/Makefile || \
	  cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=$(PYTHON)
	cmake --build $(BUILD) -j2

# Runs both suites even if the first fails, fails if either failed; pytest goes last (once per
# interpreter built, see tools/run_pytest.sh) so its summary lines are the final output.
test: build
	@status=0; \
	ctest --test-dir $(BUILD) --output-on-failure || status=1; \
	tools/run_pytest.sh $(BUILD) -q tests/python || status=1; \
	exit $$status

# ---- sanitizers ----------------------------------------------------------------------------------
# -DFRAMEJIT_SANITIZE=ON instruments framejit's own C++ (see CMakeLists.txt); asmjit is the same
# build/third_party install as above. The generated kernels are not instrumented: ASan checks the
# C++ that sets them up and calls them, not the accesses the kernels make.
build-asan:
	@tools/install_deps.sh
	@tools/build_asmjit.sh
	@test -f $(ASAN_BUILD)/Makefile || \
	  cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Release -DFRAMEJIT_SANITIZE=ON -DPython3_EXECUTABLE=$(PYTHON)
	cmake --build $(ASAN_BUILD) -j2

# Any report fails the run: ASan stops at its first error, UB is built with no recovery, and
# abort_on_error lets pytest's faulthandler name the test that was running. detect_leaks=0:
# CPython never frees its interned strings, static types and module state, so every process
# that hosts an interpreter "leaks" at exit.
SANITIZER_ENV = \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1 \
  UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1
# python3 is not built with ASan, so its runtime must be loaded first (LD_PRELOAD), before the
# sanitized _C.so pulls it in. libstdc++ too: ASan looks up the real __cxa_throw when it starts,
# and python3 does not link libstdc++, so without it the first C++ throw aborts in ASan's CHECK.
ASAN_PRELOAD = $(shell g++ -print-file-name=libasan.so) $(shell g++ -print-file-name=libstdc++.so)

# --capture=sys: pytest captures Python-level output only, so a sanitizer report (written to fd 2
# by the runtime just before the process dies) reaches the terminal instead of a lost temp file.
# Subprocesses (test_cli, test_host_package, ...) inherit the environment and run sanitized too.
test-asan: build-asan
	@status=0; \
	$(SANITIZER_ENV) ctest --test-dir $(ASAN_BUILD) --output-on-failure || status=1; \
	$(SANITIZER_ENV) LD_PRELOAD="$(ASAN_PRELOAD)" PYTHONPATH=$(ASAN_BUILD)/python \
	  $(PYTHON) -m pytest -q --capture=sys tests/python || status=1; \
	exit $$status

bench: build
	@tools/install_deps.sh --bench
	PYTHONPATH=$(BUILD)/python $(PYTHON) samples/bench.py

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
