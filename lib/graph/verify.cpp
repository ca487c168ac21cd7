// The graph verifier: structural invariants, arities against the schemas, and every registry op's
// shape/dtype rule re-run against the recorded output types.
#include <unordered_set>

#include "foundry/graph/graph.h"
#include "foundry/graph/op_schema.h"
#include "foundry/support/error.h"

namespace foundry {

namespace {

std::string node_desc(const Node& n) {
  std::string op = n.op ? qualified_op_name(n.op->name) : quote_untrusted(n.target);
  return "node %" + n.name + " (" + op + ")";
}

// A schema return list of exactly one "Tensor[]" takes any number of outputs.
bool returns_list(const OpSchema& s) {
  return s.returns.size() == 1 && s.returns[0].size() > 2 &&
         s.returns[0].compare(s.returns[0].size() - 2, 2, "[]") == 0;
}

std::string sizes_text(const TensorType& t) { return type_to_string(t); }

// dtype and sizes agree. A recorded symbolic dim without a hint (an unbacked, data-dependent
// size: the frontend records 0) matches anything: nothing static can be said about it.
bool types_agree(const TensorType& recorded, const TensorType& inferred) {
  if (recorded.dtype != inferred.dtype || recorded.sizes.size() != inferred.sizes.size()) return false;
  for (size_t i = 0; i < recorded.sizes.size(); ++i) {
    bool unbacked = i < recorded.symbols.size() && !recorded.symbols[i].empty() && recorded.sizes[i] == 0;
    if (!unbacked && recorded.sizes[i] != inferred.sizes[i]) return false;
  }
  return true;
}

}  // namespace

void verify_graph(const Graph& g) {
  std::unordered_set<const Value*> defined;
  std::unordered_set<const Node*> seen_nodes;

  auto define = [&](const Value* v, const std::string& where) {
    if (!v) throw UserError(where + ": defines a null value");
    if (!defined.insert(v).second)
      throw UserError(where + ": value %" + v->name + " is defined more than once");
  };
  auto use = [&](const Value* v, const std::string& where, bool optional) {
    if (!v) {
      if (optional) return;
      throw UserError(where + ": uses a missing value");
    }
    if (!defined.count(v))
      throw UserError(where + ": uses value %" + v->name + " before it is defined");
  };

  for (const GraphInput& in : g.inputs) define(in.value, "graph input");

  for (const auto& np : g.nodes) {
    if (!np) throw InternalError("verify_graph: null node");
    const Node& n = *np;
    std::string where = node_desc(n);
    if (!seen_nodes.insert(&n).second) throw UserError(where + ": appears twice in the graph");

    // Uses first: a node's own outputs are not visible to its arguments (no self-cycles).
    for (const Arg& a : n.args) {
      using K = Arg::Kind;
      switch (a.kind) {
        case K::Tensor:
        case K::SymInt:
          use(a.tensor, where, false);
          if (a.tensor->is_tensor != (a.kind == K::Tensor))
            throw UserError(where + ": value %" + a.tensor->name +
                            (a.tensor->is_tensor ? " is a tensor where a symbolic scalar belongs"
                                                 : " is a symbolic scalar where a tensor belongs"));
          break;
        case K::TensorList:
          for (const Value* v : a.tensors) use(v, where, false);
          break;
        case K::OptTensorList:
          for (const Value* v : a.tensors) use(v, where, true);
          break;
        default: break;
      }
    }

    if (n.op) {
      const OpSchema& s = n.op->schema;
      if (n.args.size() != s.args.size())
        throw UserError(where + ": has " + std::to_string(n.args.size()) + " arguments, the schema " +
                        std::to_string(s.args.size()));
      if (returns_list(s) ? false : n.outputs.size() != s.returns.size())
        throw UserError(where + ": has " + std::to_string(n.outputs.size()) +
                        " outputs, the schema returns " + std::to_string(s.returns.size()));
    }
    for (const Value* v : n.outputs) define(v, where);

    if (n.op && n.op->infer) {
      std::vector<TensorType> inferred;
      try {
        inferred = n.op->infer(n);
      } catch (const UserError& e) {
        throw UserError(where + ": " + e.what());
      }
      if (inferred.size() != n.outputs.size())
        throw UserError(where + ": the shape rule gives " + std::to_string(inferred.size()) +
                        " outputs, the graph records " + std::to_string(n.outputs.size()));
      for (size_t i = 0; i < inferred.size(); ++i) {
        const Value* v = n.outputs[i];
        if (!v->is_tensor) continue;
        if (!types_agree(v->type, inferred[i]))
          throw UserError(where + ": output %" + v->name + " is recorded as " + sizes_text(v->type) +
                          " but the op's rule gives " + sizes_text(inferred[i]));
      }
    }
  }

  for (const GraphOutput& o : g.outputs) use(o.value, "graph output", false);
}

}  // namespace foundry
