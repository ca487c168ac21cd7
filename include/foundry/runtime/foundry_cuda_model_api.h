// The C API entry points of a CUDA model (foundryc --device cuda), as foundry_model_api.h's are
// of a CPU model, whose input checks, shape inference and tensor information they share.
// FOUNDRY_DEFINE_CUDA_MODEL_API(NAME) defines NAME_create, NAME_run (host pointers: copied to
// the GPU and back), NAME_run_cuda (device pointers, on the caller's stream) and
// NAME_check_errors, over the wrapper's NAME_detail::Model, whose run() enqueues the steps on a
// stream with a call slot's error flag and library handles:
//   static void run(Instance* model, foundry_cuda::CallSlot& slot, const foundry_tensor* inputs,
//                   foundry_tensor* outputs, const int64_t* sizes, uint8_t* arena, cudaStream_t stream);
// and whose Instance holds `weights` (the mapped file) and `device` (foundry_cuda::DeviceState).
//
// Calls from several threads run at once, each in a slot of the model's pool (CallSlot). A run is
// captured into a CUDA graph per input shape and slot, and replayed: a shape's first run is
// enqueued directly, the second is captured and launched, later ones launch the graph. The graph
// holds the inputs' and outputs' pointers of its capture; when a call brings others, the run is
// captured again and the executable graph updated in place (cudaGraphExecUpdate), which costs a
// capture (microseconds per step) but no copies. NAME_run stages through slot-owned device
// memory, so its pointers never change.
// Include guards rather than #pragma once: several models' copies may meet in one build.
#ifndef FOUNDRY_CUDA_MODEL_API_H
#define FOUNDRY_CUDA_MODEL_API_H
#include <algorithm>
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
  model->device.open_libraries = &Model::open_libraries;  // cuDNN's handle in each slot, where used
  std::string failed = model->device.open(model->weights.data, Model::kWeightsBytes, Model::kUsesCublas);
  if (!failed.empty()) {
    delete model;
    return foundry_rt::set_error(FOUNDRY_ERROR_RUNTIME, failed);
  }
  *out = model;
  foundry_rt::last_error.clear();
  return FOUNDRY_OK;
}

// A slot of the model's pool for the duration of one call.
class SlotLease {
 public:
  explicit SlotLease(DeviceState& device) : device_(device), slot_(device.acquire(failed_)) {}
  ~SlotLease() {
    if (slot_) device_.release(slot_);
  }
  SlotLease(const SlotLease&) = delete;
  SlotLease& operator=(const SlotLease&) = delete;
  CallSlot* get() const { return slot_; }
  int error() const { return foundry_rt::set_error(FOUNDRY_ERROR_RUNTIME, failed_); }

 private:
  DeviceState& device_;
  std::string failed_;
  CallSlot* slot_;
};

inline int cuda_error(const char* what) {
  return foundry_rt::set_error(FOUNDRY_ERROR_RUNTIME, cuda_failure(what));
}

// The slot's run for these sizes: found, or made (its arena allocated), the least recently used
// one freed beyond CallSlot::kMaxShapes. nullptr when out of device memory (the error is set).
inline CapturedRun* find_run(CallSlot& slot, const int64_t* sizes, size_t num_sizes, size_t arena_bytes) {
  ++slot.clock;
  for (auto& r : slot.runs)
    if (std::equal(r->sizes.begin(), r->sizes.end(), sizes, sizes + num_sizes)) {
      r->last_use = slot.clock;
      return r.get();
    }
  if (slot.runs.size() >= CallSlot::kMaxShapes) {
    auto oldest = slot.runs.begin();
    for (auto it = slot.runs.begin(); it != slot.runs.end(); ++it)
      if ((*it)->last_use < (*oldest)->last_use) oldest = it;
    slot.finish();  // the evicted graph may still be running
    slot.runs.erase(oldest);
  }
  auto run = std::make_unique<CapturedRun>();
  run->sizes.assign(sizes, sizes + num_sizes);
  run->arena_bytes = arena_bytes;
  run->last_use = slot.clock;
  if (arena_bytes && cudaMalloc(reinterpret_cast<void**>(&run->arena), arena_bytes) != cudaSuccess) {
    cudaGetLastError();
    foundry_rt::set_error(FOUNDRY_ERROR_OUT_OF_MEMORY, "cannot allocate " + std::to_string(arena_bytes) +
                                                           " bytes of intermediate buffers on the GPU");
    return nullptr;
  }
  slot.runs.push_back(std::move(run));
  return slot.runs.back().get();
}

// The model's steps on `stream` (a real one, or the capture stream): the kernels and library
// calls, then (when the kernels check indices or divisions) the error flag published to the
// slot's pinned host word.
template <class Model>
int record_steps(typename Model::Instance* model, CallSlot& slot, cudaStream_t stream, const foundry_tensor* inputs,
                 foundry_tensor* outputs, const int64_t* sizes, uint8_t* arena) {
  if (const char* failed = slot.bind(stream); *failed) return foundry_rt::set_error(FOUNDRY_ERROR_RUNTIME, failed);
  Model::run(model, slot, inputs, outputs, sizes, arena, stream);
  if (!foundry_rt::last_error.empty()) return FOUNDRY_ERROR_RUNTIME;  // a library call failed (Model::run set it)
  if (Model::kReportsErrors) publish_error(slot.error_flag, slot.host_flag_on_device, stream);
  return FOUNDRY_OK;
}

// Captures the run into a graph: the executable graph is updated in place when it exists (the
// same steps with other pointers), else instantiated.
template <class Model>
int capture(typename Model::Instance* model, CallSlot& slot, CapturedRun& run, const foundry_tensor* inputs,
            foundry_tensor* outputs, const int64_t* sizes) {
  cudaStream_t s = slot.capture_stream;
  if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return cuda_error("cannot capture a CUDA graph");
  int status = record_steps<Model>(model, slot, s, inputs, outputs, sizes, run.arena);
  cudaGraph_t graph = nullptr;
  cudaError_t ended = cudaStreamEndCapture(s, &graph);
  if (status) {
    if (graph) cudaGraphDestroy(graph);
    return status;
  }
  if (ended != cudaSuccess) return cuda_error("capturing the run into a CUDA graph failed");
  cudaGraphExecUpdateResultInfo info;
  if (run.exec && cudaGraphExecUpdate(run.exec, graph, &info) != cudaSuccess) {
    cudaGetLastError();
    cudaGraphExecDestroy(run.exec);
    run.exec = nullptr;
  }
  if (!run.exec && cudaGraphInstantiate(&run.exec, graph, 0) != cudaSuccess) {
    run.exec = nullptr;
    cudaGraphDestroy(graph);
    return cuda_error("cannot instantiate the CUDA graph");
  }
  cudaGraphDestroy(graph);
  return FOUNDRY_OK;
}

// Enqueues one call on `stream` over device tensors. A shape's first run in a slot is enqueued
// directly (library calls choose algorithms and allocate then); later ones replay its CUDA graph,
// captured again (and the executable graph updated) when the inputs' or outputs' pointers
// differ from the last capture's. No host synchronization.
template <class Model>
int enqueue(typename Model::Instance* model, CallSlot& slot, cudaStream_t stream, const foundry_tensor* inputs,
            foundry_tensor* outputs, const int64_t* sizes) {
  if (slot.ran && cudaStreamWaitEvent(stream, slot.done, 0) != cudaSuccess) return cuda_error("cannot order the call");
  CapturedRun* run = find_run(slot, sizes, Model::kNumSizes, Model::arena_bytes(sizes));
  if (!run) return FOUNDRY_ERROR_OUT_OF_MEMORY;
  void* pointers[Model::kNumInputs + Model::kNumOutputs + 1];  // no allocation per call
  for (size_t k = 0; k < Model::kNumInputs; ++k) pointers[k] = inputs[k].data;
  for (size_t k = 0; k < Model::kNumOutputs; ++k) pointers[Model::kNumInputs + k] = outputs[k].data;
  const size_t num_pointers = Model::kNumInputs + Model::kNumOutputs;
  int status = FOUNDRY_OK;
  if (!run->warmed) {
    status = record_steps<Model>(model, slot, stream, inputs, outputs, sizes, run->arena);
    run->warmed = status == FOUNDRY_OK;
  } else {
    if (!run->exec || !std::equal(run->pointers.begin(), run->pointers.end(), pointers, pointers + num_pointers)) {
      status = capture<Model>(model, slot, *run, inputs, outputs, sizes);
      if (status) run->pointers.clear();
      else run->pointers.assign(pointers, pointers + num_pointers);
    }
    if (!status && cudaGraphLaunch(run->exec, stream) != cudaSuccess) status = cuda_error("cannot launch the CUDA graph");
  }
  if (cudaEventRecord(slot.done, stream) != cudaSuccess) return cuda_error("cannot record an event");
  slot.ran = true;
  return status;
}

// An error a kernel of an earlier run in this slot reported (its code copied to the pinned host
// word at the end of that run), returned once: the word and the device flag are cleared, the
// latter in order on `stream`. FOUNDRY_OK when none has arrived.
inline int take_reported_error(CallSlot& slot, cudaStream_t stream) {
  int code = *static_cast<volatile int*>(slot.host_flag);
  if (!code) return FOUNDRY_OK;
  *slot.host_flag = 0;
  if (slot.ran) cudaStreamWaitEvent(stream, slot.done, 0);
  cudaMemsetAsync(slot.error_flag, 0, sizeof(int), stream);
  cudaEventRecord(slot.done, stream);
  slot.ran = true;
  return foundry_rt::set_error(FOUNDRY_ERROR_RUNTIME, foundry_rt::kernel_error_text(code));
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

// Device memory for NAME_run's copies of the inputs and outputs, kept by the slot and grown when
// too small (so that its pointers, and the captured graph, stay the same from call to call).
inline uint8_t* staging_memory(CallSlot& slot, size_t bytes) {
  if (bytes <= slot.staging_bytes) return slot.staging;
  slot.finish();
  cudaFree(slot.staging);
  slot.staging = nullptr;
  slot.staging_bytes = 0;
  if (cudaMalloc(reinterpret_cast<void**>(&slot.staging), bytes) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  slot.staging_bytes = bytes;
  return slot.staging;
}

// NAME_run: host tensors, copied to the slot's device memory, run on the slot's stream, copied
// back; waits for the results, so a kernel's error is returned by this call.
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
  SlotLease lease(model->device);
  if (!lease.get()) return lease.error();
  CallSlot& slot = *lease.get();
  cudaStream_t stream = slot.stream;
  take_reported_error(slot, stream);  // an earlier NAME_run_cuda's, nobody asked for: this call runs anyway
  uint8_t* staging = staging_memory(slot, offset.back());
  if (offset.back() && !staging)
    return foundry_rt::set_error(FOUNDRY_ERROR_OUT_OF_MEMORY, "cannot allocate the inputs and outputs on the GPU");
  for (size_t k = 0; k < dev.size(); ++k) {
    dev[k].data = staging + offset[k];
    if (k < num_inputs && tensor_bytes(dev[k]))
      cudaMemcpyAsync(dev[k].data, inputs[k].data, tensor_bytes(dev[k]), cudaMemcpyHostToDevice, stream);
  }
  int status = enqueue<Model>(model, slot, stream, dev.data(), dev.data() + num_inputs, sizes);
  for (size_t k = 0; status == FOUNDRY_OK && k < num_outputs; ++k)
    if (size_t bytes = tensor_bytes(outputs[k]))
      cudaMemcpyAsync(outputs[k].data, dev[num_inputs + k].data, bytes, cudaMemcpyDeviceToHost, stream);
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess && !status)
    status = foundry_rt::set_error(FOUNDRY_ERROR_RUNTIME, std::string("CUDA error: ") + cudaGetErrorString(e));
  if (status) return status;
  if (int flagged = take_reported_error(slot, stream)) return flagged;
  foundry_rt::last_error.clear();
  return FOUNDRY_OK;
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

// The checks of a call on device tensors: the CPU API's, then that every pointer is device memory.
template <class Model>
int check_device_call(const foundry_tensor* inputs, size_t num_inputs, foundry_tensor* outputs, size_t num_outputs,
                      int64_t* sizes) {
  if (int status = prepare_call<Model>(inputs, num_inputs, outputs, num_outputs, sizes)) return status;
  if (int status = check_device_pointers(inputs, num_inputs, "input")) return status;
  return check_device_pointers(outputs, num_outputs, "output");
}

// NAME_run_cuda: device tensors on the caller's stream; returns once the work is enqueued. An
// error a kernel reports is returned by a later call that takes the same slot (with one thread:
// the next call), instead of running it, or by NAME_check_errors.
template <class Model>
int run_device(typename Model::Instance* model, void* stream_arg, const foundry_tensor* inputs, size_t num_inputs,
               foundry_tensor* outputs, size_t num_outputs) {
  if (!model) return foundry_rt::set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, "null model");
  int64_t sizes[Model::kNumSizes + 1];
  if (int status = check_device_call<Model>(inputs, num_inputs, outputs, num_outputs, sizes)) return status;
  auto stream = static_cast<cudaStream_t>(stream_arg);
  SlotLease lease(model->device);
  if (!lease.get()) return lease.error();
  if (int status = take_reported_error(*lease.get(), stream)) return status;
  return enqueue<Model>(model, *lease.get(), stream, inputs, outputs, sizes);
}

// NAME_profile_cuda: one run on device tensors with a CUDA event after each step, captured into a
// graph of its own (so that the times are the GPU's, without the gaps of enqueueing step by step
// from the host); waits for `stream` and writes each step's milliseconds to step_ms.
template <class Model>
int profile_device(typename Model::Instance* model, void* stream_arg, const foundry_tensor* inputs, size_t num_inputs,
                   foundry_tensor* outputs, size_t num_outputs, double* step_ms, size_t num_steps) {
  if (!model || (!step_ms && Model::kNumSteps))
    return foundry_rt::set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, "null argument");
  if (num_steps < Model::kNumSteps)
    return foundry_rt::set_error(FOUNDRY_ERROR_INVALID_ARGUMENT,
                                 "step_ms holds " + std::to_string(num_steps) + " times; the model has " +
                                     std::to_string(Model::kNumSteps) + " steps (NAME_num_steps)");
  int64_t sizes[Model::kNumSizes + 1];
  if (int status = check_device_call<Model>(inputs, num_inputs, outputs, num_outputs, sizes)) return status;
  auto stream = static_cast<cudaStream_t>(stream_arg);
  SlotLease lease(model->device);
  if (!lease.get()) return lease.error();
  CallSlot& slot = *lease.get();
  if (int status = take_reported_error(slot, stream)) return status;
  while (slot.step_events.size() < Model::kNumSteps + 1) {
    cudaEvent_t e;
    if (cudaEventCreate(&e) != cudaSuccess) return cuda_error("cannot create an event");
    slot.step_events.push_back(e);
  }
  if (slot.ran && cudaStreamWaitEvent(stream, slot.done, 0) != cudaSuccess) return cuda_error("cannot order the call");
  CapturedRun* run = find_run(slot, sizes, Model::kNumSizes, Model::arena_bytes(sizes));
  if (!run) return FOUNDRY_ERROR_OUT_OF_MEMORY;
  int status = FOUNDRY_OK;
  if (!run->warmed) {  // library calls set up outside any capture
    status = record_steps<Model>(model, slot, stream, inputs, outputs, sizes, run->arena);
    run->warmed = status == FOUNDRY_OK;
  }
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (!status) {
    cudaStream_t s = slot.capture_stream;
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return cuda_error("cannot capture a CUDA graph");
    cudaEventRecordWithFlags(slot.step_events[0], s, cudaEventRecordExternal);
    slot.profiling = true;
    status = record_steps<Model>(model, slot, s, inputs, outputs, sizes, run->arena);
    slot.profiling = false;
    if (cudaStreamEndCapture(s, &graph) != cudaSuccess && !status) status = cuda_error("capturing the profiled run failed");
  }
  if (!status && cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) status = cuda_error("cannot instantiate the CUDA graph");
  if (!status && cudaGraphLaunch(exec, stream) != cudaSuccess) status = cuda_error("cannot launch the CUDA graph");
  cudaEventRecord(slot.done, stream);
  slot.ran = true;
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess && !status)
    status = foundry_rt::set_error(FOUNDRY_ERROR_RUNTIME, std::string("CUDA error: ") + cudaGetErrorString(e));
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  if (status) return status;
  for (size_t k = 0; k < Model::kNumSteps; ++k) {
    float ms = 0;
    cudaEventElapsedTime(&ms, slot.step_events[k], slot.step_events[k + 1]);
    step_ms[k] = ms;
  }
  if (int flagged = take_reported_error(slot, stream)) return flagged;
  foundry_rt::last_error.clear();
  return FOUNDRY_OK;
}

// Waits for `stream`, then returns an error a kernel of any finished run reported.
template <class Model>
int check_errors(typename Model::Instance* model, void* stream) {
  if (!model) return foundry_rt::set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, "null model");
  if (cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream)); e != cudaSuccess)
    return foundry_rt::set_error(FOUNDRY_ERROR_RUNTIME, std::string("CUDA error: ") + cudaGetErrorString(e));
  DeviceState& device = model->device;
  std::lock_guard<std::mutex> lock(device.mutex);
  for (CallSlot* slot : device.idle) {
    if (slot->ran && cudaEventQuery(slot->done) != cudaSuccess) continue;  // still running elsewhere
    if (int status = take_reported_error(*slot, slot->stream)) return status;
  }
  cudaGetLastError();  // cudaEventQuery's "not ready"
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
  FOUNDRY_API int NAME##_profile_cuda(NAME##_model* model, void* stream, const foundry_tensor* inputs,           \
                                      size_t num_inputs, foundry_tensor* outputs, size_t num_outputs,            \
                                      double* step_ms, size_t num_steps) {                                       \
    return foundry_cuda::profile_device<NAME##_detail::Model>(model, stream, inputs, num_inputs, outputs,        \
                                                              num_outputs, step_ms, num_steps);                  \
  }                                                                                                              \
  FOUNDRY_DEFINE_MODEL_INFO_API(NAME)

#endif  // FOUNDRY_CUDA_MODEL_API_H
