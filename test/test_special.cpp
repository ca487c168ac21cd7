// The special functions of runtime/foundry_special.h against values that do not come from them:
// closed forms, identities (the Wronskian of the modified Bessel functions), tabulated values
// (DLMF, Abramowitz & Stegun), Python's math and statistics modules, and PyTorch's documented
// values at poles and outside the domain.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "foundry/runtime/foundry_special.h"
#include "support.h"

namespace sp = foundry_rt::special;

namespace {

const double kPi = 3.14159265358979323846;
const double kEuler = 0.57721566490153286061;

void check_close(double got, double want, double rel = 1e-9) {
  INFO("got " << got << ", want " << want);
  CHECK(std::fabs(got - want) <= rel * std::fabs(want) + 1e-300);
}

}  // namespace

TEST_CASE("special: digamma, polygamma and zeta at known points and poles", "[special][fast]") {
  check_close(sp::digamma(1), -kEuler);
  check_close(sp::digamma(0.5), -kEuler - 2 * std::log(2.0));
  check_close(sp::digamma(-0.5), -kEuler - 2 * std::log(2.0) + 2);  // psi(x + 1) = psi(x) + 1/x
  CHECK(sp::digamma(0.0) == -kInf);
  CHECK(sp::digamma(-0.0) == kInf);
  CHECK(std::isnan(sp::digamma(-2)));
  check_close(sp::polygamma(1, 1), kPi * kPi / 6);
  check_close(sp::polygamma(2, 1), -2 * 1.2020569031595942);  // -2 zeta(3)
  check_close(sp::polygamma(1, -0.5), kPi * kPi / 2 + 4);     // reflection and recurrence
  check_close(sp::zeta(2, 1), kPi * kPi / 6);
  check_close(sp::zeta(4, 2), std::pow(kPi, 4) / 90 - 1);
  CHECK(sp::zeta(1, 2) == kInf);
  CHECK(std::isnan(sp::zeta(0.5, 1)));
  CHECK(sp::zeta(2, -1) == kInf);
  CHECK(std::isnan(sp::zeta(2.5, -0.5)));
}

TEST_CASE("special: incomplete gamma, erfcx, ndtri, erfinv", "[special][fast]") {
  for (double x : {0.1, 1.0, 2.5, 30.0}) {
    check_close(sp::igamma(1, x), -std::expm1(-x));
    check_close(sp::igammac(1, x), std::exp(-x));
    check_close(sp::igamma(0.5, x), std::erf(std::sqrt(x)));
  }
  CHECK(sp::igamma(0, 1) == 1);
  CHECK(std::isnan(sp::igamma(-1, 1)));
  CHECK(sp::igammac(2, 0) == 1);
  check_close(sp::erfcx(0), 1);
  check_close(sp::erfcx(10), 0.056140992743822594);  // exp(100) erfc(10), Python's math
  check_close(sp::erfcx(26), 0.021683584850562907);  // past the switch to the asymptotic series
  check_close(sp::erfcx(-1), std::exp(1.0) * std::erfc(-1.0));
  check_close(sp::ndtri(0.975), 1.9599639845400536);  // Python's statistics.NormalDist
  check_close(sp::ndtri(0.3), -0.5244005127080407);
  check_close(sp::ndtri(1e-300), -37.0470962993612);
  CHECK(sp::ndtri(0) == -kInf);
  CHECK(std::isnan(sp::ndtri(1.5)));
  check_close(sp::erfinv(0.5), 0.4769362762044699);
  check_close(std::erf(sp::erfinv(-0.999)), -0.999, 1e-12);
  CHECK(sp::erfinv(1) == kInf);
}

TEST_CASE("special: modified Bessel functions, tabulated and through the Wronskian", "[special][fast]") {
  check_close(sp::bessel_i0(1), 1.2660658777520082);
  check_close(sp::bessel_i1(-1), -0.5651591039924851);
  check_close(sp::bessel_k0(1), 0.42102443824070834);
  check_close(sp::bessel_k1(2), 0.13986588181652243);
  CHECK(std::isnan(sp::bessel_k0(-1)));
  CHECK(sp::bessel_k1(0) == kInf);
  // I0 K1 + I1 K0 = 1/x on both sides of each switch between series and asymptotic forms.
  for (double x : {0.5, 8.9, 9.1, 29.9, 30.1, 200.0}) {
    INFO("x = " << x);
    check_close(sp::bessel_i0e(x) * sp::bessel_k1e(x) + sp::bessel_i1e(x) * sp::bessel_k0e(x), 1 / x, 1e-8);
  }
  check_close(sp::spherical_bessel_j0(2), std::sin(2.0) / 2);
  CHECK(sp::spherical_bessel_j0(0) == 1);
}

TEST_CASE("special: Airy Ai on both sides of its series", "[special][fast]") {
  check_close(sp::airy_ai(0), 0.3550280538878172);
  check_close(sp::airy_ai(1), 0.1352924163128814);
  check_close(sp::airy_ai(-2), 0.22740742820168557);
  check_close(sp::airy_ai(10), 1.1047532552898687e-10, 1e-6);
  check_close(sp::airy_ai(-10), 0.04024123848644319, 1e-6);
}

TEST_CASE("special: orthogonal polynomials, their closed forms and PyTorch's degrees", "[special][fast]") {
  const double x = 0.3;
  check_close(sp::chebyshev_t(x, 3), 4 * x * x * x - 3 * x);
  check_close(sp::chebyshev_t(x, 10), std::cos(10 * std::acos(x)));
  check_close(sp::chebyshev_u(x, 2), 4 * x * x - 1);
  check_close(sp::shifted_chebyshev_t(x, 2), 2 * (2 * x - 1) * (2 * x - 1) - 1);
  check_close(sp::hermite_h(x, 3), 8 * x * x * x - 12 * x);
  check_close(sp::hermite_he(x, 3), x * x * x - 3 * x);
  check_close(sp::laguerre_l(x, 2), (x * x - 4 * x + 2) / 2);
  check_close(sp::legendre_p(x, 2), (3 * x * x - 1) / 2);
  CHECK(sp::legendre_p(x, -2) == 0);  // negative degrees give 0
  CHECK(sp::hermite_h(x, -0.5) == 1);  // -0.5 truncates to degree 0
  CHECK(sp::chebyshev_v(x, std::nan("")) == 0);
}
