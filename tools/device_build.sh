#!/usr/bin/env bash
# Builds framejit with a machine's own Python (a venv: the GPU machine's 3.12 + NumPy 2) from a
# bundle made by tools/device_stage.sh, then runs the pytest suite. Nothing is fetched: what the
# machine lacks comes from the bundle's deps folder.
#
#   tools/device_build.sh [--deps DIR] [--build DIR] [--ctest] [--gpu] [--no-test] [-- PYTEST ARGS...]
#
#   --deps DIR   the bundle's deps (default: ../deps beside this checkout, as device_stage lays it out)
#   --build DIR  build tree (default: build-device in this checkout)
#   --ctest      also run the C++ suites (ctest) before pytest
#   --gpu        run the GPU suite (tests/gpu: ctest's gpu/ tests) before anything else; with
#                --no-test, only it
#   --no-test    build only
# PYTHON=... picks the interpreter (default: python3 on PATH, which on the GPU machine is the venv's).
# JOBS=... the build's parallelism (default: every core). FRAMEJIT_CMAKE_ARGS=... more -D options.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
deps=$root/../deps
build=$root/build-device
run_ctest=0 run_tests=1 run_gpu=0
while (($#)); do
  case $1 in
    --deps) deps=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --ctest) run_ctest=1; shift ;;
    --gpu) run_gpu=1; shift ;;
    --no-test) run_tests=0; shift ;;
    --) shift; break ;;
    *) echo "device_build: unknown option $1" >&2; exit 2 ;;
  esac
done
deps=$(cd "$deps" && pwd)
python=${PYTHON:-$(command -v python3)}
jobs=${JOBS:-$(nproc)}

echo "device_build: $("$python" -c 'import sys, numpy; print(sys.executable, sys.version.split()[0], "numpy", numpy.__version__)')"

# A build tree configured for another interpreter is thrown away rather than reconfigured.
if [[ -f $build/CMakeCache.txt ]] && ! grep -qx "Python3_EXECUTABLE:[A-Z]*=$python" "$build/CMakeCache.txt"; then
  rm -rf "$build"
fi
args=(-DCMAKE_BUILD_TYPE=Release "-DPython3_EXECUTABLE=$python" "-DFRAMEJIT_ASMJIT_PREFIX=$deps/asmjit-install")
# Xbyak is header-only; find_path looks in the bundle first.
[[ -d $deps/include/xbyak ]] && args+=("-DXBYAK_INCLUDE_DIR=$deps/include")
# pybind11 (headers only): the bundle's Debian copy if staged, else CMake finds the interpreter's.
[[ -f $deps/include/pybind11/pybind11.h ]] && args+=("-DFRAMEJIT_PYBIND11_INCLUDE_DIR=$deps/include")
# One interpreter: the one given (pyenv's extra interpreters are a dev-machine matter).
args+=("-DFRAMEJIT_PYTHONS=")
# asmjit's installed package declares policies back to CMake 2.8, which CMake 4 refuses to set.
cmake_major=$(cmake --version | sed -n 's/^cmake version \([0-9]*\).*/\1/p')
((cmake_major >= 4)) && args+=(-DCMAKE_POLICY_VERSION_MINIMUM=3.5)
# Ninja when there is one, for a fresh tree (a configured tree keeps its generator).
command -v ninja >/dev/null && [[ ! -f $build/CMakeCache.txt ]] && args+=(-G Ninja)
read -r -a extra <<<"${FRAMEJIT_CMAKE_ARGS:-}"
args+=("${extra[@]}")

cmake -S "$root" -B "$build" "${args[@]}"
cmake --build "$build" -j "$jobs"

status=0
if ((run_gpu)); then
  # Skipped tests say why (no driver, no device) in their output.
  ctest --test-dir "$build" --output-on-failure -R '^gpu/' || status=1
fi
((run_tests)) || exit $status
# Staged pure-Python packages (pytest) come after the build's own package.
pythonpath=$build/python
[[ -d $deps/python ]] && pythonpath+=":$deps/python"
if ((run_ctest)); then
  ctest --test-dir "$build" --output-on-failure -j "$jobs" || status=1
fi
cd "$root"
PYTHONPATH=$pythonpath "$python" -m pytest -q tests/python "$@" || status=1
exit $status
