// Activations stored channels last between convolutions, through the kernels between them: oneDNN's
// convolutions run on channels-last activations (NHWC, its choice on AVX-512 for float32), and a
// call on NCHW ones reorders its input there and its output back, one copy each per call (one
// thread, 2-core AVX-512 machine, oneDNN's verbose log: 1.1 of torchvision resnet18's 25 ms, 0.8 of
// mobilenet_v2's 8). A convolution's output goes channels last, and so does a pointwise node's that
// takes such an activation channel by channel (a relu, a residual addition, a max pool, a squeeze-
// excitation's gating), when every reader reads it in order: a convolution of all of it, a
// pointwise node whose output goes channels last too or whose innermost loop walks its channels (a
// layer norm over channels through permutations), or a reduction. A pointwise node that would read
// an NCHW activation across (an addition to the model's input) keeps its output NCHW, and so do the
// model's outputs. Only the layout is chosen here (the buffers' strides in the IR, and the
// convolutions' operands with them): storage_order.h then runs the pointwise nodes' loops in that
// order.
#pragma once
#include "foundry/ir/loop_ir.h"

namespace foundry::sched {

// Lays such buffers out channels last, and the convolutions' operands with them; returns how
// many. Run before activations are folded into their convolutions: whether a 1x1 convolution is a
// product on NCHW operands (which takes no activation) depends on the layout.
int keep_channels_last(ir::LoopProgram& program);

}  // namespace foundry::sched
