// views.cpp — applying a view's index remap to a strided layout at run time (see views.h).
#include "runtime/views.h"

#include <algorithm>
#include <cstring>

namespace framejit::rt {

namespace {

bool resolve(const IntTerm& t, ValueReader value, int64_t& out) {
  if (t.kind == IntTerm::Kind::Const) {
    out = t.value;
    return true;
  }
  return t.kind == IntTerm::Kind::Node && value(static_cast<int>(t.value), out);
}

// Python's slice.indices(): clamps start/stop into the dimension and counts the elements.
bool slice_bounds(const IndexItem& it, int64_t len, ValueReader value, int64_t& start,
                  int64_t& step, int64_t& count) {
  step = 1;
  if (it.step.kind != IntTerm::Kind::None && !resolve(it.step, value, step)) return false;
  if (step == 0) return false;  // ValueError in Python: let it raise there
  auto adjust = [&](const IntTerm& t, int64_t dflt, int64_t& out) {
    if (t.kind == IntTerm::Kind::None) {
      out = dflt;
      return true;
    }
    if (!resolve(t, value, out)) return false;
    if (out < 0) {
      out += len;
      if (out < 0) out = step < 0 ? -1 : 0;
    } else if (out >= len) {
      out = step < 0 ? len - 1 : len;
    }
    return true;
  };
  int64_t stop;
  if (!adjust(it.start, step < 0 ? len - 1 : 0, start) || !adjust(it.stop, step < 0 ? -1 : len, stop)) return false;
  if (step > 0)
    count = stop > start ? (stop - start - 1) / step + 1 : 0;
  else
    count = start > stop ? (start - stop - 1) / (-step) + 1 : 0;
  return true;
}

bool apply_index(const ViewOp& op, const StridedLayout& in, ValueReader value,
                 StridedLayout& out) {
  int consumed = 0, ellipses = 0;
  for (const IndexItem& it : op.index) {
    consumed += it.kind == IndexItem::Kind::Int || it.kind == IndexItem::Kind::Slice;
    ellipses += it.kind == IndexItem::Kind::Ellipsis;
  }
  if (consumed > in.nd || ellipses > 1) return false;  // IndexError in NumPy
  out.data = in.data;
  out.nd = 0;
  int d = 0;
  auto push = [&](int64_t dim, int64_t stride) {
    if (out.nd == kMaxRank) return false;
    out.dims[out.nd] = dim;
    out.strides[out.nd++] = stride;
    return true;
  };
  for (const IndexItem& it : op.index) {
    switch (it.kind) {
      case IndexItem::Kind::Ellipsis:
        for (int k = 0; k < in.nd - consumed; ++k, ++d)
          if (!push(in.dims[d], in.strides[d])) return false;
        break;
      case IndexItem::Kind::NewAxis:
        if (!push(1, 0)) return false;
        break;
      case IndexItem::Kind::Int: {
        int64_t i;
        if (!resolve(it.start, value, i)) return false;
        if (i < 0) i += in.dims[d];
        if (i < 0 || i >= in.dims[d]) return false;  // IndexError in NumPy
        out.data += i * in.strides[d];
        ++d;
        break;
      }
      case IndexItem::Kind::Slice: {
        int64_t start, step, count;
        if (!slice_bounds(it, in.dims[d], value, start, step, count)) return false;
        if (count > 0) out.data += start * in.strides[d];
        if (!push(count, in.strides[d] * step)) return false;
        ++d;
        break;
      }
    }
  }
  for (; d < in.nd; ++d)
    if (!push(in.dims[d], in.strides[d])) return false;
  return true;
}

// Note [Reshape without copying]
// NumPy reshapes without a copy whenever it can, not only for contiguous arrays: the old and new
// dims split into groups of equal products (e.g. (4, 768) sliced to (4, 256) and reshaped to
// (4, 8, 32): groups {4}->{4} and {256}->{8, 32}), and each group works as a view when its old
// dims step through memory as one (stride[k] == stride[k+1] * dim[k+1]); the new dims of a group
// then take strides from the group's innermost old stride. Size-1 dims never matter. When some
// group is not such a chain NumPy copies, and so do we (by letting NumPy do it).
bool reshape_strides(const StridedLayout& in, int64_t itemsize, int64_t total, StridedLayout& out) {
  if (total == 0) {  // nothing to address: C strides
    int64_t stride = itemsize;
    for (int d = out.nd - 1; d >= 0; --d) {
      out.strides[d] = stride;
      stride *= std::max<int64_t>(out.dims[d], 1);
    }
    return true;
  }
  int64_t od[kMaxRank], os[kMaxRank];
  int on = 0;
  for (int d = 0; d < in.nd; ++d)
    if (in.dims[d] != 1) {
      od[on] = in.dims[d];
      os[on++] = in.strides[d];
    }
  int oi = 0, ni = 0;
  while (oi < on && ni < out.nd) {
    int64_t op = od[oi], np = out.dims[ni];
    int oj = oi + 1, nj = ni + 1;
    while (op != np) {
      if (np < op) {
        if (nj == out.nd) return false;
        np *= out.dims[nj++];
      } else {
        if (oj == on) return false;
        op *= od[oj++];
      }
    }
    for (int k = oi; k + 1 < oj; ++k)
      if (os[k] != os[k + 1] * od[k + 1]) return false;
    out.strides[nj - 1] = os[oj - 1];
    for (int k = nj - 1; k > ni; --k) out.strides[k - 1] = out.strides[k] * out.dims[k];
    oi = oj;
    ni = nj;
  }
  for (; ni < out.nd; ++ni) out.strides[ni] = itemsize;  // trailing size-1 dims
  return oi == on;
}

}  // namespace

bool apply_view(const ViewOp& op, const StridedLayout& in, int64_t itemsize,
                ValueReader value, StridedLayout& out) {
  switch (op.kind) {
    case ViewOp::Kind::Permute:
      if (static_cast<int>(op.perm.size()) != in.nd) return false;
      out.data = in.data;
      out.nd = in.nd;
      for (int d = 0; d < in.nd; ++d) {
        out.dims[d] = in.dims[op.perm[d]];
        out.strides[d] = in.strides[op.perm[d]];
      }
      return true;
    case ViewOp::Kind::Index: return apply_index(op, in, value, out);
    case ViewOp::Kind::Reshape: {
      if (op.shape.size() > static_cast<size_t>(kMaxRank)) return false;
      int64_t total = 1;
      for (int d = 0; d < in.nd; ++d) total *= in.dims[d];
      int64_t known = 1;
      int infer = -1;
      out.nd = static_cast<int>(op.shape.size());
      for (int d = 0; d < out.nd; ++d) {
        if (!resolve(op.shape[d], value, out.dims[d])) return false;
        if (out.dims[d] == -1 && infer < 0) {
          infer = d;
          continue;
        }
        if (out.dims[d] < 0) return false;
        known *= out.dims[d];
      }
      if (infer >= 0) {
        if (known == 0 || total % known != 0) return false;
        out.dims[infer] = total / known;
      } else if (known != total) {
        return false;
      }
      out.data = in.data;
      return reshape_strides(in, itemsize, total, out);
    }
    case ViewOp::Kind::BroadcastTo: {
      const int nd = static_cast<int>(op.shape.size());
      if (nd < in.nd || nd > kMaxRank) return false;
      out.data = in.data;
      out.nd = nd;
      for (int d = 0; d < nd; ++d) {
        if (!resolve(op.shape[d], value, out.dims[d]) || out.dims[d] < 0) return false;
        const int s = d - (nd - in.nd);
        if (s < 0) {
          out.strides[d] = 0;
        } else if (in.dims[s] == out.dims[d]) {
          out.strides[d] = in.strides[s];
        } else if (in.dims[s] == 1) {
          out.strides[d] = 0;
        } else {
          return false;
        }
      }
      return true;
    }
  }
  return false;
}

std::string ViewOp::to_string() const {
  auto term = [](const IntTerm& t) {
    switch (t.kind) {
      case IntTerm::Kind::Const: return std::to_string(t.value);
      case IntTerm::Kind::None: return std::string();
      case IntTerm::Kind::Node: return "%" + std::to_string(t.value);
    }
    return std::string();
  };
  std::string s;
  switch (kind) {
    case Kind::Permute:
      s = "permute(";
      for (size_t i = 0; i < perm.size(); ++i) s += (i ? ", " : "") + std::to_string(perm[i]);
      break;
    case Kind::Index:
      s = "index(";
      for (size_t i = 0; i < index.size(); ++i) {
        const IndexItem& it = index[i];
        s += i ? ", " : "";
        switch (it.kind) {
          case IndexItem::Kind::Int: s += term(it.start); break;
          case IndexItem::Kind::Slice:
            s += term(it.start) + ":" + term(it.stop) + (it.step.kind == IntTerm::Kind::None ? "" : ":" + term(it.step));
            break;
          case IndexItem::Kind::NewAxis: s += "None"; break;
          case IndexItem::Kind::Ellipsis: s += "..."; break;
        }
      }
      break;
    case Kind::Reshape:
    case Kind::BroadcastTo:
      s = kind == Kind::Reshape ? "reshape(" : "broadcast_to(";
      for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + term(shape[i]);
      break;
  }
  return s + ")";
}

void copy_to_c_order(const StridedLayout& src, int64_t itemsize, char* dst) {
  int64_t total = 1;
  bool c_order = true;
  for (int d = src.nd - 1; d >= 0; --d) {
    c_order = c_order && (src.dims[d] == 1 || src.strides[d] == total * itemsize);
    total *= src.dims[d];
  }
  if (c_order) {
    if (total) std::memcpy(dst, src.data, static_cast<size_t>(total * itemsize));
    return;
  }
  // Odometer over the source's index space; the innermost dim is the fastest.
  int64_t index[kMaxRank] = {};
  for (int64_t e = 0; e < total; ++e) {
    const char* p = src.data;
    for (int d = 0; d < src.nd; ++d) p += index[d] * src.strides[d];
    std::memcpy(dst + e * itemsize, p, static_cast<size_t>(itemsize));
    for (int d = src.nd - 1; d >= 0 && ++index[d] == src.dims[d]; --d) index[d] = 0;
  }
}

}  // namespace framejit::rt
