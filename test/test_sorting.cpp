// Sorting long rows (sort, topk as the library call of runtime/foundry_sort.h), interpreted and
// compiled, against an oracle written here: rows of 50000 elements are too large to keep
// PyTorch's outputs for (samples/dyn_sort holds PyTorch's references for shorter rows).
//
// The oracle has PyTorch's rules, which samples/dyn_sort and test/data/core_ops/sort_topk check
// against PyTorch's own outputs: torch.sort is stable on the CPU (equal elements keep their input
// order; stable=True promises it); NaN is larger than every number (last ascending, first
// descending) and equal to NaN; -0.0 equals 0.0. torch.topk returns the k largest (smallest)
// values in order, but which of several equal elements it returns is its partial sort's choice
// (torch 2.15: topk([1, 3, 3, 2, 3, nan, 1, nan], 4) has indices [7, 5, 4, 2]), so foundryc takes
// the first k of the stable sort and the oracle checks exactly that.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "foundry/runtime/loaded_model.h"
#include "graph_builder.h"
#include "support.h"

namespace foundry::test {
namespace {

constexpr int64_t kRows = 4, kLength = 50000, kTop = 100;

// PyTorch's order of two keys: NaN above every number.
template <typename T>
bool less_than(T a, T b) {
  bool a_nan = std::isnan(static_cast<double>(a)), b_nan = std::isnan(static_cast<double>(b));
  if (a_nan || b_nan) return !a_nan && b_nan;
  return a < b;
}

// The stable sorted positions of every row of `x` ([rows, length], row-major).
template <typename T>
std::vector<int64_t> stable_order(const std::vector<T>& x, bool descending) {
  std::vector<int64_t> out;
  for (int64_t r = 0; r < kRows; ++r) {
    const T* row = x.data() + r * kLength;
    std::vector<int64_t> order(kLength);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) {
      return descending ? less_than(row[j], row[i]) : less_than(row[i], row[j]);
    });
    out.insert(out.end(), order.begin(), order.end());
  }
  return out;
}

// The first `k` positions of each row of a [rows, length] order.
std::vector<int64_t> first(const std::vector<int64_t>& order, int64_t k) {
  std::vector<int64_t> out;
  for (int64_t r = 0; r < kRows; ++r)
    out.insert(out.end(), order.begin() + r * kLength, order.begin() + r * kLength + k);
  return out;
}

// Values from a few numbers (many ties), with NaN, infinities and signed zeros among them.
std::vector<float> float_rows() {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float choices[] = {-2.0f, -0.5f, -0.0f, 0.0f, 0.5f, 1.0f, 3.0f, nan, inf, -inf};
  std::mt19937 gen(7);
  std::vector<float> x(kRows * kLength);
  for (float& v : x) v = gen() % 3 ? choices[gen() % 10] : std::ldexp(static_cast<float>(gen() % 100000), -10);
  return x;
}

std::vector<int64_t> int_rows() {
  std::mt19937 gen(11);
  std::vector<int64_t> y(kRows * kLength);
  for (int64_t& v : y) v = static_cast<int64_t>(gen() % 50) - 25 + (gen() % 1000 == 0 ? (int64_t{1} << 60) : 0);
  return y;
}

// Each row of `x` gathered at `positions` ([rows, k]).
template <typename T>
std::vector<T> gathered(const std::vector<T>& x, const std::vector<int64_t>& positions, int64_t k) {
  std::vector<T> out;
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t p = 0; p < k; ++p) out.push_back(x[r * kLength + positions[r * k + p]]);
  return out;
}

// Whether `got` holds exactly `want` (bit for bit, so that NaN matches NaN and -0.0 is not 0.0).
template <typename T>
void check_exact(const NpyArray& got, const std::vector<T>& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.numel() == static_cast<int64_t>(want.size()));
  const T* g = got.as<T>();
  int64_t bad = 0, first_bad = -1;
  for (size_t e = 0; e < want.size(); ++e)
    if (std::memcmp(&g[e], &want[e], sizeof(T)) != 0 && bad++ == 0) first_bad = static_cast<int64_t>(e);
  INFO(bad << " elements differ, the first at " << first_bad);
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("sorting: sort and topk of 50000-wide rows with ties and NaN match a stable-sort oracle, interpreted and compiled",
          "[sorting][compiled]") {
  Builder b;
  Value* x = b.input("x", {kRows, kLength});
  Value* y = b.input("y", {kRows, kLength}, DType::Int64);
  auto sort = [&](Value* t, bool descending) {
    for (Value* v : b.node("sort.stable", {pos(t), named("stable", Arg::of_bool(true)), named("dim", Arg::of_int(-1)),
                                           named("descending", Arg::of_bool(descending))})->outputs)
      b.output(v);
  };
  auto topk = [&](Value* t, bool largest) {
    for (Value* v : b.node("topk", {pos(t), pos(Arg::of_int(kTop)), pos(Arg::of_int(1)), pos(Arg::of_bool(largest))})->outputs)
      b.output(v);
  };
  for (bool flag : {false, true}) {
    sort(x, flag);
    sort(y, flag);
    topk(x, flag);
    topk(y, flag);
  }
  const std::vector<float> xs = float_rows();
  const std::vector<int64_t> ys = int_rows();
  std::vector<NpyArray> inputs = {npy_array(DType::Float32, {kRows, kLength}, xs), npy_array(DType::Int64, {kRows, kLength}, ys)};
  // Outputs per flag (ascending / smallest, then descending / largest): sort x, sort y, topk x, topk y.
  auto check = [&](const std::vector<NpyArray>& got) {
    REQUIRE(got.size() == 16);
    for (int f = 0; f < 2; ++f) {
      const bool descending = f == 1;
      const std::vector<int64_t> xo = stable_order(xs, descending), yo = stable_order(ys, descending);
      const std::string how = descending ? "descending / largest" : "ascending / smallest";
      const NpyArray* out = &got[8 * f];
      check_exact(out[0], gathered(xs, xo, kLength), "sort float32 values, " + how);
      check_exact(out[1], xo, "sort float32 indices, " + how);
      check_exact(out[2], gathered(ys, yo, kLength), "sort int64 values, " + how);
      check_exact(out[3], yo, "sort int64 indices, " + how);
      check_exact(out[4], gathered(xs, first(xo, kTop), kTop), "topk float32 values, " + how);
      check_exact(out[5], first(xo, kTop), "topk float32 indices, " + how);
      check_exact(out[6], gathered(ys, first(yo, kTop), kTop), "topk int64 values, " + how);
      check_exact(out[7], first(yo, kTop), "topk int64 indices, " + how);
    }
  };
  SECTION("the reference evaluator") { check(evaluate(b.g, inputs)); }
  SECTION("compiled") {
    TempDir tmp("foundry_sorting_");
    compile_graph(b.g, tmp / "model", tmp / "cache");
    check(LoadedModel(tmp / "model/model.so", "bounds", tmp / "model").run(inputs));
  }
}

}  // namespace foundry::test
