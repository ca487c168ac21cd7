// .pt2 archives: a ZIP file mapped once (libzip opens and checks it; the central directory gives
// each entry's data offset so that STORED entries are plain views into the mapping), or a folder.
// Nothing in an archive is trusted: STORED entries are checked against their CRC-32, and a
// compressed entry's declared size is checked against what deflate can produce before anything
// is allocated; it is inflated in pieces as the data comes, keeping only the bytes asked for.
#include "foundry/frontend/archive.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>
#include <zlib.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <new>
#include <unordered_map>

#include "foundry/frontend/frontend.h"
#include "foundry/support/error.h"
#include "foundry/support/files.h"

namespace foundry {

namespace {

struct Mapping {
  void* addr = nullptr;
  size_t size = 0;
  Mapping(void* a, size_t s) : addr(a), size(s) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (addr && size) munmap(addr, size);
  }
};

struct HeapBytes {
  std::vector<uint8_t> bytes;
};

}  // namespace

Blob map_file(const std::string& path) {
  std::string error;
  int fd = open_regular_file(path, error);
  if (fd < 0) throw UserError(display_path(path) + ": cannot open: " + error);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw UserError(display_path(path) + ": cannot stat: " + std::strerror(e));
  }
  Blob blob;
  if (st.st_size == 0) {
    ::close(fd);
    static const uint8_t kEmpty[1] = {0};
    blob.data = kEmpty;
    return blob;
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  ::close(fd);
  if (addr == MAP_FAILED) throw UserError(display_path(path) + ": cannot map: " + std::strerror(e));
  auto mapping = std::make_shared<const Mapping>(addr, size);
  blob.owner = mapping;
  blob.data = static_cast<const uint8_t*>(addr);
  blob.size = size;
  return blob;
}

namespace {

uint16_t rd16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t rd32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t rd64(const uint8_t* p) { return rd32(p) | (static_cast<uint64_t>(rd32(p + 4)) << 32); }

// [off, off + len) lies within [0, size).
bool in_bounds(uint64_t off, uint64_t len, uint64_t size) { return off <= size && len <= size - off; }

struct CdEntry {
  std::string name;
  uint16_t flags = 0;
  uint16_t method = 0;
  uint32_t crc = 0;
  uint64_t comp_size = 0, size = 0, local_offset = 0;
  uint64_t data_offset = 0;
};

class ZipArchive final : public Archive {
 public:
  explicit ZipArchive(const std::string& path) : path_(path) {
    file_ = map_file(path);
    parse_central_directory();
    open_with_libzip();
    layout_error_ = index_under_root();
  }

  std::optional<uint64_t> size(const std::string& entry) override {
    check_layout();
    auto it = index_.find(entry);
    if (it == index_.end()) return std::nullopt;
    return entries_[it->second].size;
  }

  std::optional<Blob> read(const std::string& entry, uint64_t limit) override {
    check_layout();
    auto it = index_.find(entry);
    if (it == index_.end()) return std::nullopt;
    const CdEntry& e = entries_[it->second];
    auto cached = cache_.find(entry);
    if (cached != cache_.end() && cached->second.size >= std::min(limit, e.size)) return cached->second;
    Blob blob;
    if (e.method == ZIP_CM_STORE) {
      if (e.comp_size != e.size) fail(entry, "stored entry with different sizes");
      blob.owner = file_.owner;
      blob.data = file_.data + e.data_offset;
      blob.size = static_cast<size_t>(e.size);
      check_crc(entry, e, blob);
    } else {
      blob = inflate(entry, it->second, e, limit);
    }
    cache_[entry] = blob;
    return blob;
  }

  std::string describe(const std::string& entry) const override {
    return display_path(path_) + ":" + root_ + entry;
  }

  std::vector<std::string_view> entry_names() const override {
    std::vector<std::string_view> names;
    names.reserve(entries_.size());
    for (const CdEntry& e : entries_) names.push_back(e.name);
    return names;
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    throw UserError(display_path(path_) + ": " + msg);
  }
  [[noreturn]] void fail(const std::string& entry, const std::string& msg) const {
    throw UserError(describe(entry) + ": " + msg);
  }

  void parse_central_directory() {
    const uint8_t* d = file_.data;
    const uint64_t n = file_.size;
    if (n < 22) fail("not a ZIP archive (too short)");
    // End of central directory record: the last signature that fits, within the maximal comment.
    uint64_t lo = n - 22 > 65535 ? n - 22 - 65535 : 0;
    uint64_t eocd = UINT64_MAX;
    for (uint64_t i = n - 22 + 1; i-- > lo;) {
      if (rd32(d + i) == 0x06054b50 && i + 22 + rd16(d + i + 20) <= n) {
        eocd = i;
        break;
      }
    }
    if (eocd == UINT64_MAX) fail("not a ZIP archive (no end of central directory record)");
    uint64_t disk = rd16(d + eocd + 4), cd_disk = rd16(d + eocd + 6);
    uint64_t count = rd16(d + eocd + 10);
    uint64_t cd_size = rd32(d + eocd + 12), cd_offset = rd32(d + eocd + 16);
    if (eocd >= 20 && rd32(d + eocd - 20) == 0x07064b50) {  // ZIP64 locator
      uint64_t z64 = rd64(d + eocd - 20 + 8);
      if (!in_bounds(z64, 56, n) || rd32(d + z64) != 0x06064b50)
        fail("damaged ZIP64 end of central directory record");
      disk = rd32(d + z64 + 16);
      cd_disk = rd32(d + z64 + 20);
      count = rd64(d + z64 + 32);
      cd_size = rd64(d + z64 + 40);
      cd_offset = rd64(d + z64 + 48);
    } else if (count == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {
      fail("damaged ZIP archive (ZIP64 fields without a ZIP64 record)");
    }
    if (disk != 0 || cd_disk != 0) fail("multi-volume ZIP archives are not supported");
    if (!in_bounds(cd_offset, cd_size, n)) fail("damaged ZIP archive (central directory out of range)");
    if (count > cd_size / 46) fail("damaged ZIP archive (entry count does not fit the directory)");

    const uint64_t cd_end = cd_offset + cd_size;
    uint64_t p = cd_offset;
    entries_.reserve(static_cast<size_t>(count));
    for (uint64_t k = 0; k < count; ++k) {
      if (!in_bounds(p, 46, cd_end) || rd32(d + p) != 0x02014b50)
        fail("damaged ZIP archive (bad central directory entry " + std::to_string(k) + ")");
      CdEntry e;
      e.flags = rd16(d + p + 8);
      e.method = rd16(d + p + 10);
      e.crc = rd32(d + p + 16);
      e.comp_size = rd32(d + p + 20);
      e.size = rd32(d + p + 24);
      uint64_t nlen = rd16(d + p + 28), elen = rd16(d + p + 30), clen = rd16(d + p + 32);
      e.local_offset = rd32(d + p + 42);
      if (!in_bounds(p + 46, nlen + elen + clen, cd_end))
        fail("damaged ZIP archive (central directory entry " + std::to_string(k) + " overruns)");
      e.name.assign(reinterpret_cast<const char*>(d + p + 46), nlen);
      // ZIP64 extended information: 64-bit values for the fields saturated in the entry.
      const uint8_t* x = d + p + 46 + nlen;
      for (uint64_t q = 0; q + 4 <= elen;) {
        uint16_t id = rd16(x + q), len = rd16(x + q + 2);
        if (q + 4 + len > elen) break;
        if (id == 0x0001) {
          const uint8_t* f = x + q + 4;
          uint64_t avail = len;
          auto take = [&](uint64_t& field) {
            if (avail < 8) fail("damaged ZIP64 extra field in entry " + quote_untrusted(e.name));
            field = rd64(f);
            f += 8;
            avail -= 8;
          };
          if (e.size == 0xFFFFFFFF) take(e.size);
          if (e.comp_size == 0xFFFFFFFF) take(e.comp_size);
          if (e.local_offset == 0xFFFFFFFF) take(e.local_offset);
        }
        q += 4 + len;
      }
      // The local header gives the data's offset (its name and extra field may differ in length).
      if (!in_bounds(e.local_offset, 30, n) || rd32(d + e.local_offset) != 0x04034b50)
        fail("damaged ZIP archive (bad local header for " + quote_untrusted(e.name) + ")");
      uint64_t lnlen = rd16(d + e.local_offset + 26), lelen = rd16(d + e.local_offset + 28);
      e.data_offset = e.local_offset + 30 + lnlen + lelen;
      if (!in_bounds(e.data_offset, e.comp_size, n))
        fail("damaged ZIP archive (data of " + quote_untrusted(e.name) + " out of range)");
      p += 46 + nlen + elen + clen;
      entries_.push_back(std::move(e));
    }
  }

  // Indexes the entries by their path under the one root folder that holds everything ("model/..."
  // in model.pt2). Returns why the entries are not laid out so ("" when they are).
  std::string index_under_root() {
    for (size_t i = 0; i < entries_.size(); ++i) {
      const std::string& name = entries_[i].name;
      size_t slash = name.find('/');
      if (slash == 0 || slash == std::string::npos)
        return "archive entry " + quote_untrusted(name) + " is not inside a root folder";
      std::string root = name.substr(0, slash + 1);
      if (i == 0) root_ = root;
      else if (root != root_)
        return "archive entries are not under one root folder (" + quote_untrusted(root_) + " and " +
               quote_untrusted(root) + ")";
      std::string rel = name.substr(slash + 1);
      if (rel.empty() || rel.back() == '/') continue;  // the folder entries themselves
      if (!index_.emplace(rel, i).second) return "duplicate archive entry " + quote_untrusted(name);
    }
    if (entries_.empty()) return "the ZIP archive is empty";
    return "";
  }

  void check_layout() const {
    if (!layout_error_.empty()) fail(layout_error_);
  }

  void open_with_libzip() {
    zip_error_t err;
    zip_error_init(&err);
    zip_source_t* src = zip_source_buffer_create(file_.data, file_.size, 0, &err);
    if (!src) {
      std::string msg = zip_error_strerror(&err);
      zip_error_fini(&err);
      fail("cannot open the ZIP archive: " + msg);
    }
    zip_.reset(zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &err));
    if (!zip_) {
      zip_source_free(src);
      std::string msg = zip_error_strerror(&err);
      zip_error_fini(&err);
      fail("not a valid ZIP archive (libzip: " + msg + ")");
    }
    zip_error_fini(&err);
    // libzip's view of the directory must agree with ours.
    zip_int64_t count = zip_get_num_entries(zip_.get(), 0);
    if (count < 0 || static_cast<uint64_t>(count) != entries_.size())
      fail("inconsistent ZIP directory (entry count)");
    for (size_t i = 0; i < entries_.size(); ++i) {
      zip_stat_t st;
      zip_stat_init(&st);
      if (zip_stat_index(zip_.get(), i, ZIP_FL_ENC_RAW, &st) != 0) fail("cannot read ZIP entry " + std::to_string(i));
      const CdEntry& e = entries_[i];
      bool same = (st.valid & ZIP_STAT_NAME) && e.name == st.name && (st.valid & ZIP_STAT_SIZE) &&
                  st.size == e.size && (st.valid & ZIP_STAT_COMP_SIZE) && st.comp_size == e.comp_size &&
                  (st.valid & ZIP_STAT_COMP_METHOD) && st.comp_method == e.method;
      if (!same) fail("inconsistent ZIP directory (entry " + quote_untrusted(e.name) + ")");
      if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE)
        fail("encrypted archive entry " + quote_untrusted(e.name) + " is not supported");
    }
  }

  // A STORED entry's bytes must be the ones its CRC-32 was computed from.
  void check_crc(const std::string& entry, const CdEntry& e, const Blob& blob) const {
    uLong crc = crc32_z(0L, Z_NULL, 0);
    crc = crc32_z(crc, blob.data, blob.size);
    if (crc != e.crc)
      fail(entry, "damaged archive entry: its CRC-32 is " + hex32(crc) + ", the archive records " + hex32(e.crc));
  }

  static std::string hex32(uint64_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08llx", static_cast<unsigned long long>(v));
    return buf;
  }

  // A compressed entry's first `limit` bytes. It is inflated to its end all the same (libzip checks
  // its CRC there) but in pieces, holding only the kept bytes: what it declares is only trusted
  // once the data is there, and bytes nobody reads (past a tensor's extent) are not kept.
  Blob inflate(const std::string& entry, size_t index, const CdEntry& e, uint64_t limit) {
    // Deflate cannot produce more than 1032 bytes per compressed byte; other methods are held to
    // the same ratio. A larger declared size is a damaged or hostile header.
    constexpr uint64_t kMaxRatio = 1032, kMaxInflatedTotal = uint64_t(16) << 30;
    if (e.size / kMaxRatio > e.comp_size + 1)
      fail(entry, "declares " + std::to_string(e.size) + " bytes uncompressed from " + std::to_string(e.comp_size) +
                      " compressed bytes, more than deflate can produce (1032 to 1): a damaged or hostile archive");
    if (e.size > kMaxInflatedTotal - inflated_total_)
      fail(entry, "the archive's compressed entries inflate to more than 16 GiB in all; "
                  "save it with stored (uncompressed) entries, as torch.export.save does");
    inflated_total_ += e.size;
    zip_file_t* f = zip_fopen_index(zip_.get(), index, 0);
    if (!f) fail(entry, std::string("cannot read: ") + zip_strerror(zip_.get()));
    auto heap = std::make_shared<HeapBytes>();
    const uint64_t keep = std::min(limit, e.size);
    std::vector<uint8_t> piece(1 << 16);
    uint64_t total = 0;
    try {
      while (total <= e.size) {
        zip_int64_t got = zip_fread(f, piece.data(), piece.size());
        if (got < 0) {
          std::string msg = zip_file_strerror(f);
          zip_fclose(f);
          fail(entry, "cannot inflate: " + msg);
        }
        if (got == 0) break;
        uint64_t n = static_cast<uint64_t>(got);
        if (total < keep) heap->bytes.insert(heap->bytes.end(), piece.data(), piece.data() + std::min(n, keep - total));
        total += n;
      }
    } catch (const std::bad_alloc&) {
      zip_fclose(f);
      fail(entry, "not enough memory to inflate " + std::to_string(keep) + " bytes");
    }
    zip_fclose(f);
    if (total != e.size) fail(entry, "inflated size does not match the directory");
    Blob blob;
    blob.data = heap->bytes.data();
    blob.size = heap->bytes.size();
    blob.owner = heap;
    return blob;
  }

  std::string path_;
  Blob file_;
  std::string root_;  // "model/"
  std::string layout_error_;  // why the entries are not a .pt2's layout, thrown by every read
  std::vector<CdEntry> entries_;
  std::unordered_map<std::string, size_t> index_;  // path under the root -> entries_ index
  std::unordered_map<std::string, Blob> cache_;
  uint64_t inflated_total_ = 0;  // bytes inflated so far, against kMaxInflatedTotal
  struct ZipCloser {
    void operator()(zip_t* z) const { zip_discard(z); }
  };
  std::unique_ptr<zip_t, ZipCloser> zip_;
};

class FolderArchive final : public Archive {
 public:
  explicit FolderArchive(std::string root) : root_(std::move(root)) {}

  std::optional<uint64_t> size(const std::string& entry) override {
    auto blob = read(entry, UINT64_MAX);  // a mapping: no bytes are read
    if (!blob) return std::nullopt;
    return blob->size;
  }

  std::optional<Blob> read(const std::string& entry, uint64_t /*limit: a mapping costs nothing*/) override {
    auto cached = cache_.find(entry);
    if (cached != cache_.end()) return cached->second;
    std::filesystem::path p = std::filesystem::path(root_) / entry;
    std::error_code ec;
    if (!std::filesystem::exists(p, ec)) return std::nullopt;
    check_inside_root(p);
    Blob blob = map_file(p.string());
    cache_.emplace(entry, blob);
    return blob;
  }

  std::string describe(const std::string& entry) const override {
    return display_path((std::filesystem::path(root_) / entry).string());
  }

 private:
  std::string root_;
  std::unordered_map<std::string, Blob> cache_;

  // An extracted archive is as untrusted as the ZIP it came from: a symbolic link in it may point
  // anywhere (/etc/passwd as a weight). Links that stay inside the folder are fine.
  void check_inside_root(const std::filesystem::path& p) const {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path real = fs::canonical(p, ec);
    fs::path root = ec ? fs::path() : fs::canonical(root_, ec);
    if (ec) throw UserError(display_path(p.string()) + ": cannot resolve: " + ec.message());
    fs::path rel = real.lexically_relative(root);
    if (rel.empty() || *rel.begin() == "..")
      throw UserError(display_path(p.string()) + ": a symbolic link to " + display_path(real.string()) +
                      ", outside the archive folder " + display_path(root_));
  }
};

}  // namespace

std::unique_ptr<Archive> open_zip_archive(const std::string& path) {
  return std::make_unique<ZipArchive>(path);
}

std::unique_ptr<Archive> open_folder_archive(const std::string& root) {
  return std::make_unique<FolderArchive>(root);
}

}  // namespace foundry
