/* The GPU's bandwidth roofline for scripts/bench.sh --device cuda: c[i] = a[i] + b[i] over 64M
 * floats, as stream_add.c on the CPU (two streams read, one written, 12 bytes per element), with
 * 128-bit loads and stores and a grid of a few blocks per SM, timed with CUDA events, best of 10.
 *
 *   nvcc -O3 -arch=sm_90 cuda_add.cu -o cuda_add && ./cuda_add
 *
 * Prints one JSON object: {"device":"...","n":N,"best_s":...,"gbps":...}. */
#include <cuda_runtime.h>
#include <stdio.h>

#define N (64L * 1024 * 1024)
#define REPS 10

__global__ void add(const float4* a, const float4* b, float4* c, long n4) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
    float4 x = a[i], y = b[i];
    c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

__global__ void fill(float* p, long n, float v) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) p[i] = v;
}

static int check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fprintf(stderr, "cuda_add: %s: %s\n", what, cudaGetErrorString(e));
  return e != cudaSuccess;
}

int main(void) {
  float *a, *b, *c;
  if (check(cudaMalloc(&a, N * 4), "cudaMalloc") || check(cudaMalloc(&b, N * 4), "cudaMalloc") ||
      check(cudaMalloc(&c, N * 4), "cudaMalloc"))
    return 1;
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  int blocks = prop.multiProcessorCount * 8, threads = 256;
  fill<<<blocks, threads>>>(a, N, 1.0f);
  fill<<<blocks, threads>>>(b, N, 2.0f);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  float best_ms = 1e30f;
  for (int r = 0; r < REPS; r++) {
    cudaEventRecord(start);
    add<<<blocks, threads>>>((const float4*)a, (const float4*)b, (float4*)c, N / 4);
    cudaEventRecord(stop);
    if (check(cudaEventSynchronize(stop), "add")) return 1;
    float ms;
    cudaEventElapsedTime(&ms, start, stop);
    if (ms < best_ms) best_ms = ms;
  }
  float probe[2];
  cudaMemcpy(&probe[0], c, 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(&probe[1], c + N - 1, 4, cudaMemcpyDeviceToHost);
  if (probe[0] != 3.0f || probe[1] != 3.0f) {
    fprintf(stderr, "cuda_add: wrong result\n");
    return 1;
  }
  printf("{\"device\":\"%s\",\"n\":%ld,\"best_s\":%.6f,\"gbps\":%.3f}\n", prop.name, N, best_ms / 1e3,
         12.0 * N / (best_ms / 1e3) / 1e9);
  return 0;
}
