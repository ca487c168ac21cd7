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

// The recording handler itself: values are dummies; indirect indices become fresh symbols.
class RecordingOps final : public Ops {
 public:
  Accesses accesses;
  // Each indirect symbol's range: ind<k> lies in [0, size) (the generated code checks it at run
  // time, the evaluator too), so bounds on accesses can use it.
  SymbolExtents indirect_extents;

  Val load(const Buffer& buf, const Expr& index) override;
  void store(const Buffer& buf, const Expr& index, Val, StoreMode mode) override;
  Val constant(const Scalar& value) override { return fresh(value.dtype); }
  Val index_expr(const Expr&, DType dtype) override { return fresh(dtype); }
  Val to_dtype(Val, DType dtype) override { return fresh(dtype); }
  Val unary(UnaryOp op, Val x) override;
  Val binary(BinaryOp op, Val a, Val b) override;
  Val where(Val, Val a, Val) override { return fresh(a.dtype); }
  Expr indirect(Val, const Expr&, NegativeIndex) override;
  Val reduction(ReduceOp op, Val value) override;
  void store_reduction(const Buffer& buf, const Expr& index, Val) override;

 private:
  int next_ = 0;
  int indirect_count_ = 0;
  Val fresh(DType t) { return Val{next_++, t}; }
};

}  // namespace foundry::ir
