// data.cpp — element data of framejit.Tensor: dtype casts, Python scalars in and out
// (tolist, item, framejit.tensor of nested lists) and the repr.
#include <bit>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "frontend/interop/numpy_abi.h"
#include "frontend/cpython/pyref.h"
#include "frontend/tensor/object_p.h"
#include "runtime/dtype.h"
#include "runtime/memory.h"

namespace framejit::frontend::tensor_detail {

using rt::DType;

namespace {

using rt::half_to_double;
using rt::double_to_half;
using rt::bfloat16_to_double;
using rt::double_to_bfloat16;

// ---- element types ---------------------------------------------------------------------------

struct Bool8 {  // bool storage read as a byte: any nonzero byte is true (no UB on odd bytes)
  uint8_t v;
};
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
template <class T> constexpr bool kIsHalf = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <class T> double half_value(T v) {
  if constexpr (std::is_same_v<T, Half>) return half_to_double(v.bits);
  else return bfloat16_to_double(v.bits);
}

template <class T> struct IsComplex : std::false_type {};
template <class T> struct IsComplex<std::complex<T>> : std::true_type {};

template <class T> struct Tag {
  using type = T;
};

template <class F>
decltype(auto) visit_dtype(DType dt, F&& f) {
  switch (dt) {
    case DType::Bool: return f(Tag<Bool8>{});
    case DType::Int8: return f(Tag<int8_t>{});
    case DType::Int16: return f(Tag<int16_t>{});
    case DType::Int32: return f(Tag<int32_t>{});
    case DType::Int64: return f(Tag<int64_t>{});
    case DType::UInt8: return f(Tag<uint8_t>{});
    case DType::UInt16: return f(Tag<uint16_t>{});
    case DType::UInt32: return f(Tag<uint32_t>{});
    case DType::UInt64: return f(Tag<uint64_t>{});
    case DType::Float16: return f(Tag<Half>{});
    case DType::Float32: return f(Tag<float>{});
    case DType::Float64: return f(Tag<double>{});
    case DType::Complex64: return f(Tag<std::complex<float>>{});
    case DType::BFloat16: return f(Tag<BFloat16>{});
    case DType::Complex128: break;
  }
  return f(Tag<std::complex<double>>{});
}

// Note [Casts]
// Conversions follow NumPy's astype: integers wrap modulo 2^bits, floats truncate toward zero into
// integers, anything nonzero is true, complex to real keeps the real part. A float that is NaN or
// outside int64 becomes INT64_MIN before wrapping (what x86's cvttsd2si, and so NumPy, gives),
// written without the C++ undefined behaviour of an out-of-range float-to-int conversion (the ASan
// build traps on that). float16 goes through double, exactly.
template <class D>
D float_to_int(double x) {
  constexpr double k2p63 = 9223372036854775808.0;
  if constexpr (std::is_same_v<D, uint64_t>) {
    if (x >= k2p63 && x < 2 * k2p63) return static_cast<uint64_t>(x);
  }
  const int64_t i = (x >= -k2p63 && x < k2p63) ? static_cast<int64_t>(x) : std::numeric_limits<int64_t>::min();
  return static_cast<D>(i);
}

template <class D, class S>
D cast_value(S s) {
  if constexpr (std::is_same_v<S, Bool8>) {
    return cast_value<D>(static_cast<uint8_t>(s.v != 0));
  } else if constexpr (kIsHalf<S>) {
    if constexpr (std::is_same_v<D, S>) return s;
    else return cast_value<D>(half_value(s));
  } else if constexpr (std::is_same_v<D, Bool8>) {
    if constexpr (IsComplex<S>::value) return Bool8{static_cast<uint8_t>(s.real() != 0 || s.imag() != 0)};
    else return Bool8{static_cast<uint8_t>(s != 0)};
  } else if constexpr (IsComplex<S>::value) {
    if constexpr (IsComplex<D>::value) return D(static_cast<typename D::value_type>(s.real()),
                                                 static_cast<typename D::value_type>(s.imag()));
    else return cast_value<D>(s.real());
  } else if constexpr (IsComplex<D>::value) {
    return D(static_cast<typename D::value_type>(s), 0);
  } else if constexpr (std::is_same_v<D, Half>) {
    return Half{double_to_half(static_cast<double>(s))};
  } else if constexpr (std::is_same_v<D, BFloat16>) {
    return BFloat16{double_to_bfloat16(static_cast<double>(s))};
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
    return float_to_int<D>(static_cast<double>(s));
  } else {
    return static_cast<D>(s);  // integer <-> integer (wraps), integer -> float, float <-> float
  }
}

template <class D, class S>
void convert_strided(const char* src, int nd, const int64_t* shape, const int64_t* strides, char* dst) {
  D* out = reinterpret_cast<D*>(dst);
  auto one = [&](const char* p) {
    S v;
    std::memcpy(&v, p, sizeof(S));  // sources may be unaligned (a buffer at an odd offset)
    D r = cast_value<D>(v);
    std::memcpy(out++, &r, sizeof(D));
  };
  if (nd == 0) return one(src);
  for (int d = 0; d < nd; ++d)
    if (shape[d] == 0) return;
  int64_t index[kMaxDims] = {};
  const int64_t inner = shape[nd - 1], inner_stride = strides[nd - 1];
  const char* row = src;
  for (;;) {
    for (int64_t i = 0; i < inner; ++i) one(row + i * inner_stride);
    int d = nd - 2;
    for (; d >= 0; --d) {  // odometer over the outer dimensions
      if (++index[d] < shape[d]) {
        row += strides[d];
        break;
      }
      row -= (shape[d] - 1) * strides[d];
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

// ---- Python scalars out -------------------------------------------------------------------------

template <class T>
PyObject* to_python(T v) {
  if constexpr (std::is_same_v<T, Bool8>) return PyBool_FromLong(v.v != 0);
  else if constexpr (kIsHalf<T>) return PyFloat_FromDouble(half_value(v));
  else if constexpr (IsComplex<T>::value) return PyComplex_FromDoubles(v.real(), v.imag());
  else if constexpr (std::is_floating_point_v<T>) return PyFloat_FromDouble(v);
  else if constexpr (std::is_signed_v<T>) return PyLong_FromLongLong(v);
  else return PyLong_FromUnsignedLongLong(v);
}

PyObject* tolist_rec(const char* p, DType dt, int d, int nd, const int64_t* shape, const int64_t* strides) {
  if (d == nd) return element_to_python(p, dt);
  OwnedRef list = OwnedRef::steal(PyList_New(shape[d]));
  if (!list) return nullptr;
  for (int64_t i = 0; i < shape[d]; ++i) {
    PyObject* item = tolist_rec(p + i * strides[d], dt, d + 1, nd, shape, strides);
    if (!item) return nullptr;
    PyList_SET_ITEM(list.get(), i, item);
  }
  return list.release();
}

// ---- repr ------------------------------------------------------------------------------------------

constexpr int64_t kReprThreshold = 1000;  // more elements than this: abbreviated
constexpr int64_t kReprEdge = 3;          // elements shown at each end of an abbreviated dimension

// The shortest decimal that reads back as the same value (`same` decides), in Python's repr style
// ("10.0", "0.1", "1e+20", "inf"). Python's repr of the nearest double to that decimal is the same
// decimal or a shorter one, and that double rounds to the same value.
template <class Same>
bool append_shortest_float(std::string& out, double v, int max_digits, Same same) {
  char buf[64];
  for (int digits = 1; digits <= max_digits; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (same(std::strtod(buf, nullptr))) break;
  }
  char* text = PyOS_double_to_string(std::strtod(buf, nullptr), 'r', 0, Py_DTSF_ADD_DOT_0, nullptr);
  if (!text) return false;
  out += text;
  PyMem_Free(text);
  return true;
}

bool append_element_text(std::string& out, const char* p, DType dt) {
  if (dt == DType::Float32) {
    float f;
    std::memcpy(&f, p, sizeof f);
    if (std::isnan(f)) return out += "nan", true;
    return append_shortest_float(out, f, 9, [&](double r) { return static_cast<float>(r) == f; });
  }
  if (rt::dtype_is_half(dt)) {  // 5 significant digits tell float16's values apart, 4 bfloat16's
    const bool f16 = dt == DType::Float16;
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    const double v = f16 ? half_to_double(h) : bfloat16_to_double(h);
    if (std::isnan(v)) return out += "nan", true;
    return append_shortest_float(out, v, f16 ? 5 : 4,
                                 [&](double r) { return (f16 ? double_to_half(r) : double_to_bfloat16(r)) == h; });
  }
  OwnedRef value = OwnedRef::steal(element_to_python(p, dt));
  OwnedRef text = value ? OwnedRef::steal(PyObject_Repr(value.get())) : OwnedRef();
  const char* s = text ? PyUnicode_AsUTF8(text.get()) : nullptr;
  if (!s) return false;
  out += s;
  return true;
}

struct ReprWriter {
  std::string out;
  DType dtype;
  const int64_t* shape;
  const int64_t* strides;
  int nd;
  bool abbreviate;
  size_t indent;  // column of the outermost '['

  bool write(const char* p, int d) {
    if (d == nd) return append_element_text(out, p, dtype);
    out += '[';
    const int64_t n = shape[d];
    const bool cut = abbreviate && n > 2 * kReprEdge;
    // Inner rows go on lines of their own, aligned under the enclosing '['.
    std::string sep = d == nd - 1 ? ", " : ",\n" + std::string(indent + d + 1, ' ');
    if (d < nd - 2) sep.insert(1, "\n");  // a blank line between blocks of rows, as NumPy does
    for (int64_t i = 0; i < n; ++i) {
      if (cut && i == kReprEdge) {
        out += "...";
        out += sep;
        i = n - kReprEdge;
      }
      if (!write(p + i * strides[d], d + 1)) return false;
      if (i + 1 < n) out += sep;
    }
    out += ']';
    return true;
  }
};

// ---- Python scalars in -------------------------------------------------------------------------

// Note [Python data]
// framejit.tensor of Python scalars and nested lists/tuples infers its dtype as NumPy 2 does for
// Python data: all bools give bool, ints int64 (uint64 when a value needs it and none is
// negative), any float float64, any complex complex128, and an empty list float64. NumPy scalars
// count by their kind (np.float32(1) is a float). With dtype= the values are converted directly,
// and an int that does not fit an integer dtype raises OverflowError (NumPy 2's rule).

enum class Kind { None, Bool, Int, Float, Complex };

bool is_numpy_bool(PyObject* o) {
  const char* n = Py_TYPE(o)->tp_name;
  return std::strcmp(n, "numpy.bool_") == 0 || std::strcmp(n, "numpy.bool") == 0;
}

Kind classify(PyObject* o) {
  if (PyBool_Check(o) || is_numpy_bool(o)) return Kind::Bool;
  if (PyLong_Check(o)) return Kind::Int;
  if (PyFloat_Check(o)) return Kind::Float;
  if (PyComplex_Check(o)) return Kind::Complex;
  if (PyUnicode_Check(o) || PyBytes_Check(o) || PyByteArray_Check(o)) return Kind::None;
  // A 0-d NumPy array: its dtype's kind (ndarray has nb_index even when it holds floats).
  if (const NumPyHandles* np = numpy_handles(); np && PyObject_TypeCheck(o, np->ndarray)) {
    switch (descr_of(o)->kind) {
      case 'b': return Kind::Bool;
      case 'i': case 'u': return Kind::Int;
      case 'f': return Kind::Float;
      case 'c': return Kind::Complex;
      default: return Kind::None;
    }
  }
  PyNumberMethods* nb = Py_TYPE(o)->tp_as_number;
  if (nb && nb->nb_index) return Kind::Int;
  if (nb && nb->nb_float) return Kind::Float;
  static PyObject* complex_name = PyUnicode_InternFromString("__complex__");  // immortal
  if (complex_name && PyObject_HasAttr(o, complex_name)) return Kind::Complex;
  return Kind::None;
}

bool is_nested_sequence(PyObject* o) {
  if (PyList_Check(o) || PyTuple_Check(o)) return true;
  if (PyUnicode_Check(o) || PyBytes_Check(o) || PyByteArray_Check(o) || PyDict_Check(o)) return false;
  if (!PySequence_Check(o) || is_any_tensor(o)) return false;
  // A 0-d NumPy array is a sequence type without a length: a number here.
  if (PySequence_Size(o) < 0) {
    PyErr_Clear();
    return false;
  }
  return true;
}

struct Discovery {
  std::vector<int64_t> shape;
  int leaf_depth = -1;
  bool any_bool = false, any_int = false, any_float = false, any_complex = false;
  bool big_uint = false, negative = false;
};

bool ragged(const char* why) {
  PyErr_Format(PyExc_ValueError,
               "framejit.tensor: the nested sequences are ragged (%s); every list at one depth "
               "must have the same length",
               why);
  return false;
}

bool discover(PyObject* o, int depth, Discovery& st) {
  if (depth > kMaxDims) {
    PyErr_Format(PyExc_ValueError, "framejit.tensor: nesting deeper than %d levels", kMaxDims);
    return false;
  }
  if (is_nested_sequence(o)) {
    OwnedRef seq = OwnedRef::steal(PySequence_Fast(o, "framejit.tensor: expected a sequence"));
    if (!seq) return false;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
    if (static_cast<size_t>(depth) == st.shape.size()) {
      if (st.leaf_depth >= 0) return ragged("a list where a number was found elsewhere");
      st.shape.push_back(n);
    } else if (st.shape[depth] != n) {
      return ragged("lists of different lengths");
    }
    for (Py_ssize_t i = 0; i < n; ++i)
      if (!discover(PySequence_Fast_GET_ITEM(seq.get(), i), depth + 1, st)) return false;
    return true;
  }
  if (st.leaf_depth < 0) {
    if (static_cast<size_t>(depth) != st.shape.size()) return ragged("a number where a list was found elsewhere");
    st.leaf_depth = depth;
  } else if (depth != st.leaf_depth) {
    return ragged("numbers at different depths");
  }
  switch (classify(o)) {
    case Kind::Bool: st.any_bool = true; return true;
    case Kind::Float: st.any_float = true; return true;
    case Kind::Complex: st.any_complex = true; return true;
    case Kind::Int: {
      st.any_int = true;
      OwnedRef i = OwnedRef::steal(PyNumber_Index(o));
      if (!i) return false;
      int overflow = 0;
      long long v = PyLong_AsLongLongAndOverflow(i.get(), &overflow);
      if (v == -1 && PyErr_Occurred()) return false;
      if (overflow > 0) {
        PyLong_AsUnsignedLongLong(i.get());
        if (PyErr_Occurred()) return false;  // OverflowError: past uint64
        st.big_uint = true;
      } else if (overflow < 0) {
        PyErr_SetString(PyExc_OverflowError, "framejit.tensor: Python int too small to convert to int64");
        return false;
      } else if (v < 0) {
        st.negative = true;
      }
      return true;
    }
    case Kind::None: break;
  }
  if (is_any_tensor(o))
    PyErr_SetString(PyExc_TypeError,
                    "framejit.tensor: sequences of tensors are not supported yet; pass a nested list of numbers");
  else
    PyErr_Format(PyExc_TypeError, "framejit.tensor: expected numbers or nested sequences of numbers, got %.200s",
                 Py_TYPE(o)->tp_name);
  return false;
}

// One Python number stored as `dtype` at `p`.
bool store_number(PyObject* o, DType dtype, char* p) {
  const Kind kind = classify(o);
  auto store = [&](auto v) {
    visit_dtype(dtype, [&](auto tag) {
      using D = typename decltype(tag)::type;
      D r = cast_value<D>(v);
      std::memcpy(p, &r, sizeof(D));
    });
    return true;
  };
  const bool to_int = rt::dtype_is_integer(dtype), to_complex = rt::dtype_is_complex(dtype);
  if (kind == Kind::Bool) {
    int b = PyObject_IsTrue(o);
    return b >= 0 && store(static_cast<int64_t>(b));
  }
  if (dtype == DType::Bool) {
    int b = PyObject_IsTrue(o);
    return b >= 0 && store(static_cast<int64_t>(b));
  }
  if (kind == Kind::Int && (to_int || to_complex || rt::dtype_is_float(dtype))) {
    OwnedRef i = OwnedRef::steal(PyNumber_Index(o));
    if (!i) return false;
    if (!to_int) {  // Python's own correctly rounded int -> double
      double d = PyLong_AsDouble(i.get());
      return !(d == -1.0 && PyErr_Occurred()) && store(d);
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(i.get(), &overflow);
    if (v == -1 && PyErr_Occurred()) return false;
    unsigned long long u = 0;
    if (overflow > 0) {
      u = PyLong_AsUnsignedLongLong(i.get());
      if (u == static_cast<unsigned long long>(-1) && PyErr_Occurred()) PyErr_Clear();
      else if (dtype == DType::UInt64) return store(static_cast<uint64_t>(u));
    }
    bool fits = overflow == 0;
    if (fits) {
      visit_dtype(dtype, [&](auto tag) {
        using D = typename decltype(tag)::type;
        if constexpr (std::is_integral_v<D>) {
          using L = std::numeric_limits<D>;
          if constexpr (std::is_signed_v<D>) fits = v >= L::min() && v <= L::max();
          else fits = v >= 0 && static_cast<unsigned long long>(v) <= L::max();
        }
      });
    }
    if (!fits) {
      OwnedRef text = OwnedRef::steal(PyObject_Str(i.get()));
      PyErr_Format(PyExc_OverflowError, "framejit.tensor: Python int %s out of bounds for %s",
                   text ? PyUnicode_AsUTF8(text.get()) : "?", std::string(rt::dtype_name(dtype)).c_str());
      return false;
    }
    return store(static_cast<int64_t>(v));
  }
  if (kind == Kind::Complex && !to_complex) {
    PyErr_Format(PyExc_TypeError, "framejit.tensor: cannot store the complex number %R as %s", o,
                 std::string(rt::dtype_name(dtype)).c_str());
    return false;
  }
  if (to_complex) {
    Py_complex c = PyComplex_AsCComplex(o);
    if (c.real == -1.0 && PyErr_Occurred()) return false;
    return store(std::complex<double>(c.real, c.imag));
  }
  if (kind != Kind::Float) {
    PyErr_Format(PyExc_TypeError, "framejit.tensor: expected a number, got %.200s", Py_TYPE(o)->tp_name);
    return false;
  }
  double d = PyFloat_AsDouble(o);
  if (d == -1.0 && PyErr_Occurred()) return false;
  if (to_int && !std::isfinite(d)) {
    PyErr_Format(PyExc_ValueError, "framejit.tensor: cannot convert float %s to %s", std::isnan(d) ? "NaN" : "infinity",
                 std::string(rt::dtype_name(dtype)).c_str());
    return false;
  }
  return store(d);
}

bool fill(PyObject* o, int depth, int nd, const int64_t* shape, DType dtype, char*& p, int itemsize) {
  if (depth == nd) {
    if (!store_number(o, dtype, p)) return false;
    p += itemsize;
    return true;
  }
  OwnedRef seq = OwnedRef::steal(PySequence_Fast(o, "framejit.tensor: expected a sequence"));
  if (!seq) return false;
  // A __len__/__index__ of user code could have changed the data since discovery.
  if (PySequence_Fast_GET_SIZE(seq.get()) != shape[depth]) return ragged("the data changed while being read");
  for (int64_t i = 0; i < shape[depth]; ++i)
    if (!fill(PySequence_Fast_GET_ITEM(seq.get(), i), depth + 1, nd, shape, dtype, p, itemsize)) return false;
  return true;
}

}  // namespace

void copy_convert(const char* src, DType src_dtype, int nd, const int64_t* shape, const int64_t* strides, char* dst,
                  DType dst_dtype) {
  visit_dtype(src_dtype, [&](auto s) {
    visit_dtype(dst_dtype, [&](auto d) {
      convert_strided<typename decltype(d)::type, typename decltype(s)::type>(src, nd, shape, strides, dst);
    });
  });
}

PyObject* element_to_python(const char* p, DType dtype) {
  return visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v;
    std::memcpy(&v, p, sizeof(T));
    return to_python(v);
  });
}

PyObject* tensor_tolist(TensorObject* t) {
  if (!require_cpu(t, "tolist()")) return nullptr;
  return tolist_rec(t->data, t->dtype, 0, t->nd, t->shape, t->strides);
}

PyObject* tensor_repr(TensorObject* t) {
  const std::string dtype(rt::dtype_name(t->dtype));
  std::string shape_text = "(";
  int64_t numel = 1;
  for (int d = 0; d < t->nd; ++d) {
    numel *= t->shape[d];
    shape_text += std::to_string(t->shape[d]) + (t->nd == 1 ? "," : d + 1 < t->nd ? ", " : "");
  }
  shape_text += ")";
  if (t->tensor.device().type != rt::DeviceType::CPU)
    return PyUnicode_FromFormat("framejit.Tensor(shape=%s, dtype=\"%s\", device=\"%s\")", shape_text.c_str(),
                                dtype.c_str(), device_text(t->tensor.device()).c_str());
  ReprWriter w{"framejit.tensor(", t->dtype, t->shape, t->strides, t->nd, numel > kReprThreshold, 16};
  if (!w.write(t->data, 0)) return nullptr;
  w.out += ", dtype=\"" + dtype + "\"";
  // The nested list alone does not show the shape of an empty or abbreviated tensor.
  if (w.abbreviate || (numel == 0 && t->nd > 1)) w.out += ", shape=" + shape_text;
  w.out += ")";
  return PyUnicode_FromStringAndSize(w.out.data(), static_cast<Py_ssize_t>(w.out.size()));
}

PyObject* tensor_from_python_data(PyObject* data, const DType* dtype) {
  Discovery st;
  if (!discover(data, 0, st)) return nullptr;
  DType dt;
  if (dtype) {
    dt = *dtype;
  } else if (st.any_complex) {
    dt = DType::Complex128;
  } else if (st.any_float) {
    dt = DType::Float64;
  } else if (st.any_int) {
    if (st.big_uint && st.negative) {
      PyErr_SetString(PyExc_OverflowError,
                      "framejit.tensor: the ints need both int64 (negative values) and uint64 (values past "
                      "2**63 - 1); pass dtype= to choose");
      return nullptr;
    }
    dt = st.big_uint ? DType::UInt64 : DType::Int64;
  } else if (st.any_bool) {
    dt = DType::Bool;
  } else {
    dt = DType::Float64;  // no elements at all
  }
  const int nd = static_cast<int>(st.shape.size());
  OwnedRef out = OwnedRef::steal(tensor_empty(st.shape.data(), nd, dt));
  if (!out) return nullptr;
  char* p = as_tensor(out.get())->data;
  if (!fill(data, 0, nd, st.shape.data(), dt, p, rt::dtype_itemsize(dt))) return nullptr;
  return out.release();
}

}  // namespace framejit::frontend::tensor_detail
