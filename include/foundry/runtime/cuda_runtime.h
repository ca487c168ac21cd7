// The CUDA runtime, loaded when first needed (dlopen of libcudart.so.13) rather than linked: the
// tools and tests that move tensors to a GPU (foundry-run --bench on NAME_run_cuda, the [cuda]
// tests) run on machines without CUDA too, where only CUDA models need it.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "foundry/runtime/foundry_c_api.h"
#include "foundry/runtime/npy.h"

namespace foundry {

class CudaRuntime {
 public:
  // The runtime with at least one GPU, or nullptr with `why` saying what is missing.
  static const CudaRuntime* find(std::string* why = nullptr);
  // Each throws UserError naming the CUDA call that failed.
  void* allocate(size_t bytes) const;
  void release(void* device) const;
  void to_device(void* device, const void* host, size_t bytes) const;
  void to_host(void* host, const void* device, size_t bytes) const;
  void* create_stream() const;
  void synchronize(void* stream) const;
  void destroy_stream(void* stream) const;

  struct Functions;
  explicit CudaRuntime(const Functions* f) : f_(f) {}

 private:
  const Functions* f_;
};

// Arrays copied to GPU memory, as foundry_tensors for NAME_run_cuda; freed with the object. Each
// starts `offset` bytes into its allocation (a misaligned pointer, as a view of a tensor gives).
class DeviceArrays {
 public:
  DeviceArrays(const CudaRuntime& cuda, const std::vector<NpyArray>& arrays, size_t offset = 0);
  ~DeviceArrays();
  DeviceArrays(const DeviceArrays&) = delete;
  DeviceArrays& operator=(const DeviceArrays&) = delete;
  std::vector<foundry_tensor>& tensors() { return tensors_; }
  // The device data copied back into `arrays` (the same shapes as at construction).
  void copy_to(std::vector<NpyArray>& arrays) const;

 private:
  const CudaRuntime& cuda_;
  std::vector<foundry_tensor> tensors_;
  std::vector<void*> allocations_;
  void release_all();
};

}  // namespace foundry
