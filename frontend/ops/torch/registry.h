// registry.h — installs torch's op table (Note [Torch ops]).
#pragma once

namespace framejit::frontend::ops::torch_ops {

/// Registers the table for torch graphs and the torch array adapter; once, from module init. Needs
/// no torch: the table finds torch's callables when the program has imported it.
bool install_op_table();

}  // namespace framejit::frontend::ops::torch_ops
