// A recursive-descent parser for ATen schema strings, e.g.
//   "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor".
// The strings come from our own table (ops.def), so malformed text is an InternalError.
#include <cctype>

#include "foundry/ops/registry.h"
#include "foundry/support/error.h"

namespace foundry {
namespace {

class SchemaParser {
 public:
  explicit SchemaParser(std::string_view text) : text_(text) {}

  OpSchema parse() {
    OpSchema schema;
    schema.text = std::string(text_);
    std::string full_name = identifier_with_dots();
    auto dot = full_name.find('.');
    schema.name = full_name.substr(0, dot);
    if (dot != std::string::npos) schema.overload = full_name.substr(dot + 1);
    schema.args = arguments();
    expect("->");
    schema.returns = returns();
    skip_space();
    if (pos_ != text_.size()) fail("trailing text");
    return schema;
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw InternalError("bad schema '" + std::string(text_) + "' at " + std::to_string(pos_) +
                        ": " + what);
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool peek(std::string_view token) {
    skip_space();
    return text_.substr(pos_, token.size()) == token;
  }
  bool accept(std::string_view token) {
    if (!peek(token)) return false;
    pos_ += token.size();
    return true;
  }
  void expect(std::string_view token) {
    if (!accept(token)) fail("expected '" + std::string(token) + "'");
  }
  static bool is_ident_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  }
  std::string identifier() {
    skip_space();
    size_t start = pos_;
    while (pos_ < text_.size() && is_ident_char(text_[pos_])) ++pos_;
    if (start == pos_) fail("expected an identifier");
    return std::string(text_.substr(start, pos_ - start));
  }
  std::string identifier_with_dots() {
    std::string name = identifier();
    while (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      name += "." + identifier();
    }
    return name;
  }

  // "(args)": arguments with an optional "*" marker before the keyword-only ones.
  std::vector<ArgSchema> arguments() {
    expect("(");
    std::vector<ArgSchema> args;
    bool kwarg_only = false;
    if (accept(")")) return args;
    do {
      if (accept("*")) {
        kwarg_only = true;
        continue;
      }
      ArgSchema arg = argument();
      arg.kwarg_only = kwarg_only;
      args.push_back(std::move(arg));
    } while (accept(","));
    expect(")");
    return args;
  }

  ArgSchema argument() {
    ArgSchema arg;
    arg.type = type(&arg.alias);
    arg.optional = arg.type.back() == '?';
    arg.name = identifier();
    if (accept("=")) arg.default_text = default_value();
    return arg;
  }

  // A type: base name, optional alias annotation "(a!)", then any of "[N]", "[]", "?".
  // The annotation is returned separately so `type` reads as in the table minus aliasing.
  std::string type(std::string* alias) {
    std::string result = identifier();
    if (peek("(")) {
      expect("(");
      size_t start = pos_;
      while (pos_ < text_.size() && text_[pos_] != ')') ++pos_;
      if (alias) *alias = std::string(text_.substr(start, pos_ - start));
      expect(")");
    }
    for (;;) {
      if (pos_ < text_.size() && text_[pos_] == '?') {
        ++pos_;
        result += '?';
      } else if (pos_ < text_.size() && text_[pos_] == '[') {
        size_t start = pos_;
        while (pos_ < text_.size() && text_[pos_] != ']') ++pos_;
        expect("]");
        result += text_.substr(start, pos_ - start);
      } else {
        return result;
      }
    }
  }

  // Default text runs to the next top-level ',' or ')'; brackets and quotes nest.
  std::string default_value() {
    skip_space();
    size_t start = pos_;
    int depth = 0;
    char quote = 0;
    for (; pos_ < text_.size(); ++pos_) {
      char c = text_[pos_];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '[' || c == '(') {
        ++depth;
      } else if (c == ']' || (c == ')' && depth > 0)) {
        --depth;
      } else if (depth == 0 && (c == ',' || c == ')')) {
        break;
      }
    }
    std::string_view value = text_.substr(start, pos_ - start);
    while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back())))
      value.remove_suffix(1);
    if (value.empty()) fail("empty default");
    return std::string(value);
  }

  // "Tensor", "Tensor(a)", "Tensor[]", "(Tensor, Tensor)", "(Tensor values, Tensor indices)", "()".
  std::vector<std::string> returns() {
    if (!accept("(")) return {type(nullptr)};
    std::vector<std::string> types;
    if (accept(")")) return types;
    do {
      types.push_back(type(nullptr));
      skip_space();
      if (pos_ < text_.size() && is_ident_char(text_[pos_])) identifier();  // a return's name
    } while (accept(","));
    expect(")");
    return types;
  }
};

}  // namespace

OpSchema parse_schema(std::string_view text) { return SchemaParser(text).parse(); }

}  // namespace foundry
