// Linear algebra as LAPACK calls: small batched models (scripts/export_linalg_samples.py, torch
// 2.15) interpreted and compiled against PyTorch's outputs, and what the generated model links.
#include <catch2/catch.hpp>
#include <string>

#include "support.h"

namespace foundry::test {

namespace {

std::string linalg_sample(const std::string& name) { return test_source_dir() + "/data/linalg/" + name; }

}  // namespace

// Solves from both sides (linalg_solve, lu_solve with adjoint, solve_triangular upper and unit
// lower, cholesky_solve upper and lower), a vector right-hand side, LU factors and pivots,
// cholesky_inverse and inv, on batches of 4x4 matrices.
TEST_CASE("LAPACK solves and factorizations match PyTorch interpreted and compiled", "[lower][linalg]") {
  CHECK(run_sample_both_ways(linalg_sample("solves")) == "");
}

// det and slogdet of both signs, logdet, eigvalsh (both triangles), svdvals, pinv (rectangular,
// hermitian, rank-deficient: decomposed into _linalg_svd / _linalg_eigh), matrix_rank, cond and
// the nuclear norm.
TEST_CASE("LAPACK determinants, eigenvalues and singular values match PyTorch both ways", "[lower][linalg]") {
  CHECK(run_sample_both_ways(linalg_sample("spectra")) == "");
}

TEST_CASE("householder_product and ormqr from either side match PyTorch both ways", "[lower][linalg]") {
  CHECK(run_sample_both_ways(linalg_sample("householder")) == "");
}

// A model with LAPACK calls includes the runtime's foundry_lapack.h, says which routine each call
// runs, and links LAPACKE: model.so does, and manifest.json's link_flags tell a program linking
// libmodel.a to.
TEST_CASE("a model with LAPACK calls links -llapacke", "[lower][linalg]") {
  TempDir tmp("foundry_linalg_");
  ProcResult r = run_foundryc({linalg_sample("householder") + "/model.pt2", "-o", tmp / "out", "--emit=source,so,static"});
  REQUIRE(r.exit_code == 0);
  std::string externs = read_file(tmp / "out/externs.cpp");
  CHECK(externs.find("#include \"foundry_lapack.h\"") != std::string::npos);
  CHECK(externs.find("// LAPACK orgqr, output 0 of householder_product") != std::string::npos);
  CHECK(externs.find("// LAPACK ormqr, output 0 of ormqr") != std::string::npos);
  CHECK(read_file(tmp / "out/manifest.json").find("\"-llapacke\"") != std::string::npos);
  ProcResult deps = run_process({"ldd", tmp / "out/model.so"});
  CHECK(deps.out.find("liblapacke") != std::string::npos);
}

}  // namespace foundry::test
