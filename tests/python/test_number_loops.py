"""Loops over Python numbers alone, compiled as loops (Note [Element loops], Note [While loops] in
frontend/trace/element_loops.cpp), on every Python framejit supports, NumPy or not: the loop
compiler reads each version's own bytecode (3.11's conditional back jumps, 3.12's copied
`return` tails), so these run where NumPy is missing too."""

import pytest

import framejit


def compiled(fn, *args):
    want = fn(*args)
    framejit.reset()
    got = framejit.compile(fn)(*args)
    s = framejit.stats()
    assert got == want and type(got) is type(want), (got, want)
    assert s["loops"] == 1 and s["graph_breaks"] == 0, s


def collatz(n):
    steps = 0
    while n != 1:
        if n % 2:
            n = 3 * n + 1
        else:
            n //= 2
        steps += 1
    return steps


def search(limit):
    i = 0
    s = 0.0
    while not i >= limit:
        if i > 50:
            break  # 3.12: a copied `return s, i`
        s += i * 0.5
        i += 1
    else:
        s = -s
    return s, i


def short_branching(n):
    s = 0
    for i in range(6):  # a constant range, unrolled unless its body branches
        if (i * n) % 4 == 1:
            s += i
    return s


@pytest.mark.parametrize("n", [1, 27, 97])
def test_collatz_while(n):
    compiled(collatz, n)


@pytest.mark.parametrize("limit", [0, 10, 100])
def test_while_with_break_and_else(limit):
    compiled(search, limit)


@pytest.mark.parametrize("n", [1, 3])
def test_short_loop_that_branches(n):
    compiled(short_branching, n)


def test_division_by_zero_in_a_while_loop():
    def f(n, d):
        s = 0
        while n > 0:
            s += n % d
            n -= 1
        return s

    with pytest.raises(ZeroDivisionError) as want:
        f(5, 0)
    framejit.reset()
    with pytest.raises(ZeroDivisionError) as got:
        framejit.compile(f)(5, 0)
    assert str(got.value) == str(want.value)
