#include "foundry/runtime/compare.h"

#include <cmath>
#include <cstring>
#include <sstream>

namespace foundry {

Tolerance Tolerance::for_dtype(DType t) {
  switch (t) {
    case DType::Float64: return {1e-7, 1e-7};
    // torch.testing.assert_close's defaults: one rounding of a 16-bit result is already a
    // relative error up to 2^-8 (bfloat16) or 2^-11 (float16).
    case DType::Float16: return {1e-5, 1e-3};
    case DType::BFloat16: return {1e-5, 1.6e-2};
    default: return {1e-4, 1e-4};
  }
}

double element_as_double(const NpyArray& a, int64_t e) {
  const uint8_t* p = a.data.data() + e * dtype_size(a.dtype);
  switch (a.dtype) {
    case DType::Bool: case DType::UInt8: return *p;
    case DType::Int8: return static_cast<int8_t>(*p);
    case DType::Int16: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case DType::Int32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::Int64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DType::Float16: { _Float16 v; std::memcpy(&v, p, 2); return static_cast<double>(v); }
    case DType::BFloat16: {
      uint32_t bits = static_cast<uint32_t>(p[0] | (p[1] << 8)) << 16;
      float v;
      std::memcpy(&v, &bits, 4);
      return v;
    }
    case DType::Float32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::Float64: { double v; std::memcpy(&v, p, 8); return v; }
  }
  return 0;
}

namespace {
bool exact_equal(const NpyArray& out, const NpyArray& ref, int64_t e) {
  size_t n = dtype_size(ref.dtype);
  if (ref.dtype == DType::Bool) return (out.data[e] != 0) == (ref.data[e] != 0);
  return std::memcmp(out.data.data() + e * n, ref.data.data() + e * n, n) == 0;
}
}  // namespace

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

std::vector<int64_t> unravel_position(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

std::string worst_element_text(const Comparison& c, const std::vector<int64_t>& shape) {
  if (c.worst < 0) return "";
  std::ostringstream text;
  text.precision(3);
  text << "worst element " << shape_text(unravel_position(c.worst, shape)) << ": |out - ref| " << c.worst_err
       << ", allowed there " << c.worst_allowed;
  return text.str();
}

namespace {
// How far |out - ref| = err is along its bound `allowed`: above 1 is outside the tolerance.
double share_of_bound(double err, double allowed) {
  if (allowed > 0) return err / allowed;
  return err > 0 ? INFINITY : 0;
}

// "12 of 80 elements outside the tolerance, first [0, 5]: got 1.5, expected 1", and the worst
// element when it is outside too.
std::string mismatch_message(const Comparison& c, const NpyArray& out, const NpyArray& ref) {
  std::ostringstream msg;
  msg.precision(9);
  msg << c.mismatches << " of " << ref.numel() << " elements "
      << (is_floating(ref.dtype) ? "outside the tolerance" : "differ") << ", first "
      << shape_text(unravel_position(c.first_mismatch, ref.shape)) << ": got "
      << element_as_double(out, c.first_mismatch) << ", expected " << element_as_double(ref, c.first_mismatch);
  if (c.worst >= 0 && c.worst_err > c.worst_allowed) msg << "; " << worst_element_text(c, ref.shape);
  return msg.str();
}
}  // namespace

Comparison compare_arrays(const NpyArray& out, const NpyArray& ref, std::optional<Tolerance> tol) {
  Comparison c;
  if (out.dtype != ref.dtype) {
    c.message = "dtype " + std::string(dtype_name(out.dtype)) + ", expected " + std::string(dtype_name(ref.dtype));
    return c;
  }
  if (out.shape != ref.shape) {
    c.message = "shape " + shape_text(out.shape) + ", expected " + shape_text(ref.shape);
    return c;
  }
  c.elements_compared = true;
  Tolerance t = tol.value_or(Tolerance::for_dtype(ref.dtype));
  bool floating = is_floating(ref.dtype);
  double worst_share = -1;
  for (int64_t e = 0; e < ref.numel(); ++e) {
    double o = element_as_double(out, e), r = element_as_double(ref, e);
    bool ok;
    if (!floating) {
      ok = exact_equal(out, ref, e);
    } else if (std::isnan(r) || std::isnan(o)) {
      ok = std::isnan(r) && std::isnan(o);
    } else if (std::isinf(r) || std::isinf(o)) {
      ok = o == r;
    } else {
      double err = std::fabs(o - r), allowed = t.atol + t.rtol * std::fabs(r);
      c.max_abs_err = std::max(c.max_abs_err, err);
      if (r != 0) c.max_rel_err = std::max(c.max_rel_err, err / std::fabs(r));
      ok = err <= allowed;
      if (share_of_bound(err, allowed) > worst_share) {
        worst_share = share_of_bound(err, allowed);
        c.worst = e;
        c.worst_err = err;
        c.worst_allowed = allowed;
      }
    }
    if (!floating && !ok) c.max_abs_err = std::max(c.max_abs_err, std::fabs(o - r));
    if (!ok && c.mismatches++ == 0) c.first_mismatch = e;
  }
  c.pass = c.mismatches == 0;
  if (!c.pass) c.message = mismatch_message(c, out, ref);
  return c;
}

std::string comparison_summary(const Comparison& c, const NpyArray& ref) {
  if (!c.pass) return c.message;
  if (c.worst >= 0 && c.worst_err > 0) return worst_element_text(c, ref.shape);
  return "all " + std::to_string(ref.numel()) + " elements equal";
}

}  // namespace foundry
