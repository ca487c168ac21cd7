// The op table: one OpInfo per row of ops.def, looked up by name.
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

const OpInfo* find_op(std::string_view target) {
  static const std::unordered_map<std::string, const OpInfo*> by_name = [] {
    std::unordered_map<std::string, const OpInfo*> map;
    for (const OpInfo& op : all_ops()) {
      bool fresh = map.emplace(op.name, &op).second;
      FOUNDRY_CHECK(fresh, "duplicate op in ops.def: " + op.name);
    }
    return map;
  }();
  auto it = by_name.find(short_op_name(target));
  return it == by_name.end() ? nullptr : it->second;
}

}  // namespace foundry
