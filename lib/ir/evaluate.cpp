#include "foundry/ir/evaluate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "foundry/runtime/foundry_kernel_support.h"
#include "foundry/runtime/foundry_lapack.h"
#include "foundry/runtime/foundry_sort.h"
#include "foundry/runtime/foundry_special.h"
#include "foundry/support/error.h"

namespace foundry::ir {
namespace {

// One element: floating types live in `f` (rounded to their precision after every operation),
// integers and bools in `i` (wrapped to their width).
struct Elem {
  double f = 0;
  int64_t i = 0;
};

float bf16_round(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if (std::isnan(x)) return x;
  bits += 0x7fff + ((bits >> 16) & 1);  // round to nearest even on the upper 16 bits
  bits &= 0xffff0000u;
  std::memcpy(&x, &bits, 4);
  return x;
}

double round_float(DType t, double x) {
  switch (t) {
    case DType::Float32: return static_cast<float>(x);
    case DType::Float16: return static_cast<double>(static_cast<_Float16>(x));
    case DType::BFloat16: return bf16_round(static_cast<float>(x));
    default: return x;
  }
}

int64_t wrap_int(DType t, int64_t v) {
  switch (t) {
    case DType::Bool: return v != 0;
    case DType::UInt8: return static_cast<uint8_t>(v);
    case DType::Int8: return static_cast<int8_t>(v);
    case DType::Int16: return static_cast<int16_t>(v);
    case DType::Int32: return static_cast<int32_t>(v);
    default: return v;
  }
}

Elem make(DType t, double f) { return Elem{round_float(t, f), 0}; }
Elem make_int(DType t, int64_t i) { return Elem{0, wrap_int(t, i)}; }
double as_double(DType t, const Elem& e) { return is_floating(t) ? e.f : static_cast<double>(e.i); }
bool truthy(DType t, const Elem& e) { return is_floating(t) ? e.f != 0 : e.i != 0; }

// Float to integer as x86 does it: NaN and out-of-range values become the minimum int64.
int64_t float_to_int(double x) {
  if (std::isnan(x) || x >= 9.2233720368547758e18 || x < -9.2233720368547758e18)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(x);
}

Elem convert(DType from, DType to, const Elem& e) {
  if (to == DType::Bool) return Elem{0, truthy(from, e) ? 1 : 0};
  if (is_floating(to)) return make(to, as_double(from, e));
  if (is_floating(from)) {
    // Narrow integer targets go through int64 first, as C++ conversions in ATen kernels do.
    return make_int(to, float_to_int(e.f));
  }
  return make_int(to, e.i);
}

Elem decode(DType t, const uint8_t* p) {
  switch (t) {
    case DType::Bool: return {0, *p != 0};
    case DType::UInt8: return {0, *p};
    case DType::Int8: return {0, static_cast<int8_t>(*p)};
    case DType::Int16: { int16_t v; std::memcpy(&v, p, 2); return {0, v}; }
    case DType::Int32: { int32_t v; std::memcpy(&v, p, 4); return {0, v}; }
    case DType::Int64: { int64_t v; std::memcpy(&v, p, 8); return {0, v}; }
    case DType::Float16: { _Float16 v; std::memcpy(&v, p, 2); return {static_cast<double>(v), 0}; }
    case DType::BFloat16: {
      uint32_t bits = static_cast<uint32_t>(p[0] | (p[1] << 8)) << 16;
      float v;
      std::memcpy(&v, &bits, 4);
      return {v, 0};
    }
    case DType::Float32: { float v; std::memcpy(&v, p, 4); return {v, 0}; }
    case DType::Float64: { double v; std::memcpy(&v, p, 8); return {v, 0}; }
  }
  return {};
}

void encode(DType t, const Elem& e, uint8_t* p) {
  switch (t) {
    case DType::Bool: case DType::UInt8: case DType::Int8: { uint8_t v = static_cast<uint8_t>(e.i); *p = v; return; }
    case DType::Int16: { int16_t v = static_cast<int16_t>(e.i); std::memcpy(p, &v, 2); return; }
    case DType::Int32: { int32_t v = static_cast<int32_t>(e.i); std::memcpy(p, &v, 4); return; }
    case DType::Int64: std::memcpy(p, &e.i, 8); return;
    case DType::Float16: { _Float16 v = static_cast<_Float16>(e.f); std::memcpy(p, &v, 2); return; }
    case DType::BFloat16: {
      float v = bf16_round(static_cast<float>(e.f));
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      uint16_t hi = static_cast<uint16_t>(bits >> 16);
      std::memcpy(p, &hi, 2);
      return;
    }
    case DType::Float32: { float v = static_cast<float>(e.f); std::memcpy(p, &v, 4); return; }
    case DType::Float64: std::memcpy(p, &e.f, 8); return;
  }
}

// --- scalar semantics of each op (PyTorch's CPU kernels) -------------------------------------

double float_unary(UnaryOp op, double x) {
  switch (op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Abs: return std::fabs(x);
    case UnaryOp::Exp: return std::exp(x);
    case UnaryOp::Exp2: return std::exp2(x);
    case UnaryOp::Expm1: return std::expm1(x);
    case UnaryOp::Log: return std::log(x);
    case UnaryOp::Log2: return std::log2(x);
    case UnaryOp::Log10: return std::log10(x);
    case UnaryOp::Log1p: return std::log1p(x);
    case UnaryOp::Sqrt: return std::sqrt(x);
    case UnaryOp::Rsqrt: return 1.0 / std::sqrt(x);
    case UnaryOp::Sin: return std::sin(x);
    case UnaryOp::Cos: return std::cos(x);
    case UnaryOp::Tan: return std::tan(x);
    case UnaryOp::Asin: return std::asin(x);
    case UnaryOp::Acos: return std::acos(x);
    case UnaryOp::Atan: return std::atan(x);
    case UnaryOp::Sinh: return std::sinh(x);
    case UnaryOp::Cosh: return std::cosh(x);
    case UnaryOp::Tanh: return std::tanh(x);
    case UnaryOp::Asinh: return std::asinh(x);
    case UnaryOp::Acosh: return std::acosh(x);
    case UnaryOp::Atanh: return std::atanh(x);
    case UnaryOp::Erf: return std::erf(x);
    case UnaryOp::Erfc: return std::erfc(x);
    case UnaryOp::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case UnaryOp::Floor: return std::floor(x);
    case UnaryOp::Ceil: return std::ceil(x);
    case UnaryOp::Trunc: return std::trunc(x);
    case UnaryOp::Round: return std::nearbyint(x);  // half to even
    case UnaryOp::Reciprocal: return 1.0 / x;
    case UnaryOp::Sign: return static_cast<double>((0 < x) - (x < 0));  // NaN: 0, as torch.sign
#define FOUNDRY_SPECIAL_CASE(name, text) case UnaryOp::name: return foundry_rt::special::text(x);
    FOUNDRY_SPECIAL_UNARY_OPS(FOUNDRY_SPECIAL_CASE)
#undef FOUNDRY_SPECIAL_CASE
    default: throw InternalError("unary op " + std::string(op_name(op)) + " is not defined on floats");
  }
}

int64_t int_unary(UnaryOp op, int64_t x, bool is_bool) {
  switch (op) {
    case UnaryOp::Neg: return static_cast<int64_t>(0ull - static_cast<uint64_t>(x));
    case UnaryOp::Abs: return x < 0 ? static_cast<int64_t>(0ull - static_cast<uint64_t>(x)) : x;
    case UnaryOp::Sign: return (0 < x) - (x < 0);
    case UnaryOp::BitwiseNot: return is_bool ? !x : ~x;
    case UnaryOp::Floor: case UnaryOp::Ceil: case UnaryOp::Trunc: case UnaryOp::Round: return x;
    default: throw InternalError("unary op " + std::string(op_name(op)) + " is not defined on integers");
  }
}

Elem eval_unary(UnaryOp op, DType t, const Elem& x) {
  switch (op) {
    case UnaryOp::LogicalNot: return {0, !truthy(t, x)};
    case UnaryOp::IsNan: return {0, is_floating(t) && std::isnan(x.f)};
    case UnaryOp::IsInf: return {0, is_floating(t) && std::isinf(x.f)};
    case UnaryOp::SignBit: return {0, is_floating(t) ? std::signbit(x.f) : x.i < 0};  // -0.0 and -NaN too
    default: break;
  }
  if (is_floating(t)) return make(t, float_unary(op, x.f));
  return make_int(t, int_unary(op, x.i, t == DType::Bool));
}

double float_binary(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::FloorDiv: return foundry_rt::floordiv_float<double>(a, b);
    case BinaryOp::Mod: return foundry_rt::mod_float<double>(a, b);
    case BinaryOp::Fmod: return std::fmod(a, b);
    case BinaryOp::Pow: return std::pow(a, b);
    case BinaryOp::Atan2: return std::atan2(a, b);
    case BinaryOp::Hypot: return std::hypot(a, b);
    case BinaryOp::Copysign: return std::copysign(a, b);
    case BinaryOp::Maximum: return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b);
    case BinaryOp::Minimum: return std::isnan(a) || std::isnan(b) ? std::nan("") : std::min(a, b);
    case BinaryOp::Fmax: return std::fmax(a, b);
    case BinaryOp::Fmin: return std::fmin(a, b);
#define FOUNDRY_SPECIAL_CASE(name, text) case BinaryOp::name: return foundry_rt::special::text(a, b);
    FOUNDRY_SPECIAL_BINARY_OPS(FOUNDRY_SPECIAL_CASE)
#undef FOUNDRY_SPECIAL_CASE
    default: throw InternalError("binary op " + std::string(op_name(op)) + " is not defined on floats");
  }
}

int64_t int_binary(BinaryOp op, int64_t a, int64_t b) {
  auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  auto check_zero = [&] {
    if (b == 0) throw UserError("integer division by zero");
  };
  switch (op) {
    case BinaryOp::Add: return static_cast<int64_t>(u(a) + u(b));
    case BinaryOp::Sub: return static_cast<int64_t>(u(a) - u(b));
    case BinaryOp::Mul: return static_cast<int64_t>(u(a) * u(b));
    case BinaryOp::Div: check_zero(); return b == -1 ? static_cast<int64_t>(0ull - u(a)) : a / b;
    case BinaryOp::FloorDiv: {
      check_zero();
      if (b == -1) return static_cast<int64_t>(0ull - u(a));
      int64_t q = a / b;
      if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
      return q;
    }
    case BinaryOp::Mod: {
      check_zero();
      if (b == -1) return 0;
      int64_t m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) m += b;
      return m;
    }
    case BinaryOp::Fmod: check_zero(); return b == -1 ? 0 : a % b;
    case BinaryOp::Pow: return foundry_rt::pow_int<int64_t>(a, b);
    case BinaryOp::Maximum: case BinaryOp::Fmax: return std::max(a, b);
    case BinaryOp::Minimum: case BinaryOp::Fmin: return std::min(a, b);
    case BinaryOp::BitAnd: return a & b;
    case BinaryOp::BitOr: return a | b;
    case BinaryOp::BitXor: return a ^ b;
    case BinaryOp::Copysign: return (b < 0) ? -std::llabs(a) : std::llabs(a);
    default: throw InternalError("binary op " + std::string(op_name(op)) + " is not defined on integers");
  }
}

bool compare(BinaryOp op, DType t, const Elem& a, const Elem& b) {
  if (is_floating(t)) {
    switch (op) {
      case BinaryOp::Eq: return a.f == b.f;
      case BinaryOp::Ne: return a.f != b.f;
      case BinaryOp::Lt: return a.f < b.f;
      case BinaryOp::Le: return a.f <= b.f;
      case BinaryOp::Gt: return a.f > b.f;
      default: return a.f >= b.f;
    }
  }
  switch (op) {
    case BinaryOp::Eq: return a.i == b.i;
    case BinaryOp::Ne: return a.i != b.i;
    case BinaryOp::Lt: return a.i < b.i;
    case BinaryOp::Le: return a.i <= b.i;
    case BinaryOp::Gt: return a.i > b.i;
    default: return a.i >= b.i;
  }
}

Elem eval_binary(BinaryOp op, DType t, const Elem& a, const Elem& b) {
  switch (op) {
    case BinaryOp::LogicalAnd: return {0, truthy(t, a) && truthy(t, b)};
    case BinaryOp::LogicalOr: return {0, truthy(t, a) || truthy(t, b)};
    case BinaryOp::LogicalXor: return {0, truthy(t, a) != truthy(t, b)};
    case BinaryOp::Eq: case BinaryOp::Ne: case BinaryOp::Lt: case BinaryOp::Le:
    case BinaryOp::Gt: case BinaryOp::Ge:
      return {0, compare(op, t, a, b)};
    default: break;
  }
  if (op == BinaryOp::Nextafter && t == DType::Float32)
    return make(t, std::nextafter(static_cast<float>(a.f), static_cast<float>(b.f)));
  if (op == BinaryOp::Nextafter && t == DType::Float64) return make(t, std::nextafter(a.f, b.f));
  if (is_floating(t)) return make(t, float_binary(op, a.f, b.f));
  return make_int(t, int_binary(op, a.i, b.i));
}

// --- reductions --------------------------------------------------------------------------------

struct Accumulator {
  ReduceOp op;
  DType in;
  double f = 0;   // sums and products of floats accumulate in double
  int64_t i = 0;
  bool has = false;
  int64_t best_pos = 0;
  double best = 0;
  int64_t best_i = 0;

  void add(const Elem& v, int64_t pos) {
    bool fl = is_floating(in);
    switch (op) {
      case ReduceOp::Sum:
        if (fl) f += v.f; else i = static_cast<int64_t>(static_cast<uint64_t>(i) + static_cast<uint64_t>(v.i));
        break;
      case ReduceOp::Prod:
        if (!has) { f = 1; i = 1; }
        if (fl) f *= v.f; else i = static_cast<int64_t>(static_cast<uint64_t>(i) * static_cast<uint64_t>(v.i));
        break;
      case ReduceOp::Max: case ReduceOp::Min: {
        bool is_max = op == ReduceOp::Max;
        if (fl) {
          if (!has || std::isnan(v.f) || (!std::isnan(f) && (is_max ? v.f > f : v.f < f))) f = v.f;
        } else if (!has || (is_max ? v.i > i : v.i < i)) {
          i = v.i;
        }
        break;
      }
      case ReduceOp::ArgMax: case ReduceOp::ArgMin: {
        bool is_max = op == ReduceOp::ArgMax;
        bool better;
        if (fl) {
          bool best_nan = has && std::isnan(best);
          better = !has || (!best_nan && (std::isnan(v.f) || (is_max ? v.f > best : v.f < best)));
          if (better) best = v.f;
        } else {
          better = !has || (is_max ? v.i > best_i : v.i < best_i);
          if (better) best_i = v.i;
        }
        if (better) best_pos = pos;
        break;
      }
      case ReduceOp::Any:
        i = i || truthy(in, v);
        break;
    }
    has = true;
  }

  Elem result() const {
    DType out = reduce_result_dtype(op, in);
    switch (op) {
      case ReduceOp::ArgMax: case ReduceOp::ArgMin: return {0, best_pos};
      case ReduceOp::Any: return {0, i};
      case ReduceOp::Prod:
        if (!has) return is_floating(in) ? make(out, 1.0) : make_int(out, 1);
        [[fallthrough]];
      default:
        if (op == ReduceOp::Max || op == ReduceOp::Min) {
          // An empty max/min has no identity; PyTorch rejects it, so the lowering never asks.
        }
        return is_floating(in) ? make(out, f) : make_int(out, i);
    }
  }
};

// --- the evaluating handler -----------------------------------------------------------------

struct Storage {
  DType dtype;
  std::vector<Elem> elems;
};

class EvalOps final : public Ops {
 public:
  explicit EvalOps(std::unordered_map<const Buffer*, Storage>& memory) : memory_(memory) {}

  void begin_point() { vals_.clear(); }
  void begin_reduction(ReduceOp op) { acc_.reset(); reduce_op_ = op; }
  void set_reduction_position(int64_t pos) { reduction_pos_ = pos; }
  void finish_reduction() {
    if (!pending_store_buf_) return;
    write(*pending_store_buf_, pending_store_index_, acc_->result(), StoreMode::Set);
    pending_store_buf_ = nullptr;
  }

  Val load(const Buffer& buf, const Expr& index) override {
    Storage& s = storage(buf);
    int64_t pos = position(buf, index, s);
    return push(buf.dtype, s.elems[pos]);
  }
  void store(const Buffer& buf, const Expr& index, Val v, StoreMode mode) override {
    FOUNDRY_CHECK(v.dtype == buf.dtype, "store of " + std::string(dtype_name(v.dtype)) + " into " + buf.name);
    write(buf, index, vals_[v.id], mode);
  }
  Val constant(const Scalar& s) override {
    return push(s.dtype, is_floating(s.dtype) ? make(s.dtype, s.f) : make_int(s.dtype, s.i));
  }
  Val index_expr(const Expr& e, DType t) override {
    FOUNDRY_CHECK(e.is_const(), "index_expr not constant during evaluation: " + to_string(e));
    return push(t, convert(DType::Int64, t, Elem{0, e.const_value()}));
  }
  Val to_dtype(Val v, DType t) override { return push(t, convert(v.dtype, t, vals_[v.id])); }
  Val unary(UnaryOp op, Val x) override {
    return push(returns_bool(op) ? DType::Bool : x.dtype, eval_unary(op, x.dtype, vals_[x.id]));
  }
  Val binary(BinaryOp op, Val a, Val b) override {
    FOUNDRY_CHECK(a.dtype == b.dtype, "binary " + std::string(op_name(op)) + " on " +
                                          std::string(dtype_name(a.dtype)) + " and " + std::string(dtype_name(b.dtype)));
    return push(returns_bool(op) ? DType::Bool : a.dtype, eval_binary(op, a.dtype, vals_[a.id], vals_[b.id]));
  }
  Val where(Val c, Val a, Val b) override {
    FOUNDRY_CHECK(a.dtype == b.dtype, "where on different dtypes");
    return push(a.dtype, truthy(c.dtype, vals_[c.id]) ? vals_[a.id] : vals_[b.id]);
  }
  Expr indirect(Val v, const Expr& size, NegativeIndex negative) override {
    FOUNDRY_CHECK(size.is_const(), "indirect size not constant during evaluation");
    int64_t i = vals_[v.id].i, n = size.const_value();
    if (i < 0 && negative == NegativeIndex::Wraps) i += n;
    if (i < 0 || i >= n)
      throw UserError("index " + std::to_string(vals_[v.id].i) + " is out of bounds for size " + std::to_string(n));
    return Expr(i);
  }
  Val reduction(ReduceOp op, Val v) override {
    if (!acc_) acc_ = Accumulator{op, v.dtype};
    acc_->add(vals_[v.id], reduction_pos_);
    return push(reduce_result_dtype(op, v.dtype), Elem{});
  }
  void store_reduction(const Buffer& buf, const Expr& index, Val) override {
    pending_store_buf_ = &buf;
    pending_store_index_ = index;
  }

  // Whether a reduction over an empty range produced nothing: its identity is stored instead.
  bool reduction_seen() const { return acc_.has_value(); }

 private:
  std::unordered_map<const Buffer*, Storage>& memory_;
  std::vector<Elem> vals_;
  std::vector<DType> types_;
  std::optional<Accumulator> acc_;
  ReduceOp reduce_op_ = ReduceOp::Sum;
  int64_t reduction_pos_ = 0;
  const Buffer* pending_store_buf_ = nullptr;
  Expr pending_store_index_;

  Val push(DType t, Elem e) {
    vals_.push_back(e);
    return Val{static_cast<int>(vals_.size() - 1), t};
  }
  Storage& storage(const Buffer& buf) {
    auto it = memory_.find(&buf);
    FOUNDRY_CHECK(it != memory_.end(), "buffer " + buf.name + " read before it was written");
    return it->second;
  }
  int64_t position(const Buffer& buf, const Expr& index, const Storage& s) {
    FOUNDRY_CHECK(index.is_const(), "index not constant during evaluation: " + to_string(index));
    int64_t pos = index.const_value();
    FOUNDRY_CHECK(pos >= 0 && pos < static_cast<int64_t>(s.elems.size()),
                  "access to " + buf.name + " at " + std::to_string(pos) + " is out of bounds");
    return pos;
  }
  void write(const Buffer& buf, const Expr& index, const Elem& v, StoreMode mode) {
    Storage& s = storage(buf);
    Elem& dst = s.elems[position(buf, index, s)];
    switch (mode) {
      case StoreMode::Set: dst = v; break;
      case StoreMode::Add: dst = eval_binary(BinaryOp::Add, buf.dtype, dst, v); break;
      case StoreMode::Mul: dst = eval_binary(BinaryOp::Mul, buf.dtype, dst, v); break;
      case StoreMode::Max: dst = eval_binary(BinaryOp::Maximum, buf.dtype, dst, v); break;
      case StoreMode::Min: dst = eval_binary(BinaryOp::Minimum, buf.dtype, dst, v); break;
    }
  }

 public:
  // Called when a reduction range is empty: the body never ran, store the identity.
  void store_empty_reduction(const LoopNode& node, const Index& idx, DType in_dtype) {
    Accumulator acc{node.reduce_op, in_dtype};
    Expr index = node.output->linear_index(idx);
    write(*node.output, index, acc.result(), StoreMode::Set);
  }
};

std::vector<int64_t> const_sizes(const Index& sizes, const std::string& what) {
  std::vector<int64_t> out;
  for (const Expr& e : sizes) {
    if (!e.is_const()) throw UserError("the reference evaluator needs static sizes (" + what + ")");
    out.push_back(e.const_value());
  }
  return out;
}

// Calls f(point) for every point of the box `extents` in row-major order.
template <typename F>
void for_each_point(const std::vector<int64_t>& extents, F&& f) {
  for (int64_t e : extents)
    if (e == 0) return;
  std::vector<int64_t> point(extents.size(), 0);
  while (true) {
    f(point);
    size_t d = extents.size();
    while (d > 0) {
      --d;
      if (++point[d] < extents[d]) break;
      point[d] = 0;
      if (d == 0) return;
    }
    if (extents.empty()) return;
  }
}

Index to_index(const std::vector<int64_t>& point) { return Index(point.begin(), point.end()); }

void run_loops(const LoopNode& node, EvalOps& ops) {
  std::vector<int64_t> outer = const_sizes(node.ranges, "ranges of node" + std::to_string(node.id));
  if (node.kind == NodeKind::Pointwise) {
    for_each_point(outer, [&](const std::vector<int64_t>& p) {
      ops.begin_point();
      node.body(ops, to_index(p), {});
    });
    return;
  }
  std::vector<int64_t> inner = const_sizes(node.reduction_ranges, "reduction ranges");
  for_each_point(outer, [&](const std::vector<int64_t>& p) {
    Index idx = to_index(p);
    ops.begin_reduction(node.reduce_op);
    int64_t pos = 0;
    for_each_point(inner, [&](const std::vector<int64_t>& r) {
      ops.begin_point();
      ops.set_reduction_position(pos++);
      node.body(ops, idx, to_index(r));
    });
    if (ops.reduction_seen()) {
      ops.finish_reduction();
    } else {
      // Empty reduction range: the identity of sum/prod/any; the input dtype is the output's.
      ops.store_empty_reduction(node, idx, node.output->dtype);
    }
  });
}

// --- extern kernels as plain loops --------------------------------------------------------------

// An extern operand with its (static) sizes, strides and offset as numbers.
struct StaticOperand {
  const Buffer* buffer = nullptr;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
};

StaticOperand static_operand(const Operand& op) {
  StaticOperand s{op.buffer, const_sizes(op.sizes, "extern operand sizes"),
                  const_sizes(op.strides, "extern operand strides"), 0};
  s.offset = const_sizes({op.offset}, "extern operand offset")[0];
  return s;
}

double operand_at(const std::unordered_map<const Buffer*, Storage>& memory, const StaticOperand& op,
                  const std::vector<int64_t>& idx) {
  int64_t pos = op.offset;
  for (size_t d = 0; d < idx.size(); ++d) pos += idx[d] * op.strides[d];
  const Storage& s = memory.at(op.buffer);
  return as_double(s.dtype, s.elems.at(pos));
}

void run_matmul(const Matmul& call, Storage& out, const std::unordered_map<const Buffer*, Storage>& memory,
                const std::vector<int64_t>& out_sizes) {
  // mm: [M,K]x[K,N]; bmm: [B,M,K]x[B,K,N]; addmm: beta*bias + alpha*(mat1 x mat2).
  const bool batched = call.batched, has_bias = call.bias.has_value();
  const StaticOperand a = static_operand(call.a);
  const StaticOperand b = static_operand(call.b);
  const StaticOperand bias = has_bias ? static_operand(*call.bias) : StaticOperand{};
  int64_t B = batched ? out_sizes[0] : 1, M = out_sizes[batched], N = out_sizes[batched + 1];
  int64_t K = a.sizes.back();
  const double alpha = call.alpha, beta = call.beta;
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          double x = batched ? operand_at(memory, a, {bi, m, k}) : operand_at(memory, a, {m, k});
          double y = batched ? operand_at(memory, b, {bi, k, n}) : operand_at(memory, b, {k, n});
          acc += x * y;
        }
        double v = alpha * acc;
        if (has_bias) {
          std::vector<int64_t> bidx;
          // The bias is broadcast to [M, N] by the lowering (sizes given per output dim).
          bidx = {m, n};
          v += beta * operand_at(memory, bias, bidx);
        }
        out.elems[(bi * M + m) * N + n] = make(out.dtype, v);
      }
}

// A transposed convolution by its definition: every input element, times every kernel element,
// added at output position i*stride - padding + k*dilation (where that lies in the output).
void run_transposed_convolution(const Convolution& call, Storage& out,
                                const std::unordered_map<const Buffer*, Storage>& memory,
                                const std::vector<int64_t>& out_sizes) {
  const StaticOperand x = static_operand(call.input);
  const StaticOperand w = static_operand(call.weight);  // [Cin, Cout/groups, kernel...]
  size_t spatial = x.sizes.size() - 2;
  int64_t N = out_sizes[0], Cout = out_sizes[1], Cin = x.sizes[1];
  int64_t cin_g = Cin / call.groups, cout_g = Cout / call.groups;
  std::vector<int64_t> out_sp(out_sizes.begin() + 2, out_sizes.end());
  std::vector<int64_t> k_sp(w.sizes.begin() + 2, w.sizes.end());
  std::vector<int64_t> in_sp(x.sizes.begin() + 2, x.sizes.end());
  std::vector<double> acc(out.elems.size(), 0.0);
  // The output position of (input position i, kernel position k), flattened; -1 outside.
  auto out_pos = [&](int64_t n, int64_t co, const std::vector<int64_t>& i, const std::vector<int64_t>& k) {
    int64_t pos = n * Cout + co;
    for (size_t d = 0; d < spatial; ++d) {
      int64_t o = i[d] * call.stride[d] - call.padding[d] + k[d] * call.dilation[d];
      if (o < 0 || o >= out_sp[d]) return int64_t{-1};
      pos = pos * out_sp[d] + o;
    }
    return pos;
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < Cin; ++c)
      for_each_point(in_sp, [&](const std::vector<int64_t>& i) {
        std::vector<int64_t> xi = {n, c};
        xi.insert(xi.end(), i.begin(), i.end());
        double xv = operand_at(memory, x, xi);
        for (int64_t co = 0; co < cout_g; ++co)
          for_each_point(k_sp, [&](const std::vector<int64_t>& k) {
            int64_t pos = out_pos(n, (c / cin_g) * cout_g + co, i, k);
            if (pos < 0) return;
            std::vector<int64_t> wi = {c, co};
            wi.insert(wi.end(), k.begin(), k.end());
            acc[pos] += xv * operand_at(memory, w, wi);
          });
      });
  if (call.bias) {
    const StaticOperand bias = static_operand(*call.bias);
    int64_t per_channel = static_cast<int64_t>(acc.size()) / (N * Cout);
    for (size_t e = 0; e < acc.size(); ++e)
      acc[e] += operand_at(memory, bias, {static_cast<int64_t>(e) / per_channel % Cout});
  }
  for (size_t e = 0; e < acc.size(); ++e) out.elems[e] = make(out.dtype, acc[e]);
}

void run_convolution(const Convolution& call, Storage& out, const std::unordered_map<const Buffer*, Storage>& memory,
                     const std::vector<int64_t>& out_sizes) {
  if (call.transposed) return run_transposed_convolution(call, out, memory, out_sizes);
  const StaticOperand x = static_operand(call.input);
  const StaticOperand w = static_operand(call.weight);
  const StaticOperand bias = call.bias ? static_operand(*call.bias) : StaticOperand{};
  const auto& stride = call.stride;
  const auto& padding = call.padding;
  const auto& dilation = call.dilation;
  const int64_t groups = call.groups;
  size_t spatial = x.sizes.size() - 2;
  int64_t N = out_sizes[0], Cout = out_sizes[1], Cin = x.sizes[1];
  int64_t cin_g = Cin / groups, cout_g = Cout / groups;
  std::vector<int64_t> out_sp(out_sizes.begin() + 2, out_sizes.end());
  std::vector<int64_t> k_sp(w.sizes.begin() + 2, w.sizes.end());
  std::vector<int64_t> in_sp(x.sizes.begin() + 2, x.sizes.end());
  int64_t pos = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < Cout; ++co) {
      int64_t g = co / cout_g;
      for_each_point(out_sp, [&](const std::vector<int64_t>& o) {
        double acc = bias.buffer ? operand_at(memory, bias, {co}) : 0.0;
        for (int64_t ci = 0; ci < cin_g; ++ci)
          for_each_point(k_sp, [&](const std::vector<int64_t>& k) {
            std::vector<int64_t> xi = {n, g * cin_g + ci};
            for (size_t d = 0; d < spatial; ++d) {
              int64_t p = o[d] * stride[d] - padding[d] + k[d] * dilation[d];
              if (p < 0 || p >= in_sp[d]) return;
              xi.push_back(p);
            }
            std::vector<int64_t> wi = {co, ci};
            wi.insert(wi.end(), k.begin(), k.end());
            acc += operand_at(memory, x, xi) * operand_at(memory, w, wi);
          });
        out.elems[pos++] = make(out.dtype, acc);
      });
    }
}

// A LAPACK call: the same runtime routine the generated externs run (foundry_lapack.h), on
// float32 / int32 copies of the operands in logical order.
void run_linalg(const Linalg& call, Storage& out, const std::unordered_map<const Buffer*, Storage>& memory) {
  std::vector<std::vector<float>> floats;
  std::vector<std::vector<int32_t>> ints;
  std::vector<const void*> inputs;
  floats.reserve(call.inputs.size());
  ints.reserve(call.inputs.size());
  for (const Operand& op : call.inputs) {
    const StaticOperand s = static_operand(op);
    const bool integral = op.buffer->dtype == DType::Int32;
    if (integral) ints.emplace_back(); else floats.emplace_back();
    for_each_point(s.sizes, [&](const std::vector<int64_t>& idx) {
      double v = operand_at(memory, s, idx);
      if (integral) ints.back().push_back(static_cast<int32_t>(v)); else floats.back().push_back(static_cast<float>(v));
    });
    inputs.push_back(integral ? static_cast<const void*>(ints.back().data()) : floats.back().data());
  }
  const bool int_out = out.dtype == DType::Int32;
  std::vector<float> fout(int_out ? 0 : out.elems.size());
  std::vector<int32_t> iout(int_out ? out.elems.size() : 0);
  foundry_rt::lapack::Call c{static_cast<foundry_rt::lapack::Routine>(call.op), call.output, call.batch, call.m, call.n,
                             call.k, call.upper, call.trans, call.unit, call.left, call.full_matrices, call.compute_uv};
  foundry_rt::lapack::run(c, inputs.data(), int_out ? static_cast<void*>(iout.data()) : fout.data());
  for (size_t e = 0; e < out.elems.size(); ++e)
    out.elems[e] = int_out ? make_int(out.dtype, iout[e]) : make(out.dtype, fout[e]);
}

// A row sort: the runtime's routine that generated externs run (foundry_sort.h), on the stored
// elements in place, compared as doubles (floats) or int64 (integers and bools): both exact.
void run_sort(const SortRows& call, Storage& out, const std::unordered_map<const Buffer*, Storage>& memory) {
  const StaticOperand in = static_operand(call.input);
  const Storage& source = memory.at(in.buffer);
  const int64_t k = const_sizes({call.k}, "sort k")[0];
  foundry_rt::sort::Rows rows{in.sizes.data(), in.strides.data(), static_cast<int>(in.sizes.size()),
                              static_cast<int>(call.dim)};
  std::vector<int64_t> positions(out.elems.size());
  const Elem* data = source.elems.data() + in.offset;
  if (is_floating(source.dtype))
    foundry_rt::sort::sort_rows(data, rows, k, call.descending, [](const Elem& e) { return e.f; }, 1, positions.data());
  else
    foundry_rt::sort::sort_rows(data, rows, k, call.descending, [](const Elem& e) { return e.i; }, 1, positions.data());
  for (size_t e = 0; e < positions.size(); ++e) out.elems[e] = make_int(out.dtype, positions[e]);
}

// Attention by its definition, in double: each row's scores whole, then softmax, then the weighted
// sum of values (generated code runs it in blocks, foundry_attention.h).
void run_attention(const Attention& call, Storage& out, const std::unordered_map<const Buffer*, Storage>& memory,
                   const std::vector<int64_t>& out_sizes) {
  const StaticOperand q = static_operand(call.query), kt = static_operand(call.key_t), v = static_operand(call.value);
  const StaticOperand mask = call.mask ? static_operand(*call.mask) : StaticOperand{};
  const int64_t N = out_sizes[0], L = out_sizes[1], Ev = out_sizes[2], E = q.sizes[2], S = v.sizes[1];
  const size_t batch_rank = call.mask ? mask.sizes.size() - 2 : 0;
  std::vector<double> scores(static_cast<size_t>(S));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < L; ++i) {
      std::vector<int64_t> mask_index(batch_rank + 2);
      for (int64_t rest = n, d = static_cast<int64_t>(batch_rank) - 1; d >= 0; --d) {
        mask_index[d] = rest % mask.sizes[d];
        rest /= mask.sizes[d];
      }
      double top = -INFINITY;
      for (int64_t j = 0; j < S; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < E; ++e) dot += operand_at(memory, q, {n, i, e}) * operand_at(memory, kt, {n, e, j});
        double score = call.scale * dot;
        if (call.mask) {
          mask_index[batch_rank] = i;
          mask_index[batch_rank + 1] = j;
          score += operand_at(memory, mask, mask_index);
        }
        scores[j] = score;
        top = std::isnan(score) || score > top ? score : top;
      }
      double total = 0;
      for (double& x : scores) total += (x = std::exp(x - top));
      const bool all_masked = top == -INFINITY;
      for (int64_t d = 0; d < Ev; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < S; ++j) acc += scores[j] * operand_at(memory, v, {n, j, d});
        double value = all_masked ? (call.masked_rows_zero ? 0.0 : NAN) : acc / total;
        out.elems[(n * L + i) * Ev + d] = make(out.dtype, value);
      }
    }
}

void apply_activation(Activation activation, Storage& out) {
  if (activation == Activation::None) return;
  for (Elem& e : out.elems) e = make(out.dtype, foundry_rt::activated(activation, e.f));
}

// A library call computes its output in order; a buffer laid out otherwise (channels last:
// sched/channels_last.h) takes each element at its own place.
void place_in_layout(const Buffer& buf, Storage& out) {
  if (buf.strides == contiguous_strides(buf.sizes)) return;
  std::vector<Elem> placed(out.elems.size());
  size_t e = 0;
  for_each_point(const_sizes(buf.sizes, buf.name), [&](const std::vector<int64_t>& p) {
    placed.at(static_cast<size_t>(buf.linear_index(to_index(p)).const_value())) = out.elems[e++];
  });
  out.elems = std::move(placed);
}

void run_extern(const LoopNode& node, std::unordered_map<const Buffer*, Storage>& memory) {
  Storage& out = memory.at(node.output);
  std::vector<int64_t> sizes = const_sizes(node.ranges, "extern output");
  std::visit(overloaded{[&](const Matmul& call) { run_matmul(call, out, memory, sizes); },
                        [&](const Convolution& call) { run_convolution(call, out, memory, sizes); },
                        [&](const Linalg& call) { run_linalg(call, out, memory); },
                        [&](const SortRows& call) { run_sort(call, out, memory); },
                        [&](const Attention& call) { run_attention(call, out, memory, sizes); }},
             node.call.op);
  apply_activation(node.call.activation, out);
  place_in_layout(*node.output, out);
}

int64_t static_numel(const Buffer& buf) {
  int64_t n = 1;
  for (int64_t s : const_sizes(buf.sizes, buf.name)) n *= s;
  return n;
}

}  // namespace

std::vector<NpyArray> evaluate_program(const LoopProgram& program, const std::vector<NpyArray>& inputs) {
  return evaluate_program_buffers(program, inputs, program.outputs);
}

std::vector<NpyArray> evaluate_program_buffers(const LoopProgram& program, const std::vector<NpyArray>& inputs,
                                               const std::vector<const Buffer*>& buffers) {
  std::unordered_map<const Buffer*, Storage> memory;
  if (inputs.size() != program.inputs.size())
    throw UserError("expected " + std::to_string(program.inputs.size()) + " inputs, got " +
                    std::to_string(inputs.size()));
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Buffer& buf = *program.inputs[k];
    const NpyArray& in = inputs[k];
    std::vector<int64_t> sizes = const_sizes(buf.sizes, buf.name);
    if (in.dtype != buf.dtype || in.shape != sizes)
      throw UserError("input " + std::to_string(k) + " has the wrong dtype or shape");
    Storage s{buf.dtype, std::vector<Elem>(in.numel())};
    for (int64_t e = 0; e < in.numel(); ++e) s.elems[e] = decode(buf.dtype, in.data.data() + e * dtype_size(buf.dtype));
    memory[&buf] = std::move(s);
  }
  for (const auto& buf : program.buffers) {
    if (buf->kind == BufferKind::Constant) {
      Storage s{buf->dtype, std::vector<Elem>(buf->storage_numel)};
      for (int64_t e = 0; e < buf->storage_numel; ++e)
        s.elems[e] = decode(buf->dtype, buf->data.data + e * dtype_size(buf->dtype));
      memory[buf.get()] = std::move(s);
    } else if (buf->kind == BufferKind::Computed) {
      memory[buf.get()] = Storage{buf->dtype, std::vector<Elem>(static_numel(*buf))};
    }
  }
  EvalOps ops(memory);
  for (const auto& node : program.nodes) {
    if (node->kind == NodeKind::Extern) run_extern(*node, memory);
    else run_loops(*node, ops);
  }
  std::vector<NpyArray> outputs;
  for (const Buffer* buf : buffers) {
    NpyArray arr;
    arr.dtype = buf->dtype;
    arr.shape = const_sizes(buf->sizes, buf->name);
    arr.data.resize(static_cast<size_t>(arr.numel()) * dtype_size(buf->dtype));
    const Storage& s = memory.at(buf);
    int64_t e = 0;
    for_each_point(arr.shape, [&](const std::vector<int64_t>& p) {
      Expr pos = buf->linear_index(to_index(p));
      encode(buf->dtype, s.elems.at(pos.const_value()), arr.data.data() + e++ * dtype_size(buf->dtype));
    });
    if (arr.shape.empty() && arr.numel() == 1 && e == 0) {
      encode(buf->dtype, s.elems.at(buf->linear_index({}).const_value()), arr.data.data());
    }
    outputs.push_back(std::move(arr));
  }
  return outputs;
}

}  // namespace foundry::ir
