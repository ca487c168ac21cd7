#include "foundry/ir/debug_buffers.h"

#include <algorithm>
#include <map>

namespace foundry::ir {

namespace {
// foundry_c_api.h's FOUNDRY_MAX_RANK: the ir stage does not include the runtime's C header.
constexpr size_t kMaxOutputRank = 8;
}  // namespace

std::vector<ComputedBuffer> computed_buffers(const LoopProgram& program) {
  std::vector<ComputedBuffer> result;
  std::map<const Buffer*, size_t> position;
  for (const auto& node : program.nodes) {
    if (node->output->kind != BufferKind::Computed) continue;  // an in-place update of an input
    auto [it, first] = position.emplace(node->output, result.size());
    if (first) result.push_back({node->output, {}});
    result[it->second].writers.push_back(node.get());
  }
  return result;
}

void expose_computed_buffers(LoopProgram& program) {
  for (const ComputedBuffer& c : computed_buffers(program)) {
    const Buffer* buf = c.buffer;
    bool is_output = std::find(program.outputs.begin(), program.outputs.end(), buf) != program.outputs.end();
    if (is_output || buf->sizes.size() > kMaxOutputRank) continue;
    program.outputs.push_back(buf);
    program.output_names.push_back(buf->name);
  }
}

}  // namespace foundry::ir
