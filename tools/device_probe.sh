#!/usr/bin/env bash
# Prints what a machine offers for building framejit: interpreter, libpython, NumPy, PyTorch,
# pytest, compilers, CMake, and the C++ dependencies (pybind11, GoogleTest, Xbyak). Cheap (a few
# seconds); run it first on an unfamiliar machine (tools/device_build.sh needs its answers).
set -u

py=${PYTHON:-$(command -v python3)}
echo "== python: $py"
"$py" - <<'EOF'
import importlib, sys, sysconfig
print(sys.version.replace("\n", " "))
print("prefix", sys.prefix, "base_prefix", sys.base_prefix)
for k in ("LIBDIR", "LDLIBRARY", "Py_ENABLE_SHARED", "INCLUDEPY", "MULTIARCH"):
    print(k, sysconfig.get_config_var(k))
for name in ("numpy", "torch", "cupy", "pytest", "pybind11", "numexpr", "numba"):
    try:
        m = importlib.import_module(name)
        print(name, getattr(m, "__version__", "?"), getattr(m, "__file__", "?"))
    except Exception as e:  # noqa: BLE001
        print(name, "MISSING", type(e).__name__, e)
try:
    import pybind11
    print("pybind11 cmake dir", pybind11.get_cmake_dir(), "include", pybind11.get_include())
except Exception as e:  # noqa: BLE001
    print("pybind11 cmake dir MISSING", e)
EOF
echo "== tools"
for t in cmake ninja g++ gcc c++ make nvcc; do
  printf '%s: ' "$t"; command -v "$t" >/dev/null && "$t" --version 2>&1 | head -n 1 || echo MISSING
done
echo "== C++ dependencies"
for p in /usr/include/pybind11 /usr/include/gtest /usr/include/xbyak /usr/local/include/gtest; do
  [[ -e $p ]] && echo "present $p" || echo "absent  $p"
done
find / -xdev \( -name 'GTestConfig.cmake' -o -name 'libgtest*.a' -o -name 'xbyak.h' \) 2>/dev/null | head
echo "== system"
grep PRETTY_NAME /etc/os-release; uname -m; nproc; grep -o -m1 'avx512[a-z]*' /proc/cpuinfo | head -n 1
ldd --version 2>&1 | head -n 1
command -v nvidia-smi >/dev/null && nvidia-smi -L
