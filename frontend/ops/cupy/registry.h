// registry.h — installs CuPy's op table (Note [CuPy through NumPy's table]).
#pragma once

namespace framejit::frontend::ops::cupy_ops {

/// Registers the table for CuPy graphs and the CuPy array adapter; once, from module init, after
/// NumPy's table. Needs no CuPy: the table matches CuPy's functions once the program imports it.
bool install_op_table();

}  // namespace framejit::frontend::ops::cupy_ops
