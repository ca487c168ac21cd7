#include "sweep.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "foundry/codegen/wrapper.h"
#include "foundry/frontend/frontend.h"
#include "foundry/lower/lowering.h"
#include "foundry/passes/pipeline.h"
#include "foundry/runtime/compare.h"
#include "foundry/sched/schedule.h"
#include "foundry/runtime/sample.h"
#include "support.h"

namespace foundry::test {

namespace {
std::vector<std::string> opinfo_list(const std::string& list_name) {
  std::vector<std::string> out;
  std::ifstream in(corpus_dir() + "/opinfo/" + list_name);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(corpus_dir() + "/opinfo/" + line);
  return out;
}
}  // namespace

std::vector<std::string> tier1_samples() { return opinfo_list("tier1.txt"); }
std::vector<std::string> other_samples() { return opinfo_list("other.txt"); }

std::vector<std::string> sweep_subset(const std::vector<std::string>& samples) {
  const char* every_env = std::getenv("FOUNDRY_SWEEP_EVERY");
  const long every = every_env ? std::strtol(every_env, nullptr, 10) : 1;
  if (every <= 1) return samples;
  std::vector<std::string> out;
  for (size_t i = 0; i < samples.size(); i += static_cast<size_t>(every)) out.push_back(samples[i]);
  std::cerr << "sweep: FOUNDRY_SWEEP_EVERY=" << every << ": a subset, " << out.size() << " of "
            << samples.size() << " samples\n";
  return out;
}

std::vector<std::string> corpus_models() {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(corpus_dir() + "/models"))
    if (std::filesystem::exists(entry.path() / "expected")) out.push_back(entry.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::map<std::string, std::string> known_failures(const std::string& list_name) {
  std::map<std::string, std::string> out;
  std::ifstream in(test_source_dir() + "/" + list_name);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name, reason;
    fields >> name;
    std::getline(fields, reason);
    out[name] = reason.substr(reason.find_first_not_of(' ') == std::string::npos ? 0 : reason.find_first_not_of(' '));
  }
  return out;
}

lower::ReductionSplit forced_reduction_split(int64_t min_chunk) {
  return {/*max_rows=*/int64_t{1} << 40, /*min_length=*/2, /*max_pieces=*/int64_t{1} << 50, min_chunk,
          /*min_pieces=*/2};
}

size_t reduction_nodes(const ir::LoopProgram& program) {
  return static_cast<size_t>(std::count_if(program.nodes.begin(), program.nodes.end(),
                                           [](const auto& n) { return n->kind == ir::NodeKind::Reduction; }));
}

bool split_changes(const std::string& sample_dir, const lower::ReductionSplit& split) {
  Graph graph = load_model(sample_dir + "/model.pt2");
  run_graph_passes(graph);
  lower::LowerOptions with_split;
  with_split.reduction_split = split;
  return reduction_nodes(lower::lower_graph(graph, with_split)) > reduction_nodes(lower::lower_graph(graph));
}

void generate_sources(const std::string& sample_dir, const std::string& name, const std::string& out,
                      const codegen::KernelOptions& options, const std::optional<lower::ReductionSplit>& split) {
  Graph graph = load_model(sample_dir + "/model.pt2");
  verify_graph(graph);
  PassOptions pass_options;
  pass_options.device = options.device;
  run_graph_passes(graph, pass_options);
  lower::LowerOptions lower_options;
  lower_options.libraries = lower::libraries_for(options.device);
  lower_options.reduction_split = split ? *split : lower::reduction_split_for(options.device);
  ir::LoopProgram program = lower::lower_graph(graph, lower_options);
  sched::Schedule schedule = sched::schedule_program(program, {});
  std::filesystem::create_directories(out);
  codegen::write_model_files(codegen::generate_model(program, schedule, name, options), out);
}

std::string compare_with_expected(const std::vector<NpyArray>& outputs, const std::string& dir,
                                  std::optional<Tolerance> tol) {
  std::vector<NpyArray> expected = read_npy_sequence(dir + "/expected");
  if (outputs.size() != expected.size())
    return std::to_string(outputs.size()) + " outputs, expected " + std::to_string(expected.size());
  for (size_t k = 0; k < outputs.size(); ++k) {
    Comparison c = compare_arrays(outputs[k], expected[k], tol);
    if (!c.pass) return "output " + std::to_string(k) + ": " + c.message;
  }
  return "";
}

SweepResult run_sweep(const std::string& title, const std::vector<std::string>& sample_dirs,
                      const std::map<std::string, std::string>& known,
                      const std::function<std::string(const std::string& dir)>& check) {
  SweepResult r;
  for (const std::string& dir : sample_dirs) {
    std::string name = std::filesystem::path(dir).filename().string();
    std::string reason;
    const auto start = std::chrono::steady_clock::now();
    try {
      reason = check(dir);
    } catch (const std::exception& e) {
      reason = std::string("exception: ") + e.what();
    }
    // The suite's time budget is spent by a few samples: name them.
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds > 2) std::cerr << "sweep: " << title << ": " << name << " took " << seconds << " s\n";
    bool is_known = known.count(name) != 0;
    if (reason.empty()) {
      ++r.passed;
      if (is_known) r.unexpected_passes.push_back(name);
    } else {
      ++r.failed;
      if (!is_known) r.unexpected_failures[name] = reason;
    }
  }
  std::cout << "== " << title << "\n";
  for (const auto& [name, reason] : r.unexpected_failures) std::cout << "FAIL " << name << ": " << reason << "\n";
  for (const auto& name : r.unexpected_passes) std::cout << "NOW PASSING (remove from the known list) " << name << "\n";
  std::cout << title << ": " << r.passed << " passed, " << r.failed << " failed (" << (r.failed - r.unexpected_failures.size())
            << " known)\n";
  return r;
}

}  // namespace foundry::test
