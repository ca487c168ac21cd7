// Debug builds (foundryc --debug-buffers): every buffer a node computes becomes an output of the
// program, so that the compiled model stores it (no fusion keeps it in registers, no buffer reuse
// overwrites it) and a wrong result can be traced to the first kernel that computed a wrong value.
#pragma once
#include <cstddef>
#include <vector>

#include "foundry/ir/loop_ir.h"

namespace foundry::ir {

// A computed buffer and the nodes that write it (several when a node mutates it in place, as
// index_put does), in program order.
struct ComputedBuffer {
  const Buffer* buffer = nullptr;
  std::vector<const LoopNode*> writers;
};

// The buffers the program's nodes write, in the order of their first writer.
std::vector<ComputedBuffer> computed_buffers(const LoopProgram& program);

// Appends every computed buffer that is not already an output to program.outputs, named after the
// buffer, in program order: the model's own outputs keep their positions. A buffer of a rank the
// C API cannot describe (above FOUNDRY_MAX_RANK) stays internal.
void expose_computed_buffers(LoopProgram& program);

}  // namespace foundry::ir
