#include "foundry/codegen/cpp_kernel.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "codegen/cpp_ops.h"
#include "codegen/kernel_common.h"
#include "codegen/kernel_scopes.h"
#include "codegen/piece_split.h"
#include "foundry/codegen/cpp_expr.h"
#include "foundry/codegen/loop_nest.h"
#include "foundry/ir/record.h"
#include "foundry/sched/kernel_walk.h"
#include "foundry/sched/merge_loops.h"
#include "foundry/support/error.h"

namespace foundry::codegen {

using ir::Expr;
using ir::ReduceOp;
using ir::Val;

namespace {

// The team size of a parallel loop doing `work` element operations per run, decided at run time:
// the whole team or one thread (foundry_kernel_support.h). `threads`: the compiled default.
std::string kernel_team(const std::string& work, int threads) {
  return "foundry_rt::kernel_team(" + work + ", " + std::to_string(threads) + ")";
}

// How a kernel's outer loop nest runs: threads over the leading `parallel_dims` loops (a team of
// `team` threads, decided at run time from the kernel's work: the whole team or one thread), SIMD
// lanes over the innermost loop, and tile by tile along `tile_var` when a read is transposed.
struct LoopPlan {
  size_t parallel_dims = 0;
  std::string team;  // e.g. "foundry_rt::kernel_team(128 * s0, 0)"
  bool simd_inner = false;
  std::string tile_var;
  // A reduction that reads across (its elements far apart, its outputs adjacent along the last
  // outer loop): that loop goes `lanes` outputs at a time, each lane with its own accumulator, the
  // lanes innermost (`omp simd`), so each step of the reduction reads whole vectors.
  std::string lane_var;
  int lanes = 0;
};

// Builds a kernel's loop nest: the walk opens a scope per loop block, the handlers fill it, and
// closing it arranges its statements into loops following the plan (`plan` for the kernel's
// outer loops; inner loops run plainly, or with `omp simd` lanes for sums and products).
class NestBuilder final : public sched::KernelVisitor {
 public:
  NestBuilder(ScopeStack& scopes, ir::Ops& ops, int threads, int split_chunks, int64_t min_split_work)
      : scopes_(scopes), ops_(ops), threads_(threads), split_chunks_(split_chunks), min_split_work_(min_split_work) {}
  ir::Ops& ops() override { return ops_; }

  void begin_reduction(const sched::Member&, const ir::Index& ranges) override {
    std::vector<std::string> vars;
    Expr work = 1;
    for (size_t d = 0; d < ranges.size(); ++d) {
      vars.push_back(ir::reduction_var(static_cast<int>(d)));
      work = work * ranges[d];
    }
    scopes_.open(ranges, vars);
    if (split_chunks_ > 0 && work.is_const() && work.const_value() >= min_split_work_)
      scopes_.top().split_chunks = split_chunks_;
  }
  void end_reduction(const sched::Member&) override {
    close_into_enclosing();
    lane_split_ = scopes_.top().lines.size();
  }
  // Emits the kernel's reduction lane by lane along `var` (LoopPlan::lane_var).
  void set_lanes(const std::string& var, int lanes) {
    lane_var_ = var;
    lanes_ = lanes;
  }
  void begin_inner(const sched::Member&, const ir::Index& ranges, const std::vector<std::string>& vars) override {
    scopes_.open(ranges, vars);
  }
  void end_inner(const sched::Member&) override { close_into_enclosing(); }

  // Two statements, not append(scopes_.top().lines, close(nullptr)): the order in which a call's
  // arguments are evaluated is unspecified, and clang takes top() first, a reference to the very
  // scope close() then pops (the loop was lost, and its statements leaked).
  void close_into_enclosing() {
    Stmts closed = close(nullptr);
    append(scopes_.top().lines, closed);
  }

  // Closes the innermost scope into statements of the enclosing one. A loop with no loop inside
  // whose body has a vector form becomes vector loops (tile by tile for a transposed read; split
  // into pieces on threads for a whole-tensor reduction).
  Stmts close(const LoopPlan* plan) {
    Scope b = scopes_.close();
    if (!lane_var_.empty()) return plan ? close_lane_tiles(b, *plan) : close_lane_reduction(b);
    int lanes = scopes_.lanes();
    // A row shorter than a vector runs as one partial vector, or else scalar.
    bool vector = lanes > 1 && b.vector_ok && !b.vars.empty() && b.nested == 0 &&
                  !(b.ranges.back().is_const() && b.ranges.back().const_value() < lanes && !b.partial_ok) &&
                  (!plan || (plan->simd_inner && !b.fails));
    if (vector && b.split_chunks > 0) return split_reduction(b);
    Stmts out;
    append_lines(out, b.pre);
    if (vector) append_lines(out, b.vector_pre);
    bool tiled = vector && !b.tile_var.empty();
    Stmts body = tiled ? tiled_vector_loops(b) : vector ? vector_loops(b, plan) : b.lines;
    for (size_t d = b.vars.size() - (vector ? 1 : 0); d-- > 0;) {
      if (d + 2 == b.vars.size() && vector) body = with_hoisted(b, std::move(body));
      Loop loop = scalar_loop(b, d, plan, tiled);
      loop.body = std::move(body);
      body = {std::move(loop)};
      if (d + 1 == b.vars.size()) body = with_hoisted(b, std::move(body));
    }
    if (vector && b.vars.size() == 1) body = with_hoisted(b, std::move(body));
    append(out, collect_errors(std::move(body), plan));
    if (vector) append_lines(out, b.vector_combine);
    append_lines(out, b.post);
    return out;
  }

 private:
  ScopeStack& scopes_;
  ir::Ops& ops_;
  int threads_ = 0;  // the compile-time default thread count (0: decided at run time)
  int split_chunks_ = 0;
  int64_t min_split_work_ = 0;


  std::string lane_var_;  // LoopPlan::lane_var, "" when the kernel has none
  int lanes_ = 0;
  size_t lane_split_ = 0;          // the outer scope's statements up to the reduction's loops
  std::vector<std::string> lane_post_;  // the reduction's results, per lane
  std::vector<Accumulator> lane_accumulators_;

  // Kernel errors are thread-local: a parallel loop that may report one collects the workers'
  // (its team a region around the loops, which share it).
  Stmts collect_errors(Stmts body, const LoopPlan* plan) {
    if (!plan || plan->parallel_dims == 0 || !scopes_.may_fail) return body;
    for (Stmt& s : body)
      if (auto* loop = std::get_if<Loop>(&s.node); loop && loop->threads == Loop::Threads::Team)
        loop->threads = Loop::Threads::Shared;
    ParallelRegion region{plan->team, "", "|:errors", {}};
    append_lines(region.body, {"const int saved_error = foundry_rt::kernel_error;", "foundry_rt::kernel_error = 0;"});
    append(region.body, body);
    append_lines(region.body, {"errors |= foundry_rt::kernel_error;", "foundry_rt::kernel_error = saved_error;"});
    Stmts out;
    out.push_back(std::string("int errors = 0;"));
    out.push_back(std::move(region));
    out.push_back(std::string("if (errors) foundry_rt::fail(errors);"));
    return out;
  }

  // The statements that open one lane: its position along lane_var and its accumulators.
  std::vector<std::string> lane_head(const std::vector<Accumulator>& accumulators) const {
    std::vector<std::string> head{"const int64_t " + lane_var_ + " = " + lane_var_ + "_tile + lane;"};
    for (const Accumulator& a : accumulators) head.push_back(a.type + "& " + a.name + " = " + a.name + "_lanes[lane];");
    return head;
  }

  // `lines` for each lane of the current tile, the lanes in SIMD.
  Loop lane_loop(const std::vector<std::string>& head, const Stmts& lines) const {
    Loop loop = loop_over("lane", "0", lane_var_ + "_lanes");
    loop.simd = true;
    append_lines(loop.body, head);
    append(loop.body, lines);
    return loop;
  }

  // The reduction of a lane-tiled kernel: an accumulator per lane (each starting as the scalar
  // one does), its loops outside, the lanes inside; its results are read per lane after them.
  Stmts close_lane_reduction(const Scope& b) {
    Stmts out;
    Loop start = loop_over("lane", "0", std::to_string(lanes_));
    for (const Accumulator& a : b.accumulators) {
      const std::string decl = a.type + " " + a.name + " = ";
      auto pre = std::find_if(b.pre.begin(), b.pre.end(), [&](const std::string& l) { return l.rfind(decl, 0) == 0; });
      FOUNDRY_CHECK(pre != b.pre.end() && b.pre.size() == b.accumulators.size(), "bug: a lane reduction's accumulator");
      out.push_back(a.type + " " + a.name + "_lanes[" + std::to_string(lanes_) + "];");
      start.body.push_back(a.name + "_lanes[lane] = " + pre->substr(decl.size()));
    }
    out.push_back(std::move(start));
    Stmts body{lane_loop(lane_head(b.accumulators), b.lines)};
    for (size_t d = b.vars.size(); d-- > 0;) {
      Loop loop = loop_over(b.vars[d], "0", scopes_.idx(b.ranges[d]));
      loop.body = std::move(body);
      body = {std::move(loop)};
    }
    append(out, body);
    lane_accumulators_ = b.accumulators;
    lane_post_ = b.post;
    return out;
  }

  // The outer loops of a lane-tiled kernel: lane_var's loop goes a tile of lanes at a time; the
  // reduction's results and the statements after them run per lane.
  Stmts close_lane_tiles(const Scope& b, const LoopPlan& plan) {
    const size_t last = b.vars.size() - 1;
    const std::string n = scopes_.idx(b.ranges[last]), width = std::to_string(lanes_);
    Stmts tile;
    tile.push_back("const int64_t " + lane_var_ + "_lanes = " + n + " - " + lane_var_ + "_tile < " + width + " ? " + n +
                   " - " + lane_var_ + "_tile : " + width + ";");
    tile.insert(tile.end(), b.lines.begin(), b.lines.begin() + static_cast<std::ptrdiff_t>(lane_split_));
    Stmts after(lane_post_.begin(), lane_post_.end());
    after.insert(after.end(), b.lines.begin() + static_cast<std::ptrdiff_t>(lane_split_), b.lines.end());
    tile.push_back(lane_loop(lane_head(lane_accumulators_), after));
    Stmts body = std::move(tile);
    for (size_t d = b.vars.size(); d-- > 0;) {
      Loop loop = scalar_loop(b, d, &plan, false);
      if (d == last) {
        loop.var = lane_var_ + "_tile";
        loop.step = lanes_;
        loop.simd = false;
      }
      loop.body = std::move(body);
      body = {std::move(loop)};
    }
    Stmts out(b.pre.begin(), b.pre.end());
    append(out, collect_errors(std::move(body), &plan));
    append_lines(out, b.post);
    return out;
  }

  // The statements hoisted out of `b`'s innermost loop (Scope::hoisted), then `loops`.
  static Stmts with_hoisted(const Scope& b, Stmts loops) {
    Stmts out;
    append_lines(out, b.hoisted);
    append(out, std::move(loops));
    return out;
  }

  // Loop `d` of scope `b` run one iteration at a time: threads over the plan's leading loops,
  // `omp simd` over the innermost; a tiled scope's tile loop steps a tile at a time.
  Loop scalar_loop(const Scope& b, size_t d, const LoopPlan* plan, bool tiled) {
    bool over_tiles = tiled && b.vars[d] == b.tile_var;  // the tile's own loop is inside the vector loop
    Loop loop = loop_over(over_tiles ? b.tile_var + "_tile" : b.vars[d], "0", scopes_.idx(b.ranges[d]),
                          over_tiles ? scopes_.lanes() : 1);
    size_t last = b.vars.size() - 1;
    if (!plan) {
      loop.simd_reduction = d == last && b.nested == 0 ? simd_reduction(b) : "";
      loop.simd = !loop.simd_reduction.empty();
      return loop;
    }
    bool simd = plan->simd_inner && d == last;
    if (d == 0 && plan->parallel_dims > 0) {
      loop.threads = Loop::Threads::Team;
      loop.simd = simd && plan->parallel_dims == 1;
      loop.collapse = static_cast<int>(plan->parallel_dims);
      loop.num_threads = plan->team;
    } else {
      loop.simd = simd;
    }
    return loop;
  }

  // "+:acc0, acc1" when every accumulator of `b` is a sum (or every one a product): lanes may
  // then keep partial results. "" otherwise.
  static std::string simd_reduction(const Scope& b) {
    std::string op, vars;
    for (const Accumulator& a : b.accumulators) {
      std::string o = a.op == ReduceOp::Sum ? "+" : a.op == ReduceOp::Prod ? "*" : "";
      if (o.empty() || (!op.empty() && o != op)) return "";
      op = o;
      vars += (vars.empty() ? "" : ", ") + a.name;
    }
    return op.empty() ? "" : op + ":" + vars;
  }

  // Where the whole vectors of a loop over [0, range) end: the scalar tail starts there.
  std::string whole_vectors_end(const Expr& range) {
    int lanes = scopes_.lanes();
    if (range.is_const()) return std::to_string(range.const_value() / lanes * lanes);
    std::string n = scopes_.idx(range);
    return n + " - " + n + " % " + std::to_string(lanes);
  }

  // The last loop of `b` in two parts: whole vectors, then the remaining iterations (none when
  // the range is a multiple of the lanes) as one partial vector, or one by one where the body has
  // no partial form. A kernel with a single loop runs the vector part on threads (`plan`).
  // `begin` and `chunk_end` bound a piece of a split reduction.
  Stmts vector_loops(const Scope& b, const LoopPlan* plan, const std::string& begin = "0",
                     const std::string& chunk_end = "") {
    const Expr& range = b.ranges.back();
    std::string lanes = std::to_string(scopes_.lanes());
    std::string n = chunk_end.empty() ? scopes_.idx(range) : chunk_end;
    std::string end = chunk_end.empty() ? whole_vectors_end(range) : begin + " + (" + n + " - " + begin + ") / " + lanes + " * " + lanes;
    Loop whole = loop_over(b.vars.back(), begin, end, scopes_.lanes());
    if (plan && plan->parallel_dims > 0 && b.vars.size() == 1) {
      whole.threads = Loop::Threads::Team;
      whole.num_threads = plan->team;
    }
    append_lines(whole.body, b.vector_lines);
    const std::string var = whole.var;
    Stmts out;
    if (!range.is_const() || range.const_value() >= scopes_.lanes()) out.push_back(std::move(whole));
    if (chunk_end.empty() && range.is_const() && range.const_value() % scopes_.lanes() == 0) return out;
    if (chunk_end.empty() && b.partial_ok) {
      append(out, partial_vector(b, end, n));
      return out;
    }
    Loop tail = loop_over(var, end, n);
    tail.body = b.lines;
    out.push_back(std::move(tail));
    return out;
  }

  // The iterations from `end` to `n` (fewer than the lanes) as one vector whose loads and stores
  // touch only those lanes (Scope::partial_lines).
  Stmts partial_vector(const Scope& b, const std::string& end, const std::string& n) {
    const std::string& var = b.vars.back();
    std::vector<std::string> lines = {"const int64_t " + var + " = " + end + ";",
                                      "const int kActiveLanes = static_cast<int>(" + n + " - " + var + ");"};
    lines.insert(lines.end(), b.partial_lines.begin(), b.partial_lines.end());
    const Expr& range = b.ranges.back();
    std::vector<std::string> block;
    block.push_back(range.is_const() ? "{" : "if (" + end + " < " + n + ") {");
    for (const std::string& line : lines) block.push_back("  " + line);
    block.push_back("}");
    Stmts out;
    append_lines(out, block);
    return out;
  }

  // The vector loop of a transposing kernel, inside the loop over tiles of `tile_var`: per vector,
  // each strided source is read as kLanes rows along tile_var (whole cache lines) and transposed
  // into a tile; the body then runs for each tile_var in the tile, loading a tile row. A gather
  // would read kLanes cache lines for every vector.
  Stmts tiled_vector_loops(const Scope& b) {
    const Expr& range = b.ranges.back();
    std::string lanes = std::to_string(scopes_.lanes()), t = b.tile_var, tile = t + "_tile";
    Loop in_tile = loop_over(t, tile, tile + " + " + lanes);
    Loop whole = loop_over(b.vars.back(), "0", whole_vectors_end(range), scopes_.lanes());
    for (const TileLoad& load : b.tile_loads) {
      whole.body.push_back("float " + load.tile + "[" + lanes + " * " + lanes + "];");
      whole.body.push_back("foundry_vec::transpose_tile(" + load.base + ", " + std::to_string(load.stride) + ", " +
                           load.tile + ");");
    }
    Loop vector_tile = in_tile;
    append_lines(vector_tile.body, b.vector_lines);
    whole.body.push_back(std::move(vector_tile));
    Stmts out{whole};
    if (range.is_const() && range.const_value() % scopes_.lanes() == 0) return out;
    in_tile.body = b.lines;
    Loop tail = loop_over(whole.var, whole.end, scopes_.idx(range));
    tail.body.push_back(std::move(in_tile));
    out.push_back(std::move(tail));
    return out;
  }

  // A reduction whose kernel has nothing else to run on threads (one output element) is split
  // into `split_chunks` pieces of its first loop, run on threads; each piece's partial results
  // are stored and then combined in piece order, so the result does not depend on the thread count.
  Stmts split_reduction(const Scope& b) {
    std::string chunks = std::to_string(b.split_chunks);
    const std::string& first = b.vars[0];
    std::string n = scopes_.idx(b.ranges[0]), begin = first + "_begin", end = first + "_end";
    Stmts out;
    for (const Accumulator& a : b.accumulators) out.push_back(a.type + " " + a.name + "_chunks[" + chunks + "];");
    Loop pieces = loop_over("chunk", "0", chunks);
    pieces.threads = Loop::Threads::Team;
    Expr work = 1;
    for (const Expr& r : b.ranges) work = work * r;
    pieces.num_threads = kernel_team(scopes_.idx(work), threads_);
    append_lines(pieces.body, {"const int64_t " + begin + " = " + n + " * chunk / " + chunks + ";",
                         "const int64_t " + end + " = " + n + " * (chunk + 1) / " + chunks + ";"});
    append_lines(pieces.body, b.pre);
    append_lines(pieces.body, b.vector_pre);
    if (b.vars.size() == 1) {
      append(pieces.body, vector_loops(b, nullptr, begin, end));
    } else {
      Stmts body = vector_loops(b, nullptr);
      for (size_t d = b.vars.size() - 1; d-- > 0;) {
        Loop loop = loop_over(b.vars[d], d == 0 ? begin : "0", d == 0 ? end : scopes_.idx(b.ranges[d]));
        loop.body = std::move(body);
        body = {std::move(loop)};
      }
      append(pieces.body, body);
    }
    append_lines(pieces.body, b.vector_combine);
    for (const Accumulator& a : b.accumulators) pieces.body.push_back(a.name + "_chunks[chunk] = " + a.name + ";");
    out.push_back(std::move(pieces));
    append_lines(out, b.pre);
    Loop combine = loop_over("chunk", "0", chunks);
    for (const Accumulator& a : b.accumulators) {
      std::string part = a.name + "_chunks[chunk]";
      if (a.op == ReduceOp::Sum) combine.body.push_back(a.name + " += " + part + ";");
      else combine.body.push_back(a.name + " = foundry_rt::" + (a.op == ReduceOp::Max ? "maximum(" : "minimum(") + a.name + ", " + part + ");");
    }
    out.push_back(std::move(combine));
    append_lines(out, b.post);
    return out;
  }
};

// The most elements `node` reads of one buffer per element.
int64_t most_reads_of_one_buffer(const ir::LoopNode& node) {
  std::map<const ir::Buffer*, int64_t> reads_of;
  int64_t most = 1;
  for (const auto& r : ir::record_accesses(node).reads) most = std::max(most, ++reads_of[r.buffer]);
  return most;
}

// The element operations of one iteration of a member: its reduction loop's length times the
// most elements it reads of one buffer per element, or that a producer computed inside the
// kernel reads. That is 1 for a pointwise op, and a window's size for max pooling, whose window is
// written out in the body (9 for 3x3: counted as 1, squeezenet1_1's pooling kernels stayed on one
// thread at 180 us), and 4 for a bilinear resampling inlined into its reader (SegFormer's decoder
// concatenates two: counted as 1, the kernel had no parallel loop and took half the model).
Expr member_work(const sched::Member& m, int64_t inlined_reads) {
  Expr n = std::max(most_reads_of_one_buffer(*m.node), inlined_reads);
  for (const auto& r : m.node->reduction_ranges) n = n * r;
  return n;
}

// The ranges of every loop variable of the kernel: its outer loops' and its members' own (a name
// that several members use gets the largest of their ranges).
ir::SymbolExtents loop_extents(const sched::Kernel& kernel, const std::vector<std::string>& outer) {
  ir::SymbolExtents extents;
  std::set<std::string> unknown;  // ranges that differ and do not compare: no bound at all
  for (size_t d = 0; d < outer.size(); ++d) extents[outer[d]] = kernel.ranges[d];
  auto widen = [&](const std::string& var, const Expr& range) {
    auto it = extents.find(var);
    if (it == extents.end()) extents[var] = range;
    else if (it->second.is_const() && range.is_const()) it->second = std::max(it->second.const_value(), range.const_value());
    else if (it->second != range) unknown.insert(var);
  };
  for (const auto& m : kernel.members) {
    const ir::Index& own = sched::member_loop_ranges(m);
    for (size_t d = 0; d < own.size(); ++d) widen(sched::member_loop_var(kernel, m, d), own[d]);
  }
  for (const std::string& var : unknown) extents.erase(var);
  return extents;
}

// Whether each iteration of the first `dims` outer loops touches its own part of `buffer` (a
// buffer the kernel both writes and reads back, e.g. a squeeze-excitation's activations that a
// member stores and the next one's mean reads): every access has the same constant strides along
// those loops, strides that keep the loops' rows apart, and stays within one row of the innermost.
bool row_local(const ir::Buffer* buffer, const ir::Accesses& acc, const std::vector<std::string>& outer, size_t dims,
               const sched::Kernel& kernel, const ir::SymbolExtents& extents) {
  std::optional<std::vector<int64_t>> strides;
  for (const auto* list : {&acc.reads, &acc.writes})
    for (const auto& a : *list) {
      if (a.buffer != buffer) continue;
      std::vector<int64_t> along;
      Expr rest = a.index;
      for (size_t d = 0; d < dims; ++d) {
        auto c = ir::affine_coefficient(a.index, outer[d]);
        if (!c || !c->is_const() || c->const_value() <= 0) return false;
        along.push_back(c->const_value());
        rest = rest - *c * Expr::sym(outer[d]);
      }
      if (strides && *strides != along) return false;
      strides = along;
      auto lo = ir::lower_bound(rest, extents), hi = ir::upper_bound(rest, extents);
      if (!lo || !hi || *lo < 0 || *hi >= along.back()) return false;
    }
  for (size_t d = 0; strides && d + 1 < dims; ++d)
    if (!kernel.ranges[d + 1].is_const() || (*strides)[d] < (*strides)[d + 1] * kernel.ranges[d + 1].const_value())
      return false;
  return true;
}

// Iterations of the outer loops may run on different threads and SIMD lanes only when they are
// independent: plain stores (no scatter-add, no indirect positions), and a buffer both read and
// written only by a kernel of nested loops whose parallel iterations each keep to their own part
// of it (row_local). Threads take the leading loops that every store's position depends on.
LoopPlan plan_loops(const sched::Kernel& kernel, const ir::Accesses& acc, const std::vector<std::string>& outer,
                    bool nested, const KernelOptions& options) {
  LoopPlan plan;
  std::set<const ir::Buffer*> written, read_back;
  for (const auto& w : acc.writes) {
    if (w.mode != ir::StoreMode::Set) return plan;
    for (const std::string& s : ir::free_symbols(w.index))
      if (s.rfind("ind", 0) == 0) return plan;
    written.insert(w.buffer);
  }
  for (const auto& r : acc.reads)
    if (written.count(r.buffer)) {
      if (!nested) return plan;
      read_back.insert(r.buffer);
    }
  if (outer.empty()) return plan;
  plan.simd_inner = !nested;
  if (options.threads == 1) return plan;
  size_t dims = nested ? outer.size() : std::max<size_t>(1, outer.size() - 1);
  size_t usable = 0;
  for (; usable < dims; ++usable) {
    bool distinct = true;  // every store position depends on this loop (or it has one iteration)
    for (const auto& w : acc.writes)
      distinct = distinct && (kernel.ranges[usable].is_const(1) || ir::free_symbols(w.index).count(outer[usable]));
    if (!distinct) break;
  }
  const ir::SymbolExtents extents = loop_extents(kernel, outer);
  for (const ir::Buffer* b : read_back)
    while (usable > 0 && !row_local(b, acc, outer, usable, kernel, extents)) --usable;
  if (usable == 0) return plan;
  // The work of one run: outer iterations times what each member does per iteration.
  Expr per_iteration = 0;
  int64_t inlined_reads = 1;  // what the producers computed inside read, once for every member
  for (const ir::LoopNode* producer : kernel.inlined) inlined_reads = std::max(inlined_reads, most_reads_of_one_buffer(*producer));
  for (const auto& m : kernel.members) per_iteration = per_iteration + member_work(m, inlined_reads);
  Expr work = per_iteration;
  for (const auto& r : kernel.ranges) work = work * r;
  if (work.is_const() && work.const_value() < options.min_parallel_work) return plan;
  plan.parallel_dims = usable;
  plan.team = kernel_team(cpp_index(work, {}), options.threads);
  return plan;
}

// A kernel of reductions to single elements has no outer loop to run on threads: its large
// reductions are split into pieces instead (a fixed number, so that results do not depend on the
// thread count). Only a reduction whose loop is vectorized is split.
int split_chunks(const sched::Kernel& kernel, const KernelOptions& options) {
  constexpr int kChunks = 64;
  if (options.threads == 1) return 0;
  for (const auto& r : kernel.ranges)
    if (!r.is_const(1)) return 0;
  return kChunks;
}

// A transposed read: a float load whose position moves by a constant stride other than one
// with the innermost loop, and by one element along another outer loop whose range is a multiple
// of the lanes. The outer loops then go tile by tile along that loop (tiled_vector_loops), when
// they have no loop inside and run on at most one level of threads. "" when there is none.
std::string plan_tile_var(const sched::Kernel& kernel, const ir::Accesses& acc, const std::vector<std::string>& outer,
                          const LoopPlan& plan, int lanes, bool nested) {
  if (lanes <= 1 || nested || !plan.simd_inner || plan.parallel_dims > 1 || outer.size() < 2) return "";
  const std::string& v = outer.back();
  for (const auto& read : acc.reads) {
    if (read.buffer->dtype != DType::Float32 || !ir::free_symbols(read.index).count(v)) continue;
    auto stride = ir::affine_coefficient(read.index, v);
    if (!stride || !stride->is_const() || stride->is_const(1)) continue;
    for (size_t d = 0; d + 1 < outer.size(); ++d) {
      auto along = ir::affine_coefficient(read.index, outer[d]);
      const Expr& range = kernel.ranges[d];
      if (along && along->is_const(1) && range.is_const() && range.const_value() % lanes == 0) return outer[d];
    }
  }
  return "";
}

// The loop a reduction kernel runs lane by lane (LoopPlan::lane_var), "" for none: a kernel of
// one plain reduction (a sum, product, max or min, no position) and the outer statements after
// it, whose last outer loop every access either ignores or walks one element per step, and one
// of whose reads moves otherwise with the reduction's innermost loop: the vector loop over the
// reduction would gather there (a mean over the pixels of a channels-last activation, a sum over
// the rows of a matrix).
std::string plan_lane_var(const sched::Kernel& kernel, const ir::Accesses& acc, const std::vector<std::string>& outer,
                          const LoopPlan& plan, int lanes, int chunks) {
  if (lanes <= 1 || outer.empty() || chunks > 0 || !plan.tile_var.empty() || kernel.members.empty()) return "";
  const sched::Member& first = kernel.members.front();
  if (first.role != sched::MemberRole::Reduction || sched::member_loop_ranges(first).empty()) return "";
  const ir::ReduceOp op = first.node->reduce_op;
  if (op != ir::ReduceOp::Sum && op != ir::ReduceOp::Prod && op != ir::ReduceOp::Max && op != ir::ReduceOp::Min)
    return "";
  for (size_t k = 1; k < kernel.members.size(); ++k)
    if (kernel.members[k].role != sched::MemberRole::Outer) return "";
  const std::string& v = outer.back();
  const std::string r = sched::member_loop_var(kernel, first, sched::member_loop_ranges(first).size() - 1);
  const Expr& range = kernel.ranges.back();
  if (range.is_const() && range.const_value() < 2) return "";
  bool across = false;
  for (const auto* list : {&acc.reads, &acc.writes})
    for (const auto& a : *list) {
      const std::set<std::string> symbols = ir::free_symbols(a.index);
      for (const std::string& sym : symbols)
        if (sym.rfind("ind", 0) == 0) return "";
      if (!symbols.count(v)) {
        if (list == &acc.writes) return "";
        continue;
      }
      auto step = ir::affine_coefficient(a.index, v);
      if (!step || !step->is_const(1) || (list == &acc.writes && a.mode != ir::StoreMode::Set)) return "";
      auto along = ir::affine_coefficient(a.index, r);
      across = across || (list == &acc.reads && symbols.count(r) && !(along && along->is_const(1)));
    }
  return across ? v : "";
}

// Writes a kernel's loop nest with the handlers: whole, or piece by piece where a loop splits.
struct NestWriter {
  const sched::Kernel& kernel;
  const sched::Schedule& schedule;
  const std::vector<std::string>& outer;
  const LoopPlan& plan;
  int chunks, lanes;
  const KernelOptions& options;
  const std::map<const ir::Buffer*, std::string>& ptrs;
  const std::set<const ir::Buffer*>& stored;  // what the kernel writes

  struct Written {
    Stmts body;
    std::set<std::string> size_symbols;
  };

  // The nest for the iterations of one piece of a split loop (`piece`), or for all of them.
  Written write(const std::optional<ScopeStack::Piece>& piece) const {
    ScopeStack scopes(ptrs, lanes);
    scopes.piece = piece;
    // Hoisting puts statements between loops: not where the loops are tiled or run lane by lane,
    // nor inside loops that threads share (collapsed) or a reduction split into pieces.
    scopes.hoisting = plan.tile_var.empty() && plan.lane_var.empty() && chunks == 0;
    scopes.written = stored;
    scopes.open(kernel.ranges, outer);
    if (plan.parallel_dims >= outer.size()) scopes.top().hoists = false;
    if (!plan.tile_var.empty()) {
      scopes.top().tile_var = plan.tile_var;
      size_t d = std::find(outer.begin(), outer.end(), plan.tile_var) - outer.begin();
      scopes.set_extent(plan.tile_var + "_tile", kernel.ranges[d]);
    }
    CppScalarOps scalar(scopes);
    std::optional<CppVectorOps> vector;
    if (lanes > 1) vector.emplace(scopes);
    SharedOps ops(scopes, scalar, vector ? &*vector : nullptr);
    NestBuilder builder(scopes, ops, options.threads, chunks, options.min_parallel_work);
    if (!plan.lane_var.empty()) builder.set_lanes(plan.lane_var, plan.lanes);
    sched::walk_kernel(kernel, schedule, builder);
    Stmts body = builder.close(&plan);
    return {std::move(body), scopes.size_symbols()};
  }

  // Piece by piece (piece_split.h) when the body chooses by an outer loop of constant extent
  // outside the vector loop (any outer loop of a kernel of nested loops, whose vector loops are
  // inside); tiled, lane-by-lane and split-reduction kernels, and scalar ones, are written whole.
  Written write_split(bool nested) const {
    if (lanes <= 1 || chunks > 0 || outer.empty() || !plan.tile_var.empty() || !plan.lane_var.empty())
      return write(std::nullopt);
    std::vector<std::string> candidates;
    std::vector<int64_t> extents;
    for (size_t d = 0; d < outer.size() - (nested ? 0 : 1); ++d)
      if (kernel.ranges[d].is_const()) {
        candidates.push_back(outer[d]);
        extents.push_back(kernel.ranges[d].const_value());
      }
    auto split = find_piece_split(kernel, schedule, candidates, extents);
    if (!split) return write(std::nullopt);
    std::vector<Stmts> nests;
    std::set<std::string> size_symbols;
    for (size_t k = 0; k <= split->ends.size(); ++k) {
      const int64_t begin = k ? split->ends[k - 1] : 0, end = k < split->ends.size() ? split->ends[k] : split->extent;
      Written piece = write(ScopeStack::Piece{split->var, begin, end});
      nests.push_back(std::move(piece.body));
      size_symbols.insert(piece.size_symbols.begin(), piece.size_symbols.end());
    }
    if (auto merged = merge_pieces(std::move(nests), *split)) return {std::move(*merged), size_symbols};
    return write(std::nullopt);
  }
};

}  // namespace

ir::Accesses kernel_accesses(const sched::Kernel& kernel, const sched::Schedule& schedule) {
  class Recorder final : public sched::KernelVisitor {
   public:
    ir::RecordingOps ops_;
    ir::Ops& ops() override { return ops_; }
  } recorder;
  sched::walk_kernel(kernel, schedule, recorder);
  return recorder.ops_.accesses;
}

std::vector<KernelArg> kernel_args(const ir::Accesses& accesses) {
  std::vector<KernelArg> args;
  auto find = [&](const ir::Buffer* b) -> KernelArg* {
    for (auto& a : args)
      if (a.buffer == b) return &a;
    return nullptr;
  };
  for (const auto& r : accesses.reads)
    if (!find(r.buffer)) args.push_back({r.buffer, false, ""});
  for (const auto& w : accesses.writes) {
    if (KernelArg* a = find(w.buffer)) a->written = true;
    else args.push_back({w.buffer, true, ""});
  }
  int in = 0, out = 0;
  for (auto& a : args) a.name = a.written ? "out_ptr" + std::to_string(out++) : "in_ptr" + std::to_string(in++);
  return args;
}

std::string origin_comment(const sched::Kernel& kernel) {
  std::string out;
  for (const std::string& o : sched::kernel_origins(kernel)) out += (out.empty() ? "" : ", ") + o;
  return out;
}

int vector_lanes(const std::string& target) {
  if (target == "skylake-avx512") return 16;
  if (target == "haswell") return 8;
  if (target == "x86-64") return 4;
#if defined(__x86_64__) && defined(__GNUC__)
  if (target.empty() || target == "native") {
    if (__builtin_cpu_supports("avx512f")) return 16;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 8;
    return 4;
  }
#endif
  throw UserError("unknown target '" + target + "': use native, avx2, avx512 or generic");
}

EmittedKernel emit_kernel(const sched::Kernel& unmerged, const sched::Schedule& schedule, const KernelOptions& options) {
  const sched::Kernel kernel = sched::merge_loops(unmerged, schedule);
  EmittedKernel k;
  k.name = kernel.name;
  ir::Accesses accesses = kernel_accesses(kernel, schedule);
  k.args = kernel_args(accesses);
  std::map<const ir::Buffer*, std::string> ptrs;
  std::string params;
  for (const auto& a : k.args) {
    ptrs[a.buffer] = a.name;
    params += (params.empty() ? "" : ", ") + std::string(a.written ? "" : "const ") + storage_type(a.buffer->dtype) +
              "* __restrict__ " + a.name;
  }

  int lanes = options.vectorize ? options.lanes : 1;
  std::vector<std::string> outer = sched::kernel_loop_vars(kernel);
  bool nested = std::any_of(kernel.members.begin(), kernel.members.end(),
                            [](const sched::Member& m) { return m.role != sched::MemberRole::Outer; });
  LoopPlan plan = plan_loops(kernel, accesses, outer, nested, options);
  int chunks = split_chunks(kernel, options);
  if (chunks > 0) plan.parallel_dims = 0;  // one outer iteration: the threads run inside reductions
  plan.tile_var = plan_tile_var(kernel, accesses, outer, plan, lanes, nested);
  plan.lane_var = plan_lane_var(kernel, accesses, outer, plan, lanes, chunks);
  // Lane by lane, each lane's statements are scalar: the compiler runs the lanes in SIMD.
  if (!plan.lane_var.empty()) {
    plan.lanes = lanes;
    lanes = 1;
  }

  std::set<const ir::Buffer*> stored;
  for (const auto& w : accesses.writes) stored.insert(w.buffer);
  NestWriter writer{kernel, schedule, outer, plan, chunks, lanes, options, ptrs, stored};
  auto [body, size_symbols] = writer.write_split(nested);

  for (const std::string& s : size_symbols) {
    k.size_params.push_back(s);
    params += (params.empty() ? "" : ", ") + std::string("int64_t ") + s;
  }
  k.declaration = "void " + k.name + "(" + params + ")";
  std::vector<std::string> lines;
  print_cpp(body, "  ", lines);
  std::ostringstream out;
  out << "// " << k.name << ": " << origin_comment(kernel) << "\n" << k.declaration << " {\n";
  for (const auto& line : lines) out << line << "\n";
  out << "}\n";
  k.definition = out.str();
  return k;
}

}  // namespace foundry::codegen
