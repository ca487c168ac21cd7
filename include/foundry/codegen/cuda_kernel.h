// CUDA kernels (--device cuda): each scheduled kernel becomes a `__global__` function and a host
// launcher, from the same walk of the kernel's bodies and the same scalar emitting handler as
// the C++ kernels (CppScalarOps in its CUDA dialect), arranged into a loop nest that print_cuda
// maps onto the GPU:
//   - a kernel without inner loops (pointwise) is one flat grid-stride loop over all of its
//     outer iterations, one element per thread at a time, 64-bit indices; where its innermost
//     loop's extent is a multiple of 4 and a float32 access moves one element per iteration from
//     a 16-byte boundary, a second form takes 4 elements a thread with 128-bit loads and stores
//     (LaneVectors), launched when the pointers it reads and writes that way are aligned;
//   - a kernel with reductions or inner loops runs one block per outer iteration (a row), of as
//     many warps as its longest static loop fills (up to block_threads); the
//     threads of the block share each reduction's or inner member's loop (block-stride), and a
//     reduction's per-thread accumulators are combined with warp shuffles and shared memory
//     (foundry_cuda_device.h), so that every thread holds the row's result for what follows;
//     a shared loop of static extent up to 8 rounds of the block takes them in unrolled rounds,
//     and what it loads or stores stays in registers for the next loop of the same shape
//     (RowRegisters: a layer norm or softmax reads its row from memory once);
//     argmax/argmin rows, whose index ties would need a paired combine, run on one thread;
//   - a kernel whose iterations are not independent (scatter stores, a buffer both read and
//     written) runs on a single thread, in order, as on one CPU thread.
// Index checks and integer division by zero set the model's device error flag (`error_flag`).
#pragma once
#include "foundry/codegen/cpp_kernel.h"

namespace foundry::codegen {

struct CudaKernelOptions {
  int block_threads = 256;  // threads per block of flat kernels, at most that of row kernels
};

// A CUDA model's kernels go into several translation units (kernels_0.cu, ...) that nvcc compiles
// in parallel with wrapper.cpp: consecutive kernels in schedule order, about `part_bytes` of
// source each, at most `max_parts`, balanced by size. Returns the index of each part's first
// kernel (one part: {0}). A function of the kernels' sizes only, never of the machine: the sources
// are the cache key. The size: nvcc takes about 0.9 s per unit plus 1 s per 30 kB of kernels, and
// the C++ compiler at least 3.5 s for any wrapper (measured on the 2-core build host), so a 64 kB
// part (3 s) is never the longest step where there are cores for every part, while a small host
// pays the 0.9 s for few parts.
constexpr size_t kCudaPartBytes = 64000;
constexpr size_t kMaxCudaParts = 16;
std::vector<size_t> split_kernel_parts(const std::vector<size_t>& kernel_bytes, size_t part_bytes = kCudaPartBytes,
                                       size_t max_parts = kMaxCudaParts);

// `declaration` is the host launcher's: `void NAME(cudaStream_t stream, int* error_flag, ...)`;
// `definition` holds the `__global__` kernel and the launcher.
EmittedKernel emit_cuda_kernel(const sched::Kernel& kernel, const sched::Schedule& schedule,
                               const CudaKernelOptions& options = {});

}  // namespace foundry::codegen
