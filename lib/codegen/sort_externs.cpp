// Row sorts in externs.cpp: one foundry_rt::sort::sort_rows per call (runtime/foundry_sort.h), its
// operand's layout spelled out so that the generated source says what it sorts.
#include <sstream>

#include "codegen/externs.h"
#include "foundry/codegen/cpp_expr.h"
#include "foundry/codegen/cpp_kernel.h"

namespace foundry::codegen {

namespace {

// How a stored element becomes the key compared: 16-bit floats are stored as their bits.
std::string key_of(DType t) {
  if (t == DType::BFloat16) return "foundry_rt::bfloat16_to_float";
  if (t == DType::Float16) return "foundry_rt::half_to_float";
  return "foundry_rt::sort::Same<" + storage_type(t) + ">{}";
}

}  // namespace

std::string sort_statements(const ir::LoopNode& node, const ir::SortRows& call,
                            const std::map<const ir::Buffer*, std::string>& ptrs, int threads) {
  const ir::Operand& in = call.input;
  std::string data = ptrs.at(in.buffer);
  if (!in.offset.is_const(0)) data += " + " + cpp_index(in.offset, {});
  std::ostringstream s;
  s << "  // A stable sort of each row (equal elements in input order, NaN above every number).\n";
  s << "  const int64_t sizes[] = " << expr_list(in.sizes) << ";\n";
  s << "  const int64_t strides[] = " << expr_list(in.strides) << ";\n";
  s << "  const foundry_rt::sort::Rows rows{sizes, strides, /*rank=*/" << in.sizes.size() << ", /*dim=*/" << call.dim
    << "};\n";
  s << "  foundry_rt::sort::sort_rows(" << data << ", rows, /*k=*/" << cpp_index(call.k, {}) << ", /*descending=*/"
    << (call.descending ? "true" : "false") << ", " << key_of(in.buffer->dtype) << ", foundry_rt::num_threads("
    << threads << "), " << ptrs.at(node.output) << ");\n";
  return s.str();
}

}  // namespace foundry::codegen
