#include "foundry/sched/channels_last.h"

#include <algorithm>
#include <set>

#include "sched/conv_calls.h"
#include "sched/uses.h"

namespace foundry::sched {

namespace {

// A float32 convolution on oneDNN whose layouts are its own choice: not transposed (a
// deconvolution's post-ops and layouts stay as they are), not on foundryc's depthwise loops,
// not a product on NCHW operands.
const ir::Convolution* onednn_convolution(const ir::LoopNode& node) {
  const auto* conv = std::get_if<ir::Convolution>(&node.call.op);
  if (node.kind != ir::NodeKind::Extern || !conv || conv->transposed || node.output->dtype != DType::Float32) return nullptr;
  if (depthwise(node) || stored_product(node)) return nullptr;
  return conv;
}

// Strides of `sizes` ([N, C, spatial...]) with the channels innermost: N, spatial..., C.
std::vector<ir::Expr> channels_last_strides(const std::vector<ir::Expr>& sizes) {
  std::vector<ir::Expr> strides(sizes.size());
  ir::Expr run = sizes[1];
  strides[1] = ir::Expr(1);
  for (size_t d = sizes.size(); d-- > 2;) {
    strides[d] = run;
    run = ir::simplify(run * sizes[d], {});
  }
  strides[0] = run;
  return strides;
}

// The whole of `b`, as stored: what a reader's operand must be for the reader to follow b's layout.
bool whole(const ir::Operand& op, const ir::Buffer* b) {
  return op.buffer == b && op.offset.is_const(0) && op.sizes == b->sizes && op.strides == b->strides;
}

}  // namespace

int keep_channels_last(ir::LoopProgram& program) {
  const Uses uses = collect_uses(program);
  const std::set<const ir::Buffer*> outputs(program.outputs.begin(), program.outputs.end());
  int changed = 0;
  for (const auto& buffer : program.buffers) {
    ir::Buffer* out = buffer.get();
    auto writers = uses.writers.find(out), readers = uses.readers.find(out);
    if (writers == uses.writers.end() || writers->second.size() != 1 || readers == uses.readers.end()) continue;
    const ir::LoopNode& writer = **writers->second.begin();
    if (writer.output != out || !onednn_convolution(writer) || out->kind != ir::BufferKind::Computed ||
        outputs.count(out) || out->sizes.size() < 3 || !out->offset.is_const(0) ||
        out->strides != ir::contiguous_strides(out->sizes))
      continue;
    const bool only_convolutions = std::all_of(readers->second.begin(), readers->second.end(), [&](const ir::LoopNode* r) {
      const ir::Convolution* conv = onednn_convolution(*r);
      return conv && whole(conv->input, out) && conv->weight.buffer != out && (!conv->bias || conv->bias->buffer != out);
    });
    if (!only_convolutions) continue;
    out->strides = channels_last_strides(out->sizes);
    for (const auto& node : program.nodes)
      if (auto* conv = std::get_if<ir::Convolution>(&node->call.op); conv && conv->input.buffer == out)
        conv->input.strides = out->strides;
    ++changed;
  }
  return changed;
}

}  // namespace foundry::sched
