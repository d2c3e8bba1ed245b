"""Slowdown of a call-heavy pure-Python workload (no arrays) while framejit.install() is active."""

import framejit
from harness import Contender, Row, at_most, check_same, interleave, progress, timing_rows

NAME = "install_overhead"
CALLS = 1  # workload runs per timed batch (one run is a few ms)
ROUNDS = 60
WARMUP = 3  # untimed batches per contender: frames are traced (and given up on) on first sight
TARGET_RATIO = 1.2


# The workload lives in this file on purpose: install() skips the standard library and
# site-packages, so only user code like this shows what install() costs.


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Vec:
    """A tiny 2-D vector whose methods are small and called often."""

    def __init__(self, x, y):
        self.x = x
        self.y = y

    def add(self, other):
        return Vec(self.x + other.x, self.y + other.y)

    def scale(self, k):
        return Vec(self.x * k, self.y * k)

    def dot(self, other):
        return self.x * other.x + self.y * other.y


def method_calls(n=4000):
    """n iterations of three method calls (two of which construct a Vec): 5 frames each."""
    acc = Vec(0, 0)
    step = Vec(1, 2)
    total = 0
    for i in range(n):
        acc = acc.add(step.scale(i % 3))
        total += acc.dot(step)
    return total


def fib20():
    return fib(20)


def workload():
    """Recursive fib(20) (21891 calls) plus 4000 rounds of small method calls (20000 frames)."""
    return fib20() + method_calls()


def run() -> list[Row]:
    """Time each workload plain vs under install() (installed only around its own batches)."""
    rows = []
    for label, fn, target in [
        ("fib(20) + method calls", workload, TARGET_RATIO),
        ("fib(20) only", fib20, None),
        ("method calls only", method_calls, None),
    ]:
        want = fn()
        framejit.install()
        try:
            got_cold, got_warm = fn(), fn()
        finally:
            framejit.uninstall()
        check_same(f"{NAME} {label} (first run installed)", got_cold, want)
        check_same(f"{NAME} {label} (second run installed)", got_warm, want)

        plain = f"{label}: plain"
        installed = f"{label}: framejit.install()"
        contenders = [
            Contender(plain, fn),
            Contender(installed, fn, setup=framejit.install, teardown=framejit.uninstall),
            # The floor for any PEP 523 evaluator: CPython 3.11 stops inlining Python-to-Python
            # calls as soon as one is set, whatever it does.
            Contender(
                f"{label}: do-nothing PEP 523 evaluator",
                fn,
                setup=lambda: framejit._C._bare_evaluator(True),
                teardown=lambda: framejit._C._bare_evaluator(False),
            ),
        ]
        progress(NAME, f"{label}: {len(contenders)} contenders × {ROUNDS} rounds × {CALLS} run(s)")
        samples = interleave(contenders, calls=CALLS, rounds=ROUNDS, warmup=WARMUP)
        case_rows = timing_rows(NAME, samples, plain, scale=1e6, unit="ms")
        if target is not None:
            case_rows[1].target, case_rows[1].met = at_most(case_rows[1].ratio, target, "×")
        rows += case_rows
    return rows
