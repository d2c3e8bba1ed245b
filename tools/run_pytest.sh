#!/usr/bin/env bash
# Runs the pytest suite on every interpreter the build made framejit for: BUILD/pythons.txt, written
# by CMake (the main interpreter first). Usage: tools/run_pytest.sh BUILD [pytest args...]
# Runs all of them even if one fails; fails if any failed; ends with one summary line each.
#
# pyenv's 3.12 and 3.13 have no pytest of their own: they borrow Debian's pure-Python pytest
# through BUILD/pytest-shim, a directory of links to just the packages pytest needs (the rest of
# Debian's dist-packages holds extension modules built for 3.11 only).
set -uo pipefail
build=$1
shift
dist=/usr/lib/python3/dist-packages
shim="$build/pytest-shim"

make_shim() {
  [[ -d "$shim" ]] && return 0
  mkdir -p "$shim.tmp"
  for n in _pytest pytest iniconfig packaging pluggy py py.py attr attrs; do
    [[ -e "$dist/$n" ]] && ln -s "$dist/$n" "$shim.tmp/$n"
  done
  mv "$shim.tmp" "$shim"
}

status=0
summary=()
while read -r py; do
  [[ -n "$py" ]] || continue
  version=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  path="$build/python"
  quiet=()
  if ! "$py" -c 'import pytest' 2>/dev/null; then
    make_shim
    path="$path:$shim"
    # Debian's pytest 7.2 predates 3.12 and warns about its own use of the ast module.
    quiet=(-W "ignore::DeprecationWarning:_pytest.assertion.rewrite")
  fi
  echo "==== pytest on Python $version ($py)"
  out=$(mktemp)
  PYTHONPATH="$path" "$py" -m pytest "${quiet[@]}" "$@" 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  ((rc == 0)) || status=1
  summary+=("Python $version: $(tail -n 1 "$out")")
  rm -f "$out"
done < "$build/pythons.txt"

printf '%s\n' "${summary[@]}"
exit $status
