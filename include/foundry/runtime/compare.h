// Compares a computed tensor with a reference, with PyTorch-style tolerances: element-wise
// |out - ref| <= atol + rtol*|ref|; infinities must match exactly; NaN only where the reference
// has NaN; integer and bool outputs exact.
#pragma once
#include <optional>
#include <string>

#include "foundry/runtime/npy.h"

namespace foundry {

struct Tolerance {
  double atol = 1e-4;
  double rtol = 1e-4;
  // atol/rtol: float32 1e-4/1e-4, float64 1e-7/1e-7, and PyTorch's assert_close defaults for
  // float16 1e-5/1e-3 and bfloat16 1e-5/1.6e-2.
  static Tolerance for_dtype(DType t);
};

struct Comparison {
  bool pass = false;
  bool elements_compared = false;  // false when the dtypes or the shapes differ: no error was measured
  double max_abs_err = 0;
  double max_rel_err = 0;
  int64_t mismatches = 0;
  std::string message;  // the first problem found, empty when passing
  int64_t first_mismatch = -1;  // the C-order position of the first differing element; -1 if none or dtype/shape differ
  // The finite floating element with the largest |out - ref| / (atol + rtol*|ref|): the one nearest
  // to, or furthest past, its bound. The largest relative error alone misleads: it may pass through
  // atol. -1 when there is none (integer and bool arrays, which must be equal).
  int64_t worst = -1;
  double worst_err = 0;      // |out - ref| there
  double worst_allowed = 0;  // atol + rtol*|ref| there
};

// `tol` defaults to Tolerance::for_dtype(ref.dtype).
Comparison compare_arrays(const NpyArray& out, const NpyArray& ref, std::optional<Tolerance> tol = std::nullopt);

// Element e of an array as a double (for messages and comparisons).
double element_as_double(const NpyArray& a, int64_t e);

// "[2, 3]": a shape or an element's index, for messages.
std::string shape_text(const std::vector<int64_t>& s);

// The index of the element at C-order position `flat` of an array of `shape`.
std::vector<int64_t> unravel_position(int64_t flat, const std::vector<int64_t>& shape);

// "worst element [3, 7]: |out - ref| 3.1e-05, allowed there 0.00012": c.worst of an array of
// `shape`; "" when c has none.
std::string worst_element_text(const Comparison& c, const std::vector<int64_t>& shape);

// What follows "PASS: " or "FAIL: " for c, a comparison with `ref`: when passing, the worst element
// against its bound ("all N elements equal" when every error is 0); when failing, the problem (a
// shape or dtype that differs, with no error to measure, or the elements outside the tolerance).
std::string comparison_summary(const Comparison& c, const NpyArray& ref);

}  // namespace foundry
