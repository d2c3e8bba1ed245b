"""Advanced and boolean indexing (Note [Advanced indexing]): index arrays, sequences, ranges and
masks in every position, read and written, and nonzero/where/argwhere/flatnonzero/take/
take_along_axis. Every case runs eagerly and compiled (cold call and cache hit, on both backends)
and compares results, dtypes, shapes and the arguments afterwards."""

import numpy as np
import pytest

import framejit
from conftest import BACKENDS, check, check_sequence, randn

X3 = randn(4, 5, 6, seed=1)
X2 = randn(6, 5, seed=2)
X1 = randn(9, seed=3)
I = np.array([2, 0, -1, 2])
J = np.array([[1, 0], [4, 3]])
M1 = X1 > 0
M2 = X2 > 0


# ----- reading -----------------------------------------------------------------------------------

READS = {
    "array": (lambda x, i: x[i] * 1.0, (X3, I)),
    "array_int32": (lambda x, i: x[i] + 1.0, (X3, I.astype(np.int32))),
    "array_uint8": (lambda x, i: x[i] + 1.0, (X3, np.array([3, 1], dtype=np.uint8))),
    "array_2d": (lambda x, j: x[j] - 1.0, (X2, J)),
    "slice_then_array": (lambda x, i: x[:, i], (X3, np.array([4, 1]))),
    "array_then_slice": (lambda x, i: x[i, 1:3], (X3, I)),
    "two_arrays_adjacent": (lambda x, i, j: x[:, i, j], (X3, np.array([0, 4]), np.array([5, 1]))),
    "two_arrays_separated": (lambda x, i, j: x[i, :, j], (X3, np.array([0, 3]), np.array([5, 1]))),
    "int_and_array_separated": (lambda x, j: x[0, :, j], (X3, np.array([5, 1, 2]))),
    "int_and_array_adjacent": (lambda x, j: x[:, 1, j], (X3, np.array([5, 1, 2]))),
    "broadcast_arrays": (lambda x, i, j: x[i[:, None], j], (X2, np.array([0, 5, 2]), np.array([1, 4]))),
    "none_separates": (lambda x, i: x[0, None, i], (X2, np.array([3, 4]))),
    "ellipsis_array": (lambda x, i: x[..., i], (X3, np.array([5, 0]))),
    "list": (lambda x: x[[3, 1, 1]] * 2.0, (X3,)),
    "nested_list": (lambda x: x[[[0, 1], [2, 3]]], (X2,)),
    "list_in_tuple": (lambda x: x[1:, [0, 2]], (X2,)),
    "tuple_in_tuple": (lambda x: x[(0, 2), 1], (X2,)),
    "range": (lambda p, y: p[range(3), y], (randn(3, 4), np.array([0, 3, 1]))),
    "list_of_run_time_ints": (lambda x, a, b: x[[a, b]], (X2, 1, 4)),
    "negative_indices": (lambda x, i: x[i], (X2, np.array([-1, -6]))),
    "empty_index": (lambda x, i: x[i] + 1.0, (X2, np.array([], dtype=np.int64))),
    "zero_d_index": (lambda x, i: x[i] * 1.0, (X2, np.array(3))),
    "zero_d_index_all": (lambda x, i: x[2, i], (X2, np.array(3))),
    "numpy_int_scalar": (lambda x, idx: x[idx[1]] + 0.0, (X2, np.array([0, 2]))),
    "numpy_int_scalar_element": (lambda x, idx: x[idx[0], idx[1]], (X2, np.array([5, 2]))),
    "mask_1d": (lambda x, m: x[m] * 2.0, (X1, M1)),
    "mask_2d": (lambda x, m: x[m] + 1.0, (X2, M2)),
    "mask_of_self": (lambda x: x[x > 0].sum(), (X2,)),
    "mask_rows": (lambda x, m: x[m, 1:], (X2, X2[:, 0] > 0)),
    "mask_cols": (lambda x, m: x[:, m], (X2, np.array([True, False, True, True, False]))),
    "mask_empty": (lambda x: x[x > 100.0].sum(), (X2,)),
    "mask_all": (lambda x: x[x > -100.0] * 1.0, (X2,)),
    "mask_list": (lambda x: x[[True, False, True, False, False, True]], (X2,)),
    "mask_and_array": (lambda x, m, j: x[m, j], (X2, np.array([True, False, True, False, False, True]), np.array([1]))),
    "same_mask_twice": (lambda x, y, m: x[m] * y[m] + x[m], (X1, randn(9, seed=5), M1)),
    "len_of_mask": (lambda x, m: x[m] * len(x[m]), (X1, M1)),
    "mask_mean": (lambda x, m: x[m].mean(), (X1, M1)),
    "mask_then_array": (lambda x, m, i: x[m][i], (X1, M1, np.array([0, -1]))),
    "mask_then_full_slice": (lambda x, m: x[m][::-1] * 2.0, (X1, M1)),
    "float32": (lambda x, i: x[i] * 2.0, (X2.astype(np.float32), I)),
    "int_values": (lambda x, i: x[i] + 1, (np.arange(20).reshape(4, 5), np.array([3, 0]))),
    "bool_values": (lambda x, i: x[i], (X2 > 0, np.array([3, 0]))),
    "embedding": (lambda wte, ids: wte[ids] + 0.5, (randn(50, 8), np.array([[3, 7, 7], [0, 49, 1]]))),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(READS))
def test_reads(name, backend):
    fn, args = READS[name]
    check(fn, *args, backend=backend, fullgraph=True)


FUNCTIONS = {
    "nonzero_1d": (lambda x: np.nonzero(x > 0), (X1,)),
    "nonzero_2d": (lambda x: np.nonzero(x > 0), (X2,)),
    "nonzero_method": (lambda x: (x > 0).nonzero(), (X3,)),
    "nonzero_used": (lambda x: x[np.nonzero(x > 0)] * 2.0, (X2,)),
    "where_one_arg": (lambda x: np.where(x > 0), (X2,)),
    "where_three_args": (lambda x: np.where(x > 0, x, 0.0), (X2,)),
    "argwhere": (lambda x: np.argwhere(x > 0), (X3,)),
    "flatnonzero": (lambda x: np.flatnonzero(x > 0) + 1, (X2,)),
    "nonzero_then_mask": (lambda x, m: (np.flatnonzero(m), x[m]), (X1, M1)),
    "take": (lambda x, i: np.take(x, i), (X2, np.array([0, 29, -1]))),
    "take_axis": (lambda x, i: np.take(x, i, axis=1), (X3, np.array([[0, 4], [2, 2]]))),
    "take_scalar": (lambda x: np.take(x, 7), (X2,)),
    "take_method": (lambda x, i: x.take(i, axis=0), (X2, np.array([1, 1]))),
    "take_along_axis": (lambda x, i: np.take_along_axis(x, i, axis=1), (X2, np.array([[4, 0]] * 6))),
    "take_along_axis_idx": (lambda x, i: np.take_along_axis(x, i, axis=0), (X2, np.array([[5, 0, 1, 2, 3]]))),
    "take_along_axis_none": (lambda x, i: np.take_along_axis(x, i, axis=None), (X2, np.array([3, 29]))),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_functions(name, backend):
    fn, args = FUNCTIONS[name]
    check(fn, *args, backend=backend, fullgraph=True)


def mask_scale(x, lo):
    y = x[x > lo]
    return y * 2.0 + 1.0, y.sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_new_mask_counts_do_not_recompile(backend):
    """The count of a mask is an unbacked size: every density runs the one compiled graph."""
    x = randn(1000, seed=7)
    compiled = check_sequence(mask_scale, [(x, lo) for lo in (0.0, 1.0, -1.0, 100.0, -100.0)], backend=backend)
    assert framejit.stats()["captured"] == 1
    assert framejit.stats()["recompiles"] == 0
    # A new length of x as well: still the same graph.
    check_sequence(mask_scale, [(randn(37, seed=8), 0.5)], backend=backend)
    assert framejit.stats()["recompiles"] == 0
    del compiled


def data_dependent_branch(x):
    y = x[x > 0]
    if y.shape[0] > 3:
        return y * 2.0
    return y


def mask_against_other(x, z):
    return x[x > 0] + z


def mask_then_slice(x):
    return x[x > 0][1:] * 2.0


def mask_max(x):
    return x[x > 0].max()


def test_decisions_on_a_mask_count_break_with_the_reason():
    x = randn(10, seed=9)
    e = framejit.explain(data_dependent_branch)(x)
    assert any("known only at run time" in r for r in e.break_reasons), e.break_reasons
    e = framejit.explain(mask_against_other)(np.abs(x) + 0.1, randn(10, seed=10))
    assert any("known only at run time" in r for r in e.break_reasons), e.break_reasons
    # Nothing it computes changes.
    e = framejit.explain(mask_then_slice)(x)
    assert any("known only at run time" in r for r in e.break_reasons), e.break_reasons
    e = framejit.explain(mask_max)(x)
    assert any("known only at run time" in r for r in e.break_reasons), e.break_reasons
    # Nothing it computes changes.
    check(data_dependent_branch, x, fullgraph=False)
    check(mask_then_slice, x, fullgraph=False)
    check(mask_max, x, fullgraph=False)
    check_sequence(mask_against_other, [(x, randn(10, seed=10)), (x, randn(1, seed=10))])


def unbacked_graph_text(x, m):
    return x[m] * 2.0


def test_graph_shows_the_unbacked_symbol():
    e = framejit.explain(unbacked_graph_text)(X1, M1)
    text = e.graphs[0]
    assert "(unbacked)" in text, text
    assert "f64[s1]" in text or "f64[s" in text, text


def oob(x, i):
    return x[i] * 2.0


def oob_list(x):
    return x[[0, 7]]


def mask_mismatch(x, m):
    return x[m]


def float_index(x, i):
    return x[i]


@pytest.mark.parametrize("backend", BACKENDS)
def test_errors_are_numpys(backend):
    check_sequence(oob, [(X2, np.array([0, 6])), (X2, np.array([1, 2])), (X2, np.array([-7]))], backend=backend)
    check_sequence(oob_list, [(X2,)], backend=backend)
    check_sequence(mask_mismatch, [(X2, np.array([True, False])), (X1, M1)], backend=backend)
    check_sequence(float_index, [(X2, np.array([1.0]))], backend=backend)


# ----- writing -----------------------------------------------------------------------------------


def w_mask(a, m, v):
    a[m] = v
    return a


def w_self_mask(a):
    a[a > 0] = 0
    return a.sum()


def w_index(a, i, v):
    a[i] = v
    return a * 1.0


def w_iadd_repeated(a, i):
    a[i] += 1.0
    return a


def w_mask_values(a, m):
    a[m] = a[m] * 10.0
    return a


def w_rows(a, i):
    a[i, 1:] = -1.0


def w_made_array(x, m):
    y = x * 2.0
    y[m] = 0.0
    y[[0, 1]] += 5.0
    return y


def w_view(a, m):
    row = a[1]
    row[m] = 3.0
    return a


def w_through_view_alias(a, i):
    v = a[:, 1:]
    a[i] = 9.0
    return v * 1.0


def w_scalar_view(a, idx):
    r = a[idx[0]]
    a[idx[0], 0] = 5.0
    return r + 0.0


def w_mask_2d(a, m):
    a[m] = -a[m]
    return a


def w_list(a):
    a[[0, 2], 1] = 7.0
    a[range(2), [3, 4]] = 8.0
    return a


WRITES = {
    "mask_scalar": (w_mask, (X1.copy(), M1, 0.5)),
    "mask_values": (w_mask, (X1.copy(), M1, np.arange(M1.sum()) * 1.0)),
    "mask_empty": (w_mask, (X1.copy(), np.zeros(9, dtype=bool), 1.0)),
    "mask_values_empty": (w_mask, (X1.copy(), np.zeros(9, dtype=bool), np.zeros(0))),
    "self_mask": (w_self_mask, (X2.copy(),)),
    "index": (w_index, (X2.copy(), np.array([1, -1]), 4.0)),
    "index_rows": (w_index, (X2.copy(), np.array([1, 3]), randn(5, seed=3))),
    "iadd_repeated": (w_iadd_repeated, (X1.copy(), np.array([1, 1, 2, 1]))),
    "mask_values_from_self": (w_mask_values, (X1.copy(), M1)),
    "rows": (w_rows, (X2.copy(), np.array([0, 4]))),
    "made_array": (w_made_array, (X1, M1)),
    "view": (w_view, (X2.copy(), np.array([True, False, True, True, False]))),
    "view_alias": (w_through_view_alias, (X2.copy(), np.array([0, 2]))),
    "scalar_int_view": (w_scalar_view, (X2.copy(), np.array([2, 0]))),
    "mask_2d": (w_mask_2d, (X2.copy(), M2)),
    "lists": (w_list, (X2.copy(),)),
    "int_array": (w_mask, (np.arange(10), np.arange(10) % 3 == 0, 7)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(WRITES))
def test_writes(name, backend):
    fn, args = WRITES[name]
    check(fn, *args, backend=backend, fullgraph=True)


def w_counts(a, lo):
    a[a > lo] = lo
    return a.sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_with_new_mask_densities(backend):
    x = randn(200, seed=11)
    check_sequence(w_counts, [(x, lo) for lo in (0.0, 2.0, -3.0, 10.0)], backend=backend)
    assert framejit.stats()["captured"] == 1
    assert framejit.stats()["recompiles"] == 0


def test_write_of_mismatched_values_raises_numpys_error():
    check_sequence(w_mask, [(X1.copy(), M1, np.ones(2)), (X1.copy(), M1, np.ones(M1.sum()))])


def w_oob(a, i):
    a[i] = 1.0
    return a


def test_write_out_of_bounds_raises_and_leaves_the_input():
    check_sequence(w_oob, [(X1.copy(), np.array([0, 9])), (X1.copy(), np.array([0, 8]))])


def test_supported_ops_lists_indexing():
    ops = framejit.supported_ops()
    for name in ("numpy.nonzero", "numpy.take", "numpy.take_along_axis", "numpy.argwhere", "numpy.flatnonzero",
                 "ndarray.nonzero", "ndarray.take", "operator x[index array or mask]"):
        assert name in ops, name


def histogram_means(data, radius, npt):
    res = np.zeros(npt)
    rmax = 1.0
    for i in range(npt):
        m = np.logical_and(rmax * i / npt <= radius, radius < rmax * (i + 1) / npt)
        res[i] = data[m].sum()
    return res


@pytest.mark.parametrize("backend", BACKENDS)
def test_many_masks_in_one_graph_hit_the_cache(backend):
    """azimint's shape: one unbacked size per iteration; none widens the guards' symbol table."""
    # The jit backend declines graphs made mostly of library calls (Note [Extern-bound graphs]).
    npt = 300 if backend == "eager" else 12
    r = np.random.default_rng(3).random(500)
    check(histogram_means, randn(500, seed=4), r, npt, backend=backend, fullgraph=True)
    # New densities (a new radius) and a new length: the same graph.
    check_sequence(histogram_means, [(randn(80, seed=5), np.random.default_rng(6).random(80) ** 3, npt)],
                   backend=backend)
    assert framejit.stats()["recompiles"] == 0
