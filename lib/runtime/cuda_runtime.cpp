#include "foundry/runtime/cuda_runtime.h"

#include <dlfcn.h>

#include "foundry/runtime/loaded_model.h"
#include "foundry/support/error.h"

namespace foundry {

// The CUDA runtime functions used here, with their C signatures (cudaError_t is an int; a
// stream is a pointer).
struct CudaRuntime::Functions {
  int (*get_device_count)(int*);
  int (*malloc)(void**, size_t);
  int (*free)(void*);
  int (*memcpy)(void*, const void*, size_t, int);
  int (*stream_create)(void**);
  int (*stream_synchronize)(void*);
  int (*stream_destroy)(void*);
  const char* (*error_string)(int);
};

namespace {
constexpr int kHostToDevice = 1, kDeviceToHost = 2;  // cudaMemcpyKind

template <class F>
bool bind(void* handle, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(handle, name));
  return fn != nullptr;
}

// Loads the runtime once; "" or why it cannot be used.
std::string load(CudaRuntime::Functions& f) {
  void* h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!h) h = dlopen("libcudart.so", RTLD_NOW | RTLD_LOCAL);
  if (!h) return "libcudart.so.13 cannot be loaded";
  if (!bind(h, "cudaGetDeviceCount", f.get_device_count) || !bind(h, "cudaMalloc", f.malloc) ||
      !bind(h, "cudaFree", f.free) || !bind(h, "cudaMemcpy", f.memcpy) || !bind(h, "cudaStreamCreate", f.stream_create) ||
      !bind(h, "cudaStreamSynchronize", f.stream_synchronize) || !bind(h, "cudaStreamDestroy", f.stream_destroy) ||
      !bind(h, "cudaGetErrorString", f.error_string))
    return "libcudart lacks a function of the CUDA runtime API";
  int n = 0;
  int rc = f.get_device_count(&n);
  if (rc != 0 || n == 0) return "cudaGetDeviceCount returned " + std::to_string(rc) + " with " + std::to_string(n) + " devices";
  return "";
}
}  // namespace

const CudaRuntime* CudaRuntime::find(std::string* why) {
  static Functions functions;
  static const std::string failed = load(functions);
  static const CudaRuntime runtime(&functions);
  if (why) *why = failed;
  return failed.empty() ? &runtime : nullptr;
}

namespace {
void check(const CudaRuntime::Functions& f, int rc, const char* call) {
  if (rc != 0) throw UserError(std::string(call) + " failed: " + f.error_string(rc));
}
}  // namespace

void* CudaRuntime::allocate(size_t bytes) const {
  void* p = nullptr;
  if (bytes) check(*f_, f_->malloc(&p, bytes), "cudaMalloc");
  return p;
}
void CudaRuntime::release(void* device) const { f_->free(device); }
void CudaRuntime::to_device(void* device, const void* host, size_t bytes) const {
  if (bytes) check(*f_, f_->memcpy(device, host, bytes, kHostToDevice), "cudaMemcpy");
}
void CudaRuntime::to_host(void* host, const void* device, size_t bytes) const {
  if (bytes) check(*f_, f_->memcpy(host, device, bytes, kDeviceToHost), "cudaMemcpy");
}
void* CudaRuntime::create_stream() const {
  void* s = nullptr;
  check(*f_, f_->stream_create(&s), "cudaStreamCreate");
  return s;
}
void CudaRuntime::synchronize(void* stream) const { check(*f_, f_->stream_synchronize(stream), "cudaStreamSynchronize"); }
void CudaRuntime::destroy_stream(void* stream) const { f_->stream_destroy(stream); }

DeviceArrays::DeviceArrays(const CudaRuntime& cuda, const std::vector<NpyArray>& arrays, size_t offset) : cuda_(cuda) {
  try {
    for (const NpyArray& a : arrays) {
      allocations_.push_back(cuda.allocate(a.data.size() + offset));
      foundry_tensor t = describe_array(a);
      t.data = static_cast<char*>(allocations_.back()) + offset;
      tensors_.push_back(t);
      cuda.to_device(t.data, a.data.data(), a.data.size());
    }
  } catch (...) {  // a constructor that throws runs no destructor: free what was allocated here
    release_all();
    throw;
  }
}

DeviceArrays::~DeviceArrays() { release_all(); }

void DeviceArrays::release_all() {
  for (void* p : allocations_) cuda_.release(p);
  allocations_.clear();
}

void DeviceArrays::copy_to(std::vector<NpyArray>& arrays) const {
  for (size_t k = 0; k < tensors_.size() && k < arrays.size(); ++k)
    cuda_.to_host(arrays[k].data.data(), tensors_[k].data, arrays[k].data.size());
}

}  // namespace foundry
