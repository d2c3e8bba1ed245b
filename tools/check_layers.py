#!/usr/bin/env python3
"""check_layers.py — DESIGN.md's dependency rules, checked: prints the include graph between
frontend/ folders and fails on a cycle, and fails when jit/ or runtime/ reach up a layer.

A folder is frontend/<dir> (ops/numpy and ops/tensor count as two). An edge A -> B means a file in A
includes a header of B. Dependencies point one way (frontend -> jit -> runtime; runtime and jit
know no Python), so the graph must be acyclic.
"""
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
INCLUDE = re.compile(r'#include "frontend/([^"]+)"')


def folder(rel: str) -> str:
    parts = rel.split("/")
    if parts[0] == "ops" and len(parts) > 2:
        return "ops/" + parts[1]
    return parts[0] if len(parts) > 1 else "(root)"


def main() -> int:
    edges = defaultdict(set)
    why = {}
    front = os.path.join(ROOT, "frontend")
    for dirpath, _, files in os.walk(front):
        for name in files:
            if not name.endswith((".h", ".cpp")):
                continue
            path = os.path.join(dirpath, name)
            src = folder(os.path.relpath(path, front))
            with open(path, encoding="utf-8") as f:
                for m in INCLUDE.finditer(f.read()):
                    dst = folder(m.group(1))
                    if dst != src:
                        edges[src].add(dst)
                        why.setdefault((src, dst), os.path.relpath(path, ROOT) + " -> " + m.group(1))
    for src in sorted(edges):
        print(f"{src:14} -> {' '.join(sorted(edges[src]))}")
    # Tarjan-free cycle search: DFS with colours, report each back edge's cycle.
    colour, stack, cycles = {}, [], []

    def visit(n):
        colour[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if colour.get(m) == 1:
                cycles.append(stack[stack.index(m):] + [m])
            elif m not in colour:
                visit(m)
        stack.pop()
        colour[n] = 2

    for n in sorted(edges):
        if n not in colour:
            visit(n)
    for c in cycles:
        print("cycle: " + " -> ".join(c))
        for a, b in zip(c, c[1:]):
            print(f"    {why[(a, b)]}")
    upward = []
    for layer, banned in (("jit", ('"frontend/', "<Python.h>")), ("runtime", ('"frontend/', '"jit/', "<Python.h>"))):
        for dirpath, _, files in os.walk(os.path.join(ROOT, layer)):
            for name in files:
                if not name.endswith((".h", ".cpp")):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as f:
                    for line in f:
                        if line.startswith("#include") and any(b in line for b in banned):
                            upward.append(f"{os.path.relpath(path, ROOT)}: {line.strip()}")
    for u in upward:
        print("upward include: " + u)
    return 1 if cycles or upward else 0


if __name__ == "__main__":
    sys.exit(main())
