// The abstract `Ops` interface that loop bodies are written against (define-by-run, as in
// TorchInductor). A body never inspects values: it calls ops, and the handler decides what a call
// means: record reads and writes, print text, evaluate numbers, or emit C++.
#pragma once
#include <cstdint>
#include <string_view>

#include "foundry/graph/dtype.h"
#include "foundry/ir/expr.h"

namespace foundry::ir {

struct Buffer;

// A handler-defined handle to a value computed inside a body, with its element type.
struct Val {
  int id = -1;
  DType dtype = DType::Float32;
};

// A compile-time constant: `i` holds integer and bool values, `f` floating ones.
struct Scalar {
  DType dtype = DType::Float32;
  int64_t i = 0;
  double f = 0;
  static Scalar of(double v, DType t);  // converts v into t's representation
  double as_double() const { return is_floating(dtype) ? f : static_cast<double>(i); }
};

// Special functions: `text` is also the name of their scalar implementation in
// foundry_rt::special (runtime/foundry_special.h), which the evaluator and the kernels call.
#define FOUNDRY_SPECIAL_UNARY_OPS(X)                                                           \
  X(Lgamma, lgamma) X(Digamma, digamma) X(Erfinv, erfinv) X(Erfcx, erfcx) X(Ndtri, ndtri)      \
  X(BesselJ0, bessel_j0) X(BesselJ1, bessel_j1) X(BesselY0, bessel_y0) X(BesselY1, bessel_y1)  \
  X(BesselI0, bessel_i0) X(BesselI0e, bessel_i0e) X(BesselI1, bessel_i1)                       \
  X(BesselI1e, bessel_i1e) X(BesselK0, bessel_k0) X(BesselK0e, bessel_k0e)                     \
  X(BesselK1, bessel_k1) X(BesselK1e, bessel_k1e) X(SphericalBesselJ0, spherical_bessel_j0)    \
  X(AiryAi, airy_ai)
// Polygamma(n, x); the polynomials take (x, n), n truncated to an integer as in PyTorch.
#define FOUNDRY_SPECIAL_BINARY_OPS(X)                                                          \
  X(Polygamma, polygamma) X(Zeta, zeta) X(Igamma, igamma) X(Igammac, igammac)                  \
  X(ChebyshevT, chebyshev_t) X(ChebyshevU, chebyshev_u) X(ChebyshevV, chebyshev_v)             \
  X(ChebyshevW, chebyshev_w) X(ShiftedChebyshevT, shifted_chebyshev_t)                         \
  X(ShiftedChebyshevU, shifted_chebyshev_u) X(ShiftedChebyshevV, shifted_chebyshev_v)          \
  X(ShiftedChebyshevW, shifted_chebyshev_w) X(HermiteH, hermite_h) X(HermiteHe, hermite_he)    \
  X(LaguerreL, laguerre_l) X(LegendreP, legendre_p)

#define FOUNDRY_UNARY_OPS(X)                                                                   \
  X(Neg, neg) X(Abs, abs) X(Exp, exp) X(Exp2, exp2) X(Expm1, expm1) X(Log, log) X(Log2, log2) \
  X(Log10, log10) X(Log1p, log1p) X(Sqrt, sqrt) X(Rsqrt, rsqrt) X(Sin, sin) X(Cos, cos)        \
  X(Tan, tan) X(Asin, asin) X(Acos, acos) X(Atan, atan) X(Sinh, sinh) X(Cosh, cosh)            \
  X(Tanh, tanh) X(Asinh, asinh) X(Acosh, acosh) X(Atanh, atanh) X(Erf, erf) X(Erfc, erfc)      \
  X(Sigmoid, sigmoid) X(Floor, floor) X(Ceil, ceil) X(Trunc, trunc) X(Round, round)            \
  X(Reciprocal, reciprocal) X(Sign, sign) X(BitwiseNot, bitwise_not)                           \
  X(LogicalNot, logical_not) X(IsNan, isnan) X(IsInf, isinf) X(SignBit, signbit)            \
  FOUNDRY_SPECIAL_UNARY_OPS(X)

// Binary ops take two operands of the same dtype. Comparisons and logical ops return bool.
// Div is true division on floats, truncating on integers; FloorDiv and Mod follow Python
// (PyTorch's floor_divide and remainder); Fmod follows C. Maximum/Minimum propagate NaN.
// Nextafter steps in the operands' own precision (float for float32).
#define FOUNDRY_BINARY_OPS(X)                                                                  \
  X(Add, add) X(Sub, sub) X(Mul, mul) X(Div, div) X(FloorDiv, floordiv) X(Mod, mod)            \
  X(Fmod, fmod) X(Pow, pow) X(Atan2, atan2) X(Hypot, hypot) X(Copysign, copysign)              \
  X(Maximum, maximum) X(Minimum, minimum) X(Fmax, fmax) X(Fmin, fmin) X(BitAnd, bitwise_and)   \
  X(BitOr, bitwise_or) X(BitXor, bitwise_xor) X(LogicalAnd, logical_and)                       \
  X(LogicalOr, logical_or) X(LogicalXor, logical_xor) X(Eq, eq) X(Ne, ne) X(Lt, lt) X(Le, le)   \
  X(Gt, gt) X(Ge, ge) X(Nextafter, nextafter) FOUNDRY_SPECIAL_BINARY_OPS(X)

#define FOUNDRY_ENUM_ENTRY(name, text) name,
enum class UnaryOp { FOUNDRY_UNARY_OPS(FOUNDRY_ENUM_ENTRY) };
enum class BinaryOp { FOUNDRY_BINARY_OPS(FOUNDRY_ENUM_ENTRY) };
#undef FOUNDRY_ENUM_ENTRY

// Reductions. ArgMax/ArgMin reduce to the int64 position in the (flattened) reduction range,
// first occurrence wins, NaN counts as the maximum (as in PyTorch). Max/Min propagate NaN.
enum class ReduceOp { Sum, Prod, Max, Min, ArgMax, ArgMin, Any };

// How a store combines with what the buffer holds (scatter ops): Set overwrites.
enum class StoreMode { Set, Add, Mul, Max, Min };
// What a negative index read from data means: it counts from the end (advanced indexing, take,
// index_put: x < 0 ? x + size : x, once), or it is out of range, as for PyTorch's gather, scatter,
// index_select and embedding.
enum class NegativeIndex { Wraps, OutOfRange };

std::string_view op_name(UnaryOp op);
std::string_view op_name(BinaryOp op);
std::string_view op_name(ReduceOp op);
std::string_view op_name(StoreMode mode);
bool returns_bool(BinaryOp op);
bool returns_bool(UnaryOp op);
DType reduce_result_dtype(ReduceOp op, DType input);

class Ops {
 public:
  virtual ~Ops() = default;

  virtual Val load(const Buffer& buf, const Expr& index) = 0;
  virtual void store(const Buffer& buf, const Expr& index, Val value, StoreMode mode) = 0;
  virtual Val constant(const Scalar& value) = 0;
  virtual Val index_expr(const Expr& index, DType dtype) = 0;  // an index as a value
  virtual Val to_dtype(Val value, DType dtype) = 0;
  virtual Val unary(UnaryOp op, Val x) = 0;
  virtual Val binary(BinaryOp op, Val a, Val b) = 0;
  virtual Val where(Val cond, Val a, Val b) = 0;
  // Turns a loaded integer into an index symbol usable in load/store index expressions. One
  // outside [0, size) after `negative` is applied fails the run (the evaluator: a UserError).
  virtual Expr indirect(Val index, const Expr& size, NegativeIndex negative) = 0;
  // Inside a reduction body: combines `value` over the reduction loop; the result may only be
  // passed to store_reduction.
  virtual Val reduction(ReduceOp op, Val value) = 0;
  virtual void store_reduction(const Buffer& buf, const Expr& index, Val value) = 0;

  // Conveniences built on the primitives above.
  Val store_value(Val v) { return v; }
  Val constant(double v, DType t) { return constant(Scalar::of(v, t)); }
  Val cast(Val v, DType t) { return v.dtype == t ? v : to_dtype(v, t); }
  Val add(Val a, Val b) { return binary(BinaryOp::Add, a, b); }
  Val sub(Val a, Val b) { return binary(BinaryOp::Sub, a, b); }
  Val mul(Val a, Val b) { return binary(BinaryOp::Mul, a, b); }
  Val div(Val a, Val b) { return binary(BinaryOp::Div, a, b); }
};

}  // namespace foundry::ir
