#!/usr/bin/env bash
# Builds asmjit as a position-independent static library into build/third_party/asmjit-install.
#
# Why not Debian's libasmjit-dev: its libasmjit.a is built without -fPIC, so it cannot be linked
# into the _C Python extension (a shared object). Instead we build Debian's *source* package, so
# the code still comes from the distribution and is never copied into the repo.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
third_party="$root/build/third_party"
prefix="$third_party/asmjit-install"

# Done already? (lib or lib64 depending on GNUInstallDirs)
if compgen -G "$prefix/lib*/libasmjit.a" >/dev/null; then exit 0; fi

sudo=()
((EUID == 0)) || sudo=(sudo)

# `apt-get source` needs a deb-src entry. Machines usually ship only binary (`deb`) entries, so
# derive deb-src entries from them: same mirror, suites, components and keyring, so no host is
# hard-coded here. Only the main Debian archive (URI path ending in /debian) is needed.
have_deb_src() {
  grep -Eqs '^[[:space:]]*deb-src[[:space:]]|^Types:.*deb-src' \
    /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources
}
if ! have_deb_src; then
  tmp=$(mktemp)
  # deb822 (.sources): stanzas are separated by blank lines; copy each binary stanza for the
  # Debian archive with its Types line rewritten.
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -e "$f" ]] || continue
    awk 'BEGIN { RS = ""; ORS = "\n\n" }
         /(^|\n)Types:[^\n]*(^|[ \t])deb([ \t]|\n|$)/ && /(^|\n)URIs:[^\n]*\/debian\/?([ \t]|\n|$)/ {
           sub(/(^|\n)Types:[^\n]*/, "\nTypes: deb-src"); sub(/^\n/, ""); print }' "$f" >>"$tmp"
  done
  if [[ -s "$tmp" ]]; then
    "${sudo[@]}" install -m 644 "$tmp" /etc/apt/sources.list.d/framejit-deb-src.sources
  else
    # One-line format: "deb [options] URI suite components..." -> the same line as deb-src.
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
      [[ -e "$f" ]] || continue
      awk '$1 == "deb" { for (i = 2; i <= NF && $i ~ /^\[/; i++) while ($i !~ /\]$/) i++
                         if ($i ~ /\/debian\/?$/) { $1 = "deb-src"; print } }' "$f" >>"$tmp"
    done
    [[ -s "$tmp" ]] || { echo "build_asmjit: no Debian 'deb' entry to derive deb-src from" >&2; exit 1; }
    "${sudo[@]}" install -m 644 "$tmp" /etc/apt/sources.list.d/framejit-deb-src.list
  fi
  rm -f "$tmp"
  echo "build_asmjit: added deb-src entries; updating apt lists"
  "${sudo[@]}" apt-get update -qq
fi

echo "build_asmjit: fetching and building asmjit (PIC, static)"
src_parent="$third_party/src"
build_dir="$third_party/asmjit-build"
log="$third_party/asmjit-build.log"
rm -rf "$src_parent" "$build_dir"
mkdir -p "$src_parent"
: >"$log"
# Everything below is chatty (dpkg-source, asmjit's configure summary, compiler lines): keep it in
# a log and show the log only on failure.
trap 'echo "build_asmjit: failed; log follows" >&2; cat "$log" >&2' ERR

(cd "$src_parent" && apt-get source asmjit) >>"$log" 2>&1
src=$(find "$src_parent" -mindepth 1 -maxdepth 1 -type d -name 'asmjit*' | head -n 1)

# ASMJIT_NO_AARCH64 only exists in versions with the AArch64 backend; pass it only if known.
extra=()
if grep -q ASMJIT_NO_AARCH64 "$src/CMakeLists.txt"; then extra+=(-DASMJIT_NO_AARCH64=ON); fi

cmake -S "$src" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release \
  -DASMJIT_STATIC=ON -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DASMJIT_TEST=OFF \
  -DCMAKE_INSTALL_PREFIX="$prefix" "${extra[@]}" >>"$log" 2>&1
cmake --build "$build_dir" -j2 >>"$log" 2>&1
cmake --install "$build_dir" >>"$log" 2>&1
echo "build_asmjit: installed $(basename "$src") into ${prefix#"$root"/}"
