"""`python -m framejit script.py [args]`: the script runs as __main__ with framejit installed,
with its own output, arguments, exit status and exceptions; FRAMEJIT_LOGS=breaks,recompiles adds
a summary on exit."""

import os
import subprocess
import sys
import textwrap

import pytest

import framejit

# The package under test, wherever the working directory is.
PACKAGE_PATH = os.path.dirname(os.path.dirname(os.path.abspath(framejit.__file__)))

SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np

    def step(x, a):
        return np.tanh(x * a + 1.0)

    if __name__ == "__main__":
        x = np.linspace(-1, 1, 1000, dtype=np.float32)
        total = sum(float(step(x, 0.5).sum()) for _ in range(20))
        print("args", sys.argv[1:], "total %.3f" % total)
        fj = sys.modules.get("framejit")
        print("captured", fj.stats()["captured"] if fj else None)
        if "--exit" in sys.argv:
            raise SystemExit(3)
        if "--raise" in sys.argv:
            raise KeyError("boom")
    """
)


def run(args, env_extra=None, cwd=None):
    env = dict(os.environ, **(env_extra or {}))
    env["PYTHONPATH"] = os.pathsep.join([PACKAGE_PATH, env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=120, cwd=cwd)


@pytest.fixture()
def script(tmp_path):
    p = tmp_path / "demo.py"
    p.write_text(SCRIPT)
    return p


def test_runs_the_script_as_main_with_its_arguments(script):
    plain = run([str(script), "a", "--b"])
    jit = run(["-m", "framejit", str(script), "a", "--b"])
    assert plain.returncode == jit.returncode == 0, jit.stderr
    assert plain.stdout.splitlines()[0] == jit.stdout.splitlines()[0] == "args ['a', '--b'] total 14705.479"
    assert plain.stdout.splitlines()[1] == "captured None"
    assert int(jit.stdout.splitlines()[1].split()[1]) >= 1  # step() was compiled


def test_exit_status_and_exceptions_are_the_scripts(script):
    assert run(["-m", "framejit", str(script), "--exit"]).returncode == 3
    r = run(["-m", "framejit", str(script), "--raise"])
    assert r.returncode == 1 and "KeyError: 'boom'" in r.stderr


def test_backend_option_and_module_form(script):
    r = run(["-m", "framejit", "--backend", "eager", "-m", "demo", "x"], cwd=script.parent)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "args ['x'] total 14705.479"


def test_mode_option(script):
    r = run(["-m", "framejit", "--mode", "reduce-overhead", str(script), "x"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "args ['x'] total 14705.479"
    r = run(["-m", "framejit", "--mode", "fast", str(script)])
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_summary_when_logs_ask_for_it(script):
    quiet = run(["-m", "framejit", str(script)])
    assert "[framejit] summary" not in quiet.stderr
    r = run(["-m", "framejit", str(script)], {"FRAMEJIT_LOGS": "breaks,recompiles"})
    assert r.returncode == 0
    assert "[framejit] summary\ngraph breaks: 0\nrecompiles: 0" in r.stderr


def test_usage_errors():
    r = run(["-m", "framejit"])
    assert r.returncode == 2 and "usage:" in r.stderr
