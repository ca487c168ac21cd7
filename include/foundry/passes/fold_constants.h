// Constant folding: a node whose tensor arguments are all known at compile time (weights,
// buffers and constants that nothing mutates, or outputs of such nodes) is computed now, by
// lowering the constant subgraph to loop IR and running the reference evaluator. Each value that
// the rest of the graph reads from a constant subgraph becomes a new constant input ("folded_N",
// owning its bytes); the subgraph is then removed, and weights nobody reads any more are left to
// dead-code elimination.
//
// Not folded, at the subgraph's edge (they stay in the graph, reading the folded values or the
// weights):
//   - views (permute of a linear weight stays an index remap: folding would copy the weight);
//   - creation ops with no tensor argument (full, arange, ...): a fill is cheaper than a load;
//   - results much larger than the weights they are computed from (see FoldOptions);
//   - ops without a lowering, impure ops, symbolic sizes.
#pragma once
#include <cstdint>

#include "foundry/graph/graph.h"

namespace foundry::passes {

struct FoldOptions {
  // A folded value may take at most max(small_bytes, max_growth * bytes of the weights it is
  // computed from): an expand or repeat of a small weight must not bloat the model.
  double max_growth = 2.0;
  int64_t small_bytes = 4096;
};

bool fold_constants(Graph& g);
bool fold_constants(Graph& g, const FoldOptions& options);

}  // namespace foundry::passes
