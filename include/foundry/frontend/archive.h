// Read access to a .pt2 archive's entries, by their path under the archive's root folder
// ("models/model.json", "data/weights/weight_0"): a ZIP file mapped into memory once, or an
// extracted folder. STORED entries are returned as views into the mapping (no copies).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "foundry/graph/graph.h"

namespace foundry {

class Archive {
 public:
  virtual ~Archive() = default;
  // The entry's bytes, or nullopt when there is no such entry. Reading an entry twice returns the
  // same bytes (compressed entries are inflated once). Throws UserError on a damaged entry (a
  // STORED one whose CRC-32 does not match, a compressed one that declares more than it can hold).
  std::optional<Blob> read(const std::string& entry) { return read(entry, UINT64_MAX); }
  // At least the first min(limit, size) bytes: a compressed entry is still inflated to its end
  // (its CRC is checked there) but only those are kept in memory.
  virtual std::optional<Blob> read(const std::string& entry, uint64_t limit) = 0;
  // The entry's size as the archive declares it, before anything is read; nullopt when absent.
  virtual std::optional<uint64_t> size(const std::string& entry) = 0;
  // How messages name the entry, e.g. "model.pt2:model/data/weights/weight_0".
  virtual std::string describe(const std::string& entry) const = 0;
  // Every entry's full name as the archive's directory lists it, root folder included (a folder
  // lists none): what tells a torch.save file or a TorchScript archive from a .pt2 archive.
  virtual std::vector<std::string_view> entry_names() const { return {}; }
};

// A .pt2 ZIP archive: one root folder, entries located through the central directory (ZIP64
// aware), the whole file mapped once. Throws UserError on anything that is not a valid ZIP file.
// Entries that are not a .pt2's layout (not under one root folder, named twice) make read() and
// size() throw instead, so that entry_names() can still tell what the ZIP file is.
std::unique_ptr<Archive> open_zip_archive(const std::string& path);

// An extracted archive: `root` is the folder that holds models/ and data/.
std::unique_ptr<Archive> open_folder_archive(const std::string& root);

// Maps a whole file read-only (an empty file gives an empty blob). Throws UserError naming the
// file when it cannot be opened.
Blob map_file(const std::string& path);

}  // namespace foundry
