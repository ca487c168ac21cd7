// The generated model around the kernels: the wrapper (the model's tables of inputs, outputs and
// weights, its input checks and output shapes, and the run body that points at every buffer and
// calls kernels and extern kernels in order; the fixed C API entry points around them are
// runtime/foundry_model_api.h), the public header model.h, and the layout of weights.bin.
#pragma once
#include <string>
#include <vector>

#include "foundry/codegen/cpp_kernel.h"
#include "foundry/graph/graph.h"
#include "foundry/sched/schedule.h"

namespace foundry::codegen {

// weights.bin: every constant storage once, each at a 64-byte aligned offset.
struct WeightsLayout {
  struct Piece {
    int64_t offset = 0;
    Blob data;
  };
  std::vector<Piece> pieces;
  int64_t total_bytes = 0;
  std::map<const ir::Buffer*, int64_t, ir::ByBufferId> offset_of;  // each constant buffer's storage offset
};

struct GeneratedModel {
  std::string name;  // the C symbol prefix
  std::vector<EmittedKernel> kernels;
  std::string kernels_cpp, wrapper_cpp, model_h;  // kernels.cpp (cpu), wrapper.cpp, model.h
  std::vector<std::string> kernel_parts;            // cuda: kernels_0.cu, kernels_1.cu, ... (split_kernel_parts)
  std::string externs_cpp;  // empty when the model calls no extern kernel
  WeightsLayout weights;
  std::string march = "native";  // the -march of the float lanes kernels.cpp was generated for (cuda: the arch, sm_90)
  // "cpu", or "cuda": the kernels are then `kernel_parts` (nvcc builds them) and wrapper.cpp is host
  // code (built by the C++ compiler)
  std::string device = "cpu";
  bool uses_cudnn = false;  // cuda: wrapper.cpp calls cuDNN (convolutions), so model.so links it
};

GeneratedModel generate_model(const ir::LoopProgram& program, const sched::Schedule& schedule,
                              const std::string& model_name, const KernelOptions& options = {});

// A C identifier made from a file stem: lowercase letters, digits and '_', starting with a letter.
std::string sanitize_model_name(const std::string& stem);

// A C string literal (quoted, escaped) holding `text`.
std::string c_string_literal(const std::string& text);

}  // namespace foundry::codegen

namespace foundry::codegen {

// The file of a CUDA model's kernel part `index`: kernels_INDEX.cu.
std::string kernel_part_name(size_t index);

// Writes kernels.cpp (a CUDA model: kernels_0.cu, ...), wrapper.cpp, externs.cpp (if any), model.h,
// weights.bin, CMakeLists.txt and the runtime headers into `dir`.
void write_model_files(const GeneratedModel& model, const std::string& dir);

}  // namespace foundry::codegen
