/* The control row of scripts/busy_bench.sh: what a busy machine does to any process whose runs
 * take a given time, with no threads and no memory traffic. Each run is plain arithmetic costing
 * MS milliseconds of CPU time (calibrated on the thread's CPU clock, so that calibrating on a busy
 * machine still gives the intended work); runs are timed back to back on the wall clock, as
 * foundry-run --bench times a model. When this loop's p90 / median on a busy machine is as high as
 * a model's, the tail is the scheduler's time slices, not the model's threads.
 *
 *   cc -O2 busy_control.c -o busy_control && ./busy_control MS RUNS [GAP_US]
 *
 * GAP_US: a pause before each timed run (foundry-run --gap-us), untimed.
 *
 * Prints foundry-run's benchmark line: "benchmark: median X ms, p10 Y ms, p90 Z ms over N runs". */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_ms(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* A dependent chain of multiply-adds: its time is the CPU's, never memory's. The empty asm makes
 * each step's value exist, so that the compiler cannot shorten the chain. */
static volatile double sink;
static void work(long iterations) {
  double x = 1.0;
  for (long i = 0; i < iterations; ++i) {
    x = x * 0.999999 + 1e-6;
    __asm__ __volatile__("" : "+x"(x));
  }
  sink = x;
}

static int by_value(const void* a, const void* b) {
  double d = *(const double*)a - *(const double*)b;
  return (d > 0) - (d < 0);
}

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4 || atof(argv[1]) <= 0 || atoi(argv[2]) <= 0 || (argc == 4 && atoi(argv[3]) < 0)) {
    fprintf(stderr, "usage: busy_control MS RUNS [GAP_US]\n");
    return 2;
  }
  const double target_ms = atof(argv[1]);
  const int runs = atoi(argv[2]);
  const int gap_us = argc == 4 ? atoi(argv[3]) : 0;
  /* Iterations per CPU millisecond, from the best of a few timed chains of the thread's CPU time. */
  const long probe = 1000000;
  double best = 1e300;
  for (int k = 0; k < 5; ++k) {
    double start = now_ms(CLOCK_THREAD_CPUTIME_ID);
    work(probe);
    double ms = now_ms(CLOCK_THREAD_CPUTIME_ID) - start;
    if (ms < best) best = ms;
  }
  const long iterations = (long)(probe / best * target_ms);
  double* times = malloc(sizeof(double) * runs);
  if (!times) return 1;
  for (int r = 0; r < 3; ++r) work(iterations); /* warm-up, as foundry-run's */
  for (int r = 0; r < runs; ++r) {
    if (gap_us > 0) usleep(gap_us);
    double start = now_ms(CLOCK_MONOTONIC);
    work(iterations);
    times[r] = now_ms(CLOCK_MONOTONIC) - start;
  }
  qsort(times, runs, sizeof(double), by_value);
  printf("benchmark: median %.4f ms, p10 %.4f ms, p90 %.4f ms over %d runs\n", times[runs / 2], times[runs / 10],
         times[runs * 9 / 10], runs);
  free(times);
  return 0;
}
