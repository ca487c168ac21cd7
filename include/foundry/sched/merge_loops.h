// Merges a kernel's adjacent outer loops into one where every access walks them as one contiguous
// range (Inductor's simplify_loops): a [144, 56, 56] pointwise kernel runs as one loop of 451584,
// all of it in whole vectors, instead of 56-long rows of three vectors and an 8-element scalar tail
// (which took most of the time of a SiLU over them: the tail's sigmoid is scalar).
#pragma once
#include "foundry/sched/schedule.h"

namespace foundry::sched {

// `kernel` with its mergeable outer loops merged (Kernel::dim_index says how the members' dims
// map to the merged loops); `kernel` itself when none are.
Kernel merge_loops(const Kernel& kernel, const Schedule& schedule);

}  // namespace foundry::sched
