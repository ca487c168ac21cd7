#include "foundry/sched/storage_order.h"

#include <optional>

namespace foundry::sched {

namespace {

// The dimensions of a layout from the outermost to the innermost (the order in which a row-major
// walk of memory sees them), when `strides` are those of a row-major layout of `sizes` in some
// order of its dimensions; nullopt for any other layout (a view, a broadcast, padding).
std::optional<std::vector<size_t>> storage_order(const std::vector<ir::Expr>& sizes, const std::vector<ir::Expr>& strides) {
  std::vector<size_t> inner_first;
  std::vector<bool> used(sizes.size(), false);
  ir::Expr run(1);
  while (inner_first.size() < sizes.size()) {
    // The next dimension out is one whose stride is the elements inside it; of several (sizes of
    // 1 share their stride), the innermost in the logical order, as a row-major layout has them.
    std::optional<size_t> next;
    for (size_t d = sizes.size(); d-- > 0;)
      if (!used[d] && strides[d] == run) {
        next = d;
        break;
      }
    if (!next) return std::nullopt;
    used[*next] = true;
    inner_first.push_back(*next);
    run = ir::simplify(run * sizes[*next], {});
  }
  return std::vector<size_t>(inner_first.rbegin(), inner_first.rend());
}

// Runs `node`'s loop k over its logical dimension order[k].
void reorder_loops(ir::LoopNode& node, const std::vector<size_t>& order) {
  ir::Index ranges;
  for (size_t d : order) ranges.push_back(node.ranges[d]);
  node.ranges = ranges;
  node.body = [body = std::move(node.body), order](ir::Ops& ops, const ir::Index& idx, const ir::Index& ridx) {
    ir::Index logical(idx.size());
    for (size_t k = 0; k < order.size(); ++k) logical[order[k]] = idx[k];
    body(ops, logical, ridx);
  };
}

}  // namespace

int loop_in_storage_order(ir::LoopProgram& program) {
  int reordered = 0;
  for (const auto& node : program.nodes) {
    const ir::Buffer* out = node->output;
    if (node->kind != ir::NodeKind::Pointwise || !out || node->ranges != out->sizes ||
        out->strides == ir::contiguous_strides(out->sizes))
      continue;
    std::optional<std::vector<size_t>> order = storage_order(out->sizes, out->strides);
    if (!order) continue;
    bool identity = true;
    for (size_t k = 0; k < order->size(); ++k) identity = identity && (*order)[k] == k;
    if (identity) continue;
    reorder_loops(*node, *order);
    ++reordered;
  }
  return reordered;
}

}  // namespace foundry::sched
