#include "foundry/codegen/cpp_kernel.h"

#include <cmath>
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "codegen/vec_ops.h"
#include "foundry/codegen/cpp_expr.h"
#include "foundry/ir/record.h"
#include "foundry/sched/kernel_walk.h"
#include "foundry/support/error.h"

namespace foundry::codegen {

using ir::BinaryOp;
using ir::Expr;
using ir::ReduceOp;
using ir::UnaryOp;
using ir::Val;

std::string storage_type(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::UInt8: return "uint8_t";
    case DType::Int8: return "int8_t";
    case DType::Int16: return "int16_t";
    case DType::Int32: return "int32_t";
    case DType::Int64: return "int64_t";
    case DType::Float16: case DType::BFloat16: return "uint16_t";
    case DType::Float32: return "float";
    case DType::Float64: return "double";
  }
  return "?";
}

std::string compute_type(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 ? "float" : storage_type(t);
}

namespace {

bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

// An exact C++ literal of a scalar in its compute type.
std::string literal(const ir::Scalar& s) {
  DType t = s.dtype;
  if (!is_floating(t)) {
    if (t == DType::Bool) return s.i ? "true" : "false";
    if (s.i == INT64_MIN) return "INT64_MIN";
    std::string v = std::to_string(s.i);
    return t == DType::Int64 && (s.i > INT32_MAX || s.i < INT32_MIN) ? v + "LL" : v;
  }
  bool is_double = t == DType::Float64;
  if (std::isnan(s.f)) return is_double ? "double(NAN)" : "NAN";
  if (std::isinf(s.f)) return std::string(s.f < 0 ? "-" : "") + (is_double ? "double(INFINITY)" : "INFINITY");
  char buf[48];
  if (is_double) std::snprintf(buf, sizeof buf, "%.17g", s.f);
  else std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(static_cast<float>(s.f)));
  std::string text = buf;
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return is_double ? text : text + "f";
}

// Emits a node's body as C++ statements. Reductions split the statements into the accumulator
// declarations (before the reduction loop), the loop body, and what follows the loop.
// Statements are collected per loop block: a reduction loop's accumulators are declared before
// it (`pre`) and its results read after it (`post`).
struct Accumulator {
  std::string name, type;
  ReduceOp op;
};

struct Block {
  std::vector<std::string> pre, lines, post;
  ir::Index ranges;  // the loop's ranges
  std::vector<std::string> vars;
  std::vector<Accumulator> accumulators;  // of a reduction loop
  int split_chunks = 0;  // > 0: a reduction loop split into this many chunks run on threads
  int nested = 0;  // loops opened inside this one
  int serial = 0;  // tells this loop from a sibling that reused its place on the stack
  // The loop over the last of `vars` can also run `foundry_vec::kLanes` iterations at a time:
  // `vector_lines` are its body in vector form, `vector_pre` the lanes' accumulators (declared
  // next to `pre`), `vector_combine` folds them into the scalar accumulators after the loops.
  // `vector_ok` turns false when a store or reduction in the loop has no vector form.
  std::vector<std::string> vector_lines, vector_pre, vector_combine;
  bool vector_ok = true;
  // Loads of the outer loops that stride across the vector variable but run along `tile_var`
  // (a transpose): the vector lines hold `token` until close_block picks the gather or the tile.
  struct TileLoad {
    std::string token, gather, tile, base;  // base: the tile's first element at tile_var = <tile_var>_tile
    int64_t stride = 0;                    // elements between the tile's rows
  };
  std::vector<TileLoad> tile_loads;
  std::string tile_var;
};

// How a kernel's outer loop nest runs: threads over the leading `parallel_dims` loops (under a
// runtime condition when `condition` is not empty), and SIMD lanes over the innermost loop.
struct LoopPlan {
  size_t parallel_dims = 0;
  std::string condition;  // e.g. "(128 * s0) >= 32768"
  bool simd_inner = false;
};

class CppEmitter final : public ir::Ops {
 public:
  CppEmitter(const std::map<const ir::Buffer*, std::string>& ptrs, int threads, int lanes)
      : ptrs_(ptrs), threads_(threads), lanes_(lanes) {
    blocks_.emplace_back();
    extents_[kLane] = Expr(lanes);  // a lane of a vector
  }

  void open_block(const ir::Index& ranges, const std::vector<std::string>& vars) {
    if (blocks_.size() > 1) ++blocks_.back().nested;
    Block b;
    b.ranges = ranges;
    b.vars = vars;
    b.serial = ++block_serial_;
    blocks_.push_back(std::move(b));
    for (size_t d = 0; d < vars.size(); ++d) extents_[vars[d]] = ranges[d];
  }
  // Loops nested in the kernel's outer loop nest (reductions, inner members) so far.
  int nested_in_outer() const { return blocks_.size() > 1 ? blocks_[1].nested : 0; }

  // Closes the innermost loop and writes it, with its accumulators, into the enclosing block.
  // The kernel's outer loop nest follows `plan`. A loop with no loop inside it whose body has a
  // vector form becomes vector loops (vector_loops; tile by tile for a transposed read; split
  // into pieces on threads for a whole-tensor reduction); otherwise a reduction loop whose
  // accumulators are all sums or products gets `omp simd` lanes.
  void close_block(const LoopPlan* plan = nullptr) {
    Block b = std::move(blocks_.back());
    blocks_.pop_back();
    std::vector<std::string>& out = blocks_.back().lines;
    bool vector = lanes_ > 1 && b.vector_ok && !b.vars.empty() && b.nested == 0 &&
                  !(b.ranges.back().is_const() && b.ranges.back().const_value() < lanes_) &&
                  (!plan || (plan->simd_inner && !may_fail_));
    if (vector && b.split_chunks > 0) return close_split_reduction(b, out);
    out.insert(out.end(), b.pre.begin(), b.pre.end());
    if (vector) out.insert(out.end(), b.vector_pre.begin(), b.vector_pre.end());
    std::string indent;
    // Kernel errors are thread-local: a parallel loop that may report one collects the workers'.
    bool collect_errors = plan && plan->parallel_dims > 0 && may_fail_;
    if (collect_errors) {
      out.push_back("int errors = 0;");
      out.push_back(parallel_clause(*plan, "#pragma omp parallel") + " reduction(|:errors)");
      out.push_back("{");
      indent = "  ";
      out.push_back(indent + "const int saved_error = foundry_rt::kernel_error;");
      out.push_back(indent + "foundry_rt::kernel_error = 0;");
    }
    size_t scalar_loops = b.vars.size() - (vector ? 1 : 0);
    bool tiled = vector && plan && !b.tile_loads.empty() && plan->parallel_dims <= 1 && b.vars.size() >= 2;
    resolve_tile_loads(b, tiled, lanes_);
    for (size_t d = 0; d < scalar_loops; ++d) {
      std::string pragma = loop_pragma(b, d, plan);
      if (collect_errors && d == 0) pragma.replace(0, std::string("#pragma omp parallel for").size(), "#pragma omp for");
      if (!pragma.empty()) out.push_back(indent + pragma);
      bool over_tiles = tiled && b.vars[d] == b.tile_var;  // the tile's own loop is inside the vector loop
      std::string v = over_tiles ? b.tile_var + "_tile" : b.vars[d];
      std::string step = over_tiles ? v + " += " + std::to_string(lanes_) : "++" + v;
      out.push_back(indent + "for (int64_t " + v + " = 0; " + v + " < " + idx(b.ranges[d]) + "; " + step + ") {");
      indent += "  ";
    }
    if (tiled) tiled_vector_loops(b, indent, out);
    else if (vector) vector_loops(b, plan, indent, out);
    else
      for (const auto& l : b.lines) out.push_back(indent + l);
    for (size_t d = scalar_loops; d-- > 0;) {
      indent.resize(indent.size() - 2);
      out.push_back(indent + "}");
    }
    if (collect_errors) {
      out.push_back("  errors |= foundry_rt::kernel_error;");
      out.push_back("  foundry_rt::kernel_error = saved_error;");
      out.push_back("}");
      out.push_back("if (errors) foundry_rt::fail(errors);");
    }
    if (vector) out.insert(out.end(), b.vector_combine.begin(), b.vector_combine.end());
    out.insert(out.end(), b.post.begin(), b.post.end());
    for (const auto& v : b.vars) extents_.erase(v);
  }

  // The last loop of `b` in two parts: whole vectors, then the remaining iterations one by one
  // (none when the range is a multiple of the lanes). A kernel with a single loop runs the vector
  // part on threads (`plan`).
  // `begin` and `end` bound a chunk of a split reduction instead of the whole range.
  void vector_loops(const Block& b, const LoopPlan* plan, const std::string& indent, std::vector<std::string>& out,
                    const std::string& begin = "0", const std::string& chunk_end = "") {
    const std::string& v = b.vars.back();
    const Expr& range = b.ranges.back();
    std::string n = chunk_end.empty() ? idx(range) : chunk_end, lanes = std::to_string(lanes_);
    std::string end = chunk_end.empty() ? whole_vectors_end(range)
                                        : begin + " + (" + n + " - " + begin + ") / " + lanes + " * " + lanes;
    if (plan && plan->parallel_dims > 0 && b.vars.size() == 1)
      out.push_back(indent + parallel_clause(*plan, "#pragma omp parallel for"));
    out.push_back(indent + "for (int64_t " + v + " = " + begin + "; " + v + " < " + end + "; " + v + " += " + lanes + ") {");
    for (const auto& l : b.vector_lines) out.push_back(indent + "  " + l);
    out.push_back(indent + "}");
    if (chunk_end.empty() && range.is_const() && range.const_value() % lanes_ == 0) return;
    out.push_back(indent + "for (int64_t " + v + " = " + end + "; " + v + " < " + n + "; ++" + v + ") {");
    for (const auto& l : b.lines) out.push_back(indent + "  " + l);
    out.push_back(indent + "}");
  }
  // Where the whole vectors of a loop over [0, range) end: the scalar tail starts there.
  std::string whole_vectors_end(const Expr& range) {
    if (range.is_const()) return std::to_string(range.const_value() / lanes_ * lanes_);
    std::string n = idx(range);
    return n + " - " + n + " % " + std::to_string(lanes_);
  }
  // The vector loop of a transposing kernel, inside the loop over tiles of `tile_var`: per vector,
  // each strided source is read as kLanes rows along tile_var (whole cache lines) and transposed
  // into a tile; the body then runs for each tile_var in the tile, loading a tile row. A gather
  // would read kLanes cache lines for every vector.
  void tiled_vector_loops(const Block& b, const std::string& indent, std::vector<std::string>& out) {
    const std::string& v = b.vars.back();
    const Expr& range = b.ranges.back();
    std::string n = idx(range), lanes = std::to_string(lanes_), t = b.tile_var, tile = t + "_tile";
    std::string end = whole_vectors_end(range);
    std::string tile_loop = "for (int64_t " + t + " = " + tile + "; " + t + " < " + tile + " + " + lanes + "; ++" + t + ") {";
    out.push_back(indent + "for (int64_t " + v + " = 0; " + v + " < " + end + "; " + v + " += " + lanes + ") {");
    std::set<std::string> filled;
    for (const auto& load : b.tile_loads) {
      if (!filled.insert(load.tile).second) continue;
      out.push_back(indent + "  float " + load.tile + "[" + lanes + " * " + lanes + "];");
      out.push_back(indent + "  foundry_vec::transpose_tile(" + load.base + ", " + std::to_string(load.stride) + ", " + load.tile + ");");
    }
    out.push_back(indent + "  " + tile_loop);
    for (const auto& l : b.vector_lines) out.push_back(indent + "    " + l);
    out.push_back(indent + "  }");
    out.push_back(indent + "}");
    if (range.is_const() && range.const_value() % lanes_ == 0) return;
    out.push_back(indent + "for (int64_t " + v + " = " + end + "; " + v + " < " + n + "; ++" + v + ") {");
    out.push_back(indent + "  " + tile_loop);
    for (const auto& l : b.lines) out.push_back(indent + "    " + l);
    out.push_back(indent + "  }");
    out.push_back(indent + "}");
  }

  // A reduction whose kernel has nothing else to run on threads (one output element) is split
  // into `chunks` pieces of its first loop, run on threads; each piece's partial results are
  // stored and then combined in piece order, so the result does not depend on the thread count.
  void close_split_reduction(const Block& b, std::vector<std::string>& out) {
    std::string chunks = std::to_string(b.split_chunks);
    const std::string& first = b.vars[0];
    for (const Accumulator& a : b.accumulators) out.push_back(a.type + " " + a.name + "_chunks[" + chunks + "];");
    out.push_back(parallel_clause(LoopPlan{}, "#pragma omp parallel for"));
    out.push_back("for (int64_t chunk = 0; chunk < " + chunks + "; ++chunk) {");
    std::string n = idx(b.ranges[0]), begin = first + "_begin", end = first + "_end";
    out.push_back("  const int64_t " + begin + " = " + n + " * chunk / " + chunks + ";");
    out.push_back("  const int64_t " + end + " = " + n + " * (chunk + 1) / " + chunks + ";");
    for (const auto& l : b.pre) out.push_back("  " + l);
    for (const auto& l : b.vector_pre) out.push_back("  " + l);
    if (b.vars.size() == 1) {
      vector_loops(b, nullptr, "  ", out, begin, end);
    } else {
      std::string indent = "  ";
      for (size_t d = 0; d + 1 < b.vars.size(); ++d) {
        const std::string& v = b.vars[d];
        std::string from = d == 0 ? begin : "0", to = d == 0 ? end : idx(b.ranges[d]);
        out.push_back(indent + "for (int64_t " + v + " = " + from + "; " + v + " < " + to + "; ++" + v + ") {");
        indent += "  ";
      }
      vector_loops(b, nullptr, indent, out);
      for (size_t d = b.vars.size() - 1; d-- > 0;) {
        indent.resize(indent.size() - 2);
        out.push_back(indent + "}");
      }
    }
    for (const auto& l : b.vector_combine) out.push_back("  " + l);
    for (const Accumulator& a : b.accumulators) out.push_back("  " + a.name + "_chunks[chunk] = " + a.name + ";");
    out.push_back("}");
    out.insert(out.end(), b.pre.begin(), b.pre.end());
    out.push_back("for (int64_t chunk = 0; chunk < " + chunks + "; ++chunk) {");
    for (const Accumulator& a : b.accumulators) {
      std::string part = a.name + "_chunks[chunk]";
      if (a.op == ReduceOp::Sum) out.push_back("  " + a.name + " += " + part + ";");
      else out.push_back("  " + a.name + " = foundry_rt::" + (a.op == ReduceOp::Max ? "maximum(" : "minimum(") + a.name + ", " + part + ");");
    }
    out.push_back("}");
    out.insert(out.end(), b.post.begin(), b.post.end());
    for (const auto& v : b.vars) extents_.erase(v);
  }
  void split_current_block(int chunks) { block().split_chunks = chunks; }

  const std::vector<std::string>& lines() const { return blocks_.front().lines; }
  // The dynamic sizes (s0, ...) the emitted code mentions: the kernel takes them as parameters.
  const std::set<std::string>& size_symbols() const { return size_symbols_; }

  Val load(const ir::Buffer& buf, const Expr& index) override {
    std::string access = ptr(buf) + "[" + idx(index) + "]";
    if (buf.dtype == DType::Float16) access = "foundry_rt::half_to_float(" + access + ")";
    if (buf.dtype == DType::BFloat16) access = "foundry_rt::bfloat16_to_float(" + access + ")";
    Val v = def(buf.dtype, access, false);
    vector_def(v, vector_load(buf, index));
    return v;
  }
  void store(const ir::Buffer& buf, const Expr& index, Val v, ir::StoreMode mode) override {
    std::string target = ptr(buf) + "[" + idx(index) + "]";
    std::string value = encode(buf.dtype, name(v));
    bool fl = is_floating(buf.dtype);
    switch (mode) {
      case ir::StoreMode::Set: emit(target + " = " + value + ";"); break;
      case ir::StoreMode::Add: emit(target + " += " + value + ";"); break;
      case ir::StoreMode::Mul: emit(target + " *= " + value + ";"); break;
      case ir::StoreMode::Max:
        emit(target + " = foundry_rt::" + (fl ? "maximum(" : "max_int(") + target + ", " + value + ");");
        break;
      case ir::StoreMode::Min:
        emit(target + " = foundry_rt::" + (fl ? "minimum(" : "min_int(") + target + ", " + value + ");");
        break;
    }
    vector_store(buf, index, v, mode);
  }
  Val constant(const ir::Scalar& s) override {
    Val v = def(s.dtype, literal(s), false);
    vector_def(v, vector_splat(s.dtype, literal(s)));
    return v;
  }
  Val index_expr(const Expr& e, DType t) override {
    Val v = def(t, "static_cast<" + compute_type(t) + ">(" + idx(e) + ")", false);
    vector_def(v, t == DType::Float32 ? vector_index(e) : std::nullopt);
    return v;
  }
  Val to_dtype(Val v, DType t) override {
    Val r = def(t, convert(v, t), true);
    auto x = vec(v);
    vector_def(r, x ? vector_convert(v.dtype, t, *x) : std::nullopt);
    return r;
  }
  Val unary(UnaryOp op, Val x) override {
    DType out = ir::returns_bool(op) ? DType::Bool : x.dtype;
    Val r = def(out, unary_expr(op, x), true);
    auto vx = vec(x);
    vector_def(r, vx ? vector_unary(op, x.dtype, *vx) : std::nullopt);
    return r;
  }
  Val binary(BinaryOp op, Val a, Val b) override {
    // Integer division and remainder report division by zero (foundry_rt::fail).
    bool divides = op == BinaryOp::Div || op == BinaryOp::FloorDiv || op == BinaryOp::Mod || op == BinaryOp::Fmod;
    may_fail_ = may_fail_ || (divides && !is_floating(a.dtype));
    DType out = ir::returns_bool(op) ? DType::Bool : a.dtype;
    Val r = def(out, binary_expr(op, a, b), true);
    auto va = vec(a), vb = vec(b);
    vector_def(r, va && vb ? vector_binary(op, a.dtype, *va, *vb) : std::nullopt);
    return r;
  }
  Val where(Val c, Val a, Val b) override {
    Val r = def(a.dtype, name(c) + " ? " + name(a) + " : " + name(b), false);
    auto vc = vec(c), va = vec(a), vb = vec(b);
    vector_def(r, vc && va && vb ? std::optional("foundry_vec::select(" + *vc + ", " + *va + ", " + *vb + ")") : std::nullopt);
    return r;
  }
  Expr indirect(Val v, const Expr& size) override {
    std::string sym = "ind" + std::to_string(indirect_++);
    may_fail_ = true;  // checked_index reports an index out of range
    block().vector_ok = false;  // positions read from memory, one per iteration
    emit("const int64_t " + sym + " = foundry_rt::checked_index(static_cast<int64_t>(" + name(v) + "), " +
         idx(size) + ");");
    extents_[sym] = size;  // checked_index keeps it in [0, size)
    return Expr::sym(sym);
  }
  Val reduction(ReduceOp op, Val v) override {
    std::string acc = "acc" + std::to_string(accumulators_++);
    DType out = ir::reduce_result_dtype(op, v.dtype);
    bool fl = is_floating(v.dtype);
    std::string vt = compute_type(v.dtype);
    // float32 sums and products accumulate in double: well within tolerance of PyTorch's
    // cascade sums, and deterministic.
    std::string acc_type = (fl && (op == ReduceOp::Sum || op == ReduceOp::Prod)) ? "double" : vt;
    block().accumulators.push_back({acc, acc_type, op});
    switch (op) {
      case ReduceOp::Sum:
        block().pre.push_back(acc_type + " " + acc + " = 0;");
        block().lines.push_back(acc + " += " + name(v) + ";");
        break;
      case ReduceOp::Prod:
        block().pre.push_back(acc_type + " " + acc + " = 1;");
        block().lines.push_back(acc + " *= " + name(v) + ";");
        break;
      case ReduceOp::Max: case ReduceOp::Min: {
        bool mx = op == ReduceOp::Max;
        std::string init = fl ? std::string(mx ? "-" : "") + "INFINITY"
                              : "std::numeric_limits<" + vt + ">::" + (mx ? "lowest()" : "max()");
        if (v.dtype == DType::Bool) init = mx ? "false" : "true";
        block().pre.push_back(vt + " " + acc + " = " + init + ";");
        std::string fn = fl ? (mx ? "maximum" : "minimum") : (mx ? "max_int" : "min_int");
        block().lines.push_back(acc + " = foundry_rt::" + fn + "(" + acc + ", " + name(v) + ");");
        break;
      }
      case ReduceOp::ArgMax: case ReduceOp::ArgMin: {
        bool mx = op == ReduceOp::ArgMax;
        block().pre.push_back(vt + " " + acc + "_value = 0;");
        block().pre.push_back("int64_t " + acc + " = 0;");
        block().pre.push_back("bool " + acc + "_seen = false;");
        std::string better = std::string(mx ? " > " : " < ");
        std::string cond = fl ? "!" + acc + "_seen || (!(" + acc + "_value != " + acc + "_value) && (" + name(v) +
                                    " != " + name(v) + " || " + name(v) + better + acc + "_value))"
                              : "!" + acc + "_seen || " + name(v) + better + acc + "_value";
        block().lines.push_back("if (" + cond + ") { " + acc + "_value = " + name(v) + "; " + acc + " = " +
                       reduction_position() + "; " + acc + "_seen = true; }");
        break;
      }
      case ReduceOp::Any:
        block().pre.push_back("bool " + acc + " = false;");
        block().lines.push_back(acc + " = " + acc + " || (" + name(v) + " != 0);");
        break;
    }
    vector_reduction(op, acc, v);
    std::string result = acc;
    if (acc_type != compute_type(out)) result = "static_cast<" + compute_type(out) + ">(" + acc + ")";
    Val r{next_++, out};
    defined_in_[r.id] = blocks_[blocks_.size() - 2].serial;  // after the loop, in the enclosing one
    block().post.push_back("const " + compute_type(out) + " " + name(r) + " = " + round(out, result) + ";");
    return r;
  }
  void store_reduction(const ir::Buffer& buf, const Expr& index, Val v) override {
    block().post.push_back(ptr(buf) + "[" + idx(index) + "] = " + encode(buf.dtype, name(v)) + ";");
  }

 private:
  const std::map<const ir::Buffer*, std::string>& ptrs_;
  ir::SymbolExtents extents_;
  std::set<std::string> size_symbols_;
  int threads_ = 0;  // the compile-time default thread count (0: decided at run time)
  int lanes_ = 1;  // float lanes of a foundry_vec.h vector (1: no explicit SIMD loops)
  static inline const std::string kLane = "lane";  // the lane symbol in per-lane index lambdas
  int block_serial_ = 0;
  std::map<int, int> defined_in_;  // value id -> serial of the loop block that defines it
  std::set<int> no_vector_form_;   // values of the current loops that have no vector form
  bool may_fail_ = false;  // the code calls a helper that can report a kernel error
  int next_ = 0, indirect_ = 0, accumulators_ = 0;

  static std::string name(Val v) { return "tmp" + std::to_string(v.id); }

  std::string parallel_clause(const LoopPlan& plan, std::string head) const {
    head += " num_threads(foundry_rt::num_threads(" + std::to_string(threads_) + "))";
    if (!plan.condition.empty()) head += " if(" + plan.condition + ")";
    return head;
  }

  std::string loop_pragma(const Block& b, size_t d, const LoopPlan* plan) {
    size_t last = b.vars.size() - 1;
    if (plan) {
      bool simd = plan->simd_inner && d == last;
      if (d == 0 && plan->parallel_dims > 0) {
        std::string p = "#pragma omp parallel for";
        if (simd && plan->parallel_dims == 1) p += " simd";
        if (plan->parallel_dims > 1) p += " collapse(" + std::to_string(plan->parallel_dims) + ")";
        return parallel_clause(*plan, p);
      }
      if (simd && !(plan->parallel_dims == 1 && d == 0)) return "#pragma omp simd";
      return "";
    }
    if (d != last || b.accumulators.empty() || b.nested) return "";
    std::string op, vars;
    for (const Accumulator& a : b.accumulators) {
      std::string o = a.op == ReduceOp::Sum ? "+" : a.op == ReduceOp::Prod ? "*" : "";
      if (o.empty() || (!op.empty() && o != op)) return "";
      op = o;
      vars += (vars.empty() ? "" : ", ") + a.name;
    }
    return "#pragma omp simd reduction(" + op + ":" + vars + ")";
  }
  std::vector<Block> blocks_;
  Block& block() { return blocks_.back(); }
  const Block& block() const { return blocks_.back(); }

  std::string ptr(const ir::Buffer& buf) const {
    auto it = ptrs_.find(&buf);
    FOUNDRY_CHECK(it != ptrs_.end(), "kernel touches buffer " + buf.name + " that is not among its arguments");
    return it->second;
  }
  std::string idx(const Expr& e) {
    for (const std::string& s : ir::free_symbols(e))
      if (ir::is_size_symbol(s)) size_symbols_.insert(s);
    return cpp_index(e, extents_);
  }
  void emit(const std::string& line) { block().lines.push_back(line); }
  // 16-bit floats are computed in float and rounded after every operation, as PyTorch does.
  static std::string round(DType t, const std::string& e) {
    if (t == DType::Float16) return "foundry_rt::round_half(" + e + ")";
    if (t == DType::BFloat16) return "foundry_rt::round_bfloat16(" + e + ")";
    return e;
  }
  static std::string encode(DType t, const std::string& v) {
    if (t == DType::Float16) return "foundry_rt::float_to_half(" + v + ")";
    if (t == DType::BFloat16) return "foundry_rt::float_to_bfloat16(" + v + ")";
    return v;
  }
  Val def(DType t, const std::string& rhs, bool may_round) {
    Val v{next_++, t};
    defined_in_[v.id] = block().serial;
    std::string value = may_round ? round(t, rhs) : rhs;
    if (!may_round && is_half(t) && rhs.rfind("foundry_rt::half_to_float", 0) != 0 &&
        rhs.rfind("foundry_rt::bfloat16_to_float", 0) != 0)
      value = round(t, rhs);
    emit("const " + compute_type(t) + " " + name(v) + " = " + value + ";");
    return v;
  }
  // ---- vector forms (explicit SIMD over the last loop variable of the current block) ----------

  // `v` in vector form: its own temporary when the current loop defines it, otherwise a value of
  // an enclosing loop broadcast to every lane; nullopt when it has no vector form.
  std::optional<std::string> vec(Val v) const {
    if (!has_vector_form(v.dtype)) return std::nullopt;
    auto it = defined_in_.find(v.id);
    if (it == defined_in_.end() || it->second != block().serial) return vector_splat(v.dtype, name(v));
    if (no_vector_form_.count(v.id)) return std::nullopt;
    return name(v);
  }
  // A value without a vector form only stops vectorization when a store or reduction needs it.
  void vector_def(Val v, const std::optional<std::string>& rhs) {
    if (rhs && has_vector_form(v.dtype))
      block().vector_lines.push_back("const " + vector_type(v.dtype) + " " + name(v) + " = " + *rhs + ";");
    else
      no_vector_form_.insert(v.id);
  }
  const std::string* vector_var() const { return block().vars.empty() ? nullptr : &block().vars.back(); }
  // How `index` moves with the vector variable: not at all (nullopt), one element per lane (1),
  // or otherwise (0: the lanes are addressed one by one).
  std::optional<int> lane_step(const Expr& index) const {
    if (!ir::free_symbols(index).count(*vector_var())) return std::nullopt;
    auto c = ir::affine_coefficient(index, *vector_var());
    return c && c->is_const(1) ? 1 : 0;
  }
  // `index` at the current position plus `lane`.
  std::string lane_index(const Expr& index) {
    return idx(ir::substitute(index, {{*vector_var(), Expr::sym(*vector_var()) + Expr::sym(kLane)}}));
  }
  std::optional<std::string> vector_load(const ir::Buffer& buf, const Expr& index) {
    if (!has_vector_form(buf.dtype) || !vector_var()) return std::nullopt;
    bool is_bool = buf.dtype == DType::Bool;
    std::string p = ptr(buf);
    auto step = lane_step(index);
    if (!step) return vector_splat(buf.dtype, p + "[" + idx(index) + "]");
    if (*step == 1) return std::string(is_bool ? "foundry_vec::load_bool(" : "foundry_vec::load(") + p + " + " + idx(index) + ")";
    std::string gather = std::string(is_bool ? "foundry_vec::gather_bool" : "foundry_vec::gather") + "([&](int64_t " +
                         kLane + ") { return " + p + "[" + lane_index(index) + "]; })";
    if (auto token = tile_load(buf, index, gather)) return token;
    return gather;
  }
  // A float load of the outer loops whose position moves by a constant stride with the vector
  // variable and by one element with another loop variable, whose range is a multiple of the
  // lanes: a transposed read. The loops can then go tile by tile (tiled_vector_loops).
  std::optional<std::string> tile_load(const ir::Buffer& buf, const Expr& index, const std::string& gather) {
    if (buf.dtype != DType::Float32 || blocks_.size() != 2) return std::nullopt;
    Block& b = block();
    auto stride = ir::affine_coefficient(index, *vector_var());
    if (!stride || !stride->is_const()) return std::nullopt;
    for (size_t d = 0; d + 1 < b.vars.size(); ++d) {
      const std::string& t = b.vars[d];
      auto along = ir::affine_coefficient(index, t);
      if ((!b.tile_var.empty() && b.tile_var != t) || !along || !along->is_const(1) || !b.ranges[d].is_const() ||
          b.ranges[d].const_value() % lanes_ != 0)
        continue;
      b.tile_var = t;
      extents_[t + "_tile"] = b.ranges[d];
      std::string n = std::to_string(b.tile_loads.size());
      std::string base = ptr(buf) + " + " + idx(ir::substitute(index, {{t, Expr::sym(t + "_tile")}}));
      b.tile_loads.push_back({"@tile" + n + "@", gather, "tile" + n, base, stride->const_value()});
      return b.tile_loads.back().token;
    }
    return std::nullopt;
  }
  // Puts the tile loads or their gathers in place of the tokens.
  static void resolve_tile_loads(Block& b, bool tiled, int lanes) {
    for (auto& line : b.vector_lines)
      for (const auto& t : b.tile_loads)
        for (size_t at = line.find(t.token); at != std::string::npos; at = line.find(t.token)) {
          std::string tile = "foundry_vec::load(" + t.tile + " + (" + b.tile_var + " - " + b.tile_var + "_tile) * " +
                             std::to_string(lanes) + ")";
          line.replace(at, t.token.size(), tiled ? tile : t.gather);
        }
  }
  void vector_store(const ir::Buffer& buf, const Expr& index, Val v, ir::StoreMode mode) {
    auto x = vec(v);
    if (!x || !vector_var() || mode != ir::StoreMode::Set || buf.dtype != v.dtype) {
      block().vector_ok = false;
      return;
    }
    bool is_bool = buf.dtype == DType::Bool;
    std::string p = ptr(buf);
    if (lane_step(index) == 1) {
      emit_vector(std::string(is_bool ? "foundry_vec::store_bool(" : "foundry_vec::store(") + p + " + " + idx(index) + ", " + *x + ");");
      return;
    }
    emit_vector(std::string(is_bool ? "foundry_vec::scatter_bool(" : "foundry_vec::scatter(") + *x + ", [&](int64_t " + kLane +
                ") -> " + storage_type(buf.dtype) + "& { return " + p + "[" + lane_index(index) + "]; });");
  }
  std::optional<std::string> vector_index(const Expr& e) {
    if (!vector_var()) return std::nullopt;
    auto step = lane_step(e);
    if (!step) return vector_splat(DType::Float32, "static_cast<float>(" + idx(e) + ")");
    if (*step == 1) return "foundry_vec::iota(" + idx(e) + ", 1)";
    return "foundry_vec::gather([&](int64_t " + kLane + ") { return static_cast<float>(" + lane_index(e) + "); })";
  }
  // Float sums keep a double per lane; max and min a float per lane. The lanes are combined in
  // lane order after the loops, so a run's result does not depend on the thread count.
  void vector_reduction(ReduceOp op, const std::string& acc, Val v) {
    auto x = vec(v);
    if (!x || v.dtype != DType::Float32 || !(op == ReduceOp::Sum || op == ReduceOp::Max || op == ReduceOp::Min)) {
      block().vector_ok = false;
      return;
    }
    std::string lanes = acc + "_lanes";
    if (op == ReduceOp::Sum) {
      block().vector_pre.push_back("foundry_vec::VecD " + lanes + " = {};");
      emit_vector(lanes + " += foundry_vec::widen(" + *x + ");");
      block().vector_combine.push_back(acc + " += foundry_vec::sum(" + lanes + ");");
      return;
    }
    bool mx = op == ReduceOp::Max;
    block().vector_pre.push_back("foundry_vec::VecF " + lanes + " = foundry_vec::splat(" + (mx ? "-" : "") + "INFINITY);");
    emit_vector(lanes + " = foundry_vec::" + (mx ? "maximum(" : "minimum(") + lanes + ", " + *x + ");");
    block().vector_combine.push_back(acc + " = foundry_rt::" + (mx ? "maximum(" : "minimum(") + acc + ", foundry_vec::" +
                                     (mx ? "max(" : "min(") + lanes + "));");
  }
  void emit_vector(const std::string& line) { block().vector_lines.push_back(line); }

  // The flattened position in the current reduction loop (for argmax/argmin).
  std::string reduction_position() {
    const Block& b = block();
    ir::Index vars;
    for (const auto& v : b.vars) vars.push_back(Expr::sym(v));
    return idx(ir::ravel_index(vars, b.ranges));
  }

  std::string convert(Val v, DType t) const {
    std::string x = name(v);
    if (t == DType::Bool) return x + " != 0";
    if (is_floating(t)) return "static_cast<" + compute_type(t) + ">(" + x + ")";
    if (is_floating(v.dtype)) return "foundry_rt::float_to_int<" + compute_type(t) + ">(" + x + ")";
    return "static_cast<" + compute_type(t) + ">(" + x + ")";
  }

  std::string unary_expr(UnaryOp op, Val xv) const {
    std::string x = name(xv);
    bool fl = is_floating(xv.dtype);
    std::string t = compute_type(xv.dtype);
    auto call = [&](const char* fn) { return std::string(fn) + "(" + x + ")"; };
    switch (op) {
      case UnaryOp::Neg: return fl ? "-" + x : "static_cast<" + t + ">(-" + x + ")";
      case UnaryOp::Abs: return fl ? call("std::fabs") : "static_cast<" + t + ">(" + x + " < 0 ? -" + x + " : " + x + ")";
      case UnaryOp::Exp: return call("std::exp");
      case UnaryOp::Exp2: return call("std::exp2");
      case UnaryOp::Expm1: return call("std::expm1");
      case UnaryOp::Log: return call("std::log");
      case UnaryOp::Log2: return call("std::log2");
      case UnaryOp::Log10: return call("std::log10");
      case UnaryOp::Log1p: return call("std::log1p");
      case UnaryOp::Sqrt: return call("std::sqrt");
      case UnaryOp::Rsqrt: return t + "(1) / std::sqrt(" + x + ")";
      case UnaryOp::Sin: return call("std::sin");
      case UnaryOp::Cos: return call("std::cos");
      case UnaryOp::Tan: return call("std::tan");
      case UnaryOp::Asin: return call("std::asin");
      case UnaryOp::Acos: return call("std::acos");
      case UnaryOp::Atan: return call("std::atan");
      case UnaryOp::Sinh: return call("std::sinh");
      case UnaryOp::Cosh: return call("std::cosh");
      case UnaryOp::Tanh: return call("std::tanh");
      case UnaryOp::Asinh: return call("std::asinh");
      case UnaryOp::Acosh: return call("std::acosh");
      case UnaryOp::Atanh: return call("std::atanh");
      case UnaryOp::Erf: return call("std::erf");
      case UnaryOp::Erfc: return call("std::erfc");
      case UnaryOp::Sigmoid: return call("foundry_rt::sigmoid");
      case UnaryOp::Floor: return fl ? call("std::floor") : x;
      case UnaryOp::Ceil: return fl ? call("std::ceil") : x;
      case UnaryOp::Trunc: return fl ? call("std::trunc") : x;
      case UnaryOp::Round: return fl ? call("std::nearbyint") : x;
      case UnaryOp::Reciprocal: return t + "(1) / " + x;
      case UnaryOp::Sign: return fl ? call("foundry_rt::sign_float") : xv.dtype == DType::Bool ? x : call("foundry_rt::sign_int");
      case UnaryOp::BitwiseNot: return xv.dtype == DType::Bool ? "!" + x : "static_cast<" + t + ">(~" + x + ")";
      case UnaryOp::LogicalNot: return "!(" + x + " != 0)";
      case UnaryOp::IsNan: return fl ? call("std::isnan") : "false";
      case UnaryOp::IsInf: return fl ? call("std::isinf") : "false";
    }
    throw InternalError("unknown unary op");
  }

  std::string binary_expr(BinaryOp op, Val av, Val bv) const {
    std::string a = name(av), b = name(bv);
    bool fl = is_floating(av.dtype);
    std::string t = compute_type(av.dtype);
    auto call = [&](const std::string& fn) { return fn + "(" + a + ", " + b + ")"; };
    auto wrap = [&](const std::string& e) { return "static_cast<" + t + ">(" + e + ")"; };
    switch (op) {
      case BinaryOp::Add: return fl ? a + " + " + b : wrap(a + " + " + b);
      case BinaryOp::Sub: return fl ? a + " - " + b : wrap(a + " - " + b);
      case BinaryOp::Mul: return fl ? a + " * " + b : wrap(a + " * " + b);
      case BinaryOp::Div: return fl ? a + " / " + b : call("foundry_rt::div_trunc<" + t + ">");
      case BinaryOp::FloorDiv: return call(fl ? "foundry_rt::floordiv_float<" + t + ">" : "foundry_rt::floordiv_int<" + t + ">");
      case BinaryOp::Mod: return call(fl ? "foundry_rt::mod_float<" + t + ">" : "foundry_rt::mod_int<" + t + ">");
      case BinaryOp::Fmod: return fl ? call("std::fmod") : call("foundry_rt::fmod_int<" + t + ">");
      case BinaryOp::Pow: return fl ? call("std::pow") : call("foundry_rt::pow_int<" + t + ">");
      case BinaryOp::Atan2: return call("std::atan2");
      case BinaryOp::Hypot: return call("std::hypot");
      case BinaryOp::Copysign: return fl ? call("std::copysign") : call("foundry_rt::copysign_int<" + t + ">");
      case BinaryOp::Maximum: return call(fl ? "foundry_rt::maximum<" + t + ">" : "foundry_rt::max_int<" + t + ">");
      case BinaryOp::Minimum: return call(fl ? "foundry_rt::minimum<" + t + ">" : "foundry_rt::min_int<" + t + ">");
      case BinaryOp::Fmax: return fl ? call("std::fmax") : call("foundry_rt::max_int<" + t + ">");
      case BinaryOp::Fmin: return fl ? call("std::fmin") : call("foundry_rt::min_int<" + t + ">");
      case BinaryOp::BitAnd: return av.dtype == DType::Bool ? a + " && " + b : wrap(a + " & " + b);
      case BinaryOp::BitOr: return av.dtype == DType::Bool ? a + " || " + b : wrap(a + " | " + b);
      case BinaryOp::BitXor: return av.dtype == DType::Bool ? a + " != " + b : wrap(a + " ^ " + b);
      case BinaryOp::LogicalAnd: return "(" + a + " != 0) && (" + b + " != 0)";
      case BinaryOp::LogicalOr: return "(" + a + " != 0) || (" + b + " != 0)";
      case BinaryOp::LogicalXor: return "(" + a + " != 0) != (" + b + " != 0)";
      case BinaryOp::Eq: case BinaryOp::Ne: case BinaryOp::Lt: case BinaryOp::Le: case BinaryOp::Gt:
      case BinaryOp::Ge:
        return a + " " + infix_operator(op) + " " + b;
    }
    throw InternalError("unknown binary op");
  }
};

// Drives the emitter through a kernel walk: loops for reductions and inner members.
class CppVisitor final : public sched::KernelVisitor {
 public:
  // Reductions of at least `min_split_work` elements are split into `split_chunks` pieces (0: none).
  CppVisitor(CppEmitter& emitter, int split_chunks, int64_t min_split_work)
      : emitter_(emitter), split_chunks_(split_chunks), min_split_work_(min_split_work) {}
  ir::Ops& ops() override { return emitter_; }
  void begin_reduction(const sched::Member&, const ir::Index& ranges) override {
    std::vector<std::string> vars;
    Expr work = 1;
    for (size_t d = 0; d < ranges.size(); ++d) {
      vars.push_back(ir::reduction_var(static_cast<int>(d)));
      work = work * ranges[d];
    }
    emitter_.open_block(ranges, vars);
    if (split_chunks_ > 0 && work.is_const() && work.const_value() >= min_split_work_)
      emitter_.split_current_block(split_chunks_);
  }
  void end_reduction(const sched::Member&) override { emitter_.close_block(); }
  void begin_inner(const sched::Member&, const ir::Index& ranges, const std::vector<std::string>& vars) override {
    emitter_.open_block(ranges, vars);
  }
  void end_inner(const sched::Member&) override { emitter_.close_block(); }

 private:
  CppEmitter& emitter_;
  int split_chunks_ = 0;
  int64_t min_split_work_ = 0;
};

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
  std::set<std::string> seen;
  auto add = [&](const ir::LoopNode* n) {
    for (const auto& o : n->origins)
      if (seen.insert(o).second) out += (out.empty() ? "" : ", ") + o;
  };
  std::vector<const ir::LoopNode*> nodes;
  for (const auto& m : kernel.members) nodes.push_back(m.node);
  nodes.insert(nodes.end(), kernel.inlined.begin(), kernel.inlined.end());
  std::sort(nodes.begin(), nodes.end(), [](const auto* a, const auto* b) { return a->id < b->id; });
  for (const auto* n : nodes) add(n);
  return out;
}


// Iterations of the outer loops may run on different threads and SIMD lanes only when they are
// independent: plain stores (no scatter-add, no indirect positions), no buffer both read and
// written. Threads take the leading loops that every store's position depends on.
LoopPlan plan_loops(const sched::Kernel& kernel, const ir::Accesses& acc, const std::vector<std::string>& outer,
                    bool nested, const KernelOptions& options) {
  LoopPlan plan;
  std::set<const ir::Buffer*> written;
  for (const auto& w : acc.writes) {
    if (w.mode != ir::StoreMode::Set) return plan;
    for (const std::string& s : ir::free_symbols(w.index))
      if (s.rfind("ind", 0) == 0) return plan;
    written.insert(w.buffer);
  }
  for (const auto& r : acc.reads)
    if (written.count(r.buffer)) return plan;
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
  if (usable == 0) return plan;
  // The work of one run: outer iterations times what each member does per iteration (one
  // element, or its whole reduction loop).
  Expr per_iteration = 0;
  for (const auto& m : kernel.members) {
    Expr n = 1;
    for (const auto& r : m.node->reduction_ranges) n = n * r;
    per_iteration = per_iteration + n;
  }
  Expr work = per_iteration;
  for (const auto& r : kernel.ranges) work = work * r;
  if (work.is_const() && work.const_value() < options.min_parallel_work) return plan;
  plan.parallel_dims = usable;
  if (!work.is_const()) plan.condition = cpp_index(work, {}) + " >= " + std::to_string(options.min_parallel_work);
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

}  // namespace

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

EmittedKernel emit_kernel(const sched::Kernel& kernel, const sched::Schedule& schedule, const KernelOptions& options) {
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

  CppEmitter emitter(ptrs, options.threads, options.vectorize ? options.lanes : 1);
  std::vector<std::string> outer = sched::kernel_loop_vars(kernel);
  emitter.open_block(kernel.ranges, outer);
  int chunks = split_chunks(kernel, options);
  CppVisitor visitor(emitter, chunks, options.min_parallel_work);
  sched::walk_kernel(kernel, schedule, visitor);
  LoopPlan plan = plan_loops(kernel, accesses, outer, emitter.nested_in_outer() > 0, options);
  if (chunks > 0) plan.parallel_dims = 0;  // one outer iteration: the threads run inside reductions
  emitter.close_block(&plan);
  for (const std::string& s : emitter.size_symbols()) {
    k.size_params.push_back(s);
    params += (params.empty() ? "" : ", ") + std::string("int64_t ") + s;
  }
  k.declaration = "void " + k.name + "(" + params + ")";

  std::ostringstream out;
  out << "// " << k.name << ": " << origin_comment(kernel) << "\n" << k.declaration << " {\n";
  for (const auto& line : emitter.lines()) out << "  " << line << "\n";
  out << "}\n";
  k.definition = out.str();
  return k;
}

}  // namespace foundry::codegen
