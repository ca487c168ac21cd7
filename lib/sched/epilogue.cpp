// Matching an epilogue is define-by-run like everything else: the candidate node's body runs
// through a handler that keeps its values as terms, and only store(out[i], f(load(src[i]))) is
// accepted, with f an activation oneDNN has as an eltwise post-op (FOUNDRY_ACTIVATIONS in
// foundry_externs.h) and both indices the plain position of element i. The two buffers may
// differ in shape with the same elements (a linear layer's [tokens, features] product read as
// [1, tokens, features]): the call computes its own shape (its node's ranges) into the
// epilogue's buffer, so both must be stored in plain order unless they have one shape and one
// layout (same_layout()). A SiLU is folded only into depthwise convolutions on NCHW activations
// (nchw_depthwise()).
#include "foundry/sched/epilogue.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "foundry/ir/ops.h"
#include "foundry/ir/record.h"
#include "sched/conv_calls.h"

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

// Runs the bodies of an epilogue's nodes and keeps the terms of their values: a node's stored term
// stands for its output in the nodes run after it. The last node's stored term is `stored()`.
class TermRecorder final : public ir::Ops {
 public:
  explicit TermRecorder(const ir::Buffer& src) : src_(src) {}

  void run(const ir::LoopNode& node) {
    out_ = node.output;
    index_ = ir::simplify(node.output->linear_index(node.index_symbols()), ir::node_extents(node));
    stored_ = -1;
    ir::run_body_symbolic(node, *this);
    ok_ = ok_ && stored_ >= 0;
    if (ok_) values_[out_] = stored_;
  }
  const std::vector<Term>& terms() const { return terms_; }
  // The term stored at each element's own position, or -1 when a body is anything else.
  int stored() const { return ok_ ? stored_ : -1; }

  Val load(const ir::Buffer& buf, const Expr& index) override {
    const bool own = buf.dtype == DType::Float32 && index == index_;
    auto earlier = values_.find(&buf);
    if (own && earlier != values_.end()) return Val{earlier->second, DType::Float32};
    return add({own && &buf == &src_ ? Term::Source : Term::Other});
  }
  void store(const ir::Buffer& buf, const Expr& index, Val value, ir::StoreMode mode) override {
    ok_ = ok_ && stored_ < 0 && &buf == out_ && buf.dtype == DType::Float32 && mode == ir::StoreMode::Set &&
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
  Expr indirect(Val, const Expr&, ir::NegativeIndex) override {
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
  const ir::Buffer* out_ = nullptr;
  Expr index_;
  std::vector<Term> terms_;
  std::map<const ir::Buffer*, int> values_;  // the outputs of the nodes run so far
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
    if (relu6_of(v, [&](int x) { return source(x); })) return ir::Activation::Relu6;
    // x * sigmoid(x); x * clamp(x + 3, 0, 6) / 6.
    auto sigmoid = [&](int x) { return t_[x].kind == Term::Unary && t_[x].unary == UnaryOp::Sigmoid && source(t_[x].a); };
    if (pair(v, BinaryOp::Mul, [&](int x) { return source(x); }, sigmoid)) return ir::Activation::Silu;
    const Term& top = t_[v];
    auto plus_three = [&](int x) {
      return pair(x, BinaryOp::Add, [&](int y) { return source(y); }, [&](int y) { return constant(y, 3); });
    };
    if (top.kind == Term::Binary && top.binary == BinaryOp::Div && constant(top.b, 6) &&
        pair(top.a, BinaryOp::Mul, [&](int x) { return source(x); }, [&](int x) { return relu6_of(x, plus_three); }))
      return ir::Activation::Hardswish;
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
  // v = min(max(arg, 0), 6) with `arg_ok(arg)`: hardtanh(arg, 0, 6), as lower_hardtanh writes it.
  template <typename F>
  bool relu6_of(int v, F arg_ok) const {
    auto at_least_zero = [&](int x) { return pair(x, BinaryOp::Maximum, arg_ok, [&](int y) { return constant(y, 0); }); };
    return pair(v, BinaryOp::Minimum, at_least_zero, [&](int x) { return constant(x, 6); });
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

std::optional<ir::Activation> activation_of(const ir::Buffer& src, const std::vector<ir::LoopNode*>& epilogue) {
  TermRecorder recorder(src);
  for (const ir::LoopNode* node : epilogue) recorder.run(*node);
  if (recorder.stored() < 0) return std::nullopt;
  return ActivationForms(recorder.terms()).of(recorder.stored());
}

// The epilogue writes each element of `out` once, at the same position in its own buffer: the
// same elements, in the same order, perhaps in another shape (a reshape between the two ops).
bool same_elements(const ir::Buffer& out, const ir::Buffer& epilogue_out) {
  return ir::simplify(out.numel(), {}) == ir::simplify(epilogue_out.numel(), {});
}

// Whether the call, which writes its own shape in out's layout, can write `epilogue_out` instead:
// the same shape and strides, or both stored in their shapes' plain order (a reshape). Not a
// channels-last output (sched/channels_last.h) read in order through a permutation, as
// PVT's and SegFormer's token MLPs read their depthwise convolutions: the call, given the
// epilogue's [1, tokens, channels] buffer, would write it in NCHW order.
bool same_layout(const ir::Buffer& out, const ir::Buffer& epilogue_out) {
  if (out.sizes == epilogue_out.sizes && out.strides == epilogue_out.strides) return true;
  return out.strides == ir::contiguous_strides(out.sizes) &&
         epilogue_out.strides == ir::contiguous_strides(epilogue_out.sizes);
}

// What the fold reads the program through: the nodes reading each buffer, the node writing it, and
// each node's position.
struct ProgramIndex {
  std::map<const ir::Buffer*, std::vector<ir::LoopNode*>> readers;
  std::map<const ir::Buffer*, ir::LoopNode*> writer;
  std::map<const ir::LoopNode*, size_t> position;
  std::set<const ir::Buffer*> outputs;

  explicit ProgramIndex(const ir::LoopProgram& program) : outputs(program.outputs.begin(), program.outputs.end()) {
    for (const auto& node : program.nodes) {
      position[node.get()] = position.size();
      writer[node->output] = node.get();
      for (const auto& r : ir::record_accesses(*node).reads) {
        auto& list = readers[r.buffer];
        if (list.empty() || list.back() != node.get()) list.push_back(node.get());
      }
    }
  }
  bool read_only_by(const ir::Buffer* b, const std::set<ir::LoopNode*>& nodes) const {
    auto it = readers.find(b);
    if (it == readers.end()) return true;
    return std::all_of(it->second.begin(), it->second.end(), [&](ir::LoopNode* n) { return nodes.count(n) != 0; });
  }
};

// An activation is at most this many pointwise nodes (hardswish: add, two clamps, mul, div).
constexpr size_t kMaxEpilogueNodes = 6;

// The pointwise nodes that compute `sink` from `out` alone, in program order: `sink` and the
// writers of what they read other than `out`, each over out's elements, every one but `sink`
// read only inside the group, and every reader of `out` among them; empty when there are none.
std::vector<ir::LoopNode*> epilogue_ending_at(const ir::Buffer* out, ir::LoopNode* sink, const ProgramIndex& index) {
  std::set<ir::LoopNode*> group;
  std::vector<ir::LoopNode*> pending{sink};
  while (!pending.empty()) {
    ir::LoopNode* n = pending.back();
    pending.pop_back();
    if (!group.insert(n).second) continue;
    if (group.size() > kMaxEpilogueNodes || n->kind != ir::NodeKind::Pointwise || !same_elements(*out, *n->output))
      return {};
    for (const auto& r : ir::record_accesses(*n).reads) {
      if (r.buffer == out) continue;
      auto w = index.writer.find(r.buffer);
      if (w == index.writer.end()) return {};  // a weight or an input: not an activation
      pending.push_back(w->second);
    }
  }
  if (!index.read_only_by(out, group)) return {};
  for (ir::LoopNode* n : group)
    if (n != sink && (index.outputs.count(n->output) || !index.read_only_by(n->output, group))) return {};
  std::vector<ir::LoopNode*> ordered(group.begin(), group.end());
  std::sort(ordered.begin(), ordered.end(),
            [&](ir::LoopNode* a, ir::LoopNode* b) { return index.position.at(a) < index.position.at(b); });
  return ordered;
}

// The epilogue of `call` that computes an activation of its output, and which one: the nodes
// from out's last reader on, extended through single readers (hardswish's x * relu6(x + 3) is
// not one until its division by 6).
std::pair<std::vector<ir::LoopNode*>, ir::Activation> activation_epilogue(const ir::LoopNode& call,
                                                                         const ProgramIndex& index) {
  const ir::Buffer* out = call.output;
  auto it = index.readers.find(out);
  if (index.outputs.count(out) || it == index.readers.end()) return {};
  ir::LoopNode* sink = *std::max_element(it->second.begin(), it->second.end(), [&](ir::LoopNode* a, ir::LoopNode* b) {
    return index.position.at(a) < index.position.at(b);
  });
  for (size_t step = 0; step < kMaxEpilogueNodes; ++step) {
    std::vector<ir::LoopNode*> group = epilogue_ending_at(out, sink, index);
    if (group.empty() || !same_layout(*out, *sink->output)) return {};
    if (std::optional<ir::Activation> activation = activation_of(*out, group)) return {group, *activation};
    auto next = index.readers.find(sink->output);
    if (index.outputs.count(sink->output) || next == index.readers.end() || next->second.size() != 1) return {};
    sink = next->second.front();
  }
  return {};
}

}  // namespace

int fold_activations_into_externs(ir::LoopProgram& program) {
  const ProgramIndex index(program);
  std::set<const ir::LoopNode*> removed;
  int folded = 0;
  for (const auto& node : program.nodes) {
    if (node->kind != ir::NodeKind::Extern || node->call.activation != ir::Activation::None) continue;
    // Only oneDNN's calls take post-ops (LAPACK and sorting have none).
    if (!std::holds_alternative<ir::Matmul>(node->call.op) && !std::holds_alternative<ir::Convolution>(node->call.op))
      continue;
    // oneDNN 2.6 applies a deconvolution's post-ops in a scalar loop of its own after the
    // computation (the U-Net sample's: relu 0.26 -> 1.6 ms, tanh 0.55 -> 6.2 ms at one thread):
    // a kernel applies them far faster, fused with the output's readers.
    if (const auto* conv = std::get_if<ir::Convolution>(&node->call.op); conv && conv->transposed) continue;
    // A product on the stored operands runs faster without an activation, which then stays a
    // kernel: on the 2-core Xeon, mobilenet_v2's 1x1 24 -> 144 at 56x56 with its relu6 took 0.48 ms
    // folded against 0.20 + 0.11 for the product and a kernel.
    if (stored_product(*node)) continue;
    auto [epilogue, activation] = activation_epilogue(*node, index);
    // A SiLU only into depthwise loops, which apply any activation in registers: oneDNN's swish
    // post-op made samples/effnet_block's depthwise and 1x1 convolutions 0.28 ms slower each at
    // one thread, as much as the SiLU kernel it would save.
    if (epilogue.empty() || (activation == ir::Activation::Silu && !nchw_depthwise(*node))) continue;
    node->call.activation = activation;
    ++folded;
    node->output = epilogue.back()->output;
    for (const ir::LoopNode* n : epilogue) {
      node->origins.insert(node->origins.end(), n->origins.begin(), n->origins.end());
      node->origin_ops.insert(node->origin_ops.end(), n->origin_ops.begin(), n->origin_ops.end());
      removed.insert(n);
    }
  }
  program.nodes.erase(std::remove_if(program.nodes.begin(), program.nodes.end(),
                                     [&](const auto& n) { return removed.count(n.get()) != 0; }),
                      program.nodes.end());
  return folded;
}

}  // namespace foundry::sched
