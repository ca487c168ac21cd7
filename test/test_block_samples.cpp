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

// The loop nests (format only; the test above checks the values). The activations between the
// convolutions are stored channels last (sched/channels_last.h), and pointwise kernels loop over
// them as stored (sched/storage_order.h). Where every access walks adjacent loops as one
// contiguous range, they run as one loop (merge_loops.h): the SiLUs after the 1x1 expansion and
// after the depthwise convolution (which runs on oneDNN, channels last, so the SiLU stays a
// kernel) over 144 x 56 x 56 in whole vectors with no scalar tail. The squeeze-excitation's mean
// over 56x56 is one reduction loop of 3136, eight channels at a time (each its own accumulator,
// the channels in SIMD lanes: a pixel's eight channels are adjacent), the tiles of channels on
// threads. The channel scale that multiplies the activation loops
// over pixels, its vectors over channels (it is read at the channel alone), merging the spatial
// loops.
TEST_CASE("samples/effnet_block: contiguous loops run as one (format)", "[samples][codegen][fast]") {
  TempDir tmp("foundry_block_");
  ProcResult r = run_foundryc({samples_dir() + "/effnet_block/model.pt2", "-o", tmp / "src", "--emit=source",
                               "--target=avx2"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(file_check(read_file(tmp / "src/kernels.cpp"), R"(
    CHECK: void cpp_fused_mul_sigmoid_0(
    CHECK-NEXT: #pragma omp parallel for num_threads(foundry_rt::kernel_team(451584, 0))
    CHECK-NEXT: for (int64_t i0 = 0; i0 < 451584; i0 += 8) {
    CHECK: foundry_vec::sigmoid(
    CHECK-NOT: foundry_rt::sigmoid(
    CHECK: void cpp_fused_mul_sigmoid_1(
    CHECK-NEXT: #pragma omp parallel for num_threads(foundry_rt::kernel_team(451584, 0))
    CHECK-NEXT: for (int64_t i0 = 0; i0 < 451584; i0 += 8) {
    CHECK: void cpp_fused_mean_2(
    CHECK-NEXT: #pragma omp parallel for num_threads(foundry_rt::kernel_team(451728, 0))
    CHECK-NEXT: for (int64_t i0_tile = 0; i0_tile < 144; i0_tile += 8) {
    CHECK: double acc0_lanes[8];
    CHECK: for (int64_t r0 = 0; r0 < 3136; ++r0) {
    CHECK-NEXT: #pragma omp simd
    CHECK-NEXT: for (int64_t lane = 0; lane < i0_lanes; ++lane) {
    CHECK: in_ptr0[(i0 + (144 * r0))]
    CHECK: void cpp_fused_mul_4(
    CHECK: for (int64_t i0 = 0; i0 < 3136; ++i0) {
    CHECK-NEXT: for (int64_t i1 = 0; i1 < 144; i1 += 8) {
  )") == "");
}

}  // namespace foundry::test
