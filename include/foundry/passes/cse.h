// Common-subexpression elimination: two pure nodes with the same op, the same arguments (values
// by identity, numbers compared exactly, floats bitwise) and the same output types compute the
// same thing; the later one is replaced by the earlier. One pass in graph order, so it is
// deterministic and chains collapse (two equal nodes over merged values are merged in turn).
#pragma once
#include "foundry/graph/graph.h"

namespace foundry::passes {

bool eliminate_common_subexpressions(Graph& g);

}  // namespace foundry::passes
