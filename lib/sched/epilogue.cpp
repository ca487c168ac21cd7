// Matching an epilogue is define-by-run like everything else: the candidate node's body runs
// through a handler that keeps its values as terms, and only store(out[i], f(load(src[i]))) is
// accepted, with f an activation oneDNN has as an eltwise post-op (relu, tanh, sigmoid, both
// GELUs) and both indices the plain position of element i. The two buffers may differ in shape
// with the same elements (a linear layer's [tokens, features] product read as [1, tokens,
// features]): the call computes its own shape (its node's ranges) into the epilogue's buffer. A SiLU
// (x * sigmoid(x)) is not folded: oneDNN's swish post-op made samples/effnet_block's depthwise and
// 1x1 convolutions 0.28 ms slower each at one thread, as much as the SiLU kernel it would save.
#include "foundry/sched/epilogue.h"

#include <algorithm>
#include <cmath>
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

// A value of the candidate body as a term: the source element, a constant, or an op on terms.
struct Term {
  enum Kind { Source, Constant, Unary, Binary, Other } kind = Other;
  double value = 0;  // Constant
  UnaryOp unary{};
  BinaryOp binary{};
  int a = -1, b = -1;  // operands (indices of terms)
};

// Runs the body and keeps the terms of its values; the stored one is `stored()`.
class TermRecorder final : public ir::Ops {
 public:
  TermRecorder(const ir::Buffer& src, const ir::LoopNode& node)
      : src_(src), out_(*node.output),
        index_(ir::simplify(node.output->linear_index(node.index_symbols()), ir::node_extents(node))) {}

  const std::vector<Term>& terms() const { return terms_; }
  // The term stored at each element's own position, or -1 when the body is anything else.
  int stored() const { return ok_ && stored_ >= 0 ? stored_ : -1; }

  Val load(const ir::Buffer& buf, const Expr& index) override {
    const bool own = &buf == &src_ && buf.dtype == DType::Float32 && index == index_;
    return add({own ? Term::Source : Term::Other});
  }
  void store(const ir::Buffer& buf, const Expr& index, Val value, ir::StoreMode mode) override {
    ok_ = ok_ && stored_ < 0 && &buf == &out_ && buf.dtype == DType::Float32 && mode == ir::StoreMode::Set &&
          index == index_;
    stored_ = value.id;
  }
  Val constant(const ir::Scalar& value) override {
    Term t{Term::Constant};
    t.value = value.as_double();
    return add(t);
  }
  Val unary(UnaryOp op, Val x) override {
    Term t{Term::Unary};
    t.unary = op;
    t.a = x.id;
    return add(t);
  }
  Val binary(BinaryOp op, Val a, Val b) override {
    Term t{Term::Binary};
    t.binary = op;
    t.a = a.id;
    t.b = b.id;
    return add(t);
  }
  Val to_dtype(Val v, DType dtype) override { return dtype == DType::Float32 ? v : add({}); }
  Val index_expr(const Expr&, DType) override { return add({}); }
  Val where(Val, Val, Val) override { return add({}); }
  Expr indirect(Val, const Expr&) override {
    ok_ = false;
    return Expr(0);
  }
  Val reduction(ir::ReduceOp, Val) override { return add({}); }
  void store_reduction(const ir::Buffer&, const Expr&, Val) override { ok_ = false; }

 private:
  Val add(Term t) {
    terms_.push_back(t);
    return Val{static_cast<int>(terms_.size()) - 1, DType::Float32};
  }

  const ir::Buffer& src_;
  const ir::Buffer& out_;
  Expr index_;
  std::vector<Term> terms_;
  int stored_ = -1;
  bool ok_ = true;
};

// Which activation of the source a term computes, matched on the forms the lowerings write
// (lower/pointwise.cpp) with products and sums in any order and grouping.
class ActivationForms {
 public:
  explicit ActivationForms(const std::vector<Term>& terms) : t_(terms) {}

  std::optional<ir::Activation> of(int v) const {
    const Term& term = t_[v];
    if (term.kind == Term::Unary && source(term.a)) {
      if (term.unary == UnaryOp::Tanh) return ir::Activation::Tanh;
      if (term.unary == UnaryOp::Sigmoid) return ir::Activation::Sigmoid;
    }
    if (pair(v, BinaryOp::Maximum, [&](int x) { return source(x); }, [&](int x) { return constant(x, 0); }))
      return ir::Activation::Relu;
    // 0.5 * x * (1 + erf(x / sqrt(2))), or with tanh(sqrt(2/pi) * (x + 0.044715 x^3)).
    std::vector<int> f = factors(v);
    if (f.size() != 3) return std::nullopt;
    for (int half : f)
      for (int x : f)
        for (int rest : f)
          if (half != x && x != rest && half != rest && constant(half, 0.5) && source(x)) {
            if (one_plus(rest, UnaryOp::Erf, [&](int arg) { return scaled_source(arg, M_SQRT1_2); }))
              return ir::Activation::GeluErf;
            if (one_plus(rest, UnaryOp::Tanh, [&](int arg) { return tanh_gelu_argument(arg); }))
              return ir::Activation::GeluTanh;
          }
    return std::nullopt;
  }

 private:
  bool source(int v) const { return t_[v].kind == Term::Source; }
  bool constant(int v, double c) const {
    return t_[v].kind == Term::Constant && std::abs(t_[v].value - c) <= 1e-6 * std::abs(c);
  }
  // v = a op b with a, b matching `fa`, `fb` in either order.
  template <typename A, typename B>
  bool pair(int v, BinaryOp op, A fa, B fb) const {
    const Term& t = t_[v];
    return t.kind == Term::Binary && t.binary == op && ((fa(t.a) && fb(t.b)) || (fa(t.b) && fb(t.a)));
  }
  // The factors of a product, however it is grouped.
  std::vector<int> factors(int v) const {
    const Term& t = t_[v];
    if (t.kind != Term::Binary || t.binary != BinaryOp::Mul) return {v};
    std::vector<int> f = factors(t.a), g = factors(t.b);
    f.insert(f.end(), g.begin(), g.end());
    return f;
  }
  // c * x, or x / (1 / c).
  bool scaled_source(int v, double c) const {
    std::vector<int> f = factors(v);
    if (f.size() == 2 && ((source(f[0]) && constant(f[1], c)) || (source(f[1]) && constant(f[0], c)))) return true;
    const Term& t = t_[v];
    return t.kind == Term::Binary && t.binary == BinaryOp::Div && source(t.a) && constant(t.b, 1 / c);
  }
  // 1 + op(arg) with `arg_ok(arg)`.
  template <typename F>
  bool one_plus(int v, UnaryOp op, F arg_ok) const {
    return pair(v, BinaryOp::Add, [&](int x) { return constant(x, 1); },
                [&](int x) { return t_[x].kind == Term::Unary && t_[x].unary == op && arg_ok(t_[x].a); });
  }
  // sqrt(2/pi) * (x + 0.044715 * x^3).
  bool tanh_gelu_argument(int v) const {
    std::vector<int> f = factors(v);
    if (f.size() != 2) return false;
    auto cubic = [&](int c) {
      std::vector<int> g = factors(c);
      int xs = 0, k = 0;
      for (int x : g) xs += source(x), k += constant(x, 0.044715);
      return g.size() == 4 && xs == 3 && k == 1;
    };
    auto inner = [&](int s) { return pair(s, BinaryOp::Add, [&](int x) { return source(x); }, cubic); };
    const double k = std::sqrt(2 / M_PI);
    return (constant(f[0], k) && inner(f[1])) || (constant(f[1], k) && inner(f[0]));
  }

  const std::vector<Term>& t_;
};

std::optional<ir::Activation> activation_of(const ir::Buffer& src, const ir::LoopNode& epilogue) {
  TermRecorder recorder(src, epilogue);
  ir::run_body_symbolic(epilogue, recorder);
  if (recorder.stored() < 0) return std::nullopt;
  return ActivationForms(recorder.terms()).of(recorder.stored());
}

// The epilogue writes each element of `out` once, at the same position in its own buffer: the
// same elements, in the same order, perhaps in another shape (a reshape between the two ops).
bool same_elements(const ir::Buffer& out, const ir::Buffer& epilogue_out) {
  return ir::simplify(out.numel(), {}) == ir::simplify(epilogue_out.numel(), {});
}

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
    if (epilogue->kind != ir::NodeKind::Pointwise || !same_elements(*out, *epilogue->output)) continue;
    std::optional<ir::Activation> activation = activation_of(*out, *epilogue);
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
