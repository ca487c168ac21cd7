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
#define FOUNDRY_VEC_REG __m512
#define FOUNDRY_VEC_SQRT _mm512_sqrt_ps
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include <sleef.h>
#define FOUNDRY_VEC_LANES 8
#define FOUNDRY_SLEEF(fn, ulp) Sleef_##fn##f8_##ulp##avx2
#define FOUNDRY_VEC_REG __m256
#define FOUNDRY_VEC_SQRT _mm256_sqrt_ps
#elif defined(__SSE2__)
#include <immintrin.h>
#include <sleef.h>
#define FOUNDRY_VEC_LANES 4
#define FOUNDRY_SLEEF(fn, ulp) Sleef_##fn##f4_##ulp##sse2
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
// One broadcast instruction: GCC turns the lane loop into one masked broadcast per lane.
inline VecF splat(float x) {
#if FOUNDRY_VEC_LANES == 16
  return (VecF)_mm512_set1_ps(x);
#elif FOUNDRY_VEC_LANES == 8
  return (VecF)_mm256_set1_ps(x);
#elif FOUNDRY_VEC_LANES == 4
  return (VecF)_mm_set1_ps(x);
#else
  VecF r;
  for (int l = 0; l < kLanes; ++l) r[l] = x;
  return r;
#endif
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
// The lanes where the index `base + step * lane` compares with 0 as `c` says: a window's
// padding test in a vector loop. Computed on 32-bit lanes, exactly: a base beyond 2^30 either
// way is clamped to 2^30, which no step below 2^20 (over at most 16 lanes) brings to 0 or
// across it; larger steps are compared lane by lane.
enum class Compare { Eq, Ne, Lt, Le, Gt, Ge };
template <typename T, typename R>
inline R compare_zero(T v, Compare c) {
  switch (c) {
    case Compare::Eq: return v == 0;
    case Compare::Ne: return v != 0;
    case Compare::Lt: return v < 0;
    case Compare::Le: return v <= 0;
    case Compare::Gt: return v > 0;
    default: return v >= 0;
  }
}
inline Mask index_compare(int64_t base, int64_t step, Compare c) {
  constexpr int64_t kClamp = int64_t{1} << 30, kMaxStep = int64_t{1} << 20;
  if (step > -kMaxStep && step < kMaxStep) {
    Mask lane;
    for (int l = 0; l < kLanes; ++l) lane[l] = l;
    const int32_t b = static_cast<int32_t>(base < -kClamp ? -kClamp : base > kClamp ? kClamp : base);
    return compare_zero<Mask, Mask>(b + static_cast<int32_t>(step) * lane, c);
  }
  Mask r;
  for (int l = 0; l < kLanes; ++l) r[l] = compare_zero<int64_t, bool>(base + step * l, c) ? -1 : 0;
  return r;
}
// The last, partial vector of a loop: its first `n` lanes (0 < n < kLanes) are iterations, the
// others are not. Loads read only those lanes' elements (the others are 0) and stores write only
// theirs (store_first, below), so that nothing past the loop's end is touched (AVX-512's masked
// loads and stores do not touch the masked-off lanes' memory).
inline VecF load_first(const float* p, int n) {
#if FOUNDRY_VEC_LANES == 16
  return (VecF)_mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p);
#else
  VecF r = {};
  for (int l = 0; l < n; ++l) r[l] = p[l];
  return r;
#endif
}
inline void store_bool_first(bool* p, Mask m, int n) {
  for (int l = 0; l < n; ++l) p[l] = m[l] != 0;
}
template <typename F>
inline VecF gather_first(F&& at, int n) {
  VecF r = {};
  for (int l = 0; l < n; ++l) r[l] = at(l);
  return r;
}
template <typename F>
inline Mask gather_bool_first(F&& at, int n) {
  Mask r = {};
  for (int l = 0; l < n; ++l) r[l] = at(l) ? -1 : 0;
  return r;
}
template <typename F>
inline void scatter_first(VecF v, F&& at, int n) {
  for (int l = 0; l < n; ++l) at(l) = v[l];
}
template <typename F>
inline void scatter_bool_first(Mask m, F&& at, int n) {
  for (int l = 0; l < n; ++l) at(l) = m[l] != 0;
}
// Lanes two elements apart, p[0], p[2], ..., p[2 * (kLanes - 1)]: two vector loads and a shuffle
// instead of kLanes single loads (a stride-2 max pool's window). The second load is masked:
// nothing past the last lane's element is read.
inline VecF load_stride2(const float* p) {
#if FOUNDRY_VEC_LANES == 16
  const __m512 lo = _mm512_loadu_ps(p), hi = _mm512_maskz_loadu_ps(0x7fff, p + 16);
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  return (VecF)_mm512_permutex2var_ps(lo, evens, hi);
#elif FOUNDRY_VEC_LANES == 8
  const __m256 lo = _mm256_loadu_ps(p);
  const __m256 hi = _mm256_maskload_ps(p + 8, _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, -1, 0));
  // Per 128-bit half: p0 p2 p8 p10 | p4 p6 p12 p14; then the 64-bit pairs in order.
  const __m256 pairs = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
  return (VecF)_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(pairs), _MM_SHUFFLE(3, 1, 2, 0)));
#else
  return gather([&](int64_t lane) { return p[2 * lane]; });
#endif
}
// A convolution's window along a row of `n` elements: the lanes l < `lanes` whose position
// first + step * l lies inside the row, as a bit set (bit l), for load_window.
inline uint32_t window_lanes(int64_t n, int64_t first, int64_t step, int lanes) {
  const int64_t a = first >= 0 ? 0 : (-first + step - 1) / step;
  const int64_t b = first >= n ? 0 : (n - 1 - first) / step + 1;
  const int64_t hi = b < lanes ? b : lanes;
  if (a >= hi) return 0;
  return static_cast<uint32_t>(((uint64_t{1} << hi) - 1) & ~((uint64_t{1} << a) - 1));
}
// Lanes in `in` (window_lanes) read row[first + step * l]; the others are 0 (zero padding, or
// lanes past the output's end). Only those positions are read: the masked lanes of AVX-512's and
// AVX2's masked loads and gathers touch no memory, so the address of lane 0 may lie before the
// row (it is computed as an integer, never dereferenced there).
inline const float* element_address(const float* row, int64_t at) {
  return reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(row) + static_cast<uintptr_t>(at) * sizeof(float));
}
inline VecF load_window(const float* row, int64_t first, int64_t step, uint32_t in) {
#if FOUNDRY_VEC_LANES == 16
  if (step == 1) return (VecF)_mm512_maskz_loadu_ps(static_cast<__mmask16>(in), element_address(row, first));
  if (step == 2) {  // the lanes' elements are every other one of 32: bit l of `in` is element 2l
#if defined(__BMI2__)
    const uint32_t elements = _pdep_u32(in, 0x55555555u);
#else
    uint32_t elements = 0;
    for (int l = 0; l < 16; ++l) elements |= ((in >> l) & 1u) << (2 * l);
#endif
    const __m512 lo = _mm512_maskz_loadu_ps(static_cast<__mmask16>(elements), element_address(row, first));
    const __m512 hi = _mm512_maskz_loadu_ps(static_cast<__mmask16>(elements >> 16), element_address(row, first + 16));
    const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return (VecF)_mm512_permutex2var_ps(lo, evens, hi);
  }
  if (in && first >= INT32_MIN / 2 && first + step * 15 <= INT32_MAX / 2 && first + step * 15 >= INT32_MIN / 2) {
    const __m512i pos = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(first)),
                                         _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                                            _mm512_set1_epi32(static_cast<int32_t>(step))));
    return (VecF)_mm512_mask_i32gather_ps(_mm512_setzero_ps(), static_cast<__mmask16>(in), pos, row, 4);
  }
#elif FOUNDRY_VEC_LANES == 8
  if (step == 1) {
    const __m256i bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i lane_in = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int32_t>(in)), bits), bits);
    return (VecF)_mm256_maskload_ps(element_address(row, first), lane_in);
  }
#endif
  VecF r = splat(0.0f);
  for (int l = 0; l < kLanes; ++l)
    if ((in >> l) & 1u) r[l] = row[first + step * l];
  return r;
}
// The first `lanes` lanes of `v` stored at p[0..lanes); nothing past them is written.
inline void store_first(float* p, VecF v, int lanes) {
#if FOUNDRY_VEC_LANES == 16
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << lanes) - 1), (__m512)v);
#else
  for (int l = 0; l < lanes; ++l) p[l] = v[l];
#endif
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
// `v` in its first `n` lanes and `fill` in the others: a partial vector's value as a reduction
// takes it (`fill` the reduction's identity).
inline VecF first_lanes(VecF v, int n, float fill) {
  return select(index_compare(-static_cast<int64_t>(n), 1, Compare::Lt), v, splat(fill));
}
inline VecF to_float(Mask m) { return select(m, splat(1.0f), splat(0.0f)); }
inline Mask nonzero(VecF x) { return x != splat(0.0f); }
inline Mask isnan(VecF x) { return x != x; }
inline VecF abs(VecF x) { return (VecF)((Mask)x & 0x7fffffff); }
inline Mask isinf(VecF x) { return abs(x) == splat(INFINITY); }
inline VecF copysign(VecF a, VecF b) {
  return (VecF)(((Mask)a & 0x7fffffff) | ((Mask)b & static_cast<int32_t>(0x80000000u)));
}
inline Mask logical_not(Mask m) { return ~m; }

// ---- 16-bit floats: float32 lanes, rounded after every operation as the scalar code does -------
// bfloat16 is the top half of a float32: widening is a shift, rounding (to nearest even, NaN to
// the quiet NaN 0x7fc0) is integer arithmetic on the bits, exactly foundry_rt::float_to_bfloat16.
using VecU16 = uint16_t __attribute__((vector_size(2 * kLanes)));
using VecU32 = uint32_t __attribute__((vector_size(4 * kLanes)));
inline VecF load_bfloat16(const uint16_t* p) {
  VecU16 h;
  std::memcpy(&h, p, sizeof h);
  return (VecF)(__builtin_convertvector(h, VecU32) << 16);
}
inline VecU32 bfloat16_bits(VecF x) {  // the rounded value, in the top 16 bits of each lane
  VecU32 bits = (VecU32)x;
  bits += 0x7fffu + ((bits >> 16) & 1u);
  const VecU32 nan = (VecU32)isnan(x);
  return ((bits & ~nan) | (nan & 0x7fc00000u)) & 0xffff0000u;
}
inline VecF round_bfloat16(VecF x) { return (VecF)bfloat16_bits(x); }
inline void store_bfloat16(uint16_t* p, VecF x) {
  const VecU16 h = __builtin_convertvector(bfloat16_bits(x) >> 16, VecU16);
  std::memcpy(p, &h, sizeof h);
}
// float16 converts with the F16C instructions where the target has them (AVX-512F has their
// 16-lane forms; x86-64-v3 the 8-lane ones), rounding to nearest even as foundry_rt::float_to_half
// does; lane by lane elsewhere. (GCC 12 turns neither _Float16 vectors nor loops over _Float16
// into these instructions: it converts one lane at a time.)
#if FOUNDRY_VEC_LANES == 16
inline VecF load_half(const uint16_t* p) { return (VecF)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p)); }
inline __m256i to_half_bits(VecF x) { return _mm512_cvtps_ph((__m512)x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline void store_half(uint16_t* p, VecF x) { _mm256_storeu_si256((__m256i*)p, to_half_bits(x)); }
inline VecF round_half(VecF x) { return (VecF)_mm512_cvtph_ps(to_half_bits(x)); }
#elif FOUNDRY_VEC_LANES == 8 && defined(__F16C__)
inline VecF load_half(const uint16_t* p) { return (VecF)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p)); }
inline __m128i to_half_bits(VecF x) { return _mm256_cvtps_ph((__m256)x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline void store_half(uint16_t* p, VecF x) { _mm_storeu_si128((__m128i*)p, to_half_bits(x)); }
inline VecF round_half(VecF x) { return (VecF)_mm256_cvtph_ps(to_half_bits(x)); }
#elif FOUNDRY_VEC_LANES == 4 && defined(__F16C__)
inline VecF load_half(const uint16_t* p) { return (VecF)_mm_cvtph_ps(_mm_loadl_epi64((const __m128i*)p)); }
inline __m128i to_half_bits(VecF x) { return _mm_cvtps_ph((__m128)x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline void store_half(uint16_t* p, VecF x) { _mm_storel_epi64((__m128i*)p, to_half_bits(x)); }
inline VecF round_half(VecF x) { return (VecF)_mm_cvtph_ps(to_half_bits(x)); }
#else
inline VecF load_half(const uint16_t* p) {
  VecF r;
  for (int l = 0; l < kLanes; ++l) r[l] = foundry_rt::half_to_float(p[l]);
  return r;
}
inline void store_half(uint16_t* p, VecF x) {
  for (int l = 0; l < kLanes; ++l) p[l] = foundry_rt::float_to_half(x[l]);
}
inline VecF round_half(VecF x) {
  for (int l = 0; l < kLanes; ++l) x[l] = foundry_rt::round_half(x[l]);
  return x;
}
#endif

// n float16 (or bfloat16) values to float32 and back: the 16-bit operands of float32 library
// calls, where oneDNN has no kernel for their type on this CPU.
inline void widen_16bit(const uint16_t* in, float* out, size_t n, bool bfloat16) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store(out + i, bfloat16 ? load_bfloat16(in + i) : load_half(in + i));
  for (; i < n; ++i) out[i] = bfloat16 ? foundry_rt::bfloat16_to_float(in[i]) : foundry_rt::half_to_float(in[i]);
}
inline void narrow_16bit(const float* in, uint16_t* out, size_t n, bool bfloat16) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) bfloat16 ? store_bfloat16(out + i, load(in + i)) : store_half(out + i, load(in + i));
  for (; i < n; ++i) out[i] = bfloat16 ? foundry_rt::float_to_bfloat16(in[i]) : foundry_rt::float_to_half(in[i]);
}

// ---- PyTorch's float semantics ---------------------------------------------------------------
// maximum/minimum propagate NaN; fmax/fmin ignore it (as std::fmax).
inline VecF maximum(VecF a, VecF b) { return select(isnan(a), a, select(isnan(b), b, select(a > b, a, b))); }
inline VecF minimum(VecF a, VecF b) { return select(isnan(a), a, select(isnan(b), b, select(a < b, a, b))); }
inline VecF fmax(VecF a, VecF b) { return select(isnan(a), b, select(isnan(b), a, select(a > b, a, b))); }
inline VecF fmin(VecF a, VecF b) { return select(isnan(a), b, select(isnan(b), a, select(a < b, a, b))); }
// torch.sign is (0 < x) - (x < 0): NaN gives 0.
inline VecF sign(VecF x) { return select(x > splat(0.0f), splat(1.0f), select(x < splat(0.0f), splat(-1.0f), splat(0.0f))); }

// ---- math functions ----------------------------------------------------------------------------
// One table for every width: X(our name, the library function, SLEEF's ULP variant; empty for
// SLEEF's exact functions). `_sleef` names are wrapped below (SLEEF overflows early there).
#define FOUNDRY_VEC_UNARY_FUNCTIONS(X)                                                              \
  X(exp, exp, u10) X(exp2, exp2, u35) X(expm1, expm1, u10) X(log, log, u35) X(log2, log2, u35)       \
  X(log10, log10, u10) X(log1p_sleef, log1p, u10) X(sin, sin, u35) X(cos, cos, u35) X(tan, tan, u35) \
  X(asin, asin, u35) X(acos, acos, u35) X(atan, atan, u35)                                           \
  X(sinh, sinh, u10) X(cosh, cosh, u10) /* their u35 variants overflow from 88.7 */                 \
  X(tanh, tanh, u35) X(asinh_sleef, asinh, u10) X(acosh_sleef, acosh, u10) X(atanh, atanh, u10)     \
  X(erfc, erfc, u15) X(floor, floor, ) X(ceil, ceil, ) X(trunc, trunc, )                             \
  X(nearbyint, rint, ) /* halfway cases to even, as torch.round */
#define FOUNDRY_VEC_BINARY_FUNCTIONS(X) X(pow, pow, u10) X(atan2, atan2, u35) X(hypot, hypot, u35)

#if FOUNDRY_VEC_LANES > 1
#define FOUNDRY_VEC_UNARY(name, fn, ulp) \
  inline VecF name(VecF x) { return (VecF)FOUNDRY_SLEEF(fn, ulp)((FOUNDRY_VEC_REG)x); }
#define FOUNDRY_VEC_BINARY(name, fn, ulp) \
  inline VecF name(VecF a, VecF b) { return (VecF)FOUNDRY_SLEEF(fn, ulp)((FOUNDRY_VEC_REG)a, (FOUNDRY_VEC_REG)b); }
inline VecF sqrt(VecF x) { return (VecF)FOUNDRY_VEC_SQRT((FOUNDRY_VEC_REG)x); }  // the instruction: correctly rounded
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
inline VecF erf(VecF x) { return (VecF)FOUNDRY_SLEEF(erf, u10)((FOUNDRY_VEC_REG)x); }
#endif
#else  // one lane: the C library
#define FOUNDRY_VEC_UNARY(name, fn, ulp) \
  inline VecF name(VecF x) { return splat(std::fn(x[0])); }
#define FOUNDRY_VEC_BINARY(name, fn, ulp) \
  inline VecF name(VecF a, VecF b) { return splat(std::fn(a[0], b[0])); }
inline VecF sqrt(VecF x) { return splat(std::sqrt(x[0])); }
inline VecF erf(VecF x) { return splat(std::erf(x[0])); }
#endif
FOUNDRY_VEC_UNARY_FUNCTIONS(FOUNDRY_VEC_UNARY)
FOUNDRY_VEC_BINARY_FUNCTIONS(FOUNDRY_VEC_BINARY)
#undef FOUNDRY_VEC_UNARY
#undef FOUNDRY_VEC_BINARY
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
