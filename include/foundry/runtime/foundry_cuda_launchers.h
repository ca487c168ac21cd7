// The runtime's own kernels and their host launchers, which foundry_cuda.h declares for the
// host-compiled wrapper (wrapper.cpp): included by one kernel translation unit of each model
// (kernels_0.cu), so that each launcher is defined once in model.so. It does not include
// foundry_cuda.h (cuBLAS and the C++ library's headers would double that unit's compile time),
// so the signatures here repeat the declarations there; a mismatch leaves an undefined symbol
// in model.so, which the tests look for.
// Include guards rather than #pragma once: several models' copies may meet in one build (a
// translation unit that includes several models' kernels then defines the launchers once).
#ifndef FOUNDRY_CUDA_LAUNCHERS_H
#define FOUNDRY_CUDA_LAUNCHERS_H
#include "foundry_cuda_device.h"

namespace foundry_cuda {

// The kernels' error flag copied to the host's pinned word when set: a kernel node at the end of
// a run (cheaper in a CUDA graph than a copy node), for models whose kernels can report errors.
__global__ void publish_error_kernel(const int* flag, int* host_word) {
  if (int code = *flag) *static_cast<volatile int*>(host_word) = code;
}

void publish_error(const int* flag, int* host_word, cudaStream_t stream) {
  publish_error_kernel<<<1, 1, 0, stream>>>(flag, host_word);
}

// out[b] = bias broadcast, before a product accumulates into it.
template <class T>
__global__ void fill_bias_kernel(T* out, int64_t batch, int64_t M, int64_t N, const T* bias, int64_t row_stride,
                                 int64_t col_stride) {
  int64_t total = batch * M * N;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t i = k / N % M, j = k % N;
    out[k] = bias[i * row_stride + j * col_stride];
  }
}

template <class T>
void fill_bias(cudaStream_t stream, T* out, int64_t batch, int64_t M, int64_t N, const T* bias, int64_t row_stride,
               int64_t col_stride) {
  fill_bias_kernel<T><<<grid_blocks(batch * M * N, 256), 256, 0, stream>>>(out, batch, M, N, bias, row_stride,
                                                                             col_stride);
}

// The storage types of matmul's operands (a 16-bit float is stored as its bits).
template void fill_bias<float>(cudaStream_t, float*, int64_t, int64_t, int64_t, const float*, int64_t, int64_t);
template void fill_bias<double>(cudaStream_t, double*, int64_t, int64_t, int64_t, const double*, int64_t, int64_t);
template void fill_bias<uint16_t>(cudaStream_t, uint16_t*, int64_t, int64_t, int64_t, const uint16_t*, int64_t,
                                  int64_t);

}  // namespace foundry_cuda

#endif  // FOUNDRY_CUDA_LAUNCHERS_H
