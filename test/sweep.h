// The corpus sweep shared by the interpreter and compiled-model tests: which samples to run and
// which are known to fail (test/known_failures.txt, one `sample  reason` per line).
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "foundry/codegen/cpp_kernel.h"
#include "foundry/lower/lowering.h"
#include "foundry/runtime/compare.h"
#include "foundry/runtime/npy.h"

namespace foundry::test {

std::vector<std::string> tier1_samples();               // opinfo/tier1.txt, in order
std::vector<std::string> other_samples();               // opinfo/other.txt: outside tier 1, in order
// `samples` itself, or every Nth of them when FOUNDRY_SWEEP_EVERY=N (N > 1): the sanitized CI run
// takes a subset of the sweep. Says so on stderr, so a subset is never mistaken for the whole.
std::vector<std::string> sweep_subset(const std::vector<std::string>& samples);
std::vector<std::string> corpus_models();               // models/* with expected outputs
std::map<std::string, std::string> known_failures(const std::string& list_name);

// Generates one sample's sources into `out` under the symbol prefix `name` (the sweeps batch
// several samples into one shared object; `options.device` picks the code generator).
// `split` replaces the device's reduction split (lower::reduction_split_for) when given.
void generate_sources(const std::string& sample_dir, const std::string& name, const std::string& out,
                      const codegen::KernelOptions& options = {},
                      const std::optional<lower::ReductionSplit>& split = std::nullopt);

// "" when `outputs` match DIR/expected/N.npy (compare_arrays tolerances), else the first problem.
std::string compare_with_expected(const std::vector<foundry::NpyArray>& outputs, const std::string& dir,
                                  std::optional<foundry::Tolerance> tol = std::nullopt);

// Runs `check` (returns "" on success, else the reason) on every sample, prints a summary
// ending with the line "N passed, M failed", and returns the failures not in `known`.
struct SweepResult {
  int passed = 0, failed = 0;
  std::map<std::string, std::string> unexpected_failures;
  std::vector<std::string> unexpected_passes;  // listed as known failures but now passing
};
SweepResult run_sweep(const std::string& title, const std::vector<std::string>& sample_dirs,
                      const std::map<std::string, std::string>& known,
                      const std::function<std::string(const std::string& dir)>& check);

// Splits every reduction the rules allow, however small: in pieces of at least `min_chunk`
// elements (1: also the only split of a row of prime length, such as OpInfo's 5).
lower::ReductionSplit forced_reduction_split(int64_t min_chunk = 2);

// The reduction nodes of a lowered program.
size_t reduction_nodes(const ir::LoopProgram& program);

// Whether lowering the sample with `split` makes more reduction nodes than without (it splits one).
bool split_changes(const std::string& sample_dir, const lower::ReductionSplit& split);

// Generates every sample's sources (lowered with `split` when given), builds them in batches and
// checks each sample against its references (test_compiled.cpp).
SweepResult compiled_sweep(const std::string& title, const std::vector<std::string>& samples,
                           const std::map<std::string, std::string>& known,
                           const std::optional<lower::ReductionSplit>& split = std::nullopt);

}  // namespace foundry::test
