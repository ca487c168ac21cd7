// The graph-pass pipeline: the ordered list of ATen-level passes run between the frontend and
// the lowering (see lib/passes/pipeline.cpp for the order and the reason for each entry).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "foundry/graph/graph.h"

namespace foundry::passes {

struct PassOptions {
  // Re-verify the graph (verify_graph) after each pass; nullopt: in debug builds only.
  std::optional<bool> verify;
  // Names of passes to leave out.
  std::vector<std::string> disabled;
  // The device compiled for ("cpu", "cuda"): passes whose rewrites only one backend runs
  // (fuse-attention: the CPU's fused attention call) are left out for the others.
  std::string device = "cpu";
};

struct GraphPass {
  std::string name;                  // "dce", "fold-constants", ... (names may repeat)
  std::function<bool(Graph&)> run;   // returns whether it changed the graph
  std::string why;                   // one line: why it is there, at this point
  std::string only_device;           // "" for every device, else the one it runs for
};

// The pipeline, in order.
const std::vector<GraphPass>& graph_passes();

struct PassReport {
  std::string name;
  double seconds = 0;       // wall time of the pass (verification not included)
  bool changed = false;
  size_t nodes_before = 0, nodes_after = 0;
};

// Runs the pipeline on `g` in place. Throws InternalError naming the pass when verification
// after it fails (a bug in the pass); a graph that is invalid before the first pass gives the
// verifier's UserError.
std::vector<PassReport> run_graph_passes(Graph& g, const PassOptions& options = {});

// The reports as a small table (for --time-passes): one line per pass, then the total.
std::string format_pass_reports(const std::vector<PassReport>& reports);

}  // namespace foundry::passes

namespace foundry {
// The driver-facing entry points, also visible as foundry::run_graph_passes etc.
using passes::format_pass_reports;
using passes::PassOptions;
using passes::PassReport;
using passes::run_graph_passes;
}  // namespace foundry
