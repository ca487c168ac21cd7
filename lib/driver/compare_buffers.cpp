#include "foundry/driver/compare_buffers.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "foundry/driver/pipeline.h"
#include "foundry/frontend/frontend.h"
#include "foundry/ir/evaluate.h"
#include "foundry/runtime/loaded_model.h"
#include "foundry/runtime/sample.h"
#include "foundry/support/error.h"

namespace foundry {

namespace {

DebugBufferInfo buffer_info(const nlohmann::json& entry) {
  DebugBufferInfo info;
  info.buffer = entry.at("buffer").get<std::string>();
  info.output = entry.at("output").get<size_t>();
  info.nodes = entry.at("nodes").get<std::vector<std::string>>();
  info.aten_nodes = entry.at("aten_nodes").get<std::vector<std::string>>();
  return info;
}

BufferDifference difference(const DebugBufferInfo& info, const NpyArray& compiled, const NpyArray& reference,
                            Comparison comparison) {
  BufferDifference d{info, reference.dtype, reference.shape, std::move(comparison), {}, 0, 0};
  int64_t e = d.comparison.first_mismatch;
  if (e >= 0) {
    d.index = unravel_position(e, reference.shape);
    d.compiled = element_as_double(compiled, e);
    d.reference = element_as_double(reference, e);
  }
  return d;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string describe(const BufferDifference& d) {
  std::ostringstream out;
  out.precision(9);
  out << d.info.buffer << " (compiled output " << d.info.output << "), written by " << joined(d.info.nodes)
      << " from ATen " << joined(d.info.aten_nodes) << ", " << dtype_name(d.dtype) << shape_text(d.shape) << ": ";
  if (d.comparison.first_mismatch < 0) {
    out << d.comparison.message;
    return out.str();
  }
  out << "element " << shape_text(d.index) << " is " << d.compiled << " compiled, " << d.reference
      << " in the reference (" << d.comparison.mismatches << " differing elements, max abs err "
      << d.comparison.max_abs_err << ")";
  return out.str();
}

}  // namespace

DebugManifest read_debug_manifest(const std::string& dir) {
  std::ifstream in(dir + "/manifest.json");
  if (!in) throw UserError("cannot read " + display_path(dir + "/manifest.json") + ": not a foundryc output folder");
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(display_path(dir + "/manifest.json") + " is not a foundryc manifest: " + e.what());
  }
  if (!m.contains("debug_build"))
    throw UserError(display_path(dir) + " is not a debug build: compile it with foundryc MODEL -o " +
                    display_path(dir) + " --debug-buffers");
  try {
    DebugManifest manifest;
    manifest.model_outputs = m.at("debug_build").at("model_outputs").get<size_t>();
    for (const auto& entry : m.at("debug_build").at("buffers")) manifest.buffers.push_back(buffer_info(entry));
    return manifest;
  } catch (const nlohmann::json::exception& e) {
    throw UserError(display_path(dir + "/manifest.json") + " has a malformed debug_build: " + e.what());
  }
}

BufferReport compare_buffers(const ir::LoopProgram& program, const std::vector<NpyArray>& inputs,
                             const DebugManifest& manifest, const std::vector<NpyArray>& compiled) {
  std::map<std::string, const ir::Buffer*> by_name;
  for (const auto& buf : program.buffers) by_name[buf->name] = buf.get();
  std::vector<const ir::Buffer*> buffers;
  for (const DebugBufferInfo& info : manifest.buffers) {
    auto it = by_name.find(info.buffer);
    if (it == by_name.end() || it->second->kind != ir::BufferKind::Computed)
      throw UserError("the debug build stores " + info.buffer + ", which this model does not compute: it was compiled "
                      "from another model or by another foundryc version");
    if (info.output >= compiled.size())
      throw UserError("the debug build's manifest names output " + std::to_string(info.output) + ", the model has " +
                      std::to_string(compiled.size()));
    buffers.push_back(it->second);
  }
  std::vector<NpyArray> reference = ir::evaluate_program_buffers(program, inputs, buffers);
  BufferReport report;
  for (size_t k = 0; k < buffers.size(); ++k) {
    const DebugBufferInfo& info = manifest.buffers[k];
    Comparison c = compare_arrays(compiled[info.output], reference[k]);
    ++report.compared;
    report.model_outputs += info.output < manifest.model_outputs;
    if (!c.pass) report.differences.push_back(difference(info, compiled[info.output], reference[k], std::move(c)));
  }
  return report;
}

BufferReport compare_with_debug_build(const std::string& model, const std::string& compiled_dir,
                                      const std::string& inputs_dir) {
  DebugManifest manifest = read_debug_manifest(compiled_dir);
  if (!std::filesystem::is_directory(inputs_dir))
    throw UserError("the inputs folder " + display_path(inputs_dir) + " does not exist");
  std::vector<NpyArray> inputs = read_npy_sequence(inputs_dir);
  ir::LoopProgram program = lower_for_evaluation(model);
  if (inputs.size() != program.inputs.size())
    throw UserError("found " + std::to_string(inputs.size()) + " inputs in " + display_path(inputs_dir) +
                    ", the model takes " + std::to_string(program.inputs.size()));
  LoadedModel compiled(compiled_dir);
  return compare_buffers(program, inputs, manifest, compiled.run(inputs));
}

std::string format_buffer_report(const BufferReport& report) {
  std::string counts = std::to_string(report.compared) + " buffers (" + std::to_string(report.model_outputs) +
                       " of them the model's outputs)";
  if (report.differences.empty()) return "all " + counts + " match the reference evaluator\n";
  std::string out = "first differing buffer: " + describe(report.differences.front()) + "\n";
  out += std::to_string(report.differences.size()) + " of " + counts +
         " differ; the later ones may only follow from the first\n";
  return out;
}

}  // namespace foundry
