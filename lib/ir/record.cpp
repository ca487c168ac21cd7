#include "foundry/ir/record.h"

#include <algorithm>

namespace foundry::ir {
namespace {

// Values are dummies; only memory accesses matter. Indirect indices become fresh symbols.
class RecordingOps final : public Ops {
 public:
  Accesses accesses;

  Val load(const Buffer& buf, const Expr& index) override {
    add(accesses.reads, {&buf, index, StoreMode::Set});
    return fresh(buf.dtype);
  }
  void store(const Buffer& buf, const Expr& index, Val, StoreMode mode) override {
    add(accesses.writes, {&buf, index, mode});
  }
  Val constant(const Scalar& value) override { return fresh(value.dtype); }
  Val index_expr(const Expr&, DType dtype) override { return fresh(dtype); }
  Val to_dtype(Val, DType dtype) override { return fresh(dtype); }
  Val unary(UnaryOp op, Val x) override { return fresh(returns_bool(op) ? DType::Bool : x.dtype); }
  Val binary(BinaryOp op, Val a, Val) override {
    return fresh(returns_bool(op) ? DType::Bool : a.dtype);
  }
  Val where(Val, Val a, Val) override { return fresh(a.dtype); }
  Expr indirect(Val, const Expr&) override { return Expr::sym("ind" + std::to_string(indirect_count_++)); }
  Val reduction(ReduceOp op, Val value) override {
    return fresh(reduce_result_dtype(op, value.dtype));
  }
  void store_reduction(const Buffer& buf, const Expr& index, Val) override {
    add(accesses.writes, {&buf, index, StoreMode::Set});
  }

 private:
  int next_ = 0;
  int indirect_count_ = 0;
  Val fresh(DType t) { return Val{next_++, t}; }
  static void add(std::vector<MemoryAccess>& list, const MemoryAccess& a) {
    if (std::find(list.begin(), list.end(), a) == list.end()) list.push_back(a);
  }
};

}  // namespace

Accesses record_accesses(const LoopNode& node) {
  RecordingOps ops;
  if (node.kind == NodeKind::Extern) {
    for (const auto& operand : node.call.inputs)
      if (operand.buffer) ops.accesses.reads.push_back({operand.buffer, Expr(0), StoreMode::Set});
    ops.accesses.writes.push_back({node.output, Expr(0), StoreMode::Set});
    return ops.accesses;
  }
  run_body_symbolic(node, ops);
  return ops.accesses;
}

}  // namespace foundry::ir
