#include "foundry/build/cache.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "foundry/build/compile.h"
#include "foundry/support/error.h"

namespace fs = std::filesystem;

namespace foundry::build {
namespace {

constexpr const char* kRecordSuffix = ".entry";
constexpr const char* kRecordHeader = "foundry-cache-entry 1";

// A file's whole contents, or false when it is not a regular file that can be read.
bool read_regular_file(const fs::path& p, std::string& bytes) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(p, ec))) return false;
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  if (!in && !in.eof()) return false;
  bytes = s.str();
  return true;
}

// Writes `bytes` to `to` through a temporary file and a rename, so that no reader sees half of it.
bool write_atomically(const fs::path& to, const std::string& bytes) {
  fs::path tmp = to;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return false;
    }
  }
  std::error_code ec;
  fs::rename(tmp, to, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

bool is_key(const std::string& s) {
  return s.size() == 32 && std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

// The cache's own files: KEY.so, KEY.a, KEY.entry (and their temporaries) in DIR/xx/.
struct EntryFiles {
  std::vector<fs::path> files;
  uint64_t bytes = 0;
  fs::file_time_type newest{};      // of any of its files
  std::optional<fs::file_time_type> record_time;
  // When it was last used: its record's modification time (a hit refreshes it), else its newest file's.
  fs::file_time_type last_used() const { return record_time ? *record_time : newest; }
};

std::map<std::string, EntryFiles> list_entries(const fs::path& dir) {
  std::map<std::string, EntryFiles> entries;
  std::error_code ec;
  for (const auto& sub : fs::directory_iterator(dir, ec)) {
    std::string shard = sub.path().filename().string();
    if (shard.size() != 2 || !sub.is_directory(ec)) continue;
    for (const auto& f : fs::directory_iterator(sub.path(), ec)) {
      std::string name = f.path().filename().string();
      std::string key = name.substr(0, name.find('.'));
      if (!is_key(key) || key.compare(0, 2, shard) != 0 || name.size() == key.size()) continue;
      EntryFiles& e = entries[key];
      e.files.push_back(f.path());
      std::error_code size_ec;
      uintmax_t size = f.is_regular_file(size_ec) ? f.file_size(size_ec) : 0;
      if (!size_ec) e.bytes += size;
      fs::file_time_type t = fs::last_write_time(f.path(), size_ec);
      if (size_ec) continue;
      e.newest = std::max(e.newest, t);
      if (name == key + kRecordSuffix) e.record_time = t;
    }
  }
  return entries;
}

void remove_files(const EntryFiles& e) {
  std::error_code ec;
  for (const auto& f : e.files) fs::remove_all(f, ec);
}

}  // namespace

uint64_t parse_byte_size(const std::string& text, const std::string& what) {
  size_t end = 0;
  uint64_t n = 0;
  try {
    n = std::stoull(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  std::string unit = end ? text.substr(end) : "";
  int shift = unit.empty() ? 0 : unit == "K" || unit == "k" ? 10 : unit == "M" || unit == "m" ? 20 : unit == "G" || unit == "g" ? 30 : -1;
  if (end == 0 || text[0] == '-' || shift < 0 || n > (UINT64_MAX >> shift))
    throw UserError(what + " must be a number of bytes, optionally with K, M or G: " + quote_untrusted(text));
  return n << shift;
}

uint64_t default_cache_limit() {
  const char* env = std::getenv("FOUNDRY_CACHE_MAX_SIZE");
  if (env && *env) return parse_byte_size(env, "FOUNDRY_CACHE_MAX_SIZE");
  return uint64_t(2) << 30;
}

CompileCache::CompileCache(std::string dir, uint64_t limit) : dir_(std::move(dir)), limit_(limit) {}

bool CompileCache::fetch(const std::string& key, const Products& products, std::string& why) {
  why.clear();
  const fs::path shard = fs::path(dir_) / key.substr(0, 2);
  const fs::path record_path = shard / (key + kRecordSuffix);
  std::string record;
  std::error_code ec;
  if (!read_regular_file(record_path, record)) {
    if (!fs::exists(fs::symlink_status(record_path, ec))) {
      for (const auto& [file, suffix] : products)
        if (fs::exists(fs::symlink_status(shard / (key + suffix), ec))) why = "it has no record of its contents";
      return false;
    }
    why = "its record is not a readable file";
  }
  // The record: its header, the key, then "SUFFIX SIZE HASH" for each file.
  std::map<std::string, std::pair<uint64_t, std::string>> expected;
  std::istringstream lines(record);
  std::string header, key_line;
  std::getline(lines, header);
  std::getline(lines, key_line);
  for (std::string suffix, hash; why.empty() && lines >> suffix;) {
    uint64_t size = 0;
    if (!(lines >> size >> hash)) why = "its record is damaged";
    expected[suffix] = {size, hash};
  }
  if (why.empty() && (header != kRecordHeader || key_line != "key " + key)) why = "its record is for another entry";
  std::vector<std::string> contents;
  for (const auto& [file, suffix] : products) {
    if (!why.empty()) break;
    auto it = expected.find(suffix);
    std::string bytes;
    if (it == expected.end()) why = "it has no " + suffix + " file";
    else if (!read_regular_file(shard / (key + suffix), bytes)) why = "its " + suffix + " file is missing or not a file";
    else if (bytes.size() != it->second.first) why = "its " + suffix + " file has another size than recorded";
    else if (hash_hex({bytes}) != it->second.second) why = "its " + suffix + " file has other contents than recorded";
    contents.push_back(std::move(bytes));
  }
  if (!why.empty()) {
    why = "cache entry " + (shard / key).string() + " ignored: " + why;
    remove_files(list_entries(dir_)[key]);
    return false;
  }
  // The checked bytes are the ones written: a file swapped after the check is never used.
  for (size_t i = 0; i < products.size(); ++i)
    if (!write_atomically(products[i].first, contents[i]))
      throw UserError("cannot write " + products[i].first);
  fs::last_write_time(record_path, fs::file_time_type::clock::now(), ec);  // used now
  return true;
}

void CompileCache::store(const std::string& key, const Products& products) {
  const fs::path shard = fs::path(dir_) / key.substr(0, 2);
  std::error_code ec;
  fs::create_directories(shard, ec);
  std::string record = std::string(kRecordHeader) + "\nkey " + key + "\n";
  for (const auto& [file, suffix] : products) {
    std::string bytes;
    if (!read_regular_file(file, bytes) || !write_atomically(shard / (key + suffix), bytes)) return;
    record += suffix + " " + std::to_string(bytes.size()) + " " + hash_hex({bytes}) + "\n";
  }
  // The record last: an entry without one is never used.
  if (!write_atomically(shard / (key + kRecordSuffix), record)) return;

  std::map<std::string, EntryFiles> entries = list_entries(dir_);
  uint64_t total = 0;
  std::vector<std::pair<fs::file_time_type, std::string>> by_age;
  for (const auto& [k, e] : entries) {
    total += e.bytes;
    if (k != key) by_age.push_back({e.last_used(), k});
  }
  std::sort(by_age.begin(), by_age.end());
  for (const auto& [time, k] : by_age) {
    if (total <= limit_) break;
    remove_files(entries[k]);
    total -= entries[k].bytes;
  }
}

CacheStats CompileCache::stats() const {
  CacheStats s;
  for (const auto& [key, e] : list_entries(dir_)) {
    ++s.entries;
    s.bytes += e.bytes;
  }
  return s;
}

CacheStats CompileCache::clear() {
  CacheStats s;
  std::error_code ec;
  for (const auto& [key, e] : list_entries(dir_)) {
    ++s.entries;
    s.bytes += e.bytes;
    remove_files(e);
  }
  for (const auto& sub : fs::directory_iterator(dir_, ec))
    if (sub.path().filename().string().size() == 2 && fs::is_empty(sub.path(), ec)) fs::remove(sub.path(), ec);
  return s;
}

}  // namespace foundry::build
