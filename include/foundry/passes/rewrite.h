// A small pattern-rewrite toolkit for graph passes: a use/def index over a Graph (producers,
// users, graph outputs, constant inputs), value replacement that keeps the index true, node
// insertion at a position, new constant inputs, and removal of nodes left dead by a rewrite.
//
// A rewrite is a rule: the ops it matches, an optional predicate, and a function that returns the
// values replacing the node's outputs (existing values, or outputs of nodes it built through the
// Rewriter). apply_rules() walks the graph once, in order, and does the bookkeeping:
//
//   RewriteRule{"alias", {"alias"}, nullptr,
//               [](Rewriter&, Node& n) { return Replacement{{n.args[0].tensor}}; }};
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "foundry/graph/graph.h"

namespace foundry::passes {

// ---- what a node does, beyond its outputs ----

// Runtime assertions (_assert_scalar, _assert_tensor_metadata, ...): no outputs, no effect on the
// result; passes may drop them.
bool is_assert(const Node& n);
// True when the op's schema writes one of its arguments in place (an alias annotation with '!').
bool mutates_arguments(const Node& n);
// Opaque nodes (no registry entry: unknown semantics) and in-place ops. Asserts are not counted:
// removing them does not change what the graph computes.
bool has_side_effects(const Node& n);
// Ops whose result is not a function of their arguments (random ops, dropout in training mode,
// uninitialized memory): never merged nor computed at compile time.
bool is_nondeterministic(const Node& n);
// No side effects and deterministic: may be merged, removed when unused, folded.
bool is_pure(const Node& n);
// Whether the graph has any node with side effects (opaque or in-place): then values may alias
// in ways a pass cannot see, and rewrites that make two values one are unsafe.
bool graph_has_side_effects(const Graph& g);

// Same dtype, sizes and symbolic sizes (strides ignored).
bool same_type(const TensorType& a, const TensorType& b);
// Size in bytes of a tensor of this type (numel * element size; 0 for symbolic or empty).
int64_t type_bytes(const TensorType& t);

// ---- reading constants ----

// The elements of a weight/constant input, in logical C order, converted to double (any dtype;
// strides and storage offset honoured). nullopt when the storage does not cover the layout or the
// sizes are symbolic.
std::optional<std::vector<double>> read_constant(const GraphInput& in);

// ---- the rewriter ----

class Rewriter {
 public:
  explicit Rewriter(Graph& g);
  Rewriter(const Rewriter&) = delete;
  Rewriter& operator=(const Rewriter&) = delete;

  Graph& graph() { return g_; }
  const Graph& graph() const { return g_; }

  // The node defining `v`; nullptr for graph inputs.
  Node* producer(const Value* v) const;
  // The nodes using `v` as an argument, each once, in no particular order.
  const std::vector<Node*>& users(const Value* v) const;
  // How many graph outputs (of any kind) are `v`.
  int output_uses(const Value* v) const;
  bool is_output(const Value* v) const { return output_uses(v) > 0; }
  bool is_used(const Value* v) const { return is_output(v) || !users(v).empty(); }
  // Exactly one user node, which uses it, and not a graph output.
  bool has_single_user(const Value* v) const { return !is_output(v) && users(v).size() == 1; }
  // Whether any output of `n` is used.
  bool any_output_used(const Node& n) const;

  // The graph input defining `v`, or nullptr.
  const GraphInput* input(const Value* v) const;
  // The graph input defining `v` when it is a weight, buffer or constant whose bytes we hold and
  // that no mutation output writes: its value is known at compile time. nullptr otherwise.
  const GraphInput* constant_input(const Value* v) const;

  // Builds a node for the registry op `op` (arguments in schema order, names taken from the
  // schema) with outputs of the given types, and inserts it before `before` (nullptr: at the end).
  // Throws InternalError for an unknown op or an argument count that does not match the schema.
  Node* insert_node(const std::string& op, std::vector<Arg> args, const std::vector<TensorType>& output_types,
                    Node* before, const std::string& name_hint = "");
  // Inserts a copy of `like` (same op, argument names and output types) with new arguments.
  Node* insert_copy(const Node& like, std::vector<Arg> args, Node* before);
  // Adds a constant graph input owning `bytes` (C-contiguous data of `type`; strides and offset of
  // `type` are reset). Its fqn is `fqn_hint`, made unique among the graph inputs' fqns.
  Value* add_constant(const std::string& fqn_hint, TensorType type, std::vector<uint8_t> bytes);

  // Replaces argument `index` of `n` (keeping the use index true). The caller keeps the node's
  // recorded output types valid.
  void set_arg(Node& n, size_t index, Arg a);
  // Replaces every use of `from` (node arguments and graph outputs) by `to`. Their types must
  // match (dtype and sizes).
  void replace_uses(Value* from, Value* to);
  // Replaces the node's outputs: outputs[i] by with[i]; a nullptr entry leaves that output, which
  // must then be unused. The node is marked for removal.
  void replace_outputs(Node& n, const std::vector<Value*>& with);
  // Marks a node for removal; it is removed by commit() once none of its outputs is used.
  void erase(Node& n);
  bool is_erased(const Node& n) const { return erased_.count(&n) != 0; }

  // Removes the marked nodes that are unused, then the pure nodes that this leaves unused
  // (transitively). Marked nodes still in use stay. Returns whether the graph changed at all since
  // the Rewriter was made (replacements, insertions, removals).
  bool commit();
  bool changed() const { return changed_; }

 private:
  Graph& g_;
  std::unordered_map<const Value*, Node*> producer_;
  std::unordered_map<const Value*, std::vector<Node*>> users_;
  std::unordered_map<const Value*, int> output_uses_;
  std::unordered_map<const Value*, const GraphInput*> inputs_;  // rebuilt when inputs are added
  std::unordered_set<std::string> mutated_;                      // mutation output targets
  std::unordered_set<const Node*> erased_;
  std::vector<Node*> erase_order_;
  bool changed_ = false;

  void index_inputs();
  void add_uses(Node* n);
  void remove_uses(Node* n);
  Node* place(std::unique_ptr<Node> node, Node* before);
};

// ---- rules ----

// The values replacing a matched node's outputs, in order (nullptr: that output is unused and
// stays unreplaced). For a node with no outputs, an empty list erases it.
struct Replacement {
  std::vector<Value*> outputs;
};

struct RewriteRule {
  std::string name;               // for the debug log
  std::vector<std::string> ops;   // node targets it applies to ("view", "permute", ...)
  // Optional extra condition, checked before `replace`.
  std::function<bool(const Rewriter&, const Node&)> where;
  // The rewrite: nullopt declines (no change); may build nodes and constants through the Rewriter.
  std::function<std::optional<Replacement>(Rewriter&, Node&)> replace;
};

// Walks the graph once in order; for each node, the first matching rule that returns a
// replacement is applied (nodes inserted by rules are not visited). Then removes the replaced
// nodes and what they leave dead. Returns whether the graph changed.
bool apply_rules(Graph& g, const std::vector<RewriteRule>& rules);

// A rule that forwards a single-output node to the tensor argument `arg_index` when `pred` holds
// and the output's type equals that argument's (dtype, sizes, symbols).
RewriteRule forward_to_arg(std::string name, std::vector<std::string> ops,
                           std::function<bool(const Rewriter&, const Node&)> pred, size_t arg_index = 0);

}  // namespace foundry::passes
