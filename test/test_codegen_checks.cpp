// The structure of the generated sources, as FileCheck-style CHECK lines (see file_check in
// support.h): kernel signatures and their origin comments, loop shapes, the wrapper's buffer
// comments and the order of its calls. Format checks only, next to the value tests (test_fusion,
// test_compiled, the corpus sweeps), which say whether the code computes the right numbers.
// Shapes and node names come from the sample models (samples/README.md, their meta.json), and
// kernels are generated for --target=avx2 (8 float lanes) whatever this machine runs.
// kernels.cpp lines stay with facts the kernel emitter keeps (signatures, origin comments,
// pragmas, vector loads and stores), not its temporaries' numbers.
#include <catch2/catch.hpp>

#include <string>

#include "foundry/codegen/wrapper.h"
#include "foundry/lower/lowering.h"
#include "foundry/sched/schedule.h"
#include "graph_builder.h"
#include "support.h"

namespace {

struct Sources {
  std::string kernels, wrapper;
};

// The sample compiled to sources only (no C++ compiler run), its symbols prefixed with `sample`.
Sources emit_sources(const std::string& sample) {
  TempDir tmp;
  ProcResult r = run_foundryc({samples_dir() + "/" + sample + "/model.pt2", "-o", tmp / sample, "--name", sample,
                               "--emit=source", "--target=avx2"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return {read_file(tmp / (sample + "/kernels.cpp")), read_file(tmp / (sample + "/wrapper.cpp"))};
}

}  // namespace

TEST_CASE("codegen checks: pointwise, one vector loop and one call", "[codegen][fast]") {
  Sources s = emit_sources("pointwise");
  CHECK(file_check(s.kernels, R"(
    CHECK: static_assert(foundry_vec::kLanes == 8,
    CHECK: namespace pointwise_kernels {
    CHECK: // cpp_fused_add_mul_relu_0: add (aten.add.Tensor), relu (aten.relu), mul (aten.mul.Tensor)
    CHECK-NEXT: void cpp_fused_add_mul_relu_0(const float* __restrict__ in_ptr0, const float* __restrict__ in_ptr1, float* __restrict__ out_ptr0) {
    CHECK-NOT: #pragma omp parallel
    CHECK: for (int64_t i0 = 0; i0 < 1024; i0 += 8) {
    CHECK: foundry_vec::load(in_ptr0 + i0)
    CHECK: foundry_vec::load(in_ptr1 + i0)
    CHECK: foundry_vec::store(out_ptr0 + i0,
    CHECK-NOT: for (
    CHECK: }  // namespace pointwise_kernels
  )") == "");
  CHECK(file_check(s.wrapper, R"(
    CHECK: #include "foundry_model_api.h"
    CHECK: namespace pointwise_kernels {  // kernels.cpp
    CHECK-NEXT: void cpp_fused_add_mul_relu_0(const float* __restrict__ in_ptr0, const float* __restrict__ in_ptr1, float* __restrict__ out_ptr0);
    CHECK: struct pointwise_model {
    CHECK: struct Model {
    CHECK: static constexpr size_t kNumInputs = 2, kNumOutputs = 1;
    CHECK: void Model::run(
    CHECK: const auto* arg0 = static_cast<const float*>(inputs[0].data);  // float32[1024]
    CHECK-NEXT: const auto* arg1 = static_cast<const float*>(inputs[1].data);  // float32[1024]
    CHECK-NEXT: auto* {{buf[0-9]+}} = static_cast<float*>(outputs[0].data);  // float32[1024]
    CHECK: // add (aten.add.Tensor), relu (aten.relu), mul (aten.mul.Tensor) -> {{buf[0-9]+}} float32[1024]
    CHECK-NEXT: pointwise_kernels::cpp_fused_add_mul_relu_0(arg0, arg1, {{buf[0-9]+}});
    CHECK-NEXT: foundry_rt::step_done({{[0-9]+}});
    CHECK-NEXT: }
    CHECK: FOUNDRY_DEFINE_MODEL_API(pointwise)
  )") == "");
}

TEST_CASE("codegen checks: mlp, library calls only, weights and arena buffers described, dynamic sizes as symbols",
          "[codegen][fast]") {
  Sources s = emit_sources("mlp");
  // Both Linear layers are library calls (the ReLU folded into the first): no kernel at all.
  CHECK(file_check(s.kernels, "CHECK: namespace mlp_kernels {\nCHECK-NOT: void\nCHECK: }  // namespace mlp_kernels") == "");
  CHECK(file_check(s.wrapper, R"(
    CHECK: struct mlp_model {
    CHECK-NEXT: foundry_rt::WeightsFile weights;
    CHECK-NEXT: foundry_rt::ArenaPool arenas;
    CHECK-NEXT: mlp_externs::State* externs = nullptr;
    CHECK: void Model::run(
    CHECK: const auto* arg0 = static_cast<const float*>(inputs[0].data);  // float32[8, 64]
    CHECK-NEXT: auto* {{buf[0-9]+}} = static_cast<float*>(outputs[0].data);  // float32[8, 10]
    CHECK-NEXT: const auto* p_0_weight = reinterpret_cast<const float*>(model->weights.data + 0);  // 0.weight: float32[128, 64]
    CHECK-NEXT: const auto* p_0_bias = reinterpret_cast<const float*>(model->weights.data + {{[0-9]+}});  // 0.bias: float32[128]
    CHECK-NEXT: const auto* p_2_weight = reinterpret_cast<const float*>(model->weights.data + {{[0-9]+}});  // 2.weight: float32[10, 128]
    CHECK-NEXT: const auto* p_2_bias = reinterpret_cast<const float*>(model->weights.data + {{[0-9]+}});  // 2.bias: float32[10]
    CHECK-NEXT: = reinterpret_cast<float*>(arena + 0);  // float32[8, 128]
    CHECK-NOT: mlp_kernels::
    CHECK: mlp_externs::call0(model->externs, p_0_bias, arg0, p_0_weight, {{buf[0-9]+}});
    CHECK-NOT: mlp_kernels::
    CHECK: mlp_externs::call1(model->externs,
    CHECK-NEXT: foundry_rt::step_done({{[0-9]+}});
    CHECK-NEXT: }
  )") == "");
  // With a dynamic batch, the sizes are the symbol's.
  CHECK(file_check(emit_sources("mlp_dynamic").wrapper, R"(
    CHECK: static constexpr size_t kNumSizes = 1;
    CHECK: void Model::run(
    CHECK: const int64_t s0 = sizes[0];
    CHECK: const auto* arg0 = static_cast<const float*>(inputs[0].data);  // float32[s0, 64]
    CHECK-NEXT: static_cast<float*>(outputs[0].data);  // float32[s0, 10]
    CHECK: reinterpret_cast<float*>(arena + 0);  // float32[s0, 128]
    CHECK: mlp_dynamic_externs::call0(model->externs,
    CHECK-SAME: , s0);
  )") == "");
}

TEST_CASE("codegen checks: norm_softmax, a layer norm kernel, a library call, a fused softmax", "[codegen][fast]") {
  Sources s = emit_sources("norm_softmax");
  CHECK(file_check(s.kernels, R"(
    CHECK-NOT: #pragma omp parallel
    CHECK: // cpp_fused_native_layer_norm_0: native_layer_norm (aten.native_layer_norm)
    CHECK-NEXT: void cpp_fused_native_layer_norm_0(const float* __restrict__ in_ptr0, const float* __restrict__ in_ptr1, const float* __restrict__ in_ptr2, float* __restrict__ out_ptr0) {
    CHECK: r0 < 64; r0 += 8)
    CHECK: foundry_vec::load(in_ptr0 +
    CHECK: foundry_vec::store(out_ptr0 +
    CHECK: // cpp_fused__softmax_add_1: add (aten.add.Tensor), _softmax (aten._softmax)
    CHECK-NEXT: void cpp_fused__softmax_add_1(const float* __restrict__ in_ptr0, const float* __restrict__ in_ptr1, float* __restrict__ out_ptr0, float* __restrict__ out_ptr1, float* __restrict__ out_ptr2) {
    CHECK: foundry_vec::load(in_ptr0 +
    CHECK: foundry_vec::store(out_ptr0 +
    CHECK: foundry_vec::exp(
    CHECK: foundry_vec::store(out_ptr1 +
    CHECK-NOT: foundry_vec::exp(
    CHECK: foundry_vec::store(out_ptr2 +
  )") == "");
  CHECK(file_check(s.wrapper, R"(
    CHECK: const auto* arg0 = static_cast<const float*>(inputs[0].data);  // float32[4, 16, 64]
    CHECK: reinterpret_cast<float*>(arena + {{[0-9]+}});  // float32[4, 16, 64]
    CHECK: // native_layer_norm (aten.native_layer_norm) -> {{buf[0-9]+}} float32[4, 16, 64]
    CHECK-NEXT: norm_softmax_kernels::cpp_fused_native_layer_norm_0(arg0,
    CHECK: // addmm: float32[64, 64] x float32[64, 64] + bias -> float32[64, 64], gelu folded; from addmm (aten.addmm), gelu (aten.gelu)
    CHECK-NEXT: norm_softmax_externs::call0(model->externs,
    CHECK: // add (aten.add.Tensor), _softmax (aten._softmax) -> {{buf[0-9]+}} float32[4, 16, 64], {{buf[0-9]+}} float32[4, 16, 64], {{buf[0-9]+}} float32[4, 16, 64]
    CHECK-NEXT: norm_softmax_kernels::cpp_fused__softmax_add_1(
    CHECK-SAME: , arg0,
    CHECK-NEXT: foundry_rt::step_done({{[0-9]+}});
    CHECK-NEXT: }
  )") == "");
}

// The activations between the convolutions are channels last (sched/channels_last.h): the pool
// takes a vector of channels per window position, and the mean over the pixels takes a tile of
// channels at a time, in SIMD lanes (cpp_kernel.cpp's lane_var).
TEST_CASE("codegen checks: small_cnn, convolutions as library calls between pooling kernels", "[codegen][fast]") {
  Sources s = emit_sources("small_cnn");
  CHECK(file_check(s.kernels, R"(
    CHECK: // cpp_fused_max_pool2d_with_indices_0: max_pool2d_with_indices (aten.max_pool2d_with_indices)
    CHECK-NEXT: void cpp_fused_max_pool2d_with_indices_0(const float* __restrict__ in_ptr0, float* __restrict__ out_ptr0) {
    CHECK: for (int64_t i2 = 0; i2 < 16; i2 += {{8|16}}) {
    CHECK: foundry_vec::load(in_ptr0 +
    CHECK: foundry_vec::store(out_ptr0 +
    CHECK: // cpp_fused_mean_1: mean (aten.mean.dim)
    CHECK-NEXT: void cpp_fused_mean_1(const float* __restrict__ in_ptr0, float* __restrict__ out_ptr0) {
    CHECK: for (int64_t i1_tile = 0; i1_tile < 32; i1_tile += {{8|16}}) {
    CHECK: #pragma omp simd
    CHECK-NEXT: for (int64_t lane = 0; lane < i1_lanes; ++lane) {
  )") == "");
  CHECK(file_check(s.wrapper, R"(
    CHECK: const auto* arg0 = static_cast<const float*>(inputs[0].data);  // float32[2, 3, 32, 32]
    CHECK-NEXT: static_cast<float*>(outputs[0].data);  // float32[2, 10]
    CHECK: const auto* p_features_9_weight = {{.*}}  // features.9.weight: float32[10, 32]
    CHECK: const auto* p_features_0_weight_bn = {{.*}}  // float32[16, 3, 3, 3]
    CHECK: const auto* p_features_4_weight_bn = {{.*}}  // float32[32, 16, 3, 3]
    CHECK: (arena + {{[0-9]+}});  // float32[2, 16, 32, 32]
    CHECK: small_cnn_externs::call0(model->externs, arg0, p_features_0_weight_bn, p_features_0_bias_bn,
    CHECK: // max_pool2d_with_indices (aten.max_pool2d_with_indices) -> {{buf[0-9]+}} float32[2, 16, 16, 16]
    CHECK-NEXT: small_cnn_kernels::cpp_fused_max_pool2d_with_indices_0(
    CHECK: small_cnn_externs::call1(model->externs,
    CHECK: // mean (aten.mean.dim) -> {{buf[0-9]+}} float32[2, 32, 1, 1]
    CHECK-NEXT: small_cnn_kernels::cpp_fused_mean_1(
    CHECK: small_cnn_externs::call2(model->externs,
    CHECK-NEXT: foundry_rt::step_done({{[0-9]+}});
    CHECK-NEXT: }
  )") == "");
}

TEST_CASE("codegen checks: a bmm operand copied into a layout the call takes is a kernel named as a copy",
          "[codegen][fast]") {
  using namespace foundry;
  Builder b;
  Value* x = b.input("x", {3, 2, 4});
  Value* w = b.input("w", {2, 4, 5});
  // [2, 3, 4] whose rows are 8 floats apart: neither row- nor column-major matrices.
  Value* a = b.op("permute", {pos(x), pos(ints({1, 0, 2}))});
  b.output(b.op("bmm", {pos(a), pos(w)}));
  ir::LoopProgram program = lower::lower_graph(b.g);
  sched::Schedule schedule = sched::schedule_program(program, {});
  codegen::GeneratedModel m = codegen::generate_model(program, schedule, "copy_test");
  CHECK(file_check(m.kernels_cpp, R"(
    CHECK-NOT: bmm_
    CHECK: // cpp_copy_0: {{[a-z_0-9]+}} (aten.bmm)
    CHECK-NEXT: void cpp_copy_0(const float* __restrict__ in_ptr0, float* __restrict__ out_ptr0) {
    CHECK-NOT: bmm_
  )") == "");
  CHECK(file_check(m.wrapper_cpp, R"(
    CHECK: // {{[a-z_0-9]+}} (aten.bmm) -> {{buf[0-9]+}} float32[2, 3, 4]
    CHECK-NEXT: copy_test_kernels::cpp_copy_0(arg0, {{buf[0-9]+}});
    CHECK: copy_test_externs::call0(model->externs,
  )") == "");
}
