// Runs a fused kernel's member bodies in order, as they will execute, through any `Ops` handler:
// loads of buffers produced earlier in the same kernel at a visible point are forwarded from the
// stored value, loads of inlined buffers run their producer's body at that index, and stores to
// internal buffers are dropped. The emitter, the recorder and the printer all see a kernel
// through this one walk, so they agree on what it reads and writes.
#pragma once
#include <string>
#include <vector>

#include "foundry/ir/ops.h"
#include "foundry/ir/record.h"
#include "foundry/sched/schedule.h"

namespace foundry::sched {

class KernelVisitor {
 public:
  virtual ~KernelVisitor() = default;
  virtual ir::Ops& ops() = 0;
  // Reduction members loop over `ranges` with symbols r0, r1, ...; Inner members over `ranges`
  // with the symbols in `vars`.
  virtual void begin_reduction(const Member&, const ir::Index& ranges) {}
  virtual void end_reduction(const Member&) {}
  virtual void begin_inner(const Member&, const ir::Index& ranges, const std::vector<std::string>& vars) {}
  virtual void end_inner(const Member&) {}
};

// Problems that make a grouping illegal (found by walking it), empty when it is legal.
struct WalkReport {
  std::vector<std::string> conflicts;
  std::set<const ir::Buffer*> materialized;  // written in the kernel and read back from memory
  std::set<const ir::LoopNode*> inlined;     // producers whose bodies ran inside the kernel
};

WalkReport walk_kernel(const Kernel& kernel, const Schedule& schedule, KernelVisitor& visitor);

// The walk with a recording handler: what the kernel reads and writes (inlined producers' reads
// included, forwarded and internal values left out), and whether the grouping is legal.
struct KernelCheck {
  WalkReport report;
  ir::Accesses accesses;
};
KernelCheck check_kernel(const Kernel& kernel, const Schedule& schedule);

// The symbols of the kernel's outer loops: i0, i1, ...
std::vector<std::string> kernel_loop_vars(const Kernel& kernel);
// A member's own loops as the walk runs them: a Reduction member's reduction loops (r0, r1, ...),
// an Inner member's inner loops (the symbols after the kernel's outer ones), as codegen merged them
// (own_ranges) or else the node's; none for an Outer member.
const ir::Index& member_loop_ranges(const Member& m);
std::string member_loop_var(const Kernel& kernel, const Member& m, size_t d);

}  // namespace foundry::sched
