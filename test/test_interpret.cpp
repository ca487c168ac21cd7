// The reference evaluation of the loop IR against PyTorch's outputs: every corpus model and every
// tier-1 OpInfo sample (and every supported one outside tier 1), lowered (after the graph passes) and
// run by the evaluator.
#include <catch2/catch.hpp>

#include <filesystem>

#include "foundry/frontend/frontend.h"
#include "foundry/ir/evaluate.h"
#include "foundry/lower/lowering.h"
#include "foundry/passes/pipeline.h"
#include "foundry/runtime/compare.h"
#include "foundry/runtime/sample.h"
#include "support.h"
#include "sweep.h"

namespace foundry::test {
namespace {

// "" when the evaluated outputs match expected/, else the first problem.
std::string interpret_and_compare(const std::string& dir) {
  Graph graph = load_model(dir + "/model.pt2");
  verify_graph(graph);
  run_graph_passes(graph);
  ir::LoopProgram program = lower::lower_graph(graph);
  std::vector<NpyArray> outputs = ir::evaluate_program(program, read_npy_sequence(dir + "/inputs"));
  return compare_with_expected(outputs, dir);
}

}  // namespace

TEST_CASE("the reference evaluator matches every corpus model", "[interpret][corpus]") {
  if (!require_corpus()) return;
  SweepResult r = run_sweep("interpret models", corpus_models(), {}, interpret_and_compare);
  CHECK(r.unexpected_failures.empty());
  CHECK(r.passed == 10);
}

TEST_CASE("the reference evaluator matches the tier-1 OpInfo samples", "[interpret][corpus][sweep]") {
  if (!require_corpus()) return;
  auto samples = tier1_samples();
  REQUIRE(samples.size() == 1408);
  samples = sweep_subset(samples);
  SweepResult r = run_sweep("interpret tier-1", samples, known_failures("known_failures_interpret.txt"),
                            interpret_and_compare);
  CHECK(r.unexpected_failures.empty());
  CHECK(r.unexpected_passes.empty());
  CHECK(r.passed * 100 >= 98 * static_cast<int>(samples.size()));
}

// Outside tier 1 most samples use ops foundryc refuses (linear algebra, FFTs, random numbers,
// data-dependent sizes): they are listed with the first line of their error, so that the test
// fails both when a sample that matched regresses and when a listed one starts to match.
TEST_CASE("the reference evaluator matches the non-tier-1 OpInfo samples it supports", "[interpret][corpus][sweep]") {
  if (!require_corpus()) return;
  auto samples = other_samples();
  REQUIRE(samples.size() == 479);
  samples = sweep_subset(samples);
  SweepResult r = run_sweep("interpret other", samples, known_failures("known_failures_other.txt"),
                            interpret_and_compare);
  CHECK(r.unexpected_failures.empty());
  CHECK(r.unexpected_passes.empty());
}

TEST_CASE("the reference evaluator matches PyTorch on a U-Net's transposed convolutions as library calls",
          "[interpret]") {
  // samples/unet (scripts/export_unet_sample.py): the deconvolution calls of the CPU, each input
  // element scattered by the evaluator (the reductions --device cuda lowers them to are checked on
  // the OpInfo samples in test_lower_nn.cpp: the evaluator takes minutes over them here).
  const std::string dir = samples_dir() + "/unet";
  Graph graph = load_model(dir + "/model.pt2");
  run_graph_passes(graph);
  ir::LoopProgram program = lower::lower_graph(graph);
  size_t transposed = 0;
  for (const auto& node : program.nodes)
    if (const auto* c = std::get_if<ir::Convolution>(&node->call.op)) transposed += c->transposed;
  CHECK(transposed == 3);
  std::vector<NpyArray> outputs = ir::evaluate_program(program, read_npy_sequence(dir + "/inputs"));
  CHECK(compare_with_expected(outputs, dir) == "");
}

}  // namespace foundry::test
