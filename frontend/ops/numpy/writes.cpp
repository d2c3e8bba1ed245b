// writes.cpp — `x[index] = value` on NumPy arrays, as a functional index_put node (Note [Writes
// into arrays] in frontend/trace/writes.cpp).
#include "frontend/ops/numpy/families.h"
#include "frontend/ops/numpy/registry.h"

namespace framejit::frontend::ops {

void setitem(Tracer& tx, const VarPtr& t, const VarPtr& index, const VarPtr& value) {
  BREAK_IF(tx.out().array_kind == ArrayKind::Tensor, BreakKind::SideEffect,
           "assigning into a framejit.Tensor (x[...] = v) is not captured yet");
  const jit::TensorMeta target = tx.meta(t);
  BREAK_IF(target.scalar_object, Raises{PyExc_TypeError}, "NumPy scalars do not support item assignment");

  // The region written: basic indexing's checks and shape; its node is dead once its key is read.
  jit::Arg key;
  jit::TensorMeta region;
  if (is_advanced_index(index)) {
    advanced_setitem_key(tx, t, index, key, region);  // Note [Advanced indexing]
  } else {
    VarPtr view = basic_index(tx, t, index);
    const jit::Node& n = tx.node_of(view);
    key = n.args.at(1);
    region = n.meta;
  }
  // The value must broadcast to the region, so the write cannot fail at run time after others
  // were made; NumPy casts it to the target's dtype (unsafely, as __setitem__ does).
  switch (value->kind) {
    case VarKind::Tensor: {
      const jit::TensorMeta& v = tx.meta(value);
      // Note [Advanced indexing]: a region whose size only the run knows (a[mask] = values) is
      // NumPy's __setitem__ to check, and raise for, at run time.
      bool unbacked = false;
      for (const SymInt& d : region.shape) unbacked |= tx.out().is_unbacked(d);
      if (unbacked) {
        BREAK_IF(rt::dtype_is_complex(v.dtype) && !rt::dtype_is_complex(target.dtype),
                 "assigning complex values into a real array (NumPy warns and drops the imaginary part)");
        break;
      }
      BREAK_IF(rt::dtype_is_complex(v.dtype) && !rt::dtype_is_complex(target.dtype),
               "assigning complex values into a real array (NumPy warns and drops the imaginary part)");
      // NumPy drops leading size-1 dims the region does not have, then broadcasts to the region.
      const int extra = std::max(0, v.rank() - region.rank());
      for (int d = 0; d < extra; ++d)
        BREAK_IF(!tx.out().sizes_equal(v.shape[d], jit::SymInt(1), "setitem at " + tx.location()),
                 Raises{PyExc_ValueError}, "could not broadcast input array into the indexed region");
      const Shape written = broadcast_shapes(tx, {region.shape, Shape(v.shape.begin() + extra, v.shape.end())});
      for (int d = 0; d < region.rank(); ++d)
        BREAK_IF(!written[d].same_as(region.shape[d]), Raises{PyExc_ValueError},
                 "could not broadcast input array into the indexed region");
      break;
    }
    case VarKind::Const: {
      PyObject* c = const_value(value);
      BREAK_IF(!PyFloat_Check(c) && !PyLong_Check(c), "assigning a " + std::string(Py_TYPE(c)->tp_name) + " into an array");
      break;
    }
    case VarKind::Scalar:
      break;
    default:
      graph_break(std::string("assigning ") + var_kind_name(value->kind) + " into an array");
  }
  jit::TensorMeta written = target;
  written.layout = jit::Layout::Contiguous;  // index_put's copy is C-ordered
  VarPtr r = tx.add_tensor("framejit._C._index_put", {tx.to_arg(t), key, tx.to_arg(value)}, written);
  tx.assign_array(t, as<TensorVar>(r)->node, "x[...] = v");
}

}  // namespace framejit::frontend::ops
