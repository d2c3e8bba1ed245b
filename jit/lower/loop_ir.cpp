// loop_ir.cpp — names, printing and cache keys of loop-level kernels.
#include "jit/lower/loop_ir.h"

#include <cstdio>
#include <vector>

#include "runtime/executor.h"

namespace framejit::jit {

namespace {
struct OpInfo {
  const char* name;
  int arity;
};
constexpr OpInfo kOps[] = {
    {"load", 0},  {"param", 0}, {"const", 0}, {"cast", 1},    {"neg", 1},   {"abs", 1},
    {"sqrt", 1},  {"square", 1}, {"reciprocal", 1}, {"exp", 1}, {"log", 1}, {"log1p", 1},
    {"expm1", 1}, {"tanh", 1},  {"sigmoid", 1}, {"sin", 1},   {"cos", 1},   {"tan", 1},
    {"atan", 1},  {"erf", 1},   {"floor", 1}, {"ceil", 1},  {"add", 2},     {"sub", 2},   {"mul", 2},
    {"div", 2},   {"max", 2},   {"min", 2},   {"pow", 2},     {"atan2", 2}, {"eq", 2},
    {"ne", 2},    {"lt", 2},    {"le", 2},    {"gt", 2},      {"ge", 2},    {"and", 2},
    {"or", 2},    {"xor", 2},   {"not", 1},   {"floordiv", 2}, {"mod", 2},  {"where", 3},
};
static_assert(sizeof(kOps) / sizeof(kOps[0]) == static_cast<int>(ScalarOp::Where) + 1);
}  // namespace

bool scalar_op_is_math(ScalarOp op) {
  switch (op) {
    case ScalarOp::Exp:
    case ScalarOp::Log:
    case ScalarOp::Log1p:
    case ScalarOp::Expm1:
    case ScalarOp::Tanh:
    case ScalarOp::Sigmoid:
    case ScalarOp::Sin:
    case ScalarOp::Cos:
    case ScalarOp::Tan:
    case ScalarOp::Atan:
    case ScalarOp::Erf:
    case ScalarOp::Pow:
    case ScalarOp::Atan2: return true;
    default: return false;
  }
}

const char* scalar_op_name(ScalarOp op) { return kOps[static_cast<int>(op)].name; }

std::string GemmKernelIR::key() const {
  return "gemm " + std::string(rt::dtype_name(dtype)) + " c" + std::to_string(c_input) + "\n" + epilogue.key();
}

// Note [Sigmoid from its formula]
// NumPy code writes the logistic function out, `1 / (1 + np.exp(-x))`, and torch.sigmoid arrives
// decomposed the same way; evaluated as written it costs an exp, an add and a correctly rounded
// division, and overflows exp for x < -88 on the way to an answer near zero. The sigmoid routine
// (jit/math/tanh_sigmoid.h) takes exp(-|x|) in (0, 1] and divides by 1 + e in [1, 2], where a
// GPU may use its reciprocal (PtxOps::div_normal): on the H200 the gelu chain of
// samples/gpu_bench.py went from 2776 to 3008 GB/s with it. The result is within the routine's
// 2 ulp of the true sigmoid, as the formula's own (exp's ulp, then two roundings) is within about
// 2 ulp; the two may differ in the last bits, as framejit's exp already differs from NumPy's, and
// below x = -88.7 (float32) the routine gives the true tiny value where the formula's exp(-x)
// overflows and 1 / inf is 0.
void fuse_sigmoid(PointwiseKernelIR& ir) {
  const int n = static_cast<int>(ir.body.size());
  std::vector<int> uses(static_cast<size_t>(n), 0);
  for (const ScalarExpr& e : ir.body)
    for (int k : {e.a, e.b, e.c})
      if (k >= 0) ++uses[static_cast<size_t>(k)];
  for (int o : ir.outputs) uses[static_cast<size_t>(o)] += 2;  // an output is never folded away
  auto expr = [&](int k) -> const ScalarExpr& { return ir.body[static_cast<size_t>(k)]; };
  auto is_one = [&](int k) { return expr(k).op == ScalarOp::Const && expr(k).fconst == 1.0; };
  auto only_use = [&](int k, ScalarOp op, DType t) {
    return k >= 0 && uses[static_cast<size_t>(k)] == 1 && expr(k).op == op && expr(k).dtype == t;
  };
  bool changed = false;
  for (int i = 0; i < n; ++i) {
    ScalarExpr& e = ir.body[static_cast<size_t>(i)];
    if (e.dtype != DType::Float32 && e.dtype != DType::Float64) continue;
    int sum = -1;
    if (e.op == ScalarOp::Reciprocal) sum = e.a;
    else if (e.op == ScalarOp::Div && is_one(e.a)) sum = e.b;
    if (!only_use(sum, ScalarOp::Add, e.dtype)) continue;
    const ScalarExpr& add = expr(sum);
    const int ex = is_one(add.a) ? add.b : is_one(add.b) ? add.a : -1;
    if (!only_use(ex, ScalarOp::Exp, e.dtype) || !only_use(expr(ex).a, ScalarOp::Neg, e.dtype)) continue;
    const int x = expr(expr(ex).a).a;
    --uses[static_cast<size_t>(sum)];
    --uses[static_cast<size_t>(ex)];
    --uses[static_cast<size_t>(expr(ex).a)];
    if (e.op == ScalarOp::Div) --uses[static_cast<size_t>(e.a)];
    e = ScalarExpr{ScalarOp::Sigmoid, e.dtype, x};
    changed = true;
  }
  if (!changed) return;
  // Drop what is dead now (uses counted again: a dropped chain frees its operands' uses too).
  std::vector<char> live(static_cast<size_t>(n), 0);
  for (int o : ir.outputs) live[static_cast<size_t>(o)] = 1;
  for (int i = n - 1; i >= 0; --i) {
    const ScalarExpr& e = ir.body[static_cast<size_t>(i)];
    if (e.op == ScalarOp::Load || e.op == ScalarOp::Param) live[static_cast<size_t>(i)] = 1;
    if (!live[static_cast<size_t>(i)]) continue;
    for (int k : {e.a, e.b, e.c})
      if (k >= 0) live[static_cast<size_t>(k)] = 1;
  }
  std::vector<int> index(static_cast<size_t>(n), -1);
  std::vector<ScalarExpr> body;
  for (int i = 0; i < n; ++i) {
    if (!live[static_cast<size_t>(i)]) continue;
    ScalarExpr e = ir.body[static_cast<size_t>(i)];
    for (int* k : {&e.a, &e.b, &e.c})
      if (*k >= 0) *k = index[static_cast<size_t>(*k)];
    index[static_cast<size_t>(i)] = static_cast<int>(body.size());
    body.push_back(e);
  }
  ir.body = std::move(body);
  for (int& o : ir.outputs) o = index[static_cast<size_t>(o)];
}

PointwiseKernelIR copy_kernel(DType dtype) {
  PointwiseKernelIR ir;
  ir.input_dtypes = {dtype};
  ScalarExpr load{ScalarOp::Load, dtype};
  load.input = 0;
  ir.body = {load};
  ir.outputs = {0};
  ir.output_dtypes = {dtype};
  return ir;
}

bool PointwiseKernelIR::well_formed() const {
  if (body.empty() || outputs.empty() || output_dtypes.size() != outputs.size()) return false;
  if (input_dtypes.size() + outputs.size() > static_cast<size_t>(rt::kMaxKernelOperands)) return false;
  if (param_dtypes.size() > static_cast<size_t>(rt::kMaxKernelParams)) return false;
  for (size_t j = 0; j < outputs.size(); ++j)
    if (body[outputs[j]].dtype != output_dtypes[j]) return false;
  for (const ScalarExpr& e : body)
    if (e.op == ScalarOp::Load && e.dtype != input_dtypes[e.input]) return false;
  return true;
}

std::string PointwiseKernelIR::to_string() const {
  std::string s = "pointwise(";
  for (size_t i = 0; i < input_dtypes.size(); ++i)
    s += (i ? ", in" : "in") + std::to_string(i) + ": " + std::string(rt::dtype_short_name(input_dtypes[i]));
  for (size_t i = 0; i < param_dtypes.size(); ++i)
    s += ", p" + std::to_string(i) + ": " + std::string(rt::dtype_short_name(param_dtypes[i]));
  s += "):\n";
  for (size_t i = 0; i < body.size(); ++i) {
    const ScalarExpr& e = body[i];
    s += "  t" + std::to_string(i) + " = " + scalar_op_name(e.op) + "(";
    if (e.op == ScalarOp::Load) s += "in" + std::to_string(e.input);
    if (e.op == ScalarOp::Param) s += "p" + std::to_string(e.input);
    if (e.op == ScalarOp::Const) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", e.fconst);
      s += buf;
    }
    if (e.c >= 0) s += "t" + std::to_string(e.c) + ", ";
    if (e.a >= 0) s += "t" + std::to_string(e.a);
    if (e.b >= 0) s += ", t" + std::to_string(e.b);
    s += ") : " + std::string(rt::dtype_short_name(e.dtype)) + "\n";
  }
  for (size_t j = 0; j < outputs.size(); ++j)
    s += "  out" + std::to_string(j) + " = t" + std::to_string(outputs[j]) + "\n";
  return s;
}

std::string PointwiseKernelIR::key() const {
  // The printed form names every operation, operand, dtype and constant (17 digits round-trip).
  return to_string();
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::ArgMax: return "argmax";
    case ReduceOp::ArgMin: return "argmin";
  }
  return "?";
}

std::string ReductionKernelIR::to_string() const {
  std::string s = std::string("reduce_") + (mean ? "mean" : reduce_op_name(op));
  if (mean && ddof != 0) s += "(ddof=" + std::to_string(ddof) + ")";
  if (sqrt) s += " then sqrt";
  if (store_value) s += ", storing the values";
  return s + " of:\n" + prologue.to_string();
}

std::string RowChainIR::to_string() const {
  std::string out;
  for (size_t j = 0; j < parts.size(); ++j) {
    const Part& p = parts[j];
    out += "part " + std::to_string(j) + ":";
    for (size_t k = 0; k < p.forwarded.size(); ++k)
      if (p.forwarded[k] >= 0) out += " in" + std::to_string(k) + " = part " + std::to_string(p.forwarded[k]) + ";";
    for (size_t k = 0; k < p.cached.size(); ++k)
      if (p.cached[k] >= 0) out += " in" + std::to_string(k) + " cached as row " + std::to_string(p.cached[k]) + ";";
    out += "\n" + (p.reduction ? p.red.to_string() : p.kernel.to_string());
  }
  return out;
}

bool has_half_types(const PointwiseKernelIR& ir) {
  for (DType t : ir.input_dtypes)
    if (rt::dtype_is_half(t)) return true;
  for (const ScalarExpr& e : ir.body)
    if (rt::dtype_is_half(e.dtype)) return true;
  return false;
}

bool half_types_placed(const PointwiseKernelIR& ir) {
  for (const ScalarExpr& e : ir.body) {
    if (!rt::dtype_is_half(e.dtype) || e.op == ScalarOp::Load) continue;
    if (e.op != ScalarOp::Cast || e.a < 0) return false;
    const DType from = ir.body[e.a].dtype;
    if (from != DType::Float32 && from != DType::Bool && from != DType::UInt8 && !rt::dtype_is_half(from)) return false;
  }
  return true;
}

std::optional<PointwiseKernelIR> reduction_prologue(const ReductionKernelIR& r) {
  const PointwiseKernelIR& ir = r.prologue;
  if (ir.outputs.size() != 1 || ir.output_dtypes.size() != 1) return std::nullopt;
  if (!half_types_placed(ir)) return std::nullopt;  // Note [Half types]
  const DType dtype = r.dtype();
  const bool fp = dtype == DType::Float32 || dtype == DType::Float64;
  if (is_arg_reduce(r.op) && (r.mean || r.sqrt || r.store_value)) return std::nullopt;
  if (r.sqrt && !r.mean) return std::nullopt;
  if ((r.mean || r.store_value) && !fp) return std::nullopt;
  switch (dtype) {
    case DType::Float32:
    case DType::Float64:
    case DType::Int32:
    case DType::Int64:
    case DType::UInt8: return ir;
    case DType::Bool:
      if (r.op == ReduceOp::Sum || r.op == ReduceOp::Prod) return std::nullopt;
      return ir;
    case DType::UInt64: {
      if (r.op != ReduceOp::Sum && r.op != ReduceOp::Prod) return std::nullopt;
      const ScalarExpr& last = ir.body.at(ir.outputs[0]);
      if (last.op != ScalarOp::Cast || last.a < 0) return std::nullopt;
      const DType from = ir.body[last.a].dtype;
      if (from != DType::UInt8 && from != DType::Bool) return std::nullopt;
      PointwiseKernelIR twin = ir;
      twin.body[ir.outputs[0]].dtype = DType::Int64;
      twin.output_dtypes[0] = DType::Int64;
      return twin;
    }
    default: return std::nullopt;
  }
}

}  // namespace framejit::jit
