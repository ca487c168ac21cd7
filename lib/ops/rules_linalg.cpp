// Shape rules of the linear-algebra ops (LAPACK calls: lib/lower/linalg.cpp). Matrices are the last
// two dims; the dims before them are a batch, broadcast between operands as ATen's linalg does.
#include <algorithm>

#include "foundry/ops/registry.h"
#include "foundry/support/error.h"

namespace foundry::rules {
namespace {

using shape::format_sizes;
using shape::make_type;

const TensorType& matrix(const Node& node, const char* name, const char* op) {
  const TensorType& t = shape::tensor(node, name);
  if (t.rank() < 2)
    throw UserError(std::string(op) + ": " + name + " must have at least 2 dimensions, got " + format_sizes(t.sizes));
  return t;
}

const TensorType& square(const Node& node, const char* name, const char* op) {
  const TensorType& t = matrix(node, name, op);
  if (t.sizes[t.rank() - 1] != t.sizes[t.rank() - 2])
    throw UserError(std::string(op) + ": " + name + " must be batches of square matrices, got " + format_sizes(t.sizes));
  return t;
}

std::vector<int64_t> batch_of(const TensorType& t, size_t matrix_dims = 2) {
  return {t.sizes.begin(), t.sizes.end() - static_cast<std::ptrdiff_t>(std::min(matrix_dims, t.sizes.size()))};
}

std::vector<int64_t> with(std::vector<int64_t> batch, std::initializer_list<int64_t> tail) {
  batch.insert(batch.end(), tail);
  return batch;
}

int64_t rows(const TensorType& t) { return t.sizes[t.rank() - 2]; }
int64_t cols(const TensorType& t) { return t.sizes[t.rank() - 1]; }

// B [*, n, k] solved against a square A [*, n, n]: the result has both batches broadcast.
TensorType solved(const TensorType& a, const TensorType& b) {
  return make_type(b.dtype, with(shape::broadcast_shapes(batch_of(a), batch_of(b)), {rows(b), cols(b)}));
}

}  // namespace

std::vector<TensorType> cholesky(const Node& node) {
  const TensorType& a = square(node, "self", "cholesky");
  return {make_type(a.dtype, a.sizes)};
}

// linalg_cholesky_ex, linalg_inv_ex: the matrix result and an int32 info per matrix.
std::vector<TensorType> matrix_with_info(const Node& node) {
  const char* name = shape::has_arg(node, "self") ? "self" : "A";
  const TensorType& a = square(node, name, node.target.c_str());
  return {make_type(a.dtype, a.sizes), make_type(DType::Int32, batch_of(a))};
}

std::vector<TensorType> cholesky_solve(const Node& node) {
  const TensorType& b = matrix(node, "self", "cholesky_solve");
  return {solved(square(node, "input2", "cholesky_solve"), b)};
}

std::vector<TensorType> lu_factor(const Node& node) {
  const TensorType& a = matrix(node, "A", "linalg_lu_factor_ex");
  std::vector<int64_t> batch = batch_of(a);
  return {make_type(a.dtype, a.sizes), make_type(DType::Int32, with(batch, {std::min(rows(a), cols(a))})),
          make_type(DType::Int32, batch)};
}

std::vector<TensorType> lu_solve(const Node& node) {
  return {solved(square(node, "LU", "linalg_lu_solve"), matrix(node, "B", "linalg_lu_solve"))};
}

// _linalg_solve_ex(A, B): B is a vector (or batch of vectors) when it is 1-d or A's shape without
// its last dim; LU and pivots are A's, broadcast to the batch.
std::vector<TensorType> linalg_solve(const Node& node) {
  const TensorType& a = square(node, "A", "linalg_solve");
  const TensorType& b = shape::tensor(node, "B");
  const int64_t n = rows(a);
  bool vector = b.rank() == 1 || (b.rank() == a.rank() - 1 && b.sizes == std::vector<int64_t>(a.sizes.begin(), a.sizes.end() - 1));
  std::vector<int64_t> batch = shape::broadcast_shapes(batch_of(a), batch_of(b, vector ? 1 : 2));
  std::vector<int64_t> result = vector ? with(batch, {n}) : with(batch, {rows(b), cols(b)});
  return {make_type(a.dtype, result), make_type(a.dtype, with(batch, {n, n})), make_type(DType::Int32, with(batch, {n})),
          make_type(DType::Int32, batch)};
}

std::vector<TensorType> linalg_det(const Node& node) {
  const TensorType& a = square(node, "A", "linalg_det");
  std::vector<int64_t> batch = batch_of(a);
  return {make_type(a.dtype, batch), make_type(a.dtype, a.sizes), make_type(DType::Int32, with(batch, {rows(a)}))};
}

std::vector<TensorType> linalg_slogdet(const Node& node) {
  const TensorType& a = square(node, "A", "linalg_slogdet");
  std::vector<int64_t> batch = batch_of(a);
  return {make_type(a.dtype, batch), make_type(a.dtype, batch), make_type(a.dtype, a.sizes),
          make_type(DType::Int32, with(batch, {rows(a)}))};
}

std::vector<TensorType> solve_triangular(const Node& node) {
  return {solved(square(node, "self", "linalg_solve_triangular"), matrix(node, "B", "linalg_solve_triangular"))};
}

std::vector<TensorType> linalg_eigh(const Node& node) {
  const TensorType& a = square(node, "A", "linalg_eigh");
  bool vectors = shape::bool_arg(node, "compute_v");
  return {make_type(a.dtype, with(batch_of(a), {rows(a)})), make_type(a.dtype, vectors ? a.sizes : std::vector<int64_t>{0})};
}

std::vector<TensorType> linalg_svd(const Node& node) {
  const TensorType& a = matrix(node, "A", "linalg_svd");
  const int64_t m = rows(a), n = cols(a), k = std::min(m, n);
  const bool full = shape::bool_arg(node, "full_matrices"), uv = shape::bool_arg(node, "compute_uv");
  std::vector<int64_t> batch = batch_of(a);
  TensorType s = make_type(a.dtype, with(batch, {k}));
  if (!uv) return {make_type(a.dtype, {0}), s, make_type(a.dtype, {0})};
  return {make_type(a.dtype, with(batch, {m, full ? m : k})), s, make_type(a.dtype, with(batch, {full ? n : k, n}))};
}

std::vector<TensorType> householder_product(const Node& node) {
  const TensorType& a = matrix(node, "input", "linalg_householder_product");
  if (cols(a) > rows(a)) throw UserError("linalg_householder_product: input must have at least as many rows as columns");
  return {make_type(a.dtype, a.sizes)};
}

std::vector<TensorType> ormqr(const Node& node) {
  const TensorType& c = matrix(node, "input3", "ormqr");
  return {make_type(c.dtype, c.sizes)};
}

std::vector<TensorType> ldl_solve(const Node& node) {
  return {solved(square(node, "LD", "linalg_ldl_solve"), matrix(node, "B", "linalg_ldl_solve"))};
}

// The pseudo-inverse of [*, m, n] is [*, n, m].
std::vector<TensorType> linalg_pinv(const Node& node) {
  const TensorType& a = matrix(node, "self", "linalg_pinv");
  return {make_type(a.dtype, with(batch_of(a), {cols(a), rows(a)}))};
}

}  // namespace foundry::rules
