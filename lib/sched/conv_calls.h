// What kind of convolution a library call is, for the scheduling passes that treat kinds apart
// (epilogue.cpp): depthwise ones on NCHW activations run on foundryc's own loops, and 1x1 ones
// over few channels on oneDNN's product on the operands as stored.
#pragma once
#include "foundry/ir/loop_ir.h"

namespace foundry::sched {

// A convolution whose every output channel reads its own input channel, on NCHW activations:
// these run on foundry_depthwise.h, on rows, when they are wide enough (codegen's
// runs_depthwise); on channels-last ones, oneDNN's kernel is the faster.
bool nchw_depthwise(const ir::LoopNode& call);

// A convolution that oneDNN computes as a product on its operands as stored
// (foundry_rt::conv_is_stored_product), which only pays on NCHW operands without an activation.
bool stored_product(const ir::LoopNode& call);

}  // namespace foundry::sched
