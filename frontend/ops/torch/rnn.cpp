// rnn.cpp — torch's recurrent layers (torch.lstm, gru, rnn_tanh, rnn_relu: what nn.LSTM, nn.GRU
// and nn.RNN call through torch._VF) as library steps with exact result shapes.
#include "frontend/cpython/pyref.h"
#include "frontend/ops/torch/torch_ops.h"

namespace framejit::frontend::ops::torch_ops {


// Note [Recurrent layers]
// framejit has no recurrence kernel yet, so torch computes the layer: one extern step whose value
// is torch's tuple (output, h_n[, c_n]) — a graph value of kind Object — and one operator.getitem
// step per tensor taken out of it. The module's own forward (hidden-state defaults, shape checks,
// unsqueezing an unbatched input) is traced as usual, so the ops around the layer stay in the graph
// and its weights are graph inputs (the module's _flat_weights list). Result shapes follow the
// call's arguments: the output is the input's shape with its last size D * H_out (D = 2 when
// bidirectional, H_out the hidden state's last size), h_n and c_n have the shapes of the states
// passed in. Not captured: packed sequences (their batch_sizes form), and dropout between layers
// while training (torch's generator draws; the statement runs in CPython).

bool is_rnn_name(const std::string& name) { return name_in(name, {"lstm", "gru", "rnn_tanh", "rnn_relu"}); }

VarPtr rnn_op(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "torch." + name;
  BREAK_IF(!kwargs.empty() || args.size() != 9, user + " called other than as nn." + name + " calls it");
  const bool lstm = name == "lstm";
  // (input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first); the
  // packed form puts batch_sizes second.
  BREAK_IF(args[1]->kind == VarKind::Tensor && args[2]->kind == VarKind::Tensor, user + " of a packed sequence");
  BREAK_IF(lstm && !is_seq(args[1]), user + " of a packed sequence");
  const VarPtr& x = args[0];
  BREAK_IF(x->kind != VarKind::Tensor, user + " of a non-tensor input");
  const jit::TensorMeta xm = tx.meta(x);
  BREAK_IF(xm.rank() != 3, user + " of a " + std::to_string(xm.rank()) + "-d input");
  BREAK_IF(!rt::dtype_is_float(xm.dtype), user + " of a " + std::string(rt::dtype_name(xm.dtype)) + " input");
  std::vector<VarPtr> states = lstm ? as<SeqVar>(args[1])->items : std::vector<VarPtr>{args[1]};
  BREAK_IF(states.size() != (lstm ? 2u : 1u), user + ": hx of the wrong length");
  for (const VarPtr& s : states) {
    BREAK_IF(s->kind != VarKind::Tensor || tx.meta(s).rank() != 3 || tx.meta(s).dtype != xm.dtype,
             user + ": a hidden state that is not a 3-d tensor of the input's dtype");
  }
  BREAK_IF(!is_seq(args[2]), user + ": weights that are not a list of tensors");
  for (const VarPtr& w : as<SeqVar>(args[2])->items)
    BREAK_IF(w->kind != VarKind::Tensor || tx.meta(w).dtype != xm.dtype, user + ": a weight of another dtype than the input");
  BREAK_IF(tx.truth(args[5], user + " dropout") && tx.truth(args[6], user + " train"),
           user + " with dropout while training (torch's generator draws)");
  const bool bidirectional = tx.truth(args[7], user + " bidirectional");
  const bool batch_first = tx.truth(args[8], user + " batch_first");
  (void)batch_first;  // the sequence and batch dims keep their places in the output

  const Shape h = tx.meta(states[0]).shape;
  Shape out = xm.shape;
  out[2] = h[2] * SymInt(bidirectional ? 2 : 1);
  jit::TensorMeta tuple;
  tuple.kind = jit::ValueKind::Object;
  VarPtr result = add_node(tx, jit::OpKind::Extern, {}, user, args, kwargs, std::move(tuple));
  std::vector<VarPtr> items;
  for (size_t i = 0; i <= states.size(); ++i) {
    const Shape shape = i == 0 ? out : tx.meta(states[i - 1]).shape;
    items.push_back(add_node(tx, jit::OpKind::Extern, {}, "operator.getitem",
                             {result, int_const(tx, static_cast<int64_t>(i))}, {}, tensor_meta(xm.dtype, shape)));
  }
  return std::make_shared<SeqVar>(VarKind::Tuple, std::move(items));
}

}  // namespace framejit::frontend::ops::torch_ops
