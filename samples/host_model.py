"""The C++ host (samples/host, build/bin/host_sample) running a NumPy GELU MLP on its own buffers
from two threads: framejit installed in the embedded interpreter vs plain CPython + NumPy. Each
round runs both processes back to back; the sample checks every result against a C++ reference."""

import os
import re
import subprocess
import sys

from harness import InvalidMeasurement, Row, progress, speedup_row, timing_rows

NAME = "host_model"
ROUNDS = 5
CALLS = 100  # per thread and process
BINARY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "bin", "host_sample")
BACKENDS = {"NumPy (embedded CPython)": "none", "framejit": "jit"}


def one_run(backend: str) -> float:
    """Microseconds per call reported by one host_sample process."""
    r = subprocess.run([BINARY, "--backend", backend, "--calls", str(CALLS)], capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0 or "ok: " not in r.stdout:
        raise InvalidMeasurement(f"host_sample --backend {backend} failed:\n{r.stdout}{r.stderr}")
    m = re.search(r"([0-9.]+) us per call", r.stdout)
    return float(m.group(1)) * 1e3  # ns, as the other samples' timings


def run() -> list[Row]:
    if not os.path.exists(BINARY):
        progress(NAME, f"{BINARY} is not built: no rows")
        return [Row(NAME, "C++ host sample", float("nan"), "", note="n/a: build/bin/host_sample not built")]
    progress(NAME, f"{len(BACKENDS)} backends × {ROUNDS} processes × 2 threads × {CALLS} calls")
    samples: dict[str, list[float]] = {name: [] for name in BACKENDS}
    for _ in range(ROUNDS):
        for name, backend in BACKENDS.items():
            samples[name].append(one_run(backend))
    rows = timing_rows(NAME, samples, "NumPy (embedded CPython)", scale=1e3, unit="µs")
    rows.append(speedup_row(NAME, samples, "framejit", "NumPy (embedded CPython)"))
    return rows


if __name__ == "__main__":
    for row in run():
        print(row, file=sys.stderr)
