// Tests for the symbolic index-expression library. Expected values are worked out by hand in the
// comments; the randomized tests compare against a plain reference evaluator of the same tree.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <random>
#include <set>

#include "foundry/ir/expr.h"
#include "foundry/support/error.h"

using foundry::ir::Expr;
using foundry::ir::SymbolExtents;
namespace ir = foundry::ir;

namespace Catch {
template <>
struct StringMaker<Expr> {
  static std::string convert(const Expr& e) { return ir::to_string(e); }
};
}  // namespace Catch

namespace {

Expr S(const std::string& name) { return Expr::sym(name); }
std::string str(const Expr& e) { return ir::to_string(e); }

int64_t eval_at(const Expr& e, const std::map<std::string, int64_t>& env) {
  return ir::evaluate(e, [&](const std::string& s) { return env.at(s); });
}

// Contiguous strides of a shape: the stride of dim k is the product of the later sizes.
std::vector<Expr> strides_of(const std::vector<Expr>& shape) {
  std::vector<Expr> st(shape.size(), Expr(1));
  for (size_t k = shape.size(); k-- > 1;) st[k - 1] = st[k] * shape[k];
  return st;
}

// Flat offset of a multi-index into a contiguous tensor.
Expr flat_index(const std::vector<Expr>& idx, const std::vector<Expr>& shape) {
  std::vector<Expr> st = strides_of(shape);
  Expr f = 0;
  for (size_t k = 0; k < idx.size(); ++k) f = f + idx[k] * st[k];
  return f;
}

// The multi-index of flat offset f (as a view/reshape lowers it: no mod on the outermost dim).
std::vector<Expr> unravel(const Expr& f, const std::vector<Expr>& shape) {
  std::vector<Expr> st = strides_of(shape), idx;
  for (size_t k = 0; k < shape.size(); ++k) {
    Expr q = ir::floordiv(f, st[k]);
    idx.push_back(k == 0 ? q : ir::mod(q, shape[k]));
  }
  return idx;
}

const Expr i0 = S("i0"), i1 = S("i1"), i2 = S("i2"), s0 = S("s0"), s1 = S("s1"), s2 = S("s2");

}  // namespace

TEST_CASE("expr: constants fold and sums are canonical", "[expr][fast]") {
  CHECK((Expr(3) + 4).is_const(7));
  CHECK((Expr(3) * -4).is_const(-12));
  CHECK(Expr().is_const(0));
  CHECK(i0 + 0 == i0);
  CHECK(i0 * 1 == i0);
  CHECK((i0 * 0).is_const(0));
  CHECK(i0 - i0 == Expr(0));
  CHECK(i0 + i1 == i1 + i0);
  CHECK((i0 + i1) - i1 == i0);
  CHECK(i0 + i0 + i0 == 3 * i0);
  CHECK(2 * (i0 + i1) == 2 * i0 + 2 * i1);
  CHECK(((i0 + 1) + (i1 + 2)) + 3 == i0 + i1 + 6);  // nested sums flatten
  CHECK((i0 + i1).operands().size() == 2);
  CHECK((i0 + (i1 + i2)).operands().size() == 3);
  CHECK(str(64 * i1 + i0) == "i0 + 64*i1");
  CHECK(str(7 - i0) == "-i0 + 7");
  CHECK(str(i0 - 4 * i1 - 1) == "i0 - 4*i1 - 1");
  CHECK(str(-3 * i0) == "-3*i0");
  CHECK(str(-(i0 + 2)) == "-i0 - 2");
  CHECK(str(S("i10") + S("i2") + S("r0") + S("s0") + S("tmp3")) == "i2 + i10 + r0 + s0 + tmp3");
}

TEST_CASE("expr: products of symbols", "[expr][fast]") {
  CHECK(s0 * i1 == i1 * s0);
  CHECK(str(s0 * i1) == "i1*s0");
  CHECK(str((i0 + 1) * s0) == "i0*s0 + s0");
  CHECK(str(2 * s0 * i1 * 3) == "6*i1*s0");
  CHECK(str(-(i1 * s0)) == "-i1*s0");
  CHECK(str(s0 * s0) == "s0*s0");
  // (i0 + 1)*(i1 + 2) = i0*i1 + 2*i0 + i1 + 2
  CHECK((i0 + 1) * (i1 + 2) == i0 * i1 + 2 * i0 + i1 + 2);
  CHECK(str(i0 * s1 + i1) == "i0*s1 + i1");
  CHECK((i0 * s0).kind() == Expr::Kind::Mul);
}

TEST_CASE("expr: floor division and modulo follow Python on constants", "[expr][fast]") {
  CHECK(ir::floordiv(7, 2).is_const(3));
  CHECK(ir::floordiv(-7, 2).is_const(-4));
  CHECK(ir::floordiv(7, -2).is_const(-4));
  CHECK(ir::floordiv(-7, -2).is_const(3));
  CHECK(ir::mod(7, 3).is_const(1));
  CHECK(ir::mod(-7, 3).is_const(2));
  CHECK(ir::mod(7, -3).is_const(-2));
  CHECK(ir::mod(-7, -3).is_const(-1));
  CHECK(ir::min(3, -5).is_const(-5));
  CHECK(ir::max(3, -5).is_const(3));
  // Views of empty tensors build these; they are never evaluated, so they fold to 0.
  CHECK(ir::floordiv(i0, 0).is_const(0));
  CHECK(ir::mod(i0, 0).is_const(0));
}

TEST_CASE("expr: context-free floordiv/mod identities", "[expr][fast]") {
  CHECK(ir::floordiv(i0, 1) == i0);
  CHECK(ir::mod(i0, 1).is_const(0));
  CHECK(ir::floordiv(i0, i0).is_const(1));
  CHECK(ir::mod(i0 * s0, s0).is_const(0));
  CHECK(ir::floordiv(4 * i0, 4) == i0);
  CHECK(ir::floordiv(4 * i0 + 8, 4) == i0 + 2);
  CHECK(ir::floordiv(ir::floordiv(i0, 4), 8) == ir::floordiv(i0, 32));
  CHECK(ir::mod(8 * i0 + i1, 8) == ir::mod(i1, 8));
  CHECK(ir::mod(i1 + 8 * i0 + 16, 8) == ir::mod(i1, 8));
  // (a % (b*c)) // b = (a // b) % c
  CHECK(ir::floordiv(ir::mod(i0, 32), 4) == ir::mod(ir::floordiv(i0, 4), 8));
  CHECK(ir::mod(ir::mod(i0, 8), 4) == ir::mod(i0, 4));
  CHECK(ir::mod(ir::mod(i0, 4), 8) == ir::mod(i0, 4));
  CHECK(ir::floordiv(ir::mod(i0, 4), 8).is_const(0));  // 0 <= i0 % 4 < 8
  // (16*i0 + i1) // 8 = 2*i0 + i1 // 8 for all integers (16*i0 is a multiple of 8).
  CHECK(ir::floordiv(16 * i0 + i1, 8) == 2 * i0 + ir::floordiv(i1, 8));
  // A division inside a sum is pulled in: (2*i0 + i1 // 4) // 3 = (8*i0 + i1) // 12.
  CHECK(ir::floordiv(2 * i0 + ir::floordiv(i1, 4), 3) == ir::floordiv(8 * i0 + i1, 12));
  // and then the multiples split off: (2*i0 + i1 // 4) // 2 = (8*i0 + i1) // 8 = i0 + i1 // 8.
  CHECK(ir::floordiv(2 * i0 + ir::floordiv(i1, 4), 2) == i0 + ir::floordiv(i1, 8));
  // Common factor: (4*i0 + 2) // 8 = (2*i0 + 1) // 4.
  CHECK(ir::floordiv(4 * i0 + 2, 8) == ir::floordiv(2 * i0 + 1, 4));
  // (6*i0) % 4 = 2*((3*i0) % 2) = 2*(i0 % 2)  (3*i0 = 2*i0 + i0)
  CHECK(ir::mod(6 * i0, 4) == 2 * ir::mod(i0, 2));
  // The constant reduces into [0, c): (i0 + 5) % 4 = (i0 + 1) % 4; (i0 + 5) // 4 = (i0 + 1) // 4 + 1.
  CHECK(ir::mod(i0 + 5, 4) == ir::mod(i0 + 1, 4));
  CHECK(ir::floordiv(i0 + 5, 4) == ir::floordiv(i0 + 1, 4) + 1);
  // Negative divisors normalize: i0 // -2 = (-i0) // 2, i0 % -2 = -((-i0) % 2).
  CHECK(ir::floordiv(i0, -2) == ir::floordiv(-i0, 2));
  CHECK(ir::mod(i0, -2) == -ir::mod(-i0, 2));
  // c*(x // c) + x % c = x, even without ranges.
  CHECK(8 * ir::floordiv(i1, 8) + ir::mod(i1, 8) == i1);
  CHECK(s1 * ir::floordiv(i1, s1) + ir::mod(i1, s1) == i1);
}

TEST_CASE("expr: printing parenthesizes", "[expr][fast]") {
  CHECK(str(ir::mod(ir::floordiv(i0, 4), 8)) == "(i0 // 4) % 8");
  CHECK(str(ir::floordiv(i0 + 4 * i1 + 1, 8)) == "(i0 + 4*i1 + 1) // 8");
  CHECK(str(ir::min(3, i0)) == "min(i0, 3)");
  CHECK(str(ir::max(i1, i0)) == "max(i0, i1)");
  CHECK(str(i0 + 8 * ir::floordiv(i1, 8)) == "i0 + 8*(i1 // 8)");
  CHECK(str(ir::floordiv(3 * i0, 4)) == "(3*i0) // 4");
  CHECK(str(ir::floordiv(i1, s0)) == "i1 // s0");
  CHECK(str(ir::floordiv(i1, s0 * s1)) == "i1 // (s0*s1)");
  CHECK(str(ir::mod(-i0 + 3, 4)) == "(-i0 + 3) % 4");
  CHECK(str(-ir::mod(i0, 4)) == "-(i0 % 4)");
}

TEST_CASE("expr: simplify with constant extents", "[expr][fast]") {
  SymbolExtents ext{{"i0", 2}, {"i1", 16}};
  Expr f = i0 * 16 + i1;
  // The example from a [4,8] -> [32] -> [2,16] view chain.
  Expr e = ir::floordiv(f, 8) * 8 + ir::mod(f, 8);
  CHECK(ir::simplify(e, ext) == 16 * i0 + i1);
  CHECK(e == 16 * i0 + i1);  // already by construction (recombination)
  SymbolExtents e4{{"i0", 4}, {"i1", 4}};
  CHECK(ir::simplify(ir::floordiv(i0 + 4 * i1, 4), e4) == i1);
  CHECK(ir::simplify(ir::mod(i0 + 4 * i1, 4), e4) == i0);
  CHECK(ir::simplify(ir::floordiv(i0, 4), e4).is_const(0));
  CHECK(ir::simplify(ir::mod(i0, 4), e4) == i0);
  CHECK(ir::simplify(ir::floordiv(i0 + 4, 4), e4).is_const(1));   // i0 + 4 in [4, 7]
  CHECK(ir::simplify(ir::mod(i0 + 4, 8), e4) == i0 + 4);          // in [4, 7]
  CHECK(ir::simplify(ir::mod(7 - i0, 4), e4) == 3 - i0);          // 7 - i0 in [4, 7]
  CHECK(ir::simplify(ir::floordiv(7 - i0, 4), e4).is_const(1));
  // Small remainder: (4*i0 + i1) // 8 = i0 // 2 and % 8 = 4*(i0 % 2) + i1 when 0 <= i1 < 4.
  SymbolExtents e84{{"i0", 8}, {"i1", 4}};
  CHECK(ir::simplify(ir::floordiv(4 * i0 + i1, 8), e84) == ir::floordiv(i0, 2));
  CHECK(ir::simplify(ir::mod(4 * i0 + i1, 8), e84) == 4 * ir::mod(i0, 2) + i1);
  // Indirect indices (loaded from a tensor) have no known range, but exact splits still apply:
  // (64*tmp3 + i1) // 64 = tmp3 + i1 // 64 = tmp3 for 0 <= i1 < 64.
  CHECK(ir::simplify(ir::floordiv(64 * S("tmp3") + i1, 64), {{"i1", 64}}) == S("tmp3"));
  CHECK(ir::simplify(ir::mod(64 * S("tmp3") + i1, 64), {{"i1", 64}}) == i1);
  // Zero and unit extents (empty tensors, size-1 dims) are harmless; a unit-extent symbol is 0.
  SymbolExtents e0{{"i0", 0}, {"i1", 1}};
  CHECK(ir::evaluate(ir::simplify(-i0 * ir::floordiv(-i0, 2) + ir::mod(i1 * i0, 3), e0),
                     [](const std::string&) { return int64_t{0}; }) == 0);
  CHECK(ir::simplify(ir::floordiv(i1, 4) + ir::mod(i1 + 2, 4), e0).is_const(2));
  CHECK(ir::simplify(4 * i0 + 7 * i1, {{"i0", 3}, {"i1", 1}}) == 4 * i0);
  // Nothing to do when the range is not known.
  CHECK(ir::simplify(ir::floordiv(i0, 4), {}) == ir::floordiv(i0, 4));
  CHECK(ir::simplify(ir::floordiv(S("tmp0"), 4), e4) == ir::floordiv(S("tmp0"), 4));
}

TEST_CASE("expr: views of views", "[expr][fast]") {
  SECTION("reshape round trip [4,8] -> [32] -> [2,16] -> [8,4]") {
    // Output [8,4] index (i0, i1): flat 4*i0 + i1, which is the [2,16] index (f//16, f%16), whose
    // flat is again f, whose [4,8] index is (f//8, f%8): loads offset f of the [4,8] source.
    Expr f = flat_index({i0, i1}, {8, 4});
    std::vector<Expr> mid = unravel(f, {2, 16});
    std::vector<Expr> src = unravel(flat_index(mid, {2, 16}), {4, 8});
    Expr load = flat_index(src, {4, 8});
    CHECK(ir::simplify(load, {{"i0", 8}, {"i1", 4}}) == 4 * i0 + i1);
  }
  SECTION("permute then reshape, and back") {
    // x [2,3,4] (strides 12,4,1); y = x.permute(1,0,2) [3,2,4]: y[a,b,c] = x[b,a,c] = 12*b + 4*a + c.
    auto y = [](const Expr& a, const Expr& b, const Expr& c) { return 12 * b + 4 * a + c; };
    // z = y.reshape(6,4): z[i0,i1] = y[i0//2, i0%2, i1].
    Expr z = y(ir::floordiv(i0, 2), ir::mod(i0, 2), i1);
    Expr zs = ir::simplify(z, {{"i0", 6}, {"i1", 4}});
    CHECK(str(zs) == "i1 + 4*(i0 // 2) + 12*(i0 % 2)");
    // z[3,1] = y[1,1,1] = x[1,1,1] = 12 + 4 + 1 = 17.
    CHECK(eval_at(zs, {{"i0", 3}, {"i1", 1}}) == 17);
    // w = z.reshape(3,2,4): w[j0,j1,j2] = z[2*j0 + j1, j2] = y[j0, j1, j2].
    Expr w = ir::substitute(zs, {{"i0", 2 * S("j0") + S("j1")}, {"i1", S("j2")}});
    CHECK(ir::simplify(w, {{"j0", 3}, {"j1", 2}, {"j2", 4}}) == y(S("j0"), S("j1"), S("j2")));
    // A permutation that keeps dims 1,2 adjacent merges back: x.permute(2,0,1) [4,2,3] has
    // y2[a,b,c] = x[b,c,a] = 12*b + 4*c + a, and reshaping to [4,6] gives
    // 12*(i1//3) + 4*(i1%3) + i0 = 4*(3*(i1//3) + i1%3) + i0 = 4*i1 + i0.
    Expr z2 = 12 * ir::floordiv(i1, 3) + 4 * ir::mod(i1, 3) + i0;
    CHECK(z2 == i0 + 4 * i1);
  }
  SECTION("flatten of a sliced tensor") {
    // x [4,10]; s = x[:, 2:6] [4,4]: s[i,j] = 10*i + j + 2. Flatten to [16], view back as [4,4].
    auto s = [](const Expr& i, const Expr& j) { return 10 * i + j + 2; };
    Expr g = S("g");
    std::vector<Expr> ij = unravel(g, {4, 4});
    Expr flat = s(ij[0], ij[1]);
    CHECK(ir::simplify(flat, {{"g", 16}}) == 10 * ir::floordiv(g, 4) + ir::mod(g, 4) + 2);
    Expr back = ir::substitute(flat, {{"g", flat_index({i0, i1}, {4, 4})}});
    CHECK(ir::simplify(back, {{"i0", 4}, {"i1", 4}}) == 10 * i0 + i1 + 2);
    // A strided slice: x [8], x[1::2] [4]: t[j] = 2*j + 1; as [2,2]: t[2*i0 + i1] = 4*i0 + 2*i1 + 1.
    Expr t = 2 * flat_index({i0, i1}, {2, 2}) + 1;
    CHECK(str(t) == "4*i0 + 2*i1 + 1");
  }
  SECTION("unfold then flatten then reshape back") {
    // x [10]; u = x.unfold(0, 3, 2) [4,3]: u[a,b] = x[2*a + b]. Flatten to [12], view as [4,3].
    auto u = [](const Expr& a, const Expr& b) { return 2 * a + b; };
    Expr f = S("f");
    std::vector<Expr> ab = unravel(f, {4, 3});
    Expr flat = u(ab[0], ab[1]);
    Expr back = ir::substitute(flat, {{"f", flat_index({i0, i1}, {4, 3})}});
    CHECK(ir::simplify(back, {{"i0", 4}, {"i1", 3}}) == 2 * i0 + i1);
    // u[1,2] = x[4]; flat index 5 of u is u[1,2]: 2*(5//3) + 5%3 = 2 + 2 = 4.
    CHECK(eval_at(flat, {{"f", 5}}) == 4);
  }
  SECTION("flip then reshape") {
    // x [2,4] flattened and flipped: y[g] = x.flat[7 - g]; viewed as [2,4] the source index is
    // (h // 4, h % 4) with h = 7 - (4*i0 + i1), whose flat offset is h itself.
    Expr h = 7 - flat_index({i0, i1}, {2, 4});
    CHECK(str(h) == "-4*i0 - i1 + 7");
    Expr load = flat_index(unravel(h, {2, 4}), {2, 4});
    CHECK(load == h);
    SymbolExtents ext{{"i0", 2}, {"i1", 4}};
    CHECK(ir::simplify(ir::floordiv(h, 4), ext) == 1 - i0);  // (7 - 4*i0 - i1) // 4 = 1 - i0
    CHECK(ir::simplify(ir::mod(h, 4), ext) == 3 - i1);
  }
  SECTION("expand, select, diagonal") {
    // x [1,4] expanded to [3,4] has stride 0 on dim 0: y[a,b] = b. Flattened: y[f//4, f%4] = f % 4.
    Expr f = S("f");
    std::vector<Expr> ab = unravel(f, {3, 4});
    CHECK(ir::simplify(0 * ab[0] + ab[1], {{"f", 12}}) == ir::mod(f, 4));
    // x [3,4,5].select(1, 2): y[a,b] = 20*a + 4*5*0 + 2*5 + b = 20*a + b + 10.
    CHECK(flat_index({i0, Expr(2), i1}, {3, 4, 5}) == 20 * i0 + i1 + 10);
    // x [4,4].diagonal(): d[i] = x[i,i] = 5*i; stride 5.
    CHECK(ir::affine_coefficient(flat_index({i0, i0}, {4, 4}), "i0") == Expr(5));
  }
}

TEST_CASE("expr: symbolic divisors", "[expr][fast]") {
  SymbolExtents ext{{"i0", s0}, {"i1", s1}};
  Expr f = i0 * s1 + i1;
  CHECK(ir::floordiv(f, s1) == i0 + ir::floordiv(i1, s1));  // exact, no ranges needed
  CHECK(ir::mod(f, s1) == ir::mod(i1, s1));
  CHECK(ir::simplify(ir::floordiv(f, s1), ext) == i0);
  CHECK(ir::simplify(ir::mod(f, s1), ext) == i1);
  CHECK(str(ir::floordiv(f, s1)) == "i0 + i1 // s1");
  // Reshape [s0, s1] -> [s0*s1] -> [s0, s1] collapses by recombination alone.
  Expr load = flat_index(unravel(f, {s0, s1}), {s0, s1});
  CHECK(load == f);
  // Three dims [s0, s1, s2]: flat = i0*s1*s2 + i1*s2 + i2.
  SymbolExtents ext3{{"i0", s0}, {"i1", s1}, {"i2", s2}};
  Expr g = flat_index({i0, i1, i2}, {s0, s1, s2});
  CHECK(g == i0 * s1 * s2 + i1 * s2 + i2);
  CHECK(ir::simplify(ir::floordiv(g, s1 * s2), ext3) == i0);
  CHECK(ir::simplify(ir::mod(ir::floordiv(g, s2), s1), ext3) == i1);
  CHECK(ir::simplify(ir::mod(g, s2), ext3) == i2);
  CHECK(ir::simplify(ir::mod(g, s1 * s2), ext3) == i1 * s2 + i2);
  // Symbolic extents of a reshape [s0, 4] -> [4*s0] -> [s0, 4].
  SymbolExtents ext4{{"i0", s0}, {"i1", 4}};
  CHECK(ir::simplify(ir::floordiv(4 * i0 + i1, 4), ext4) == i0);
  // (i0 // s0) // s1 = i0 // (s0*s1) since dynamic sizes are >= 1.
  CHECK(ir::floordiv(ir::floordiv(i0, s0), s1) == ir::floordiv(i0, s0 * s1));
  // (i0 % (s0*s1)) // s0 = (i0 // s0) % s1 and (i0 % (2*s0)) % s0 = i0 % s0 for positive sizes.
  CHECK(ir::floordiv(ir::mod(i0, s0 * s1), s0) == ir::mod(ir::floordiv(i0, s0), s1));
  CHECK(ir::mod(ir::mod(i0, 2 * s0), s0) == ir::mod(i0, s0));
  CHECK(ir::mod(ir::mod(i0, s0), s0) == ir::mod(i0, s0));
  CHECK(ir::mod(ir::mod(i0, s0), s1) != ir::mod(i0, s1));  // s1 need not divide s0
  // (i0 + i1 // s1) // s0 = (i0*s1 + i1) // (s0*s1) for positive sizes.
  CHECK(ir::floordiv(i0 + ir::floordiv(i1, s1), s0) == ir::floordiv(i0 * s1 + i1, s0 * s1));
  // Flip of a [s0, s1] tensor, reshaped: h = s0*s1 - 1 - (i0*s1 + i1). Then
  // h // s1 = s0 - i0 + (-i1 - 1) // s1 = s0 - i0 - 1 (as -s1 <= -i1 - 1 < 0), h % s1 = s1 - i1 - 1.
  Expr h = s0 * s1 - 1 - f;
  CHECK(str(h) == "-i0*s1 - i1 + s0*s1 - 1");
  CHECK(ir::simplify(ir::floordiv(h, s1), ext) == s0 - i0 - 1);
  CHECK(ir::simplify(ir::mod(h, s1), ext) == s1 - i1 - 1);
  CHECK(flat_index(unravel(h, {s0, s1}), {s0, s1}) == h);
  // Not provable: i1 may exceed s0.
  CHECK(ir::simplify(ir::floordiv(i1, s0), ext) == ir::floordiv(i1, s0));
}

TEST_CASE("expr: bounds", "[expr][fast]") {
  SymbolExtents ext{{"i0", 2}, {"i1", 4}};
  CHECK(ir::lower_bound(4 * i0 + i1, ext) == 0);
  CHECK(ir::upper_bound(4 * i0 + i1, ext) == 7);
  CHECK(ir::lower_bound(7 - i1, ext) == 4);
  CHECK(ir::upper_bound(-2 * i1, ext) == 0);
  CHECK(ir::lower_bound(-2 * i1, ext) == -6);
  CHECK(ir::upper_bound(ir::mod(S("tmp0"), 4), ext) == 3);
  CHECK(ir::lower_bound(ir::mod(S("tmp0"), 4), ext) == 0);
  CHECK(ir::upper_bound(ir::floordiv(4 * i0 + i1, 3), ext) == 2);  // 7 // 3
  CHECK(ir::upper_bound(ir::min(i1, 2), ext) == 2);
  // Products of sign-definite factors with an open end: -i1 <= 0 and (-i1) // 2 <= 0.
  SymbolExtents open{{"i1", s1}};
  CHECK(ir::lower_bound(-i1 * ir::floordiv(-i1, 2), open) == 0);
  CHECK(ir::upper_bound(-i1 * s1, open) == 0);
  CHECK(ir::lower_bound(ir::max(i1, 2), ext) == 2);
  CHECK_FALSE(ir::upper_bound(S("tmp0"), ext));
  CHECK_FALSE(ir::lower_bound(S("tmp0"), ext));
  CHECK(ir::lower_bound(s0, {}) == 1);  // dynamic sizes are >= 1
  CHECK_FALSE(ir::upper_bound(s0, {}));
  // Symbolic extent: i1 < s0, so i1 - s0 <= -1 and s0 - i1 >= 1.
  SymbolExtents sym{{"i1", s0}};
  CHECK(ir::upper_bound(i1 - s0, sym) == -1);
  CHECK(ir::lower_bound(s0 - i1, sym) == 1);
  CHECK(ir::lower_bound(i1, sym) == 0);
  CHECK_FALSE(ir::upper_bound(i1, sym));
}

TEST_CASE("expr: min and max", "[expr][fast]") {
  CHECK(ir::min(i0, i0 + 1) == i0);
  CHECK(ir::max(i0, i0 + 1) == i0 + 1);
  CHECK(ir::min(i0, i0) == i0);
  CHECK(ir::min(ir::mod(i0, 4), 10) == ir::mod(i0, 4));
  CHECK(ir::min(3, i0) == ir::min(i0, 3));
  CHECK(ir::simplify(ir::min(i0, 10), {{"i0", 4}}) == i0);
  CHECK(ir::simplify(ir::max(i0, 0), {{"i0", 4}}) == i0);
  CHECK(ir::simplify(ir::min(i0, 2), {{"i0", 4}}) == ir::min(i0, 2));
  CHECK(ir::simplify(ir::min(i1, s0), {{"i1", s0}}) == i1);
  CHECK(eval_at(ir::max(i0 - 3, 0), {{"i0", 1}}) == 0);
}

TEST_CASE("expr: substitute, evaluate, free symbols, affine coefficients", "[expr][fast]") {
  Expr j = S("j");
  CHECK(ir::substitute(4 * i0 + i1, {{"i0", j + 1}}) == 4 * j + i1 + 4);
  CHECK(ir::substitute(ir::floordiv(i0, 4), {{"i0", 4 * j + 2}}) == j);  // j + 2 // 4 = j
  CHECK(ir::substitute(ir::floordiv(i0, 4), {{"i0", Expr(9)}}).is_const(2));
  // Python semantics: -7 // 3 = -3, -7 % 3 = 2, 7 // -3 = -3, 7 % -3 = -2.
  CHECK(eval_at(ir::floordiv(i0, 3), {{"i0", -7}}) == -3);
  CHECK(eval_at(ir::mod(i0, 3), {{"i0", -7}}) == 2);
  CHECK(eval_at(ir::floordiv(i0, -3), {{"i0", 7}}) == -3);
  CHECK(eval_at(ir::mod(i0, -3), {{"i0", 7}}) == -2);
  CHECK(eval_at(ir::mod(i0, s0), {{"i0", -1}, {"s0", 5}}) == 4);
  CHECK(eval_at(12 * ir::floordiv(i1, 3) + 4 * ir::mod(i1, 3) + i0, {{"i0", 3}, {"i1", 5}}) == 23);
  CHECK_THROWS_AS(eval_at(ir::floordiv(i0, s0), {{"i0", 1}, {"s0", 0}}), foundry::InternalError);
  CHECK(ir::free_symbols(i0 * s0 + 3) == std::set<std::string>{"i0", "s0"});
  CHECK(ir::free_symbols(Expr(3)).empty());
  CHECK(ir::free_symbols(ir::min(ir::floordiv(i2, s1), 4)) == std::set<std::string>{"i2", "s1"});
  CHECK(ir::affine_coefficient(4 * i0 + i1, "i0") == Expr(4));
  CHECK(ir::affine_coefficient(i0 * s0 + i1, "i0") == s0);
  CHECK(ir::affine_coefficient(2 * i0 + 3 * i0 * s1 + 7, "i0") == 3 * s1 + 2);
  CHECK(ir::affine_coefficient(i1 + 3, "i0") == Expr(0));
  CHECK_FALSE(ir::affine_coefficient(ir::floordiv(i0, 4) + i1, "i0"));
  CHECK_FALSE(ir::affine_coefficient(i0 * i0, "i0"));
  CHECK_FALSE(ir::affine_coefficient(ir::min(i0, 3), "i0"));
  CHECK(ir::affine_coefficient(ir::floordiv(i0, 4) + i1, "i1") == Expr(1));
}

TEST_CASE("expr: equality, hash and order", "[expr][fast]") {
  Expr a = 3 * i0 + ir::mod(i1, 4) + i0 * s0;
  Expr b = i0 * s0 + (ir::mod(i1, 4) + i0 * 3);
  CHECK(a == b);
  CHECK(a.hash() == b.hash());
  CHECK(std::hash<Expr>{}(a) == b.hash());
  CHECK(str(a) == str(b));
  CHECK(a != a + 1);
  CHECK_FALSE(a < b);
  CHECK_FALSE(b < a);
  std::vector<Expr> xs{Expr(0), Expr(-3), i0, i1, S("i10"), s0, 2 * i0, i0 * s0, ir::floordiv(i0, 4),
                       ir::mod(i0, 4), ir::min(i0, 3), ir::max(i0, 3), i0 + 1, (i0 + 1) * (i1 + 1)};
  for (const Expr& x : xs)
    for (const Expr& y : xs) {
      bool eq = x == y;
      CHECK(eq == (!(x < y) && !(y < x)));  // total and consistent with ==
      for (const Expr& z : xs)
        if (x < y && y < z) CHECK(x < z);
    }
  CHECK(Expr(-3) < Expr(0));
  CHECK(Expr(5) < i0);
  CHECK(i1 < S("i10"));
  std::set<Expr> set(xs.begin(), xs.end());
  CHECK(set.size() == xs.size());
}

TEST_CASE("expr: large inputs stay cheap", "[expr][fast]") {
  // 200 terms added one at a time, then removed again.
  Expr sum = 0;
  for (int k = 0; k < 200; ++k) sum = sum + (k + 1) * S("i" + std::to_string(k));
  CHECK(sum.operands().size() == 200);
  for (int k = 0; k < 200; ++k) sum = sum - (k + 1) * S("i" + std::to_string(k));
  CHECK(sum.is_const(0));
  // A product of four 8-term sums would have 4096 terms: it stays partly factored.
  Expr p = 1;
  for (int k = 0; k < 4; ++k) {
    Expr s = 0;
    for (int t = 0; t < 8; ++t) s = s + S("x" + std::to_string(8 * k + t));
    p = p * s;
  }
  CHECK(p.operands().size() <= 64);
  // A long chain of reshapes collapses at every step.
  Expr f = 16 * i0 + i1;
  SymbolExtents ext{{"i0", 2}, {"i1", 16}};
  for (int k = 0; k < 100; ++k) f = ir::simplify(flat_index(unravel(f, {4, 8}), {4, 8}), ext);
  CHECK(f == 16 * i0 + i1);
  // Deeply nested divisions fold into one.
  Expr d = i0;
  for (int k = 0; k < 30; ++k) d = ir::floordiv(d, 2);
  CHECK(d == ir::floordiv(i0, int64_t{1} << 30));
}

// ---------------------------------------------------------------------------------------------
// Randomized: random trees built through the constructors, checked against a plain reference
// evaluator at every point of a small iteration space, before and after simplify.

namespace {

// Build with -DFOUNDRY_EXPR_STRESS=N to run N times as many random cases with varying seeds.
#ifndef FOUNDRY_EXPR_STRESS
#define FOUNDRY_EXPR_STRESS 1
#endif
constexpr int kStress = FOUNDRY_EXPR_STRESS;

using Env = std::map<std::string, int64_t>;
using Ref = std::function<int64_t(const Env&)>;

int64_t py_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t py_mod(int64_t a, int64_t b) { return a - b * py_div(a, b); }

// An expression and its reference evaluator, built side by side.
struct Sample {
  Expr e;
  Ref ref;
};

struct Random {
  std::mt19937 rng;
  std::vector<std::string> syms;  // leaves
  std::vector<Sample> divisors;   // nonzero everywhere

  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); }

  Sample leaf() {
    if (pick(3) == 0) {
      int64_t c = pick(14) - 4;
      return {Expr(c), [c](const Env&) { return c; }};
    }
    std::string s = syms[pick(static_cast<int>(syms.size()))];
    return {S(s), [s](const Env& env) { return env.at(s); }};
  }

  Sample gen(int depth) {
    if (depth == 0 || pick(4) == 0) return leaf();
    Sample a = gen(depth - 1);
    Ref ra = a.ref;
    switch (pick(9)) {
      case 0: {
        Sample b = gen(depth - 1);
        return {a.e + b.e, [ra, rb = b.ref](const Env& e) { return ra(e) + rb(e); }};
      }
      case 1: {
        Sample b = gen(depth - 1);
        return {a.e - b.e, [ra, rb = b.ref](const Env& e) { return ra(e) - rb(e); }};
      }
      case 2: {
        int64_t k = pick(9) - 3;
        return {k * a.e, [ra, k](const Env& e) { return k * ra(e); }};
      }
      case 3: {  // nonlinear, kept shallow
        Sample b = gen(depth > 1 ? 1 : 0);
        return {a.e * b.e, [ra, rb = b.ref](const Env& e) { return ra(e) * rb(e); }};
      }
      case 4:
      case 5: {
        const Sample& d = divisors[pick(static_cast<int>(divisors.size()))];
        return {ir::floordiv(a.e, d.e), [ra, rd = d.ref](const Env& e) { return py_div(ra(e), rd(e)); }};
      }
      case 6:
      case 7: {
        const Sample& d = divisors[pick(static_cast<int>(divisors.size()))];
        return {ir::mod(a.e, d.e), [ra, rd = d.ref](const Env& e) { return py_mod(ra(e), rd(e)); }};
      }
      default: {
        Sample b = gen(depth - 1);
        if (pick(2)) return {ir::min(a.e, b.e), [ra, rb = b.ref](const Env& e) { return std::min(ra(e), rb(e)); }};
        return {ir::max(a.e, b.e), [ra, rb = b.ref](const Env& e) { return std::max(ra(e), rb(e)); }};
      }
    }
  }
};

Sample const_divisor(int64_t c) { return {Expr(c), [c](const Env&) { return c; }}; }
Sample sym_divisor(const Expr& d) {
  return {d, [d](const Env& env) { return ir::evaluate(d, [&](const std::string& s) { return env.at(s); }); }};
}

// Checks e and simplify(e) against ref at every env, that the bounds hold, and idempotence.
void check_everywhere(const Expr& e, const Ref& ref, const SymbolExtents& ext,
                      const std::vector<Env>& envs) {
  Expr simple = ir::simplify(e, ext);
  auto lo = ir::lower_bound(e, ext), hi = ir::upper_bound(e, ext);
  auto slo = ir::lower_bound(simple, ext), shi = ir::upper_bound(simple, ext);
  for (const Env& env : envs) {
    int64_t want = ref(env);
    int64_t got = eval_at(e, env), got_simple = eval_at(simple, env);
    if (got != want || got_simple != want || (lo && *lo > want) || (hi && *hi < want) ||
        (slo && *slo > want) || (shi && *shi < want)) {
      std::string point;
      for (const auto& [k, v] : env) point += k + "=" + std::to_string(v) + " ";
      INFO("expr " << str(e) << "\nsimplified " << str(simple) << "\nat " << point);
      CHECK(got == want);
      CHECK(got_simple == want);
      CHECK((!lo || *lo <= want));
      CHECK((!hi || *hi >= want));
      CHECK((!slo || *slo <= want));
      CHECK((!shi || *shi >= want));
      return;
    }
  }
  CHECK(ir::simplify(simple, ext) == simple);  // simplify is idempotent
}

}  // namespace

TEST_CASE("expr: random expressions agree with a reference evaluator", "[expr][fast]") {
  Random r{std::mt19937(12345 + kStress), {"i0", "i1", "i2", "i3"}, {}};
  for (int64_t c : {1, 2, 3, 4, 5, 6, 8, -2, -3}) r.divisors.push_back(const_divisor(c));
  SymbolExtents ext{{"i0", 3}, {"i1", 4}, {"i2", 5}, {"i3", 1}};
  std::vector<Env> envs;
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t b = 0; b < 4; ++b)
      for (int64_t c = 0; c < 5; ++c) envs.push_back({{"i0", a}, {"i1", b}, {"i2", c}, {"i3", 0}});
  for (int n = 0; n < 1500 * kStress; ++n) {
    Sample x = r.gen(4);
    check_everywhere(x.e, x.ref, ext, envs);
  }
}

TEST_CASE("expr: random view-like expressions with constant extents", "[expr][fast]") {
  // Reshape chains over random shapes: every reshape of a contiguous tensor loads its own flat
  // index, so the result must simplify to exactly the output's (simplified) flat index.
  std::mt19937 rng(777 + kStress);
  const std::vector<std::vector<int64_t>> shapes{{24}, {2, 12}, {4, 6}, {2, 3, 4}, {6, 4}, {3, 8}, {2, 2, 6}, {1, 24}, {4, 1, 6}};
  for (int n = 0; n < 200 * kStress; ++n) {
    auto pick = [&]() -> const std::vector<int64_t>& { return shapes[rng() % shapes.size()]; };
    const auto& out = pick();
    std::vector<Expr> idx, out_shape;
    SymbolExtents ext;
    for (size_t k = 0; k < out.size(); ++k) {
      idx.push_back(S("i" + std::to_string(k)));
      out_shape.push_back(out[k]);
      ext["i" + std::to_string(k)] = out[k];
    }
    Expr f = flat_index(idx, out_shape);
    Expr cur = f;
    for (int hop = 0; hop < 3; ++hop) {
      const auto& sh = pick();
      std::vector<Expr> shape(sh.begin(), sh.end());
      cur = flat_index(unravel(cur, shape), shape);
    }
    CHECK(ir::simplify(cur, ext) == ir::simplify(f, ext));  // size-1 dims: their index is 0
  }
}

TEST_CASE("expr: reshape chains with symbolic sizes", "[expr][fast]") {
  // Shapes of the same numel s0*s1*4; each reshape of a contiguous tensor loads its own flat
  // index, so any chain must collapse to the output's flat index.
  std::mt19937 rng(4242 + kStress);
  const std::vector<std::vector<Expr>> shapes{
      {s0, s1, 4}, {s0 * s1 * 4}, {s0 * s1, 4}, {s0, s1 * 4}, {s0, s1, 2, 2}, {s0, 2 * s1, 2}, {4 * s0, s1}};
  for (int n = 0; n < 100 * kStress; ++n) {
    auto pick = [&]() -> const std::vector<Expr>& { return shapes[rng() % shapes.size()]; };
    const auto& out = pick();
    std::vector<Expr> idx;
    SymbolExtents ext;
    for (size_t k = 0; k < out.size(); ++k) {
      idx.push_back(S("i" + std::to_string(k)));
      ext["i" + std::to_string(k)] = out[k];
    }
    Expr f = flat_index(idx, out);
    Expr cur = f;
    std::string path;
    for (int hop = 0; hop < 3; ++hop) {
      const auto& shape = pick();
      for (const Expr& d : shape) path += str(d) + ",";
      path += " -> ";
      cur = flat_index(unravel(cur, shape), shape);
    }
    INFO("via " << path);
    CHECK(ir::simplify(cur, ext) == f);
  }
}

TEST_CASE("expr: random expressions with symbolic sizes", "[expr][fast]") {
  // i0 < s0, i1 < s1; divisors include the sizes themselves. Dynamic sizes range over 1..4.
  Random r{std::mt19937(999 + kStress), {"i0", "i1", "s0", "s1"}, {}};
  for (int64_t c : {2, 3, -2}) r.divisors.push_back(const_divisor(c));
  for (const Expr& d : {s0, s1, s0 * s1, 2 * s1, -s1}) r.divisors.push_back(sym_divisor(d));
  SymbolExtents ext{{"i0", s0}, {"i1", s1}};
  std::vector<Env> envs;
  for (int64_t a = 1; a <= 4; ++a)
    for (int64_t b = 1; b <= 4; ++b)
      for (int64_t x = 0; x < a; ++x)
        for (int64_t y = 0; y < b; ++y) envs.push_back({{"s0", a}, {"s1", b}, {"i0", x}, {"i1", y}});
  Expr flat = i0 * s1 + i1;

  for (int n = 0; n < 800 * kStress; ++n) {
    Sample x = r.gen(3);
    check_everywhere(x.e, x.ref, ext, envs);
    // The same expression on the unflattened index of a [s0, s1] tensor simplifies the same way.
    Expr on_flat = ir::substitute(x.e, {{"i0", ir::floordiv(flat, s1)}, {"i1", ir::mod(flat, s1)}});
    CHECK(ir::simplify(on_flat, ext) == ir::simplify(x.e, ext));

  }
}
