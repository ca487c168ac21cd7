#include "foundry/runtime/sample.h"

#include <cmath>
#include <cstring>
#include <filesystem>

namespace foundry {

std::vector<NpyArray> read_npy_sequence(const std::string& dir) {
  std::vector<NpyArray> out;
  for (int k = 0;; ++k) {
    std::string path = dir + "/" + std::to_string(k) + ".npy";
    if (!std::filesystem::exists(path)) break;
    out.push_back(read_npy(path));
  }
  return out;
}

namespace {
// The significand bits of a float dtype: k * 2^(1-bits) - 1 for k < 2^bits is exact in it.
int significand_bits(DType t) {
  switch (t) {
    case DType::Float64: return 53;
    case DType::Float32: return 24;
    case DType::Float16: return 11;
    default: return 8;  // bfloat16
  }
}

void store_float(NpyArray& a, int64_t e, double v) {
  uint8_t* p = a.data.data() + e * dtype_size(a.dtype);
  if (a.dtype == DType::Float64) {
    std::memcpy(p, &v, 8);
  } else if (a.dtype == DType::Float16) {
    _Float16 h = static_cast<_Float16>(v);
    std::memcpy(p, &h, 2);
  } else {
    float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if (a.dtype == DType::Float32) {
      std::memcpy(p, &bits, 4);
    } else {  // bfloat16: the high half of the float32, exact for v's 8 significand bits
      uint16_t high = static_cast<uint16_t>(bits >> 16);
      std::memcpy(p, &high, 2);
    }
  }
}
}  // namespace

NpyArray random_array(DType dtype, const std::vector<int64_t>& shape, std::mt19937_64& rng) {
  NpyArray a;
  a.dtype = dtype;
  a.shape = shape;
  a.data.assign(static_cast<size_t>(a.numel()) * dtype_size(dtype), 0);
  const int bits = significand_bits(dtype);
  for (int64_t e = 0; e < a.numel(); ++e) {
    if (is_floating(dtype))
      store_float(a, e, std::ldexp(static_cast<double>(rng() >> (64 - bits)), 1 - bits) - 1);
    else
      a.data[e * dtype_size(dtype)] = rng() >> 63;  // 0 or 1 in the lowest byte: little-endian
  }
  return a;
}

}  // namespace foundry
