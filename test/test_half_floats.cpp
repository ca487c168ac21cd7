// 16-bit floats (test/data/half_floats, scripts/export_half_samples.py): matrix products and
// convolutions accumulate in float32 and round each result once, as PyTorch's CPU kernels do,
// through oneDNN, the portable loops and the reference evaluator alike; references from eager
// PyTorch, compared at torch.testing.assert_close's tolerances for the dtype.
#include <catch2/catch.hpp>

#include "foundry/runtime/compare.h"
#include "support.h"

namespace {

std::string half_dir(const std::string& name) { return test_source_dir() + "/data/half_floats/" + name; }

const char* const kHalfSamples[] = {"mlp_bfloat16", "mlp_float16", "cnn_bfloat16", "cnn_float16"};

}  // namespace

TEST_CASE("half floats: tolerances are assert_close's defaults per dtype", "[half][compare][fast]") {
  using foundry::DType;
  using foundry::Tolerance;
  CHECK(Tolerance::for_dtype(DType::BFloat16).rtol == 1.6e-2);
  CHECK(Tolerance::for_dtype(DType::BFloat16).atol == 1e-5);
  CHECK(Tolerance::for_dtype(DType::Float16).rtol == 1e-3);
  CHECK(Tolerance::for_dtype(DType::Float16).atol == 1e-5);
  CHECK(Tolerance::for_dtype(DType::Float32).rtol == 1e-4);
  CHECK(Tolerance::for_dtype(DType::Float32).atol == 1e-4);
}

TEST_CASE("half floats: bfloat16 and float16 MLP and CNN match PyTorch, interpreted and compiled",
          "[half][compiled][interpret]") {
  for (const char* name : kHalfSamples)
    for (const std::string archive : {"model.pt2", "model.raw.pt2"}) {
      INFO(name << " " << archive);
      CHECK(run_sample_both_ways(half_dir(name), archive) == "");
    }
}

TEST_CASE("half floats: products and convolutions run on oneDNN, and on the portable loops without it",
          "[half][compiled]") {
  for (const char* name : kHalfSamples) {
    INFO(name);
    const std::string dir = half_dir(name);
    TempDir tmp("foundry_half_");
    ProcResult c = run_foundryc({dir + "/model.pt2", "-o", tmp / "out", "-v", "--cache-dir", tmp / "cache"});  // its own: no hit
    INFO(c.err);
    REQUIRE(c.exit_code == 0);
    CHECK(count_occurrences(c.err, "runs on oneDNN") == 3);  // the MLP's 3 addmm; 2 convolutions and an addmm
    CHECK(count_occurrences(c.err, "runs on the portable loops") == 0);
    const std::string type = std::string(name).find("bfloat16") != std::string::npos ? "bf16" : "f16";
    CHECK(count_occurrences(read_file(tmp / "out/externs.cpp"), "spec.data_type = foundry_rt::dnnl_glue::dt::" + type) == 3);
    // No warning at creation: oneDNN built every primitive (float16 or bfloat16 in float32 where
    // it has no kernel for them on this CPU: bfloat16 on AVX2 without AVX-512).
    ProcResult run = run_process({foundry_run_exe(), tmp / "out", "--inputs", dir + "/inputs", "--expected",
                                  dir + "/expected"});
    INFO(run.out << run.err);
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.err, !Catch::Contains("warning"));
    ProcResult portable = run_process({"/usr/bin/env", "FOUNDRY_NO_DNNL=1", foundry_run_exe(), tmp / "out", "--inputs",
                                       dir + "/inputs", "--expected", dir + "/expected"});
    INFO(portable.out << portable.err);
    CHECK(portable.exit_code == 0);
    CHECK_THAT(portable.err, Catch::Contains("runs on the portable loops: FOUNDRY_NO_DNNL=1 is set"));
  }
}

// float64 products are reductions: each bias + GELU is stored once, not recomputed inside the
// next product's reduction for each of its output columns, and ir_post_fusion.txt says why.
TEST_CASE("fusion: a producer a reduction would recompute per output column is stored (float64 MLP)",
          "[half][fusion]") {
  const std::string dir = half_dir("mlp_float64");
  CHECK(run_sample_both_ways(dir) == "");
  TempDir tmp("foundry_half_");
  ProcResult c = run_foundryc({dir + "/model.pt2", "-o", tmp / "out", "--dump-ir", "--stop-after=schedule", "-v",
                                "--cache-dir", tmp / "cache"});
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  const std::string post = read_file(tmp / "out/debug/ir_post_fusion.txt");
  INFO(post);
  // The two GELUs (fc1 and fc2's outputs, [8, 256]), read by products with 256 and 10 output
  // columns.
  CHECK(count_occurrences(post, "  not inlined: node") == 2);
  CHECK(count_occurrences(post, "does not index it by i1: it would compute each of its elements 256 times instead of once") == 1);
  CHECK(count_occurrences(post, "does not index it by i1: it would compute each of its elements 10 times instead of once") == 1);
  CHECK(count_occurrences(c.err, "not inlined into its reader:") == 2);
}
