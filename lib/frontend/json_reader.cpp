// Checked JSON access for untrusted archives.
#include "foundry/frontend/json_reader.h"

#include <limits>

#include "foundry/support/error.h"

namespace foundry {

nlohmann::json parse_json_checked(const Blob& bytes, const std::string& what, size_t max_depth,
                                  size_t max_bytes) {
  if (bytes.size > max_bytes)
    throw UserError(what + ": JSON document of " + std::to_string(bytes.size) +
                    " bytes is larger than the limit of " + std::to_string(max_bytes));
  // Nesting depth, counted outside strings: a cheap scan before the (recursive) parser runs.
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < bytes.size; ++i) {
    char c = static_cast<char>(bytes.data[i]);
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        throw UserError(what + ": JSON nesting deeper than " + std::to_string(max_depth) +
                        " levels (at byte " + std::to_string(i) + ")");
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;
    }
  }
  try {
    const char* begin = reinterpret_cast<const char*>(bytes.data);
    return nlohmann::json::parse(begin, begin + bytes.size);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() quotes the file's text; report the position only.
    throw UserError(what + ": invalid JSON at byte " + std::to_string(e.byte));
  } catch (const nlohmann::json::exception& e) {
    throw UserError(what + ": invalid JSON (error " + std::to_string(e.id) + ")");
  }
}

void JsonRef::fail(const std::string& msg) const {
  throw UserError((path_.empty() ? std::string("(document)") : path_) + ": " + msg);
}

std::string JsonRef::type_name() const {
  switch (j_->type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "an integer";
    case nlohmann::json::value_t::number_float: return "a float";
    default: return "an unexpected value";
  }
}

JsonRef JsonRef::at(const char* key) const {
  if (!j_->is_object()) fail(std::string("expected an object with field '") + key + "', got " + type_name());
  auto it = j_->find(key);
  if (it == j_->end()) fail(std::string("missing field '") + key + "'");
  return JsonRef(*it, path_.empty() ? key : path_ + "." + key);
}

std::optional<JsonRef> JsonRef::find(const char* key) const {
  if (!j_->is_object()) fail(std::string("expected an object, got ") + type_name());
  auto it = j_->find(key);
  if (it == j_->end()) return std::nullopt;
  return JsonRef(*it, path_.empty() ? key : path_ + "." + key);
}

std::vector<JsonRef> JsonRef::items() const {
  if (!j_->is_array()) fail("expected an array, got " + type_name());
  std::vector<JsonRef> out;
  out.reserve(j_->size());
  size_t i = 0;
  for (const auto& item : *j_) out.emplace_back(item, path_ + "[" + std::to_string(i++) + "]");
  return out;
}

std::vector<std::pair<std::string, JsonRef>> JsonRef::members() const {
  if (!j_->is_object()) fail("expected an object, got " + type_name());
  std::vector<std::pair<std::string, JsonRef>> out;
  out.reserve(j_->size());
  for (auto it = j_->begin(); it != j_->end(); ++it)
    out.emplace_back(it.key(), JsonRef(it.value(), path_ + "[" + quote_untrusted(it.key(), 40) + "]"));
  return out;
}

std::pair<std::string, JsonRef> JsonRef::as_union() const {
  if (!j_->is_object() || j_->size() != 1)
    fail("expected a single-key union object, got " +
         (j_->is_object() ? "an object with " + std::to_string(j_->size()) + " keys" : type_name()));
  auto it = j_->begin();
  const std::string& key = it.key();
  return {key, JsonRef(it.value(), path_ + "." + (is_plain_name(key) ? key : quote_untrusted(key, 40)))};
}

int64_t JsonRef::as_int() const {
  if (j_->is_number_unsigned()) {
    uint64_t u = j_->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) fail("integer out of range");
    return static_cast<int64_t>(u);
  }
  if (j_->is_number_integer()) return j_->get<int64_t>();
  fail("expected an integer, got " + type_name());
}

double JsonRef::as_number() const {
  if (!j_->is_number()) fail("expected a number, got " + type_name());
  return j_->get<double>();
}

bool JsonRef::as_bool() const {
  if (!j_->is_boolean()) fail("expected a boolean, got " + type_name());
  return j_->get<bool>();
}

const std::string& JsonRef::as_string() const {
  if (!j_->is_string()) fail("expected a string, got " + type_name());
  return j_->get_ref<const std::string&>();
}

}  // namespace foundry
