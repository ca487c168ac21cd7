// Activations after a library call, given to the library: a matrix product or convolution whose
// only reader is relu, tanh, sigmoid or GELU of each of its elements (in the call's shape or
// another of the same elements) writes the activation's output itself, with the activation
// applied as a oneDNN eltwise post-op (ExternCall::activation).
#pragma once
#include "foundry/ir/loop_ir.h"

namespace foundry::sched {

// Folds such epilogues into their library call and removes their nodes; returns how many. Run
// before scheduling, when fusing (`--no-fusion` keeps one step per node).
int fold_activations_into_externs(ir::LoopProgram& program);

}  // namespace foundry::sched
