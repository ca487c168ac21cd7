// The op table: one OpInfo per row of ops.def, looked up by name.
#include <mutex>
#include <optional>
#include <unordered_map>

#include "foundry/ops/registry.h"
#include "foundry/support/error.h"

namespace foundry {

// Every rule named in ops.def, defined in lib/ops/rules_*.cpp.
namespace rules {
#define FOUNDRY_OP(name, schema, rule) std::vector<TensorType> rule(const Node&);
#include "foundry/ops/ops.def"
#undef FOUNDRY_OP
}  // namespace rules

const std::vector<OpInfo>& all_ops() {
  static const std::vector<OpInfo> ops = [] {
    std::vector<OpInfo> table;
#define FOUNDRY_OP(name, schema, rule) table.push_back(OpInfo{name, parse_schema(schema), rules::rule});
#include "foundry/ops/ops.def"
#undef FOUNDRY_OP
    return table;
  }();
  return ops;
}

std::string short_op_name(std::string_view target) {
  constexpr std::string_view kPrefix = "torch.ops.aten.", kDefault = ".default";
  if (target.substr(0, kPrefix.size()) == kPrefix) target.remove_prefix(kPrefix.size());
  if (target.size() > kDefault.size() &&
      target.substr(target.size() - kDefault.size()) == kDefault)
    target.remove_suffix(kDefault.size());
  return std::string(target);
}

std::string functional_op_name(std::string_view name) {
  const size_t dot = name.find('.');
  std::string base(name.substr(0, dot));
  if (base.size() < 2 || base.back() != '_' || base[base.size() - 2] == '_') return "";
  base.pop_back();
  return dot == std::string_view::npos ? base : base + std::string(name.substr(dot));
}

namespace {

// The in-place form ATen gives an op (lt.Tensor -> lt_.Tensor): `self` is written and returned,
// so the result has self's type whatever the operands'; functionalization casts back to it. Only
// for a functional schema "NAME(Tensor self, ...) -> Tensor"; nullopt otherwise.
std::optional<OpInfo> in_place_form(const OpInfo& functional, const std::string& name) {
  const std::string& text = functional.schema.text;
  const std::string head = functional.name + "(Tensor self", tail = ") -> Tensor";
  if (text.compare(0, head.size(), head) != 0 || text.size() < tail.size() ||
      text.compare(text.size() - tail.size(), tail.size(), tail) != 0)
    return std::nullopt;
  const std::string body = text.substr(head.size(), text.size() - head.size() - tail.size());
  if (!body.empty() && body[0] != ',') return std::nullopt;
  return OpInfo{name, parse_schema(name + "(Tensor(a!) self" + body + ") -> Tensor(a!)"), rules::unary_same};
}

}  // namespace

const OpInfo* find_op(std::string_view target) {
  static const std::unordered_map<std::string, const OpInfo*> by_name = [] {
    std::unordered_map<std::string, const OpInfo*> map;
    for (const OpInfo& op : all_ops()) {
      bool fresh = map.emplace(op.name, &op).second;
      FOUNDRY_CHECK(fresh, "duplicate op in ops.def: " + op.name);
    }
    return map;
  }();
  const std::string name = short_op_name(target);
  auto it = by_name.find(name);
  if (it != by_name.end()) return it->second;
  // An in-place op without a row of its own: derived once from its functional row, then kept.
  const std::string functional = functional_op_name(name);
  auto f = functional.empty() ? by_name.end() : by_name.find(functional);
  if (f == by_name.end()) return nullptr;
  static std::mutex mutex;
  static std::unordered_map<std::string, std::optional<OpInfo>> derived;
  std::lock_guard<std::mutex> lock(mutex);
  auto [slot, fresh] = derived.try_emplace(name);
  if (fresh) slot->second = in_place_form(*f->second, name);
  return slot->second ? &*slot->second : nullptr;
}

}  // namespace foundry
