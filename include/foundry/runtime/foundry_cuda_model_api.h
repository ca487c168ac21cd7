// The C API entry points of a CUDA model (foundryc --device cuda), as foundry_model_api.h's are
// of a CPU model, whose input checks, shape inference and tensor information they share.
// FOUNDRY_DEFINE_CUDA_MODEL_API(NAME) defines NAME_create, NAME_run (host pointers: copied to
// the GPU and back), NAME_run_cuda (device pointers, on the caller's stream) and
// NAME_check_errors, over the wrapper's NAME_detail::Model, whose run() takes a stream:
//   static void run(Instance* model, const foundry_tensor* inputs, foundry_tensor* outputs,
//                   const int64_t* sizes, uint8_t* arena, cudaStream_t stream);
// and whose Instance holds `weights` (the mapped file) and `device` (foundry_cuda::DeviceState).
// Include guards rather than #pragma once: several models' copies may meet in one build.
#ifndef FOUNDRY_CUDA_MODEL_API_H
#define FOUNDRY_CUDA_MODEL_API_H
#include <vector>

#include "foundry_cuda.h"
#include "foundry_model_api.h"

namespace foundry_cuda {

template <class Model>
int create_model(const char* model_dir, typename Model::Instance** out) {
  if (!model_dir || !out) return foundry_rt::set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, "null argument");
  auto* model = new (std::nothrow) typename Model::Instance();
  if (!model) return foundry_rt::set_error(FOUNDRY_ERROR_OUT_OF_MEMORY, "out of memory");
  if (int status = model->weights.open(model_dir, Model::kWeightsBytes)) {
    delete model;
    return status;
  }
  std::string failed = model->device.open(model->weights.data, Model::kWeightsBytes, Model::kUsesCublas);
  if (failed.empty()) failed = Model::open_libraries(model->device);  // cuDNN's handle, where used
  if (!failed.empty()) {
    delete model;
    return foundry_rt::set_error(FOUNDRY_ERROR_RUNTIME, failed);
  }
  *out = model;
  foundry_rt::last_error.clear();
  return FOUNDRY_OK;
}

// Enqueues the model on `stream` over device tensors: its intermediate buffers in one arena
// allocated and freed in stream order. The caller holds the model's mutex.
template <class Model>
int enqueue(typename Model::Instance* model, cudaStream_t stream, const foundry_tensor* inputs,
            foundry_tensor* outputs, const int64_t* sizes) {
  // CUDA graphs (later work): capture this sequence per input shape and replay it here.
  const size_t arena_bytes = Model::arena_bytes(sizes);
  uint8_t* arena = nullptr;
  if (arena_bytes && cudaMallocAsync(reinterpret_cast<void**>(&arena), arena_bytes, stream) != cudaSuccess)
    return foundry_rt::set_error(FOUNDRY_ERROR_OUT_OF_MEMORY, "cannot allocate " + std::to_string(arena_bytes) +
                                                                  " bytes of intermediate buffers on the GPU");
  Model::run(model, inputs, outputs, sizes, arena, stream);
  if (arena) cudaFreeAsync(arena, stream);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return foundry_rt::set_error(FOUNDRY_ERROR_RUNTIME, std::string("CUDA error: ") + cudaGetErrorString(e));
  if (!foundry_rt::last_error.empty()) return FOUNDRY_ERROR_RUNTIME;  // a library call failed (Model::run set it)
  return FOUNDRY_OK;
}

// Checks the arguments as the CPU API does and fills in the outputs' shapes.
template <class Model>
int prepare_call(const foundry_tensor* inputs, size_t num_inputs, foundry_tensor* outputs, size_t num_outputs,
                 int64_t* sizes) {
  if (int status = foundry_rt::prepare<Model>(inputs, num_inputs, outputs, num_outputs, sizes)) return status;
  for (size_t k = 0; k < Model::kNumOutputs; ++k)
    if (int status = foundry_rt::check_tensor(&outputs[k], Model::kOutputs[k], "output", k, true)) return status;
  foundry_rt::last_error.clear();
  return FOUNDRY_OK;
}

// NAME_run: host tensors, copied to one device allocation, run on the model's stream, copied back.
template <class Model>
int run_host(typename Model::Instance* model, const foundry_tensor* inputs, size_t num_inputs, foundry_tensor* outputs,
             size_t num_outputs) {
  if (!model) return foundry_rt::set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, "null model");
  int64_t sizes[Model::kNumSizes + 1];
  if (int status = prepare_call<Model>(inputs, num_inputs, outputs, num_outputs, sizes)) return status;
  std::vector<foundry_tensor> dev(inputs, inputs + num_inputs);
  dev.insert(dev.end(), outputs, outputs + num_outputs);
  std::vector<size_t> offset(dev.size() + 1, 0);
  for (size_t k = 0; k < dev.size(); ++k) offset[k + 1] = offset[k] + (tensor_bytes(dev[k]) + 255) / 256 * 256;
  std::lock_guard<std::mutex> lock(model->device.mutex);
  cudaStream_t stream = model->device.stream;
  uint8_t* staging = nullptr;
  if (offset.back() && cudaMallocAsync(reinterpret_cast<void**>(&staging), offset.back(), stream) != cudaSuccess)
    return foundry_rt::set_error(FOUNDRY_ERROR_OUT_OF_MEMORY, "cannot allocate the inputs and outputs on the GPU");
  for (size_t k = 0; k < dev.size(); ++k) {
    dev[k].data = staging + offset[k];
    if (k < num_inputs && tensor_bytes(dev[k]))
      cudaMemcpyAsync(dev[k].data, inputs[k].data, tensor_bytes(dev[k]), cudaMemcpyHostToDevice, stream);
  }
  int status = enqueue<Model>(model, stream, dev.data(), dev.data() + num_inputs, sizes);
  for (size_t k = 0; status == FOUNDRY_OK && k < num_outputs; ++k)
    if (size_t bytes = tensor_bytes(outputs[k]))
      cudaMemcpyAsync(outputs[k].data, dev[num_inputs + k].data, bytes, cudaMemcpyDeviceToHost, stream);
  if (staging) cudaFreeAsync(staging, stream);
  int flagged = take_kernel_error(model->device, stream);  // synchronizes
  return status ? status : flagged;
}

// Whether every tensor's data is device memory (or empty).
inline int check_device_pointers(const foundry_tensor* t, size_t n, const char* role) {
  for (size_t k = 0; k < n; ++k) {
    if (!t[k].data) continue;
    cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, t[k].data) != cudaSuccess || attr.type == cudaMemoryTypeUnregistered ||
        attr.type == cudaMemoryTypeHost) {
      cudaGetLastError();  // clear the sticky-free error of the query
      return foundry_rt::set_error(FOUNDRY_ERROR_INVALID_ARGUMENT,
                                   std::string(role) + " " + std::to_string(k) +
                                       ": not device memory (NAME_run_cuda takes device pointers; NAME_run takes host ones)");
    }
  }
  return FOUNDRY_OK;
}

// NAME_run_cuda: device tensors on the caller's stream; returns once the work is enqueued. An
// error a kernel reports is returned by NAME_check_errors (which waits for the stream).
template <class Model>
int run_device(typename Model::Instance* model, void* stream, const foundry_tensor* inputs, size_t num_inputs,
               foundry_tensor* outputs, size_t num_outputs) {
  if (!model) return foundry_rt::set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, "null model");
  int64_t sizes[Model::kNumSizes + 1];
  if (int status = prepare_call<Model>(inputs, num_inputs, outputs, num_outputs, sizes)) return status;
  if (int status = check_device_pointers(inputs, num_inputs, "input")) return status;
  if (int status = check_device_pointers(outputs, num_outputs, "output")) return status;
  std::lock_guard<std::mutex> lock(model->device.mutex);
  return enqueue<Model>(model, static_cast<cudaStream_t>(stream), inputs, outputs, sizes);
}

template <class Model>
int check_errors(typename Model::Instance* model, void* stream) {
  if (!model) return foundry_rt::set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, "null model");
  std::lock_guard<std::mutex> lock(model->device.mutex);
  if (int status = take_kernel_error(model->device, static_cast<cudaStream_t>(stream))) return status;
  foundry_rt::last_error.clear();
  return FOUNDRY_OK;
}

}  // namespace foundry_cuda

// The NAME_* functions of a CUDA model's model.h.
#define FOUNDRY_DEFINE_CUDA_MODEL_API(NAME)                                                                      \
  FOUNDRY_API int NAME##_create(const char* model_dir, NAME##_model** out) {                                     \
    return foundry_cuda::create_model<NAME##_detail::Model>(model_dir, out);                                     \
  }                                                                                                              \
  FOUNDRY_API int NAME##_run(NAME##_model* model, const foundry_tensor* inputs, size_t num_inputs,               \
                             foundry_tensor* outputs, size_t num_outputs) {                                      \
    return foundry_cuda::run_host<NAME##_detail::Model>(model, inputs, num_inputs, outputs, num_outputs);        \
  }                                                                                                              \
  FOUNDRY_API int NAME##_run_cuda(NAME##_model* model, void* stream, const foundry_tensor* inputs,               \
                                  size_t num_inputs, foundry_tensor* outputs, size_t num_outputs) {              \
    return foundry_cuda::run_device<NAME##_detail::Model>(model, stream, inputs, num_inputs, outputs,            \
                                                          num_outputs);                                          \
  }                                                                                                              \
  FOUNDRY_API int NAME##_check_errors(NAME##_model* model, void* stream) {                                       \
    return foundry_cuda::check_errors<NAME##_detail::Model>(model, stream);                                      \
  }                                                                                                              \
  FOUNDRY_DEFINE_MODEL_INFO_API(NAME)

#endif  // FOUNDRY_CUDA_MODEL_API_H
