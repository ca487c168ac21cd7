#include "foundry/ir/record.h"

#include <algorithm>

namespace foundry::ir {
namespace {
void add_unique(std::vector<MemoryAccess>& list, const MemoryAccess& a) {
  if (std::find(list.begin(), list.end(), a) == list.end()) list.push_back(a);
}
}  // namespace

Val RecordingOps::load(const Buffer& buf, const Expr& index) {
  add_unique(accesses.reads, {&buf, index, StoreMode::Set});
  return fresh(buf.dtype);
}
void RecordingOps::store(const Buffer& buf, const Expr& index, Val, StoreMode mode) {
  add_unique(accesses.writes, {&buf, index, mode});
}
Val RecordingOps::unary(UnaryOp op, Val x) { return fresh(returns_bool(op) ? DType::Bool : x.dtype); }
Val RecordingOps::binary(BinaryOp op, Val a, Val) { return fresh(returns_bool(op) ? DType::Bool : a.dtype); }
Expr RecordingOps::indirect(Val, const Expr& size, NegativeIndex) {
  std::string name = "ind" + std::to_string(indirect_count_++);
  indirect_extents[name] = size;
  return Expr::sym(name);
}
Val RecordingOps::reduction(ReduceOp op, Val value) { return fresh(reduce_result_dtype(op, value.dtype)); }
void RecordingOps::store_reduction(const Buffer& buf, const Expr& index, Val) {
  add_unique(accesses.writes, {&buf, index, StoreMode::Set});
}

Accesses record_accesses(const LoopNode& node) {
  RecordingOps ops;
  if (node.kind == NodeKind::Extern) {
    for (const Operand* operand : operands(node.call))
      ops.accesses.reads.push_back({operand->buffer, Expr(0), StoreMode::Set});
    ops.accesses.writes.push_back({node.output, Expr(0), StoreMode::Set});
    return ops.accesses;
  }
  run_body_symbolic(node, ops);
  return ops.accesses;
}

}  // namespace foundry::ir
