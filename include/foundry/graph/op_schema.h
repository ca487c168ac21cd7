// What a graph node knows about its operator: the parsed ATen schema and the shape/dtype rule
// (OpInfo, the type of Node::op). The types live with the graph, which prints and verifies nodes
// against them; the table of ops that fills them in is the ops stage's (foundry/ops/registry.h).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "foundry/graph/graph.h"

namespace foundry {

// One argument of a parsed ATen schema, e.g. "Scalar alpha=1" or "*, ScalarType? dtype=None".
struct ArgSchema {
  std::string name;
  std::string type;        // as written, e.g. "Tensor", "int[]", "Scalar?", "SymInt[1]"
  bool optional = false;   // type ends in '?'
  bool kwarg_only = false; // after '*'
  std::optional<std::string> default_text;  // as written after '=', e.g. "1", "None", "[]", "False"
  std::string alias;       // alias annotation without parentheses, e.g. "a!" for "Tensor(a!)"; not in `type`
};

struct OpSchema {
  std::string name;      // "add"
  std::string overload;  // "Tensor" ("" for default)
  std::vector<ArgSchema> args;
  std::vector<std::string> returns;  // return types, e.g. {"Tensor", "Tensor"}
  std::string text;                  // the schema as written in ops.def
};

// Computes the output types of a bound node (args in schema order, defaults filled in).
// Throws UserError with a message (without the node name; the caller adds it) on invalid input.
using ShapeRule = std::function<std::vector<TensorType>(const Node&)>;

struct OpInfo {
  std::string name;  // "add.Tensor", "relu" (".default" dropped)
  OpSchema schema;
  ShapeRule infer;   // may be empty for ops whose recorded types are trusted
};

}  // namespace foundry
