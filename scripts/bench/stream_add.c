/* STREAM "Add" (c[i] = a[i] + b[i]) over 64M floats: the memory-bandwidth roofline that
 * scripts/bench.sh compares the compiled models with. It is the same access pattern as the
 * pointwise models (two streams read, one written), so it is the bandwidth those can reach.
 *
 *   cc -O3 -march=native -fopenmp stream_add.c -o stream_add && OMP_NUM_THREADS=T ./stream_add
 *
 * Prints one JSON object: {"threads":T,"n":N,"best_s":...,"gbps":...}. GB/s counts 12 bytes per
 * element (two 4-byte reads, one 4-byte write), as STREAM does: write-allocate traffic is not
 * counted, so the figure is what a kernel doing the same work can be credited with. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define N (64L * 1024 * 1024)
#define REPS 10

int main(void) {
  float *a = aligned_alloc(64, N * sizeof(float));
  float *b = aligned_alloc(64, N * sizeof(float));
  float *c = aligned_alloc(64, N * sizeof(float));
  if (!a || !b || !c) {
    fprintf(stderr, "stream_add: out of memory (needs 768 MiB)\n");
    return 1;
  }
  /* First touch with the same static schedule as the timed loop, so each thread's pages sit on
   * its own NUMA node (Linux places a page where it is first written). */
#pragma omp parallel for schedule(static)
  for (long i = 0; i < N; i++) {
    a[i] = 1.0f;
    b[i] = 2.0f;
    c[i] = 0.0f;
  }
  double best = 1e30;
  for (int r = 0; r < REPS; r++) {
    double t0 = omp_get_wtime();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < N; i++) c[i] = a[i] + b[i];
    double t = omp_get_wtime() - t0;
    if (t < best) best = t;
  }
  /* Read the result so the loop cannot be dropped, and check it. */
  double sum = 0;
  for (long i = 0; i < N; i += 4096) sum += c[i];
  if (sum != 3.0 * (N / 4096)) {
    fprintf(stderr, "stream_add: wrong result %g\n", sum);
    return 1;
  }
  printf("{\"threads\":%d,\"n\":%ld,\"best_s\":%.6f,\"gbps\":%.3f}\n", omp_get_max_threads(), N,
         best, 12.0 * N / best / 1e9);
  free(a);
  free(b);
  free(c);
  return 0;
}
