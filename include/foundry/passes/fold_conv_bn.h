// Convolution + batch-norm folding (inference): a `convolution` whose only user is an
// `_native_batch_norm_legit_no_training`, with the convolution's weight and bias and the
// normalization's weight, bias, running mean and variance all constant (float32), becomes one
// convolution with
//   s[c]  = gamma[c] / sqrt(var[c] + eps)
//   w'[c] = w[c] * s[c]                        (per output channel)
//   b'[c] = (b[c] - mean[c]) * s[c] + beta[c]
// computed in double and stored as new float32 constants. The batch norm's other two outputs
// ([0]-sized in the inference form) must be unused. Transposed and unbatched convolutions are
// left alone.
#pragma once
#include "foundry/graph/graph.h"

namespace foundry::passes {

bool fold_conv_batch_norm(Graph& g);

}  // namespace foundry::passes
