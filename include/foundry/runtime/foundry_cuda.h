// Support code of CUDA models (foundryc --device cuda), copied next to their sources; host code
// only: the wrapper (wrapper.cpp) is compiled by the C++ compiler, the kernels (kernels_N.cu,
// foundry_cuda_device.h) by nvcc. Three parts:
//   - the host launchers of the runtime's own kernels (defined in foundry_cuda_launchers.h);
//   - library calls: matrix products through cuBLAS, float32 without TF32 (convolutions through
//     cuDNN are in foundry_cudnn.h, included only by models that have them);
//   - the resources of one call in flight (CallSlot); the C API of a CUDA model is
//     foundry_cuda_model_api.h's.
// Include guards rather than #pragma once: several models' copies may meet in one build.
#ifndef FOUNDRY_CUDA_H
#define FOUNDRY_CUDA_H
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "foundry_kernel_support.h"
#include "foundry_model_runtime.h"

namespace foundry_cuda {

// ---- the runtime's kernels (foundry_cuda_launchers.h, compiled with the model's kernels) ------

// Copies the kernels' error flag to the host's pinned word when it is set.
void publish_error(const int* flag, int* host_word, cudaStream_t stream);

// out (contiguous [batch, M, N]) = the bias broadcast, element (i, j) at
// bias[i * row_stride + j * col_stride]. Instantiated there for float, double and uint16_t (the
// bits of 16-bit floats): matmul's storage types.
template <class T>
void fill_bias(cudaStream_t stream, T* out, int64_t batch, int64_t M, int64_t N, const T* bias, int64_t row_stride,
               int64_t col_stride);

// ---- matrix products through cuBLAS ----------------------------------------------------------

// A matrix operand X [rows, cols] with element (i, j) at data[i * row_stride + j * col_stride]
// (plus `batch_stride` per batch).
template <class T>
struct Matrix {
  const T* data;
  int64_t rows, cols, row_stride, col_stride, batch_stride;
};

// cuBLAS is column-major: X^T [cols, rows] is a column-major matrix when X has unit column
// stride (op N, leading dimension row_stride), or X itself is one when it has unit row stride
// (op T, leading dimension col_stride). False for any other layout.
template <class T>
bool transposed_layout(const Matrix<T>& x, cublasOperation_t& op, int64_t& ld) {
  if (x.col_stride == 1 || x.cols == 1) {
    op = CUBLAS_OP_N;
    ld = x.rows == 1 ? (x.cols > 1 ? x.cols : 1) : x.row_stride;
    return ld >= x.cols;
  }
  if (x.row_stride == 1 || x.rows == 1) {
    op = CUBLAS_OP_T;
    ld = x.cols == 1 ? (x.rows > 1 ? x.rows : 1) : x.col_stride;
    return ld >= x.rows;
  }
  return false;
}

// cuBLAS's type of a storage type; 16-bit storage (uint16_t) is float16 unless the call says
// CUDA_R_16BF.
template <class T>
constexpr cudaDataType_t data_type() {
  return std::is_same<T, double>::value ? CUDA_R_64F : std::is_same<T, float>::value ? CUDA_R_32F : CUDA_R_16F;
}

// out (contiguous [batch, M, N]) = alpha * a x b + beta * bias (bias: nullptr for none), on
// `stream`, which `handle` is bound to (CallSlot::bind). float64 computes in double; the others
// in float (CUBLAS_COMPUTE_32F: no TF32 with CUBLAS_DEFAULT_MATH, set at creation, as PyTorch's
// float32 default; 16-bit operands accumulate in float and round once, as PyTorch's do). `tf32`
// (--allow-tf32): float32 products may use TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32, as
// torch.backends.cuda.matmul.allow_tf32). Returns "" or what failed.
template <class T>
const char* matmul(cublasHandle_t handle, cudaStream_t stream, int64_t batch, const Matrix<T>& a, const Matrix<T>& b,
                   const Matrix<T>* bias, double alpha, double beta, T* out, cudaDataType_t type = data_type<T>(),
                   bool tf32 = false) {
  const int64_t M = a.rows, N = b.cols, K = a.cols;
  if (batch == 0 || M == 0 || N == 0) return "";
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || batch > INT32_MAX) return "a matrix too large for cuBLAS";
  bool scale_bias = false;
  if (bias) {
    fill_bias<T>(stream, out, batch, M, N, bias->data, bias->row_stride, bias->col_stride);
    scale_bias = true;
  }
  if (K == 0) {  // no products: the bias alone (scaled), or zeros
    if (!bias) return cudaMemsetAsync(out, 0, sizeof(T) * batch * M * N, stream) == cudaSuccess ? "" : "cudaMemsetAsync failed";
    if (beta == 1.0) return "";
  }
  // out^T [N, M] = b^T [N, K] x a^T [K, M], column-major.
  cublasOperation_t op_b, op_a;
  int64_t ld_b, ld_a;
  if (!transposed_layout(b, op_b, ld_b) || !transposed_layout(a, op_a, ld_a))
    return "a matrix operand whose rows and columns both have non-unit strides";
  const bool wide = type == CUDA_R_64F;
  const double alpha64 = alpha, beta64 = scale_bias ? beta : 0.0;
  const float alpha32 = static_cast<float>(alpha), beta32 = static_cast<float>(beta64);
  cublasStatus_t s = cublasGemmStridedBatchedEx(
      handle, op_b, op_a, int(N), int(M), int(K), wide ? static_cast<const void*>(&alpha64) : &alpha32, b.data, type,
      int(ld_b), b.batch_stride, a.data, type, int(ld_a), a.batch_stride,
      wide ? static_cast<const void*>(&beta64) : &beta32, out, type, int(N), M * N, int(batch),
      wide                              ? CUBLAS_COMPUTE_64F
      : tf32 && type == CUDA_R_32F ? CUBLAS_COMPUTE_32F_FAST_TF32
                                        : CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT);
  return s == CUBLAS_STATUS_SUCCESS ? "" : "cuBLAS gemm failed";
}

// ---- the model on the device -----------------------------------------------------------------

inline size_t dtype_bytes(int32_t code) {
  switch (code) {
    case FOUNDRY_UINT8: case FOUNDRY_INT8: case FOUNDRY_BOOL: return 1;
    case FOUNDRY_INT16: case FOUNDRY_FLOAT16: case FOUNDRY_BFLOAT16: return 2;
    case FOUNDRY_INT32: case FOUNDRY_FLOAT32: return 4;
    default: return 8;
  }
}

inline size_t tensor_bytes(const foundry_tensor& t) {
  size_t n = 1;
  for (int32_t d = 0; d < t.rank; ++d) n *= static_cast<size_t>(t.shape[d]);
  return n * dtype_bytes(t.dtype);
}

// What failed, with the CUDA runtime's last error.
inline std::string cuda_failure(const char* what) {
  cudaError_t e = cudaGetLastError();
  return std::string(what) + " (" + cudaGetErrorString(e) + ")";
}

// One input shape's run in a slot: its intermediate buffers and the CUDA graph it was captured
// into, with the inputs' and outputs' pointers the graph was captured with.
struct CapturedRun {
  std::vector<int64_t> sizes;  // the model's dynamic sizes: the key
  uint8_t* arena = nullptr;
  size_t arena_bytes = 0;
  std::vector<void*> pointers;
  cudaGraphExec_t exec = nullptr;
  bool warmed = false;  // the first run of a shape is not captured: library calls set up then
  uint64_t last_use = 0;
  ~CapturedRun() {
    if (exec) cudaGraphExecDestroy(exec);
    cudaFree(arena);
  }
};

// The state of a library that only some models call (cuDNN's: foundry_cudnn.h), owned by a
// CallSlot through this base so that the other models neither include its header nor link it.
struct LibraryState {
  virtual ~LibraryState() = default;
};

// The resources of one call in flight, so that calls from several host threads run at once
// without sharing anything they write: the kernels' error flag, the cuBLAS handle and its
// workspace (a handle is bound to one stream at a time), the captured CUDA graphs with their
// arenas (foundry_cuda_model_api.h), and an event marking the end of the slot's last run. A slot
// serves one call at a time; a call that takes a slot last used on another stream first waits
// (on the GPU, cudaStreamWaitEvent) for `done`.
struct CallSlot {
  static constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;  // NVIDIA's advice for Hopper
  int* error_flag = nullptr;  // device: the first error a kernel reports; sticky until read
  int* host_flag = nullptr;   // pinned host memory: the flag, published there at the end of a run
  int* host_flag_on_device = nullptr;  // the same word as the kernels address it (mapped memory)
  cublasHandle_t cublas = nullptr;
  void* cublas_workspace = nullptr;
  std::unique_ptr<LibraryState> cudnn;    // foundry_cudnn::State (models with convolutions)
  cudaStream_t stream = nullptr;          // NAME_run's stream
  cudaStream_t capture_stream = nullptr;  // where runs are captured into graphs (never runs work)
  cudaEvent_t done = nullptr;
  uint8_t* staging = nullptr;  // NAME_run's device copies of the inputs and outputs
  size_t staging_bytes = 0;
  bool ran = false;  // whether `done` was ever recorded
  std::vector<std::unique_ptr<CapturedRun>> runs;  // at most kMaxShapes, the least recently used out
  uint64_t clock = 0;
  static constexpr size_t kMaxShapes = 8;

  // "" or what failed.
  std::string open(bool uses_cublas) {
    if (cudaMalloc(&error_flag, sizeof(int)) != cudaSuccess || cudaMemset(error_flag, 0, sizeof(int)) != cudaSuccess)
      return cuda_failure("cannot allocate the error flag on the GPU");
    if (cudaHostAlloc(&host_flag, sizeof(int), cudaHostAllocMapped) != cudaSuccess ||
        cudaHostGetDevicePointer(&host_flag_on_device, host_flag, 0) != cudaSuccess)
      return cuda_failure("cannot allocate mapped pinned host memory");
    *host_flag = 0;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaStreamCreateWithFlags(&capture_stream, cudaStreamNonBlocking) != cudaSuccess)
      return cuda_failure("cannot create a stream");
    if (cudaEventCreateWithFlags(&done, cudaEventDisableTiming) != cudaSuccess) return cuda_failure("cannot create an event");
    if (uses_cublas) {
      if (cublasCreate(&cublas) != CUBLAS_STATUS_SUCCESS) return "cannot create a cuBLAS handle";
      // No TF32: float32 products as PyTorch computes them by default. 16-bit products keep their
      // split reductions in float too (cuBLAS may otherwise add partial sums in 16 bits).
      cublasSetMathMode(cublas, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
      // A workspace of our own, set again after every cublasSetStream (which resets it): cuBLAS
      // must not allocate while a run is captured into a graph.
      if (cudaMalloc(&cublas_workspace, kCublasWorkspaceBytes) != cudaSuccess)
        return cuda_failure("cannot allocate cuBLAS's workspace on the GPU");
    }
    return "";
  }
  // Binds the library handles to `s` (the call's stream, or the capture stream).
  const char* bind(cudaStream_t s) {
    if (!cublas) return "";
    if (cublasSetStream(cublas, s) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(cublas, cublas_workspace, kCublasWorkspaceBytes) != CUBLAS_STATUS_SUCCESS)
      return "cannot bind cuBLAS to the stream";
    return "";
  }
  // Waits for the slot's last run (before freeing what it may still use).
  void finish() {
    if (ran) cudaEventSynchronize(done);
  }
  // NAME_profile_cuda: while `profiling`, each step's end is recorded in step_events[step + 1]
  // (step_events[0] before the first step), as event nodes of the graph being captured.
  // Generated runs call this after every step.
  std::vector<cudaEvent_t> step_events;
  bool profiling = false;
  void step_done(cudaStream_t s, size_t step) {
    if (profiling) cudaEventRecordWithFlags(step_events[step + 1], s, cudaEventRecordExternal);
  }
  ~CallSlot() {
    finish();
    runs.clear();
    cudnn.reset();  // before the streams it may be bound to
    if (cublas) cublasDestroy(cublas);
    if (done) cudaEventDestroy(done);
    for (cudaEvent_t e : step_events) cudaEventDestroy(e);
    if (stream) cudaStreamDestroy(stream);
    if (capture_stream) cudaStreamDestroy(capture_stream);
    cudaFree(cublas_workspace);
    cudaFree(staging);
    cudaFree(error_flag);
    cudaFreeHost(host_flag);
  }
};

// What a loaded CUDA model owns on the device: its weights (uploaded once at creation) and a
// pool of call slots, one per call in flight (a new one made when all are busy; calls from
// many threads make as many slots, reused afterwards).
struct DeviceState {
  uint8_t* weights = nullptr;
  bool uses_cublas = false;
  // The handles of the libraries other than cuBLAS the model calls (cuDNN), made in each new
  // slot: the model's Model::open_libraries, set before open().
  std::string (*open_libraries)(CallSlot&) = nullptr;
  std::mutex mutex;  // guards the pool
  std::vector<std::unique_ptr<CallSlot>> slots;
  std::vector<CallSlot*> idle;

  // "" or what failed. Opens one slot, so that a model that cannot run fails at creation.
  std::string open(const uint8_t* host_weights, size_t bytes, bool cublas) {
    uses_cublas = cublas;
    if (bytes) {
      if (cudaMalloc(&weights, bytes) != cudaSuccess) return cuda_failure("cannot allocate the weights on the GPU");
      if (cudaMemcpy(weights, host_weights, bytes, cudaMemcpyHostToDevice) != cudaSuccess)
        return cuda_failure("cannot copy the weights to the GPU");
    }
    std::string failed;
    if (CallSlot* s = acquire(failed)) release(s);
    return failed;
  }
  // An idle slot, or a new one (nullptr with `failed` set when it cannot be made).
  CallSlot* acquire(std::string& failed) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!idle.empty()) {
        CallSlot* s = idle.back();
        idle.pop_back();
        return s;
      }
    }
    auto s = std::make_unique<CallSlot>();
    failed = s->open(uses_cublas);
    if (failed.empty() && open_libraries) failed = open_libraries(*s);
    if (!failed.empty()) return nullptr;
    std::lock_guard<std::mutex> lock(mutex);
    slots.push_back(std::move(s));
    return slots.back().get();
  }
  void release(CallSlot* s) {
    std::lock_guard<std::mutex> lock(mutex);
    idle.push_back(s);
  }
  ~DeviceState() {
    slots.clear();  // each waits for its last run
    cudaFree(weights);
  }
};

}  // namespace foundry_cuda

#endif  // FOUNDRY_CUDA_H
