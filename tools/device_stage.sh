#!/usr/bin/env bash
# Stages a self-contained bundle for building framejit on a machine with no package registry
# (the GPU machine): DEST/src is this checkout's source tree, DEST/deps the dependencies the
# target lacks, taken from this machine's Debian packages and asmjit build. tools/device_build.sh
# builds from such a bundle: copy DEST there, then run DEST/src/tools/device_build.sh --deps DEST/deps.
#
#   tools/device_stage.sh DEST [--with-pybind11] [--with-pytest]
#
# Always staged: asmjit (the PIC build of tools/build_asmjit.sh, which also builds the target's
# code: it is a static library of x86-64 code, fine for any x86-64 Linux with a newer glibc) and
# Xbyak's headers. --with-pybind11: Debian's pybind11 headers, for a Python
# without the pybind11 wheel. --with-pytest: Debian's pure-Python pytest and its dependencies,
# for a Python without pytest. Symbolic links are resolved (copies travel where links do not).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:?usage: tools/device_stage.sh DEST [--with-pybind11] [--with-pytest]}
shift
with_pybind11=0 with_pytest=0
for a in "$@"; do
  case $a in
    --with-pybind11) with_pybind11=1 ;;
    --with-pytest) with_pytest=1 ;;
    *) echo "device_stage: unknown option $a" >&2; exit 2 ;;
  esac
done
# asmjit: $FRAMEJIT_ASMJIT_PREFIX, else what build/ was configured with, else build_asmjit.sh's place.
asmjit=${FRAMEJIT_ASMJIT_PREFIX:-$(sed -n 's/^FRAMEJIT_ASMJIT_PREFIX:PATH=//p' "$root/build/CMakeCache.txt" 2>/dev/null)}
asmjit=${asmjit:-$root/build/third_party/asmjit-install}
compgen -G "$asmjit/lib*/libasmjit.a" >/dev/null ||
  { echo "device_stage: no asmjit in $asmjit (run tools/build_asmjit.sh, or set FRAMEJIT_ASMJIT_PREFIX)" >&2; exit 1; }
[[ -f /usr/include/xbyak/xbyak.h ]] || { echo "device_stage: Xbyak headers missing (libxbyak-dev)" >&2; exit 1; }

rm -rf "$dest/src" "$dest/deps"
mkdir -p "$dest/src" "$dest/deps/include"
dest=$(cd "$dest" && pwd)

# Tracked files plus new ones not yet committed; nothing git ignores (build trees, caches).
# (A tracked file deleted in the work tree is skipped.)
cd "$root"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  if [[ -e $f ]]; then cp --parents -L -- "$f" "$dest/src/"; fi
done

cp -rL "$asmjit" "$dest/deps/asmjit-install"
cp -rL /usr/include/xbyak "$dest/deps/include/xbyak"

if ((with_pybind11)); then
  cp -rL /usr/include/pybind11 "$dest/deps/include/pybind11"  # framejit uses its headers only
fi

if ((with_pytest)); then
  mkdir -p "$dest/deps/python"
  dist=/usr/lib/python3/dist-packages
  for p in _pytest pytest iniconfig packaging pluggy py py.py attr attrs; do
    [[ -e $dist/$p ]] && cp -rL "$dist/$p" "$dest/deps/python/"
  done
  find "$dest/deps/python" -name __pycache__ -prune -exec rm -rf {} +
fi

echo "device_stage: $(du -sh "$dest" | cut -f1) in $dest"
