// Convolutions of CUDA models through cuDNN 9 (its convolution API: cudnnConvolutionForward), copied
// next to the sources of every CUDA model and included by the wrapper.cpp of those that have a
// convolution: the others neither include cudnn.h nor link cuDNN.
//
// What each call slot of a model owns (foundry_cudnn::State in CallSlot::cudnn, made with the
// slot: the first one at NAME_create): the cuDNN handle, one workspace, and per call site (the IR
// node's id) the descriptors and the algorithm of each input shape it has seen, made on the
// slot's first call of that shape (a small cache, least recently used out: a model with dynamic
// sizes sees several shapes). A slot serves one call at a time, so nothing here is shared.
//
// Allocation and synchronization: nothing allocates device memory or waits for the GPU inside a
// run, except that a slot's first call of a shape whose algorithm needs a larger workspace than
// the slot has allocates a new one (cudaMalloc, which may synchronize). The workspace only grows;
// the replaced one is kept until the slot is destroyed, because work already enqueued, or a CUDA
// graph captured earlier, may still use it. So once a shape has run once in a slot, its runs
// allocate nothing and may be captured into a CUDA graph, as foundry_cuda_model_api.h does from a
// shape's second run on (the first one is enqueued directly).
// Include guards rather than #pragma once: several models' copies may meet in one build.
#ifndef FOUNDRY_CUDNN_H
#define FOUNDRY_CUDNN_H
#include <cudnn.h>

#include <array>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "foundry_cuda.h"

namespace foundry_cudnn {

constexpr int kMaxRank = 5;  // N, C and up to three spatial dims
// The largest workspace an algorithm may ask for; costlier algorithms are not considered.
constexpr size_t kWorkspaceLimit = size_t(256) << 20;
// Input shapes whose descriptors and algorithm one call site keeps.
constexpr size_t kShapesPerSite = 16;

// A tensor operand: its first element and, in elements, its sizes and strides (N, C, spatial...).
template <class T>
struct Tensor {
  T* data;
  int rank;
  int64_t sizes[kMaxRank], strides[kMaxRank];
};

// The convolution's parameters, one per spatial dim (of `spatial`); cross-correlation as PyTorch.
struct ConvParams {
  int spatial;
  int stride[3], padding[3], dilation[3];
  int groups;
};

// The descriptors and the algorithm of one call site at one shape.
struct Plan {
  std::array<int64_t, 6 * kMaxRank + 1> key{};
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  // The heuristic's acceptable algorithms, fastest first; `next` is the one after `algo`.
  std::vector<cudnnConvolutionFwdAlgo_t> candidates;
  size_t next = 0;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace_bytes = 0;
  bool ran = false;  // `algo` ran once: no other is tried after that
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (bias) cudnnDestroyTensorDescriptor(bias);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

struct State : foundry_cuda::LibraryState {
  cudnnHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  std::vector<void*> retired;               // replaced workspaces (see the top of this file)
  std::map<int, std::list<Plan>> sites;     // by call site; most recently used first
  ~State() override {
    sites.clear();
    if (handle) {
      cudnnSetStream(handle, nullptr);  // the last run's stream may be gone
      cudnnDestroy(handle);
    }
    for (void* p : retired) cudaFree(p);
    cudaFree(workspace);
  }
};

// A new call slot's cuDNN handle (Model::open_libraries). "" or what failed.
inline std::string open(foundry_cuda::CallSlot& slot) {
  auto state = std::make_unique<State>();
  if (cudnnStatus_t s = cudnnCreate(&state->handle); s != CUDNN_STATUS_SUCCESS)
    return std::string("cannot create a cuDNN handle: ") + cudnnGetErrorString(s);
  slot.cudnn = std::move(state);
  return "";
}

// "" for success, else "what failed: status".
inline std::string check(cudnnStatus_t status, const char* what) {
  return status == CUDNN_STATUS_SUCCESS ? "" : std::string(what) + " failed: " + cudnnGetErrorString(status);
}

template <class T>
int64_t numel(const Tensor<T>& t) {
  int64_t n = 1;
  for (int d = 0; d < t.rank; ++d) n *= t.sizes[d];
  return n;
}

template <class T>
std::string describe(const Tensor<T>& t) {
  std::string sizes, strides;
  for (int d = 0; d < t.rank; ++d) {
    sizes += (d ? ", " : "") + std::to_string(t.sizes[d]);
    strides += (d ? ", " : "") + std::to_string(t.strides[d]);
  }
  return "[" + sizes + "] (strides [" + strides + "])";
}

// cuDNN's dims of an operand: at least 4 (a 1-d convolution is a 2-d one with H = 1), every stride
// of a size-1 dim replaced by the extent of the dims after it (any stride is right there, and a
// stride of 0 would be refused). False when a size or stride exceeds cuDNN's int.
template <class T>
bool cudnn_dims(const Tensor<T>& t, int (&sizes)[kMaxRank], int (&strides)[kMaxRank], int& rank) {
  int64_t s[kMaxRank], st[kMaxRank];
  rank = 0;
  for (int d = 0; d < t.rank; ++d) {
    if (t.rank == 3 && d == 2) s[rank] = 1, st[rank++] = 0;  // H of a 1-d convolution
    s[rank] = t.sizes[d], st[rank++] = t.strides[d];
  }
  for (int d = rank - 1; d >= 0; --d) {
    if (s[d] == 1) st[d] = d + 1 < rank ? s[d + 1] * st[d + 1] : 1;
    if (s[d] > INT32_MAX || st[d] > INT32_MAX || st[d] < 0) return false;
    sizes[d] = static_cast<int>(s[d]);
    strides[d] = static_cast<int>(st[d]);
  }
  return true;
}

// Whether dims of `sizes` laid out in `order` (outermost first) are packed with these strides.
inline bool packed(const int* sizes, const int* strides, const int* order, int rank) {
  int64_t expected = 1;
  for (int k = rank - 1; k >= 0; --k) {
    int d = order[k];
    if (sizes[d] != 1 && strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

// The filter's format: cuDNN takes a weight packed as NCHW (K, C, spatial...) or NHWC (K,
// spatial..., C), with no other strides.
inline bool filter_format(const int* sizes, const int* strides, int rank, cudnnTensorFormat_t& format) {
  const int nchw[] = {0, 1, 2, 3, 4}, nhwc4[] = {0, 2, 3, 1}, nhwc5[] = {0, 2, 3, 4, 1};
  if (packed(sizes, strides, nchw, rank)) return (format = CUDNN_TENSOR_NCHW), true;
  if (packed(sizes, strides, rank == 4 ? nhwc4 : nhwc5, rank)) return (format = CUDNN_TENSOR_NHWC), true;
  return false;
}

template <class T>
void add_key(std::array<int64_t, 6 * kMaxRank + 1>& key, size_t& at, const Tensor<T>& t) {
  for (int d = 0; d < kMaxRank; ++d) key[at++] = d < t.rank ? t.sizes[d] : -1;
  for (int d = 0; d < kMaxRank; ++d) key[at++] = d < t.rank ? t.strides[d] : -1;
}

// The descriptors of the input, weight, output and bias tensors.
template <class T>
std::string describe_tensors(Plan& plan, const Tensor<const T>& input, const Tensor<const T>& weight,
                             const Tensor<const T>* bias, const Tensor<T>& output, cudnnDataType_t type) {
  int xs[kMaxRank], xst[kMaxRank], ws[kMaxRank], wst[kMaxRank], ys[kMaxRank], yst[kMaxRank], rank = 0;
  if (!cudnn_dims(input, xs, xst, rank) || !cudnn_dims(weight, ws, wst, rank) || !cudnn_dims(output, ys, yst, rank))
    return "a convolution too large for cuDNN (a size or stride above 2^31 - 1)";
  cudnnTensorFormat_t format;
  if (!filter_format(ws, wst, rank, format))
    return "cuDNN takes a convolution weight packed as NCHW or NHWC, not the weight " + describe(weight);
  std::string failed = check(cudnnCreateTensorDescriptor(&plan.x), "cudnnCreateTensorDescriptor");
  if (failed.empty()) failed = check(cudnnCreateTensorDescriptor(&plan.y), "cudnnCreateTensorDescriptor");
  if (failed.empty()) failed = check(cudnnCreateFilterDescriptor(&plan.w), "cudnnCreateFilterDescriptor");
  if (failed.empty())
    failed = check(cudnnSetTensorNdDescriptor(plan.x, type, rank, xs, xst), "cudnnSetTensorNdDescriptor (the input)");
  if (failed.empty())
    failed = check(cudnnSetTensorNdDescriptor(plan.y, type, rank, ys, yst), "cudnnSetTensorNdDescriptor (the output)");
  if (failed.empty())
    failed = check(cudnnSetFilterNdDescriptor(plan.w, type, format, rank, ws), "cudnnSetFilterNdDescriptor (the weight)");
  if (!failed.empty() || !bias) return failed;
  // The bias [O] as [1, O, 1, 1(, 1)], broadcast over the output by cudnnAddTensor.
  int bs[kMaxRank], bst[kMaxRank];
  int64_t stride = bias->strides[0] > 0 ? bias->strides[0] : 1;
  if (stride * ys[1] > INT32_MAX) return "a convolution bias too large for cuDNN";
  for (int d = 0; d < rank; ++d) bs[d] = 1, bst[d] = 1;
  bs[1] = ys[1];
  bst[1] = static_cast<int>(stride);
  bst[0] = static_cast<int>(stride) * ys[1];
  failed = check(cudnnCreateTensorDescriptor(&plan.bias), "cudnnCreateTensorDescriptor");
  if (failed.empty()) failed = check(cudnnSetTensorNdDescriptor(plan.bias, type, rank, bs, bst), "cudnnSetTensorNdDescriptor (the bias)");
  return failed;
}

// The convolution descriptor: cross-correlation, compute type = data type. float32 in
// CUDNN_FMA_MATH unless the model was compiled with --allow-tf32: CUDNN_DEFAULT_MATH permits TF32
// tensor cores on Ampere and later GPUs (the H200 included), whose 10-bit mantissas do not match
// PyTorch's float32 reference (they do match what PyTorch's own cuDNN convolutions compute by
// default, torch.backends.cudnn.allow_tf32).
inline std::string describe_convolution(Plan& plan, const ConvParams& p, cudnnDataType_t type, bool tf32) {
  int pad[3], stride[3], dilation[3], n = 0;
  if (p.spatial == 1) pad[n] = 0, stride[n] = 1, dilation[n++] = 1;  // H of a 1-d convolution
  for (int d = 0; d < p.spatial; ++d) pad[n] = p.padding[d], stride[n] = p.stride[d], dilation[n++] = p.dilation[d];
  std::string failed = check(cudnnCreateConvolutionDescriptor(&plan.conv), "cudnnCreateConvolutionDescriptor");
  if (failed.empty())
    failed = check(cudnnSetConvolutionNdDescriptor(plan.conv, n, pad, stride, dilation, CUDNN_CROSS_CORRELATION, type),
                   "cudnnSetConvolutionNdDescriptor");
  if (failed.empty()) failed = check(cudnnSetConvolutionGroupCount(plan.conv, p.groups), "cudnnSetConvolutionGroupCount");
  // float64 has no reduced-precision form to exclude (its tensor cores compute in float64).
  cudnnMathType_t math = type == CUDNN_DATA_FLOAT && !tf32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
  if (failed.empty()) failed = check(cudnnSetConvolutionMathType(plan.conv, math), "cudnnSetConvolutionMathType");
  return failed;
}

// Whether an algorithm of the heuristic's list may run: deterministic, its workspace at most
// kWorkspaceLimit, and no reduced precision (float32: not the tensor-op form, which is TF32, unless
// `tf32`; the descriptor stays in CUDNN_FMA_MATH whatever the heuristic's entry says; float64: no
// conversion).
inline bool acceptable(const cudnnConvolutionFwdAlgoPerf_t& perf, cudnnDataType_t type, bool tf32) {
  bool math = perf.mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
              (type != CUDNN_DATA_FLOAT || tf32 || perf.mathType != CUDNN_TENSOR_OP_MATH);
  return perf.status == CUDNN_STATUS_SUCCESS && perf.determinism == CUDNN_DETERMINISTIC && math &&
         perf.memory <= kWorkspaceLimit;
}

// A workspace of at least `bytes`; the one it replaces stays allocated (see the top of this file).
inline std::string reserve_workspace(State& state, size_t bytes) {
  if (bytes <= state.workspace_bytes) return "";
  void* grown = nullptr;
  if (cudaMalloc(&grown, bytes) != cudaSuccess) {
    cudaGetLastError();  // reported here, not as the run's CUDA error
    return "cannot allocate " + std::to_string(bytes) + " bytes of cuDNN workspace on the GPU";
  }
  if (state.workspace) state.retired.push_back(state.workspace);
  state.workspace = grown;
  state.workspace_bytes = bytes;
  return "";
}

// The plan's next candidate algorithm whose workspace fits (the workspace grown for it).
inline std::string next_algorithm(State& state, Plan& plan) {
  while (plan.next < plan.candidates.size()) {
    cudnnConvolutionFwdAlgo_t algo = plan.candidates[plan.next++];
    size_t bytes = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(state.handle, plan.x, plan.w, plan.conv, plan.y, algo, &bytes) !=
            CUDNN_STATUS_SUCCESS ||
        bytes > kWorkspaceLimit)
      continue;
    plan.algo = algo;
    plan.workspace_bytes = bytes;
    return reserve_workspace(state, bytes);
  }
  return "cuDNN has no deterministic algorithm without reduced precision for this convolution whose workspace fits " +
         std::to_string(kWorkspaceLimit >> 20) + " MiB (" + std::to_string(plan.candidates.size()) +
         " acceptable candidates tried)";
}

// The candidates from cuDNN's heuristic (cudnnGetConvolutionForwardAlgorithm_v7: no GPU time, the
// same choice every time), and the first of them that fits.
inline std::string choose_algorithm(State& state, Plan& plan, cudnnDataType_t type, bool tf32) {
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int returned = 0;
  std::string failed = check(cudnnGetConvolutionForwardAlgorithm_v7(state.handle, plan.x, plan.w, plan.conv, plan.y,
                                                                    CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf),
                             "cudnnGetConvolutionForwardAlgorithm_v7");
  if (!failed.empty()) return failed;
  for (int k = 0; k < returned; ++k)
    if (acceptable(perf[k], type, tf32)) plan.candidates.push_back(perf[k].algo);
  return next_algorithm(state, plan);
}

// The plan of call site `site` for these operands: from the cache, or made (and the workspace grown).
template <class T>
std::string find_plan(State& state, int site, const ConvParams& p, bool tf32, const Tensor<const T>& input,
                      const Tensor<const T>& weight, const Tensor<const T>* bias, const Tensor<T>& output, Plan*& plan) {
  std::array<int64_t, 6 * kMaxRank + 1> key{};
  size_t at = 0;
  add_key(key, at, input);
  add_key(key, at, weight);
  add_key(key, at, output);
  key[at] = bias ? bias->strides[0] : -1;
  std::list<Plan>& plans = state.sites[site];
  for (auto it = plans.begin(); it != plans.end(); ++it)
    if (it->key == key) {
      plans.splice(plans.begin(), plans, it);
      plan = &plans.front();
      return "";
    }
  constexpr cudnnDataType_t type = std::is_same<T, float>::value ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE;
  plans.emplace_front();  // built in place; dropped again if anything fails
  Plan& made = plans.front();
  made.key = key;
  std::string failed = describe_tensors<T>(made, input, weight, bias, output, type);
  if (failed.empty()) failed = describe_convolution(made, p, type, tf32);
  if (failed.empty()) failed = choose_algorithm(state, made, type, tf32);
  if (!failed.empty()) {
    plans.pop_front();
    return failed + ": input " + describe(input) + ", weight " + describe(weight);
  }
  if (plans.size() > kShapesPerSite) plans.pop_back();
  plan = &plans.front();
  return "";
}

// output (contiguous) = the convolution of input by weight, plus bias (nullptr for none), enqueued
// on `stream` (the call's, or the slot's capture stream) with the slot's handle. `site` names the
// call site (its IR node's id); `tf32`: float32 may use TF32 tensor cores (--allow-tf32). "" or
// what failed.
//
// The bias is a separate cudnnAddTensor rather than cudnnConvolutionBiasActivationForward's fused
// bias: that call runs its identity activation only with the IMPLICIT_PRECOMP_GEMM algorithm,
// which would overrule the heuristic's choice (and its determinism and workspace checks) for
// every convolution with a bias; the extra pass over the output is cheap next to the convolution.
template <class T>
std::string convolution(foundry_cuda::CallSlot& slot, cudaStream_t stream, int site, const ConvParams& p,
                        const Tensor<const T>& input, const Tensor<const T>& weight, const Tensor<const T>* bias,
                        const Tensor<T>& output, bool tf32 = false) {
  static_assert(std::is_same<T, float>::value || std::is_same<T, double>::value, "float32 and float64 only");
  auto* state = static_cast<State*>(slot.cudnn.get());
  if (!state) return "bug: the call slot has no cuDNN handle (Model::open_libraries did not run)";
  if (numel(output) == 0) return "";
  if (numel(input) == 0 || numel(weight) == 0) return "cuDNN does not convolve an input or weight with no elements";
  Plan* plan = nullptr;
  if (std::string failed = find_plan<T>(*state, site, p, tf32, input, weight, bias, output, plan); !failed.empty())
    return failed;
  if (std::string failed = check(cudnnSetStream(state->handle, stream), "cudnnSetStream"); !failed.empty())
    return failed;
  const T one = 1, zero = 0;
  cudnnStatus_t status;
  // An algorithm the heuristic offered may still refuse these operands (its checks run on the
  // host, before anything is enqueued): the next candidate is tried, on the shape's first call only.
  while ((status = cudnnConvolutionForward(state->handle, &one, plan->x, input.data, plan->w, weight.data, plan->conv,
                                           plan->algo, plan->workspace_bytes ? state->workspace : nullptr,
                                           plan->workspace_bytes, &zero, plan->y, output.data)) ==
             CUDNN_STATUS_NOT_SUPPORTED &&
         !plan->ran)
    if (std::string failed = next_algorithm(*state, *plan); !failed.empty()) return failed;
  plan->ran = plan->ran || status == CUDNN_STATUS_SUCCESS;
  std::string failed = check(status, "cudnnConvolutionForward");
  if (failed.empty() && bias)
    failed = check(cudnnAddTensor(state->handle, &one, plan->bias, bias->data, &one, plan->y, output.data),
                   "cudnnAddTensor (the bias)");
  return failed;
}

}  // namespace foundry_cudnn

#endif  // FOUNDRY_CUDNN_H
