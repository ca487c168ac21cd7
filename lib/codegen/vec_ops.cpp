#include "codegen/vec_ops.h"

namespace foundry::codegen {

using ir::BinaryOp;
using ir::UnaryOp;

namespace {
std::string call(const char* fn, const std::string& x) { return std::string("foundry_vec::") + fn + "(" + x + ")"; }
std::string call(const char* fn, const std::string& a, const std::string& b) {
  return std::string("foundry_vec::") + fn + "(" + a + ", " + b + ")";
}
}  // namespace

const char* infix_operator(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "+";
    case BinaryOp::Sub: return "-";
    case BinaryOp::Mul: return "*";
    case BinaryOp::Div: return "/";
    case BinaryOp::Eq: return "==";
    case BinaryOp::Ne: return "!=";
    case BinaryOp::Lt: return "<";
    case BinaryOp::Le: return "<=";
    case BinaryOp::Gt: return ">";
    case BinaryOp::Ge: return ">=";
    default: return nullptr;
  }
}

const char* compare_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Eq: return "Eq";
    case BinaryOp::Ne: return "Ne";
    case BinaryOp::Lt: return "Lt";
    case BinaryOp::Le: return "Le";
    case BinaryOp::Gt: return "Gt";
    case BinaryOp::Ge: return "Ge";
    default: return nullptr;
  }
}

namespace {
// 16-bit floats are float32 lanes in vector form, rounded where each value is defined (the
// vector handler's def), so their operations have float32's forms.
bool is_float_lanes(DType t) { return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16; }
}  // namespace

bool has_vector_form(DType t) { return is_float_lanes(t) || t == DType::Bool; }

std::string vector_type(DType t) { return t == DType::Bool ? "foundry_vec::Mask" : "foundry_vec::VecF"; }

std::string vector_splat(DType t, const std::string& scalar) {
  return t == DType::Bool ? call("splat_mask", scalar) : call("splat", scalar);
}

std::optional<std::string> vector_unary(UnaryOp op, DType t, const std::string& x) {
  if (t == DType::Bool) {
    if (op == UnaryOp::LogicalNot || op == UnaryOp::BitwiseNot) return call("logical_not", x);
    return std::nullopt;
  }
  if (!is_float_lanes(t)) return std::nullopt;
  switch (op) {
    case UnaryOp::Neg: return "-" + x;
    case UnaryOp::Rsqrt: return "foundry_vec::splat(1.0f) / " + call("sqrt", x);
    case UnaryOp::Reciprocal: return "foundry_vec::splat(1.0f) / " + x;
    case UnaryOp::Round: return call("nearbyint", x);
    case UnaryOp::BitwiseNot: case UnaryOp::LogicalNot: case UnaryOp::SignBit: return std::nullopt;
#define FOUNDRY_SCALAR_ONLY(name, text) case UnaryOp::name:
      FOUNDRY_SPECIAL_UNARY_OPS(FOUNDRY_SCALAR_ONLY) return std::nullopt;  // no vector forms: scalar loops
#undef FOUNDRY_SCALAR_ONLY
#define FOUNDRY_SAME_NAME(name, text) case UnaryOp::name: return call(#text, x);
      FOUNDRY_SAME_NAME(Abs, abs) FOUNDRY_SAME_NAME(Exp, exp) FOUNDRY_SAME_NAME(Exp2, exp2)
      FOUNDRY_SAME_NAME(Expm1, expm1) FOUNDRY_SAME_NAME(Log, log) FOUNDRY_SAME_NAME(Log2, log2)
      FOUNDRY_SAME_NAME(Log10, log10) FOUNDRY_SAME_NAME(Log1p, log1p) FOUNDRY_SAME_NAME(Sqrt, sqrt)
      FOUNDRY_SAME_NAME(Sin, sin) FOUNDRY_SAME_NAME(Cos, cos) FOUNDRY_SAME_NAME(Tan, tan)
      FOUNDRY_SAME_NAME(Asin, asin) FOUNDRY_SAME_NAME(Acos, acos) FOUNDRY_SAME_NAME(Atan, atan)
      FOUNDRY_SAME_NAME(Sinh, sinh) FOUNDRY_SAME_NAME(Cosh, cosh) FOUNDRY_SAME_NAME(Tanh, tanh)
      FOUNDRY_SAME_NAME(Asinh, asinh) FOUNDRY_SAME_NAME(Acosh, acosh) FOUNDRY_SAME_NAME(Atanh, atanh)
      FOUNDRY_SAME_NAME(Erf, erf) FOUNDRY_SAME_NAME(Erfc, erfc) FOUNDRY_SAME_NAME(Sigmoid, sigmoid)
      FOUNDRY_SAME_NAME(Floor, floor) FOUNDRY_SAME_NAME(Ceil, ceil) FOUNDRY_SAME_NAME(Trunc, trunc)
      FOUNDRY_SAME_NAME(Sign, sign) FOUNDRY_SAME_NAME(IsNan, isnan) FOUNDRY_SAME_NAME(IsInf, isinf)
#undef FOUNDRY_SAME_NAME
  }
  return std::nullopt;
}

std::optional<std::string> vector_binary(BinaryOp op, DType t, const std::string& a, const std::string& b) {
  if (t == DType::Bool) {
    switch (op) {
      case BinaryOp::BitAnd: case BinaryOp::LogicalAnd: return a + " & " + b;
      case BinaryOp::BitOr: case BinaryOp::LogicalOr: return a + " | " + b;
      case BinaryOp::BitXor: case BinaryOp::LogicalXor: case BinaryOp::Ne: return a + " ^ " + b;
      case BinaryOp::Eq: return "~(" + a + " ^ " + b + ")";
      default: return std::nullopt;
    }
  }
  if (!is_float_lanes(t)) return std::nullopt;
  if (const char* infix = infix_operator(op)) return a + " " + infix + " " + b;
  switch (op) {
    case BinaryOp::Fmod: return call("fmod", a, b);
    case BinaryOp::Pow: return call("pow", a, b);
    case BinaryOp::Atan2: return call("atan2", a, b);
    case BinaryOp::Hypot: return call("hypot", a, b);
    case BinaryOp::Copysign: return call("copysign", a, b);
    case BinaryOp::Maximum: return call("maximum", a, b);
    case BinaryOp::Minimum: return call("minimum", a, b);
    case BinaryOp::Fmax: return call("fmax", a, b);
    case BinaryOp::Fmin: return call("fmin", a, b);
    default: return std::nullopt;  // Python's floor division and modulo stay scalar
  }
}

std::optional<std::string> vector_convert(DType from, DType to, const std::string& x) {
  if (from == to && has_vector_form(to)) return x;
  if (is_float_lanes(from) && is_float_lanes(to)) return x;  // a narrower type is rounded by def
  if (from == DType::Bool && is_float_lanes(to)) return call("to_float", x);
  if (is_float_lanes(from) && to == DType::Bool) return call("nonzero", x);
  return std::nullopt;
}

}  // namespace foundry::codegen
