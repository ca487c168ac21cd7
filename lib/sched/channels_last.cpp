#include "foundry/sched/channels_last.h"

#include <algorithm>
#include <set>

#include "sched/uses.h"

namespace foundry::sched {

namespace {

using BufferSet = std::set<const ir::Buffer*, ir::ByBufferId>;

// A float32 convolution on oneDNN whose activations' layouts are its own choice: any but a
// transposed one (a deconvolution's post-ops and layouts stay as they are).
const ir::Convolution* layout_free_convolution(const ir::LoopNode& node) {
  const auto* conv = std::get_if<ir::Convolution>(&node.call.op);
  if (node.kind != ir::NodeKind::Extern || !conv || conv->transposed || node.output->dtype != DType::Float32 ||
      conv->input.sizes.size() < 3)
    return nullptr;
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

// Which buffers go channels last: a fixed point over the program's buffers and their readers.
class Layouts {
 public:
  explicit Layouts(const ir::LoopProgram& program) : uses_(collect_uses(program)) {
    outputs_.insert(program.outputs.begin(), program.outputs.end());
    grow(program);
    while (shrink()) {
    }
  }
  const BufferSet& channels_last() const { return chosen_; }

 private:
  // The node that alone writes `b`, when b could be stored otherwise: a computed float32
  // activation of rank 3 or more, stored contiguous, not a result of the model.
  const ir::LoopNode* sole_writer(const ir::Buffer* b) const {
    auto w = uses_.writers.find(b);
    if (w == uses_.writers.end() || w->second.size() != 1 || b->kind != ir::BufferKind::Computed ||
        b->dtype != DType::Float32 || outputs_.count(b) || b->sizes.size() < 3 || !b->offset.is_const(0) ||
        b->strides != ir::contiguous_strides(b->sizes))
      return nullptr;
    const ir::LoopNode* writer = *w->second.begin();
    return writer->output == b && writer->ranges == b->sizes ? writer : nullptr;
  }

  // A pointwise node over b's shape that writes nothing else.
  bool pointwise_writer(const ir::LoopNode& node, const ir::Buffer* b) const {
    if (node.kind != ir::NodeKind::Pointwise) return false;
    const auto& writes = uses_.accesses.at(&node).writes;
    return std::all_of(writes.begin(), writes.end(), [&](const ir::MemoryAccess& w) { return w.buffer == b; });
  }

  // Whether `read` (of an NCHW activation, as stored now) steps one channel a step of `node`'s
  // loop `d`: over channels last, the loop walks the activation in order.
  static bool channels_along(const ir::LoopNode& node, const ir::MemoryAccess& read, size_t d) {
    const ir::Buffer& b = *read.buffer;
    if (b.sizes.size() < 2 || !(b.sizes[1] == node.ranges[d])) return false;
    std::optional<ir::Expr> coefficient = ir::affine_coefficient(read.index, ir::loop_var(static_cast<int>(d)));
    return coefficient && *coefficient == b.strides[1];
  }

  // Seeds: convolution outputs; then pointwise nodes that take a chosen activation channel by
  // channel (an activation, an addition, a pooling window), in program order.
  void grow(const ir::LoopProgram& program) {
    for (const auto& node : program.nodes) {
      const ir::Buffer* b = node->output;
      if (!b || sole_writer(b) != node.get()) continue;
      if (layout_free_convolution(*node)) chosen_.insert(b);
      if (!pointwise_writer(*node, b)) continue;
      const auto& reads = uses_.accesses.at(node.get()).reads;
      if (std::any_of(reads.begin(), reads.end(),
                      [&](const ir::MemoryAccess& r) { return chosen_.count(r.buffer) && channels_along(*node, r, 1); }))
        chosen_.insert(b);
    }
  }

  // Whether a pointwise node looping over channels last reads `read` along its vectors or as a
  // broadcast: a channels-last buffer, or one stored with its channels innermost already (an
  // NHWC tensor seen through a permutation), one per channel (a bias) or one per pixel (a
  // normalization's statistics). An NCHW activation read this way would be read across.
  bool read_in_order(const ir::MemoryAccess& read) const {
    if (chosen_.count(read.buffer)) return true;
    std::optional<ir::Expr> step = ir::affine_coefficient(read.index, ir::loop_var(1));
    return step && (step->is_const(0) || step->is_const(1));
  }

  // Whether `b` still goes channels last: its writer reads in order, and each of its readers is
  // a convolution of all of it, a pointwise node whose own output goes channels last or whose
  // innermost loop walks b's channels (a layer norm over them, writing NHWC), or a reduction
  // (which reads it as stored, across when it must).
  bool keeps(const ir::Buffer* b) const {
    const ir::LoopNode& writer = *sole_writer(b);
    if (writer.kind == ir::NodeKind::Pointwise) {
      const auto& reads = uses_.accesses.at(&writer).reads;
      if (!std::all_of(reads.begin(), reads.end(), [&](const ir::MemoryAccess& r) { return read_in_order(r); }))
        return false;
    }
    auto readers = uses_.readers.find(b);
    if (readers == uses_.readers.end()) return false;
    return std::all_of(readers->second.begin(), readers->second.end(), [&](const ir::LoopNode* r) {
      if (const ir::Convolution* conv = layout_free_convolution(*r))
        return whole(conv->input, b) && conv->weight.buffer != b && (!conv->bias || conv->bias->buffer != b);
      if (r->kind == ir::NodeKind::Pointwise) return chosen_.count(r->output) || innermost_channels(*r, b);
      return r->kind == ir::NodeKind::Reduction;
    });
  }

  // Whether every read of `b` by `node` steps one channel a step of node's innermost loop.
  bool innermost_channels(const ir::LoopNode& node, const ir::Buffer* b) const {
    if (node.ranges.empty()) return false;
    const auto& reads = uses_.accesses.at(&node).reads;
    return std::all_of(reads.begin(), reads.end(), [&](const ir::MemoryAccess& r) {
      return r.buffer != b || channels_along(node, r, node.ranges.size() - 1);
    });
  }

  bool shrink() {
    bool changed = false;
    for (auto it = chosen_.begin(); it != chosen_.end();) {
      if (keeps(*it)) {
        ++it;
      } else {
        it = chosen_.erase(it);
        changed = true;
      }
    }
    return changed;
  }

  const Uses uses_;
  std::set<const ir::Buffer*> outputs_;
  BufferSet chosen_;
};

}  // namespace

int keep_channels_last(ir::LoopProgram& program) {
  const BufferSet chosen = Layouts(program).channels_last();
  for (const auto& buffer : program.buffers)
    if (chosen.count(buffer.get())) buffer->strides = channels_last_strides(buffer->sizes);
  for (const auto& node : program.nodes) {
    if (auto* conv = std::get_if<ir::Convolution>(&node->call.op); conv && chosen.count(conv->input.buffer))
      conv->input.strides = conv->input.buffer->strides;
  }
  return static_cast<int>(chosen.size());
}

}  // namespace foundry::sched
