// Attention as one call: out = softmax(scale * q k^T + mask) v, computed a block of queries at a
// time against blocks of keys with FlashAttention-2's running softmax (each row keeps its maximum
// so far, the sum of its exponentials and its weighted sum of values, rescaled when the maximum
// grows), so that the [queries, keys] score matrix never exists whole: a block of scores lives in
// the thread's cache between its two products. The products are oneDNN's sgemm on the operands as
// stored; the exponentials are vector code (foundry_vec.h).
// Include guards rather than #pragma once: several models' copies may meet in one build.
#ifndef FOUNDRY_ATTENTION_H
#define FOUNDRY_ATTENTION_H
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <oneapi/dnnl/dnnl.h>  // dnnl_sgemm (the C API: a small header)

#include "foundry_dnnl.h"  // TeamSize
#include "foundry_vec.h"

namespace foundry_rt {
namespace attention {

// A batch of matrices [batch, rows, cols] as stored: element (b, i, j) at
// data[b * batch + i * rows + j * cols]. One of `rows` and `cols` is 1 (sgemm reads either).
struct Matrices {
  const float* data;
  int64_t batch, rows, cols;  // strides, in elements
};

// The additive mask, broadcast to [batch dims..., queries, keys], whose batch dims multiply to
// the call's batch (attention heads inside batch entries, say): strides per dim, 0 where it is
// broadcast. `data` null: no mask.
struct Mask {
  const float* data = nullptr;
  int batch_rank = 0;
  const int64_t* batch_sizes = nullptr;
  const int64_t* batch_strides = nullptr;
  int64_t row = 0, col = 0;
};

struct Problem {
  int64_t batch, queries, keys, head_dim, value_dim;
  float scale;
  // A row whose scores are all -inf gives zeros (PyTorch's _safe_softmax, what
  // scaled_dot_product_attention decomposes to); otherwise NaN, as softmax does.
  bool masked_rows_zero;
};

// Rows of queries and of keys per block: 64 x 256 scores (64 KiB) and 64 x value_dim sums stay in
// a core's second-level cache next to the key and value blocks they combine.
constexpr int64_t kQueryBlock = 64, kKeyBlock = 256;

// sgemm's view of a [rows, cols] matrix starting at `p`: not transposed when its rows are
// contiguous, else transposed (its columns are).
struct GemmOperand {
  char trans;
  const float* p;
  int64_t ld;
};
inline GemmOperand gemm_operand(const float* p, int64_t row_stride, int64_t col_stride) {
  if (col_stride == 1) return {'N', p, row_stride};
  return {'T', p, col_stride};
}

// The calling thread's scratch: scores, value sums, row maxima and sums, kept between calls.
struct Scratch {
  std::vector<float> scores, sums, maxima, totals;
  void fit(int64_t value_dim) {
    scores.resize(kQueryBlock * kKeyBlock);
    sums.resize(static_cast<size_t>(kQueryBlock * value_dim));
    maxima.resize(kQueryBlock);
    totals.resize(kQueryBlock);
  }
};
// sgemm on operands the lowering checked (one unit stride, the other at least the extent it
// steps over): a refusal is a bug.
inline void gemm(const GemmOperand& a, const GemmOperand& b, int64_t m, int64_t n, int64_t k, float alpha, float beta,
                 float* c, int64_t ldc) {
  if (dnnl_sgemm(a.trans, b.trans, m, n, k, alpha, a.p, a.ld, b.p, b.ld, beta, c, ldc) != dnnl_success) {
    std::fprintf(stderr, "foundry: bug: oneDNN's sgemm refused an attention block\n");
    std::abort();
  }
}

inline Scratch& thread_scratch() {
  static thread_local Scratch s;
  return s;
}

inline int64_t mask_offset(const Mask& m, int64_t b) {
  int64_t offset = 0;
  for (int d = m.batch_rank - 1; d >= 0; --d) {
    offset += (b % m.batch_sizes[d]) * m.batch_strides[d];
    b /= m.batch_sizes[d];
  }
  return offset;
}

// One row of a block's scores: exponentials relative to the row's new maximum replace the scores,
// and the row's earlier sums are rescaled to that maximum. A row with no finite maximum yet (all
// -inf so far) contributes zeros. The maximum passes NaN by (a NaN score makes its row NaN
// through its exponential) unless the row has nothing else.
// `mask` (null: none), contiguous, is added to the scores first.
inline void softmax_row(float* s, const float* mask, int64_t n, float& row_max, float& total, float* sums,
                        int64_t value_dim) {
  using foundry_vec::VecF;
  using foundry_vec::kLanes;
  using foundry_vec::splat;
  using foundry_vec::load;
  using foundry_vec::load_first;
  using foundry_vec::first_lanes;
  VecF top = splat(-INFINITY);
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    VecF x = load(s + j);
    if (mask) foundry_vec::store(s + j, x += load(mask + j));
    top = foundry_vec::select(x > top, x, top);
  }
  if (j < n) {
    const int rest = static_cast<int>(n - j);
    VecF x = load_first(s + j, rest);
    if (mask) foundry_vec::store_first(s + j, x += load_first(mask + j, rest), rest);
    x = first_lanes(x, rest, -INFINITY);
    top = foundry_vec::select(x > top, x, top);
  }
  const float lanes_max = foundry_vec::combine_lanes<float>(top, [](float a, float b) { return a > b ? a : b; });
  float m = lanes_max > row_max ? lanes_max : row_max;  // a NaN row_max stays
  if (m == -INFINITY && std::any_of(s, s + n, [](float x) { return x != x; })) m = NAN;
  if (m == -INFINITY) {
    std::fill(s, s + n, 0.0f);
    return;
  }
  const float rescale = std::exp(row_max - m);  // 0 for the first finite maximum
  VecF sum = splat(0.0f);
  const VecF shift = splat(m);
  for (j = 0; j + kLanes <= n; j += kLanes) {
    VecF e = foundry_vec::exp(load(s + j) - shift);
    foundry_vec::store(s + j, e);
    sum += e;
  }
  if (j < n) {
    const int rest = static_cast<int>(n - j);
    VecF e = first_lanes(foundry_vec::exp(load_first(s + j, rest) - shift), rest, 0.0f);
    foundry_vec::store_first(s + j, e, rest);
    sum += e;
  }
  const float added = foundry_vec::combine_lanes<float>(sum, [](float a, float b) { return a + b; });
  total = total * rescale + added;
  if (rescale != 1.0f)
    for (int64_t d = 0; d < value_dim; ++d) sums[d] *= rescale;
  row_max = m;
}

// Whether a [rows, cols] matrix (strides rs, cs) holds only finite numbers; read in memory order.
inline bool all_finite(const float* p, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (rs < cs) return all_finite(p, cols, rows, cs, rs);
  bool finite = true;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) finite &= std::isfinite(p[i * rs + j * cs]);
  return finite;
}

// Whether the mask is -inf for every score of a block (a causal mask above the diagonal): then
// with finite operands every score is -inf, and the block is skipped (its products, its
// exponentials). A NaN or infinite operand would make -inf + its score NaN, as PyTorch has it.
inline bool masked_out(const Mask& mask, const float* mask_rows, int64_t rows, int64_t k0, int64_t keys) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < keys; ++j)
      if (mask_rows[i * mask.row + (k0 + j) * mask.col] != -INFINITY) return false;
  return true;
}

// Rows [q0, q0 + rows) of batch entry b.
inline void query_block(const Problem& p, const Matrices& q, const Matrices& kt, const Matrices& v, const Mask& mask,
                        int64_t b, int64_t q0, int64_t rows, float* out) {
  Scratch& s = thread_scratch();
  s.fit(p.value_dim);
  std::fill(s.sums.begin(), s.sums.begin() + rows * p.value_dim, 0.0f);
  std::fill(s.maxima.begin(), s.maxima.begin() + rows, -INFINITY);
  std::fill(s.totals.begin(), s.totals.begin() + rows, 0.0f);
  const float* mask_rows = mask.data ? mask.data + mask_offset(mask, b) + q0 * mask.row : nullptr;
  int queries_finite = -1;  // checked when a block is first masked out
  for (int64_t k0 = 0; k0 < p.keys; k0 += kKeyBlock) {
    const int64_t keys = std::min(kKeyBlock, p.keys - k0);
    if (mask_rows && masked_out(mask, mask_rows, rows, k0, keys)) {
      if (queries_finite < 0)
        queries_finite = all_finite(q.data + b * q.batch + q0 * q.rows, rows, p.head_dim, q.rows, q.cols);
      if (queries_finite && all_finite(kt.data + b * kt.batch + k0 * kt.cols, p.head_dim, keys, kt.rows, kt.cols))
        continue;
    }
    const GemmOperand a = gemm_operand(q.data + b * q.batch + q0 * q.rows, q.rows, q.cols);
    const GemmOperand bt = gemm_operand(kt.data + b * kt.batch + k0 * kt.cols, kt.rows, kt.cols);
    gemm(a, bt, rows, keys, p.head_dim, p.scale, 0.0f, s.scores.data(), kKeyBlock);
    for (int64_t i = 0; i < rows; ++i) {
      float* row = s.scores.data() + i * kKeyBlock;
      const float* m = mask_rows ? mask_rows + i * mask.row + k0 * mask.col : nullptr;
      if (m && mask.col != 1) {  // a broadcast or strided mask row, added here
        for (int64_t j = 0; j < keys; ++j) row[j] += m[j * mask.col];
        m = nullptr;
      }
      softmax_row(row, m, keys, s.maxima[i], s.totals[i], s.sums.data() + i * p.value_dim, p.value_dim);
    }
    const GemmOperand vb = gemm_operand(v.data + b * v.batch + k0 * v.rows, v.rows, v.cols);
    gemm({'N', s.scores.data(), kKeyBlock}, vb, rows, p.value_dim, keys, 1.0f, 1.0f, s.sums.data(), p.value_dim);
  }
  for (int64_t i = 0; i < rows; ++i) {
    const float total = s.totals[i];
    const bool empty = total == 0.0f && s.maxima[i] == -INFINITY;
    float* o = out + i * p.value_dim;
    for (int64_t d = 0; d < p.value_dim; ++d)
      o[d] = empty ? (p.masked_rows_zero ? 0.0f : NAN) : s.sums[i * p.value_dim + d] / total;
  }
}

// out [batch, queries, value_dim], contiguous; blocks of queries split among `team` threads, each
// product on its own thread (oneDNN runs a nested sgemm on one).
inline void attention(const Problem& p, const Matrices& q, const Matrices& kt, const Matrices& v, const Mask& mask,
                      float* out, int team) {
  const int64_t blocks = (p.queries + kQueryBlock - 1) / kQueryBlock, tasks = p.batch * blocks;
  dnnl_glue::TeamSize one(1);  // what a call from a one-thread region would give sgemm otherwise: every core
#pragma omp parallel for num_threads(team) if (team > 1) schedule(static)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t b = t / blocks, q0 = (t % blocks) * kQueryBlock;
    query_block(p, q, kt, v, mask, b, q0, std::min(kQueryBlock, p.queries - q0),
                out + (b * p.queries + q0) * p.value_dim);
  }
}

// The one-thread time of a call, for its team (team_for): the two products' multiply-adds.
inline double serial_ns(const Problem& p) {
  return static_cast<double>(p.batch) * static_cast<double>(p.queries) * static_cast<double>(p.keys) *
         static_cast<double>(p.head_dim + p.value_dim) * kNsPerMac;
}

}  // namespace attention
}  // namespace foundry_rt

#endif  // FOUNDRY_ATTENTION_H
