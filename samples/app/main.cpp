// A program that links a model compiled by foundryc (samples/mlp, compiled with --name mlp) and
// runs it: reads the input from a .npy file, runs the model through its C API (out/model.h) and
// compares the output with the reference .npy.
//
//   app MODEL_DIR INPUT.npy EXPECTED.npy
//
// Exit status 0 when every output element is within 1e-4 + 1e-4 * |expected|. Only float32,
// little-endian, C-order .npy files are read: enough for this sample, and short.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "model.h"  // from the compiled folder: mlp_create, mlp_run, ...

namespace {

struct Array {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// The value of `key` in a .npy header dict, e.g. "'descr': '<f4'" -> "'<f4'", "'shape': (8, 64)" -> "(8, 64)".
std::string header_value(const std::string& header, const std::string& key) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) throw std::runtime_error("no '" + key + "' in the .npy header");
  size_t colon = header.find(':', k);
  size_t begin = header.find_first_not_of(' ', colon + 1);
  size_t end = header[begin] == '(' ? header.find(')', begin) + 1 : header.find_first_of(",}", begin);
  return header.substr(begin, end - begin);
}

Array read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw std::runtime_error(path + ": not a .npy file");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
    offset = 10;
  } else {
    if (bytes.size() < 12) throw std::runtime_error(path + ": truncated");
    header_len = 0;
    for (int i = 3; i >= 0; --i) header_len = header_len << 8 | static_cast<unsigned char>(bytes[8 + i]);
    offset = 12;
  }
  if (offset + header_len > bytes.size()) throw std::runtime_error(path + ": truncated header");
  std::string header = bytes.substr(offset, header_len);
  if (header_value(header, "descr") != "'<f4'") throw std::runtime_error(path + ": not float32 (<f4)");
  if (header_value(header, "fortran_order") != "False") throw std::runtime_error(path + ": not C order");
  Array a;
  std::string shape = header_value(header, "shape");  // "(8, 64)", "(10,)", "()"
  int64_t count = 1;
  for (size_t i = 1; i < shape.size();) {
    size_t next = shape.find_first_of(",)", i);
    std::string dim = shape.substr(i, next - i);
    if (dim.find_first_not_of(' ') != std::string::npos) {
      a.shape.push_back(std::stoll(dim));
      count *= a.shape.back();
    }
    i = next + 1;
  }
  size_t data_offset = offset + header_len;
  if (bytes.size() - data_offset != static_cast<size_t>(count) * sizeof(float))
    throw std::runtime_error(path + ": data size does not match the shape");
  a.data.resize(count);
  std::memcpy(a.data.data(), bytes.data() + data_offset, count * sizeof(float));
  return a;
}

std::string shape_text(const int64_t* shape, int rank) {
  std::string s = "[";
  for (int d = 0; d < rank; ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL_DIR INPUT.npy EXPECTED.npy\n", argv[0]);
    return 2;
  }
  try {
    Array input = read_npy(argv[2]);
    Array expected = read_npy(argv[3]);

    mlp_model* model = nullptr;
    if (mlp_create(argv[1], &model) != FOUNDRY_OK) {
      std::fprintf(stderr, "mlp_create(%s): %s\n", argv[1], mlp_last_error());
      return 1;
    }
    foundry_tensor_info out_info;
    mlp_output_info(0, &out_info);

    foundry_tensor in{};
    in.data = input.data.data();
    in.dtype = FOUNDRY_FLOAT32;
    in.rank = static_cast<int32_t>(input.shape.size());
    for (size_t d = 0; d < input.shape.size(); ++d) in.shape[d] = input.shape[d];

    std::vector<float> result(expected.data.size());
    foundry_tensor out{};
    out.data = result.data();
    out.dtype = FOUNDRY_FLOAT32;
    int64_t out_count = 1;
    for (int d = 0; d < out_info.rank; ++d) out_count *= out_info.shape[d];
    if (out_info.dtype != FOUNDRY_FLOAT32 || out_count != static_cast<int64_t>(result.size())) {
      std::fprintf(stderr, "the model's output %s %s does not match %s\n", out_info.name,
                   shape_text(out_info.shape, out_info.rank).c_str(), argv[3]);
      mlp_destroy(model);
      return 1;
    }

    if (mlp_run(model, &in, 1, &out, 1) != FOUNDRY_OK) {
      std::fprintf(stderr, "mlp_run: %s\n", mlp_last_error());
      mlp_destroy(model);
      return 1;
    }
    mlp_destroy(model);

    double max_err = 0;
    size_t bad = 0;
    for (size_t i = 0; i < result.size(); ++i) {
      double err = std::fabs(static_cast<double>(result[i]) - expected.data[i]);
      max_err = std::fmax(max_err, err);
      if (!(err <= 1e-4 + 1e-4 * std::fabs(expected.data[i]))) ++bad;
    }
    std::printf("output %s %s: max abs err %g: %s\n", out_info.name, shape_text(out.shape, out.rank).c_str(), max_err,
                bad ? "FAIL" : "PASS");
    return bad ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
