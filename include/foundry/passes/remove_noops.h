// Removal of nodes that compute nothing: each is replaced by its input.
//   - runtime assertions (_assert_scalar, _assert_tensor_metadata);
//   - alias; clone, contiguous, _to_copy to the same dtype and copy of a same-typed source (these
//     only when the graph has no in-place or opaque node that could observe the aliasing);
//   - view, expand, squeeze, unsqueeze, flatten, unflatten, slice and repeat that keep the shape;
//     permute with identity dims, transpose of a dim with itself, flip of no dims (or of size-1
//     dims), constant_pad_nd with zero padding, cat of one tensor, split_with_sizes into one part,
//     dropout in inference mode;
//   - a chain of reshapes (view, squeeze, unsqueeze, flatten, unflatten) that comes back to its
//     source's shape (unsqueeze then squeeze, view there and back).
#pragma once
#include "foundry/graph/graph.h"

namespace foundry::passes {

bool remove_noops(Graph& g);

}  // namespace foundry::passes
