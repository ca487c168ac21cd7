// Issue #19's blocks of real networks (scripts/export_block_samples.py, torch 2.11), next to
// samples/unet: the reference evaluator and the compiled model both match PyTorch's outputs. Not
// [fast]: the reference evaluator alone takes ~20 s (effnet_block) and ~10 s (vit_block) on 2 cores.
#include <catch2/catch.hpp>
#include <string>

#include "support.h"

namespace foundry::test {

namespace {

std::string block_sample_check(const std::string& sample) {
  return run_sample_both_ways(samples_dir() + "/" + sample);
}

}  // namespace

// Three MBConv blocks of EfficientNet-B0 (1x1 expand, BN, SiLU; depthwise 3x3 / 5x5 stride 2 /
// 5x5, BN, SiLU; squeeze-excitation; 1x1 project, BN; two residual adds): [1,24,56,56] -> [1,40,28,28].
TEST_CASE("samples/effnet_block (EfficientNet-B0 MBConv stage) matches PyTorch interpreted and compiled",
          "[samples]") {
  CHECK(block_sample_check("effnet_block") == "");
}

// A ViT-Tiny encoder block (LayerNorm, 3-head self-attention written out, residual, LayerNorm,
// MLP 192->768 GELU ->192, residual): [1,197,192] -> [1,197,192].
TEST_CASE("samples/vit_block (ViT-Tiny encoder block) matches PyTorch interpreted and compiled", "[samples]") {
  CHECK(block_sample_check("vit_block") == "");
}

}  // namespace foundry::test
