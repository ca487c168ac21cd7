// Linear-algebra library calls of the loop-level IR (LAPACK through the runtime's
// foundry_lapack.h): one routine output per call. A routine with several outputs (LU factors and
// pivots, singular values and vectors) is one call per output that the program uses, each running
// the routine again: these are small matrices, and it keeps every extern node single-output.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace foundry::ir {

struct Operand;

// The routines of foundry_lapack.h, in its order (foundry_rt::lapack::Routine).
enum class LinalgOp {
  Cholesky, CholeskySolve, CholeskyInverse, LuFactor, LuSolve, Inverse, Solve, Det, Slogdet,
  SolveTriangular, Eigh, Svd, HouseholderProduct, Ormqr, LdlSolve,
};

// Operands are contiguous batches [batch, rows, cols] of float32 (pivots int32), broadcast to one
// batch by the lowering; sizes m, n, k as foundry_lapack.h documents per routine.
struct Linalg {
  LinalgOp op = LinalgOp::Cholesky;
  int output = 0;  // which of the routine's outputs this call writes
  std::vector<Operand> inputs;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool upper = false, trans = false, unit = false, left = true, full_matrices = false, compute_uv = false;
};

// "cholesky", "lu_factor", ... (the routine's name in foundry_lapack.h, lowercase).
std::string linalg_name(LinalgOp op);
// "potrf": the LAPACK routine it runs, for comments.
std::string linalg_lapack_routine(LinalgOp op);

}  // namespace foundry::ir
