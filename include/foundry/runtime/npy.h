// NumPy .npy files (format versions 1-3, C order, little-endian): the runner's and the tests'
// input/output format.
#pragma once
#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "foundry/graph/dtype.h"

namespace foundry {

// Storage on a 64-byte boundary, where PyTorch puts a tensor's: a generated kernel's 64-byte
// vector loads and stores of an input or output then never straddle two cache lines, as they
// would on malloc's 16-byte boundary (foundry-run's timings would include that cost, a caller
// passing PyTorch tensors never pays it).
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kAlign); }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const CacheLineAllocator<U>&) const { return false; }
};

struct NpyArray {
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;  // empty for 0-d
  std::vector<uint8_t, CacheLineAllocator<uint8_t>> data;  // numel * dtype_size bytes, C order

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
