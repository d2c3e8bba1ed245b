"""_externs.py — library calls that extern steps make where the library's own function does not fit
a step: one that returns a tuple (a step has one array result, so each item is its own step;
frontend/ops/numpy/externs.cpp), and torch calls that take a dtype (a graph argument names a dtype
by its name; torch wants its own object; frontend/ops/torch)."""


def histogram_counts(a, *args, **kwargs):
    """numpy.histogram(...)[0]: the counts (or densities), without the edges."""
    import numpy

    return numpy.histogram(a, *args, **kwargs)[0]


def torch_full(size, fill_value, dtype_name):
    """torch.full(size, fill_value, dtype=torch.<dtype_name>): torch.zeros/ones/empty/full in a
    graph (a graph argument names a dtype by its name; torch wants its own object)."""
    import torch

    return torch.full(tuple(size), fill_value, dtype=getattr(torch, dtype_name))


def torch_full_like(x, fill_value, dtype_name):
    """torch.full_like(x, fill_value, dtype=torch.<dtype_name>): zeros_like & co. in a graph."""
    import torch

    return torch.full_like(x, fill_value, dtype=getattr(torch, dtype_name))


def torch_arange(start, end, step, dtype_name):
    """torch.arange(start, end, step, dtype=torch.<dtype_name>)."""
    import torch

    return torch.arange(start, end, step, dtype=getattr(torch, dtype_name))


def quiet_call(fn, *args, **kwargs):
    """fn(*args, **kwargs) with warnings silenced: the trace-time probes of torch's result types run
    on stand-ins, whose warnings (a variance of one element) say nothing about the user's data."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)
