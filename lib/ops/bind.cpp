// Binding a node's raw arguments (as read from the archive) to its op's schema.
#include <cstdlib>
#include <optional>

#include "foundry/ops/registry.h"
#include "foundry/support/error.h"

namespace foundry {
namespace {

using Kind = Arg::Kind;

// The shape of a schema type: "Tensor?[]" is {base "Tensor", list, element_optional}.
struct SlotType {
  std::string base;           // "Tensor", "int", "SymInt", "float", "Scalar", "ScalarType", ...
  bool optional = false;      // the whole value may be None
  bool list = false;
  int64_t list_size = 0;      // N in "int[N]"; 0 when unsized
  bool element_optional = false;
};

SlotType slot_type(const std::string& type) {
  SlotType slot;
  size_t i = 0;
  while (i < type.size() && type[i] != '?' && type[i] != '[') ++i;
  slot.base = type.substr(0, i);
  for (; i < type.size(); ++i) {
    if (type[i] == '?') {
      (slot.list ? slot.optional : slot.element_optional) = true;
    } else if (type[i] == '[') {
      slot.list = true;
      slot.list_size = std::atoll(type.c_str() + i + 1);
      while (i < type.size() && type[i] != ']') ++i;
    }
  }
  if (!slot.list) std::swap(slot.optional, slot.element_optional);  // "int?": the value is optional
  return slot;
}

bool is_int_base(const std::string& base) { return base == "int" || base == "SymInt"; }

std::string kind_name(Kind kind) {
  switch (kind) {
    case Kind::None: return "None";
    case Kind::Tensor: return "a tensor";
    case Kind::TensorList: return "a list of tensors";
    case Kind::OptTensorList: return "a list of optional tensors";
    case Kind::Int: return "an int";
    case Kind::IntList: return "a list of ints";
    case Kind::Float: return "a float";
    case Kind::FloatList: return "a list of floats";
    case Kind::Bool: return "a bool";
    case Kind::BoolList: return "a list of bools";
    case Kind::String: return "a string";
    case Kind::ScalarType: return "a dtype";
    case Kind::Layout: return "a layout";
    case Kind::Device: return "a device";
    case Kind::MemoryFormat: return "a memory format";
    case Kind::SymInt: return "a symbolic int";
  }
  return "?";
}

// Converts `value` to what the slot holds, or returns nullopt when it does not fit.
std::optional<Arg> coerce_list(const SlotType& slot, const Arg& value) {
  Arg out = value;
  if (slot.base == "Tensor") {
    if (value.kind == Kind::TensorList) {
      if (slot.element_optional) out.kind = Kind::OptTensorList;
      return out;
    }
    if (value.kind == Kind::OptTensorList) {
      if (slot.element_optional) return out;
      for (const Value* v : value.tensors)
        if (!v) return std::nullopt;
      out.kind = Kind::TensorList;
      return out;
    }
    return std::nullopt;
  }
  if (is_int_base(slot.base)) {
    if (value.kind == Kind::IntList) return out;
    // A single int stands for the whole list, as in Python's `stride=2` for `int[2] stride`.
    if (value.kind == Kind::Int) {
      out.kind = Kind::IntList;
      out.ints.assign(slot.list_size > 0 ? slot.list_size : 1, value.i);
      return out;
    }
    return std::nullopt;
  }
  if (slot.base == "float") {
    if (value.kind == Kind::FloatList) return out;
    if (value.kind == Kind::IntList) {
      out.kind = Kind::FloatList;
      out.floats.assign(value.ints.begin(), value.ints.end());
      return out;
    }
    return std::nullopt;
  }
  if (slot.base == "bool" && value.kind == Kind::BoolList) return out;
  return std::nullopt;
}

std::optional<Arg> coerce(const SlotType& slot, const Arg& value) {
  if (value.kind == Kind::None)
    return slot.optional ? std::optional<Arg>(value) : std::nullopt;
  if (slot.list) return coerce_list(slot, value);
  const std::string& base = slot.base;
  bool number = value.is_number() || value.kind == Kind::SymInt;
  // Python numbers in Tensor slots stay numbers: the lowering treats them as wrapped scalars.
  if (base == "Tensor") return value.kind == Kind::Tensor || number ? std::optional<Arg>(value) : std::nullopt;
  if (base == "Scalar") return number ? std::optional<Arg>(value) : std::nullopt;
  if (is_int_base(base))
    return value.kind == Kind::Int || value.kind == Kind::SymInt ? std::optional<Arg>(value) : std::nullopt;
  if (base == "float") {
    if (value.kind == Kind::Float) return value;
    if (value.kind == Kind::Int) return Arg::of_float(static_cast<double>(value.i));
    return std::nullopt;
  }
  static const std::pair<const char*, Kind> kExact[] = {
      {"bool", Kind::Bool},           {"str", Kind::String},    {"ScalarType", Kind::ScalarType},
      {"Layout", Kind::Layout},       {"Device", Kind::Device}, {"MemoryFormat", Kind::MemoryFormat},
  };
  for (const auto& [name, kind] : kExact)
    if (base == name) return value.kind == kind ? std::optional<Arg>(value) : std::nullopt;
  return std::nullopt;
}

// --- Defaults, parsed from the schema's text --------------------------------------------------

// torch.export's enum numbering for Layout and MemoryFormat.
int64_t layout_code(const std::string& name) { return name == "strided" ? 7 : 0; }
int64_t memory_format_code(const std::string& name) {
  if (name == "contiguous_format") return 1;
  if (name == "channels_last") return 2;
  if (name == "channels_last_3d") return 3;
  if (name == "preserve_format") return 4;
  return 0;
}

bool looks_floating(const std::string& text) {
  return text.find_first_of(".eEn") != std::string::npos;  // "1.0", "1e-05", "inf", "nan"
}

Arg number_default(const std::string& text) {
  if (text == "True" || text == "False") return Arg::of_bool(text == "True");
  if (looks_floating(text)) return Arg::of_float(std::strtod(text.c_str(), nullptr));
  return Arg::of_int(std::strtoll(text.c_str(), nullptr, 10));
}

std::vector<std::string> list_items(const std::string& text) {
  std::vector<std::string> items;
  std::string inner = text.substr(1, text.size() - 2);
  size_t start = 0;
  while (start < inner.size()) {
    size_t comma = inner.find(',', start);
    if (comma == std::string::npos) comma = inner.size();
    std::string item = inner.substr(start, comma - start);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (!item.empty()) items.push_back(item);
    start = comma + 1;
  }
  return items;
}

Arg list_default(const SlotType& slot, const std::string& text) {
  std::vector<std::string> items;
  if (text.front() == '[')
    items = list_items(text);
  else  // "int[2] stride=1": one value for every entry
    items.assign(slot.list_size > 0 ? slot.list_size : 1, text);
  Arg arg;
  if (slot.base == "float") {
    arg.kind = Kind::FloatList;
    for (const auto& item : items) arg.floats.push_back(std::strtod(item.c_str(), nullptr));
  } else if (slot.base == "bool") {
    arg.kind = Kind::BoolList;
    for (const auto& item : items) arg.ints.push_back(item == "True");
  } else if (slot.base == "Tensor") {
    arg.kind = slot.element_optional ? Kind::OptTensorList : Kind::TensorList;
  } else {
    arg.kind = Kind::IntList;
    for (const auto& item : items) arg.ints.push_back(std::strtoll(item.c_str(), nullptr, 10));
  }
  return arg;
}

Arg default_arg(const ArgSchema& schema) {
  const std::string& text = *schema.default_text;
  if (text == "None") return Arg::none();
  SlotType slot = slot_type(schema.type);
  if (slot.list) return list_default(slot, text);
  if (slot.base == "str") return Arg::of_string(text.substr(1, text.size() - 2));
  if (slot.base == "ScalarType") {
    auto dtype = dtype_from_name(text == "long" ? "int64" : text == "float" ? "float32" : text);
    FOUNDRY_CHECK(dtype, "unknown ScalarType default " + text);
    return Arg::of_dtype(*dtype);
  }
  Arg arg;
  if (slot.base == "Layout") {
    arg.kind = Kind::Layout;
    arg.i = layout_code(text);
    return arg;
  }
  if (slot.base == "MemoryFormat") {
    arg.kind = Kind::MemoryFormat;
    arg.i = memory_format_code(text);
    return arg;
  }
  arg = number_default(text);
  if (slot.base == "float") return Arg::of_float(arg.as_double());
  return arg;
}

std::string describe(const OpInfo& op, const ArgSchema& schema) {
  return "argument '" + schema.name + "' of " + op.name;
}

}  // namespace

std::vector<Arg> bind_arguments(const OpInfo& op, const std::vector<RawArg>& raw,
                                std::vector<std::string>* names_out) {
  const auto& params = op.schema.args;
  std::vector<const Arg*> given(params.size(), nullptr);
  size_t next_positional = 0;
  for (const RawArg& r : raw) {
    size_t index = params.size();
    if (r.name.empty()) {  // unnamed: the next positional slot (the file normally names all)
      index = next_positional++;
      if (index >= params.size() || params[index].kwarg_only)
        throw UserError(op.name + ": too many positional arguments");
    } else {
      for (size_t i = 0; i < params.size(); ++i)
        if (params[i].name == r.name) index = i;
      if (index == params.size())
        throw UserError(op.name + ": unknown argument " + quote_untrusted(r.name));
    }
    if (given[index]) throw UserError(describe(op, params[index]) + " given twice");
    given[index] = &r.value;
  }

  std::vector<Arg> args;
  args.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const ArgSchema& param = params[i];
    if (!given[i]) {
      if (!param.default_text) throw UserError(describe(op, param) + " is missing");
      args.push_back(default_arg(param));
      continue;
    }
    std::optional<Arg> bound = coerce(slot_type(param.type), *given[i]);
    if (!bound)
      throw UserError(describe(op, param) + ": expected " + param.type + ", got " +
                      kind_name(given[i]->kind));
    if (bound->kind == Kind::String) check_string_argument(op.name, param.name, bound->s);
    args.push_back(std::move(*bound));
  }
  if (names_out) {
    names_out->clear();
    for (const auto& param : params) names_out->push_back(param.name);
  }
  return args;
}

}  // namespace foundry
