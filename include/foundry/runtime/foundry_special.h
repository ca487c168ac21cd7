// Special functions (torch.special and friends) that libm lacks, in double precision, with
// PyTorch's values at poles and outside the domain. Generated kernels call them through
// foundry_rt::special (float arguments promote to double, results are cast back), and the
// reference evaluator calls the same functions. libm's own (lgamma, j0, j1, y0, y1, erfc) are
// used directly where they exist. Include guards: several models' copies may meet in one build.
#ifndef FOUNDRY_SPECIAL_H
#define FOUNDRY_SPECIAL_H
#include <cmath>
#include <cstdint>
#include <limits>

namespace foundry_rt {
namespace special {

constexpr double kPi = 3.14159265358979323846;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kEulerGamma = 0.57721566490153286061;

// B_2k / (2k)!, k = 1..12: the coefficients of the Euler-Maclaurin and Stirling-type series.
constexpr double kBernoulliOverFactorial[12] = {
    1.0 / 6 / 2, -1.0 / 30 / 24, 1.0 / 42 / 720, -1.0 / 30 / 40320, 5.0 / 66 / 3628800,
    -691.0 / 2730 / 479001600, 7.0 / 6 / 87178291200.0, -3617.0 / 510 / 20922789888000.0,
    43867.0 / 798 / 6402373705728000.0, -174611.0 / 330 / 2432902008176640000.0,
    854513.0 / 138 / 1.1240007277776077e21, -236364091.0 / 2730 / 6.204484017332394e23};

// ---- gamma family ---------------------------------------------------------------------------

inline double lgamma(double x) { return std::lgamma(x); }

// Hurwitz zeta(s, q) = sum_k (q + k)^-s by Euler-Maclaurin summation: direct terms until q + N
// >= 10, then the integral from there, half the term there and the Bernoulli corrections. As Cephes: s < 1
// is NaN, s == 1 a pole, q a non-positive integer a pole, q < 0 needs an integer s.
inline double zeta(double s, double q) {
  if (std::isnan(s) || std::isnan(q)) return kNaN;
  if (s == 1) return kInf;
  if (s < 1) return kNaN;
  if (q <= 0) {
    if (q == std::floor(q)) return kInf;
    if (s != std::floor(s)) return kNaN;
  }
  double sum = 0, a = q;
  for (int i = 0; i < 9 || a < 10; ++i, a += 1) {
    const double term = std::pow(a, -s);
    sum += term;
    if (std::fabs(term) <= 1e-17 * std::fabs(sum)) return sum;
  }
  sum += std::pow(a, 1 - s) / (s - 1) + 0.5 * std::pow(a, -s);
  double rising = s, power = std::pow(a, -s - 1);  // s (s+1) ... (s+2i) and a^(-s-2i-1)
  for (int i = 0; i < 12; ++i) {
    const double term = kBernoulliOverFactorial[i] * rising * power;
    sum += term;
    if (std::fabs(term) <= 1e-17 * std::fabs(sum)) break;
    rising *= (s + 2 * i + 1) * (s + 2 * i + 2);
    power /= a * a;
  }
  return sum;
}

// digamma: reflection for x < 0 (with the fractional part inside tan, for accuracy), the
// recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10, then the asymptotic series. As PyTorch:
// +-0 give -+inf, negative integers NaN.
inline double digamma(double x) {
  if (x == 0) return std::copysign(kInf, -x);
  if (x < 0) {
    if (x == std::trunc(x)) return kNaN;
    return digamma(1 - x) - kPi / std::tan(kPi * (x - std::trunc(x)));
  }
  if (std::isnan(x) || std::isinf(x)) return x;
  double shift = 0;
  for (; x < 10; x += 1) shift -= 1 / x;
  // sum_k B_2k / (2k x^2k), with B_2k / 2k = (B_2k / (2k)!) (2k - 1)!
  const double inv2 = 1 / (x * x);
  double series = 0, power = inv2, factorial = 1;
  for (int k = 1; k <= 6; ++k, power *= inv2) {
    series += kBernoulliOverFactorial[k - 1] * factorial * power;
    factorial *= (2.0 * k) * (2.0 * k + 1);
  }
  return shift + std::log(x) - 0.5 / x - series;
}

// polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x) for n >= 1; digamma for n == 0.
inline double polygamma(double n, double x) {
  if (n == 0) return digamma(x);
  const double sign = std::fmod(n, 2) == 1 ? 1 : -1;
  return sign * std::exp(std::lgamma(n + 1)) * zeta(n + 1, x);
}

// Regularized incomplete gamma P(a, x) and Q(a, x): the power series for x < a + 1, else the
// continued fraction for Q (modified Lentz); edge values as PyTorch's calc_igamma/igammac.
inline double igamma_series(double a, double x) {
  double term = 1 / a, sum = term;
  for (int n = 1; n < 100000 && std::fabs(term) > 1e-17 * std::fabs(sum); ++n) {
    term *= x / (a + n);
    sum += term;
  }
  return sum * std::exp(a * std::log(x) - x - std::lgamma(a));
}
inline double igammac_fraction(double a, double x) {
  const double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 100000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < 1e-16) break;
  }
  return std::exp(a * std::log(x) - x - std::lgamma(a)) * h;
}
// -1 when the core computation applies, else the value itself (for P; Q is 1 - it).
inline double igamma_edge(double a, double x) {
  if (std::isnan(a) || std::isnan(x) || x < 0 || a < 0) return kNaN;
  if (a == 0) return x > 0 ? 1 : kNaN;
  if (x == 0) return 0;
  if (std::isinf(a)) return std::isinf(x) ? kNaN : 0;
  if (std::isinf(x)) return 1;
  return -1;
}
inline double igamma(double a, double x) {
  const double edge = igamma_edge(a, x);
  if (edge != -1) return edge;
  return x < a + 1 ? igamma_series(a, x) : 1 - igammac_fraction(a, x);
}
inline double igammac(double a, double x) {
  const double edge = igamma_edge(a, x);
  if (edge != -1) return 1 - edge;
  return x < a + 1 ? 1 - igamma_series(a, x) : igammac_fraction(a, x);
}

// ---- error function family -------------------------------------------------------------------

// erfcx(x) = exp(x^2) erfc(x): directly while erfc does not underflow (libm's erfc keeps its
// relative accuracy in the tail), then the asymptotic series 1/(x sqrt(pi)) sum (-1)^k (2k-1)!!/(2x^2)^k.
inline double erfcx(double x) {
  if (x < 25) return std::exp(x * x) * std::erfc(x);
  if (std::isinf(x)) return 0;
  const double inv = 1 / (2 * x * x);
  double term = 1, sum = 1;
  for (int k = 1; k < 8; ++k) sum += (term *= -(2 * k - 1) * inv);
  return sum / (x * std::sqrt(kPi));
}

// ndtri: Acklam's rational approximation of the normal quantile, then one Halley step on
// 0.5 erfc(-x / sqrt 2) - p, which brings it to double precision.
inline double ndtri(double p) {
  if (std::isnan(p) || p < 0 || p > 1) return kNaN;
  if (p == 0) return -kInf;
  if (p == 1) return kInf;
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                                 1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01, -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                 3.754408661907416e+00};
  auto tail = [&](double q) {  // q = sqrt(-2 log(p_tail))
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  };
  double x;
  if (p < 0.02425) {
    x = tail(std::sqrt(-2 * std::log(p)));
  } else if (p > 1 - 0.02425) {
    x = -tail(std::sqrt(-2 * std::log1p(-p)));
  } else {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2 * kPi) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

// erfinv(y): ndtri((y + 1) / 2) / sqrt 2 as the start, then Newton steps on erf(x) - y.
inline double erfinv(double y) {
  if (std::isnan(y) || y < -1 || y > 1) return kNaN;
  if (y == 1 || y == -1) return std::copysign(kInf, y);
  double x = ndtri((y + 1) / 2) / std::sqrt(2.0);
  for (int i = 0; i < 2; ++i) x -= (std::erf(x) - y) / (2 / std::sqrt(kPi) * std::exp(-x * x));
  return x;
}

// ---- Bessel functions ------------------------------------------------------------------------

inline double bessel_j0(double x) { return std::isinf(x) ? 0 : ::j0(x); }
inline double bessel_j1(double x) { return std::isinf(x) ? 0 : ::j1(x); }
inline double bessel_y0(double x) { return x < 0 ? kNaN : x == 0 ? -kInf : std::isinf(x) ? 0 : ::y0(x); }
inline double bessel_y1(double x) { return x < 0 ? kNaN : x == 0 ? -kInf : std::isinf(x) ? 0 : ::y1(x); }

// e^-|x| I_nu(|x|), nu = 0 or 1: the power series sum (x/2)^(2k+nu) / (k! (k+nu)!) (all terms
// positive, so no cancellation) up to |x| = 30, the asymptotic series
// 1/sqrt(2 pi x) sum (-1)^k a_k(nu) / x^k beyond.
inline double scaled_bessel_i(int nu, double x) {
  x = std::fabs(x);
  if (std::isinf(x)) return 0;
  const double mu = 4.0 * nu * nu;
  if (x > 30) {
    double term = 1, sum = 1;
    for (int k = 1; k < 30; ++k) {
      term *= -(mu - (2 * k - 1) * (2 * k - 1)) / (8 * k * x);
      sum += term;
      if (std::fabs(term) < 1e-17 * std::fabs(sum)) break;
    }
    return sum / std::sqrt(2 * kPi * x);
  }
  const double q = x * x / 4;
  double term = nu ? x / 2 : 1, sum = term;
  for (int k = 1; k < 500 && term > 1e-17 * sum; ++k) sum += (term *= q / (k * (k + nu)));
  return sum * std::exp(-x);
}
inline double bessel_i0e(double x) { return std::isnan(x) ? x : scaled_bessel_i(0, x); }
inline double bessel_i1e(double x) { return std::isnan(x) ? x : std::copysign(scaled_bessel_i(1, x), x); }
inline double bessel_i0(double x) { return std::isnan(x) ? x : scaled_bessel_i(0, x) * std::exp(std::fabs(x)); }
inline double bessel_i1(double x) {
  return std::isnan(x) ? x : std::copysign(scaled_bessel_i(1, x) * std::exp(std::fabs(x)), x);
}

// e^x K_nu(x), nu = 0 or 1, x > 0: for x <= 9 the series of Abramowitz & Stegun 9.6.11
// (K_nu = (-1)^(nu+1) log(x/2) I_nu + ... with digamma values at integers), which keeps more
// than 8 digits there; beyond, the asymptotic series sqrt(pi / 2x) sum a_k(nu) / x^k.
inline double scaled_bessel_k(int nu, double x) {
  if (std::isnan(x) || x < 0) return kNaN;
  if (x == 0) return kInf;
  if (std::isinf(x)) return 0;
  const double mu = 4.0 * nu * nu;
  if (x > 9) {
    double term = 1, sum = 1;
    for (int k = 1; k < 40; ++k) {
      const double next = term * (mu - (2 * k - 1) * (2 * k - 1)) / (8 * k * x);
      if (std::fabs(next) >= std::fabs(term)) break;
      sum += (term = next);
      if (std::fabs(term) < 1e-17 * std::fabs(sum)) break;
    }
    return sum * std::sqrt(kPi / (2 * x));
  }
  const double q = x * x / 4, log_half = std::log(x / 2);
  double psi_k = -kEulerGamma, psi_k_nu = nu ? 1 - kEulerGamma : -kEulerGamma;  // psi(k+1), psi(k+nu+1)
  double term = nu ? x / 2 : 1, series = 0;  // (x/2)^(2k+nu) / (k! (k+nu)!)
  for (int k = 0; k < 60; ++k) {
    series += (psi_k + psi_k_nu) / 2 * term;
    term *= q / ((k + 1) * (k + 1 + nu));
    psi_k += 1.0 / (k + 1);
    psi_k_nu += 1.0 / (k + 1 + nu);
  }
  const double i_nu = scaled_bessel_i(nu, x) * std::exp(x);
  const double k = nu ? 1 / x + log_half * i_nu - series : -log_half * i_nu + series;
  return k * std::exp(x);
}
inline double bessel_k0e(double x) { return scaled_bessel_k(0, x); }
inline double bessel_k1e(double x) { return scaled_bessel_k(1, x); }
inline double bessel_k0(double x) { return scaled_bessel_k(0, x) * std::exp(-x); }
inline double bessel_k1(double x) { return scaled_bessel_k(1, x) * std::exp(-x); }

inline double spherical_bessel_j0(double x) {
  if (std::isinf(x)) return 0;
  return x == 0 ? 1 : std::sin(x) / x;
}

// Airy Ai: the Maclaurin series Ai(0) f(x) + Ai'(0) g(x) on [-6, 5], the asymptotic expansions
// of DLMF 9.7.5 (x > 5) and 9.7.9 (x < -6) with u_k = (6k-5)(6k-3)(6k-1) / ((2k-1) 216 k) u_k-1.
inline double airy_ai(double x) {
  if (std::isnan(x)) return x;
  if (x > 5 || x < -6) {
    const double z = std::fabs(x), zeta = 2.0 / 3 * z * std::sqrt(z);
    if (std::isinf(zeta)) return 0;
    double u = 1, even = 1, odd = 0, sum = 1;
    for (int k = 1; k < 40; ++k) {
      const double next = u * (6 * k - 5) * (6 * k - 3) * (6 * k - 1) / ((2 * k - 1) * 216.0 * k) / zeta;
      if (next >= u) break;
      u = next;
      const double signed_u = (k % 2 ? -u : u);
      sum += signed_u;
      if (k % 2) odd += ((k / 2) % 2 ? -u : u);
      else even += ((k / 2) % 2 ? -u : u);
      if (u < 1e-17) break;
    }
    if (x > 0) return std::exp(-zeta) / (2 * std::sqrt(kPi) * std::sqrt(std::sqrt(z))) * sum;
    return (std::cos(zeta - kPi / 4) * even + std::sin(zeta - kPi / 4) * odd) / (std::sqrt(kPi) * std::sqrt(std::sqrt(z)));
  }
  const double ai0 = 0.355028053887817239, aip0 = -0.258819403792806798, x3 = x * x * x;
  double f = 1, g = x, sf = 1, sg = x;
  for (int k = 0; k < 60; ++k) {
    f *= x3 / ((3 * k + 2) * (3 * k + 3));
    g *= x3 / ((3 * k + 3) * (3 * k + 4));
    sf += f;
    sg += g;
  }
  return ai0 * sf + aip0 * sg;
}

// ---- orthogonal polynomials (PyTorch: n is truncated to an integer; n < 0 gives 0, n 0 one) ----

// p_n of a three-term recurrence p_k+1 = next(k, p_k, p_k-1) from p0 = 1 and p1, with an early
// stop once the value overflows; 0 for a negative degree.
template <typename Next>
inline double recurrence(int64_t n, double p1, Next next) {
  if (n < 0) return 0;
  if (n == 0) return 1;
  double prev = 1, cur = p1;
  for (int64_t k = 1; k < n && std::isfinite(cur); ++k) {
    const double following = next(k, cur, prev);
    prev = cur;
    cur = following;
  }
  return cur;
}
// n as PyTorch's static_cast<int64_t>: truncated (-0.5 is degree 0), NaN and below -1 negative.
inline int64_t degree(double n) {
  if (std::isnan(n)) return -1;
  const double t = std::trunc(n);
  return t < 0 ? -1 : t >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(t);
}

// Chebyshev T, U, V, W share p_k+1 = 2x p_k - p_k-1 and differ in p1; inside (-1, 1) and for
// n > 6 they are their trigonometric forms (theta = acos x), as PyTorch computes them.
inline double chebyshev(char kind, double x, double nf) {
  const int64_t n = degree(nf);
  if (n < 0) return 0;
  if (n > 6 && std::fabs(x) < 1) {
    const double t = std::acos(x), m = static_cast<double>(n);
    switch (kind) {
      case 'T': return std::cos(m * t);
      case 'U': return std::sin((m + 1) * t) / std::sin(t);
      case 'V': return std::cos((m + 0.5) * t) / std::cos(t / 2);
      default: return std::sin((m + 0.5) * t) / std::sin(t / 2);
    }
  }
  const double p1 = kind == 'T' ? x : kind == 'U' ? 2 * x : kind == 'V' ? 2 * x - 1 : 2 * x + 1;
  return recurrence(n, p1, [x](int64_t, double p, double q) { return 2 * x * p - q; });
}
inline double chebyshev_t(double x, double n) { return chebyshev('T', x, n); }
inline double chebyshev_u(double x, double n) { return chebyshev('U', x, n); }
inline double chebyshev_v(double x, double n) { return chebyshev('V', x, n); }
inline double chebyshev_w(double x, double n) { return chebyshev('W', x, n); }
inline double shifted_chebyshev_t(double x, double n) { return chebyshev('T', 2 * x - 1, n); }
inline double shifted_chebyshev_u(double x, double n) { return chebyshev('U', 2 * x - 1, n); }
inline double shifted_chebyshev_v(double x, double n) { return chebyshev('V', 2 * x - 1, n); }
inline double shifted_chebyshev_w(double x, double n) { return chebyshev('W', 2 * x - 1, n); }

inline double hermite_h(double x, double nf) {
  return recurrence(degree(nf), 2 * x, [x](int64_t k, double p, double q) { return 2 * x * p - 2.0 * k * q; });
}
inline double hermite_he(double x, double nf) {
  return recurrence(degree(nf), x, [x](int64_t k, double p, double q) { return x * p - static_cast<double>(k) * q; });
}
inline double laguerre_l(double x, double nf) {
  return recurrence(degree(nf), 1 - x, [x](int64_t k, double p, double q) {
    const double kd = static_cast<double>(k);
    return ((2 * kd + 1 - x) * p - kd * q) / (kd + 1);
  });
}
inline double legendre_p(double x, double nf) {
  return recurrence(degree(nf), x, [x](int64_t k, double p, double q) {
    const double kd = static_cast<double>(k);
    return ((2 * kd + 1) * x * p - kd * q) / (kd + 1);
  });
}

}  // namespace special
}  // namespace foundry_rt

#endif  // FOUNDRY_SPECIAL_H
