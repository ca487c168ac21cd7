#include "foundry/ir/loop_ir.h"

namespace foundry::ir {
namespace {

// A decorator: simplifies indices with the node's extents, then forwards to the real handler.
class SimplifyingOps final : public Ops {
 public:
  SimplifyingOps(Ops& inner, SymbolExtents extents) : inner_(inner), extents_(std::move(extents)) {}

  Val load(const Buffer& buf, const Expr& index) override { return inner_.load(buf, simplify(index, extents_)); }
  void store(const Buffer& buf, const Expr& index, Val v, StoreMode mode) override {
    inner_.store(buf, simplify(index, extents_), v, mode);
  }
  Val constant(const Scalar& s) override { return inner_.constant(s); }
  Val index_expr(const Expr& e, DType t) override { return inner_.index_expr(simplify(e, extents_), t); }
  Val to_dtype(Val v, DType t) override { return inner_.to_dtype(v, t); }
  Val unary(UnaryOp op, Val x) override { return inner_.unary(op, x); }
  Val binary(BinaryOp op, Val a, Val b) override { return inner_.binary(op, a, b); }
  Val where(Val c, Val a, Val b) override { return inner_.where(c, a, b); }
  Expr indirect(Val v, const Expr& size, ir::NegativeIndex negative) override { return inner_.indirect(v, size, negative); }
  Val reduction(ReduceOp op, Val v) override { return inner_.reduction(op, v); }
  void store_reduction(const Buffer& buf, const Expr& index, Val v) override {
    inner_.store_reduction(buf, simplify(index, extents_), v);
  }

 private:
  Ops& inner_;
  SymbolExtents extents_;
};

}  // namespace

SymbolExtents node_extents(const LoopNode& node) {
  SymbolExtents extents;
  for (size_t d = 0; d < node.ranges.size(); ++d) extents[loop_var(static_cast<int>(d))] = node.ranges[d];
  for (size_t d = 0; d < node.reduction_ranges.size(); ++d)
    extents[reduction_var(static_cast<int>(d))] = node.reduction_ranges[d];
  return extents;
}

void run_body_symbolic(const LoopNode& node, Ops& ops) {
  SimplifyingOps simplifying(ops, node_extents(node));
  node.body(simplifying, node.index_symbols(), node.reduction_symbols());
}

}  // namespace foundry::ir
