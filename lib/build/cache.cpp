#include "foundry/build/cache.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>

#include "foundry/build/compile.h"
#include "foundry/support/error.h"

namespace fs = std::filesystem;

namespace foundry::build {
namespace {

constexpr const char* kEntrySuffix = ".entry";
constexpr const char* kEntryHeader = "foundry-cache-entry 2";
constexpr const char* kTempMark = ".tmp.";
// A temporary file this old belongs to a writer that was killed (a write takes milliseconds).
constexpr auto kStaleTemp = std::chrono::hours(1);

// A file's whole contents, or false when it is not a regular file that can be read.
bool read_regular_file(const fs::path& p, std::string& bytes) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(p, ec))) return false;
  std::ifstream in(p, std::ios::binary | std::ios::ate);
  std::streamoff size = in.tellg();
  if (!in || size < 0) return false;
  std::string data(static_cast<size_t>(size), '\0');  // one read into one buffer: entries hold weights
  in.seekg(0);
  in.read(data.data(), size);
  if (in.gcount() != size || in.peek() != std::ifstream::traits_type::eof()) return false;  // changed meanwhile
  bytes = std::move(data);
  return true;
}

// A temporary name beside `to` that no other writer uses, on this machine or another one sharing
// the folder: host name, process and a random number.
fs::path temporary_name(const fs::path& to) {
  static std::atomic<uint64_t> counter{std::random_device{}()};
  char host[64] = "host";
  gethostname(host, sizeof host - 1);
  fs::path tmp = to;
  tmp += std::string(kTempMark) + host + "." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  return tmp;
}

}  // namespace

bool write_file_atomically(const std::string& to, std::string_view bytes) {
  const fs::path tmp = temporary_name(to);
  std::error_code ec;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, to, ec);  // atomic, on NFS too: readers see the old file or the new one
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

namespace {

bool is_key(const std::string& s) {
  return s.size() == 32 && std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

// What the cache folder holds: each entry (KEY.entry, and any other file named after its key,
// such as the separate KEY.so of an older foundryc), and the temporaries of writers killed long ago.
struct EntryFiles {
  std::vector<fs::path> files;
  uint64_t bytes = 0;
  fs::file_time_type last_used{};  // its entry file's modification time (a hit refreshes it)
};
struct CacheListing {
  std::map<std::string, EntryFiles> entries;
  std::vector<fs::path> stale_temporaries;
};

CacheListing list_cache(const fs::path& dir) {
  CacheListing listing;
  const auto stale_before = fs::file_time_type::clock::now() - kStaleTemp;
  std::error_code ec;
  for (const auto& sub : fs::directory_iterator(dir, ec)) {
    std::string shard = sub.path().filename().string();
    if (shard.size() != 2 || !sub.is_directory(ec)) continue;
    for (const auto& f : fs::directory_iterator(sub.path(), ec)) {
      std::string name = f.path().filename().string();
      std::string key = name.substr(0, name.find('.'));
      if (!is_key(key) || key.compare(0, 2, shard) != 0 || name.size() == key.size()) continue;
      std::error_code file_ec;
      fs::file_time_type t = fs::last_write_time(f.path(), file_ec);
      if (file_ec) continue;  // removed meanwhile by another process
      if (name.find(kTempMark) != std::string::npos) {
        // Another writer's file in progress: not part of any entry; removed once clearly abandoned.
        if (t < stale_before) listing.stale_temporaries.push_back(f.path());
        continue;
      }
      EntryFiles& e = listing.entries[key];
      e.files.push_back(f.path());
      uintmax_t size = f.is_regular_file(file_ec) ? f.file_size(file_ec) : 0;
      if (!file_ec) e.bytes += size;
      if (name == key + kEntrySuffix || e.last_used == fs::file_time_type{}) e.last_used = t;
    }
  }
  return listing;
}

// An entry's last use is its file's modification time, set from the precise clock: the kernel
// stamps a written file from a coarse one (a few ms), so two entries of one compile, stored
// moments apart, could otherwise tie and be evicted in key order instead of age order.
void mark_used(const fs::path& entry) {
  std::error_code ec;
  fs::last_write_time(entry, fs::file_time_type::clock::now(), ec);
}

void remove_files(const std::vector<fs::path>& files) {
  std::error_code ec;
  for (const auto& f : files) fs::remove_all(f, ec);
}

// The entry's file: a header naming its key and each product's suffix, size and hash, an empty
// line, then the products' bytes one after another.
std::string entry_bytes(const std::string& key, const std::vector<std::pair<std::string, std::string>>& payloads) {
  std::string header = std::string(kEntryHeader) + "\nkey " + key + "\n";
  std::string body;
  for (const auto& [suffix, bytes] : payloads) {
    header += suffix + " " + std::to_string(bytes.size()) + " " + hash_bytes(bytes) + "\n";
    body += bytes;
  }
  return header + "\n" + body;
}

// The products of an entry file, each checked against its recorded size and hash, as offsets into
// it; `why` says what does not match.
std::map<std::string, std::pair<size_t, size_t>> parse_entry(const std::string& key, const std::string& file,
                                                             std::string& why) {
  size_t header_end = file.find("\n\n");
  std::istringstream lines(file.substr(0, header_end == std::string::npos ? file.size() : header_end + 2));
  std::string header, key_line;
  std::getline(lines, header);
  std::getline(lines, key_line);
  if (header != kEntryHeader) {
    why = "it is not an entry of this foundryc's format";
    return {};
  }
  if (key_line != "key " + key) {
    why = "it is another key's entry";
    return {};
  }
  std::vector<std::tuple<std::string, uint64_t, std::string>> recorded;
  for (std::string line; std::getline(lines, line) && !line.empty();) {
    std::istringstream fields(line);
    std::string suffix, hash;
    uint64_t size = 0;
    if (!(fields >> suffix >> size >> hash)) {
      why = "its header is damaged";
      return {};
    }
    recorded.emplace_back(suffix, size, hash);
  }
  size_t at = header_end == std::string::npos ? file.size() : header_end + 2;
  std::map<std::string, std::pair<size_t, size_t>> products;
  for (const auto& [suffix, size, hash] : recorded) {
    if (size > file.size() - at) {
      why = "it is shorter than recorded";
      return {};
    }
    if (hash_bytes(std::string_view(file).substr(at, size)) != hash) {
      why = "its " + suffix + " file has other contents than recorded";
      return {};
    }
    products[suffix] = {at, size};
    at += size;
  }
  if (at != file.size()) why = "it is longer than recorded";
  return products;
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

fs::path CompileCache::entry_path(const std::string& key) const {
  return fs::path(dir_) / key.substr(0, 2) / (key + kEntrySuffix);
}

std::string_view CacheEntry::part(const std::string& suffix) const {
  auto it = parts.find(suffix);
  return it == parts.end() ? std::string_view() : std::string_view(bytes).substr(it->second.first, it->second.second);
}

std::optional<CacheEntry> CompileCache::load(const std::string& key, std::string& why) {
  why.clear();
  const fs::path path = entry_path(key);
  CacheEntry entry;
  std::error_code ec;
  if (!read_regular_file(path, entry.bytes)) {
    if (!fs::exists(fs::symlink_status(path, ec))) return std::nullopt;  // no entry: a plain miss
    why = "it is not a readable file";
  }
  if (why.empty()) entry.parts = parse_entry(key, entry.bytes, why);
  if (!why.empty()) {
    why = "cache entry " + path.string() + " ignored: " + why;
    remove_files(list_cache(dir_).entries[key].files);  // damaged: rebuilt and stored again
    return std::nullopt;
  }
  mark_used(path);
  return entry;
}

bool CompileCache::fetch(const std::string& key, const Products& products, std::string& why) {
  std::optional<CacheEntry> stored = load(key, why);
  if (!stored) return false;
  for (const auto& [to, suffix] : products)
    if (!stored->parts.count(suffix)) return false;  // a whole entry without this product: a miss, then replaced
  // The checked bytes are the ones written: a file swapped after the check is never used.
  for (const auto& [to, suffix] : products)
    if (!write_file_atomically(to, stored->part(suffix))) throw UserError("cannot write " + to);
  return true;
}

void CompileCache::store(const std::string& key, const Products& products) {
  std::vector<std::pair<std::string, std::string>> payloads;
  for (const auto& [from, suffix] : products) {
    std::string bytes;
    if (!read_regular_file(from, bytes)) return;
    payloads.emplace_back(suffix, std::move(bytes));
  }
  store_bytes(key, payloads);
}

void CompileCache::store_bytes(const std::string& key, const std::vector<std::pair<std::string, std::string>>& payloads) {
  const fs::path path = entry_path(key);
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  // One file, one rename: a reader on any machine sees the whole entry or none. Concurrent
  // writers of one key each rename a whole entry; the last one stays.
  if (!write_file_atomically(path.string(), entry_bytes(key, payloads))) return;
  mark_used(path);
  evict_to_limit(key);
}

void CompileCache::evict_to_limit(const std::string& keep) {
  CacheListing listing = list_cache(dir_);
  remove_files(listing.stale_temporaries);
  uint64_t total = 0;
  std::vector<std::pair<fs::file_time_type, std::string>> by_age;
  for (const auto& [k, e] : listing.entries) {
    total += e.bytes;
    if (k != keep) by_age.push_back({e.last_used, k});
  }
  std::sort(by_age.begin(), by_age.end());
  for (const auto& [time, k] : by_age) {
    if (total <= limit_) break;
    remove_files(listing.entries[k].files);
    total -= listing.entries[k].bytes;
  }
}

CacheStats CompileCache::stats() const {
  CacheStats s;
  for (const auto& [key, e] : list_cache(dir_).entries) {
    ++s.entries;
    s.bytes += e.bytes;
  }
  return s;
}

CacheStats CompileCache::clear() {
  CacheStats s;
  std::error_code ec;
  CacheListing listing = list_cache(dir_);
  for (const auto& [key, e] : listing.entries) {
    ++s.entries;
    s.bytes += e.bytes;
    remove_files(e.files);
  }
  remove_files(listing.stale_temporaries);
  for (const auto& sub : fs::directory_iterator(dir_, ec))
    if (sub.path().filename().string().size() == 2 && fs::is_empty(sub.path(), ec)) fs::remove(sub.path(), ec);
  return s;
}

}  // namespace foundry::build
