// Fused attention in externs.cpp: one foundry_rt::attention::attention per call
// (runtime/foundry_attention.h), its operands' layouts spelled out so that the generated source
// says what it multiplies.
#include <sstream>

#include "codegen/cpp_ops.h"
#include "codegen/externs.h"
#include "foundry/codegen/cpp_expr.h"

namespace foundry::codegen {

namespace {

// `op` [N, rows, cols] as a foundry_rt::attention::Matrices initializer.
std::string matrices(const ir::Operand& op, const std::map<const ir::Buffer*, std::string>& ptrs) {
  return "{" + operand_pointer(op, ptrs) + ", /*batch=*/" + cpp_size(op.strides[0]) + ", /*rows=*/" +
         cpp_size(op.strides[1]) + ", /*cols=*/" + cpp_size(op.strides[2]) + "}";
}

}  // namespace

std::string attention_statements(const ir::LoopNode& node, const ir::Attention& call,
                                 const std::map<const ir::Buffer*, std::string>& ptrs, int threads) {
  const std::vector<ir::Expr>& q = call.query.sizes;
  std::ostringstream s;
  s << "  // softmax(scale * q k^T" << (call.mask ? " + mask" : "") << ") v in blocks of queries and keys, "
    << "without the score matrix.\n";
  s << "  foundry_rt::attention::Problem problem;\n";
  s << "  problem.batch = " << cpp_size(q[0]) << ";\n  problem.queries = " << cpp_size(q[1]) << ";\n";
  s << "  problem.keys = " << cpp_size(call.key_t.sizes[2]) << ";\n  problem.head_dim = " << cpp_size(q[2]) << ";\n";
  s << "  problem.value_dim = " << cpp_size(call.value.sizes[2]) << ";\n";
  s << "  problem.scale = " << literal(ir::Scalar::of(call.scale, DType::Float32)) << ";\n";
  s << "  problem.masked_rows_zero = " << (call.masked_rows_zero ? "true" : "false") << ";\n";
  s << "  const foundry_rt::attention::Matrices query = " << matrices(call.query, ptrs) << ";\n";
  s << "  const foundry_rt::attention::Matrices key_t = " << matrices(call.key_t, ptrs) << ";\n";
  s << "  const foundry_rt::attention::Matrices value = " << matrices(call.value, ptrs) << ";\n";
  s << "  foundry_rt::attention::Mask mask;\n";
  if (call.mask) {
    const ir::Operand& m = *call.mask;
    const size_t batch_rank = m.sizes.size() - 2;
    s << "  const int64_t mask_batch_sizes[] = "
      << expr_list(std::vector<ir::Expr>(m.sizes.begin(), m.sizes.begin() + batch_rank)) << ";\n";
    s << "  const int64_t mask_batch_strides[] = "
      << expr_list(std::vector<ir::Expr>(m.strides.begin(), m.strides.begin() + batch_rank)) << ";\n";
    s << "  mask.data = " << operand_pointer(m, ptrs) << ";\n  mask.batch_rank = " << batch_rank << ";\n";
    s << "  mask.batch_sizes = mask_batch_sizes;\n  mask.batch_strides = mask_batch_strides;\n";
    s << "  mask.row = " << cpp_size(m.strides[batch_rank]) << ";\n  mask.col = " << cpp_size(m.strides[batch_rank + 1])
      << ";\n";
  }
  s << "  const int team = foundry_rt::team_for(foundry_rt::attention::serial_ns(problem), foundry_rt::num_threads("
    << threads << "));\n";
  s << "  foundry_rt::attention::attention(problem, query, key_t, value, mask, " << ptrs.at(node.output) << ", team);\n";
  return s.str();
}

}  // namespace foundry::codegen
