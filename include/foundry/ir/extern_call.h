// Library calls of the loop-level IR (matrix products, convolutions): typed, with named fields,
// so that every stage (evaluator, printer, code generator) dispatches on the type with std::visit
// instead of comparing kind strings and looking parameters up by name.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "foundry/ir/expr.h"
#include "foundry/ir/linalg_call.h"
#include "foundry/runtime/foundry_externs.h"  // Activation

namespace foundry::ir {

struct Buffer;

// A buffer seen through a strided view; sizes, strides and offset may involve dynamic sizes
// (s0, ...), never loop variables.
struct Operand {
  const Buffer* buffer = nullptr;
  std::vector<Expr> sizes, strides;
  Expr offset;
};

// out = alpha * (a x b) + beta * bias. Unbatched: a [M, K], b [K, N], out [M, N] (aten mm, or
// addmm with a bias broadcast to [M, N]); batched: a [B, M, K], b [B, K, N] (aten bmm, no bias).
struct Matmul {
  Operand a, b;
  std::optional<Operand> bias;
  double alpha = 1.0, beta = 1.0;
  bool batched = false;
};

// A convolution: input [N, C, spatial...], bias [O]. Direct: weight [O, C/groups, kernel...].
// Transposed (aten's convolution with transposed=True, the gradient of a direct one with respect to
// its input; oneDNN's deconvolution): weight [C, O/groups, kernel...], each input element scattered
// to output positions i*stride - padding + k*dilation, the output `output_padding` longer at its end.
struct Convolution {
  Operand input, weight;
  std::optional<Operand> bias;
  std::vector<int64_t> stride, padding, dilation;  // one per spatial dim
  int64_t groups = 1;
  bool transposed = false;
  std::vector<int64_t> output_padding;  // one per spatial dim when transposed; empty otherwise
};

// Sorts each row of `input` along `dim` and writes the positions (int64) of each row's first `k`
// elements in sorted order: the output has the input's sizes with `dim` of size k (sort: k = the
// row length). The values are a gather through those positions, which the lowering leaves to
// the loop IR. A library call because a sort needs loops inside a body, which the loop IR does
// not have (computed with loop nodes alone, by counting, a row of n costs n^2 comparisons).
// runtime/foundry_sort.h runs it, in generated code and in the reference evaluator alike.
struct SortRows {
  Operand input;
  int64_t dim = 0;
  Expr k;
  bool descending = false;
};

// softmax(scale * query x key_t + mask) x value, the softmax along each row of scores, for each
// entry of the batch: query [N, L, E], key_t [N, E, S] (the keys transposed, as the first product
// reads them), value [N, S, Ev], output [N, L, Ev]; the optional additive mask is broadcast to the
// scores' shape before the batch was folded, [batch dims..., L, S] with the batch dims multiplying
// to N. The fused form of the products and softmax that attention decomposes to
// (passes/fuse_attention.h): runtime/foundry_attention.h runs it without the [L, S] scores.
struct Attention {
  Operand query, key_t, value;
  std::optional<Operand> mask;
  double scale = 1.0;
  bool masked_rows_zero = false;  // rows of all -inf scores give zeros (_safe_softmax), not NaN
};

// An activation applied to every output element: an epilogue folded into the call
// (sched/epilogue.h). The runtime's table (FOUNDRY_ACTIVATIONS), so that the IR, the reference
// evaluator and the generated code name and compute the same ones.
using Activation = foundry_rt::Activation;

struct ExternCall {
  std::variant<Matmul, Convolution, Linalg, SortRows, Attention> op;
  Activation activation = Activation::None;
};

// The aten op the call computes: "mm", "bmm", "addmm" or "convolution"; a LAPACK call
// "linalg.<routine>" (linalg_name); "sort" for SortRows; "attention".
std::string extern_name(const ExternCall& call);
// Its name in FOUNDRY_ACTIVATIONS ("relu", ...); "" for None.
std::string activation_name(Activation activation);
// The operands that are present, in the order of the aten op's arguments (addmm: bias first).
std::vector<const Operand*> operands(const ExternCall& call);

// std::visit(overloaded{[](const Matmul&) {...}, [](const Convolution&) {...}}, call.op)
template <class... Fs>
struct overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
overloaded(Fs...) -> overloaded<Fs...>;

}  // namespace foundry::ir
