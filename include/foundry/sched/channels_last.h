// Activations that pass from one oneDNN convolution to others stored channels last: oneDNN's
// convolutions run on channels-last activations (NHWC, its choice on AVX-512 for float32), and a
// call on NCHW ones reorders its input there and its output back, one copy each per call (on the
// 2-core Xeon, 2.2 of torchvision resnet18's 26 ms at one thread). A buffer that one convolution
// writes and only convolutions read is laid out as they run (its strides, in the IR), and neither
// copy is made. Not for depthwise convolutions, which foundryc runs on NCHW rows, nor for 1x1
// ones run as a product on NCHW operands (sched/conv_calls.h), which are faster than either.
#pragma once
#include "foundry/ir/loop_ir.h"

namespace foundry::sched {

// Lays such buffers out channels last, and the readers' operands with them; returns how many.
// Run after activations are folded into their convolutions (the activation kernel in between
// is gone then).
int keep_channels_last(ir::LoopProgram& program);

}  // namespace foundry::sched
