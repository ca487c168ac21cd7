// Issue #19's blocks of real networks (scripts/export_block_samples.py, torch 2.11), next to
// samples/unet: the compiled model matches PyTorch's outputs. Compiled only: their ops' reference
// evaluator paths are tested elsewhere, and it alone takes 10-20 s on these on 2 cores.
#include <catch2/catch.hpp>
#include <string>

#include "support.h"

namespace foundry::test {

namespace {

void compile_block_sample(const std::string& sample) {
  TempDir tmp("foundry_block_");
  ProcResult compiled = run_foundryc({samples_dir() + "/" + sample + "/model.pt2", "-o", tmp / "out"});
  INFO(compiled.err);
  REQUIRE(compiled.exit_code == 0);
  check_matches_pytorch(sample, tmp / "out");
}

}  // namespace

// Three MBConv blocks of EfficientNet-B0 (1x1 expand, BN, SiLU; depthwise 3x3 / 5x5 stride 2 /
// 5x5, BN, SiLU; squeeze-excitation; 1x1 project, BN; two residual adds): [1,24,56,56] -> [1,40,28,28].
TEST_CASE("samples/effnet_block (EfficientNet-B0 MBConv stage) compiled matches PyTorch", "[samples]") {
  compile_block_sample("effnet_block");
}

// A ViT-Tiny encoder block (LayerNorm, 3-head self-attention written out, residual, LayerNorm,
// MLP 192->768 GELU ->192, residual): [1,197,192] -> [1,197,192].
TEST_CASE("samples/vit_block (ViT-Tiny encoder block) compiled matches PyTorch", "[samples]") {
  compile_block_sample("vit_block");
}

}  // namespace foundry::test
