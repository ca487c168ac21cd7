// Runs a node's body with a recording handler to learn exactly what it reads and writes.
#pragma once
#include <vector>

#include "foundry/ir/loop_ir.h"

namespace foundry::ir {

struct MemoryAccess {
  const Buffer* buffer = nullptr;
  Expr index;  // in the node's loop symbols (i*, r*) and indirect symbols (ind*)
  StoreMode mode = StoreMode::Set;
  bool operator==(const MemoryAccess& o) const { return buffer == o.buffer && index == o.index; }
};

struct Accesses {
  std::vector<MemoryAccess> reads;   // in body order, duplicates removed
  std::vector<MemoryAccess> writes;
};

Accesses record_accesses(const LoopNode& node);

}  // namespace foundry::ir
