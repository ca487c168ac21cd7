// Checked access to untrusted JSON: every access verifies the type it expects and reports
// failures as UserError naming the path inside the document ("graph.nodes[3].inputs[1].arg").
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "foundry/graph/graph.h"

namespace foundry {

// Parses JSON text after a cheap scan that rejects nesting deeper than `max_depth` (nlohmann's
// parser recurses) and documents over `max_bytes`. `what` names the document in messages.
nlohmann::json parse_json_checked(const Blob& bytes, const std::string& what, size_t max_depth = 1000,
                                  size_t max_bytes = size_t(1) << 30);

class JsonRef {
 public:
  JsonRef(const nlohmann::json& j, std::string path) : j_(&j), path_(std::move(path)) {}

  const nlohmann::json& raw() const { return *j_; }
  const std::string& path() const { return path_; }
  [[noreturn]] void fail(const std::string& msg) const;

  bool is_null() const { return j_->is_null(); }
  bool is_object() const { return j_->is_object(); }
  bool is_array() const { return j_->is_array(); }
  bool is_string() const { return j_->is_string(); }

  JsonRef at(const char* key) const;                 // requires an object holding `key`
  std::optional<JsonRef> find(const char* key) const;  // requires an object; nullopt if absent
  std::vector<JsonRef> items() const;                // requires an array
  // Members of an object in key order: the key (file text) and its value.
  std::vector<std::pair<std::string, JsonRef>> members() const;
  // A single-key union object: {"as_tensor": {...}} -> ("as_tensor", value).
  std::pair<std::string, JsonRef> as_union() const;

  int64_t as_int() const;       // an integer in int64 range
  double as_number() const;     // any number
  bool as_bool() const;
  const std::string& as_string() const;

 private:
  std::string type_name() const;
  const nlohmann::json* j_;
  std::string path_;
};

}  // namespace foundry
