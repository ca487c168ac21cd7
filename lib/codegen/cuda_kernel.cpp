#include "foundry/codegen/cuda_kernel.h"

#include <algorithm>
#include <optional>
#include <sstream>

#include "codegen/kernel_common.h"
#include "foundry/codegen/cpp_expr.h"
#include "foundry/codegen/loop_nest.h"
#include "foundry/sched/kernel_walk.h"

namespace foundry::codegen {
namespace {

// How a kernel's iterations are spread over the GPU (see cuda_kernel.h).
enum class Mapping { Serial, Flat, Rows };

// Independent iterations, as the C++ kernels' plan_loops asks for threads: plain stores at
// positions that do not come from loaded indices and that tell every outer iteration apart. A
// flat kernel also reads no buffer it writes. A row kernel may: the walk forwards or reads back
// a value within the same row (fusion refuses a read of another row's), and each loop shared by
// the block's threads ends with a barrier before the next one reads what it wrote.
Mapping choose_mapping(const ir::Accesses& acc, bool nested, const std::vector<std::string>& outer,
                       const ir::Index& ranges) {
  std::set<const ir::Buffer*> written;
  for (const auto& w : acc.writes) {
    if (w.mode != ir::StoreMode::Set) return Mapping::Serial;
    std::set<std::string> symbols = ir::free_symbols(w.index);
    for (const std::string& s : symbols)
      if (s.rfind("ind", 0) == 0) return Mapping::Serial;
    for (size_t d = 0; d < outer.size(); ++d)
      if (!ranges[d].is_const(1) && !symbols.count(outer[d])) return Mapping::Serial;
    written.insert(w.buffer);
  }
  if (nested) return Mapping::Rows;
  for (const auto& r : acc.reads)
    if (written.count(r.buffer)) return Mapping::Serial;
  return Mapping::Flat;
}

// The C++ extents of `ranges`, each parenthesized.
std::vector<std::string> extents(ScopeStack& scopes, const ir::Index& ranges) {
  std::vector<std::string> extent;
  for (const auto& r : ranges) extent.push_back("(" + scopes.idx(r) + ")");
  return extent;
}

std::string product(const std::vector<std::string>& factors) {
  std::string total;
  for (const auto& f : factors) total += (total.empty() ? "" : " * ") + f;
  return total.empty() ? "1" : total;
}

// Statements that define each of `vars` from the flat index `flat` (row-major over `extent`).
Stmts recover_vars(const std::vector<std::string>& vars, const std::vector<std::string>& extent, const std::string& flat) {
  Stmts lines;
  std::string inner;  // the product of the extents after variable d
  for (size_t d = vars.size(); d-- > 0;) {
    std::string q = inner.empty() ? flat : flat + " / (" + inner + ")";
    std::string v = d == 0 ? q : "(" + q + ") % " + extent[d];
    lines.push_back("const int64_t " + vars[d] + " = " + v + ";");
    inner = inner.empty() ? extent[d] : inner + " * " + extent[d];
  }
  std::reverse(lines.begin(), lines.end());
  return lines;
}

// One loop over all iterations of `vars` (their ranges' product, flattened as `flat`), run as
// `threads` says, whose body first recovers each variable from the flat index; a single
// variable is looped over directly.
Loop flat_loop(ScopeStack& scopes, const std::vector<std::string>& vars, const ir::Index& ranges,
               const std::string& flat, Loop::Threads threads, Stmts body) {
  std::vector<std::string> extent = extents(scopes, ranges);
  // No variables (a reduction over a 0-d tensor): one iteration, still taken by one thread only.
  Loop loop = loop_over(vars.size() == 1 ? vars[0] : flat, "0", vars.size() == 1 ? scopes.idx(ranges[0]) : product(extent));
  loop.threads = threads;
  if (vars.size() > 1) loop.body = recover_vars(vars, extent, flat);
  append(loop.body, body);
  return loop;
}

// A flat kernel's grid-stride loop over groups of kLanes consecutive elements: the variables at
// the group's first lane, the vector loads, the lanes' unrolled loop (the innermost variable
// moves by one a lane) and the vector stores.
Loop lanes_loop(ScopeStack& scopes, const std::vector<std::string>& vars, const ir::Index& ranges,
                const LaneVectors& lanes, const Stmts& body) {
  const std::string lanes_n = std::to_string(LaneVectors::kLanes);
  std::vector<std::string> extent = extents(scopes, ranges);
  Loop loop = loop_over("xvec", "0", product(extent) + " / " + lanes_n);
  loop.threads = Loop::Threads::Grid;
  loop.body.push_back("const int64_t xindex = xvec * " + lanes_n + ";  // the first lane's element");
  std::vector<std::string> first = vars;
  first.back() = lanes.first_lane();
  append(loop.body, recover_vars(first, extent, "xindex"));
  append_lines(loop.body, lanes.before());
  Loop each = loop_over("lane", "0", lanes_n);
  each.unroll = true;
  each.body.push_back("const int64_t " + lanes.var() + " = " + lanes.first_lane() + " + lane;");
  append(each.body, body);
  loop.body.push_back(std::move(each));
  append_lines(loop.body, lanes.after());
  return loop;
}

// The block-wide combine of an accumulator (foundry_cuda_device.h), "" for argmax/argmin.
std::string combine_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "foundry_cuda::Combine::Sum";
    case ReduceOp::Prod: return "foundry_cuda::Combine::Prod";
    case ReduceOp::Max: return "foundry_cuda::Combine::Max";
    case ReduceOp::Min: return "foundry_cuda::Combine::Min";
    case ReduceOp::Any: return "foundry_cuda::Combine::Any";
    case ReduceOp::ArgMax: case ReduceOp::ArgMin: return "";
  }
  return "";
}

// A shared loop of at most this many rounds per thread holds its row in registers.
constexpr int64_t kMaxRounds = 8;

// Builds a CUDA kernel's loop nest: the walk opens a scope per loop block, the scalar handler
// fills it, and closing it maps its loops to the GPU (rows held in registers and lane vectors
// where the scopes ask for them; `cap`: the most threads a block).
class CudaNestBuilder final : public sched::KernelVisitor {
 public:
  CudaNestBuilder(ScopeStack& scopes, ir::Ops& ops, Mapping mapping, int cap)
      : scopes_(scopes), ops_(ops), mapping_(mapping), rows_(scopes.rows), lanes_(scopes.lane_vectors), cap_(cap) {}
  ir::Ops& ops() override { return ops_; }

  void begin_reduction(const sched::Member&, const ir::Index& ranges) override {
    std::vector<std::string> vars;
    for (size_t d = 0; d < ranges.size(); ++d) vars.push_back(ir::reduction_var(static_cast<int>(d)));
    open_nested(ranges, vars);
  }
  void end_reduction(const sched::Member&) override { close_nested(); }
  void begin_inner(const sched::Member&, const ir::Index& ranges, const std::vector<std::string>& vars) override {
    open_nested(ranges, vars);
  }
  void end_inner(const sched::Member&) override { close_nested(); }

  // The kernel's outer loops: a grid-stride loop (Flat), a loop of blocks (Rows) or plain loops.
  Stmts close_outer() {
    Scope b = scopes_.close();
    Stmts out;
    append_lines(out, b.pre);
    if (b.vars.empty()) {  // a single iteration: launched on one thread, or one block of a row kernel
      append(out, b.lines);
    } else if (mapping_ == Mapping::Serial) {
      append(out, plain_loops(b));
    } else if (lanes_) {
      out.push_back(lanes_loop(scopes_, b.vars, b.ranges, *lanes_, b.lines));
    } else {
      Loop::Threads t = mapping_ == Mapping::Flat ? Loop::Threads::Grid : Loop::Threads::Blocks;
      out.push_back(flat_loop(scopes_, b.vars, b.ranges, "xindex", t, b.lines));
    }
    append_lines(out, b.post);
    return out;
  }

  bool single_thread_rows() const { return single_thread_rows_; }
  // The longest loop the block's threads share, when every such loop has a static extent.
  std::optional<int64_t> longest_shared_loop() const { return longest_shared_; }
  // The longest loop run in rounds (0: none).
  int64_t longest_in_rounds() const { return longest_in_rounds_; }

 private:
  ScopeStack& scopes_;
  ir::Ops& ops_;
  Mapping mapping_;
  RowRegisters* rows_;
  LaneVectors* lanes_;  // flat kernels taken kLanes elements at a time
  int cap_;
  bool single_thread_rows_ = false;
  std::optional<int64_t> longest_shared_ = 0;
  int64_t longest_in_rounds_ = 0;

  // A loop directly inside a row kernel's outer loop is shared by the block's threads; deeper
  // loops (and every loop of a serial kernel) run whole on each thread.
  bool shared_here() const { return mapping_ == Mapping::Rows && scopes_.depth() == 3; }

  void open_nested(const ir::Index& ranges, const std::vector<std::string>& vars) {
    scopes_.open(ranges, vars);
    std::optional<int64_t> n = ir::static_numel(ranges);
    if (rows_ && shared_here() && n && *n >= 1 && *n <= kMaxRounds * cap_) rows_->enter(ranges, vars, scopes_.top().serial);
  }

  void close_nested() {
    bool shared = shared_here();
    bool in_rounds = rows_ && rows_->inside(scopes_.top().serial);
    Scope b = scopes_.close();
    Stmts out;
    append_lines(out, b.pre);
    if (!shared) {
      append(out, plain_loops(b));
    } else {
      std::optional<int64_t> n = ir::static_numel(b.ranges);
      if (!n) longest_shared_.reset();
      else if (longest_shared_) longest_shared_ = std::max(*longest_shared_, *n);
      Loop loop = flat_loop(scopes_, b.vars, b.ranges, "rindex", Loop::Threads::BlockThreads, b.lines);
      if (in_rounds) {
        rows_->leave();
        loop.rounds = true;
        longest_in_rounds_ = std::max(longest_in_rounds_, *n);
      }
      out.push_back(std::move(loop));
      for (const Accumulator& a : b.accumulators) {
        std::string op = combine_op(a.op);
        if (op.empty()) single_thread_rows_ = true;  // one thread per row: nothing to combine
        else out.push_back(a.name + " = foundry_cuda::block_combine(" + a.name + ", " + op + ");");
      }
      // The next loop may read what this one's threads wrote.
      out.push_back(std::string("__syncthreads();"));
    }
    append_lines(out, b.post);
    append(scopes_.top().lines, out);
  }

  Stmts plain_loops(const Scope& b) {
    Stmts body = b.lines;
    for (size_t d = b.vars.size(); d-- > 0;) {
      Loop loop = loop_over(b.vars[d], "0", scopes_.idx(b.ranges[d]));
      loop.body = std::move(body);
      body = {std::move(loop)};
    }
    return body;
  }
};

// Threads of a row kernel's block: enough warps for its longest shared loop (a row of 12 or 32
// elements gets one warp, not eight that would mostly idle and then join the block's combine),
// at most `cap`; a loop of dynamic extent gets the cap.
int row_threads(std::optional<int64_t> longest, int cap) {
  if (!longest) return cap;
  int threads = 32;
  while (threads < cap && threads < *longest) threads *= 2;
  return std::min(threads, cap);
}

// The product of the outer ranges: the flat iterations (Flat) or rows (Rows) of a launch.
std::string outer_work(ScopeStack& scopes, const ir::Index& ranges) { return product(extents(scopes, ranges)); }

// A kernel's loop nest from one walk of its bodies, with what the launch needs to know of it.
struct Nest {
  Stmts body;
  std::string work;  // outer_work
  std::set<std::string> size_symbols;
  bool may_fail = false, single_thread_rows = false;
  std::optional<int64_t> longest_shared;
  int64_t longest_in_rounds = 0;
  std::vector<std::string> row_arrays;  // RowRegisters' declarations
  std::set<std::string> vector_pointers;  // LaneVectors' pointers
};

// How a walk emits the kernel: rows held in registers (row kernels), or lane vectors over this
// innermost variable (flat kernels).
struct NestForm {
  bool hold_rows = false;
  std::string lane_var;
};

Nest build_nest(const sched::Kernel& kernel, const sched::Schedule& schedule, const std::map<const ir::Buffer*, std::string>& ptrs,
                Mapping mapping, const NestForm& form, int cap) {
  RowRegisters rows;
  std::vector<std::string> vars = sched::kernel_loop_vars(kernel);
  LaneVectors lanes(form.lane_var, 1, std::set<std::string>(vars.begin(), vars.end()));
  ScopeStack scopes(ptrs, 1);
  scopes.rows = form.hold_rows ? &rows : nullptr;
  scopes.lane_vectors = form.lane_var.empty() ? nullptr : &lanes;
  scopes.open(kernel.ranges, vars);
  CppScalarOps scalar(scopes, Dialect::Cuda);
  SharedOps ops(scopes, scalar, nullptr);
  CudaNestBuilder builder(scopes, ops, mapping, cap);
  sched::walk_kernel(kernel, schedule, builder);
  Nest nest;
  nest.body = builder.close_outer();
  nest.work = outer_work(scopes, kernel.ranges);
  nest.size_symbols = scopes.size_symbols();
  nest.may_fail = scopes.may_fail;
  nest.single_thread_rows = builder.single_thread_rows();
  nest.longest_shared = builder.longest_shared_loop();
  nest.longest_in_rounds = builder.longest_in_rounds();
  nest.row_arrays = rows.finish(nest.body);
  nest.vector_pointers = lanes.pointers();
  return nest;
}

// The innermost variable of a flat kernel whose elements can go kLanes at a time (its extent is
// static and a multiple of kLanes), "" otherwise.
std::string lane_var(Mapping mapping, const std::vector<std::string>& outer, const ir::Index& ranges) {
  if (mapping != Mapping::Flat || outer.empty() || !ranges.back().is_const()) return "";
  int64_t n = ranges.back().const_value();
  return n > 0 && n % LaneVectors::kLanes == 0 ? outer.back() : "";
}

// How a kernel's loops map to the GPU, for its comment.
std::string how_it_runs(Mapping mapping, const Nest& nest) {
  if (mapping == Mapping::Serial) return "one thread, in order (its iterations are not independent)";
  if (mapping == Mapping::Flat) return "a flat grid-stride loop over its elements";
  if (!nest.row_arrays.empty())
    return "one block per row, its threads sharing the row's loops in unrolled rounds, holding in registers what one "
           "loop loads or stores for the next";
  if (nest.longest_in_rounds > 0) return "one block per row, its threads sharing the row's loops in unrolled rounds";
  return "one block per row, its threads sharing the row's loops";
}

// The `__global__` function of one form of the kernel.
std::string global_function(const std::string& name, const std::string& params, const Nest& nest, int threads) {
  std::vector<std::string> lines;
  print_cuda(nest.body, "  ", lines);
  std::ostringstream out;
  out << "__global__ void __launch_bounds__(" << threads << ") " << name << "(" << params << ") {\n";
  if (nest.longest_in_rounds > 0) {
    out << "  constexpr int kThreads = " << threads << ";  // the launch's block size\n"
        << "  constexpr int kRowSlots = " << (nest.longest_in_rounds + threads - 1) / threads
        << ";  // rounds of the longest row loop\n";
    for (const std::string& a : nest.row_arrays) out << "  " << a << "\n";
  }
  for (const auto& line : lines) out << line << "\n";
  out << "}\n";
  return out.str();
}

}  // namespace

EmittedKernel emit_cuda_kernel(const sched::Kernel& kernel, const sched::Schedule& schedule,
                               const CudaKernelOptions& options) {
  EmittedKernel k;
  // The scheduler names kernels for the C++ backend ("cpp_fused_add_0").
  k.name = kernel.name.rfind("cpp_", 0) == 0 ? "cuda_" + kernel.name.substr(4) : kernel.name;
  ir::Accesses accesses = kernel_accesses(kernel, schedule);
  k.args = kernel_args(accesses);
  std::map<const ir::Buffer*, std::string> ptrs;
  std::string params = "int* __restrict__ error_flag", names = "error_flag";
  for (const auto& a : k.args) {
    ptrs[a.buffer] = a.name;
    params += ", " + std::string(a.written ? "" : "const ") + storage_type(a.buffer->dtype) + "* __restrict__ " + a.name;
    names += ", " + a.name;
  }
  std::vector<std::string> outer = sched::kernel_loop_vars(kernel);
  bool nested = std::any_of(kernel.members.begin(), kernel.members.end(),
                            [](const sched::Member& m) { return m.role != sched::MemberRole::Outer; });
  Mapping mapping = choose_mapping(accesses, nested, outer, kernel.ranges);

  int cap = options.block_threads;
  Nest nest = build_nest(kernel, schedule, ptrs, mapping, {mapping == Mapping::Rows, ""}, cap);
  // Rows run on one thread (argmax) have nothing to share: walked again without rounds.
  if (nest.single_thread_rows && nest.longest_in_rounds > 0) nest = build_nest(kernel, schedule, ptrs, mapping, {}, cap);
  // A flat kernel with 128-bit accesses gets a second form, launched when their pointers are aligned.
  std::optional<Nest> vector;
  if (std::string var = lane_var(mapping, outer, kernel.ranges); !var.empty()) {
    vector = build_nest(kernel, schedule, ptrs, mapping, {false, var}, cap);
    if (vector->vector_pointers.empty()) vector.reset();
  }
  k.may_fail = nest.may_fail;
  for (const std::string& s : nest.size_symbols) {
    k.size_params.push_back(s);
    params += ", int64_t " + s;
    names += ", " + s;
  }
  k.declaration = "void " + k.name + "(cudaStream_t stream, " + params + ")";
  bool one_thread = mapping == Mapping::Serial || nest.single_thread_rows || (outer.empty() && mapping == Mapping::Flat);
  int threads = one_thread ? 1 : mapping == Mapping::Rows ? row_threads(nest.longest_shared, cap) : cap;
  auto launch = [&](const std::string& kernel_name, const std::string& work) {
    std::string blocks = mapping == Mapping::Serial ? "1"
                         : mapping == Mapping::Rows ? "foundry_cuda::grid_blocks(work, 1)"
                                                    : "foundry_cuda::grid_blocks(" + work + ", " + std::to_string(threads) + ")";
    return kernel_name + "<<<" + blocks + ", " + std::to_string(threads) + ", 0, stream>>>(" + names + ");";
  };
  std::ostringstream out;
  out << "// " << k.name << ": " << origin_comment(kernel) << "\n// Runs as " << how_it_runs(mapping, nest) << ".\n"
      << global_function(k.name + "_kernel", params, nest, threads);
  if (vector)
    out << "\n// " << k.name << " with 128-bit loads and stores, " << LaneVectors::kLanes
        << " elements a thread at a time: launched when its vector pointers are 16-byte aligned.\n"
        << global_function(k.name + "_vec_kernel", params, *vector, threads);
  out << "\n" << k.declaration << " {\n"
      << "  const int64_t work = " << nest.work << ";\n  if (work <= 0) return;\n";
  if (vector) {
    std::string aligned;
    for (const std::string& p : vector->vector_pointers)
      aligned += (aligned.empty() ? "" : " && ") + std::string("foundry_cuda::aligned16(") + p + ")";
    out << "  if (" << aligned << ") {\n"
        << "    " << launch(k.name + "_vec_kernel", "work / " + std::to_string(LaneVectors::kLanes)) << "\n"
        << "    return;\n  }\n";
  }
  out << "  " << launch(k.name + "_kernel", "work") << "\n}\n";
  k.definition = out.str();
  return k;
}

std::vector<size_t> split_kernel_parts(const std::vector<size_t>& kernel_bytes, size_t part_bytes, size_t max_parts) {
  size_t total = 0;
  for (size_t b : kernel_bytes) total += b;
  size_t parts = std::min({max_parts, kernel_bytes.size(), (total + part_bytes - 1) / part_bytes});
  if (parts <= 1) return {0};
  // Each kernel goes to the part its middle byte falls in, the source cut into equal shares; a
  // share that no kernel's middle falls in (next to a huge kernel) makes no part.
  std::vector<size_t> first;
  size_t before = 0, last_part = 0;
  for (size_t k = 0; k < kernel_bytes.size(); ++k) {
    size_t part = (before + kernel_bytes[k] / 2) * parts / total;
    if (k == 0 || part != last_part) first.push_back(k);
    last_part = part;
    before += kernel_bytes[k];
  }
  return first;
}

}  // namespace foundry::codegen
