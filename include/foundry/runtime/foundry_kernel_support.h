// Scalar helpers that generated kernels call, with PyTorch's CPU semantics. Included by every
// generated kernel translation unit, so it stays small: <cmath> and <cstdint> only.
// Include guards rather than #pragma once: several models' copies may meet in one build.
#ifndef FOUNDRY_KERNEL_SUPPORT_H
#define FOUNDRY_KERNEL_SUPPORT_H
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "foundry_c_api.h"  // FOUNDRY_MAX_THREADS
#ifdef _OPENMP
#include <omp.h>
#include <sched.h>  // sched_getcpu
#endif

// The helpers kernels call are also device functions when nvcc compiles a CUDA model's kernels.
#ifdef __CUDACC__
#define FOUNDRY_HD __host__ __device__
#else
#define FOUNDRY_HD
#endif

// Vector variants of libm's float functions: glibc's libmvec implements them under the x86-64
// vector function ABI (_ZGVdN8v_expf for AVX2, _ZGVeN16v_expf for AVX-512). Declared `omp
// declare simd`, GCC vectorizes loops that call them (std::exp on a float calls expf) instead
// of leaving those loops scalar. glibc 2.22 has exp/log/sin/cos/pow, 2.35 the rest.
#if defined(_OPENMP) && defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__)
#define FOUNDRY_SIMD_DECL _Pragma("omp declare simd notinbranch")
extern "C" {
FOUNDRY_SIMD_DECL float expf(float) noexcept;
FOUNDRY_SIMD_DECL float logf(float) noexcept;
FOUNDRY_SIMD_DECL float sinf(float) noexcept;
FOUNDRY_SIMD_DECL float cosf(float) noexcept;
FOUNDRY_SIMD_DECL float powf(float, float) noexcept;
#if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35)
FOUNDRY_SIMD_DECL float tanhf(float) noexcept;
FOUNDRY_SIMD_DECL float erff(float) noexcept;
#define FOUNDRY_LIBMVEC_ERF 1  // foundry_vec.h's erf calls it
FOUNDRY_SIMD_DECL float erfcf(float) noexcept;
FOUNDRY_SIMD_DECL float expm1f(float) noexcept;
FOUNDRY_SIMD_DECL float exp2f(float) noexcept;
FOUNDRY_SIMD_DECL float log1pf(float) noexcept;
FOUNDRY_SIMD_DECL float log2f(float) noexcept;
FOUNDRY_SIMD_DECL float log10f(float) noexcept;
FOUNDRY_SIMD_DECL float tanf(float) noexcept;
FOUNDRY_SIMD_DECL float atanf(float) noexcept;
FOUNDRY_SIMD_DECL float asinf(float) noexcept;
FOUNDRY_SIMD_DECL float acosf(float) noexcept;
FOUNDRY_SIMD_DECL float sinhf(float) noexcept;
FOUNDRY_SIMD_DECL float coshf(float) noexcept;
FOUNDRY_SIMD_DECL float atan2f(float, float) noexcept;
#endif
}
#undef FOUNDRY_SIMD_DECL
#endif

namespace foundry_rt {

// Subnormal floats (below 1.2e-38 in float32) flushed to zero where an operation would produce
// one: the FTZ bit of x86's MXCSR, per thread. Intel cores take a microcode assist of about a
// hundred cycles for each such result, and random or decaying activations can be full of them
// (a MobileViTV2 of random weights ran 10x slower on the 16-core Xeon, PyTorch's eager and
// torch.compile alike; AMD's cores barely slow down). Subnormal inputs and weights are still
// read as they are (no DAZ), so a result differs from PyTorch's only where PyTorch's is itself
// below 1.2e-38. FOUNDRY_SUBNORMALS=keep (read once per process) leaves the mode alone.
inline bool flushing_subnormals() {
  static const bool flush = [] {
    const char* e = std::getenv("FOUNDRY_SUBNORMALS");
    return !(e && std::strcmp(e, "keep") == 0);
  }();
  return flush;
}

#if (defined(__x86_64__) || defined(__i386__)) && !defined(__CUDA_ARCH__)
constexpr unsigned kFlushToZero = 0x8000;  // MXCSR's FTZ bit
inline unsigned float_mode() { return __builtin_ia32_stmxcsr(); }
inline void set_float_mode(unsigned mode) { __builtin_ia32_ldmxcsr(mode); }
#else
constexpr unsigned kFlushToZero = 0;
inline unsigned float_mode() { return 0; }
inline void set_float_mode(unsigned) {}
#endif

// For the pool's threads, in the parallel regions that measure a region's cost (before any step
// uses the pool, and again every second); they keep the mode. Threads libgomp starts later, during
// a run, inherit it from the calling thread.
inline void flush_subnormals() {
  const unsigned mode = float_mode();
  if (!(mode & kFlushToZero) && flushing_subnormals()) set_float_mode(mode | kFlushToZero);
}

// For the thread that calls a run: flushing for the run, its own mode given back afterwards.
class SubnormalsFlushed {
 public:
  SubnormalsFlushed() : saved_(float_mode()) { flush_subnormals(); }
  ~SubnormalsFlushed() { set_float_mode(saved_); }
  SubnormalsFlushed(const SubnormalsFlushed&) = delete;
  SubnormalsFlushed& operator=(const SubnormalsFlushed&) = delete;

 private:
  unsigned saved_;
};

// Threads for a parallel loop: FOUNDRY_NUM_THREADS when set (read once per process), else the
// compiled default (foundryc --threads), else OpenMP's default (every core); never more than
// FOUNDRY_MAX_THREADS (a larger FOUNDRY_NUM_THREADS is lowered with a warning on stderr).
inline int num_threads(int compiled_default) {
  static const int from_env = [] {
    const char* e = std::getenv("FOUNDRY_NUM_THREADS");
    if (!e || !*e) return 0;
    long long n = std::strtoll(e, nullptr, 10);
    if (n > FOUNDRY_MAX_THREADS) {
      std::fprintf(stderr, "foundry: warning: FOUNDRY_NUM_THREADS=%lld is more than %d threads; using %d\n", n,
                   FOUNDRY_MAX_THREADS, FOUNDRY_MAX_THREADS);
      return FOUNDRY_MAX_THREADS;
    }
    return n > 0 ? static_cast<int>(n) : 0;
  }();
  if (from_env > 0) return from_env;
  if (compiled_default > 0) return compiled_default < FOUNDRY_MAX_THREADS ? compiled_default : FOUNDRY_MAX_THREADS;
#ifdef _OPENMP
  int n = omp_get_max_threads();
  return n < FOUNDRY_MAX_THREADS ? n : FOUNDRY_MAX_THREADS;
#else
  return 1;
#endif
}

// ---- team sizes: each step on the whole team or on the calling thread ---------------------------
// A step (a kernel, a oneDNN call) runs on the model's `cap` threads or on the calling thread
// alone, never on a team of another size: libgomp ends the pool threads that a smaller team
// leaves out and creates them again for the next larger team (per-kernel team sizes measured
// 0.55-0.63x as fast), while a one-thread region leaves the pool as it is. A step takes the team
// when the time the other threads would save is at least region_payback() times the cost of a
// parallel region, measured on this machine (at most once a second per team size). A step's one-thread
// time is estimated from its work at a rate below what one AVX-512 core reaches on it (AVX2 cores
// are slower: their steps go parallel a little more readily than they should).
constexpr double kNsPerElementOp = 0.25;  // a generated kernel's element operation
constexpr double kNsPerMac = 0.04;         // a multiply-add of a oneDNN convolution or matrix product
// A byte a oneDNN call moves, at one core's bandwidth from memory (the 16-core Xeon: 14.4 GB/s,
// STREAM add on one thread). A product of one row is bound by its weights' bytes, not its
// multiply-adds: mobilenet_v3_small's 1024x1000 classifier took 0.30 ms on one thread, eight
// times its multiply-adds' estimate, and stayed there.
constexpr double kNsPerByte = 0.07;
// What a oneDNN call loses on a team of 16 beyond an empty region: its time there less its
// one-thread time / 16, from profiles on the 16-core Xeon: 11-55 us over six convolutions and
// products of 9-270 us (mobilenet_v3_small's depthwise and 1x1 convolutions of 18 us took 26 us
// on the team). The threads start their kernels and fetch operands that another core wrote.
constexpr double kDnnlTeamNs = 25000;
constexpr double kMinRegionNs = 200;       // below any parallel region measured (about 1 us on 2-16 cores)
constexpr double kSlowRegionNs = 20000;    // above any measured on idle cores

#ifdef _OPENMP
// Empty parallel regions of `threads` threads timed: up to 16 after one that wakes the pool,
// stopping once `budget_s` has passed (at least one timed). Their median in nanoseconds (1 at
// least), and whether two of the team's threads ran on one CPU in the last of them.
struct RegionTiming {
  double median_ns;
  bool shared_cpu;
};
inline RegionTiming time_parallel_regions(int threads, double budget_s) {
  double times[16];
  int timed = 0, cpu[FOUNDRY_MAX_THREADS];
  double begin = omp_get_wtime();
  for (int k = 0; k < 17 && (k < 2 || omp_get_wtime() - begin < budget_s); ++k) {
    double start = omp_get_wtime();
#pragma omp parallel num_threads(threads)
    {
      // The pool's threads, before any step runs on them; not the caller's (thread 0), whose
      // own mode a run sets and gives back (this measure also runs at creation, outside a run).
      if (omp_get_thread_num() != 0) flush_subnormals();
      cpu[omp_get_thread_num()] = sched_getcpu();
    }
    if (k == 0) begin = omp_get_wtime();  // the pool is awake
    else times[timed++] = (omp_get_wtime() - start) * 1e9;
  }
  for (int i = 1; i < timed; ++i)  // insertion sort, for the median
    for (int j = i; j > 0 && times[j] < times[j - 1]; --j) {
      double t = times[j];
      times[j] = times[j - 1];
      times[j - 1] = t;
    }
  bool shared = false;
  for (int i = 1; i < threads; ++i)
    for (int j = 0; j < i; ++j) shared |= cpu[i] == cpu[j];
  return {times[timed / 2] > 1.0 ? times[timed / 2] : 1.0, shared};
}

// Seconds that settling a pool (see region_measure) may spend now: 100 ms at the start, earned
// back at 1% of the time that passes, and `spent` taken off.
inline double settle_allowance(double now, double spent = 0) {
  static std::atomic<double> left{0.1}, last{0};
  const double before = last.exchange(now);
  double l = left.load() + (before > 0 ? 0.01 * (now - before) : 0) - spent;
  l = l < 0 ? 0 : l > 0.1 ? 0.1 : l;
  left.store(l);
  return l;
}

// The median time of an empty parallel region of `threads` threads now, in nanoseconds. A
// measurement stops once 2 ms have passed. When other processes hold the cores, one region can
// take a time slice (milliseconds), and that is what a step on threads would pay there; on idle
// cores it is a few microseconds.
// Slow regions on a shared CPU are another matter. On Linux 6.18 (the 2-core build machine), a
// pool that has just started, or that slept for 20 ms after little work, often wakes with its
// threads on the caller's CPU: its regions take 150-300 us, and keep doing so for the next 12-30
// ms of back-to-back regions, until the scheduler moves a thread away (sleeping does not help;
// work does). Taken at its word, such a measure kept every step on one thread for the process's
// life (pointwise_64k at 2 threads: 8.6 us a run in 11 processes of 15, 5.0 in the others). So
// while the regions are slow and two threads share a CPU, the regions keep coming, within
// settle_allowance(). On cores that other processes hold, the threads are each on their own.
// A measure for a choice that lasts (`lasting`: a oneDNN call's team, fixed at creation) settles
// the same way wherever the threads are: on the 16-core host (a virtual machine) a pool woken after
// creation's pauses measured 390-540 us a region for a few milliseconds in 4 of 8 processes of
// samples/unet at 16 threads, and one of them built a convolution of 190 us for one thread, for
// its life. A busy machine stays slow through the allowance, and the measure then says so.
inline double region_measure(int threads, bool lasting = false) {
  RegionTiming t = time_parallel_regions(threads, 2e-3);
  if (t.median_ns <= kSlowRegionNs || !(t.shared_cpu || lasting)) return t.median_ns;
  const double begin = omp_get_wtime(), allowed = settle_allowance(begin);
  while (t.median_ns > kSlowRegionNs && omp_get_wtime() - begin < allowed) t = time_parallel_regions(threads, 2e-3);
  settle_allowance(omp_get_wtime(), omp_get_wtime() - begin);
  return t.median_ns;
}
#endif

// FOUNDRY_LOG_TEAMS=1: team choices made at creation (foundry_dnnl.cpp), and parallel regions
// measured slow, are said on stderr.
inline bool log_teams() {
  static const bool on = [] {
    const char* e = std::getenv("FOUNDRY_LOG_TEAMS");
    return e && e[0] == '1' && e[1] == 0;
  }();
  return on;
}

// The median time of an empty parallel region of `threads` threads, in nanoseconds: the last
// region_measure(), measured again when it is over a second old (it follows the machine's load),
// or always when `fresh` (a choice that lasts: see LastingChoice). A slow one (over kSlowRegionNs)
// holds for 50 ms, then twice as long each time it is slow again, up to the second: a busy spell
// may end. 0 inside a parallel region, where a nested region is serial, and without OpenMP.
struct RegionMeasure {  // per team size; racing measurements each store theirs
  float ns;
  double at, holds_for;
  double stall_at, stall_hold;  // the last stall (note_team_stall) and the hold it set
};
inline RegionMeasure& region_measure_of(int threads) {
  static RegionMeasure measures[FOUNDRY_MAX_THREADS + 1];
  return measures[threads];
}
inline double parallel_region_ns(int threads, bool fresh = false) {
#ifdef _OPENMP
  if (threads < 2 || threads > FOUNDRY_MAX_THREADS || omp_in_parallel()) return 0;
  RegionMeasure& m = region_measure_of(threads);
  float known;
  double at, hold;
  __atomic_load(&m.ns, &known, __ATOMIC_RELAXED);
  __atomic_load(&m.at, &at, __ATOMIC_RELAXED);
  __atomic_load(&m.holds_for, &hold, __ATOMIC_RELAXED);
  double now = omp_get_wtime();
  if (!fresh && known > 0 && now - at < hold) return known;
  float ns = static_cast<float>(region_measure(threads, fresh));
  // The hold counts from the measure's end: on a loaded machine a measure of slow regions can take
  // longer than its 50 ms hold, which then ran out before any step used it, and the next step
  // measured again (the teams test's three steps under ctest's load: one thread, one, then the team).
  now = omp_get_wtime();
  const bool slow_again = known > kSlowRegionNs && ns > kSlowRegionNs;
  hold = ns <= kSlowRegionNs ? 1.0 : slow_again ? (2 * hold < 1.0 ? 2 * hold : 1.0) : 0.05;
  __atomic_store(&m.ns, &ns, __ATOMIC_RELAXED);
  __atomic_store(&m.at, &now, __ATOMIC_RELAXED);
  __atomic_store(&m.holds_for, &hold, __ATOMIC_RELAXED);
  if (ns > kSlowRegionNs && log_teams())
    std::fprintf(stderr, "foundry: parallel regions of %d threads measured slow: %.0f us each; steps stay on one thread for %.2f s\n",
                 threads, ns / 1e3, hold);
  return ns;
#else
  (void)threads, (void)fresh;
  return 0;
#endif
}

// How many times its cost a parallel region must save: 2, or FOUNDRY_PARALLEL_PAYBACK (read once
// per process; 0 gives every step the whole team, as foundryc did before, for comparison). On the
// 16-core Xeon a step pays about one region's cost on the team (pointwise_64k: 12.5 us on one
// thread, 6.2 on 16, with a 5 us region); 4 left it on one thread there.
inline double region_payback() {
  static const double payback = [] {
    const char* e = std::getenv("FOUNDRY_PARALLEL_PAYBACK");
    double v = e && *e ? std::strtod(e, nullptr) : 2.0;
    return v >= 0 ? v : 2.0;
  }();
  return payback;
}

// ---- NAME_profile: each step's time and team ------------------------------------------------------
// While a thread runs NAME_profile, `step_profile` points at its record: the wrapper marks the end
// of every step (step_done after each kernel and library call) and team_for notes the team it chose.
// Elsewhere step_done costs one thread-local load.
struct StepProfile {
  double* step_ms;     // [num_steps]
  int* step_threads;   // [num_steps] or null
  size_t num_steps;
  int team = 1;        // the largest team of the current step
  std::chrono::steady_clock::time_point last;
  void start() {
    team = 1;
    last = std::chrono::steady_clock::now();
  }
  void mark(size_t step) {
    auto now = std::chrono::steady_clock::now();
    if (step < num_steps) {
      step_ms[step] = std::chrono::duration<double, std::milli>(now - last).count();
      if (step_threads) step_threads[step] = team;
    }
    team = 1;
    last = now;
  }
};
inline thread_local StepProfile* step_profile = nullptr;

// Set while a choice is made that lasts (a oneDNN call's team, fixed when the model is created):
// team_for then measures the parallel regions afresh.
inline thread_local bool lasting_choice = false;
struct LastingChoice {
  LastingChoice() { lasting_choice = true; }
  ~LastingChoice() { lasting_choice = false; }
};

// ---- stalls: a step on the team that waited out a time slice --------------------------------------
// When other processes keep every core busy, a team's thread that has used its time slice (it
// spins at each barrier) waits for the next one, and so does the step: milliseconds. Empty regions
// timed back to back do not see it (the team is on its cores then), but the steps do: a step on
// the team that took over a millisecond and twice its one-thread estimate longer than that estimate
// is a stall. A stall within 0.1 s of the last (or of the end of the hold that one started) puts
// every step on one thread, as a slow region measure does: for 50 ms, then twice as long at each
// stall that follows as soon, up to the second. A lone stall is the machine's hiccup, not its load:
// on the idle 2-core machine squeezenet1_1's steps on two threads met one about every 0.45 s, of
// 1.1-3.1 ms, and holds on each made its median 1.23 ms instead of 0.95. With both cores busy,
// runs of mobilenet_v3_small 0.1 ms apart (a service's) stalled in over a tenth of them on its
// teams of two, as no run on one thread did.
constexpr double kStallNs = 1e6;
struct TeamWatch {
  double start = 0;      // when the step's first team started (omp_get_wtime); 0: none
  double serial_ns = 0;  // the one-thread estimates of its teams' work
  int threads = 0;
};
inline thread_local TeamWatch team_watch;
// A step of about `serial_ns` on one thread starts on `threads` threads (a run's step, not a
// choice made at creation).
inline void watch_team_step(int threads, double serial_ns) {
#ifdef _OPENMP
  if (threads < 2 || lasting_choice || omp_in_parallel()) return;
  if (team_watch.start == 0) team_watch = {omp_get_wtime(), 0, threads};
  team_watch.serial_ns += serial_ns;
#else
  (void)threads, (void)serial_ns;
#endif
}
// The steps stay on one thread for a while: a team step took `over_ns` beyond its estimate.
inline void note_team_stall(int threads, double over_ns) {
#ifdef _OPENMP
  if (threads < 2 || threads > FOUNDRY_MAX_THREADS) return;
  RegionMeasure& m = region_measure_of(threads);
  double now = omp_get_wtime();  // not const: clang's __atomic_store takes a pointer to non-const
  double last, hold;
  __atomic_load(&m.stall_at, &last, __ATOMIC_RELAXED);
  __atomic_load(&m.stall_hold, &hold, __ATOMIC_RELAXED);
  const bool recurs = last > 0 && now - last < 0.1 + hold;
  hold = recurs ? std::min(1.0, std::max(0.05, 2 * hold)) : 0;
  __atomic_store(&m.stall_at, &now, __ATOMIC_RELAXED);
  __atomic_store(&m.stall_hold, &hold, __ATOMIC_RELAXED);
  if (log_teams() && recurs)
    std::fprintf(stderr, "foundry: a step on %d threads took %.0f us over its one-thread estimate, a stall again: steps stay on one thread for %.2f s\n",
                 threads, over_ns / 1e3, hold);
  else if (log_teams())
    std::fprintf(stderr, "foundry: a step on %d threads took %.0f us over its one-thread estimate, a lone stall: steps stay on the team\n",
                 threads, over_ns / 1e3);
  if (!recurs) return;
  float ns = static_cast<float>(over_ns);
  __atomic_store(&m.ns, &ns, __ATOMIC_RELAXED);
  __atomic_store(&m.at, &now, __ATOMIC_RELAXED);
  __atomic_store(&m.holds_for, &hold, __ATOMIC_RELAXED);
#else
  (void)threads, (void)over_ns;
#endif
}

// The wrapper calls it after each step: a profiled run's record, and the stall check.
inline void step_done(size_t step) {
  if (step_profile) step_profile->mark(step);
#ifdef _OPENMP
  if (team_watch.start > 0) {
    const double took_ns = (omp_get_wtime() - team_watch.start) * 1e9, serial_ns = team_watch.serial_ns;
    team_watch.start = 0;
    if (took_ns - serial_ns > kStallNs && took_ns > 2 * serial_ns) note_team_stall(team_watch.threads, took_ns - serial_ns);
  }
#endif
}
// A team started outside a run's steps (a call timed at creation) is not a step's.
inline void forget_team_step() { team_watch.start = 0; }

// `cap` when a step of about `serial_ns` on one thread gains enough on `cap` threads, else 1: the
// time saved must pay region_payback() parallel regions and `team_ns`, what the step itself loses
// on a team beyond the region (a oneDNN call's, kDnnlTeamNs).
// The rule, with parallel regions of `region_ns` (no region costs less than kMinRegionNs).
inline bool team_pays_at(double serial_ns, int cap, double team_ns, double region_ns) {
  const double saved = serial_ns * (1.0 - 1.0 / cap) - team_ns;
  return saved >= region_payback() * (region_ns > kMinRegionNs ? region_ns : kMinRegionNs);
}
inline int choose_team(double serial_ns, int cap, double team_ns = 0) {
  if (cap <= 1) return 1;
  if (region_payback() == 0) return cap;
  // Short of paying the cheapest region: no measurement (which starts the pool's threads).
  if (!team_pays_at(serial_ns, cap, team_ns, kMinRegionNs)) return 1;
  return team_pays_at(serial_ns, cap, team_ns, parallel_region_ns(cap, lasting_choice)) ? cap : 1;
}
inline int team_for(double serial_ns, int cap, double team_ns = 0) {
  int team = choose_team(serial_ns, cap, team_ns);
  if (step_profile && team > step_profile->team) step_profile->team = team;
  watch_team_step(team, serial_ns);
  return team;
}

// The team of a generated kernel doing `element_ops` operations per run; `compiled_default` as in
// num_threads().
inline int kernel_team(int64_t element_ops, int compiled_default) {
  return team_for(static_cast<double>(element_ops) * kNsPerElementOp, num_threads(compiled_default));
}

// Set by a kernel that met a bad value at run time (an index out of range, an integer division
// by zero); the wrapper checks it after each kernel and turns it into an error code. One per
// thread, so that concurrent runs do not interfere.
inline thread_local int kernel_error = 0;
enum KernelError : int { kIndexOutOfRange = 1, kIntegerDivisionByZero = 2 };

// On the GPU (CUDA kernels, foundry_cuda.h) errors go to the model's device error flag instead,
// written by the generated code itself; there is no thread-local there.
FOUNDRY_HD inline void fail(int code) {
#ifdef __CUDA_ARCH__
  (void)code;
#else
  kernel_error = code;
#endif
}

// ---- integer arithmetic that never traps -----------------------------------------------------
template <typename T>
FOUNDRY_HD inline T div_trunc(T a, T b) {
  if (b == 0) { fail(kIntegerDivisionByZero); return 0; }
  if (b == T(-1)) return T(0) - a;
  return a / b;
}
template <typename T>
FOUNDRY_HD inline T floordiv_int(T a, T b) {
  if (b == 0) { fail(kIntegerDivisionByZero); return 0; }
  if (b == T(-1)) return T(0) - a;
  T q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
  return q;
}
template <typename T>
FOUNDRY_HD inline T mod_int(T a, T b) {
  if (b == 0) { fail(kIntegerDivisionByZero); return 0; }
  if (b == T(-1)) return 0;
  T m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}
template <typename T>
FOUNDRY_HD inline T fmod_int(T a, T b) {
  if (b == 0) { fail(kIntegerDivisionByZero); return 0; }
  if (b == T(-1)) return 0;
  return a % b;
}
template <typename T>
FOUNDRY_HD inline T pow_int(T base, T exp) {
  if (exp < 0) return base == 1 ? 1 : base == -1 ? ((exp % 2) ? -1 : 1) : 0;
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  while (exp) {
    if (exp & 1) result *= b;
    b *= b;
    exp >>= 1;
  }
  return static_cast<T>(result);
}

// Index expressions: Python floor division and modulo when the sign is not known.
FOUNDRY_HD inline int64_t index_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
FOUNDRY_HD inline int64_t index_mod(int64_t a, int64_t b) {
  int64_t m = a % b;
  return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m;
}
FOUNDRY_HD inline int64_t index_min(int64_t a, int64_t b) { return a < b ? a : b; }
FOUNDRY_HD inline int64_t index_max(int64_t a, int64_t b) { return a > b ? a : b; }

// A loaded integer used as a position in [0, size) (gather, scatter, index_select, embedding):
// one outside is reported and clamped, so that the kernel never reads or writes out of bounds.
// checked_index is the same after a negative index wraps once (advanced indexing, take).
FOUNDRY_HD inline int64_t checked_position(int64_t i, int64_t size) {
  if (i < 0 || i >= size) {
    fail(kIndexOutOfRange);
    return 0;
  }
  return i;
}
FOUNDRY_HD inline int64_t checked_index(int64_t i, int64_t size) { return checked_position(i < 0 ? i + size : i, size); }

// ---- floating-point semantics ---------------------------------------------------------------
template <typename T>
FOUNDRY_HD inline T floordiv_float(T a, T b) {
  if (b == 0) return a / b;
  T m = std::fmod(a, b);
  T div = (a - m) / b;
  if (m != 0 && ((b < 0) != (m < 0))) div -= 1;
  if (div == 0) return std::copysign(T(0), a / b);
  T floored = std::floor(div);
  if (div - floored > T(0.5)) floored += 1;
  return floored;
}
template <typename T>
FOUNDRY_HD inline T mod_float(T a, T b) {
  T m = std::fmod(a, b);
  if (m != 0 && ((b < 0) != (m < 0))) m += b;
  return m;
}
// `c ? a : b` for floating values, without a branch: a CPU kernel's select of two values it has
// computed (a max pooling window's NaN-propagating max, a concatenation's parts) otherwise compiles to
// a branch when the compiler moves an arm's load into it, and on ReLU outputs that branch is
// mispredicted: squeezenet1_1's cat + max pool kernel ran 3.7x slower.
template <typename T>
inline T select(bool c, T a, T b) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "float or double");
  using Bits = typename std::conditional<sizeof(T) == 4, uint32_t, uint64_t>::type;
  Bits mask = Bits(0) - static_cast<Bits>(c), x, y;
  std::memcpy(&x, &a, sizeof x);
  std::memcpy(&y, &b, sizeof y);
  x = (x & mask) | (y & ~mask);
  T r;
  std::memcpy(&r, &x, sizeof r);
  return r;
}
template <typename T>
FOUNDRY_HD inline T maximum(T a, T b) {
  if (a != a) return a;
  if (b != b) return b;
  return a > b ? a : b;
}
template <typename T>
FOUNDRY_HD inline T minimum(T a, T b) {
  if (a != a) return a;
  if (b != b) return b;
  return a < b ? a : b;
}
template <typename T>
FOUNDRY_HD inline T max_int(T a, T b) { return a > b ? a : b; }
template <typename T>
FOUNDRY_HD inline T min_int(T a, T b) { return a < b ? a : b; }
template <typename T>
FOUNDRY_HD inline T sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }
template <typename T>
FOUNDRY_HD inline T sign_float(T x) { return T((T(0) < x) - (x < T(0))); }  // NaN: 0, as torch.sign
template <typename T>
FOUNDRY_HD inline T sign_int(T x) { return T((T(0) < x) - (x < T(0))); }
template <typename T>
FOUNDRY_HD inline T copysign_int(T a, T b) {
  T m = a < 0 ? T(0) - a : a;
  return b < 0 ? T(0) - m : m;
}

// Float to integer as x86 converts: NaN and out-of-range values become the minimum int64, then
// narrow (PyTorch's CPU casts behave the same way on this platform).
template <typename To, typename From>
FOUNDRY_HD inline To float_to_int(From x) {
  if (!(x >= From(-9.2233720368547758e18) && x < From(9.2233720368547758e18)))
    return static_cast<To>(INT64_MIN);
  return static_cast<To>(static_cast<int64_t>(x));
}

// ---- 16-bit floats: stored as raw bits, computed in float, rounded after every operation -----
// With F16C (x86-64-v3 and later targets) the compiler's _Float16 converts in one instruction
// each way, rounding to nearest even as the portable code below does; the portable code is
// about 20 instructions with branches, and 16-bit kernels convert on every operation.
#if defined(__F16C__) && defined(__FLT16_MAX__)
FOUNDRY_HD inline float half_to_float(uint16_t h) {
  _Float16 v;
  std::memcpy(&v, &h, 2);
  return static_cast<float>(v);
}
FOUNDRY_HD inline uint16_t float_to_half(float f) {
  _Float16 v = static_cast<_Float16>(f);
  uint16_t h;
  std::memcpy(&h, &v, 2);
  return h;
}
#else
FOUNDRY_HD inline float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do { mant <<= 1; ++e; } while (!(mant & 0x400u));
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
FOUNDRY_HD inline uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (absx < 0x38800000u) {  // subnormal or zero: round to nearest even in units of 2^-24
    float a;
    std::memcpy(&a, &absx, 4);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 16777216.0f)));
  }
  uint32_t mant = absx & 0x7fffffu, exp = (absx >> 23) - 127 + 15;
  uint32_t h = exp << 10 | mant >> 13;
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}
#endif
FOUNDRY_HD inline float round_half(float f) { return half_to_float(float_to_half(f)); }

FOUNDRY_HD inline float bfloat16_to_float(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
FOUNDRY_HD inline uint16_t float_to_bfloat16(float f) {
  if (f != f) return 0x7fc0;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
FOUNDRY_HD inline float round_bfloat16(float f) { return bfloat16_to_float(float_to_bfloat16(f)); }

}  // namespace foundry_rt

#endif  // FOUNDRY_KERNEL_SUPPORT_H
