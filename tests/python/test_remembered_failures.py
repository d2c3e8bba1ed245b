"""A failed capture is not paid for again (Note [Remembered failures]): traces are counted through
framejit.stats(), never timed."""

import numpy as np

import framejit


def body(v):
    return v * 0.999 + 0.001


def run_loop(n, fn, val):
    for i in range(n):
        val = fn(val)
    return val


N = 30000  # iterations: well past the trace's instruction budget


def test_a_loop_that_runs_the_budget_out_twice_is_given_up():
    framejit.reset()
    f = framejit.compile(run_loop)
    x = np.ones(4)
    breaks = []
    for k in range(5):
        np.testing.assert_allclose(f(N + k, body, x), run_loop(N + k, body, x))
        breaks.append(framejit.stats()["graph_breaks"])
    # Two traces ran out of instructions (each new n is a new trace); none after that.
    assert breaks[1] == 2 and breaks[-1] == 2, breaks
    framejit.reset()  # forgets it
    f(N, body, x)
    assert framejit.stats()["graph_breaks"] == 1


def outer(x, n):
    y = np.tanh(x)
    return run_loop(n, body, y) * 2.0


def test_a_caller_breaks_at_the_given_up_loop_and_keeps_its_graph():
    framejit.reset()
    f = framejit.compile(outer)
    x = np.linspace(-1, 1, 4)
    stats = []
    for k in range(6):
        np.testing.assert_allclose(f(x, N + k), outer(x, N + k))
        stats.append(framejit.stats())
    # No trace ran out of budget after the loop was given up: the caller's later trace breaks at
    # the call (before n is specialized), so its partial graph serves every new n.
    assert stats[-1]["graph_breaks"] == stats[3]["graph_breaks"], [s["graph_breaks"] for s in stats]
    assert stats[-1]["cache_misses"] == stats[3]["cache_misses"], [s["cache_misses"] for s in stats]
    assert stats[-1]["cache_hits"] > stats[3]["cache_hits"]
    e = framejit.explain(outer)(x, N)
    assert any("ran the trace out of instructions before" in b.reason for b in e.breaks)


@framejit.disable
def opaque(row):
    return row


def rows_through_opaque(x):
    total = 0.0
    for row in x:  # the row count is specialized; at the break the iterator is live: nothing kept
        total = total + opaque(row).sum()
    return total


def test_the_same_failure_twice_gives_up():
    framejit.reset()
    f = framejit.compile(rows_through_opaque)
    counts = []
    for n in range(2, 8):
        x = np.arange(n * 3.0).reshape(n, 3)
        assert f(x) == rows_through_opaque(x)
        counts.append(framejit.stats()["graph_breaks"])
    assert counts[1] == 2 and counts[-1] == 2, counts


def unrolled(x, n):
    for _ in range(n):  # n is specialized: a new n is a new entry
        x = x + 1.0
    return x


def test_misses_past_the_recompile_limit_give_up():
    framejit.reset()
    f = framejit.compile(unrolled)
    x = np.zeros(3)
    limit = framejit.config.recompile_limit
    for n in range(1, limit + 40):
        np.testing.assert_allclose(f(x, n), n)
    s = framejit.stats()
    assert s["captured"] == limit
    # 16 misses in a row past the limit, then CPython without the hook's lookups.
    assert s["unsupported_frames"] == 16, s
    frames = s["frames"]
    f(x, 1)  # an entry that would hit: the code is given up on, CPython runs it
    assert framejit.stats()["frames"] == frames


def test_explain_records_no_failure():
    framejit.reset()
    x = np.arange(6.0).reshape(2, 3)
    for _ in range(3):
        framejit.explain(rows_through_opaque)(x)
    f = framejit.compile(rows_through_opaque)
    before = framejit.stats()["graph_breaks"]
    f(x)
    assert framejit.stats()["graph_breaks"] == before + 1  # traced: explain's runs were not remembered
