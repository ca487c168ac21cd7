// Checks foundry_vec.h against the C library, lane by lane: every math function over a grid of
// inputs and special values (reference: the double-precision function rounded to float), within
// the documented error (SLEEF's u10/u35 variants: 1.0/3.5 ULP; glibc's erff) plus half an ULP;
// and the operations with PyTorch semantics (NaN propagation, signed zeros, halfway rounding)
// against their scalar definitions. Compiled and run by test_simd.cpp at several -march levels;
// exits 1 and prints the first mismatches on failure.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <functional>
#include <vector>

#include "foundry_vec.h"

namespace {

using foundry_vec::kLanes;
using foundry_vec::VecF;
int failures = 0;
long checked = 0;

std::vector<float> grid() {
  std::vector<float> xs = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX,
                           0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 1.0f, -1.0f, 88.7f, -103.0f, 1e-30f};
  for (int i = -400; i <= 400; ++i) xs.push_back(i / 40.0f);                      // [-10, 10]
  for (int e = -30; e <= 30; ++e) xs.insert(xs.end(), {std::ldexp(1.3f, e), -std::ldexp(1.7f, e)});
  while (xs.size() % kLanes) xs.push_back(0.25f);
  return xs;
}

// How far `got` may be from the correctly rounded `want`, in units of the last place of `want`.
// One lane calls the C library's float functions: glibc documents up to 2 ULP for some of them.
bool close(float got, double want_d, double ulps) {
  if (kLanes == 1 && ulps > 0) ulps = std::max(ulps, 2.5);
  float want = static_cast<float>(want_d);
  if (std::isnan(want)) return std::isnan(got);
  if (got == want) return true;
  if (std::isinf(want) || want == 0.0f || ulps == 0) return false;
  double ulp = static_cast<double>(std::nextafter(std::fabs(want), FLT_MAX)) - std::fabs(want);
  if (ulp == 0) ulp = std::fabs(want) - static_cast<double>(std::nextafter(std::fabs(want), 0.0f));
  return std::fabs(got - want_d) <= ulps * ulp;
}

void report(const char* what, float a, float b, float got, double want) {
  if (++failures <= 40) std::printf("%s(%.9g, %.9g): got %.9g, want %.9g\n", what, a, b, got, want);
}

void unary(const char* name, VecF (*vec)(VecF), double (*ref)(double), double ulps) {
  std::vector<float> xs = grid();
  for (size_t i = 0; i < xs.size(); i += kLanes) {
    VecF r = vec(foundry_vec::load(&xs[i]));
    for (int l = 0; l < kLanes; ++l, ++checked)
      if (!close(r[l], ref(xs[i + l]), ulps)) report(name, xs[i + l], 0, r[l], ref(xs[i + l]));
  }
}

void binary(const char* name, VecF (*vec)(VecF, VecF), double (*ref)(double, double), double ulps) {
  std::vector<float> xs = grid();
  for (size_t j = 0; j < xs.size(); j += 7) {
    VecF b = foundry_vec::splat(xs[j]);
    for (size_t i = 0; i < xs.size(); i += kLanes) {
      VecF r = vec(foundry_vec::load(&xs[i]), b);
      for (int l = 0; l < kLanes; ++l, ++checked)
        if (!close(r[l], ref(xs[i + l], xs[j]), ulps)) report(name, xs[i + l], xs[j], r[l], ref(xs[i + l], xs[j]));
    }
  }
}

// Exact operations: the vector result equals the scalar definition bit for bit (NaN for NaN);
// without `zero_sign`, +0 and -0 count as equal (C leaves fmax(-0, +0)'s sign to the library).
void exact(const char* name, const std::function<VecF(VecF, VecF)>& vec, const std::function<float(float, float)>& ref,
           bool zero_sign = true) {
  std::vector<float> xs = grid();
  for (size_t j = 0; j < xs.size(); j += 5) {
    for (size_t i = 0; i < xs.size(); i += kLanes) {
      VecF r = vec(foundry_vec::load(&xs[i]), foundry_vec::splat(xs[j]));
      for (int l = 0; l < kLanes; ++l, ++checked) {
        float want = ref(xs[i + l], xs[j]);
        bool same = std::isnan(want) ? std::isnan(r[l])
                                     : (r[l] == want && (!zero_sign || std::signbit(r[l]) == std::signbit(want)));
        if (!same) report(name, xs[i + l], xs[j], r[l], want);
      }
    }
  }
}

template <typename T>
T scalar_maximum(T a, T b) { return a != a ? a : b != b ? b : (a > b ? a : b); }
template <typename T>
T scalar_minimum(T a, T b) { return a != a ? a : b != b ? b : (a < b ? a : b); }

void reductions() {
  std::vector<float> xs = grid();
  xs.erase(xs.begin(), xs.begin() + 9);  // no infinities, NaN or huge values: a finite sum
  while (xs.size() % kLanes) xs.push_back(1.0f);
  foundry_vec::VecD sum = {};
  VecF mx = foundry_vec::splat(-INFINITY), mn = foundry_vec::splat(INFINITY);
  double want_sum = 0;
  float want_max = -INFINITY, want_min = INFINITY;
  for (size_t i = 0; i < xs.size(); i += kLanes) {
    VecF x = foundry_vec::load(&xs[i]);
    sum += foundry_vec::widen(x);
    mx = foundry_vec::maximum(mx, x);
    mn = foundry_vec::minimum(mn, x);
  }
  for (float x : xs) want_sum += x, want_max = std::max(want_max, x), want_min = std::min(want_min, x);
  ++checked;
  if (std::fabs(foundry_vec::sum(sum) - want_sum) > 1e-9 * std::fabs(want_sum) + 1e-9) report("sum", 0, 0, foundry_vec::sum(sum), want_sum);
  if (foundry_vec::max(mx) != want_max) report("max", 0, 0, foundry_vec::max(mx), want_max);
  if (foundry_vec::min(mn) != want_min) report("min", 0, 0, foundry_vec::min(mn), want_min);
  VecF with_nan = foundry_vec::splat(1.0f);
  with_nan[kLanes - 1] = NAN;
  if (!std::isnan(foundry_vec::max(with_nan)) || !std::isnan(foundry_vec::min(with_nan))) report("max/min of NaN", 0, 0, 0, NAN);
}

// x rounded to a float type with `bits` significant bits, nearest even, whose subnormals are
// spaced `min_spacing` apart and whose largest finite value is `max_finite` (beyond: infinity):
// computed in double from the definition, independently of the bit tricks and instructions.
float rounded_reference(float x, int bits, double min_spacing, double max_finite) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  int e;
  std::frexp(static_cast<double>(x), &e);  // |x| in [2^(e-1), 2^e)
  const double spacing = std::max(std::ldexp(1.0, e - bits), min_spacing);
  const double r = std::nearbyint(x / spacing) * spacing;
  return std::fabs(r) > max_finite ? std::copysign(INFINITY, x) : static_cast<float>(r);
}

bool same_float(float a, float b) { return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b)); }

// float16 and bfloat16: every bit pattern loaded, and rounding (round_*, store_* then load_*) of
// the grid, every 16-bit value and its neighbours, and pseudo-random bit patterns.
void sixteen_bit() {
  struct Type {
    const char* name;
    VecF (*load)(const uint16_t*);
    void (*store)(uint16_t*, VecF);
    VecF (*round)(VecF);
    int bits;
    double min_spacing, max_finite;
  };
  const Type types[] = {{"float16", foundry_vec::load_half, foundry_vec::store_half, foundry_vec::round_half, 11,
                         std::ldexp(1.0, -24), 65504.0},
                        {"bfloat16", foundry_vec::load_bfloat16, foundry_vec::store_bfloat16, foundry_vec::round_bfloat16,
                         8, std::ldexp(1.0, -133), 3.3895313892515355e38}};
  for (const Type& t : types) {
    std::vector<float> xs = grid();
    uint16_t patterns[kLanes];
    for (uint32_t base = 0; base < 65536; base += kLanes) {
      for (int l = 0; l < kLanes; ++l) patterns[l] = static_cast<uint16_t>(base + l);
      VecF v = t.load(patterns);
      for (int l = 0; l < kLanes; ++l) {
        ++checked;
        // A loaded value is exactly representable: rounding it changes nothing.
        if (!same_float(rounded_reference(v[l], t.bits, t.min_spacing, t.max_finite), v[l]))
          report(t.name, v[l], 0, v[l], rounded_reference(v[l], t.bits, t.min_spacing, t.max_finite));
        if (std::isfinite(v[l])) xs.insert(xs.end(), {std::nextafter(v[l], INFINITY), std::nextafter(v[l], -INFINITY), v[l]});
      }
    }
    uint32_t state = 12345;
    for (int i = 0; i < 200000; ++i) {
      state = state * 1664525u + 1013904223u;
      float f;
      std::memcpy(&f, &state, 4);
      xs.push_back(f);
    }
    while (xs.size() % kLanes) xs.push_back(0.25f);
    for (size_t i = 0; i < xs.size(); i += kLanes) {
      VecF x = foundry_vec::load(&xs[i]), r = t.round(x);
      uint16_t stored[kLanes];
      t.store(stored, x);
      VecF back = t.load(stored);
      for (int l = 0; l < kLanes; ++l) {
        ++checked;
        float want = rounded_reference(xs[i + l], t.bits, t.min_spacing, t.max_finite);
        if (!same_float(r[l], want)) report(t.name, xs[i + l], 0, r[l], want);
        if (!same_float(back[l], want)) report(t.name, xs[i + l], 1, back[l], want);
      }
    }
  }
}

}  // namespace

// index_compare: every comparison of base + step * lane with 0, against int64 arithmetic, for
// bases and steps around the 32-bit lanes' clamp (2^30) and step limit (2^20), and far beyond.
void index_compares() {
  using foundry_vec::Compare;
  const int64_t big[] = {0, 1, 2, 15, 16, 17, (int64_t{1} << 20) - 1, int64_t{1} << 20, (int64_t{1} << 27) + 1,
                         (int64_t{1} << 30) - 5,
                         int64_t{1} << 30, (int64_t{1} << 31) + 3, int64_t{1} << 40, INT64_MAX / 4};
  std::vector<int64_t> values;
  for (int64_t v : big) values.insert(values.end(), {v, -v});
  for (Compare c : {Compare::Eq, Compare::Ne, Compare::Lt, Compare::Le, Compare::Gt, Compare::Ge})
    for (int64_t base : values)
      for (int64_t step : values) {
        if (step > int64_t{1} << 40 || step < -(int64_t{1} << 40)) continue;  // base + step * lane stays in int64
        const foundry_vec::Mask m = foundry_vec::index_compare(base, step, c);
        for (int l = 0; l < kLanes; ++l, ++checked) {
          const int64_t v = base + step * l;
          const bool want = c == Compare::Eq ? v == 0 : c == Compare::Ne ? v != 0 : c == Compare::Lt ? v < 0
                          : c == Compare::Le ? v <= 0 : c == Compare::Gt ? v > 0 : v >= 0;
          if ((m[l] == -1) != want || (m[l] != 0 && m[l] != -1))
            if (++failures <= 40)
              std::printf("index_compare(%lld, %lld, %d) lane %d: got %d\n", static_cast<long long>(base),
                          static_cast<long long>(step), static_cast<int>(c), l, m[l]);
        }
      }
}

int main() {
  unary("exp", foundry_vec::exp, ::exp, 1.5);
  unary("exp2", foundry_vec::exp2, ::exp2, 4.0);
  unary("expm1", foundry_vec::expm1, ::expm1, 1.5);
  unary("log", foundry_vec::log, ::log, 4.0);
  unary("log2", foundry_vec::log2, ::log2, 4.0);
  unary("log10", foundry_vec::log10, ::log10, 1.5);
  unary("log1p", foundry_vec::log1p, ::log1p, 1.5);
  unary("sqrt", foundry_vec::sqrt, ::sqrt, 1.0);
  unary("sin", foundry_vec::sin, ::sin, 4.0);
  unary("cos", foundry_vec::cos, ::cos, 4.0);
  unary("tan", foundry_vec::tan, ::tan, 4.0);
  unary("asin", foundry_vec::asin, ::asin, 4.0);
  unary("acos", foundry_vec::acos, ::acos, 4.0);
  unary("atan", foundry_vec::atan, ::atan, 4.0);
  unary("sinh", foundry_vec::sinh, ::sinh, 1.5);
  unary("cosh", foundry_vec::cosh, ::cosh, 1.5);
  unary("tanh", foundry_vec::tanh, ::tanh, 4.0);
  unary("asinh", foundry_vec::asinh, ::asinh, 1.5);
  unary("acosh", foundry_vec::acosh, ::acosh, 1.5);
  unary("atanh", foundry_vec::atanh, ::atanh, 1.5);
  unary("erf", foundry_vec::erf, ::erf, 4.0);
  unary("erfc", foundry_vec::erfc, ::erfc, 2.0);
  unary("floor", foundry_vec::floor, ::floor, 0);
  unary("ceil", foundry_vec::ceil, ::ceil, 0);
  unary("trunc", foundry_vec::trunc, ::trunc, 0);
  unary("nearbyint", foundry_vec::nearbyint, ::nearbyint, 0);
  unary("sigmoid", foundry_vec::sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, 3.0);
  binary("pow", foundry_vec::pow, ::pow, 1.5);
  binary("atan2", foundry_vec::atan2, ::atan2, 4.0);
  binary("hypot", foundry_vec::hypot, ::hypot, 4.0);
  binary("fmod", foundry_vec::fmod, ::fmod, 0);
  exact("maximum", foundry_vec::maximum, scalar_maximum<float>);
  exact("minimum", foundry_vec::minimum, scalar_minimum<float>);
  exact("fmax", foundry_vec::fmax, [](float a, float b) { return std::fmax(a, b); }, false);
  exact("fmin", foundry_vec::fmin, [](float a, float b) { return std::fmin(a, b); }, false);
  exact("copysign", foundry_vec::copysign, [](float a, float b) { return std::copysign(a, b); });
  exact("abs", [](VecF a, VecF) { return foundry_vec::abs(a); }, [](float a, float) { return std::fabs(a); });
  exact("sign", [](VecF a, VecF) { return foundry_vec::sign(a); },
        [](float a, float) { return float((0.0f < a) - (a < 0.0f)); });  // torch.sign: NaN gives 0
  exact("select(a < b)", [](VecF a, VecF b) { return foundry_vec::select(a < b, a, b); },
        [](float a, float b) { return a < b ? a : b; });
  exact("isinf", [](VecF a, VecF) { return foundry_vec::to_float(foundry_vec::isinf(a)); },
        [](float a, float) { return std::isinf(a) ? 1.0f : 0.0f; });
  exact("isnan", [](VecF a, VecF) { return foundry_vec::to_float(foundry_vec::isnan(a)); },
        [](float a, float) { return std::isnan(a) ? 1.0f : 0.0f; });
  exact("nonzero", [](VecF a, VecF) { return foundry_vec::to_float(foundry_vec::nonzero(a)); },
        [](float a, float) { return a != 0 ? 1.0f : 0.0f; });
  reductions();
  sixteen_bit();
  index_compares();
  std::printf("%d lanes: %ld values checked, %d mismatches\n", kLanes, checked, failures);
  return failures == 0 ? 0 : 1;
}
