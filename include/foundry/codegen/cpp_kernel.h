// C++ kernels: each scheduled kernel becomes one function over raw pointers, produced by running
// its nodes' bodies through an emitting `Ops` handler (named SSA temporaries, loops over the
// iteration ranges, accumulators for reductions), which writes each statement in scalar form and,
// where the op has one, in vector form (foundry_vec.h) for the innermost loops.
#pragma once
#include <string>
#include <vector>

#include "foundry/sched/schedule.h"

namespace foundry::codegen {

struct KernelArg {
  const ir::Buffer* buffer = nullptr;
  bool written = false;
  std::string name;  // "in_ptr0", "out_ptr0"
};

struct EmittedKernel {
  std::string name;
  std::vector<KernelArg> args;
  std::vector<std::string> size_params;  // dynamic sizes it takes after the buffers ("s0", ...)
  std::string declaration;  // "void name(const float* __restrict__ in_ptr0, ...)"
  std::string definition;   // comment naming the ATen nodes + the function
  bool may_fail = false;    // it checks indices or divisions (a CUDA kernel: it may set the error flag)
};

// The float lanes of a foundry_vec.h vector under `-march=target` (native: this CPU): 16 with
// AVX-512, 8 with AVX2 and FMA, 4 with SSE2 only. Kernels are generated for that width.
int vector_lanes(const std::string& target);

struct KernelOptions {
  // Threads for parallel loops: 1 emits no OpenMP parallel regions; otherwise the count is
  // decided at run time (FOUNDRY_NUM_THREADS, else the compile-time default, else all cores).
  int threads = 0;
  // Below this many element operations per run a kernel has no parallel region; above it, its
  // team is decided at run time from its work and the measured cost of a parallel region
  // (foundry_rt::kernel_team: the whole team, or the calling thread alone).
  int64_t min_parallel_work = 32768;
  // Innermost loops whose bodies have a vector form (float32 and bool values, plain stores, sum,
  // max and min reductions) are emitted as explicit SIMD over foundry_vec.h, with a scalar tail;
  // false leaves every loop scalar (`omp simd` hints only), for comparison.
  bool vectorize = true;
  int lanes = vector_lanes("native");  // floats per vector on the target
  // "cpu", or "cuda": CUDA kernels (cuda_kernel.h) in kernels_N.cu, a wrapper.cpp that launches them
  // and calls cuBLAS, and the CUDA C API (foundry_cuda_model_api.h); the fields above then do not apply.
  std::string device = "cpu";
  std::string cuda_arch = "sm_90";  // cuda: the GPU architecture (nvcc -arch)
  bool tf32 = false;                // cuda: float32 library calls may use TF32 tensor cores (--allow-tf32)
};

EmittedKernel emit_kernel(const sched::Kernel& kernel, const sched::Schedule& schedule,
                          const KernelOptions& options = {});

// The C++ element type a buffer of `t` is stored as (16-bit floats as their raw bits).
std::string storage_type(DType t);
// The C++ type a value of `t` is computed in (16-bit floats in float).
std::string compute_type(DType t);

}  // namespace foundry::codegen
