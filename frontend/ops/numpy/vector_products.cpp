// vector_products.cpp — the jit backend's form of a dot product of two vectors: the elementwise
// product and a sum, which run as one fused reduction kernel instead of a library call.
#include "frontend/ops/numpy/vector_products.h"

#include <utility>

#include "frontend/ops/numpy/canonical.h"

namespace framejit::frontend::ops {

// Note [Vector products]
// A product with a 1-d operand is a reduction of a broadcast elementwise product:
//   a(n) @ b(n)          = sum(a * b)                   (NumPy hands back a scalar)
//   A(..., m, n) @ x(n)  = sum(A * x, axis=-1)          (np.dot the same)
//   x(n) @ B(..., n, k)  = sum(x[:, None] * B, axis=-2) (np.dot the same)
// framejit's GEMM takes matrices only, so the library call was the only way to run these, and in
// code written around them (NPBench's lu, trisolv, gramschmidt, symm: one 1-d dot per element,
// unrolled) the calls dominated. As a reduction whose prologue is the product, the product is
// never materialized and the surrounding elementwise work fuses with it.
//
// On the x86 backend only the first form is rewritten: a 1-d dot runs 1.3x faster than the library call at
// every size measured (n = 60 to 4 M). The other two lose to BLAS's gemv as reductions
// (measured on the 2-core CI machine, medians of 9): A @ x runs a call per output row, 0.09x at
// (1000, 16), 0.37x at (200, 200), 0.92x at (1000, 1000); x @ B's column reduction runs on one
// thread below 8 K columns, 0.26-0.66x. Fused into the work around them they can win (NPBench's
// gesummv, two products and their sum, ran 3.4x NumPy), but a product alone must not get slower:
// they wait for the reduction work of the x86 never-slower issue (short rows, column splits).
//
// On a CUDA device all three forms are rewritten, since an extern step cannot run there at all
// (NPBench's atax, bicg, gemver, gesummv and mvt declined their whole graph for one `A @ x`).
// Measured on an H200 (4000 x 5000, medians of 30, against CuPy's cuBLAS gemv): A @ x as a row
// reduction 70 us (cuBLAS 73-79) in float64, 52-60 us (55-61) in float32; x @ A as a column
// reduction 170-187 us (cuBLAS 73-77) and 148-176 (55-60): behind, and so are atax, bicg and mvt
// (0.55-0.66x CuPy) while gemver and gesummv, whose products fuse with the work around them, run
// 1.6-2.0x. The column form as a (1, n) @ A product was no better (162 / 105 us, framejit's
// small-product kernel), nor was loading four elements per step before combining them (the
// loop's latency is not the limit). The column reductions' kernel is the work left.
//
// Only the jit backend's graph is rewritten (the eager backend keeps the library call, bit for
// bit). The sum adds in a different order than BLAS's dot: results agree to rounding, as two BLAS
// builds do. Only float32/float64 operands of one dtype. The contracted sizes are equal wherever
// the graph runs: the trace guards them equal (linalg() in linalg.cpp), so the product cannot
// turn a size mismatch, which matmul raises on, into a broadcast.

namespace {

using jit::Arg;
using jit::TensorMeta;

struct Rewrite {
  int node = -1;  // the product
  std::vector<int> added;  // the nodes appended for it, in order; the last computes its value
};

bool is_float(rt::DType t) { return t == rt::DType::Float32 || t == rt::DType::Float64; }

// Appends the reduction form of product `i` to `g`; false when the node is not such a product.
// `matrices`: the matrix-vector forms too.
bool append_reduction(jit::Graph& g, int i, bool matrices, Rewrite& out) {
  const jit::Node& node = g.node(i);
  if (node.kind != jit::NodeKind::Call || (node.op != jit::OpKind::Matmul && node.op != jit::OpKind::Dot)) return false;
  if (!node.attrs.described || node.args.size() != 2 || !node.kwargs.empty() || !node.args[0].is_node() ||
      !node.args[1].is_node())
    return false;
  const int a = static_cast<int>(node.args[0].i), b = static_cast<int>(node.args[1].i);
  const TensorMeta ma = g.node(a).meta, mb = g.node(b).meta, m = node.meta;
  auto plain = [&](const TensorMeta& t) {
    return t.kind == jit::ValueKind::Tensor && !t.scalar_object && t.dtype == m.dtype;
  };
  if (m.kind != jit::ValueKind::Tensor || !is_float(m.dtype) || !plain(ma) || !plain(mb)) return false;
  if (ma.rank() == 0 || mb.rank() == 0 || (ma.rank() > 1 && mb.rank() > 1)) return false;
  if ((ma.rank() != 1 || mb.rank() != 1) && !matrices) return false;  // see the Note
  // x(n) @ B(..., n, k) with B of rank > 2 broadcasts for matmul only; np.dot pairs x with every
  // matrix of B the same way, so both are sum(x[:, None] * B, axis=-2).

  out.node = i;
  TensorMeta prod = m;
  prod.scalar_object = false;
  prod.layout = jit::Layout::Contiguous;
  int left = a;
  if (ma.rank() == 1 && mb.rank() > 1) {  // x as a column: (n, 1)
    TensorMeta col = ma;
    col.shape.push_back(jit::SymInt(1));
    left = add_canonical_call(g, "numpy.reshape", {Arg::node(a), Arg::tuple({Arg::integer(-1), Arg::integer(1)})}, {},
                              col);
    out.added.push_back(left);
  }
  prod.shape = mb.rank() > 1 ? mb.shape : ma.shape;  // the larger operand's shape: x broadcasts to it
  const int mul = add_canonical_call(g, "numpy.multiply", {Arg::node(left), Arg::node(b)}, {}, prod);
  out.added.push_back(mul);
  std::vector<std::pair<std::string, Arg>> axis;
  if (ma.rank() > 1) axis.emplace_back("axis", Arg::integer(-1));
  if (mb.rank() > 1) axis.emplace_back("axis", Arg::integer(-2));
  out.added.push_back(add_canonical_call(g, "method.sum", {Arg::node(mul)}, std::move(axis), m));
  return true;
}

}  // namespace

std::optional<jit::Graph> vector_products_as_reductions(const jit::Graph& graph, bool on_device) {
  if (graph.dtype_module != "numpy") return std::nullopt;  // targets below are NumPy's
  const int n = static_cast<int>(graph.nodes().size());
  std::vector<Rewrite> rewrites;
  std::optional<jit::Graph> out;
  for (int i = 0; i < n; ++i) {
    const jit::Node& node = graph.node(i);
    if (node.op != jit::OpKind::Matmul && node.op != jit::OpKind::Dot) continue;
    if (!out) out = graph;  // copied only when there is something to rewrite
    Rewrite r;
    if (append_reduction(*out, i, on_device, r)) rewrites.push_back(std::move(r));
  }
  if (rewrites.empty()) return std::nullopt;
  // The appended nodes move to just before the product they replace, which goes; its readers
  // read the sum. Graph::rebuild maps references through `remap`, appended nodes included.
  std::vector<jit::Node>& nodes = out->nodes();
  const int total = static_cast<int>(nodes.size());
  std::vector<int> remap(total, -1);
  std::vector<jit::Node> order;
  order.reserve(total);
  size_t next = 0;
  for (int i = 0; i < n; ++i) {
    if (next < rewrites.size() && rewrites[next].node == i) {
      for (int k : rewrites[next].added) {
        remap[k] = static_cast<int>(order.size());
        order.push_back(std::move(nodes[k]));
      }
      remap[i] = remap[rewrites[next].added.back()];
      ++next;
      continue;
    }
    remap[i] = static_cast<int>(order.size());
    order.push_back(std::move(nodes[i]));
  }
  out->rebuild(std::move(order), remap);
  return out;
}

}  // namespace framejit::frontend::ops
