// Dead-code elimination: removes nodes whose outputs nobody uses (neither a later node nor a graph
// output, mutation outputs included) and that have no side effects. Runtime assertions
// (_assert_*) count as removable. Weights, buffers and constants that no node uses any more (for
// instance after folding) are dropped from the graph inputs too, unless a mutation output writes
// them; user inputs always stay, so the signature does not change.
#pragma once
#include "foundry/graph/graph.h"

namespace foundry::passes {

bool eliminate_dead_code(Graph& g);

}  // namespace foundry::passes
