// Sorting rows (aten sort, sort.stable, argsort, msort, topk): the library call that generated
// externs and the reference evaluator both run, so that both order elements by the one rule below.
// Include guards rather than #pragma once: several models' copies may meet in one build.
#ifndef FOUNDRY_SORT_H
#define FOUNDRY_SORT_H
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace foundry_rt {
namespace sort {

// PyTorch's order: NaN above every number (so last ascending, first descending), NaNs equal to
// each other; -0.0 equals 0.0 as `<` says. Integers and bools compare as numbers.
template <typename K>
inline bool is_nan(K v) {
  return v != v;
}
template <typename K>
inline bool greater(K a, K b) {
  return is_nan(a) ? !is_nan(b) : a > b;
}

// Whether the element with key `a` at row position `i` comes before the one with key `b` at
// position `j`: by key, then by position. The position makes the order total, so that any sort
// (and a partial one, for topk) gives the stable sort's result: equal elements keep their input
// order, as PyTorch's CPU sort does.
template <typename K>
inline bool comes_before(K a, int64_t i, K b, int64_t j, bool descending) {
  if (descending ? greater(a, b) : greater(b, a)) return true;
  if (descending ? greater(b, a) : greater(a, b)) return false;
  return i < j;
}

// A strided tensor of `rank` dims whose rows run along `dim`.
struct Rows {
  const int64_t* sizes;
  const int64_t* strides;  // in elements
  int rank;
  int dim;
};

// The element offset of the start of row `r` (rows in C order of the other dims).
inline int64_t row_start(const Rows& t, int64_t r) {
  int64_t offset = 0;
  for (int d = t.rank - 1; d >= 0; --d) {
    if (d == t.dim) continue;
    offset += (r % t.sizes[d]) * t.strides[d];
    r /= t.sizes[d];
  }
  return offset;
}

// Writes the positions of row `r`'s first `k` elements in sorted order to `out` (int64, the
// input's sizes with `dim` of size k, contiguous). `key` maps a stored element to what is
// compared (16-bit floats stored as bits to float).
template <typename T, typename KeyOf>
void sort_row(const T* data, const Rows& t, int64_t r, int64_t k, bool descending, KeyOf key, int64_t* out) {
  const int64_t n = t.sizes[t.dim], stride = t.strides[t.dim];
  const T* row = data + row_start(t, r);
  using K = decltype(key(row[0]));
  std::vector<K> keys(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) keys[i] = key(row[i * stride]);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  auto before = [&](int64_t i, int64_t j) { return comes_before(keys[i], i, keys[j], j, descending); };
  if (k < n)
    std::partial_sort(order.begin(), order.begin() + k, order.end(), before);  // O(n log k): topk
  else
    std::sort(order.begin(), order.end(), before);
  // The output's row: `dim` has size k, the dims after it are contiguous behind it.
  int64_t inner = 1;
  for (int d = t.dim + 1; d < t.rank; ++d) inner *= t.sizes[d];
  int64_t outer = r / inner, within = r % inner;
  int64_t* dst = out + outer * k * inner + within;
  for (int64_t p = 0; p < k; ++p) dst[p * inner] = order[p];
}

// Every row of `data`; rows run on `threads` threads when there are several and enough work.
template <typename T, typename KeyOf>
void sort_rows(const T* data, const Rows& t, int64_t k, bool descending, KeyOf key, int threads, int64_t* out) {
  int64_t rows = 1;
  for (int d = 0; d < t.rank; ++d)
    if (d != t.dim) rows *= t.sizes[d];
  const int64_t n = t.rank ? t.sizes[t.dim] : 1;
  const bool parallel = rows > 1 && rows * n >= 32768;  // else starting threads costs more
  (void)parallel;  // unused without OpenMP (the reference evaluator runs rows one by one)
  (void)threads;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic) num_threads(threads) if (parallel)
#endif
  for (int64_t r = 0; r < rows; ++r) sort_row(data, t, r, k, descending, key, out);
}

// The key of an element stored as itself.
template <typename T>
struct Same {
  T operator()(T v) const { return v; }
};

}  // namespace sort
}  // namespace foundry_rt

#endif  // FOUNDRY_SORT_H
