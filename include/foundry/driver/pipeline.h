// The compilation pipeline: one table of stages run in order (frontend, passes, lower, schedule,
// codegen, build), each taking the previous stage's value, writing its debug dump when asked, and
// everything written to a fresh folder that replaces OUTDIR only on success.
#pragma once
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "foundry/ir/loop_ir.h"

namespace foundry {

enum class Stage { Frontend, Passes, Lower, Schedule, Codegen, Build };

std::string_view stage_name(Stage s);
std::optional<Stage> stage_from_name(std::string_view name);
// "frontend", "passes", ... in pipeline order.
const std::vector<std::string>& stage_names();

// An option that changes a file of the output folder is part of the output cache's key
// (output_cache_key in output_cache.h lists them).
struct PipelineOptions {
  std::string input;
  std::string output_dir;  // empty: default_output_dir(input)
  bool emit_source = true;
  bool emit_so = true;
  bool emit_static = false;         // OUTDIR/libmodel.a, for linking the model into a program statically
  std::optional<Stage> stop_after;  // nullopt: as far as `emit` needs
  bool dump_ir = false;             // debug dumps under OUTDIR/debug/
  std::ostream* timing_out = nullptr;  // --time-passes: each stage's wall time, as it finishes
  std::string name;                 // C symbol prefix; empty: from the input file's stem
  bool fusion = true;               // --no-fusion: one kernel per IR node
  // --static-fallback: a lowering that cannot keep dynamic sizes compiles for the export's sizes
  // (with a warning) instead of failing
  bool static_fallback = false;
  std::string cxx;                  // C++ compiler; empty: $CXX, g++, clang++
  std::string cxx_launcher;         // runs each compile (ccache, sccache); empty: $FOUNDRY_CXX_LAUNCHER
  std::string cache_dir;            // empty: ~/.cache/foundry
  bool use_cache = true;
  uint64_t cache_limit = 0;         // --cache-max-size; 0: FOUNDRY_CACHE_MAX_SIZE or 2 GiB
  std::string target = "native";    // -march for the generated code
  int threads = 0;                  // --threads: 0 all cores (decided at run time), 1 no threads
  bool vectorize = true;            // --no-simd: no explicit SIMD loops (for comparison)
  // --debug-buffers: every computed buffer is also an output, after the model's own (ir/debug_buffers.h)
  bool debug_buffers = false;
  // --device: "cpu" (C++ kernels, oneDNN) or "cuda" (CUDA kernels and cuBLAS, built by nvcc for
  // --cuda-arch; README "GPU (CUDA)")
  std::string device = "cpu";
  std::string cuda_arch = "sm_90";
  // --allow-tf32 (cuda): float32 convolutions and matrix products may use TF32 tensor cores, as
  // PyTorch's cuDNN convolutions do by default: faster, about 1e-3 relative error
  bool tf32 = false;
  std::string depfile;               // --depfile: write a Make/Ninja depfile here on success
  // Called as each stage starts: its index from 0, the number of stages this run goes through,
  // its name (foundryc's progress line on a terminal).
  std::function<void(size_t index, size_t count, std::string_view stage)> on_stage;
  // Called within a long stage about every quarter second: what it is doing ("compiling
  // kernels.cpp, wrapper.cpp" in the build), for the same line.
  std::function<void(const std::string& activity)> on_activity;
};

struct StageTiming {
  std::string stage;
  double seconds = 0;
};

struct PipelineResult {
  std::string output_dir;
  std::vector<StageTiming> timings;
  bool cache_hit = false;  // the build stage reused a cached model.so
};

// "<input stem>_out" beside the input ("models/mlp/model.pt2" -> "models/mlp/model_out").
std::string default_output_dir(const std::string& input);

// The frontend, the graph passes and the lowering at the sizes recorded at export: the program
// the reference evaluator runs (foundryc --interpret).
ir::LoopProgram lower_for_evaluation(const std::string& input);

// Runs the pipeline. Throws UserError (bad input, unsupported feature, a stage not implemented
// yet) or InternalError. On failure OUTDIR is left as it was; with dump_ir, the dumps written so
// far are kept in "OUTDIR.failed" and the error message names that folder.
PipelineResult run_pipeline(const PipelineOptions& options);

}  // namespace foundry
