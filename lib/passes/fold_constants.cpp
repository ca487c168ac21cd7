// Constant folding through the lowering and the reference evaluator.
#include "foundry/passes/fold_constants.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "foundry/ir/evaluate.h"
#include "foundry/lower/lowering.h"
#include "foundry/passes/rewrite.h"

namespace foundry::passes {

namespace {

template <typename Fn>
void for_each_value(const Node& n, Fn&& fn) {
  for (const Arg& a : n.args) {
    if (a.tensor) fn(a.tensor);
    for (Value* v : a.tensors)
      if (v) fn(v);
  }
}

bool has_tensor_args(const Node& n) {
  bool any = false;
  for_each_value(n, [&](Value*) { any = true; });
  return any;
}

// Whether the op itself may be computed at compile time (its arguments aside).
bool foldable_op(const Node& n) {
  if (!n.op || n.outputs.empty() || is_assert(n) || !is_pure(n)) return false;
  if (!lower::find_lowering(n.target)) return false;
  for (const Value* v : n.outputs)
    if (!v->is_tensor || v->type.has_symbolic_sizes()) return false;
  for (const Arg& a : n.args)
    if (a.kind == Arg::Kind::SymInt && a.tensor) return false;  // a size known only at run time
  return true;
}

bool is_view(const Node& n) {
  const lower::Lowering* l = lower::find_lowering(n.target);
  return l && l->is_view;
}

class Folder {
 public:
  Folder(Graph& g, const FoldOptions& opt) : g_(g), opt_(opt), rw_(g) {
    for (size_t i = 0; i < g.nodes.size(); ++i) position_[g.nodes[i].get()] = i;
  }

  bool run() {
    find_constant_nodes();
    if (constant_nodes_.empty()) return false;
    choose_edges();
    std::vector<Value*> targets = materialized_values();
    if (targets.empty()) return false;

    // Everything at once; if that fails (an op the lowering or the evaluator rejects for these
    // arguments), one value at a time, keeping the ones that work.
    int folded = 0;
    if (auto results = evaluate(targets)) {
      for (size_t k = 0; k < targets.size(); ++k) folded += replace(targets[k], (*results)[k]);
    } else {
      for (Value* v : targets)
        if (auto one = evaluate({v})) folded += replace(v, (*one)[0]);
    }
    if (folded) spdlog::debug("fold_constants: folded {} values", folded);
    rw_.commit();
    return folded > 0;
  }

 private:
  Graph& g_;
  FoldOptions opt_;
  Rewriter rw_;
  std::unordered_map<const Node*, size_t> position_;
  std::unordered_set<const Value*> constant_values_;
  std::unordered_set<const Node*> constant_nodes_;  // computable at compile time
  std::unordered_set<const Node*> fold_;            // to be computed at compile time

  void find_constant_nodes() {
    for (const GraphInput& in : g_.inputs)
      if (rw_.constant_input(in.value)) constant_values_.insert(in.value);
    for (const auto& n : g_.nodes) {
      if (!foldable_op(*n)) continue;
      bool all_constant = true;
      for_each_value(*n, [&](Value* v) { all_constant = all_constant && constant_values_.count(v); });
      if (!all_constant) continue;
      constant_nodes_.insert(n.get());
      for (Value* v : n->outputs) constant_values_.insert(v);
    }
    fold_ = constant_nodes_;
  }

  // Read at run time: by a graph output or a node that is not folded.
  bool needed_at_run_time(const Value* v) const {
    if (rw_.is_output(v)) return true;
    const auto& us = rw_.users(v);
    return std::any_of(us.begin(), us.end(), [&](const Node* u) { return !fold_.count(u); });
  }

  // Bytes of the distinct weights that `n` is computed from.
  int64_t source_bytes(const Node& n) const {
    std::unordered_set<const Value*> seen;
    std::vector<const Value*> work;
    for_each_value(n, [&](Value* v) { work.push_back(v); });
    int64_t bytes = 0;
    while (!work.empty()) {
      const Value* v = work.back();
      work.pop_back();
      if (!seen.insert(v).second) continue;
      if (const Node* p = rw_.producer(v))
        for_each_value(*p, [&](Value* a) { work.push_back(a); });
      else
        bytes += type_bytes(v->type);
    }
    return bytes;
  }

  // Backwards over the graph: a constant node at the edge of its subgraph (read at run time) is
  // computed at run time instead when it is a view, a creation op or too large; its own
  // arguments then become the edge, decided when the sweep reaches their producers.
  void choose_edges() {
    for (auto it = g_.nodes.rbegin(); it != g_.nodes.rend(); ++it) {
      const Node& n = **it;
      if (!fold_.count(&n)) continue;
      bool at_edge = std::any_of(n.outputs.begin(), n.outputs.end(),
                                 [&](const Value* v) { return needed_at_run_time(v); });
      if (!at_edge) continue;
      bool keep = is_view(n) || !has_tensor_args(n);
      if (!keep) {
        double limit = std::max<double>(static_cast<double>(opt_.small_bytes),
                                        opt_.max_growth * static_cast<double>(source_bytes(n)));
        for (const Value* v : n.outputs)
          if (needed_at_run_time(v) && static_cast<double>(type_bytes(v->type)) > limit) keep = true;
      }
      if (keep) fold_.erase(&n);
    }
  }

  std::vector<Value*> materialized_values() const {
    std::vector<Value*> out;
    for (const auto& n : g_.nodes)
      if (fold_.count(n.get()))
        for (Value* v : n->outputs)
          if (needed_at_run_time(v)) out.push_back(v);
    return out;
  }

  // Computes `targets` by lowering a graph of their constant cones; nullopt on failure.
  std::optional<std::vector<NpyArray>> evaluate(const std::vector<Value*>& targets) const {
    std::vector<const Node*> cone;
    std::unordered_set<const Node*> in_cone;
    std::vector<const Value*> leaves;
    std::unordered_set<const Value*> seen;
    std::vector<const Value*> work(targets.begin(), targets.end());
    while (!work.empty()) {
      const Value* v = work.back();
      work.pop_back();
      if (!seen.insert(v).second) continue;
      const Node* p = rw_.producer(v);
      if (!p) {
        leaves.push_back(v);
        continue;
      }
      if (!constant_nodes_.count(p)) return std::nullopt;  // cannot happen: constant by construction
      if (in_cone.insert(p).second) {
        cone.push_back(p);
        for_each_value(*p, [&](Value* a) { work.push_back(a); });
      }
    }
    std::sort(cone.begin(), cone.end(), [&](const Node* a, const Node* b) { return position_.at(a) < position_.at(b); });

    Graph sub;
    std::unordered_map<const Value*, Value*> map;
    for (const GraphInput& in : g_.inputs) {
      if (std::find(leaves.begin(), leaves.end(), in.value) == leaves.end()) continue;
      GraphInput copy = in;
      copy.kind = InputKind::Constant;
      copy.value = sub.new_value(in.value->name, in.value->type);
      map[in.value] = copy.value;
      sub.inputs.push_back(std::move(copy));
    }
    auto remap = [&](Value* v) -> Value* { return v ? map.at(v) : nullptr; };
    for (const Node* n : cone) {
      auto c = std::make_unique<Node>();
      c->name = n->name;
      c->source_name = n->source_name;
      c->target = n->target;
      c->op = n->op;
      c->arg_names = n->arg_names;
      c->args = n->args;
      for (Arg& a : c->args) {
        if (a.tensor) a.tensor = remap(a.tensor);
        for (Value*& t : a.tensors) t = remap(t);
      }
      for (const Value* o : n->outputs) {
        Value* v = sub.new_value(o->name, o->type);
        v->is_tensor = o->is_tensor;
        map[o] = v;
        c->outputs.push_back(v);
      }
      sub.append_node(std::move(c));
    }
    for (Value* t : targets) sub.outputs.push_back(GraphOutput{OutputKind::User, map.at(t), ""});

    try {
      ir::LoopProgram program = lower::lower_graph(sub);
      std::vector<NpyArray> results = ir::evaluate_program(program, {});
      if (results.size() != targets.size()) return std::nullopt;
      for (size_t k = 0; k < targets.size(); ++k) {
        const TensorType& t = targets[k]->type;
        if (results[k].dtype != t.dtype || results[k].shape != t.sizes ||
            static_cast<int64_t>(results[k].data.size()) != type_bytes(t))
          return std::nullopt;
      }
      return results;
    } catch (const std::exception& e) {
      spdlog::debug("fold_constants: cannot evaluate {} value(s) starting with %{}: {}", targets.size(),
                    targets[0]->name, e.what());
      return std::nullopt;
    }
  }

  int replace(Value* v, NpyArray& result) {
    std::unordered_set<std::string> taken;
    for (const GraphInput& in : g_.inputs) taken.insert(in.fqn);
    std::string fqn;
    for (int k = 0;; ++k)
      if (!taken.count(fqn = "folded_" + std::to_string(k))) break;
    Value* c = rw_.add_constant(fqn, v->type, std::vector<uint8_t>(result.data.begin(), result.data.end()));
    Node* p = rw_.producer(v);
    rw_.replace_uses(v, c);
    if (p) rw_.erase(*p);
    return 1;
  }
};

}  // namespace

bool fold_constants(Graph& g) { return fold_constants(g, FoldOptions{}); }

bool fold_constants(Graph& g, const FoldOptions& options) { return Folder(g, options).run(); }

}  // namespace foundry::passes
