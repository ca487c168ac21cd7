// The two emitting handlers of a C++ kernel, as Inductor's CppKernel and CppVecKernel: each runs
// the same bodies and writes its own form of every statement into the current loop scope.
// CppScalarOps writes one element at a time (named SSA temporaries `tmpN`, accumulators for
// reductions); CppVectorOps writes the vector form over the scope's last loop variable
// (foundry_vec.h), or marks the scope as having none. Both number values in call order, so a
// value has the same name `tmpN` in both forms.
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>

#include "codegen/kernel_scopes.h"
#include "foundry/ir/ops.h"

namespace foundry::codegen {

// Where the scalar statements run: a C++ kernel, or a CUDA kernel (cuda_kernel.cpp), whose
// index checks and integer divisions report to the model's device error flag (`error_flag`, a
// kernel parameter) instead of the thread-local foundry_rt::kernel_error.
enum class Dialect { Cpp, Cuda };

class CppScalarOps final : public ir::Ops {
 public:
  explicit CppScalarOps(ScopeStack& scopes, Dialect dialect = Dialect::Cpp) : scopes_(scopes), dialect_(dialect) {}

  ir::Val load(const ir::Buffer& buf, const ir::Expr& index) override;
  void store(const ir::Buffer& buf, const ir::Expr& index, ir::Val v, ir::StoreMode mode) override;
  ir::Val constant(const ir::Scalar& s) override;
  ir::Val index_expr(const ir::Expr& e, DType t) override;
  ir::Val to_dtype(ir::Val v, DType t) override;
  ir::Val unary(ir::UnaryOp op, ir::Val x) override;
  ir::Val binary(ir::BinaryOp op, ir::Val a, ir::Val b) override;
  ir::Val where(ir::Val c, ir::Val a, ir::Val b) override;
  ir::Expr indirect(ir::Val v, const ir::Expr& size, ir::NegativeIndex negative) override;
  ir::Val reduction(ir::ReduceOp op, ir::Val v) override;
  void store_reduction(const ir::Buffer& buf, const ir::Expr& index, ir::Val v) override;

 private:
  ScopeStack& scopes_;
  Dialect dialect_;
  std::map<int, ir::Expr> index_values_;  // int64 values that are index expressions, by value number
  std::map<int, bool> known_bools_;       // comparisons of them decided in the loop's piece
  int next_ = 0, indirect_ = 0, accumulators_ = 0;

  // Defines the next value as `rhs`; `invariant`: before the innermost loop (Scope::hoisted).
  ir::Val def(DType t, const std::string& rhs, bool may_round, bool invariant = false);
  void emit(const std::string& line) { scopes_.top().lines.push_back(line); }
  std::string reduction_position();
  void check_device_form(const std::string& expr, std::string_view op) const;
};

class CppVectorOps final : public ir::Ops {
 public:
  explicit CppVectorOps(ScopeStack& scopes) : scopes_(scopes) {}

  // Consecutive lanes, one value broadcast, a row of a transposed tile, or a gather.
  ir::Val load(const ir::Buffer& buf, const ir::Expr& index) override;
  // Consecutive lanes or a scatter; other store modes have no vector form.
  void store(const ir::Buffer& buf, const ir::Expr& index, ir::Val v, ir::StoreMode mode) override;
  ir::Val constant(const ir::Scalar& s) override;  // broadcast
  // float32: iota, broadcast or gather; int64: no vector form, but kept as its expression, so that
  // comparisons of such values (a window's padding test) are lane masks (index_compare).
  ir::Val index_expr(const ir::Expr& e, DType t) override;
  ir::Val to_dtype(ir::Val v, DType t) override;
  ir::Val unary(ir::UnaryOp op, ir::Val x) override;
  ir::Val binary(ir::BinaryOp op, ir::Val a, ir::Val b) override;
  ir::Val where(ir::Val c, ir::Val a, ir::Val b) override;
  ir::Expr indirect(ir::Val v, const ir::Expr& size, ir::NegativeIndex negative) override;  // none unless hoisted: the loop stays scalar
  // float32 sum, max and min: one accumulator per lane, combined after the loop.
  ir::Val reduction(ir::ReduceOp op, ir::Val v) override;
  void store_reduction(const ir::Buffer&, const ir::Expr&, ir::Val) override {}  // after the loop: scalar

 private:
  ScopeStack& scopes_;
  std::set<int> no_vector_form_;  // values of the current loops that have no vector form
  std::map<int, ir::Expr> index_values_;  // int64 values that are index expressions, by value number
  std::map<int, bool> known_bools_;       // comparisons of them decided in the loop's piece
  int next_ = 0, indirect_ = 0, accumulators_ = 0;

  // Defines value number next_ as `rhs` (nullopt: it has no vector form).
  // `partial`: its form in the last, partial vector when that differs (a load).
  ir::Val def(DType t, const std::optional<std::string>& rhs, bool loaded = false,
              const std::optional<std::string>& partial = std::nullopt);
  std::optional<std::string> vec(ir::Val v) const;
  const std::string* vector_var() const;
  std::optional<int> lane_step(const ir::Expr& index) const;
  std::string lane_index(const ir::Expr& index);
  std::optional<std::string> tile_load(const ir::Buffer& buf, const ir::Expr& index);
  std::optional<ir::Val> index_arithmetic(ir::BinaryOp op, ir::Val a, ir::Val b);
  std::string index_compare(ir::BinaryOp op, const ir::Expr& a, const ir::Expr& b);
  // A statement of both forms, the whole vectors' and the partial one's (`partial` when it differs).
  void emit(const std::string& line, const std::optional<std::string>& partial = std::nullopt) {
    scopes_.top().vector_lines.push_back(line);
    scopes_.top().partial_lines.push_back(partial ? *partial : line);
  }
  // One element of `buf` at `at` (C++ of an index) as a scalar of the compute type (16-bit floats widened).
  std::string element(const ir::Buffer& buf, const std::string& at);
  std::string partial_gather(const ir::Buffer& buf, const ir::Expr& index, bool is_bool);
};

// The C++ spelling of values and types shared by both forms.
std::string value_name(ir::Val v);  // "tmp3"
std::string literal(const ir::Scalar& s);  // exact, in the scalar's compute type

}  // namespace foundry::codegen
