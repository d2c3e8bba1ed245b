"""Trace-time dtype resolution: ask the installed NumPy what a call returns.

framejit never copies NumPy's promotion tables. For each traced call it runs the same NumPy
function on tiny stand-in arrays (same dtypes and ranks, every dim 1) and reads the result's
dtype. Python scalars and 0-d arrays are re-run with extreme values: if the answer changes,
the dtype depends on the value and the tracer guards the interval of values with the same answer
(or gives up for 0-d arrays, whose value it cannot know).

What "depends on the value" means differs by NumPy version (Note [Value-dependent results]):
NumPy 1.x picks result types from the values of Python numbers and 0-d arrays (value-based
casting). NumPy 2 (NEP 50) never does: a Python number takes the other operand's type, and a
Python int that does not fit that type raises OverflowError. So under NumPy 2 only Python ints
are probed, just outside every integer type's range, and the interval found is the range of the
type they are converted to.
"""

import math
import struct
import warnings

import numpy as np

_NUMPY_MAJOR = int(np.__version__.split(".")[0])

# Note [Value-dependent results]
# NumPy 1.x: values at the edges of np.min_scalar_type's buckets, where value-based casting
# changes its mind. NumPy 2: -1 (no unsigned type holds it) and 2**64 (no integer type does);
# Python floats and 0-d arrays never change a NumPy 2 result type, so they are not probed.
if _NUMPY_MAJOR >= 2:
    _INT_PROBES = (-1, 2**64)
    _FLOAT_PROBES = ()
else:
    _INT_PROBES = (0, -1, 255, 65535, 2**31, 2**62, -(2**62))
    _FLOAT_PROBES = (0.0, 1e300, -1e300, 1e-300)
_cache = {}


def _stand_in(spec):
    kind = spec[0]
    if kind == "t":  # ("t", dtype name, rank, numpy scalar?)
        _, dt, rank, is_scalar = spec
        if is_scalar:
            return np.dtype(dt).type(0)
        return np.zeros((1,) * rank, dtype=dt)
    if kind == "l":  # ("l", [specs]) a list of arrays (concatenate, stack)
        return [_stand_in(s) for s in spec[1]]
    return spec[1]  # ("s", python number) or ("c", constant)


def _probes(spec):
    kind = spec[0]
    if kind == "s":
        v = spec[1]
        if isinstance(v, bool):
            return ()
        return _INT_PROBES if isinstance(v, int) else _FLOAT_PROBES
    if kind == "n":  # a NumPy scalar input: its extremes, as the 0-d case below
        if _NUMPY_MAJOR >= 2:
            return ()  # NEP 50: a NumPy scalar's type is strong, its value never matters
        spec = ("t", np.dtype(type(spec[1])).name, 0, True)
        kind = "t"
    if kind == "t" and spec[2] == 0 and _NUMPY_MAJOR < 2:
        dt = np.dtype(spec[1])
        # And 0: a NumPy scalar's stand-in is its own value, which may already be an extreme
        # (np.int64(-2**63) - float32 is float64, 6 - float32 is float32).
        if dt.kind in "iu":
            info = np.iinfo(dt)
            vals = (info.max, info.min, 0)
        elif dt.kind == "f":
            info = np.finfo(dt)
            vals = (info.max, info.tiny, 0.0)
        else:
            return ()
        if spec[3]:
            return tuple(dt.type(v) for v in vals)
        return tuple(np.array(v, dtype=dt) for v in vals)
    return ()


def _describe(r):
    if isinstance(r, np.ndarray):
        return (r.dtype.name, False)
    if isinstance(r, np.generic):
        return (r.dtype.name, True)
    return (None, False)


def _key_of(spec):
    if spec[0] in "sn":
        return (spec[0], type(spec[1]))
    if spec[0] == "l":
        return ("l", tuple(_key_of(s) for s in spec[1]))
    if spec[0] == "c":
        v = spec[1]
        try:
            hash(v)
        except TypeError:
            return None
        return ("c", type(v), v)
    return spec


def _bits(x):
    # Doubles ordered as integers: negative values map below positive ones.
    b = struct.unpack("<q", struct.pack("<d", x))[0]
    return b if b >= 0 else -(b & 0x7FFFFFFFFFFFFFFF)


def _from_bits(b):
    if b < 0:
        b = (-b) | -0x8000000000000000
    return struct.unpack("<d", struct.pack("<q", b))[0]


def _nearest_change(answer, start, direction, limit):
    """The first key from `start` towards `limit` whose answer differs, or None.

    Steps double (so buckets that grow geometrically, like NumPy's, are not jumped over), then
    bisect between the last equal key and the first different one.
    """
    here = answer(start)
    same, step = start, 1
    while True:
        k = same + direction * step
        if (k - limit) * direction >= 0:
            k = limit
        if answer(k) != here:
            break
        if k == limit:
            return None
        same, step = k, step * 2
    while abs(k - same) > 1:
        mid = (k + same) // 2
        if answer(mid) == here:
            same = mid
        else:
            k = mid
    return k


def _value_range_bisect(answer, v):
    """The interval around v with the same answer, found by search (any NumPy version)."""
    if isinstance(v, float):
        top = _bits(1.7976931348623157e308)
        keyed = lambda k: answer(_from_bits(k))  # noqa: E731
        up = _nearest_change(keyed, _bits(v), 1, top)
        down = _nearest_change(keyed, _bits(v), -1, -top)
        here = answer(v)
        nonfinite_ok = all(answer(x) == here for x in (math.inf, -math.inf, math.nan))
        return ("f", -math.inf if down is None else _from_bits(down), math.inf if up is None else _from_bits(up),
                nonfinite_ok)
    up = _nearest_change(answer, v, 1, 2**64)
    down = _nearest_change(answer, v, -1, -(2**63) - 1)
    lo = -(2**63) - 1 if down is None else max(down, -(2**63) - 1)
    hi = 2**63 if up is None else min(up, 2**63)
    return ("i", lo, hi, False)


_classes = {}


def _scalar_classes(kind):
    """Intervals of Python numbers on which NumPy 1.x's value-based casting cannot change its
    answer: [(lo, hi, representative)] in value order.

    Value-based casting looks at a Python scalar through np.min_scalar_type and through whether
    it fits each integer type, so the cut points are where either changes. Found once per process.
    """
    if kind in _classes:
        return _classes[kind]
    if kind == "f":
        top = _bits(1.7976931348623157e308)
        keyed = lambda k: np.min_scalar_type(_from_bits(k)).char  # noqa: E731
        cuts = {float(np.finfo(np.float16).max), float(np.finfo(np.float32).max)}
        k = 0
        while True:
            c = _nearest_change(keyed, k, 1, top)
            if c is None:
                break
            cuts.add(_from_bits(c))
            k = c
        edges = [0.0] + sorted(cuts) + [math.inf]
        # magnitude classes [edge, next edge), mirrored for negative values
        pos = [(edges[j], math.nextafter(edges[j + 1], 0.0)) for j in range(len(edges) - 1)]
        spans = [(-hi, -lo) for lo, hi in reversed(pos[1:])] + [(-pos[0][1], pos[0][1])] + pos[1:]
        out = [(lo, hi, (lo + hi) / 2 if math.isfinite(lo) and math.isfinite(hi) else (lo if math.isfinite(lo) else hi))
               for lo, hi in spans]
    else:
        cuts = sorted({0} | {s * 2**b for b in (7, 8, 15, 16, 31, 32, 63, 64) for s in (1, -1) if -(2**63) <= s * 2**b})
        edges = [-(2**63)] + [c for c in cuts if c > -(2**63)] + [2**64]
        out = [(edges[j], edges[j + 1] - 1, edges[j]) for j in range(len(edges) - 1)]
    _classes[kind] = out
    return out


_INTEGER_RANGES = tuple((int(np.iinfo(t).min), int(np.iinfo(t).max))
                        for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64))


def _integer_type_range(answer, v):
    """NumPy 2: the range of the integer type that accepts Python int v, checked at both ends and
    just beyond them (a few calls instead of a bisection); None if no type's range fits."""
    here = answer(v)
    for lo, hi in _INTEGER_RANGES:
        if lo <= v <= hi and answer(lo) == here and answer(hi) == here and \
                answer(lo - 1) != here and answer(hi + 1) != here:
            return ("i", max(lo - 1, -(2**63) - 1), min(hi + 1, 2**63), False)
    return None


def _value_range(fn, base, i, kwargs):
    """The interval of values for operand i that give the same result type as base[i].

    NumPy 1.x picks result types from the value of Python scalars (value-based casting); NumPy 2
    raises OverflowError for a Python int that does not fit the type it is converted to. Either
    way the answer is piecewise constant in the value, so the tracer guards the interval around
    the traced value (lo < value < hi) instead of the exact value.
    """
    v = base[i]
    cast = None
    if isinstance(v, np.generic):  # a NumPy scalar input: its value ranges, kept in its type
        cast, v = type(v), v.item()

    def answer(x):
        args = list(base)
        args[i] = x if cast is None else cast(x)
        try:
            return _describe(fn(*args, **kwargs))
        except Exception:
            return None

    if _NUMPY_MAJOR >= 2 and type(v) is int:
        found = _integer_type_range(answer, v)
        if found is not None:
            return found
    if _NUMPY_MAJOR >= 2 or not (type(v) is float or type(v) is int):
        return _value_range_bisect(answer, v)
    kind = "f" if type(v) is float else "i"
    classes = _scalar_classes(kind)
    if kind == "f" and not math.isfinite(v):
        return _value_range_bisect(answer, v)
    here = answer(v)
    j = next((k for k, (lo, hi, _) in enumerate(classes) if lo <= v <= hi), None)
    if j is None:  # beyond the classes (ints past 64 bits): pin the value
        return (kind, v - 1 if kind == "i" else math.nextafter(v, -math.inf),
                v + 1 if kind == "i" else math.nextafter(v, math.inf), False)
    a = j
    while a > 0 and answer(classes[a - 1][2]) == here:
        a -= 1
    b = j
    while b + 1 < len(classes) and answer(classes[b + 1][2]) == here:
        b += 1
    lo, hi = classes[a][0], classes[b][1]
    if kind == "f":
        nonfinite_ok = all(answer(x) == here for x in (math.inf, -math.inf, math.nan))
        return ("f", math.nextafter(lo, -math.inf) if math.isfinite(lo) else -math.inf,
                math.nextafter(hi, math.inf) if math.isfinite(hi) else math.inf, nonfinite_ok)
    return ("i", max(lo - 1, -(2**63) - 1), min(hi + 1, 2**63), False)


def result_type(fn, specs, kwargs):
    """Returns (dtype name or None, numpy scalar result?, value dependences).

    A value dependence is (operand index, "t") for a 0-d array (its value is unknown at trace
    time), or (operand index, kind, lo, hi, nonfinite_ok) for a Python number or a NumPy scalar
    input ("n" spec): the result type stays the same for lo < value < hi (and for inf/nan when
    nonfinite_ok).
    """
    parts = tuple(_key_of(s) for s in specs)
    key = None
    if None not in parts:
        try:
            key = (fn, parts, tuple(sorted(kwargs.items())) if kwargs else ())
            hash(key)
        except TypeError:
            key = None
    if key is not None:
        hit = _cache.get(key)
        if hit is not None:
            return hit
        # Answers that depend on values are cached per value bucket (NumPy's own classes).
        key = (key, tuple((np.min_scalar_type(s[1]).char, s[1] < 0) for s in specs if s[0] in "sn"))
        hit = _cache.get(key)
        if hit is not None:
            return hit
    # Stand-ins trip warnings the real call would not (var of one element, overflow probes).
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = [_stand_in(s) for s in specs]
        first = _describe(fn(*base, **kwargs))
        dependent = []
        for i, spec in enumerate(specs):
            for p in _probes(spec):
                args = list(base)
                args[i] = p
                try:
                    same = _describe(fn(*args, **kwargs)) == first
                except Exception:
                    same = False
                if not same:
                    if spec[0] in "sn":
                        dependent.append((i,) + _value_range(fn, base, i, kwargs))
                    else:
                        dependent.append((i, "t"))
                    break
    out = (first[0], first[1], tuple(dependent))
    if key is not None:
        _cache[key if dependent else key[0]] = out
    return out
