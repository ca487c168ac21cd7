// foundryc MODEL --interpret --inputs DIR --compare-with OUT: runs the reference evaluator and a
// debug build of the same model (foundryc --debug-buffers, which stores every computed buffer as
// an output) on the same inputs, and names the first buffer, in program order, whose compiled
// value differs from the reference: the kernel that computed it is where a wrong result starts.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "foundry/ir/loop_ir.h"
#include "foundry/runtime/compare.h"
#include "foundry/runtime/npy.h"

namespace foundry {

// One buffer a debug build stores, as its manifest.json describes it.
struct DebugBufferInfo {
  std::string buffer;             // ours: "buf3"
  size_t output = 0;              // the compiled model's output that holds it
  std::vector<std::string> nodes;       // the IR nodes that wrote it: "node3"
  std::vector<std::string> aten_nodes;  // the ATen nodes they came from
};

struct DebugManifest {
  size_t model_outputs = 0;              // outputs 0..model_outputs-1 are the model's own
  std::vector<DebugBufferInfo> buffers;  // program order
};

// DIR/manifest.json of a debug build. Throws UserError when it cannot be read or DIR is not a
// debug build.
DebugManifest read_debug_manifest(const std::string& dir);

struct BufferDifference {
  DebugBufferInfo info;
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;       // the reference's
  Comparison comparison;            // compare_arrays(compiled, reference)
  std::vector<int64_t> index;       // the first differing element; empty when dtype or shape differ
  double compiled = 0, reference = 0;  // its two values
};

struct BufferReport {
  size_t compared = 0;       // buffers compared
  size_t model_outputs = 0;  // of them, the model's own outputs
  std::vector<BufferDifference> differences;  // program order: the first is where it went wrong
};

// Evaluates `program` on `inputs` and compares every buffer of `manifest` with the compiled
// model's outputs `compiled` (the same run's outputs, in the compiled model's order), using the
// suite's tolerance (compare_arrays). Throws UserError when the manifest names a buffer the
// program does not have (the folder was compiled from another model).
BufferReport compare_buffers(const ir::LoopProgram& program, const std::vector<NpyArray>& inputs,
                             const DebugManifest& manifest, const std::vector<NpyArray>& compiled);

// The whole comparison: reads the debug build in `compiled_dir` (UserError when it is not one),
// lowers `model`, runs both on DIR/0.npy, DIR/1.npy, ... from `inputs_dir`.
BufferReport compare_with_debug_build(const std::string& model, const std::string& compiled_dir,
                                      const std::string& inputs_dir);

// What foundryc prints: every buffer matching, or the first differing one with its nodes, ATen
// origin, shape, element and both values, and how many others differ.
std::string format_buffer_report(const BufferReport& report);

}  // namespace foundry
