// Split reductions (lower::ReductionSplit): a reduction with few, long rows lowered as partial
// results over pieces of each row and a second reduction combining them. Checked against PyTorch's
// references (the corpus compiled with the split forced on at tiny sizes) and against sums computed
// here; the IR dump shows both nodes; dynamic sizes, ArgMax and 16-bit float sums are never split.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "foundry/frontend/frontend.h"
#include "foundry/ir/evaluate.h"
#include "foundry/ir/print.h"
#include "foundry/lower/lowering.h"
#include "foundry/passes/pipeline.h"
#include "graph_builder.h"
#include "support.h"
#include "sweep.h"

namespace foundry::test {
namespace {

lower::ReductionSplit forced_split(int64_t min_chunk = 2) { return forced_reduction_split(min_chunk); }

lower::LowerOptions options_with(const lower::ReductionSplit& split, bool dynamic = false) {
  lower::LowerOptions options;
  options.dynamic_shapes = dynamic;
  options.reduction_split = split;
  return options;
}

Graph passed_graph(const std::string& archive) {
  Graph g = load_model(archive);
  run_graph_passes(g);
  return g;
}

// The corpus `reductions` model and every tier-1 sample whose lowering `split` changes: the
// reductions, means, norms, softmaxes, losses, pools and reduction-lowered products.
std::vector<std::string> samples_split_by(const lower::ReductionSplit& split) {
  std::vector<std::string> samples = {corpus_dir() + "/models/reductions"};
  for (const std::string& dir : tier1_samples()) {
    try {
      if (split_changes(dir, split)) samples.push_back(dir);
    } catch (const std::exception&) {
      // Samples foundryc cannot lower are the compiled sweep's concern (its known failures).
    }
  }
  return samples;
}

}  // namespace

TEST_CASE("reduction split: --device cuda lowers a sum of 4 rows of 8192 into two reduction nodes", "[split][fast]") {
  Builder b;
  Value* x = b.input("x", {4, 8192});
  b.output(b.op("sum.dim_IntList", {pos(x), pos(ints({1}))}));
  ir::LoopProgram program = lower::lower_graph(b.g, options_with(lower::reduction_split_for("cuda")));
  // S = 8: 8 pieces of 1024 (the smallest piece the GPU takes), 32 blocks in the first pass.
  std::string dump = ir::print_program(program);
  CHECK(file_check(dump, "CHECK: node0: reduction -> buf0\n"
                         "CHECK-NEXT: origins: sum (aten.sum.dim_IntList)\n"
                         "CHECK-NEXT: ranges: [4, 8]  reduction: sum over [1024]\n"
                         "CHECK-NEXT: reads: arg0[8192*i0 + 1024*i1 + r0]\n"
                         "CHECK-NEXT: writes: buf0[8*i0 + i1]\n"
                         "CHECK: node1: reduction -> buf1\n"
                         "CHECK-NEXT: origins: sum (aten.sum.dim_IntList)\n"
                         "CHECK-NEXT: ranges: [4]  reduction: sum over [8]\n"
                         "CHECK-NEXT: reads: buf0[8*i0 + r0]\n"
                         "CHECK-NOT: reduction ->\n") == "");
  CHECK(reduction_nodes(lower::lower_graph(b.g, options_with(lower::reduction_split_for("cpu")))) == 1);
}

TEST_CASE("reduction split: pieces over several reduced dims sum and max as computed here", "[split][fast]") {
  Builder b;
  Value* x = b.input("x", {2, 48, 100});
  b.output(b.op("sum.dim_IntList", {pos(x), pos(ints({1, 2}))}));
  b.output(b.op("amax", {pos(x), pos(ints({1, 2}))}));
  ir::LoopProgram program = lower::lower_graph(b.g, options_with(lower::reduction_split_for("cuda")));
  REQUIRE(reduction_nodes(program) == 4);  // 4800 = 4 pieces of 1200: a piece spans 12 rows of 100
  CHECK(file_check(ir::print_program(program), "CHECK: ranges: [2, 4]  reduction: sum over [1200]\n"
                                               "CHECK-NEXT: reads: arg0[4800*i0 + 1200*i1 + r0]\n") == "");
  std::vector<NpyArray> inputs = make_inputs(b.g);
  std::vector<NpyArray> out = ir::evaluate_program(program, inputs);
  const float* v = inputs[0].as<float>();
  for (int64_t row = 0; row < 2; ++row) {
    double sum = 0, most = -INFINITY;
    for (int64_t k = 0; k < 4800; ++k) {
      sum += v[row * 4800 + k];
      most = std::max(most, static_cast<double>(v[row * 4800 + k]));
    }
    CHECK(std::abs(out[0].as<float>()[row] - sum) <= 1e-4 + 1e-4 * std::abs(sum));
    CHECK(out[1].as<float>()[row] == static_cast<float>(most));
  }
}

TEST_CASE("reduction split: ArgMax, 16-bit float sums, rows too short or too many and fewer than 4 pieces are not split", "[split][fast]") {
  Builder b;
  Value* x = b.input("x", {4, 8192});
  Value* h = b.input("h", {4, 8192}, DType::Float16);
  b.output(b.op("argmax", {pos(x), pos(Arg::of_int(1))}));
  b.output(b.op("sum.dim_IntList", {pos(h), pos(ints({1}))}));
  b.output(b.op("amax", {pos(h), pos(ints({1}))}));  // exact in float16: split
  b.output(b.op("sum.dim_IntList", {pos(x), pos(ints({0}))}));  // 8192 rows of 4
  Value* short_rows = b.input("short_rows", {4, 2048});
  b.output(b.op("sum.dim_IntList", {pos(short_rows), pos(ints({1}))}));
  Value* prime_pieces = b.input("prime_pieces", {120, 4097});  // 17 * 241: no S in [4, 4]
  b.output(b.op("sum.dim_IntList", {pos(prime_pieces), pos(ints({1}))}));
  ir::LoopProgram program = lower::lower_graph(b.g, options_with(lower::reduction_split_for("cuda")));
  std::string dump = ir::print_program(program);
  CHECK(reduction_nodes(program) == 7);
  CHECK(file_check(dump, "CHECK: ranges: [4]  reduction: argmax over [8192]\n"
                         "CHECK: ranges: [4]  reduction: sum over [8192]\n"
                         "CHECK: ranges: [4, 8]  reduction: max over [1024]\n"
                         "CHECK: ranges: [4]  reduction: max over [8]\n"
                         "CHECK: ranges: [8192]  reduction: sum over [4]\n"
                         "CHECK: ranges: [4]  reduction: sum over [2048]\n"
                         "CHECK: ranges: [120]  reduction: sum over [4097]\n") == "");
}

TEST_CASE("reduction split: dynamic sizes are not split, the same model at static sizes is", "[split][fast]") {
  std::string archive = samples_dir() + "/dyn_attention/model.pt2";
  Graph g = passed_graph(archive);
  size_t unsplit = reduction_nodes(lower::lower_graph(g, options_with({}, /*dynamic=*/true)));
  REQUIRE(unsplit > 0);
  CHECK(reduction_nodes(lower::lower_graph(g, options_with(forced_split(), /*dynamic=*/true))) == unsplit);
  // Specialized to the recorded sizes, the same reductions split (the check above can fail).
  CHECK(reduction_nodes(lower::lower_graph(g, options_with(forced_split(), /*dynamic=*/false))) > unsplit);
}

TEST_CASE("reduction split: corpus models and tier-1 OpInfo reductions split at tiny sizes match PyTorch",
          "[split][compiled][corpus]") {
  if (!require_corpus()) return;
  CHECK(split_changes(corpus_dir() + "/models/reductions", forced_split()));
  for (int64_t min_chunk : {2, 1}) {
    std::vector<std::string> samples = samples_split_by(forced_split(min_chunk));
    INFO(samples.size() << " samples split in pieces of at least " << min_chunk);
    CHECK(samples.size() >= (min_chunk == 1 ? 170u : 55u));  // 174 and 58 when written
    samples = sweep_subset(samples);
    SweepResult r = compiled_sweep("split reductions, pieces >= " + std::to_string(min_chunk), samples,
                                   known_failures("known_failures_compiled.txt"), forced_split(min_chunk));
    CHECK(r.unexpected_failures.empty());
    CHECK(r.passed * 100 >= 98 * static_cast<int>(samples.size()));
  }
}

}  // namespace foundry::test
