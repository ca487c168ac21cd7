// Activations after a library call, given to the library: a matrix product or convolution whose
// output only an activation reads (FOUNDRY_ACTIVATIONS, of each of its elements, in the call's
// shape or another of the same elements, written as one node or as several) writes the
// activation's output itself, with the activation applied by the call (ExternCall::activation):
// a oneDNN eltwise post-op, or in registers by the depthwise loops.
#pragma once
#include "foundry/ir/loop_ir.h"

namespace foundry::sched {

// Folds such epilogues into their library call and removes their nodes; returns how many calls
// took an activation. Run
// before scheduling, when fusing (`--no-fusion` keeps one step per node).
int fold_activations_into_externs(ir::LoopProgram& program);

}  // namespace foundry::sched
