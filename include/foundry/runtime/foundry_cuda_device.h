// Device code of CUDA models (foundryc --device cuda), copied next to their sources and included
// by their kernel translation units (kernels_N.cu) only, which nvcc compiles: the helpers the
// generated kernels call (the device error flag, block-wide combines of reduction accumulators,
// launch sizes). The wrapper (wrapper.cpp) is host code built by the C++ compiler and includes
// foundry_cuda.h instead; the runtime's own kernels are foundry_cuda_launchers.h's.
// Include guards rather than #pragma once: several models' copies may meet in one build.
#ifndef FOUNDRY_CUDA_DEVICE_H
#define FOUNDRY_CUDA_DEVICE_H
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "foundry_kernel_support.h"

namespace foundry_cuda {

// Records a kernel error (foundry_rt::KernelError) in the model's flag; the first one stays.
__device__ inline void report(int* flag, int code) { atomicCAS(flag, 0, code); }

// A loaded integer used as a position, as foundry_rt::checked_position: one outside [0, size) is
// reported and clamped, so that the kernel never reads or writes out of bounds. checked_index
// wraps a negative one once first, as foundry_rt::checked_index.
__device__ inline int64_t checked_position(int* flag, int64_t i, int64_t size) {
  if (i < 0 || i >= size) {
    report(flag, foundry_rt::kIndexOutOfRange);
    return 0;
  }
  return i;
}
__device__ inline int64_t checked_index(int* flag, int64_t i, int64_t size) {
  return checked_position(flag, i < 0 ? i + size : i, size);
}

enum class Combine { Sum, Prod, Max, Min, Any };

// Two accumulators of one reduction combined, with the C++ kernels' semantics (NaN propagates
// through max and min of floats).
template <class T>
__device__ T combine(T a, T b, Combine op) {
  if constexpr (std::is_same<T, bool>::value) {
    return op == Combine::Min || op == Combine::Prod ? (a && b) : (a || b);
  } else {
    switch (op) {
      case Combine::Sum: return a + b;
      case Combine::Prod: return a * b;
      case Combine::Any: return a || b;
      case Combine::Max:
        if constexpr (std::is_floating_point<T>::value) return foundry_rt::maximum(a, b);
        else return foundry_rt::max_int(a, b);
      case Combine::Min:
        if constexpr (std::is_floating_point<T>::value) return foundry_rt::minimum(a, b);
        else return foundry_rt::min_int(a, b);
    }
    return a;
  }
}

// The value of `v` held by the thread `delta` lanes further in the warp.
template <class T>
__device__ T shuffle_down(T v, int delta) {
  constexpr unsigned kAll = 0xffffffffu;
  if constexpr (sizeof(T) == 8) {
    long long bits;
    memcpy(&bits, &v, 8);
    bits = __shfl_down_sync(kAll, bits, delta);
    memcpy(&v, &bits, 8);
    return v;
  } else if constexpr (std::is_same<T, float>::value) {
    return __shfl_down_sync(kAll, v, delta);
  } else {
    return static_cast<T>(__shfl_down_sync(kAll, static_cast<int>(v), delta));
  }
}

// Every thread's accumulator combined over the block; every thread gets the result. Within a
// warp by shuffles, then across warps through shared memory, in a fixed order (deterministic).
// Called by all threads of the block; blockDim.x is 1 or a multiple of 32.
template <class T>
__device__ T block_combine(T v, Combine op) {
  __shared__ T partial[32];
  if (blockDim.x == 1) return v;
  for (int delta = 16; delta > 0; delta >>= 1) v = combine(v, shuffle_down(v, delta), op);
  __syncthreads();  // a previous combine's threads may still be reading `partial`
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  T result = partial[0];
  for (unsigned w = 1; w < (blockDim.x + 31) / 32; ++w) result = combine(result, partial[w], op);
  return result;
}

// 128-bit loads and stores of four consecutive floats (flat kernels' lane vectors): `p` must be
// 16-byte aligned, which the launcher checks of every pointer before it picks the vector kernel.
__device__ inline void load4(float (&lanes)[4], const float* __restrict__ p) {
  const float4 v = *reinterpret_cast<const float4*>(p);
  lanes[0] = v.x, lanes[1] = v.y, lanes[2] = v.z, lanes[3] = v.w;
}
__device__ inline void store4(float* __restrict__ p, const float (&lanes)[4]) {
  *reinterpret_cast<float4*>(p) = make_float4(lanes[0], lanes[1], lanes[2], lanes[3]);
}
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The most blocks a launch gets: 128 per SM of the current GPU. The loops are grid-stride, so a
// cap only gives each thread more iterations; measured on an H200 (64M-float add, 256 threads a
// block), one element per thread over 262144 blocks reached 2.8 TB/s, capped at 128 blocks per SM
// 4.0 TB/s, as much as a float4 kernel.
inline int64_t max_blocks() {
  static const int64_t blocks = [] {
    int device = 0, sms = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    return int64_t(sms > 0 ? sms : 132) * 128;
  }();
  return blocks;
}

// Blocks for `work` iterations at `per_block` each, at most max_blocks().
inline unsigned grid_blocks(int64_t work, int64_t per_block) {
  int64_t blocks = (work + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks < max_blocks() ? blocks : max_blocks());
}

}  // namespace foundry_cuda

#endif  // FOUNDRY_CUDA_DEVICE_H
