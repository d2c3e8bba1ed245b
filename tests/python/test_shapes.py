"""Symbolic sizes: size-dependent Python logic, slicing, reshapes and errors, across many sizes
through ONE compiled function (each call compared with CPython, errors included)."""

import math

import numpy as np
import pytest

import framejit
from conftest import BACKENDS, check_sequence


def A(*shape):
    return np.arange(float(np.prod(shape))).reshape(shape) - 3.5


def sizes1(*ns):
    return [(A(n),) for n in ns]


def sizes2(*pairs):
    return [(A(a, b),) for a, b in pairs]


CASES = {}


def case(calls):
    def deco(fn):
        CASES[fn.__name__] = (fn, calls)
        return fn

    return deco


@case([(A(3, 2), A(3, 2)), (A(4, 2), A(4, 2)), (A(3, 2), A(4, 2)), (A(5, 2), A(2, 2)), (A(6, 2), A(6, 2))])
def equal_dims_branch(x, y):
    if x.shape[0] == y.shape[0]:
        return x + y
    return x[:1] + y[:1]


@case(sizes1(4, 6, 5, 7, 8, 2, 3))
def parity_branch(x):
    n = x.shape[0]
    if n % 2 == 0:
        return x[: n // 2]
    return x[n // 2 :]


@case(sizes2((3, 4), (5, 2), (4, 4), (2, 6), (6, 6)))
def min_max_of_shape(x):
    m = min(x.shape)
    return x[:m, :m], max(x.shape[0], 4), x[: max(x.shape[0] - 3, 0)]


@case(sizes2((3, 4), (5, 2), (4, 4), (2, 6)))
def creation_from_sizes(x):
    return (
        np.zeros((x.shape[0], 2)) + x[:, :1],
        np.arange(x.shape[0]) * 2,
        np.ones(x.shape[0] * 2),
        np.full((x.shape[1],), x.shape[0]),
    )


@case(sizes1(2, 3, 4, 2))
def split_into_n(x):
    return np.split(x, x.shape[0])


@case([(A(n, 2),) for n in (2, 3, 4, 7, 2)])
def int_arithmetic_on_sizes(x):
    return (
        x[x.shape[0] - 1],
        x[-x.shape[0]],
        math.ceil(x.shape[0] / 3),
        int(x.shape[0] * 0.5),
        x.size // x.shape[-1],
        divmod(x.shape[0], 3),
        x.shape[0] // 2,
        x.shape[0] % 3,
        -x.shape[0],
        x.shape[::-1],
        1.0 / x.shape[0],
        x.size / 3,
    )


@case(sizes2((3, 4), (5, 4), (3, 5), (3, 4)))
def strings_and_tuples_of_sizes(x):
    return f"n={x.shape[0]}", str(x.shape), x.shape == (3, 4), x.shape[1:] == (4,), len(x.shape), {x.shape[0]: 1}


@case([(A(n, 2),) for n in (2, 3, 5, 3)])
def range_with_step_over_size(x):
    out = []
    for i in range(0, x.shape[0], 2):
        out.append(x[i])
    return out


@case([(A(n, 3),) for n in (4, 6, 2, 8)])
def reshape_with_size_expressions(x):
    return x.reshape(x.shape[0] // 2, -1), x.reshape(2, x.shape[0] // 2, -1)


@case(sizes2((3, 4), (5, 2), (4, 4), (2, 6)))
def reshape_products(x):
    n = x.shape[0]
    w = x.shape[0] * x.shape[1]
    return x.reshape(w), x.reshape(n, -1).T.reshape(-1, n), np.broadcast_to(x[:1], (n, x.shape[1]))


@case(sizes1(3, 5, 2, 9))
def concat_and_stack_of_slices(x):
    n = x.shape[0]
    return np.concatenate([x, x[: n - 1]]), np.stack([x[1:], x[:-1]]), x[1:] - x[:-1]


@case([(A(a, b), A(b, c)) for a, b, c in ((2, 3, 4), (5, 3, 2), (2, 2, 2), (3, 4, 5))])
def matmul_and_broadcast_sizes(x, y):
    return x @ y, (x[:, :, None] * y[None]).sum(axis=1)


@case([(A(2, n),) for n in (4, 6, 8, 2)])
def halves_of_last_dim(x):
    h = x.shape[-1] // 2
    return x[..., :h], x[..., h:], np.split(x, 2, axis=-1)


@case([(A(a, b, c),) for a, b, c in ((2, 3, 4), (3, 5, 4), (2, 2, 6), (4, 3, 8))])
def attention_head_reshapes(x):
    b, t, d = x.shape
    return x.reshape(b * t, d), x.reshape(b, t, 2, d // 2).transpose(0, 2, 1, 3).reshape(b, 2, -1)


@case(sizes1(4, 5, 6, 7, 2, 3, 10))
def negative_and_stepped_slices(x):
    return x[x.shape[0] - 2 :: -2], x[-3:-1], x[1:-1:2], x[: -x.shape[0] // 2], x[::-1], x[-2:], x[::3]


@case(sizes1(12, 4, 20, 6, 2, 3, 1, 0))
def out_of_range_slices(x):
    return x[10:], x[:100], x[-100:], x[5:2], x[:4], x[2:-2]


@case([(A(4, 3), 1), (A(4, 3), 2), (A(5, 3), -1), (A(4, 3), 0)])
def int_argument_index(x, i):
    return x[i], x[i:], x[:, i]


@case([(A(6), 1, 3), (A(6), 2, 5), (A(6), -3, None), (A(6), None, -1), (A(8), 1, 3), (A(6), 4, 1)])
def slice_bounds_as_arguments(x, lo, hi):
    return x[lo:hi]


@case([(A(4, 3), 0), (A(4, 3), 1), (A(4, 3), -1), (A(2, 5), 0)])
def axis_as_argument(x, axis):
    return x.sum(axis=axis), x.argmax(axis=axis), np.concatenate([x, x], axis=axis), np.expand_dims(x, axis)


@case([(A(3), (2, 3)), (A(3), (3, 2)), (A(3), 4), (A(3), (2, 3))])
def shape_as_argument(x, shape):
    return np.zeros(shape) + x.sum(), np.ones(shape, dtype=np.int8).shape


# ---- errors must be raised exactly as in CPython, also at sizes seen after compiling

@case(sizes1(6, 8, 7, 2, 5))
def split_uneven_raises(x):
    a, b = np.split(x, 2)
    return a - b


@case(sizes1(6, 8, 7, 2))
def reshape_uneven_raises(x):
    return x.reshape(2, -1)


@case([(A(3, 4), A(3, 4)), (A(3, 4), A(5, 4)), (A(5, 4), A(5, 4)), (A(5, 4), A(1, 4)), (A(2, 4), A(3, 1))])
def broadcast_mismatch_raises(x, y):
    return x + y


@case([(A(3, 4), A(4, 2)), (A(3, 4), A(5, 2)), (A(3, 5), A(5, 2))])
def matmul_mismatch_raises(x, y):
    return x @ y


@case([(A(3, 4), A(2, 4)), (A(3, 4), A(2, 5)), (A(3, 4), A(2, 4))])
def concatenate_mismatch_raises(x, y):
    return np.concatenate([x, y], axis=0)


@case([(A(3, 4), A(3, 4)), (A(3, 4), A(2, 4)), (A(2, 4), A(2, 4))])
def stack_mismatch_raises(x, y):
    return np.stack([x, y])


@case(sizes2((3, 4), (0, 4), (2, 4), (3, 0)))
def empty_reduction_raises(x):
    return x.max(axis=0)


@case(sizes2((3, 4), (0, 4), (2, 0), (3, 4)))
def empty_sum_and_mean(x):
    return x.sum(), x.sum(axis=0), x.mean(axis=0) if x.shape[0] else None


@case([(A(n),) for n in (6, 7, 2, 4, 3)])
def index_out_of_range_raises(x):
    return x[3]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(CASES))
def test_sizes_sequence(name, backend):
    fn, calls = CASES[name]
    with np.errstate(all="ignore"):
        check_sequence(fn, calls, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(CASES))
def test_sizes_sequence_dynamic_false(name, backend):
    fn, calls = CASES[name]
    framejit.config.recompile_limit = 64  # every size compiles; restored by the fixture
    with np.errstate(all="ignore"):
        check_sequence(fn, calls, backend=backend, dynamic=False)


# ---- the no-recompile contract for common size-derived slicing

SIZE_DERIVED = {
    "diff": lambda x: x[1:] - x[:-1],
    "last_two": lambda x: x[-2:],
    "every_other": lambda x: x[::2],
    "all_but_last_by_size": lambda x: x[: x.shape[0] - 1],
    "first_half": lambda x: x[: x.shape[0] // 2],
    "split_batch_in_two": lambda x: np.split(x, 2)[0],
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(SIZE_DERIVED))
def test_new_batch_size_with_size_derived_slices_does_not_recompile(name, backend):
    fn = SIZE_DERIVED[name]
    check_sequence(fn, [(A(n, 3),) for n in (6, 8, 10, 12)], backend=backend, fullgraph=True)
    s = framejit.stats()
    assert s["captured"] == 1 and s["recompiles"] == 0, s


# ---- slice bounds computed from sizes whose sign or clamping changes between sizes

MANY_SIZES = (8, 6, 12, 5, 4, 3, 2, 7, 9, 10, 11, 13)

SIGN_CHANGING = {
    "stop_minus_5": lambda x: x[: x.shape[0] - 5],
    "start_minus_4": lambda x: x[x.shape[0] - 4 :],
    "start_minus_third": lambda x: x[-(x.shape[0] // 3) :],
    "stop_minus_third": lambda x: x[: -(x.shape[0] // 3)],
    "step_from_size": lambda x: x[:: max(x.shape[0] // 3, 1)],
    "reverse_from": lambda x: x[x.shape[0] - 6 :: -1],
    "reverse_to": lambda x: x[: x.shape[0] - 6 : -1],
    "index_half": lambda x: x[x.shape[0] // 2],
    "index_minus_half": lambda x: x[-(x.shape[0] // 2)],
    "index_minus_5": lambda x: x[x.shape[0] - 5],
    "two_dims": lambda x: x[: x.shape[0] // 2, x.shape[1] - 2 :],
    "split_in_3_when_divisible": lambda x: np.split(x, 3) if x.shape[0] % 3 == 0 else x,
    "split_at_size_indices": lambda x: np.split(x, [x.shape[0] // 2, x.shape[0] - 1]),
    "split_at_constants": lambda x: np.split(x, [2, 5]),
    "even_prefix_reshape": lambda x: x[: x.shape[0] // 2 * 2].reshape(-1, 2),
    "rotate_halves": lambda x: np.concatenate([x[x.shape[0] // 2 :], x[: x.shape[0] // 2]]),
    "rotate_by_3": lambda x: np.concatenate([x[-3:], x[:-3]]),
    "sliding_windows": lambda x: np.stack([x[i : x.shape[0] - 2 + i] for i in range(3)]),
    "constant_bounds": lambda x: (x[7:], x[:7], x[-7:], x[:-7], x[3:-3]),
    "pad_by_remainder": lambda x: np.concatenate([np.zeros(x.shape[0] % 3), x[:, 0]]),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(SIGN_CHANGING))
def test_size_derived_slices_across_many_sizes(name, backend):
    framejit.config.recompile_limit = 64
    check_sequence(SIGN_CHANGING[name], [(A(n, 3),) for n in MANY_SIZES], backend=backend)
