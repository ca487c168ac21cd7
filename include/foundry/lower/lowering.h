// Lowering: each ATen node becomes loop-level IR. A lowering function sees its node's arguments
// as TensorRefs (a shape, a dtype and a loader, like Inductor's TensorBox) and returns its outputs
// as TensorRefs. Pointwise math composes loaders lazily; views only remap indices; the driver
// realizes each non-view node's outputs into buffers, so every ATen node is one IR node until the
// scheduler fuses them.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "foundry/graph/graph.h"
#include "foundry/ir/loop_ir.h"
#include "foundry/support/error.h"

namespace foundry::lower {

using ir::Expr;
using ir::Index;
using ir::Ops;
using ir::Val;

// A tensor's value at an index, as IR. Copies share one closure: a view captures its source's
// loader, and copying a std::function would copy the whole chain of sources behind it each time
// (4,000 chained permutes: 8 million closures).
struct ViewStep;
class Loader {
 public:
  using Fn = std::function<Val(Ops&, const Index&)>;
  using IndexMap = std::function<Index(const Index&)>;
  Loader() = default;
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, Loader> &&
                                              std::is_invocable_r_v<Val, F&, Ops&, const Index&>>>
  Loader(F f) : fn_(std::make_shared<const Fn>(std::move(f))) {}  // NOLINT(google-explicit-constructor)
  Val operator()(Ops& ops, const Index& idx) const { return (*fn_)(ops, idx); }
  explicit operator bool() const { return fn_ && *fn_; }

  // A view: `source` read at to_source(index). A view of a view extends one flat chain of index
  // maps that a load runs in a loop, down to the first non-view loader: a chain of n views is n
  // small steps, and loading through it needs no stack depth proportional to n.
  static Loader remapped(IndexMap to_source, const Loader& source);

 private:
  std::shared_ptr<const Fn> fn_;
  std::shared_ptr<const ViewStep> view_;  // set on loaders made by remapped()
};

// One index map of a view chain (see Loader::remapped).
struct ViewStep {
  Loader::IndexMap to_source;
  std::shared_ptr<const ViewStep> next;  // the map after this one, toward the base
  Loader base;                           // on the last step: the loader the chain reads
};

// A lowering that cannot handle a symbolic (dynamic) size: a compile error naming the node and op,
// unless LowerOptions::static_fallback asks to compile for the recorded sizes instead.
class DynamicShapeUnsupported : public UserError {
 public:
  using UserError::UserError;
};

class SymbolTable;

struct TensorRef {
  DType dtype = DType::Float32;
  std::vector<Expr> sizes;
  Loader load;
  const ir::Buffer* buffer = nullptr;  // set when `load` reads exactly `buffer` in its own layout

  size_t rank() const { return sizes.size(); }
  // Static sizes (throws DynamicShapeUnsupported when a size is symbolic).
  std::vector<int64_t> static_sizes() const;
  // Size `d` alone, which must be static (the other dims may be dynamic).
  int64_t static_size(size_t d) const;
};

// What the target's library calls take (the CPU's oneDNN by default; the GPU's cuBLAS and cuDNN).
struct LibraryTraits {
  // A convolution's or addmm's bias is added by the library call (oneDNN fuses it). Otherwise the
  // call computes the product alone and the bias is a pointwise add that joins the kernel of what
  // reads the result (on the GPU a separate bias pass costs a launch and a pass over the output).
  bool bias_in_call = true;
  // Batched matrix operands may have any constant batch stride and leading dimension, as long as
  // one of the matrix strides is 1 (cuBLAS's strided batches). Otherwise a batch is outermost and
  // each matrix dense (oneDNN's fast kernels).
  bool strided_batches = false;
  // Transposed convolutions are library calls (oneDNN deconvolutions); otherwise reductions, as
  // on the GPU, whose cuDNN calls are direct convolutions only.
  bool transposed_convolutions = true;
};

// The library traits of a device ("cpu" or "cuda"): the one place that says what each target's
// library calls take, for foundryc and for anything else that lowers for a device.
LibraryTraits libraries_for(const std::string& device);

// How a device's reductions are lowered. When a reduction becomes two (as Inductor's split
// reductions): a row's loop runs on one thread block on the GPU and on one thread on the CPU, so
// a few long rows leave most of the machine idle. Split, each row is reduced in S pieces of
// C = n / S elements (S divides the row length n, so no piece needs a mask) into partial results,
// and a second reduction combines a row's S partials. Only static sizes and Sum, Prod, Max, Min,
// Any; 16-bit float sums and products are never split (their partials would be rounded to 16 bits
// before being combined).
struct ReductionSplit {
  int64_t max_rows = 0;    // split only reductions with fewer rows (output elements) than this; 0: never
  int64_t min_length = 0;  // whose rows have at least this many elements
  int64_t max_pieces = 0;  // with rows * S at most this
  int64_t min_chunk = 0;   // and C at least this
  int64_t min_pieces = 4;  // the largest such S; below this one, no split
  // Softmax computes each exp(x - max) once and keeps it in a buffer for the sum and the division
  // (the CPU: a row stays in cache, and vit_block's softmax took 0.12 ms instead of 0.20 on the
  // 16-core Xeon), or computes it in both (the GPU: a pass through memory costs more there).
  bool softmax_keeps_exponentials = true;
};

// The reduction split of a device ("cpu" or "cuda"), next to its library traits for the same
// reason: foundryc and the tests lower for a device from here.
ReductionSplit reduction_split_for(const std::string& device);

class LoweringContext {
 public:
  LoweringContext(ir::LoopProgram& program, SymbolTable& symbols, LibraryTraits libraries = {},
                  ReductionSplit split = {})
      : program_(program), symbols_(symbols), libraries_(libraries), split_(split) {}

  // The node being lowered (set by the driver); used for origins and error messages.
  const Node* node = nullptr;

  // The TensorRef bound to a graph value.
  TensorRef& value(const Value* v);
  void bind(const Value* v, TensorRef ref) { env_[v] = std::move(ref); }
  bool is_bound(const Value* v) const { return env_.count(v) != 0; }

  // A tensor argument; a number in a Tensor slot becomes a 0-d constant of `scalar_dtype`.
  TensorRef tensor(const Arg& arg, DType scalar_dtype = DType::Float32);

  // A lazy pointwise tensor (not materialized).
  static TensorRef pointwise(DType dtype, std::vector<Expr> sizes, Loader load);
  // A 0-d constant.
  static TensorRef constant(const ir::Scalar& value);

  // Materializes `ref` into a fresh contiguous buffer (a pointwise node), unless it already is
  // one. Returns a buffer-backed ref.
  TensorRef realize(const TensorRef& ref);
  // The same for a library call's operand that is not in a layout the call takes: the node only
  // copies it (converting its dtype where needed), and its kernel is named as a copy.
  TensorRef realize_operand_copy(const TensorRef& ref);
  // A realized reduction over `reduction_ranges`; fn(ops, idx, ridx) gives the value to reduce.
  // Two reduction nodes where the target's ReductionSplit says so.
  using ReduceFn = std::function<Val(Ops&, const Index& idx, const Index& ridx)>;
  TensorRef reduction(DType out_dtype, std::vector<Expr> sizes, std::vector<Expr> reduction_ranges,
                      ir::ReduceOp op, ReduceFn fn);
  // A node that writes into an existing computed buffer (scatter ops); `ranges` is its iteration
  // space and `body` performs the stores.
  void mutate(const ir::Buffer* target, std::vector<Expr> ranges, ir::Body body);
  // A library call computing `sizes` (its node's ranges); returns the realized output. With
  // `shape`, the output buffer holds those elements, row-major, in that shape instead (a product
  // of [B*M, K] x [K, N] read as [B, M, N]), with no copy.
  TensorRef extern_call(ir::ExternCall call, DType dtype, std::vector<Expr> sizes,
                        std::optional<std::vector<Expr>> shape = std::nullopt);
  // A buffer view usable by an extern kernel: the ref itself when it is an affine view of one
  // buffer, else a realized copy (realize_operand_copy).
  ir::Operand strided_operand(const TensorRef& ref);

  // Whether the graph reads `v` (an argument of a node or a graph output), for ops that compute
  // each of several outputs separately (LAPACK calls). Everything counts as read until the driver
  // sets the graph's reads.
  bool is_used(const Value* v) const { return !used_ || used_->count(v) != 0; }
  void set_used(const std::unordered_set<const Value*>* used) { used_ = used; }

  ir::LoopProgram& program() { return program_; }
  const LibraryTraits& libraries() const { return libraries_; }
  const ReductionSplit& reductions() const { return split_; }
  // A recorded type's sizes: constants, or expressions in s0, s1, ... where the archive has
  // symbolic sizes (unless the program is being specialized to the recorded sizes).
  std::vector<Expr> recorded_sizes(const TensorType& type);
  // For lowerings that need static sizes where a size is symbolic.
  [[noreturn]] void need_static_sizes() const;
  [[noreturn]] void fail(const std::string& message) const;  // UserError naming the node and op

 private:
  ir::LoopProgram& program_;
  SymbolTable& symbols_;
  LibraryTraits libraries_;
  ReductionSplit split_;
  std::map<const Value*, TensorRef> env_;
  const std::unordered_set<const Value*>* used_ = nullptr;
  std::vector<std::string> origins() const;
  std::vector<std::string> origin_ops() const;
  TensorRef realize_node(const TensorRef& ref, std::vector<std::string> ops);
  TensorRef reduction_node(DType out_dtype, std::vector<Expr> sizes, std::vector<Expr> reduction_ranges,
                           ir::ReduceOp op, ReduceFn fn);
  int64_t split_pieces(DType out_dtype, const std::vector<Expr>& sizes, const std::vector<Expr>& reduction_ranges,
                       ir::ReduceOp op) const;
  TensorRef split_reduction(DType out_dtype, std::vector<Expr> sizes, const std::vector<Expr>& reduction_ranges,
                            ir::ReduceOp op, const ReduceFn& fn, int64_t pieces);
};

// A buffer seen in its own layout.
TensorRef buffer_ref(const ir::Buffer* buf);

// One lowering per op name ("add.Tensor", "relu"): returns the node's outputs in order (entries
// for outputs nobody uses may be empty TensorRefs with no loader).
using LowerFn = std::function<std::vector<TensorRef>(LoweringContext&, const Node&)>;

struct Lowering {
  std::string op;
  LowerFn fn;
  bool is_view = false;  // outputs stay lazy index remaps instead of being realized
};

const Lowering* find_lowering(const std::string& op);
const std::vector<Lowering>& all_lowerings();

struct LowerOptions {
  // Keep symbolic sizes symbolic (kernels take them at run time). Otherwise the program is
  // specialized to the sizes recorded at export.
  bool dynamic_shapes = false;
  // With dynamic_shapes: when some lowering needs static sizes, warn and specialize to the
  // recorded sizes (foundryc --static-fallback) instead of failing with DynamicShapeUnsupported.
  bool static_fallback = false;
  LibraryTraits libraries;
  ReductionSplit reduction_split;
};

// Lowers the whole graph. Throws UserError naming the node and op when an op has no lowering.
ir::LoopProgram lower_graph(const Graph& graph, const LowerOptions& options = {});

}  // namespace foundry::lower
