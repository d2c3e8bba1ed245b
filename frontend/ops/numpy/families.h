// families.h — one entry point per op family (each implemented in its own file).
#pragma once

#include <string>
#include <vector>

#include "frontend/ops/numpy/common.h"

namespace framejit::frontend::ops {

/// Ufuncs, operators, where and clip: broadcast the operands, ask NumPy for the dtype.
/// `probe` is the Python callable with the same type resolution (the ufunc or operator function).
VarPtr elementwise(Tracer& tx, const std::string& target, PyObject* probe, const std::vector<VarPtr>& args,
                   const KwArgs& kwargs);

/// sum mean max min prod var std argmax argmin any all. For methods, `args[0]` is self.
VarPtr reduction(Tracer& tx, const std::string& name, const std::string& target, const std::vector<VarPtr>& args,
                 const KwArgs& kwargs, bool is_method);

/// matmul, dot and `@`.
VarPtr linalg(Tracer& tx, const std::string& name, const std::string& target, const std::vector<VarPtr>& args,
              const KwArgs& kwargs);

/// reshape transpose swapaxes expand_dims squeeze broadcast_to ravel astype copy split.
VarPtr view_op(Tracer& tx, const std::string& name, const std::string& target, const std::vector<VarPtr>& args,
               const KwArgs& kwargs, bool is_method);
/// The shape `in` reshaped to `req` (one -1 inferred), NumPy's and torch's rule; a break when
/// the sizes do not match (eager raises).
Shape reshape_shape(Tracer& tx, const Shape& in, Shape req);
/// x[index] with ints, slices, None and Ellipsis.
VarPtr basic_index(Tracer& tx, const VarPtr& t, const VarPtr& index);

/// Whether `index` holds an index array, a sequence, a mask or a NumPy integer scalar
/// (Note [Advanced indexing]).
bool is_advanced_index(const VarPtr& index);
/// x[index] for such an index: NumPy's getitem as an extern step, with NumPy's result shape.
VarPtr advanced_index(Tracer& tx, const VarPtr& t, const VarPtr& index);
/// The key and the written region of `t[index] = v` for such an index.
void advanced_setitem_key(Tracer& tx, const VarPtr& t, const VarPtr& index, jit::Arg& key, jit::TensorMeta& region);
/// nonzero, one-argument where, argwhere, flatnonzero, take, take_along_axis.
VarPtr indexing(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs);
/// concatenate and stack.
VarPtr join(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs);

/// outer and flip, traced as the ops they are made of (composites.cpp).
VarPtr composite(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs);
/// linspace eye identity tri tril triu diag diagonal trace diff meshgrid (sequences.cpp).
VarPtr sequence(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs);
/// asarray asanyarray array ascontiguousarray atleast_Nd shape ndim size roll (arrays.cpp).
VarPtr array_fn(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs);
/// `numpy.<ufunc>.<method>(...)`: outer reduce accumulate reduceat; `bound` is the bound method
/// (borrowed), which decides dtypes where NumPy must be asked (ufunc_methods.cpp).
VarPtr ufunc_method(Tracer& tx, const std::string& ufunc_name, const std::string& method, PyObject* bound,
                    const std::vector<VarPtr>& args, const KwArgs& kwargs);
/// The reduction `numpy.<ufunc_name>.reduce` is ("sum" for add ...), or null.
const char* reduction_of_ufunc(const std::string& ufunc_name);
/// cumsum and cumprod: extern steps with exact meta (ufunc_methods.cpp).
VarPtr cumulative(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs);
/// numpy.linalg.*, sort/argsort/partition/argpartition, numpy.random.*: extern steps with exact
/// meta (externs.cpp). `name` is the path under numpy ("linalg.solve", "random.rand", "sort").
VarPtr extern_fn(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs);
/// `gen.<name>(...)` on a numpy.random Generator or RandomState graph input (externs.cpp).
VarPtr random_method(Tracer& tx, const VarPtr& gen, const std::string& name, const std::vector<VarPtr>& args,
                     const KwArgs& kwargs);
/// numpy.float32(v), numpy.int64(v), ...: a NumPy scalar of that type (an array for an array
/// argument), as NumPy's constructor makes it; `type` borrowed (scalar_types.cpp).
VarPtr scalar_type(Tracer& tx, const std::string& name, PyObject* type, const std::vector<VarPtr>& args,
                   const KwArgs& kwargs);
/// tile repeat pad: views, broadcasts and concatenations (tiling.cpp).
VarPtr tiling(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs);
/// einsum and cov: transposes, sums, products and matmul (contractions.cpp).
VarPtr contraction(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs);
/// copyto: computed, then written into its target through setitem (stores.cpp).
VarPtr store_fn(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs);
/// ndarray.fill(v) on `t` (stores.cpp).
VarPtr fill(Tracer& tx, const VarPtr& t, const std::vector<VarPtr>& args, const KwArgs& kwargs);
/// A ufunc (or numpy.clip) called with out=: the value, written into out, which is returned.
/// Null when the call has no out (stores.cpp). `fn` is borrowed.
VarPtr elementwise_out(Tracer& tx, const std::string& target, PyObject* fn, const std::vector<VarPtr>& args,
                       const KwArgs& kwargs);
/// numpy.mgrid[key] / numpy.ogrid[key]; `name` is "mgrid" or "ogrid" (grids.cpp).
VarPtr grid_getitem(Tracer& tx, const std::string& name, const VarPtr& key);
/// numpy.ndarray(shape, dtype): an uninitialized array, as numpy.empty (grids.cpp).
VarPtr ndarray_new(Tracer& tx, const std::vector<VarPtr>& args, const KwArgs& kwargs);
/// zeros ones full empty arange and the *_like forms.
VarPtr creation(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs);

}  // namespace framejit::frontend::ops
