// The reference evaluator: runs the unfused loop IR directly with plain loops (an evaluating `Ops`
// handler; extern calls get plain-loop implementations). Slow on purpose-free simplicity: it is
// the reference that lowerings are proven against and that later differential tests compare to.
#pragma once
#include <vector>

#include "foundry/ir/loop_ir.h"
#include "foundry/runtime/npy.h"

namespace foundry::ir {

// Inputs in program input order (their dtype and shape must match); returns the outputs in
// program output order, C-contiguous. Throws UserError on a mismatched input or an out-of-bounds
// indirect index.
std::vector<NpyArray> evaluate_program(const LoopProgram& program, const std::vector<NpyArray>& inputs);

// The same run, returning the contents of `buffers` (any of the program's buffers, e.g. every
// computed one) as they are at the end of the program, in the order given.
std::vector<NpyArray> evaluate_program_buffers(const LoopProgram& program, const std::vector<NpyArray>& inputs,
                                               const std::vector<const Buffer*>& buffers);

}  // namespace foundry::ir
