// torch.einsum's equation syntax (see einsum.h), as ATen's einsum reads it.
#include "foundry/ops/einsum.h"

#include <algorithm>
#include <cctype>

#include "foundry/support/error.h"

namespace foundry::einsum {
namespace {

[[noreturn]] void bad(const std::string& why) { throw UserError("einsum(): " + why); }

// One operand's subscripts with its ellipsis ("..." -> ellipsis_letters) spelled out; `dims`
// is the operand's rank, `ellipsis_rank` the widest ellipsis of all operands.
std::string spell_out(const std::string& term, int64_t dims, int64_t ellipsis_rank) {
  const size_t at = term.find("...");
  std::string letters = term;
  if (at != std::string::npos) {
    const int64_t covered = dims - static_cast<int64_t>(term.size() - 3);
    if (covered < 0) bad("the subscripts " + quote_untrusted(term, 40) + " need more dims than the operand has");
    std::string ellipsis;
    for (int64_t i = ellipsis_rank - covered; i < ellipsis_rank; ++i) ellipsis.push_back(static_cast<char>('0' + i));
    letters = term.substr(0, at) + ellipsis + term.substr(at + 3);
  }
  for (char c : letters)
    if (!std::isalpha(static_cast<unsigned char>(c)) && !std::isdigit(static_cast<unsigned char>(c)))
      bad("invalid subscript " + quote_untrusted(std::string(1, c), 4) + " in the equation");
  if (static_cast<int64_t>(letters.size()) != dims)
    bad("the subscripts " + quote_untrusted(term, 40) + " do not match an operand of " + std::to_string(dims) + " dims");
  for (char c : letters)
    if (std::count(letters.begin(), letters.end(), c) > 1)
      bad("subscript " + std::string(1, c) + " repeated within one operand (a diagonal) is not supported");
  return letters;
}

std::vector<std::string> split_terms(const std::string& lhs) {
  std::vector<std::string> terms(1);
  for (char c : lhs) {
    if (c == ',') terms.emplace_back();
    else if (c != ' ') terms.back().push_back(c);
  }
  return terms;
}

// The ellipsis first, then the letters used once, in alphabetical (ASCII) order.
std::string implicit_output(const std::vector<std::string>& inputs) {
  std::string all;
  for (const std::string& s : inputs) all += s;
  std::string out;
  for (char c = '0'; c <= '9'; ++c)
    if (all.find(c) != std::string::npos) out.push_back(c);
  std::string once;
  for (char c : all)
    if (std::isalpha(static_cast<unsigned char>(c)) && std::count(all.begin(), all.end(), c) == 1) once.push_back(c);
  std::sort(once.begin(), once.end());
  return out + once;
}

}  // namespace

Equation parse(const std::string& text, const std::vector<std::vector<int64_t>>& shapes) {
  const size_t arrow = text.find("->");
  std::vector<std::string> terms = split_terms(text.substr(0, arrow));
  if (terms.size() != shapes.size())
    bad("the equation names " + std::to_string(terms.size()) + " operands, " + std::to_string(shapes.size()) + " were given");
  int64_t ellipsis_rank = 0;
  for (size_t i = 0; i < terms.size(); ++i)
    if (terms[i].find("...") != std::string::npos)
      ellipsis_rank = std::max(ellipsis_rank, static_cast<int64_t>(shapes[i].size()) - static_cast<int64_t>(terms[i].size() - 3));
  if (ellipsis_rank > 10) bad("an ellipsis of more than 10 dims is not supported");
  Equation eq;
  for (size_t i = 0; i < terms.size(); ++i) {
    eq.inputs.push_back(spell_out(terms[i], static_cast<int64_t>(shapes[i].size()), ellipsis_rank));
    for (size_t d = 0; d < shapes[i].size(); ++d) {
      auto [it, fresh] = eq.sizes.emplace(eq.inputs[i][d], shapes[i][d]);
      if (fresh || it->second == shapes[i][d] || shapes[i][d] == 1) continue;
      if (it->second != 1) bad("subscript " + std::string(1, it->first) + " has sizes " + std::to_string(it->second) +
                               " and " + std::to_string(shapes[i][d]) + ", which do not broadcast");
      it->second = shapes[i][d];
    }
  }
  if (arrow == std::string::npos) {
    eq.output = implicit_output(eq.inputs);
    return eq;
  }
  std::string out;
  for (char c : text.substr(arrow + 2))
    if (c != ' ') out.push_back(c);
  const size_t at = out.find("...");
  if (at != std::string::npos) {
    std::string ellipsis;
    for (int64_t i = 0; i < ellipsis_rank; ++i) ellipsis.push_back(static_cast<char>('0' + i));
    out = out.substr(0, at) + ellipsis + out.substr(at + 3);
  }
  for (char c : out) {
    if (!eq.sizes.count(c)) bad("output subscript " + quote_untrusted(std::string(1, c), 4) + " appears in no operand");
    if (std::count(out.begin(), out.end(), c) > 1) bad("output subscript " + std::string(1, c) + " appears more than once");
  }
  eq.output = out;
  return eq;
}

}  // namespace foundry::einsum
