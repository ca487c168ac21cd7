#include "foundry/ir/ops.h"

#include <cmath>

namespace foundry::ir {

Scalar Scalar::of(double v, DType t) {
  Scalar s;
  s.dtype = t;
  if (is_floating(t)) {
    s.f = v;
  } else if (t == DType::Bool) {
    s.i = v != 0;
  } else {
    s.i = static_cast<int64_t>(v);
  }
  return s;
}

#define FOUNDRY_NAME_CASE(name, text) \
  case decltype(op)::name:            \
    return #text;

std::string_view op_name(UnaryOp op) {
  switch (op) { FOUNDRY_UNARY_OPS(FOUNDRY_NAME_CASE) }
  return "?";
}

std::string_view op_name(BinaryOp op) {
  switch (op) { FOUNDRY_BINARY_OPS(FOUNDRY_NAME_CASE) }
  return "?";
}
#undef FOUNDRY_NAME_CASE

std::string_view op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::ArgMax: return "argmax";
    case ReduceOp::ArgMin: return "argmin";
    case ReduceOp::Any: return "any";
  }
  return "?";
}

std::string_view op_name(StoreMode mode) {
  switch (mode) {
    case StoreMode::Set: return "set";
    case StoreMode::Add: return "add";
    case StoreMode::Mul: return "mul";
    case StoreMode::Max: return "max";
    case StoreMode::Min: return "min";
  }
  return "?";
}

bool returns_bool(BinaryOp op) {
  switch (op) {
    case BinaryOp::LogicalAnd: case BinaryOp::LogicalOr: case BinaryOp::LogicalXor:
    case BinaryOp::Eq: case BinaryOp::Ne: case BinaryOp::Lt: case BinaryOp::Le:
    case BinaryOp::Gt: case BinaryOp::Ge:
      return true;
    default:
      return false;
  }
}

bool returns_bool(UnaryOp op) {
  return op == UnaryOp::LogicalNot || op == UnaryOp::IsNan || op == UnaryOp::IsInf || op == UnaryOp::SignBit;
}

DType reduce_result_dtype(ReduceOp op, DType input) {
  switch (op) {
    case ReduceOp::ArgMax: case ReduceOp::ArgMin: return DType::Int64;
    case ReduceOp::Any: return DType::Bool;
    default: return input;
  }
}

}  // namespace foundry::ir
