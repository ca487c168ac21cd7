// The loop-level IR: buffers with layouts, and nodes that compute them. A pointwise or reduction
// node's body is a C++ callable over loop indices written against `Ops`; an extern node is a
// library call (matrix product, convolution: extern_call.h) that only declares what it reads and
// writes.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "foundry/graph/graph.h"
#include "foundry/ir/extern_call.h"
#include "foundry/ir/expr.h"
#include "foundry/ir/ops.h"

namespace foundry::ir {

using Index = std::vector<Expr>;

// The product of static sizes (loop ranges, a shape), nullopt when one is dynamic.
std::optional<int64_t> static_numel(const Index& sizes);

enum class BufferKind {
  Input,     // a user input, contiguous
  Constant,  // a weight/buffer/constant storage from the archive (or folded at compile time)
  Computed,  // written by a node
};

struct Buffer {
  int id = 0;
  std::string name;  // ours: "buf3", "arg0"; constants: from the graph value (weight_identifier)
  std::string fqn;   // constants: the name in the archive ("conv1.weight"; untrusted), or a pass's hint
  BufferKind kind = BufferKind::Computed;
  DType dtype = DType::Float32;
  std::vector<Expr> sizes;    // logical shape
  std::vector<Expr> strides;  // layout (computed buffers: contiguous)
  Expr offset;                // element offset of [0,...,0]
  // Constants: the storage they view. The buffer's elements are storage[offset + sum(i*stride)].
  Blob data;
  int64_t storage_numel = 0;  // constants: elements in `data`
  int input_index = -1;       // Input: position among the user inputs

  // Element index of a logical index in this buffer's layout.
  Expr linear_index(const Index& idx) const;
  Expr numel() const;
};

// Orders buffers by id: containers of buffers iterate in program order, not by address, so that
// everything generated from them is the same on every run.
struct ByBufferId {
  bool operator()(const Buffer* a, const Buffer* b) const { return a->id < b->id; }
};

enum class NodeKind { Pointwise, Reduction, Extern };

// The body of a pointwise or reduction node: performs its own store(s) or reduction+store.
using Body = std::function<void(Ops& ops, const Index& idx, const Index& ridx)>;

struct LoopNode {
  int id = 0;
  NodeKind kind = NodeKind::Pointwise;
  const Buffer* output = nullptr;  // the buffer this node (first) writes
  Index ranges;                    // iteration space of idx ("i0", "i1", ...); Extern: the shape
                                   // the call computes, which its output buffer may hold in another
                                   // shape of the same elements (sched/epilogue.h)
  Index reduction_ranges;          // reduction space of ridx ("r0", ...); empty for pointwise
  ReduceOp reduce_op = ReduceOp::Sum;
  Body body;
  ExternCall call;                    // Extern only
  std::vector<std::string> origins;     // the ATen nodes it came from (our names), for comments
  std::vector<std::string> origin_ops;  // their ops' base names from the registry ("add"), for kernel names

  // The loop-variable symbols this node's body is run with.
  Index index_symbols() const;
  Index reduction_symbols() const;
};

// A dynamic size: a symbol s<k> of index expressions, bound at run time from the input shapes.
struct SizeSymbol {
  std::string name;         // ours: "s0"
  std::string source;       // the archive's expression (untrusted: for quoted messages only)
  int64_t min = 1, max = INT64_MAX;  // the exported range (inclusive)
  int64_t hint = 1;         // the size recorded at export (for estimates and reports)
};

// A relation between dynamic sizes that the program's memory accesses need (lower/bounds.h): the
// wrapper checks `nonnegative >= 0` when the model runs, before any kernel, and refuses the inputs
// with `message` otherwise.
struct SizeCheck {
  Expr nonnegative;
  std::string message;
};

struct LoopProgram {
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<SizeSymbol> size_symbols;          // empty for a static program
  std::vector<SizeCheck> size_checks;            // in terms of size_symbols
  std::vector<std::unique_ptr<LoopNode>> nodes;  // program order
  std::vector<const Buffer*> inputs;             // user inputs in signature order
  std::vector<std::string> input_names;          // ours, for messages and the header
  std::vector<const Buffer*> outputs;            // user outputs in signature order
  std::vector<std::string> output_names;         // ours, for messages and the header

  // A constant is named weight_identifier(name_hint), made unique; the others argN and bufN.
  Buffer* new_buffer(BufferKind kind, DType dtype, const std::vector<Expr>& sizes, const std::string& name_hint = "");
  LoopNode* add_node(std::unique_ptr<LoopNode> node);

  std::map<BufferKind, int> buffers_of_kind;  // new_buffer's count per kind, for names (arg0, buf12)
  // Constant names given so far, each with the next numeric suffix to try when it is asked for again.
  std::unordered_map<std::string, int> constant_names;
};

// A C++ identifier for a weight from its graph value name (untrusted bytes): letters, digits and
// single underscores, at most kMaxWeightIdentifier characters, starting with torch.export's p_, b_
// or c_ or else given w_. Generated code has no other identifiers with these prefixes (arguments
// argN, buffers bufN, sizes sN, wrapper locals, kernels cpp_*, C++ keywords), so a weight cannot
// shadow or collide with one of them; two weights can share one, new_buffer adds a suffix.
constexpr size_t kMaxWeightIdentifier = 64;  // long enough for torchvision's module paths (running_mean vs running_var)
std::string weight_identifier(const std::string& value_name);

std::vector<Expr> contiguous_strides(const std::vector<Expr>& sizes);
// Row-major flat position of `idx` in a box of `sizes`, and back.
Expr ravel_index(const Index& idx, const std::vector<Expr>& sizes);
Index unravel_index(const Expr& flat, const std::vector<Expr>& sizes);

// The value of a size expression at the export hints: for estimates and reports only.
int64_t value_at_hints(const Expr& e, const std::vector<SizeSymbol>& symbols);

std::string loop_var(int i);       // "i0"
std::string reduction_var(int i);  // "r0"

}  // namespace foundry::ir

namespace foundry::ir {

// The extents of a node's loop symbols (i*, r*), for range-aware index simplification.
SymbolExtents node_extents(const LoopNode& node);

// Runs a pointwise/reduction body on its loop symbols through `ops`, simplifying every index
// expression (loads, stores, index_expr) with the node's extents first. Every symbolic handler
// (recording, printing, code emitting) runs bodies this way, so they all see the same indices.
void run_body_symbolic(const LoopNode& node, Ops& ops);

}  // namespace foundry::ir
