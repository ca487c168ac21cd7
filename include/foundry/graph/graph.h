// The ATen-level graph: values with tensor types, nodes with a resolved op and typed arguments,
// weights as constants that point into the (memory-mapped) archive.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "foundry/graph/dtype.h"

namespace foundry {

struct OpInfo;  // foundry/graph/op_schema.h

// One dimension's size: a constant, or a symbolic expression (kept as its sympy srepr string
// until dynamic shapes are lowered) with the hint recorded at export time.
struct Dim {
  int64_t hint = 0;
  std::string symbol;  // empty: static size `hint`
  bool is_static() const { return symbol.empty(); }
};

struct TensorType {
  DType dtype = DType::Float32;
  std::vector<int64_t> sizes;    // hints for symbolic dims (0 when unbacked: no hint recorded)
  std::vector<int64_t> strides;  // as recorded; empty means contiguous
  int64_t storage_offset = 0;
  std::vector<std::string> symbols;  // per dim: "" or a symbolic size expression; empty when all static

  int64_t rank() const { return static_cast<int64_t>(sizes.size()); }
  int64_t numel() const;
  bool has_symbolic_sizes() const;
  std::vector<int64_t> contiguous_strides() const;
  bool operator==(const TensorType& o) const {
    return dtype == o.dtype && sizes == o.sizes;
  }
};

// Raw bytes owned elsewhere (the mapped archive, a file) and kept alive by `owner`.
struct Blob {
  std::shared_ptr<const void> owner;
  const uint8_t* data = nullptr;
  size_t size = 0;
};

struct Value {
  int id = 0;
  std::string name;         // ours: a sanitized, unique identifier
  std::string source_name;  // as written in the file (untrusted; only for messages, escaped)
  TensorType type;
  bool is_tensor = true;    // false for symbolic ints (sym_size outputs)
  std::optional<int64_t> hint;  // symbolic ints: the value recorded at export, when there is one
};

// A typed argument, after binding to the op's schema (defaults filled in).
struct Arg {
  enum class Kind {
    None, Tensor, TensorList, OptTensorList, Int, IntList, Float, FloatList, Bool, BoolList,
    String, ScalarType, Layout, Device, MemoryFormat, SymInt,
  };
  Kind kind = Kind::None;
  Value* tensor = nullptr;           // Tensor, SymInt (a value computed by sym_size etc.)
  std::vector<Value*> tensors;       // TensorList / OptTensorList (nullptr entries = None)
  int64_t i = 0;                     // Int, Layout, MemoryFormat, Bool (0/1)
  std::vector<int64_t> ints;         // IntList, BoolList
  double f = 0;                      // Float
  std::vector<double> floats;        // FloatList
  std::string s;                     // String, Device
  DType dtype = DType::Float32;      // ScalarType

  static Arg none() { return {}; }
  static Arg of_tensor(Value* v) { Arg a; a.kind = Kind::Tensor; a.tensor = v; return a; }
  static Arg of_int(int64_t v) { Arg a; a.kind = Kind::Int; a.i = v; return a; }
  static Arg of_float(double v) { Arg a; a.kind = Kind::Float; a.f = v; return a; }
  static Arg of_bool(bool v) { Arg a; a.kind = Kind::Bool; a.i = v; return a; }
  static Arg of_ints(std::vector<int64_t> v) { Arg a; a.kind = Kind::IntList; a.ints = std::move(v); return a; }
  static Arg of_dtype(DType t) { Arg a; a.kind = Kind::ScalarType; a.dtype = t; return a; }
  static Arg of_string(std::string s) { Arg a; a.kind = Kind::String; a.s = std::move(s); return a; }

  bool is_none() const { return kind == Kind::None; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  double as_double() const { return kind == Kind::Float ? f : static_cast<double>(i); }
};

struct Node {
  int id = 0;
  std::string name;         // ours (sanitized, unique)
  std::string source_name;  // as written in the file
  std::string target;       // e.g. "add.Tensor" (without "torch.ops.aten." and ".default")
  const OpInfo* op = nullptr;  // nullptr: opaque node, recorded types trusted
  std::vector<Arg> args;       // positional, in schema order (opaque nodes: in file order)
  std::vector<std::string> arg_names;
  std::vector<Value*> outputs;  // unused outputs are kept (their values exist) for arity

  const Arg& arg(const std::string& name) const;  // throws if absent
  bool has_arg(const std::string& name) const;
};

enum class InputKind { User, Parameter, Buffer, Constant };

struct GraphInput {
  InputKind kind = InputKind::User;
  Value* value = nullptr;
  std::string fqn;  // parameter/buffer/constant name in the file (untrusted), empty for user inputs
  Blob storage;     // weights: the bytes of the stored storage the tensor reaches; `value->type` strides/offset index into it
};

enum class OutputKind { User, BufferMutation, UserInputMutation };

struct GraphOutput {
  OutputKind kind = OutputKind::User;
  Value* value = nullptr;
  std::string target;  // for mutations: the mutated buffer or input name
};

struct RangeConstraint {
  std::string symbol;
  int64_t min = 0;
  std::optional<int64_t> max;  // nullopt: unbounded
};

class Graph {
 public:
  std::vector<GraphInput> inputs;  // signature order: weights and user inputs interleaved as in the file
  std::vector<std::unique_ptr<Node>> nodes;  // topological order
  std::vector<GraphOutput> outputs;
  std::vector<RangeConstraint> range_constraints;
  std::string verifier;  // "ATEN" (core ATen IR) or "TRAINING"
  int schema_major = 0, schema_minor = 0;
  std::string torch_version;

  Value* new_value(const std::string& preferred_name, TensorType type);
  Node* append_node(std::unique_ptr<Node> node);
  Value* find_value(const std::string& name) const;
  std::vector<Value*> user_inputs() const;
  std::vector<Value*> user_outputs() const;
  // Nodes that use `v` as an argument.
  std::vector<Node*> users(const Value* v) const;
  void replace_all_uses(Value* from, Value* to);
  size_t num_values() const { return values_.size(); }

 private:
  std::vector<std::unique_ptr<Value>> values_;
  int next_node_id_ = 0;
  std::string unique_name(const std::string& preferred);
  std::unordered_set<std::string> taken_names_;        // value names
  std::unordered_set<std::string> taken_node_names_;   // node names (a namespace of their own)
  std::unordered_map<std::string, Value*> by_name_;
};

// True when `s` matches [A-Za-z_][A-Za-z0-9_]{0,63}: the names we keep from the file as they are.
bool is_plain_name(std::string_view s);

// An op of the table as messages name it: "aten.add.Tensor" for ATen's (the table's short names),
// "transformers.grouped_mm_fallback" for another library's ("torch.ops.NAMESPACE." names).
std::string qualified_op_name(std::string_view table_name);
// A node's target as messages and the IR text show it: ATen's short names ("relu") and whole
// names as qualified_op_name gives them, other targets ("_operator.add") whole, and one that is not
// a plain dotted name quoted (the file is untrusted).
std::string shown_target(const std::string& target);

// Short dtype spelling used in dumps: f32, i64, b8, bf16, ...
std::string_view dtype_short_name(DType t);

// "f32[8, 64]", with symbolic dims by their symbol ("f32[s31, 64]"); strides are not shown.
std::string type_to_string(const TensorType& t);

// One argument as graph.txt shows it: %value, 1, 2.5, True, [1, 0], torch.float32, "text", None.
std::string arg_to_string(const Arg& a);

// A double in its shortest form that reads back exactly, always with '.' or an exponent
// ("2.0", "1e-05", "inf", "-inf", "nan").
std::string format_double(double d);

// A human-readable, stable text form, one node a line (the format of graph.txt).
std::string print_graph(const Graph& g);

// Checks the graph's invariants (defined before use, types consistent with op rules); throws
// UserError naming the node on failure.
void verify_graph(const Graph& g);

}  // namespace foundry
