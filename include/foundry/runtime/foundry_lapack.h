// Linear-algebra library calls (LAPACKE, Debian's liblapacke with OpenBLAS) that generated
// externs and the reference evaluator both run. Every operand is a contiguous row-major batch of
// matrices; the lowering broadcasts and copies operands into that form (lib/lower/linalg.cpp).
// Matrices are computed in double and rounded to float32 once, so that the result is as close to
// the exact one as the input allows (PyTorch computes in float32: the difference is its rounding).
// Include guards rather than #pragma once: several models' copies may meet in one build.
#ifndef FOUNDRY_LAPACK_H
#define FOUNDRY_LAPACK_H
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace foundry_rt {
namespace lapack {

// Which routine a call runs; the numbering is the IR's (foundry::ir::LinalgOp).
enum class Routine : int {
  Cholesky,            // A[n,n] -> L (or U) [n,n], info                          potrf
  CholeskySolve,       // B[n,k], L[n,n] -> X[n,k]                                potrs
  CholeskyInverse,     // L[n,n] -> inverse of L L^T (or U^T U) [n,n]             potri
  LuFactor,            // A[m,n] -> LU[m,n], pivots int32 [min(m,n)], info        getrf
  LuSolve,             // LU[n,n], pivots[n], B[n,k] -> X[n,k] (trans: A^T X = B) getrs
  Inverse,             // A[n,n] -> inverse[n,n], info                            getrf, getri
  Solve,               // A[n,n], B[n,k] -> X[n,k] (trans: A^T X = B), info       getrf, getrs
  Det,                 // A[n,n] -> det []                                        getrf
  Slogdet,             // A[n,n] -> sign [], log|det| []                          getrf
  SolveTriangular,     // A[n,n], B[n,k] -> X[n,k] (A triangular: upper, unit)    substitution
  Eigh,                // A[n,n] -> eigenvalues[n] ascending, eigenvectors[n,n]   syevd
  Svd,                 // A[m,n] -> U, S[min(m,n)], Vh                            gesdd
  HouseholderProduct,  // A[m,n], tau[k] -> Q[m,n]                                orgqr
  Ormqr,               // A[q,k], tau[k], C[m,n] -> op(Q) C or C op(Q) [m,n]      ormqr
  LdlSolve,            // LD[n,n], pivots[n], B[n,k] -> X[n,k]                    sytrs
};

struct Call {
  Routine routine;
  int output;  // which of the routine's outputs this call writes
  int64_t batch, m, n, k;
  bool upper, trans, unit, left, full_matrices, compute_uv;
};

namespace detail {

inline lapack_int ld(int64_t cols) { return static_cast<lapack_int>(std::max<int64_t>(1, cols)); }
inline lapack_int li(int64_t v) { return static_cast<lapack_int>(v); }

inline std::vector<double> load(const void* p, int64_t offset, int64_t count) {
  const float* f = static_cast<const float*>(p) + offset;
  return std::vector<double>(f, f + count);
}
inline std::vector<lapack_int> load_pivots(const void* p, int64_t offset, int64_t count) {
  const int32_t* v = static_cast<const int32_t*>(p) + offset;
  return std::vector<lapack_int>(v, v + count);
}
inline void store(const std::vector<double>& v, void* out, int64_t offset) {
  float* f = static_cast<float*>(out) + offset;
  for (size_t i = 0; i < v.size(); ++i) f[i] = static_cast<float>(v[i]);
}
inline void store_int(int64_t v, void* out, int64_t offset) { static_cast<int32_t*>(out)[offset] = static_cast<int32_t>(v); }
inline void store_scalar(double v, void* out, int64_t offset) { static_cast<float*>(out)[offset] = static_cast<float>(v); }

// Zeroes the triangle a Cholesky factor does not use (ATen's tril_/triu_ after potrf).
inline void keep_triangle(std::vector<double>& a, int64_t n, bool upper) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      if (upper ? j < i : j > i) a[i * n + j] = 0;
}

// Solves A X = B in place for triangular A (ATen uses trsm: no singularity check, a zero on the
// diagonal gives inf/NaN as the division does).
inline void triangular_solve(const std::vector<double>& a, std::vector<double>& b, int64_t n, int64_t k, bool upper,
                             bool unit) {
  for (int64_t c = 0; c < k; ++c)
    for (int64_t s = 0; s < n; ++s) {
      int64_t i = upper ? n - 1 - s : s;
      double acc = b[i * k + c];
      for (int64_t s2 = 0; s2 < s; ++s2) {
        int64_t j = upper ? n - 1 - s2 : s2;
        acc -= a[i * n + j] * b[j * k + c];
      }
      b[i * k + c] = unit ? acc : acc / a[i * n + i];
    }
}

inline void identity(std::vector<double>& a, int64_t n) {
  std::fill(a.begin(), a.end(), 0.0);
  for (int64_t i = 0; i < n; ++i) a[i * n + i] = 1;
}

// One matrix of the batch; `out` receives output number c.output at element offset `o`.
inline void run_one(const Call& c, const void* const* in, void* out, int64_t b) {
  const int64_t m = c.m, n = c.n, k = c.k;
  const int o = c.output;
  switch (c.routine) {
    case Routine::Cholesky: {
      std::vector<double> a = load(in[0], b * n * n, n * n);
      lapack_int info = n ? LAPACKE_dpotrf(LAPACK_ROW_MAJOR, c.upper ? 'U' : 'L', li(n), a.data(), ld(n)) : 0;
      keep_triangle(a, n, c.upper);
      if (o == 0) store(a, out, b * n * n); else store_int(info, out, b);
      return;
    }
    case Routine::CholeskySolve: {
      std::vector<double> x = load(in[0], b * n * k, n * k), l = load(in[1], b * n * n, n * n);
      if (n && k) LAPACKE_dpotrs(LAPACK_ROW_MAJOR, c.upper ? 'U' : 'L', li(n), li(k), l.data(), ld(n), x.data(), ld(k));
      store(x, out, b * n * k);
      return;
    }
    case Routine::CholeskyInverse: {
      std::vector<double> a = load(in[0], b * n * n, n * n);
      if (n) LAPACKE_dpotri(LAPACK_ROW_MAJOR, c.upper ? 'U' : 'L', li(n), a.data(), ld(n));
      for (int64_t i = 0; i < n; ++i)  // potri fills one triangle of the symmetric inverse
        for (int64_t j = 0; j < n; ++j)
          if (c.upper ? j < i : j > i) a[i * n + j] = a[j * n + i];
      store(a, out, b * n * n);
      return;
    }
    case Routine::LuFactor: {
      const int64_t p = std::min(m, n);
      std::vector<double> a = load(in[0], b * m * n, m * n);
      std::vector<lapack_int> piv(static_cast<size_t>(p));
      lapack_int info = p ? LAPACKE_dgetrf(LAPACK_ROW_MAJOR, li(m), li(n), a.data(), ld(n), piv.data()) : 0;
      if (o == 0) store(a, out, b * m * n);
      else if (o == 1) for (int64_t i = 0; i < p; ++i) store_int(piv[i], out, b * p + i);
      else store_int(info, out, b);
      return;
    }
    case Routine::LuSolve: {
      std::vector<double> lu = load(in[0], b * n * n, n * n), x = load(in[2], b * n * k, n * k);
      std::vector<lapack_int> piv = load_pivots(in[1], b * n, n);
      if (n && k)
        LAPACKE_dgetrs(LAPACK_ROW_MAJOR, c.trans ? 'T' : 'N', li(n), li(k), lu.data(), ld(n), piv.data(), x.data(), ld(k));
      store(x, out, b * n * k);
      return;
    }
    case Routine::Inverse:
    case Routine::Solve: {
      const bool solve = c.routine == Routine::Solve;
      std::vector<double> a = load(in[0], b * n * n, n * n);
      std::vector<double> x = solve ? load(in[1], b * n * k, n * k) : std::vector<double>(static_cast<size_t>(n * n));
      if (!solve) identity(x, n);
      const int64_t cols = solve ? k : n;
      std::vector<lapack_int> piv(static_cast<size_t>(n));
      lapack_int info = n ? LAPACKE_dgetrf(LAPACK_ROW_MAJOR, li(n), li(n), a.data(), ld(n), piv.data()) : 0;
      // A singular A: ATen's _ex variants report it in info and leave the result unspecified.
      if (info == 0 && n && cols)
        LAPACKE_dgetrs(LAPACK_ROW_MAJOR, c.trans ? 'T' : 'N', li(n), li(cols), a.data(), ld(n), piv.data(), x.data(),
                       ld(cols));
      if (info != 0) std::fill(x.begin(), x.end(), std::numeric_limits<double>::quiet_NaN());
      if (o == 0) store(x, out, b * n * cols); else store_int(info, out, b);
      return;
    }
    case Routine::Det:
    case Routine::Slogdet: {
      std::vector<double> a = load(in[0], b * n * n, n * n);
      std::vector<lapack_int> piv(static_cast<size_t>(n));
      if (n) LAPACKE_dgetrf(LAPACK_ROW_MAJOR, li(n), li(n), a.data(), ld(n), piv.data());
      double det = 1, sign = 1, logabs = 0;
      for (int64_t i = 0; i < n; ++i) {
        double d = a[i * n + i];
        if (piv[i] != i + 1) { det = -det; sign = -sign; }
        det *= d;
        sign *= d > 0 ? 1 : d < 0 ? -1 : 0;
        logabs += std::log(std::fabs(d));
      }
      if (c.routine == Routine::Det) store_scalar(det, out, b);
      else store_scalar(o == 0 ? sign : logabs, out, b);
      return;
    }
    case Routine::SolveTriangular: {
      std::vector<double> a = load(in[0], b * n * n, n * n), x = load(in[1], b * n * k, n * k);
      triangular_solve(a, x, n, k, c.upper, c.unit);
      store(x, out, b * n * k);
      return;
    }
    case Routine::Eigh: {
      std::vector<double> a = load(in[0], b * n * n, n * n), w(static_cast<size_t>(n));
      if (n)
        LAPACKE_dsyevd(LAPACK_ROW_MAJOR, c.compute_uv ? 'V' : 'N', c.upper ? 'U' : 'L', li(n), a.data(), ld(n), w.data());
      if (o == 0) store(w, out, b * n); else store(a, out, b * n * n);
      return;
    }
    case Routine::Svd: {
      const int64_t p = std::min(m, n);
      const int64_t ucols = c.full_matrices ? m : p, vrows = c.full_matrices ? n : p;
      std::vector<double> a = load(in[0], b * m * n, m * n), s(static_cast<size_t>(p));
      std::vector<double> u(static_cast<size_t>(m * ucols)), vt(static_cast<size_t>(vrows * n));
      char jobz = !c.compute_uv ? 'N' : c.full_matrices ? 'A' : 'S';
      if (p)
        LAPACKE_dgesdd(LAPACK_ROW_MAJOR, jobz, li(m), li(n), a.data(), ld(n), s.data(), u.data(), ld(ucols), vt.data(),
                       ld(n));
      else if (c.full_matrices)  // no singular value: the full bases are the identity
        identity(u, m), identity(vt, n);
      if (o == 0) store(u, out, b * m * ucols);
      else if (o == 1) store(s, out, b * p);
      else store(vt, out, b * vrows * n);
      return;
    }
    case Routine::HouseholderProduct: {
      std::vector<double> a = load(in[0], b * m * n, m * n), tau = load(in[1], b * k, k);
      if (n) LAPACKE_dorgqr(LAPACK_ROW_MAJOR, li(m), li(n), li(k), a.data(), ld(n), tau.data());
      store(a, out, b * m * n);
      return;
    }
    case Routine::Ormqr: {
      const int64_t q = c.left ? m : n;
      std::vector<double> a = load(in[0], b * q * k, q * k), tau = load(in[1], b * k, k);
      std::vector<double> x = load(in[2], b * m * n, m * n);
      if (m && n && k)
        LAPACKE_dormqr(LAPACK_ROW_MAJOR, c.left ? 'L' : 'R', c.trans ? 'T' : 'N', li(m), li(n), li(k), a.data(), ld(k),
                       tau.data(), x.data(), ld(n));
      store(x, out, b * m * n);
      return;
    }
    case Routine::LdlSolve: {
      std::vector<double> ldm = load(in[0], b * n * n, n * n), x = load(in[2], b * n * k, n * k);
      std::vector<lapack_int> piv = load_pivots(in[1], b * n, n);
      if (n && k) LAPACKE_dsytrs(LAPACK_ROW_MAJOR, 'L', li(n), li(k), ldm.data(), ld(n), piv.data(), x.data(), ld(k));
      store(x, out, b * n * k);
      return;
    }
  }
}

}  // namespace detail

// Runs output c.output of the routine for every matrix of the batch. `in` holds the operands
// (float32, pivots int32) in the routine's order; `out` is float32, or int32 for pivots and info.
inline void run(const Call& c, const void* const* in, void* out) {
  for (int64_t b = 0; b < c.batch; ++b) detail::run_one(c, in, out, b);
}

}  // namespace lapack
}  // namespace foundry_rt

#endif  // FOUNDRY_LAPACK_H
