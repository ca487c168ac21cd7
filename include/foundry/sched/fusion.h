// Fusion: which of the scheduled nodes share a kernel, and the order of the steps (see fusion.cpp
// for how pairs are chosen).
#pragma once
#include <string>
#include <vector>

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

// `nodes`: every node that is not inlined, in program order (`schedule.inlined` is already set).
FusionResult fuse_nodes(const std::vector<const ir::LoopNode*>& nodes, const Schedule& schedule,
                        const ScheduleOptions& options);

}  // namespace foundry::sched
