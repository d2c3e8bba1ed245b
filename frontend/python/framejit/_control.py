"""Higher-order control-flow operators (issue 15): cond, while_loop, fori_loop, scan, map and
associative_scan, after torch.cond / torch._higher_order_ops and jax.lax.

Called outside compiled code they run as the plain Python they stand for, on NumPy arrays, torch
tensors, framejit.Tensors or Python numbers, and check what the compiled forms will require: the
carried values of a loop keep their structure, type, dtype and shape from one iteration to the
next (a clear TypeError naming the value otherwise). Inside a compiled function, cond, while_loop,
fori_loop, scan and map are captured: their bodies are traced into graphs of a Cond, WhileLoop or
Scan node, and the program runs the branch its predicate picks, or loops on the host over the
bodies' compiled programs, so a new predicate, trip count or length does not recompile (Note
[Tracing bodies] in frontend/trace/control_flow.cpp). associative_scan with an elementwise
combine_fn is captured as a parallel scan: log2(n) runs of the body over all slices at once (Note
[Parallel scans]). A body that cannot be captured (a side effect, values that change dtype or
shape, Python logic on a number a loop carries) sends that statement to CPython with the reason.
"""

import sys as _sys

from ._tensor import Tensor, tensor

__all__ = ["cond", "while_loop", "fori_loop", "scan", "map", "associative_scan"]


def _is_array(x):
    if isinstance(x, Tensor):
        return True
    np = _sys.modules.get("numpy")
    if np is not None and isinstance(x, np.ndarray):
        return True
    torch = _sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _describe(x):
    """What a loop may not change about a value: its type, and an array's dtype and shape."""
    if _is_array(x):
        return (type(x).__name__, str(x.dtype), tuple(x.shape))
    return (type(x).__name__,)


def _text(sig):
    return sig[0] if len(sig) == 1 else f"{sig[0]} of {sig[1]} {sig[2]}"


def _as_tuple(values, who, what):
    if not isinstance(values, (tuple, list)):
        raise TypeError(f"framejit.{who}: {what} must be a tuple or list, got {type(values).__name__}")
    return tuple(values)


def _check_same(who, before, after, what):
    """`after` (a tuple) must match `before` (a tuple) value by value."""
    if len(after) != len(before):
        raise TypeError(f"framejit.{who}: {what} returned {len(after)} values for {len(before)} carried values")
    for i, (b, a) in enumerate(zip(before, after)):
        sb, sa = _describe(b), _describe(a)
        if sb != sa:
            raise TypeError(f"framejit.{who}: carried value {i} changed from {_text(sb)} to {_text(sa)}")


def _length(xs, dim, who):
    if not _is_array(xs):
        raise TypeError(f"framejit.{who}: xs must be an array, got {type(xs).__name__}")
    if not -xs.ndim <= dim < xs.ndim:
        raise ValueError(f"framejit.{who}: dim {dim} is out of range for an array of {xs.ndim} dims")
    return xs.shape[dim], dim % xs.ndim


def _take(xs, i, dim):
    return xs[(slice(None),) * dim + (i,)]


def _stack(ys, dim, who):
    if not ys:
        raise ValueError(f"framejit.{who}: xs has no elements along the scanned dim (the result's shape is unknown)")
    torch = _sys.modules.get("torch")
    if torch is not None and isinstance(ys[0], torch.Tensor):
        return torch.stack(ys, dim=dim)
    np = _sys.modules.get("numpy")
    if np is not None:
        return np.stack(ys, axis=dim)  # ndarrays, NumPy scalars, and framejit.Tensors (as Tensors)
    # framejit.Tensors or numbers where NumPy is missing: through nested lists, dim 0 first.
    first = ys[0]
    out = tensor([y.tolist() if isinstance(y, Tensor) else y for y in ys],
                 dtype=first.dtype if isinstance(first, Tensor) else None)
    if dim:
        axes = list(range(1, dim + 1)) + [0] + list(range(dim + 1, out.ndim))
        out = out.transpose(*axes)
    return out


def cond(pred, true_fn, false_fn, operands):
    """true_fn(*operands) if pred else false_fn(*operands); pred: a bool, number, or one-element
    array."""
    operands = _as_tuple(operands, "cond", "operands")
    return true_fn(*operands) if bool(pred) else false_fn(*operands)


def while_loop(cond_fn, body_fn, carried_inputs):
    """Runs body_fn on the carried values while cond_fn(*values) holds; returns the values (a
    tuple). body_fn returns as many values as it takes, each of the same type, dtype and shape."""
    carried = _as_tuple(carried_inputs, "while_loop", "carried_inputs")
    while bool(cond_fn(*carried)):
        nxt = _as_tuple(body_fn(*carried), "while_loop", "body_fn's result")
        _check_same("while_loop", carried, nxt, "body_fn")
        carried = nxt
    return carried


def fori_loop(lower, upper, body_fn, init_val):
    """val = body_fn(i, val) for i in range(lower, upper); returns val. A tuple or list value is
    checked value by value, any other as one value."""
    val = init_val
    for i in range(int(lower), int(upper)):
        nxt = body_fn(i, val)
        if isinstance(val, (tuple, list)):
            _check_same("fori_loop", tuple(val), _as_tuple(nxt, "fori_loop", "body_fn's result"), "body_fn")
        else:
            _check_same("fori_loop", (val,), (nxt,), "body_fn")
        val = nxt
    return val


def scan(combine_fn, init, xs, dim=0, reverse=False):
    """carry, y = combine_fn(carry, x) for each x of xs along dim (from the end with reverse);
    returns (carry, ys), ys stacked along dim in xs's order."""
    n, dim = _length(xs, dim, "scan")
    carry = init
    ys = [None] * n
    for i in (range(n - 1, -1, -1) if reverse else range(n)):
        out = combine_fn(carry, _take(xs, i, dim))
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError("framejit.scan: combine_fn must return (carry, y)")
        new_carry, ys[i] = out
        if isinstance(carry, (tuple, list)):
            _check_same("scan", tuple(carry), _as_tuple(new_carry, "scan", "the carry"), "combine_fn")
        else:
            _check_same("scan", (carry,), (new_carry,), "combine_fn")
        carry = new_carry
    return carry, _stack(ys, dim, "scan")


def map(fn, xs, *args):  # noqa: A001 - the operator's name, as in torch and jax.lax
    """fn(x, *args) for each x of xs along dim 0, stacked along dim 0."""
    n, _ = _length(xs, 0, "map")
    return _stack([fn(_take(xs, i, 0), *args) for i in range(n)], 0, "map")


def _fresh_copy(xs):
    """A C-ordered copy of xs by its own library: the array a captured associative_scan scans in
    place (Note [Parallel scans])."""
    torch = _sys.modules.get("torch")
    if torch is not None and isinstance(xs, torch.Tensor):
        return xs.clone(memory_format=torch.contiguous_format)
    return xs.copy(order="C")


def associative_scan(combine_fn, xs, dim, reverse=False):
    """The inclusive scan of xs along dim with combine_fn (an associative function of two slices):
    out[0] = xs[0], out[i] = combine_fn(out[i - 1], xs[i]); with reverse, the same over xs flipped
    along dim (out[i] = combine_fn(out[i + 1], xs[i])), as jax.lax and torch define it."""
    n, dim = _length(xs, dim, "associative_scan")
    out = [None] * n
    order = range(n - 1, -1, -1) if reverse else range(n)
    acc = None
    for i in order:
        x = _take(xs, i, dim)
        acc = x if acc is None else combine_fn(acc, x)
        out[i] = acc
    return _stack(out, dim, "associative_scan")
