// Fusion: which of the scheduled nodes share a kernel, and the order of the steps (see fusion.cpp
// for how pairs are chosen).
#pragma once
#include <string>
#include <vector>

#include "foundry/ir/record.h"
#include "foundry/sched/schedule.h"

namespace foundry::sched {

struct FusionResult {
  std::vector<Step> steps;  // in a dependency order; kernels not yet named
  // A pair that was considered and refused, for -v: `node` did not join the group that ended in
  // steps[step], for the reason `why`.
  struct Refusal {
    const ir::LoopNode* node;
    size_t step;
    std::string why;
  };
  std::vector<Refusal> refusals;
};

// The fusion cost rule for computing a pointwise `producer` inside a reduction `reader` (inlining
// it): "" when that is fine, else why not. Refused when the reader's reads of the producer's
// buffer leave out some of its outer loops, so that each element is recomputed once per value of
// those loops (the next matrix product's output columns recomputing a bias + GELU), and the
// producer's body computes something (a plain load or cast costs a load either way).
// `reader_accesses`: the reader's recorded accesses.
std::string recompute_refusal(const ir::LoopNode& producer, const ir::LoopNode& reader,
                              const ir::Accesses& reader_accesses);

// `nodes`: every node that is not inlined, in program order (`schedule.inlined` is already set).
FusionResult fuse_nodes(const std::vector<const ir::LoopNode*>& nodes, const Schedule& schedule,
                        const ScheduleOptions& options);

}  // namespace foundry::sched
