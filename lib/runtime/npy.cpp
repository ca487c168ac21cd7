// NumPy .npy reader and writer. Format reference: numpy/lib/format.py (versions 1.0, 2.0, 3.0).
//
//   "\x93NUMPY" major minor | header length (u16 LE for v1, u32 LE for v2/v3) | header | data
//
// The header is the repr of a Python dict with exactly the keys 'descr', 'fortran_order' and
// 'shape', padded with spaces and a final newline so the data starts on a 64-byte boundary.
// Everything in the file is untrusted: every size is checked before it is used.
#include "foundry/runtime/npy.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

#include <sys/stat.h>
#include <unistd.h>

#include "foundry/support/error.h"
#include "foundry/support/files.h"

static_assert(std::endian::native == std::endian::little,
              "npy.cpp reads and writes little-endian data in place");

namespace foundry {

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    FOUNDRY_CHECK(d >= 0, "NpyArray with a negative dimension");
    FOUNDRY_CHECK(!__builtin_mul_overflow(n, d, &n), "NpyArray element count overflows int64");
  }
  return n;
}

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;
// NumPy itself refuses headers over 10000 bytes by default; stay generous but bounded.
constexpr uint64_t kMaxHeaderLen = 1 << 20;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw UserError(path + ": " + what);
}

// A tiny parser for the subset of Python literal syntax that .npy headers use.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& path) : s_(text), path_(path) {}

  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' ||
                                s_[pos_] == '\r'))
      ++pos_;
  }
  bool at_end() {
    skip_ws();
    return pos_ >= s_.size();
  }
  char peek() {
    skip_ws();
    return pos_ < s_.size() ? s_[pos_] : '\0';
  }
  bool accept(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c, const char* what) {
    if (!accept(c)) bad(std::string("expected ") + what);
  }
  [[noreturn]] void bad(const std::string& what) {
    fail(path_, "malformed .npy header (" + what + " at offset " + std::to_string(pos_) +
                    "): " + quote_untrusted(std::string(s_)));
  }

  // 'text' or "text"; NumPy never writes escapes in the strings we accept.
  std::string string_literal() {
    char q = peek();
    if (q != '\'' && q != '"') bad("expected a string");
    ++pos_;
    size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != q) {
      if (s_[pos_] == '\\' || s_[pos_] == '\n') bad("unsupported character in a string");
      ++pos_;
    }
    if (pos_ >= s_.size()) bad("unterminated string");
    std::string out(s_.substr(start, pos_ - start));
    ++pos_;
    return out;
  }

  bool bool_literal() {
    skip_ws();
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    bad("expected True or False");
  }

  int64_t dimension() {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == '-') fail(path_, "negative dimension in .npy shape");
    if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') bad("expected a dimension");
    int64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      if (__builtin_mul_overflow(v, int64_t{10}, &v) ||
          __builtin_add_overflow(v, int64_t{s_[pos_] - '0'}, &v))
        fail(path_, "absurd .npy shape: a dimension does not fit in 64 bits");
      ++pos_;
    }
    if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2 long suffix
    return v;
  }

  // (), (5,), (2, 3), (2, 3,)
  std::vector<int64_t> shape_tuple() {
    expect('(', "'(' to open the shape");
    std::vector<int64_t> dims;
    if (accept(')')) return dims;
    while (true) {
      dims.push_back(dimension());
      if (dims.size() > 64) fail(path_, "absurd .npy shape: more than 64 dimensions");
      if (accept(')')) {
        if (dims.size() == 1) bad("a one-element shape needs a trailing comma");
        return dims;
      }
      expect(',', "',' or ')' in the shape");
      if (accept(')')) return dims;
    }
  }

 private:
  std::string_view s_;
  const std::string& path_;
  size_t pos_ = 0;
};

[[noreturn]] void unsupported_dtype(const std::string& path, const std::string& descr,
                                   const std::string& why) {
  fail(path, "unsupported .npy dtype " + quote_untrusted(descr) + " (" + why +
                 "); supported: float16/32/64, bfloat16 (ml_dtypes.bfloat16, saved as '<V2'), int8/16/32/64, uint8, bool");
}

DType parse_descr(const std::string& descr, const std::string& path) {
  auto unsupported = [&](const std::string& why) { unsupported_dtype(path, descr, why); };
  char order = descr.empty() ? '=' : descr[0];
  std::string_view code = descr;
  if (order == '<' || order == '>' || order == '|' || order == '=')
    code.remove_prefix(1);
  else
    order = '=';
  std::optional<DType> t;
  // NumPy has no bfloat16: np.save writes ml_dtypes.bfloat16 arrays as 2-byte records ('<V2'),
  // and a 2-byte record is taken for one (np.load(...).view(ml_dtypes.bfloat16) reads them back).
  if (code == "V2") return DType::BFloat16;
  if (code == "f2") t = DType::Float16;
  else if (code == "f4") t = DType::Float32;
  else if (code == "f8") t = DType::Float64;
  else if (code == "i1") t = DType::Int8;
  else if (code == "i2") t = DType::Int16;
  else if (code == "i4") t = DType::Int32;
  else if (code == "i8") t = DType::Int64;
  else if (code == "u1") t = DType::UInt8;
  else if (code == "b1" || code == "?") t = DType::Bool;
  if (!t) {
    if (code.empty()) unsupported("empty");
    if (code == "O") unsupported("Python objects");
    if (!code.empty() && (code[0] == 'U' || code[0] == 'S' || code[0] == 'a'))
      unsupported("strings");
    if (!code.empty() && code[0] == 'c') unsupported("complex numbers");
    if (!code.empty() && (code[0] == 'M' || code[0] == 'm')) unsupported("dates and times");
    if (!code.empty() && code[0] == 'V') unsupported("raw bytes or structured records");
    unsupported_dtype(path, descr, "unknown type code");
  }
  size_t itemsize = dtype_size(*t);
  if (itemsize > 1) {
    // '|' means "byte order not applicable", which is wrong for multi-byte types; '=' is native,
    // and this file only builds for little-endian hosts.
    if (order == '>') fail(path, "big-endian .npy data (" + quote_untrusted(descr) +
                                     ") is not supported; save it little-endian");
    if (order == '|') unsupported("no byte order for a multi-byte type");
  }
  return *t;
}

std::string shape_repr(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

const char* descr_for(DType t) {
  switch (t) {
    case DType::Bool: return "|b1";
    case DType::UInt8: return "|u1";
    case DType::Int8: return "|i1";
    case DType::Int16: return "<i2";
    case DType::Int32: return "<i4";
    case DType::Int64: return "<i8";
    case DType::Float16: return "<f2";
    case DType::Float32: return "<f4";
    case DType::Float64: return "<f8";
    case DType::BFloat16: return "<V2";  // as np.save writes ml_dtypes.bfloat16
  }
  return nullptr;
}

struct File {
  std::FILE* f = nullptr;
  ~File() {
    if (f) std::fclose(f);
  }
};

std::string errno_text() { return std::strerror(errno); }

}  // namespace

NpyArray read_npy(const std::string& path) {
  File file;
  std::string error;
  int fd = open_regular_file(path, error);  // fopen would wait forever on a FIFO
  if (fd < 0) fail(path, "cannot open .npy file: " + error);
  file.f = fdopen(fd, "rb");
  if (!file.f) {
    ::close(fd);
    fail(path, "cannot open .npy file: " + errno_text());
  }
  struct stat st {};
  if (fstat(fileno(file.f), &st) != 0) fail(path, "cannot stat .npy file: " + errno_text());
  if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);

  auto read_exact = [&](void* dst, size_t n, const char* what) {
    if (n && std::fread(dst, 1, n, file.f) != n)
      fail(path, std::string("truncated .npy file: cannot read the ") + what);
  };

  unsigned char prefix[12];
  if (file_size < 10) fail(path, "not a .npy file (only " + std::to_string(file_size) + " bytes)");
  read_exact(prefix, 8, "magic string");
  if (std::memcmp(prefix, kMagic, kMagicLen) != 0)
    fail(path, "not a .npy file (missing the \\x93NUMPY magic string)");
  const int major = prefix[6], minor = prefix[7];
  uint64_t header_len;
  size_t prefix_len;
  if (major == 1) {
    read_exact(prefix + 8, 2, "header length");
    header_len = uint64_t{prefix[8]} | uint64_t{prefix[9]} << 8;
    prefix_len = 10;
  } else if (major == 2 || major == 3) {
    read_exact(prefix + 8, 4, "header length");
    header_len = uint64_t{prefix[8]} | uint64_t{prefix[9]} << 8 | uint64_t{prefix[10]} << 16 |
                 uint64_t{prefix[11]} << 24;
    prefix_len = 12;
  } else {
    fail(path, "unsupported .npy format version " + std::to_string(major) + "." +
                   std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
  }
  if (header_len > kMaxHeaderLen) fail(path, "absurd .npy header length " + std::to_string(header_len));
  if (header_len > file_size - prefix_len)
    fail(path, "truncated .npy file: the header needs " + std::to_string(header_len) +
                   " bytes, the file has " + std::to_string(file_size - prefix_len) + " after the prefix");
  std::string header(header_len, '\0');
  read_exact(header.data(), header_len, "header");

  HeaderParser p(header, path);
  std::optional<std::string> descr;
  std::optional<bool> fortran;
  std::optional<std::vector<int64_t>> shape;
  p.expect('{', "'{' to open the header dict");
  while (!p.accept('}')) {
    std::string key = p.string_literal();
    p.expect(':', "':' after a key");
    if (key == "descr") {
      if (descr) p.bad("duplicate key 'descr'");
      if (p.peek() == '[') fail(path, "unsupported .npy dtype: structured (record) arrays");
      descr = p.string_literal();
    } else if (key == "fortran_order") {
      if (fortran) p.bad("duplicate key 'fortran_order'");
      fortran = p.bool_literal();
    } else if (key == "shape") {
      if (shape) p.bad("duplicate key 'shape'");
      shape = p.shape_tuple();
    } else {
      p.bad("unexpected key " + quote_untrusted(key));
    }
    if (!p.accept(',')) {
      p.expect('}', "',' or '}' after a value");
      break;
    }
  }
  if (!p.at_end()) p.bad("unexpected text after the header dict");
  if (!descr || !fortran || !shape) p.bad("the header must have 'descr', 'fortran_order' and 'shape'");

  NpyArray a;
  a.dtype = parse_descr(*descr, path);
  if (*fortran)
    fail(path, "Fortran-order .npy arrays are not supported; save a C-contiguous array");
  a.shape = std::move(*shape);

  const uint64_t itemsize = dtype_size(a.dtype);
  int64_t numel = 1;
  for (int64_t d : a.shape)
    if (__builtin_mul_overflow(numel, d, &numel))
      fail(path, "absurd .npy shape " + shape_repr(a.shape) + ": the element count overflows");
  uint64_t nbytes;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel), itemsize, &nbytes))
    fail(path, "absurd .npy shape " + shape_repr(a.shape) + ": the byte size overflows");
  const uint64_t available = file_size - prefix_len - header_len;
  if (nbytes > available)
    fail(path, "truncated .npy file: shape " + shape_repr(a.shape) + " of " +
                   std::string(dtype_name(a.dtype)) + " needs " + std::to_string(nbytes) +
                   " bytes of data, the file has " + std::to_string(available));
  // Bytes after the data are ignored, as NumPy does.
  a.data.resize(nbytes);
  read_exact(a.data.data(), nbytes, "data");
  return a;
}

void write_npy(const std::string& path, const NpyArray& array) {
  const char* descr = descr_for(array.dtype);
  if (!descr)
    throw UserError(path + ": cannot write " + std::string(dtype_name(array.dtype)) +
                    " to .npy (NumPy has no such dtype); convert it to float32 first");
  const int64_t numel = array.numel();  // checks the shape
  uint64_t nbytes = 0;
  FOUNDRY_CHECK(!__builtin_mul_overflow(static_cast<uint64_t>(numel), dtype_size(array.dtype), &nbytes) &&
                    nbytes == array.data.size(),
                "write_npy: data size does not match shape " + shape_repr(array.shape));

  // Byte for byte what numpy.save writes (NumPy >= 1.23: growth padding, then 64-byte alignment).
  std::string dict = std::string("{'descr': '") + descr +
                     "', 'fortran_order': False, 'shape': " + shape_repr(array.shape) + ", }";
  if (!array.shape.empty()) {
    size_t digits = std::to_string(array.shape[0]).size();
    if (digits < 21) dict.append(21 - digits, ' ');
  }
  const size_t hlen = dict.size() + 1;  // + '\n'
  size_t prefix_len = 10;
  size_t pad = kAlign - (prefix_len + hlen) % kAlign;
  int major = 1;
  if (hlen + pad > 0xffff) {  // cannot happen for <= 64 dims, but stay correct
    major = 2;
    prefix_len = 12;
    pad = kAlign - (prefix_len + hlen) % kAlign;
  }
  const uint64_t total_header = hlen + pad;
  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < prefix_len - 8; ++i) out += static_cast<char>((total_header >> (8 * i)) & 0xff);
  out += dict;
  out.append(pad, ' ');
  out += '\n';

  File file;
  file.f = std::fopen(path.c_str(), "wb");
  if (!file.f) throw UserError(path + ": cannot create .npy file: " + errno_text());
  bool ok = std::fwrite(out.data(), 1, out.size(), file.f) == out.size() &&
            (array.data.empty() ||
             std::fwrite(array.data.data(), 1, array.data.size(), file.f) == array.data.size());
  int close_rc = std::fclose(file.f);
  file.f = nullptr;
  if (!ok || close_rc != 0) {
    std::string why = errno_text();
    std::remove(path.c_str());
    throw UserError(path + ": cannot write .npy file: " + why);
  }
}

}  // namespace foundry
