#!/bin/sh
# Clones NPBench (github.com/spcl/npbench) into build/npbench for samples/npbench.py, at the
# commit its figures were measured on. Needs a network; samples/npbench.py reports n/a without it.
set -eu
dest=${1:-build/npbench}
commit=f2d7f27
if [ -d "$dest/bench_info" ]; then echo "NPBench already in $dest"; exit 0; fi
git clone --quiet https://github.com/spcl/npbench "$dest"
git -C "$dest" checkout --quiet "$commit"
echo "NPBench $commit in $dest"
