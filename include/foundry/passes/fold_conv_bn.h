// Convolution + batch-norm folding (inference): a `convolution` whose only user is an
// `_native_batch_norm_legit_no_training`, with the convolution's weight and bias and the
// normalization's weight, bias, running mean and variance all constant (float32), is folded: the
// convolution keeps its place and its output value and reads a new weight and bias,
//   s[c]  = gamma[c] / sqrt(var[c] + eps)
//   w'[c] = w[c] * s[c]                        (per output channel)
//   b'[c] = (b[c] - mean[c]) * s[c] + beta[c]
// computed in double and stored as new float32 constants ("<weight>_bn", "<bias>_bn"); readers of
// the batch norm's first output read the convolution's instead. The batch norm's other two
// outputs ([0]-sized in the inference form) must be unused. Transposed and unbatched convolutions
// are left alone; the old weights are left to dead-code elimination.
#pragma once
#include "foundry/graph/graph.h"

namespace foundry::passes {

bool fold_conv_batch_norm(Graph& g);

}  // namespace foundry::passes
