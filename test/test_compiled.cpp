// Compiled models against PyTorch's outputs: every corpus model through the foundryc command
// line, and every tier-1 OpInfo sample (and every supported one outside tier 1) compiled from its
// own archive. The samples' generated sources are built in batches (one shared object per batch, each model under its own symbol
// prefix) so that the sweep fits in CI; each sample is still loaded and checked on its own.
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "foundry/build/compile.h"
#include "foundry/build/process.h"
#include "foundry/codegen/wrapper.h"
#include "foundry/frontend/frontend.h"
#include "foundry/lower/lowering.h"
#include "foundry/passes/pipeline.h"
#include "foundry/runtime/compare.h"
#include "foundry/runtime/loaded_model.h"
#include "foundry/runtime/sample.h"
#include "foundry/sched/schedule.h"
#include "support.h"
#include "sweep.h"

namespace fs = std::filesystem;

namespace foundry::test {
namespace {

struct Batch {
  std::vector<std::pair<std::string, std::string>> members;  // sample dir, symbol prefix
  bool dnnl = false, lapack = false;  // a member calls oneDNN, LAPACK
};

// The flags of the sweep's compiles: a model's, without OpenMP.
std::vector<std::string> sweep_compile(const std::string& source, const std::string& object) {
  std::vector<std::string> argv = {build::find_compiler("")};
  for (const char* f : {"-std=c++17", "-O3", "-fPIC", "-fwrapv", "-fno-math-errno", "-fvisibility=hidden", "-march=native"})
    argv.push_back(f);
  argv.insert(argv.end(), {"-c", source, "-o", object});
  return argv;
}

// One translation unit including every member's kernels, wrapper and library calls; returns the
// argv compiling it into batchN.o, and notes in `batch` whether a member calls oneDNN or LAPACK.
// `glue` becomes the oneDNN glue beside a member with library calls (the same file beside each).
std::vector<std::string> batch_command(Batch& batch, const std::string& root, int index, std::string& glue) {
  std::string tu = root + "/batch" + std::to_string(index) + ".cpp";
  std::ofstream out(tu);
  for (const auto& [dir, name] : batch.members) {
    out << "#include \"" << name << "/kernels.cpp\"\n#include \"" << name << "/wrapper.cpp\"\n";
    if (fs::exists(root + "/" + name + "/externs.cpp")) {
      out << "#include \"" << name << "/externs.cpp\"\n";
      batch.dnnl = true;
      batch.lapack = batch.lapack || build::externs_use_lapack(root + "/" + name + "/externs.cpp");
      glue = root + "/" + name + "/foundry_dnnl.cpp";
    }
  }
  return sweep_compile(tu, root + "/batch" + std::to_string(index) + ".o");
}

// Runs `commands` two at a time (the machine has two cores), each as soon as a compiler is free.
std::vector<build::ProcessResult> run_two_at_a_time(const std::vector<std::vector<std::string>>& commands) {
  std::vector<build::ProcessResult> results(commands.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < commands.size(); i = next++) results[i] = build::run_program(commands[i]);
  };
  std::thread first(worker), second(worker);
  first.join();
  second.join();
  return results;
}

// The argv linking batchN.o (with the glue's object when it has library calls) into batchN.so.
std::vector<std::string> batch_link(const Batch& batch, const std::string& root, int index) {
  const std::string stem = root + "/batch" + std::to_string(index);
  std::vector<std::string> argv = {build::find_compiler(""), "-shared", stem + ".o"};
  if (batch.dnnl) argv.push_back(root + "/foundry_dnnl.o");
  argv.insert(argv.end(), {"-o", stem + ".so"});
  for (const std::string& f : build::model_link_flags(batch.dnnl, batch.lapack)) argv.push_back(f);
  return argv;
}

}  // namespace

// Generates every sample's sources, builds them in batches of 100 (two compilers at a time: the
// machine has two cores), then loads and checks each sample on its own. A sample whose sources
// cannot be generated fails with that error.
SweepResult compiled_sweep(const std::string& title, const std::vector<std::string>& samples,
                           const std::map<std::string, std::string>& known,
                           const std::optional<lower::ReductionSplit>& split) {
  TempDir tmp("foundry_sweep_");

  // Generate every sample's sources; a sample that fails here fails the sweep on its own.
  std::map<std::string, std::string> generate_errors;
  std::vector<Batch> batches(1);
  constexpr size_t kBatchSize = 100;
  for (size_t i = 0; i < samples.size(); ++i) {
    std::string name = "s" + std::to_string(i);
    try {
      generate_sources(samples[i], name, tmp / name, {}, split);
      if (batches.back().members.size() == kBatchSize) batches.emplace_back();
      batches.back().members.push_back({samples[i], name});
    } catch (const std::exception& e) {
      generate_errors[samples[i]] = e.what();
    }
  }
  // Compile the batches, and the oneDNN glue once for all, then link each batch.
  std::string glue;
  std::vector<std::vector<std::string>> compiles;
  for (size_t k = 0; k < batches.size(); ++k) compiles.push_back(batch_command(batches[k], tmp.path(), static_cast<int>(k), glue));
  if (!glue.empty()) compiles.insert(compiles.begin(), sweep_compile(glue, tmp / "foundry_dnnl.o"));
  std::vector<build::ProcessResult> compiled = run_two_at_a_time(compiles);
  if (!glue.empty()) {
    if (compiled.front().exit_code != 0) WARN("the oneDNN glue failed to compile:\n" << compiled.front().output.substr(0, 4000));
    compiled.erase(compiled.begin());
  }
  std::map<std::string, std::string> so_of;  // symbol prefix -> shared object
  std::map<std::string, std::string> batch_errors;
  for (size_t k = 0; k < batches.size(); ++k) {
    build::ProcessResult r = compiled[k];
    if (r.exit_code == 0) r = build::run_programs({batch_link(batches[k], tmp.path(), static_cast<int>(k))}).front();
    if (r.exit_code != 0) WARN("batch " << k << " failed to build:\n" << r.output.substr(0, 4000));
    for (const auto& [dir, name] : batches[k].members) {
      if (r.exit_code == 0) so_of[name] = tmp / ("batch" + std::to_string(k) + ".so");
      else batch_errors[dir] = "batch compile failed";
    }
  }
  std::map<std::string, std::string> name_of;
  for (const auto& batch : batches)
    for (const auto& [dir, name] : batch.members) name_of[dir] = name;

  return run_sweep(title, samples, known, [&](const std::string& dir) -> std::string {
    if (generate_errors.count(dir)) return generate_errors[dir];
    if (batch_errors.count(dir)) return "batch compile failed";
    const std::string& name = name_of[dir];
    LoadedModel model(so_of[name], name, tmp / name);
    return compare_with_expected(model.run(read_npy_sequence(dir + "/inputs")), dir);
  });
}

TEST_CASE("compiled corpus models match PyTorch", "[compiled][corpus]") {
  if (!require_corpus()) return;
  TempDir tmp("foundry_models_");
  SweepResult r = run_sweep("compiled models", corpus_models(), {}, [&](const std::string& dir) {
    std::string out = tmp / fs::path(dir).filename().string();
    ProcResult p = run_foundryc({dir + "/model.pt2", "-o", out});
    if (p.exit_code != 0) return "foundryc failed: " + p.err;
    LoadedModel model(out);
    return compare_with_expected(model.run(read_npy_sequence(dir + "/inputs")), dir);
  });
  CHECK(r.unexpected_failures.empty());
  CHECK(r.passed == 10);
}

TEST_CASE("compiled tier-1 OpInfo samples match PyTorch", "[compiled][corpus][sweep]") {
  if (!require_corpus()) return;
  std::vector<std::string> samples = tier1_samples();
  REQUIRE(samples.size() == 1408);
  samples = sweep_subset(samples);
  SweepResult r = compiled_sweep("compiled tier-1", samples, known_failures("known_failures_compiled.txt"));
  CHECK(r.unexpected_failures.empty());
  CHECK(r.unexpected_passes.empty());
  CHECK(r.passed * 100 >= 98 * static_cast<int>(samples.size()));
}

TEST_CASE("compiled non-tier-1 OpInfo samples match PyTorch", "[compiled][corpus][sweep]") {
  if (!require_corpus()) return;
  std::vector<std::string> samples = other_samples();
  REQUIRE(samples.size() == 479);
  samples = sweep_subset(samples);
  SweepResult r = compiled_sweep("compiled other", samples, known_failures("known_failures_other.txt"));
  CHECK(r.unexpected_failures.empty());
  CHECK(r.unexpected_passes.empty());
}

}  // namespace foundry::test
