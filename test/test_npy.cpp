// .npy reading and writing: NumPy compatibility (byte-exact), round trips, the corpus's files and
// malformed or hostile files.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "foundry/runtime/compare.h"
#include "foundry/runtime/npy.h"
#include "foundry/support/error.h"
#include "support.h"

using foundry::DType;
using foundry::NpyArray;
using foundry::read_npy;
using foundry::write_npy;

namespace {

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

template <typename T>
T element(const NpyArray& a, size_t i) {
  T v;
  std::memcpy(&v, a.data.data() + i * sizeof(T), sizeof(T));
  return v;
}

uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// The message of the foundry::UserError that read_npy throws for this file ("" if none).
std::string read_error(const std::string& path) {
  try {
    read_npy(path);
  } catch (const foundry::UserError& e) {
    return e.what();
  }
  return "";
}

// Bytes of a v1.0 .npy file with this header dict (padded like NumPy) and data.
std::string npy_v1(const std::string& dict, const std::string& data) {
  std::string header = dict;
  size_t pad = 64 - (10 + header.size() + 1) % 64;
  header.append(pad, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

// Files written by NumPy 1.24.2 (np.save, and np.lib.format.write_array for versions 2.0, 3.0).
struct NumpyFile {
  const char* name;
  DType dtype;
  std::vector<int64_t> shape;
  const char* hex;
};
const std::vector<NumpyFile>& numpy_files() {
  static const std::vector<NumpyFile> files = {
      // np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1
      {"f32_2x3", DType::Float32, {2, 3},
       "934e554d5059010076007b276465736372273a20273c6634272c2027666f727472616e5f6f72646572273a20"
       "46616c73652c20277368617065273a2028322c2033292c207d20202020202020202020202020202020202020"
       "2020202020202020202020202020202020202020202020202020202020202020202020202020200a000080bf"
       "000000bf000000000000003f0000803f0000c03f"},
      // np.array(-7, dtype=np.int64): 0-d
      {"i64_0d", DType::Int64, {},
       "934e554d5059010076007b276465736372273a20273c6938272c2027666f727472616e5f6f72646572273a20"
       "46616c73652c20277368617065273a2028292c207d2020202020202020202020202020202020202020202020"
       "2020202020202020202020202020202020202020202020202020202020202020202020202020200af9ffffff"
       "ffffffff"},
      // np.array([True, False, True, True, False])
      {"b1_5", DType::Bool, {5},
       "934e554d5059010076007b276465736372273a20277c6231272c2027666f727472616e5f6f72646572273a20"
       "46616c73652c20277368617065273a2028352c292c207d202020202020202020202020202020202020202020"
       "2020202020202020202020202020202020202020202020202020202020202020202020202020200a01000101"
       "00"},
      // np.array([1.0, -2.5, 65504], dtype=np.float16)
      {"f16_3", DType::Float16, {3},
       "934e554d5059010076007b276465736372273a20273c6632272c2027666f727472616e5f6f72646572273a20"
       "46616c73652c20277368617065273a2028332c292c207d202020202020202020202020202020202020202020"
       "2020202020202020202020202020202020202020202020202020202020202020202020202020200a003c00c1"
       "ff7b"},
      // np.array([-128, 0, 127], dtype=np.int8)
      {"i8_3", DType::Int8, {3},
       "934e554d5059010076007b276465736372273a20277c6931272c2027666f727472616e5f6f72646572273a20"
       "46616c73652c20277368617065273a2028332c292c207d202020202020202020202020202020202020202020"
       "2020202020202020202020202020202020202020202020202020202020202020202020202020200a80007f"},
      // np.array([[0, 1], [254, 255]], dtype=np.uint8)
      {"u1_2x2", DType::UInt8, {2, 2},
       "934e554d5059010076007b276465736372273a20277c7531272c2027666f727472616e5f6f72646572273a20"
       "46616c73652c20277368617065273a2028322c2032292c207d20202020202020202020202020202020202020"
       "2020202020202020202020202020202020202020202020202020202020202020202020202020200a0001feff"},
      // np.array([np.pi])
      {"f64_1", DType::Float64, {1},
       "934e554d5059010076007b276465736372273a20273c6638272c2027666f727472616e5f6f72646572273a20"
       "46616c73652c20277368617065273a2028312c292c207d202020202020202020202020202020202020202020"
       "2020202020202020202020202020202020202020202020202020202020202020202020202020200a182d4454"
       "fb210940"},
      // np.zeros((0, 3), np.float32)
      {"f32_0x3", DType::Float32, {0, 3},
       "934e554d5059010076007b276465736372273a20273c6634272c2027666f727472616e5f6f72646572273a20"
       "46616c73652c20277368617065273a2028302c2033292c207d20202020202020202020202020202020202020"
       "2020202020202020202020202020202020202020202020202020202020202020202020202020200a"},
  };
  return files;
}

}  // namespace

TEST_CASE("npy: reads files written by NumPy", "[npy][fast]") {
  TempDir tmp("foundry_npy_");
  for (const auto& f : numpy_files()) {
    INFO(f.name);
    std::string path = tmp / (std::string(f.name) + ".npy");
    std::string bytes = from_hex(f.hex);
    write_file(path, bytes);
    NpyArray a = read_npy(path);
    CHECK(a.dtype == f.dtype);
    CHECK(a.shape == f.shape);
    REQUIRE(a.data.size() == static_cast<size_t>(a.numel()) * foundry::dtype_size(a.dtype));
    // NumPy aligns the data to 64 bytes: the data is the tail of the file.
    CHECK((bytes.size() - a.data.size()) % 64 == 0);
    CHECK(std::string(a.data.begin(), a.data.end()) == bytes.substr(bytes.size() - a.data.size()));
  }
  // Spot checks of decoded values.
  write_file(tmp / "x.npy", from_hex(numpy_files()[0].hex));
  NpyArray f32 = read_npy(tmp / "x.npy");
  CHECK(element<float>(f32, 0) == -1.0f);
  CHECK(element<float>(f32, 5) == 1.5f);
  write_file(tmp / "x.npy", from_hex(numpy_files()[1].hex));
  NpyArray i64 = read_npy(tmp / "x.npy");
  CHECK(i64.numel() == 1);
  CHECK(element<int64_t>(i64, 0) == -7);
  write_file(tmp / "x.npy", from_hex(numpy_files()[6].hex));
  CHECK(element<double>(read_npy(tmp / "x.npy"), 0) == 3.141592653589793);
}

TEST_CASE("npy: reads format versions 2.0 and 3.0", "[npy][fast]") {
  TempDir tmp("foundry_npy_");
  // np.lib.format.write_array(f, np.array([1, -2, 300], dtype=np.int16), version=(2, 0))
  write_file(tmp / "v2.npy",
             from_hex("934e554d50590200740000007b276465736372273a20273c6932272c2027666f727472616e5f6f7264657227"
                      "3a2046616c73652c20277368617065273a2028332c292c207d20202020202020202020202020202020202020"
                      "2020202020202020202020202020202020202020202020202020202020202020202020202020200a0100feff"
                      "2c01"));
  NpyArray v2 = read_npy(tmp / "v2.npy");
  CHECK(v2.dtype == DType::Int16);
  CHECK(v2.shape == std::vector<int64_t>{3});
  CHECK(element<int16_t>(v2, 0) == 1);
  CHECK(element<int16_t>(v2, 1) == -2);
  CHECK(element<int16_t>(v2, 2) == 300);
  // np.lib.format.write_array(f, np.array([70000, -1], dtype=np.int32), version=(3, 0))
  write_file(tmp / "v3.npy",
             from_hex("934e554d50590300740000007b276465736372273a20273c6934272c2027666f727472616e5f6f7264657227"
                      "3a2046616c73652c20277368617065273a2028322c292c207d20202020202020202020202020202020202020"
                      "2020202020202020202020202020202020202020202020202020202020202020202020202020200a70110100"
                      "ffffffff"));
  NpyArray v3 = read_npy(tmp / "v3.npy");
  CHECK(v3.dtype == DType::Int32);
  CHECK(element<int32_t>(v3, 0) == 70000);
  CHECK(element<int32_t>(v3, 1) == -1);
}

TEST_CASE("npy: writes byte for byte what NumPy writes", "[npy][fast]") {
  TempDir tmp("foundry_npy_");
  for (const auto& f : numpy_files()) {
    INFO(f.name);
    std::string bytes = from_hex(f.hex);
    NpyArray a;
    a.dtype = f.dtype;
    a.shape = f.shape;
    size_t nbytes = static_cast<size_t>(a.numel()) * foundry::dtype_size(a.dtype);
    std::string tail = bytes.substr(bytes.size() - nbytes);
    a.data.assign(tail.begin(), tail.end());
    std::string path = tmp / (std::string(f.name) + ".npy");
    write_npy(path, a);
    CHECK(read_file(path) == bytes);
  }
}

TEST_CASE("npy: round trips every dtype and shape", "[npy][fast]") {
  TempDir tmp("foundry_npy_");
  const DType dtypes[] = {DType::Bool,  DType::UInt8,   DType::Int8,    DType::Int16, DType::Int32,
                          DType::Int64, DType::Float16, DType::Float32, DType::Float64};
  const std::vector<std::vector<int64_t>> shapes = {
      {}, {1}, {5}, {0}, {2, 3}, {3, 0, 2}, {1, 1, 1, 1}, {2, 3, 4, 5}, {123456789012, 0}};
  int n = 0;
  for (DType t : dtypes) {
    for (const auto& shape : shapes) {
      INFO(foundry::dtype_name(t) << " shape rank " << shape.size() << " case " << n);
      NpyArray a;
      a.dtype = t;
      a.shape = shape;
      a.data.resize(static_cast<size_t>(a.numel()) * foundry::dtype_size(t));
      for (size_t i = 0; i < a.data.size(); ++i)
        a.data[i] = static_cast<uint8_t>(t == DType::Bool ? (i * 7 + n) % 2 : (i * 37 + n) & 0xff);
      std::string path = tmp / (std::to_string(n++) + "_a.npy");
      write_npy(path, a);
      std::string bytes = read_file(path);
      CHECK(bytes.size() % 64 == a.data.size() % 64);  // header is 64-byte aligned
      CHECK(bytes[6] == 1);                              // version 1.0
      NpyArray b = read_npy(path);
      CHECK(b.dtype == a.dtype);
      CHECK(b.shape == a.shape);
      CHECK(b.data == a.data);
    }
  }
}

TEST_CASE("npy: special float values survive a round trip", "[npy][fast]") {
  TempDir tmp("foundry_npy_");
  const float values[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, 3.4028235e38f};
  NpyArray a;
  a.dtype = DType::Float32;
  a.shape = {7};
  a.data.resize(sizeof values);
  std::memcpy(a.data.data(), values, sizeof values);
  write_npy(tmp / "s.npy", a);
  NpyArray b = read_npy(tmp / "s.npy");
  REQUIRE(b.data.size() == sizeof values);
  for (size_t i = 0; i < 7; ++i) CHECK(f32_bits(element<float>(b, i)) == f32_bits(values[i]));
}

TEST_CASE("npy: bfloat16 as np.save writes ml_dtypes.bfloat16 ('<V2'), a bad shape an internal error", "[npy][fast]") {
  TempDir tmp("foundry_npy_");
  NpyArray bf;
  bf.dtype = DType::BFloat16;
  bf.shape = {2};
  bf.data = {0xc0, 0x3f, 0x00, 0x40};  // 1.5, 2.0
  write_npy(tmp / "bf.npy", bf);
  // The header NumPy 2.4 writes for np.save("bf.npy", np.array([1.5, 2], dtype=ml_dtypes.bfloat16)).
  CHECK_THAT(read_file(tmp / "bf.npy"), Catch::Contains("{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }"));
  NpyArray back = read_npy(tmp / "bf.npy");
  CHECK(back.dtype == DType::BFloat16);
  CHECK(back.data == bf.data);
  CHECK(element_as_double(back, 0) == 1.5);
  // Other record sizes are no bfloat16.
  std::string v4 = read_file(tmp / "bf.npy");
  v4.replace(v4.find("<V2"), 3, "<V4");
  write_file(tmp / "v4.npy", v4);
  CHECK_THROWS_WITH(read_npy(tmp / "v4.npy"), Catch::Contains("raw bytes"));
  NpyArray wrong;
  wrong.shape = {3};
  wrong.data.resize(4);  // 1 float, shape says 3
  CHECK_THROWS_AS(write_npy(tmp / "w.npy", wrong), foundry::InternalError);
  NpyArray ok;
  ok.shape = {1};
  ok.data.resize(4);
  CHECK_THROWS_AS(write_npy(tmp / "no/such/dir/x.npy", ok), foundry::UserError);
}

TEST_CASE("npy: reads the corpus's reference files", "[npy][fast][corpus]") {
  if (!require_corpus()) return;
  const std::string models = corpus_dir() + "/models";

  // Values checked against /usr/bin/python3 -c 'import numpy as np; a = np.load(...)'.
  NpyArray x = read_npy(models + "/pointwise/inputs/0.npy");
  CHECK(x.dtype == DType::Float32);
  CHECK(x.shape == std::vector<int64_t>{1024});
  REQUIRE(x.data.size() == 4096);
  CHECK(f32_bits(element<float>(x, 0)) == 0xbf901b85u);     // -1.1258398
  CHECK(f32_bits(element<float>(x, 1023)) == 0xbfdaf0a1u);  // -1.7104684
  CHECK(element<float>(x, 0) == Approx(-1.1258398));
  double sum = 0;
  for (size_t i = 0; i < 1024; ++i) sum += element<float>(x, i);
  CHECK(sum == Approx(32.93839526321972).epsilon(1e-9));

  NpyArray mlp = read_npy(models + "/mlp/inputs/0.npy");
  CHECK(mlp.shape == std::vector<int64_t>{8, 64});
  CHECK(f32_bits(element<float>(mlp, 0)) == 0x3ee05b24u);  // 0.43819535
  NpyArray mlp_out = read_npy(models + "/mlp/expected/0.npy");
  CHECK(mlp_out.shape == std::vector<int64_t>{8, 10});
  CHECK(f32_bits(element<float>(mlp_out, 0)) == 0x3dfde175u);  // 0.12396518
  NpyArray ns = read_npy(models + "/norm_softmax/inputs/0.npy");
  CHECK(ns.shape == std::vector<int64_t>{4, 16, 64});
  CHECK(f32_bits(element<float>(ns, 0)) == 0x3ebd145cu);  // 0.36929595
  NpyArray cnn = read_npy(models + "/small_cnn/expected/0.npy");
  CHECK(cnn.shape == std::vector<int64_t>{2, 10});
  CHECK(f32_bits(element<float>(cnn, 0)) == 0x3e9c06f8u);  // 0.30474067

  // Writing what we read reproduces NumPy's file exactly.
  TempDir tmp("foundry_npy_");
  write_npy(tmp / "copy.npy", x);
  CHECK(read_file(tmp / "copy.npy") == read_file(models + "/pointwise/inputs/0.npy"));
}

TEST_CASE("npy: the samples' reference files match the corpus", "[npy][fast]") {
  // samples/ is a copy of part of the corpus, in the project itself: no corpus needed.
  NpyArray x = read_npy(samples_dir() + "/pointwise/inputs/0.npy");
  CHECK(x.shape == std::vector<int64_t>{1024});
  CHECK(f32_bits(element<float>(x, 0)) == 0xbf901b85u);
}

TEST_CASE("npy: malformed and unsupported files are user errors naming the file", "[npy][fast]") {
  TempDir tmp("foundry_npy_");
  const std::string f4 = std::string(16, '\0');  // 4 float32 zeros
  const std::string good = npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", f4);

  struct Bad {
    const char* name;
    std::string bytes;
    const char* says;  // a word the message must contain
  };
  std::string bad_version = good;
  bad_version[6] = 4;
  std::string huge_v2_header("\x93NUMPY\x02\x00\xff\xff\xff\x7f", 12);
  const std::vector<Bad> cases = {
      {"empty", "", "not a .npy"},
      {"short", "\x93NUM", "not a .npy"},
      {"bad_magic", "PK\x03\x04" + good.substr(4), "magic"},
      {"text", "descr,shape\n1,2,3\n", "not a .npy"},
      {"bad_version", bad_version, "version"},
      {"header_truncated", good.substr(0, 40), "truncated"},
      {"v2_header_too_long", huge_v2_header + "{}", "header"},
      {"data_truncated", good.substr(0, good.size() - 1), "truncated"},
      {"data_missing", good.substr(0, good.size() - 16), "truncated"},
      {"big_endian", npy_v1("{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", f4),
       "big-endian"},
      {"fortran", npy_v1("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", f4),
       "fortran"},
      {"object", npy_v1("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", f4), "dtype"},
      {"complex", npy_v1("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", f4), "dtype"},
      {"unicode", npy_v1("{'descr': '<U1', 'fortran_order': False, 'shape': (4,), }", f4), "dtype"},
      {"uint32", npy_v1("{'descr': '<u4', 'fortran_order': False, 'shape': (4,), }", f4), "dtype"},
      {"datetime", npy_v1("{'descr': '<M8[s]', 'fortran_order': False, 'shape': (2,), }", f4),
       "dtype"},
      {"structured",
       npy_v1("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }", f4), "dtype"},
      {"multibyte_no_order",
       npy_v1("{'descr': '|f4', 'fortran_order': False, 'shape': (4,), }", f4), "dtype"},
      {"negative_dim", npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }", f4),
       "negative"},
      {"numel_overflow",
       npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, "
              "4611686018427387904), }",
              f4),
       "absurd"},
      {"bytes_overflow",
       npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,), }", f4),
       "absurd"},
      {"dim_over_64_bits",
       npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }",
              f4),
       "absurd"},
      {"more_bytes_than_file",
       npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }", f4),
       "truncated"},
      {"missing_key", npy_v1("{'descr': '<f4', 'shape': (4,), }", f4), "header"},
      {"extra_key",
       npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'x': 1, }", f4), "header"},
      {"duplicate_key",
       npy_v1("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", f4),
       "header"},
      {"not_a_dict", npy_v1("[1, 2, 3]", f4), "header"},
      {"unterminated", npy_v1("{'descr': '<f4", f4), "header"},
      {"scalar_shape", npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': 4, }", f4),
       "header"},
      {"paren_not_tuple",
       npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (4), }", f4), "header"},
      {"bad_bool", npy_v1("{'descr': '<f4', 'fortran_order': 0, 'shape': (4,), }", f4), "header"},
      {"trailing_junk",
       npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), } junk", f4), "header"},
      {"hostile_descr",
       npy_v1("{'descr': '<f4\x1b[2J\n*/ #include', 'fortran_order': False, 'shape': (4,), }", f4),
       "header"},
  };
  for (const auto& c : cases) {
    INFO("case " << c.name);
    std::string path = tmp / (std::string(c.name) + ".npy");
    write_file(path, c.bytes);
    std::string msg = read_error(path);
    REQUIRE(!msg.empty());  // threw foundry::UserError
    CHECK(msg.find(path) != std::string::npos);
    std::string lower = msg;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    CHECK(lower.find(c.says) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);  // one line, whatever the file says
    CHECK(msg.find('\x1b') == std::string::npos);
  }

  // A good file next to them reads fine (the cases above fail for their own reason).
  write_file(tmp / "good.npy", good);
  CHECK(read_npy(tmp / "good.npy").numel() == 4);
  // Bytes after the data are ignored, as NumPy does.
  write_file(tmp / "trailing.npy", good + "extra");
  CHECK(read_npy(tmp / "trailing.npy").data.size() == 16);
  // Tolerated variants NumPy also accepts: double quotes, no trailing comma, '=' and '<u1'.
  write_file(tmp / "variant.npy",
             npy_v1("{\"descr\": \"=f4\", \"shape\": (2, 2), \"fortran_order\": False}", f4));
  CHECK(read_npy(tmp / "variant.npy").shape == std::vector<int64_t>{2, 2});
  write_file(tmp / "u1.npy", npy_v1("{'descr': '<u1', 'fortran_order': False, 'shape': (4,), }",
                                    std::string(4, '\x07')));
  CHECK(read_npy(tmp / "u1.npy").dtype == DType::UInt8);

  // Missing files and directories.
  CHECK(read_error(tmp / "does_not_exist.npy").find("does_not_exist.npy") != std::string::npos);
  CHECK(read_error(tmp.path()).find(tmp.path()) != std::string::npos);
}

TEST_CASE("npy: truncated copies of a real file are rejected", "[npy][fast]") {
  TempDir tmp("foundry_npy_");
  const std::string real = read_file(samples_dir() + "/pointwise/inputs/0.npy");
  REQUIRE(real.size() == 4224);
  for (size_t len : {size_t{0}, size_t{5}, size_t{9}, size_t{64}, size_t{127}, size_t{128},
                     size_t{2000}, real.size() - 1}) {
    INFO("length " << len);
    std::string path = tmp / (std::to_string(len) + "_t.npy");
    write_file(path, real.substr(0, len));
    std::string msg = read_error(path);
    CHECK(!msg.empty());
    CHECK(msg.find(path) != std::string::npos);
  }
}
