#include "foundry/lower/lowering.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_set>

#include "foundry/ir/record.h"
#include "foundry/lower/symbols.h"
#include "foundry/ops/registry.h"
#include "foundry/support/error.h"
#include "lower/bounds.h"
#include "lower/lowerings.h"

namespace foundry::lower {

std::vector<int64_t> TensorRef::static_sizes() const {
  std::vector<int64_t> out;
  for (const Expr& e : sizes) {
    if (!e.is_const()) throw DynamicShapeUnsupported("needs static sizes, and size " + ir::to_string(e) + " is dynamic");
    out.push_back(e.const_value());
  }
  return out;
}

int64_t TensorRef::static_size(size_t d) const {
  const Expr& e = sizes.at(d);
  if (!e.is_const())
    throw DynamicShapeUnsupported("needs a static size in dim " + std::to_string(d) + ", and it is " + ir::to_string(e));
  return e.const_value();
}

TensorRef buffer_ref(const ir::Buffer* buf) {
  TensorRef ref;
  ref.dtype = buf->dtype;
  ref.sizes = buf->sizes;
  ref.buffer = buf;
  ref.load = [buf](Ops& ops, const Index& idx) { return ops.load(*buf, buf->linear_index(idx)); };
  return ref;
}

TensorRef& LoweringContext::value(const Value* v) {
  auto it = env_.find(v);
  if (it == env_.end()) fail("value %" + v->name + " is used before it is defined");
  return it->second;
}

TensorRef LoweringContext::tensor(const Arg& arg, DType scalar_dtype) {
  switch (arg.kind) {
    case Arg::Kind::Tensor: return value(arg.tensor);
    case Arg::Kind::Int: case Arg::Kind::Bool: case Arg::Kind::Float:
      return constant(ir::Scalar::of(arg.as_double(), scalar_dtype));
    default: fail("expected a tensor argument");
  }
}

TensorRef LoweringContext::pointwise(DType dtype, std::vector<Expr> sizes, Loader load) {
  TensorRef ref;
  ref.dtype = dtype;
  ref.sizes = std::move(sizes);
  ref.load = std::move(load);
  return ref;
}

TensorRef LoweringContext::constant(const ir::Scalar& value) {
  return pointwise(value.dtype, {}, [value](Ops& ops, const Index&) { return ops.constant(value); });
}

std::vector<std::string> LoweringContext::origins() const {
  if (!node) return {};
  return {node->name + " (" + qualified_op_name(node->target) + ")"};
}

std::vector<std::string> LoweringContext::origin_ops() const {
  if (!node || !node->op) return {};
  return {node->op->schema.name};
}

namespace {
bool is_contiguous_buffer_view(const TensorRef& ref) {
  if (!ref.buffer || ref.buffer->kind != ir::BufferKind::Computed) return false;
  return ref.buffer->strides == ir::contiguous_strides(ref.buffer->sizes) && ref.buffer->offset.is_const(0);
}
}  // namespace

Loader Loader::remapped(IndexMap to_source, const Loader& source) {
  auto step = std::make_shared<ViewStep>();
  step->to_source = std::move(to_source);
  if (source.view_) step->next = source.view_;
  else step->base = source;
  Loader out([step](Ops& ops, const Index& idx) {
    Index at = idx;
    for (const ViewStep* s = step.get();; s = s->next.get()) {
      at = s->to_source(at);
      if (!s->next) return s->base(ops, at);
    }
  });
  out.view_ = std::move(step);
  return out;
}

TensorRef LoweringContext::realize(const TensorRef& ref) { return realize_node(ref, origin_ops()); }

// Named as a copy: the kernel it becomes does none of the consuming op's work.
TensorRef LoweringContext::realize_operand_copy(const TensorRef& ref) { return realize_node(ref, {"copy"}); }

TensorRef LoweringContext::realize_node(const TensorRef& ref, std::vector<std::string> ops) {
  if (is_contiguous_buffer_view(ref)) return ref;
  ir::Buffer* out = program_.new_buffer(ir::BufferKind::Computed, ref.dtype, ref.sizes);
  auto node = std::make_unique<ir::LoopNode>();
  node->kind = ir::NodeKind::Pointwise;
  node->output = out;
  node->ranges = ref.sizes;
  node->origins = origins();
  node->origin_ops = std::move(ops);
  Loader load = ref.load;
  DType dtype = ref.dtype;
  node->body = [load, out, dtype](Ops& ops, const Index& idx, const Index&) {
    ops.store(*out, out->linear_index(idx), ops.cast(load(ops, idx), dtype), ir::StoreMode::Set);
  };
  program_.add_node(std::move(node));
  return buffer_ref(out);
}

TensorRef LoweringContext::reduction(DType out_dtype, std::vector<Expr> sizes, std::vector<Expr> reduction_ranges,
                                     ir::ReduceOp op, ReduceFn fn) {
  if (int64_t pieces = split_pieces(out_dtype, sizes, reduction_ranges, op))
    return split_reduction(out_dtype, std::move(sizes), reduction_ranges, op, fn, pieces);
  return reduction_node(out_dtype, std::move(sizes), std::move(reduction_ranges), op, std::move(fn));
}

namespace {
using ir::static_numel;

// Combining partials is the same op only for these; 16-bit float partial sums and products would
// be rounded to 16 bits each, which the unsplit reduction's float accumulator does not do.
bool splittable(ir::ReduceOp op, DType out_dtype) {
  switch (op) {
    case ir::ReduceOp::Sum: case ir::ReduceOp::Prod:
      return out_dtype != DType::Float16 && out_dtype != DType::BFloat16;
    case ir::ReduceOp::Max: case ir::ReduceOp::Min: case ir::ReduceOp::Any: return true;
    default: return false;
  }
}
}  // namespace

// S, the pieces each row is reduced in, or 0 for no split (see ReductionSplit).
int64_t LoweringContext::split_pieces(DType out_dtype, const std::vector<Expr>& sizes,
                                      const std::vector<Expr>& reduction_ranges, ir::ReduceOp op) const {
  const ReductionSplit& r = split_;
  if (r.max_rows <= 0 || !splittable(op, out_dtype)) return 0;
  std::optional<int64_t> rows = static_numel(sizes), n = static_numel(reduction_ranges);
  if (!rows || !n || *rows < 1 || *rows >= r.max_rows || *n < std::max<int64_t>(r.min_length, 2)) return 0;
  int64_t most = std::min(r.max_pieces / *rows, *n / std::max<int64_t>(r.min_chunk, 1));
  for (int64_t s = most; s >= std::max<int64_t>(r.min_pieces, 2); --s)
    if (*n % s == 0) return s;
  return 0;
}

// partial[idx..., s] reduces elements s*C .. s*C + C-1 of row idx (C = n / pieces, in the row's
// row-major order); the result reduces partial[idx..., 0 .. pieces-1] with the same op.
TensorRef LoweringContext::split_reduction(DType out_dtype, std::vector<Expr> sizes,
                                           const std::vector<Expr>& reduction_ranges, ir::ReduceOp op,
                                           const ReduceFn& fn, int64_t pieces) {
  Expr chunk(*static_numel(reduction_ranges) / pieces);
  std::vector<Expr> partial_sizes = sizes;
  partial_sizes.push_back(Expr(pieces));
  TensorRef partial = reduction_node(out_dtype, partial_sizes, {chunk}, op,
                                     [fn, reduction_ranges, chunk](Ops& ops, const Index& idx, const Index& ridx) {
    Index row(idx.begin(), idx.end() - 1);
    return fn(ops, row, ir::unravel_index(idx.back() * chunk + ridx[0], reduction_ranges));
  });
  Loader load = partial.load;
  return reduction_node(out_dtype, std::move(sizes), {Expr(pieces)}, op,
                        [load](Ops& ops, const Index& idx, const Index& ridx) {
    Index at = idx;
    at.push_back(ridx[0]);
    return load(ops, at);
  });
}

TensorRef LoweringContext::reduction_node(DType out_dtype, std::vector<Expr> sizes,
                                          std::vector<Expr> reduction_ranges, ir::ReduceOp op, ReduceFn fn) {
  ir::Buffer* out = program_.new_buffer(ir::BufferKind::Computed, out_dtype, sizes);
  auto node = std::make_unique<ir::LoopNode>();
  node->kind = ir::NodeKind::Reduction;
  node->output = out;
  node->ranges = sizes;
  node->reduction_ranges = std::move(reduction_ranges);
  node->reduce_op = op;
  node->origins = origins();
  node->origin_ops = origin_ops();
  node->body = [fn, out, op, out_dtype](Ops& ops, const Index& idx, const Index& ridx) {
    Val v = ops.reduction(op, fn(ops, idx, ridx));
    FOUNDRY_CHECK(v.dtype == out_dtype, "reduction result dtype does not match its buffer");
    ops.store_reduction(*out, out->linear_index(idx), v);
  };
  program_.add_node(std::move(node));
  return buffer_ref(out);
}

void LoweringContext::mutate(const ir::Buffer* target, std::vector<Expr> ranges, ir::Body body) {
  auto node = std::make_unique<ir::LoopNode>();
  node->kind = ir::NodeKind::Pointwise;
  node->output = target;
  node->ranges = std::move(ranges);
  node->origins = origins();
  node->origin_ops = origin_ops();
  node->body = std::move(body);
  program_.add_node(std::move(node));
}

TensorRef LoweringContext::extern_call(ir::ExternCall call, DType dtype, std::vector<Expr> sizes,
                                        std::optional<std::vector<Expr>> shape) {
  ir::Buffer* out = program_.new_buffer(ir::BufferKind::Computed, dtype, shape ? *shape : sizes);
  auto node = std::make_unique<ir::LoopNode>();
  node->kind = ir::NodeKind::Extern;
  node->output = out;
  node->ranges = sizes;
  node->call = std::move(call);
  node->origins = origins();
  node->origin_ops = origin_ops();
  program_.add_node(std::move(node));
  return buffer_ref(out);
}

namespace {

// True when `e` involves no loop variable (only constants and dynamic sizes).
bool loop_invariant(const Expr& e) {
  for (const std::string& s : ir::free_symbols(e))
    if (!ir::is_size_symbol(s)) return false;
  return true;
}

// The single buffer read by `ref`'s loader and the index it reads, if it reads exactly one.
std::optional<std::pair<const ir::Buffer*, Expr>> single_load(const TensorRef& ref) {
  ir::LoopNode node;
  node.kind = ir::NodeKind::Pointwise;
  node.ranges = ref.sizes;
  ir::Buffer dummy;
  dummy.name = "probe";
  node.output = &dummy;
  Loader load = ref.load;
  node.body = [&](Ops& ops, const Index& idx, const Index&) { load(ops, idx); };
  ir::Accesses acc = ir::record_accesses(node);
  if (acc.reads.size() != 1) return std::nullopt;
  return std::make_pair(acc.reads[0].buffer, acc.reads[0].index);
}

// The strided view of `index` over loop variables i0..i{rank-1}, when it is exactly affine.
bool affine_view(const Expr& index, size_t rank, ir::Operand& op) {
  std::map<std::string, Expr> zero;
  for (size_t d = 0; d < rank; ++d) zero[ir::loop_var(static_cast<int>(d))] = Expr(0);
  op.offset = ir::simplify(ir::substitute(index, zero), {});
  if (!loop_invariant(op.offset)) return false;
  op.strides.clear();
  for (size_t d = 0; d < rank; ++d) {
    auto coeff = ir::affine_coefficient(index, ir::loop_var(static_cast<int>(d)));
    if (!coeff || !loop_invariant(*coeff)) return false;
    op.strides.push_back(*coeff);
  }
  // The affine form must reproduce the index exactly (no floordiv/mod hidden elsewhere).
  Expr rebuilt = op.offset;
  for (size_t d = 0; d < rank; ++d) rebuilt = rebuilt + Expr::sym(ir::loop_var(static_cast<int>(d))) * op.strides[d];
  return rebuilt == index;
}

// Row-major strides of `sizes`; a size-1 dim gets its contiguous value too, because its stride
// is arbitrary and libraries only recognize plain layouts.
// (A zero-size dim counts as 1, so that strides stay nonzero.)
std::vector<Expr> plain_strides(const std::vector<Expr>& sizes) {
  std::vector<Expr> strides(sizes.size());
  Expr running = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = running;
    running = running * (sizes[d].is_const(0) ? Expr(1) : sizes[d]);
  }
  return strides;
}

}  // namespace

ir::Operand LoweringContext::strided_operand(const TensorRef& ref) {
  // Run the loader symbolically: an affine single load of one buffer is a strided view of it.
  ir::Operand op;
  op.sizes = ref.sizes;
  auto load = single_load(ref);
  if (load && load->first->dtype == ref.dtype && affine_view(load->second, ref.rank(), op)) {
    std::vector<Expr> plain = plain_strides(op.sizes);
    for (size_t d = 0; d < op.sizes.size(); ++d)
      if (op.sizes[d].is_const(1)) op.strides[d] = plain[d];
    op.buffer = load->first;
    return op;
  }
  op.buffer = realize_operand_copy(ref).buffer;
  op.strides = plain_strides(op.sizes);
  op.offset = Expr(0);
  return op;
}

std::vector<Expr> LoweringContext::recorded_sizes(const TensorType& type) { return symbols_.sizes(type); }

void LoweringContext::need_static_sizes() const {
  throw DynamicShapeUnsupported("node " + (node ? node->name + " (" + qualified_op_name(node->target) + ")" : std::string("?")) +
                                ": this lowering needs static sizes");
}

void LoweringContext::fail(const std::string& message) const {
  if (!node) throw UserError(message);
  throw UserError("node " + node->name + " (" + qualified_op_name(node->target) + "): " + message);
}

// --- the registry --------------------------------------------------------------------------------

const std::vector<Lowering>& all_lowerings() {
  static const std::vector<Lowering> table = [] {
    std::vector<Lowering> t;
#define FOUNDRY_LOWERING(name, fn, is_view) t.push_back(Lowering{name, fn, is_view});
#include "foundry/lower/lowerings.def"
#undef FOUNDRY_LOWERING
    return t;
  }();
  return table;
}

const Lowering* find_lowering(const std::string& op) {
  static const std::map<std::string, const Lowering*> index = [] {
    std::map<std::string, const Lowering*> m;
    for (const auto& l : all_lowerings()) m[l.op] = &l;
    return m;
  }();
  auto it = index.find(op);
  return it == index.end() ? nullptr : it->second;
}

// --- the driver --------------------------------------------------------------------------------

namespace {

std::vector<Expr> static_exprs(const std::vector<int64_t>& sizes) {
  return std::vector<Expr>(sizes.begin(), sizes.end());
}

void bind_inputs(const Graph& graph, LoweringContext& ctx, ir::LoopProgram& program) {
  int user_index = 0;
  for (const GraphInput& in : graph.inputs) {
    const TensorType& t = in.value->type;
    if (in.kind == InputKind::User) {
      ir::Buffer* buf = program.new_buffer(ir::BufferKind::Input, t.dtype, ctx.recorded_sizes(t));
      buf->input_index = user_index++;
      program.inputs.push_back(buf);
      program.input_names.push_back(in.value->name);
      ctx.bind(in.value, buffer_ref(buf));
      continue;
    }
    if (t.has_symbolic_sizes()) throw DynamicShapeUnsupported("weight " + in.value->name + " has a dynamic size");
    ir::Buffer* buf = program.new_buffer(ir::BufferKind::Constant, t.dtype, static_exprs(t.sizes), in.value->name);
    buf->fqn = in.fqn;
    std::vector<int64_t> strides = t.strides.empty() ? t.contiguous_strides() : t.strides;
    buf->strides = static_exprs(strides);
    buf->offset = t.storage_offset;
    buf->data = in.storage;
    buf->storage_numel = static_cast<int64_t>(in.storage.size / dtype_size(t.dtype));
    ctx.bind(in.value, buffer_ref(buf));
  }
}

// The values some node or the graph's outputs read, found once: asking Graph::users for each
// node's outputs scans every node each time (100,000 nodes: minutes).
std::unordered_set<const Value*> used_values(const Graph& graph) {
  std::unordered_set<const Value*> used;
  for (const auto& out : graph.outputs) used.insert(out.value);
  for (const auto& n : graph.nodes)
    for (const Arg& a : n->args) {
      if (a.tensor) used.insert(a.tensor);
      used.insert(a.tensors.begin(), a.tensors.end());
    }
  return used;
}

std::string sizes_text(const std::vector<Expr>& sizes) {
  std::string out = "[";
  for (size_t d = 0; d < sizes.size(); ++d) out += (d ? ", " : "") + ir::to_string(sizes[d]);
  return out + "]";
}

bool is_static(const std::vector<Expr>& sizes) {
  return std::all_of(sizes.begin(), sizes.end(), [](const Expr& e) { return e.is_const(); });
}

// With dynamic sizes, a lowering's result must have exactly the recorded (symbolic) sizes.
// Passes that insert nodes (decompositions; no source name) record the sizes at the export hints:
// such a node whose inputs are dynamic but whose recorded output is static cannot be trusted to
// be static. The archive's own nodes carry torch.export's symbolic sizes: a mean over a dynamic
// height is static.
void check_dynamic_sizes(LoweringContext& ctx, const Node& node, const Value* v, const TensorRef& ref) {
  std::vector<Expr> recorded = ctx.recorded_sizes(v->type);
  if (ref.sizes != recorded)
    throw DynamicShapeUnsupported("node " + node.name + " (" + qualified_op_name(node.target) + "): sizes " + sizes_text(ref.sizes) +
                                  " where the archive records " + sizes_text(recorded));
  if (!is_static(recorded) || !node.source_name.empty()) return;
  std::vector<const Value*> inputs;
  for (const Arg& a : node.args) {
    if (a.tensor) inputs.push_back(a.tensor);
    for (const Value* t : a.tensors)
      if (t) inputs.push_back(t);
  }
  for (const Value* in : inputs)
    if (in->is_tensor && in->type.has_symbolic_sizes())
      throw DynamicShapeUnsupported("node " + node.name + " (" + qualified_op_name(node.target) +
                                    "): a static result from dynamic inputs");
}

void lower_node(const std::unordered_set<const Value*>& used, const Node& node, LoweringContext& ctx, bool dynamic) {
  const Lowering* lowering = find_lowering(node.target);
  if (!node.op || !lowering) ctx.fail("unsupported op: no lowering for " + qualified_op_name(node.target));
  std::vector<TensorRef> outs;
  try {
    outs = lowering->fn(ctx, node);
  } catch (const DynamicShapeUnsupported& e) {
    std::string what = e.what();
    if (what.rfind("node ", 0) == 0) throw;
    throw DynamicShapeUnsupported("node " + node.name + " (" + qualified_op_name(node.target) + "): " + what);
  }
  if (outs.size() != node.outputs.size())
    throw InternalError("lowering of " + node.target + " returned " + std::to_string(outs.size()) +
                        " outputs, the node has " + std::to_string(node.outputs.size()));
  for (size_t k = 0; k < outs.size(); ++k) {
    const Value* v = node.outputs[k];
    if (!used.count(v)) continue;
    // A lowering computes only the outputs models read (e.g. not those for the backward pass).
    if (!outs[k].load)
      ctx.fail("its output " + std::to_string(k) + " is used, which foundryc does not compute for this op (only the "
               "outputs inference needs)");
    TensorRef ref = outs[k];
    if (!v->is_tensor) {
      ctx.bind(v, ref);
      continue;
    }
    if (ref.dtype != v->type.dtype)
      throw InternalError("lowering of " + node.target + " produced " + std::string(dtype_name(ref.dtype)) +
                          ", the graph records " + std::string(dtype_name(v->type.dtype)));
    if (dynamic) check_dynamic_sizes(ctx, node, v, ref);
    ctx.bind(v, lowering->is_view ? ref : ctx.realize(ref));
  }
}

void bind_outputs(const Graph& graph, LoweringContext& ctx, ir::LoopProgram& program) {
  ctx.node = nullptr;
  std::set<const ir::Buffer*> used;
  for (const GraphOutput& out : graph.outputs) {
    if (out.kind != OutputKind::User) continue;
    TensorRef ref = ctx.value(out.value);
    // Outputs are fresh contiguous computed buffers, each distinct, never an input or weight.
    bool reusable = ref.buffer && ref.buffer->kind == ir::BufferKind::Computed &&
                    ref.buffer->strides == ir::contiguous_strides(ref.buffer->sizes) &&
                    ref.buffer->offset.is_const(0) && !used.count(ref.buffer);
    const ir::Buffer* buf = reusable ? ref.buffer : nullptr;
    if (!buf) {
      ref.buffer = nullptr;  // force a copy
      buf = ctx.realize(ref).buffer;
    }
    used.insert(buf);
    program.outputs.push_back(buf);
    program.output_names.push_back(out.value->name);
  }
}


ir::LoopProgram lower_with(const Graph& graph, bool dynamic, const LowerOptions& options) {
  ir::LoopProgram program;
  SymbolTable symbols(graph, !dynamic);
  LoweringContext ctx(program, symbols, options.libraries, options.reduction_split);
  bind_inputs(graph, ctx, program);
  const std::unordered_set<const Value*> used = used_values(graph);
  ctx.set_used(&used);
  for (const auto& node : graph.nodes) {
    ctx.node = node.get();
    lower_node(used, *node, ctx, dynamic);
  }
  bind_outputs(graph, ctx, program);
  program.size_symbols = symbols.symbols();
  check_memory_bounds(program);
  return program;
}

bool has_dynamic_sizes(const Graph& graph) {
  for (const GraphInput& in : graph.inputs)
    if (in.value->type.has_symbolic_sizes()) return true;
  return false;
}

}  // namespace

LibraryTraits libraries_for(const std::string& device) {
  if (device == "cuda") return {/*bias_in_call=*/false, /*strided_batches=*/true, /*transposed_convolutions=*/false};
  return {};
}

// On the GPU (132 SMs on an H200) fewer rows than about one per SM leave SMs idle: rows * S up to
// 512 blocks is about four resident blocks per SM, more only lengthens the second pass. C >= 1024
// gives each of a row block's threads several elements, so the piece is not all launch and
// partial store; rows of fewer than 4096 elements are too short to be worth a second launch.
// The CPU never splits: its kernels already run a lone row's loop in pieces on threads, and with
// more rows than threads the rows fill them. On the 2-core build host, a sum of 16M floats and a
// mean over [8, 2097152] at --threads 2 were memory bound at ~10 ms split or not.
ReductionSplit reduction_split_for(const std::string& device) {
  if (device == "cuda")
    return {/*max_rows=*/128, /*min_length=*/4096, /*max_pieces=*/512, /*min_chunk=*/1024, /*min_pieces=*/4,
            /*softmax_keeps_exponentials=*/false};
  return {};
}

ir::LoopProgram lower_graph(const Graph& graph, const LowerOptions& options) {
  if (!has_dynamic_sizes(graph)) return lower_with(graph, false, options);
  if (options.dynamic_shapes) {
    try {
      return lower_with(graph, true, options);
    } catch (const DynamicShapeUnsupported& e) {
      if (!options.static_fallback)
        throw DynamicShapeUnsupported(std::string(e.what()) +
                                      "; foundryc cannot compile it with dynamic sizes (--static-fallback compiles for "
                                      "the sizes recorded at export instead)");
      spdlog::warn("{}; compiling for the sizes recorded at export instead (--static-fallback)", e.what());
    }
  } else {
    spdlog::warn("the inputs have dynamic sizes; specializing to the sizes recorded at export");
  }
  return lower_with(graph, false, options);
}

}  // namespace foundry::lower
