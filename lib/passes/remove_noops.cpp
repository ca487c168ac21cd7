// No-op removal, as rewrite rules.
#include "foundry/passes/remove_noops.h"

#include <algorithm>

#include "foundry/ops/registry.h"
#include "foundry/passes/rewrite.h"

namespace foundry::passes {

namespace {

const std::vector<std::string> kReshapes = {"view", "squeeze.dim", "squeeze.dims", "unsqueeze",
                                            "flatten.using_ints", "unflatten.int"};

bool all_zero(const std::vector<int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 0; });
}

// The dims argument normalized against the input's rank; nullopt when malformed.
std::optional<std::vector<int64_t>> normalized_dims(const Node& n) {
  const Arg& self = n.args[0];
  if (!self.tensor || !shape::has_arg(n, "dims")) return std::nullopt;
  const Arg& dims = shape::arg(n, "dims");
  if (dims.kind != Arg::Kind::IntList) return std::nullopt;
  int64_t rank = self.tensor->type.rank();
  std::vector<int64_t> out;
  for (int64_t d : dims.ints) {
    int64_t w = d < 0 ? d + std::max<int64_t>(rank, 1) : d;
    if (w < 0 || w >= std::max<int64_t>(rank, 1)) return std::nullopt;
    out.push_back(w);
  }
  return out;
}

bool identity_permutation(const Rewriter&, const Node& n) {
  auto dims = normalized_dims(n);
  if (!dims) return false;
  for (size_t i = 0; i < dims->size(); ++i)
    if ((*dims)[i] != static_cast<int64_t>(i)) return false;
  return true;
}

bool flips_nothing(const Rewriter&, const Node& n) {
  auto dims = normalized_dims(n);
  if (!dims) return false;
  const TensorType& t = n.args[0].tensor->type;
  return std::all_of(dims->begin(), dims->end(), [&](int64_t d) {
    return t.rank() == 0 || (t.sizes[d] <= 1 && (static_cast<size_t>(d) >= t.symbols.size() || t.symbols[d].empty()));
  });
}

bool same_dims(const Rewriter&, const Node& n) {
  if (!shape::has_arg(n, "dim0") || !shape::has_arg(n, "dim1") || !n.args[0].tensor) return false;
  int64_t rank = std::max<int64_t>(n.args[0].tensor->type.rank(), 1);
  auto wrap = [&](int64_t d) { return d < 0 ? d + rank : d; };
  return wrap(shape::arg(n, "dim0").i) == wrap(shape::arg(n, "dim1").i);
}

bool zero_padding(const Rewriter&, const Node& n) {
  return shape::has_arg(n, "pad") && shape::arg(n, "pad").kind == Arg::Kind::IntList && all_zero(shape::arg(n, "pad").ints);
}

bool inference_dropout(const Rewriter&, const Node& n) { return shape::has_arg(n, "train") && shape::arg(n, "train").i == 0; }

// cat([x]) and split_with_sizes(x, [n]): the single list entry / the single output.
std::optional<Replacement> single_cat(Rewriter&, Node& n) {
  const Arg& list = n.args[0];
  if (list.kind != Arg::Kind::TensorList || list.tensors.size() != 1 || !list.tensors[0]) return std::nullopt;
  if (n.outputs.size() != 1 || !same_type(list.tensors[0]->type, n.outputs[0]->type)) return std::nullopt;
  return Replacement{{list.tensors[0]}};
}

std::optional<Replacement> single_split(Rewriter&, Node& n) {
  const Arg& self = n.args[0];
  if (!self.tensor || n.outputs.size() != 1 || !same_type(self.tensor->type, n.outputs[0]->type)) return std::nullopt;
  return Replacement{{self.tensor}};
}

// A reshape of a reshape of ... of x back to x's shape is x: reshapes keep the row-major order.
std::optional<Replacement> reshape_round_trip(Rewriter& rw, Node& n) {
  if (n.outputs.size() != 1 || !n.args[0].tensor) return std::nullopt;
  const TensorType& want = n.outputs[0]->type;
  Value* v = n.args[0].tensor;
  for (int depth = 0; depth < 64; ++depth) {
    Node* p = rw.producer(v);
    if (!p || !p->op || std::find(kReshapes.begin(), kReshapes.end(), p->target) == kReshapes.end()) break;
    if (p->args.empty() || !p->args[0].tensor) break;
    v = p->args[0].tensor;
    if (same_type(v->type, want)) return Replacement{{v}};
  }
  return std::nullopt;
}

}  // namespace

bool remove_noops(Graph& g) {
  // Replacing a copy by its source makes two values one: only safe when nothing writes in place.
  const bool copies_removable = !graph_has_side_effects(g);
  auto if_copies_removable = [copies_removable](const Rewriter&, const Node&) { return copies_removable; };

  std::vector<std::string> same_shape_ops = kReshapes;
  same_shape_ops.insert(same_shape_ops.end(), {"expand", "slice.Tensor", "repeat"});

  const std::vector<RewriteRule> rules = {
      {"assert", {"_assert_scalar", "_assert_tensor_metadata"}, nullptr,
       [](Rewriter&, Node&) -> std::optional<Replacement> { return Replacement{}; }},
      forward_to_arg("alias", {"alias"}, nullptr),
      forward_to_arg("copy", {"clone", "contiguous", "_to_copy"}, if_copies_removable),
      forward_to_arg("copy-from", {"copy"}, if_copies_removable, /*arg_index=*/1),
      forward_to_arg("same-shape", same_shape_ops, nullptr),
      forward_to_arg("identity-permute", {"permute", "permute_copy"}, identity_permutation),
      forward_to_arg("transpose-same-dim", {"transpose.int"}, same_dims),
      forward_to_arg("flip-nothing", {"flip"}, flips_nothing),
      forward_to_arg("zero-pad", {"constant_pad_nd"}, zero_padding),
      forward_to_arg("inference-dropout", {"dropout"}, inference_dropout),
      {"single-cat", {"cat"}, nullptr, single_cat},
      {"single-split", {"split_with_sizes"}, nullptr, single_split},
      {"reshape-round-trip", kReshapes, nullptr, reshape_round_trip},
  };
  return apply_rules(g, rules);
}

}  // namespace foundry::passes
