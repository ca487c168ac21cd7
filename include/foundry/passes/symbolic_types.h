// Symbolic sizes for the nodes a decomposition emits. Shape rules compute sizes at the export's
// hints only; a dim that follows from a dynamic input dim (a batch) must carry its symbolic
// expression too, or the node would be compiled for the export's size. The lowering checks the
// result: a node whose inputs are dynamic but whose recorded sizes are all static is refused.
#pragma once
#include <vector>

#include "foundry/graph/graph.h"

namespace foundry::passes {

// Fills `types[k].symbols` for the outputs of `node` (bound, not yet in a graph) from its inputs'
// symbolic dims: structural rules for matrix products, views, permutations, unsqueeze/squeeze,
// reductions and convolutions; otherwise dims aligned from the right whose hints agree. The
// graph's inputs give each size symbol's hint (to split a product of dynamic sizes in a view).
void propagate_symbols(const Graph& graph, const Node& node, std::vector<TensorType>& types);

}  // namespace foundry::passes
