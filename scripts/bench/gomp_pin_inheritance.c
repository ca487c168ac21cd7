/* Why foundry-run --cpu pins only one-thread runs: a thread inherits the CPUs of the thread that
 * starts it, and libgomp starts pool threads again whenever a team larger than the last one
 * follows a smaller one (a oneDNN call's smaller team, in every run of a model), so after the
 * calling thread is pinned the new threads are pinned with it. Prints, per team, how many CPUs
 * each thread may run on; after the pin, the fourth thread of the last team may use one only.
 *
 *   cc -O1 -fopenmp gomp_pin_inheritance.c -o gomp_pin_inheritance && ./gomp_pin_inheritance
 *
 * Needs two CPUs or more (it pins the calling thread to the second one it may use). */
#define _GNU_SOURCE
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

static void show(const char* when, int threads) {
#pragma omp parallel num_threads(threads)
  {
    cpu_set_t mine;
    CPU_ZERO(&mine);
    sched_getaffinity(0, sizeof mine, &mine);
#pragma omp critical
    printf("%s: thread %d of %d may run on %d CPU(s)\n", when, omp_get_thread_num(), omp_get_num_threads(),
           CPU_COUNT(&mine));
  }
}

int main(void) {
  cpu_set_t allowed, one;
  sched_getaffinity(0, sizeof allowed, &allowed);
  int cpu = 0, seen = 0;
  for (; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &allowed) && ++seen == 2) break;
  if (seen < 2) {
    fprintf(stderr, "gomp_pin_inheritance: needs two CPUs\n");
    return 1;
  }
  show("before the pin, a team of 4", 4);
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  pthread_setaffinity_np(pthread_self(), sizeof one, &one);
  show("after the pin, a team of 4", 4);
  show("after the pin, a team of 3", 3);
  show("after the pin, a team of 4 again", 4);
  return 0;
}
