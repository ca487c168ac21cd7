#include <cmath>
#include <cstdio>

#include "codegen/cpp_ops.h"
#include "codegen/vec_ops.h"
#include "foundry/codegen/cpp_kernel.h"
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

std::string value_name(Val v) { return "tmp" + std::to_string(v.id); }

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

namespace {

bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

// 16-bit floats are computed in float and rounded after every operation, as PyTorch does.
std::string round(DType t, const std::string& e) {
  if (t == DType::Float16) return "foundry_rt::round_half(" + e + ")";
  if (t == DType::BFloat16) return "foundry_rt::round_bfloat16(" + e + ")";
  return e;
}

std::string encode(DType t, const std::string& v) {
  if (t == DType::Float16) return "foundry_rt::float_to_half(" + v + ")";
  if (t == DType::BFloat16) return "foundry_rt::float_to_bfloat16(" + v + ")";
  return v;
}

std::string convert(Val v, DType t) {
  std::string x = value_name(v);
  if (t == DType::Bool) return x + " != 0";
  if (is_floating(t)) return "static_cast<" + compute_type(t) + ">(" + x + ")";
  if (is_floating(v.dtype)) return "foundry_rt::float_to_int<" + compute_type(t) + ">(" + x + ")";
  return "static_cast<" + compute_type(t) + ">(" + x + ")";
}

std::string unary_expr(UnaryOp op, Val xv) {
  std::string x = value_name(xv);
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
    case UnaryOp::SignBit: return fl ? call("std::signbit") : x + " < 0";
#define FOUNDRY_SPECIAL_CASE(name, text) \
  case UnaryOp::name: return "static_cast<" + t + ">(" + call("foundry_rt::special::" #text) + ")";
    FOUNDRY_SPECIAL_UNARY_OPS(FOUNDRY_SPECIAL_CASE)
#undef FOUNDRY_SPECIAL_CASE
  }
  throw InternalError("unknown unary op");
}

std::string binary_expr(BinaryOp op, Val av, Val bv) {
  std::string a = value_name(av), b = value_name(bv);
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
    // Both operands are computed values: `&` and `|` (no short circuit, which compiles to a branch).
    case BinaryOp::BitAnd: return av.dtype == DType::Bool ? a + " & " + b : wrap(a + " & " + b);
    case BinaryOp::BitOr: return av.dtype == DType::Bool ? a + " | " + b : wrap(a + " | " + b);
    case BinaryOp::BitXor: return av.dtype == DType::Bool ? a + " != " + b : wrap(a + " ^ " + b);
    case BinaryOp::LogicalAnd: return "(" + a + " != 0) & (" + b + " != 0)";
    case BinaryOp::LogicalOr: return "(" + a + " != 0) | (" + b + " != 0)";
    case BinaryOp::LogicalXor: return "(" + a + " != 0) != (" + b + " != 0)";
    case BinaryOp::Eq: case BinaryOp::Ne: case BinaryOp::Lt: case BinaryOp::Le: case BinaryOp::Gt:
    case BinaryOp::Ge:
      return a + " " + infix_operator(op) + " " + b;
    case BinaryOp::Nextafter: return call("std::nextafter");  // in the operands' own type
#define FOUNDRY_SPECIAL_CASE(name, text) \
  case BinaryOp::name: return "static_cast<" + t + ">(" + call("foundry_rt::special::" #text) + ")";
    FOUNDRY_SPECIAL_BINARY_OPS(FOUNDRY_SPECIAL_CASE)
#undef FOUNDRY_SPECIAL_CASE
  }
  throw InternalError("unknown binary op");
}
}  // namespace

Val CppScalarOps::def(DType t, const std::string& rhs, bool may_round, bool invariant) {
  Val v{next_++, t};
  scopes_.defined_in[v.id] = scopes_.top().serial;
  std::string value = may_round ? round(t, rhs) : rhs;
  if (!may_round && is_half(t) && rhs.rfind("foundry_rt::half_to_float", 0) != 0 &&
      rhs.rfind("foundry_rt::bfloat16_to_float", 0) != 0)
    value = round(t, rhs);
  const std::string line = "const " + compute_type(t) + " " + value_name(v) + " = " + value + ";";
  if (!invariant) {
    emit(line);
    return v;
  }
  scopes_.top().hoisted.push_back(line);
  scopes_.top().hoisted_values.insert(v.id);
  return v;
}

Val CppScalarOps::load(const ir::Buffer& buf, const Expr& index) {
  if (scopes_.lane_vectors && scopes_.lane_vectors->inside(scopes_.top().serial) && buf.dtype == DType::Float32)
    if (std::optional<std::string> lane = scopes_.lane_vectors->load(scopes_, scopes_.ptr(buf), index))
      return def(buf.dtype, *lane, false);
  RowRegisters* rows = scopes_.rows && scopes_.rows->inside(scopes_.top().serial) ? scopes_.rows : nullptr;
  if (rows)
    if (std::optional<std::string> held = rows->held(scopes_.ptr(buf), index)) return def(buf.dtype, *held, false);
  std::string access = scopes_.ptr(buf) + "[" + scopes_.idx(index) + "]";
  if (buf.dtype == DType::Float16) access = "foundry_rt::half_to_float(" + access + ")";
  if (buf.dtype == DType::BFloat16) access = "foundry_rt::bfloat16_to_float(" + access + ")";
  Val v = def(buf.dtype, access, false, !rows && scopes_.invariant({}, {&index}, &buf));
  if (rows) {
    std::string keep = rows->hold(scopes_.ptr(buf), index, compute_type(buf.dtype), value_name(v));
    if (!keep.empty()) emit(keep);
  }
  return v;
}

void CppScalarOps::store(const ir::Buffer& buf, const Expr& index, Val v, ir::StoreMode mode) {
  if (scopes_.lane_vectors && scopes_.lane_vectors->inside(scopes_.top().serial) && buf.dtype == DType::Float32 &&
      mode == ir::StoreMode::Set)
    if (std::optional<std::string> lane = scopes_.lane_vectors->store(scopes_, scopes_.ptr(buf), index))
      return emit(*lane + " = " + value_name(v) + ";");
  if (scopes_.rows) {
    scopes_.rows->forget(scopes_.ptr(buf));
    // A float32 value stored is what a later loop reads back (16-bit ones are rounded first).
    if (scopes_.rows->inside(scopes_.top().serial) && mode == ir::StoreMode::Set && !is_half(buf.dtype)) {
      std::string keep = scopes_.rows->hold(scopes_.ptr(buf), index, compute_type(buf.dtype), value_name(v));
      if (!keep.empty()) emit(keep);
    }
  }
  std::string target = scopes_.ptr(buf) + "[" + scopes_.idx(index) + "]";
  std::string value = encode(buf.dtype, value_name(v));
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
}

Val CppScalarOps::constant(const ir::Scalar& s) { return def(s.dtype, literal(s), false, scopes_.invariant({})); }

Val CppScalarOps::index_expr(const Expr& e, DType t) {
  Val v = def(t, "static_cast<" + compute_type(t) + ">(" + scopes_.idx(e) + ")", false, scopes_.invariant({}, {&e}));
  if (t == DType::Int64) index_values_[v.id] = e;
  return v;
}

Val CppScalarOps::to_dtype(Val v, DType t) { return def(t, convert(v, t), true, scopes_.invariant({v})); }

// foundry_special.h is host code (its tables are host arrays): no CUDA form yet.
void CppScalarOps::check_device_form(const std::string& expr, std::string_view op) const {
  if (dialect_ == Dialect::Cuda && expr.find("foundry_rt::special::") != std::string::npos)
    throw UserError("the special function " + std::string(op) + " is not supported with --device cuda yet");
}

Val CppScalarOps::unary(UnaryOp op, Val x) {
  std::string e = unary_expr(op, x);
  check_device_form(e, ir::op_name(op));
  return def(ir::returns_bool(op) ? DType::Bool : x.dtype, e, true, scopes_.invariant({x}));
}

Val CppScalarOps::binary(BinaryOp op, Val a, Val b) {
  // A comparison of index expressions decided in the loop's piece (piece_split.h).
  auto ia = index_values_.find(a.id), ib = index_values_.find(b.id);
  if (ir::returns_bool(op) && ia != index_values_.end() && ib != index_values_.end())
    if (auto known = scopes_.decided(op, ia->second - ib->second)) {
      Val v = def(DType::Bool, *known ? "true" : "false", false, scopes_.invariant({a, b}));
      known_bools_[v.id] = *known;
      return v;
    }
  // Integer division and remainder report division by zero (foundry_rt::fail).
  bool divides = op == BinaryOp::Div || op == BinaryOp::FloorDiv || op == BinaryOp::Mod || op == BinaryOp::Fmod;
  scopes_.may_fail = scopes_.may_fail || (divides && !is_floating(a.dtype));
  if (dialect_ == Dialect::Cuda && divides && !is_floating(a.dtype))
    emit("if (" + value_name(b) + " == 0) foundry_cuda::report(error_flag, foundry_rt::kIntegerDivisionByZero);");
  std::string e = binary_expr(op, a, b);
  check_device_form(e, ir::op_name(op));
  const bool invariant = scopes_.invariant({a, b});
  scopes_.top().fails = scopes_.top().fails || (divides && !is_floating(a.dtype) && !invariant);
  return def(ir::returns_bool(op) ? DType::Bool : a.dtype, e, true, invariant);
}

Val CppScalarOps::where(Val c, Val a, Val b) {
  if (auto known = known_bools_.find(c.id); known != known_bools_.end())  // decided in the loop's piece
    return def(a.dtype, value_name(known->second ? a : b), false, scopes_.invariant({c, a, b}));  // a copy: rounded already, if 16-bit
  if (dialect_ == Dialect::Cpp && is_floating(a.dtype))  // without a branch (foundry_rt::select)
    return def(a.dtype, "foundry_rt::select(" + value_name(c) + ", " + value_name(a) + ", " + value_name(b) + ")", false,
               scopes_.invariant({c, a, b}));
  return def(a.dtype, value_name(c) + " ? " + value_name(a) + " : " + value_name(b), false, scopes_.invariant({c, a, b}));
}

Expr CppScalarOps::indirect(Val v, const Expr& size, ir::NegativeIndex negative) {
  std::string sym = "ind" + std::to_string(indirect_++);
  scopes_.may_fail = true;  // checked_index reports an index out of range
  const std::string fn = negative == ir::NegativeIndex::Wraps ? "checked_index(" : "checked_position(";
  std::string check = dialect_ == Dialect::Cuda ? "foundry_cuda::" + fn + "error_flag, " : "foundry_rt::" + fn;
  const std::string line = "const int64_t " + sym + " = " + check + "static_cast<int64_t>(" + value_name(v) + "), " + scopes_.idx(size) + ");";
  Scope& scope = scopes_.top();
  if (scopes_.invariant({v}, {&size})) {
    scope.hoisted.push_back(line);
    scope.hoisted_symbols.insert(sym);
  } else {
    emit(line);
    scope.fails = true;
    if (scope.hoists) scope.varying.insert(sym);
  }
  scopes_.set_extent(sym, size);  // checked_index keeps it in [0, size)
  return Expr::sym(sym);
}

Val CppScalarOps::reduction(ReduceOp op, Val v) {
  std::string acc = "acc" + std::to_string(accumulators_++);
  DType out = ir::reduce_result_dtype(op, v.dtype);
  bool fl = is_floating(v.dtype);
  std::string vt = compute_type(v.dtype), x = value_name(v);
  // float32 sums and products accumulate in double: well within tolerance of PyTorch's
  // cascade sums, and deterministic.
  std::string acc_type = (fl && (op == ReduceOp::Sum || op == ReduceOp::Prod)) ? "double" : vt;
  Scope& scope = scopes_.top();
  scope.accumulators.push_back({acc, acc_type, op});
  switch (op) {
    case ReduceOp::Sum:
      scope.pre.push_back(acc_type + " " + acc + " = 0;");
      scope.lines.push_back(acc + " += " + x + ";");
      break;
    case ReduceOp::Prod:
      scope.pre.push_back(acc_type + " " + acc + " = 1;");
      scope.lines.push_back(acc + " *= " + x + ";");
      break;
    case ReduceOp::Max: case ReduceOp::Min: {
      bool mx = op == ReduceOp::Max;
      std::string init = fl ? std::string(mx ? "-" : "") + "INFINITY"
                            : "std::numeric_limits<" + vt + ">::" + (mx ? "lowest()" : "max()");
      if (v.dtype == DType::Bool) init = mx ? "false" : "true";
      scope.pre.push_back(vt + " " + acc + " = " + init + ";");
      std::string fn = fl ? (mx ? "maximum" : "minimum") : (mx ? "max_int" : "min_int");
      scope.lines.push_back(acc + " = foundry_rt::" + fn + "(" + acc + ", " + x + ");");
      break;
    }
    case ReduceOp::ArgMax: case ReduceOp::ArgMin: {
      bool mx = op == ReduceOp::ArgMax;
      scope.pre.push_back(vt + " " + acc + "_value = 0;");
      scope.pre.push_back("int64_t " + acc + " = 0;");
      scope.pre.push_back("bool " + acc + "_seen = false;");
      std::string better = std::string(mx ? " > " : " < ");
      std::string cond = fl ? "!" + acc + "_seen || (!(" + acc + "_value != " + acc + "_value) && (" + x + " != " + x +
                                  " || " + x + better + acc + "_value))"
                            : "!" + acc + "_seen || " + x + better + acc + "_value";
      scope.lines.push_back("if (" + cond + ") { " + acc + "_value = " + x + "; " + acc + " = " +
                            reduction_position() + "; " + acc + "_seen = true; }");
      break;
    }
    case ReduceOp::Any:
      scope.pre.push_back("bool " + acc + " = false;");
      scope.lines.push_back(acc + " = " + acc + " || (" + x + " != 0);");
      break;
  }
  std::string result = acc;
  if (acc_type != compute_type(out)) result = "static_cast<" + compute_type(out) + ">(" + acc + ")";
  Val r{next_++, out};
  scopes_.defined_in[r.id] = scopes_.enclosing_serial();  // after the loop, in the enclosing scope
  scope.post.push_back("const " + compute_type(out) + " " + value_name(r) + " = " + round(out, result) + ";");
  return r;
}

void CppScalarOps::store_reduction(const ir::Buffer& buf, const Expr& index, Val v) {
  if (scopes_.rows) scopes_.rows->forget(scopes_.ptr(buf));
  scopes_.top().post.push_back(scopes_.ptr(buf) + "[" + scopes_.idx(index) + "] = " + encode(buf.dtype, value_name(v)) + ";");
}

// The flattened position in the current reduction loop (for argmax/argmin).
std::string CppScalarOps::reduction_position() {
  const Scope& s = scopes_.top();
  ir::Index vars;
  for (const auto& v : s.vars) vars.push_back(Expr::sym(v));
  return scopes_.idx(ir::ravel_index(vars, s.ranges));
}

}  // namespace foundry::codegen
