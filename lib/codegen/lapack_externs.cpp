// LAPACK calls in externs.cpp: one foundry_rt::lapack::run per call, its Call spelled out field by
// field so that the generated source says what it computes.
#include <sstream>

#include "codegen/externs.h"
#include "foundry/codegen/cpp_expr.h"

namespace foundry::codegen {

namespace {

std::string routine_enum(ir::LinalgOp op) {
  static const char* const names[] = {"Cholesky", "CholeskySolve", "CholeskyInverse", "LuFactor", "LuSolve",
                                      "Inverse", "Solve", "Det", "Slogdet", "SolveTriangular", "Eigh", "Svd",
                                      "HouseholderProduct", "Ormqr", "LdlSolve"};
  return std::string("foundry_rt::lapack::Routine::") + names[static_cast<int>(op)];
}

const char* flag(bool b) { return b ? "true" : "false"; }

}  // namespace

std::string linalg_statements(const ir::LoopNode& node, const ir::Linalg& call,
                              const std::map<const ir::Buffer*, std::string>& ptrs) {
  std::ostringstream s;
  s << "  // LAPACK " << ir::linalg_lapack_routine(call.op) << ", output " << call.output << " of "
    << ir::linalg_name(call.op) << "\n";
  s << "  static const foundry_rt::lapack::Call call = {" << routine_enum(call.op) << ", /*output=*/" << call.output
    << ", /*batch=*/" << call.batch << ", /*m=*/" << call.m << ", /*n=*/" << call.n << ", /*k=*/" << call.k
    << ",\n      /*upper=*/" << flag(call.upper) << ", /*trans=*/" << flag(call.trans) << ", /*unit=*/"
    << flag(call.unit) << ", /*left=*/" << flag(call.left) << ", /*full_matrices=*/" << flag(call.full_matrices)
    << ", /*compute_uv=*/" << flag(call.compute_uv) << "};\n";
  s << "  const void* inputs[] = {";
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    const ir::Operand& op = call.inputs[i];
    std::string p = ptrs.at(op.buffer);
    if (!op.offset.is_const(0)) p += " + " + cpp_index(op.offset, {});
    s << (i ? ", " : "") << p;
  }
  s << "};\n  foundry_rt::lapack::run(call, inputs, " << ptrs.at(node.output) << ");\n";
  return s.str();
}

}  // namespace foundry::codegen
