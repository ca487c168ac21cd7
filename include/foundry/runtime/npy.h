// NumPy .npy files (format versions 1-3, C order, little-endian): the runner's and the tests'
// input/output format.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "foundry/graph/dtype.h"

namespace foundry {

struct NpyArray {
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;  // empty for 0-d
  std::vector<uint8_t> data;   // numel * dtype_size bytes, C order

  int64_t numel() const;
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(data.data()); }
  template <typename T>
  T* as() { return reinterpret_cast<T*>(data.data()); }
};

// Throws UserError naming the file on a malformed or unsupported file (Fortran order, big-endian,
// object dtype, truncated data).
NpyArray read_npy(const std::string& path);
void write_npy(const std::string& path, const NpyArray& array);

}  // namespace foundry
