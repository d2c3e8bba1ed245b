"""The installed C++ package: `cmake --install` gives a prefix from which samples/host (a C++
program that only uses find_package(framejit CONFIG) and framejit::host) builds and runs a NumPy
model on its own buffers from two threads; the installed framejit-run runs a script."""

import os
import shutil
import subprocess
import sys

import pytest

import framejit

BUILD = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(framejit.__file__))))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.skipif(
    shutil.which("cmake") is None or not os.path.exists(os.path.join(BUILD, "CMakeCache.txt")),
    reason="needs cmake and framejit's CMake build tree",
)


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    p = tmp_path_factory.mktemp("prefix")
    subprocess.run(["cmake", "--install", BUILD, "--prefix", str(p)], check=True, capture_output=True, text=True)
    return p


def test_sample_host_program_builds_from_the_installed_package_and_runs(prefix, tmp_path):
    build = tmp_path / "build"
    cfg = subprocess.run(
        ["cmake", "-S", os.path.join(REPO, "samples", "host"), "-B", str(build), f"-DCMAKE_PREFIX_PATH={prefix}",
         "-DCMAKE_BUILD_TYPE=Release"],
        capture_output=True, text=True)
    assert cfg.returncode == 0, cfg.stdout + cfg.stderr
    b = subprocess.run(["cmake", "--build", str(build)], capture_output=True, text=True)
    assert b.returncode == 0, b.stdout + b.stderr
    # Nothing from the build tree: the environment only has the installed prefix.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FRAMEJIT_PYTHONPATH")}
    r = subprocess.run([str(build / "host_sample")], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok: 2 threads x 50 calls of mlp_model.forward on host buffers" in r.stdout
    assert "backend jit:" in r.stdout


def test_installed_framejit_run_runs_a_script(prefix, tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import sys, framejit\nprint(sys.argv[1:], framejit.__file__.startswith(%r))\nraise SystemExit(4)\n"
                      % str(prefix))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FRAMEJIT_PYTHONPATH")}
    r = subprocess.run([str(prefix / "bin" / "framejit-run"), str(script), "x"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 4, r.stderr
    assert r.stdout.strip() == "['x'] True"
