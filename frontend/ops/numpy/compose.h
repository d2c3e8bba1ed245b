// compose.h — small builders for NumPy functions traced as other captured ops (composites):
// constants, iotas, casts, slices along one axis. Each returns what the op families return, so
// the composite fuses like hand-written code.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "frontend/ops/numpy/families.h"

namespace framejit::frontend::ops {

VarPtr int_const(Tracer& tx, int64_t v);
/// numpy.dtype(dt) as a constant argument.
VarPtr dtype_const(Tracer& tx, rt::DType dt);
/// numpy.arange(n, dtype=dt): a symbolic length stays symbolic.
VarPtr iota(Tracer& tx, const SymInt& n, rt::DType dt);
/// numpy.<name>(args...): a ufunc (or where/clip) through the elementwise family.
VarPtr ufunc(Tracer& tx, const char* name, const std::vector<VarPtr>& args);
/// t.astype(dt) (always a copy, as NumPy's astype).
VarPtr cast(Tracer& tx, const VarPtr& t, rt::DType dt);
/// numpy.zeros((), dt): a 0-d array of the dtype, for where() fillers that keep the dtype.
VarPtr zero_of(Tracer& tx, rt::DType dt);
/// A slice item; constant bounds make a constant slice, symbolic ones a SliceVar.
VarPtr slice_of(Tracer& tx, std::optional<SymInt> start, std::optional<SymInt> stop, int64_t step = 1);
/// t[items...] (basic indexing).
VarPtr index_with(Tracer& tx, const VarPtr& t, std::vector<VarPtr> items);
/// t[:, ..., item, ...] with `item` at `axis` and full slices elsewhere.
VarPtr index_axis(Tracer& tx, const VarPtr& t, int axis, const VarPtr& item);
/// numpy.reshape(t, shape).
VarPtr reshape_to(Tracer& tx, const VarPtr& t, const Shape& shape);
/// numpy.concatenate(arrays, axis=axis).
VarPtr concat(Tracer& tx, const std::vector<VarPtr>& arrays, int axis);
/// The shape as a tuple value (sizes stay symbolic).
VarPtr shape_value(Tracer& tx, const Shape& shape);
/// numpy.asarray(list) of Python numbers (nested lists and tuples, rectangular): one extern step
/// whose dtype (bool, int64, float64) and shape are decided here. Other items break.
VarPtr array_from_list(Tracer& tx, const VarPtr& seq, const std::string& user);
/// Whether `v` is a list or tuple (traced or constant).
bool is_sequence(const VarPtr& v);
/// Whether `v` is the constant None (or absent).
bool is_none(const VarPtr& v);

}  // namespace framejit::frontend::ops
