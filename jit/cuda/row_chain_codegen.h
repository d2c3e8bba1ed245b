// row_chain_codegen.h — PTX for fused row chains (the loop IR's RowChainIR), against Note [CUDA
// row-chain kernel ABI] in runtime/cuda/row_chain.h.
#pragma once

#include <string>

#include "framejit/status.h"
#include "jit/lower/loop_ir.h"

namespace framejit::jit::cuda {

/// Whether the generator takes the chain: parts the pointwise and reduction generators take (no
/// argmax/argmin), forwarded inputs of earlier reductions' types, within the ABI's slots and
/// parameters.
bool row_chain_supported(const RowChainIR& chain);

/// The text of a PTX module with one kernel, `name`, running the chain over rows.
Expected<std::string> row_chain_ptx(const RowChainIR& chain, const std::string& name);

}  // namespace framejit::jit::cuda
