// Linear algebra as LAPACK calls (ir::Linalg, run by the runtime's foundry_lapack.h): operands are
// broadcast to one batch and copied contiguous, each used output of the op is one call. A right-
// hand solve (X A = B) is the left-hand one of the transposes (A^T X^T = B^T), as ATen computes it.
#include <functional>

#include "foundry/lower/lowering.h"
#include "foundry/ops/registry.h"
#include "lower/lowerings.h"
#include "lower/util.h"

namespace foundry::lower {

namespace {

using shape::product;

using ir::LinalgOp;

std::vector<Expr> exprs(const std::vector<int64_t>& v) { return {v.begin(), v.end()}; }

std::vector<int64_t> static_of(LoweringContext& ctx, const TensorRef& ref) {
  try {
    return ref.static_sizes();
  } catch (const DynamicShapeUnsupported&) {
    ctx.need_static_sizes();
  }
}

std::vector<int64_t> batch_of(const std::vector<int64_t>& sizes, size_t matrix_dims) {
  return {sizes.begin(), sizes.end() - static_cast<std::ptrdiff_t>(matrix_dims)};
}

std::vector<int64_t> broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<Expr> out = broadcast_shapes(exprs(a), exprs(b));
  std::vector<int64_t> sizes;
  for (const Expr& e : out) sizes.push_back(e.const_value());
  return sizes;
}

std::vector<int64_t> with(std::vector<int64_t> batch, std::initializer_list<int64_t> tail) {
  batch.insert(batch.end(), tail);
  return batch;
}

// The last two dims swapped, as a view.
TensorRef transposed(const TensorRef& ref) {
  TensorRef out = ref;
  out.buffer = nullptr;
  std::swap(out.sizes[out.rank() - 1], out.sizes[out.rank() - 2]);
  out.load = Loader::remapped(
      [](const Index& idx) {
        Index src = idx;
        std::swap(src[src.size() - 1], src[src.size() - 2]);
        return src;
      },
      ref.load);
  return out;
}

// A trailing dim of size 1 added (a vector as a one-column matrix), as a view.
TensorRef as_column(const TensorRef& ref) {
  TensorRef out = ref;
  out.buffer = nullptr;
  out.sizes.push_back(Expr(1));
  out.load = Loader::remapped([](const Index& idx) { return Index(idx.begin(), idx.end() - 1); }, ref.load);
  return out;
}

// `ref` broadcast to `sizes` and laid out contiguously (a copy where it is not already).
ir::Operand operand(LoweringContext& ctx, const TensorRef& ref, const std::vector<int64_t>& sizes) {
  // Already of that shape: a contiguous view of a buffer (a model input, a weight, another call's
  // output, a slice of one) is read in place, not copied.
  TensorRef shaped = ref.sizes == exprs(sizes) ? ref : broadcast_to(ref, exprs(sizes));
  ir::Operand op = ctx.strided_operand(shaped);
  if (op.strides != ir::contiguous_strides(op.sizes)) {
    TensorRef copy = shaped;
    copy.buffer = nullptr;
    op = ctx.strided_operand(ctx.realize_operand_copy(copy));
  }
  return op;
}

TensorRef float_operand(LoweringContext& ctx, const Node& node, const char* name) {
  TensorRef t = ctx.tensor(node.arg(name));
  if (t.dtype != DType::Float32)
    ctx.fail(std::string(name)+ " is " + std::string(dtype_name(t.dtype)) + ": foundryc's linear algebra is float32 only");
  return t;
}

TensorRef int_operand(LoweringContext& ctx, const Node& node, const char* name) {
  TensorRef t = ctx.tensor(node.arg(name));
  if (t.dtype != DType::Int32) ctx.fail(std::string(name) + " must be int32, got " + std::string(dtype_name(t.dtype)));
  return t;
}

// Output `k` of the node as output `output` of `call`, when the graph reads it.
TensorRef output_of(LoweringContext& ctx, const Node& node, size_t k, ir::Linalg call, int output) {
  if (!ctx.is_used(node.outputs[k])) return {};
  call.output = output;
  std::vector<Expr> sizes = out_sizes(ctx, node, k);
  return ctx.extern_call({call}, out_dtype(node, k), sizes);
}

// The call's result is the transpose of the node's output (a right-hand solve): computed in the
// transposed shape, returned as a transposed view.
TensorRef transposed_output(LoweringContext& ctx, const Node& node, ir::Linalg call) {
  std::vector<Expr> sizes = out_sizes(ctx, node, 0);
  std::swap(sizes[sizes.size() - 1], sizes[sizes.size() - 2]);
  return transposed(ctx.extern_call({call}, out_dtype(node, 0), sizes));
}

// A [*, n, n] and B [*, n, k] broadcast to one batch, for the solves.
struct SolveOperands {
  std::vector<int64_t> batch;
  int64_t n = 0, k = 0;
};

SolveOperands solve_shape(LoweringContext& ctx, const TensorRef& a, const TensorRef& b) {
  std::vector<int64_t> as = static_of(ctx, a), bs = static_of(ctx, b);
  if (as.size() < 2 || bs.size() < 2) ctx.fail("expects batches of matrices");
  SolveOperands s;
  s.batch = broadcast(batch_of(as, 2), batch_of(bs, 2));
  s.n = as.back();
  s.k = bs.back();
  if (bs[bs.size() - 2] != s.n) ctx.fail("the right-hand side's rows do not match the matrix");
  return s;
}

ir::Linalg base_call(LinalgOp op, const std::vector<int64_t>& batch, int64_t m, int64_t n, int64_t k) {
  ir::Linalg call;
  call.op = op;
  call.batch = product(batch);
  call.m = m;
  call.n = n;
  call.k = k;
  return call;
}

// A square A [*, n, n]: the call on it alone.
ir::Linalg square_call(LoweringContext& ctx, LinalgOp op, const TensorRef& a) {
  std::vector<int64_t> as = static_of(ctx, a);
  if (as.size() < 2 || as[as.size() - 1] != as[as.size() - 2]) ctx.fail("expects batches of square matrices");
  ir::Linalg call = base_call(op, batch_of(as, 2), as.back(), as.back(), 0);
  call.inputs = {operand(ctx, a, as)};
  return call;
}

Outs lower_cholesky_like(LoweringContext& ctx, const Node& node, LinalgOp op) {
  ir::Linalg call = square_call(ctx, op, float_operand(ctx, node, "self"));
  call.upper = bool_arg(node, "upper");
  Outs outs = {output_of(ctx, node, 0, call, 0)};
  if (node.outputs.size() > 1) outs.push_back(output_of(ctx, node, 1, call, 1));  // info
  return outs;
}

// B solved against the matrices `a` (+ `pivots`, [*, n] int32): the call with operands {a,
// pivots, b}, or {b, a} for cholesky_solve's argument order.
ir::Linalg solve_call(LoweringContext& ctx, LinalgOp op, const TensorRef& a, const TensorRef* pivots, const TensorRef& b,
                      bool b_first) {
  SolveOperands s = solve_shape(ctx, a, b);
  if (pivots) s.batch = broadcast(s.batch, batch_of(static_of(ctx, *pivots), 1));
  ir::Linalg call = base_call(op, s.batch, s.n, s.n, s.k);
  ir::Operand ao = operand(ctx, a, with(s.batch, {s.n, s.n})), bo = operand(ctx, b, with(s.batch, {s.n, s.k}));
  if (b_first) {
    call.inputs = {bo, ao};
  } else {
    call.inputs = {ao};
    if (pivots) call.inputs.push_back(operand(ctx, *pivots, with(s.batch, {s.n})));
    call.inputs.push_back(bo);
  }
  return call;
}

}  // namespace

Outs lower_cholesky(LoweringContext& ctx, const Node& node) { return lower_cholesky_like(ctx, node, LinalgOp::Cholesky); }

Outs lower_cholesky_inverse(LoweringContext& ctx, const Node& node) {
  return lower_cholesky_like(ctx, node, LinalgOp::CholeskyInverse);
}

Outs lower_cholesky_solve(LoweringContext& ctx, const Node& node) {
  ir::Linalg call = solve_call(ctx, LinalgOp::CholeskySolve, float_operand(ctx, node, "input2"), nullptr,
                               float_operand(ctx, node, "self"), true);
  call.upper = bool_arg(node, "upper");
  return {output_of(ctx, node, 0, call, 0)};
}

// LU factors, 1-based int32 pivots (LAPACK's, as ATen returns them) and info.
Outs lower_lu_factor(LoweringContext& ctx, const Node& node) {
  if (!bool_arg(node, "pivot")) ctx.fail("LU without pivoting is not supported (LAPACK's getrf always pivots)");
  TensorRef a = float_operand(ctx, node, "A");
  std::vector<int64_t> as = static_of(ctx, a);
  ir::Linalg call = base_call(LinalgOp::LuFactor, batch_of(as, 2), as[as.size() - 2], as.back(), 0);
  call.inputs = {operand(ctx, a, as)};
  return {output_of(ctx, node, 0, call, 0), output_of(ctx, node, 1, call, 1), output_of(ctx, node, 2, call, 2)};
}

Outs lower_lu_solve(LoweringContext& ctx, const Node& node) {
  TensorRef lu = float_operand(ctx, node, "LU"), pivots = int_operand(ctx, node, "pivots");
  TensorRef b = float_operand(ctx, node, "B");
  bool left = bool_arg(node, "left"), adjoint = bool_arg(node, "adjoint");
  // X op(A) = B is op(A)^T X^T = B^T.
  ir::Linalg call = solve_call(ctx, LinalgOp::LuSolve, lu, &pivots, left ? b : transposed(b), false);
  call.trans = left ? adjoint : !adjoint;
  if (left) return {output_of(ctx, node, 0, call, 0)};
  return {transposed_output(ctx, node, call)};
}

Outs lower_inv(LoweringContext& ctx, const Node& node) {
  ir::Linalg call = square_call(ctx, LinalgOp::Inverse, float_operand(ctx, node, "A"));
  return {output_of(ctx, node, 0, call, 0), output_of(ctx, node, 1, call, 1)};
}

// _linalg_solve_ex: the result and info. Its LU and pivots are those of A or of A^T, as ATen
// chooses from A's layout: not computed.
Outs lower_solve(LoweringContext& ctx, const Node& node) {
  TensorRef a = float_operand(ctx, node, "A"), b = float_operand(ctx, node, "B");
  bool left = bool_arg(node, "left");
  std::vector<int64_t> as = static_of(ctx, a), bs = static_of(ctx, b);
  bool vector = bs.size() == 1 || (bs.size() + 1 == as.size() && bs == std::vector<int64_t>(as.begin(), as.end() - 1));
  if (vector && !left) ctx.fail("a vector right-hand side with left=False is not supported");
  ir::Linalg call = solve_call(ctx, LinalgOp::Solve, a, nullptr, vector ? as_column(b) : left ? b : transposed(b), false);
  call.trans = !left;
  Outs outs(4);
  if (!left) {
    outs[0] = transposed_output(ctx, node, call);
  } else if (vector) {
    // The vector result is the one column of the matrix one.
    std::vector<Expr> sizes = out_sizes(ctx, node, 0);
    sizes.push_back(Expr(1));
    TensorRef column = ctx.extern_call({call}, DType::Float32, sizes);
    outs[0] = column;
    outs[0].buffer = nullptr;
    outs[0].sizes.pop_back();
    outs[0].load = Loader::remapped(
        [](const Index& idx) {
          Index src = idx;
          src.push_back(Expr(0));
          return src;
        },
        column.load);
  } else {
    outs[0] = output_of(ctx, node, 0, call, 0);
  }
  outs[3] = output_of(ctx, node, 3, call, 1);
  return outs;
}

// det and (sign, log|det|) from LU factors; the LU and pivots outputs are ATen's factors of A^T
// (its choice for a contiguous A): not computed.
Outs lower_det(LoweringContext& ctx, const Node& node) {
  ir::Linalg call = square_call(ctx, LinalgOp::Det, float_operand(ctx, node, "A"));
  return {output_of(ctx, node, 0, call, 0), {}, {}};
}

Outs lower_slogdet(LoweringContext& ctx, const Node& node) {
  ir::Linalg call = square_call(ctx, LinalgOp::Slogdet, float_operand(ctx, node, "A"));
  return {output_of(ctx, node, 0, call, 0), output_of(ctx, node, 1, call, 1), {}, {}};
}

Outs lower_solve_triangular(LoweringContext& ctx, const Node& node) {
  TensorRef a = float_operand(ctx, node, "self"), b = float_operand(ctx, node, "B");
  bool upper = bool_arg(node, "upper"), left = bool_arg(node, "left");
  // X A = B is A^T X^T = B^T, and A^T is lower triangular where A is upper.
  ir::Linalg call = solve_call(ctx, LinalgOp::SolveTriangular, left ? a : transposed(a), nullptr,
                               left ? b : transposed(b), false);
  call.upper = left ? upper : !upper;
  call.unit = bool_arg(node, "unitriangular");
  if (left) return {output_of(ctx, node, 0, call, 0)};
  return {transposed_output(ctx, node, call)};
}

// Eigenvalues ascending (LAPACK's order, as ATen's); eigenvectors as columns, each with the sign
// LAPACK gives it.
Outs lower_eigh(LoweringContext& ctx, const Node& node) {
  ir::Linalg call = square_call(ctx, LinalgOp::Eigh, float_operand(ctx, node, "A"));
  call.upper = node.arg("UPLO").s == "U";
  call.compute_uv = bool_arg(node, "compute_v") && ctx.is_used(node.outputs[1]);
  return {output_of(ctx, node, 0, call, 0), call.compute_uv ? output_of(ctx, node, 1, call, 1) : TensorRef{}};
}

// U, S, Vh (gesdd, ATen's CPU driver); singular values alone skip the vectors.
Outs lower_svd(LoweringContext& ctx, const Node& node) {
  TensorRef a = float_operand(ctx, node, "A");
  std::vector<int64_t> as = static_of(ctx, a);
  ir::Linalg call = base_call(LinalgOp::Svd, batch_of(as, 2), as[as.size() - 2], as.back(), 0);
  call.inputs = {operand(ctx, a, as)};
  call.full_matrices = bool_arg(node, "full_matrices");
  bool vectors = bool_arg(node, "compute_uv") && (ctx.is_used(node.outputs[0]) || ctx.is_used(node.outputs[2]));
  call.compute_uv = vectors;
  Outs outs = {TensorRef{}, output_of(ctx, node, 1, call, 1), TensorRef{}};
  if (vectors) {
    outs[0] = output_of(ctx, node, 0, call, 0);
    outs[2] = output_of(ctx, node, 2, call, 2);
  }
  return outs;
}

Outs lower_householder_product(LoweringContext& ctx, const Node& node) {
  TensorRef a = float_operand(ctx, node, "input"), tau = float_operand(ctx, node, "tau");
  std::vector<int64_t> as = static_of(ctx, a), ts = static_of(ctx, tau);
  if (as.size() < 2 || ts.empty() || batch_of(as, 2) != batch_of(ts, 1))
    ctx.fail("input and tau must have the same batch dims");
  int64_t m = as[as.size() - 2], n = as.back(), k = ts.back();
  if (k > n) ctx.fail("tau must not have more elements than input has columns");
  ir::Linalg call = base_call(LinalgOp::HouseholderProduct, batch_of(as, 2), m, n, k);
  call.inputs = {operand(ctx, a, as), operand(ctx, tau, ts)};
  return {output_of(ctx, node, 0, call, 0)};
}

// ormqr(A, tau, C): Q of the reflectors in A's first k = len(tau) columns applied to C.
Outs lower_ormqr(LoweringContext& ctx, const Node& node) {
  TensorRef a = float_operand(ctx, node, "self"), tau = float_operand(ctx, node, "input2");
  TensorRef c = float_operand(ctx, node, "input3");
  std::vector<int64_t> as = static_of(ctx, a), ts = static_of(ctx, tau), cs = static_of(ctx, c);
  bool left = bool_arg(node, "left");
  if (as.size() < 2 || cs.size() < 2 || ts.empty()) ctx.fail("expects batches of matrices");
  std::vector<int64_t> batch = batch_of(cs, 2);
  if (batch_of(as, 2) != batch || batch_of(ts, 1) != batch) ctx.fail("input, tau and other must have the same batch dims");
  int64_t m = cs[cs.size() - 2], n = cs.back(), k = ts.back(), q = left ? m : n;
  if (as[as.size() - 2] != q || k > as.back() || k > q) ctx.fail("the reflectors do not match other's shape");
  ir::Linalg call = base_call(LinalgOp::Ormqr, batch, m, n, k);
  // The reflectors are A's first k columns.
  TensorRef reflectors = a;
  reflectors.buffer = nullptr;
  reflectors.sizes.back() = Expr(k);
  call.inputs = {operand(ctx, reflectors, with(batch, {q, k})), operand(ctx, tau, ts), operand(ctx, c, cs)};
  call.left = left;
  call.trans = bool_arg(node, "transpose");
  return {output_of(ctx, node, 0, call, 0)};
}

// LD and pivots as linalg_ldl_factor gives them (LAPACK sytrf, lower).
Outs lower_ldl_solve(LoweringContext& ctx, const Node& node) {
  TensorRef ld = float_operand(ctx, node, "LD"), pivots = int_operand(ctx, node, "pivots");
  ir::Linalg call = solve_call(ctx, LinalgOp::LdlSolve, ld, &pivots, float_operand(ctx, node, "B"), false);
  return {output_of(ctx, node, 0, call, 0)};
}

}  // namespace foundry::lower
