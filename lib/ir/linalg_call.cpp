#include "foundry/ir/linalg_call.h"

#include "foundry/support/error.h"

namespace foundry::ir {

namespace {

struct RoutineNames {
  const char* name;
  const char* lapack;
};

RoutineNames names_of(LinalgOp op) {
  switch (op) {
    case LinalgOp::Cholesky: return {"cholesky", "potrf"};
    case LinalgOp::CholeskySolve: return {"cholesky_solve", "potrs"};
    case LinalgOp::CholeskyInverse: return {"cholesky_inverse", "potri"};
    case LinalgOp::LuFactor: return {"lu_factor", "getrf"};
    case LinalgOp::LuSolve: return {"lu_solve", "getrs"};
    case LinalgOp::Inverse: return {"inverse", "getrf, getrs"};
    case LinalgOp::Solve: return {"solve", "getrf, getrs"};
    case LinalgOp::Det: return {"det", "getrf"};
    case LinalgOp::Slogdet: return {"slogdet", "getrf"};
    case LinalgOp::SolveTriangular: return {"solve_triangular", "substitution"};
    case LinalgOp::Eigh: return {"eigh", "syevd"};
    case LinalgOp::Svd: return {"svd", "gesdd"};
    case LinalgOp::HouseholderProduct: return {"householder_product", "orgqr"};
    case LinalgOp::Ormqr: return {"ormqr", "ormqr"};
    case LinalgOp::LdlSolve: return {"ldl_solve", "sytrs"};
  }
  throw InternalError("bug: unknown linear-algebra routine " + std::to_string(static_cast<int>(op)));
}

}  // namespace

std::string linalg_name(LinalgOp op) { return names_of(op).name; }
std::string linalg_lapack_routine(LinalgOp op) { return names_of(op).lapack; }

}  // namespace foundry::ir
