// Attention as one node: the chain of fuse_attention.h, matched from its second product backwards.
#include "foundry/passes/fuse_attention.h"

#include <cmath>
#include <limits>
#include <optional>

#include "foundry/ops/registry.h"
#include "foundry/passes/rewrite.h"

namespace foundry::passes {

namespace {

bool is_reshape_view(const Node& n) { return n.target == "view" || n.target == "_unsafe_view"; }

Value* tensor_of(const Node& n, const char* name) {
  if (!shape::has_arg(n, name)) return nullptr;
  const Arg& a = shape::arg(n, name);
  return a.kind == Arg::Kind::Tensor ? a.tensor : nullptr;
}

// The producer of `v` when it is `target` and `v` has no reader but the chain's next node.
Node* sole_producer(const Rewriter& rw, const Value* v, const char* target) {
  Node* n = rw.producer(v);
  return n && n->target == target && rw.has_single_user(v) ? n : nullptr;
}

// `v` seen back through views whose inputs only the chain reads.
Value* before_views(const Rewriter& rw, Value* v) {
  for (Node* n = rw.producer(v); n && is_reshape_view(*n); n = rw.producer(v)) {
    Value* in = tensor_of(*n, "self");
    if (!in || !rw.has_single_user(in)) break;
    v = in;
  }
  return v;
}

bool float32_static(const Value* v) {
  return v && v->type.dtype == DType::Float32 && !v->type.has_symbolic_sizes();
}

bool is_scalar_value(const Arg& a, double value) { return a.is_number() && a.as_double() == value; }

// _safe_softmax's guard around `probs`: where(not(any(not(x == -inf), -1, keepdim)), zeros_like
// (probs), probs) with x the softmax's input. The softmax's node, or nullptr.
Node* safe_softmax(const Rewriter& rw, const Node& where) {
  Value* probs = tensor_of(where, "other");
  Node* softmax = probs ? rw.producer(probs) : nullptr;
  Node* zeros = rw.producer(tensor_of(where, "self"));
  if (!softmax || softmax->target != "_softmax" || !zeros || zeros->target != "full_like") return nullptr;
  if (tensor_of(*zeros, "self") != probs || !is_scalar_value(shape::arg(*zeros, "fill_value"), 0.0)) return nullptr;
  if (rw.users(probs).size() != 2 || rw.is_output(probs) || !rw.has_single_user(zeros->outputs[0])) return nullptr;
  Node* not_any = sole_producer(rw, tensor_of(where, "condition"), "logical_not");
  Node* any = not_any ? sole_producer(rw, tensor_of(*not_any, "self"), "any.dim") : nullptr;
  if (!any || !shape::bool_arg(*any, "keepdim")) return nullptr;
  Node* finite = sole_producer(rw, tensor_of(*any, "self"), "logical_not");
  Node* eq = finite ? sole_producer(rw, tensor_of(*finite, "self"), "eq.Scalar") : nullptr;
  if (!eq || tensor_of(*eq, "self") != tensor_of(*softmax, "self")) return nullptr;
  if (!is_scalar_value(shape::arg(*eq, "other"), -std::numeric_limits<double>::infinity())) return nullptr;
  const Value* x = tensor_of(*softmax, "self");
  const int64_t rank = x->type.rank();
  if (shape::normalize_dim(shape::int_arg(*any, "dim"), rank) != rank - 1) return nullptr;
  return rw.users(x).size() == 2 && !rw.is_output(x) ? softmax : nullptr;
}

// What the chain adds to the scores before the softmax and how it scales them.
struct Scores {
  Node* product = nullptr;  // the first bmm
  Value* mask = nullptr;    // added last, after the scaling
  const Value* masked = nullptr;  // the sum with the mask (its shape is the mask's)
  double scale = 1.0;
};

// From the softmax's input back to the first product: views, then an optional add of a mask,
// then views and multiplications or divisions by numbers.
std::optional<Scores> scores_before(const Rewriter& rw, Value* x) {
  Scores s;
  x = before_views(rw, x);
  Node* n = rw.producer(x);
  if (n && n->target == "add.Tensor" && is_scalar_value(shape::arg(*n, "alpha"), 1.0)) {
    Value* scores = tensor_of(*n, "self");
    s.mask = tensor_of(*n, "other");
    if (!scores || !float32_static(s.mask) || scores->type.sizes != x->type.sizes || !rw.has_single_user(scores))
      return std::nullopt;
    s.masked = x;
    x = scores;
  }
  for (n = rw.producer(x); n; n = rw.producer(x)) {
    Value* in = tensor_of(*n, "self");
    const bool scaling = n->target == "mul.Tensor" || n->target == "mul.Scalar" || n->target == "div.Tensor" ||
                         n->target == "div.Scalar";
    if (!in || !rw.has_single_user(in) || !(is_reshape_view(*n) || scaling)) break;
    if (scaling) {
      const Arg& by = shape::arg(*n, "other");
      if (!by.is_number() || !std::isfinite(by.as_double()) || by.as_double() == 0) return std::nullopt;
      s.scale = n->target.rfind("mul", 0) == 0 ? s.scale * by.as_double() : s.scale / by.as_double();
    }
    x = in;
  }
  s.product = rw.producer(x);
  if (!s.product || s.product->target != "bmm") return std::nullopt;
  return s;
}

// The mask as a value of the masked scores' shape: an expand where it is broadcast.
Value* full_mask(Rewriter& rw, Value* mask, const TensorType& scores, Node* before) {
  if (mask->type.sizes == scores.sizes) return mask;
  TensorType t = mask->type;
  std::vector<int64_t> strides = t.strides.empty() ? t.contiguous_strides() : t.strides;
  t.strides.assign(scores.sizes.size(), 0);
  const size_t lead = scores.sizes.size() - mask->type.sizes.size();
  for (size_t d = 0; d < mask->type.sizes.size(); ++d)
    if (mask->type.sizes[d] == scores.sizes[lead + d]) t.strides[lead + d] = strides[d];
  t.sizes = scores.sizes;
  return rw.insert_node("expand", {Arg::of_tensor(mask), Arg::of_ints(scores.sizes), Arg::of_bool(false)}, {t}, before,
                        mask->name + "_expanded")
      ->outputs[0];
}

std::optional<Replacement> fuse(Rewriter& rw, Node& second) {
  Value* probs = tensor_of(second, "self");
  Value* v = tensor_of(second, "mat2");
  if (!probs || !rw.has_single_user(probs)) return std::nullopt;
  Value* p = before_views(rw, probs);
  Node* softmax = rw.producer(p);
  bool masked_rows_zero = false;
  if (softmax && softmax->target == "where.self") {
    softmax = safe_softmax(rw, *softmax);
    masked_rows_zero = true;
  } else if (softmax && !rw.has_single_user(p)) {
    return std::nullopt;
  }
  if (!softmax || softmax->target != "_softmax" || shape::bool_arg(*softmax, "half_to_float")) return std::nullopt;
  Value* x = tensor_of(*softmax, "self");
  if (shape::normalize_dim(shape::int_arg(*softmax, "dim"), x->type.rank()) != x->type.rank() - 1) return std::nullopt;
  if (!masked_rows_zero && !rw.has_single_user(x)) return std::nullopt;
  // The safe softmax's other reader of x is its -inf test: the chain starts behind it.
  std::optional<Scores> s = scores_before(rw, x);
  if (!s) return std::nullopt;
  Value* q = tensor_of(*s->product, "self");
  Value* kt = tensor_of(*s->product, "mat2");
  if (!float32_static(q) || !float32_static(kt) || !float32_static(v) || !float32_static(second.outputs[0]))
    return std::nullopt;
  const std::vector<int64_t>& qs = q->type.sizes;
  const std::vector<int64_t>& vs = v->type.sizes;
  const int64_t N = qs[0], L = qs[1], S = vs[1];
  for (int64_t size : {N, L, S, qs[2], vs[2]})
    if (size == 0) return std::nullopt;
  if (L < (kMinFusedScores + S - 1) / S) return std::nullopt;  // L * S < kMinFusedScores, without overflow
  Value* mask = nullptr;
  if (s->mask) {
    const std::vector<int64_t>& ms = s->masked->type.sizes;
    if (ms.size() < 2 || ms[ms.size() - 2] != L || ms.back() != S ||
        shape::product(std::vector<int64_t>(ms.begin(), ms.end() - 2)) != N)
      return std::nullopt;
    mask = full_mask(rw, s->mask, s->masked->type, &second);
  }
  Node* fused = rw.insert_node("_foundry_attention",
                               {Arg::of_tensor(q), Arg::of_tensor(kt), Arg::of_tensor(v),
                                mask ? Arg::of_tensor(mask) : Arg::none(), Arg::of_float(s->scale),
                                Arg::of_bool(masked_rows_zero)},
                               {second.outputs[0]->type}, &second, second.name + "_attention");
  return Replacement{{fused->outputs[0]}};
}

}  // namespace

bool fuse_attention(Graph& g) { return apply_rules(g, {RewriteRule{"attention", {"bmm"}, nullptr, fuse}}); }

}  // namespace foundry::passes
