// Decomposition of training-IR ops into core ATen ops: programs saved straight from
// torch.export.export without run_decompositions() ("verifiers": ["TRAINING"]) use composite ops
// (linear, conv2d, batch_norm, layer_norm, scaled_dot_product_attention, reshape, ...) and in-place
// ops (relu_, add_.Tensor, hardswish_, ...). This pass rewrites them into the ops the lowering
// knows, with the numerics of PyTorch's own decompositions:
//
//   1. In-place ops become functional: `y = relu_(x)` becomes `y = relu(x)`, and every later reader
//      of `x` (node or graph output) reads `y` instead. Updating a graph input (directly or
//      through views), or a value sharing storage (through views) with a value read after the
//      update, is refused (UserError naming the node): a functional graph cannot express it.
//   2. Composite ops are rewritten by rules (see the table in lib/passes/decompose.cpp), e.g.
//        linear(x, w, b)          -> addmm(b, view(x, [-1, K]), permute(w, [1, 0])), view back
//        conv2d                   -> convolution(..., transposed=False, output_padding=[0, 0], ...)
//        batch_norm (inference)   -> _native_batch_norm_legit_no_training(...)[0]
//        layer_norm               -> native_layer_norm(...)[0]
//        scaled_dot_product_attention -> q*sqrt(s) @ (k^T*sqrt(s)) (+ mask), safe softmax, @ v
//        hardswish/hardsigmoid    -> clamp(x + 3, 0, 6) (* x) / 6;  silu -> x * sigmoid(x)
//        reshape/flatten/unflatten/view_as -> view;  transpose -> permute;  chunk/split -> split_with_sizes
//        dropout (inference), contiguous, to (same dtype) -> their input / clone / _to_copy
//      A composite op that cannot be decomposed as it stands (batch_norm in training mode,
//      dropout with p > 0 in training mode, attention with dropout) is a UserError naming it.
// Composite nodes whose results are all unused are left for dead-code elimination. Graphs
// without such ops are left unchanged; the pass runs on every graph.
#pragma once
#include <string>
#include <vector>

#include "foundry/graph/graph.h"

namespace foundry::passes {

bool decompose_training_ops(Graph& g);

// The op names (registry names, e.g. "linear", "relu_") the pass rewrites.
std::vector<std::string> decomposed_ops();

}  // namespace foundry::passes
