// torch.einsum's equations, shared by the op's shape rule and its decomposition: each operand's
// subscripts and the output's, with an ellipsis spelled out as one letter per dim it covers.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace foundry::einsum {

struct Equation {
  std::vector<std::string> inputs;  // one subscript letter per dim of each operand
  std::string output;               // given after "->", else implicit (as torch.einsum)
  std::map<char, int64_t> sizes;    // each letter's size, size-1 dims broadcast
};

// Parses `text` for operands of these shapes. The dims an ellipsis covers get the characters
// '0', '1', ... (right-aligned across operands, which broadcast there). Without "->" the output is
// the ellipsis, then the letters used once, in alphabetical order. Throws UserError for an
// equation that does not fit the operands, and for a letter repeated within one operand (a
// diagonal), which foundryc does not support.
Equation parse(const std::string& text, const std::vector<std::vector<int64_t>>& shapes);

}  // namespace foundry::einsum
