// The memory-safety check of a lowered program: no load or store of any node can reach outside
// its buffer's storage. Shape rules keep well-formed graphs in bounds; this is the net under them
// for every op and view (issue 16), so that a hostile graph is a compile error, never a kernel
// that reads or writes someone else's memory.
#pragma once
#include "foundry/ir/loop_ir.h"

namespace foundry::lower {

// Throws UserError naming the ATen node, the buffer and the element reached when an access is
// provably outside its buffer for some iteration (with the loop ranges, and data-dependent indices
// in the range the kernels check at run time). Symbolic sizes are assumed >= 1. Only indices whose
// interval bounds are exact (affine, constant coefficients) are judged, so that a loose bound never
// refuses a valid model; the others are left to the shape rules and the lowerings' own checks.
// With dynamic sizes, an access whose bound depends on how the sizes relate (an index with more
// rows than the tensor it gathers from) adds the relation it needs to program.size_checks, checked
// when the model runs.
void check_memory_bounds(ir::LoopProgram& program);

}  // namespace foundry::lower
