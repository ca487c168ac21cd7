// SIMD vectors for generated kernels: float32 values and their masks, one register wide for the
// instruction set the kernels are compiled for (-march: AVX-512, AVX2+FMA, SSE2; one lane
// elsewhere, or with FOUNDRY_VEC_SCALAR defined). Arithmetic and comparisons are the compilers'
// vector extensions; transcendental functions are SLEEF's, the vector math library PyTorch uses
// too, in its faster 3.5-ULP variants where it has them (our tolerance is 1e-4 relative; 3.5 ULP
// is 4e-7), except erf: glibc's vector erff (libmvec) is 3 to 7 times faster than SLEEF's.
// Kernels loop over `kLanes` elements at a time and finish the rest with scalar code.
#ifndef FOUNDRY_VEC_H
#define FOUNDRY_VEC_H
#include <cmath>
#include <cstdint>
#include <cstring>

#include "foundry_kernel_support.h"  // libmvec's vector functions, declared `omp declare simd`

#if defined(FOUNDRY_VEC_SCALAR)  // one lane on any CPU (tests the portable path)
#define FOUNDRY_VEC_LANES 1
#elif defined(__AVX512F__)
#include <immintrin.h>
#include <sleef.h>
#define FOUNDRY_VEC_LANES 16
#define FOUNDRY_SLEEF(fn, ulp) Sleef_##fn##f16_##ulp##avx512f
#define FOUNDRY_SLEEF_EXACT(fn) Sleef_##fn##f16_avx512f
#define FOUNDRY_VEC_REG __m512
#define FOUNDRY_VEC_SQRT _mm512_sqrt_ps
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include <sleef.h>
#define FOUNDRY_VEC_LANES 8
#define FOUNDRY_SLEEF(fn, ulp) Sleef_##fn##f8_##ulp##avx2
#define FOUNDRY_SLEEF_EXACT(fn) Sleef_##fn##f8_avx2
#define FOUNDRY_VEC_REG __m256
#define FOUNDRY_VEC_SQRT _mm256_sqrt_ps
#elif defined(__SSE2__)
#include <immintrin.h>
#include <sleef.h>
#define FOUNDRY_VEC_LANES 4
#define FOUNDRY_SLEEF(fn, ulp) Sleef_##fn##f4_##ulp##sse2
#define FOUNDRY_SLEEF_EXACT(fn) Sleef_##fn##f4_sse2
#define FOUNDRY_VEC_REG __m128
#define FOUNDRY_VEC_SQRT _mm_sqrt_ps
#else
#define FOUNDRY_VEC_LANES 1
#endif

// Vectors wider than a register (VecD under AVX2) only pass between inline functions here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace foundry_vec {

constexpr int kLanes = FOUNDRY_VEC_LANES;
using VecF = float __attribute__((vector_size(4 * kLanes)));
using Mask = int32_t __attribute__((vector_size(4 * kLanes)));  // a lane is -1 (true) or 0
using VecD = double __attribute__((vector_size(8 * kLanes)));    // float sums accumulate in double

// ---- construction, memory --------------------------------------------------------------------
inline VecF splat(float x) {
  VecF r;
  for (int l = 0; l < kLanes; ++l) r[l] = x;
  return r;
}
inline Mask splat_mask(bool b) {
  Mask r;
  for (int l = 0; l < kLanes; ++l) r[l] = b ? -1 : 0;
  return r;
}
inline VecF load(const float* p) {
  VecF r;
  std::memcpy(&r, p, sizeof r);
  return r;
}
inline void store(float* p, VecF v) { std::memcpy(p, &v, sizeof v); }
inline Mask load_bool(const bool* p) {
  Mask r;
  for (int l = 0; l < kLanes; ++l) r[l] = p[l] ? -1 : 0;
  return r;
}
inline void store_bool(bool* p, Mask m) {
  for (int l = 0; l < kLanes; ++l) p[l] = m[l] != 0;
}
// Lanes read one at a time, for positions that are not consecutive: `at(lane)` is the value.
template <typename F>
inline VecF gather(F&& at) {
  VecF r;
  for (int l = 0; l < kLanes; ++l) r[l] = at(l);
  return r;
}
template <typename F>
inline Mask gather_bool(F&& at) {
  Mask r;
  for (int l = 0; l < kLanes; ++l) r[l] = at(l) ? -1 : 0;
  return r;
}
// Lanes written one at a time, in lane order: `at(lane)` is the element to write.
template <typename F>
inline void scatter(VecF v, F&& at) {
  for (int l = 0; l < kLanes; ++l) at(l) = v[l];
}
template <typename F>
inline void scatter_bool(Mask m, F&& at) {
  for (int l = 0; l < kLanes; ++l) at(l) = m[l] != 0;
}
// kLanes rows of kLanes floats, `stride` apart from `p`, transposed: tile[j * kLanes + l] =
// p[l * stride + j]. Each row is read whole (a transposing kernel's strided source).
inline void transpose_tile(const float* p, int64_t stride, float* tile) {
  for (int l = 0; l < kLanes; ++l) {
    VecF row = load(p + l * stride);
    for (int j = 0; j < kLanes; ++j) tile[j * kLanes + l] = row[j];
  }
}
// float(start + step * lane): an index as a value, rounded as the scalar code rounds it.
inline VecF iota(int64_t start, int64_t step) {
  VecF r;
  for (int l = 0; l < kLanes; ++l) r[l] = static_cast<float>(start + step * l);
  return r;
}

// ---- selection, conversion, bits ---------------------------------------------------------------
inline VecF select(Mask m, VecF a, VecF b) { return (VecF)(((Mask)a & m) | ((Mask)b & ~m)); }
inline Mask select(Mask m, Mask a, Mask b) { return (a & m) | (b & ~m); }
inline VecF to_float(Mask m) { return select(m, splat(1.0f), splat(0.0f)); }
inline Mask nonzero(VecF x) { return x != splat(0.0f); }
inline Mask isnan(VecF x) { return x != x; }
inline VecF abs(VecF x) { return (VecF)((Mask)x & 0x7fffffff); }
inline Mask isinf(VecF x) { return abs(x) == splat(INFINITY); }
inline VecF copysign(VecF a, VecF b) {
  return (VecF)(((Mask)a & 0x7fffffff) | ((Mask)b & static_cast<int32_t>(0x80000000u)));
}
inline Mask logical_not(Mask m) { return ~m; }

// ---- PyTorch's float semantics ---------------------------------------------------------------
// maximum/minimum propagate NaN; fmax/fmin ignore it (as std::fmax).
inline VecF maximum(VecF a, VecF b) { return select(isnan(a), a, select(isnan(b), b, select(a > b, a, b))); }
inline VecF minimum(VecF a, VecF b) { return select(isnan(a), a, select(isnan(b), b, select(a < b, a, b))); }
inline VecF fmax(VecF a, VecF b) { return select(isnan(a), b, select(isnan(b), a, select(a > b, a, b))); }
inline VecF fmin(VecF a, VecF b) { return select(isnan(a), b, select(isnan(b), a, select(a < b, a, b))); }
inline VecF sign(VecF x) {
  return select(x > splat(0.0f), splat(1.0f), select(x < splat(0.0f), splat(-1.0f), select(isnan(x), x, splat(0.0f))));
}

// ---- math functions ----------------------------------------------------------------------------
#if FOUNDRY_VEC_LANES > 1
#define FOUNDRY_VEC_UNARY(name, call) \
  inline VecF name(VecF x) { return (VecF)call((FOUNDRY_VEC_REG)x); }
#define FOUNDRY_VEC_BINARY(name, call) \
  inline VecF name(VecF a, VecF b) { return (VecF)call((FOUNDRY_VEC_REG)a, (FOUNDRY_VEC_REG)b); }
FOUNDRY_VEC_UNARY(exp, FOUNDRY_SLEEF(exp, u10))
FOUNDRY_VEC_UNARY(exp2, FOUNDRY_SLEEF(exp2, u35))
FOUNDRY_VEC_UNARY(expm1, FOUNDRY_SLEEF(expm1, u10))
FOUNDRY_VEC_UNARY(log, FOUNDRY_SLEEF(log, u35))
FOUNDRY_VEC_UNARY(log2, FOUNDRY_SLEEF(log2, u35))
FOUNDRY_VEC_UNARY(log10, FOUNDRY_SLEEF(log10, u10))
FOUNDRY_VEC_UNARY(log1p_sleef, FOUNDRY_SLEEF(log1p, u10))
FOUNDRY_VEC_UNARY(sqrt, FOUNDRY_VEC_SQRT)  // the instruction: correctly rounded
FOUNDRY_VEC_UNARY(sin, FOUNDRY_SLEEF(sin, u35))
FOUNDRY_VEC_UNARY(cos, FOUNDRY_SLEEF(cos, u35))
FOUNDRY_VEC_UNARY(tan, FOUNDRY_SLEEF(tan, u35))
FOUNDRY_VEC_UNARY(asin, FOUNDRY_SLEEF(asin, u35))
FOUNDRY_VEC_UNARY(acos, FOUNDRY_SLEEF(acos, u35))
FOUNDRY_VEC_UNARY(atan, FOUNDRY_SLEEF(atan, u35))
FOUNDRY_VEC_UNARY(sinh, FOUNDRY_SLEEF(sinh, u10))  // u35 overflows from 88.7
FOUNDRY_VEC_UNARY(cosh, FOUNDRY_SLEEF(cosh, u10))
FOUNDRY_VEC_UNARY(tanh, FOUNDRY_SLEEF(tanh, u35))
FOUNDRY_VEC_UNARY(asinh_sleef, FOUNDRY_SLEEF(asinh, u10))
FOUNDRY_VEC_UNARY(acosh_sleef, FOUNDRY_SLEEF(acosh, u10))
FOUNDRY_VEC_UNARY(atanh, FOUNDRY_SLEEF(atanh, u10))
#if defined(FOUNDRY_LIBMVEC_ERF)
inline VecF erf(VecF x) {
  float in[kLanes], out[kLanes];
  std::memcpy(in, &x, sizeof x);
#pragma omp simd
  for (int l = 0; l < kLanes; ++l) out[l] = erff(in[l]);
  VecF r;
  std::memcpy(&r, out, sizeof r);
  return r;
}
#else
FOUNDRY_VEC_UNARY(erf, FOUNDRY_SLEEF(erf, u10))
#endif
FOUNDRY_VEC_UNARY(erfc, FOUNDRY_SLEEF(erfc, u15))
FOUNDRY_VEC_UNARY(floor, FOUNDRY_SLEEF_EXACT(floor))
FOUNDRY_VEC_UNARY(ceil, FOUNDRY_SLEEF_EXACT(ceil))
FOUNDRY_VEC_UNARY(trunc, FOUNDRY_SLEEF_EXACT(trunc))
FOUNDRY_VEC_UNARY(nearbyint, FOUNDRY_SLEEF_EXACT(rint))  // halfway cases to even, as torch.round
FOUNDRY_VEC_BINARY(pow, FOUNDRY_SLEEF(pow, u10))
FOUNDRY_VEC_BINARY(atan2, FOUNDRY_SLEEF(atan2, u35))
FOUNDRY_VEC_BINARY(hypot, FOUNDRY_SLEEF(hypot, u35))
#undef FOUNDRY_VEC_UNARY
#undef FOUNDRY_VEC_BINARY
#else  // one lane: the C library
#define FOUNDRY_VEC_UNARY(name) \
  inline VecF name(VecF x) { return splat(std::name(x[0])); }
#define FOUNDRY_VEC_BINARY(name) \
  inline VecF name(VecF a, VecF b) { return splat(std::name(a[0], b[0])); }
FOUNDRY_VEC_UNARY(exp) FOUNDRY_VEC_UNARY(exp2) FOUNDRY_VEC_UNARY(expm1) FOUNDRY_VEC_UNARY(log)
FOUNDRY_VEC_UNARY(log2) FOUNDRY_VEC_UNARY(log10) FOUNDRY_VEC_UNARY(sqrt)
FOUNDRY_VEC_UNARY(sin) FOUNDRY_VEC_UNARY(cos) FOUNDRY_VEC_UNARY(tan) FOUNDRY_VEC_UNARY(asin)
FOUNDRY_VEC_UNARY(acos) FOUNDRY_VEC_UNARY(atan) FOUNDRY_VEC_UNARY(sinh) FOUNDRY_VEC_UNARY(cosh)
FOUNDRY_VEC_UNARY(tanh) FOUNDRY_VEC_UNARY(atanh)
FOUNDRY_VEC_UNARY(erf) FOUNDRY_VEC_UNARY(erfc)
inline VecF log1p_sleef(VecF x) { return splat(std::log1p(x[0])); }
inline VecF asinh_sleef(VecF x) { return splat(std::asinh(x[0])); }
inline VecF acosh_sleef(VecF x) { return splat(std::acosh(x[0])); } FOUNDRY_VEC_UNARY(floor) FOUNDRY_VEC_UNARY(ceil)
FOUNDRY_VEC_UNARY(trunc) FOUNDRY_VEC_UNARY(nearbyint)
FOUNDRY_VEC_BINARY(pow) FOUNDRY_VEC_BINARY(atan2) FOUNDRY_VEC_BINARY(hypot)
#undef FOUNDRY_VEC_UNARY
#undef FOUNDRY_VEC_BINARY
#endif
inline VecF sigmoid(VecF x) { return splat(1.0f) / (splat(1.0f) + exp(-x)); }
// SLEEF's log1p, asinh and acosh overflow to infinity for |x| beyond about 1e38; there
// log1p(x) = log(x) and asinh(x) = acosh(x) = log(2x) to float precision.
inline VecF log1p(VecF x) { return select(x > splat(1e30f), log(x), log1p_sleef(x)); }
inline VecF asinh(VecF x) {
  VecF big = copysign(log(abs(x)) + splat(0.693147181f), x);
  return select(abs(x) > splat(1e30f), big, asinh_sleef(x));
}
inline VecF acosh(VecF x) { return select(x > splat(1e30f), log(x) + splat(0.693147181f), acosh_sleef(x)); }
// SLEEF's fmod loses the result when |a / b| is huge; the C library's is exact.
inline VecF fmod(VecF a, VecF b) {
  VecF r;
  for (int l = 0; l < kLanes; ++l) r[l] = std::fmod(a[l], b[l]);
  return r;
}

// ---- reductions: lanes accumulate apart, combined once after the loop --------------------------
// The combine is a tree of halves (lane l with lane l + w, w = kLanes/2, ..., 1): a fixed order,
// so a result does not depend on threads or timing, in log2(kLanes) vector steps.
inline VecD widen(VecF x) { return __builtin_convertvector(x, VecD); }
template <typename T, typename V, typename Combine>
inline T combine_lanes(const V& acc, Combine combine) {
  T lanes[kLanes];
  std::memcpy(lanes, &acc, sizeof lanes);
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) lanes[l] = combine(lanes[l], lanes[l + w]);
  return lanes[0];
}
inline double sum(const VecD& acc) { return combine_lanes<double>(acc, [](double a, double b) { return a + b; }); }
inline float max(VecF acc) {
  return combine_lanes<float>(acc, [](float a, float b) { return a != a ? a : b != b ? b : (a > b ? a : b); });
}
inline float min(VecF acc) {
  return combine_lanes<float>(acc, [](float a, float b) { return a != a ? a : b != b ? b : (a < b ? a : b); });
}

}  // namespace foundry_vec

#endif  // FOUNDRY_VEC_H
