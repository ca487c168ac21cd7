// The order of the graph passes, as Halide's Lower.cpp orders its own: one commented list.
#include "foundry/passes/pipeline.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "foundry/passes/cse.h"
#include "foundry/passes/dead_code.h"
#include "foundry/passes/decompose.h"
#include "foundry/passes/fold_constants.h"
#include "foundry/passes/fold_conv_bn.h"
#include "foundry/passes/fuse_attention.h"
#include "foundry/passes/remove_noops.h"
#include "foundry/support/error.h"

namespace foundry::passes {

const std::vector<GraphPass>& graph_passes() {
  static const std::vector<GraphPass> passes = {
      // Before everything, dce included: programs saved without run_decompositions() (training
      // IR) hold composite and in-place ops that no other pass nor the lowering understands; an
      // in-place op must become functional before dce, which keeps nodes with side effects and
      // cannot see that later readers of the mutated value depend on it. A no-op on core ATen.
      {"decompose", decompose_training_ops, "rewrite training-IR ops (linear, conv2d, in-place ops, ...) into core ATen", ""},
      // First, so that every later pass walks only what the outputs need (exported graphs carry
      // unused multi-output results and runtime assertions).
      {"dce", eliminate_dead_code, "drop unused nodes before the other passes look at them", ""},
      // Before CSE and folding: forwarding clones, aliases and identity views to their sources
      // exposes equal expressions to CSE and weights to the constant folder (a clone of a weight
      // would otherwise be folded into a copy of it).
      {"remove-noops", remove_noops, "forward identity views, copies and aliases; drop asserts", ""},
      // Before folding, so that duplicated weight arithmetic is computed and stored once.
      {"cse", eliminate_common_subexpressions, "merge duplicated computations", ""},
      // Before conv-bn folding: weights produced by arithmetic on weights (casts, scaling)
      // become plain constants, which the conv-bn rewrite requires.
      {"fold-constants", [](Graph& g) { return fold_constants(g); }, "compute weight-only subgraphs at compile time", ""},
      // After constant folding (see above); creates new constants and leaves the original
      // convolution weights and batch-norm statistics unused.
      {"fold-conv-bn", fold_conv_batch_norm, "fold inference batch norms into the preceding convolution", ""},
      // After the constant folder and CSE have settled the chain (a causal mask computed from
      // aranges is one value by then); before the last dce, which removes the chain it replaces.
      // The CPU only: the GPU backend has no fused attention call.
      {"fuse-attention", fuse_attention, "run attention over long sequences as one call without its score matrix", "cpu"},
      // Last: removes what the rewrites left behind, including weights no node reads any more
      // (folded batch-norm statistics), so they are not embedded in the model.
      {"dce", eliminate_dead_code, "drop nodes and weights the rewrites left unused", ""},
  };
  return passes;
}

namespace {
bool verify_by_default() {
#ifdef NDEBUG
  return false;
#else
  return true;
#endif
}
}  // namespace

std::vector<PassReport> run_graph_passes(Graph& g, const PassOptions& options) {
  const bool verify = options.verify.value_or(verify_by_default());
  if (verify) verify_graph(g);
  std::vector<PassReport> reports;
  for (const GraphPass& pass : graph_passes()) {
    if (std::find(options.disabled.begin(), options.disabled.end(), pass.name) != options.disabled.end()) continue;
    if (!pass.only_device.empty() && pass.only_device != options.device) continue;
    PassReport r;
    r.name = pass.name;
    r.nodes_before = g.nodes.size();
    auto start = std::chrono::steady_clock::now();
    r.changed = pass.run(g);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.nodes_after = g.nodes.size();
    spdlog::debug("pass {}: {} ({} -> {} nodes, {:.3f} ms)", r.name, r.changed ? "changed" : "unchanged",
                  r.nodes_before, r.nodes_after, r.seconds * 1e3);
    if (verify) {
      try {
        verify_graph(g);
      } catch (const UserError& e) {
        throw InternalError("the graph is invalid after pass '" + pass.name + "': " + e.what());
      }
    }
    reports.push_back(std::move(r));
  }
  return reports;
}

std::string format_pass_reports(const std::vector<PassReport>& reports) {
  size_t width = 4;
  for (const PassReport& r : reports) width = std::max(width, r.name.size());
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-*s  %10s  %-7s  %s\n", static_cast<int>(width), "pass", "time (ms)", "changed",
                "nodes");
  out += line;
  double total = 0;
  for (const PassReport& r : reports) {
    total += r.seconds;
    std::snprintf(line, sizeof line, "%-*s  %10.3f  %-7s  %zu -> %zu\n", static_cast<int>(width), r.name.c_str(),
                  r.seconds * 1e3, r.changed ? "yes" : "no", r.nodes_before, r.nodes_after);
    out += line;
  }
  std::snprintf(line, sizeof line, "%-*s  %10.3f\n", static_cast<int>(width), "total", total * 1e3);
  out += line;
  return out;
}

}  // namespace foundry::passes
