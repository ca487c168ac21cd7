// The compile cache: model.so and libmodel.a kept under the hash of the sources and flags they
// were built from (compile.h: the key), so that compiling the same model again does not run the
// compiler. Nothing in it is trusted: an entry records its key and each product's size and
// content hash, checked on every read; an entry that does not match, whatever the reason
// (truncated, swapped with another's, not a file), is a miss and is rebuilt. The cache keeps
// under a size limit by removing the entries used least recently (a hit refreshes the entry's
// modification time).
//
// The folder may be shared by processes and machines at once (NFS-like storage: rename is
// atomic, locks may not be), so nothing takes a lock: an entry is one file, written under a
// temporary name unique to its host and process and renamed into place, so a reader sees a
// whole entry or none, and a killed writer leaves only a temporary (removed an hour later).
//
// Layout: DIR/<first two hex digits of KEY>/KEY.entry: a text header ("foundry-cache-entry 2",
// "key KEY", then "SUFFIX SIZE XXH128" per product, an empty line) and the products' bytes.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace foundry::build {

// FOUNDRY_CACHE_MAX_SIZE when set (bytes, or with a K, M or G suffix), else 2 GiB.
uint64_t default_cache_limit();
// "123", "64K", "512M", "2G" (powers of 1024) as bytes; throws UserError naming `what` otherwise.
uint64_t parse_byte_size(const std::string& text, const std::string& what);

struct CacheStats {
  size_t entries = 0;
  uint64_t bytes = 0;  // every file of every entry
};

// Writes `bytes` to `to` through a temporary file beside it (named after this host and process)
// and a rename, so that no reader, in this process or another, sees half of it. False on failure.
bool write_file_atomically(const std::string& to, std::string_view bytes);

// An entry as read: the file, and where each part (by suffix) lies in it, each checked.
struct CacheEntry {
  std::string bytes;
  std::map<std::string, std::pair<size_t, size_t>> parts;  // suffix -> (offset, size)
  std::string_view part(const std::string& suffix) const;  // empty when there is none
};

class CompileCache {
 public:
  CompileCache(std::string dir, uint64_t limit);

  // A product: the file it is copied to or from, and its suffix in the cache (".so", ".a").
  using Products = std::vector<std::pair<std::string, std::string>>;

  // Copies every product of entry `key` into place when the entry is whole and matches its record
  // (and marks it used); returns false otherwise, with `why` saying what did not match when an
  // entry was there (empty when there was none). A damaged entry is removed.
  bool fetch(const std::string& key, const Products& products, std::string& why);
  // Stores the products under `key` (best effort: an unwritable cache is no error), then removes
  // least recently used entries, never this one, until the cache fits its limit.
  void store(const std::string& key, const Products& products);

  // The same for products held in memory, (suffix, bytes): entry `key`, checked as fetch checks
  // it (and marked used), or nullopt as fetch fails. A suffix is any word without white space.
  std::optional<CacheEntry> load(const std::string& key, std::string& why);
  void store_bytes(const std::string& key, const std::vector<std::pair<std::string, std::string>>& payloads);

  CacheStats stats() const;
  // Removes every entry (only the cache's own files: other files in DIR stay); returns what it held.
  CacheStats clear();

  const std::string& dir() const { return dir_; }
  uint64_t limit() const { return limit_; }

 private:
  std::filesystem::path entry_path(const std::string& key) const;
  // Removes least recently used entries, never `keep`, until the cache fits its limit, and
  // temporaries abandoned by killed writers.
  void evict_to_limit(const std::string& keep);

  std::string dir_;
  uint64_t limit_;
};

}  // namespace foundry::build
