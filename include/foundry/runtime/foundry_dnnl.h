// The oneDNN glue as a generated model's externs.cpp sees it: what a convolution or a matrix
// product is built for (ConvSpec, MatmulSpec), the calls built from them once at creation (Conv,
// Matmul) or per shape on first use (PerShapeConv, PerShapeMatmul), and the warnings of a call
// that runs on the portable loops instead. Their code is foundry_dnnl.cpp, compiled once per
// compiler and flags and kept in the compile cache: with dnnl.hpp and the glue in every
// externs.cpp, that file took 7 s of a small model's 9 s compile, against 0.7 s without them.
// Any configuration oneDNN does not implement reports !ok() (with oneDNN's message, warned on
// stderr at creation) and the caller falls back to the portable loops in foundry_externs.h.
#ifndef FOUNDRY_DNNL_H
#define FOUNDRY_DNNL_H
#include "foundry_externs.h"  // Activation

#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace foundry_rt {
namespace dnnl_glue {

using dims = std::vector<int64_t>;

// The operands' type: 16-bit ones accumulate in float32, as PyTorch's CPU kernels do.
enum class dt { f32, f16, bf16 };

// A size known only per run (oneDNN's DNNL_RUNTIME_DIM_VAL): the row count of a matrix product
// built once for every batch.
constexpr int64_t kRuntimeDim = INT64_MIN;

// The calling thread's OpenMP team size while it lives (the previous one after): oneDNN's
// primitives take their thread count from it, some when they are built and some when they run,
// so a call sets the same team for both (foundry_kernel_support.h: the whole team or one thread).
class TeamSize {
 public:
  explicit TeamSize(int threads) {
    // A profiled run (NAME_profile) lists the team of each call, also one chosen when it was built.
    if (step_profile && threads > step_profile->team) step_profile->team = threads;
#ifdef _OPENMP
    saved_ = omp_get_max_threads();
    if (threads != saved_) omp_set_num_threads(threads);
#else
    (void)threads;
#endif
  }
  ~TeamSize() {
#ifdef _OPENMP
    if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
#endif
  }
  TeamSize(const TeamSize&) = delete;
  TeamSize& operator=(const TeamSize&) = delete;

 private:
  int saved_ = 1;
};

// Row-major strides. The leading size may be kRuntimeDim (a dynamic batch): no stride depends on
// it, so it is never multiplied.
inline dims contiguous(const dims& sizes) {
  dims s(sizes.size());
  int64_t run = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    s[d] = run;
    if (d > 0) run *= sizes[d];
  }
  return s;
}

// What a convolution primitive is built for; the generated set-up fills it field by field.
struct ConvSpec {
  dims input_sizes, input_strides;    // [N, C, spatial...]
  dims weight_sizes, weight_strides;  // [O, C/groups, kernel...]; transposed: [C, O/groups, kernel...]
  dims output_sizes;
  dims output_strides;                // empty: contiguous
  int64_t groups = 1;
  // A transposed convolution (oneDNN's deconvolution); its output_padding is in output_sizes.
  bool transposed = false;
  bool has_bias = false;
  int64_t bias_stride = 0;
  dims stride, padding, dilation;  // per spatial dim, as PyTorch counts them (dilation 1: none)
  // The constant weights, reordered once at creation; nullptr when they are computed per run.
  const void* constant_weights = nullptr;
  Activation activation = Activation::None;
  dt data_type = dt::f32;  // of every operand and the output (16-bit ones accumulate in float32)
  int team_cap = 1;        // the model's threads (foundry_rt::num_threads)
  double weight_bytes = 0;  // the model's constant weights, all of them (the team choice)
  int team = 0;             // the threads to build for; 0: from the estimate
};

// What a matrix product primitive is built for. The row count of a and of the output may be
// kRuntimeDim (a dynamic batch), given to run().
struct MatmulSpec {
  dims a_sizes, a_strides;  // [M, K] or [B, M, K]
  dims b_sizes, b_strides;  // [K, N] or [B, K, N]
  dims output_sizes;        // contiguous
  bool has_bias = false;
  dims bias_sizes, bias_strides;  // broadcast over its dims of size 1
  const void* constant_b = nullptr;  // b when it is constant (weights): converted once, at creation
  Activation activation = Activation::None;
  dt data_type = dt::f32;  // of every operand and the output (16-bit ones accumulate in float32)
  int team_cap = 1;        // the model's threads (foundry_rt::num_threads)
  double weight_bytes = 0;  // the model's constant weights, all of them (the team choice)
  int team = 0;             // the threads to build for; 0: from the estimate
};

// A run of a built call failed in oneDNN (its message): the caller computes the result on the
// portable loops instead (warn_fallback).
class LibraryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ConvPrimitive;    // foundry_dnnl.cpp
struct MatmulPrimitive;  // foundry_dnnl.cpp

// A library call as built by build(): its primitive, shared (a per-shape cache may drop it while a
// run still holds it), or none. Conv and Matmul add their run().
template <typename Primitive>
class Built {
 public:
  using primitive_type = Primitive;
  Built() = default;
  explicit Built(std::shared_ptr<Primitive> p) : p_(std::move(p)) {}
  bool ok() const;                   // built: run() may be called
  const std::string& error() const;  // oneDNN's message when it could not be built
  const Primitive* primitive() const { return p_.get(); }  // its state, for tests

 protected:
  std::shared_ptr<Primitive> p_;
};
extern template class Built<ConvPrimitive>;
extern template class Built<MatmulPrimitive>;

// A convolution over strided NC(D)(H)W input and output and (G)OI(D)(H)W weights, or a transposed
// one over (G)IO(D)(H)W weights (PyTorch's layouts).
class Conv : public Built<ConvPrimitive> {
 public:
  using Built::Built;
  // Throws LibraryError when oneDNN fails.
  void run(const void* x, const void* w, const void* bias, void* y) const;
};

// out[b] = a[b] @ w[b] (+ bias broadcast to [M, N]), all operands strided, output contiguous.
// With a runtime row count, run() takes the rows of this run.
class Matmul : public Built<MatmulPrimitive> {
 public:
  using Built::Built;
  // Throws LibraryError when oneDNN fails.
  void run(const void* a, const void* b, const void* bias, void* y, int64_t rows = 0) const;
};

// Builds the primitive of one library call at model creation. When oneDNN cannot build it, or
// FOUNDRY_NO_DNNL=1 is set (to rule oneDNN out, or to test the fallback), the call runs on the
// portable loops on every run: correct, but far slower, so it is said on stderr, once. `model`
// and `call` name it there.
void build(Conv& call, const ConvSpec& spec, const char* model, const char* label);
void build(Matmul& call, const MatmulSpec& spec, const char* model, const char* label);

// A built primitive failed in a run, and the portable loops computed the result instead. Said
// once per model (`warned` is the model's flag), not on every run.
inline void warn_fallback(std::atomic<bool>& warned, const char* model, const char* call, const char* why) {
  if (warned.exchange(true)) return;
  std::fprintf(stderr, "%s: warning: %s fell back to the portable loops: oneDNN failed: %s (said once per model)\n",
               model, call, why);
}

// The primitives of one library call whose shapes depend on dynamic sizes, one per shape met,
// owned by the model (its State). Runs may be concurrent: the map is guarded by a mutex (a
// primitive is built under it, once), and entries are shared pointers, so that a run keeps its
// primitive even when the cache drops it. At most kMaxShapes are kept; then the cache starts over.
template <typename Call, typename Spec>
class PerShape {
 public:
  static constexpr size_t kMaxShapes = 64;

  // The call for `spec`'s shapes, built on first use; nullptr when it runs on the portable loops
  // (oneDNN could not build it, said once per call; or FOUNDRY_NO_DNNL=1).
  std::shared_ptr<const Call> get(const Spec& spec, const char* model, const char* call) const;

 private:
  mutable std::mutex mutex_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const Call>> built_;
  mutable bool warned_ = false;  // guarded by mutex_
};

using PerShapeConv = PerShape<Conv, ConvSpec>;
using PerShapeMatmul = PerShape<Matmul, MatmulSpec>;
extern template class PerShape<Conv, ConvSpec>;
extern template class PerShape<Matmul, MatmulSpec>;

}  // namespace dnnl_glue
}  // namespace foundry_rt

#endif  // FOUNDRY_DNNL_H
