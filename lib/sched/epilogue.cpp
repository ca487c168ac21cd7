// Matching an epilogue is define-by-run like everything else: the candidate node's body runs
// through a handler that only accepts store(out[i], f(load(src[i]))) with f an activation oneDNN
// has as an eltwise post-op, both indices the plain position of i in the same shape. A SiLU
// (x * sigmoid(x)) is not folded: oneDNN's swish post-op made samples/effnet_block's depthwise and
// 1x1 convolutions 0.28 ms slower each at one thread, as much as the SiLU kernel it would save.
#include "foundry/sched/epilogue.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "foundry/ir/ops.h"
#include "foundry/ir/record.h"

namespace foundry::sched {

using ir::BinaryOp;
using ir::Expr;
using ir::UnaryOp;
using ir::Val;

namespace {

class ActivationMatcher final : public ir::Ops {
 public:
  ActivationMatcher(const ir::Buffer& src, const ir::LoopNode& node)
      : src_(src), out_(*node.output), index_(ir::simplify(node.output->linear_index(node.index_symbols()),
                                                            ir::node_extents(node))) {}

  // The activation, or nullopt when the body is anything else.
  std::optional<ir::Activation> activation() const {
    return ok_ && stored_ ? activation_ : std::nullopt;
  }

  Val load(const ir::Buffer& buf, const Expr& index) override {
    return give(&buf == &src_ && index == index_ && buf.dtype == DType::Float32 ? kSource : kOther);
  }
  void store(const ir::Buffer& buf, const Expr& index, Val value, ir::StoreMode mode) override {
    ok_ = ok_ && !stored_ && &buf == &out_ && index == index_ && mode == ir::StoreMode::Set &&
          value.id == kActivated && buf.dtype == DType::Float32;
    stored_ = true;
  }
  Val constant(const ir::Scalar& value) override {
    return give(value.as_double() == 0 ? kZero : kOther);
  }
  Val unary(UnaryOp op, Val x) override {
    if (x.id == kSource && (op == UnaryOp::Tanh || op == UnaryOp::Sigmoid))
      return activated(op == UnaryOp::Tanh ? ir::Activation::Tanh : ir::Activation::Sigmoid);
    return give(kOther);
  }
  Val binary(BinaryOp op, Val a, Val b) override {
    const bool relu = op == BinaryOp::Maximum && ((a.id == kSource && b.id == kZero) || (a.id == kZero && b.id == kSource));
    return relu ? activated(ir::Activation::Relu) : give(kOther);
  }
  Val index_expr(const Expr&, DType) override { return give(kOther); }
  Val to_dtype(Val, DType) override { return give(kOther); }
  Val where(Val, Val, Val) override { return give(kOther); }
  Expr indirect(Val, const Expr&) override {
    ok_ = false;
    return Expr(0);
  }
  Val reduction(ir::ReduceOp, Val) override { return give(kOther); }
  void store_reduction(const ir::Buffer&, const Expr&, Val) override { ok_ = false; }

 private:
  enum Kind { kOther, kSource, kZero, kActivated };
  Val give(Kind k) { return Val{k, DType::Float32}; }
  Val activated(ir::Activation activation) {
    if (activation_) ok_ = false;  // one activation, applied once
    activation_ = activation;
    return give(kActivated);
  }

  const ir::Buffer& src_;
  const ir::Buffer& out_;
  Expr index_;
  std::optional<ir::Activation> activation_;
  bool ok_ = true, stored_ = false;
};

}  // namespace

int fold_activations_into_externs(ir::LoopProgram& program) {
  std::map<const ir::Buffer*, std::vector<ir::LoopNode*>> readers;
  for (const auto& node : program.nodes)
    for (const auto& r : ir::record_accesses(*node).reads) {
      auto& list = readers[r.buffer];
      if (list.empty() || list.back() != node.get()) list.push_back(node.get());
    }
  std::set<const ir::LoopNode*> removed;
  for (const auto& node : program.nodes) {
    if (node->kind != ir::NodeKind::Extern || node->call.activation != ir::Activation::None) continue;
    // Only oneDNN's calls take post-ops (LAPACK and sorting have none).
    if (!std::holds_alternative<ir::Matmul>(node->call.op) && !std::holds_alternative<ir::Convolution>(node->call.op))
      continue;
    // oneDNN 2.6 applies a deconvolution's post-ops in a scalar loop of its own after the
    // computation (the U-Net sample's: relu 0.26 -> 1.6 ms, tanh 0.55 -> 6.2 ms at one thread):
    // a kernel applies them far faster, fused with the output's readers.
    if (const auto* conv = std::get_if<ir::Convolution>(&node->call.op); conv && conv->transposed) continue;
    const ir::Buffer* out = node->output;
    if (std::count(program.outputs.begin(), program.outputs.end(), out)) continue;
    auto it = readers.find(out);
    if (it == readers.end() || it->second.size() != 1) continue;
    ir::LoopNode* epilogue = it->second.front();
    if (epilogue->kind != ir::NodeKind::Pointwise || !(epilogue->output->sizes == out->sizes)) continue;
    ActivationMatcher matcher(*out, *epilogue);
    ir::run_body_symbolic(*epilogue, matcher);
    std::optional<ir::Activation> activation = matcher.activation();
    if (!activation) continue;
    node->call.activation = *activation;
    node->output = epilogue->output;
    node->origins.insert(node->origins.end(), epilogue->origins.begin(), epilogue->origins.end());
    node->origin_ops.insert(node->origin_ops.end(), epilogue->origin_ops.begin(), epilogue->origin_ops.end());
    removed.insert(epilogue);
  }
  program.nodes.erase(std::remove_if(program.nodes.begin(), program.nodes.end(),
                                     [&](const auto& n) { return removed.count(n.get()) != 0; }),
                      program.nodes.end());
  return static_cast<int>(removed.size());
}

}  // namespace foundry::sched
