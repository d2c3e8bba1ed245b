# Thin wrapper over CMake: fetch missing Debian packages, build asmjit (PIC), build, test.
# The real build description is CMakeLists.txt.

# Debian's interpreter is the target: it has numpy (the pyenv python3 on PATH does not).
PYTHON := /usr/bin/python3
BUILD  := build

# cmake --build runs make again; without this every level prints "Entering directory".
MAKEFLAGS += --no-print-directory

.PHONY: all build test bench clean

all: build

build:
	@tools/install_deps.sh
	@tools/build_asmjit.sh
	@# Configure once; afterwards the generated build re-runs CMake itself when needed.
	@test -f $(BUILD)/Makefile || \
	  cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=$(PYTHON)
	cmake --build $(BUILD) -j2

# Runs both suites even if the first fails, fails if either failed; pytest goes last so its
# summary line is the final output.
test: build
	@status=0; \
	ctest --test-dir $(BUILD) --output-on-failure || status=1; \
	PYTHONPATH=$(BUILD)/python $(PYTHON) -m pytest -q tests/python || status=1; \
	exit $$status

bench: build
	@tools/install_deps.sh --bench
	PYTHONPATH=$(BUILD)/python $(PYTHON) samples/bench.py

clean:
	rm -rf $(BUILD)
