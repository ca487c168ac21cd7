// Scheduling: the loop program becomes an ordered list of steps (generated kernels and extern
// calls). A kernel is a group of IR nodes sharing one outer loop nest: pointwise members at the
// outer level, reductions with their own inner reduction loop, and pointwise "inner" members that
// loop over the remaining dims of a row (a reduction's epilogue). Pointwise producers with one
// reader, or with several and a one-load body, are inlined into their readers and never stored.
// A buffer plan gives every intermediate buffer a slot in one arena, reusing slots whose buffers
// are dead.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "foundry/ir/loop_ir.h"

namespace foundry::sched {

enum class MemberRole {
  Outer,      // pointwise over exactly the kernel's ranges
  Reduction,  // reduction whose outer ranges are the kernel's ranges
  Inner,      // pointwise over the kernel's ranges followed by inner dims of its own
};

struct Member {
  const ir::LoopNode* node = nullptr;
  MemberRole role = MemberRole::Outer;
  // For each of node->ranges: the kernel loop dim it maps to, -1 for a size-1 dim (index 0),
  // or kInnerDim + k for the k-th inner dim of an Inner member.
  std::vector<int> dim_map;
  ir::Index inner_ranges;  // Inner members only
  // When codegen merged the member's own loops (its reduction or inner loops; merge_loops.h):
  // their ranges, and the index of each of its own dims as an expression of their variables.
  ir::Index own_ranges;
  std::vector<ir::Expr> own_index;
  static constexpr int kInnerDim = 1000;
};

struct Kernel {
  std::string name;  // "cpp_fused_add_mul_relu_0": op names from the registry and a counter
  ir::Index ranges;  // the outer loop nest
  std::vector<Member> members;                   // in program order
  std::vector<const ir::LoopNode*> inlined;      // producers computed inside, for names/comments
  std::set<const ir::Buffer*, ir::ByBufferId> internal_buffers;  // produced and consumed inside: never stored
  // When codegen merged outer loops (merge_loops.h): the index of each dim that the members'
  // dim_map names, as an expression of the merged loops' variables. Empty: dim d is loop d.
  std::vector<ir::Expr> dim_index;
};

struct Step {
  bool is_extern = false;
  Kernel kernel;                              // !is_extern
  const ir::LoopNode* extern_node = nullptr;  // is_extern
};

struct BufferPlan {
  // Bytes, 64-byte aligned; expressions in the dynamic sizes (constants for static programs).
  std::map<const ir::Buffer*, ir::Expr, ir::ByBufferId> arena_offset;
  std::map<const ir::Buffer*, const ir::Buffer*, ir::ByBufferId> reuses;  // a buffer -> the dead one whose slot it takes
  ir::Expr arena_bytes = 0;
  ir::Expr unplanned_bytes = 0;  // what the arena would take without reuse
};

struct Schedule {
  std::vector<Step> steps;
  BufferPlan plan;
  // Buffers never materialized: computed by their producer's body wherever they are loaded.
  std::map<const ir::Buffer*, const ir::LoopNode*, ir::ByBufferId> inlined;
  // Pointwise nodes stored rather than inlined by the fusion cost rule (recompute_refusal in
  // fusion.h), with its reason: shown in ir_post_fusion.txt and by -v.
  std::map<const ir::LoopNode*, std::string> not_inlined;
  // The program's dynamic sizes (their hints turn byte counts into estimates).
  std::vector<ir::SizeSymbol> size_symbols;
};

struct ScheduleOptions {
  bool fusion = true;   // false: one kernel per node, nothing inlined (--no-fusion)
  size_t max_kernel_nodes = 64;  // members + inlined nodes of one kernel
};

Schedule schedule_program(const ir::LoopProgram& program, const ScheduleOptions& options);

// The text form of a schedule (ir_post_fusion.txt).
std::string print_schedule(const Schedule& schedule);

// The ATen nodes a kernel computes (its members' and inlined producers' origins), in program
// order, each once: for the comments of generated code.
std::vector<std::string> kernel_origins(const Kernel& kernel);

// Bytes a step reads and writes per run, each buffer it touches counted once, in full (at the
// export hints when sizes are dynamic).
struct Traffic {
  int64_t bytes_read = 0, bytes_written = 0;
};
Traffic step_traffic(const Step& step, const Schedule& schedule);

}  // namespace foundry::sched
