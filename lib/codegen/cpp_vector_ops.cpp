#include "codegen/cpp_ops.h"
#include "codegen/vec_ops.h"
#include "foundry/codegen/cpp_kernel.h"
#include "foundry/support/error.h"

namespace foundry::codegen {

using ir::Expr;
using ir::ReduceOp;
using ir::Val;

namespace {
// The 16-bit type's own functions in foundry_vec.h ("half", "bfloat16"), or nullptr.
const char* half_name(DType t) {
  return t == DType::Float16 ? "half" : t == DType::BFloat16 ? "bfloat16" : nullptr;
}
}  // namespace

// A value without a vector form only stops vectorization when a store or reduction needs it.
// A 16-bit value is rounded to its type, as the scalar code rounds it, unless it was just loaded.
Val CppVectorOps::def(DType t, const std::optional<std::string>& rhs, bool loaded,
                      const std::optional<std::string>& partial) {
  Val v{next_++, t};
  if (scopes_.top().hoisted_values.count(v.id)) return v;  // a scalar before the loop (vec splats it)
  if (!rhs || !has_vector_form(t)) {
    no_vector_form_.insert(v.id);
    return v;
  }
  const char* half = half_name(t);
  std::string value = half && !loaded ? "foundry_vec::round_" + std::string(half) + "(" + *rhs + ")" : *rhs;
  const std::string head = "const " + vector_type(t) + " " + value_name(v) + " = ";
  emit(head + value + ";", partial ? std::optional(head + *partial + ";") : std::nullopt);
  return v;
}

std::string CppVectorOps::element(const ir::Buffer& buf, const std::string& at) {
  std::string e = scopes_.ptr(buf) + "[" + at + "]";
  const char* half = half_name(buf.dtype);
  return half ? "foundry_rt::" + std::string(half) + "_to_float(" + e + ")" : e;
}

// A load in the partial vector: the active lanes one by one (the others 0), nothing else read.
std::string CppVectorOps::partial_gather(const ir::Buffer& buf, const Expr& index, bool is_bool) {
  return std::string(is_bool ? "foundry_vec::gather_bool_first" : "foundry_vec::gather_first") + "([&](int64_t " +
         kLane + ") { return " + element(buf, lane_index(index)) + "; }, kActiveLanes)";
}

// `v` in vector form: its own temporary when the current loop defines it, otherwise a value of
// an enclosing loop broadcast to every lane; nullopt when it has no vector form.
std::optional<std::string> CppVectorOps::vec(Val v) const {
  if (!has_vector_form(v.dtype)) return std::nullopt;
  auto it = scopes_.defined_in.find(v.id);
  if (it == scopes_.defined_in.end() || it->second != scopes_.top().serial || scopes_.top().hoisted_values.count(v.id))
    return vector_splat(v.dtype, value_name(v));
  if (no_vector_form_.count(v.id)) return std::nullopt;
  return value_name(v);
}

const std::string* CppVectorOps::vector_var() const {
  return scopes_.top().vars.empty() ? nullptr : &scopes_.top().vars.back();
}

// How `index` moves with the vector variable: not at all (nullopt), one element per lane (1),
// or otherwise (0: the lanes are addressed one by one).
std::optional<int> CppVectorOps::lane_step(const Expr& index) const {
  if (!ir::free_symbols(index).count(*vector_var())) return std::nullopt;
  auto c = ir::affine_coefficient(index, *vector_var());
  return c && c->is_const(1) ? 1 : 0;
}

// `index` at the current position plus `lane`.
std::string CppVectorOps::lane_index(const Expr& index) {
  return scopes_.idx(ir::substitute(index, {{*vector_var(), Expr::sym(*vector_var()) + Expr::sym(kLane)}}));
}

Val CppVectorOps::load(const ir::Buffer& buf, const Expr& index) {
  if (!has_vector_form(buf.dtype) || !vector_var()) return def(buf.dtype, std::nullopt);
  bool is_bool = buf.dtype == DType::Bool;
  const char* half = half_name(buf.dtype);
  std::string p = scopes_.ptr(buf);
  auto step = lane_step(index);
  if (!step) return def(buf.dtype, vector_splat(buf.dtype, element(buf, scopes_.idx(index))), true);
  const std::string partial = partial_gather(buf, index, is_bool);
  if (*step == 1) {
    std::string fn = is_bool ? "load_bool" : half ? "load_" + std::string(half) : "load";
    std::string at = p + " + " + scopes_.idx(index);
    bool plain = buf.dtype == DType::Float32;
    return def(buf.dtype, "foundry_vec::" + fn + "(" + at + ")", true,
               plain ? "foundry_vec::load_first(" + at + ", kActiveLanes)" : partial);
  }
  if (auto tile = tile_load(buf, index)) {
    scopes_.top().partial_ok = false;
    return def(buf.dtype, tile, true);
  }
  auto stride = ir::affine_coefficient(index, *vector_var());
  if (buf.dtype == DType::Float32 && stride && stride->is_const(2))
    return def(buf.dtype, "foundry_vec::load_stride2(" + p + " + " + scopes_.idx(index) + ")", true, partial);
  return def(buf.dtype, std::string(is_bool ? "foundry_vec::gather_bool" : "foundry_vec::gather") + "([&](int64_t " +
                            kLane + ") { return " + element(buf, lane_index(index)) + "; })", true, partial);
}

// A float load of a tiled scope (the plan chose `tile_var`: see plan_tiles in cpp_kernel.cpp)
// whose position moves by a constant stride with the vector variable and by one element along
// the tile variable: a row of the tile that kLanes whole rows of the source were transposed into.
std::optional<std::string> CppVectorOps::tile_load(const ir::Buffer& buf, const Expr& index) {
  Scope& s = scopes_.top();
  if (s.tile_var.empty() || buf.dtype != DType::Float32) return std::nullopt;
  const std::string& t = s.tile_var;
  auto stride = ir::affine_coefficient(index, *vector_var());
  auto along = ir::affine_coefficient(index, t);
  if (!stride || !stride->is_const() || !along || !along->is_const(1)) return std::nullopt;
  std::string tile = "tile" + std::to_string(s.tile_loads.size());
  std::string base = scopes_.ptr(buf) + " + " + scopes_.idx(ir::substitute(index, {{t, Expr::sym(t + "_tile")}}));
  s.tile_loads.push_back({tile, base, stride->const_value()});
  std::string lanes = std::to_string(scopes_.lanes());
  return "foundry_vec::load(" + tile + " + (" + t + " - " + t + "_tile) * " + lanes + ")";
}

void CppVectorOps::store(const ir::Buffer& buf, const Expr& index, Val v, ir::StoreMode mode) {
  auto x = vec(v);
  if (!x || !vector_var() || mode != ir::StoreMode::Set || buf.dtype != v.dtype) {
    scopes_.top().vector_ok = false;
    return;
  }
  bool is_bool = buf.dtype == DType::Bool;
  const char* half = half_name(buf.dtype);
  std::string p = scopes_.ptr(buf);
  if (lane_step(index) == 1) {
    std::string fn = is_bool ? "store_bool" : half ? "store_" + std::string(half) : "store";
    std::string args = p + " + " + scopes_.idx(index) + ", " + *x;
    std::optional<std::string> partial;  // 16-bit stores have no partial form: their loop keeps a scalar tail
    if (half) scopes_.top().partial_ok = false;
    else partial = "foundry_vec::" + fn + "_first(" + args + ", kActiveLanes);";
    emit("foundry_vec::" + fn + "(" + args + ");", partial);
    return;
  }
  if (half) {  // lane by lane, each encoded: left to the scalar loop
    scopes_.top().vector_ok = false;
    return;
  }
  const std::string lanes = *x + ", [&](int64_t " + kLane + ") -> " + storage_type(buf.dtype) + "& { return " + p + "[" +
                            lane_index(index) + "]; }";
  const std::string fn = is_bool ? "foundry_vec::scatter_bool" : "foundry_vec::scatter";
  emit(fn + "(" + lanes + ");", fn + "_first(" + lanes + ", kActiveLanes);");
}

Val CppVectorOps::constant(const ir::Scalar& s) {
  if (s.dtype == DType::Int64) return index_expr(Expr(s.i), s.dtype);
  return def(s.dtype, vector_splat(s.dtype, literal(s)));
}

Val CppVectorOps::index_expr(const Expr& e, DType t) {
  if (t == DType::Int64) {
    Val v = def(t, std::nullopt);
    index_values_.emplace(v.id, e);
    return v;
  }
  if (t != DType::Float32 || !vector_var()) return def(t, std::nullopt);
  auto step = lane_step(e);
  if (!step) return def(t, vector_splat(DType::Float32, "static_cast<float>(" + scopes_.idx(e) + ")"));
  if (*step == 1) return def(t, "foundry_vec::iota(" + scopes_.idx(e) + ", 1)");
  return def(t, "foundry_vec::gather([&](int64_t " + kLane + ") { return static_cast<float>(" + lane_index(e) + "); })");
}

Val CppVectorOps::to_dtype(Val v, DType t) {
  auto index = index_values_.find(v.id);
  if (index != index_values_.end() && t == DType::Float32) return index_expr(index->second, t);  // same rounding
  auto x = vec(v);
  return def(t, x ? vector_convert(v.dtype, t, *x) : std::nullopt);
}

Val CppVectorOps::unary(ir::UnaryOp op, Val x) {
  auto vx = vec(x);
  return def(ir::returns_bool(op) ? DType::Bool : x.dtype, vx ? vector_unary(op, x.dtype, *vx) : std::nullopt);
}

// Sums, differences and products of index expressions are index expressions (no vector form);
// their comparisons are lane masks.
std::optional<Val> CppVectorOps::index_arithmetic(ir::BinaryOp op, Val a, Val b) {
  auto ia = index_values_.find(a.id), ib = index_values_.find(b.id);
  if (ia == index_values_.end() || ib == index_values_.end() || !vector_var()) return std::nullopt;
  const Expr &x = ia->second, &y = ib->second;
  switch (op) {
    case ir::BinaryOp::Add: return index_expr(x + y, DType::Int64);
    case ir::BinaryOp::Sub: return index_expr(x - y, DType::Int64);
    case ir::BinaryOp::Mul: return index_expr(x * y, DType::Int64);
    case ir::BinaryOp::Lt: case ir::BinaryOp::Le: case ir::BinaryOp::Gt: case ir::BinaryOp::Ge:
    case ir::BinaryOp::Eq: case ir::BinaryOp::Ne: {
      Val v = def(DType::Bool, index_compare(op, x, y));
      if (auto known = scopes_.decided(op, x - y)) known_bools_[v.id] = *known;
      return v;
    }
    default: return std::nullopt;
  }
}

// The lanes where index `a` compares with index `b` as `op` says: one test broadcast when neither
// moves with the vector variable, a test of `base + step * lane` against 0 when their difference
// moves by a fixed step per lane, and otherwise lane by lane.
std::string CppVectorOps::index_compare(ir::BinaryOp op, const Expr& a, const Expr& b) {
  const std::string infix = infix_operator(op);
  const Expr diff = a - b;
  if (auto known = scopes_.decided(op, diff)) return vector_splat(DType::Bool, *known ? "true" : "false");
  if (!lane_step(diff)) return vector_splat(DType::Bool, "(" + scopes_.idx(a) + ") " + infix + " (" + scopes_.idx(b) + ")");
  auto step = ir::affine_coefficient(diff, *vector_var());
  if (step && !ir::free_symbols(*step).count(*vector_var()))
    return "foundry_vec::index_compare(" + scopes_.idx(diff) + ", " + scopes_.idx(*step) + ", foundry_vec::Compare::" +
           compare_name(op) + ")";
  return "foundry_vec::gather_bool([&](int64_t " + std::string(kLane) + ") { return (" + lane_index(a) + ") " + infix +
         " (" + lane_index(b) + "); })";
}

Val CppVectorOps::binary(ir::BinaryOp op, Val a, Val b) {
  if (auto v = index_arithmetic(op, a, b)) return *v;
  auto va = vec(a), vb = vec(b);
  return def(ir::returns_bool(op) ? DType::Bool : a.dtype, va && vb ? vector_binary(op, a.dtype, *va, *vb) : std::nullopt);
}

Val CppVectorOps::where(Val c, Val a, Val b) {
  if (auto known = known_bools_.find(c.id); known != known_bools_.end()) {  // decided in the loop's piece
    const Val& chosen = known->second ? a : b;
    return def(a.dtype, vec(chosen), /*loaded=*/true);  // a copy: rounded already, if 16-bit
  }
  auto vc = vec(c), va = vec(a), vb = vec(b);
  return def(a.dtype, vc && va && vb ? std::optional("foundry_vec::select(" + *vc + ", " + *va + ", " + *vb + ")")
                                     : std::nullopt);
}

// Positions read from memory, one per iteration, keep the loop scalar; one computed before the
// loop (hoisted) is the same number in every lane.
Expr CppVectorOps::indirect(Val, const Expr&, ir::NegativeIndex) {
  const std::string sym = "ind" + std::to_string(indirect_++);
  if (!scopes_.top().hoisted_symbols.count(sym)) scopes_.top().vector_ok = false;
  return Expr::sym(sym);
}

// Float sums keep a double per lane; max and min a float per lane. The lanes are combined in
// lane order after the loops, so a run's result does not depend on the thread count.
Val CppVectorOps::reduction(ReduceOp op, Val v) {
  std::string acc = "acc" + std::to_string(accumulators_++);
  Val r{next_++, ir::reduce_result_dtype(op, v.dtype)};
  auto x = vec(v);
  Scope& s = scopes_.top();
  if (!x || !(v.dtype == DType::Float32 || half_name(v.dtype)) || !(op == ReduceOp::Sum || op == ReduceOp::Max || op == ReduceOp::Min)) {
    s.vector_ok = false;
    return r;
  }
  std::string lanes = acc + "_lanes";
  // In the partial vector, the lanes past the loop's end hold the reduction's identity.
  auto only_active = [&](const char* identity) {
    return "foundry_vec::first_lanes(" + *x + ", kActiveLanes, " + identity + ")";
  };
  if (op == ReduceOp::Sum) {
    s.vector_pre.push_back("foundry_vec::VecD " + lanes + " = {};");
    emit(lanes + " += foundry_vec::widen(" + *x + ");", lanes + " += foundry_vec::widen(" + only_active("0.0f") + ");");
    s.vector_combine.push_back(acc + " += foundry_vec::sum(" + lanes + ");");
    return r;
  }
  bool mx = op == ReduceOp::Max;
  s.vector_pre.push_back("foundry_vec::VecF " + lanes + " = foundry_vec::splat(" + (mx ? "-" : "") + "INFINITY);");
  const std::string fn = std::string("foundry_vec::") + (mx ? "maximum(" : "minimum(") + lanes + ", ";
  emit(lanes + " = " + fn + *x + ");", lanes + " = " + fn + only_active(mx ? "-INFINITY" : "INFINITY") + ");");
  s.vector_combine.push_back(acc + " = foundry_rt::" + (mx ? "maximum(" : "minimum(") + acc + ", foundry_vec::" +
                             (mx ? "max(" : "min(") + lanes + "));");
  return r;
}

}  // namespace foundry::codegen
