#!/usr/bin/env bash
# Installs the Debian packages framejit builds and tests with. Idempotent: prints nothing and
# touches nothing when every package is already installed (the common case on a dev machine).
set -euo pipefail

packages=(
  g++ cmake make dpkg-dev                 # toolchain; dpkg-dev gives `apt-get source` its unpacker
  libxbyak-dev pybind11-dev               # header-only: Xbyak (GEMM kernels), pybind11 (bindings)
  python3-dev python3-numpy python3-pytest python3-numexpr python3-numba  # target interpreter + baselines
  python3-torch                           # the torch frontend's tests (torch 1.13, CPU)
  libopenblas0-pthread                    # numpy's BLAS, the GEMM baseline
  googletest libgtest-dev                 # C++ tests
)

# `--bench`: also what `make bench` draws with (matplotlib for speedup.png). Not needed to build or
# test.
if [[ "${1:-}" == --bench ]]; then
  packages+=(python3-matplotlib)
fi

missing=()
for p in "${packages[@]}"; do
  # dpkg-query succeeds for removed-but-configured packages too, so check the status text.
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ "$status" == installed ]] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then exit 0; fi

sudo=()
if ((EUID != 0)); then
  command -v sudo >/dev/null || { echo "install_deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi

echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
