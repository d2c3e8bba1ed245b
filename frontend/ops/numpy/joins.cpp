// joins.cpp — concatenate and stack.
#include "frontend/ops/numpy/families.h"

namespace framejit::frontend::ops {

VarPtr join(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  auto b = bind_args(name, {"arrays", "axis", "out", "*", "dtype", "casting"}, args, kwargs);
  BREAK_IF(!b.count("arrays"), name + "() needs a sequence of arrays");
  BREAK_IF(!is_absent(b, "out"), name + "() with out=");
  BREAK_IF(!is_absent(b, "dtype") || !is_absent(b, "casting"), name + "() with dtype= or casting=");
  std::vector<VarPtr> arrays = tx.unpack(b["arrays"], name + " arrays");
  BREAK_IF(arrays.empty(), "need at least one array to " + name);
  for (auto& a : arrays) BREAK_IF(a->kind != VarKind::Tensor, name + " of a non-array item");
  bool axis_none = b.count("axis") && is_const(b["axis"]) && const_value(b["axis"]) == Py_None;
  BREAK_IF(axis_none, name + "(axis=None) is not captured yet");
  int64_t axis = b.count("axis") ? tx.to_int(b["axis"], "axis") : 0;
  const Shape first = tx.meta(arrays[0]).shape;
  int rank = static_cast<int>(first.size());
  std::string why = name + " at " + tx.location();
  Shape out;
  if (name == "concatenate") {
    BREAK_IF(rank == 0, "zero-dimensional arrays cannot be concatenated");
    int ax = normalize_axis(tx, axis, rank);
    out = first;
    for (size_t i = 1; i < arrays.size(); ++i) {
      const Shape& s = tx.meta(arrays[i]).shape;
      BREAK_IF(static_cast<int>(s.size()) != rank, "all the input arrays must have same number of dimensions");
      for (int d = 0; d < rank; ++d) {
        if (d == ax)
          out[d] = out[d] + s[d];
        else
          BREAK_IF(!tx.out().sizes_equal(first[d], s[d], why), "input array dimensions must match except on the axis");
      }
    }
  } else {  // stack
    int ax = normalize_axis(tx, axis, rank + 1);
    for (size_t i = 1; i < arrays.size(); ++i) {
      const Shape& s = tx.meta(arrays[i]).shape;
      BREAK_IF(static_cast<int>(s.size()) != rank, "all input arrays must have the same shape");
      for (int d = 0; d < rank; ++d)
        BREAK_IF(!tx.out().sizes_equal(first[d], s[d], why), "all input arrays must have the same shape");
    }
    out = first;
    out.insert(out.begin() + ax, SymInt(static_cast<int64_t>(arrays.size())));
  }
  std::vector<VarPtr> probe_args{std::make_shared<SeqVar>(VarKind::List, arrays)};
  DTypeAnswer dt = probe_dtype(tx, DTypeRule::NumPyOnly, name, numpy_attr(name.c_str()), probe_args, {});
  return tx.add_tensor("numpy." + name, to_args(tx, args), tensor_meta(dt.dtype, out), to_kwargs(tx, kwargs));
}

}  // namespace framejit::frontend::ops
