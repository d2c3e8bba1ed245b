"""framejit.supported_ops() (issue 12, item 7): the registry in the user's terms, true to what is
captured, and the README's generated section in step with it."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import framejit

ROOT = Path(__file__).resolve().parents[2]


def test_sorted_unique_and_in_the_users_terms():
    ops = framejit.supported_ops()
    assert ops == sorted(set(ops))
    for name in ("numpy.tanh", "numpy.sum", "numpy.matmul", "ndarray.sum", "ndarray.T", "operator @"):
        assert name in ops
    # numpy.amax is captured, but ndarray has no amax method: the list says only what code can call.
    assert "numpy.amax" in ops and "ndarray.amax" not in ops
    assert not any(n.startswith("numpy.linalg") for n in ops)


@pytest.mark.parametrize("name", ["tanh", "exp", "sqrt", "negative", "floor", "isnan"])
def test_a_listed_ufunc_is_one_graph(name):
    assert "numpy." + name in framejit.supported_ops()
    fn = getattr(np, name)

    def f(x):
        return fn(x)

    e = framejit.explain(f)(np.linspace(0.5, 2.0, 8))
    assert e.graph_count == 1 and not e.breaks


@pytest.mark.parametrize("name", ["sum", "mean", "reshape", "transpose", "astype"])
def test_a_listed_method_is_captured(name):
    assert "ndarray." + name in framejit.supported_ops()
    args = {"reshape": (4, 2), "astype": (np.float32,)}.get(name, ())

    def f(x):
        return getattr(x, name)(*args) + 1

    x = np.arange(8.0)
    e = framejit.explain(f)(x)
    assert e.graph_count == 1 and not e.breaks


def test_readme_section_is_generated_from_the_registry():
    env = dict(os.environ)
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_supported_ops.py"), "--check"],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
