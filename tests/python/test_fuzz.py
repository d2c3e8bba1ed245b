"""A fixed budget of the differential fuzzer (tests/fuzz/run.py) for every `make test`.

Each backend runs a fixed seed and program count in a subprocess (a crash of generated code must
not take pytest down), with a time budget as a safety net on slow machines. A failure prints the
reduced program and the command that replays it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

RUN = Path(__file__).resolve().parents[1] / "fuzz" / "run.py"

# About 10 s (jit) and 5 s (eager) on one core of the CI machine.
BUDGETS = {"jit": 2500, "eager": 1500}


@pytest.mark.parametrize("backend", ["jit", "eager"])
def test_fuzz_fixed_seed(backend):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    cmd = [sys.executable, str(RUN), "--seed", "1", "--count", str(BUDGETS[backend]),
           "--backend", backend, "--time-budget", "40"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{out[-20000:]}"
    assert "0 failure(s)" in out, out[-5000:]
