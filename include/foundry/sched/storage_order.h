// Loops in the order their output is stored: a pointwise node writing a buffer laid out other
// than row-major in its shape (an activation stored channels last, sched/channels_last.h) runs
// its loops from the largest stride to the smallest, so that its stores, and the reads of inputs
// stored alike, walk memory in order and the innermost loop runs in vectors (over the channels of
// a pixel), instead of across with a stride of the channel count.
#pragma once
#include "foundry/ir/loop_ir.h"

namespace foundry::sched {

// Reorders such nodes' loops (their ranges, and their bodies' indices with them); returns how many.
// Run after the passes that match node bodies against their output's own index
// (fold_activations_into_externs), before scheduling.
int loop_in_storage_order(ir::LoopProgram& program);

}  // namespace foundry::sched
