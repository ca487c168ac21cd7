#include "foundry/ir/extern_call.h"

namespace foundry::ir {

std::string extern_name(const ExternCall& call) {
  return std::visit(overloaded{[](const Matmul& m) -> std::string { return m.batched ? "bmm" : m.bias ? "addmm" : "mm"; },
                               [](const Convolution&) -> std::string { return "convolution"; },
                               [](const Linalg& l) -> std::string { return "linalg." + linalg_name(l.op); },
                               [](const SortRows&) -> std::string { return "sort"; },
                               [](const Attention&) -> std::string { return "attention"; }},
                    call.op);
}

std::string activation_name(Activation activation) {
  switch (activation) {
    case Activation::None: return "";
#define FOUNDRY_NAME(name, text) \
  case Activation::name: return text;
    FOUNDRY_ACTIVATIONS(FOUNDRY_NAME)
#undef FOUNDRY_NAME
  }
  return "";
}

std::vector<const Operand*> operands(const ExternCall& call) {
  return std::visit(overloaded{[](const Matmul& m) {
                                 std::vector<const Operand*> out;
                                 if (m.bias) out.push_back(&*m.bias);
                                 out.push_back(&m.a);
                                 out.push_back(&m.b);
                                 return out;
                               },
                               [](const Convolution& c) {
                                 std::vector<const Operand*> out = {&c.input, &c.weight};
                                 if (c.bias) out.push_back(&*c.bias);
                                 return out;
                               },
                               [](const Linalg& l) {
                                 std::vector<const Operand*> out;
                                 for (const Operand& op : l.inputs) out.push_back(&op);
                                 return out;
                               },
                               [](const SortRows& s) { return std::vector<const Operand*>{&s.input}; },
                               [](const Attention& a) {
                                 std::vector<const Operand*> out = {&a.query, &a.key_t, &a.value};
                                 if (a.mask) out.push_back(&*a.mask);
                                 return out;
                               }},
                    call.op);
}

}  // namespace foundry::ir
