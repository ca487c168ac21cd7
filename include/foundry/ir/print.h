// The stable text form of the loop-level IR (ir_pre_fusion.txt): every buffer with its layout,
// every node with its iteration ranges, reads and writes, and its body run through a printing
// handler.
#pragma once
#include <string>

#include "foundry/ir/loop_ir.h"

namespace foundry::ir {

std::string print_body(const LoopNode& node);

// The printing handler: one line per operation, "tmpN = op(args)".
class PrintingOps final : public Ops {
 public:
  std::string text;
  int indent = 4;  // spaces before each line

  Val load(const Buffer& buf, const Expr& index) override;
  void store(const Buffer& buf, const Expr& index, Val v, StoreMode mode) override;
  Val constant(const Scalar& s) override;
  Val index_expr(const Expr& e, DType t) override;
  Val to_dtype(Val v, DType t) override;
  Val unary(UnaryOp op, Val x) override;
  Val binary(BinaryOp op, Val a, Val b) override;
  Val where(Val c, Val a, Val b) override;
  Expr indirect(Val v, const Expr& size, NegativeIndex negative) override;
  Val reduction(ReduceOp op, Val v) override;
  void store_reduction(const Buffer& buf, const Expr& index, Val v) override;
  void line(const std::string& text);

 private:
  int next_ = 0;
  int indirect_count_ = 0;
  static std::string name(Val v);
  Val emit(DType t, const std::string& rhs);
};  // the body's lines, indented by two spaces
std::string print_node(const LoopNode& node);
std::string print_buffer(const Buffer& buf);  // "buf0: float32[1024] strides [1] offset 0"
// The shortest decimal text that reads back as `value` ("0.6", not "0.59999999999999998").
std::string shortest_number(double value);
// "float32[s0, 64]"
std::string shape_text(DType dtype, const std::vector<Expr>& sizes);
// One line on a library call, for comments and messages: what it computes, on which shapes, and
// the ATen nodes it came from ("addmm: float32[8, 64] x float32[64, 10] + bias -> float32[8, 10],
// relu folded; from addmm (aten.addmm), relu (aten.relu)").
std::string describe_extern(const LoopNode& node);
std::string print_program(const LoopProgram& program);

}  // namespace foundry::ir
